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

mod args;
mod cache_cost;
mod control_plane;
mod dashboard;
mod harness;
mod http;
mod measure;
mod metrics_text;
mod reads;
mod standby;
mod tenants;
mod watch;

use std::collections::{BTreeMap, HashMap, HashSet};
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use clap::Parser;
use express_api::ExpressCluster;
use futures::StreamExt;
use kube::api::{Api, Patch, PatchParams};
use serde_json::json;

use args::Args;
use args::Substrate;
use cache_cost::cache_cost_per_kind;
use harness::{Operator, Sim, operator_flags, start_operator, start_substrate};
use http::http_post;
use measure::{
    cold_start, memory_line, operator_requests, operator_writes_by_kind, percentile, print_series,
    reconciles, sample, sampled,
};
use tenants::{add_history, create_tenant, namespace};
use watch::{Seen, until, watch_fleet};

/// What every phase works with.
struct Bench {
    args: Args,
    /// Nodes per tenant: its frontends and one Backend.
    nodes: u32,
    /// How long any one phase may take.
    timeout: Duration,
    /// The kubeconfig and the operators' logs.
    dir: PathBuf,
    sim: Sim,
    seen: Arc<Mutex<Seen>>,
}

impl Bench {
    /// Every pod of the fleet, which the per-node figures divide by.
    fn pods(&self) -> f64 {
        self.args.tenants as f64 * f64::from(self.nodes)
    }
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    let bench = set_up().await;
    let operator = provision(&bench).await;
    let operator = cold_start_with_pending_change(&bench, operator).await;
    let operator = if bench.args.revisions > 1 {
        cold_start_on_settled_history(&bench, operator).await
    } else {
        operator
    };
    if bench.args.stop_after_cold_starts {
        println!("stopped after the cold starts (--stop-after-cold-starts)");
        finish(bench, operator).await;
    }
    upgrade(&bench, &operator).await;
    if bench.args.upgrades > 0 {
        upgrades_in_a_row(&bench, &operator).await;
    }
    reads::reads(
        bench.args.plugin.clone(),
        &bench.sim.admin_kubeconfig,
        bench.args.tenants,
    )
    .await;
    dashboard::dashboard(&bench, bench.args.plugin.clone()).await;
    standby::standby_starts(&bench).await;
    forced_relist(&bench, &operator).await;
    finish(bench, operator).await
}

