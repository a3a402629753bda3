//! The checks of the decision table (`docs/doctor.md`), each over the assessed tenants or the
//! fleet; [`crate::verdict`] draws the verdict from them.

use std::collections::{BTreeMap, BTreeSet};

use crate::explain::{Assessed, seconds_between};
use crate::{Check, Fleet, Lease, LeaseSeen, Ring, Status, Symptom, Tenant, Thresholds};

/// Check names, as `-o json` carries them.
pub const OPERATOR: &str = "operator";
pub const KEEPING_UP: &str = "keeping-up";
pub const SPREAD: &str = "spread";
pub const DEPLOYMENT: &str = "deployment";
pub const SWITCHES: &str = "switches";
pub const OPERATOR_ERRORS: &str = "operator-errors";
pub const ACCESS: &str = "access";

/// Evidence lists stop here (the count says how many more).
const EVIDENCE_LINES: usize = 10;

/// "95s", "3m10s", "2h5m" (as durations are written to and read from every flag).
pub fn age(seconds: i64) -> String {
    express_api::bounce::format_duration(u64::try_from(seconds).unwrap_or(0))
}

pub(crate) fn name(tenant: &Tenant) -> String {
    format!("{}/{}", tenant.namespace, tenant.cluster)
}

pub(crate) fn check(
    name: &'static str,
    status: Status,
    summary: String,
    evidence: Vec<String>,
) -> Check {
    let mut evidence = evidence;
    if evidence.len() > EVIDENCE_LINES {
        let more = evidence.len() - EVIDENCE_LINES;
        evidence.truncate(EVIDENCE_LINES);
        evidence.push(format!("... and {more} more"));
    }
    Check {
        name,
        status,
        summary,
        evidence,
    }
}

fn worst(statuses: impl IntoIterator<Item = Status>) -> Status {
    statuses.into_iter().max().unwrap_or(Status::Ok)
}

