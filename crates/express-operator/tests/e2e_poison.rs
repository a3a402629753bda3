//! One object the operator cannot decode never stops the fleet (the failure model in
//! docs/decisions/what-happens-when-things-fail.md).
//! Each test stores one such object the way it happens for real (written
//! under a looser CRD that was then restored, or a status a newer build wrote), starts the real
//! controller, and checks through the API that another tenant, in another namespace, is
//! provisioned, that the odd tenant's readable nodes go on where the order allows, and that the
//! odd tenant reports the object (condition, Warning event, metric).
#![allow(clippy::expect_used, clippy::unwrap_used)] // tests fail loudly on unexpected values

mod support;

use std::time::{Duration, Instant};

use express_api::{Backend, ExpressCluster, Frontend};
use express_operator::metrics::Metrics;
use k8s_openapi::api::core::v1::{Event, Pod};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{Api, DynamicObject, ListParams, Patch, PatchParams, PostParams};
use kube::core::ApiResource;
use serde_json::{Value, json};
use support::*;

const OTHER: &str = "other";

/// Waits (up to 30 s) until `check` holds, saying what it waited for otherwise.
async fn eventually<F, Fut>(what: &str, mut check: F)
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = bool>,
{
    let deadline = Instant::now() + Duration::from_secs(30);
    while !check().await {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// Runs `write` while the CRD of `plural` accepts anything, then restores the real CRD: what
/// was written stays stored as it is (the API server never re-validates stored objects).
async fn under_a_looser_crd<F, Fut>(client: &kube::Client, plural: &str, write: F)
where
    F: FnOnce() -> Fut,
    Fut: std::future::Future<Output = ()>,
{
    let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
    let name = format!("{plural}.express.dev");
    let real = crds.get(&name).await.expect("crd");
    let mut loose = real.clone();
    for version in &mut loose.spec.versions {
        version.schema = Some(
            serde_json::from_value(json!({"openAPIV3Schema": {
                "type": "object", "x-kubernetes-preserve-unknown-fields": true
            }}))
            .expect("schema"),
        );
    }
    crds.replace(&name, &PostParams::default(), &loose)
        .await
        .expect("loosen");
    write().await;
    let mut restored = crds.get(&name).await.expect("crd");
    restored.spec = real.spec;
    crds.replace(&name, &PostParams::default(), &restored)
        .await
        .expect("restore");
}

fn dynamic(kind: &str, plural: &str, version: &str, group: &str) -> ApiResource {
    ApiResource {
        group: group.into(),
        version: version.into(),
        api_version: if group.is_empty() {
            version.into()
        } else {
            format!("{group}/{version}")
        },
        kind: kind.into(),
        plural: plural.into(),
    }
}

/// Stores a built-in object whose fields this build's types refuse. The API server refuses to
/// write such an object itself, so kubesim plants it as storage written by another version
/// would hold it.
fn plant(env: &Env, resource: &ApiResource, object: Value) {
    env.sim
        .store_unchecked(
            (&resource.group, &resource.version, &resource.plural),
            NS,
            object,
        )
        .expect("planted");
}

/// Tenant `globex` (namespace `other`): an ExpressCluster, a Backend and one Frontend.
async fn other_tenant(client: &kube::Client) {
    express_operator::install::create_namespace(client, OTHER)
        .await
        .expect("namespace");
    let spec = json!({"defaults": {"backend": {"expressVersion": "v1"}, "frontend": {"expressVersion": "v1"}},
                      "rollout": {"settleSeconds": 0}});
    let cluster: ExpressCluster = serde_json::from_value(json!({
        "apiVersion": "express.dev/v1alpha1", "kind": "ExpressCluster",
        "metadata": {"name": "globex", "namespace": OTHER}, "spec": spec,
    }))
    .expect("cluster");
    Api::<ExpressCluster>::namespaced(client.clone(), OTHER)
        .create(&PostParams::default(), &cluster)
        .await
        .expect("cluster");
    for (kind, name) in [("Backend", "globex-be"), ("Frontend", "globex-fe1")] {
        let object = json!({"apiVersion": "express.dev/v1alpha1", "kind": kind,
            "metadata": {"name": name, "namespace": OTHER},
            "spec": {"clusterConfig": {"clusterName": "globex"}}});
        let resource = dynamic(
            kind,
            &format!("{}s", kind.to_lowercase()),
            "v1alpha1",
            "express.dev",
        );
        let object: DynamicObject = serde_json::from_value(object).expect("node");
        Api::<DynamicObject>::namespaced_with(client.clone(), OTHER, &resource)
            .create(&PostParams::default(), &object)
            .await
            .expect("node");
    }
}

/// The operator, with its metrics, on a cluster holding the poisoned object (written by
/// `poison` before the operator starts), the odd tenant `acme` (be, fe1, fe2, fe3 in `tenant`)
/// and the valid tenant `globex`.
async fn run_with(poison: impl AsyncFnOnce(&Env)) -> (Env, std::sync::Arc<Metrics>) {
    let env = env_without_operator().await;
    tenant(
        &env,
        json!({}),
        &[("fe1", json!({})), ("fe2", json!({})), ("fe3", json!({}))],
    )
    .await;
    poison(&env).await;
    let metrics = Metrics::new();
    operator_with_metrics(
        &env.client,
        "e2e",
        tokio::sync::watch::channel(true).1,
        metrics.clone(),
    );
    other_tenant(&env.client).await;
    (env, metrics)
}

/// The names of the Express pods of a namespace (read untyped: one test stores a pod the
/// typed client cannot read either).
async fn pod_names(client: &kube::Client, namespace: &str) -> Vec<String> {
    let pods = ApiResource::erase::<Pod>(&());
    let mut names: Vec<String> =
        Api::<DynamicObject>::namespaced_with(client.clone(), namespace, &pods)
            .list(&ListParams::default().labels("express.dev/cluster"))
            .await
            .expect("pods")
            .items
            .into_iter()
            .filter_map(|p| p.metadata.name)
            .collect();
    names.sort();
    names
}

/// The other tenant is provisioned and Healthy, whatever the odd one holds.
async fn other_tenant_is_healthy(client: &kube::Client) {
    eventually(
        "tenant globex in namespace other to run both pods and be Healthy",
        || async {
            let cluster = Api::<ExpressCluster>::namespaced(client.clone(), OTHER)
                .get("globex")
                .await
                .expect("globex");
            let healthy = cluster
                .status
                .and_then(|s| s.phase)
                .is_some_and(|p| p == express_api::ClusterPhase::Healthy);
            healthy && pod_names(client, OTHER).await == ["globex-be", "globex-fe1"]
        },
    )
    .await;
}

/// The odd tenant's ExpressCluster says what it cannot read, with a Warning event.
async fn reported_on_acme(client: &kube::Client, needle: &[&str]) {
    eventually(
        "acme's ObjectsReadable condition to name the object",
        || async {
            let cluster = Api::<ExpressCluster>::namespaced(client.clone(), NS)
                .get("acme")
                .await
                .expect("acme");
            cluster.status.is_some_and(|s| {
                s.conditions.iter().any(|c| {
                    c.type_ == "ObjectsReadable"
                        && c.status == "False"
                        && c.reason == "Undecodable"
                        && needle.iter().all(|n| c.message.contains(n))
                })
            })
        },
    )
    .await;
    eventually("a Warning event UndecodableObject on acme", || async {
        Api::<Event>::namespaced(client.clone(), NS)
            .list(&ListParams::default())
            .await
            .expect("events")
            .items
            .iter()
            .any(|e| {
                e.reason.as_deref() == Some("UndecodableObject")
                    && e.type_.as_deref() == Some("Warning")
                    && e.involved_object.name.as_deref() == Some("acme")
                    && needle
                        .iter()
                        .all(|n| e.message.as_deref().unwrap_or("").contains(n))
            })
    })
    .await;
}

fn undecodable_gauge(metrics: &Metrics, kind: &str) -> String {
    let text = metrics.encode();
    let line = format!("express_operator_undecodable_objects{{kind=\"{kind}\"}}");
    text.lines()
        .find(|l| l.starts_with(&line))
        .map(|l| l[line.len()..].trim().to_owned())
        .unwrap_or_default()
}

async fn node_message(client: &kube::Client, name: &str) -> String {
    let frontends = Api::<Frontend>::namespaced(client.clone(), NS);
    let backends = Api::<Backend>::namespaced(client.clone(), NS);
    let status = match frontends.get_opt(name).await.ok().flatten() {
        Some(f) => f.status,
        None => backends
            .get_opt(name)
            .await
            .ok()
            .flatten()
            .and_then(|b| b.status),
    };
    status.and_then(|s| s.message).unwrap_or_default()
}

#[tokio::test]
async fn an_unreadable_frontend_stops_only_what_waits_for_it() {
    let (env, metrics) = run_with(async |env: &Env| {
        let client = &env.client;
        under_a_looser_crd(client, "frontends", || async {
            Api::<DynamicObject>::namespaced_with(
                client.clone(),
                NS,
                &ApiResource::erase::<Frontend>(&()),
            )
            .patch(
                "acme-fe2",
                &PatchParams::default(),
                &Patch::Merge(json!({"spec": {"up": "yes"}})),
            )
            .await
            .expect("poison");
        })
        .await;
    })
    .await;
    other_tenant_is_healthy(&env.client).await;
    reported_on_acme(&env.client, &["Frontend acme-fe2", "spec.up"]).await;
    // The odd tenant goes on where the order allows: be and fe1 come up; fe3, which waits for
    // fe2 in the default order, does not, and says so.
    eventually("acme-be and acme-fe1 to run", || async {
        pod_names(&env.client, NS).await == ["acme-be", "acme-fe1"]
    })
    .await;
    eventually("acme-fe3 to say it waits for acme-fe2", || async {
        node_message(&env.client, "acme-fe3")
            .await
            .contains("acme-fe2")
    })
    .await;
    assert_eq!(pod_names(&env.client, NS).await, ["acme-be", "acme-fe1"]);
    assert_eq!(undecodable_gauge(&metrics, "Frontend"), "1");

    // Fixing the object (a valid write) lets the rest of the tenant through.
    Api::<Frontend>::namespaced(env.client.clone(), NS)
        .patch(
            "acme-fe2",
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"up": true}})),
        )
        .await
        .expect("fix");
    settle(&env).await;
    assert_eq!(
        pod_names(&env.client, NS).await,
        ["acme-be", "acme-fe1", "acme-fe2", "acme-fe3"]
    );
    assert_eq!(undecodable_gauge(&metrics, "Frontend"), "0");
}

