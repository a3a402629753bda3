//! `express-operator`: the operator binary (DESIGN section 9): `run` (the controller), `crd`
//! (print the CRDs), `dev` (local cluster, sample tenants, operator).

use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Parser, Subcommand};
use express_operator::controller::{self, CarriedApi, Settings};
use express_operator::metrics::{self, Metrics};
use express_operator::throttle::{self, ApiLimits};
use list_pages::FirstListing;
use tokio::sync::watch;
use tracing::{error, info};

// The only unsafe code of the workspace: jemalloc's C API, behind a safe `GlobalAlloc`. Without
// the `jemalloc` feature (the local demo's quick build) the system allocator serves, and neither
// the heap's figures nor its compaction exist.
#[cfg(feature = "jemalloc")]
#[allow(unsafe_code)]
mod allocator;
mod crd_verb;

use crd_verb::{CrdAction, crd_check_command, crds, print_crds, write_crds};

#[derive(Parser)]
#[command(
    name = "express-operator",
    version,
    about = "Kubernetes operator for Express clusters"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

/// `run`'s flags.
#[derive(clap::Args)]
struct RunArgs {
    /// Manage only this namespace (repeatable); default every namespace.
    #[arg(long = "namespace", value_name = "NS")]
    namespaces: Vec<String>,
    /// Act only while holding the ring's Lease in the operator's namespace
    /// (`express-operator`, or `express-operator-RING` for a ring other than default).
    #[arg(long)]
    leader_elect: bool,
    /// Serve the tenants whose ExpressCluster's `express.dev/operator-ring` label names
    /// this ring (no label: `default`); tenants moved between rings are handed over.
    #[arg(long, default_value = express_api::rings::DEFAULT_RING, value_parser = ring_name)]
    ring: String,
    /// Serve /metrics, /healthz and /readyz here.
    #[arg(long, default_value = "127.0.0.1:8080")]
    metrics_addr: SocketAddr,
    /// Serve the conversion webhook here (HTTPS, /convert), keeping its certificate
    /// authority in the Secret express-operator-webhook and its certificate in the
    /// caBundle of the CRDs that convert through it.
    #[arg(long, value_name = "ADDR")]
    conversion_webhook_addr: Option<SocketAddr>,
    /// A name the webhook's serving certificate is for (repeatable; default the chart's
    /// Service, express-operator-webhook.NAMESPACE.svc).
    #[arg(
        long = "conversion-webhook-name",
        value_name = "NAME",
        requires = "conversion_webhook_addr"
    )]
    conversion_webhook_names: Vec<String>,
    /// Carry the CRDs that serve v1beta1 beside v1alpha1, converted by the webhook: a
    /// release of this build lists v1beta1 in the DC and serves it once the webhook's pods
    /// all know it; once every ring runs a build that knows it, storage moves to it, the
    /// stored objects are rewritten and storedVersions trimmed (docs/api.md).
    #[arg(long, requires = "conversion_webhook_addr")]
    serve_v1beta1: bool,
    /// With --serve-v1beta1: the URL the CRDs send conversions to (an operator run outside
    /// the cluster); default the chart's Service express-operator-webhook.
    #[arg(long, value_name = "URL", requires = "serve_v1beta1")]
    conversion_webhook_url: Option<String>,
    /// The operator's own namespace (its control ConfigMap and Lease); default
    /// $POD_NAMESPACE, else express-system.
    #[arg(long)]
    operator_namespace: Option<String>,
    /// Express clusters reconciled at once.
    #[arg(long, default_value_t = 8)]
    concurrency: usize,
    /// API requests per second, sustained, for every request but watches (retries
    /// included); controller-runtime's default.
    #[arg(long, default_value_t = ApiLimits::DEFAULT.qps)]
    kube_qps: f64,
    /// API requests that may be sent at once after a quiet spell.
    #[arg(long, default_value_t = ApiLimits::DEFAULT.burst)]
    kube_burst: u32,
    /// Publish the per-tenant metric families (`express_operator_nodes`, a series per
    /// tenant and node phase); `false` for a large fleet: the fleet-level families and
    /// the alerts do not need them.
    #[arg(long, default_value_t = true, action = clap::ArgAction::Set, value_name = "BOOL")]
    per_tenant_metrics: bool,
    /// Fill the watches by streaming lists (`sendInitialEvents`) where the API server
    /// answers a probe of them at start, instead of lists in pages; spares the server the
    /// LIST of every kind at a start or a relist.
    #[arg(long)]
    streaming_lists: bool,
    /// Doctor's keeping-up threshold as an OperatorRelease's judge applies it to both
    /// rings' samples: a tenant the ring's leader has not caught up with for longer than
    /// this is behind (as `kubectl express doctor --stale-after`).
    #[arg(long, default_value = "2m", value_parser = express_api::bounce::parse_duration, value_name = "DURATION")]
    stale_after: u64,
    /// Misbehave on purpose, keeping every tenant healthy (a release's analysis must catch
    /// it): chatty, erring, slow or leaky. Only in builds with the `dev` feature.
    #[cfg(feature = "dev")]
    #[arg(long, value_enum, value_name = "NAME")]
    fault: Option<express_operator::faults::Fault>,
    /// Behave as a build that knows only these API versions (comma separated): an older
    /// build beside this one, in a test of a version's release. Only in builds with the
    /// `dev` feature.
    #[cfg(feature = "dev")]
    #[arg(long, value_name = "VERSIONS", value_delimiter = ',')]
    known_api_versions: Vec<String>,
    /// Rotate the conversion webhook's certificate authority every 40 seconds instead of
    /// yearly (serving certificates every minute): a test of rotation while a release runs.
    /// Only in builds with the `dev` feature.
    #[cfg(feature = "dev")]
    #[arg(long, requires = "conversion_webhook_addr")]
    webhook_rotation_in_minutes: bool,
}

