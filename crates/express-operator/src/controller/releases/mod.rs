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
//! Its rooms: [`vital_signs`], the judge's Prometheus client (a sample's signals, read for both
//! rings over the planner's window); [`events`], what a step tells and a move says on its tenant.

mod events;
mod vital_signs;

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use express_api::ExpressCluster;
use express_api::api_record::{ANNOTATION_API_RECORD, ApiRecord};
use express_api::keys::{FIELD_MANAGER, LABEL_OPERATOR_RING};
use express_api::release::{
    ANNOTATION_MOVED_AT, ANNOTATION_PROMOTE, ANNOTATION_PROMOTE_FULL, ANNOTATION_RELEASED_BY,
    ANNOTATION_ROLLBACK, OperatorRelease, OperatorReleaseSpec, OperatorReleaseStatus,
};
use express_api::rings::{self, DEFAULT_RING, Leadership};
use express_planner::release::{
    Direction, Leader, Move, ReleaseSnapshot, ReleaseTenant, Requests, sample_due, step,
};
use express_triage::rings::{RingHealth, ring_health};
use express_triage::{LeaseSeen, Ring};
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::jiff::Timestamp;
use kube::api::{Api, ListParams, Patch, PatchParams};
use kube::{Resource, ResourceExt};
use tokio::sync::Notify;
use tokio::time::Instant;
use tracing::{info, warn};

use crate::controller::api;
use crate::controller::context::Context;
use crate::controller::error::Error;
use crate::controller::memory::caches::Scoped;
use crate::controller::ring_lease;
use events::publish;

