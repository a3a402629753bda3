//! kubesim at scale (issue 3): load 100,000 pods and 100,000 custom objects, then measure the
//! process's RSS, list latency, and how long a write takes to reach 50 watchers.
//!
//! `cargo bench -p kubesim --bench scale` (set KUBESIM_SCALE=N for N pods and N objects).
#![allow(clippy::expect_used, clippy::unwrap_used)] // a benchmark aborts on unexpected values

use std::sync::Arc;
use std::time::{Duration, Instant};

use futures::{AsyncBufReadExt, StreamExt, TryStreamExt};
use kube::api::{Api, ListParams, PostParams};
use kubesim::{Config, KubeSim};
use serde_json::{Value, json};

fn rss_mib() -> f64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    status
        .lines()
        .find(|l| l.starts_with("VmRSS:"))
        .and_then(|l| l.split_whitespace().nth(1))
        .and_then(|kb| kb.parse::<f64>().ok())
        .map_or(0.0, |kb| kb / 1024.0)
}

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    if sorted.is_empty() {
        return Duration::ZERO;
    }
    let index = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[index.min(sorted.len() - 1)]
}

async fn load<F>(count: usize, concurrency: usize, make: F)
where
    F: Fn(usize) -> futures::future::BoxFuture<'static, ()> + Send + Sync + 'static,
{
    futures::stream::iter(0..count)
        .map(make)
        .buffer_unordered(concurrency)
        .for_each(|_| async {})
        .await;
}

