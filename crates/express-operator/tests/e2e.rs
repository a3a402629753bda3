//! End to end: the real controller against kubesim, through kube-rs. Orders are observed from
//! the API (a watch on pods), never from the operator's own logs.
#![allow(clippy::expect_used, clippy::unwrap_used)] // tests fail loudly on unexpected values

mod support;

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use express_api::{Backend, ExpressCluster, Frontend, NodePhase};
use express_operator::controller::Settings;
use futures::StreamExt;
use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, ListParams, Patch, PatchParams, WatchEvent, WatchParams};
use kubesim::KubeSim;
use list_pages::FirstListing;
use serde_json::json;

const NS: &str = "tenant";

struct Env {
    sim: KubeSim,
    client: kube::Client,
    /// Pod creations seen on a watch: (pod, revision).
    created: Arc<Mutex<Vec<(String, String)>>>,
}

async fn env() -> Env {
    env_filled(FirstListing::Paged).await
}

/// The environment, the operator's watches filling as `listing` says.
async fn env_filled(listing: FirstListing) -> Env {
    let (sim, client) = support::kubesim_with_crds(0.15).await;
    express_operator::install::create_namespace(&client, NS)
        .await
        .expect("namespace");
    let created = Arc::new(Mutex::new(Vec::new()));
    let pods: Api<Pod> = Api::namespaced(client.clone(), NS);
    let stream = pods
        .watch(&WatchParams::default(), "0")
        .await
        .expect("watch pods");
    let log = created.clone();
    tokio::spawn(async move {
        let mut stream = std::pin::pin!(stream);
        while let Some(Ok(event)) = stream.next().await {
            if let WatchEvent::Added(pod) = event {
                let revision = express_operator::pods::revision_of(&pod)
                    .unwrap_or_default()
                    .to_owned();
                log.lock()
                    .unwrap()
                    .push((pod.metadata.name.unwrap_or_default(), revision));
            }
        }
    });
    support::operator_with_settings(
        &client,
        Settings {
            first_listing: listing,
            ..Settings::cluster_wide("e2e", 4)
        },
        tokio::sync::watch::channel(true).1,
        express_operator::metrics::Metrics::new(),
    );
    Env {
        sim,
        client,
        created,
    }
}

/// The tenant `acme`: v1 from registry.example/express, a Backend and `frontends` Frontends.
async fn tenant(env: &Env, frontends: usize) {
    let defaults = json!({"expressVersion": "v1", "image": "registry.example/express"});
    let names: Vec<String> = (1..=frontends).map(|i| format!("fe{i}")).collect();
    let frontends: Vec<(&str, serde_json::Value)> =
        names.iter().map(|n| (n.as_str(), json!({}))).collect();
    support::tenant_with(
        &env.client,
        json!({"defaults": {"backend": defaults, "frontend": defaults}}),
        &frontends,
    )
    .await;
}

async fn cluster(env: &Env) -> ExpressCluster {
    Api::<ExpressCluster>::namespaced(env.client.clone(), NS)
        .get("acme")
        .await
        .expect("cluster")
}

/// Waits until the ExpressCluster reports, for its latest spec, every up node Ready on its
/// desired revision.
async fn healthy(env: &Env, nodes: u32) {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let cluster = cluster(env).await;
        let status = cluster.status;
        // A status written before the operator saw the latest spec may say Healthy about the
        // old one.
        let done = status.as_ref().is_some_and(|s| {
            s.observed_generation == cluster.metadata.generation
                && s.phase == Some(express_api::ClusterPhase::Healthy)
                && s.nodes
                    .as_ref()
                    .is_some_and(|n| n.up_to_date == nodes && n.ready == nodes)
        });
        if done {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "cluster never became healthy: {status:?}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

fn order(env: &Env, since: usize) -> Vec<String> {
    env.created.lock().unwrap()[since..]
        .iter()
        .map(|(name, _)| name.trim_start_matches("acme-").to_owned())
        .collect()
}

/// Returns the ExpressCluster's new generation.
async fn set_version(env: &Env, backend: Option<&str>, frontend: Option<&str>) -> i64 {
    let mut defaults_patch = json!({});
    if let Some(v) = backend {
        defaults_patch["backend"] = json!({"expressVersion": v});
    }
    if let Some(v) = frontend {
        defaults_patch["frontend"] = json!({"expressVersion": v});
    }
    Api::<ExpressCluster>::namespaced(env.client.clone(), NS)
        .patch(
            "acme",
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"defaults": defaults_patch}})),
        )
        .await
        .expect("patch")
        .metadata
        .generation
        .expect("generation")
}

