//! Fleet benchmark (issue 27): `kubesim serve` and `express-operator run` each in a process of
//! its own, tenants created through the API, and the operator measured alone: its RSS from
//! `/proc`, provisioning throughput, a cold start, and a fleet-wide upgrade (wall time against
//! the critical path, API request rate, per-step latency, writes per node upgraded).
//!
//! `scripts/fleet-bench.sh [--tenants N] [...]` builds the release binaries and runs it; every
//! flag is listed by `--help`. The benchmark's own requests (creating tenants, patching them,
//! its watches) are told apart from the operator's by the operator's User-Agent in kubesim's
//! counters.
#![allow(clippy::expect_used, clippy::unwrap_used)] // a benchmark aborts on unexpected values

use std::collections::{BTreeMap, HashMap, HashSet};
use std::net::{SocketAddr, TcpListener};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use clap::Parser;
use express_api::{
    Backend, BackendSpec, ClusterPhase, ExpressCluster, ExpressClusterSpec, Frontend, FrontendSpec,
    NodeDefaults, NodeSpec,
};
use futures::StreamExt;
use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, Patch, PatchParams, PostParams};
use kube::config::{KubeConfigOptions, Kubeconfig};
use kube::runtime::{WatchStreamExt, watcher};
use serde_json::json;

#[derive(Parser, Debug)]
#[command(about = "Fleet benchmark: kubesim and the operator in processes of their own")]
struct Args {
    /// Tenants (Express clusters), one namespace each.
    #[arg(long, default_value_t = 1000)]
    tenants: usize,
    /// Frontends per tenant (plus one Backend).
    #[arg(long, default_value_t = 7)]
    frontends: usize,
    /// The operator's --kube-qps (the benchmark's default lifts the limit out of the way of
    /// the measurement; pass the production default, 20, to see the limit's effect).
    #[arg(long, default_value_t = 5000.0)]
    kube_qps: f64,
    /// The operator's --kube-burst.
    #[arg(long, default_value_t = 5000)]
    kube_burst: u32,
    /// The operator's --concurrency.
    #[arg(long, default_value_t = 64)]
    concurrency: usize,
    /// Seconds a simulated pod takes to become Ready.
    #[arg(long, default_value_t = 1.0)]
    startup_seconds: f64,
    /// Seconds a deleted simulated pod takes to terminate.
    #[arg(long, default_value_t = 1.0)]
    terminate_seconds: f64,
    /// The kubesim binary (default: target/release/kubesim).
    #[arg(long)]
    kubesim: Option<PathBuf>,
    /// The express-operator binary (default: target/release/express-operator).
    #[arg(long)]
    operator: Option<PathBuf>,
    /// Give up on a phase after this many seconds.
    #[arg(long, default_value_t = 3600)]
    timeout_seconds: u64,
    /// ControllerRevisions per node of a settled fleet (it keeps up to `revisionHistoryLimit`,
    /// 10 by default): after the cold start on the fleet as provisioned (one a node), the
    /// benchmark adds the ones provisioning did not create, labelled as the operator labels
    /// them, and measures a second cold start over them; the upgrade then runs on that fleet.
    #[arg(long, default_value_t = 1)]
    revisions: usize,
    /// Seconds to wait at rest before each memory reading: past the operator's fleet metrics
    /// interval (15 s), which publishes its memory figures, and its allocator's purge delay.
    #[arg(long, default_value_t = 20)]
    rest_seconds: u64,
    /// Stop after the cold starts (both, with `--revisions`): the fresh operator's figures
    /// without the half hour a fleet-wide upgrade takes at 10,000 tenants.
    #[arg(long)]
    stop_after_cold_starts: bool,
    /// Passed by `cargo bench`.
    #[arg(long, hide = true)]
    bench: bool,
}

/// A child process that is killed when dropped, so that a failed run leaves nothing behind.
struct Process(Child);

impl Drop for Process {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

impl Process {
    fn pid(&self) -> u32 {
        self.0.id()
    }

    /// Resident set size, MiB, from `/proc/PID/status`.
    fn rss_mib(&self) -> f64 {
        proc_status_kib(self.pid(), "VmRSS:") / 1024.0
    }

    /// Peak resident set size, MiB.
    fn peak_rss_mib(&self) -> f64 {
        proc_status_kib(self.pid(), "VmHWM:") / 1024.0
    }

    /// Anonymous resident memory (the heap, not the mapped binary), MiB.
    fn rss_anon_mib(&self) -> f64 {
        proc_status_kib(self.pid(), "RssAnon:") / 1024.0
    }