#[tokio::test]
async fn an_unreadable_backend_holds_its_tenant_and_no_other() {
    let (env, metrics) = run_with(async |env: &Env| {
        let client = &env.client;
        under_a_looser_crd(client, "backends", || async {
            Api::<DynamicObject>::namespaced_with(
                client.clone(),
                NS,
                &ApiResource::erase::<Backend>(&()),
            )
            .patch(
                "acme-be",
                &PatchParams::default(),
                &Patch::Merge(
                    json!({"spec": {"deploymentDependencies": {"disabled": "sometimes"}}}),
                ),
            )
            .await
            .expect("poison");
        })
        .await;
    })
    .await;
    other_tenant_is_healthy(&env.client).await;
    reported_on_acme(
        &env.client,
        &["Backend acme-be", "spec.deploymentDependencies.disabled"],
    )
    .await;
    eventually("acme-fe1 to say it waits for acme-be", || async {
        node_message(&env.client, "acme-fe1")
            .await
            .contains("acme-be")
    })
    .await;
    assert!(pod_names(&env.client, NS).await.is_empty());
    assert_eq!(undecodable_gauge(&metrics, "Backend"), "1");
}

#[tokio::test]
async fn an_unreadable_express_cluster_blocks_its_tenant_and_says_so_on_the_nodes() {
    let (env, metrics) = run_with(async |env: &Env| {
        let client = &env.client;
        under_a_looser_crd(client, "expressclusters", || async {
            Api::<DynamicObject>::namespaced_with(
                client.clone(),
                NS,
                &ApiResource::erase::<ExpressCluster>(&()),
            )
            .patch(
                "acme",
                &PatchParams::default(),
                &Patch::Merge(json!({"spec": {"rollout": {"maxConcurrent": "two"}}})),
            )
            .await
            .expect("poison");
        })
        .await;
    })
    .await;
    other_tenant_is_healthy(&env.client).await;
    // Without a readable ExpressCluster, its nodes carry the report: an InvalidSpec event each.
    eventually(
        "an event on acme-be saying the ExpressCluster cannot be read",
        || async {
            Api::<Event>::namespaced(env.client.clone(), NS)
                .list(&ListParams::default())
                .await
                .expect("events")
                .items
                .iter()
                .any(|e| {
                    let message = e.message.as_deref().unwrap_or("");
                    e.reason.as_deref() == Some("InvalidSpec")
                        && e.type_.as_deref() == Some("Warning")
                        && e.involved_object.name.as_deref() == Some("acme-be")
                        && message.contains("cannot read ExpressCluster acme")
                        && message.contains("spec.rollout.maxConcurrent")
                })
        },
    )
    .await;
    assert!(pod_names(&env.client, NS).await.is_empty());
    assert_eq!(undecodable_gauge(&metrics, "ExpressCluster"), "1");
}

