//! Prometheus metrics and the `/metrics`, `/healthz`, `/readyz` endpoints.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};
use prometheus_client::registry::Registry;

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

pub struct Metrics {
    pub reconciles: Family<ResultLabel, Counter>,
    pub errors: Family<ErrorLabel, Counter>,
    pub actions: Family<ActionLabel, Counter>,
    pub reconcile_seconds: Histogram,
    pub nodes: Family<PhaseLabel, Gauge>,
    pub rollout_failures: Counter,
    /// Bounce requests ended, by result: succeeded, failed, refused.
    pub bounces: Family<ResultLabel, Counter>,
    /// 1 while this instance holds its ring's Lease (or runs without leader election), else 0;
    /// labelled with the ring, so that a ring without a leader shows beside one with.
    pub leader: Family<RingLabel, Gauge>,
    /// Objects in the caches that this build cannot decode, by kind (the label is `kind`).
    pub undecodable: Family<ErrorLabel, Gauge>,
    /// The fleet as `kubectl express doctor` sees it (`express_triage::fleet_figures`).
    pub fleet: FleetGauges,
    /// API requests that had to wait for a token of `--kube-qps`/`--kube-burst`.
    pub api_throttled: Counter,
    /// How long those requests waited.
    pub api_throttle_wait_seconds: Histogram,
    /// The work queue: Express clusters waiting for a reconcile, and how long they waited.
    pub queue: crate::runner::QueueMetrics,
    /// Hand-overs between rings this instance took part in, by what it did (released, adopted).
    pub handovers: Family<ActionLabel, Counter>,
    /// Always 1, labelled with this build's version and the ring it serves.
    pub build_info: Family<BuildLabel, Gauge>,
    pub ready: AtomicBool,
    registry: Registry,
}

#[derive(Default)]
pub struct FleetGauges {
    /// The ring's tenants (labelled for it), labelled with the ring.
    pub tenants: Family<RingLabel, Gauge>,
    pub unhealthy_tenants: Family<SymptomLabel, Gauge>,
    pub unhealthy_namespaces: Family<SymptomLabel, Gauge>,
    pub rollouts_in_progress: Gauge,
    pub oldest_unobserved_seconds: Gauge,
}

impl Metrics {
    pub fn new() -> Arc<Metrics> {
        let mut registry = Registry::with_prefix("express_operator");
        let reconciles = Family::<ResultLabel, Counter>::default();
        let errors = Family::<ErrorLabel, Counter>::default();
        let actions = Family::<ActionLabel, Counter>::default();
        let reconcile_seconds = Histogram::new(exponential_buckets(0.0005, 2.0, 16));
        let nodes = Family::<PhaseLabel, Gauge>::default();
        registry.register(
            "reconciles",
            "Reconciles of Express clusters, by result",
            reconciles.clone(),
        );
        registry.register(
            "reconcile_errors",
            "Reconcile errors, by kind",
            errors.clone(),
        );
        registry.register(
            "actions",
            "Pod operations performed, by action",
            actions.clone(),
        );
        registry.register(
            "reconcile_duration_seconds",
            "Time to reconcile one Express cluster",
            reconcile_seconds.clone(),
        );
        registry.register("nodes", "Nodes by cluster and phase", nodes.clone());
        let rollout_failures = Counter::default();
        registry.register(
            "rollout_failures",
            "Node changes found failed (crash loop, ended pod or progress deadline)",
            rollout_failures.clone(),
        );
        let bounces = Family::<ResultLabel, Counter>::default();
        registry.register(
            "bounces",
            "Bounce requests ended, by result (succeeded, failed, refused)",
            bounces.clone(),
        );
        let leader = Family::<RingLabel, Gauge>::default();
        registry.register(
            "leader",
            "1 while this instance holds its ring's Lease and acts, else 0, by ring",
            leader.clone(),
        );
        let undecodable = Family::<ErrorLabel, Gauge>::default();
        registry.register(
            "undecodable_objects",
            "Watched objects this build cannot decode, by kind (each is reported on its tenant)",
            undecodable.clone(),
        );
        let fleet = FleetGauges::default();
        registry.register(
            "tenants",
            "Express clusters whose operator-ring label names this operator's ring, by ring",
            fleet.tenants.clone(),
        );
        registry.register(
            "unhealthy_tenants",
            "Express clusters with a symptom (Failed, NodesNotReady...), by symptom",
            fleet.unhealthy_tenants.clone(),
        );
        registry.register(
            "unhealthy_namespaces",
            "Namespaces with an Express cluster showing the symptom, by symptom (spread)",
            fleet.unhealthy_namespaces.clone(),
        );
        registry.register(
            "rollouts_in_progress",
            "Express clusters with a rollout under way",
            fleet.rollouts_in_progress.clone(),
        );
        registry.register(
            "oldest_unobserved_generation_seconds",
            "Age of the oldest ExpressCluster spec change the operator has not observed (backlog)",
            fleet.oldest_unobserved_seconds.clone(),
        );
        let api_throttled = Counter::default();
        registry.register(
            "api_requests_throttled",
            "API requests that waited for a token of the client-side limit (--kube-qps, --kube-burst)",
            api_throttled.clone(),
        );
        let api_throttle_wait_seconds = Histogram::new(exponential_buckets(0.001, 2.0, 16));
        registry.register(
            "api_throttle_wait_seconds",
            "Time throttled API requests waited for their token",
            api_throttle_wait_seconds.clone(),
        );
        let queue = crate::runner::QueueMetrics::default();
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
        let handovers = Family::<ActionLabel, Counter>::default();
        registry.register(
            "handovers",
            "Tenants this instance released to another ring or adopted, by action",
            handovers.clone(),
        );
        let build_info = Family::<BuildLabel, Gauge>::default();
        registry.register(
            "build_info",
            "Always 1: the operator's version and the ring it serves",
            build_info.clone(),
        );
        Arc::new(Metrics {
            reconciles,
            errors,
            actions,
            reconcile_seconds,
            nodes,
            rollout_failures,
            bounces,
            leader,
            undecodable,
            fleet,
            api_throttled,
            api_throttle_wait_seconds,
            queue,
            handovers,
            build_info,
            ready: AtomicBool::new(false),
            registry,
        })
    }

