//! kubesim through kube-rs: CRUD semantics, conflicts, status isolation, generation, CRDs served
//! at run time, selectors, pagination, patches, server-side apply and dryRun.
#![allow(clippy::expect_used, clippy::unwrap_used)] // tests fail loudly on unexpected values

use std::time::Duration;

use express_api::{Frontend, FrontendSpec, NodeSpec};
use k8s_openapi::api::core::v1::{ConfigMap, Namespace, Pod};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{Api, DeleteParams, ListParams, Patch, PatchParams, PostParams};
use kube::core::ObjectMeta;
use kubesim::{Config, KubeSim};
use serde_json::json;

async fn start() -> (KubeSim, kube::Client) {
    let sim = KubeSim::start(Config::default())
        .await
        .expect("kubesim starts");
    let client = sim.client().expect("client");
    (sim, client)
}

fn config_map(name: &str, data: &[(&str, &str)]) -> ConfigMap {
    ConfigMap {
        metadata: ObjectMeta {
            name: Some(name.into()),
            ..Default::default()
        },
        data: Some(
            data.iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
        ),
        ..Default::default()
    }
}

async fn install_crds(client: &kube::Client) {
    let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
    for crd in express_api::crd::all() {
        crds.create(&PostParams::default(), &crd)
            .await
            .expect("CRD created");
    }
    for crd in express_api::crd::all() {
        let name = crd.metadata.name.clone().unwrap();
        let established = kube::runtime::wait::await_condition(
            crds.clone(),
            &name,
            kube::runtime::wait::conditions::is_crd_established(),
        );
        tokio::time::timeout(Duration::from_secs(5), established)
            .await
            .expect("in time")
            .expect("established");
    }
}

fn frontend(name: &str, version: &str) -> Frontend {
    Frontend::new(
        name,
        FrontendSpec(NodeSpec {
            express_version: Some(version.into()),
            ..NodeSpec::for_cluster("acme")
        }),
    )
}

#[tokio::test]
async fn crud_conflicts_and_no_op_updates() {
    let (sim, client) = start().await;
    let cms: Api<ConfigMap> = Api::namespaced(client.clone(), "default");
    let created = cms
        .create(&PostParams::default(), &config_map("a", &[("k", "1")]))
        .await
        .expect("create");
    assert!(created.metadata.uid.is_some());
    let rv1 = created.metadata.resource_version.clone().expect("rv");

    let err = cms
        .create(&PostParams::default(), &config_map("a", &[]))
        .await
        .expect_err("exists");
    assert!(
        matches!(err, kube::Error::Api(ref s) if s.code == 409 && s.reason == "AlreadyExists"),
        "{err:?}"
    );

    let mut changed = created.clone();
    changed.data = Some([("k".to_string(), "2".to_string())].into());
    let updated = cms
        .replace("a", &PostParams::default(), &changed)
        .await
        .expect("update");
    assert_ne!(
        updated.metadata.resource_version.as_deref(),
        Some(rv1.as_str())
    );
    // The same write again with the old resourceVersion is stale.
    let err = cms
        .replace("a", &PostParams::default(), &changed)
        .await
        .expect_err("stale");
    assert!(
        matches!(err, kube::Error::Api(ref s) if s.code == 409 && s.reason == "Conflict"),
        "{err:?}"
    );

    // A write that changes nothing does not bump resourceVersion.
    let before = sim.resource_version();
    let same = cms
        .replace("a", &PostParams::default(), &updated)
        .await
        .expect("no-op");
    assert_eq!(
        same.metadata.resource_version,
        updated.metadata.resource_version
    );
    assert_eq!(sim.resource_version(), before);

    let err = cms.get("missing").await.expect_err("404");
    assert!(
        matches!(err, kube::Error::Api(ref s) if s.code == 404 && s.reason == "NotFound" && s.message.contains("\"missing\" not found")),
        "{err:?}"
    );

    let other: Api<ConfigMap> = Api::namespaced(client.clone(), "nope");
    let err = other
        .create(&PostParams::default(), &config_map("x", &[]))
        .await
        .expect_err("no namespace");
    assert!(
        matches!(err, kube::Error::Api(ref s) if s.code == 404),
        "{err:?}"
    );

    cms.delete("a", &DeleteParams::default())
        .await
        .expect("delete");
    assert!(cms.get_opt("a").await.expect("get").is_none());
    assert_eq!(sim.counters().count("create", "configmaps"), 3);
}

