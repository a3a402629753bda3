//! The build's own API in this DC (DESIGN section 15). When a release is about to move tenants
//! to this ring, this build checks its CRDs against the DC's and every object it stores, applies
//! them when compatible (server-side apply under [`CRD_FIELD_MANAGER`], marked with its
//! version so that an older build leaves them), and records what it did on its ring's Lease,
//! where the release's judge reads it before the first move. Nothing is written when the change
//! is breaking. Apart from releases, the leader says when the installed CRDs lack fields this
//! build writes (a gauge, the Lease, a Warning event), instead of losing them in silence.
//!
//! Only the leader of `toRing` acts, and only for a release that has not started: the CRDs of a
//! DC change when its release starts, never before (a FleetRelease's later DCs keep theirs).

use std::collections::BTreeMap;
use std::time::Duration;

use crd_compat::{Problem, Report, Severity, Upgrade, missing_fields, upgrade};
use express_api::api_record::{
    ANNOTATION_API_BEHIND, ANNOTATION_API_RECORD, ANNOTATION_APPLIED_BY_BUILD, ApiOutcome,
    ApiRecord, CRD_FIELD_MANAGER, CrdGeneration, PROBLEMS_KEPT,
};
use express_api::release::OperatorRelease;
use express_planner::api_versions::fitted;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use k8s_openapi::jiff::{SignedDuration, Timestamp};
use kube::api::{Api, Patch, PatchParams};
use kube::{Resource, ResourceExt};
use tracing::{info, warn};

use super::events::{self, publish};
use crate::controller::context::Context;
use crate::controller::ring_lease;
use crate::crd_check::read::{Unreadable, from_client, installed_crds};

/// How often a breaking check is made again while its release waits (a person may fix the
/// stored objects it names), at the least.
const RECHECK_AT_LEAST_EVERY: Duration = Duration::from_secs(10);

/// Makes sure this build's CRDs were checked (and applied when compatible) for `release`, whose
/// `toRing` this instance leads; returns when to look again (a breaking record is re-checked).
pub(crate) async fn prepare(ctx: &Context, release: &OperatorRelease) -> Option<Timestamp> {
    let status = release.status.clone().unwrap_or_default();
    let started = status.waves.first().is_some_and(|w| w.started_at.is_some());
    if started || status.phase().is_final() {
        return None;
    }
    let recheck = RECHECK_AT_LEAST_EVERY.max(Duration::from_secs(release.spec.interval_seconds));
    let now = Timestamp::now();
    let uid = release.metadata.uid.clone();
    if let Some(record) = own_record(ctx).await {
        // Another release's record (an earlier release to this ring) is not this one's.
        if record.release_uid == uid && record.build == ctx.settings.version {
            if record.outcome.compatible() {
                return None;
            }
            let due = record.checked_at.0 + SignedDuration::try_from(recheck).unwrap_or_default();
            if due > now {
                return Some(due);
            }
        }
    }
    let record = match check_and_apply(ctx).await {
        Ok(record) => ApiRecord {
            release_uid: uid,
            ..record
        },
        Err(error) => {
            warn!(release = %release.name_any(), %error, "cannot check this build's CRDs against the DC; trying again");
            return Some(now + SignedDuration::try_from(recheck).unwrap_or_default());
        }
    };
    info!(release = %release.name_any(), outcome = record.outcome.as_str(), summary = %record.summary(), "checked this build's CRDs against the DC");
    if record.outcome == ApiOutcome::Applied {
        publish(
            ctx,
            Some(release.object_ref(&())),
            events::crds_applied(record.summary()),
        )
        .await;
        let step = super::versions::dc_step(ctx).await;
        if let Some(step) = step.filter(|s| express_planner::api_versions::renames_ahead(s, false))
        {
            publish(
                ctx,
                Some(release.object_ref(&())),
                events::api_version_listed(&step),
            )
            .await;
        }
        report_behind(ctx).await;
    }
    let written = serde_json::to_string(&record).ok();
    ring_lease::annotate(ctx, &[(ANNOTATION_API_RECORD, written.as_deref())]).await;
    (!record.outcome.compatible())
        .then(|| now + SignedDuration::try_from(recheck).unwrap_or_default())
}

