//! Client-side rate limiting of the operator's API requests (`--kube-qps`, `--kube-burst`).
//!
//! A ceiling against a runaway loop, not the throttle (DESIGN section 20): API Priority and
//! Fairness on the API server decides how much the operator gets, and a 429's `Retry-After`
//! is waited out by the retry layer below.
//!
//! One token bucket (`governor`'s GCRA) shared by every request the operator sends: each
//! request takes a token, `burst` tokens at most are saved up, and they come back at `qps` per
//! second. Watches are exempt (a watch is one long request, and cutting a watch off does not
//! spare the API server anything); the LIST that starts or restarts a watch is not.
//!
//! The limit sits *under* the retry of 429/503/504 answers, so a retried request takes a token
//! for every attempt, as client-go's does: a throttled API server is never answered with a
//! burst of retries.
//!
//! Under the limit, every request sent has [`ANSWER_WITHIN`] to be answered: a request lost on a
//! connection that died without a word (a load balancer's state dropped, an API server gone
//! while the packets still flow to it) fails and is retried, instead of wedging its reconcile.

use std::num::NonZeroU32;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use futures::future::BoxFuture;
use governor::{DefaultDirectRateLimiter, Quota, RateLimiter};
use http::Request;
use kube::client::{Body, ClientBuilder};
use tower::buffer::BufferLayer;
use tower::retry::RetryLayer;
use tower::timeout::TimeoutLayer;
use tower::{Layer, Service, ServiceExt as _};

use crate::metric_groups::RequestLabel;
use crate::metrics::Metrics;

/// How long a request, once past the limit, waits for its answer to begin. The API server ends
/// every request but a watch after 60 s (its `--request-timeout`), so one unanswered past that
/// was lost on the way; a watch answers at once and is then held to kube's own idle timeout.
pub const ANSWER_WITHIN: Duration = Duration::from_secs(70);

/// The operator's budget of API requests.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct ApiLimits {
    /// Requests per second, sustained.
    pub qps: f64,
    /// Requests that may be sent at once after a quiet spell.
    pub burst: u32,
}

impl ApiLimits {
    /// The chart's defaults (`kubeApi.qps`, `kubeApi.burst`): ten times controller-runtime's
    /// 20 and 30, which kept a fleet-wide upgrade waiting on the operator's own limiter while
    /// the API server had room (docs/benchmarks.md, "At the chart's defaults").
    pub const DEFAULT: ApiLimits = ApiLimits {
        qps: 200.0,
        burst: 400,
    };
}

impl Default for ApiLimits {
    fn default() -> Self {
        ApiLimits::DEFAULT
    }
}

#[derive(Debug, thiserror::Error, PartialEq)]
pub enum LimitsError {
    #[error("--kube-qps must be a positive number of requests per second, not {0}")]
    Qps(f64),
    #[error("--kube-burst must be at least 1")]
    Burst,
}

/// The bucket for `limits`: `burst` tokens, one back every `1 / qps` seconds.
pub fn quota(limits: ApiLimits) -> Result<Quota, LimitsError> {
    if !limits.qps.is_finite() || limits.qps <= 0.0 {
        return Err(LimitsError::Qps(limits.qps));
    }
    let burst = NonZeroU32::new(limits.burst).ok_or(LimitsError::Burst)?;
    // At least a microsecond: governor refuses a zero period, and no API server takes a
    // million requests a second from one client anyway.
    let period = Duration::from_secs_f64(1.0 / limits.qps).max(Duration::from_micros(1));
    let quota = Quota::with_period(period).ok_or(LimitsError::Qps(limits.qps))?;
    Ok(quota.allow_burst(burst))
}

/// Whether `request` is a watch (`?watch=true` or `?watch=1`), which the limit lets through.
fn is_watch<B>(request: &Request<B>) -> bool {
    request.uri().query().is_some_and(|query| {
        query
            .split('&')
            .any(|pair| matches!(pair, "watch=true" | "watch=1"))
    })
}

/// The User-Agent of every request the operator sends, so that API server audit logs, Priority
/// and Fairness rules and kubesim's counters can tell it from other clients (kube's client
/// sends none of its own).
pub fn user_agent(ring: &str) -> String {
    format!(
        "express-operator/{} (ring {ring})",
        env!("CARGO_PKG_VERSION")
    )
}

/// A kube client whose every request but watches waits for a token of `limits`; retries (when
/// `config` asks for them) go through the limit too. Throttled requests are counted in
/// `metrics`. Every request says it comes from [`user_agent`], unless `config` names another.
pub fn client(
    config: kube::Config,
    limits: ApiLimits,
    ring: &str,
    metrics: Arc<Metrics>,
) -> Result<kube::Client, ClientError> {
    client_answered_within(config, limits, ring, metrics, ANSWER_WITHIN)
}