#[tokio::test]
async fn selectors_and_pagination() {
    let (_sim, client) = start().await;
    let cms: Api<ConfigMap> = Api::namespaced(client.clone(), "default");
    for i in 0..7 {
        let mut cm = config_map(&format!("cm-{i}"), &[]);
        cm.metadata.labels = Some(
            [(
                "parity".to_string(),
                if i % 2 == 0 { "even" } else { "odd" }.to_string(),
            )]
            .into(),
        );
        cms.create(&PostParams::default(), &cm)
            .await
            .expect("create");
    }
    let even = cms
        .list(&ListParams::default().labels("parity=even"))
        .await
        .expect("list");
    assert_eq!(even.items.len(), 4);
    assert!(
        even.metadata
            .resource_version
            .is_some_and(|rv| !rv.is_empty())
    );
    let named = cms
        .list(&ListParams::default().fields("metadata.name=cm-3"))
        .await
        .expect("list");
    assert_eq!(named.items.len(), 1);

    let mut seen = Vec::new();
    let mut params = ListParams::default().limit(3);
    loop {
        let page = cms.list(&params).await.expect("page");
        assert!(page.items.len() <= 3);
        seen.extend(page.items.iter().filter_map(|c| c.metadata.name.clone()));
        match page.metadata.continue_ {
            Some(token) if !token.is_empty() => params = params.continue_token(&token),
            _ => break,
        }
    }
    assert_eq!(seen, (0..7).map(|i| format!("cm-{i}")).collect::<Vec<_>>());
}

/// Every page of a list reports the first page's revision, so that a watch from the last page
/// sees what changed while the pages were read: here a ConfigMap changed after the page that
/// listed it, and one created before the cursor.
#[tokio::test]
async fn a_watch_from_a_paged_lists_revision_sees_what_changed_between_the_pages() {
    let (_sim, client) = start().await;
    let cms: Api<ConfigMap> = Api::namespaced(client.clone(), "default");
    for i in 0..5 {
        cms.create(
            &PostParams::default(),
            &config_map(&format!("cm-{i}"), &[("v", "1")]),
        )
        .await
        .expect("create");
    }
    let first = cms
        .list(&ListParams::default().limit(2))
        .await
        .expect("page 1");
    let began = first.metadata.resource_version.clone().expect("a revision");
    // Between the pages: cm-0 (already listed) changes; cm-00 is created behind the cursor.
    cms.patch(
        "cm-0",
        &PatchParams::default(),
        &Patch::Merge(json!({"data": {"v": "2"}})),
    )
    .await
    .expect("patch");
    cms.create(&PostParams::default(), &config_map("cm-00", &[("v", "1")]))
        .await
        .expect("create");
    let mut params = ListParams::default().limit(2);
    let mut last = first;
    while let Some(token) = last.metadata.continue_.clone().filter(|t| !t.is_empty()) {
        params = params.continue_token(&token);
        last = cms.list(&params).await.expect("next page");
        assert_eq!(
            last.metadata.resource_version.as_deref(),
            Some(began.as_str()),
            "a later page reports the first page's revision"
        );
    }

    let events = cms
        .watch(&kube::api::WatchParams::default().timeout(1), &began)
        .await
        .expect("watch");
    let seen: Vec<(String, String)> = tokio::time::timeout(
        Duration::from_secs(5),
        futures::TryStreamExt::try_collect::<Vec<_>>(events),
    )
    .await
    .expect("the watch ends at its timeout")
    .expect("events")
    .into_iter()
    .filter_map(|event| match event {
        kube::api::WatchEvent::Added(cm) => Some(("added".into(), cm.metadata.name?)),
        kube::api::WatchEvent::Modified(cm) => Some(("modified".into(), cm.metadata.name?)),
        _ => None,
    })
    .collect();
    assert_eq!(
        seen,
        [
            ("modified".to_string(), "cm-0".to_string()),
            ("added".to_string(), "cm-00".to_string())
        ]
    );
}