#[derive(Subcommand)]
enum Command {
    /// Run the controller against the cluster of the kubeconfig (or in-cluster config).
    Run(Box<RunArgs>),
    /// Local cluster (kubesim), CRDs, sample tenants and the operator; keeps running.
    #[cfg(feature = "dev")]
    Dev {
        /// Provision a cluster, roll out an upgrade printing each step, then exit.
        #[arg(long)]
        demo: bool,
        /// Where to write the kubeconfig of the local cluster.
        #[arg(long, default_value = "express-dev.kubeconfig")]
        kubeconfig: PathBuf,
        /// Port of the local API server (0 picks a free one).
        #[arg(long, default_value_t = 0)]
        port: u16,
        /// Seconds each simulated pod takes to become Ready.
        #[arg(long, default_value_t = 1.0)]
        startup_seconds: f64,
        /// Local DCs (1 to 5): each its own kubesim with two operator rings, one kubeconfig
        /// with a context per DC; with --demo, a release across them.
        #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u8).range(1..=5))]
        dcs: u8,
        /// With --dcs and --demo: the DC whose canary build cannot write (it rolls back and the
        /// release stops).
        #[arg(long, value_name = "DC", requires = "demo")]
        fail_in: Option<String>,
    },
    /// Print every CustomResourceDefinition as YAML (or write one file per CRD); `crd check`
    /// compares them with what a cluster has and stores.
    #[command(args_conflicts_with_subcommands = true)]
    Crd {
        #[command(subcommand)]
        action: Option<CrdAction>,
        /// Write `<crd-name>.yaml` files into this directory instead of printing.
        #[arg(long, value_name = "DIR")]
        output_dir: Option<PathBuf>,
        /// Serve v1beta1 beside v1alpha1 (still stored), converted by the operator's webhook
        /// (DESIGN section 18): the CRDs a build serving it applies, not yet `deploy/crds`.
        #[arg(long)]
        serve_v1beta1: bool,
        /// With --serve-v1beta1: the URL the API server reaches the webhook at (an operator run
        /// outside the cluster); default the chart's Service
        /// express-system/express-operator-webhook, port 443.
        #[arg(long, value_name = "URL", requires = "serve_v1beta1")]
        webhook_url: Option<String>,
    },
}

