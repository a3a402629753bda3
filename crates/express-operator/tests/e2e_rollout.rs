//! Rollout safety end to end (DESIGN sections 4 and 5): failure detection, automatic
//! rollback, known-invalid revisions, abort and retry, maxConcurrent, and a leader failing over
//! mid-rollout (crashes at every write: `e2e_crash.rs`). Orders are observed on a pod watch.
#![allow(clippy::expect_used, clippy::unwrap_used)] // tests fail loudly on unexpected values

mod support;

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use express_api::{ClusterPhase, ExpressCluster, Frontend};
use futures::StreamExt;
use k8s_openapi::api::apps::v1::ControllerRevision;
use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, ListParams, Patch, PatchParams, WatchEvent, WatchParams};
use serde_json::{Value, json};
use support::*;

const FIVE: [&str; 4] = ["fe1", "fe2", "fe3", "fe4"];

fn frontends(names: &[&str]) -> Vec<(String, Value)> {
    names.iter().map(|n| (n.to_string(), json!({}))).collect()
}

async fn five_node_tenant(env: &Env, cluster: Value) {
    let fes = frontends(&FIVE);
    let fes: Vec<(&str, Value)> = fes.iter().map(|(n, v)| (n.as_str(), v.clone())).collect();
    tenant(env, cluster, &fes).await;
    settle(env).await;
}

/// Version `version` for both kinds, its pods behaving as `behavior` in kubesim.
fn bad_version(version: &str, behavior: &str) -> Value {
    let template = json!({"metadata": {"annotations": {"kubesim.dev/behavior": behavior}}});
    json!({"spec": {"defaults": {
        "backend": {"expressVersion": version, "podTemplate": template},
        "frontend": {"expressVersion": version, "podTemplate": template}}}})
}

/// A good version: the pod template from a bad one removed.
fn good_version(version: &str) -> Value {
    json!({"spec": {"defaults": {
        "backend": {"expressVersion": version, "podTemplate": null},
        "frontend": {"expressVersion": version, "podTemplate": null}}}})
}

