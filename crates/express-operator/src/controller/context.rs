//! What every part of the controller shares: its [`Settings`] and the [`Context`] of a running
//! controller (the client, the caches, the recorders, the metrics, what it wrote). The table of
//! contents in `mod.rs` builds it; every step below it reads it from here, never from `mod.rs`.

use std::sync::Arc;

use tokio::sync::watch;

use super::memory::caches::Caches;
use super::memory::heap::HeapCompactor;
use super::memory::moves;
use super::memory::overlay::{WrittenPods, WrittenStatuses};
use super::recorders::Recorders;
use crate::metrics::Metrics;

#[derive(Clone, Debug)]
pub struct Settings {
    /// Namespaces to manage; empty means every namespace.
    pub namespaces: Vec<String>,
    /// Where the operator runs (its control ConfigMap and Lease live there).
    pub operator_namespace: String,
    /// Express clusters reconciled at once.
    pub concurrency: usize,
    /// Name of this instance in events and the Lease.
    pub identity: String,
    /// How often the fleet metrics are recomputed from the caches.
    pub fleet_metrics_every: std::time::Duration,
    /// The operator ring this instance serves: the tenants whose `express.dev/operator-ring`
    /// label names it (DESIGN section 11).
    pub ring: String,
    /// This build's version, written into the status of every tenant it drives.
    pub version: String,
    /// The allocator's means to give memory back after a burst (`compact`); None leaves the
    /// caches where they were allocated.
    pub compact_heap: Option<HeapCompactor>,
    /// A misbehaviour on purpose (`--fault`, builds with the `dev` feature only).
    pub fault: Option<crate::faults::Fault>,
    /// How the watches fill: in pages, or streamed (`--streaming-lists`, where the server
    /// answers).
    pub first_listing: list_pages::FirstListing,
    /// The API this build carries into a DC and the versions it knows (DESIGN section 18).
    pub api: express_planner::api_versions::CarriedApi,
    /// Doctor's thresholds as an OperatorRelease's judge applies them (`--stale-after`).
    pub release_thresholds: express_triage::Thresholds,
}

/// The operator's own namespace when nothing says otherwise.
pub const DEFAULT_OPERATOR_NAMESPACE: &str = "express-system";

impl Settings {
    /// Every namespace, the default operator namespace, `concurrency` clusters at once: the
    /// local cluster of `dev`, the end-to-end tests and the benchmarks.
    pub fn cluster_wide(identity: &str, concurrency: usize) -> Settings {
        Settings {
            namespaces: Vec::new(),
            operator_namespace: DEFAULT_OPERATOR_NAMESPACE.into(),
            concurrency,
            identity: identity.into(),
            fleet_metrics_every: std::time::Duration::from_secs(15),
            ring: express_api::rings::DEFAULT_RING.into(),
            version: env!("CARGO_PKG_VERSION").into(),
            compact_heap: None,
            fault: None,
            first_listing: list_pages::FirstListing::Paged,
            api: express_planner::api_versions::CarriedApi::default(),
            release_thresholds: express_triage::Thresholds::default(),
        }
    }

    /// The same, serving one ring.
    pub fn in_ring(mut self, ring: &str) -> Settings {
        self.ring = ring.into();
        self
    }
}

pub struct Context {
    pub client: kube::Client,
    pub caches: Caches,
    pub recorders: Recorders,
    pub metrics: Arc<Metrics>,
    pub settings: Settings,
    pub leader: watch::Receiver<bool>,
    pub written: WrittenStatuses,
    pub written_pods: WrittenPods,
    /// Tenants releases moved, until the caches show it (a release's bound on hand-overs).
    pub moves: moves::MovesMade,
}

impl Context {
    /// Publishes what the caches and the other long-lived structures hold
    /// (`express_operator_cached_objects`, `express_operator_memory_entries`).
    pub(super) fn publish_memory(&self, recorded_events: usize) {
        let (memory, caches) = (&self.metrics.memory, &self.caches);
        for (kind, (objects, _)) in [
            ("ExpressCluster", caches.clusters.counts()),
            ("Backend", caches.backends.counts()),
            ("Frontend", caches.frontends.counts()),
            ("Pod", caches.pods.counts()),
            ("ConfigMap", caches.controls.counts()),
            ("ControllerRevision", caches.revisions.counts()),
        ] {
            memory.set_cached(kind, objects);
        }
        memory.set_entries("written_statuses", self.written.len());
        memory.set_entries("written_pods", self.written_pods.len());
        memory.set_entries("recorded_events", recorded_events);
        let (strings, histories) = caches.interner.counts();
        memory.set_entries("interned_strings", strings);
        memory.set_entries("revision_histories", histories);
    }
}

/// Completes when this instance's leadership changes; never, once nothing can change it: a
/// controller run without election leads from its start, and its sender is gone. (A loop that
/// stopped on the closed channel stopped at once, or on its first pass, by the luck of a
/// `select!`.)
pub(crate) async fn leadership_changed(leader: &mut watch::Receiver<bool>) {
    if leader.changed().await.is_err() {
        std::future::pending::<()>().await;
    }
}
