//! `run`'s flags as people type them, sorted into the [`Options`] the wiring takes.

use std::net::SocketAddr;

use express_planner::api_versions::ApiFlags;

use super::options::{Options, Tuning, WebhookOptions};
use crate::controller::DEFAULT_OPERATOR_NAMESPACE;
use crate::controller::api::webhook::rotation;
use crate::throttle::ApiLimits;

/// `run`'s flags.
#[derive(clap::Args, Debug)]
pub struct RunArgs {
    /// Manage only this namespace (repeatable); default every namespace.
    #[arg(long = "namespace", value_name = "NS")]
    pub namespaces: Vec<String>,
    /// Act only while holding the ring's Lease in the operator's namespace
    /// (`express-operator`, or `express-operator-RING` for a ring other than default).
    #[arg(long)]
    pub leader_elect: bool,
    /// Serve the tenants whose ExpressCluster's `express.dev/operator-ring` label names
    /// this ring (no label: `default`); tenants moved between rings are handed over.
    #[arg(long, default_value = express_api::rings::DEFAULT_RING, value_parser = ring_name)]
    pub ring: String,
    /// Serve /metrics, /healthz and /readyz here.
    #[arg(long, default_value = "127.0.0.1:8080")]
    pub metrics_addr: SocketAddr,
    /// Serve the conversion webhook here (HTTPS, /convert), keeping its certificate
    /// authority in the Secret express-operator-webhook and its certificate in the
    /// caBundle of the CRDs that convert through it.
    #[arg(long, value_name = "ADDR")]
    pub conversion_webhook_addr: Option<SocketAddr>,
    /// A name the webhook's serving certificate is for (repeatable; default the chart's
    /// Service, express-operator-webhook.NAMESPACE.svc).
    #[arg(
        long = "conversion-webhook-name",
        value_name = "NAME",
        requires = "conversion_webhook_addr"
    )]
    pub conversion_webhook_names: Vec<String>,
    /// Carry the CRDs that serve v1beta1 beside v1alpha1, converted by the webhook: a
    /// release of this build lists v1beta1 in the DC and serves it once the webhook's pods
    /// all know it; once every ring runs a build that knows it, storage moves to it, the
    /// stored objects are rewritten and storedVersions trimmed (docs/api.md).
    #[arg(long, requires = "conversion_webhook_addr")]
    pub serve_v1beta1: bool,
    /// With --serve-v1beta1: the URL the CRDs send conversions to (an operator run outside
    /// the cluster); default the chart's Service express-operator-webhook.
    #[arg(long, value_name = "URL", requires = "serve_v1beta1")]
    pub conversion_webhook_url: Option<String>,
    /// The operator's own namespace (its control ConfigMap and Lease); default
    /// $POD_NAMESPACE, else express-system.
    #[arg(long)]
    pub operator_namespace: Option<String>,
    /// Express clusters reconciled at once.
    #[arg(long, default_value_t = 8)]
    pub concurrency: usize,
    /// API requests per second, sustained, for every request but watches (retries
    /// included): a ceiling against a runaway loop; the API server's Priority and Fairness
    /// paces the operator below it. The chart's default.
    #[arg(long, default_value_t = ApiLimits::DEFAULT.qps)]
    pub kube_qps: f64,
    /// API requests that may be sent at once after a quiet spell.
    #[arg(long, default_value_t = ApiLimits::DEFAULT.burst)]
    pub kube_burst: u32,
    /// Publish the per-tenant metric families (`express_operator_nodes`, a series per
    /// tenant and node phase); `false` for a large fleet: the fleet-level families and
    /// the alerts do not need them.
    #[arg(long, default_value_t = true, action = clap::ArgAction::Set, value_name = "BOOL")]
    pub per_tenant_metrics: bool,
    /// Fill the watches by streaming lists (`sendInitialEvents`) where the API server
    /// answers a probe of them at start, instead of lists in pages; spares the server the
    /// LIST of every kind at a start or a relist.
    #[arg(long)]
    pub streaming_lists: bool,
    /// Doctor's keeping-up threshold as an OperatorRelease's judge applies it to both
    /// rings' samples: a tenant the ring's leader has not caught up with for longer than
    /// this is behind (as `kubectl express doctor --stale-after`).
    #[arg(long, default_value = "2m", value_parser = express_api::bounce::parse_duration, value_name = "DURATION")]
    pub stale_after: u64,
    /// Misbehave on purpose, keeping every tenant healthy (a release's analysis must catch
    /// it): chatty, erring, slow or leaky. Only in builds with the `dev` feature.
    #[cfg(feature = "dev")]
    #[arg(long, value_enum, value_name = "NAME")]
    pub fault: Option<crate::faults::Fault>,
    /// Behave as a build that knows only these API versions (comma separated): an older
    /// build beside this one, in a test of a version's release. Only in builds with the
    /// `dev` feature.
    #[cfg(feature = "dev")]
    #[arg(long, value_name = "VERSIONS", value_delimiter = ',')]
    pub known_api_versions: Vec<String>,
    /// Rotate the conversion webhook's certificate authority every 40 seconds instead of
    /// yearly (serving certificates every minute): a test of rotation while a release runs.
    /// Only in builds with the `dev` feature.
    #[cfg(feature = "dev")]
    #[arg(long, requires = "conversion_webhook_addr")]
    pub webhook_rotation_in_minutes: bool,
}