#[tokio::test]
async fn provisions_from_nothing_then_upgrades_in_order() {
    let env = env().await;
    tenant(&env, 4).await;
    healthy(&env, 5).await;
    assert_eq!(order(&env, 0), ["be", "fe1", "fe2", "fe3", "fe4"]);

    let before = env.created.lock().unwrap().len();
    set_version(&env, Some("v2"), Some("v2")).await;
    healthy(&env, 5).await;
    assert_eq!(
        order(&env, before),
        ["fe1", "fe2", "be", "fe3", "fe4"],
        "full upgrade order"
    );

    let before = env.created.lock().unwrap().len();
    set_version(&env, None, Some("v3")).await;
    healthy(&env, 5).await;
    assert_eq!(
        order(&env, before),
        ["fe1", "fe2", "fe3", "fe4"],
        "frontend-only change"
    );

    let before = env.created.lock().unwrap().len();
    set_version(&env, Some("v3"), None).await;
    healthy(&env, 5).await;
    assert_eq!(order(&env, before), ["be"], "backend-only change");

    // Node statuses say what runs.
    let fe1 = Api::<Frontend>::namespaced(env.client.clone(), NS)
        .get("acme-fe1")
        .await
        .expect("fe1");
    let status = fe1.status.expect("status");
    assert_eq!(status.phase, Some(express_api::NodePhase::Ready));
    assert_eq!(status.running_version.as_deref(), Some("v3"));
    assert_eq!(status.running_revision, status.desired_revision);
    assert!(
        status
            .conditions
            .iter()
            .any(|c| c.type_ == "UpToDate" && c.status == "True")
    );
}

/// Through kube-rs against kubesim, the operator's watches filled by streaming lists (the
/// initial events, then the bookmark that ends them) provision and upgrade in order, and go
/// on after the server drops every watch (each fills again by a streaming list).
#[tokio::test]
async fn watches_filled_by_streaming_lists_provision_and_upgrade_in_order() {
    let env = env_filled(FirstListing::Streamed).await;
    tenant(&env, 4).await;
    healthy(&env, 5).await;
    assert_eq!(order(&env, 0), ["be", "fe1", "fe2", "fe3", "fe4"]);
    let before = env.created.lock().unwrap().len();
    set_version(&env, Some("v2"), Some("v2")).await;
    healthy(&env, 5).await;
    assert_eq!(
        order(&env, before),
        ["fe1", "fe2", "be", "fe3", "fe4"],
        "full upgrade order"
    );
    // The test's own pod watch ends too: what runs is read from the nodes' statuses.
    env.sim.faults().close_watches();
    set_version(&env, Some("v3"), Some("v3")).await;
    healthy(&env, 5).await;
    let frontends = Api::<Frontend>::namespaced(env.client.clone(), NS)
        .list(&ListParams::default())
        .await
        .expect("frontends");
    let backends = Api::<Backend>::namespaced(env.client.clone(), NS)
        .list(&ListParams::default())
        .await
        .expect("backends");
    let running: Vec<Option<String>> = frontends
        .items
        .into_iter()
        .map(|f| f.status.and_then(|s| s.running_version))
        .chain(
            backends
                .items
                .into_iter()
                .map(|b| b.status.and_then(|s| s.running_version)),
        )
        .collect();
    assert_eq!(running, vec![Some("v3".to_owned()); 5], "after the relist");
}

