//! What the benchmark measures of the operator: its metrics (memory, reconciles, series), its
//! requests as kubesim counts them, request rates sampled while a phase runs, cold starts, and
//! percentiles.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use crate::args::Substrate;
use crate::harness::{Operator, Sim};
use crate::http::http_get;
use crate::metrics_text::parse;

/// What the operator holds at one point: RSS beside the live heap its allocator reports, the
/// objects its caches hold and the entries of its other long-lived structures.
pub async fn memory_line(operator: &Operator, point: &str, tenants: usize) {
    let process = &operator.process;
    let text = http_get(&format!("{}/metrics", operator.metrics))
        .await
        .map(|(_, text)| text)
        .unwrap_or_default();
    let family = |name: &str| -> Vec<String> {
        text.lines()
            .filter(|l| l.starts_with(name) && l[name.len()..].starts_with('{'))
            .filter_map(|l| {
                let (labels, value) = l.rsplit_once(' ')?;
                let labels = &labels[name.len() + 1..labels.len() - 1];
                Some(format!("{labels}={value}"))
            })
            .collect()
    };
    let heap: Vec<String> = family("express_operator_heap_bytes")
        .into_iter()
        .filter_map(|entry| {
            let (labels, value) = entry.rsplit_once('=')?;
            let mib = value.parse::<f64>().ok()? / 1048576.0;
            Some(format!("{labels} {mib:.0} MiB"))
        })
        .collect();
    println!(
        "memory {point}: RSS {:.0} MiB ({:.1} KiB per tenant), anonymous {:.0} MiB, VmHWM {:.0} MiB; heap: {}",
        process.rss_mib(),
        process.rss_mib() * 1024.0 / tenants as f64,
        process.rss_anon_mib(),
        process.peak_rss_mib(),
        if heap.is_empty() {
            "not reported (allocator without statistics)".to_owned()
        } else {
            heap.join(", ")
        },
    );
    println!(
        "  cached objects: {}; other structures: {}; caches repacked so far: {:.0} times",
        family("express_operator_cached_objects").join(", "),
        family("express_operator_memory_entries").join(", "),
        sample(&text, "express_operator_heap_repacks_total")
    );
    let recomputed = sample(&text, "express_operator_fleet_view_duration_seconds_count");
    let spent = sample(&text, "express_operator_fleet_view_duration_seconds_sum");
    println!(
        "  fleet view (on its timer) so far: {recomputed:.0} recomputations, {spent:.2} s in all, {:.3} s each; operator CPU so far {:.1} s",
        spent / recomputed.max(1.0),
        process.cpu_seconds()
    );
}

/// The operator's reconciles so far, whatever their result.
pub async fn reconciles(operator: &Operator) -> f64 {
    let text = http_get(&format!("{}/metrics", operator.metrics))
        .await
        .map(|(_, text)| text)
        .unwrap_or_default();
    ["ok", "error"]
        .iter()
        .map(|result| {
            sample(
                &text,
                &format!("express_operator_reconciles_total{{result=\"{result}\"}}"),
            )
        })
        .sum()
}

/// A sample's value in the Prometheus text `metrics` (the first line starting with `series`).
pub fn sample(metrics: &str, series: &str) -> f64 {
    metrics
        .lines()
        .find(|l| l.starts_with(series) && l[series.len()..].starts_with(' '))
        .and_then(|l| l.rsplit(' ').next())
        .and_then(|v| v.parse().ok())
        .unwrap_or(0.0)
}

/// The operator's requests so far by "verb resource": on kubesim from its per-agent counters
/// (every operator the benchmark started), on the real control plane from the running
/// operator's own `express_operator_api_requests_total` (nobody else's requests reach it; a
/// new operator starts from zero, and the phases measure differences within one operator).
async fn operator_counts(sim: &Sim) -> BTreeMap<String, u64> {
    match sim.substrate {
        Substrate::Kubesim => kubesim_operator_counts(sim).await,
        Substrate::Real => {
            let url = sim.operator_metrics.lock().unwrap().clone();
            match url {
                Some(url) => metrics_operator_counts(&url).await,
                None => BTreeMap::new(),
            }
        }
    }
}

/// From the operator's metrics, in kubesim's words: `create` for a POST, `update` for a PUT,
/// `get` for a GET (a list too); watches left out, as kubesim's counters count their opening.
async fn metrics_operator_counts(url: &str) -> BTreeMap<String, u64> {
    let Some((200, text)) = http_get(&format!("{url}/metrics")).await else {
        return BTreeMap::new();
    };
    let mut counts = BTreeMap::new();
    for sample in parse(&text)
        .into_iter()
        .filter(|s| s.name == "express_operator_api_requests_total")
    {
        let verb = match sample.labels.get("verb").map(String::as_str) {
            Some("post") => "create",
            Some("put") => "update",
            Some("watch") | None => continue,
            Some(other) => other,
        };
        let resource = sample
            .labels
            .get("resource")
            .map_or("other", String::as_str);
        *counts.entry(format!("{verb} {resource}")).or_insert(0) += sample.value as u64;
    }
    counts
}

/// The operator's requests so far by "verb resource", from kubesim's per-agent counters.
async fn kubesim_operator_counts(sim: &Sim) -> BTreeMap<String, u64> {
    let Some((200, body)) = http_get(&format!("{}/kubesim/counters/agents", sim.url)).await else {
        return BTreeMap::new();
    };
    let mut agents: BTreeMap<String, BTreeMap<String, u64>> =
        serde_json::from_str(&body).unwrap_or_default();
    agents
        .remove(&express_operator::throttle::user_agent(
            express_api::rings::DEFAULT_RING,
        ))
        .unwrap_or_default()
}