#[tokio::test]
async fn a_continue_token_from_before_a_compaction_is_expired() {
    let (sim, client) = start().await;
    let cms: Api<ConfigMap> = Api::namespaced(client.clone(), "default");
    for i in 0..5 {
        let cm: ConfigMap =
            serde_json::from_value(json!({"metadata": {"name": format!("cm-{i}")}}))
                .expect("configmap");
        cms.create(&PostParams::default(), &cm)
            .await
            .expect("create");
    }
    let first = cms
        .list(&ListParams::default().limit(2))
        .await
        .expect("page 1");
    let token = first.metadata.continue_.clone().expect("a continue token");
    // Still good without a compaction, writes or not.
    let second = cms
        .list(&ListParams::default().limit(2).continue_token(&token))
        .await
        .expect("page 2");
    assert_eq!(second.items.len(), 2);
    // The store moves on and is compacted past the list's revision.
    let later: ConfigMap =
        serde_json::from_value(json!({"metadata": {"name": "cm-later"}})).expect("configmap");
    cms.create(&PostParams::default(), &later)
        .await
        .expect("create");
    sim.compact();
    let going_on = match cms
        .list(&ListParams::default().limit(2).continue_token(&token))
        .await
    {
        Err(kube::Error::Api(status)) => {
            assert_eq!(
                (status.code, status.reason.as_str()),
                (410, "Expired"),
                "{status:?}"
            );
            assert!(
                status
                    .message
                    .contains("or use the continue token in this response"),
                "{status:?}"
            );
            status
                .metadata
                .and_then(|meta| meta.continue_)
                .expect("a token to go on with, as the API server gives")
        }
        other => panic!("a token from before the compaction: {other:?}"),
    };
    // That token goes on after the last object listed, at the latest revision.
    let rest = cms
        .list(&ListParams::default().limit(2).continue_token(&going_on))
        .await
        .expect("the rest");
    let names = |list: &kube::core::ObjectList<ConfigMap>| -> Vec<String> {
        list.items
            .iter()
            .filter_map(|cm| cm.metadata.name.clone())
            .collect()
    };
    assert_eq!(names(&rest), ["cm-2", "cm-3"]);
    let revision = |list: &kube::core::ObjectList<ConfigMap>| {
        list.metadata
            .resource_version
            .as_deref()
            .and_then(|rv| rv.parse::<u64>().ok())
    };
    assert!(
        revision(&rest) > revision(&first),
        "read at the latest revision, not the first page's: {:?}",
        rest.metadata
    );
    let last = cms
        .list(
            &ListParams::default()
                .limit(2)
                .continue_token(rest.metadata.continue_.as_deref().expect("more")),
        )
        .await
        .expect("the last page");
    assert_eq!(names(&last), ["cm-4", "cm-later"]);
    // A new list starts over, and its own tokens work.
    let again = cms
        .list(&ListParams::default().limit(2))
        .await
        .expect("new list");
    let next = again.metadata.continue_.expect("a new token");
    assert!(
        cms.list(&ListParams::default().limit(2).continue_token(&next))
            .await
            .is_ok()
    );
}

#[tokio::test]
async fn crds_become_served_with_status_isolation_and_generation() {
    let (_sim, client) = start().await;
    install_crds(&client).await;
    let frontends: Api<Frontend> = Api::namespaced(client.clone(), "default");
    let created = frontends
        .create(&PostParams::default(), &frontend("acme-fe1", "v1"))
        .await
        .expect("create");
    assert_eq!(created.metadata.generation, Some(1));

    // Status through the main resource is ignored; through /status it lands, and does not
    // change generation.
    let status = json!({"status": {"phase": "Ready", "ready": true}});
    let main = frontends
        .patch("acme-fe1", &PatchParams::default(), &Patch::Merge(&status))
        .await
        .expect("patch");
    assert!(main.status.is_none());
    let with_status = frontends
        .patch_status("acme-fe1", &PatchParams::default(), &Patch::Merge(&status))
        .await
        .expect("status");
    assert_eq!(
        with_status.status.as_ref().and_then(|s| s.ready),
        Some(true)
    );
    assert_eq!(with_status.metadata.generation, Some(1));

    // Labels do not change generation; the spec does.
    let labelled = frontends
        .patch(
            "acme-fe1",
            &PatchParams::default(),
            &Patch::Merge(json!({"metadata": {"labels": {"x": "y"}}})),
        )
        .await
        .expect("label");
    assert_eq!(labelled.metadata.generation, Some(1));
    let respec = frontends
        .patch(
            "acme-fe1",
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"expressVersion": "v2"}})),
        )
        .await
        .expect("spec");
    assert_eq!(respec.metadata.generation, Some(2));
    // Status writes ignore spec.
    let sneaky = frontends
        .patch_status(
            "acme-fe1",
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"expressVersion": "v9"}, "status": {"phase": "Down"}})),
        )
        .await
        .expect("status");
    assert_eq!(sneaky.spec.express_version.as_deref(), Some("v2"));

    // Strategic merge is refused for custom resources.
    let err = frontends
        .patch(
            "acme-fe1",
            &PatchParams::default(),
            &Patch::Strategic(json!({"spec": {"up": false}})),
        )
        .await
        .expect_err("415");
    assert!(
        matches!(err, kube::Error::Api(ref s) if s.code == 415),
        "{err:?}"
    );

    // JSON patch with a failing test changes nothing.
    let guarded = json_patch::Patch(
        serde_json::from_value(json!([
            {"op": "test", "path": "/spec/expressVersion", "value": "v1"},
            {"op": "replace", "path": "/spec/expressVersion", "value": "v3"}
        ]))
        .unwrap(),
    );
    assert!(
        frontends
            .patch(
                "acme-fe1",
                &PatchParams::default(),
                &Patch::<()>::Json(guarded)
            )
            .await
            .is_err()
    );
    assert_eq!(
        frontends
            .get("acme-fe1")
            .await
            .expect("get")
            .spec
            .express_version
            .as_deref(),
        Some("v2")
    );
}