    /// Publishes the fleet figures (every symptom, zeros included, so a recovered symptom
    /// reads 0 and not its last value).
    pub fn set_fleet(&self, ring: &str, figures: &express_triage::FleetFigures) {
        let gauge = |n: usize| i64::try_from(n).unwrap_or(i64::MAX);
        self.fleet
            .tenants
            .get_or_create(&RingLabel { ring: ring.into() })
            .set(gauge(figures.tenants));
        for (symptom, (tenants, namespaces)) in &figures.unhealthy {
            let label = SymptomLabel {
                symptom: symptom.as_str().into(),
            };
            self.fleet
                .unhealthy_tenants
                .get_or_create(&label)
                .set(gauge(*tenants));
            self.fleet
                .unhealthy_namespaces
                .get_or_create(&label)
                .set(gauge(*namespaces));
        }
        self.fleet
            .rollouts_in_progress
            .set(gauge(figures.rollouts_in_progress));
        self.fleet
            .oldest_unobserved_seconds
            .set(figures.oldest_unobserved_seconds);
    }

    /// Publishes one tenant's nodes by phase: a series for each phase it has nodes in, none for
    /// the others (nine series per tenant would be 90,000 at 10,000 tenants, most of them 0).
    pub fn set_tenant_nodes(
        &self,
        namespace: &str,
        cluster: &str,
        phases: &std::collections::HashMap<express_api::NodePhase, i64>,
    ) {
        for phase in express_api::NodePhase::ALL {
            let label = PhaseLabel {
                namespace: namespace.into(),
                cluster: cluster.into(),
                phase: phase.as_str().into(),
            };
            match phases.get(&phase).copied().filter(|&n| n > 0) {
                Some(count) => {
                    self.nodes.get_or_create(&label).set(count);
                }
                None => {
                    self.nodes.remove(&label);
                }
            }
        }
    }

    /// Drops a tenant's series: deleted, moved to another ring, or not this instance's to
    /// report. A series left behind would keep its last value (a Failed node keeping
    /// ExpressClusterHalted firing) until the operator restarts.
    pub fn forget_tenant(&self, namespace: &str, cluster: &str) {
        self.set_tenant_nodes(namespace, cluster, &std::collections::HashMap::new());
    }

    pub fn encode(&self) -> String {
        let mut out = String::new();
        // Writing into a String cannot fail.
        let _ = prometheus_client::encoding::text::encode(&mut out, &self.registry);
        out
    }

    /// Says which build serves which ring (`express_operator_build_info`).
    pub fn set_build(&self, version: &str, ring: &str) {
        self.build_info
            .get_or_create(&BuildLabel {
                version: version.into(),
                ring: ring.into(),
            })
            .set(1);
    }

    /// One more tenant released or adopted.
    pub fn handovers_inc(&self, action: &str) {
        self.handovers
            .get_or_create(&ActionLabel {
                action: action.into(),
            })
            .inc();
    }

    pub fn set_ready(&self) {
        self.ready.store(true, Ordering::SeqCst);
    }
}

/// Serves `/metrics`, `/healthz` (the process runs) and `/readyz` (caches are synced).
pub async fn serve(addr: std::net::SocketAddr, metrics: Arc<Metrics>) -> std::io::Result<()> {
    let listener = tokio::net::TcpListener::bind(addr).await?;
    serve_on(listener, metrics).await
}

/// [`serve`] on a listener already bound (tests bind port 0).
pub async fn serve_on(
    listener: tokio::net::TcpListener,
    metrics: Arc<Metrics>,
) -> std::io::Result<()> {
    use axum::http::StatusCode;
    use axum::routing::get;
    let app = axum::Router::new()
        .route(
            "/metrics",
            get({
                let metrics = metrics.clone();
                move || {
                    let metrics = metrics.clone();
                    async move { metrics.encode() }
                }
            }),
        )
        .route("/healthz", get(|| async { "ok" }))
        .route(
            "/readyz",
            get(move || {
                let metrics = metrics.clone();
                async move {
                    if metrics.ready.load(Ordering::SeqCst) {
                        (StatusCode::OK, "ok")
                    } else {
                        (StatusCode::SERVICE_UNAVAILABLE, "caches not synced")
                    }
                }
            }),
        );
    axum::serve(listener, app).await
}