/// Runs the releases this instance judges until the controller stops.
pub(crate) async fn run(ctx: Arc<Context>, releases: Scoped<OperatorRelease>, wake: Arc<Notify>) {
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
            changed = leader.changed() => if changed.is_err() { return },
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
            let wake_at = match reconcile(&ctx, &release).await {
                Ok((status, wake_at)) => {
                    failures.remove(&name);
                    judged.push((name, status));
                    wake_at.map(instant_of)
                }
                Err(error) => {
                    warn!(release = %name, %error, "release step failed; retrying with backoff");
                    let count = failures.entry(name).or_insert(0);
                    *count += 1;
                    Some(Instant::now() + crate::runner::backoff(*count))
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

/// The requests a person left on the release's annotations.
fn requests(release: &OperatorRelease) -> Requests {
    let annotations = release.annotations();
    let id = |key: &str| annotations.get(key).filter(|v| !v.is_empty()).cloned();
    Requests {
        promote: id(ANNOTATION_PROMOTE),
        promote_full: annotations.get(ANNOTATION_PROMOTE_FULL).map(String::as_str) == Some("true"),
        rollback: id(ANNOTATION_ROLLBACK),
    }
}

/// A tenant as the release sees it, from its ExpressCluster.
fn release_tenant(cluster: &ExpressCluster) -> ReleaseTenant {
    let (labels, annotations) = (cluster.labels(), cluster.annotations());
    ReleaseTenant {
        namespace: cluster.namespace().unwrap_or_default(),
        name: cluster.name_any(),
        label: labels
            .get(LABEL_OPERATOR_RING)
            .filter(|ring| !ring.is_empty())
            .cloned(),
        released_by: annotations.get(ANNOTATION_RELEASED_BY).cloned(),
        moved_at: annotations
            .get(ANNOTATION_MOVED_AT)
            .and_then(|at| at.parse::<Timestamp>().ok()),
        driven_by: cluster
            .status
            .as_ref()
            .and_then(|s| s.operator.as_ref())
            .filter(|o| o.released.is_none() && !o.adopting && !o.ring.is_empty())
            .map(|o| o.ring.clone()),
    }
}

/// One step of one release: what it wrote and when to look again.
async fn reconcile(
    ctx: &Context,
    release: &OperatorRelease,
) -> Result<(OperatorReleaseStatus, Option<Timestamp>), Error> {
    let name = release.name_any();
    let now = Timestamp::now();
    let spec = &release.spec;
    let status = release.status.clone().unwrap_or_default();
    let clusters = ctx.caches.clusters.in_namespace(None);
    let mut tenants: Vec<ReleaseTenant> = clusters.iter().map(|c| release_tenant(c)).collect();
    // What this operator moved counts as moved, though the cache has not shown it yet.
    ctx.moves.overlay(&clusters, &mut tenants);
    // Only a release that has not started needs toRing's leader (a finished one never moves a
    // tenant forward again): no Lease read on every pass for the releases kept as history.
    let started = status.waves.first().is_some_and(|w| w.started_at.is_some());
    let to_leader = if started || status.phase().is_final() {
        None
    } else {
        let leases: Api<Lease> =
            Api::namespaced(ctx.client.clone(), &ctx.settings.operator_namespace);
        match leases.get_opt(&rings::lease_name(&spec.to_ring)).await {
            Ok(lease) => match rings::leadership(lease.as_ref(), now) {
                Leadership::Live { holder, .. } => Some(Leader {
                    holder,
                    version: lease
                        .as_ref()
                        .and_then(express_triage::observe::leader_version),
                    api: lease
                        .as_ref()
                        .and_then(|l| l.annotations().get(ANNOTATION_API_RECORD))
                        .and_then(|record| ApiRecord::from_annotation(record)),
                }),
                Leadership::Vacant => None,
            },
            Err(error) => {
                warn!(release = %name, %error, "cannot read toRing's Lease; waiting");
                None
            }
        }
    };
    let health = if sample_due(spec, &status, now) {
        Some(health(ctx, spec, now).await)
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
        requests: requests(release),
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
        if let Err(error) = move_tenant(ctx, &name, m, version, now).await {
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

/// What each ring's operator and tenants show now, through doctor's checks; `Err` names what
/// could not be read (no data is never ok).
async fn health(
    ctx: &Context,
    spec: &OperatorReleaseSpec,
    now: Timestamp,
) -> Result<(RingHealth, RingHealth), String> {
    let namespace = &ctx.settings.operator_namespace;
    let leases: Api<Lease> = Api::namespaced(ctx.client.clone(), namespace);
    let operator_pods: Vec<Pod> = Api::<Pod>::namespaced(ctx.client.clone(), namespace)
        .list(&ListParams::default().labels(express_triage::observe::OPERATOR_NAME_LABEL))
        .await
        .map_err(|e| format!("pods in {namespace}: {e}"))?
        .items
        .into_iter()
        .filter(|p| express_triage::observe::is_operator_pod(p.labels()))
        .collect();
    let mut rings = Vec::new();
    for ring in [&spec.from_ring, &spec.to_ring] {
        let name = rings::lease_name(ring);
        let lease = match leases.get_opt(&name).await {
            Ok(Some(lease)) => LeaseSeen::Seen(express_triage::observe::lease(&lease)),
            Ok(None) => LeaseSeen::Missing {
                namespace: namespace.clone(),
                name,
            },
            Err(e) => return Err(format!("Lease {namespace}/{name}: {e}")),
        };
        rings.push(Ring {
            name: ring.clone(),
            lease,
            deployment: None,
            pods: operator_pods
                .iter()
                .filter(|p| rings::ring_of(p.labels()) == ring.as_str())
                .map(express_triage::observe::operator_pod)
                .collect(),
        });
    }
    let objects = ctx.caches.objects(None);
    let fleet = express_triage::Fleet {
        now,
        rings,
        tenants: express_triage::observe::tenants(&objects, |_| None),
        warnings: Vec::new(),
        unreadable: Vec::new(),
        releases: Vec::new(),
        fleet_releases: Vec::new(),
    };
    let limits = &ctx.settings.release_thresholds;
    Ok((
        ring_health(&fleet, &spec.from_ring, limits),
        ring_health(&fleet, &spec.to_ring, limits),
    ))
}

/// Sets the tenant's ring label (none for the default ring) and marks it as this release's,
/// only if the ExpressCluster is still the version the step read: a person who relabelled it
/// meanwhile wins (409), and the next step reads anew.
async fn move_tenant(
    ctx: &Context,
    release: &str,
    m: &Move,
    resource_version: Option<String>,
    now: Timestamp,
) -> Result<(), Error> {
    let label = (m.to_ring != DEFAULT_RING).then(|| m.to_ring.clone());
    let patch = serde_json::json!({
        "metadata": {
            "resourceVersion": resource_version,
            "labels": {LABEL_OPERATOR_RING: label},
            "annotations": {
                ANNOTATION_RELEASED_BY: release,
                ANNOTATION_MOVED_AT: now.to_string(),
            },
        }
    });
    let api: Api<ExpressCluster> = Api::namespaced(ctx.client.clone(), &m.namespace);
    match api
        .patch(&m.name, &PatchParams::default(), &Patch::Merge(&patch))
        .await
    {
        Ok(cluster) => {
            ctx.moves.remember(&cluster, release, m, now);
            let back = m.direction == Direction::Back;
            info!(namespace = %m.namespace, cluster = %m.name, ring = %m.to_ring, back, release, "moved a tenant");
            publish(
                ctx,
                Some(cluster.object_ref(&())),
                events::tenant_moved(release, &m.to_ring, back),
            )
            .await;
            Ok(())
        }
        Err(kube::Error::Api(status)) if status.code == 409 || status.code == 404 => Ok(()),
        Err(source) => Err(Error::MoveTenant {
            tenant: format!("{}/{}", m.namespace, m.name),
            ring: m.to_ring.clone(),
            release: release.to_owned(),
            source,
        }),
    }
}