#[tokio::test]
async fn server_side_apply_tracks_managers_and_conflicts() {
    let (_sim, client) = start().await;
    let cms: Api<ConfigMap> = Api::namespaced(client.clone(), "default");
    let alice = PatchParams::apply("alice");
    let applied = cms
        .patch("shared", &alice, &Patch::Apply(json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "shared"}, "data": {"a": "1", "b": "1"}})))
        .await
        .expect("apply creates");
    let managers: Vec<String> = applied
        .metadata
        .managed_fields
        .unwrap_or_default()
        .iter()
        .filter_map(|m| m.manager.clone())
        .collect();
    assert_eq!(managers, ["alice"]);

    // Bob setting alice's field to another value conflicts; forced, he takes it over.
    let bob = PatchParams::apply("bob");
    let err = cms
        .patch("shared", &bob, &Patch::Apply(json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "shared"}, "data": {"a": "2"}})))
        .await
        .expect_err("conflict");
    assert!(
        matches!(err, kube::Error::Api(ref s) if s.code == 409 && s.message.contains("alice")),
        "{err:?}"
    );
    let forced = cms
        .patch("shared", &bob.clone().force(), &Patch::Apply(json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "shared"}, "data": {"a": "2"}})))
        .await
        .expect("forced");
    assert_eq!(
        forced
            .data
            .as_ref()
            .and_then(|d| d.get("a"))
            .map(String::as_str),
        Some("2")
    );

    // Alice stops applying b: it is removed (nobody else owns it).
    let shrunk = cms
        .patch("shared", &alice, &Patch::Apply(json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "shared"}, "data": {}})))
        .await
        .expect("apply");
    let data = shrunk.data.unwrap_or_default();
    assert_eq!(data.get("b"), None);
    assert_eq!(
        data.get("a").map(String::as_str),
        Some("2"),
        "bob's field stays"
    );
}

#[tokio::test]
async fn dry_run_changes_nothing() {
    let (sim, client) = start().await;
    let cms: Api<ConfigMap> = Api::namespaced(client.clone(), "default");
    let before = sim.resource_version();
    let pretend = cms
        .create(
            &PostParams {
                dry_run: true,
                ..Default::default()
            },
            &config_map("dry", &[]),
        )
        .await
        .expect("dry create");
    assert_eq!(pretend.metadata.name.as_deref(), Some("dry"));
    assert!(cms.get_opt("dry").await.expect("get").is_none());
    assert_eq!(sim.resource_version(), before);
}

#[tokio::test]
async fn finalizers_hold_deletion_until_removed() {
    let (_sim, client) = start().await;
    let cms: Api<ConfigMap> = Api::namespaced(client.clone(), "default");
    let mut cm = config_map("held", &[]);
    cm.metadata.finalizers = Some(vec!["example.com/hold".into()]);
    cms.create(&PostParams::default(), &cm)
        .await
        .expect("create");
    cms.delete("held", &DeleteParams::default())
        .await
        .expect("delete accepted");
    let terminating = cms.get("held").await.expect("still there");
    assert!(terminating.metadata.deletion_timestamp.is_some());
    cms.patch(
        "held",
        &PatchParams::default(),
        &Patch::Merge(json!({"metadata": {"finalizers": null}})),
    )
    .await
    .expect("release");
    assert!(cms.get_opt("held").await.expect("get").is_none());
    let namespaces: Api<Namespace> = Api::all(client.clone());
    assert!(namespaces.get("default").await.is_ok());
    let pods: Api<Pod> = Api::namespaced(client, "default");
    assert!(
        pods.list(&ListParams::default())
            .await
            .expect("pods")
            .items
            .is_empty()
    );
}

