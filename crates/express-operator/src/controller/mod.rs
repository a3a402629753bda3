//! The controller. Caches (indexes fed by watches) of ExpressClusters, Backends, Frontends, the pods they
//! own, the control ConfigMaps and ControllerRevisions; every change is mapped to its Express
//! cluster (namespace, clusterName); one reconcile per cluster, which reads as its table of
//! contents ([`reconcile`]): gate (leader, namespace) → [`observe`] → plan (the pure planner) →
//! [`record`] → [`act`] → [`report`], with every event worded in [`events`]. Level-triggered
//! and watch-driven: nothing polls. This file is the table of contents of [`run`]; what the
//! steps share lives in [`context`] and [`env`], below every step.

mod act;
mod api_versions;
mod caches;
mod compact;
mod context;
mod env;
mod error;
mod events;
mod fleet_view;
mod handover;
mod heap;
mod index;
mod moves;
mod observe;
mod overlay;
mod own_api;
mod reconcile;
mod record;
mod recorders;
mod release;
mod report;
mod ring_lease;
mod start;
mod vital_signs;

pub use caches::{Caches, Scoped, Tasks};
pub use context::{CarriedApi, Context, DEFAULT_OPERATOR_NAMESPACE, Settings};
pub use error::Error;
pub use fleet_view::fleet_view_pause;
pub use heap::{Heap, HeapCompactor, repack_due};
pub use overlay::{WrittenPods, WrittenStatuses};
pub use reconcile::reconcile;
pub use recorders::{Recorders, Reporter};

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
    let releases = wiring.release_cache(&mut tasks);
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
        moves: moves::MovesMade::default(),
    });
    let _ = context_cell.set(context.clone());
    context.caches.wait_until_ready().await;
    metrics.set_ready();
    info!(ring = %context.settings.ring, "caches synced; reconciling");

    tasks.spawn(start::follow_leadership(context.clone(), triggers, leader));
    // Releases run beside the tenants, on their own loop: an OperatorRelease CRD not installed
    // yet keeps only this loop waiting.
    tasks.spawn(release::run(context.clone(), releases, release_wake));
    tasks.spawn(start::keep_publishing(context.clone()));
    tasks.spawn(own_api::keep_checking(context.clone()));
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