    /// User plus system CPU time so far, seconds, from `/proc/PID/stat` (in USER_HZ, 100 on
    /// Linux).
    fn cpu_seconds(&self) -> f64 {
        let stat =
            std::fs::read_to_string(format!("/proc/{}/stat", self.pid())).unwrap_or_default();
        // The command name may hold spaces: count fields after its closing parenthesis.
        let fields: Vec<&str> = stat
            .rsplit_once(')')
            .map(|(_, rest)| rest.split_whitespace().collect())
            .unwrap_or_default();
        let ticks = |i: usize| {
            fields
                .get(i)
                .and_then(|v| v.parse::<f64>().ok())
                .unwrap_or(0.0)
        };
        // utime and stime are fields 14 and 15 of the line, 12 and 13 after the name.
        (ticks(11) + ticks(12)) / 100.0
    }
}

/// What the operator holds at one point: RSS beside the live heap its allocator reports, the
/// objects its caches hold and the entries of its other long-lived structures.
async fn memory_line(operator: &Operator, point: &str, tenants: usize) {
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

fn proc_status_kib(pid: u32, field: &str) -> f64 {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .unwrap_or_default()
        .lines()
        .find(|l| l.starts_with(field))
        .and_then(|l| l.split_whitespace().nth(1))
        .and_then(|kb| kb.parse::<f64>().ok())
        .unwrap_or(0.0)
}

fn target_binary(name: &str) -> PathBuf {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let target = std::env::var_os("CARGO_TARGET_DIR").map_or(root.join("target"), PathBuf::from);
    target.join("release").join(name)
}

fn free_port() -> SocketAddr {
    TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("a free loopback port")
}

struct Sim {
    _process: Process,
    client: kube::Client,
    url: String,
}

async fn start_kubesim(args: &Args, dir: &Path) -> Sim {
    let kubeconfig = dir.join("kubeconfig");
    let binary = args
        .kubesim
        .clone()
        .unwrap_or_else(|| target_binary("kubesim"));
    let process = Process(
        Command::new(&binary)
            .args(["serve", "--addr", "127.0.0.1:0", "--kubeconfig"])
            .arg(&kubeconfig)
            .args(["--startup-seconds", &args.startup_seconds.to_string()])
            .args(["--terminate-seconds", &args.terminate_seconds.to_string()])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap_or_else(|e| panic!("cannot start {}: {e}", binary.display())),
    );
    let deadline = Instant::now() + Duration::from_secs(10);
    while std::fs::read_to_string(&kubeconfig).map_or(true, |s| s.trim().is_empty()) {
        assert!(Instant::now() < deadline, "kubesim did not start");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let config = kube::Config::from_custom_kubeconfig(
        Kubeconfig::read_from(&kubeconfig).expect("kubeconfig"),
        &KubeConfigOptions::default(),
    )
    .await
    .expect("kubeconfig");
    let url = config
        .cluster_url
        .to_string()
        .trim_end_matches('/')
        .to_owned();
    let client = kube::Client::try_from(config).expect("client");
    express_operator::install::install_crds(&client)
        .await
        .expect("CRDs");
    Sim {
        _process: process,
        client,
        url,
    }
}

struct Operator {
    process: Process,
    metrics: String,
}

fn start_operator(args: &Args, dir: &Path, life: usize) -> Operator {
    let binary = args
        .operator
        .clone()
        .unwrap_or_else(|| target_binary("express-operator"));
    let metrics = free_port();
    let log = std::fs::File::create(dir.join(format!("operator-{life}.log"))).expect("log");
    let process = Process(
        Command::new(&binary)
            .args(["run", "--metrics-addr", &metrics.to_string()])
            .args(["--kube-qps", &args.kube_qps.to_string()])
            .args(["--kube-burst", &args.kube_burst.to_string()])
            .args(["--concurrency", &args.concurrency.to_string()])
            .env("KUBECONFIG", dir.join("kubeconfig"))
            .env("RUST_LOG", "warn")
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .unwrap_or_else(|e| panic!("cannot start {}: {e}", binary.display())),
    );
    Operator {
        process,
        metrics: format!("http://{metrics}"),
    }
}

/// A GET over plain HTTP/1.1 on loopback (the operator's metrics, kubesim's counters), without
/// pulling an HTTP client into the workspace for a benchmark.
async fn http_get(url: &str) -> Option<(u16, String)> {
    let url = url.to_owned();
    tokio::task::spawn_blocking(move || blocking_request("GET", &url))
        .await
        .ok()
        .flatten()
}

async fn http_post(url: &str) -> Option<(u16, String)> {
    let url = url.to_owned();
    tokio::task::spawn_blocking(move || blocking_request("POST", &url))
        .await
        .ok()
        .flatten()
}

fn blocking_request(method: &str, url: &str) -> Option<(u16, String)> {
    use std::io::{Read, Write};
    let rest = url.strip_prefix("http://")?;
    let (host, path) = rest
        .split_once('/')
        .map_or((rest, "/".to_owned()), |(h, p)| (h, format!("/{p}")));
    let mut stream = std::net::TcpStream::connect(host).ok()?;
    stream
        .set_read_timeout(Some(Duration::from_secs(30)))
        .ok()?;
    stream
        .write_all(
            format!("{method} {path} HTTP/1.1\r\nHost: {host}\r\nContent-Length: 0\r\nConnection: close\r\n\r\n")
                .as_bytes(),
        )
        .ok()?;
    let mut response = Vec::new();
    stream.read_to_end(&mut response).ok()?;
    let text = String::from_utf8_lossy(&response);
    let (head, body) = text.split_once("\r\n\r\n")?;
    let code = head.split_whitespace().nth(1)?.parse().ok()?;
    let body = if head
        .to_ascii_lowercase()
        .contains("transfer-encoding: chunked")
    {
        dechunk(body)
    } else {
        body.to_owned()
    };
    Some((code, body))
}

fn dechunk(mut body: &str) -> String {
    let mut out = String::new();
    while let Some((size, rest)) = body.split_once("\r\n") {
        let Ok(size) = usize::from_str_radix(size.trim(), 16) else {
            break;
        };
        if size == 0 || rest.len() < size {
            break;
        }
        out.push_str(&rest[..size]);
        body = rest[size..].trim_start_matches("\r\n");
    }
    out
}

/// The operator's reconciles so far, whatever their result.
async fn reconciles(operator: &Operator) -> f64 {
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
fn sample(metrics: &str, series: &str) -> f64 {
    metrics
        .lines()
        .find(|l| l.starts_with(series) && l[series.len()..].starts_with(' '))
        .and_then(|l| l.rsplit(' ').next())
        .and_then(|v| v.parse().ok())
        .unwrap_or(0.0)
}

/// The operator's requests so far by "verb resource", from kubesim's per-agent counters.
async fn operator_counts(sim: &Sim) -> BTreeMap<String, u64> {
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
async fn operator_requests(sim: &Sim) -> (u64, u64) {
    let counts = operator_counts(sim).await;
    let writes: u64 = counts
        .iter()
        .filter(|(k, _)| is_write(k))
        .map(|(_, c)| c)
        .sum();
    (counts.values().sum::<u64>() - writes, writes)
}

/// Operator writes by "verb resource", for where the writes of an upgrade go.
async fn operator_writes_by_kind(sim: &Sim) -> BTreeMap<String, u64> {
    let mut counts = operator_counts(sim).await;
    counts.retain(|k, _| is_write(k));
    counts
}

fn namespace(i: usize) -> String {
    format!("t{i:05}")
}

async fn create_tenant(client: &kube::Client, ns: &str, frontends: usize) {
    express_operator::install::create_namespace(client, ns)
        .await
        .expect("namespace");
    let defaults = NodeDefaults {
        express_version: Some("v1".into()),
        ..Default::default()
    };
    let mut spec = ExpressClusterSpec::default();
    spec.defaults.backend = Some(defaults.clone());
    spec.defaults.frontend = Some(defaults);
    // One write per change (the benchmark patches the ExpressCluster alone): nothing to settle.
    spec.rollout.settle_seconds = 0;
    let pp = PostParams::default();
    Api::<ExpressCluster>::namespaced(client.clone(), ns)
        .create(&pp, &ExpressCluster::new("t", spec))
        .await
        .expect("cluster");
    Api::<Backend>::namespaced(client.clone(), ns)
        .create(
            &pp,
            &Backend::new("t-be", BackendSpec(NodeSpec::for_cluster("t"))),
        )
        .await
        .expect("backend");
    for i in 1..=frontends {
        Api::<Frontend>::namespaced(client.clone(), ns)
            .create(
                &pp,
                &Frontend::new(
                    &format!("t-fe{i}"),
                    FrontendSpec(NodeSpec::for_cluster("t")),
                ),
            )
            .await
            .expect("frontend");
    }
}

/// Older revisions of every node of a tenant, as the operator keeps them (labels, a number
/// below the one provisioning kept, a body), so that a fresh operator holds a settled history.
async fn add_history(client: &kube::Client, ns: &str, frontends: usize, older: usize) {
    use k8s_openapi::api::apps::v1::ControllerRevision;
    let api = Api::<ControllerRevision>::namespaced(client.clone(), ns);
    let nodes = std::iter::once(("backend", "t-be".to_owned()))
        .chain((1..=frontends).map(|i| ("frontend", format!("t-fe{i}"))));
    for (kind, node) in nodes {
        for n in 0..older {
            let revision = format!("old{n:04}");
            let object: ControllerRevision = serde_json::from_value(json!({
                "metadata": {"name": format!("{node}-{revision}"), "labels": {
                    "express.dev/cluster": "t", "express.dev/node": node,
                    "express.dev/kind": kind, "express.dev/deployment-revision": revision}},
                "revision": 0,
                "data": {"expressVersion": format!("v0.{n}"), "imageRepository": "reg/express", "podTemplate": {}},
            }))
            .expect("revision");
            api.create(&PostParams::default(), &object)
                .await
                .expect("older revision");
        }
    }
}

/// Waits for a fresh operator's caches to fill (`/readyz`) and every tenant to be verified
/// (a successful reconcile each, nothing queued) while `also_done`, shown each metrics page
/// and the time since the start, says the caller has seen what it waits for too. Returns when
/// the caches filled and when every tenant was verified, from the operator's start.
async fn cold_start(
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

/// What the benchmark's watches saw, with the instant it saw it.
#[derive(Default)]
struct Seen {
    /// Per namespace: generation, observed generation, phase Healthy, nodes up to date.
    clusters: HashMap<String, (i64, i64, bool, u32)>,
    /// Pods by uid: (namespace, node name, Ready since, deletion seen at).
    pods: HashMap<String, PodSeen>,
}

#[derive(Clone, Debug)]
struct PodSeen {
    namespace: String,
    name: String,
    ready_at: Option<Instant>,
    deleting_at: Option<Instant>,
}

impl Seen {
    fn done(&self, tenants: usize, nodes: u32, generation: i64) -> usize {
        self.clusters
            .values()
            .filter(|(g, observed, healthy, up_to_date)| {
                *g >= generation && observed == g && *healthy && *up_to_date == nodes
            })
            .count()
            .min(tenants)
    }
}

fn watch_fleet(client: &kube::Client, seen: Arc<Mutex<Seen>>) {
    // With a backoff: at the end kubesim goes first, and a watch retrying at once never yields,
    // which kept the runtime from shutting down.
    let clusters = watcher(
        Api::<ExpressCluster>::all(client.clone()),
        watcher::Config::default(),
    )
    .default_backoff();
    let seen_clusters = seen.clone();
    tokio::spawn(async move {
        let mut events = std::pin::pin!(clusters);
        while let Some(event) = events.next().await {
            let Ok(watcher::Event::Apply(c) | watcher::Event::InitApply(c)) = event else {
                continue;
            };
            let status = c.status.as_ref();
            let entry = (
                c.metadata.generation.unwrap_or(0),
                status.and_then(|s| s.observed_generation).unwrap_or(0),
                status.and_then(|s| s.phase) == Some(ClusterPhase::Healthy),
                status
                    .and_then(|s| s.nodes.as_ref())
                    .map_or(0, |n| n.up_to_date),
            );
            let ns = c.metadata.namespace.clone().unwrap_or_default();
            seen_clusters.lock().unwrap().clusters.insert(ns, entry);
        }
    });
    let pods = watcher(
        Api::<Pod>::all(client.clone()),
        watcher::Config::default().labels(express_api::keys::LABEL_CLUSTER),
    )
    .default_backoff();
    tokio::spawn(async move {
        let mut events = std::pin::pin!(pods);
        while let Some(event) = events.next().await {
            let Ok(watcher::Event::Apply(p) | watcher::Event::InitApply(p)) = event else {
                continue;
            };
            let now = Instant::now();
            let ready = p
                .status
                .as_ref()
                .and_then(|s| s.conditions.as_ref())
                .is_some_and(|cs| cs.iter().any(|c| c.type_ == "Ready" && c.status == "True"));
            let uid = p.metadata.uid.clone().unwrap_or_default();
            let mut seen = seen.lock().unwrap();
            let entry = seen.pods.entry(uid).or_insert_with(|| PodSeen {
                namespace: p.metadata.namespace.clone().unwrap_or_default(),
                name: p.metadata.name.clone().unwrap_or_default(),
                ready_at: None,
                deleting_at: None,
            });
            if ready && entry.ready_at.is_none() {
                entry.ready_at = Some(now);
            }
            if p.metadata.deletion_timestamp.is_some() && entry.deleting_at.is_none() {
                entry.deleting_at = Some(now);
            }
        }
    });
}

/// Samples the operator's request counts and RSS every second while `phase` runs; returns what
/// `phase` returns with the peak and mean request rate and the peak RSS seen.
struct Sampled {
    peak_qps: f64,
    mean_qps: f64,
    peak_rss_mib: f64,
    writes: u64,
    reads: u64,
    seconds: f64,
}

async fn sampled<F: std::future::Future<Output = ()>>(
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

async fn until(what: &str, timeout: Duration, mut done: impl FnMut() -> bool) {
    let deadline = Instant::now() + timeout;
    while !done() {
        assert!(Instant::now() < deadline, "timed out: {what}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

fn percentile(sorted: &[f64], p: f64) -> f64 {
    if sorted.is_empty() {
        return f64::NAN;
    }
    let rank = ((p / 100.0) * (sorted.len() - 1) as f64).round() as usize;
    sorted[rank.min(sorted.len() - 1)]
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    let args = Args::parse();
    let nodes = u32::try_from(args.frontends + 1).expect("nodes");
    let timeout = Duration::from_secs(args.timeout_seconds);
    let dir = std::env::temp_dir().join(format!("express-fleet-bench-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("work dir");
    println!(
        "fleet benchmark: {} tenants x {nodes} nodes; operator --kube-qps {} --kube-burst {} --concurrency {}; pods start in {} s, terminate in {} s",
        args.tenants,
        args.kube_qps,
        args.kube_burst,
        args.concurrency,
        args.startup_seconds,
        args.terminate_seconds
    );
    let sim = start_kubesim(&args, &dir).await;
    let client = sim.client.clone();

    // The tenants' objects, written before the operator starts.
    let started = Instant::now();
    futures::stream::iter(0..args.tenants)
        .map(|i| {
            let client = client.clone();
            let frontends = args.frontends;
            async move { create_tenant(&client, &namespace(i), frontends).await }
        })
        .buffer_unordered(32)
        .for_each(|_| async {})
        .await;
    println!(
        "tenants written (by the benchmark): {:.1} s",
        started.elapsed().as_secs_f64()
    );
    let seen = Arc::new(Mutex::new(Seen::default()));
    watch_fleet(&client, seen.clone());

    // 1. Provisioning.
    let operator = start_operator(&args, &dir, 1);
    let provisioning = sampled(
        &sim,
        &operator,
        until("provisioning", timeout, || {
            seen.lock().unwrap().done(args.tenants, nodes, 1) == args.tenants
        }),
    )
    .await;
    let pods = args.tenants as f64 * f64::from(nodes);
    println!(
        "provisioning: {:.1} s, {:.0} pods/s; operator requests {:.0}/s mean, {:.0}/s peak; {:.1} writes per node; RSS {:.0} MiB (peak {:.0} MiB)",
        provisioning.seconds,
        pods / provisioning.seconds,
        provisioning.mean_qps,
        provisioning.peak_qps,
        provisioning.writes as f64 / pods,
        operator.process.rss_mib(),
        provisioning.peak_rss_mib
    );
    println!(
        "provisioning: operator CPU {:.3} s per node created",
        operator.process.cpu_seconds() / pods
    );
    // At rest: past the fleet metrics' interval, which publishes the memory figures.
    tokio::time::sleep(Duration::from_secs(args.rest_seconds)).await;
    memory_line(&operator, "at rest after provisioning", args.tenants).await;

    print_series(&operator, "at rest after provisioning", args.tenants).await;

    // 2. Cold start: the operator killed, a pending change on one tenant, a fresh operator.
    drop(operator);
    Api::<ExpressCluster>::namespaced(client.clone(), &namespace(0))
        .patch(
            "t",
            &PatchParams::default(),
            &Patch::Merge(
                json!({"spec": {"defaults": {"frontend": {"expressVersion": "v1-hotfix"}}}}),
            ),
        )
        .await
        .expect("pending change");
    let (_, writes_before) = operator_requests(&sim).await;
    let operator = start_operator(&args, &dir, 2);
    let mut first_action = None;
    let (synced, verified) = cold_start(&operator, args.tenants, timeout, |text, elapsed| {
        if first_action.is_none()
            && sample(
                text,
                "express_operator_actions_total{action=\"replace_pod\"}",
            ) > 0.0
        {
            first_action = Some(elapsed);
        }
        first_action.is_some()
    })
    .await;
    let (_, writes_after) = operator_requests(&sim).await;
    println!(
        "cold start: caches filled in {:.2} s; every tenant verified {:.2} s after that, with {} writes (the one pending change included); first pod deletion for the pending change {} after the caches filled",
        synced.as_secs_f64(),
        (verified - synced).as_secs_f64(),
        writes_after - writes_before,
        first_action.map_or("not seen".into(), |a| format!(
            "{:.2} s",
            a.saturating_sub(synced).as_secs_f64()
        ))
    );
    println!(
        "cold start: operator CPU {:.4} s per tenant verified",
        operator.process.cpu_seconds() / args.tenants as f64
    );
    // A fresh operator holds the caches and nothing a provisioning left behind.
    tokio::time::sleep(Duration::from_secs(args.rest_seconds)).await;
    memory_line(
        &operator,
        "of the fresh operator, every tenant verified",
        args.tenants,
    )
    .await;
    until("the pending change", timeout, || {
        seen.lock()
            .unwrap()
            .clusters
            .get(&namespace(0))
            .is_some_and(|(g, o, h, u)| g == o && *h && *u == nodes)
    })
    .await;

    // 2b. A settled history: the older revisions a fleet keeps, and a fresh operator over them.
    let operator = if args.revisions > 1 {
        drop(operator);
        let started = Instant::now();
        futures::stream::iter(0..args.tenants)
            .map(|i| {
                let client = client.clone();
                let (frontends, older) = (args.frontends, args.revisions - 1);
                async move { add_history(&client, &namespace(i), frontends, older).await }
            })
            .buffer_unordered(32)
            .for_each(|_| async {})
            .await;
        println!(
            "history: {} ControllerRevisions per node (the benchmark added {} per node in {:.1} s)",
            args.revisions,
            args.revisions - 1,
            started.elapsed().as_secs_f64()
        );
        let operator = start_operator(&args, &dir, 3);
        let (synced, verified) = cold_start(&operator, args.tenants, timeout, |_, _| true).await;
        println!(
            "cold start on the settled history: caches filled in {:.2} s; every tenant verified {:.2} s after that",
            synced.as_secs_f64(),
            (verified - synced).as_secs_f64()
        );
        tokio::time::sleep(Duration::from_secs(args.rest_seconds)).await;
        memory_line(
            &operator,
            &format!(
                "of the fresh operator on a settled history ({} revisions per node), every tenant verified",
                args.revisions
            ),
            args.tenants,
        )
        .await;
        operator
    } else {
        operator
    };

    if args.stop_after_cold_starts {
        println!("stopped after the cold starts (--stop-after-cold-starts)");
        finish(operator, sim, &dir).await;
    }

    // 3. A fleet-wide upgrade: every ExpressCluster's version, patched as fast as the
    //    benchmark can (Argo CD syncing every tenant at once).
    let old_pods: HashSet<String> = seen.lock().unwrap().pods.keys().cloned().collect();
    let writes_by_kind_before = operator_writes_by_kind(&sim).await;
    let target_generation: HashMap<String, i64> = seen
        .lock()
        .unwrap()
        .clusters
        .iter()
        .map(|(ns, (g, ..))| (ns.clone(), g + 1))
        .collect();
    let started = Instant::now();
    let cpu_before_upgrade = operator.process.cpu_seconds();
    let reconciles_before_upgrade = reconciles(&operator).await;
    let upgrade = sampled(&sim, &operator, async {
        futures::stream::iter(0..args.tenants)
            .map(|i| {
                let client = client.clone();
                async move {
                    Api::<ExpressCluster>::namespaced(client, &namespace(i))
                        .patch("t", &PatchParams::default(), &Patch::Merge(json!({"spec": {"defaults": {
                            "backend": {"expressVersion": "v2"}, "frontend": {"expressVersion": "v2"}}}})))
                        .await
                        .expect("upgrade");
                }
            })
            .buffer_unordered(32)
            .for_each(|_| async {})
            .await;
        let patched = started.elapsed();
        println!("upgrade: every tenant patched by the benchmark in {:.1} s", patched.as_secs_f64());
        until("the fleet upgrade", timeout, || {
            let seen = seen.lock().unwrap();
            target_generation.iter().all(|(ns, g)| {
                seen.clusters.get(ns).is_some_and(|(generation, observed, healthy, up)| {
                    generation >= g && observed == generation && *healthy && *up == nodes
                })
            })
        })
        .await;
    })
    .await;
    let writes_by_kind_after = operator_writes_by_kind(&sim).await;
    let critical_path = f64::from(nodes) * (args.startup_seconds + args.terminate_seconds);
    println!(
        "upgrade: {:.1} s against a critical path of {critical_path:.0} s per tenant ({nodes} steps of {} s terminate + {} s start); operator requests {:.0}/s mean, {:.0}/s peak; peak RSS {:.0} MiB",
        upgrade.seconds,
        args.terminate_seconds,
        args.startup_seconds,
        upgrade.mean_qps,
        upgrade.peak_qps,
        upgrade.peak_rss_mib
    );
    println!(
        "upgrade: operator CPU {:.4} s per node change; {:.2} reconciles per node change",
        (operator.process.cpu_seconds() - cpu_before_upgrade) / pods,
        (reconciles(&operator).await - reconciles_before_upgrade) / pods
    );
    println!(
        "upgrade: {} operator writes, {:.2} per node upgraded ({} reads):",
        upgrade.writes,
        upgrade.writes as f64 / pods,
        upgrade.reads
    );
    for (kind, after) in &writes_by_kind_after {
        let delta = after - writes_by_kind_before.get(kind).copied().unwrap_or(0);
        if delta > 0 {
            println!(
                "  {kind:<45} {delta:>8}  ({:.2} per node)",
                delta as f64 / pods
            );
        }
    }

    // Per-step latency: a node's new pod Ready -> the next node's old pod deleted, per tenant.
    let mut steps = {
        let seen = seen.lock().unwrap();
        let mut deletions: HashMap<&str, Vec<(Instant, &str)>> = HashMap::new();
        let mut ready_new: HashMap<(&str, &str), Instant> = HashMap::new();
        for (uid, pod) in &seen.pods {
            if old_pods.contains(uid) {
                if let Some(at) = pod.deleting_at.filter(|at| *at >= started) {
                    deletions
                        .entry(&pod.namespace)
                        .or_default()
                        .push((at, &pod.name));
                }
            } else if let Some(at) = pod.ready_at {
                ready_new.insert((&pod.namespace, &pod.name), at);
            }
        }
        let mut steps = Vec::new();
        for (namespace, deleted) in &mut deletions {
            deleted.sort();
            for pair in deleted.windows(2) {
                if let Some(ready) = ready_new.get(&(*namespace, pair[0].1)) {
                    steps.push(pair[1].0.saturating_duration_since(*ready).as_secs_f64() * 1000.0);
                }
            }
        }
        steps
    };
    steps.sort_by(f64::total_cmp);
    println!(
        "upgrade: per-step latency (pod Ready -> next pod deleted) over {} steps: p50 {:.0} ms, p99 {:.0} ms, max {:.0} ms",
        steps.len(),
        percentile(&steps, 50.0),
        percentile(&steps, 99.0),
        steps.last().copied().unwrap_or(f64::NAN)
    );
    tokio::time::sleep(Duration::from_secs(args.rest_seconds)).await;
    memory_line(&operator, "at rest after the upgrade", args.tenants).await;
    print_series(&operator, "after the upgrade", args.tenants).await;

    // 4. A forced relist: history compacted and every watch cut, so that each watch lists its
    //    kind again (kube's watcher resumes from its last version, gets 410 Gone, relists).
    for control in ["compact", "close-watches"] {
        let url = format!("{}/kubesim/{control}", sim.url);
        let answer = http_post(&url).await;
        assert!(answer.is_some_and(|(code, _)| code < 300), "POST {url}");
    }
    tokio::time::sleep(Duration::from_secs(args.rest_seconds + 10)).await;
    memory_line(&operator, "at rest after a forced relist", args.tenants).await;
    finish(operator, sim, &dir).await
}

/// Stops the operator, weighs the first tenant's objects, stops kubesim and exits.
async fn finish(operator: Operator, sim: Sim, dir: &Path) -> ! {
    drop(operator);
    cache_cost_per_kind(&sim.client, &namespace(0)).await;
    drop(sim);
    let _ = std::fs::remove_dir_all(dir);
    // The watches still running would only retry against the stopped kubesim.
    std::process::exit(0);
}

/// The series the operator's `/metrics` exposes (its sample lines, as Prometheus stores
/// them), and how many belong to the per-tenant families that `--per-tenant-metrics=false`
/// leaves out.
async fn print_series(operator: &Operator, when: &str, tenants: usize) {
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

/// Counts the heap this process holds, for [`cache_cost_per_kind`]; it only forwards to the
/// system allocator while no dhat profiler runs.
#[global_allocator]
static ALLOCATOR: dhat::Alloc = dhat::Alloc;

/// What each cached kind costs: one tenant's objects as the API serves them, each decoded
/// 200 times the way the operator's caches decode them (`Lenient<K>`: slimmed, then decoded,
/// behind an `Arc`, keyed by its `ObjectRef` as the reflector's store keys it), weighed by the
/// heap bytes they hold (requested sizes: the allocator's rounding and headers come on top).
async fn cache_cost_per_kind(client: &kube::Client, namespace: &str) {
    use express_api::lenient::Lenient;
    use express_api::views::{Interner, NodeView, PodView, RevisionView};
    use k8s_openapi::api::apps::v1::ControllerRevision;
    use kube::api::{ApiResource, DynamicObject, ListParams};

    async fn raw<K: kube::Resource<DynamicType = ()>>(
        client: &kube::Client,
        namespace: &str,
    ) -> Vec<serde_json::Value> {
        let resource = ApiResource::erase::<K>(&());
        Api::<DynamicObject>::namespaced_with(client.clone(), namespace, &resource)
            .list(&ListParams::default())
            .await
            .expect("list")
            .items
            .into_iter()
            .map(|o| {
                let mut value = serde_json::to_value(o).expect("json");
                value["apiVersion"] = json!(resource.api_version);
                value["kind"] = json!(resource.kind);
                value
            })
            .collect()
    }

    /// Weighs what the operator's index keeps of each object (`Watch::view` in the
    /// controller's caches): its view, behind an `Arc`, keyed by its name.
    fn weigh<K, V>(raw: &[serde_json::Value], view: fn(&Arc<K>, &Interner) -> Arc<V>) -> f64
    where
        K: kube::Resource<DynamicType = ()> + serde::de::DeserializeOwned + Clone,
        Lenient<K>: kube::Resource<DynamicType = ()>,
    {
        const COPIES: usize = 200;
        let texts: Vec<String> = raw.iter().map(|v| v.to_string()).collect();
        let interner = Interner::default();
        let before = dhat::HeapStats::get().curr_bytes;
        let mut held = Vec::with_capacity(COPIES * texts.len());
        for copy in 0..COPIES {
            for text in &texts {
                let object: Lenient<K> = serde_json::from_str(text).expect("decode");
                let name = format!(
                    "{copy}-{}",
                    kube::Resource::meta(&object)
                        .name
                        .clone()
                        .unwrap_or_default()
                );
                if let Some(decoded) = object.decoded() {
                    held.push((name.into_boxed_str(), view(decoded, &interner)));
                }
            }
        }
        let after = dhat::HeapStats::get().curr_bytes;
        // The vector holding them is the measurement's, not the cache's.
        let vector = std::mem::size_of_val(held.as_slice());
        let bytes =
            after.saturating_sub(before + vector) as f64 / (COPIES * texts.len().max(1)) as f64;
        drop(held);
        bytes
    }

    fn whole<K>(object: &Arc<K>, _: &Interner) -> Arc<K> {
        object.clone()
    }

    type Weigh = fn(&[serde_json::Value]) -> f64;
    let kinds: [(&str, Vec<serde_json::Value>, Weigh); 5] = [
        (
            "ExpressCluster",
            raw::<ExpressCluster>(client, namespace).await,
            |raw| weigh::<ExpressCluster, _>(raw, whole),
        ),
        (
            "Backend (view)",
            raw::<Backend>(client, namespace).await,
            |raw| {
                weigh::<Backend, _>(raw, |node, interner| {
                    Arc::new(NodeView::of(&**node, Some(interner)))
                })
            },
        ),
        (
            "Frontend (view)",
            raw::<Frontend>(client, namespace).await,
            |raw| {
                weigh::<Frontend, _>(raw, |node, interner| {
                    Arc::new(NodeView::of(&**node, Some(interner)))
                })
            },
        ),
        ("Pod (view)", raw::<Pod>(client, namespace).await, |raw| {
            weigh::<Pod, _>(raw, |pod, interner| {
                Arc::new(PodView::new(pod, Some(interner)))
            })
        }),
        (
            "ControllerRevision (view)",
            raw::<ControllerRevision>(client, namespace).await,
            |raw| {
                weigh::<ControllerRevision, _>(raw, |revision, interner| {
                    Arc::new(RevisionView::new(revision, Some(interner)))
                })
            },
        ),
    ];
    let _profiler = dhat::Profiler::builder().testing().build();
    let mut per_tenant = 0.0;
    let mut parts = Vec::new();
    for (kind, objects, weigh) in &kinds {
        let bytes = weigh(objects);
        per_tenant += bytes * objects.len() as f64;
        parts.push(format!("{kind} {bytes:.0} B x {}", objects.len()));
    }
    println!(
        "cache cost per kind (heap bytes per decoded object, the tenant's count): {}; {:.1} KiB per tenant",
        parts.join(", "),
        per_tenant / 1024.0
    );
}
