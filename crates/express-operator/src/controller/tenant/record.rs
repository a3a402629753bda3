//! Record: what must be durable before any pod is touched (change records, failures, handled
//! requests), so that an operator killed at any instant resumes without changing a node twice.

use express_api::BouncePhase;
use express_planner::{BouncePlan, NodeIndex};
use tracing::{info, warn};

use super::env::{Env, Written};
use super::events;
use crate::controller::error::Error;

use crate::metrics::ResultLabel;

use crate::status::same_ignoring_time;

/// Writes, before any pod operation, the statuses that make the operation safe to resume and
/// act on once: the change record of every node about to change, failures found (the
/// revision becomes known-invalid), a retry clearing known-invalid revisions, and the
/// ExpressCluster's record of abort and retry requests.
pub(crate) async fn record(env: &Env<'_>, written: &mut Written) -> Result<(), Error> {
    let plan = env.plan;
    let rollout = &plan.rollout;
    for index in env.snapshot.indices() {
        let starts = plan.action_on(index).is_some_and(|a| a.record.is_some());
        let fails = rollout.failure_of(index).is_some();
        // A bounce's phase is recorded before its step is taken: the uid of the pod it
        // deletes, then that the old pod is gone, so that a restarted operator resumes it.
        let bounce = plan
            .node(index)
            .bounce
            .as_ref()
            .filter(|b| b.is_transition());
        let (previous, status) = env.node_status(index, written);
        let clears = rollout.retry.is_some()
            && previous
                .as_ref()
                .is_some_and(|p| !p.invalid_revisions.is_empty());
        if !(starts || fails || clears || bounce.is_some()) {
            continue;
        }
        let name = env.snapshot.node(index).name.clone();
        if previous
            .as_ref()
            .is_none_or(|p| !same_ignoring_time(p, &status))
        {
            env.write_node_status(index, &status)
                .await
                .map_err(|source| Error::Record {
                    what: if fails {
                        "a failed change"
                    } else if starts || clears {
                        "the change about to start"
                    } else {
                        "the bounce's next step"
                    }
                    .into(),
                    object: name.clone(),
                    source,
                })?;
            written.nodes.insert(index, status);
        }
        if let Some(bounce) = bounce {
            tell_bounce(env, index, bounce).await;
        }
    }
    let cluster_news =
        rollout.abort_request.is_some() || rollout.retry.is_some() || !rollout.failures.is_empty();
    if cluster_news && let Some((previous, status)) = env.cluster_status(written) {
        if previous
            .as_ref()
            .is_none_or(|p| !same_ignoring_time(p, &status))
        {
            env.write_cluster_status(&status).await?;
        }
        written.cluster = Some(status);
    }

    // Tell what was recorded.
    let rolling_back = rollout.halt.as_ref().is_some_and(|h| h.rollback);
    for failure in &rollout.failures {
        env.ctx.metrics.work.rollout_failures.inc();
        warn!(node = %failure.name, revision = %failure.revision, reason = %failure.reason, "rollout failed");
        env.publish_on_node(failure.node, events::rollout_failed(failure, rolling_back))
            .await;
        env.publish_on_cluster(events::rollout_failed(failure, rolling_back))
            .await;
    }
    if let Some((id, outcome)) = &rollout.abort_request {
        let rollback = rollout.abort.as_ref().is_some_and(|a| a.rollback);
        let notice = events::abort_request(id, outcome, rollback);
        info!(request = %id, "{}", notice.note);
        env.publish_on_cluster(notice).await;
    }
    if let Some(id) = &rollout.retry {
        let notice = events::retry_request(id);
        info!(request = %id, "{}", notice.note);
        env.publish_on_cluster(notice).await;
    }
    Ok(())
}

/// Events (and the metric, once it ends) for a bounce whose phase was just recorded.
async fn tell_bounce(env: &Env<'_>, index: NodeIndex, bounce: &BouncePlan) {
    let node = &env.snapshot.node(index).name;
    info!(node = %node, request = %bounce.request_id, phase = %bounce.phase, "bounce: {}", bounce.message);
    if bounce.phase.is_final() {
        let result = match bounce.phase {
            BouncePhase::Succeeded => "succeeded",
            BouncePhase::Failed => "failed",
            _ => "refused",
        };
        env.ctx
            .metrics
            .work
            .bounces
            .get_or_create(&ResultLabel {
                result: result.into(),
            })
            .inc();
    }
    for notice in events::bounce_transition(node, bounce) {
        env.publish_on_node(index, notice).await;
    }
}