#[tokio::main(flavor = "multi_thread")]
async fn main() {
    let count: usize = std::env::var("KUBESIM_SCALE")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(100_000);
    let sim = KubeSim::start(Config {
        history_limit: 10_000,
        ..Config::default()
    })
    .await
    .expect("start");
    let client = sim.client().expect("client");
    let baseline = rss_mib();
    println!("kubesim scale benchmark: {count} pods + {count} custom objects");

    let crds: Api<k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition> = Api::all(client.clone());
    for crd in express_api::crd::all() {
        crds.create(&PostParams::default(), &crd)
            .await
            .expect("CRD");
    }

    let started = Instant::now();
    let pods: Api<k8s_openapi::api::core::v1::Pod> = Api::namespaced(client.clone(), "default");
    let pods_for_load = pods.clone();
    load(count, 32, move |i| {
        let pods = pods_for_load.clone();
        Box::pin(async move {
            let pod = serde_json::from_value(json!({
                "metadata": {"name": format!("pod-{i}"), "labels": {"app": "express", "shard": (i % 10).to_string()}},
                "spec": {"containers": [{"name": "express", "image": "registry.example/express:express-e689.154"}]}
            }))
            .unwrap();
            pods.create(&PostParams::default(), &pod).await.expect("pod");
        })
    })
    .await;
    let pods_loaded = started.elapsed();

    let started = Instant::now();
    let frontends: Api<express_api::Frontend> = Api::namespaced(client.clone(), "default");
    let frontends_for_load = frontends.clone();
    load(count, 32, move |i| {
        let frontends = frontends_for_load.clone();
        Box::pin(async move {
            let fe = express_api::Frontend::new(
                &format!("t{}-fe{}", i / 8, i % 8 + 1),
                express_api::FrontendSpec(express_api::NodeSpec {
                    express_version: Some("express-e689.154".into()),
                    ..express_api::NodeSpec::for_cluster(format!("t{}", i / 8))
                }),
            );
            frontends
                .create(&PostParams::default(), &fe)
                .await
                .expect("frontend");
        })
    })
    .await;
    let objects_loaded = started.elapsed();
    // Let the kubelet finish starting every pod (each goes through two status writes).
    tokio::time::sleep(Duration::from_secs(3)).await;
    let rss = rss_mib();
    println!(
        "load: {count} pods in {:.1} s, {count} frontends in {:.1} s",
        pods_loaded.as_secs_f64(),
        objects_loaded.as_secs_f64()
    );
    println!(
        "rss: {rss:.0} MiB total ({:.0} MiB above the empty server) for {} objects",
        rss - baseline,
        2 * count
    );

    // Server-side cost: the raw response, not the client's typed decoding.
    let raw = |path: String| {
        let client = client.clone();
        async move {
            let request = http::Request::builder().uri(path).body(Vec::new()).unwrap();
            client.request_text(request).await.expect("list")
        }
    };
    let mut timings = Vec::new();
    let mut bytes = 0;
    for _ in 0..5 {
        let started = Instant::now();
        bytes = raw("/api/v1/namespaces/default/pods".into()).await.len();
        timings.push(started.elapsed());
    }
    timings.sort();
    println!(
        "list all {count} pods (raw, {:.0} MiB): median {:.0} ms",
        bytes as f64 / 1048576.0,
        percentile(&timings, 0.5).as_secs_f64() * 1000.0
    );
    let started = Instant::now();
    let listed = pods.list(&ListParams::default()).await.expect("list");
    assert_eq!(listed.items.len(), count);
    println!(
        "list all {count} pods decoded by kube-rs: {:.0} ms",
        started.elapsed().as_secs_f64() * 1000.0
    );
    let mut pages = Vec::new();
    let mut params = ListParams::default().limit(500);
    for _ in 0..20 {
        let started = Instant::now();
        let page = pods.list(&params).await.expect("page");
        pages.push(started.elapsed());
        match page.metadata.continue_ {
            Some(token) if !token.is_empty() => params = params.continue_token(&token),
            _ => break,
        }
    }
    pages.sort();
    println!(
        "list pods, pages of 500: median {:.2} ms, p99 {:.2} ms",
        percentile(&pages, 0.5).as_secs_f64() * 1000.0,
        percentile(&pages, 0.99).as_secs_f64() * 1000.0
    );
    let started = Instant::now();
    raw("/api/v1/namespaces/default/pods?labelSelector=shard%3D3".into()).await;
    println!(
        "list pods by label (shard=3, a tenth of them, raw): {:.0} ms",
        started.elapsed().as_secs_f64() * 1000.0
    );
    let started = Instant::now();
    let fe = frontends
        .list(&ListParams::default().limit(500))
        .await
        .expect("fe page");
    println!(
        "list frontends, first page of {}: {:.2} ms",
        fe.items.len(),
        started.elapsed().as_secs_f64() * 1000.0
    );

    // Fan-out: 50 watchers on ConfigMaps; each write carries its send time.
    let watchers = 50;
    let writes = 500;
    let origin = Instant::now();
    let latencies = Arc::new(std::sync::Mutex::new(Vec::<Duration>::with_capacity(
        watchers * writes,
    )));
    let rv = sim.resource_version();
    let mut tasks = Vec::new();
    for _ in 0..watchers {
        let client = sim.client().expect("client");
        let latencies = latencies.clone();
        tasks.push(tokio::spawn(async move {
            let request = http::Request::builder()
                .uri(format!(
                    "/api/v1/namespaces/default/configmaps?watch=true&resourceVersion={rv}"
                ))
                .body(Vec::new())
                .unwrap();
            let lines = client.request_stream(request).await.expect("watch").lines();
            let mut lines = std::pin::pin!(lines);
            let mut seen = 0;
            while seen < writes {
                let Ok(Some(line)) = lines.try_next().await else {
                    break;
                };
                let received = origin.elapsed();
                let event: Value = serde_json::from_str(&line).expect("event");
                let sent: u64 = event["object"]["metadata"]["annotations"]["sent-nanos"]
                    .as_str()
                    .and_then(|s| s.parse().ok())
                    .unwrap_or(0);
                latencies
                    .lock()
                    .unwrap()
                    .push(received.saturating_sub(Duration::from_nanos(sent)));
                seen += 1;
            }
        }));
    }
    tokio::time::sleep(Duration::from_millis(500)).await;
    let cms: Api<k8s_openapi::api::core::v1::ConfigMap> =
        Api::namespaced(client.clone(), "default");
    for i in 0..writes {
        let cm = serde_json::from_value(json!({"metadata": {"name": format!("fanout-{i}"),
            "annotations": {"sent-nanos": origin.elapsed().as_nanos().to_string()}}}))
        .unwrap();
        cms.create(&PostParams::default(), &cm)
            .await
            .expect("write");
        tokio::time::sleep(Duration::from_millis(2)).await;
    }
    for task in tasks {
        let _ = tokio::time::timeout(Duration::from_secs(30), task).await;
    }
    let mut latencies = latencies.lock().unwrap().clone();
    latencies.sort();
    println!(
        "fan-out to {watchers} watchers ({} deliveries of {writes} writes): write-to-delivery p50 {:.2} ms, p99 {:.2} ms, max {:.2} ms",
        latencies.len(),
        percentile(&latencies, 0.5).as_secs_f64() * 1000.0,
        percentile(&latencies, 0.99).as_secs_f64() * 1000.0,
        latencies.last().copied().unwrap_or_default().as_secs_f64() * 1000.0
    );
}
