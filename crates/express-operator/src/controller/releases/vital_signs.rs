//! The operator's vital signs for a release's sample (DESIGN section 16), read from
//! Prometheus: for each signal, the canary ring's values and the baseline's over the window the
//! planner chose ([`express_planner::analysis::window`]), one `query_range` each. The judging is
//! the planner's; this module only reads.
//!
//! A ring's series are told apart by joining every series with the ring's build info on the
//! scrape target (`* on(instance) group_left() express_operator_build_info{ring="R"}`, which is
//! always 1): no series needs a ring label of its own, and a Prometheus that scrapes several
//! rings' pods under one job still tells them apart.

use std::time::Duration;

use express_api::analysis::{
    AnalysisSpec, CustomSignal, RING_PLACEHOLDER, SecretKey, Signal, Worse,
};
use express_planner::analysis::{
    Analysis, AnalysisWindow, CUSTOM_FLOOR, EffectFloor, Quiet, SignalSeries, floor,
    look_back_seconds,
};
use http_body_util::{BodyExt, Empty};
use hyper::body::Bytes;
use k8s_openapi::api::core::v1::Secret;
use k8s_openapi::jiff::Timestamp;
use kube::api::Api;

use crate::controller::context::Context;
use crate::controller::outbound;

/// How long one query may take.
const QUERY_TIMEOUT: Duration = Duration::from_secs(5);
/// How long one sample's reading may take in all: the releases' loop waits for it, so a
/// Prometheus that accepts connections and never answers must not hold every release.
const READ_TIMEOUT: Duration = Duration::from_secs(15);

/// Every signal of `spec` over `window`, or why Prometheus could not be read at all.
pub(crate) async fn read(ctx: &Context, spec: &AnalysisSpec, window: &AnalysisWindow) -> Analysis {
    let signals = tokio::time::timeout(READ_TIMEOUT, signals(ctx, spec, window))
        .await
        .unwrap_or_else(|_| {
            Err(format!(
                "{}: the signals were not read within {}s",
                spec.prometheus.address,
                READ_TIMEOUT.as_secs()
            ))
        });
    Analysis {
        baseline: window.describe_baseline(),
        signals,
    }
}

async fn signals(
    ctx: &Context,
    spec: &AnalysisSpec,
    window: &AnalysisWindow,
) -> Result<Vec<SignalSeries>, String> {
    let prometheus = Prometheus::new(ctx, spec).await?;
    read_signals(&prometheus, spec, window).await
}