/// The record on this ring's Lease, if any.
async fn own_record(ctx: &Context) -> Option<ApiRecord> {
    let lease = ring_lease::read(ctx).await?;
    ApiRecord::from_annotation(lease.annotations().get(ANNOTATION_API_RECORD)?)
}

/// This build's CRDs, marked with its version.
fn build_crds(ctx: &Context) -> Vec<CustomResourceDefinition> {
    let version = &ctx.settings.version;
    let mut crds = ctx.settings.api.crds();
    for crd in &mut crds {
        crd.metadata
            .annotations
            .get_or_insert_with(BTreeMap::new)
            .insert(ANNOTATION_APPLIED_BY_BUILD.to_owned(), version.to_owned());
    }
    crds
}

/// Reads the DC's CRDs and stored objects, decides, applies when compatible, and says what it
/// did.
async fn check_and_apply(ctx: &Context) -> Result<ApiRecord, Unreadable> {
    let version = &ctx.settings.version;
    let build = build_crds(ctx);
    let (installed, stored) = from_client(&ctx.client, &build).await?;
    let objects_checked = stored.values().map(|s| s.len() as u64).sum();
    let before = |name: &str| {
        installed
            .iter()
            .find(|c| c.metadata.name.as_deref() == Some(name))
            .and_then(|c| c.metadata.generation)
    };
    let decided = upgrade(
        &installed,
        &build,
        Some(&stored),
        version,
        ANNOTATION_APPLIED_BY_BUILD,
    );
    let (outcome, report, mut crds) = match decided {
        Upgrade::Apply(report) => {
            let crds = apply(ctx, &build, &installed).await?;
            let moved = crds.iter().any(|c| c.after != c.before);
            let outcome = if moved {
                ApiOutcome::Applied
            } else {
                ApiOutcome::Current
            };
            (outcome, report, crds)
        }
        Upgrade::Leave { report, .. } => (ApiOutcome::Newer, report, Vec::new()),
        Upgrade::Refuse(report) => (ApiOutcome::Breaking, report, Vec::new()),
    };
    if crds.is_empty() {
        crds = build
            .iter()
            .filter_map(|c| c.metadata.name.clone())
            .map(|name| CrdGeneration {
                before: before(&name),
                after: None,
                name,
            })
            .collect();
    }
    Ok(ApiRecord {
        outcome,
        build: version.clone(),
        release_uid: None,
        crds,
        objects_checked,
        problems: kept(&report),
        checked_at: Time(Timestamp::now()),
    })
}

/// Applies every CRD of the build, each fitted to the DC's (a version it lacks listed, not
/// served; storage where it is); each one's generation before and after.
async fn apply(
    ctx: &Context,
    build: &[CustomResourceDefinition],
    installed: &[CustomResourceDefinition],
) -> Result<Vec<CrdGeneration>, Unreadable> {
    let api: Api<CustomResourceDefinition> = Api::all(ctx.client.clone());
    let mut generations = Vec::new();
    for crd in build {
        let name = crd.metadata.name.clone().unwrap_or_default();
        let current = installed
            .iter()
            .find(|c| c.metadata.name.as_deref() == Some(name.as_str()));
        let before = current.and_then(|c| c.metadata.generation);
        let crd = &match ctx.settings.api.crd(&name) {
            Some(carried) => fitted(crd, &carried.target, current),
            None => crd.clone(),
        };
        let applied = api
            .patch(
                &name,
                &PatchParams::apply(CRD_FIELD_MANAGER).force(),
                &Patch::Apply(crd),
            )
            .await
            .map_err(|source| Unreadable {
                what: format!("CustomResourceDefinition {name} (applying it)"),
                source,
            })?;
        generations.push(CrdGeneration {
            name,
            before,
            after: applied.metadata.generation,
        });
    }
    Ok(generations)
}

