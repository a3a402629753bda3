//! `express-operator dev --dcs N`: N local DCs, each a kubesim of its own on loopback behind a
//! bearer token, with two operator rings (`default` leading its tenants, `canary` running the
//! same build, ready to be released to) and sample tenants in several namespaces (one pinned to
//! `default`); one kubeconfig with a context per DC (`dev-a`, `dev-b`...) and a FleetRelease
//! plan beside it. `--demo` then releases ring `canary` across the DCs with `kubectl express
//! fleet-release` and exits with its verdict; `--fail-in DC` makes the canary build of that DC
//! unable to write, so that its own release rolls back and the plan stops.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use express_api::{ClusterPhase, ExpressCluster};
use express_client::fleet_release::start::{self, Plan, Reach};
use kube::api::Api;
use kubesim::kubelet::KubeletConfig;
use kubesim::{Config, KubeSim};

use futures::FutureExt as _;

use super::notifications::DemoNotifications;
use super::prometheus::{self, DemoPrometheus};
use super::tenants::{DevError, create_pinned_tenant};
use crate::controller::{self, Settings};
use crate::install::{create_namespace, install_crds};
use crate::metrics::Metrics;

/// The operator rings of every local DC.
const RINGS: [&str; 2] = ["default", "canary"];
/// The sample tenants of every DC: namespace, and the ring it is pinned to.
const TENANTS: [(&str, Option<&str>); 3] = [
    ("team-a", None),
    ("team-b", None),
    ("team-pinned", Some("default")),
];
/// The name of the demo's plan.
const PLAN: &str = "to-canary";

pub struct DcsOptions {
    pub kubeconfig: PathBuf,
    pub dcs: usize,
    pub startup_seconds: f64,
    pub demo: bool,
    /// With the demo: the DC whose canary build cannot write.
    pub fail_in: Option<String>,
}

/// One local DC and what runs in it.
struct Dc {
    context: String,
    sim: KubeSim,
    client: kube::Client,
    operators: Vec<tokio::task::JoinHandle<()>>,
    /// Where each ring's operator serves `/metrics` (the demo's Prometheus scrapes them).
    metrics: Vec<std::net::SocketAddr>,
}

fn context_name(index: usize) -> String {
    format!("dev-{}", char::from(b'a' + index as u8))
}

/// The User-Agent of a ring's operator in the local DCs (kubesim counts and stops by it).
fn agent(ring: &str) -> String {
    format!("express-operator dev (ring {ring})")
}

async fn start_dc(index: usize, startup_seconds: f64) -> Result<Dc, DevError> {
    let context = context_name(index);
    let sim = KubeSim::start(Config {
        addr: std::net::SocketAddr::from(([127, 0, 0, 1], 0)),
        kubelet: KubeletConfig {
            startup_seconds,
            terminate_seconds: 0.2,
            rules: Vec::new(),
        },
        pod_termination_seconds: 0.2,
        // Each DC answers only its own credentials, as real clusters do.
        token: Some(format!("{context}-{}", std::process::id())),
        ..Config::default()
    })
    .await?;
    let client = sim.client()?;
    install_crds(&client).await?;
    create_namespace(&client, crate::controller::DEFAULT_OPERATOR_NAMESPACE).await?;
    let mut operators = Vec::new();
    let mut served = Vec::new();
    for ring in RINGS {
        let operator = sim.client_with_agent(&agent(ring))?;
        let mut settings = Settings::cluster_wide(&format!("{context}-{ring}"), 8);
        settings.ring = ring.into();
        let (leader, election) = crate::leader::elect(
            operator.clone(),
            &settings.operator_namespace,
            ring,
            &settings.identity,
        )
        .await
        .map_err(|e| DevError::Lease(e.to_string()))?;
        let metrics = Metrics::new();
        let listener = tokio::net::TcpListener::bind(("127.0.0.1", 0))
            .await
            .map_err(|e| DevError::Demo(format!("cannot serve {context}'s {ring} metrics: {e}")))?;
        served.push(listener.local_addr().map_err(|e| {
            DevError::Demo(format!("cannot serve {context}'s {ring} metrics: {e}"))
        })?);
        operators.push(tokio::spawn(
            crate::metrics::serve_on(listener, metrics.clone()).map(|_| ()),
        ));
        operators.push(tokio::spawn(async move {
            // The election lives as long as its operator.
            let _election = election;
            controller::run(operator, settings, metrics, leader).await;
        }));
    }
    for (namespace, ring) in TENANTS {
        create_pinned_tenant(&client, namespace, "shop", 2, "express-e689.154", ring).await?;
    }
    Ok(Dc {
        context,
        sim,
        client,
        operators,
        metrics: served,
    })
}

