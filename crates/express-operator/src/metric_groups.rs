//! The operator's own metric families, grouped by concern, and the labels they carry. Each
//! group registers its families itself; `Metrics` registers the groups one after the other, in
//! the order `/metrics` has always listed its families.

use std::collections::BTreeSet;
use std::sync::Mutex;

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};
use prometheus_client::registry::Registry;

use crate::runner::QueueMetrics;

/// An API request: its verb (`get`, `watch`, `post`, `patch`, `put`, `delete`; a list is a
/// `get`) and the response's status code (`error` when none came back).
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct RequestLabel {
    pub verb: String,
    /// The kind's plural and subresource (`pods`, `expressclusters/status`).
    pub resource: String,
    pub code: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ResultLabel {
    pub result: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct SymptomLabel {
    pub symptom: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ErrorLabel {
    pub kind: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ActionLabel {
    pub action: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct RingLabel {
    pub ring: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct BuildLabel {
    pub version: String,
    pub ring: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct PhaseLabel {
    pub namespace: String,
    pub cluster: String,
    pub phase: String,
}

/// What the controller did: its two passes (the fleet view's recompute on its timer, each
/// tenant's reconcile with its result, error and time), the pod actions reconciles took and
/// what they found (each tenant's nodes, failed rollouts, bounces ended).
pub struct WorkMetrics {
    /// Time the fleet view (ring counts, doctor's figures) takes to recompute on its timer:
    /// the one pass over every tenant, which grows with the fleet.
    pub fleet_view_seconds: Histogram,
    pub reconciles: Family<ResultLabel, Counter>,
    pub errors: Family<ErrorLabel, Counter>,
    pub actions: Family<ActionLabel, Counter>,
    pub reconcile_seconds: Histogram,
    /// The reconciles that drove their tenant (this instance leads, watches the namespace and
    /// the tenant is its ring's), by result; the others stop at a gate after a read or two.
    /// A release's analysis divides by these, so that a ring reconciling other rings' tenants
    /// (each ring reconciles every change to tell ownership) weighs nothing in its figures.
    pub driven_reconciles: Family<ResultLabel, Counter>,
    /// Time those reconciles took.
    pub driven_reconcile_seconds: Histogram,
    /// API requests those reconciles sent, watches aside.
    pub driven_reconcile_requests: Counter,
    pub nodes: Family<PhaseLabel, Gauge>,
    pub rollout_failures: Counter,
    /// Bounce requests ended, by result: succeeded, failed, refused.
    pub bounces: Family<ResultLabel, Counter>,
}

impl Default for WorkMetrics {
    fn default() -> Self {
        WorkMetrics {
            fleet_view_seconds: Histogram::new(exponential_buckets(0.001, 2.0, 14)),
            reconciles: Family::default(),
            errors: Family::default(),
            actions: Family::default(),
            reconcile_seconds: Histogram::new(exponential_buckets(0.0005, 2.0, 16)),
            driven_reconciles: Family::default(),
            driven_reconcile_seconds: Histogram::new(exponential_buckets(0.0005, 2.0, 16)),
            driven_reconcile_requests: Counter::default(),
            nodes: Family::default(),
            rollout_failures: Counter::default(),
            bounces: Family::default(),
        }
    }
}

impl WorkMetrics {
    /// The per-tenant `nodes` only if `per_tenant`: its series grow with the fleet.
    pub fn register(&self, registry: &mut Registry, per_tenant: bool) {
        registry.register(
            "fleet_view_duration_seconds",
            "Time to recompute the fleet view (ring counts, fleet figures) from the caches",
            self.fleet_view_seconds.clone(),
        );
        registry.register(
            "reconciles",
            "Reconciles of Express clusters, by result",
            self.reconciles.clone(),
        );
        registry.register(
            "reconcile_errors",
            "Reconcile errors, by kind",
            self.errors.clone(),
        );
        registry.register(
            "actions",
            "Pod operations performed, by action",
            self.actions.clone(),
        );
        registry.register(
            "reconcile_duration_seconds",
            "Time to reconcile one Express cluster",
            self.reconcile_seconds.clone(),
        );
        // Both results exist from the start: a ring that has driven nothing yet shows zeros,
        // which tells a release's analysis its build counts driven reconciles.
        for result in ["ok", "error"] {
            self.driven_reconciles
                .get_or_create(&ResultLabel {
                    result: result.into(),
                })
                .inc_by(0);
        }
        registry.register(
            "driven_reconciles",
            "Reconciles that drove their Express cluster (leader, watched namespace, the ring's tenant), by result",
            self.driven_reconciles.clone(),
        );
        registry.register(
            "driven_reconcile_duration_seconds",
            "Time to reconcile an Express cluster this ring drives",
            self.driven_reconcile_seconds.clone(),
        );
        registry.register(
            "driven_reconcile_api_requests",
            "API requests sent by the reconciles that drove their Express cluster, watches aside",
            self.driven_reconcile_requests.clone(),
        );
        if per_tenant {
            registry.register(
                "nodes",
                "Nodes of each Express cluster by phase (per tenant; --per-tenant-metrics)",
                self.nodes.clone(),
            );
        }
        registry.register(
            "rollout_failures",
            "Node changes found failed (crash loop, ended pod or progress deadline)",
            self.rollout_failures.clone(),
        );
        registry.register(
            "bounces",
            "Bounce requests ended, by result (succeeded, failed, refused)",
            self.bounces.clone(),
        );
    }
}

/// This instance's standing: whether it leads its ring, and what its caches hold that this
/// build cannot read.
#[derive(Default)]
pub struct InstanceMetrics {
    /// 1 while this instance holds its ring's Lease (or runs without leader election), else 0;
    /// labelled with the ring, so that a ring without a leader shows beside one with.
    pub leader: Family<RingLabel, Gauge>,
    /// Objects in the caches that this build cannot decode, by kind (the label is `kind`).
    pub undecodable: Family<ErrorLabel, Gauge>,
}

impl InstanceMetrics {
    pub fn register(&self, registry: &mut Registry) {
        registry.register(
            "leader",
            "1 while this instance holds its ring's Lease and acts, else 0, by ring",
            self.leader.clone(),
        );
        registry.register(
            "undecodable_objects",
            "Watched objects this build cannot decode, by kind (each is reported on its tenant)",
            self.undecodable.clone(),
        );
    }
}

/// The fleet as `kubectl express doctor` sees it (`express_triage::fleet_figures`).
#[derive(Default)]
pub struct FleetGauges {
    /// The ring's tenants (labelled for it), labelled with the ring.
    pub tenants: Family<RingLabel, Gauge>,
    pub unhealthy_tenants: Family<SymptomLabel, Gauge>,
    pub unhealthy_namespaces: Family<SymptomLabel, Gauge>,
    pub rollouts_in_progress: Gauge,
    pub oldest_unobserved_seconds: Gauge,
}

impl FleetGauges {
    pub fn register(&self, registry: &mut Registry) {
        registry.register(
            "tenants",
            "Express clusters whose operator-ring label names this operator's ring, by ring",
            self.tenants.clone(),
        );
        registry.register(
            "unhealthy_tenants",
            "Express clusters with a symptom (Failed, NodesNotReady...), by symptom",
            self.unhealthy_tenants.clone(),
        );
        registry.register(
            "unhealthy_namespaces",
            "Namespaces with an Express cluster showing the symptom, by symptom (spread)",
            self.unhealthy_namespaces.clone(),
        );
        registry.register(
            "rollouts_in_progress",
            "Express clusters with a rollout under way",
            self.rollouts_in_progress.clone(),
        );
        registry.register(
            "oldest_unobserved_generation_seconds",
            "Age of the oldest ExpressCluster spec change the operator has not observed (backlog)",
            self.oldest_unobserved_seconds.clone(),
        );
    }
}

/// The API requests the operator sends, and the client-side rate limit (`--kube-qps`,
/// `--kube-burst`).
pub struct ApiMetrics {
    /// Every request sent, by verb, resource and response code (client-go's
    /// `rest_client_requests_total`, with the resource the API server's own metrics name).
    pub requests: Family<RequestLabel, Counter>,
    /// API requests that had to wait for a token.
    pub throttled: Counter,
    /// How long those requests waited.
    pub throttle_wait_seconds: Histogram,
    /// When the API server last failed a request (a 5xx, a 429, no answer), in Unix seconds.
    pub trouble_last_seconds: Gauge,
    /// What failed and when, for a release's judge (a lone 429 is not trouble to it).
    pub trouble: crate::api_trouble::ApiTrouble,
}

impl Default for ApiMetrics {
    fn default() -> Self {
        ApiMetrics {
            requests: Family::default(),
            throttled: Counter::default(),
            throttle_wait_seconds: Histogram::new(exponential_buckets(0.001, 2.0, 16)),
            trouble_last_seconds: Gauge::default(),
            trouble: crate::api_trouble::ApiTrouble::default(),
        }
    }
}

impl ApiMetrics {
    pub fn register(&self, registry: &mut Registry) {
        registry.register(
            "api_requests",
            "API requests sent, by verb, resource and response code (a release's analysis compares them per reconcile between rings)",
            self.requests.clone(),
        );
        registry.register(
            "api_requests_throttled",
            "API requests that waited for a token of the client-side limit (--kube-qps, --kube-burst)",
            self.throttled.clone(),
        );
        registry.register(
            "api_throttle_wait_seconds",
            "Time throttled API requests waited for their token",
            self.throttle_wait_seconds.clone(),
        );
        registry.register(
            "api_trouble_last_timestamp_seconds",
            "When the API server last failed one of the operator's requests (a 5xx, a 429, no answer), in Unix seconds; a release's judge voids its samples for a minute after a failure, or after 429s that lasted 10 s",
            self.trouble_last_seconds.clone(),
        );
    }
}

/// The work queue's families: the runner that fills them knows nothing of Prometheus names.
pub fn register_queue(queue: &QueueMetrics, registry: &mut Registry) {
    registry.register(
        "queue_depth",
        "Express clusters waiting in the work queue for a reconcile slot",
        queue.depth.clone(),
    );
    registry.register(
        "queue_wait_seconds",
        "Time an Express cluster waited in the work queue before its reconcile started",
        queue.wait_seconds.clone(),
    );
}

/// The rings: hand-overs between them, the build serving this one, and every ring's tenants.
#[derive(Default)]
pub struct RingMetrics {
    /// Hand-overs between rings this instance took part in, by what it did (released, adopted).
    pub handovers: Family<ActionLabel, Counter>,
    /// Always 1, labelled with this build's version and the ring it serves.
    pub build_info: Family<BuildLabel, Gauge>,
    /// Every ring's tenants as this instance sees them (by the ring their label names): a
    /// ring whose operator is gone entirely still shows here, through the other rings.
    pub tenants: Family<RingLabel, Gauge>,
    /// Fields (and CRDs, versions) this build writes that the installed CRDs lack: 0 unless
    /// the build runs on an API behind it.
    pub api_fields_missing: Gauge,
    /// The rings `tenants` was last published for (a ring left with no tenant is dropped).
    tenants_published: Mutex<BTreeSet<String>>,
}

impl RingMetrics {
    pub fn register(&self, registry: &mut Registry) {
        registry.register(
            "handovers",
            "Tenants this instance released to another ring or adopted, by action",
            self.handovers.clone(),
        );
        registry.register(
            "build_info",
            "Always 1: the operator's version and the ring it serves",
            self.build_info.clone(),
        );
        registry.register(
            "api_fields_missing",
            "Fields this build writes that the installed CRDs lack, which the API server drops (0: the API is not behind the build)",
            self.api_fields_missing.clone(),
        );
        registry.register(
            "ring_tenants",
            "Express clusters this instance sees, by the ring their operator-ring label names (every ring)",
            self.tenants.clone(),
        );
    }

    /// Counts each ring's tenants (`own` always has a series, 0 without tenants) and drops the
    /// series of a ring left with none.
    pub fn set_tenants<'a>(&self, own: &str, rings: impl IntoIterator<Item = &'a str>) {
        let mut counts = std::collections::BTreeMap::<String, i64>::new();
        counts.insert(own.to_owned(), 0);
        for ring in rings {
            *counts.entry(ring.to_owned()).or_default() += 1;
        }
        let mut published = self
            .tenants_published
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        for gone in published.iter().filter(|r| !counts.contains_key(*r)) {
            self.tenants.remove(&RingLabel { ring: gone.clone() });
        }
        for (ring, count) in &counts {
            self.tenants
                .get_or_create(&RingLabel { ring: ring.clone() })
                .set(*count);
        }
        *published = counts.into_keys().collect();
    }
}