/// Every signal's queries at once, after the one round that says what a per-reconcile signal
/// divides by: a sample is read in two round trips to Prometheus, not one per query (about a
/// dozen), so that a slow Prometheus, or an operator short of CPU, still reads it within
/// [`READ_TIMEOUT`] rather than voiding it.
async fn read_signals(
    prometheus: &Prometheus,
    spec: &AnalysisSpec,
    window: &AnalysisWindow,
) -> Result<Vec<SignalSeries>, String> {
    let step = window.step_seconds;
    // Both sides of a signal whose points look back so far, clear of the hand-over.
    let sides = |look_back: u64| {
        window.span(look_back).map(|spans| {
            let side = |ring, (start, end)| Span {
                ring,
                start,
                end,
                step,
            };
            (
                side(window.canary_ring.as_str(), spans.canary),
                side(spans.baseline_ring, spans.baseline),
            )
        })
    };
    let rate = look_back_seconds(Some(Signal::ReconcileErrorRatio), step);
    let rate_sides = sides(rate);
    let per = match &rate_sides {
        Some((canary, baseline)) => PerReconcile::of(prometheus, canary, baseline, rate).await,
        None => PerReconcile::Driven,
    };
    // Quiet: a side that did not reconcile in its span leaves a per-reconcile signal nothing
    // to compare (an idle ring is no regression, and no evidence either).
    let both_busy = async {
        let Some((canary, baseline)) = &rate_sides else {
            return Ok(false);
        };
        let reconciles = |ring: &str| {
            format!(
                "sum({})",
                of_ring(&format!("rate({}[RANGE])", per.reconciles()), ring, rate)
            )
        };
        let busy = |values: &Result<Vec<f64>, String>| {
            values.as_ref().is_ok_and(|v| v.iter().any(|x| *x > 0.0))
        };
        let (canary_query, baseline_query) = (reconciles(canary.ring), reconciles(baseline.ring));
        let (canary_answer, baseline_answer) = futures::try_join!(
            prometheus.values(canary, &canary_query),
            prometheus.values(baseline, &baseline_query),
        )?;
        Ok::<bool, String>(busy(&canary_answer) && busy(&baseline_answer))
    };
    let settling = |name: String, worse, floor, look_back_seconds| SignalSeries {
        name,
        worse,
        floor,
        canary: Ok(Vec::new()),
        baseline: Ok(Vec::new()),
        quiet: Some(Quiet::Settling { look_back_seconds }),
    };
    // Each built-in signal, and whether it is judged per reconcile (quiet when a side idled).
    let builtin = futures::future::try_join_all(spec.signals().into_iter().map(|signal| {
        let sides = &sides;
        async move {
            let look_back = look_back_seconds(Some(signal), step);
            let name = signal.as_str().to_owned();
            let Some((canary, baseline)) = sides(look_back) else {
                return Ok::<_, String>((
                    settling(name, Worse::Higher, floor(signal), look_back),
                    false,
                ));
            };
            let canary_query = builtin_query(signal, canary.ring, look_back, per);
            let baseline_query = builtin_query(signal, baseline.ring, look_back, per);
            let (canary_values, baseline_values) = futures::try_join!(
                prometheus.values(&canary, &canary_query),
                prometheus.values(&baseline, &baseline_query),
            )?;
            let series = SignalSeries {
                name,
                worse: Worse::Higher,
                floor: floor(signal),
                canary: canary_values,
                baseline: baseline_values,
                quiet: None,
            };
            Ok((series, signal != Signal::MemoryGrowth))
        }
    }));
    // A custom query's look-back is its own: its points are read over the window, less the
    // figures' way to Prometheus.
    let look_back = look_back_seconds(None, step);
    let custom_sides = sides(look_back);
    let custom = futures::future::try_join_all(spec.custom.iter().map(|custom| {
        let custom_sides = &custom_sides;
        async move {
            match custom_sides {
                Some((canary, baseline)) => {
                    custom_series(prometheus, custom, canary, baseline).await
                }
                None => Ok(settling(
                    custom.name.clone(),
                    custom.worse,
                    CUSTOM_FLOOR,
                    look_back,
                )),
            }
        }
    }));
    let (both_busy, builtin, custom) = futures::try_join!(both_busy, builtin, custom)?;
    let mut out: Vec<SignalSeries> = builtin
        .into_iter()
        .map(|(mut series, per_reconcile)| {
            if per_reconcile && !both_busy {
                series.quiet = Some(Quiet::Idle);
            }
            series
        })
        .collect();
    out.extend(custom);
    Ok(out)
}

async fn custom_series(
    prometheus: &Prometheus,
    custom: &CustomSignal,
    canary: &Span<'_>,
    baseline: &Span<'_>,
) -> Result<SignalSeries, String> {
    let query = |ring: &str| custom.query.replace(RING_PLACEHOLDER, ring);
    let floor: EffectFloor = CUSTOM_FLOOR;
    let (canary_query, baseline_query) = (query(canary.ring), query(baseline.ring));
    let (canary_values, baseline_values) = futures::try_join!(
        prometheus.values(canary, &canary_query),
        prometheus.values(baseline, &baseline_query),
    )?;
    Ok(SignalSeries {
        name: custom.name.clone(),
        worse: custom.worse,
        floor,
        canary: canary_values,
        baseline: baseline_values,
        quiet: None,
    })
}

