//! The controller, one room per concern:
//! - [`tenant`]: a tenant's reconcile, one per Express cluster (gate → observe → plan → record
//!   → act → report), level-triggered and watch-driven: nothing polls;
//! - [`memory`]: what the operator holds between reconciles, the caches (indexes fed by
//!   watches of ExpressClusters, Backends, Frontends, their pods, the control ConfigMaps and
//!   ControllerRevisions, every change mapped to its Express cluster), its own writes laid over
//!   them, and giving memory back after a burst;
//! - [`releases`]: rings and OperatorReleases, with their judge and its Prometheus client;
//! - [`api`]: the API's lifecycle in the DC (CRDs applied by a release, versions served,
//!   stored, migrated and trimmed, the conversion webhook);
//! - [`notify`]: telling people what they wait for (DESIGN section 21), the leader's loop over
//!   the pure `express_notify`.
//!
//! This file is the table of contents of [`run`]: it starts every long-running pass. What the
//! rooms share lives below all of them: [`context`] (settings, the running controller's
//! context), [`error`], [`events`] (a notice and its publishing), [`recorders`],
//! [`ring_lease`], [`outbound`] (the HTTP(S) client for what leaves the cluster); [`start`]
//! builds the caches and the loops beside the reconciles.

pub mod api;
mod context;
mod error;
mod events;
mod fleet_view;
pub mod memory;
mod notify;
mod outbound;
mod recorders;
mod releases;
mod ring_lease;
mod start;
mod tenant;

pub use context::{Context, DEFAULT_OPERATOR_NAMESPACE, Settings};
pub use error::Error;
pub use fleet_view::fleet_view_pause;
pub use memory::caches::{Caches, Scoped, Tasks};
pub use memory::heap::{Heap, HeapCompactor, repack_due};
pub use memory::overlay::{WrittenPods, WrittenStatuses};
pub use recorders::{Recorders, Reporter};
pub use tenant::reconcile;

use std::sync::Arc;

use tokio::sync::{Notify, mpsc, watch};
use tracing::{Instrument, info, info_span};

use crate::metrics::Metrics;
use crate::runner;

/// Which Express cluster a change belongs to.
pub use express_api::ClusterKey;

/// Runs the controller until the process stops: the caches are started and synced, the loops
/// beside the reconciles start (leadership, releases, the fleet view), then every Express
/// cluster is reconciled as its changes come, a few at once.
pub async fn run(
    client: kube::Client,
    settings: Settings,
    metrics: Arc<Metrics>,
    leader: watch::Receiver<bool>,
) {
    metrics.set_build(&settings.version, &settings.ring);
    let (triggers, queue) = mpsc::unbounded_channel::<ClusterKey>();
    let mut tasks = Tasks::default();
    let wiring = start::Wiring {
        client: &client,
        settings: &settings,
        metrics: &metrics,
        triggers: triggers.clone(),
        interner: Arc::new(express_api::views::Interner::default()),
        release_wake: Arc::new(Notify::new()),
        context: start::ContextCell::default(),
    };
    let caches = wiring.caches(&mut tasks);
    let release_cache = wiring.release_cache(&mut tasks);
    let fleet_release_cache = wiring.fleet_release_cache(&mut tasks);
    let (release_wake, context_cell) = (wiring.release_wake.clone(), wiring.context.clone());
    let recorders = Recorders::new(
        &client,
        Reporter {
            controller: express_api::keys::REPORTING_CONTROLLER.into(),
            instance: settings.identity.clone(),
        },
    );
    let context = Arc::new(Context {
        client,
        caches,
        recorders,
        metrics: metrics.clone(),
        settings,
        leader: leader.clone(),
        written: WrittenStatuses::default(),
        written_pods: WrittenPods::default(),
        moves: memory::moves::MovesMade::default(),
    });
    let _ = context_cell.set(context.clone());
    context.caches.wait_until_ready().await;
    metrics.set_ready();
    info!(ring = %context.settings.ring, "caches synced; reconciling");

    tasks.spawn(start::follow_leadership(context.clone(), triggers, leader));
    // Releases run beside the tenants, on their own loop: an OperatorRelease CRD not installed
    // yet keeps only this loop waiting.
    let release_cache = Arc::new(release_cache);
    tasks.spawn(releases::run(
        context.clone(),
        release_cache.clone(),
        release_wake,
    ));
    // Notifications, on a loop of their own: a destination that hangs holds nothing else.
    tasks.spawn(notify::run(
        context.clone(),
        release_cache,
        fleet_release_cache,
    ));
    tasks.spawn(start::keep_publishing(context.clone()));
    // The API's lifecycle in the DC: the installed CRDs against this build's, and the versions'
    // steps (DESIGN section 18), each on its own timer while this instance leads.
    tasks.spawn(api::keep_checking_crds(context.clone()));
    tasks.spawn(api::keep_stepping_versions(context.clone()));
    if context.settings.fault == Some(crate::faults::Fault::Leaky) {
        tasks.spawn(crate::faults::leak_forever());
    }

    let concurrency = context.settings.concurrency;
    let queue_metrics = context.metrics.queue.clone();
    runner::run(queue, concurrency, queue_metrics, move |key| {
        let context = context.clone();
        // Every log line of a reconcile carries its Express cluster through this span.
        let span = info_span!("reconcile", namespace = %key.namespace, cluster = %key.cluster);
        async move { start::measured_reconcile(&context, &key).await }.instrument(span)
    })
    .await;
}