fn is_write(call: &str) -> bool {
    kubesim::faults::is_write(call.split(' ').next().unwrap_or(""))
}

/// Requests the operator sent so far, `(reads, writes)`.
pub async fn operator_requests(sim: &Sim) -> (u64, u64) {
    let counts = operator_counts(sim).await;
    let writes: u64 = counts
        .iter()
        .filter(|(k, _)| is_write(k))
        .map(|(_, c)| c)
        .sum();
    (counts.values().sum::<u64>() - writes, writes)
}

/// Operator writes by "verb resource", for where the writes of an upgrade go.
pub async fn operator_writes_by_kind(sim: &Sim) -> BTreeMap<String, u64> {
    let mut counts = operator_counts(sim).await;
    counts.retain(|k, _| is_write(k));
    counts
}

/// Waits for a fresh operator's caches to fill (`/readyz`) and every tenant to be verified
/// (a successful reconcile each, nothing queued) while `also_done`, shown each metrics page
/// and the time since the start, says the caller has seen what it waits for too. Returns when
/// the caches filled and when every tenant was verified, from the operator's start.
pub async fn cold_start(
    operator: &Operator,
    tenants: usize,
    timeout: Duration,
    mut also_done: impl FnMut(&str, Duration) -> bool,
) -> (Duration, Duration) {
    let started = Instant::now();
    let deadline = started + timeout;
    let (mut synced, mut verified) = (None, None);
    loop {
        assert!(Instant::now() < deadline, "timed out: cold start");
        if let Some((200, text)) = http_get(&format!("{}/metrics", operator.metrics)).await {
            if synced.is_none()
                && http_get(&format!("{}/readyz", operator.metrics))
                    .await
                    .is_some_and(|(code, _)| code == 200)
            {
                synced = Some(started.elapsed());
            }
            let done = also_done(&text, started.elapsed());
            let ok = sample(&text, "express_operator_reconciles_total{result=\"ok\"}");
            let depth = sample(&text, "express_operator_queue_depth");
            if verified.is_none() && synced.is_some() && ok >= tenants as f64 && depth == 0.0 {
                verified = Some(started.elapsed());
            }
            if let (Some(synced), Some(verified), true) = (synced, verified, done) {
                return (synced, verified);
            }
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// Samples the operator's request counts and RSS every second while `phase` runs; returns what
/// `phase` returns with the peak and mean request rate and the peak RSS seen.
pub struct Sampled {
    pub peak_qps: f64,
    pub mean_qps: f64,
    pub peak_rss_mib: f64,
    pub writes: u64,
    pub reads: u64,
    pub seconds: f64,
}

pub async fn sampled<F: std::future::Future<Output = ()>>(
    sim: &Sim,
    operator: &Operator,
    phase: F,
) -> Sampled {
    let started = Instant::now();
    let (reads0, writes0) = operator_requests(sim).await;
    let mut phase = std::pin::pin!(phase);
    let mut every = tokio::time::interval(Duration::from_secs(1));
    let (mut last, mut peak_qps, mut peak_rss) = (reads0 + writes0, 0.0f64, 0.0f64);
    loop {
        tokio::select! {
            () = &mut phase => break,
            _ = every.tick() => {
                let (reads, writes) = operator_requests(sim).await;
                peak_qps = peak_qps.max((reads + writes).saturating_sub(last) as f64);
                last = reads + writes;
                peak_rss = peak_rss.max(operator.process.rss_mib());
            }
        }
    }
    let seconds = started.elapsed().as_secs_f64();
    let (reads, writes) = operator_requests(sim).await;
    Sampled {
        peak_qps,
        mean_qps: ((reads + writes) - (reads0 + writes0)) as f64 / seconds,
        peak_rss_mib: peak_rss.max(operator.process.rss_mib()),
        writes: writes - writes0,
        reads: reads - reads0,
        seconds,
    }
}

pub fn percentile(sorted: &[f64], p: f64) -> f64 {
    if sorted.is_empty() {
        return f64::NAN;
    }
    let rank = ((p / 100.0) * (sorted.len() - 1) as f64).round() as usize;
    sorted[rank.min(sorted.len() - 1)]
}

/// The series the operator's `/metrics` exposes (its sample lines, as Prometheus stores
/// them), and how many belong to the per-tenant families that `--per-tenant-metrics=false`
/// leaves out.
pub async fn print_series(operator: &Operator, when: &str, tenants: usize) {
    let Some((200, text)) = http_get(&format!("{}/metrics", operator.metrics)).await else {
        println!("series exposed {when}: /metrics did not answer");
        return;
    };
    let samples: Vec<&str> = text
        .lines()
        .filter(|line| !line.is_empty() && !line.starts_with('#'))
        .collect();
    let per_tenant = samples
        .iter()
        .filter(|line| line.starts_with("express_operator_nodes{"))
        .count();
    println!(
        "series exposed {when}: {} ({per_tenant} per-tenant express_operator_nodes, {:.2} per tenant; {} fleet-level, all that --per-tenant-metrics=false leaves)",
        samples.len(),
        per_tenant as f64 / tenants as f64,
        samples.len() - per_tenant
    );
}
