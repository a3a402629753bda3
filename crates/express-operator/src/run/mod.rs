//! `express-operator run`: the process around the controller, as its table of contents: the
//! metrics and their server, the API client under its limit, the API this build carries, the
//! conversion webhook, leader election, how the watches fill, then the controller until the
//! process is asked to stop. Its flags are [`args`]; what they are sorted into, [`options`].

pub mod args;
pub mod options;

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use express_planner::api_versions::{CarriedApi, CarriedApiError, carried_api};
use list_pages::FirstListing;
use tokio::sync::watch;
use tracing::{error, info, warn};

pub use args::RunArgs;
pub use options::{Options, Tuning, WebhookOptions};

use crate::controller::api::webhook;
use crate::controller::{self, HeapCompactor, Settings};
use crate::metrics::{self, Metrics};
use crate::{leader, throttle};

/// Why the operator could not start.
#[derive(Debug, thiserror::Error)]
pub enum RunError {
    #[error("cannot build the API client: {0}")]
    Client(#[from] throttle::ClientError),
    #[error(transparent)]
    Api(#[from] CarriedApiError),
    #[error("cannot serve the conversion webhook: {0}")]
    Webhook(std::io::Error),
}

/// Runs the operator against the cluster `config` reaches until `shutdown` completes.
pub async fn run(
    config: kube::Config,
    options: Options,
    shutdown: impl Future<Output = ()>,
) -> Result<(), RunError> {
    let metrics = Metrics::with_per_tenant(options.per_tenant_metrics);
    if let Some(compactor) = options.compact_heap {
        tokio::spawn(publish_heap(metrics.clone(), compactor));
    }
    let election = leader::election_client(config.clone(), &options.ring)?;
    let client = throttle::client(
        config,
        options.tuning.limits,
        &options.ring,
        metrics.clone(),
    )?;
    info!(
        qps = options.tuning.limits.qps,
        burst = options.tuning.limits.burst,
        "client-side API rate limit"
    );
    serve_metrics(&options, metrics.clone());
    let api = carried_api(&options.api)?;
    serve_webhook(&client, &options, &api).await?;
    let (leader, candidacy) = elect(&election, &options, &api);
    let first_listing = first_listing(&client, &options).await;
    let settings = settings(options, api, first_listing);
    tokio::select! {
        () = controller::run(client, settings, metrics, leader) => {}
        () = shutdown => info!("shutting down"),
    }
    // The controller has stopped acting (its future is dropped); the standby may lead now.
    if let Some(candidacy) = candidacy
        && tokio::time::timeout(WITHDRAW_WITHIN, candidacy.withdraw())
            .await
            .is_err()
    {
        warn!("the ring's Lease was not released in time; the standby takes over when it expires");
    }
    Ok(())
}

/// How long a stopping operator tries to give its Lease up: within the 30 s Kubernetes grants
/// a terminating pod by default, and short of a hung API server holding it past that.
const WITHDRAW_WITHIN: std::time::Duration = std::time::Duration::from_secs(5);

/// `/metrics`, `/healthz` and `/readyz`, on a task of their own.
fn serve_metrics(options: &Options, metrics: Arc<Metrics>) {
    let addr = options.metrics_addr;
    tokio::spawn(async move {
        if let Err(err) = metrics::serve(addr, metrics).await {
            error!(error = %err, %addr, "cannot serve metrics");
        }
    });
}

/// The conversion webhook, where `--conversion-webhook-addr` asks for it.
async fn serve_webhook(
    client: &kube::Client,
    options: &Options,
    api: &CarriedApi,
) -> Result<(), RunError> {
    let Some(addr) = options.webhook.addr else {
        return Ok(());
    };
    let namespace = &options.operator_namespace;
    let names = if options.webhook.names.is_empty() {
        webhook::service_names(namespace)
    } else {
        options.webhook.names.clone()
    };
    let serving = webhook::Serving {
        addr,
        namespace: namespace.clone(),
        names,
        pod: options.pod.clone(),
        known: api.known.clone(),
        policy: options.webhook.rotation,
    };
    let served = webhook::start(client.clone(), serving)
        .await
        .map_err(RunError::Webhook)?;
    info!(addr = %served, "serving the conversion webhook");
    Ok(())
}

/// Whether this instance leads its ring: elected by its Lease with `--leader-elect` (through the
/// election's own client), else always.
fn elect(
    client: &kube::Client,
    options: &Options,
    api: &CarriedApi,
) -> (watch::Receiver<bool>, Option<leader::Candidacy>) {
    if !options.leader_elect {
        return (watch::channel(true).1, None);
    }
    let (leader, candidacy) = leader::elect_while_readable(
        client.clone(),
        options.operator_namespace.clone(),
        options.ring.clone(),
        options.identity.clone(),
        api.known.clone(),
    );
    info!(
        identity = %options.identity,
        ring = %options.ring,
        lease = %express_api::rings::lease_name(&options.ring),
        "leader election on; acting only while holding the ring's Lease, and contending only while this build can read what the DC stores"
    );
    (leader, Some(candidacy))
}

/// How the watches fill: streamed where asked and the server answers a probe, else paged.
async fn first_listing(client: &kube::Client, options: &Options) -> FirstListing {
    let pods: kube::Api<k8s_openapi::api::core::v1::Pod> = match options.namespaces.first() {
        Some(namespace) => kube::Api::namespaced(client.clone(), namespace),
        None => kube::Api::all(client.clone()),
    };
    let listing = FirstListing::choose(
        pods,
        options.tuning.streaming_lists,
        Duration::from_secs(10),
    )
    .await;
    info!(first_listing = ?listing, "how the watches fill");
    listing
}

/// The controller's settings from the options.
fn settings(options: Options, api: CarriedApi, first_listing: FirstListing) -> Settings {
    Settings {
        first_listing,
        namespaces: options.namespaces,
        operator_namespace: options.operator_namespace,
        concurrency: options.tuning.concurrency,
        identity: options.identity,
        fleet_metrics_every: Duration::from_secs(15),
        ring: options.ring,
        version: env!("CARGO_PKG_VERSION").into(),
        fault: options.tuning.fault,
        compact_heap: options.compact_heap,
        api,
        release_thresholds: express_triage::Thresholds {
            stale_after_seconds: i64::try_from(options.tuning.stale_after_seconds)
                .unwrap_or(i64::MAX),
            ..express_triage::Thresholds::default()
        },
    }
}

/// Publishes the allocator's figures (`express_operator_heap_bytes`) every few seconds, so
/// that the live heap shows beside the RSS and retention is visible.
async fn publish_heap(metrics: Arc<Metrics>, compactor: HeapCompactor) {
    let mut every = tokio::time::interval(Duration::from_secs(5));
    loop {
        every.tick().await;
        let Some(heap) = (compactor.heap)() else {
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

/// Completes when the process is asked to stop (SIGTERM, as Kubernetes asks, or Ctrl-C).
pub async fn shutdown_signal() {
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
