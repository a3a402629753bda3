//! OperatorReleases (DESIGN section 12): the leader of a release's `fromRing` steps it through
//! the pure [`express_planner::release::step`], as every tenant reconcile does: observe (the
//! caches' ExpressClusters, `toRing`'s Lease, and each ring's health through doctor's checks
//! when a sample is due) → step → record the status → move tenants → publish events. Moving is
//! the rings' hand-over: a release sets the tenant's ring label (under the resourceVersion it
//! read, so a person's relabel in between wins) and marks it as its own; the two rings' operators
//! release and adopt.
//!
//! Restart-safe because the status is written before any move and a step derives everything
//! else from the tenants' labels: a successor finds the moves made or not, and makes the rest.
//! Watch-driven: a release steps again when a release or an ExpressCluster changes, or when the
//! step asked to (a sample due, a bake ending); a failing release backs off exponentially.
//!
//! This file is the table of contents: the loop over the releases this instance judges. Its
//! rooms: [`step`], one step of one release; [`observe`], what a step reads besides the release;
//! [`relabel`], a tenant moved to another ring by its label; [`vital_signs`], the judge's Prometheus client (a sample's signals,
//! read for both rings over the planner's window); [`events`], what a step tells and a move says
//! on its tenant.

mod events;
mod observe;
mod relabel;
mod step;
mod vital_signs;

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use express_api::OperatorRelease;
use k8s_openapi::jiff::Timestamp;
use kube::ResourceExt;
use tokio::sync::Notify;
use tokio::time::Instant;
use tracing::warn;

use crate::controller::api;
use crate::controller::context::{Context, leadership_changed};
use crate::controller::memory::caches::Scoped;
use crate::controller::ring_lease;

/// Runs the releases this instance judges until the controller stops.
pub(crate) async fn run(
    ctx: Arc<Context>,
    releases: Arc<Scoped<OperatorRelease>>,
    wake: Arc<Notify>,
) {
    releases.wait_until_ready().await;
    let mut leader = ctx.leader.clone();
    let mut failures: HashMap<String, u32> = HashMap::new();
    let mut next: Option<Instant> = Some(Instant::now());
    loop {
        let sleep = async {
            match next {
                Some(at) => tokio::time::sleep_until(at).await,
                None => std::future::pending().await,
            }
        };
        tokio::select! {
            _ = wake.notified() => {}
            _ = sleep => {}
            () = leadership_changed(&mut leader) => {}
        }
        // A burst of tenant events (a wave adopted) is one pass.
        tokio::time::sleep(Duration::from_millis(100)).await;
        next = None;
        let leading = *leader.borrow_and_update();
        let mut judged = Vec::new();
        for release in releases.in_namespace(Some(&ctx.settings.operator_namespace)) {
            if leading && release.spec.to_ring == ctx.settings.ring {
                // This build's CRDs, checked and applied before the release's first move.
                let recheck_at = api::prepare(&ctx, &release).await.map(instant_of);
                next = [next, recheck_at].into_iter().flatten().min();
            }
            if !leading || release.spec.from_ring != ctx.settings.ring {
                continue;
            }
            let name = release.name_any();
            let wake_at = match step::reconcile(&ctx, &release).await {
                Ok((status, wake_at)) => {
                    failures.remove(&name);
                    judged.push((name, status));
                    wake_at.map(instant_of)
                }
                Err(error) => {
                    warn!(release = %name, %error, "release step failed; retrying with backoff");
                    let count = failures.entry(name).or_insert(0);
                    *count += 1;
                    Some(Instant::now() + error.failure().retry_after(*count))
                }
            };
            next = [next, wake_at].into_iter().flatten().min();
        }
        ctx.metrics.release.set(&judged);
    }
}

/// The clock instant of a timestamp (now, when it is past).
fn instant_of(at: Timestamp) -> Instant {
    let wait = at.as_millisecond() - Timestamp::now().as_millisecond();
    Instant::now() + Duration::from_millis(u64::try_from(wait).unwrap_or(0))
}

/// The leader writes its identity and build on its Lease, so that a release can tell which
/// build leads a ring before moving anything to it.
pub(crate) async fn announce_build(ctx: &Context) {
    let Some(lease) = ring_lease::read(ctx).await else {
        return;
    };
    let annotations = lease.annotations();
    let announced = annotations.get(express_api::release::ANNOTATION_LEADER_IDENTITY)
        == Some(&ctx.settings.identity)
        && annotations.get(express_api::release::ANNOTATION_LEADER_VERSION)
            == Some(&ctx.settings.version);
    if !announced {
        ring_lease::annotate(
            ctx,
            &[
                (
                    express_api::release::ANNOTATION_LEADER_IDENTITY,
                    Some(&ctx.settings.identity),
                ),
                (
                    express_api::release::ANNOTATION_LEADER_VERSION,
                    Some(&ctx.settings.version),
                ),
            ],
        )
        .await;
    }
}
