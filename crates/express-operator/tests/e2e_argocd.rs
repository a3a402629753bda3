//! The Argo CD health checks (deploy/argocd) fed what the operator really writes: objects read
//! raw from a live kubesim cluster in each state the operator brings a tenant to (healthy,
//! rolling out, paused, bouncing, failed), through the scripts under Lua 5.1.
#![allow(clippy::expect_used, clippy::unwrap_used)] // tests fail loudly on unexpected values

mod support;

use std::time::{Duration, Instant};

use argocd_checks::{Health, health, kind_dir, read};
use express_api::{Backend, ExpressCluster, Frontend};
use kube::api::{Api, ApiResource, DynamicObject};
use serde_json::{Value, json};
use support::*;

/// The object as the API serves it (what Argo CD reads), through the kind's health script.
async fn verdict<K>(env: &Env, name: &str) -> (Health, Value)
where
    K: kube::Resource<DynamicType = ()>,
{
    let resource = ApiResource::erase::<K>(&());
    let object = Api::<DynamicObject>::namespaced_with(env.client.clone(), NS, &resource)
        .get(name)
        .await
        .expect("object");
    let object = serde_json::to_value(object).expect("json");
    let script = read(&kind_dir(&K::kind(&())).join("health.lua")).expect("script");
    (health(&script, &object).expect("health"), object)
}

/// Polls the ExpressCluster's verdict until `wanted` holds.
async fn cluster_until(env: &Env, what: &str, wanted: impl Fn(&Health) -> bool) -> Health {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let (got, object) = verdict::<ExpressCluster>(env, "acme").await;
        if wanted(&got) {
            return got;
        }
        assert!(
            Instant::now() < deadline,
            "never {what}: last {got:?} from {}",
            object["status"]
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

fn slow_version(version: &str, behavior: &str) -> Value {
    let template = json!({"metadata": {"annotations": {
        "kubesim.dev/startup-seconds": "1", "kubesim.dev/behavior": behavior}}});
    json!({"spec": {"defaults": {
        "backend": {"expressVersion": version, "podTemplate": template},
        "frontend": {"expressVersion": version, "podTemplate": template}}}})
}

#[tokio::test]
async fn the_health_checks_read_what_the_operator_writes() {
    let env = env().await;
    let frontends = [("fe1", json!({})), ("fe2", json!({})), ("fe3", json!({}))];
    tenant(&env, json!({}), &frontends).await;
    settle(&env).await;

    // Healthy: the cluster and every node.
    let (got, _) = verdict::<ExpressCluster>(&env, "acme").await;
    assert_eq!(got.status, "Healthy", "{got:?}");
    assert_eq!(
        verdict::<Backend>(&env, "acme-be").await.0.status,
        "Healthy"
    );
    assert_eq!(
        verdict::<Frontend>(&env, "acme-fe2").await.0.status,
        "Healthy"
    );

    // Rolling out: Progressing, saying which node of how many.
    change(&env, slow_version("v2", "ready")).await;
    let got = cluster_until(&env, "rolling out", |h| {
        h.status == "Progressing" && h.message.starts_with("node ")
    })
    .await;
    assert!(got.message.contains("/4: acme-"), "{got:?}");
    settle(&env).await;
    assert_eq!(
        verdict::<ExpressCluster>(&env, "acme").await.0.status,
        "Healthy"
    );

    // Paused with a change pending: the cluster and the held nodes are Suspended.
    change(&env, json!({"spec": {"paused": true}})).await;
    change(&env, slow_version("v3", "ready")).await;
    let got = cluster_until(&env, "suspended", |h| h.status == "Suspended").await;
    assert!(got.message.contains("paused"), "{got:?}");
    let deadline = Instant::now() + Duration::from_secs(10);
    while verdict::<Frontend>(&env, "acme-fe1").await.0.status != "Suspended" {
        assert!(Instant::now() < deadline, "fe1 never Suspended");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    change(&env, json!({"spec": {"paused": false}})).await;
    settle(&env).await;

    // A bounce under way: the node is Progressing, saying which bounce and where it stands.
    env.sim.kubelet().add_rule(kubesim::kubelet::KubeletRule {
        labels: [("express.dev/node".to_owned(), "acme-fe2".to_owned())].into(),
        startup_seconds: Some(1.0),
        ..Default::default()
    });
    Api::<Frontend>::namespaced(env.client.clone(), NS)
        .patch(
            "acme-fe2",
            &kube::api::PatchParams::default(),
            &kube::api::Patch::Merge(
                json!({"metadata": {"annotations": {"express.dev/bounce": "b1"}}}),
            ),
        )
        .await
        .expect("bounce");
    let deadline = Instant::now() + Duration::from_secs(10);
    let bouncing = loop {
        let (fe2, _) = verdict::<Frontend>(&env, "acme-fe2").await;
        if fe2.status == "Progressing" && fe2.message.starts_with("bounce b1: ") {
            break fe2;
        }
        assert!(Instant::now() < deadline, "never bouncing: {fe2:?}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    };
    assert!(bouncing.message.contains("acme-fe2"), "{bouncing:?}");
    settle(&env).await;
    assert_eq!(
        verdict::<Frontend>(&env, "acme-fe2").await.0.status,
        "Healthy"
    );

    // A crash-looping version fails the rollout: Degraded, with the operator's message.
    change(&env, slow_version("v4", "crash-loop")).await;
    let got = cluster_until(&env, "degraded", |h| h.status == "Degraded").await;
    assert!(got.message.contains("crash-looping"), "{got:?}");
    // The failed node is first rolled back (its pod changing: Progressing), then shows its
    // failure (Degraded) while its spec still asks for the refused revision.
    let deadline = Instant::now() + Duration::from_secs(20);
    let fe1 = loop {
        let (fe1, _) = verdict::<Frontend>(&env, "acme-fe1").await;
        if fe1.status == "Degraded" {
            break fe1;
        }
        assert!(
            fe1.status == "Progressing" && Instant::now() < deadline,
            "{fe1:?}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    assert!(fe1.message.contains("failed on this node"), "{fe1:?}");
}