/// The first problems of a report, breaking ones first, each with the objects it names.
fn kept(report: &Report) -> Vec<String> {
    let mut problems: Vec<&Problem> = report.problems.iter().collect();
    problems.sort_by_key(|p| std::cmp::Reverse(p.severity));
    problems
        .into_iter()
        .take(PROBLEMS_KEPT)
        .map(|p| {
            let mut line = p.headline();
            if p.severity == Severity::Warning {
                line.insert_str(0, "warning: ");
            }
            if !p.objects.is_empty() {
                let shown: Vec<&str> = p.objects.iter().take(3).map(String::as_str).collect();
                line.push_str(&format!(" (objects: {}", shown.join(", ")));
                if p.objects.len() > shown.len() {
                    line.push_str(&format!(", {} more", p.objects.len() - shown.len()));
                }
                line.push(')');
            }
            line
        })
        .collect()
}

/// Says whether the installed CRDs lack fields this build writes: the gauge, the annotation on
/// this ring's Lease (which doctor reads), and an event on the Lease when that changes.
pub(crate) async fn report_behind(ctx: &Context) {
    let build = express_api::crd::all();
    let installed = match installed_crds(&ctx.client, &build).await {
        Ok(installed) => installed,
        Err(error) => {
            warn!(%error, "cannot read the installed CRDs to compare them with this build's");
            return;
        }
    };
    let missing = missing_fields(&installed, &build);
    ctx.metrics
        .rings
        .api_fields_missing
        .set(i64::try_from(missing.len()).unwrap_or(i64::MAX));
    let behind = behind_text(&missing);
    let Some(lease) = ring_lease::read(ctx).await else {
        return;
    };
    let before = lease.annotations().get(ANNOTATION_API_BEHIND).cloned();
    if before == behind {
        return;
    }
    if let Some(text) = &behind {
        warn!(missing = %text, "the installed CRDs lack fields this build writes");
    }
    ring_lease::annotate(ctx, &[(ANNOTATION_API_BEHIND, behind.as_deref())]).await;
    publish(
        ctx,
        Some(lease.object_ref(&())),
        events::api_behind(behind.as_deref()),
    )
    .await;
}

/// `crd: path, path; crd: ...`, none when nothing is missing.
fn behind_text(missing: &[Problem]) -> Option<String> {
    let mut by_crd: BTreeMap<&str, Vec<String>> = BTreeMap::new();
    for problem in missing {
        let what = match (problem.path.is_empty(), problem.version.is_empty()) {
            (false, _) => problem.path.clone(),
            (true, false) => format!("version {}", problem.version),
            (true, true) => "the whole CRD".to_owned(),
        };
        by_crd.entry(problem.crd.as_str()).or_default().push(what);
    }
    (!by_crd.is_empty()).then(|| {
        by_crd
            .into_iter()
            .map(|(crd, fields)| format!("{crd}: {}", fields.join(", ")))
            .collect::<Vec<_>>()
            .join("; ")
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn problem(crd: &str, version: &str, path: &str, severity: Severity) -> Problem {
        Problem {
            crd: crd.into(),
            version: version.into(),
            path: path.into(),
            change: "x".into(),
            severity,
            objects: Vec::new(),
        }
    }

    #[test]
    fn what_is_missing_reads_per_crd() {
        assert_eq!(behind_text(&[]), None);
        let missing = [
            problem("a.express.dev", "v1", ".status.x", Severity::Breaking),
            problem("a.express.dev", "v2", "", Severity::Breaking),
            problem("b.express.dev", "", "", Severity::Breaking),
        ];
        assert_eq!(
            behind_text(&missing).as_deref(),
            Some("a.express.dev: .status.x, version v2; b.express.dev: the whole CRD")
        );
    }

    #[test]
    fn kept_problems_put_breaking_first_and_name_a_few_objects() {
        let mut breaking = problem("a.express.dev", "v1", ".spec.n", Severity::Breaking);
        breaking.objects = (0..5).map(|i| format!("ns/o{i}")).collect();
        let report = Report {
            compatible: false,
            problems: vec![
                problem("a.express.dev", "v1", ".spec.m", Severity::Warning),
                breaking,
            ],
        };
        assert_eq!(
            kept(&report),
            vec![
                "a.express.dev v1 .spec.n: x (objects: ns/o0, ns/o1, ns/o2, 2 more)".to_owned(),
                "warning: a.express.dev v1 .spec.m: x".to_owned(),
            ]
        );
    }
}
