//! What one reconcile works from ([`Env`]: the cluster observed, its plan, the clock) and the
//! statuses it wrote so far ([`Written`]), shared by the steps that record, act and report.

use std::collections::HashMap;

use express_api::{ClusterKey, ExpressCluster, ExpressClusterStatus, NodeStatus};
use express_planner::{ClusterSnapshot, NodeIndex, Plan};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;

use super::observe::Observed;
use crate::controller::context::Context;

/// Everything one reconcile works from.
pub(crate) struct Env<'a> {
    pub(crate) ctx: &'a Context,
    pub(crate) key: &'a ClusterKey,
    pub(crate) snapshot: &'a ClusterSnapshot,
    pub(crate) plan: &'a Plan,
    pub(crate) observed: &'a Observed,
    pub(crate) governing: Option<&'a ExpressCluster>,
    pub(crate) now: &'a Time,
}

impl<'a> Env<'a> {
    /// The same reconcile, reporting the cluster as `snapshot` shows it (the observed one as
    /// this reconcile's actions leave it); the plan stays the one made from the observation.
    pub(crate) fn reporting(&self, snapshot: &'a ClusterSnapshot) -> Env<'a> {
        Env {
            ctx: self.ctx,
            key: self.key,
            snapshot,
            plan: self.plan,
            observed: self.observed,
            governing: self.governing,
            now: self.now,
        }
    }
}

/// Statuses written during one reconcile, so that the report does not write them again.
#[derive(Default)]
pub(crate) struct Written {
    pub(crate) nodes: HashMap<NodeIndex, NodeStatus>,
    pub(crate) cluster: Option<ExpressClusterStatus>,
    /// The earliest moment a status kept back (a replacement pod's quiet start) is due.
    pub(crate) kept_back_until_ms: Option<i64>,
}
