//! Reading one DC for a release across DCs (DESIGN section 14): its copy of the plan and its own
//! `OperatorRelease` of the plan (its doctor's verdict is `read::triage`'s). What the copies say
//! together: the status written last and the newest request of each kind.

use std::collections::BTreeMap;

use express_api::fleet_release::{
    ANNOTATION_ABORT, ANNOTATION_ABORT_ROLLBACK, ANNOTATION_APPROVE, ANNOTATION_PAUSE,
    ANNOTATION_PAUSED_BY, ANNOTATION_RESUME, FleetRelease, FleetReleaseStatus, LABEL_FLEET_RELEASE,
    Request,
};
use express_api::release::OperatorRelease;
use express_planner::fleet_release::{ReleaseSeen, Requests};
use kube::api::{Api, ListParams};
use kube::{Client, ResourceExt};
use list_pages::ListPaged;

use crate::read::unread::Unread;

/// The plan's copy in a DC (None: the DC has none).
pub async fn copy(
    client: &Client,
    namespace: &str,
    name: &str,
) -> Result<Option<FleetRelease>, Unread> {
    Api::<FleetRelease>::namespaced(client.clone(), namespace)
        .get_opt(name)
        .await
        .map_err(|e| not_installed(&e, namespace))
}

/// Every plan of a DC's operator namespace, oldest first.
pub async fn copies(client: &Client, namespace: &str) -> Result<Vec<FleetRelease>, Unread> {
    let mut plans = Api::<FleetRelease>::namespaced(client.clone(), namespace)
        .list_paged(&ListParams::default())
        .await
        .map_err(|e| not_installed(&e, namespace))?
        .items;
    plans.sort_by_key(|p| (p.creation_timestamp().map(|t| t.0), p.name_any()));
    Ok(plans)
}

fn not_installed(error: &kube::Error, namespace: &str) -> Unread {
    Unread::of(error, "FleetRelease", namespace)
}

/// The DC's OperatorRelease of the plan (named as the plan), as the step reads it.
pub async fn release(
    client: &Client,
    namespace: &str,
    name: &str,
) -> Result<Option<ReleaseSeen>, String> {
    let found = Api::<OperatorRelease>::namespaced(client.clone(), namespace)
        .get_opt(name)
        .await
        .map_err(|e| format!("cannot read OperatorRelease {name}: {e}"))?;
    Ok(found.as_ref().map(release_seen))
}

pub fn release_seen(release: &OperatorRelease) -> ReleaseSeen {
    let status = release.status.clone().unwrap_or_default();
    ReleaseSeen {
        phase: status.phase(),
        wave: status.wave,
        moved: status.moved_tenants,
        finished_at: (status.phase() == express_api::ReleasePhase::Succeeded)
            .then(|| status.waves.last().and_then(|w| w.finished_at.as_ref()))
            .flatten()
            .map(|t| t.0),
        paused: release.spec.paused,
        paused_by_plan: release.annotations().get(ANNOTATION_PAUSED_BY)
            == release.labels().get(LABEL_FLEET_RELEASE)
            && release.annotations().contains_key(ANNOTATION_PAUSED_BY),
        rollback_asked: release
            .annotations()
            .contains_key(express_api::release::ANNOTATION_ROLLBACK),
    }
}

/// What the copies say together: the status written last, and the newest request of each kind
/// (an abort on any copy counts; its rollback flag is the one beside the newest abort).
pub fn merged(copies: &[&FleetRelease]) -> (FleetReleaseStatus, Requests) {
    let status = copies
        .iter()
        .filter_map(|c| c.status.as_ref())
        .max_by_key(|s| s.updated_at.as_ref().map(|t| t.0))
        .cloned()
        .unwrap_or_default();
    let newest = |key: &str| -> Option<(Request, &BTreeMap<String, String>)> {
        copies
            .iter()
            .filter_map(|c| {
                let request = Request::parse(c.annotations().get(key)?)?;
                Some((request, c.annotations()))
            })
            .max_by_key(|(r, _)| r.at)
    };
    let abort = newest(ANNOTATION_ABORT);
    let requests = Requests {
        pause: newest(ANNOTATION_PAUSE).map(|(r, _)| r),
        resume: newest(ANNOTATION_RESUME).map(|(r, _)| r),
        approve: newest(ANNOTATION_APPROVE).map(|(r, _)| r),
        abort_rollback: abort.as_ref().is_some_and(|(_, a)| {
            a.get(ANNOTATION_ABORT_ROLLBACK).map(String::as_str) == Some("true")
        }),
        abort: abort.map(|(r, _)| r),
    };
    (status, requests)
}
