//! The `release` check (DESIGN sections 12 and 14): a release that rolled back or holds
//! inconclusive warns, and so does a release across DCs that failed, was aborted or holds; a tenant one ring let go and no ring adopted fails (the hand-over a release relies on
//! is broken: an operator-layer problem).

use crate::checks::{age, check, name};
use crate::explain::seconds_between;
use express_api::release::ReleasePhase;

use crate::{Check, Fleet, ReleaseSeenPhase, Status, Thresholds};

/// The check's name, as `-o json` carries it.
pub const RELEASE: &str = "release";

pub(crate) fn release_check(fleet: &Fleet, limits: &Thresholds) -> Check {
    let orphans: Vec<String> = fleet
        .tenants
        .iter()
        .filter_map(|t| {
            let (from, at) = t.released.as_ref()?;
            let since = seconds_between(fleet.now, *at);
            (since > limits.stale_after_seconds).then(|| {
                format!(
                    "{}: released by ring {from} {} ago, adopted by nobody (its label names ring {})",
                    name(t),
                    age(since),
                    t.ring
                )
            })
        })
        .collect();
    let describe = |r: &crate::ReleaseSeen| {
        format!(
            "OperatorRelease {} (ring {} to ring {}) is {}: {}",
            r.name,
            r.from_ring,
            r.to_ring,
            r.phase,
            r.message.as_deref().unwrap_or("no message")
        )
    };
    let mut troubled: Vec<String> = fleet
        .releases
        .iter()
        .filter(|r| r.phase.in_trouble() || r.api_breaking)
        .map(describe)
        .collect();
    // A release across DCs that failed or holds: the DCs compared, not this DC's own layer.
    troubled.extend(
        fleet
            .fleet_releases
            .iter()
            .filter(|r| r.phase.in_trouble())
            .map(|r| {
                format!(
                    "FleetRelease {} (ring {} to ring {}) is {}: {} (`kubectl express fleet-release {}`)",
                    r.name,
                    r.from_ring,
                    r.to_ring,
                    r.phase,
                    r.message.as_deref().unwrap_or("no message"),
                    r.name
                )
            }),
    );
    let running: Vec<String> = fleet
        .releases
        .iter()
        .filter(|r| {
            r.phase != ReleaseSeenPhase::Operator(ReleasePhase::Succeeded)
                && !r.phase.in_trouble()
                && !r.api_breaking
        })
        .map(describe)
        .collect();
    if !orphans.is_empty() {
        let mut evidence = orphans.clone();
        evidence.extend(troubled);
        return check(
            RELEASE,
            Status::Fail,
            format!(
                "{} tenant(s) released by one ring and adopted by no other for over {}: nobody drives them",
                orphans.len(),
                age(limits.stale_after_seconds)
            ),
            evidence,
        );
    }
    if !troubled.is_empty() {
        return check(
            RELEASE,
            Status::Warn,
            format!(
                "{} release(s) rolled back, failed or inconclusive, or refused by the API: `kubectl express release` (or `fleet-release`) says why",
                troubled.len()
            ),
            troubled,
        );
    }
    check(
        RELEASE,
        Status::Ok,
        if running.is_empty() {
            "no release in trouble, no tenant waiting for a new owner".into()
        } else {
            format!("{} release(s) under way, none in trouble", running.len())
        },
        running,
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{ReleaseSeen, Tenant, Verdict, triage};
    use k8s_openapi::jiff::Timestamp;

    const NOW: i64 = 1_800_000_000;

    fn at(seconds_ago: i64) -> Timestamp {
        Timestamp::from_second(NOW - seconds_ago).unwrap_or_default()
    }

    fn released(ago: i64) -> Tenant {
        Tenant {
            namespace: "team-a".into(),
            cluster: "shop".into(),
            ring: "canary".into(),
            released: Some(("default".into(), at(ago))),
            generation: 1,
            observed_generation: Some(1),
            ..Tenant::default()
        }
    }

    fn seen(phase: ReleaseSeenPhase) -> ReleaseSeen {
        ReleaseSeen {
            name: "to-0-2-0".into(),
            from_ring: "default".into(),
            to_ring: "canary".into(),
            phase,
            message: Some("why".into()),
            api_breaking: false,
        }
    }

    fn release(phase: &str) -> ReleaseSeen {
        let named = ReleasePhase::ALL.into_iter().find(|p| p.as_str() == phase);
        seen(ReleaseSeenPhase::Operator(named.unwrap_or_default()))
    }

    fn fleet_release(phase: &str) -> ReleaseSeen {
        use express_api::fleet_release::FleetPhase;
        let named = FleetPhase::ALL.into_iter().find(|p| p.as_str() == phase);
        seen(ReleaseSeenPhase::Fleet(named.unwrap_or_default()))
    }

    fn fleet(tenants: Vec<Tenant>, releases: Vec<ReleaseSeen>) -> Fleet {
        Fleet {
            now: at(0),
            tenants,
            releases,
            ..Fleet::default()
        }
    }

    #[test]
    fn each_case_of_the_release_check() {
        let limits = Thresholds::default();
        let rows: Vec<(&str, Fleet, Status, &str)> = vec![
            (
                "nothing",
                fleet(vec![], vec![]),
                Status::Ok,
                "no release in trouble",
            ),
            (
                "a release under way",
                fleet(vec![], vec![release("Progressing")]),
                Status::Ok,
                "1 release(s) under way",
            ),
            (
                "succeeded",
                fleet(vec![], vec![release("Succeeded")]),
                Status::Ok,
                "no release in trouble",
            ),
            (
                "rolled back",
                fleet(vec![], vec![release("RolledBack")]),
                Status::Warn,
                "rolled back, failed or inconclusive",
            ),
            (
                "refused by the API",
                fleet(
                    vec![],
                    vec![ReleaseSeen {
                        api_breaking: true,
                        ..release("Pending")
                    }],
                ),
                Status::Warn,
                "refused by the API",
            ),
            (
                "inconclusive",
                fleet(vec![], vec![release("Inconclusive")]),
                Status::Warn,
                "rolled back, failed or inconclusive",
            ),
            (
                "a release across DCs that failed: a warning, never the verdict",
                Fleet {
                    fleet_releases: vec![fleet_release("Failed")],
                    ..fleet(vec![], vec![])
                },
                Status::Warn,
                "rolled back, failed or inconclusive",
            ),
            (
                "a release across DCs under way",
                Fleet {
                    fleet_releases: vec![fleet_release("Soaking")],
                    ..fleet(vec![], vec![])
                },
                Status::Ok,
                "no release in trouble",
            ),
            (
                "a hand-over under way",
                fleet(vec![released(30)], vec![]),
                Status::Ok,
                "no release in trouble",
            ),
            (
                "a tenant adopted by nobody",
                fleet(vec![released(300)], vec![release("RolledBack")]),
                Status::Fail,
                "1 tenant(s) released by one ring and adopted by no other for over 2m",
            ),
        ];
        for (case, fleet, status, says) in rows {
            let got = release_check(&fleet, &limits);
            assert_eq!(got.status, status, "{case}: {got:?}");
            assert!(got.summary.contains(says), "{case}: {}", got.summary);
        }
    }

    #[test]
    fn an_orphaned_tenant_is_the_operator_layer() {
        let report = triage(&fleet(vec![released(300)], vec![]), &Thresholds::default());
        assert_eq!(report.verdict, Verdict::Infrastructure, "{}", report.reason);
        let check = report.checks.iter().find(|c| c.name == RELEASE);
        let evidence = check.map(|c| c.evidence.join("\n")).unwrap_or_default();
        assert!(
            evidence.contains("team-a/shop: released by ring default 5m ago, adopted by nobody (its label names ring canary)"),
            "{evidence}"
        );
    }
}
