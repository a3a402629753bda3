//! Prometheus metrics and the `/metrics`, `/healthz`, `/readyz` endpoints.
//!
//! `/metrics` answers in OpenMetrics (`application/openmetrics-text`) when the scraper's
//! `Accept` asks for it, as Prometheus does, and in the classic text format (`text/plain;
//! version=0.0.4`) otherwise: `curl`, `promtool check metrics` and other classic parsers read a
//! counter family `x` as `# TYPE x_total counter`, which the OpenMetrics body (`# TYPE x
//! counter` over samples `x_total`) would not give them.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use prometheus_client::registry::Registry;

use crate::memory_metrics::MemoryGauges;
pub use crate::metric_groups::{
    ActionLabel, ApiMetrics, BuildLabel, ErrorLabel, FleetGauges, InstanceMetrics, PhaseLabel,
    ResultLabel, RingLabel, RingMetrics, SymptomLabel, WorkMetrics,
};
use crate::release_metrics::ReleaseGauges;
use crate::runner::QueueMetrics;

pub struct Metrics {
    /// What the controller did: its passes, their results and errors, the pod actions taken.
    pub work: WorkMetrics,
    /// Whether this instance leads its ring, and what its caches cannot decode.
    pub instance: InstanceMetrics,
    /// The fleet as `kubectl express doctor` sees it (`express_triage::fleet_figures`).
    pub fleet: FleetGauges,
    /// The client-side API rate limit: requests throttled and how long they waited.
    pub api: ApiMetrics,
    /// The work queue: Express clusters waiting for a reconcile, and how long they waited.
    pub queue: QueueMetrics,
    /// Hand-overs between rings, the build serving this one, every ring's tenants.
    pub rings: RingMetrics,
    /// The OperatorReleases this instance judges.
    pub release: ReleaseGauges,
    /// What the operator holds in memory (caches, overlays, recorders, heap).
    pub memory: MemoryGauges,
    /// Notifications sent, failed and dropped; failing destinations.
    pub notify: crate::notify_metrics::NotifyMetrics,
    /// Whether the per-tenant families (`express_operator_nodes{namespace,cluster,phase}`) are
    /// published: `--per-tenant-metrics=false` leaves them out for a large fleet.
    per_tenant: bool,
    pub ready: AtomicBool,
    registry: Registry,
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
                self.work
                    .reconciles
                    .get_or_create(&ResultLabel {
                        result: result.into(),
                    })
                    .get()
            })
            .sum()
    }

    /// Every family; the per-tenant ones only if `per_tenant` (their series grow with the
    /// fleet: see docs/benchmarks.md). The groups register in the order `/metrics` has always
    /// listed its families.
    pub fn with_per_tenant(per_tenant: bool) -> Arc<Metrics> {
        let mut registry = Registry::with_prefix("express_operator");
        let work = WorkMetrics::default();
        work.register(&mut registry, per_tenant);
        let instance = InstanceMetrics::default();
        instance.register(&mut registry);
        let fleet = FleetGauges::default();
        fleet.register(&mut registry);
        let api = ApiMetrics::default();
        api.register(&mut registry);
        let queue = QueueMetrics::default();
        crate::metric_groups::register_queue(&queue, &mut registry);
        let rings = RingMetrics::default();
        rings.register(&mut registry);
        let release = ReleaseGauges::default();
        release.register(&mut registry);
        let notify = crate::notify_metrics::NotifyMetrics::default();
        notify.register(&mut registry);
        let memory = MemoryGauges::default();
        memory.register(&mut registry);
        Arc::new(Metrics {
            work,
            instance,
            fleet,
            api,
            queue,
            rings,
            release,
            notify,
            memory,
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
        self.rings.set_tenants(own, rings);
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
                    self.work.nodes.get_or_create(&label).set(count);
                }
                None => {
                    self.work.nodes.remove(&label);
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
        self.rings
            .build_info
            .get_or_create(&BuildLabel {
                version: version.into(),
                ring: ring.into(),
            })
            .set(1);
    }

    /// One more tenant released or adopted.
    pub fn handovers_inc(&self, action: &str) {
        self.rings
            .handovers
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
            .work
            .reconciles
            .get_or_create(&ResultLabel {
                result: "ok".into(),
            })
            .inc();
        metrics.work.rollout_failures.inc();
        metrics.work.reconcile_seconds.observe(0.001);
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