/// What a per-reconcile signal divides by.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum PerReconcile {
    /// The reconciles that drove a tenant of the ring, and the requests they sent: what a
    /// ring's own work costs, which neither its lease renewals and watches nor its reconciles
    /// of other rings' tenants (each ring reconciles every change to tell ownership) dilute.
    Driven,
    /// Every reconcile and every request: a side's build does not count driven reconciles
    /// (it predates them), and both sides are then read alike, so that a release that brings
    /// the driven figures is not judged on two definitions.
    Every,
}

impl PerReconcile {
    /// Driven when both sides publish the driven reconciles over their spans.
    async fn of(
        prometheus: &Prometheus,
        canary: &Span<'_>,
        baseline: &Span<'_>,
        range: u64,
    ) -> Self {
        let answer = async |side: &Span<'_>| {
            let query = format!(
                "sum({})",
                of_ring(PerReconcile::Driven.reconciles(), side.ring, range)
            );
            prometheus.values(side, &query).await
        };
        let (canary_answer, baseline_answer) = futures::join!(answer(canary), answer(baseline));
        let chosen = Self::from_answers(&canary_answer, &baseline_answer);
        if chosen == PerReconcile::Every {
            tracing::info!(
                canary = canary.ring,
                baseline = baseline.ring,
                "a ring's build does not publish driven reconciles: per-reconcile signals divide by every reconcile"
            );
        }
        chosen
    }

    /// Driven only when both answers hold the ring's driven reconciles: Prometheus answering
    /// without the series is a build that predates them.
    fn from_answers(canary: &Answer, baseline: &Answer) -> Self {
        match (canary, baseline) {
            (Ok(Ok(_)), Ok(Ok(_))) => PerReconcile::Driven,
            _ => PerReconcile::Every,
        }
    }

    /// The reconciles' counter.
    fn reconciles(self) -> &'static str {
        match self {
            PerReconcile::Driven => "express_operator_driven_reconciles_total",
            PerReconcile::Every => "express_operator_reconciles_total",
        }
    }

    /// The requests' counter.
    fn requests(self) -> &'static str {
        match self {
            PerReconcile::Driven => "express_operator_driven_reconcile_api_requests_total",
            PerReconcile::Every => "express_operator_api_requests_total",
        }
    }

    /// The reconciles' time histogram's buckets.
    fn duration_buckets(self) -> &'static str {
        match self {
            PerReconcile::Driven => "express_operator_driven_reconcile_duration_seconds_bucket",
            PerReconcile::Every => "express_operator_reconcile_duration_seconds_bucket",
        }
    }
}

/// A built-in signal's PromQL for one ring; `range` is the rate window in seconds.
fn builtin_query(signal: Signal, ring: &str, range: u64, per: PerReconcile) -> String {
    let sum = |expr: &str| format!("sum({})", of_ring(expr, ring, range));
    let reconciles = per.reconciles();
    match signal {
        Signal::ApiRequestsPerReconcile => format!(
            "{} / {}",
            sum(&format!("rate({}[RANGE])", per.requests())),
            sum(&format!("rate({reconciles}[RANGE])"))
        ),
        Signal::ReconcileErrorRatio => format!(
            "({} or vector(0)) / {}",
            sum(&format!("rate({reconciles}{{result=\"error\"}}[RANGE])")),
            sum(&format!("rate({reconciles}[RANGE])"))
        ),
        Signal::ReconcileLatencyP95 => format!(
            "histogram_quantile(0.95, sum by (le) ({}))",
            of_ring(
                &format!("rate({}[RANGE])", per.duration_buckets()),
                ring,
                range
            )
        ),
        Signal::MemoryGrowth => sum(
            "deriv(express_operator_heap_bytes{allocator=\"jemalloc\",state=\"resident\"}[RANGE])",
        ),
    }
}

/// `expr` (with `RANGE` for the rate window) kept to the scrape targets of `ring`.
fn of_ring(expr: &str, ring: &str, range: u64) -> String {
    format!(
        "({}) * on(instance) group_left() express_operator_build_info{{ring=\"{ring}\"}}",
        expr.replace("RANGE", &format!("{range}s"))
    )
}

