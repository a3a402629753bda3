//! One step of one release: observe → the pure step → record the status → publish what it
//! tells → move the tenants it chose.

use std::collections::HashMap;

use express_api::keys::FIELD_MANAGER;
use express_api::release::{OperatorRelease, OperatorReleaseStatus};
use express_planner::release::{ReleaseSnapshot, ReleaseTenant, sample_due, step};
use k8s_openapi::jiff::Timestamp;
use kube::api::{Api, Patch, PatchParams};
use kube::{Resource, ResourceExt};
use tracing::{info, warn};

use super::events::{self, publish};
use super::{observe, relabel, vital_signs};
use crate::controller::context::Context;
use crate::controller::error::Error;

/// One step of one release: what it wrote and when to look again.
pub(super) async fn reconcile(
    ctx: &Context,
    release: &OperatorRelease,
) -> Result<(OperatorReleaseStatus, Option<Timestamp>), Error> {
    let name = release.name_any();
    let now = Timestamp::now();
    let spec = &release.spec;
    let status = release.status.clone().unwrap_or_default();
    let clusters = ctx.caches.clusters.in_namespace(None);
    let mut tenants: Vec<ReleaseTenant> = clusters
        .iter()
        .map(|c| observe::release_tenant(c))
        .collect();
    // What this operator moved counts as moved, though the cache has not shown it yet.
    ctx.moves.overlay(&clusters, &mut tenants);
    let to_leader = observe::to_ring_leader(ctx, release, &status, now).await;
    let health = if sample_due(spec, &status, now) {
        Some(observe::health(ctx, spec, now).await)
    } else {
        None
    };
    // The vital signs, when a sample is due and the wave has baked long enough to judge.
    let analysis = match (&spec.analysis, health.is_some()) {
        (Some(wanted), true) => {
            let from_drives = tenants
                .iter()
                .any(|t| t.driven_by.as_deref() == Some(spec.from_ring.as_str()));
            match express_planner::analysis::window(spec, &status, from_drives, now) {
                Some(window) => Some(vital_signs::read(ctx, wanted, &window).await),
                None => None,
            }
        }
        _ => None,
    };
    let decided = step(&ReleaseSnapshot {
        name: &name,
        uid: release.metadata.uid.as_deref(),
        generation: release.metadata.generation,
        spec,
        status: &status,
        requests: observe::requests(release),
        tenants: &tenants,
        to_leader,
        health,
        analysis,
        now,
    });

    // Record before moving anything: a successor resumes from here.
    if !crate::status::same_ignoring_time(&status, &decided.status) {
        record(ctx, &name, &decided.status).await?;
    }
    let reference = release.object_ref(&());
    for notice in &decided.notices {
        info!(release = %name, reason = notice.reason, message = %notice.message, "release");
        publish(ctx, Some(reference.clone()), events::release_notice(notice)).await;
    }
    // The resourceVersions the step read, indexed only when it moves someone: most passes
    // move nobody, and this runs on every change of any tenant.
    let versions: HashMap<(&str, &str), Option<String>> = if decided.moves.is_empty() {
        HashMap::new()
    } else {
        clusters
            .iter()
            .filter_map(|c| {
                let key = (
                    c.metadata.namespace.as_deref()?,
                    c.metadata.name.as_deref()?,
                );
                Some((key, c.resource_version()))
            })
            .collect()
    };
    let mut result = Ok(());
    for m in &decided.moves {
        let version = versions
            .get(&(m.namespace.as_str(), m.name.as_str()))
            .cloned()
            .flatten();
        if let Err(error) = relabel::move_tenant(ctx, &name, m, version, now).await {
            warn!(release = %name, %error, "cannot move a tenant; the next step tries again");
            result = Err(error);
        }
    }
    result.map(|()| (decided.status, decided.wake_at))
}

/// Writes a release's status as its step decided it, leaving out `apiVersions`: that field is the
/// version pass's (docs/decisions/how-does-the-api-travel-with-the-build.md), and an apply from a
/// cache behind that pass's write would put an older step back.
async fn record(ctx: &Context, name: &str, decided: &OperatorReleaseStatus) -> Result<(), Error> {
    let applied = OperatorReleaseStatus {
        api_versions: None,
        ..decided.clone()
    };
    Api::<OperatorRelease>::namespaced(ctx.client.clone(), &ctx.settings.operator_namespace)
        .patch_status(
            name,
            &PatchParams::apply(FIELD_MANAGER).force(),
            &Patch::Apply(&crate::status::patch("OperatorRelease", &applied)),
        )
        .await
        .map_err(|source| Error::RecordRelease {
            release: name.to_owned(),
            source,
        })?;
    Ok(())
}
