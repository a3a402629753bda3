//! A tenant's reconcile: one reconcile of one Express cluster, as its table of contents: gate
//! (leader, namespace, ownership: [`handover`]) → [`observe`] → plan (the pure planner) →
//! [`record`] → [`act`] → [`report`], with what one reconcile works from in [`env`] and every
//! event it publishes worded in [`events`].

mod act;
mod env;
mod events;
mod handover;
mod observe;
mod record;
mod report;

use express_api::ClusterKey;
use express_planner::{NodeIndex, plan};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use tracing::debug;

use crate::controller::context::Context;
use crate::controller::error::Error;
use act::act;
use env::{Env, Written};
use record::record;
use report::report;

use crate::runner::Next;

/// A reconcile's result, and whether it got past the gates (leader, namespace, ownership, the
/// tenant still there) to drive its tenant: the release's analysis weighs only those.
pub struct Reconciled {
    pub drove: bool,
    pub result: Result<Next, Error>,
}

pub async fn reconcile(ctx: &Context, key: &ClusterKey) -> Reconciled {
    match gates(ctx, key).await {
        Ok(Gates::Pass(observed)) => Reconciled {
            drove: true,
            result: drive(ctx, key, &observed).await,
        },
        Ok(Gates::Stop(next)) => Reconciled {
            drove: false,
            result: Ok(next),
        },
        Err(error) => Reconciled {
            drove: false,
            result: Err(error),
        },
    }
}

enum Gates {
    Pass(Box<observe::Observed>),
    Stop(Next),
}

async fn gates(ctx: &Context, key: &ClusterKey) -> Result<Gates, Error> {
    // Whatever stops a reconcile here also stops this instance reporting the tenant's nodes.
    let forget = || ctx.metrics.forget_tenant(&key.namespace, &key.cluster);
    if !*ctx.leader.borrow() {
        debug!("not the leader; observing only");
        forget();
        return Ok(Gates::Stop(Next::AwaitChange));
    }
    if !ctx.settings.namespaces.is_empty() && !ctx.settings.namespaces.contains(&key.namespace) {
        return Ok(Gates::Stop(Next::AwaitChange));
    }
    // Ownership first, every time: a requeue can fire after the tenant moved to another ring.
    if let handover::Gate::Stop(next) = handover::gate(ctx, key).await? {
        forget();
        return Ok(Gates::Stop(next));
    }
    let Some(observed) = observe::observe(ctx, key) else {
        forget();
        return Ok(Gates::Stop(Next::AwaitChange));
    };
    Ok(Gates::Pass(Box::new(observed)))
}

async fn drive(
    ctx: &Context,
    key: &ClusterKey,
    observed: &observe::Observed,
) -> Result<Next, Error> {
    let snapshot = &observed.snapshot;

    // Plan.
    let now = Time(k8s_openapi::jiff::Timestamp::now());
    let plan = plan(snapshot, now.0.as_millisecond());
    debug!(
        actions = plan.actions.len(),
        in_flight = plan.in_flight,
        "planned"
    );
    let env = Env {
        ctx,
        key,
        snapshot,
        plan: &plan,
        observed,
        governing: observed.governing(),
        now: &now,
    };

    // Record what must be durable before any pod is touched, then act. Statuses are written
    // as the deletions leave the pods (terminating, not serving): the record is written
    // expecting them, the report knowing which happened. A deletion's watch event then finds
    // nothing left to write, and a node's change costs one status write fewer, the
    // ExpressCluster's one fewer too (its Ready count no longer moves in a write of its own).
    let mut written = Written::default();
    // Copies of the snapshot only when a pod is retired: most reconciles delete nothing.
    let retiring =
        |nodes: Vec<NodeIndex>| (!nodes.is_empty()).then(|| snapshot.with_pods_terminating(nodes));
    let expected = retiring(
        plan.actions
            .iter()
            .filter(|a| a.operation.retires_pod())
            .map(|a| a.node)
            .collect(),
    );
    let record_env = env.reporting(expected.as_ref().unwrap_or(snapshot));
    let (retired, act_result) = match record(&record_env, &mut written).await {
        Ok(()) => {
            let acted = act(&env).await;
            (acted.retired, acted.result)
        }
        Err(err) => (Vec::new(), Err(err)),
    };

    // Report, even when an action failed: status must say what is going on.
    let after = retiring(retired);
    let report_result = report(
        &env.reporting(after.as_ref().unwrap_or(snapshot)),
        &mut written,
    )
    .await;
    act_result?;
    report_result?;
    // A progress deadline passes, a settle window ends, a disagreement turns stalled, a
    // status kept back comes due: none of these comes with an event, so look again just
    // after it.
    let wake_at = [plan.wake_at_ms(), written.kept_back_until_ms]
        .into_iter()
        .flatten()
        .min();
    Ok(match wake_at {
        Some(at) => Next::RequeueAfter(std::time::Duration::from_millis(
            u64::try_from(at.saturating_sub(now.0.as_millisecond()))
                .unwrap_or(0)
                .max(1),
        )),
        None => Next::AwaitChange,
    })
}