/// A `--ring` value: a name its Lease can be made of.
fn ring_name(value: &str) -> Result<String, String> {
    match express_api::rings::ring_name_problem(value) {
        None => Ok(value.to_owned()),
        Some(problem) => Err(format!("the ring name {problem}")),
    }
}

impl RunArgs {
    /// The flags sorted into what the wiring takes, with what the process's environment says
    /// (`env`: a variable's value): the operator's namespace from `POD_NAMESPACE` when not
    /// given (as the chart runs it), else the default; the instance's name from `POD_NAME`,
    /// else `HOSTNAME`.
    pub fn into_options(self, env: impl Fn(&str) -> Option<String>) -> Options {
        #[cfg(feature = "dev")]
        let (fault, known, rotation_in_minutes) = (
            self.fault,
            self.known_api_versions,
            self.webhook_rotation_in_minutes,
        );
        #[cfg(not(feature = "dev"))]
        let (fault, known, rotation_in_minutes) = (None, Vec::new(), false);
        let operator_namespace = self
            .operator_namespace
            .or_else(|| env("POD_NAMESPACE"))
            .unwrap_or_else(|| DEFAULT_OPERATOR_NAMESPACE.into());
        Options {
            namespaces: self.namespaces,
            leader_elect: self.leader_elect,
            ring: self.ring,
            metrics_addr: self.metrics_addr,
            per_tenant_metrics: self.per_tenant_metrics,
            api: ApiFlags {
                serve_v1beta1: self.serve_v1beta1,
                webhook_url: self.conversion_webhook_url,
                operator_namespace: operator_namespace.clone(),
                known,
            },
            webhook: WebhookOptions {
                addr: self.conversion_webhook_addr,
                names: self.conversion_webhook_names,
                rotation: if rotation_in_minutes {
                    rotation::Policy::minutes()
                } else {
                    rotation::Policy::default()
                },
            },
            operator_namespace,
            identity: env("POD_NAME")
                .or_else(|| env("HOSTNAME"))
                .unwrap_or_else(|| format!("express-operator-{}", std::process::id())),
            pod: env("POD_NAME"),
            tuning: Tuning {
                concurrency: self.concurrency,
                limits: ApiLimits {
                    qps: self.kube_qps,
                    burst: self.kube_burst,
                },
                fault,
                streaming_lists: self.streaming_lists,
                stale_after_seconds: self.stale_after,
            },
            compact_heap: None,
        }
    }
}
