//! Prometheus metrics and the `/metrics`, `/healthz`, `/readyz` endpoints.
//!
//! `/metrics` answers in OpenMetrics (`application/openmetrics-text`) when the scraper's
//! `Accept` asks for it, as Prometheus does, and in the classic text format (`text/plain;
//! version=0.0.4`) otherwise: `curl`, `promtool check metrics` and other classic parsers read a
//! counter family `x` as `# TYPE x_total counter`, which the OpenMetrics body (`# TYPE x
//! counter` over samples `x_total`) would not give them.

use std::collections::BTreeSet;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

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
    /// Time the fleet view (ring counts, doctor's figures) takes to recompute on its timer:
    /// the one pass over every tenant, which grows with the fleet.
    pub fleet_view_seconds: Histogram,
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
    /// Every ring's tenants as this instance sees them (by the ring their label names): a
    /// ring whose operator is gone entirely still shows here, through the other rings.
    pub ring_tenants: Family<RingLabel, Gauge>,
    /// The OperatorReleases this instance judges.
    pub release: crate::release_metrics::ReleaseGauges,
    /// What the operator holds in memory (caches, overlays, recorders, heap).
    pub memory: crate::memory_metrics::MemoryGauges,
    /// The rings `ring_tenants` was last published for (a ring left with no tenant is dropped).
    ring_tenants_published: Mutex<BTreeSet<String>>,
    /// Whether the per-tenant families (`express_operator_nodes{namespace,cluster,phase}`) are
    /// published: `--per-tenant-metrics=false` leaves them out for a large fleet.
    per_tenant: bool,
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

/// The media type of the OpenMetrics body.
pub const OPENMETRICS_CONTENT_TYPE: &str =
    "application/openmetrics-text; version=1.0.0; charset=utf-8";
/// The media type of the classic Prometheus text format.
pub const TEXT_CONTENT_TYPE: &str = "text/plain; version=0.0.4; charset=utf-8";

impl Metrics {
    /// Every family, the per-tenant ones included.
    pub fn new() -> Arc<Metrics> {
        Metrics::with_per_tenant(true)
    }

    /// Reconciles run so far, whatever their result.
    pub fn reconciles_so_far(&self) -> u64 {
        ["ok", "error"]
            .into_iter()
            .map(|result| {
                self.reconciles
                    .get_or_create(&ResultLabel {
                        result: result.into(),
                    })
                    .get()
            })
            .sum()
    }