/// [`client`], with another deadline than [`ANSWER_WITHIN`] for an answer to begin.
pub fn client_answered_within(
    mut config: kube::Config,
    limits: ApiLimits,
    ring: &str,
    metrics: Arc<Metrics>,
    answer_within: Duration,
) -> Result<kube::Client, ClientError> {
    if !config
        .headers
        .iter()
        .any(|(name, _)| name == http::header::USER_AGENT)
    {
        let agent =
            http::HeaderValue::from_str(&user_agent(ring)).map_err(ClientError::UserAgent)?;
        config.headers.push((http::header::USER_AGENT, agent));
    }
    let limiter = Arc::new(RateLimiter::direct(quota(limits)?));
    let retry = std::mem::replace(&mut config.default_retry, false);
    let builder = ClientBuilder::try_from(config)?
        // Innermost: the deadline starts when the request is sent, not while it waits its turn.
        .with_layer(&TimeoutLayer::new(answer_within))
        // The limit holds a request while it waits; the buffer makes the stack cloneable so
        // that the waiting happens outside it.
        .with_layer(&BufferLayer::new(1024))
        .with_layer(&ThrottleLayer { limiter, metrics });
    Ok(if retry {
        builder
            .with_layer(&RetryLayer::new(
                kube::client::retry::RetryPolicy::server_retry(),
            ))
            .build()
    } else {
        builder.build()
    })
}

