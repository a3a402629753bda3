//! What the operator's work costs the real control plane (`--substrate real`): the API
//! server's request latency by verb and resource beside Kubernetes' scalability SLOs, API
//! Priority and Fairness' rejections and queue waits, and the API server's and etcd's CPU,
//! RSS and database size, each read before and after a phase from their own metrics and
//! `/proc`.

use std::collections::BTreeMap;
use std::path::Path;

use crate::harness::{cpu_seconds, rss_mib};
use crate::http::http_get;
use crate::metrics_text::{Sample, parse};

/// One reading of the control plane.
pub struct Reading {
    apiserver: Vec<Sample>,
    etcd: Vec<Sample>,
    cpu: BTreeMap<&'static str, f64>,
    rss: BTreeMap<&'static str, f64>,
}

const COMPONENTS: [&str; 2] = ["kube-apiserver", "etcd"];

/// The components' processes, from the `pids` file `scripts/real-cluster.sh` keeps.
fn pids(cluster: &Path) -> BTreeMap<String, u32> {
    std::fs::read_to_string(cluster.join("pids"))
        .unwrap_or_default()
        .lines()
        .filter_map(|line| {
            let (pid, name) = line.split_once(' ')?;
            Some((name.trim().to_owned(), pid.parse().ok()?))
        })
        .collect()
}

pub async fn read(client: &kube::Client, cluster: &Path) -> Reading {
    let request = http::Request::get("/metrics")
        .body(Vec::new())
        .expect("request");
    let apiserver = client.request_text(request).await.unwrap_or_default();
    let etcd_url = std::fs::read_to_string(cluster.join("etcd")).unwrap_or_default();
    let etcd = http_get(&format!("{}/metrics", etcd_url.trim()))
        .await
        .map(|(_, text)| text)
        .unwrap_or_default();
    let pids = pids(cluster);
    let (mut cpu, mut rss) = (BTreeMap::new(), BTreeMap::new());
    for component in COMPONENTS {
        if let Some(pid) = pids.get(component) {
            cpu.insert(component, cpu_seconds(*pid));
            rss.insert(component, rss_mib(*pid));
        }
    }
    Reading {
        apiserver: parse(&apiserver),
        etcd: parse(&etcd),
        cpu,
        rss,
    }
}

/// The latency histogram's buckets grown between two readings, per series key.
type Buckets = BTreeMap<String, Vec<(f64, f64)>>;

fn bucket_deltas(
    before: &[Sample],
    after: &[Sample],
    name: &str,
    key: impl Fn(&BTreeMap<String, String>) -> Option<String>,
) -> Buckets {
    let id = |s: &Sample| -> Option<(String, f64)> {
        let le = s.labels.get("le")?;
        let le = if le == "+Inf" {
            f64::INFINITY
        } else {
            le.parse().ok()?
        };
        Some((key(&s.labels)?, le))
    };
    let mut earlier: BTreeMap<(String, u64), f64> = BTreeMap::new();
    for s in before.iter().filter(|s| s.name == name) {
        if let Some((k, le)) = id(s) {
            *earlier.entry((k, le.to_bits())).or_default() += s.value;
        }
    }
    let mut grown: BTreeMap<(String, u64), f64> = BTreeMap::new();
    for s in after.iter().filter(|s| s.name == name) {
        if let Some((k, le)) = id(s) {
            *grown.entry((k, le.to_bits())).or_default() += s.value;
        }
    }
    let mut buckets: Buckets = BTreeMap::new();
    for ((k, le), count) in grown {
        let delta = count - earlier.get(&(k.clone(), le)).copied().unwrap_or(0.0);
        buckets
            .entry(k)
            .or_default()
            .push((f64::from_bits(le), delta.max(0.0)));
    }
    for series in buckets.values_mut() {
        series.sort_by(|a, b| a.0.total_cmp(&b.0));
    }
    buckets
}

/// The `q` quantile of cumulative buckets, interpolated within its bucket as Prometheus'
/// `histogram_quantile` does (what clusterloader2's SLO measurement computes), and the count.
fn quantile(buckets: &[(f64, f64)], q: f64) -> (f64, f64) {
    let total = buckets.last().map_or(0.0, |b| b.1);
    if total <= 0.0 {
        return (f64::NAN, 0.0);
    }
    let rank = q * total;
    let mut lower = (0.0, 0.0);
    for &(le, count) in buckets {
        if count >= rank {
            if le.is_infinite() {
                return (lower.0, total);
            }
            let within = (rank - lower.1) / (count - lower.1).max(f64::MIN_POSITIVE);
            return (lower.0 + (le - lower.0) * within, total);
        }
        lower = (le, count);
    }
    (lower.0, total)
}

fn counter_delta(
    before: &[Sample],
    after: &[Sample],
    name: &str,
    keep: impl Fn(&BTreeMap<String, String>) -> bool,
) -> f64 {
    let sum = |samples: &[Sample]| -> f64 {
        samples
            .iter()
            .filter(|s| s.name == name && keep(&s.labels))
            .map(|s| s.value)
            .sum()
    };
    sum(after) - sum(before)
}