async fn healthy(dc: &Dc) -> bool {
    let Ok(list) = Api::<ExpressCluster>::all(dc.client.clone())
        .list(&Default::default())
        .await
    else {
        return false;
    };
    list.items.len() == TENANTS.len()
        && list.items.iter().all(|c| {
            c.status.as_ref().is_some_and(|s| {
                s.phase == Some(ClusterPhase::Healthy)
                    && s.observed_generation == c.metadata.generation
            })
        })
}

/// One kubeconfig with a context per DC, each with its own server and token.
fn kubeconfig(dcs: &[Dc]) -> String {
    let quoted = |s: &str| serde_json::Value::String(s.to_owned()).to_string();
    let mut out = String::from("apiVersion: v1\nkind: Config\nclusters:\n");
    for dc in dcs {
        out.push_str(&format!(
            "- name: {0}\n  cluster:\n    server: {1}\n",
            dc.context,
            dc.sim.url()
        ));
    }
    out.push_str("users:\n");
    for dc in dcs {
        let token = dc.sim.token().unwrap_or_default();
        out.push_str(&format!(
            "- name: {0}\n  user:\n    token: {1}\n",
            dc.context,
            quoted(token)
        ));
    }
    out.push_str("contexts:\n");
    for dc in dcs {
        out.push_str(&format!(
            "- name: {0}\n  context:\n    cluster: {0}\n    user: {0}\n",
            dc.context
        ));
    }
    out.push_str(&format!(
        "current-context: {}\n",
        dcs.first().map_or("dev-a", |d| d.context.as_str())
    ));
    out
}

/// The demo's plan: the first DC alone, then the rest together; a DC made to fail gets a stage
/// of its own before the rest, so that the plan stops before them. Short bakes and soak.
/// The plan: `first` alone, then the failing DC alone (`--fail-in`), then the `rest`; with
/// `approval`, the last stage waits for a person's approval (the demo's notifications tell it).
fn plan(
    contexts: &[String],
    fail_in: Option<&str>,
    prometheus: Option<&str>,
    approval: bool,
) -> String {
    let (first, rest) = contexts
        .split_first()
        .map_or((None, &[][..]), |(f, r)| (Some(f), r));
    let mut stages: Vec<(String, Vec<String>)> = Vec::new();
    if let Some(first) = first {
        stages.push(("first".into(), vec![first.clone()]));
    }
    let failing: Vec<String> = rest
        .iter()
        .filter(|c| Some(c.as_str()) == fail_in)
        .cloned()
        .collect();
    if !failing.is_empty() {
        stages.push(("suspect".into(), failing));
    }
    let others: Vec<String> = rest
        .iter()
        .filter(|c| Some(c.as_str()) != fail_in)
        .cloned()
        .collect();
    if !others.is_empty() {
        stages.push(("rest".into(), others));
    }
    // With a Prometheus, each wave bakes long enough for one analysed sample (the window
    // starts 15 s after the wave is adopted). The demo's operators share one process (memory
    // is not theirs alone) and kubesim's clients (their requests are not counted): the demo
    // compares reconcile errors and latency.
    let (bake, analysis) = match prometheus {
        Some(url) => (
            17,
            format!(
                "\n    analysis:\n      prometheus: {{address: \"{url}\"}}\n      windowSeconds: 30\n      signals: [reconcileErrorRatio, reconcileLatencyP95]"
            ),
        ),
        None => (2, String::new()),
    };
    let last = stages.len().saturating_sub(1);
    let stages: Vec<String> = stages
        .iter()
        .enumerate()
        .map(|(i, (name, contexts))| {
            let gate = if approval && i == last && i > 0 {
                ", approval: true"
            } else {
                ""
            };
            format!(
                "  - {{name: {name}, contexts: [{}]{gate}}}",
                contexts.join(", ")
            )
        })
        .collect();
    format!(
        "apiVersion: express.dev/v1alpha1
kind: FleetRelease
metadata:
  name: {PLAN}
  namespace: express-system
spec:
  fromRing: default
  toRing: canary
  release:
    waves: [{{tenants: 1}}, {{percent: 100}}]
    bakeSeconds: {bake}
    intervalSeconds: 1
    failureLimit: 1
    adoptionDeadlineSeconds: 15{analysis}
  stages:
{}
  soakSeconds: 5
  stageDeadlineSeconds: 300
",
        stages.join("\n")
    )
}