#[derive(Debug, thiserror::Error)]
pub enum ClientError {
    #[error(transparent)]
    Limits(#[from] LimitsError),
    #[error(transparent)]
    Kube(#[from] kube::Error),
    #[error("the User-Agent is not a valid header value: {0}")]
    UserAgent(http::header::InvalidHeaderValue),
}

struct ThrottleLayer {
    limiter: Arc<DefaultDirectRateLimiter>,
    metrics: Arc<Metrics>,
}

impl<S> Layer<S> for ThrottleLayer {
    type Service = Throttle<S>;

    fn layer(&self, inner: S) -> Throttle<S> {
        Throttle {
            inner,
            limiter: self.limiter.clone(),
            metrics: self.metrics.clone(),
        }
    }
}

#[derive(Clone)]
pub struct Throttle<S> {
    inner: S,
    limiter: Arc<DefaultDirectRateLimiter>,
    metrics: Arc<Metrics>,
}

impl<S> Service<Request<Body>> for Throttle<S>
where
    S: Service<Request<Body>> + Clone + Send + 'static,
    S::Future: Send,
    S::Response: Send + ResponseCode,
    S::Error: Send,
{
    type Response = S::Response;
    type Error = S::Error;
    type Future = BoxFuture<'static, Result<S::Response, S::Error>>;

    // Always ready: readiness of the stack below is awaited after the token, so that a request
    // waiting for its token holds no slot there.
    fn poll_ready(&mut self, _cx: &mut Context<'_>) -> Poll<Result<(), S::Error>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, request: Request<Body>) -> Self::Future {
        let mut inner = self.inner.clone();
        let metrics = self.metrics.clone();
        let verb = verb_of(&request);
        let resource = resource_of(request.uri().path());
        if is_watch(&request) {
            return Box::pin(async move {
                let answered = inner.ready().await?.call(request).await;
                count(&metrics, verb, &resource, &answered);
                answered
            });
        }
        let limiter = self.limiter.clone();
        Box::pin(async move {
            if limiter.check().is_err() {
                metrics.api.throttled.inc();
                let waiting = Instant::now();
                limiter.until_ready().await;
                metrics
                    .api
                    .throttle_wait_seconds
                    .observe(waiting.elapsed().as_secs_f64());
            }
            sent_by_reconcile();
            let answered = inner.ready().await?.call(request).await;
            count(&metrics, verb, &resource, &answered);
            answered
        })
    }
}

tokio::task_local! {
    /// The requests the task's current reconcile has sent (see [`counting_requests`]).
    static SENT_BY_RECONCILE: std::cell::Cell<u64>;
}

/// Runs `work` (one reconcile) counting the API requests it sends through this client, watches
/// aside: a release's analysis divides them by the reconciles that drove a tenant, so that what
/// other work sends (lease renewals, watches, the releases' own reads) cannot dilute them. The
/// count is taken where the request is awaited, which is the reconcile's own task.
pub async fn counting_requests<F: std::future::Future>(work: F) -> (F::Output, u64) {
    SENT_BY_RECONCILE
        .scope(std::cell::Cell::new(0), async move {
            let output = work.await;
            (output, SENT_BY_RECONCILE.with(std::cell::Cell::get))
        })
        .await
}

/// One more request for the reconcile running in this task, if one is.
fn sent_by_reconcile() {
    let _ = SENT_BY_RECONCILE.try_with(|sent| sent.set(sent.get() + 1));
}

/// The verb a request is counted under, as the API server's own metrics name it: its method,
/// lowercased; `list` for a GET of a collection and `watch` for a watch, so that what a fault
/// costs in re-lists can be told from the reads of single objects.
fn verb_of<B>(request: &Request<B>) -> &'static str {
    if is_watch(request) {
        return "watch";
    }
    match *request.method() {
        http::Method::GET if names_a_collection(request.uri().path()) => "list",
        http::Method::GET => "get",
        http::Method::POST => "post",
        http::Method::PUT => "put",
        http::Method::PATCH => "patch",
        http::Method::DELETE => "delete",
        _ => "other",
    }
}

/// A path's segments after the group and version (`api/v1` or `apis/GROUP/VERSION`); empty for
/// a path that names no resource (discovery, `/version`).
fn after_version(path: &str) -> Vec<&str> {
    let mut segments = path.trim_matches('/').split('/');
    let after = match segments.next() {
        Some("api") => segments.nth(1),
        Some("apis") => segments.nth(2),
        _ => None,
    };
    after
        .into_iter()
        .chain(segments)
        .filter(|segment| !segment.is_empty())
        .collect()
}

/// Whether a path names a collection (`pods`, `namespaces/NS/pods`) rather than one object.
fn names_a_collection(path: &str) -> bool {
    matches!(
        after_version(path).as_slice(),
        [_resource] | ["namespaces", _, _resource]
    )
}

/// The resource a request's path names, as the API server's own metrics name it: the kind's
/// plural, `/` and the subresource if any (`pods`, `expressclusters/status`, `pods/eviction`);
/// `other` for a path that names none (discovery, `/version`). Never a name: the series stay
/// as few as the kinds the operator reads.
fn resource_of(path: &str) -> String {
    // `namespaces/NS/RESOURCE[/NAME[/SUB]]` is namespaced; one or two segments under
    // `namespaces` name the namespaces themselves.
    let (resource, subresource) = match after_version(path).as_slice() {
        ["namespaces", _namespace, resource, tail @ ..] => (*resource, tail.get(1).copied()),
        [resource, tail @ ..] => (*resource, tail.get(1).copied()),
        _ => return "other".to_owned(),
    };
    match subresource {
        Some(sub) => format!("{resource}/{sub}"),
        None => resource.to_owned(),
    }
}

/// Counts one request by verb, resource and the response's code.
fn count<R: ResponseCode, E>(
    metrics: &Metrics,
    verb: &str,
    resource: &str,
    answered: &Result<R, E>,
) {
    let code = answered.as_ref().ok().map(ResponseCode::code);
    if crate::api_trouble::is_infrastructure(code) {
        let now = k8s_openapi::jiff::Timestamp::now();
        let shown = code.map_or_else(|| "no answer".to_owned(), |code| code.to_string());
        metrics
            .api
            .trouble
            .record(now, code, format!("{verb} {resource}: {shown}"));
        metrics.api.trouble_last_seconds.set(now.as_second());
    }
    let code = code.map_or_else(|| "error".to_owned(), |code| code.to_string());
    metrics
        .api
        .requests
        .get_or_create(&RequestLabel {
            verb: verb.to_owned(),
            resource: resource.to_owned(),
            code,
        })
        .inc();
}

/// A response's status code, whatever its body.
pub trait ResponseCode {
    fn code(&self) -> u16;
}

impl<B> ResponseCode for http::Response<B> {
    fn code(&self) -> u16 {
        self.status().as_u16()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use governor::clock::FakeRelativeClock;

    type FakeBucket = RateLimiter<
        governor::state::NotKeyed,
        governor::state::InMemoryState,
        FakeRelativeClock,
        governor::middleware::NoOpMiddleware<
            <FakeRelativeClock as governor::clock::Clock>::Instant,
        >,
    >;

    fn bucket(limits: ApiLimits) -> (FakeBucket, FakeRelativeClock) {
        let clock = FakeRelativeClock::default();
        let limiter = RateLimiter::direct_with_clock(quota(limits).expect("valid"), clock.clone());
        (limiter, clock)
    }

    /// Tokens the bucket grants right now.
    fn granted(limiter: &FakeBucket) -> usize {
        std::iter::from_fn(|| limiter.check().ok())
            .take(10_000)
            .count()
    }

    #[test]
    fn a_full_bucket_grants_the_burst_then_one_token_per_period() {
        let (limiter, clock) = bucket(ApiLimits {
            qps: 20.0,
            burst: 30,
        });
        assert_eq!(granted(&limiter), 30, "the burst at once");
        clock.advance(Duration::from_millis(49));
        assert_eq!(granted(&limiter), 0, "not a whole token yet");
        clock.advance(Duration::from_millis(1));
        assert_eq!(granted(&limiter), 1, "one token every 50 ms");
        clock.advance(Duration::from_secs(1));
        assert_eq!(granted(&limiter), 20, "twenty a second");
        clock.advance(Duration::from_secs(60));
        assert_eq!(granted(&limiter), 30, "saved up to the burst, never more");
    }

    #[test]
    fn fractional_rates_work() {
        let (limiter, clock) = bucket(ApiLimits { qps: 0.5, burst: 1 });
        assert_eq!(granted(&limiter), 1);
        clock.advance(Duration::from_millis(1999));
        assert_eq!(granted(&limiter), 0);
        clock.advance(Duration::from_millis(1));
        assert_eq!(granted(&limiter), 1, "one every two seconds");
    }

    #[test]
    fn bad_limits_are_refused_with_the_flag_named() {
        for qps in [0.0, -1.0, f64::NAN, f64::INFINITY] {
            let error = quota(ApiLimits { qps, burst: 1 }).expect_err("refused");
            assert!(error.to_string().contains("--kube-qps"), "{error}");
        }
        assert_eq!(
            quota(ApiLimits { qps: 1.0, burst: 0 }).expect_err("refused"),
            LimitsError::Burst
        );
    }

    #[test]
    fn a_requests_resource_is_its_kind_and_subresource_never_its_name() {
        for (path, resource) in [
            ("/api/v1/namespaces/acme/pods", "pods"),
            ("/api/v1/namespaces/acme/pods/acme-fe1", "pods"),
            (
                "/api/v1/namespaces/acme/pods/acme-fe1/eviction",
                "pods/eviction",
            ),
            ("/api/v1/pods", "pods"),
            ("/api/v1/namespaces", "namespaces"),
            ("/api/v1/namespaces/acme", "namespaces"),
            ("/api/v1/nodes/kwok-node-1/status", "nodes/status"),
            (
                "/apis/express.dev/v1alpha1/namespaces/acme/expressclusters/t/status",
                "expressclusters/status",
            ),
            (
                "/apis/express.dev/v1alpha1/expressclusters",
                "expressclusters",
            ),
            (
                "/apis/coordination.k8s.io/v1/namespaces/express-system/leases/express-operator",
                "leases",
            ),
            (
                "/apis/apiextensions.k8s.io/v1/customresourcedefinitions/frontends.express.dev",
                "customresourcedefinitions",
            ),
            ("/apis/express.dev/v1alpha1", "other"),
            ("/api/v1", "other"),
            ("/version", "other"),
            ("/", "other"),
        ] {
            assert_eq!(resource_of(path), resource, "{path}");
        }
    }

    #[test]
    fn a_get_of_a_collection_counts_as_a_list() {
        let get = |uri: &str| Request::get(uri).body(()).expect("request");
        for (uri, verb) in [
            ("/api/v1/pods?labelSelector=express.dev%2Fcluster", "list"),
            ("/api/v1/namespaces/acme/pods?limit=500", "list"),
            ("/api/v1/namespaces", "list"),
            ("/apis/express.dev/v1alpha1/expressclusters", "list"),
            ("/api/v1/namespaces/acme", "get"),
            ("/api/v1/namespaces/acme/pods/shop-fe1", "get"),
            (
                "/apis/express.dev/v1alpha1/namespaces/acme/frontends/shop-fe1/status",
                "get",
            ),
            ("/apis/express.dev/v1alpha1", "get"),
            ("/version", "get"),
            (
                "/api/v1/namespaces/acme/pods?watch=true&resourceVersion=5",
                "watch",
            ),
        ] {
            assert_eq!(verb_of(&get(uri)), verb, "{uri}");
        }
        let patch = Request::patch("/api/v1/namespaces/acme/pods")
            .body(())
            .expect("request");
        assert_eq!(verb_of(&patch), "patch");
    }

    #[test]
    fn only_watches_are_exempt() {
        let request = |uri: &str| Request::get(uri).body(()).expect("request");
        assert!(is_watch(&request(
            "/api/v1/pods?watch=true&resourceVersion=1"
        )));
        assert!(is_watch(&request("/api/v1/pods?resourceVersion=1&watch=1")));
        assert!(!is_watch(&request(
            "/api/v1/pods?labelSelector=watch%3Dtrue"
        )));
        assert!(!is_watch(&request("/api/v1/pods?watch=false")));
        assert!(!is_watch(&request("/api/v1/namespaces/a/pods/watch")));
    }
}
