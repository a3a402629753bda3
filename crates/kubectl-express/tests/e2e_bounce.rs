//! DESIGN section 6 end to end: the real controller against kubesim, bounces requested with the
//! real `kubectl-express` binary (or annotations written as a user would), and every assertion
//! on what the API shows: pods, watch events, kubesim's record of delete requests, status.

#![allow(clippy::expect_used, clippy::unwrap_used)] // tests fail loudly on unexpected values

#[path = "../../express-operator/tests/support/mod.rs"]
mod support;

mod cli;

use std::time::{Duration, Instant};

use cli::kubectl_express;
use express_api::keys::{ANNOTATION_APP_STATE, ANNOTATION_BOUNCE, ANNOTATION_SHUTDOWN_PROTECTION};
use express_api::{BouncePhase, BounceStatus, ExpressCluster, Frontend};
use futures::StreamExt;
use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, Patch, PatchParams, WatchEvent, WatchParams};
use kubesim::kubelet::KubeletRule;
use serde_json::{Value, json};
use support::*;

async fn bounce_of(env: &Env, name: &str) -> Option<BounceStatus> {
    frontend(env, name)
        .await
        .status
        .and_then(|s| s.bounce.map(|b| *b))
}

async fn wait_for_bounce(env: &Env, name: &str, phase: BouncePhase) -> BounceStatus {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let bounce = bounce_of(env, name).await;
        if let Some(b) = bounce.as_ref().filter(|b| b.phase == Some(phase)) {
            return b.clone();
        }
        assert!(Instant::now() < deadline, "never {phase:?}: {bounce:?}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

async fn pod(env: &Env, name: &str) -> Option<Pod> {
    Api::<Pod>::namespaced(env.client.clone(), NS)
        .get_opt(&format!("acme-{name}"))
        .await
        .expect("pod")
}

async fn annotate(env: &Env, kind_api: &str, name: &str, annotations: Value) {
    let patch = json!({"metadata": {"annotations": annotations}});
    let params = PatchParams::default();
    match kind_api {
        "pod" => {
            Api::<Pod>::namespaced(env.client.clone(), NS)
                .patch(&format!("acme-{name}"), &params, &Patch::Merge(&patch))
                .await
                .expect("annotate pod");
        }
        _ => {
            Api::<Frontend>::namespaced(env.client.clone(), NS)
                .patch(&format!("acme-{name}"), &params, &Patch::Merge(&patch))
                .await
                .expect("annotate frontend");
        }
    }
}

async fn events_with_reason(env: &Env, reason: &str) -> Vec<String> {
    Api::<k8s_openapi::api::events::v1::Event>::namespaced(env.client.clone(), NS)
        .list(&Default::default())
        .await
        .expect("events")
        .items
        .into_iter()
        .filter(|e| e.reason.as_deref() == Some(reason))
        .map(|e| e.note.unwrap_or_default())
        .collect()
}

/// Deletes of one pod the clients sent, from kubesim's record.
fn pod_deletes(env: &Env, name: &str) -> Vec<kubesim::faults::DeleteRequest> {
    env.sim
        .deletes()
        .into_iter()
        .filter(|d| d.resource == "pods" && d.name == format!("acme-{name}"))
        .collect()
}

#[tokio::test]
async fn a_bounce_restarts_the_pod_once_on_its_revision_after_disabling_shutdown_protection() {
    let env = ready_tenant(&["fe1", "fe2"]).await;
    let before = pod(&env, "fe1").await.unwrap();
    let revision =
        before.metadata.labels.clone().unwrap()["express.dev/deployment-revision"].clone();
    // Watch the pod from now on, as any client would.
    let stream = Api::<Pod>::namespaced(env.client.clone(), NS)
        .watch(
            &WatchParams::default().fields("metadata.name=acme-fe1"),
            before.metadata.resource_version.as_deref().unwrap(),
        )
        .await
        .expect("watch");
    let seen = std::sync::Arc::new(std::sync::Mutex::new(Vec::<(bool, bool)>::new()));
    let record = seen.clone();
    tokio::spawn(async move {
        let mut stream = std::pin::pin!(stream);
        while let Some(Ok(WatchEvent::Modified(p))) = stream.next().await {
            let protected = p
                .metadata
                .annotations
                .as_ref()
                .and_then(|a| a.get(ANNOTATION_SHUTDOWN_PROTECTION))
                .map(String::as_str)
                != Some("disabled");
            record
                .lock()
                .unwrap()
                .push((protected, p.metadata.deletion_timestamp.is_some()));
        }
    });
    let created_from = env.created.lock().unwrap().len();
    let deleted_from = env.deleted.lock().unwrap().len();

    let (code, stdout, stderr) =
        kubectl_express(&env, &["bounce", "acme-fe1", "-n", NS, "--wait"]).await;
    assert_eq!(code, 0, "{stdout}\n{stderr}");
    let id = stdout.lines().next().unwrap().to_owned();
    assert!(id.starts_with("cli-"), "{stdout}");
    assert!(stdout.contains("Terminating: "), "{stdout}");
    assert!(
        stdout
            .lines()
            .last()
            .unwrap()
            .starts_with("Succeeded: pod acme-fe1 is Ready again"),
        "{stdout}"
    );

    let bounce = bounce_of(&env, "fe1").await.unwrap();
    assert_eq!(
        (bounce.request_id.as_str(), bounce.phase),
        (id.as_str(), Some(BouncePhase::Succeeded))
    );
    assert!(bounce.started_at.is_some() && bounce.finished_at.is_some());
    let after = pod(&env, "fe1").await.unwrap();
    assert_ne!(after.metadata.uid, before.metadata.uid);
    assert_eq!(
        after.metadata.labels.unwrap()["express.dev/deployment-revision"],
        revision
    );
    assert_eq!(since(&env.created, created_from), ["fe1"]);
    assert_eq!(since(&env.deleted, deleted_from), ["fe1"]);
    let deletes = pod_deletes(&env, "fe1");
    assert_eq!(deletes.len(), 1, "{deletes:?}");
    assert_eq!(
        deletes[0].grace_period_seconds, None,
        "never a grace period of its own"
    );
    assert_eq!(deletes[0].precondition_uid, before.metadata.uid);
    // The annotation was on the pod before its deletion started.
    let seen = seen.lock().unwrap().clone();
    let first_deleting = seen
        .iter()
        .position(|(_, deleting)| *deleting)
        .expect("deletion seen");
    assert!(
        seen[..first_deleting]
            .iter()
            .any(|(protected, _)| !protected),
        "shutdown protection not disabled before the deletion: {seen:?}"
    );
    assert_eq!(
        frontend(&env, "fe1").await.status.unwrap().phase,
        Some(express_api::NodePhase::Ready)
    );
    // The other nodes were left alone.
    assert!(pod_deletes(&env, "fe2").is_empty());
}

#[tokio::test]
async fn rebuilding_is_refused_unless_forced_and_catchup_warns() {
    let env = ready_tenant(&["fe1", "fe2"]).await;
    annotate(
        &env,
        "pod",
        "fe1",
        json!({ANNOTATION_APP_STATE: "Rebuilding"}),
    )
    .await;
    let (code, stdout, stderr) =
        kubectl_express(&env, &["bounce", "acme-fe1", "-n", NS, "--wait"]).await;
    assert_eq!(code, 1, "{stdout}\n{stderr}");
    assert!(
        stderr.contains("Refused") && stderr.contains("Rebuilding"),
        "{stderr}"
    );
    assert!(pod_deletes(&env, "fe1").is_empty());
    assert!(!events_with_reason(&env, "BounceRefused").await.is_empty());

    let (code, stdout, stderr) =
        kubectl_express(&env, &["bounce", "acme-fe1", "-n", NS, "--wait", "--force"]).await;
    assert_eq!(code, 0, "{stdout}\n{stderr}");
    assert_eq!(pod_deletes(&env, "fe1").len(), 1);

    annotate(&env, "pod", "fe2", json!({ANNOTATION_APP_STATE: "Catchup"})).await;
    let (code, stdout, stderr) =
        kubectl_express(&env, &["bounce", "acme-fe2", "-n", NS, "--wait"]).await;
    assert_eq!(code, 0, "{stdout}\n{stderr}");
    assert!(stdout.contains("catching up"), "{stdout}");
    let warnings = events_with_reason(&env, "BounceDuringCatchup").await;
    assert!(
        warnings.iter().any(|n| n.contains("acme-fe2")),
        "{warnings:?}"
    );
}

#[tokio::test]
async fn down_nodes_missing_pods_and_missing_nodes_get_clear_exit_codes() {
    let env = env().await;
    tenant(
        &env,
        json!({"paused": true}),
        &[("fe1", json!({})), ("fe2", json!({"up": false}))],
    )
    .await;
    tokio::time::sleep(Duration::from_millis(300)).await;

    let (code, _, stderr) =
        kubectl_express(&env, &["bounce", "acme-fe2", "-n", NS, "--wait"]).await;
    assert_eq!(code, 1, "{stderr}");
    assert!(
        stderr.contains("Refused") && stderr.contains("intentionally down"),
        "{stderr}"
    );

    // Paused from the start: fe1 has no pod. Refused at once, not left waiting for the pause.
    let (code, _, stderr) =
        kubectl_express(&env, &["bounce", "acme-fe1", "-n", NS, "--wait"]).await;
    assert_eq!(code, 1, "{stderr}");
    assert!(stderr.contains("has no pod"), "{stderr}");

    let (code, stdout, stderr) =
        kubectl_express(&env, &["bounce", "acme-fe9", "-n", NS, "--wait"]).await;
    assert_eq!((code, stdout.as_str()), (2, ""), "{stderr}");
    assert!(
        stderr.contains("no Backend or Frontend named acme-fe9 in namespace tenant"),
        "{stderr}"
    );

    let (code, _, stderr) =
        kubectl_express(&env, &["bounce", "acme-fe1", "-n", NS, "--timeout", "soon"]).await;
    assert_eq!(code, 2, "{stderr}");
    assert!(stderr.contains("invalid duration"), "{stderr}");
    assert!(env.sim.deletes().is_empty(), "{:?}", env.sim.deletes());
}

#[tokio::test]
async fn a_pod_stuck_terminating_fails_the_bounce_and_is_never_forced() {
    let env = ready_tenant(&["fe1"]).await;
    env.sim.kubelet().add_rule(KubeletRule {
        labels: [("express.dev/node".to_owned(), "acme-fe1".to_owned())].into(),
        behavior: Some(kubesim::kubelet::Behavior::StuckTerminating),
        ..KubeletRule::default()
    });
    let started = Instant::now();
    let (code, stdout, stderr) = kubectl_express(
        &env,
        &["bounce", "acme-fe1", "-n", NS, "--wait", "--timeout", "3s"],
    )
    .await;
    assert_eq!(code, 1, "{stdout}\n{stderr}");
    assert!(
        stderr.contains("stuck terminating for 3s; not forced"),
        "{stderr}"
    );
    assert!(started.elapsed() >= Duration::from_secs(3));
    let stuck = pod(&env, "fe1").await.expect("the pod is still there");
    assert!(stuck.metadata.deletion_timestamp.is_some());
    let deletes = pod_deletes(&env, "fe1");
    assert_eq!(deletes.len(), 1, "{deletes:?}");
    assert!(
        env.sim
            .deletes()
            .iter()
            .all(|d| d.grace_period_seconds != Some(0))
    );
    // Left to normal reconciliation: nothing more is sent while it stays.
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert_eq!(pod_deletes(&env, "fe1").len(), 1);
}

#[tokio::test]
async fn a_new_pod_never_ready_fails_the_bounce_at_its_timeout() {
    let env = ready_tenant(&["fe1"]).await;
    env.sim.kubelet().add_rule(KubeletRule {
        labels: [("express.dev/node".to_owned(), "acme-fe1".to_owned())].into(),
        behavior: Some(kubesim::kubelet::Behavior::NeverReady),
        ..KubeletRule::default()
    });
    let (code, stdout, stderr) = kubectl_express(
        &env,
        &["bounce", "acme-fe1", "-n", NS, "--wait", "--timeout", "2s"],
    )
    .await;
    assert_eq!(code, 1, "{stdout}\n{stderr}");
    assert!(stdout.contains("Starting: "), "{stdout}");
    assert!(stderr.contains("not Ready within 2s"), "{stderr}");
    assert_eq!(pod_deletes(&env, "fe1").len(), 1);
}

#[tokio::test]
async fn a_bounce_during_a_rollout_waits_for_its_slot_and_the_rollout_waits_for_it() {
    let env = ready_tenant(&["fe1", "fe2", "fe3"]).await;
    // New frontend pods take a while to be Ready; the Backend keeps its revision.
    env.sim.kubelet().add_rule(KubeletRule {
        image: Some(":v2".into()),
        startup_seconds: Some(1.5),
        ..KubeletRule::default()
    });
    let created_from = env.created.lock().unwrap().len();
    Api::<ExpressCluster>::namespaced(env.client.clone(), NS)
        .patch(
            "acme",
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"defaults": {"frontend": {"expressVersion": "v2"}}}})),
        )
        .await
        .unwrap();
    // Once fe1's upgrade holds the only slot, bounce the Backend.
    let deadline = Instant::now() + Duration::from_secs(20);
    while !since(&env.created, created_from).contains(&"fe1".to_owned()) {
        assert!(Instant::now() < deadline);
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let (code, _, stderr) = kubectl_express(&env, &["bounce", "acme-be", "-n", NS]).await;
    assert_eq!(code, 0, "{stderr}");
    let backend = || async {
        Api::<express_api::Backend>::namespaced(env.client.clone(), NS)
            .get("acme-be")
            .await
            .unwrap()
            .status
            .and_then(|s| s.bounce)
    };
    let deadline = Instant::now() + Duration::from_secs(20);
    let pending = loop {
        if let Some(b) = backend()
            .await
            .filter(|b| b.phase == Some(BouncePhase::Pending))
        {
            break b;
        }
        assert!(Instant::now() < deadline, "{:?}", backend().await);
        tokio::time::sleep(Duration::from_millis(10)).await;
    };
    assert!(pending.message.unwrap().contains("free slot"));
    settle(&env).await;
    let deadline = Instant::now() + Duration::from_secs(20);
    while backend().await.and_then(|b| b.phase) != Some(BouncePhase::Succeeded) {
        assert!(Instant::now() < deadline);
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    settle(&env).await;
    // One at a time: fe1, then the bounce, then the rest of the rollout.
    assert_eq!(
        since(&env.created, created_from),
        ["fe1", "be", "fe2", "fe3"]
    );
}

#[tokio::test]
async fn a_bounce_while_paused_waits_and_runs_after_resume() {
    let env = ready_tenant(&["fe1"]).await;
    change(&env, json!({"spec": {"paused": true}})).await;
    let (code, _, stderr) = kubectl_express(&env, &["bounce", "acme-fe1", "-n", NS]).await;
    assert_eq!(code, 0, "{stderr}");
    let pending = wait_for_bounce(&env, "fe1", BouncePhase::Pending).await;
    assert!(pending.message.unwrap().contains("paused"));
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert!(pod_deletes(&env, "fe1").is_empty());
    change(&env, json!({"spec": {"paused": false}})).await;
    wait_for_bounce(&env, "fe1", BouncePhase::Succeeded).await;
    assert_eq!(pod_deletes(&env, "fe1").len(), 1);
}

#[tokio::test]
async fn the_same_request_id_twice_restarts_once() {
    let env = ready_tenant(&["fe1"]).await;
    annotate(&env, "frontend", "fe1", json!({ANNOTATION_BOUNCE: "same"})).await;
    wait_for_bounce(&env, "fe1", BouncePhase::Succeeded).await;
    settle(&env).await;
    // Applied again (as a re-sync would), alongside another change that wakes the operator.
    annotate(
        &env,
        "frontend",
        "fe1",
        json!({ANNOTATION_BOUNCE: "same", "note": "re-applied"}),
    )
    .await;
    tokio::time::sleep(Duration::from_millis(800)).await;
    settle(&env).await;
    assert_eq!(pod_deletes(&env, "fe1").len(), 1);
}

#[tokio::test]
async fn an_operator_allowed_one_write_per_life_bounces_once_and_succeeds() {
    let env = env_without_operator().await;
    let first = operator(&env.client, "first", tokio::sync::watch::channel(true).1);
    tenant(&env, json!({}), &[("fe1", json!({}))]).await;
    settle(&env).await;
    first.abort();
    let _ = first.await;
    let deleted_from = env.deleted.lock().unwrap().len();
    annotate(
        &env,
        "frontend",
        "fe1",
        json!({ANNOTATION_BOUNCE: "crash-safe"}),
    )
    .await;

    let done = |b: Option<BounceStatus>| {
        b.is_some_and(|b| b.request_id == "crash-safe" && b.phase == Some(BouncePhase::Succeeded))
    };
    let lives = one_write_per_life(
        &env,
        Duration::from_secs(60),
        async || done(bounce_of(&env, "fe1").await),
        async || format!("{:?}", bounce_of(&env, "fe1").await),
    )
    .await;
    assert!(lives >= 4, "the bounce took {lives} lives, one write each");
    assert_eq!(since(&env.deleted, deleted_from), ["fe1"]);
    assert_eq!(
        pod_deletes(&env, "fe1").len(),
        1,
        "{:?}",
        pod_deletes(&env, "fe1")
    );
    let pod = pod(&env, "fe1").await.unwrap();
    assert!(pod.metadata.deletion_timestamp.is_none());
}

#[tokio::test]
async fn bounces_are_counted_by_result() {
    let env = env_without_operator().await;
    let metrics = express_operator::metrics::Metrics::new();
    operator_with_metrics(
        &env.client,
        "metrics",
        tokio::sync::watch::channel(true).1,
        metrics.clone(),
    );
    tenant(
        &env,
        json!({}),
        &[("fe1", json!({})), ("fe2", json!({"up": false}))],
    )
    .await;
    settle(&env).await;
    let (code, _, stderr) =
        kubectl_express(&env, &["bounce", "acme-fe1", "-n", NS, "--wait"]).await;
    assert_eq!(code, 0, "{stderr}");
    let (code, _, _) = kubectl_express(&env, &["bounce", "acme-fe2", "-n", NS, "--wait"]).await;
    assert_eq!(code, 1);
    let text = metrics.encode();
    assert!(
        text.contains("express_operator_bounces_total{result=\"succeeded\"} 1"),
        "{text}"
    );
    assert!(
        text.contains("express_operator_bounces_total{result=\"refused\"} 1"),
        "{text}"
    );
    assert!(
        text.contains("express_operator_actions_total{action=\"bounce_delete_pod\"} 1"),
        "{text}"
    );
}
