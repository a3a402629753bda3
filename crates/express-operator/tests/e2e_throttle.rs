//! The client-side API limit end to end: the real controller, its client built as `run` builds
//! it with a low `--kube-qps`, provisions and upgrades three tenants. kubesim counts every
//! request the operator sends (by its User-Agent); sampled all along, no window ever holds more
//! than the bucket allows, the limit really was what held the operator back (requests were
//! throttled), and every tenant still upgraded in the DESIGN order.
#![allow(clippy::expect_used, clippy::unwrap_used)] // tests fail loudly on unexpected values

mod support;

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use express_api::{ClusterPhase, ExpressCluster};
use express_operator::controller::{self, Settings};
use express_operator::metrics::Metrics;
use express_operator::throttle::{self, ApiLimits};
use futures::StreamExt;
use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, Patch, PatchParams, WatchEvent, WatchParams};
use serde_json::json;
use support::*;

const AGENT: &str = "express-operator-throttled";
const TEAMS: [&str; 3] = ["team-a", "team-b", "team-c"];
const LIMITS: ApiLimits = ApiLimits {
    qps: 15.0,
    burst: 5,
};

/// Requests `AGENT` sent that the limit applies to: everything but watches.
fn limited_requests(sim: &kubesim::KubeSim) -> u64 {
    sim.counters()
        .by_agent
        .get(AGENT)
        .into_iter()
        .flatten()
        .filter(|(call, _)| !call.starts_with("watch "))
        .map(|(_, n)| n)
        .sum()
}

async fn tenant_in(client: &kube::Client, ns: &str) {
    express_operator::install::create_namespace(client, ns)
        .await
        .unwrap();
    let node = serde_json::to_value(express_api::NodeSpec::for_cluster("shop")).unwrap();
    let documents = [
        json!({"apiVersion": "express.dev/v1alpha1", "kind": "ExpressCluster", "metadata": {"name": "shop"},
               "spec": {"rollout": {"settleSeconds": 0},
                        "defaults": {"backend": {"expressVersion": "v1"}, "frontend": {"expressVersion": "v1"}}}}),
        json!({"apiVersion": "express.dev/v1alpha1", "kind": "Backend", "metadata": {"name": "shop-be"}, "spec": node}),
        json!({"apiVersion": "express.dev/v1alpha1", "kind": "Frontend", "metadata": {"name": "shop-fe1"}, "spec": node}),
        json!({"apiVersion": "express.dev/v1alpha1", "kind": "Frontend", "metadata": {"name": "shop-fe2"}, "spec": node}),
    ];
    for document in documents {
        let kind = document["kind"].as_str().unwrap();
        let name = document["metadata"]["name"].as_str().unwrap();
        let resource = kube::discovery::ApiResource::from_gvk(&kube::api::GroupVersionKind::gvk(
            "express.dev",
            "v1alpha1",
            kind,
        ));
        Api::<kube::api::DynamicObject>::namespaced_with(client.clone(), ns, &resource)
            .patch(
                name,
                &PatchParams::apply("kubectl").force(),
                &Patch::Apply(&document),
            )
            .await
            .unwrap();
    }
}

