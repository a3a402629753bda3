//! kubesim under kube-runtime: a reflector that stays in sync across a forced watch drop and a
//! 410, one filled by a streaming list, a Controller reconciling a custom resource with owned children, the finalizer helper,
//! the events Recorder, and a Lease held by one of two contenders with hand-over.
#![allow(clippy::expect_used, clippy::unwrap_used)] // tests fail loudly on unexpected values

use std::collections::BTreeSet;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use express_api::{Frontend, FrontendSpec, NodeSpec};
use futures::StreamExt;
use k8s_openapi::api::core::v1::ConfigMap;
use k8s_openapi::api::events::v1::Event as K8sEvent;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{Api, DeleteParams, ListParams, Patch, PatchParams, PostParams};
use kube::core::ObjectMeta;
use kube::runtime::controller::{Action, Controller};
use kube::runtime::events::{Event, EventType, Recorder, Reporter};
use kube::runtime::finalizer::{Event as Finalized, finalizer};
use kube::runtime::{WatchStreamExt, reflector, watcher};
use kube::{Resource, ResourceExt};
use kubesim::{Config, KubeSim};
use serde_json::json;

async fn start() -> (KubeSim, kube::Client) {
    let sim = KubeSim::start(Config::default()).await.expect("start");
    let client = sim.client().expect("client");
    (sim, client)
}