fn gauge(samples: &[Sample], name: &str) -> f64 {
    samples
        .iter()
        .filter(|s| s.name == name)
        .map(|s| s.value)
        .sum()
}

/// Kubernetes' API call latency SLOs (seconds), as clusterloader2 applies them: mutating
/// calls and reads of one object 1 s, lists of a namespace 5 s, of the cluster 30 s.
fn slo(verb: &str, scope: &str) -> f64 {
    match (verb, scope) {
        ("LIST", "cluster") => 30.0,
        ("LIST", _) => 5.0,
        _ => 1.0,
    }
}

/// Prints what `phase` cost the control plane between `before` and `after`, over `seconds`.
pub fn report(phase: &str, before: &Reading, after: &Reading, seconds: f64) {
    // clusterloader2 leaves out WATCH and CONNECT (long-running) and measures p99 over
    // 5-minute windows; this is the p99 over the whole phase.
    let latency = bucket_deltas(
        &before.apiserver,
        &after.apiserver,
        "apiserver_request_duration_seconds_bucket",
        |labels| {
            let verb = labels.get("verb")?;
            if matches!(verb.as_str(), "WATCH" | "CONNECT") {
                return None;
            }
            let resource = match labels.get("subresource").map(String::as_str) {
                Some(sub) if !sub.is_empty() => format!("{}/{sub}", labels.get("resource")?),
                _ => labels.get("resource")?.clone(),
            };
            Some(format!(
                "{verb} {resource} {}",
                labels.get("scope").map_or("", String::as_str)
            ))
        },
    );
    let mut rows: Vec<(String, f64, f64, f64)> = latency
        .iter()
        .filter_map(|(key, buckets)| {
            let (p99, count) = quantile(buckets, 0.99);
            let mut parts = key.split(' ');
            let (verb, _, scope) = (parts.next()?, parts.next()?, parts.next().unwrap_or(""));
            (count >= 1.0).then(|| (key.clone(), p99, count, slo(verb, scope)))
        })
        .collect();
    rows.sort_by(|a, b| b.2.total_cmp(&a.2));
    let breaches: Vec<&(String, f64, f64, f64)> =
        rows.iter().filter(|(_, p99, _, slo)| p99 > slo).collect();
    let mutating_worst = rows
        .iter()
        .filter(|(key, ..)| {
            ["POST", "PUT", "PATCH", "DELETE"]
                .iter()
                .any(|verb| key.starts_with(verb))
        })
        .map(|row| row.1)
        .fold(0.0f64, f64::max);
    println!(
        "{phase}: the API server's requests (every client's), p99 over the phase by verb, resource and scope; {} of {} series over their SLO; mutating calls' worst p99 {:.3} s (SLO 1 s):",
        breaches.len(),
        rows.len(),
        mutating_worst
    );
    for (key, p99, count, slo) in rows.iter().take(14) {
        println!("  {key:<52} {count:>8.0} requests  p99 {p99:.3} s (SLO {slo:.0} s)");
    }
    for (key, p99, count, slo) in breaches {
        println!("  OVER ITS SLO: {key} p99 {p99:.3} s over {count:.0} requests (SLO {slo:.0} s)");
    }
    let ours = |labels: &BTreeMap<String, String>| {
        labels
            .get("priority_level")
            .is_some_and(|level| level.ends_with("express-operator"))
    };
    let rejected = counter_delta(
        &before.apiserver,
        &after.apiserver,
        "apiserver_flowcontrol_rejected_requests_total",
        ours,
    );
    let rejected_any = counter_delta(
        &before.apiserver,
        &after.apiserver,
        "apiserver_flowcontrol_rejected_requests_total",
        |_| true,
    );
    let waits = bucket_deltas(
        &before.apiserver,
        &after.apiserver,
        "apiserver_flowcontrol_request_wait_duration_seconds_bucket",
        |labels| {
            (ours(labels) && labels.get("execute").is_some_and(|e| e == "true"))
                .then(|| "ours".to_owned())
        },
    );
    let (wait_p99, waited) = waits
        .get("ours")
        .map_or((f64::NAN, 0.0), |b| quantile(b, 0.99));
    println!(
        "{phase}: API Priority and Fairness: {rejected:.0} of the operator's requests rejected ({rejected_any:.0} of anyone's); {waited:.0} of its requests executed, queue wait p99 {:.1} ms",
        wait_p99 * 1000.0
    );
    let cpu: Vec<String> = COMPONENTS
        .iter()
        .map(|c| {
            let used = after.cpu.get(c).copied().unwrap_or(0.0)
                - before.cpu.get(c).copied().unwrap_or(0.0);
            format!(
                "{c} {:.0} % of a core, RSS {:.0} MiB",
                used / seconds * 100.0,
                after.rss.get(c).copied().unwrap_or(0.0)
            )
        })
        .collect();
    println!(
        "{phase}: {}; etcd's database {:.0} MiB ({:.0} MiB in use)",
        cpu.join(", "),
        gauge(&after.etcd, "etcd_mvcc_db_total_size_in_bytes") / 1048576.0,
        gauge(&after.etcd, "etcd_mvcc_db_total_size_in_use_in_bytes") / 1048576.0
    );
}
