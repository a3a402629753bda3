//! Operator benchmarks on kubesim (issue 4): API requests per node upgrade, writes in a steady
//! cluster, rollout wall time against the critical-path lower bound, and 1,000 tenants.
//!
//! `cargo bench -p express-operator --bench operator`; environment: STEADY_SECONDS (default 60),
//! TENANTS (default 1000).
#![allow(clippy::expect_used, clippy::unwrap_used)] // a benchmark aborts on unexpected values

use std::sync::Arc;
use std::time::{Duration, Instant};

use express_api::keys::ANNOTATION_ROLLOUT_ID;
use express_api::{
    Backend, BackendSpec, ExpressCluster, ExpressClusterSpec, Frontend, FrontendSpec, NodeDefaults,
    NodeSpec,
};
use express_operator::controller::{self, Settings};
use express_operator::metrics::{Metrics, ResultLabel};
use futures::StreamExt;
use kube::api::{Api, ListParams, Patch, PatchParams, PostParams};
use kube::core::ObjectMeta;
use kubesim::kubelet::KubeletConfig;
use kubesim::{Config, KubeSim};
use serde_json::json;

fn rss_mib() -> f64 {
    std::fs::read_to_string("/proc/self/status")
        .unwrap_or_default()
        .lines()
        .find(|l| l.starts_with("VmRSS:"))
        .and_then(|l| l.split_whitespace().nth(1))
        .and_then(|kb| kb.parse::<f64>().ok())
        .map_or(0.0, |kb| kb / 1024.0)
}

async fn sim(startup: f64, terminate: f64) -> (KubeSim, kube::Client) {
    let sim = KubeSim::start(Config {
        pod_termination_seconds: terminate,
        kubelet: KubeletConfig {
            startup_seconds: startup,
            terminate_seconds: terminate,
            rules: Vec::new(),
        },
        ..Config::default()
    })
    .await
    .expect("kubesim");
    let client = sim.client().expect("client");
    express_operator::install::install_crds(&client)
        .await
        .expect("CRDs");
    (sim, client)
}

fn operator(
    client: &kube::Client,
    concurrency: usize,
) -> (tokio::task::JoinHandle<()>, Arc<Metrics>) {
    let metrics = Metrics::new();
    let task = tokio::spawn(controller::run(
        client.clone(),
        Settings::cluster_wide("bench", concurrency),
        metrics.clone(),
        tokio::sync::watch::channel(true).1,
    ));
    (task, metrics)
}

/// How a benchmark tenant is delivered: its settle window and the rollout-id it is stamped with.
#[derive(Clone, Copy)]
struct Delivery {
    settle_seconds: u32,
    rollout_id: Option<&'static str>,
}

/// Atomic changes (one write each), so nothing to settle.
const ATOMIC: Delivery = Delivery {
    settle_seconds: 0,
    rollout_id: None,
};

fn meta(name: &str, delivery: Delivery) -> ObjectMeta {
    ObjectMeta {
        name: Some(name.into()),
        annotations: delivery
            .rollout_id
            .map(|id| [(ANNOTATION_ROLLOUT_ID.to_owned(), id.to_owned())].into()),
        ..ObjectMeta::default()
    }
}

async fn tenant(
    client: &kube::Client,
    namespace: &str,
    frontends: usize,
    version: &str,
    delivery: Delivery,
) {
    express_operator::install::create_namespace(client, namespace)
        .await
        .expect("namespace");
    let mut spec = ExpressClusterSpec::default();
    let defaults = NodeDefaults {
        express_version: Some(version.into()),
        ..Default::default()
    };
    spec.defaults.backend = Some(defaults.clone());
    spec.defaults.frontend = Some(defaults);
    spec.rollout.settle_seconds = delivery.settle_seconds;
    let mut cluster = ExpressCluster::new("t", spec);
    cluster.metadata = meta("t", delivery);
    Api::<ExpressCluster>::namespaced(client.clone(), namespace)
        .create(&PostParams::default(), &cluster)
        .await
        .expect("cluster");
    let mut backend = Backend::new("t-be", BackendSpec(NodeSpec::for_cluster("t")));
    backend.metadata = meta("t-be", delivery);
    Api::<Backend>::namespaced(client.clone(), namespace)
        .create(&PostParams::default(), &backend)
        .await
        .expect("backend");
    for i in 1..=frontends {
        let name = format!("t-fe{i}");
        let mut frontend = Frontend::new(&name, FrontendSpec(NodeSpec::for_cluster("t")));
        frontend.metadata = meta(&name, delivery);
        Api::<Frontend>::namespaced(client.clone(), namespace)
            .create(&PostParams::default(), &frontend)
            .await
            .expect("frontend");
    }
}

