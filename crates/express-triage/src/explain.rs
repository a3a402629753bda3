//! Whether a rollout explains a tenant's trouble, and how far behind the operator is on it: the
//! one rule doctor, the dashboard's banner and the release judge apply (DESIGN section 12: a
//! recovery is never a deployment that explains trouble).

use k8s_openapi::jiff::Timestamp;

use crate::{NodeDownReport, Tenant, Thresholds, age};

pub(crate) fn seconds_between(later: Timestamp, earlier: Timestamp) -> i64 {
    later.as_second() - earlier.as_second()
}

/// Whether a rollout explains `tenant`'s trouble at `now` (false for a tenant with none).
pub fn explained_by_rollout(now: Timestamp, tenant: &Tenant, limits: &Thresholds) -> bool {
    assess(now, tenant, limits).explained
}

/// One tenant assessed: whether a rollout explains its trouble, and how far behind the operator
/// is on it (with why).
pub(crate) struct Assessed<'a> {
    pub tenant: &'a Tenant,
    pub explained: bool,
    pub behind: Option<(i64, String)>,
    pub nodes_down: Vec<NodeDownReport>,
}

pub(crate) fn assess<'a>(now: Timestamp, tenant: &'a Tenant, limits: &Thresholds) -> Assessed<'a> {
    // A rollout explains trouble when its latest delivery to a node followed a change of the
    // desired state, and a failure came while that change could still fail (within its
    // progress deadline). A node down that no delivery moves (a lost pod, recovered or not)
    // is never explained, whatever the desired state did lately: a recovery is no deployment.
    // Older builds replaced a lost pod as a provision and failed its record when the pod
    // failed: the times tell those apart.
    let carries_a_change = |r: &crate::Rollout| {
        let change_started = tenant.last_node_change.or(r.started);
        let follows_desired = match (change_started, tenant.desired_changed) {
            (Some(started), Some(changed)) => {
                seconds_between(started, changed) <= limits.recent_rollout_seconds
            }
            _ => true,
        };
        let failed_during_change = match (tenant.failed_at, change_started) {
            (Some(failed), Some(started)) if r.halted() => {
                seconds_between(failed, started)
                    <= tenant.progress_deadline_seconds + limits.recent_rollout_seconds
            }
            _ => true,
        };
        follows_desired && failed_during_change
    };
    let window = tenant.progress_deadline_seconds + limits.recent_rollout_seconds;
    let nodes_down: Vec<NodeDownReport> = tenant
        .nodes_down
        .iter()
        .map(|n| {
            let for_seconds = n.since.map(|since| seconds_between(now, since).max(0));
            NodeDownReport {
                node: n.node.clone(),
                work: n.work,
                for_seconds,
                stuck: n.unexplained(now, window)
                    && for_seconds.is_some_and(|s| s > limits.stuck_recovery_seconds),
            }
        })
        .collect();
    let explained = !tenant.symptoms.is_empty()
        && !tenant.nodes_down.iter().any(|n| n.unexplained(now, window))
        && tenant.rollout.as_ref().is_some_and(|r| {
            carries_a_change(r)
                && (r.active()
                    || r.halted()
                    || r.finished
                        .is_some_and(|f| seconds_between(now, f) <= limits.recent_rollout_seconds))
        });
    let mut behind: Option<(i64, String)> = None;
    if tenant.observed_generation < Some(tenant.generation) {
        let since = tenant.spec_changed.map_or(0, |t| seconds_between(now, t));
        if since > limits.stale_after_seconds {
            behind = Some((
                since,
                format!(
                    "generation {} not observed (observed {}) for {}",
                    tenant.generation,
                    tenant
                        .observed_generation
                        .map_or_else(|| "none".into(), |g| g.to_string()),
                    age(since)
                ),
            ));
        }
    }
    if let Some(pods) = tenant.pods_changed
        && tenant.status_changed.is_none_or(|s| s < pods)
    {
        let since = seconds_between(now, pods);
        if since > limits.stale_after_seconds && behind.as_ref().is_none_or(|(b, _)| *b < since) {
            behind = Some((
                since,
                format!(
                    "pods changed {} ago, status last written {}",
                    age(since),
                    tenant.status_changed.map_or_else(
                        || "never".into(),
                        |s| format!("{} ago", age(seconds_between(now, s)))
                    )
                ),
            ));
        }
    }
    Assessed {
        tenant,
        explained,
        behind,
        nodes_down,
    }
}