#[tokio::test]
async fn pause_changes_nothing_and_resume_goes_on() {
    let env = env().await;
    tenant(&env, 2).await;
    healthy(&env, 3).await;
    // Counted from here: an operator ignoring the pause acts before it reports.
    let pod_writes = env.sim.counters().writes_to("pods");
    Api::<ExpressCluster>::namespaced(env.client.clone(), NS)
        .patch(
            "acme",
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"paused": true}})),
        )
        .await
        .expect("pause");
    let generation = set_version(&env, Some("v2"), Some("v2")).await;
    support::wait_until("Paused reported for the new versions", async || {
        cluster(&env).await.status.is_some_and(|s| {
            s.observed_generation == Some(generation)
                && s.phase == Some(express_api::ClusterPhase::Paused)
        })
    })
    .await;
    // A window, not a wait: a pod write now would come from a later reconcile.
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert_eq!(
        env.sim.counters().writes_to("pods"),
        pod_writes,
        "no pod is created or deleted while paused"
    );
    let status = cluster(&env).await.status.expect("status");
    assert_eq!(status.phase, Some(express_api::ClusterPhase::Paused));
    assert!(
        status
            .message
            .as_deref()
            .unwrap_or("")
            .contains("ExpressCluster spec.paused"),
        "{status:?}"
    );

    let before = env.created.lock().unwrap().len();
    Api::<ExpressCluster>::namespaced(env.client.clone(), NS)
        .patch(
            "acme",
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"paused": false}})),
        )
        .await
        .expect("resume");
    healthy(&env, 3).await;
    assert_eq!(order(&env, before), ["fe1", "fe2", "be"]);
}