/// Each ring's leadership, Deployment and operator pods, told by the worst finding.
pub(crate) fn operator_check(
    fleet: &Fleet,
    assessed: &[Assessed<'_>],
    limits: &Thresholds,
) -> Check {
    if fleet.rings.is_empty() {
        return check(
            OPERATOR,
            Status::Warn,
            "no operator ring observed".into(),
            Vec::new(),
        );
    }
    let mut findings: Vec<(Status, String)> = Vec::new();
    for ring in &fleet.rings {
        findings.push(leadership(fleet, ring, assessed, limits));
        findings.extend(api_behind_finding(ring));
        findings.extend(cannot_read_finding(ring));
        findings.extend(deployment_finding(ring));
        findings.extend(pod_findings(ring));
    }
    let status = worst(findings.iter().map(|(s, _)| *s));
    let summary = findings
        .iter()
        .find(|(s, _)| *s == status)
        .map(|(_, line)| line.clone())
        .unwrap_or_default();
    check(
        OPERATOR,
        status,
        summary,
        findings.into_iter().map(|(_, line)| line).collect(),
    )
}

/// A ring whose build runs on CRDs that lack fields it writes: the API server drops them.
fn api_behind_finding(ring: &Ring) -> Option<(Status, String)> {
    let LeaseSeen::Seen(lease) = &ring.lease else {
        return None;
    };
    let missing = lease.api_behind.as_deref()?;
    let build = lease
        .version
        .as_deref()
        .map_or_else(String::new, |v| format!(" {v}"));
    Some((
        Status::Warn,
        format!(
            "ring {}: its build{build} runs on CRDs that lack fields it writes, which the API server drops ({missing}): a release to this ring applies its CRDs, or `express-operator crd | kubectl apply --server-side -f -`",
            ring.name
        ),
    ))
}

/// A build of the ring that refuses to lead: it cannot read what the DC stores (a rollback past
/// a storage version move, or a version it reads no longer served).
fn cannot_read_finding(ring: &Ring) -> Option<(Status, String)> {
    let LeaseSeen::Seen(lease) = &ring.lease else {
        return None;
    };
    let why = lease.cannot_read.as_deref()?;
    Some((Status::Fail, format!("ring {}: {why}", ring.name)))
}

/// Whether an operator leads the ring, from its Lease.
fn leadership(
    fleet: &Fleet,
    ring: &Ring,
    assessed: &[Assessed<'_>],
    limits: &Thresholds,
) -> (Status, String) {
    let r = &ring.name;
    match &ring.lease {
        LeaseSeen::Seen(lease) => lease_finding(fleet, r, lease),
        LeaseSeen::Missing { namespace, name } => {
            // An operator run without leader election holds no Lease: its tenants being
            // observed tells it from a ring nobody drives.
            let members: Vec<&Assessed<'_>> =
                assessed.iter().filter(|a| &a.tenant.ring == r).collect();
            // Owned by this ring (not relabelled into it and left there), and kept up.
            let driven = |a: &&Assessed<'_>| {
                a.behind.is_none() && a.tenant.owner_ring.as_deref() == Some(r.as_str())
            };
            if !members.is_empty() && members.iter().all(driven) {
                (
                    Status::Warn,
                    format!(
                        "ring {r}: no Lease {namespace}/{name}, yet its {} tenant(s) are observed within {}: an operator drives it without leader election (run it with --leader-elect, as the chart does, so that two replicas never act at once)",
                        members.len(),
                        age(limits.stale_after_seconds)
                    ),
                )
            } else {
                (
                    Status::Fail,
                    format!("ring {r}: no Lease {namespace}/{name}: no operator has led this ring"),
                )
            }
        }
        LeaseSeen::Unreadable { namespace, name } => (
            Status::Warn,
            format!("ring {r}: cannot read Lease {namespace}/{name}: leadership unknown"),
        ),
    }
}

/// A Lease seen: held and renewed within its duration, or why no operator leads.
fn lease_finding(fleet: &Fleet, r: &str, lease: &Lease) -> (Status, String) {
    let at = format!("Lease {}/{}", lease.namespace, lease.name);
    let duration = lease.duration_seconds.unwrap_or(15);
    match (
        lease.holder.as_deref().filter(|h| !h.is_empty()),
        lease.renewed,
    ) {
        (None, renewed) => (
            Status::Fail,
            format!(
                "ring {r}: {at} has no holder{}: no operator is leading",
                renewed.map_or_else(String::new, |t| format!(
                    " (released or last renewed {} ago)",
                    age(seconds_between(fleet.now, t))
                ))
            ),
        ),
        (Some(holder), None) => (
            Status::Fail,
            format!("ring {r}: {at} held by {holder} was never renewed"),
        ),
        (Some(holder), Some(renewed)) => {
            let since = seconds_between(fleet.now, renewed);
            if since > duration {
                (
                    Status::Fail,
                    format!(
                        "ring {r}: {at} expired: held by {holder}, last renewed {} ago (duration {duration}s); no operator is leading",
                        age(since)
                    ),
                )
            } else {
                (
                    Status::Ok,
                    format!(
                        "ring {r}: leading: {holder} ({at} renewed {} ago, duration {duration}s)",
                        age(since)
                    ),
                )
            }
        }
    }
}

/// Whether the ring's operator Deployment has a replica available, when it was found.
fn deployment_finding(ring: &Ring) -> Option<(Status, String)> {
    let r = &ring.name;
    let d = ring.deployment.as_ref()?;
    let at = format!("Deployment {}/{}", d.namespace, d.name);
    let status = if d.available < 1 {
        Status::Fail
    } else {
        Status::Ok
    };
    Some((
        status,
        format!(
            "ring {r}: {at}: {}/{} replicas available",
            d.available, d.replicas
        ),
    ))
}

/// Operator pods crash-looping or restarted.
fn pod_findings(ring: &Ring) -> Vec<(Status, String)> {
    let r = &ring.name;
    ring.pods
        .iter()
        .filter_map(|pod| match pod.waiting.as_deref() {
            Some("CrashLoopBackOff") => Some((
                Status::Fail,
                format!(
                    "ring {r}: operator pod {} is crash-looping ({} restarts)",
                    pod.name, pod.restarts
                ),
            )),
            _ if pod.restarts > 0 => Some((
                Status::Warn,
                format!(
                    "ring {r}: operator pod {} restarted {} times",
                    pod.name, pod.restarts
                ),
            )),
            _ => None,
        })
        .collect()
}

pub(crate) fn keeping_up_check(assessed: &[Assessed<'_>], limits: &Thresholds) -> Check {
    let behind: Vec<&Assessed<'_>> = assessed.iter().filter(|a| a.behind.is_some()).collect();
    if behind.is_empty() {
        return check(
            KEEPING_UP,
            Status::Ok,
            format!(
                "every tenant observed within {}",
                age(limits.stale_after_seconds)
            ),
            Vec::new(),
        );
    }
    let namespaces: BTreeSet<&str> = behind.iter().map(|a| a.tenant.namespace.as_str()).collect();
    let longest = behind
        .iter()
        .filter_map(|a| a.behind.as_ref().map(|(s, _)| *s))
        .max()
        .unwrap_or(0);
    check(
        KEEPING_UP,
        Status::Fail,
        format!(
            "the operator is behind on {} tenant(s) in {} namespace(s), by up to {} (threshold {})",
            behind.len(),
            namespaces.len(),
            age(longest),
            age(limits.stale_after_seconds)
        ),
        behind
            .iter()
            .filter_map(|a| {
                let (_, why) = a.behind.as_ref()?;
                Some(format!("{}: {why}", name(a.tenant)))
            })
            .collect(),
    )
}

/// Per symptom, the tenants no rollout explains.
fn unexplained_by_symptom<'a>(
    assessed: &'a [Assessed<'a>],
) -> BTreeMap<Symptom, Vec<&'a Assessed<'a>>> {
    let mut by_symptom: BTreeMap<Symptom, Vec<&Assessed<'_>>> = BTreeMap::new();
    for a in assessed.iter().filter(|a| !a.explained) {
        for symptom in &a.tenant.symptoms {
            by_symptom.entry(*symptom).or_default().push(a);
        }
    }
    by_symptom
}