async fn healthy_everywhere(client: &kube::Client, version: &str) -> bool {
    for ns in TEAMS {
        let Ok(cluster) = Api::<ExpressCluster>::namespaced(client.clone(), ns)
            .get("shop")
            .await
        else {
            return false;
        };
        let status = cluster.status.as_ref();
        let done = status.is_some_and(|s| {
            s.phase == Some(ClusterPhase::Healthy)
                && s.observed_generation == cluster.metadata.generation
        }) && cluster
            .spec
            .defaults
            .frontend
            .as_ref()
            .and_then(|d| d.express_version.as_deref())
            == Some(version);
        if !done {
            return false;
        }
    }
    true
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_fleet_upgrade_under_a_low_qps_stays_under_the_limit_and_keeps_the_order() {
    let (sim, client) = kubesim_with_crds(0.15).await;
    express_operator::install::create_namespace(&client, "express-system")
        .await
        .unwrap();

    // Every pod deletion, per namespace, in the order the API saw them.
    let deleted: Arc<Mutex<BTreeMap<String, Vec<String>>>> = Arc::default();
    let stream = Api::<Pod>::all(client.clone())
        .watch(&WatchParams::default(), "0")
        .await
        .unwrap();
    let log = deleted.clone();
    tokio::spawn(async move {
        let mut stream = std::pin::pin!(stream);
        while let Some(Ok(event)) = stream.next().await {
            if let WatchEvent::Deleted(pod) = event {
                log.lock()
                    .unwrap()
                    .entry(pod.metadata.namespace.unwrap_or_default())
                    .or_default()
                    .push(pod.metadata.name.unwrap_or_default());
            }
        }
    });

    // Sample the operator's request count all along.
    let samples: Arc<Mutex<Vec<(Instant, u64)>>> = Arc::default();
    let sim = Arc::new(sim);
    let (s, recorder) = (samples.clone(), sim.clone());
    let sampler = tokio::spawn(async move {
        loop {
            let count = limited_requests(&recorder);
            s.lock().unwrap().push((Instant::now(), count));
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    });

    let metrics = Metrics::new();
    let operator_client = throttle::client(
        sim.agent_config(AGENT).unwrap(),
        LIMITS,
        "default",
        metrics.clone(),
    )
    .unwrap();
    let operator = tokio::spawn(controller::run(
        operator_client,
        Settings::cluster_wide(AGENT, 4),
        metrics.clone(),
        tokio::sync::watch::channel(true).1,
    ));

    for ns in TEAMS {
        tenant_in(&client, ns).await;
    }
    wait_until_for("provisioned", Duration::from_secs(90), async || {
        healthy_everywhere(&client, "v1").await
    })
    .await;
    for ns in TEAMS {
        Api::<ExpressCluster>::namespaced(client.clone(), ns)
            .patch(
                "shop",
                &PatchParams::default(),
                &Patch::Merge(json!({"spec": {"defaults": {
                    "backend": {"expressVersion": "v2"}, "frontend": {"expressVersion": "v2"}}}})),
            )
            .await
            .unwrap();
    }
    wait_until_for("upgraded", Duration::from_secs(90), async || {
        healthy_everywhere(&client, "v2").await
    })
    .await;
    sampler.abort();
    operator.abort();

    let samples = samples.lock().unwrap().clone();
    let sent = samples.last().unwrap().1;
    assert!(sent > 100, "a real workload: {sent} requests");
    // A request is counted when it reaches kubesim; allow it 100 ms from the bucket, and one
    // for the sample taken mid-request.
    let mut worst = (0.0, 0, 0.0);
    for (i, (t1, n1)) in samples.iter().enumerate() {
        for (t2, n2) in &samples[i + 1..] {
            let window = t2.duration_since(*t1).as_secs_f64();
            let allowed = f64::from(LIMITS.burst) + LIMITS.qps * (window + 0.1) + 1.0;
            let seen = n2 - n1;
            assert!(
                seen as f64 <= allowed,
                "{seen} requests in {window:.2} s, the limit allows {allowed:.1}"
            );
            if window >= 1.0 && seen as f64 / window > worst.2 {
                worst = (window, seen, seen as f64 / window);
            }
        }
    }
    eprintln!(
        "{sent} requests; the busiest window of at least 1 s: {} in {:.2} s ({:.1}/s, limit {}/s)",
        worst.1, worst.0, worst.2, LIMITS.qps
    );
    assert!(
        metrics.encode().lines().any(|line| line
            .strip_prefix("express_operator_api_requests_throttled_total ")
            .is_some_and(|n| n.parse::<u64>().is_ok_and(|n| n > 0))),
        "the limit held the operator back: {}",
        metrics.encode()
    );

    // The reconciles that drove a tenant counted what they sent: some of the requests, never
    // more than all of them.
    let text = metrics.encode();
    let driven_requests = sample(
        &text,
        "express_operator_driven_reconcile_api_requests_total",
    );
    assert!(
        driven_requests > 0.0 && driven_requests <= sent as f64,
        "{driven_requests} of {sent} requests sent by driven reconciles"
    );
    assert!(
        sample(
            &text,
            "express_operator_driven_reconciles_total{result=\"ok\"}"
        ) <= sample(&text, "express_operator_reconciles_total{result=\"ok\"}")
    );

    let deleted = deleted.lock().unwrap().clone();
    for ns in TEAMS {
        let order = deleted.get(ns).cloned().unwrap_or_default();
        assert_eq!(
            order,
            ["shop-fe1", "shop-fe2", "shop-be"],
            "{ns}: the default upgrade order (the backend after two frontends), each node once"
        );
    }
}

/// A reconcile's count holds the requests sent from its own task, and only those: another
/// task's requests, and requests outside any reconcile, are not counted (nor do they fail).
#[tokio::test]
async fn a_reconcile_counts_the_requests_it_sends_and_no_others() {
    let (sim, _) = kubesim_with_crds(0.1).await;
    let client = throttle::client(
        sim.agent_config(AGENT).unwrap(),
        LIMITS,
        "default",
        Metrics::new(),
    )
    .unwrap();
    let pods: Api<Pod> = Api::namespaced(client, "default");
    let ((), sent) = throttle::counting_requests(async {
        pods.list(&Default::default()).await.unwrap();
        pods.get_opt("none").await.unwrap();
        let elsewhere = pods.clone();
        tokio::spawn(async move { elsewhere.list(&Default::default()).await.unwrap() })
            .await
            .unwrap();
    })
    .await;
    assert_eq!(sent, 2);
    pods.list(&Default::default()).await.unwrap();
}
