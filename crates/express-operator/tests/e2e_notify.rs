//! Notifications end to end (DESIGN section 21), on kubesim with a webhook receiver of the
//! test's own: a tenant provisioned, failed and rolled back, then fixed; the leader killed once
//! the failure was told. Every message is checked as a receiver would: its schema, its HMAC
//! signature, and each notification exactly once across the two leaders.
#![allow(clippy::expect_used, clippy::unwrap_used)] // tests fail loudly on unexpected values

mod support;

use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use express_api::ExpressCluster;
use k8s_openapi::api::core::v1::{ConfigMap, Secret};
use k8s_openapi::api::events::v1::Event;
use kube::api::{Api, ListParams, Patch, PatchParams, PostParams};
use serde_json::{Value, json};
use support::*;

const KEY: &[u8] = b"a signing key of the receiver's";

/// What the receiver got: each body, and whether its signature verified.
#[derive(Default)]
struct Received {
    messages: Vec<(Value, bool)>,
    /// Requests to refuse (503) before accepting.
    refuse: usize,
    refused: usize,
}

type Shared = Arc<Mutex<Received>>;

async fn receive(
    State(shared): State<Shared>,
    headers: HeaderMap,
    body: axum::body::Bytes,
) -> StatusCode {
    let mut received = shared.lock().unwrap();
    if received.refused < received.refuse {
        received.refused += 1;
        return StatusCode::SERVICE_UNAVAILABLE;
    }
    let signature = headers
        .get("x-express-signature-256")
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default()
        .to_owned();
    let verified = signature == express_notify::render::webhook::signature(KEY, &body);
    let json: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
    received.messages.push((json, verified));
    StatusCode::NO_CONTENT
}

/// A receiver on loopback; its URL.
async fn receiver(shared: Shared) -> String {
    let app = axum::Router::new()
        .route("/hook", axum::routing::post(receive))
        .with_state(shared);
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let address = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, app).await });
    format!("http://{address}/hook")
}

async fn configure(env: &Env, config: &str) {
    let maps = Api::<ConfigMap>::namespaced(env.client.clone(), "express-system");
    let map: ConfigMap = serde_json::from_value(json!({
        "metadata": {"name": "express-notifications"},
        "data": {"notifications.yaml": config},
    }))
    .unwrap();
    maps.create(&PostParams::default(), &map).await.unwrap();
    let secret: Secret = serde_json::from_value(json!({
        "metadata": {"name": "express-notifications"},
        "stringData": {"hook-hmac": String::from_utf8_lossy(KEY)},
    }))
    .unwrap();
    Api::<Secret>::namespaced(env.client.clone(), "express-system")
        .create(&PostParams::default(), &secret)
        .await
        .unwrap();
}

fn webhook_config(url: &str, group_seconds: u64, extra: &str) -> String {
    format!(
        "dc: dc-test
destinations:
  - {{name: hook, type: webhook, url: '{url}', signingSecretKey: hook-hmac, groupSeconds: {group_seconds}, waitSeconds: 0}}
subscriptions:
  - {{destination: hook}}
{extra}"
    )
}

/// Every notification received, as (trigger, id), in order.
fn told(shared: &Shared) -> Vec<(String, String)> {
    let received = shared.lock().unwrap();
    received
        .messages
        .iter()
        .flat_map(|(body, _)| {
            body["notifications"]
                .as_array()
                .cloned()
                .unwrap_or_default()
        })
        .map(|n| {
            (
                n["trigger"].as_str().unwrap_or("").to_owned(),
                n["id"].as_str().unwrap_or("").to_owned(),
            )
        })
        .collect()
}

async fn wait_told(shared: &Shared, trigger: &str, count: usize) {
    wait_until_for(
        &format!("{count} {trigger} told"),
        Duration::from_secs(60),
        async || told(shared).iter().filter(|(t, _)| t == trigger).count() >= count,
    )
    .await;
}

async fn patch_cluster(env: &Env, patch: Value) {
    Api::<ExpressCluster>::namespaced(env.client.clone(), NS)
        .patch("acme", &PatchParams::default(), &Patch::Merge(patch))
        .await
        .unwrap();
}

