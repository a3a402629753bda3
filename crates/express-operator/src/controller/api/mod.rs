//! The API's lifecycle in a DC (DESIGN sections 15 and 18), as its table of contents: the
//! CRDs a release applies before its first move, and the installed CRDs checked against the
//! fields this build writes ([`crds`]); the versions' steps after that, served, storage moved,
//! stored objects migrated, `storedVersions` trimmed ([`versions`]); the conversion webhook
//! every version is read through ([`webhook`], served by the process beside the controller);
//! and every event they publish ([`events`]). What the build carries is decided once, from its
//! flags, by `express_planner::api_versions::carried_api`.
//!
//! Two passes run while this instance leads, each on its own timer, both started by the
//! controller's table of contents: [`keep_checking_crds`] and [`keep_stepping_versions`].

mod crds;
mod events;
mod versions;
pub mod webhook;

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

pub(crate) use crds::prepare;

use crate::controller::context::{Context, leadership_changed};

/// How often the installed CRDs are compared with this build's (a person or another build may
/// apply CRDs at any time), and the versions' next step looked for.
const EVERY: Duration = Duration::from_secs(30);

/// The CRDs' pass: while this instance leads, says when the installed CRDs lack fields this
/// build writes, and when they no longer do.
pub(crate) async fn keep_checking_crds(ctx: Arc<Context>) {
    while_leading(ctx, |ctx| async move { crds::report_behind(&ctx).await }).await;
}

/// The versions' pass: while this instance leads, says what this build knows on its ring's
/// Lease and takes the steps due on every CRD it carries at another version.
pub(crate) async fn keep_stepping_versions(ctx: Arc<Context>) {
    while_leading(ctx, |ctx| async move { versions::look_after(&ctx).await }).await;
}

/// Runs `pass` every [`EVERY`] while this instance leads, and at once when it starts leading.
async fn while_leading<F, Pass>(ctx: Arc<Context>, pass: Pass)
where
    Pass: Fn(Arc<Context>) -> F,
    F: Future<Output = ()>,
{
    let mut leader = ctx.leader.clone();
    let mut ticks = tokio::time::interval(EVERY);
    ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            _ = ticks.tick() => {}
            () = leadership_changed(&mut leader) => {}
        }
        if *leader.borrow_and_update() {
            pass(ctx.clone()).await;
        }
    }
}