async fn wait_for(
    env: &Env,
    what: &str,
    check: impl Fn(&ExpressCluster) -> bool,
) -> ExpressCluster {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let cluster = cluster(env).await;
        if check(&cluster) {
            return cluster;
        }
        assert!(
            Instant::now() < deadline,
            "never {what}: {:?}",
            cluster.status
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

fn rollout_state(cluster: &ExpressCluster) -> Option<&'static str> {
    Some(cluster.status.as_ref()?.rollout.as_ref()?.state?.as_str())
}

fn pod_ready(pod: &Pod) -> bool {
    pod.status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .into_iter()
        .flatten()
        .any(|c| c.type_ == "Ready" && c.status == "True")
}

async fn pod_versions(env: &Env) -> HashMap<String, (String, bool)> {
    Api::<Pod>::namespaced(env.client.clone(), NS)
        .list(&ListParams::default())
        .await
        .expect("pods")
        .items
        .into_iter()
        .map(|p| {
            let version = p
                .metadata
                .annotations
                .as_ref()
                .and_then(|a| a.get("express.dev/express-version").cloned())
                .unwrap_or_default();
            let ready = pod_ready(&p);
            let name = p.metadata.name.unwrap_or_default();
            (
                name.trim_start_matches("acme-").to_owned(),
                (version, ready),
            )
        })
        .collect()
}

async fn annotate(env: &Env, annotations: Value) {
    Api::<ExpressCluster>::namespaced(env.client.clone(), NS)
        .patch(
            "acme",
            &PatchParams::default(),
            &Patch::Merge(json!({"metadata": {"annotations": annotations}})),
        )
        .await
        .expect("annotate");
}

async fn rolled_back_after_failure(env: &Env, from: usize) {
    let failed = wait_for(env, "rolled back", |c| {
        rollout_state(c) == Some("Failed")
            && c.status
                .as_ref()
                .and_then(|s| s.nodes.as_ref())
                .is_some_and(|n| n.ready == 5)
    })
    .await;
    let status = failed.status.as_ref().unwrap();
    assert_eq!(status.phase, Some(ClusterPhase::Failed));
    let rollout = status.rollout.as_ref().unwrap();
    assert_eq!(rollout.failed_node.as_deref(), Some("acme-fe1"));
    // fe1 was changed, failed, and came back on its previous revision; nothing else moved.
    assert_eq!(since(&env.created, from), ["fe1", "fe1"]);
    let versions = pod_versions(env).await;
    assert_eq!(versions["fe1"], ("v1".to_owned(), true));
    assert!(
        versions.values().all(|(v, ready)| v == "v1" && *ready),
        "{versions:?}"
    );
}

#[tokio::test]
async fn a_crash_looping_version_fails_at_fe1_and_is_rolled_back() {
    let env = env().await;
    five_node_tenant(&env, json!({})).await;
    let from = env.created.lock().unwrap().len();
    change(&env, bad_version("v2", "crash-loop")).await;
    rolled_back_after_failure(&env, from).await;
    let failed = cluster(&env).await;
    let message = failed
        .status
        .as_ref()
        .unwrap()
        .message
        .clone()
        .unwrap_or_default();
    assert!(
        message.contains("acme-fe1") && message.contains("crash-looping"),
        "{message}"
    );
    let fe1 = Api::<Frontend>::namespaced(env.client.clone(), NS)
        .get("acme-fe1")
        .await
        .unwrap();
    let fe1_status = fe1.status.unwrap();
    assert_eq!(fe1_status.invalid_revisions.len(), 1);
    assert_eq!(fe1_status.phase, Some(express_api::NodePhase::Failed));
    let halted = failed
        .status
        .as_ref()
        .unwrap()
        .conditions
        .iter()
        .find(|c| c.type_ == "Halted")
        .unwrap();
    assert_eq!(
        (halted.status.as_str(), halted.reason.as_str()),
        ("True", "RolloutFailed")
    );

    // Applying the same spec again changes nothing.
    let writes = env.sim.counters().count("create", "pods");
    change(&env, bad_version("v2", "crash-loop")).await;
    tokio::time::sleep(Duration::from_millis(800)).await;
    assert_eq!(
        env.sim.counters().count("create", "pods"),
        writes,
        "a known-invalid revision is refused"
    );

    // A fixed spec rolls out normally.
    let from = env.created.lock().unwrap().len();
    change(&env, good_version("v3")).await;
    settle(&env).await;
    assert_eq!(
        since(&env.created, from),
        ["fe1", "fe2", "be", "fe3", "fe4"]
    );
    assert!(
        pod_versions(&env)
            .await
            .values()
            .all(|(v, r)| v == "v3" && *r)
    );
    // Each node keeps its revisions as ControllerRevisions it owns.
    let kept = Api::<ControllerRevision>::namespaced(env.client.clone(), NS)
        .list(&ListParams::default().labels("express.dev/node=acme-fe1"))
        .await
        .unwrap();
    assert_eq!(kept.items.len(), 3, "v1, v2 and v3 of fe1");
    assert!(kept.items.iter().all(|r| {
        r.metadata
            .owner_references
            .as_ref()
            .is_some_and(|o| o[0].name == "acme-fe1")
    }));
}

#[tokio::test]
async fn a_never_ready_version_fails_at_the_deadline_and_is_rolled_back() {
    let env = env().await;
    five_node_tenant(&env, json!({"rollout": {"progressDeadlineSeconds": 2}})).await;
    let from = env.created.lock().unwrap().len();
    let started = Instant::now();
    change(&env, bad_version("v2", "never-ready")).await;
    rolled_back_after_failure(&env, from).await;
    assert!(
        started.elapsed() >= Duration::from_secs(2),
        "not before the deadline"
    );
    let message = cluster(&env)
        .await
        .status
        .unwrap()
        .message
        .unwrap_or_default();
    assert!(message.contains("progressDeadlineSeconds"), "{message}");
}

#[tokio::test]
async fn without_auto_rollback_the_failed_node_is_left_as_it_is() {
    let env = env().await;
    five_node_tenant(&env, json!({"rollout": {"autoRollback": false}})).await;
    let from = env.created.lock().unwrap().len();
    change(&env, bad_version("v2", "crash-loop")).await;
    wait_for(&env, "failed", |c| rollout_state(c) == Some("Failed")).await;
    tokio::time::sleep(Duration::from_millis(800)).await;
    assert_eq!(since(&env.created, from), ["fe1"]);
    let versions = pod_versions(&env).await;
    assert_eq!(versions["fe1"], ("v2".to_owned(), false), "left as it is");
    assert!(
        FIVE[1..]
            .iter()
            .all(|n| versions.get(*n).is_some_and(|v| v.0 == "v1")),
        "{versions:?} {:?}",
        env.deleted.lock().unwrap()
    );
}

/// A version whose pods take 1.5 s to start, so that an abort lands mid-rollout.
fn slow_version(version: &str) -> Value {
    let template = json!({"metadata": {"annotations": {"kubesim.dev/startup-seconds": "1.5"}}});
    json!({"spec": {"defaults": {
        "backend": {"expressVersion": version, "podTemplate": template},
        "frontend": {"expressVersion": version, "podTemplate": template}}}})
}

async fn wait_created(env: &Env, from: usize, count: usize) {
    let deadline = Instant::now() + Duration::from_secs(20);
    while since(&env.created, from).len() < count {
        assert!(
            Instant::now() < deadline,
            "only {:?} created",
            since(&env.created, from)
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

#[tokio::test]
async fn abort_without_rollback_stops_and_retry_resumes() {
    let env = env().await;
    five_node_tenant(&env, json!({})).await;
    let from = env.created.lock().unwrap().len();
    change(&env, slow_version("v2")).await;
    wait_created(&env, from, 2).await; // fe1 done, fe2 starting
    annotate(&env, json!({"express.dev/abort": "abort-1"})).await;
    let aborted = wait_for(&env, "aborted", |c| rollout_state(c) == Some("Aborted")).await;
    let status = aborted.status.unwrap();
    assert_eq!(status.requests.unwrap().abort.as_deref(), Some("abort-1"));
    tokio::time::sleep(Duration::from_millis(2500)).await;
    assert_eq!(
        since(&env.created, from),
        ["fe1", "fe2"],
        "nothing after the abort"
    );

    // Repeating the same request id is safe; a retry clears the abort and the rollout goes on.
    annotate(
        &env,
        json!({"express.dev/abort": "abort-1", "express.dev/retry": "retry-1"}),
    )
    .await;
    settle(&env).await;
    assert_eq!(
        since(&env.created, from),
        ["fe1", "fe2", "be", "fe3", "fe4"]
    );
    let status = cluster(&env).await.status.unwrap();
    assert_eq!(status.requests.unwrap().retry.as_deref(), Some("retry-1"));
    assert!(status.abort.is_none());
}

#[tokio::test]
async fn abort_with_rollback_returns_changed_nodes_newest_first() {
    let env = env().await;
    five_node_tenant(&env, json!({})).await;
    let from = env.created.lock().unwrap().len();
    change(&env, slow_version("v2")).await;
    wait_created(&env, from, 2).await;
    annotate(
        &env,
        json!({"express.dev/abort": "abort-1", "express.dev/abort-rollback": "true"}),
    )
    .await;
    wait_for(&env, "rolled back", |c| {
        rollout_state(c) == Some("Aborted")
            && c.status
                .as_ref()
                .and_then(|s| s.nodes.as_ref())
                .is_some_and(|n| n.ready == 5)
    })
    .await;
    assert_eq!(since(&env.created, from), ["fe1", "fe2", "fe2", "fe1"]);
    assert!(
        pod_versions(&env)
            .await
            .values()
            .all(|(v, r)| v == "v1" && *r)
    );
}

/// Tracks how many nodes are in flight (old pod terminating, or new pod not Ready) at every
/// moment the pod watch shows, and the highest count seen.
fn watch_in_flight(client: &kube::Client) -> Arc<Mutex<usize>> {
    let highest = Arc::new(Mutex::new(0));
    let (client, seen) = (client.clone(), highest.clone());
    tokio::spawn(async move {
        let stream = Api::<Pod>::namespaced(client, NS)
            .watch(&WatchParams::default(), "0")
            .await
            .expect("watch");
        let mut stream = std::pin::pin!(stream);
        let mut in_flight: HashMap<String, bool> = HashMap::new();
        while let Some(Ok(event)) = stream.next().await {
            match event {
                WatchEvent::Added(pod) | WatchEvent::Modified(pod) => {
                    let name = pod.metadata.name.clone().unwrap_or_default();
                    let flying = pod.metadata.deletion_timestamp.is_some() || !pod_ready(&pod);
                    in_flight.insert(name, flying);
                }
                WatchEvent::Deleted(pod) => {
                    // Gone: its node stays in flight until the new pod is Ready.
                    in_flight.insert(pod.metadata.name.clone().unwrap_or_default(), true);
                }
                _ => {}
            }
            let now = in_flight.values().filter(|f| **f).count();
            let mut highest = seen.lock().unwrap();
            *highest = (*highest).max(now);
        }
    });
    highest
}

#[tokio::test]
async fn max_concurrent_three_never_has_more_than_three_in_flight() {
    let env = env().await;
    let names = ["fe1", "fe2", "fe3", "fe4", "fe5", "fe6", "fe7"];
    let fes = frontends(&names);
    let fes: Vec<(&str, Value)> = fes.iter().map(|(n, v)| (n.as_str(), v.clone())).collect();
    tenant(
        &env,
        json!({"dependencies": {"disabled": true}, "rollout": {"maxConcurrent": 3}}),
        &fes,
    )
    .await;
    settle(&env).await;
    let highest = watch_in_flight(&env.client);
    tokio::time::sleep(Duration::from_millis(300)).await;
    *highest.lock().unwrap() = 0;
    change(&env, v("v2")).await;
    settle(&env).await;
    let highest = *highest.lock().unwrap();
    assert_eq!(highest, 3, "at most three in flight, and three used");
    assert!(
        pod_versions(&env)
            .await
            .values()
            .all(|(v, r)| v == "v2" && *r)
    );
}

#[tokio::test]
async fn leader_failover_mid_rollout_finishes_it_once() {
    let env = env_without_operator().await;
    let mut contenders = Contenders::start(&env).await;
    let (alpha_leader, beta_leader) = (
        contenders.alpha_leader.clone(),
        contenders.beta_leader.clone(),
    );
    let fes = frontends(&FIVE);
    let fes: Vec<(&str, Value)> = fes.iter().map(|(n, v)| (n.as_str(), v.clone())).collect();
    tenant(&env, json!({}), &fes).await;
    settle(&env).await;
    assert!(*alpha_leader.borrow() && !*beta_leader.borrow());

    let from = env.created.lock().unwrap().len();
    let deleted_from = env.deleted.lock().unwrap().len();
    change(&env, slow_version("v2")).await;
    wait_created(&env, from, 2).await;
    contenders.kill_alpha();
    settle(&env).await;
    assert_eq!(
        since(&env.created, from),
        ["fe1", "fe2", "be", "fe3", "fe4"]
    );
    assert_eq!(
        since(&env.deleted, deleted_from).len(),
        5,
        "every node replaced exactly once"
    );
    assert!(*beta_leader.borrow());
}
