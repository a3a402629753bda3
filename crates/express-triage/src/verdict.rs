//! The verdict: every check, then the decision table of `docs/doctor.md` (the operator layer
//! first, then a rollout, then a tenant alone).

use crate::checks::{
    KEEPING_UP, OPERATOR, SPREAD, access_check, deployment_check, errors_check, keeping_up_check,
    name, operator_check, spread_check, switches_check,
};
use crate::control_plane::{CONTROL_PLANE, control_plane_check};
use crate::explain::{Assessed, assess};
use crate::releases::{RELEASE, release_check};
use crate::{Check, Fleet, Report, Status, TenantReport, Thresholds, Verdict};

/// The report: every check, then the verdict by the decision table.
pub fn triage(fleet: &Fleet, limits: &Thresholds) -> Report {
    let assessed: Vec<Assessed<'_>> = fleet
        .tenants
        .iter()
        .map(|t| assess(fleet.now, t, limits))
        .collect();
    let checks = vec![
        control_plane_check(fleet),
        operator_check(fleet, &assessed, limits),
        keeping_up_check(&assessed, limits),
        spread_check(&assessed, limits),
        deployment_check(fleet, limits),
        switches_check(fleet),
        errors_check(fleet, limits),
        access_check(fleet),
        release_check(fleet, limits),
    ];
    let infrastructure: Vec<&Check> = checks
        .iter()
        .filter(|c| {
            [OPERATOR, KEEPING_UP, SPREAD, RELEASE].contains(&c.name) && c.status == Status::Fail
        })
        .collect();
    let unhealthy = |explained: bool| -> Vec<&Assessed<'_>> {
        assessed
            .iter()
            .filter(|a| !a.tenant.symptoms.is_empty() && a.explained == explained)
            .collect()
    };
    let (by_rollout, alone) = (unhealthy(true), unhealthy(false));
    let list = |tenants: &[&Assessed<'_>]| {
        let mut names: Vec<String> = tenants.iter().map(|a| name(a.tenant)).collect();
        if names.len() > 5 {
            let more = names.len() - 5;
            names.truncate(5);
            names.push(format!("and {more} more"));
        }
        names.join(", ")
    };
    let control_plane = checks
        .iter()
        .find(|c| c.name == CONTROL_PLANE && c.status == Status::Fail);
    let (verdict, reason) = if let Some(check) = control_plane {
        (
            Verdict::Infrastructure,
            format!(
                "the control plane: {}. Engage the Kubernetes platform's owners: until it is ready, neither the operator nor a tenant can be judged.",
                check.summary
            ),
        )
    } else if !infrastructure.is_empty() {
        (
            Verdict::Infrastructure,
            format!(
                "the operator layer: {}. Engage the operator's owners before the tenant teams.",
                infrastructure
                    .iter()
                    .map(|c| c.summary.as_str())
                    .collect::<Vec<_>>()
                    .join("; ")
            ),
        )
    } else if !by_rollout.is_empty() {
        let first = by_rollout[0].tenant;
        (
            Verdict::Deployment,
            format!(
                "{} tenant(s) in trouble follow a rollout: {}. Next: `kubectl express status -n {} {}` to see where it stands, `kubectl express abort -n {} {}` (--rollback to return the changed nodes) or, once fixed, `kubectl express retry`.",
                by_rollout.len(),
                list(&by_rollout),
                first.namespace,
                first.cluster,
                first.namespace,
                first.cluster,
            ),
        )
    } else if !alone.is_empty() {
        (
            Verdict::Tenant,
            format!(
                "problems confined to {} tenant(s) with no rollout explaining them: {}",
                alone.len(),
                list(&alone)
            ),
        )
    } else {
        (Verdict::Healthy, "nothing to report".into())
    };
    let notable = |a: &Assessed<'_>| {
        !a.tenant.symptoms.is_empty()
            || a.behind.is_some()
            || !a.nodes_down.is_empty()
            || a.tenant.rollout.as_ref().is_some_and(|r| r.active())
    };
    let tenants = assessed
        .iter()
        .filter(|a| notable(a))
        .map(|a| TenantReport {
            namespace: a.tenant.namespace.clone(),
            cluster: a.tenant.cluster.clone(),
            symptoms: a.tenant.symptoms.clone(),
            rollout: a.tenant.rollout.clone(),
            explained_by_rollout: a.explained,
            behind_seconds: a.behind.as_ref().map(|(s, _)| *s),
            nodes_down: a.nodes_down.clone(),
        })
        .collect();
    Report {
        verdict,
        reason,
        checks,
        tenants,
    }
}