    /// Every family; the per-tenant ones only if `per_tenant` (their series grow with the
    /// fleet: see docs/benchmarks.md).
    pub fn with_per_tenant(per_tenant: bool) -> Arc<Metrics> {
        let mut registry = Registry::with_prefix("express_operator");
        let reconciles = Family::<ResultLabel, Counter>::default();
        let errors = Family::<ErrorLabel, Counter>::default();
        let actions = Family::<ActionLabel, Counter>::default();
        let reconcile_seconds = Histogram::new(exponential_buckets(0.0005, 2.0, 16));
        let nodes = Family::<PhaseLabel, Gauge>::default();
        let fleet_view_seconds = Histogram::new(exponential_buckets(0.001, 2.0, 14));
        registry.register(
            "fleet_view_duration_seconds",
            "Time to recompute the fleet view (ring counts, fleet figures) from the caches",
            fleet_view_seconds.clone(),
        );
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
        if per_tenant {
            registry.register(
                "nodes",
                "Nodes of each Express cluster by phase (per tenant; --per-tenant-metrics)",
                nodes.clone(),
            );
        }
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
        let ring_tenants = Family::<RingLabel, Gauge>::default();
        registry.register(
            "ring_tenants",
            "Express clusters this instance sees, by the ring their operator-ring label names (every ring)",
            ring_tenants.clone(),
        );
        let release = crate::release_metrics::ReleaseGauges::default();
        release.register(&mut registry);
        let memory = crate::memory_metrics::MemoryGauges::default();
        memory.register(&mut registry);
        Arc::new(Metrics {
            release,
            memory,
            reconciles,
            errors,
            actions,
            reconcile_seconds,
            fleet_view_seconds,
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
            ring_tenants,
            ring_tenants_published: Mutex::new(BTreeSet::new()),
            per_tenant,
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

    /// Publishes how many tenants each ring has, from every tenant this instance sees (their
    /// `ring`), so that a ring without any live operator is still visible (the alert
    /// `ExpressOperatorNoLeader`). This instance's own ring always has a series (0 without
    /// tenants); another ring left with no tenant loses its series.
    pub fn set_ring_tenants<'a>(&self, own: &str, rings: impl IntoIterator<Item = &'a str>) {
        let mut counts = std::collections::BTreeMap::<String, i64>::new();
        counts.insert(own.to_owned(), 0);
        for ring in rings {
            *counts.entry(ring.to_owned()).or_default() += 1;
        }
        let mut published = self
            .ring_tenants_published
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        for gone in published.iter().filter(|r| !counts.contains_key(*r)) {
            self.ring_tenants.remove(&RingLabel { ring: gone.clone() });
        }
        for (ring, count) in &counts {
            self.ring_tenants
                .get_or_create(&RingLabel { ring: ring.clone() })
                .set(*count);
        }
        *published = counts.into_keys().collect();
    }

    /// Publishes one tenant's nodes by phase: a series for each phase it has nodes in, none for
    /// the others (nine series per tenant would be 90,000 at 10,000 tenants, most of them 0).
    pub fn set_tenant_nodes(
        &self,
        namespace: &str,
        cluster: &str,
        phases: &std::collections::HashMap<express_api::NodePhase, i64>,
    ) {
        if !self.per_tenant {
            return;
        }
        // A series lives as long as its tenant has nodes in the phase: past the burst.
        crate::long_lived::long_lived(|| self.set_tenant_phases(namespace, cluster, phases));
    }

    fn set_tenant_phases(
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

    /// The OpenMetrics text exposition.
    pub fn encode(&self) -> String {
        let mut out = String::new();
        // Writing into a String cannot fail.
        let _ = prometheus_client::encoding::text::encode(&mut out, &self.registry);
        out
    }

    /// The classic Prometheus text exposition (format 0.0.4) of the same figures.
    pub fn encode_text(&self) -> String {
        openmetrics_to_text(&self.encode())
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

/// The classic text format of an OpenMetrics text exposition as prometheus-client writes it: a
/// counter family `x` (samples `x_total`) becomes the family `x_total`; `unknown` is
/// `untyped`, `info` a gauge named `x_info`; `# UNIT`, `# EOF`, exemplars and counters'
/// `_created` samples have no place there and are left out; `\"` in help is unescaped.
pub fn openmetrics_to_text(openmetrics: &str) -> String {
    let mut out = String::with_capacity(openmetrics.len());
    // A HELP line waits for its family's TYPE line, which says the family's classic name.
    let mut help: Option<(&str, String)> = None;
    let mut created: Option<String> = None;
    for line in openmetrics.lines() {
        if line == "# EOF" || line.starts_with("# UNIT ") {
            continue;
        }
        if let Some(rest) = line.strip_prefix("# HELP ") {
            let (name, text) = rest.split_once(' ').unwrap_or((rest, ""));
            help = Some((name, text.replace("\\\"", "\"")));
            continue;
        }
        if let Some(rest) = line.strip_prefix("# TYPE ") {
            let (name, kind) = rest.split_once(' ').unwrap_or((rest, "unknown"));
            let (classic, kind) = match kind {
                "counter" => (format!("{name}_total"), "counter"),
                "gauge" | "histogram" | "summary" => (name.to_owned(), kind),
                "info" => (format!("{name}_info"), "gauge"),
                "gaugehistogram" => (name.to_owned(), "histogram"),
                _ => (name.to_owned(), "untyped"),
            };
            created = (kind == "counter").then(|| format!("{name}_created"));
            if let Some((_, text)) = help.take().filter(|(of, _)| *of == name) {
                out.push_str(&format!("# HELP {classic} {text}\n"));
            }
            out.push_str(&format!("# TYPE {classic} {kind}\n"));
            continue;
        }
        if line.starts_with('#') {
            continue;
        }
        if created.as_deref().is_some_and(|c| {
            line.strip_prefix(c)
                .is_some_and(|r| r.starts_with([' ', '{']))
        }) {
            continue;
        }
        let sample = line
            .split_once(" # ")
            .map_or(line, |(sample, _exemplar)| sample);
        out.push_str(sample);
        out.push('\n');
    }
    out
}

/// Whether an `Accept` header takes OpenMetrics (any version, a quality above 0).
pub fn accepts_openmetrics(accept: &str) -> bool {
    accept.split(',').any(|range| {
        let mut parts = range.split(';').map(str::trim);
        let media = parts.next().unwrap_or_default();
        let refused = parts.any(|p| {
            p.strip_prefix("q=")
                .and_then(|q| q.parse::<f64>().ok())
                .is_some_and(|q| q <= 0.0)
        });
        media.eq_ignore_ascii_case("application/openmetrics-text") && !refused
    })
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
    use axum::http::header::CONTENT_TYPE;
    use axum::routing::get;
    let app = axum::Router::new()
        .route(
            "/metrics",
            get({
                let metrics = metrics.clone();
                move |headers: axum::http::HeaderMap| {
                    let metrics = metrics.clone();
                    async move {
                        let openmetrics = headers
                            .get_all(axum::http::header::ACCEPT)
                            .iter()
                            .filter_map(|v| v.to_str().ok())
                            .any(accepts_openmetrics);
                        if openmetrics {
                            ([(CONTENT_TYPE, OPENMETRICS_CONTENT_TYPE)], metrics.encode())
                        } else {
                            ([(CONTENT_TYPE, TEXT_CONTENT_TYPE)], metrics.encode_text())
                        }
                    }
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_classic_text_names_counters_with_total_and_keeps_help_and_types() {
        let metrics = Metrics::new();
        metrics
            .reconciles
            .get_or_create(&ResultLabel {
                result: "ok".into(),
            })
            .inc();
        metrics.rollout_failures.inc();
        metrics.reconcile_seconds.observe(0.001);
        let text = metrics.encode_text();
        assert!(text.contains(
            "# HELP express_operator_reconciles_total Reconciles of Express clusters, by result.\n\
             # TYPE express_operator_reconciles_total counter\n\
             express_operator_reconciles_total{result=\"ok\"} 1\n"
        ));
        assert!(text.contains("# TYPE express_operator_rollout_failures_total counter\n"));
        assert!(text.contains("# TYPE express_operator_reconcile_duration_seconds histogram\n"));
        assert!(text.contains("express_operator_reconcile_duration_seconds_count 1\n"));
        assert!(!text.contains("# EOF"));
        // Every sample line belongs to the family its TYPE line announced last.
        let mut family = String::new();
        for line in text.lines() {
            if let Some(rest) = line.strip_prefix("# TYPE ") {
                family = rest.split(' ').next().unwrap().to_owned();
            } else if !line.starts_with('#') {
                let name = line.split(['{', ' ']).next().unwrap();
                assert!(
                    name == family
                        || ["_bucket", "_sum", "_count"]
                            .iter()
                            .any(|s| name == format!("{family}{s}")),
                    "{name} under the TYPE of {family}"
                );
            }
        }
    }

    #[test]
    fn the_conversion_drops_what_the_classic_format_has_no_place_for() {
        let openmetrics = "# HELP a_seconds A \\\"quoted\\\" help.\n# TYPE a_seconds counter\n# UNIT a_seconds seconds\n\
                           a_seconds_total 2 # {trace=\"x\"} 1\na_seconds_created 1.5\n\
                           # TYPE b unknown\nb 1\n# TYPE c info\nc_info{v=\"1\"} 1\n# EOF\n";
        assert_eq!(
            openmetrics_to_text(openmetrics),
            "# HELP a_seconds_total A \"quoted\" help.\n# TYPE a_seconds_total counter\n\
             a_seconds_total 2\n# TYPE b untyped\nb 1\n# TYPE c_info gauge\nc_info{v=\"1\"} 1\n"
        );
    }

    #[test]
    fn openmetrics_is_served_to_who_asks_for_it() {
        // Prometheus 2.x's scrape Accept header.
        assert!(accepts_openmetrics(
            "application/openmetrics-text;version=1.0.0,application/openmetrics-text;version=0.0.1;q=0.75,text/plain;version=0.0.4;q=0.5,*/*;q=0.1"
        ));
        assert!(accepts_openmetrics("Application/OpenMetrics-Text"));
        assert!(!accepts_openmetrics("*/*"));
        assert!(!accepts_openmetrics("text/plain;version=0.0.4"));
        assert!(!accepts_openmetrics(
            "application/openmetrics-text;q=0, text/plain"
        ));
    }

    #[test]
    fn without_per_tenant_metrics_no_series_names_a_tenant() {
        let metrics = Metrics::with_per_tenant(false);
        let phases = [(express_api::NodePhase::ALL[0], 3)].into_iter().collect();
        metrics.set_tenant_nodes("team-a", "shop", &phases);
        let text = metrics.encode();
        assert!(!text.contains("express_operator_nodes"), "{text}");
        assert!(!text.contains("team-a"), "{text}");
        let metrics = Metrics::new();
        metrics.set_tenant_nodes("team-a", "shop", &phases);
        assert!(metrics.encode().contains("namespace=\"team-a\""));
    }

    #[test]
    fn ring_tenants_counts_every_ring_and_drops_a_ring_left_empty() {
        let metrics = Metrics::new();
        metrics.set_ring_tenants("default", []);
        assert!(
            metrics
                .encode()
                .contains("express_operator_ring_tenants{ring=\"default\"} 0")
        );
        metrics.set_ring_tenants("default", ["default", "canary", "default"]);
        let text = metrics.encode();
        assert!(text.contains("express_operator_ring_tenants{ring=\"default\"} 2"));
        assert!(text.contains("express_operator_ring_tenants{ring=\"canary\"} 1"));
        metrics.set_ring_tenants("default", ["default"]);
        let text = metrics.encode();
        assert!(text.contains("express_operator_ring_tenants{ring=\"default\"} 1"));
        assert!(!text.contains("ring=\"canary\""), "{text}");
    }
}