#[derive(Debug, thiserror::Error)]
enum Error {
    #[error(transparent)]
    Crd(#[from] crd_verb::CrdError),
    #[error("cannot reach the cluster (kubeconfig or in-cluster config): {0}")]
    Client(kube::Error),
    #[error("cannot build the API client: {0}")]
    Throttle(#[from] throttle::ClientError),
    #[error("cannot start the runtime: {0}")]
    Runtime(std::io::Error),
    #[error("cannot serve the conversion webhook: {0}")]
    Webhook(std::io::Error),
    #[error("{0}")]
    #[cfg(feature = "dev")]
    Dev(express_operator::dev::DevError),
}

/// The allocator, with the long-lived caches in an arena of their own (`allocator`).
#[cfg(feature = "jemalloc")]
#[global_allocator]
static ALLOCATOR: allocator::LifetimeArenas = allocator::LifetimeArenas;

/// Publishes the allocator's figures (`express_operator_heap_bytes`) every few seconds, so
/// that the live heap shows beside the RSS and retention is visible.
#[cfg(feature = "jemalloc")]
async fn publish_heap(metrics: std::sync::Arc<Metrics>) {
    let mut every = tokio::time::interval(std::time::Duration::from_secs(5));
    loop {
        every.tick().await;
        let Some(heap) = allocator::heap() else {
            continue;
        };
        for (state, bytes) in [
            ("allocated", heap.allocated),
            ("resident", heap.resident),
            ("retained", heap.retained),
        ] {
            metrics.memory.set_heap("jemalloc", state, bytes);
        }
    }
}

/// What the heap compaction asks of the allocator, where the allocator offers it.
#[cfg(feature = "jemalloc")]
fn heap_compactor() -> Option<controller::HeapCompactor> {
    Some(controller::HeapCompactor {
        heap: allocator::heap,
        without_thread_cache: allocator::without_thread_cache,
        return_free_pages: allocator::return_free_pages,
    })
}

#[cfg(not(feature = "jemalloc"))]
fn heap_compactor() -> Option<controller::HeapCompactor> {
    None
}

fn main() -> ExitCode {
    #[cfg(feature = "jemalloc")]
    allocator::reserve_long_lived_arena();
    let cli = Cli::parse();
    let result = match cli.command {
        Command::Crd {
            action: Some(check),
            ..
        } => return crd_check_command(check),
        Command::Crd {
            action: None,
            output_dir,
            serve_v1beta1,
            webhook_url,
        } => crds(serve_v1beta1, webhook_url)
            .and_then(|crds| match output_dir {
                Some(dir) => write_crds(&dir, &crds),
                None => print_crds(&crds),
            })
            .map_err(Error::from),
        #[cfg(feature = "dev")]
        Command::Dev {
            demo,
            kubeconfig,
            port,
            startup_seconds,
            dcs,
            fail_in,
        } => {
            if std::env::var_os("RUST_LOG").is_some() {
                init_tracing();
            }
            let options = express_operator::dev::DevOptions {
                kubeconfig,
                port,
                startup_seconds,
                demo,
                dcs: usize::from(dcs),
                fail_in,
            };
            tokio::runtime::Runtime::new()
                .map_err(Error::Runtime)
                .and_then(|rt| {
                    rt.block_on(express_operator::dev::run(options))
                        .map_err(Error::Dev)
                })
        }
        Command::Run(args) => run_command(*args),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(err) => {
            eprintln!("express-operator: {err}");
            ExitCode::FAILURE
        }
    }
}

fn init_tracing() {
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| "info,kube=warn".into());
    tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_target(false)
        .init();
}

/// The API this build carries and the versions it knows, from the webhook's flags.
fn carried_api(webhook: &WebhookOptions, operator_namespace: &str) -> CarriedApi {
    let known = if webhook.known.is_empty() {
        express_operator::webhook::known_versions()
    } else {
        webhook.known.clone()
    };
    let at = match &webhook.url {
        Some(url) => express_api::crd::WebhookAt::Url(url.clone()),
        None => express_api::crd::WebhookAt::Service {
            namespace: operator_namespace.to_owned(),
            name: express_operator::webhook::SERVICE_NAME.to_owned(),
            port: 443,
        },
    };
    CarriedApi {
        known,
        webhook: webhook.serve_v1beta1.then_some(at),
    }
}

fn identity() -> String {
    std::env::var("POD_NAME")
        .or_else(|_| std::env::var("HOSTNAME"))
        .unwrap_or_else(|_| format!("express-operator-{}", std::process::id()))
}

/// A `--ring` value: a name its Lease can be made of.
fn ring_name(value: &str) -> Result<String, String> {
    match express_api::rings::ring_name_problem(value) {
        None => Ok(value.to_owned()),
        Some(problem) => Err(format!("the ring name {problem}")),
    }
}

/// Where `/metrics` is served, and whether it names each tenant.
struct MetricsOptions {
    addr: SocketAddr,
    per_tenant: bool,
}

/// Where the conversion webhook is served, if it is, and the names its certificate is for.
struct WebhookOptions {
    addr: Option<SocketAddr>,
    names: Vec<String>,
    /// The versions to serve as knowing; empty: those this build knows.
    known: Vec<String>,
    /// When its certificates are made, rotated and retired.
    rotation: express_operator::webhook::rotation::Policy,
    /// Carry the CRDs serving v1beta1 (`--serve-v1beta1`).
    serve_v1beta1: bool,
    /// Where those CRDs send conversions; none: the chart's Service.
    url: Option<String>,
}

/// `run`: the flags sorted into what `run` takes, on a runtime of its own.
fn run_command(args: RunArgs) -> Result<(), Error> {
    let RunArgs {
        namespaces,
        leader_elect,
        ring,
        metrics_addr,
        conversion_webhook_addr,
        conversion_webhook_names,
        serve_v1beta1,
        conversion_webhook_url,
        operator_namespace,
        concurrency,
        kube_qps,
        kube_burst,
        per_tenant_metrics,
        streaming_lists,
        stale_after,
        #[cfg(feature = "dev")]
        fault,
        #[cfg(feature = "dev")]
        known_api_versions,
        #[cfg(feature = "dev")]
        webhook_rotation_in_minutes,
    } = args;
    #[cfg(not(feature = "dev"))]
    let fault = None;
    #[cfg(not(feature = "dev"))]
    let known_api_versions = Vec::new();
    #[cfg(not(feature = "dev"))]
    let webhook_rotation_in_minutes = false;
    init_tracing();
    let webhook = WebhookOptions {
        addr: conversion_webhook_addr,
        names: conversion_webhook_names,
        known: known_api_versions,
        rotation: if webhook_rotation_in_minutes {
            express_operator::webhook::rotation::Policy::minutes()
        } else {
            express_operator::webhook::rotation::Policy::default()
        },
        serve_v1beta1,
        url: conversion_webhook_url,
    };
    let tuning = Tuning {
        concurrency,
        limits: ApiLimits {
            qps: kube_qps,
            burst: kube_burst,
        },
        fault,
        streaming_lists,
        stale_after_seconds: stale_after,
    };
    let metrics = MetricsOptions {
        addr: metrics_addr,
        per_tenant: per_tenant_metrics,
    };
    let runtime = tokio::runtime::Runtime::new().map_err(Error::Runtime)?;
    runtime.block_on(run(
        namespaces,
        leader_elect,
        ring,
        metrics,
        webhook,
        operator_namespace,
        tuning,
    ))
}

/// How hard the operator works: reconciles at once, its API budget, a fault on purpose.
struct Tuning {
    concurrency: usize,
    limits: ApiLimits,
    fault: Option<express_operator::faults::Fault>,
    streaming_lists: bool,
    stale_after_seconds: u64,
}

async fn run(
    namespaces: Vec<String>,
    leader_elect: bool,
    ring: String,
    metrics_options: MetricsOptions,
    webhook: WebhookOptions,
    operator_namespace: Option<String>,
    tuning: Tuning,
) -> Result<(), Error> {
    let operator_namespace = operator_namespace
        .or_else(|| std::env::var("POD_NAMESPACE").ok())
        .unwrap_or_else(|| controller::DEFAULT_OPERATOR_NAMESPACE.into());
    let Tuning {
        concurrency,
        limits,
        fault,
        streaming_lists,
        stale_after_seconds,
    } = tuning;
    let MetricsOptions {
        addr: metrics_addr,
        per_tenant,
    } = metrics_options;
    let metrics = Metrics::with_per_tenant(per_tenant);
    #[cfg(feature = "jemalloc")]
    tokio::spawn(publish_heap(metrics.clone()));
    let config = kube::Config::infer()
        .await
        .map_err(|e| Error::Client(kube::Error::InferConfig(e)))?;
    let client = throttle::client(config, limits, &ring, metrics.clone())?;
    info!(
        qps = limits.qps,
        burst = limits.burst,
        "client-side API rate limit"
    );
    {
        let metrics = metrics.clone();
        tokio::spawn(async move {
            if let Err(err) = metrics::serve(metrics_addr, metrics).await {
                error!(error = %err, addr = %metrics_addr, "cannot serve metrics");
            }
        });
    }
    let api = carried_api(&webhook, &operator_namespace);
    if let Some(addr) = webhook.addr {
        let names = if webhook.names.is_empty() {
            express_operator::webhook::service_names(&operator_namespace)
        } else {
            webhook.names
        };
        let serving = express_operator::webhook::Serving {
            addr,
            namespace: operator_namespace.clone(),
            names,
            pod: std::env::var("POD_NAME").ok(),
            known: api.known.clone(),
            policy: webhook.rotation,
        };
        let served = express_operator::webhook::start(client.clone(), serving)
            .await
            .map_err(Error::Webhook)?;
        info!(addr = %served, "serving the conversion webhook");
    }
    let identity = identity();
    let leader = if leader_elect {
        let leader = express_operator::leader::elect_while_readable(
            client.clone(),
            operator_namespace.clone(),
            ring.clone(),
            identity.clone(),
            api.known.clone(),
        );
        info!(
            identity = %identity,
            ring = %ring,
            lease = %express_api::rings::lease_name(&ring),
            "leader election on; acting only while holding the ring's Lease, and contending only while this build can read what the DC stores"
        );
        leader
    } else {
        watch::channel(true).1
    };
    let pods: kube::Api<k8s_openapi::api::core::v1::Pod> = match namespaces.first() {
        Some(namespace) => kube::Api::namespaced(client.clone(), namespace),
        None => kube::Api::all(client.clone()),
    };
    let first_listing =
        FirstListing::choose(pods, streaming_lists, std::time::Duration::from_secs(10)).await;
    info!(?first_listing, "how the watches fill");
    let settings = Settings {
        first_listing,
        namespaces,
        operator_namespace,
        concurrency,
        identity,
        fleet_metrics_every: std::time::Duration::from_secs(15),
        ring,
        version: env!("CARGO_PKG_VERSION").into(),
        fault,
        compact_heap: heap_compactor(),
        api,
        release_thresholds: express_triage::Thresholds {
            stale_after_seconds: i64::try_from(stale_after_seconds).unwrap_or(i64::MAX),
            ..express_triage::Thresholds::default()
        },
    };
    tokio::select! {
        () = controller::run(client, settings, metrics, leader) => Ok(()),
        () = shutdown_signal() => {
            info!("shutting down");
            Ok(())
        }
    }
}

async fn shutdown_signal() {
    use tokio::signal::unix::{SignalKind, signal};
    match signal(SignalKind::terminate()) {
        Ok(mut term) => {
            tokio::select! {
                _ = tokio::signal::ctrl_c() => {}
                _ = term.recv() => {}
            }
        }
        Err(_) => {
            let _ = tokio::signal::ctrl_c().await;
        }
    }
}