#[tokio::test]
async fn a_failure_and_two_rollouts_are_told_once_each_across_a_leader_kill() {
    let env = env_without_operator().await;
    let shared = Shared::default();
    let url = receiver(shared.clone()).await;
    configure(&env, &webhook_config(&url, 3, "")).await;
    let mut contenders = Contenders::start(&env).await;
    tenant(&env, json!({}), &[("fe1", json!({})), ("fe2", json!({}))]).await;
    settle(&env).await;
    wait_told(&shared, "rollout-done", 1).await;

    // A version whose pods crash: the rollout fails at its first node and rolls back.
    let crash = json!({"metadata": {"annotations": {"kubesim.dev/behavior": "crash-loop"}}});
    patch_cluster(
        &env,
        json!({"spec": {"defaults": {
            "backend": {"expressVersion": "v2", "podTemplate": crash},
            "frontend": {"expressVersion": "v2", "podTemplate": crash}}}}),
    )
    .await;
    wait_told(&shared, "rollout-failed", 1).await;
    // The leader dies once the failure was told; the other takes over from the ledger.
    contenders.kill_alpha();
    patch_cluster(
        &env,
        json!({
            "metadata": {"annotations": {"express.dev/retry": "retry-1"}},
            "spec": {"defaults": {
                "backend": {"expressVersion": "v3", "podTemplate": null},
                "frontend": {"expressVersion": "v3", "podTemplate": null}}}}),
    )
    .await;
    settle(&env).await;
    wait_told(&shared, "rollout-done", 2).await;
    // Long enough for a repeat to show: more than a group interval and a pass.
    tokio::time::sleep(Duration::from_secs(6)).await;
    assert!(*contenders.beta_leader.borrow());

    let told = told(&shared);
    let mut ids: Vec<&String> = told.iter().map(|(_, id)| id).collect();
    ids.sort();
    let before = ids.len();
    ids.dedup();
    assert_eq!(ids.len(), before, "a notification told twice: {told:?}");
    let triggers: Vec<&str> = told
        .iter()
        .map(|(t, _)| t.as_str())
        .filter(|t| *t != "rollout-rolled-back")
        .collect();
    assert_eq!(
        triggers,
        ["rollout-done", "rollout-failed", "rollout-done"],
        "{told:?}"
    );
    let received = shared.lock().unwrap();
    for (body, verified) in &received.messages {
        assert!(verified, "signature: {body}");
        assert_eq!(body["schema"], "express.dev/notifications/v1");
        assert_eq!(body["dc"], "dc-test");
    }
    let failure = received
        .messages
        .iter()
        .flat_map(|(b, _)| b["notifications"].as_array().cloned().unwrap_or_default())
        .find(|n| n["trigger"] == "rollout-failed")
        .unwrap();
    assert_eq!(failure["subject"]["name"], "acme");
    assert_eq!(failure["act"], "kubectl express retry acme -n tenant");
    let facts = failure["facts"].to_string();
    assert!(
        facts.contains("failed node") && facts.contains("acme-"),
        "{facts}"
    );
}

#[tokio::test]
async fn a_refusing_destination_is_retried_shown_failing_then_told_once() {
    let env = env_without_operator().await;
    let shared = Shared::default();
    shared.lock().unwrap().refuse = 3;
    let url = receiver(shared.clone()).await;
    // One subscription that cannot be used: named in an event, the rest works.
    let extra = "  - {destination: nowhere}\n";
    configure(&env, &webhook_config(&url, 1, extra)).await;
    let metrics = express_operator::metrics::Metrics::new();
    operator_with_metrics(
        &env.client,
        "e2e",
        tokio::sync::watch::channel(true).1,
        metrics.clone(),
    );
    tenant(&env, json!({}), &[("fe1", json!({}))]).await;
    settle(&env).await;

    let events = Api::<Event>::namespaced(env.client.clone(), "express-system");
    let reasons = async || -> Vec<(String, String)> {
        events
            .list(&ListParams::default())
            .await
            .unwrap()
            .items
            .into_iter()
            .filter(|e| {
                e.regarding.as_ref().and_then(|r| r.name.as_deref())
                    == Some("express-notifications")
            })
            .map(|e| (e.reason.unwrap_or_default(), e.note.unwrap_or_default()))
            .collect()
    };
    wait_until_for(
        "the failing destination's event",
        Duration::from_secs(40),
        async || {
            reasons()
                .await
                .iter()
                .any(|(r, _)| r == "NotificationsFailing")
        },
    )
    .await;
    wait_told(&shared, "rollout-done", 1).await;
    tokio::time::sleep(Duration::from_secs(3)).await;
    assert_eq!(told(&shared).len(), 1, "{:?}", told(&shared));
    let reasons = reasons().await;
    let invalid = reasons
        .iter()
        .find(|(r, _)| r == "NotificationConfigInvalid");
    assert!(
        invalid.is_some_and(|(_, note)| note.contains("destination \"nowhere\" is not defined")),
        "{reasons:?}"
    );
    let failing = reasons
        .iter()
        .find(|(r, _)| r == "NotificationsFailing")
        .unwrap();
    assert!(failing.1.contains("answered 503"), "{failing:?}");
    assert!(
        reasons.iter().any(|(r, _)| r == "NotificationsDelivered"),
        "{reasons:?}"
    );
    let text = metrics.encode();
    assert!(
        text.contains(r#"express_operator_notifications_total{trigger="rollout-done",destination="hook",outcome="failed"} 3"#),
        "{text}"
    );
    assert!(
        text.contains(r#"express_operator_notifications_total{trigger="rollout-done",destination="hook",outcome="sent"} 1"#),
        "{text}"
    );
    // The ledger says what was sent, and that the destination answers again.
    let ledger = Api::<ConfigMap>::namespaced(env.client.clone(), "express-system")
        .get("express-notified-default")
        .await
        .unwrap();
    let ledger: Value = serde_json::from_str(&ledger.data.unwrap()["ledger.json"]).unwrap();
    assert_eq!(ledger["sent"]["hook"].as_object().map(|m| m.len()), Some(1));
    assert!(ledger["health"]["hook"]["failures"].is_null(), "{ledger}");
}