fn write(path: &Path, text: &str) -> Result<(), DevError> {
    std::fs::write(path, text).map_err(|source| DevError::Kubeconfig {
        path: path.to_owned(),
        source,
    })
}

pub async fn run(options: DcsOptions) -> Result<(), DevError> {
    let origin = Instant::now();
    let mut dcs = Vec::new();
    for index in 0..options.dcs {
        dcs.push(start_dc(index, options.startup_seconds).await?);
    }
    let contexts: Vec<String> = dcs.iter().map(|d| d.context.clone()).collect();
    if let Some(dc) = &options.fail_in
        && !contexts.contains(dc)
    {
        return Err(DevError::Demo(format!(
            "--fail-in {dc}: no such DC (they are {})",
            contexts.join(", ")
        )));
    }
    let limit = Duration::from_secs(90);
    for dc in &dcs {
        let deadline = Instant::now() + limit;
        while !healthy(dc).await {
            if Instant::now() > deadline {
                return Err(DevError::Timeout(limit));
            }
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    }
    write(&options.kubeconfig, &kubeconfig(&dcs))?;
    let prometheus = if options.demo {
        demo_prometheus(&options.kubeconfig, &dcs)?
    } else {
        None
    };
    let plan_path = options.kubeconfig.with_extension("fleet-release.yaml");
    write(
        &plan_path,
        &plan(
            &contexts,
            options.fail_in.as_deref(),
            prometheus.as_ref().map(|p| p.url.as_str()),
            options.demo,
        ),
    )?;
    let notifications = if options.demo {
        let started =
            DemoNotifications::start(&options.kubeconfig.with_extension("notifications")).await?;
        for dc in &dcs {
            started.configure(&dc.client, &dc.context).await?;
        }
        println!("demo: every DC tells {}", started.describe());
        Some(started)
    } else {
        None
    };
    println!(
        "{} DCs ready in {:.1}s ({}), each a kubesim behind its own token with operator rings default (leading every tenant) and canary (the same build, driving nothing yet), tenants team-a/shop, team-b/shop and team-pinned/shop (pinned to ring default); kubeconfig: {}",
        dcs.len(),
        origin.elapsed().as_secs_f64(),
        contexts.join(", "),
        options.kubeconfig.display()
    );
    let kc = options.kubeconfig.display();
    let plan_shown = plan_path.display();
    if options.demo {
        println!("demo: releasing ring canary across the DCs ({plan_shown})");
        return demo(&options, dcs, prometheus, notifications, &plan_path).await;
    }
    println!();
    println!("  export KUBECONFIG={kc}");
    println!(
        "  kubectl express doctor --all-contexts            # is it the infrastructure, and where?"
    );
    println!("  kubectl express list -A --all-contexts           # every tenant of every DC");
    println!("  kubectl express rings --all-contexts             # who leads which ring, per DC");
    println!("  kubectl express dashboard -A --all-contexts      # one fleet page over the DCs");
    println!("  kubectl express fleet-release plan -f {plan_shown}");
    println!("  kubectl express fleet-release run -f {plan_shown}");
    println!("  kubectl express fleet-release {PLAN}");
    println!();
    println!("the DCs are running; Ctrl-C stops everything");
    let _ = tokio::signal::ctrl_c().await;
    stop(dcs);
    Ok(())
}

/// The demo's Prometheus, scraping every operator of every DC; none (and why, said) without
/// a `prometheus` binary.
fn demo_prometheus(kubeconfig: &Path, dcs: &[Dc]) -> Result<Option<DemoPrometheus>, DevError> {
    match prometheus::find() {
        Err(why) => {
            println!("demo: the release's analysis (the operators' vital signs) is skipped: {why}");
            Ok(None)
        }
        Ok(binary) => {
            let targets: Vec<std::net::SocketAddr> =
                dcs.iter().flat_map(|d| d.metrics.iter().copied()).collect();
            let started =
                DemoPrometheus::start(&binary, &kubeconfig.with_extension("prometheus"), &targets)?;
            println!(
                "demo: prometheus at {} scrapes every ring's operator; each DC's release compares ring canary with ring default on reconcile errors and p95 latency",
                started.url
            );
            Ok(Some(started))
        }
    }
}

/// The demo: the plan driven to its end (approved when the webhook tells it waits, as the SRE
/// would), what the webhook was told, the vital signs; the DCs stopped after.
async fn demo(
    options: &DcsOptions,
    dcs: Vec<Dc>,
    prometheus: Option<DemoPrometheus>,
    notifications: Option<DemoNotifications>,
    plan_path: &Path,
) -> Result<(), DevError> {
    let failing = options
        .fail_in
        .as_ref()
        .and_then(|name| dcs.iter().find(|d| &d.context == name));
    let reach = Reach {
        operator_namespace: crate::controller::DEFAULT_OPERATOR_NAMESPACE.to_owned(),
        kubeconfig: Some(options.kubeconfig.clone()),
        context: None,
        context_timeout: Duration::from_secs(5),
    };
    let timeout = Duration::from_secs(if prometheus.is_some() { 160 } else { 110 });
    let deadline = Instant::now() + timeout;
    let code = {
        // The failing DC's canary stops writing once its release exists: it led its ring until
        // then, as a build that breaks under load does.
        let breaking = async {
            if let Some(dc) = failing {
                stop_writes_when_released(dc).await;
            }
            std::future::pending::<()>().await
        };
        tokio::pin!(breaking);
        let mut plan = Plan::File(plan_path.to_owned());
        let mut approved = false;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            let code = tokio::select! {
                code = start::run(&reach, &plan, Some(left), start::DEFAULT_POLL) => code,
                () = &mut breaking => continue,
            };
            // The driver stops at the gate (exit 5); the SRE told of it approves, the plan resumes.
            let waits = matches!(&code, Ok(code) if code.number() == 5);
            if let (true, false, Some(told)) = (waits, approved, &notifications)
                && told
                    .wait_for(&["fleet-waiting-approval"], Duration::from_secs(15))
                    .await
            {
                approve(&dcs).await;
                approved = true;
                plan = Plan::Named(PLAN.into());
                continue;
            }
            break code;
        }
    };
    if let Some(told) = &notifications {
        let ended = ["fleet-done", "fleet-failed", "fleet-aborted"];
        if !told.wait_for(&ended, Duration::from_secs(20)).await {
            println!("demo: the plan's end was not told within 20 s");
        }
        // The last DCs' own releases end about when the plan does: their messages follow.
        tokio::time::sleep(Duration::from_secs(4)).await;
        println!("{}", told.summary());
    }
    drop(notifications);
    if prometheus.is_some() {
        print_vital_signs(&dcs).await;
    }
    drop(prometheus);
    stop(dcs);
    match code.map(|code| code.number()) {
        Ok(0) => {
            println!("demo: the release across DCs succeeded");
            Ok(())
        }
        Ok(1) => Err(DevError::Demo(
            "the release across DCs failed (see why above): the failing DC went home, no later stage started; DCs that had passed their soak stay released"
                .into(),
        )),
        Ok(other) => Err(DevError::Demo(format!(
            "the release across DCs did not finish (exit {other})"
        ))),
        Err(cannot) => Err(DevError::Demo(format!(
            "the release across DCs could not run: {}",
            cannot.message
        ))),
    }
}