/// kubesim started, every tenant's objects written before any operator runs, and the
/// benchmark's watches on them.
async fn set_up() -> Bench {
    let args = Args::parse();
    let nodes = u32::try_from(args.frontends + 1).expect("nodes");
    let timeout = Duration::from_secs(args.timeout_seconds);
    let dir = std::env::temp_dir().join(format!("express-fleet-bench-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("work dir");
    if args.substrate == Substrate::Real {
        // kwok's stages (tests/real-cluster/stages) start and stop a pod in 1 s unless its
        // annotations say otherwise, and the benchmark's tenants carry none.
        assert!(
            args.startup_seconds == 1.0 && args.terminate_seconds == 1.0,
            "on the real control plane pods start and terminate in kwok's 1 s"
        );
    }
    println!(
        "fleet benchmark on {:?}: {} tenants x {nodes} nodes; operator `{}`{}; pods start in {} s, terminate in {} s",
        args.substrate,
        args.tenants,
        operator_flags(&args).join(" "),
        if args.chart_args.is_some() {
            " (the chart's defaults)"
        } else {
            ""
        },
        args.startup_seconds,
        args.terminate_seconds
    );
    let sim = start_substrate(&args, &dir).await;
    write_tenants(&sim.client, &args).await;
    let seen = Arc::new(Mutex::new(Seen::default()));
    watch_fleet(&sim.client, seen.clone());
    Bench {
        args,
        nodes,
        timeout,
        dir,
        sim,
        seen,
    }
}

impl Bench {
    /// The real control plane's reading (none on kubesim).
    async fn control_plane(&self) -> Option<control_plane::Reading> {
        match &self.sim.cluster {
            Some(cluster) => Some(control_plane::read(&self.sim.client, cluster).await),
            None => None,
        }
    }

    /// What a phase cost the real control plane, since `before`.
    async fn report_control_plane(
        &self,
        phase: &str,
        before: Option<control_plane::Reading>,
        seconds: f64,
    ) {
        if let (Some(before), Some(after)) = (before, self.control_plane().await) {
            control_plane::report(phase, &before, &after, seconds);
        }
    }
}

/// The tenants' objects, written before the operator starts.
async fn write_tenants(client: &kube::Client, args: &Args) {
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
}

/// 1. Provisioning: the first operator creates every pod of the fleet.
async fn provision(bench: &Bench) -> Operator {
    let (args, nodes, seen) = (&bench.args, bench.nodes, &bench.seen);
    let plane = bench.control_plane().await;
    let operator = start_operator(args, &bench.sim, &bench.dir, 1);
    let provisioning = sampled(
        &bench.sim,
        &operator,
        until("provisioning", bench.timeout, || {
            seen.lock().unwrap().done(args.tenants, nodes, 1) == args.tenants
        }),
    )
    .await;
    let pods = bench.pods();
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
    bench
        .report_control_plane("provisioning", plane, provisioning.seconds)
        .await;
    // At rest: past the fleet metrics' interval, which publishes the memory figures.
    tokio::time::sleep(Duration::from_secs(args.rest_seconds)).await;
    memory_line(&operator, "at rest after provisioning", args.tenants).await;

    print_series(&operator, "at rest after provisioning", args.tenants).await;
    operator
}

/// 2. Cold start: the operator killed, a pending change on one tenant, a fresh operator.
async fn cold_start_with_pending_change(bench: &Bench, operator: Operator) -> Operator {
    let (args, nodes, seen, sim) = (&bench.args, bench.nodes, &bench.seen, &bench.sim);
    drop(operator);
    Api::<ExpressCluster>::namespaced(sim.client.clone(), &namespace(0))
        .patch(
            "t",
            &PatchParams::default(),
            &Patch::Merge(
                json!({"spec": {"defaults": {"frontend": {"expressVersion": "v1-hotfix"}}}}),
            ),
        )
        .await
        .expect("pending change");
    let (_, writes_before) = operator_requests(sim).await;
    let operator = start_operator(args, sim, &bench.dir, 2);
    let mut first_action = None;
    let (synced, verified) = cold_start(&operator, args.tenants, bench.timeout, |text, elapsed| {
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
    let (_, writes_after) = operator_requests(sim).await;
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
    until("the pending change", bench.timeout, || {
        seen.lock()
            .unwrap()
            .clusters
            .get(&namespace(0))
            .is_some_and(|(g, o, h, u)| g == o && *h && *u == nodes)
    })
    .await;
    operator
}

/// 2b. A settled history: the older revisions a fleet keeps, and a fresh operator over them.
async fn cold_start_on_settled_history(bench: &Bench, operator: Operator) -> Operator {
    let args = &bench.args;
    drop(operator);
    write_history(&bench.sim.client, args).await;
    let operator = start_operator(args, &bench.sim, &bench.dir, 3);
    let (synced, verified) = cold_start(&operator, args.tenants, bench.timeout, |_, _| true).await;
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
}

/// The ControllerRevisions provisioning did not create, up to `--revisions` per node.
async fn write_history(client: &kube::Client, args: &Args) {
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
}

/// 3. A fleet-wide upgrade: every ExpressCluster's version, patched as fast as the
///    benchmark can (Argo CD syncing every tenant at once).
async fn upgrade(bench: &Bench, operator: &Operator) {
    let (args, nodes, seen, sim) = (&bench.args, bench.nodes, &bench.seen, &bench.sim);
    let pods = bench.pods();
    let old_pods: HashSet<String> = seen.lock().unwrap().pods.keys().cloned().collect();
    let writes_by_kind_before = operator_writes_by_kind(sim).await;
    let target_generation = next_generations(&seen.lock().unwrap());
    let plane = bench.control_plane().await;
    let started = Instant::now();
    let cpu_before_upgrade = operator.process.cpu_seconds();
    let reconciles_before_upgrade = reconciles(operator).await;
    let upgrade = sampled(sim, operator, async {
        patch_every_tenant(&sim.client, args.tenants).await;
        let patched = started.elapsed();
        println!(
            "upgrade: every tenant patched by the benchmark in {:.1} s",
            patched.as_secs_f64()
        );
        until("the fleet upgrade", bench.timeout, || {
            upgraded(&seen.lock().unwrap(), &target_generation, nodes)
        })
        .await;
    })
    .await;
    let writes_by_kind_after = operator_writes_by_kind(sim).await;
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
        (reconciles(operator).await - reconciles_before_upgrade) / pods
    );
    println!(
        "upgrade: {} operator writes, {:.2} per node upgraded ({} reads):",
        upgrade.writes,
        upgrade.writes as f64 / pods,
        upgrade.reads
    );
    print_writes_by_kind(&writes_by_kind_before, &writes_by_kind_after, pods);
    bench
        .report_control_plane("upgrade", plane, upgrade.seconds)
        .await;

    let mut steps = step_latencies(&seen.lock().unwrap(), &old_pods, started);
    steps.sort_by(f64::total_cmp);
    println!(
        "upgrade: per-step latency (pod Ready -> next pod deleted) over {} steps: p50 {:.0} ms, p99 {:.0} ms, max {:.0} ms",
        steps.len(),
        percentile(&steps, 50.0),
        percentile(&steps, 99.0),
        steps.last().copied().unwrap_or(f64::NAN)
    );
    let mut starts = start_latencies(&seen.lock().unwrap(), &old_pods);
    starts.sort_by(f64::total_cmp);
    let quiet_ms = express_operator::status::quiet_start::QUIET_START_MS as f64;
    println!(
        "upgrade: new pods' start (first seen -> Ready) over {} pods: p50 {:.0} ms, p90 {:.0} ms, p99 {:.0} ms; {:.1} % slower than the quiet start ({:.0} s)",
        starts.len(),
        percentile(&starts, 50.0),
        percentile(&starts, 90.0),
        percentile(&starts, 99.0),
        100.0 * starts.iter().filter(|ms| **ms > quiet_ms).count() as f64
            / starts.len().max(1) as f64,
        quiet_ms / 1000.0
    );
    tokio::time::sleep(Duration::from_secs(args.rest_seconds)).await;
    memory_line(operator, "at rest after the upgrade", args.tenants).await;
    print_series(operator, "after the upgrade", args.tenants).await;
}

/// 4. `--upgrades` more fleet-wide upgrades in a row, each to a version of its own: the
///    operator's RSS at rest and its API requests after each. Nothing the operator keeps may
///    grow with the rollouts it has done: the RSS at rest after the last is compared with
///    after the third (the first two still fill the caches' and allocator's steady state).
async fn upgrades_in_a_row(bench: &Bench, operator: &Operator) {
    let (args, nodes, seen, sim) = (&bench.args, bench.nodes, &bench.seen, &bench.sim);
    let mut rest_rss = Vec::new();
    println!("upgrades in a row: #, seconds, operator requests (reads + writes), RSS at rest");
    for round in 1..=args.upgrades {
        let version = format!("v{}", round + 2);
        let target_generation = next_generations(&seen.lock().unwrap());
        let run = sampled(sim, operator, async {
            patch_every_tenant_to(&sim.client, args.tenants, &version).await;
            until("an upgrade in a row", bench.timeout, || {
                upgraded(&seen.lock().unwrap(), &target_generation, nodes)
            })
            .await;
        })
        .await;
        tokio::time::sleep(Duration::from_secs(args.rest_seconds)).await;
        let rss = operator.process.rss_mib();
        rest_rss.push(rss);
        println!(
            "  {round:>2}  {:6.1} s  {:>7} requests ({} reads, {} writes)  RSS at rest {rss:.0} MiB",
            run.seconds,
            run.reads + run.writes,
            run.reads,
            run.writes
        );
    }
    if rest_rss.len() >= 3 {
        let (third, last) = (rest_rss[2], rest_rss[rest_rss.len() - 1]);
        println!(
            "upgrades in a row: RSS at rest after #{} {last:.0} MiB against {third:.0} MiB after #3 ({:+.1} %)",
            rest_rss.len(),
            (last - third) / third * 100.0
        );
    }
    memory_line(
        operator,
        "at rest after the upgrades in a row",
        args.tenants,
    )
    .await;
}

/// Every tenant's new version (v2), patched 32 at a time.
async fn patch_every_tenant(client: &kube::Client, tenants: usize) {
    patch_every_tenant_to(client, tenants, "v2").await;
}

/// Every tenant's version set to `version`, patched 32 at a time.
async fn patch_every_tenant_to(client: &kube::Client, tenants: usize, version: &str) {
    futures::stream::iter(0..tenants)
        .map(|i| {
            let client = client.clone();
            let version = version.to_owned();
            async move {
                Api::<ExpressCluster>::namespaced(client, &namespace(i))
                    .patch("t", &PatchParams::default(), &Patch::Merge(json!({"spec": {"defaults": {
                        "backend": {"expressVersion": version}, "frontend": {"expressVersion": version}}}})))
                    .await
                    .expect("upgrade");
            }
        })
        .buffer_unordered(32)
        .for_each(|_| async {})
        .await;
}

/// Each tenant's generation after the next spec change: the target an upgrade waits for.
fn next_generations(seen: &Seen) -> HashMap<String, i64> {
    seen.clusters
        .iter()
        .map(|(ns, (g, ..))| (ns.clone(), g + 1))
        .collect()
}

/// Whether every tenant reached its target generation, observed, Healthy and up to date.
fn upgraded(seen: &Seen, target_generation: &HashMap<String, i64>, nodes: u32) -> bool {
    target_generation.iter().all(|(ns, g)| {
        seen.clusters
            .get(ns)
            .is_some_and(|(generation, observed, healthy, up)| {
                generation >= g && observed == generation && *healthy && *up == nodes
            })
    })
}

/// The upgrade's operator writes by "verb resource", with each kind's share per node.
fn print_writes_by_kind(before: &BTreeMap<String, u64>, after: &BTreeMap<String, u64>, pods: f64) {
    for (kind, after) in after {
        let delta = after - before.get(kind).copied().unwrap_or(0);
        if delta > 0 {
            println!(
                "  {kind:<45} {delta:>8}  ({:.2} per node)",
                delta as f64 / pods
            );
        }
    }
}

/// Per-step latency, ms: a node's new pod Ready -> the next node's old pod deleted, per tenant.
fn step_latencies(seen: &Seen, old_pods: &HashSet<String>, started: Instant) -> Vec<f64> {
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
}

/// Each new pod's start, ms: first seen by the watch -> Ready. Longer than the quiet start,
/// its node's status is written once more ("new pod starting").
fn start_latencies(seen: &Seen, old_pods: &HashSet<String>) -> Vec<f64> {
    seen.pods
        .iter()
        .filter(|(uid, _)| !old_pods.contains(*uid))
        .filter_map(|(_, pod)| {
            pod.ready_at.map(|ready| {
                ready
                    .saturating_duration_since(pod.first_seen_at)
                    .as_secs_f64()
                    * 1000.0
            })
        })
        .collect()
}

/// 4. A forced relist: history compacted and every watch cut, so that each watch lists its
///    kind again (kube's watcher resumes from its last version, gets 410 Gone, relists).
async fn forced_relist(bench: &Bench, operator: &Operator) {
    let args = &bench.args;
    if bench.sim.substrate == Substrate::Real {
        // The real control plane's relists are the fault scenarios' (issue 78), not this
        // benchmark's: it has no endpoint that compacts and cuts watches at once.
        println!("forced relist: kubesim only");
        return;
    }
    for control in ["compact", "close-watches"] {
        let url = format!("{}/kubesim/{control}", bench.sim.url);
        let answer = http_post(&url).await;
        assert!(answer.is_some_and(|(code, _)| code < 300), "POST {url}");
    }
    tokio::time::sleep(Duration::from_secs(args.rest_seconds + 10)).await;
    memory_line(operator, "at rest after a forced relist", args.tenants).await;
}

/// Stops the operator, weighs the first tenant's objects, stops kubesim and exits.
async fn finish(bench: Bench, operator: Operator) -> ! {
    let Bench { sim, dir, .. } = bench;
    drop(operator);
    cache_cost_per_kind(&sim.client, &namespace(0)).await;
    drop(sim);
    let _ = std::fs::remove_dir_all(&dir);
    // The watches still running would only retry against the stopped kubesim.
    std::process::exit(0);
}