/// What Prometheus answered for one ring: its values, or (inner `Err`) that the ring's series
/// are missing; outer `Err`: Prometheus could not be asked.
type Answer = Result<Result<Vec<f64>, String>, String>;

/// One side of a comparison: a ring over a span.
struct Span<'a> {
    ring: &'a str,
    start: Timestamp,
    end: Timestamp,
    step: u64,
}

type HttpClient = outbound::HttpsClient<Empty<Bytes>>;

/// A Prometheus to ask, with its bearer token if any.
struct Prometheus {
    client: HttpClient,
    address: String,
    token: Option<String>,
}

impl Prometheus {
    async fn new(ctx: &Context, spec: &AnalysisSpec) -> Result<Prometheus, String> {
        let source = &spec.prometheus;
        let token = match &source.bearer_token_secret {
            Some(secret) => Some(secret_text(ctx, secret, "token").await?.trim().to_owned()),
            None => None,
        };
        let tls = match &source.ca_secret {
            Some(secret) => {
                let pem = secret_text(ctx, secret, "ca.crt").await?;
                tls_trusting(&pem)?
            }
            None => outbound::system_roots()?,
        };
        Ok(Prometheus {
            client: outbound::https_client(tls),
            address: source.address.trim_end_matches('/').to_owned(),
            token,
        })
    }

    /// The values of `query` over `span` (`Ok(Err)`: the ring's series are missing; `Err`:
    /// Prometheus could not be asked).
    async fn values(&self, span: &Span<'_>, query: &str) -> Answer {
        let url = format!(
            "{}/api/v1/query_range?query={}&start={}&end={}&step={}",
            self.address,
            encode(query),
            span.start.as_second(),
            span.end.as_second(),
            span.step
        );
        let mut request = hyper::Request::get(&url);
        if let Some(token) = &self.token {
            request = request.header(http::header::AUTHORIZATION, format!("Bearer {token}"));
        }
        let request = request
            .body(Empty::<Bytes>::new())
            .map_err(|e| format!("{url}: {e}"))?;
        let response = tokio::time::timeout(QUERY_TIMEOUT, self.client.request(request))
            .await
            .map_err(|_| {
                format!(
                    "{}: no answer within {}s",
                    self.address,
                    QUERY_TIMEOUT.as_secs()
                )
            })?
            .map_err(|e| format!("{}: {e}", self.address))?;
        let status = response.status();
        let body = tokio::time::timeout(QUERY_TIMEOUT, response.into_body().collect())
            .await
            .map_err(|_| format!("{}: the answer did not finish", self.address))?
            .map_err(|e| format!("{}: {e}", self.address))?
            .to_bytes();
        if !status.is_success() {
            return Err(format!(
                "{} answered {status}: {}",
                self.address,
                String::from_utf8_lossy(&body)
                    .chars()
                    .take(200)
                    .collect::<String>()
            ));
        }
        Ok(points(&body).map_err(|why| format!("ring {}: {why} ({query})", span.ring)))
    }
}

