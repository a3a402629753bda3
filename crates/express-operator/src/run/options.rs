//! What the wiring of `run` takes: the flags sorted by what each part of the process needs.

use std::net::SocketAddr;

use express_planner::api_versions::ApiFlags;

use crate::controller::HeapCompactor;
use crate::controller::api::webhook::rotation;
use crate::throttle::ApiLimits;

/// Everything `run` starts from.
#[derive(Debug)]
pub struct Options {
    /// Namespaces to manage; empty: every namespace.
    pub namespaces: Vec<String>,
    /// Act only while holding the ring's Lease.
    pub leader_elect: bool,
    /// The operator ring this instance serves.
    pub ring: String,
    /// Where `/metrics`, `/healthz` and `/readyz` are served.
    pub metrics_addr: SocketAddr,
    /// Publish the per-tenant metric families.
    pub per_tenant_metrics: bool,
    /// What decides the API this build carries.
    pub api: ApiFlags,
    /// Where the conversion webhook is served, if it is.
    pub webhook: WebhookOptions,
    /// The operator's own namespace (its control ConfigMap, Lease, webhook Secret).
    pub operator_namespace: String,
    /// This instance's name in events and on the Lease.
    pub identity: String,
    /// The pod this instance runs in, if it runs in one (the webhook labels it).
    pub pod: Option<String>,
    /// How hard it works.
    pub tuning: Tuning,
    /// The allocator's means to report its heap and give memory back (jemalloc's, in the
    /// binary); none: the system allocator, without either.
    pub compact_heap: Option<HeapCompactor>,
}

/// Where the conversion webhook is served, if it is, and the names its certificate is for.
#[derive(Debug)]
pub struct WebhookOptions {
    pub addr: Option<SocketAddr>,
    /// Empty: the chart's Service's names in the operator's namespace.
    pub names: Vec<String>,
    /// When its certificates are made, rotated and retired.
    pub rotation: rotation::Policy,
}

/// How hard the operator works: reconciles at once, its API budget, a fault on purpose.
#[derive(Debug)]
pub struct Tuning {
    pub concurrency: usize,
    pub limits: ApiLimits,
    pub fault: Option<crate::faults::Fault>,
    pub streaming_lists: bool,
    pub stale_after_seconds: u64,
}