#[tokio::test]
async fn an_unreadable_pod_blocks_its_tenant_and_no_other() {
    let (env, metrics) = run_with(async |env: &Env| {
        plant(
            env,
            &ApiResource::erase::<Pod>(&()),
            json!({"apiVersion": "v1", "kind": "Pod",
                   "metadata": {"name": "acme-stray", "namespace": NS,
                                "labels": {"express.dev/cluster": "acme"}},
                   // A field the operator reads (the image, for the running version). One
                   // it does not read, such as spec.priority, is dropped before decoding.
                   "spec": {"containers": [{"name": "x", "image": 5}], "priority": "high"}}),
        );
    })
    .await;
    other_tenant_is_healthy(&env.client).await;
    reported_on_acme(&env.client, &["Pod acme-stray", "spec.containers[0].image"]).await;
    assert_eq!(pod_names(&env.client, NS).await, ["acme-stray"]);
    assert_eq!(undecodable_gauge(&metrics, "Pod"), "1");
}

#[tokio::test]
async fn an_unreadable_control_config_map_holds_its_namespace_only() {
    let (env, metrics) = run_with(async |env: &Env| {
        plant(
            env,
            &dynamic("ConfigMap", "configmaps", "v1", ""),
            json!({"apiVersion": "v1", "kind": "ConfigMap",
                   "metadata": {"name": "express-control", "namespace": NS},
                   "data": {"paused": true}}),
        );
    })
    .await;
    other_tenant_is_healthy(&env.client).await;
    reported_on_acme(&env.client, &["ConfigMap express-control", "data.paused"]).await;
    assert!(pod_names(&env.client, NS).await.is_empty());
    assert_eq!(undecodable_gauge(&metrics, "ConfigMap"), "1");
}