#[tokio::test]
async fn a_cycle_is_reported_and_changes_nothing() {
    let env = env().await;
    tenant(&env, 2).await;
    healthy(&env, 3).await;
    // Counted from here: an operator acting despite the cycle acts before it reports.
    let pod_writes = env.sim.counters().writes_to("pods");
    let cycle = |on: &str| json!({"spec": {"deploymentDependencies": {"upgradePrerequisites": [{"expressNode": on, "kind": "Frontend"}]}}});
    let frontends = Api::<Frontend>::namespaced(env.client.clone(), NS);
    frontends
        .patch(
            "acme-fe1",
            &PatchParams::default(),
            &Patch::Merge(cycle("acme-fe2")),
        )
        .await
        .expect("patch");
    frontends
        .patch(
            "acme-fe2",
            &PatchParams::default(),
            &Patch::Merge(cycle("acme-fe1")),
        )
        .await
        .expect("patch");
    let generation = set_version(&env, Some("v2"), Some("v2")).await;
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let status = cluster(&env).await.status.expect("status");
        let invalid = status
            .conditions
            .iter()
            .find(|c| c.type_ == "InvalidSpec")
            .expect("condition");
        // The cycle may be reported before the new versions are seen: wait for both.
        if invalid.status == "True" && status.observed_generation == Some(generation) {
            assert!(
                invalid
                    .message
                    .contains("Frontend acme-fe1 -> Frontend acme-fe2 -> Frontend acme-fe1"),
                "{invalid:?}"
            );
            assert_eq!(status.phase, Some(express_api::ClusterPhase::Failed));
            break;
        }
        assert!(
            Instant::now() < deadline,
            "no InvalidSpec condition: {status:?}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    // A window, not a wait: a pod write now would come from a later reconcile.
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert_eq!(
        env.sim.counters().writes_to("pods"),
        pod_writes,
        "nothing is changed"
    );
}

/// Every version of the objects of `api` written from now on (the list's resourceVersion), as
/// `seen` reads them, until the test ends.
async fn record_versions<K, T>(
    api: Api<K>,
    seen: impl Fn(&K) -> T + Send + 'static,
) -> Arc<Mutex<Vec<T>>>
where
    K: kube::Resource + Clone + serde::de::DeserializeOwned + std::fmt::Debug + Send + 'static,
    T: Send + 'static,
{
    let since = api
        .list_metadata(&ListParams::default())
        .await
        .expect("list")
        .metadata
        .resource_version
        .expect("resourceVersion");
    let versions = Arc::new(Mutex::new(Vec::new()));
    let log = versions.clone();
    tokio::spawn(async move {
        let stream = api
            .watch(&WatchParams::default(), &since)
            .await
            .expect("watch");
        let mut stream = std::pin::pin!(stream);
        while let Some(Ok(event)) = stream.next().await {
            if let WatchEvent::Modified(object) = event {
                log.lock().unwrap().push(seen(&object));
            }
        }
    });
    versions
}

/// A node's replacement takes it out of service in the status write that records it, and the
/// ExpressCluster counts it out in its next write: no status shows a node being replaced as
/// Ready, and the cluster's Ready condition does not come back between two nodes of a rollout
/// (it used to, for the instant between one node's new pod Ready and the next one's deletion
/// being seen, at the cost of two writes a node).
#[tokio::test]
async fn a_node_being_replaced_is_out_of_service_from_its_first_status_write() {
    let env = env().await;
    tenant(&env, 3).await;
    healthy(&env, 4).await;
    let node_seen = |name: Option<String>, status: Option<&express_api::NodeStatus>| {
        (
            name.unwrap_or_default(),
            status.and_then(|s| s.phase),
            status.and_then(|s| s.ready),
        )
    };
    let frontend_versions = record_versions(
        Api::<Frontend>::namespaced(env.client.clone(), NS),
        move |f: &Frontend| node_seen(f.metadata.name.clone(), f.status.as_ref()),
    )
    .await;
    let backend_versions = record_versions(
        Api::<Backend>::namespaced(env.client.clone(), NS),
        move |b: &Backend| node_seen(b.metadata.name.clone(), b.status.as_ref()),
    )
    .await;
    let cluster_versions = record_versions(
        Api::<ExpressCluster>::namespaced(env.client.clone(), NS),
        |c: &ExpressCluster| {
            let status = c.status.as_ref();
            let ready = status
                .and_then(|s| s.conditions.iter().find(|c| c.type_ == "Ready"))
                .map(|c| c.status == "True");
            let up_to_date = status.and_then(|s| s.nodes.as_ref()).map(|n| n.up_to_date);
            (ready, up_to_date)
        },
    )
    .await;

    set_version(&env, Some("v2"), Some("v2")).await;
    healthy(&env, 4).await;
    let before = env.created.lock().unwrap().len();
    assert!(before > 0);

    let nodes: Vec<_> = frontend_versions
        .lock()
        .unwrap()
        .iter()
        .chain(backend_versions.lock().unwrap().iter())
        .cloned()
        .collect();
    let replacing: Vec<_> = nodes
        .iter()
        .filter(|(_, phase, _)| *phase == Some(NodePhase::Upgrading))
        .collect();
    assert!(
        replacing.len() >= 4,
        "every node was seen Upgrading: {nodes:?}"
    );
    assert!(
        replacing.iter().all(|(_, _, ready)| *ready == Some(false)),
        "a node being replaced was reported Ready: {nodes:?}"
    );
    // From the first node taken out until every node is on v2, the cluster is not Ready.
    let versions = cluster_versions.lock().unwrap().clone();
    let first_out = versions
        .iter()
        .position(|(ready, _)| *ready == Some(false))
        .expect("the cluster was reported not Ready during the rollout");
    let back = versions[first_out..]
        .iter()
        .position(|(ready, _)| *ready == Some(true))
        .map(|i| i + first_out)
        .expect("the cluster was reported Ready again");
    assert_eq!(
        versions[back].1,
        Some(4),
        "Ready came back before every node was upgraded: {versions:?}"
    );
}