/// A stamped delivery of a new version: the ExpressCluster (new defaults) first, then every
/// node, one write each, all carrying `rollout_id`. Returns when the last write is done.
async fn stamped_upgrade(
    client: &kube::Client,
    namespace: &str,
    frontends: usize,
    version: &str,
    rollout_id: &str,
) {
    let stamp = json!({"metadata": {"annotations": {ANNOTATION_ROLLOUT_ID: rollout_id}}});
    Api::<ExpressCluster>::namespaced(client.clone(), namespace)
        .patch("t", &PatchParams::default(), &Patch::Merge(json!({
            "metadata": {"annotations": {ANNOTATION_ROLLOUT_ID: rollout_id}},
            "spec": {"defaults": {"backend": {"expressVersion": version}, "frontend": {"expressVersion": version}}}})))
        .await
        .expect("upgrade");
    Api::<Backend>::namespaced(client.clone(), namespace)
        .patch("t-be", &PatchParams::default(), &Patch::Merge(&stamp))
        .await
        .expect("stamp");
    for i in 1..=frontends {
        Api::<Frontend>::namespaced(client.clone(), namespace)
            .patch(
                &format!("t-fe{i}"),
                &PatchParams::default(),
                &Patch::Merge(&stamp),
            )
            .await
            .expect("stamp");
    }
}