/// Approves the plan's gated stage on every DC's copy, as `fleet-release approve` does.
async fn approve(dcs: &[Dc]) {
    println!(
        "demo: approving, as the SRE told would: kubectl express fleet-release approve {PLAN}"
    );
    let request = express_api::fleet_release::Request {
        id: express_client::write::control::request_id(),
        at: k8s_openapi::jiff::Timestamp::now(),
    };
    let annotations = std::collections::BTreeMap::from([(
        express_api::fleet_release::ANNOTATION_APPROVE,
        request.to_value(),
    )]);
    for dc in dcs {
        if let Err(why) = express_client::write::fleet_release::annotate(
            &dc.client,
            crate::controller::DEFAULT_OPERATOR_NAMESPACE,
            PLAN,
            &annotations,
        )
        .await
        {
            println!("demo: {}: cannot approve: {why}", dc.context);
        }
    }
}

/// Makes `dc`'s canary build unable to write once the plan's release reaches it.
async fn stop_writes_when_released(dc: &Dc) {
    let api: Api<express_api::OperatorRelease> = Api::namespaced(
        dc.client.clone(),
        crate::controller::DEFAULT_OPERATOR_NAMESPACE,
    );
    while !matches!(api.get_opt(PLAN).await, Ok(Some(_))) {
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    dc.sim.faults().stop_writes_after(&agent("canary"), 0);
    println!(
        "{}: the canary build cannot write from its release on (kubesim refuses its writes)",
        dc.context
    );
}

/// Each DC's release's last analysed signals.
async fn print_vital_signs(dcs: &[Dc]) {
    for dc in dcs {
        let api: Api<express_api::OperatorRelease> = Api::namespaced(
            dc.client.clone(),
            crate::controller::DEFAULT_OPERATOR_NAMESPACE,
        );
        let Ok(Some(release)) = api.get_opt(PLAN).await else {
            println!("{}: no release", dc.context);
            continue;
        };
        let analysis = release.status.and_then(|s| s.analysis).unwrap_or_default();
        if analysis.signals.is_empty() {
            println!(
                "{}: no analysed sample (its waves did not bake long enough)",
                dc.context
            );
            continue;
        }
        let shown: Vec<String> = analysis
            .signals
            .iter()
            .map(|s| {
                let figure =
                    |v: Option<f64>| v.map_or_else(|| "-".to_owned(), |v| format!("{v:.3}"));
                format!(
                    "{} {} (canary {}, baseline {})",
                    s.signal,
                    s.verdict.as_str(),
                    figure(s.canary),
                    figure(s.baseline)
                )
            })
            .collect();
        println!(
            "{}: vital signs against {}: {}",
            dc.context,
            analysis.baseline,
            shown.join("; ")
        );
    }
}

/// Stops every operator and server it started: nothing is left running.
fn stop(dcs: Vec<Dc>) {
    for dc in dcs {
        for operator in &dc.operators {
            operator.abort();
        }
        dc.sim.stop();
    }
}