pub(crate) fn spread_check(assessed: &[Assessed<'_>], limits: &Thresholds) -> Check {
    let seen = assessed.len();
    let unhealthy = assessed
        .iter()
        .filter(|a| !a.tenant.symptoms.is_empty())
        .count();
    if unhealthy == 0 {
        return check(
            SPREAD,
            Status::Ok,
            format!("no unhealthy tenant among {seen}"),
            Vec::new(),
        );
    }
    let mut evidence = Vec::new();
    let mut spread = Vec::new();
    for (symptom, tenants) in unexplained_by_symptom(assessed) {
        let namespaces: BTreeSet<&str> = tenants
            .iter()
            .map(|a| a.tenant.namespace.as_str())
            .collect();
        let is_spread = namespaces.len() >= limits.spread_namespaces
            && tenants.len() as f64 >= limits.spread_fraction * seen as f64;
        let line = format!(
            "{}: {} tenant(s) in {} namespace(s) with no rollout explaining it ({})",
            symptom.as_str(),
            tenants.len(),
            namespaces.len(),
            namespaces.iter().copied().collect::<Vec<_>>().join(", ")
        );
        if is_spread {
            spread.push(format!(
                "{} in {} namespaces ({} of {seen} tenants) with no rollout explaining it",
                symptom.as_str(),
                namespaces.len(),
                tenants.len()
            ));
        }
        evidence.push(line);
    }
    // Nodes a recovery has left down past `--stuck-recovery`, and bounces under way.
    for a in assessed {
        for node in a
            .nodes_down
            .iter()
            .filter(|n| n.stuck || n.work == Some(crate::Work::Bounce))
        {
            evidence.push(format!(
                "{}: {}",
                name(a.tenant),
                node.describe(limits.stuck_recovery_seconds)
            ));
        }
    }
    let explained = assessed
        .iter()
        .filter(|a| a.explained && !a.tenant.symptoms.is_empty())
        .count();
    if explained > 0 {
        evidence.push(format!(
            "{explained} unhealthy tenant(s) follow a rollout (see {DEPLOYMENT})"
        ));
    }
    if spread.is_empty() {
        check(
            SPREAD,
            Status::Warn,
            format!(
                "{unhealthy} unhealthy tenant(s) of {seen}, no symptom spread (threshold: {} namespaces and {:.0}% of tenants)",
                limits.spread_namespaces,
                limits.spread_fraction * 100.0
            ),
            evidence,
        )
    } else {
        check(SPREAD, Status::Fail, spread.join("; "), evidence)
    }
}

pub(crate) fn deployment_check(fleet: &Fleet, limits: &Thresholds) -> Check {
    let mut in_progress = Vec::new();
    let mut halted = Vec::new();
    let mut finished = Vec::new();
    for tenant in &fleet.tenants {
        let Some(rollout) = &tenant.rollout else {
            continue;
        };
        let version = rollout
            .version
            .as_deref()
            .map_or_else(String::new, |v| format!(", version {v}"));
        let started = rollout.started.map_or_else(String::new, |s| {
            format!(" since {s} ({} ago)", age(seconds_between(fleet.now, s)))
        });
        let state = rollout.state.as_deref().unwrap_or("unknown");
        if rollout.halted() {
            let node = rollout
                .failed_node
                .as_deref()
                .map_or_else(String::new, |n| format!(" at node {n}"));
            halted.push(format!("{}: {state}{node}{started}{version}", name(tenant)));
        } else if rollout.active() {
            in_progress.push(format!("{}: {state}{started}{version}", name(tenant)));
        } else if let Some(f) = rollout.finished
            && seconds_between(fleet.now, f) <= limits.recent_rollout_seconds
        {
            finished.push(format!(
                "{}: {state}, finished {} ago{version}",
                name(tenant),
                age(seconds_between(fleet.now, f))
            ));
        }
    }
    let summary = format!(
        "{} rollout(s) in progress, {} failed or aborted, {} finished in the last {}",
        in_progress.len(),
        halted.len(),
        finished.len(),
        age(limits.recent_rollout_seconds)
    );
    let status = if halted.is_empty() {
        Status::Ok
    } else {
        Status::Warn
    };
    let mut evidence = halted;
    evidence.extend(in_progress);
    evidence.extend(finished);
    check(DEPLOYMENT, status, summary, evidence)
}

pub(crate) fn switches_check(fleet: &Fleet) -> Check {
    let mut fleet_pause: Option<Option<String>> = None;
    let mut namespace_pauses: BTreeMap<&str, Option<String>> = BTreeMap::new();
    let mut evidence = Vec::new();
    let mut cluster_pauses = 0;
    for tenant in &fleet.tenants {
        match &tenant.pause {
            Some((scope, reason)) if scope == "operator-wide" => fleet_pause = Some(reason.clone()),
            Some((scope, reason)) if scope == "namespace" => {
                namespace_pauses.insert(&tenant.namespace, reason.clone());
            }
            Some((_, reason)) => {
                cluster_pauses += 1;
                evidence.push(format!(
                    "{}: paused{}",
                    name(tenant),
                    reason
                        .as_deref()
                        .map_or_else(String::new, |r| format!(" ({r})"))
                ));
            }
            None => {}
        }
        if tenant.aborted {
            evidence.push(format!("{}: an abort is in force", name(tenant)));
        }
        if tenant.symptoms.contains(&Symptom::SettleStalled) {
            evidence.push(format!(
                "{}: settle stalled on a rollout-id disagreement",
                name(tenant)
            ));
        }
    }
    let mut head = Vec::new();
    if let Some(reason) = &fleet_pause {
        head.push(format!(
            "operator-wide pause in force{}",
            reason
                .as_deref()
                .map_or_else(String::new, |r| format!(" ({r})"))
        ));
    }
    for (namespace, reason) in &namespace_pauses {
        head.push(format!(
            "namespace {namespace} paused{}",
            reason
                .as_deref()
                .map_or_else(String::new, |r| format!(" ({r})"))
        ));
    }
    head.extend(evidence);
    if head.is_empty() {
        return check(
            SWITCHES,
            Status::Ok,
            "no pause, abort or stalled settle in force".into(),
            Vec::new(),
        );
    }
    let summary = format!(
        "{}{} namespace pause(s), {cluster_pauses} cluster pause(s), {} abort(s)",
        if fleet_pause.is_some() {
            "operator-wide pause in force; "
        } else {
            ""
        },
        namespace_pauses.len(),
        fleet.tenants.iter().filter(|t| t.aborted).count()
    );
    check(SWITCHES, Status::Warn, summary, head)
}

pub(crate) fn errors_check(fleet: &Fleet, limits: &Thresholds) -> Check {
    let recent = fleet.warnings.iter().filter(|w| {
        w.last
            .is_none_or(|t| seconds_between(fleet.now, t) <= limits.since_seconds)
    });
    let mut by_reason: BTreeMap<&str, BTreeMap<&str, u32>> = BTreeMap::new();
    for warning in recent {
        *by_reason
            .entry(&warning.reason)
            .or_default()
            .entry(&warning.namespace)
            .or_default() += warning.count.max(1);
    }
    if by_reason.is_empty() {
        return check(
            OPERATOR_ERRORS,
            Status::Ok,
            format!(
                "no Warning event from the operator in the last {}",
                age(limits.since_seconds)
            ),
            Vec::new(),
        );
    }
    let total: u32 = by_reason.values().flat_map(|n| n.values()).sum();
    let evidence = by_reason
        .iter()
        .map(|(reason, namespaces)| {
            let count: u32 = namespaces.values().sum();
            let per = namespaces
                .iter()
                .map(|(ns, n)| format!("{ns} {n}"))
                .collect::<Vec<_>>()
                .join(", ");
            format!(
                "{reason}: {count} in {} namespace(s) ({per})",
                namespaces.len()
            )
        })
        .collect();
    check(
        OPERATOR_ERRORS,
        Status::Warn,
        format!(
            "{total} Warning event(s) from the operator in the last {}, {} reason(s)",
            age(limits.since_seconds),
            by_reason.len()
        ),
        evidence,
    )
}

pub(crate) fn access_check(fleet: &Fleet) -> Check {
    if fleet.unreadable.is_empty() {
        check(
            ACCESS,
            Status::Ok,
            "everything doctor reads was readable".into(),
            Vec::new(),
        )
    } else {
        check(
            ACCESS,
            Status::Warn,
            format!(
                "could not read {}: the verdict is drawn without it",
                fleet.unreadable.join("; ")
            ),
            fleet.unreadable.clone(),
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::verdict::triage;
    use crate::{Deployment, Lease, OperatorPod, Ring, Rollout, Warning};
    use crate::{Report, Verdict};
    use k8s_openapi::jiff::Timestamp;

    const NOW: i64 = 1_800_000_000;

    fn at(seconds_ago: i64) -> Timestamp {
        Timestamp::from_second(NOW - seconds_ago).unwrap()
    }

    fn leading() -> Ring {
        Ring {
            name: "default".into(),
            lease: LeaseSeen::Seen(Lease {
                namespace: "express-system".into(),
                name: "express-operator".into(),
                holder: Some("op-1".into()),
                renewed: Some(at(3)),
                duration_seconds: Some(15),
                version: None,
                api_behind: None,
                cannot_read: None,
            }),
            deployment: None,
            pods: Vec::new(),
        }
    }

    /// A healthy tenant `ns/c`: observed, status written after its pods last moved.
    fn tenant(ns: &str) -> Tenant {
        Tenant {
            namespace: ns.into(),
            cluster: "c".into(),
            ring: "default".into(),
            owner_ring: Some("default".into()),
            released: None,
            generation: 2,
            observed_generation: Some(2),
            spec_changed: Some(at(3600)),
            desired_changed: Some(at(3600)),
            last_node_change: None,
            nodes_down: Vec::new(),
            failed_at: None,
            progress_deadline_seconds: 600,
            status_changed: Some(at(3000)),
            pods_changed: Some(at(3100)),
            symptoms: Vec::new(),
            rollout: Some(Rollout {
                state: Some("Complete".into()),
                started: Some(at(3700)),
                finished: Some(at(3000)),
                version: Some("v1".into()),
                failed_node: None,
            }),
            pause: None,
            aborted: false,
        }
    }

    fn sick(ns: &str, symptom: Symptom) -> Tenant {
        Tenant {
            symptoms: vec![symptom],
            ..tenant(ns)
        }
    }

    fn rolling(mut t: Tenant, state: &str) -> Tenant {
        t.desired_changed = Some(at(61));
        t.rollout = Some(Rollout {
            state: Some(state.into()),
            started: Some(at(60)),
            finished: None,
            version: Some("v2".into()),
            failed_node: (state == "Failed").then(|| "acme-fe1".into()),
        });
        t
    }

    fn fleet(tenants: Vec<Tenant>) -> Fleet {
        Fleet {
            now: at(0),
            rings: vec![leading()],
            tenants,
            warnings: Vec::new(),
            unreadable: Vec::new(),
            releases: Vec::new(),
            fleet_releases: Vec::new(),
            control_plane: crate::ControlPlane::Ready,
        }
    }

    fn status_of(report: &Report, name: &str) -> Status {
        report
            .checks
            .iter()
            .find(|c| c.name == name)
            .map(|c| c.status)
            .unwrap()
    }

    fn run(fleet: &Fleet) -> Report {
        triage(fleet, &Thresholds::default())
    }

    #[test]
    fn a_quiet_fleet_is_healthy_and_every_check_is_ok() {
        let report = run(&fleet(vec![tenant("a"), tenant("b"), tenant("c")]));
        assert_eq!(report.verdict, Verdict::Healthy);
        for c in &report.checks {
            assert_eq!(c.status, Status::Ok, "{c:?}");
        }
        assert!(report.tenants.is_empty());
        let names: Vec<&str> = report.checks.iter().map(|c| c.name).collect();
        assert_eq!(
            names,
            [
                crate::control_plane::CONTROL_PLANE,
                OPERATOR,
                KEEPING_UP,
                SPREAD,
                DEPLOYMENT,
                SWITCHES,
                OPERATOR_ERRORS,
                ACCESS,
                crate::releases::RELEASE
            ]
        );
    }

    #[test]
    fn verdicts_by_the_decision_table() {
        let t = tenant;
        let cases: Vec<(&str, Fleet, Verdict)> = vec![
            ("quiet", fleet(vec![t("a"), t("b")]), Verdict::Healthy),
            (
                "one tenant's nodes down, no rollout",
                fleet(vec![sick("a", Symptom::NodesNotReady), t("b"), t("c")]),
                Verdict::Tenant,
            ),
            (
                "a failed rollout",
                fleet(vec![rolling(sick("a", Symptom::Failed), "Failed"), t("b")]),
                Verdict::Deployment,
            ),
            (
                "trouble during a rollout in progress",
                fleet(vec![
                    rolling(sick("a", Symptom::NodesNotReady), "Progressing"),
                    t("b"),
                ]),
                Verdict::Deployment,
            ),
            (
                "deployment outranks tenant",
                fleet(vec![
                    rolling(sick("a", Symptom::Failed), "Failed"),
                    sick("b", Symptom::NodesNotReady),
                ]),
                Verdict::Deployment,
            ),
            (
                "one symptom in three namespaces, no rollout",
                fleet(vec![
                    sick("a", Symptom::NodesNotReady),
                    sick("b", Symptom::NodesNotReady),
                    sick("c", Symptom::NodesNotReady),
                    t("d"),
                ]),
                Verdict::Infrastructure,
            ),
            (
                "infrastructure outranks deployment",
                {
                    let mut f = fleet(vec![rolling(sick("a", Symptom::Failed), "Failed")]);
                    f.rings[0].lease = LeaseSeen::Seen(Lease {
                        namespace: "express-system".into(),
                        name: "express-operator".into(),
                        holder: Some("op-1".into()),
                        renewed: Some(at(600)),
                        duration_seconds: Some(15),
                        version: None,
                        api_behind: None,
                        cannot_read: None,
                    });
                    f
                },
                Verdict::Infrastructure,
            ),
        ];
        for (case, fleet, verdict) in cases {
            assert_eq!(run(&fleet).verdict, verdict, "{case}");
        }
    }

    #[test]
    fn a_build_on_an_api_behind_it_is_a_warning_naming_the_fields() {
        let mut f = fleet(vec![tenant("a")]);
        f.rings[0].lease = LeaseSeen::Seen(Lease {
            namespace: "express-system".into(),
            name: "express-operator".into(),
            holder: Some("op".into()),
            renewed: Some(at(1)),
            duration_seconds: Some(15),
            version: Some("0.2.0".into()),
            api_behind: Some("expressclusters.express.dev: .status.change.recovery".into()),
            cannot_read: None,
        });
        let report = run(&f);
        assert_eq!(status_of(&report, OPERATOR), Status::Warn);
        let check = report.checks.iter().find(|c| c.name == OPERATOR).unwrap();
        assert!(
            check
                .summary
                .contains("its build 0.2.0 runs on CRDs that lack fields it writes")
                && check.summary.contains(".status.change.recovery"),
            "{}",
            check.summary
        );
    }

    #[test]
    fn a_build_that_cannot_read_what_is_stored_fails_the_check_saying_why() {
        let mut f = fleet(vec![tenant("a")]);
        f.rings[0].lease = LeaseSeen::Seen(Lease {
            namespace: "express-system".into(),
            name: "express-operator".into(),
            holder: Some("op".into()),
            renewed: Some(at(1)),
            duration_seconds: Some(15),
            version: Some("0.2.0".into()),
            api_behind: None,
            cannot_read: Some("op-old refuses to lead ring default: this build cannot read what the DC stores (backends.express.dev: its objects are stored at v1beta1, a version this build does not know (it knows v1alpha1))".into()),
        });
        let report = run(&f);
        assert_eq!(status_of(&report, OPERATOR), Status::Fail);
        let check = report.checks.iter().find(|c| c.name == OPERATOR).unwrap();
        assert!(
            check
                .evidence
                .iter()
                .any(|d| d.starts_with("ring default: op-old refuses to lead")
                    && d.contains("stored at v1beta1")),
            "{check:?}"
        );
    }

    #[test]
    fn the_lease_decides_whether_an_operator_leads() {
        let lease = |holder: Option<&str>, renewed_ago: Option<i64>| {
            let mut f = fleet(vec![tenant("a")]);
            f.rings[0].lease = LeaseSeen::Seen(Lease {
                namespace: "express-system".into(),
                name: "express-operator".into(),
                holder: holder.map(Into::into),
                renewed: renewed_ago.map(at),
                duration_seconds: Some(15),
                version: None,
                api_behind: None,
                cannot_read: None,
            });
            f
        };
        let cases = [
            (lease(Some("op"), Some(15)), Status::Ok, Verdict::Healthy),
            (
                lease(Some("op"), Some(16)),
                Status::Fail,
                Verdict::Infrastructure,
            ),
            (lease(None, Some(1)), Status::Fail, Verdict::Infrastructure),
            (
                lease(Some("op"), None),
                Status::Fail,
                Verdict::Infrastructure,
            ),
        ];
        for (i, (fleet, status, verdict)) in cases.into_iter().enumerate() {
            let report = run(&fleet);
            assert_eq!(status_of(&report, OPERATOR), status, "case {i}");
            assert_eq!(report.verdict, verdict, "case {i}");
        }
        let expired = run(&lease(Some("op-1"), Some(95)));
        assert!(
            expired.reason.contains("express-system/express-operator")
                && expired.reason.contains("1m35s ago"),
            "names the Lease and its age: {}",
            expired.reason
        );
    }

    #[test]
    fn an_unreadable_lease_warns_and_a_verdict_is_still_given() {
        let mut f = fleet(vec![sick("a", Symptom::NodesNotReady), tenant("b")]);
        f.rings[0].lease = LeaseSeen::Unreadable {
            namespace: "express-system".into(),
            name: "express-operator".into(),
        };
        f.unreadable
            .push("leases in express-system: forbidden".into());
        let report = run(&f);
        assert_eq!(status_of(&report, OPERATOR), Status::Warn);
        assert_eq!(status_of(&report, ACCESS), Status::Warn);
        assert_eq!(report.verdict, Verdict::Tenant);
    }

    #[test]
    fn the_operator_deployment_and_its_pods() {
        let with = |available: i32, pod: Option<OperatorPod>| {
            let mut f = fleet(vec![tenant("a")]);
            f.rings[0].deployment = Some(Deployment {
                namespace: "express-system".into(),
                name: "express-operator".into(),
                replicas: 2,
                available,
            });
            f.rings[0].pods.extend(pod);
            run(&f)
        };
        assert_eq!(status_of(&with(1, None), OPERATOR), Status::Ok);
        assert_eq!(with(0, None).verdict, Verdict::Infrastructure);
        let restarted = OperatorPod {
            name: "op-1".into(),
            restarts: 2,
            waiting: None,
        };
        assert_eq!(status_of(&with(2, Some(restarted)), OPERATOR), Status::Warn);
        let looping = OperatorPod {
            name: "op-1".into(),
            restarts: 7,
            waiting: Some("CrashLoopBackOff".into()),
        };
        assert_eq!(with(2, Some(looping)).verdict, Verdict::Infrastructure);
    }

    #[test]
    fn an_unobserved_generation_is_a_backlog_past_stale_after() {
        let behind = |seconds: i64| {
            let mut t = tenant("a");
            t.generation = 3;
            t.spec_changed = Some(at(seconds));
            run(&fleet(vec![t, tenant("b")]))
        };
        let at_edge = behind(120);
        assert_eq!(status_of(&at_edge, KEEPING_UP), Status::Ok);
        assert_eq!(at_edge.verdict, Verdict::Healthy);
        let past = behind(121);
        assert_eq!(status_of(&past, KEEPING_UP), Status::Fail);
        assert_eq!(past.verdict, Verdict::Infrastructure);
        assert_eq!(past.tenants[0].behind_seconds, Some(121));
    }

    #[test]
    fn a_status_that_did_not_move_while_pods_did_is_a_backlog() {
        let stale = |pods_ago: i64, status_ago: i64| {
            let mut t = tenant("a");
            t.pods_changed = Some(at(pods_ago));
            t.status_changed = Some(at(status_ago));
            status_of(&run(&fleet(vec![t])), KEEPING_UP)
        };
        assert_eq!(stale(121, 200), Status::Fail);
        assert_eq!(stale(120, 200), Status::Ok, "not yet past the threshold");
        assert_eq!(
            stale(300, 250),
            Status::Ok,
            "status written after the pods moved"
        );
        assert_eq!(stale(300, 300), Status::Ok, "in the same second");
    }

    #[test]
    fn spread_needs_both_enough_namespaces_and_enough_tenants() {
        let nr = |ns: &str| sick(ns, Symptom::NodesNotReady);
        let limits = Thresholds::default();
        // Three namespaces of twelve tenants: exactly 25 %.
        let mut at_edge = vec![nr("a"), nr("b"), nr("c")];
        at_edge.extend((0..9).map(|i| tenant(&format!("ok{i}"))));
        assert_eq!(
            triage(&fleet(at_edge.clone()), &limits).verdict,
            Verdict::Infrastructure
        );
        // One more healthy tenant: below 25 %.
        at_edge.push(tenant("ok9"));
        let below = triage(&fleet(at_edge), &limits);
        assert_eq!(status_of(&below, SPREAD), Status::Warn);
        assert_eq!(below.verdict, Verdict::Tenant);
        // Many tenants but two namespaces.
        let mut two = vec![nr("a"), nr("b"), nr("b")];
        two.push(tenant("c"));
        assert_eq!(triage(&fleet(two), &limits).verdict, Verdict::Tenant);
        // Different symptoms are not one spread symptom.
        let mixed = vec![
            nr("a"),
            sick("b", Symptom::InvalidSpec),
            sick("c", Symptom::SettleStalled),
        ];
        assert_eq!(triage(&fleet(mixed), &limits).verdict, Verdict::Tenant);
        // The same symptom everywhere, each explained by its rollout: a deployment.
        let explained = vec![
            rolling(nr("a"), "Progressing"),
            rolling(nr("b"), "Progressing"),
            rolling(nr("c"), "Progressing"),
        ];
        assert_eq!(
            triage(&fleet(explained), &limits).verdict,
            Verdict::Deployment
        );
    }

    #[test]
    fn a_just_finished_rollout_explains_trouble_until_recent_rollout_passes() {
        let finished = |ago: i64| {
            let mut t = sick("a", Symptom::NodesNotReady);
            if let Some(r) = t.rollout.as_mut() {
                r.finished = Some(at(ago));
            }
            run(&fleet(vec![t, tenant("b")])).verdict
        };
        assert_eq!(finished(600), Verdict::Deployment);
        assert_eq!(finished(601), Verdict::Tenant);
    }

    /// DESIGN section 12: per kind of node change, with the tenant's desired state changed
    /// inside or outside `--recent-rollout` (600 s) and the rollout record as the operator
    /// writes it, the verdict for one tenant and for the same in three of four namespaces.
    #[test]
    fn a_recovery_never_explains_trouble_and_a_delivery_does() {
        use crate::{NodeDown, Work};
        // (what, the rollout's state, what moves the node down, the tenant's symptom, whether
        // a delivery made the node Ready 15 s ago with the pod it still has)
        type Kind = (
            &'static str,
            &'static str,
            Option<Work>,
            Option<Symptom>,
            bool,
        );
        let kinds: [Kind; 7] = [
            (
                "a new node provisioned, failing",
                "Failed",
                Some(Work::Delivery),
                Some(Symptom::Failed),
                false,
            ),
            (
                "a revision change, failing",
                "Failed",
                Some(Work::Delivery),
                Some(Symptom::Failed),
                false,
            ),
            (
                "a rollback under way",
                "RollingBack",
                Some(Work::Delivery),
                Some(Symptom::RollingBack),
                false,
            ),
            (
                "a lost pod re-created at its revision, never Ready",
                "Complete",
                Some(Work::Recovery),
                Some(Symptom::NodesNotReady),
                false,
            ),
            (
                "a lost pod not re-created yet",
                "Complete",
                None,
                Some(Symptom::NodesNotReady),
                false,
            ),
            (
                "a bounce under way",
                "Complete",
                Some(Work::Bounce),
                None,
                false,
            ),
            (
                "a new revision Ready, then NotReady with its pod (mid-rollout)",
                "Progressing",
                None,
                Some(Symptom::NodesNotReady),
                true,
            ),
        ];
        for (what, state, work, symptom, delivered) in kinds {
            for desired_changed_ago in [30, 5000] {
                let recent = desired_changed_ago < 600;
                let make = |ns: &str| {
                    let mut t = tenant(ns);
                    t.desired_changed = Some(at(desired_changed_ago));
                    // The node change that put the node down started 15 s ago.
                    t.last_node_change = Some(at(15));
                    t.failed_at = (state == "Failed").then(|| at(10));
                    if let Some(r) = t.rollout.as_mut() {
                        r.state = Some(state.into());
                        r.started = Some(at(desired_changed_ago - 5));
                        r.finished = (state == "Complete").then(|| at(desired_changed_ago - 20));
                    }
                    t.symptoms = symptom.into_iter().collect();
                    t.nodes_down = vec![NodeDown {
                        node: "c-fe2".into(),
                        work,
                        since: Some(at(20)),
                        delivered: delivered.then(|| at(15)),
                    }];
                    t
                };
                let delivery = work == Some(Work::Delivery) || delivered;
                let expected_one = match (symptom, delivery) {
                    (None, _) => Verdict::Healthy,
                    // A delivery explains its trouble while it is under way or halted, and
                    // only when its change followed one of the desired state.
                    (Some(_), true) if recent => Verdict::Deployment,
                    (Some(_), _) => Verdict::Tenant,
                };
                let one = run(&fleet(vec![
                    make("a"),
                    tenant("b"),
                    tenant("c"),
                    tenant("d"),
                ]));
                assert_eq!(
                    one.verdict, expected_one,
                    "{what}, desired state changed {desired_changed_ago}s ago: one tenant"
                );
                let spread = run(&fleet(vec![make("a"), make("b"), make("c"), tenant("d")]));
                let expected_spread = match expected_one {
                    Verdict::Tenant => Verdict::Infrastructure,
                    other => other,
                };
                assert_eq!(
                    spread.verdict, expected_spread,
                    "{what}, desired state changed {desired_changed_ago}s ago: three of four namespaces"
                );
            }
        }
    }

    #[test]
    fn a_stuck_recovery_and_a_bounce_are_named_in_the_evidence() {
        use crate::{NodeDown, Work};
        let down = |ns: &str, work, ago| {
            let mut t = sick(ns, Symptom::NodesNotReady);
            t.nodes_down = vec![NodeDown {
                node: format!("{ns}-fe2"),
                work,
                since: Some(at(ago)),
                delivered: None,
            }];
            t
        };
        let mut bouncing = tenant("c");
        bouncing.nodes_down = vec![NodeDown {
            node: "c-fe1".into(),
            work: Some(Work::Bounce),
            since: Some(at(5)),
            delivered: None,
        }];
        let report = run(&fleet(vec![
            down("a", Some(Work::Recovery), 121),
            down("b", Some(Work::Recovery), 119),
            bouncing,
        ]));
        let spread = report.checks.iter().find(|c| c.name == SPREAD).unwrap();
        assert!(
            spread
                .evidence
                .contains(&"a/c: a-fe2 recovering for 2m1s, stuck (over 2m)".to_string()),
            "{:?}",
            spread.evidence
        );
        assert!(
            !spread.evidence.iter().any(|e| e.starts_with("b/c")),
            "{:?}",
            spread.evidence
        );
        assert!(
            spread
                .evidence
                .contains(&"c/c: c-fe1 bouncing for 5s".to_string()),
            "{:?}",
            spread.evidence
        );
        let a = report.tenants.iter().find(|t| t.namespace == "a").unwrap();
        assert!(a.nodes_down[0].stuck);
        assert!(!a.explained_by_rollout);
        let c = report.tenants.iter().find(|t| t.namespace == "c").unwrap();
        assert!(c.symptoms.is_empty(), "a bounce under way is no symptom");
        assert_eq!(report.verdict, Verdict::Tenant);
    }

    #[test]
    fn a_ring_without_a_lease_is_driven_when_its_tenants_are_observed() {
        let no_lease = Ring {
            lease: LeaseSeen::Missing {
                namespace: "express-system".into(),
                name: "express-operator".into(),
            },
            ..leading()
        };
        let with = |tenants: Vec<Tenant>| {
            let mut f = fleet(tenants);
            f.rings = vec![no_lease.clone()];
            run(&f)
        };
        // Every tenant observed: an operator without leader election; a warning.
        let driven = with(vec![tenant("a"), tenant("b")]);
        assert_eq!(status_of(&driven, OPERATOR), Status::Warn);
        assert_eq!(driven.verdict, Verdict::Healthy);
        let operator = driven.checks.iter().find(|c| c.name == OPERATOR).unwrap();
        assert!(
            operator
                .summary
                .contains("no Lease express-system/express-operator")
                && operator.summary.contains("without leader election"),
            "{}",
            operator.summary
        );
        // A generation unobserved past --stale-after: nobody drives the ring.
        let mut moved = tenant("b");
        moved.generation = 3;
        moved.spec_changed = Some(at(121));
        let nobody = with(vec![tenant("a"), moved]);
        assert_eq!(status_of(&nobody, OPERATOR), Status::Fail);
        assert_eq!(nobody.verdict, Verdict::Infrastructure);
        // A tenant labelled into the ring and owned by nobody (released by its old ring):
        // nobody drives the ring.
        let mut moved_in = tenant("b");
        moved_in.owner_ring = None;
        let stranded = with(vec![tenant("a"), moved_in]);
        assert_eq!(status_of(&stranded, OPERATOR), Status::Fail);
        // No tenant at all: nothing says anyone drives it.
        assert_eq!(status_of(&with(Vec::new()), OPERATOR), Status::Fail);
    }

    #[test]
    fn a_rollout_without_a_change_of_the_desired_state_explains_nothing() {
        // The operator recreated a lost pod long after the last change, and it failed.
        let recreated = |started_after_change: i64| {
            let mut t = rolling(sick("a", Symptom::Failed), "Failed");
            t.desired_changed = Some(at(5000));
            if let Some(r) = t.rollout.as_mut() {
                r.started = Some(at(5000 - started_after_change));
            }
            run(&fleet(vec![t, tenant("b")])).verdict
        };
        assert_eq!(recreated(600), Verdict::Deployment);
        assert_eq!(recreated(601), Verdict::Tenant);
    }

    #[test]
    fn a_lost_pod_replaced_long_after_the_last_change_is_no_deployment() {
        // The rollout record is the provisioning's; the node change that failed is recent.
        let replaced = |change_after: i64| {
            let mut t = rolling(sick("a", Symptom::Failed), "Failed");
            t.desired_changed = Some(at(5000));
            if let Some(r) = t.rollout.as_mut() {
                r.started = Some(at(5000));
            }
            t.last_node_change = Some(at(5000 - change_after));
            run(&fleet(vec![t, tenant("b")])).verdict
        };
        assert_eq!(replaced(600), Verdict::Deployment);
        assert_eq!(replaced(601), Verdict::Tenant);
    }

    #[test]
    fn a_failure_long_after_the_change_could_fail_is_no_deployment() {
        // A replaced pod failing an old change record: the failure comes long after the
        // change started (600 s deadline, 600 s recent-rollout).
        let failed = |after_change: i64| {
            let mut t = rolling(sick("a", Symptom::Failed), "Failed");
            t.last_node_change = Some(at(5000));
            t.desired_changed = Some(at(5000));
            t.failed_at = Some(at(5000 - after_change));
            run(&fleet(vec![t, tenant("b")])).verdict
        };
        assert_eq!(failed(1200), Verdict::Deployment);
        assert_eq!(failed(1201), Verdict::Tenant);
    }

    #[test]
    fn operator_warnings_count_within_since() {
        let warned = |ago: i64| {
            let mut f = fleet(vec![tenant("a")]);
            f.warnings = vec![
                Warning {
                    namespace: "a".into(),
                    reason: "ReconcileError".into(),
                    count: 3,
                    last: Some(at(ago)),
                },
                Warning {
                    namespace: "b".into(),
                    reason: "ReconcileError".into(),
                    count: 1,
                    last: Some(at(ago)),
                },
            ];
            run(&f)
        };
        let inside = warned(900);
        assert_eq!(status_of(&inside, OPERATOR_ERRORS), Status::Warn);
        let check = inside
            .checks
            .iter()
            .find(|c| c.name == OPERATOR_ERRORS)
            .unwrap();
        assert_eq!(
            check.evidence,
            ["ReconcileError: 4 in 2 namespace(s) (a 3, b 1)"]
        );
        assert_eq!(
            inside.verdict,
            Verdict::Healthy,
            "warnings alone decide nothing"
        );
        assert_eq!(status_of(&warned(901), OPERATOR_ERRORS), Status::Ok);
    }

    #[test]
    fn switches_name_every_pause_and_abort() {
        let mut paused_ns = tenant("a");
        paused_ns.pause = Some(("namespace".into(), Some("freeze".into())));
        let mut fleet_wide = tenant("b");
        fleet_wide.pause = Some(("operator-wide".into(), None));
        let mut aborted = tenant("c");
        aborted.aborted = true;
        let report = run(&fleet(vec![paused_ns, fleet_wide, aborted]));
        let switches = report.checks.iter().find(|c| c.name == SWITCHES).unwrap();
        assert_eq!(switches.status, Status::Warn);
        assert_eq!(
            switches.evidence,
            [
                "operator-wide pause in force",
                "namespace a paused (freeze)",
                "c/c: an abort is in force"
            ]
        );
        assert_eq!(report.verdict, Verdict::Healthy);
    }

    #[test]
    fn the_deployment_check_lists_rollouts_in_progress_and_failed() {
        let report = run(&fleet(vec![
            rolling(tenant("a"), "Progressing"),
            rolling(sick("b", Symptom::Failed), "Failed"),
            tenant("c"),
        ]));
        let check = report.checks.iter().find(|c| c.name == DEPLOYMENT).unwrap();
        assert_eq!(check.status, Status::Warn);
        assert_eq!(
            check.summary,
            "1 rollout(s) in progress, 1 failed or aborted, 0 finished in the last 10m"
        );
        assert!(check.evidence[0].starts_with("b/c: Failed at node acme-fe1 since"));
        assert!(check.evidence[1].starts_with("a/c: Progressing since"));
        assert!(
            report.reason.contains("kubectl express abort -n b c"),
            "{}",
            report.reason
        );
    }

    #[test]
    fn the_json_shape_is_stable() {
        let report = run(&fleet(vec![sick("a", Symptom::NodesNotReady)]));
        let json = serde_json::to_value(&report).unwrap();
        assert_eq!(json["verdict"], "tenant");
        assert_eq!(json["checks"][0]["name"], "control-plane");
        assert_eq!(json["checks"][0]["status"], "ok");
        assert!(json["checks"][0]["summary"].is_string());
        assert!(json["checks"][0]["evidence"].is_array());
        assert_eq!(json["tenants"][0]["namespace"], "a");
        assert_eq!(json["tenants"][0]["symptoms"][0], "NodesNotReady");
        assert_eq!(json["tenants"][0]["explainedByRollout"], false);
    }

    #[test]
    fn ages_read_like_kubectl() {
        assert_eq!(age(0), "0s");
        assert_eq!(age(59), "59s");
        assert_eq!(age(95), "1m35s");
        assert_eq!(age(7500), "2h5m");
        assert_eq!(age(-3), "0s");
    }
}