async fn healthy(client: &kube::Client, namespace: &str, nodes: u32) {
    let api = Api::<ExpressCluster>::namespaced(client.clone(), namespace);
    loop {
        let status = api.get("t").await.expect("cluster").status;
        if status.as_ref().is_some_and(|s| {
            s.phase == Some(express_api::ClusterPhase::Healthy)
                && s.nodes.as_ref().is_some_and(|n| n.up_to_date == nodes)
        }) {
            return;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

async fn upgrade(client: &kube::Client, namespace: &str, version: &str) {
    Api::<ExpressCluster>::namespaced(client.clone(), namespace)
        .patch("t", &PatchParams::default(), &Patch::Merge(json!({"spec": {"defaults": {"backend": {"expressVersion": version}, "frontend": {"expressVersion": version}}}})))
        .await
        .expect("upgrade");
}

#[tokio::main(flavor = "multi_thread")]
async fn main() {
    let steady_seconds: u64 = std::env::var("STEADY_SECONDS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(60);
    let tenants: usize = std::env::var("TENANTS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(1000);

    // 1. API requests per node upgrade, and writes in a steady cluster.
    {
        let (sim, client) = sim(0.05, 0.05).await;
        let (_operator, _) = operator(&client, 8);
        tenant(&client, "cost", 9, "v1", ATOMIC).await;
        healthy(&client, "cost", 10).await;
        tokio::time::sleep(Duration::from_millis(500)).await;
        sim.reset_counters();
        upgrade(&client, "cost", "v2").await;
        tokio::time::sleep(Duration::from_millis(100)).await;
        healthy(&client, "cost", 10).await;
        tokio::time::sleep(Duration::from_millis(500)).await;
        let counters = sim.counters();
        println!("API writes for a 10-node upgrade (operator + the benchmark's one patch):");
        for (key, count) in counters
            .by_verb_and_resource
            .iter()
            .filter(|(k, _)| kubesim::faults::is_write(k.split(' ').next().unwrap_or("")))
        {
            println!(
                "  {key:<45} {count:>4}  ({:.1} per node)",
                *count as f64 / 10.0
            );
        }
        let operator_writes = counters.writes - 1;
        println!(
            "  total operator writes {operator_writes} = {:.1} per node upgraded",
            operator_writes as f64 / 10.0
        );

        sim.reset_counters();
        tokio::time::sleep(Duration::from_secs(steady_seconds)).await;
        let steady = sim.counters();
        println!(
            "steady cluster, {steady_seconds} s: {} writes, {} reads (the watches stay open)",
            steady.writes, steady.reads
        );
    }

    // 2. Rollout wall time against the critical path: 10 nodes, 2 s startup, termination ~0.
    //    With the rollout barrier (every object stamped; the clock starts at the delivery's last
    //    write) and with a 2 s settle window (one write; the bound is the window plus the path).
    for (name, delivery) in [
        (
            "rollout barrier",
            Delivery {
                settle_seconds: 10,
                rollout_id: Some("r1"),
            },
        ),
        (
            "settle window 2 s",
            Delivery {
                settle_seconds: 2,
                rollout_id: None,
            },
        ),
    ] {
        let (_sim, client) = sim(2.0, 0.0).await;
        let (_operator, _) = operator(&client, 8);
        tenant(&client, "wall", 9, "v1", delivery).await;
        healthy(&client, "wall", 10).await;
        let started = if delivery.rollout_id.is_some() {
            stamped_upgrade(&client, "wall", 9, "v2", "r2").await;
            Instant::now()
        } else {
            let started = Instant::now();
            upgrade(&client, "wall", "v2").await;
            started
        };
        tokio::time::sleep(Duration::from_millis(50)).await;
        healthy(&client, "wall", 10).await;
        let took = started.elapsed().as_secs_f64();
        let path = 10.0 * 2.0;
        let bound = path
            + f64::from(if delivery.rollout_id.is_some() {
                0
            } else {
                delivery.settle_seconds
            });
        println!(
            "10-node full upgrade, 2 s startup, {name}: {took:.2} s against {bound:.0} s ({path:.0} s critical path{}): overhead {:.2}% of the path, {:.0} ms per step",
            if bound > path { " + the window" } else { "" },
            (took - bound) / path * 100.0,
            (took - bound) / 10.0 * 1000.0
        );
    }

    // 3. 1,000 tenants x 8 nodes: provision them, then time a fresh operator verifying all.
    {
        let (sim, client) = sim(0.05, 0.05).await;
        let started = Instant::now();
        futures::stream::iter(0..tenants)
            .map(|i| {
                let client = client.clone();
                async move { tenant(&client, &format!("t{i}"), 7, "v1", ATOMIC).await }
            })
            .buffer_unordered(16)
            .for_each(|_| async {})
            .await;
        let (first, _) = operator(&client, 64);
        loop {
            let clusters = Api::<ExpressCluster>::all(client.clone())
                .list(&ListParams::default())
                .await
                .expect("list");
            let done = clusters
                .items
                .iter()
                .filter(|c| {
                    c.status
                        .as_ref()
                        .is_some_and(|s| s.phase == Some(express_api::ClusterPhase::Healthy))
                })
                .count();
            if done == tenants {
                break;
            }
            tokio::time::sleep(Duration::from_millis(250)).await;
        }
        println!(
            "{tenants} tenants x 8 nodes provisioned by one operator in {:.1} s",
            started.elapsed().as_secs_f64()
        );
        first.abort();
        tokio::time::sleep(Duration::from_millis(500)).await;
        sim.reset_counters();
        let rss_before = rss_mib();
        let started = Instant::now();
        let (_second, metrics) = operator(&client, 64);
        loop {
            let ok = metrics
                .work
                .reconciles
                .get_or_create(&ResultLabel {
                    result: "ok".into(),
                })
                .get();
            if ok >= tenants as u64 {
                break;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        let took = started.elapsed().as_secs_f64();
        let counters = sim.counters();
        println!(
            "fresh operator: all {tenants} tenants reconciled in {took:.2} s with {} writes; process RSS {:.0} MiB (+{:.0} MiB for the operator's caches)",
            counters.writes,
            rss_mib(),
            rss_mib() - rss_before
        );
    }
}