#[tokio::test]
async fn an_unreadable_controller_revision_blocks_its_tenant_and_no_other() {
    let (env, metrics) = run_with(async |env: &Env| {
        plant(
            env,
            &dynamic("ControllerRevision", "controllerrevisions", "v1", "apps"),
            json!({"apiVersion": "apps/v1", "kind": "ControllerRevision",
                   "metadata": {"name": "acme-fe1-old", "namespace": NS,
                                "labels": {"express.dev/cluster": "acme"}},
                   "revision": "one", "data": {}}),
        );
    })
    .await;
    other_tenant_is_healthy(&env.client).await;
    reported_on_acme(
        &env.client,
        &["ControllerRevision acme-fe1-old", "revision"],
    )
    .await;
    assert!(pod_names(&env.client, NS).await.is_empty());
    assert_eq!(undecodable_gauge(&metrics, "ControllerRevision"), "1");
}

#[tokio::test]
async fn status_values_a_newer_build_wrote_read_as_unknown_and_the_tenant_goes_on() {
    // A newer operator build writes its status the way this one does: server-side apply under
    // the same field manager, so this build's next write replaces it whole.
    let newer_build = PatchParams::apply(express_api::keys::FIELD_MANAGER).force();
    let newer_build = &newer_build;
    let (env, metrics) = run_with(async |env: &Env| {
        let client = &env.client;
        under_a_looser_crd(client, "frontends", || async {
            Api::<DynamicObject>::namespaced_with(
                client.clone(),
                NS,
                &ApiResource::erase::<Frontend>(&()),
            )
            .patch_status(
                "acme-fe1",
                newer_build,
                &Patch::Apply(json!({"apiVersion": "express.dev/v1alpha1", "kind": "Frontend", "status": {
                    "phase": "Draining",
                    "change": {"kind": "Migrate", "state": "Verifying", "toRevision": "r9"},
                    "bounce": {"requestId": "b1", "phase": "Quiescing"},
                }})),
            )
            .await
            .expect("status");
        })
        .await;
        under_a_looser_crd(client, "expressclusters", || async {
            Api::<DynamicObject>::namespaced_with(
                client.clone(),
                NS,
                &ApiResource::erase::<ExpressCluster>(&()),
            )
            .patch_status(
                "acme",
                newer_build,
                &Patch::Apply(json!({"apiVersion": "express.dev/v1alpha1", "kind": "ExpressCluster", "status": {
                    "phase": "Hibernating", "rollout": {"state": "Canarying"}
                }})),
            )
            .await
            .expect("status");
        })
        .await;
    })
    .await;
    other_tenant_is_healthy(&env.client).await;
    settle(&env).await;
    assert_eq!(
        pod_names(&env.client, NS).await,
        ["acme-be", "acme-fe1", "acme-fe2", "acme-fe3"]
    );
    let fe1 = Api::<Frontend>::namespaced(env.client.clone(), NS)
        .get("acme-fe1")
        .await
        .expect("fe1");
    // What the operator writes back is its own, valid status.
    assert_eq!(
        fe1.status.and_then(|s| s.phase),
        Some(express_api::NodePhase::Ready)
    );
    assert_eq!(undecodable_gauge(&metrics, "Frontend"), "0");
    assert_eq!(undecodable_gauge(&metrics, "ExpressCluster"), "0");
}

#[tokio::test]
async fn a_node_whose_name_cannot_label_its_pod_is_refused_before_any_pod_is_tried() {
    let long = "x".repeat(60);
    let name = format!("acme-{long}");
    let (env, metrics) = run_with(async |env: &Env| {
        let client = &env.client;
        add_frontend_with(client, &long, json!({})).await;
    })
    .await;
    other_tenant_is_healthy(&env.client).await;
    eventually("the long-named node to say why it gets no pod", || async {
        let message = node_message(&env.client, &name).await;
        message.contains("express.dev/node") && message.contains("63")
    })
    .await;
    eventually("the rest of acme to run", || async {
        pod_names(&env.client, NS).await == ["acme-be", "acme-fe1", "acme-fe2", "acme-fe3"]
    })
    .await;
    // No pod was ever attempted for it (kubesim would refuse one, as the API server does): the
    // operator's pod creations are exactly the six pods of both tenants.
    let text = metrics.encode();
    let creations = text
        .lines()
        .find(|l| l.starts_with("express_operator_actions_total{action=\"create_pod\"}"))
        .and_then(|l| l.rsplit(' ').next())
        .unwrap_or_default()
        .to_owned();
    assert_eq!(creations, "6", "{text}");
}