/// Events are stored once and served through both APIs: one published the way the operator
/// publishes (kube's Recorder, `events.k8s.io/v1`, then a series patch) reads as a core event
/// that `kubectl describe`'s field selector finds; one written as a core event reads through
/// `events.k8s.io/v1` with `regarding` and `note`.
#[tokio::test]
async fn one_event_store_serves_both_event_apis() {
    use k8s_openapi::api::core::v1::{Event as CoreEvent, ObjectReference};
    use k8s_openapi::api::events::v1::Event as NewEvent;
    use kube::runtime::events::{Event, EventType, Recorder, Reporter};

    let (_sim, client) = start().await;
    let namespaces: Api<Namespace> = Api::all(client.clone());
    let namespace = Namespace {
        metadata: ObjectMeta {
            name: Some("tenant-acme".into()),
            ..Default::default()
        },
        ..Default::default()
    };
    namespaces
        .create(&PostParams::default(), &namespace)
        .await
        .unwrap();
    let regarding = ObjectReference {
        api_version: Some("express.dev/v1alpha1".into()),
        kind: Some("Frontend".into()),
        name: Some("acme-fe2".into()),
        namespace: Some("tenant-acme".into()),
        uid: Some("uid-fe2".into()),
        ..Default::default()
    };
    let recorder = Recorder::new(
        client.clone(),
        Reporter {
            controller: "express-operator".into(),
            instance: Some("express-operator-0".into()),
        },
    );
    let event = Event {
        type_: EventType::Normal,
        reason: "NodeUpgradeStarted".into(),
        note: Some("upgrading acme-fe2".into()),
        action: "Upgrade".into(),
        secondary: None,
    };
    // The second identical event becomes a series: kube's Recorder patches the first.
    recorder.publish(&event, &regarding).await.unwrap();
    recorder.publish(&event, &regarding).await.unwrap();

    let core: Api<CoreEvent> = Api::namespaced(client.clone(), "tenant-acme");
    let selector = "involvedObject.name=acme-fe2,involvedObject.namespace=tenant-acme,\
                    involvedObject.kind=Frontend,involvedObject.uid=uid-fe2";
    let found = core
        .list(&ListParams::default().fields(selector))
        .await
        .unwrap();
    assert_eq!(found.items.len(), 1, "{found:?}");
    let seen = &found.items[0];
    assert_eq!(seen.message.as_deref(), Some("upgrading acme-fe2"));
    assert_eq!(seen.reason.as_deref(), Some("NodeUpgradeStarted"));
    assert_eq!(seen.count, Some(2), "the series count is the legacy count");
    assert_eq!(
        seen.source.as_ref().and_then(|s| s.component.as_deref()),
        Some("express-operator")
    );
    assert_eq!(
        seen.reporting_component.as_deref(),
        Some("express-operator")
    );
    assert!(seen.last_timestamp.is_some() && seen.first_timestamp.is_some());
    let other = core
        .list(&ListParams::default().fields("involvedObject.name=acme-fe3"))
        .await
        .unwrap();
    assert!(other.items.is_empty());

    let kubelet_event = CoreEvent {
        metadata: ObjectMeta {
            name: Some("acme-fe2-pod.1".into()),
            ..Default::default()
        },
        involved_object: ObjectReference {
            kind: Some("Pod".into()),
            name: Some("acme-fe2".into()),
            namespace: Some("tenant-acme".into()),
            ..Default::default()
        },
        reason: Some("Pulled".into()),
        message: Some("image pulled".into()),
        type_: Some("Normal".into()),
        count: Some(3),
        ..Default::default()
    };
    core.create(&PostParams::default(), &kubelet_event)
        .await
        .unwrap();
    let new: Api<NewEvent> = Api::namespaced(client.clone(), "tenant-acme");
    let pulled = new.get("acme-fe2-pod.1").await.unwrap();
    assert_eq!(
        pulled.regarding.as_ref().and_then(|r| r.kind.as_deref()),
        Some("Pod")
    );
    assert_eq!(pulled.note.as_deref(), Some("image pulled"));
    assert_eq!(pulled.deprecated_count, Some(3));
    let by_regarding = new
        .list(&ListParams::default().fields("regarding.kind=Pod"))
        .await
        .unwrap();
    assert_eq!(by_regarding.items.len(), 1);
    assert_eq!(
        new.list(&ListParams::default()).await.unwrap().items.len(),
        2
    );
    assert_eq!(
        core.list(&ListParams::default()).await.unwrap().items.len(),
        2
    );
}