/// The points of a `query_range` answer with one series (none: the ring's series are missing).
fn points(body: &[u8]) -> Result<Vec<f64>, String> {
    let answer: serde_json::Value =
        serde_json::from_slice(body).map_err(|e| format!("not a Prometheus answer: {e}"))?;
    let series = answer
        .pointer("/data/result")
        .and_then(serde_json::Value::as_array)
        .ok_or("not a Prometheus answer: no data.result")?;
    let Some(first) = series.first() else {
        return Err("no series in the window".into());
    };
    Ok(first
        .get("values")
        .and_then(serde_json::Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(|pair| pair.get(1)?.as_str()?.parse::<f64>().ok())
        .collect())
}

/// Percent-encodes a query parameter's value.
fn encode(text: &str) -> String {
    let mut out = String::with_capacity(text.len() * 3);
    for byte in text.bytes() {
        if byte.is_ascii_alphanumeric() || b"-_.~".contains(&byte) {
            out.push(char::from(byte));
        } else {
            out.push_str(&format!("%{byte:02X}"));
        }
    }
    out
}

/// One key of a Secret in the operator's namespace, as text.
async fn secret_text(
    ctx: &Context,
    secret: &SecretKey,
    default_key: &str,
) -> Result<String, String> {
    let key = secret.key.as_deref().unwrap_or(default_key);
    let namespace = &ctx.settings.operator_namespace;
    let found = Api::<Secret>::namespaced(ctx.client.clone(), namespace)
        .get_opt(&secret.name)
        .await
        .map_err(|e| format!("Secret {namespace}/{}: {e}", secret.name))?
        .ok_or_else(|| format!("Secret {namespace}/{} not found", secret.name))?;
    let bytes = found
        .data
        .and_then(|mut data| data.remove(key))
        .ok_or_else(|| format!("Secret {namespace}/{} has no key {key}", secret.name))?;
    String::from_utf8(bytes.0)
        .map_err(|_| format!("Secret {namespace}/{} key {key} is not text", secret.name))
}

/// A TLS configuration trusting the PEM certificates given (and nothing else).
fn tls_trusting(pem: &str) -> Result<rustls::ClientConfig, String> {
    use rustls::pki_types::CertificateDer;
    use rustls::pki_types::pem::PemObject;
    let mut roots = rustls::RootCertStore::empty();
    for certificate in CertificateDer::pem_slice_iter(pem.as_bytes()) {
        let certificate = certificate.map_err(|e| format!("the CA is not PEM: {e}"))?;
        roots
            .add(certificate)
            .map_err(|e| format!("the CA cannot be used: {e}"))?;
    }
    if roots.is_empty() {
        return Err("the CA Secret holds no certificate".into());
    }
    Ok(rustls::ClientConfig::builder()
        .with_root_certificates(roots)
        .with_no_client_auth())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_ring_is_told_by_its_build_info_and_the_range_is_filled_in() {
        let query = builtin_query(
            Signal::ReconcileErrorRatio,
            "canary",
            20,
            PerReconcile::Every,
        );
        assert_eq!(
            query,
            "(sum((rate(express_operator_reconciles_total{result=\"error\"}[20s])) * on(instance) group_left() express_operator_build_info{ring=\"canary\"}) or vector(0)) / sum((rate(express_operator_reconciles_total[20s])) * on(instance) group_left() express_operator_build_info{ring=\"canary\"})"
        );
        assert!(
            builtin_query(Signal::ReconcileLatencyP95, "x", 8, PerReconcile::Every)
                .starts_with("histogram_quantile(0.95, sum by (le) (")
        );
    }

    #[test]
    fn driven_signals_divide_what_driven_reconciles_sent_by_them() {
        let of = |signal| builtin_query(signal, "canary", 20, PerReconcile::Driven);
        assert_eq!(
            of(Signal::ApiRequestsPerReconcile),
            "sum((rate(express_operator_driven_reconcile_api_requests_total[20s])) * on(instance) group_left() express_operator_build_info{ring=\"canary\"}) / sum((rate(express_operator_driven_reconciles_total[20s])) * on(instance) group_left() express_operator_build_info{ring=\"canary\"})"
        );
        assert!(of(Signal::ReconcileErrorRatio).starts_with(
            "(sum((rate(express_operator_driven_reconciles_total{result=\"error\"}[20s]))"
        ));
        assert!(
            of(Signal::ReconcileLatencyP95)
                .contains("rate(express_operator_driven_reconcile_duration_seconds_bucket[20s])")
        );
        assert_eq!(
            of(Signal::MemoryGrowth),
            builtin_query(Signal::MemoryGrowth, "canary", 20, PerReconcile::Every),
            "memory is not per reconcile"
        );
    }

    #[test]
    fn answers_become_points_and_missing_series_say_so() {
        let answer = br#"{"status":"success","data":{"resultType":"matrix","result":[{"metric":{},"values":[[1,"0.5"],[2,"NaN"],[3,"2"]]}]}}"#;
        let got = points(answer).unwrap_or_default();
        assert_eq!(got.len(), 3);
        assert_eq!((got[0], got[2]), (0.5, 2.0));
        assert!(got[1].is_nan());
        let empty = br#"{"status":"success","data":{"resultType":"matrix","result":[]}}"#;
        assert_eq!(points(empty), Err("no series in the window".into()));
        assert!(points(b"<html>").is_err());
    }

    #[test]
    fn an_answer_without_the_driven_series_is_an_older_build() {
        let published: Answer = Ok(Ok(vec![3.0]));
        let missing: Answer = Ok(Err("no series in the window".into()));
        assert_eq!(
            PerReconcile::from_answers(&published, &published),
            PerReconcile::Driven
        );
        assert_eq!(
            PerReconcile::from_answers(&published, &missing),
            PerReconcile::Every
        );
        assert_eq!(
            PerReconcile::from_answers(&missing, &published),
            PerReconcile::Every
        );
    }

    /// A Prometheus that answers every query after `delay`, one series of one point each, on
    /// connections of their own, as many at once as asked.
    async fn slow_prometheus(delay: Duration) -> String {
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("a loopback port");
        let address = format!("http://{}", listener.local_addr().expect("its address"));
        tokio::spawn(async move {
            while let Ok((mut stream, _)) = listener.accept().await {
                tokio::spawn(async move {
                    let mut head = Vec::new();
                    let mut buffer = [0u8; 4096];
                    while !head.windows(4).any(|w| w == b"\r\n\r\n") {
                        match stream.read(&mut buffer).await {
                            Ok(0) | Err(_) => return,
                            Ok(n) => head.extend_from_slice(&buffer[..n]),
                        }
                    }
                    tokio::time::sleep(delay).await;
                    let body = r#"{"status":"success","data":{"resultType":"matrix","result":[{"metric":{},"values":[[1,"2"]]}]}}"#;
                    let answer = format!(
                        "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
                        body.len()
                    );
                    let _ = stream.write_all(answer.as_bytes()).await;
                });
            }
        });
        address
    }

    #[tokio::test]
    async fn a_slow_prometheus_is_read_within_the_budget_as_its_queries_go_at_once() {
        // 1.5 s an answer: a dozen queries one after another would take 18 s, past the 15 s a
        // sample may take, and void every sample; asked at once they take two answers' time.
        let address = slow_prometheus(Duration::from_millis(1500)).await;
        let spec: AnalysisSpec =
            serde_json::from_value(serde_json::json!({"prometheus": {"address": address}}))
                .expect("a spec");
        let prometheus = Prometheus {
            client: outbound::https_client(
                rustls::ClientConfig::builder()
                    .with_root_certificates(rustls::RootCertStore::empty())
                    .with_no_client_auth(),
            ),
            address: spec.prometheus.address.clone(),
            token: None,
        };
        let end = Timestamp::now();
        let window = AnalysisWindow {
            canary_ring: "canary".into(),
            start: end - k8s_openapi::jiff::SignedDuration::from_secs(60),
            end,
            step_seconds: 2,
            baseline: express_planner::analysis::Baseline::Ring("default".into()),
            adopted_at: end - k8s_openapi::jiff::SignedDuration::from_secs(600),
        };
        let read = tokio::time::timeout(READ_TIMEOUT, read_signals(&prometheus, &spec, &window))
            .await
            .expect("read within the budget")
            .expect("Prometheus answered");
        assert_eq!(read.len(), spec.signals().len());
        for series in &read {
            assert_eq!(series.canary, Ok(vec![2.0]), "{}", series.name);
            assert_eq!(series.baseline, Ok(vec![2.0]), "{}", series.name);
            assert_eq!(series.quiet, None, "both rings reconciled: {}", series.name);
        }
    }

    #[test]
    fn queries_are_encoded() {
        assert_eq!(encode("a b{c=\"d\"}[5s]"), "a%20b%7Bc%3D%22d%22%7D%5B5s%5D");
    }
}
