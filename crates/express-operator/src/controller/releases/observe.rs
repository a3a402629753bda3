//! What a release step reads besides the release: the tenants as it sees them, a person's
//! requests on its annotations, `toRing`'s leader from its Lease, and each ring's health through
//! doctor's checks when a sample is due.

use express_api::ExpressCluster;
use express_api::api_record::{ANNOTATION_API_RECORD, ApiRecord};
use express_api::keys::LABEL_OPERATOR_RING;
use express_api::release::{
    ANNOTATION_MOVED_AT, ANNOTATION_PROMOTE, ANNOTATION_PROMOTE_FULL, ANNOTATION_RELEASED_BY,
    ANNOTATION_ROLLBACK, OperatorRelease, OperatorReleaseSpec, OperatorReleaseStatus,
};
use express_api::rings::{self, Leadership};
use express_planner::release::{Leader, ReleaseTenant, Requests};
use express_triage::rings::{RingHealth, ring_health};
use express_triage::{LeaseSeen, Ring};
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::jiff::Timestamp;
use kube::ResourceExt;
use kube::api::{Api, ListParams};
use tracing::warn;

use crate::controller::context::Context;

/// The requests a person left on the release's annotations.
pub(super) fn requests(release: &OperatorRelease) -> Requests {
    let annotations = release.annotations();
    let id = |key: &str| annotations.get(key).filter(|v| !v.is_empty()).cloned();
    Requests {
        promote: id(ANNOTATION_PROMOTE),
        promote_full: annotations.get(ANNOTATION_PROMOTE_FULL).map(String::as_str) == Some("true"),
        rollback: id(ANNOTATION_ROLLBACK),
    }
}

/// A tenant as the release sees it, from its ExpressCluster.
pub(super) fn release_tenant(cluster: &ExpressCluster) -> ReleaseTenant {
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

/// `toRing`'s leader as its Lease shows it (holder, build, what it did with its CRDs). Only a
/// release that has not started needs it (a finished one never moves a tenant forward again):
/// no Lease read on every pass for the releases kept as history.
pub(super) async fn to_ring_leader(
    ctx: &Context,
    release: &OperatorRelease,
    status: &OperatorReleaseStatus,
    now: Timestamp,
) -> Option<Leader> {
    let started = status.waves.first().is_some_and(|w| w.started_at.is_some());
    if started || status.phase().is_final() {
        return None;
    }
    let leases: Api<Lease> = Api::namespaced(ctx.client.clone(), &ctx.settings.operator_namespace);
    match leases
        .get_opt(&rings::lease_name(&release.spec.to_ring))
        .await
    {
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
            warn!(release = %release.name_any(), %error, "cannot read toRing's Lease; waiting");
            None
        }
    }
}

/// What each ring's operator and tenants show now, through doctor's checks; `Err` says why
/// there is no sample (no data is never ok): what could not be read, or the control plane's
/// recent trouble, which voids what the rings show (DESIGN section 19).
pub(super) async fn health(
    ctx: &Context,
    spec: &OperatorReleaseSpec,
    now: Timestamp,
) -> Result<(RingHealth, RingHealth), String> {
    if let Some(trouble) = ctx.metrics.api.trouble.recent(now) {
        return Err(trouble.to_string());
    }
    let namespace = &ctx.settings.operator_namespace;
    let leases: Api<Lease> = Api::namespaced(ctx.client.clone(), namespace);
    let operator_pods: Vec<Pod> = Api::<Pod>::namespaced(ctx.client.clone(), namespace)
        .list(&ListParams::default().labels(express_triage::observe::OPERATOR_NAME_LABEL))
        .await
        .map_err(|e| format!("could not read pods in {namespace}: {e}"))?
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
            Err(e) => return Err(format!("could not read Lease {namespace}/{name}: {e}")),
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
        // Each ring is judged on its own; the layer under both is no ring's fault.
        control_plane: express_triage::ControlPlane::NotAsked,
    };
    let limits = &ctx.settings.release_thresholds;
    Ok((
        ring_health(&fleet, &spec.from_ring, limits),
        ring_health(&fleet, &spec.to_ring, limits),
    ))
}