/// Custom resources are held to their schema: a server-side apply of an invalid Frontend gets
/// 422 with a cause per field; unknown fields are refused under `fieldValidation=Strict` and
/// pruned under `Ignore`; schema defaults are filled.
#[tokio::test]
async fn custom_resources_are_pruned_defaulted_and_validated_against_their_schema() {
    use kube::api::ValidationDirective;

    let (_sim, client) = start().await;
    install_crds(&client).await;
    let frontends: Api<Frontend> = Api::namespaced(client.clone(), "default");
    let manifest = |spec: serde_json::Value| {
        json!({"apiVersion": "express.dev/v1alpha1", "kind": "Frontend",
               "metadata": {"name": "acme-fe1"}, "spec": spec})
    };
    let cluster_config = json!({"clusterName": "acme"});

    let err = frontends
        .patch(
            "acme-fe1",
            &PatchParams::apply("tenant-chart"),
            &Patch::Apply(manifest(
                json!({"clusterConfig": {"clusterName": ""}, "up": "yes"}),
            )),
        )
        .await
        .expect_err("invalid");
    let kube::Error::Api(status) = err else {
        panic!("{err:?}")
    };
    assert_eq!((status.code, status.reason.as_str()), (422, "Invalid"));
    let causes: Vec<(String, String)> = status
        .details
        .expect("details")
        .causes
        .into_iter()
        .map(|c| (c.field, c.reason))
        .collect();
    // An empty clusterName breaks both minLength and the label-value pattern: the API server
    // lists every rule a field breaks.
    let cluster_name = (
        "spec.clusterConfig.clusterName".to_owned(),
        "FieldValueInvalid".to_owned(),
    );
    assert_eq!(
        causes,
        [
            cluster_name.clone(),
            cluster_name,
            ("spec.up".to_owned(), "FieldValueTypeInvalid".to_owned()),
        ]
    );
    assert!(frontends.get_opt("acme-fe1").await.unwrap().is_none());

    let mut strict = PatchParams::apply("tenant-chart");
    strict.field_validation = Some(ValidationDirective::Strict);
    let err = frontends
        .patch(
            "acme-fe1",
            &strict,
            &Patch::Apply(manifest(
                json!({"clusterConfig": cluster_config, "tpyo": 1}),
            )),
        )
        .await
        .expect_err("strict");
    assert!(
        matches!(&err, kube::Error::Api(s) if s.code == 400 && s.message.contains("unknown field \"spec.tpyo\"")),
        "{err:?}"
    );

    let mut ignore = PatchParams::apply("tenant-chart");
    ignore.field_validation = Some(ValidationDirective::Ignore);
    let applied = frontends
        .patch(
            "acme-fe1",
            &ignore,
            &Patch::Apply(manifest(
                json!({"clusterConfig": cluster_config, "tpyo": 1}),
            )),
        )
        .await
        .expect("pruned, not refused");
    let raw: Api<kube::api::DynamicObject> = Api::namespaced_with(
        client.clone(),
        "default",
        &kube::api::ApiResource::erase::<Frontend>(&()),
    );
    let stored = raw.get("acme-fe1").await.unwrap();
    assert_eq!(stored.data["spec"].get("tpyo"), None, "pruned");
    assert_eq!(stored.data["spec"]["up"], json!(true), "defaulted");
    assert_eq!(applied.metadata.generation, Some(1));

    // A later write that leaves a defaulted field out changes nothing, so no new generation.
    let again = frontends
        .patch(
            "acme-fe1",
            &PatchParams::apply("tenant-chart"),
            &Patch::Apply(manifest(json!({"clusterConfig": cluster_config}))),
        )
        .await
        .unwrap();
    assert_eq!(again.metadata.generation, Some(1));
}

/// Label keys and values are checked as the API server checks them, on every kind and every
/// write: a pod the operator would label with a 64-character name is refused with 422.
#[tokio::test]
async fn labels_the_api_server_refuses_are_refused() {
    let (_sim, client) = start().await;
    let maps: Api<ConfigMap> = Api::namespaced(client.clone(), "default");
    let with_labels = |name: &str, labels: serde_json::Value| -> ConfigMap {
        serde_json::from_value(json!({"metadata": {"name": name, "labels": labels}}))
            .expect("configmap")
    };
    let refused = |result: Result<ConfigMap, kube::Error>| match result {
        Err(kube::Error::Api(status)) => (status.code, status.message),
        other => panic!("not refused: {other:?}"),
    };
    let (code, message) = refused(
        maps.create(
            &PostParams::default(),
            &with_labels("long", json!({"express.dev/node": "x".repeat(64)})),
        )
        .await,
    );
    assert_eq!(code, 422);
    assert!(
        message.contains("must be no more than 63 characters"),
        "{message}"
    );
    let (code, message) = refused(
        maps.create(
            &PostParams::default(),
            &with_labels("spaces", json!({"team": "sre ops"})),
        )
        .await,
    );
    assert_eq!(code, 422);
    assert!(
        message.contains("a valid label must be an empty string"),
        "{message}"
    );
    let (code, message) = refused(
        maps.create(
            &PostParams::default(),
            &with_labels("key", json!({"Bad.Prefix/x": "v"})),
        )
        .await,
    );
    assert_eq!(code, 422);
    assert!(message.contains("prefix part"), "{message}");
    // Valid labels (empty values included) pass, and a patch is checked too.
    maps.create(
        &PostParams::default(),
        &with_labels("fine", json!({"express.dev/cluster": "acme", "empty": ""})),
    )
    .await
    .expect("valid labels");
    let (code, _) = refused(
        maps.patch(
            "fine",
            &PatchParams::default(),
            &Patch::Merge(json!({"metadata": {"labels": {"express.dev/cluster": "-acme"}}})),
        )
        .await,
    );
    assert_eq!(code, 422);
}