async fn eventually(what: &str, mut probe: impl AsyncFnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(10);
    while !probe().await {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
}

async fn install_crds(client: &kube::Client) {
    let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
    for crd in express_api::crd::all() {
        crds.create(&PostParams::default(), &crd)
            .await
            .expect("CRD");
    }
}

fn frontend(name: &str) -> Frontend {
    Frontend::new(
        name,
        FrontendSpec(NodeSpec {
            express_version: Some("v1".into()),
            ..NodeSpec::for_cluster("acme")
        }),
    )
}

fn config_map(name: &str) -> ConfigMap {
    ConfigMap {
        metadata: ObjectMeta {
            name: Some(name.into()),
            ..Default::default()
        },
        ..Default::default()
    }
}

#[tokio::test]
async fn reflector_stays_in_sync_across_watch_drops_and_410() {
    let (sim, client) = start().await;
    let cms: Api<ConfigMap> = Api::namespaced(client.clone(), "default");
    let (reader, writer) = reflector::store();
    let stream = reflector(
        writer,
        watcher(cms.clone(), watcher::Config::default()).default_backoff(),
    )
    .applied_objects();
    tokio::spawn(stream.for_each(|_| async {}));
    let names = || -> BTreeSet<String> { reader.state().iter().map(|c| c.name_any()).collect() };
    let expect =
        |list: &[&str]| -> BTreeSet<String> { list.iter().map(|s| s.to_string()).collect() };

    for name in ["a", "b"] {
        cms.create(&PostParams::default(), &config_map(name))
            .await
            .expect("create");
    }
    eventually("initial sync", async || names() == expect(&["a", "b"])).await;

    // The server drops every watch: the reflector re-watches and misses nothing.
    sim.faults().close_watches();
    cms.create(&PostParams::default(), &config_map("c"))
        .await
        .expect("create");
    eventually("after a watch drop", async || {
        names() == expect(&["a", "b", "c"])
    })
    .await;

    // Watches are dropped and cannot come back while changes happen and history is compacted:
    // resuming then gets 410, and the reflector lists again.
    let lists_before = sim.counters().count("list", "configmaps");
    sim.faults().add_rule(kubesim::FaultRule {
        verb: Some("watch".into()),
        resource: Some("configmaps".into()),
        rate: 1.0,
        status: 503,
        retry_after_seconds: None,
    });
    sim.faults().close_watches();
    cms.create(&PostParams::default(), &config_map("d"))
        .await
        .expect("create");
    cms.delete("a", &DeleteParams::default())
        .await
        .expect("delete");
    sim.compact();
    sim.faults().clear();
    eventually("after a 410", async || names() == expect(&["b", "c", "d"])).await;
    assert!(
        sim.counters().count("list", "configmaps") > lists_before,
        "the reflector listed again after the 410"
    );
}

/// A reflector filled by a streaming list (KEP-3157: one watch with `sendInitialEvents`, its
/// initial events closed by the bookmark annotated `k8s.io/initial-events-end`), as the
/// dashboard's watches fill on a server that serves them: no LIST at all, the whole store
/// before "ready", and the same objects after the watch drops.
#[tokio::test]
async fn a_streaming_list_fills_a_reflector_without_a_list_and_follows_changes() {
    let (sim, client) = start().await;
    let cms: Api<ConfigMap> = Api::namespaced(client.clone(), "default");
    for i in 0..25 {
        cms.create(&PostParams::default(), &config_map(&format!("cm-{i}")))
            .await
            .expect("create");
    }
    let lists_before = sim.counters().count("list", "configmaps");
    let (reader, writer) = reflector::store();
    let stream = reflector(
        writer,
        watcher(cms.clone(), watcher::Config::default().streaming_lists()).default_backoff(),
    )
    .applied_objects();
    tokio::spawn(stream.for_each(|_| async {}));
    tokio::time::timeout(Duration::from_secs(10), reader.wait_until_ready())
        .await
        .expect("ready in time")
        .expect("ready");
    // Ready only once the initial events ended: every object at once.
    assert_eq!(reader.state().len(), 25);
    assert_eq!(
        sim.counters().count("list", "configmaps"),
        lists_before,
        "filled by the watch alone"
    );
    cms.create(&PostParams::default(), &config_map("late"))
        .await
        .expect("create");
    eventually("a change after the initial events", async || {
        reader.state().len() == 26
    })
    .await;
    sim.faults().close_watches();
    cms.delete("cm-0", &DeleteParams::default())
        .await
        .expect("delete");
    eventually("a delete after the watch dropped", async || {
        reader.state().len() == 25 && !reader.state().iter().any(|c| c.name_any() == "cm-0")
    })
    .await;
}

#[tokio::test]
async fn controller_reconciles_a_custom_resource_with_owned_children() {
    let (_sim, client) = start().await;
    install_crds(&client).await;
    let frontends: Api<Frontend> = Api::namespaced(client.clone(), "default");
    let children: Api<ConfigMap> = Api::namespaced(client.clone(), "default");
    let reconciles = Arc::new(AtomicUsize::new(0));

    struct Context {
        client: kube::Client,
        reconciles: Arc<AtomicUsize>,
    }
    async fn reconcile(fe: Arc<Frontend>, ctx: Arc<Context>) -> Result<Action, kube::Error> {
        ctx.reconciles.fetch_add(1, Ordering::SeqCst);
        let owner = fe.controller_owner_ref(&()).expect("owner reference");
        let child = json!({"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": format!("{}-child", fe.name_any()), "ownerReferences": [owner]},
            "data": {"version": fe.spec.express_version.clone().unwrap_or_default()}});
        Api::<ConfigMap>::namespaced(ctx.client.clone(), "default")
            .patch(
                &format!("{}-child", fe.name_any()),
                &PatchParams::apply("test-controller").force(),
                &Patch::Apply(child),
            )
            .await?;
        Ok(Action::await_change())
    }
    fn error_policy(_: Arc<Frontend>, _: &kube::Error, _: Arc<Context>) -> Action {
        Action::requeue(Duration::from_millis(200))
    }
    let context = Arc::new(Context {
        client: client.clone(),
        reconciles: reconciles.clone(),
    });
    tokio::spawn(
        Controller::new(frontends.clone(), watcher::Config::default())
            .owns(children.clone(), watcher::Config::default())
            .run(reconcile, error_policy, context)
            .for_each(|_| async {}),
    );

    frontends
        .create(&PostParams::default(), &frontend("acme-fe1"))
        .await
        .expect("create");
    eventually("child created", async || {
        children
            .get_opt("acme-fe1-child")
            .await
            .expect("get")
            .is_some()
    })
    .await;

    // Deleting the owned child triggers a reconcile that recreates it.
    children
        .delete("acme-fe1-child", &DeleteParams::default())
        .await
        .expect("delete child");
    eventually("child recreated", async || {
        children
            .get_opt("acme-fe1-child")
            .await
            .expect("get")
            .is_some()
    })
    .await;

    // A spec change flows into the child.
    frontends
        .patch(
            "acme-fe1",
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"expressVersion": "v2"}})),
        )
        .await
        .expect("patch");
    eventually("child updated", async || {
        children
            .get("acme-fe1-child")
            .await
            .ok()
            .and_then(|c| c.data)
            .and_then(|d| d.get("version").cloned())
            .as_deref()
            == Some("v2")
    })
    .await;

    // Deleting the owner garbage-collects the child.
    frontends
        .delete("acme-fe1", &DeleteParams::default())
        .await
        .expect("delete owner");
    eventually("child collected", async || {
        children
            .get_opt("acme-fe1-child")
            .await
            .expect("get")
            .is_none()
    })
    .await;
    assert!(reconciles.load(Ordering::SeqCst) >= 3);
}