/// What the API server's decoder refuses is refused here too, and nothing of it is stored.
#[tokio::test]
async fn bodies_the_api_server_cannot_decode_are_refused() {
    let (_sim, client) = start().await;
    install_crds(&client).await;
    let raw = |group: &str, version: &str, kind: &str, plural: &str| {
        let resource = kube::core::ApiResource {
            group: group.into(),
            version: version.into(),
            api_version: if group.is_empty() {
                version.into()
            } else {
                format!("{group}/{version}")
            },
            kind: kind.into(),
            plural: plural.into(),
        };
        Api::<kube::api::DynamicObject>::namespaced_with(client.clone(), "default", &resource)
    };
    let object = |value: serde_json::Value| -> kube::api::DynamicObject {
        serde_json::from_value(value).expect("object")
    };
    let status = |result: Result<kube::api::DynamicObject, kube::Error>| match result {
        Err(kube::Error::Api(status)) => (status.code, status.message),
        other => panic!("not refused: {other:?}"),
    };
    let frontends = raw("express.dev", "v1alpha1", "Frontend", "frontends");

    // An API version the CRD does not serve.
    let (code, message) = status(
        frontends
            .create(
                &PostParams::default(),
                &object(json!({"apiVersion": "express.dev/v9", "kind": "Frontend",
                    "metadata": {"name": "acme-fe1"},
                    "spec": {"clusterConfig": {"clusterName": "acme"}}})),
            )
            .await,
    );
    assert_eq!(code, 400);
    assert!(message.contains("express.dev/v9") && message.contains("express.dev/v1alpha1"));

    // A ConfigMap whose data is not strings.
    let maps = raw("", "v1", "ConfigMap", "configmaps");
    let (code, message) = status(
        maps.create(
            &PostParams::default(),
            &object(json!({"apiVersion": "v1", "kind": "ConfigMap",
                "metadata": {"name": "flags"}, "data": {"x": true}})),
        )
        .await,
    );
    assert_eq!(code, 400);
    assert!(message.contains("data.x"), "{message}");

    // A custom resource is never replaced without a resourceVersion; a ConfigMap may be.
    let created = frontends
        .create(
            &PostParams::default(),
            &object(
                json!({"apiVersion": "express.dev/v1alpha1", "kind": "Frontend",
                "metadata": {"name": "acme-fe1"},
                "spec": {"clusterConfig": {"clusterName": "acme"}}}),
            ),
        )
        .await
        .expect("valid frontend");
    let mut unconditional = created.clone();
    unconditional.metadata.resource_version = None;
    let (code, message) = status(
        frontends
            .replace("acme-fe1", &PostParams::default(), &unconditional)
            .await,
    );
    assert_eq!(code, 422);
    assert!(
        message.contains("must be specified for an update"),
        "{message}"
    );
    frontends
        .replace("acme-fe1", &PostParams::default(), &created)
        .await
        .expect("with its resourceVersion");
    maps.create(
        &PostParams::default(),
        &object(json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "flags"}})),
    )
    .await
    .expect("configmap");
    maps.replace(
        "flags",
        &PostParams::default(),
        &object(
            json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "flags"},
            "data": {"x": "1"}}),
        ),
    )
    .await
    .expect("built-in kinds may be replaced unconditionally");

    // The name and namespace in the body must be the URL's; the kind must be the resource's.
    let mut renamed = created.clone();
    renamed.metadata.name = Some("acme-fe2".into());
    let (code, _) = status(
        frontends
            .replace("acme-fe1", &PostParams::default(), &renamed)
            .await,
    );
    assert_eq!(code, 400);
    let mut moved = created.clone();
    moved.metadata.namespace = Some("kube-system".into());
    let (code, message) = status(
        frontends
            .replace("acme-fe1", &PostParams::default(), &moved)
            .await,
    );
    assert_eq!(code, 400);
    assert!(message.contains("namespace"), "{message}");
    let (code, _) = status(
        frontends
            .create(
                &PostParams::default(),
                &object(
                    json!({"apiVersion": "express.dev/v1alpha1", "kind": "Backend",
                    "metadata": {"name": "acme-be"},
                    "spec": {"clusterConfig": {"clusterName": "acme"}}}),
                ),
            )
            .await,
    );
    assert_eq!(code, 400);
    // Nothing refused was stored.
    let names: Vec<String> = maps
        .list(&ListParams::default())
        .await
        .expect("list")
        .items
        .into_iter()
        .filter_map(|m| m.metadata.name)
        .collect();
    assert_eq!(names, ["flags"]);
}

#[tokio::test]
async fn a_write_stop_refuses_one_clients_writes_after_n_and_counts_namespaces() {
    let (sim, other) = start().await;
    let stopped = sim
        .client_with_agent_without_retries("stopped-one")
        .expect("client");
    for ns in ["a", "b"] {
        Api::<Namespace>::all(other.clone())
            .create(
                &PostParams::default(),
                &serde_json::from_value(json!({"metadata": {"name": ns}})).unwrap(),
            )
            .await
            .expect("namespace");
    }
    sim.faults().stop_writes_after("stopped-one", 2);
    let in_a = Api::<ConfigMap>::namespaced(stopped.clone(), "a");
    in_a.create(&PostParams::default(), &config_map("one", &[]))
        .await
        .expect("first write passes");
    Api::<ConfigMap>::namespaced(stopped.clone(), "b")
        .create(&PostParams::default(), &config_map("two", &[]))
        .await
        .expect("second write passes");
    let refusals = sim.faults().refusals();
    let refused = in_a
        .create(&PostParams::default(), &config_map("three", &[]))
        .await
        .expect_err("the third is refused");
    assert!(
        matches!(&refused, kube::Error::Api(s) if s.code == 503),
        "{refused}"
    );
    assert!(refusals.has_changed().unwrap(), "the refusal is signalled");
    in_a.get("one").await.expect("reads still pass");
    Api::<ConfigMap>::namespaced(other.clone(), "a")
        .create(&PostParams::default(), &config_map("others", &[]))
        .await
        .expect("another client still writes");
    let stop = sim.faults().write_stop("stopped-one").expect("stop set");
    assert_eq!((stop.remaining, stop.refused), (0, 1));
    assert!(
        in_a.get_opt("three").await.unwrap().is_none(),
        "nothing stored"
    );
    sim.faults().lift_write_stop("stopped-one");
    in_a.create(&PostParams::default(), &config_map("three", &[]))
        .await
        .expect("writes again once lifted");

    Api::<ConfigMap>::all(stopped.clone())
        .list(&ListParams::default())
        .await
        .expect("list");
    let counters = sim.counters();
    let namespaces = &counters.by_agent_namespace["stopped-one"];
    let seen = |call: &str| -> Vec<(String, u64)> {
        namespaces[call]
            .iter()
            .map(|(ns, n)| (ns.clone(), *n))
            .collect()
    };
    assert_eq!(
        seen("create configmaps"),
        [("a".to_string(), 3), ("b".to_string(), 1)]
    );
    assert_eq!(
        seen("list configmaps"),
        [(String::new(), 1)],
        "a cluster-wide call is counted under \"\""
    );
}

#[tokio::test]
async fn a_secrets_string_data_is_stored_as_data_on_create_and_update() {
    use k8s_openapi::api::core::v1::Secret;
    let (_sim, client) = start().await;
    let secrets: Api<Secret> = Api::namespaced(client, "default");
    let secret: Secret = serde_json::from_value(json!({
        "metadata": {"name": "keys"},
        "data": {"kept": "a2VwdA==", "over": "b2xk"},
        "stringData": {"over": "new", "plain": "text"},
    }))
    .unwrap();
    secrets
        .create(&PostParams::default(), &secret)
        .await
        .unwrap();
    let stored = secrets.get("keys").await.unwrap();
    let data = stored.data.clone().unwrap();
    let text = |key: &str| String::from_utf8(data[key].0.clone()).unwrap();
    assert_eq!(
        (text("kept"), text("over"), text("plain")),
        ("kept".into(), "new".into(), "text".into())
    );
    assert!(stored.string_data.is_none());
    secrets
        .patch(
            "keys",
            &PatchParams::default(),
            &Patch::Merge(json!({"stringData": {"plain": "changed"}})),
        )
        .await
        .unwrap();
    let patched = secrets.get("keys").await.unwrap().data.unwrap();
    assert_eq!(patched["plain"].0, b"changed");
    assert_eq!(patched["kept"].0, b"kept");
}