#[tokio::test]
async fn finalizer_helper_cleans_up_before_deletion() {
    let (_sim, client) = start().await;
    install_crds(&client).await;
    let frontends: Api<Frontend> = Api::namespaced(client.clone(), "default");
    let cleaned = Arc::new(AtomicUsize::new(0));

    async fn reconcile(
        fe: Arc<Frontend>,
        ctx: Arc<(Api<Frontend>, Arc<AtomicUsize>)>,
    ) -> Result<Action, kube::runtime::finalizer::Error<kube::Error>> {
        let (api, cleaned) = (&ctx.0, ctx.1.clone());
        finalizer(api, "express.dev/test-cleanup", fe, |event| async move {
            match event {
                Finalized::Apply(_) => Ok(Action::await_change()),
                Finalized::Cleanup(_) => {
                    cleaned.fetch_add(1, Ordering::SeqCst);
                    Ok(Action::await_change())
                }
            }
        })
        .await
    }
    fn error_policy(
        _: Arc<Frontend>,
        _: &kube::runtime::finalizer::Error<kube::Error>,
        _: Arc<(Api<Frontend>, Arc<AtomicUsize>)>,
    ) -> Action {
        Action::requeue(Duration::from_millis(200))
    }
    tokio::spawn(
        Controller::new(frontends.clone(), watcher::Config::default())
            .run(
                reconcile,
                error_policy,
                Arc::new((frontends.clone(), cleaned.clone())),
            )
            .for_each(|_| async {}),
    );
    frontends
        .create(&PostParams::default(), &frontend("acme-fe2"))
        .await
        .expect("create");
    eventually("finalizer added", async || {
        frontends
            .get("acme-fe2")
            .await
            .map(|f| {
                f.finalizers()
                    .contains(&"express.dev/test-cleanup".to_string())
            })
            .unwrap_or(false)
    })
    .await;
    frontends
        .delete("acme-fe2", &DeleteParams::default())
        .await
        .expect("delete");
    eventually("cleaned up and gone", async || {
        frontends.get_opt("acme-fe2").await.expect("get").is_none()
    })
    .await;
    assert_eq!(cleaned.load(Ordering::SeqCst), 1);
}

#[tokio::test]
async fn events_recorder_publishes_events() {
    let (_sim, client) = start().await;
    let cms: Api<ConfigMap> = Api::namespaced(client.clone(), "default");
    let cm = cms
        .create(&PostParams::default(), &config_map("subject"))
        .await
        .expect("create");
    let recorder = Recorder::new(
        client.clone(),
        Reporter {
            controller: "kubesim-test".into(),
            instance: None,
        },
    );
    let event = Event {
        type_: EventType::Normal,
        reason: "Tested".into(),
        note: Some("it works".into()),
        action: "Test".into(),
        secondary: None,
    };
    recorder
        .publish(&event, &cm.object_ref(&()))
        .await
        .expect("publish");
    recorder
        .publish(&event, &cm.object_ref(&()))
        .await
        .expect("publish again (series)");
    let events: Api<K8sEvent> = Api::namespaced(client, "default");
    let listed = events.list(&ListParams::default()).await.expect("list");
    assert_eq!(listed.items.len(), 1, "the repeat updates the series");
    let published = &listed.items[0];
    assert_eq!(published.reason.as_deref(), Some("Tested"));
    assert_eq!(
        published.regarding.as_ref().and_then(|r| r.name.as_deref()),
        Some("subject")
    );
    assert_eq!(published.series.as_ref().map(|s| s.count), Some(2));
}

#[tokio::test]
async fn lease_is_held_by_one_contender_and_handed_over() {
    use kube_lease_manager::LeaseManagerBuilder;
    let (_sim, client) = start().await;
    let contender = |identity: &str| {
        LeaseManagerBuilder::new(client.clone(), "express-operator-leader")
            .with_namespace("default")
            .with_identity(identity)
            .with_duration(2)
            .with_grace(1)
            .build()
    };
    let alpha = contender("alpha").await.expect("alpha");
    let beta = contender("beta").await.expect("beta");
    assert!(
        alpha.changed().await.expect("alpha tries"),
        "alpha gets the lease first"
    );
    let beta_result = tokio::time::timeout(Duration::from_millis(700), beta.changed()).await;
    assert!(
        beta_result.is_err() || !beta_result.unwrap().unwrap(),
        "beta must not hold it while alpha does"
    );
    let leases: Api<k8s_openapi::api::coordination::v1::Lease> =
        Api::namespaced(client.clone(), "default");
    let held = leases.get("express-operator-leader").await.expect("lease");
    assert_eq!(
        held.spec.and_then(|s| s.holder_identity).as_deref(),
        Some("alpha")
    );

    // The holder stops: the other takes over.
    alpha.release().await.expect("release");
    let took_over = tokio::time::timeout(Duration::from_secs(10), async {
        loop {
            if beta.changed().await.expect("beta tries") {
                return;
            }
        }
    })
    .await;
    assert!(took_over.is_ok(), "beta took over");
    let held = leases.get("express-operator-leader").await.expect("lease");
    assert_eq!(
        held.spec.and_then(|s| s.holder_identity).as_deref(),
        Some("beta")
    );
}
