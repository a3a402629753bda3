//! The release step (DESIGN section 12): the judge's verdict for each signal on each side of
//! its threshold, wave sizes and order, and the phase machine on a paused clock, a row per
//! transition; then a simulated fleet that restarts the judging operator after any write.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use express_api::analysis::{Signal, SignalVerdict, Worse};
use express_api::api_record::{ApiOutcome, ApiRecord, CONDITION_API_COMPATIBLE, CrdGeneration};
use express_api::release::{
    CONDITION_TO_RING_LED, OperatorReleaseSpec, OperatorReleaseStatus, ReleasePhase, SampleVerdict,
    Wave,
};
use express_planner::analysis::{Analysis, SignalSeries, floor};
use express_planner::release::{
    Direction, Leader, ReleaseSnapshot, ReleaseStep, ReleaseTenant, Requests, judge, reason,
    sample_due, step,
};
use express_triage::rings::RingHealth;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use k8s_openapi::jiff::Timestamp;
use proptest::prelude::*;

const T0: i64 = 1_800_000_000;

fn at(seconds: i64) -> Timestamp {
    Timestamp::from_second(T0 + seconds).unwrap()
}

fn health(ring: &str, tenants: usize, unhealthy: usize) -> RingHealth {
    RingHealth {
        ring: ring.into(),
        tenants,
        unhealthy: (0..unhealthy).map(|i| format!("ns{i}/shop")).collect(),
        ..RingHealth::default()
    }
}

fn down(mut h: RingHealth, why: &str) -> RingHealth {
    h.operator = Some(why.into());
    h
}

// ---- the judge ----

/// A name, fromRing, toRing, the tenants adopted late, the verdict, what its reason says.
type JudgeRow = (
    &'static str,
    RingHealth,
    RingHealth,
    Vec<String>,
    SampleVerdict,
    &'static str,
);

#[test]
fn judge_each_signal_on_each_side() {
    let fine_from = health("default", 100, 0);
    let fine_to = health("canary", 10, 0);
    let rows: Vec<JudgeRow> = vec![
        (
            "both fine",
            fine_from.clone(),
            fine_to.clone(),
            vec![],
            SampleVerdict::Ok,
            "0 of 10",
        ),
        (
            "toRing's leader gone",
            fine_from.clone(),
            down(fine_to.clone(), "ring canary: Lease expired"),
            vec![],
            SampleVerdict::Failed,
            "Lease expired",
        ),
        (
            "toRing behind",
            fine_from.clone(),
            RingHealth {
                behind: Some("the operator is behind on 3 tenant(s)".into()),
                ..fine_to.clone()
            },
            vec![],
            SampleVerdict::Failed,
            "behind on 3",
        ),
        (
            "a moved tenant not adopted in time",
            fine_from.clone(),
            fine_to.clone(),
            vec!["a/shop".into()],
            SampleVerdict::Failed,
            "not adopted by ring canary within 120s: a/shop",
        ),
        (
            "objects toRing cannot read",
            fine_from.clone(),
            RingHealth {
                unreadable: vec!["a/shop".into()],
                ..fine_to.clone()
            },
            vec![],
            SampleVerdict::Failed,
            "cannot read 1 tenant(s)",
        ),
        (
            "toRing unhealthy past the margin",
            fine_from.clone(),
            health("canary", 10, 2),
            vec![],
            SampleVerdict::Failed,
            "2 of 10 tenant(s) unhealthy (20%)",
        ),
        (
            "toRing unhealthy within the margin",
            fine_from.clone(),
            health("canary", 10, 1),
            vec![],
            SampleVerdict::Ok,
            "1 of 10",
        ),
        (
            "toRing no worse than fromRing's own share",
            health("default", 100, 15),
            health("canary", 10, 2),
            vec![],
            SampleVerdict::Inconclusive,
            "both rings in trouble alike",
        ),
        (
            "fromRing unhealthy, toRing clean",
            health("default", 100, 30),
            fine_to.clone(),
            vec![],
            SampleVerdict::Ok,
            "0 of 10",
        ),
        (
            "both operators in trouble",
            down(fine_from.clone(), "ring default: behind"),
            down(fine_to.clone(), "ring canary: behind"),
            vec![],
            SampleVerdict::Inconclusive,
            "both rings in trouble",
        ),
        (
            "fromRing in trouble, toRing fine",
            down(fine_from.clone(), "ring default: crash-looping"),
            fine_to.clone(),
            vec![],
            SampleVerdict::Ok,
            "is not worse",
        ),
        (
            "every tenant down in both (the kubelet)",
            health("default", 10, 10),
            health("canary", 10, 10),
            vec![],
            SampleVerdict::Inconclusive,
            "alike",
        ),
    ];
    for (name, from, to, late, verdict, says) in rows {
        let (got, why) = judge(&from, &to, &late, 120, 10);
        assert_eq!(got, verdict, "{name}: {why}");
        assert!(why.contains(says), "{name}: {why:?} should say {says:?}");
    }
}

// ---- a small world the step acts on ----

fn spec(waves: Vec<Wave>) -> OperatorReleaseSpec {
    OperatorReleaseSpec {
        from_ring: "default".into(),
        to_ring: "canary".into(),
        version: None,
        waves,
        bake_seconds: 60,
        interval_seconds: 10,
        failure_limit: 1,
        adoption_deadline_seconds: 30,
        leader_deadline_seconds: 60,
        max_hand_overs: 100,
        unhealthy_margin_percent: 10,
        paused: false,
        analysis: None,
    }
}

fn percent(p: u32) -> Wave {
    Wave {
        tenants: None,
        percent: Some(p),
    }
}

fn tenants(n: u32) -> Wave {
    Wave {
        tenants: Some(n),
        percent: None,
    }
}

fn fleet(n: usize) -> Vec<ReleaseTenant> {
    (0..n)
        .map(|i| ReleaseTenant {
            namespace: format!("team-{}", i % 4),
            name: format!("shop-{i}"),
            driven_by: Some("default".into()),
            ..ReleaseTenant::default()
        })
        .collect()
}

const RELEASE_UID: &str = "3f1c-release";

/// A live leader of toRing reporting `version`, whose check of its CRDs ended in `outcome`.
fn leader(holder: &str, version: &str, outcome: ApiOutcome) -> Leader {
    Leader {
        holder: holder.into(),
        version: Some(version.into()),
        api: Some(api_record(version, outcome)),
    }
}

fn api_record(build: &str, outcome: ApiOutcome) -> ApiRecord {
    ApiRecord {
        outcome,
        build: build.into(),
        release_uid: Some(RELEASE_UID.into()),
        crds: vec![CrdGeneration {
            name: "expressclusters.express.dev".into(),
            before: Some(1),
            after: Some(if outcome == ApiOutcome::Applied { 2 } else { 1 }),
        }],
        objects_checked: 5,
        problems: if outcome == ApiOutcome::Breaking {
            vec!["expressclusters.express.dev v1alpha1 .spec.clusterName: maxLength lowered; team-1/shop-1".into()]
        } else {
            Vec::new()
        },
        checked_at: Time(at(0)),
    }
}

fn condition(w: &World, type_: &str) -> Option<(String, String)> {
    w.status
        .conditions
        .iter()
        .find(|c| c.type_ == type_)
        .map(|c| (c.status.clone(), c.reason.clone()))
}

struct World {
    spec: OperatorReleaseSpec,
    status: OperatorReleaseStatus,
    tenants: Vec<ReleaseTenant>,
    requests: Requests,
    leader: Option<Leader>,
    /// What the next sample sees: (fromRing unhealthy, toRing unhealthy); None: no sample,
    /// for the reason in `no_sample`.
    sick: Option<(usize, usize)>,
    no_sample: String,
    /// toRing adopts what it is given.
    adopts: bool,
    /// What the operator would read of the vital signs when a sample is due.
    vital: Option<Analysis>,
    now: i64,
    moves_forward: std::collections::HashMap<String, usize>,
    moves_back: std::collections::HashMap<String, usize>,
}

impl World {
    fn new(spec: OperatorReleaseSpec, n: usize) -> World {
        World {
            spec,
            status: OperatorReleaseStatus::default(),
            tenants: fleet(n),
            requests: Requests::default(),
            leader: Some(leader("canary-1", "0.2.0", ApiOutcome::Current)),
            sick: Some((0, 0)),
            no_sample: "could not read leases: forbidden".into(),
            adopts: true,
            vital: None,
            now: 0,
            moves_forward: Default::default(),
            moves_back: Default::default(),
        }
    }

    fn ring_health(&self) -> Result<(RingHealth, RingHealth), String> {
        let (from_sick, to_sick) = self.sick.ok_or_else(|| self.no_sample.clone())?;
        let on = |ring: &str| self.tenants.iter().filter(|t| t.ring() == ring).count();
        Ok((
            health("default", on("default"), from_sick),
            health("canary", on("canary"), to_sick),
        ))
    }

    fn step(&mut self) -> ReleaseStep {
        let now = at(self.now);
        let due = sample_due(&self.spec, &self.status, now);
        let snapshot = ReleaseSnapshot {
            name: "to-0-2-0",
            uid: Some(RELEASE_UID),
            generation: Some(1),
            spec: &self.spec,
            status: &self.status,
            requests: self.requests.clone(),
            tenants: &self.tenants,
            to_leader: self.leader.clone(),
            health: due.then(|| self.ring_health()),
            analysis: if due { self.vital.clone() } else { None },
            now,
        };
        step(&snapshot)
    }

    /// A step, its status recorded, its moves made; then the rings adopt what their labels say.
    fn tick(&mut self) -> ReleaseStep {
        let result = self.step();
        self.status = result.status.clone();
        for m in &result.moves {
            let t = self
                .tenants
                .iter_mut()
                .find(|t| t.namespace == m.namespace && t.name == m.name)
                .unwrap();
            let key = format!("{}/{}", t.namespace, t.name);
            let tally = match m.direction {
                Direction::Forward => &mut self.moves_forward,
                Direction::Back => &mut self.moves_back,
            };
            *tally.entry(key).or_default() += 1;
            t.label = (m.to_ring != "default").then(|| m.to_ring.clone());
            t.released_by = Some("to-0-2-0".into());
            t.moved_at = Some(at(self.now));
            t.driven_by = None;
        }
        self.adopt();
        self.now += 1;
        result
    }

    fn adopt(&mut self) {
        for t in &mut self.tenants {
            if t.driven_by.is_none() && (self.adopts || t.ring() == "default") {
                t.driven_by = Some(t.ring().to_owned());
            }
        }
    }

    fn run_until(&mut self, limit: i64, done: impl Fn(&World) -> bool) {
        while !done(self) {
            assert!(
                self.now < limit,
                "not reached by t={limit}: {:?}",
                self.status
            );
            self.tick();
        }
    }

    fn on_canary(&self) -> usize {
        self.tenants.iter().filter(|t| t.ring() == "canary").count()
    }
}

fn phase(w: &World) -> ReleasePhase {
    w.status.phase()
}

#[test]
fn pending_without_a_live_leader_of_to_ring() {
    let mut w = World::new(spec(vec![percent(100)]), 5);
    w.leader = None;
    let r = w.tick();
    assert_eq!(phase(&w), ReleasePhase::Pending);
    assert!(r.moves.is_empty());
    assert!(
        w.status
            .message
            .as_deref()
            .unwrap_or("")
            .contains("Lease express-operator-canary")
    );
    assert_eq!(r.wake_at, Some(at(10)));
}

#[test]
fn pending_while_to_ring_reports_another_build() {
    let mut w = World::new(
        OperatorReleaseSpec {
            version: Some("0.3.0".into()),
            ..spec(vec![percent(100)])
        },
        5,
    );
    let r = w.tick();
    assert_eq!(phase(&w), ReleasePhase::Pending);
    assert!(r.moves.is_empty());
    let message = w.status.message.clone().unwrap_or_default();
    assert!(
        message.contains("reporting build 0.2.0, not 0.3.0"),
        "{message}"
    );
    w.leader = Some(leader("canary-2", "0.3.0", ApiOutcome::Applied));
    let r = w.tick();
    assert_eq!(phase(&w), ReleasePhase::Progressing);
    assert_eq!(r.moves.len(), 5);
}

#[test]
fn nothing_moves_before_to_rings_build_records_its_api() {
    let mut w = World::new(spec(vec![percent(100)]), 5);
    w.leader = Some(Leader {
        api: None,
        ..leader("canary-1", "0.2.0", ApiOutcome::Applied)
    });
    let r = w.tick();
    assert!(r.moves.is_empty());
    assert_eq!(phase(&w), ReleasePhase::Pending);
    assert_eq!(
        condition(&w, CONDITION_API_COMPATIBLE),
        Some(("Unknown".into(), "Checking".into()))
    );
    // A record made for another release (an earlier one to the same ring) is not this one's.
    let mut earlier = api_record("0.2.0", ApiOutcome::Current);
    earlier.release_uid = Some("an-earlier-release".into());
    w.leader = Some(Leader {
        api: Some(earlier),
        ..leader("canary-1", "0.2.0", ApiOutcome::Applied)
    });
    assert!(w.tick().moves.is_empty());
    // A record of another build (the one before a restart) is not this build's.
    w.leader = Some(Leader {
        api: Some(api_record("0.1.0", ApiOutcome::Applied)),
        ..leader("canary-1", "0.2.0", ApiOutcome::Applied)
    });
    assert!(w.tick().moves.is_empty());
    w.leader = Some(leader("canary-1", "0.2.0", ApiOutcome::Applied));
    let r = w.tick();
    assert_eq!(r.moves.len(), 5);
    assert_eq!(
        condition(&w, CONDITION_API_COMPATIBLE),
        Some(("True".into(), "Applied".into()))
    );
    assert_eq!(w.status.api, Some(api_record("0.2.0", ApiOutcome::Applied)));
    let ready: Vec<_> = r
        .notices
        .iter()
        .filter(|n| n.reason == reason::API_READY)
        .collect();
    assert_eq!(ready.len(), 1);
    assert!(!ready[0].warning);
    assert!(
        ready[0].message.contains("generation 1→2"),
        "{}",
        ready[0].message
    );
    // Once started, the record no longer matters: the Lease may be re-written or lost.
    w.leader = None;
    w.tick();
    assert_eq!(w.status.api, Some(api_record("0.2.0", ApiOutcome::Applied)));
    assert_ne!(phase(&w), ReleasePhase::Pending);
}

#[test]
fn a_build_that_never_checks_its_api_fails_the_release_at_the_adoption_deadline() {
    let mut w = World::new(spec(vec![percent(100)]), 4);
    w.leader = Some(Leader {
        api: None,
        ..leader("canary-1", "0.2.0", ApiOutcome::Applied)
    });
    let deadline = w.spec.adoption_deadline_seconds as i64;
    assert!(w.tick().moves.is_empty());
    // A tick moves the clock one second: this one is exactly at the deadline.
    w.now += deadline - 1;
    w.tick();
    assert_eq!(
        phase(&w),
        ReleasePhase::Pending,
        "not yet past the deadline"
    );
    w.now += 2;
    let r = w.tick();
    assert!(r.moves.is_empty());
    assert_eq!(phase(&w), ReleasePhase::RolledBack);
    let why = w.status.rollback_reason.clone().unwrap_or_default();
    assert!(why.contains("did not check its CRDs"), "{why}");
    // The same when the build stops leading while it is waited for.
    let mut gone = World::new(spec(vec![percent(100)]), 4);
    gone.leader = Some(Leader {
        api: None,
        ..leader("canary-1", "0.2.0", ApiOutcome::Applied)
    });
    gone.tick();
    gone.leader = None;
    gone.now += deadline + 1;
    gone.tick();
    assert_eq!(phase(&gone), ReleasePhase::RolledBack);
    // A record arriving later changes nothing: the release is over.
    w.leader = Some(leader("canary-1", "0.2.0", ApiOutcome::Applied));
    assert!(w.tick().moves.is_empty());
    assert_eq!(phase(&w), ReleasePhase::RolledBack);
}

#[test]
fn a_to_ring_never_led_fails_the_release_at_the_leader_deadline() {
    let mut w = World::new(spec(vec![percent(100)]), 4);
    w.leader = None;
    let deadline = w.spec.leader_deadline_seconds as i64;
    assert!(w.tick().moves.is_empty());
    assert_eq!(
        condition(&w, CONDITION_TO_RING_LED),
        Some(("Unknown".into(), reason::LEADER_AWAITED.into()))
    );
    // A tick moves the clock one second: this one is exactly at the deadline.
    w.now += deadline - 1;
    w.tick();
    assert_eq!(
        phase(&w),
        ReleasePhase::Pending,
        "not yet past the deadline"
    );
    w.now += 2;
    let r = w.tick();
    assert!(r.moves.is_empty());
    assert_eq!(phase(&w), ReleasePhase::RolledBack);
    let why = w.status.rollback_reason.clone().unwrap_or_default();
    assert!(
        why.contains("ring canary had no live leader running the build asked for within 60s (leaderDeadlineSeconds)")
            && why.contains("Lease express-operator-canary"),
        "{why}"
    );
    assert_eq!(
        condition(&w, CONDITION_TO_RING_LED),
        Some(("False".into(), reason::NO_LEADER.into()))
    );
    assert!(r.notices.iter().any(|n| n.reason == reason::ROLLED_BACK));
    // A leader arriving later changes nothing: the release is over.
    w.leader = Some(leader("canary-1", "0.2.0", ApiOutcome::Current));
    assert!(w.tick().moves.is_empty());
    assert_eq!(phase(&w), ReleasePhase::RolledBack);
}

#[test]
fn a_to_ring_led_by_another_build_fails_at_the_leader_deadline_too() {
    let mut w = World::new(
        OperatorReleaseSpec {
            version: Some("0.3.0".into()),
            ..spec(vec![percent(100)])
        },
        4,
    );
    w.tick();
    w.now += w.spec.leader_deadline_seconds as i64 + 1;
    w.tick();
    assert_eq!(phase(&w), ReleasePhase::RolledBack);
    let why = w.status.rollback_reason.clone().unwrap_or_default();
    assert!(why.contains("reporting build 0.2.0, not 0.3.0"), "{why}");
}

#[test]
fn a_leader_in_time_is_recorded_and_the_release_goes_on() {
    let mut w = World::new(spec(vec![percent(100)]), 4);
    w.leader = None;
    w.tick();
    w.now += w.spec.leader_deadline_seconds as i64 - 5;
    w.leader = Some(leader("canary-1", "0.2.0", ApiOutcome::Current));
    let r = w.tick();
    assert_eq!(r.moves.len(), 4);
    assert_eq!(
        condition(&w, CONDITION_TO_RING_LED),
        Some(("True".into(), reason::LED.into()))
    );
    // Once started, toRing's leader is the samples' concern, not this deadline's.
    w.leader = None;
    w.now += 10 * w.spec.leader_deadline_seconds as i64;
    w.tick();
    assert_ne!(
        w.status
            .rollback_reason
            .as_deref()
            .map(|r| r.contains("leaderDeadlineSeconds")),
        Some(true)
    );
}

#[test]
fn a_pause_stops_the_leader_clock_and_zero_waits_for_ever() {
    let mut w = World::new(spec(vec![percent(100)]), 4);
    w.leader = None;
    w.tick();
    w.now += 50;
    w.spec.paused = true;
    w.tick();
    w.now += 500;
    w.tick();
    assert_eq!(phase(&w), ReleasePhase::Paused);
    w.spec.paused = false;
    w.tick();
    assert_eq!(
        phase(&w),
        ReleasePhase::Pending,
        "the wait starts again on resume"
    );
    w.now += w.spec.leader_deadline_seconds as i64 - 1;
    w.tick();
    assert_eq!(phase(&w), ReleasePhase::Pending);
    w.now += 2;
    w.tick();
    assert_eq!(phase(&w), ReleasePhase::RolledBack);

    let mut forever = World::new(
        OperatorReleaseSpec {
            leader_deadline_seconds: 0,
            ..spec(vec![percent(100)])
        },
        4,
    );
    forever.leader = None;
    forever.tick();
    forever.now += 1_000_000;
    forever.tick();
    assert_eq!(phase(&forever), ReleasePhase::Pending);
}

#[test]
fn a_breaking_api_moves_nothing_says_why_once_and_goes_on_when_fixed() {
    let mut w = World::new(spec(vec![percent(100)]), 5);
    w.leader = Some(leader("canary-1", "0.2.0", ApiOutcome::Breaking));
    let first = w.tick();
    let second = w.tick();
    assert!(first.moves.is_empty() && second.moves.is_empty());
    assert_eq!(phase(&w), ReleasePhase::Pending);
    assert_eq!(
        condition(&w, CONDITION_API_COMPATIBLE),
        Some(("False".into(), "Breaking".into()))
    );
    let message = w.status.message.clone().unwrap_or_default();
    assert!(
        message.starts_with("nothing moves: build 0.2.0's CRDs would break"),
        "{message}"
    );
    assert!(message.contains("team-1/shop-1"), "{message}");
    let warnings = |r: &ReleaseStep| {
        r.notices
            .iter()
            .filter(|n| n.reason == reason::API_BREAKING && n.warning)
            .count()
    };
    assert_eq!((warnings(&first), warnings(&second)), (1, 0));
    let since = w
        .status
        .conditions
        .iter()
        .find(|c| c.type_ == CONDITION_API_COMPATIBLE)
        .map(|c| c.last_transition_time.clone());
    // The stored object fixed, the build checks again and applies: the release goes on.
    w.leader = Some(leader("canary-1", "0.2.0", ApiOutcome::Applied));
    let r = w.tick();
    assert_eq!(r.moves.len(), 5);
    assert_eq!(
        condition(&w, CONDITION_API_COMPATIBLE),
        Some(("True".into(), "Applied".into()))
    );
    let moved = w
        .status
        .conditions
        .iter()
        .find(|c| c.type_ == CONDITION_API_COMPATIBLE)
        .map(|c| c.last_transition_time.clone());
    assert_ne!(since, moved, "a transition moves lastTransitionTime");
}

#[test]
fn an_older_build_on_newer_compatible_crds_goes_on() {
    let mut w = World::new(spec(vec![percent(100)]), 3);
    w.leader = Some(leader("canary-1", "0.2.0", ApiOutcome::Newer));
    assert_eq!(w.tick().moves.len(), 3);
    assert_eq!(
        condition(&w, CONDITION_API_COMPATIBLE),
        Some(("True".into(), "Newer".into()))
    );
}

fn vital(canary: f64, baseline: f64) -> Analysis {
    let values = |center: f64| (0..30).map(|i| center + f64::from(i % 3) * 0.1).collect();
    Analysis {
        baseline: "ring default".into(),
        signals: Ok(vec![SignalSeries {
            name: Signal::ApiRequestsPerReconcile.as_str().into(),
            worse: Worse::Higher,
            floor: floor(Signal::ApiRequestsPerReconcile),
            canary: Ok(values(canary)),
            baseline: Ok(values(baseline)),
            quiet: None,
        }]),
    }
}

#[test]
fn a_worse_vital_sign_fails_samples_and_rolls_back_naming_the_signal() {
    let mut w = World::new(spec(vec![percent(100)]), 4);
    w.spec.failure_limit = 1;
    w.vital = Some(vital(15.0, 5.0));
    for _ in 0..40 {
        w.tick();
        if phase(&w) == ReleasePhase::RolledBack {
            break;
        }
    }
    assert_eq!(phase(&w), ReleasePhase::RolledBack);
    let why = w.status.rollback_reason.clone().unwrap_or_default();
    assert!(why.contains("apiRequestsPerReconcile"), "{why}");
    let analysis = w.status.analysis.clone().unwrap_or_default();
    assert_eq!(analysis.baseline, "ring default");
    assert_eq!(analysis.signals[0].verdict, SignalVerdict::Worse);
    assert!(analysis.signals[0].canary > analysis.signals[0].baseline);
    assert!(
        analysis
            .history
            .iter()
            .all(|h| h.worse == ["apiRequestsPerReconcile"])
    );
}

#[test]
fn every_sample_leaves_its_verdict_and_figures_in_an_event() {
    let mut w = World::new(spec(vec![percent(100)]), 4);
    w.spec.failure_limit = 5;
    w.vital = Some(vital(5.0, 5.0));
    let mut said = Vec::new();
    for _ in 0..25 {
        said.extend(w.tick().notices);
    }
    let sampled: Vec<_> = said
        .iter()
        .filter(|n| n.reason == reason::SAMPLED)
        .collect();
    let taken = &w.status.samples;
    assert_eq!(
        sampled.len() as u32,
        taken.ok,
        "one event for every ok sample"
    );
    assert!(sampled.len() >= 2, "{said:?}");
    for (i, n) in sampled.iter().enumerate() {
        assert!(!n.warning);
        assert!(
            n.message.starts_with(&format!("sample {} Ok: ", i + 1))
                && n.message.contains(
                    "signals (canary vs baseline): apiRequestsPerReconcile 5.100 vs 5.100 (Ok)"
                ),
            "{}",
            n.message
        );
    }
    // A failed sample's event names its figures too.
    w.vital = Some(vital(15.0, 5.0));
    let failed: Vec<_> = (0..40)
        .flat_map(|_| w.tick().notices)
        .filter(|n| n.reason == reason::SAMPLE_FAILED)
        .collect();
    assert!(
        failed.first().is_some_and(|n| n.warning
            && n.message
                .contains("apiRequestsPerReconcile 15.100 vs 5.100 (Worse)")),
        "{failed:?}"
    );
    // Without vital signs, the tenants' verdict alone.
    let mut plain = World::new(spec(vec![percent(100)]), 4);
    let said: Vec<_> = (0..25).flat_map(|_| plain.tick().notices).collect();
    let first = said.iter().find(|n| n.reason == reason::SAMPLED);
    assert!(
        first.is_some_and(
            |n| n.message.starts_with("sample 1 Ok: ") && !n.message.contains("signals")
        ),
        "{said:?}"
    );
}

#[test]
fn healthy_vital_signs_let_the_release_succeed_and_no_data_holds_it() {
    let mut w = World::new(spec(vec![percent(100)]), 4);
    w.vital = Some(vital(5.0, 5.0));
    for _ in 0..200 {
        w.tick();
    }
    assert_eq!(phase(&w), ReleasePhase::Succeeded);
    assert_eq!(w.status.samples.failed, 0);
    assert!(
        w.status
            .analysis
            .as_ref()
            .is_some_and(|a| a.signals[0].verdict == SignalVerdict::Ok)
    );

    let mut held = World::new(spec(vec![percent(100)]), 4);
    held.vital = Some(Analysis {
        baseline: "ring default".into(),
        signals: Err("connection refused".into()),
    });
    for _ in 0..30 {
        held.tick();
    }
    assert_eq!(phase(&held), ReleasePhase::Inconclusive);
    let last = held
        .status
        .last_samples
        .last()
        .map(|s| s.reason.clone())
        .unwrap_or_default();
    assert!(
        last.contains("no data: Prometheus: connection refused"),
        "{last}"
    );
}

#[test]
fn an_invalid_spec_is_refused_once_and_moves_nothing() {
    let mut w = World::new(spec(vec![percent(50)]), 5);
    let first = w.tick();
    let second = w.tick();
    assert_eq!(phase(&w), ReleasePhase::Pending);
    assert!(first.moves.is_empty() && second.moves.is_empty());
    assert_eq!(
        first
            .notices
            .iter()
            .filter(|n| n.reason == reason::INVALID_SPEC)
            .count(),
        1
    );
    assert!(second.notices.is_empty());
    let valid = w
        .status
        .conditions
        .iter()
        .find(|c| c.type_ == "Valid")
        .unwrap();
    assert_eq!(valid.status, "False");
    assert!(valid.message.contains("the last wave is 50%"));
}

#[test]
fn waves_move_in_a_stable_order_spread_over_namespaces() {
    let mut a = World::new(spec(vec![percent(50), percent(100)]), 20);
    let mut b = World::new(spec(vec![percent(50), percent(100)]), 20);
    b.tenants.reverse();
    let (ra, rb) = (a.tick(), b.tick());
    let names = |r: &ReleaseStep| {
        let mut v: Vec<String> = r
            .moves
            .iter()
            .map(|m| format!("{}/{}", m.namespace, m.name))
            .collect();
        v.sort();
        v
    };
    assert_eq!(ra.moves.len(), 10);
    assert_eq!(
        names(&ra),
        names(&rb),
        "the order does not depend on the listing"
    );
    let namespaces: std::collections::BTreeSet<&str> =
        ra.moves.iter().map(|m| m.namespace.as_str()).collect();
    assert!(namespaces.len() >= 3, "{namespaces:?}");
}

#[test]
fn wave_targets_round_up_and_pinned_tenants_are_never_moved() {
    let mut w = World::new(spec(vec![tenants(1), percent(10), percent(100)]), 12);
    w.tenants[0].label = Some("canary".into()); // pinned by someone
    w.tenants[1].label = Some("default".into()); // pinned to the trusted ring
    let r = w.tick();
    assert_eq!(r.moves.len(), 1);
    assert_eq!(w.status.pinned_tenants, 2);
    assert_eq!(w.status.movable_tenants, 10);
    w.run_until(400, |w| phase(w) == ReleasePhase::Succeeded);
    assert_eq!(w.on_canary(), 11, "10 moved plus the one pinned there");
    assert!(w.tenants[1].label.as_deref() == Some("default"));
    assert!(w.tenants[0].released_by.is_none() && w.tenants[1].released_by.is_none());
    // Waves: 1, then ceil(10% of 10) = 1 (already there), then all 10.
    let targets: Vec<u32> = w.status.waves.iter().map(|x| x.target).collect();
    assert_eq!(targets, vec![1, 1, 10]);
}

#[test]
fn a_wave_bakes_on_ok_samples_before_the_next() {
    let mut w = World::new(spec(vec![tenants(2), percent(100)]), 10);
    w.tick();
    assert_eq!(w.on_canary(), 2);
    // Baking: the next wave starts only after bakeSeconds of ok samples.
    w.run_until(200, |w| w.status.wave == 1);
    let bake_since = w.status.waves[0].bake_since.clone().unwrap().0;
    let finished = w.status.waves[0].finished_at.clone().unwrap().0;
    assert!(finished.as_second() - bake_since.as_second() >= 60);
    assert_eq!(w.on_canary(), 2, "nothing moves before the next step");
    let message = w.status.message.clone().unwrap_or_default();
    assert_eq!(
        message,
        "wave 2 of 2 (100%): 10 tenant(s) to ring canary, moving"
    );
    w.tick();
    assert_eq!(w.on_canary(), 10);
}

#[test]
fn a_bad_sample_restarts_the_bake() {
    let mut w = World::new(spec(vec![tenants(2), percent(100)]), 10);
    w.spec.failure_limit = 5;
    w.run_until(100, |w| {
        w.status
            .waves
            .first()
            .is_some_and(|x| x.bake_since.is_some())
    });
    w.run_until(100, |w| w.now >= 40);
    w.sick = Some((0, 2));
    w.run_until(100, |w| w.status.samples.failed == 1);
    assert_eq!(w.status.waves[0].bake_since, None);
    w.sick = Some((0, 0));
    w.run_until(300, |w| w.status.wave == 1);
    let wave = &w.status.waves[0];
    let baked = wave.finished_at.as_ref().unwrap().0.as_second()
        - wave.bake_since.as_ref().unwrap().0.as_second();
    assert!(baked >= 60, "{baked}");
}

#[test]
fn failures_past_the_limit_roll_back_every_moved_tenant_once() {
    let mut w = World::new(spec(vec![percent(50), percent(100)]), 10);
    w.tick();
    assert_eq!(w.on_canary(), 5);
    w.sick = Some((0, 3));
    w.run_until(100, |w| phase(w) == ReleasePhase::RolledBack);
    assert_eq!(w.status.samples.failed, 2, "one over the limit of 1");
    w.run_until(200, |w| {
        w.on_canary() == 0
            && w.tenants
                .iter()
                .all(|t| t.driven_by.as_deref() == Some("default"))
    });
    // A rolled-back release never moves a tenant forward again.
    w.sick = Some((0, 0));
    for _ in 0..50 {
        let r = w.tick();
        assert!(r.moves.is_empty());
    }
    assert!(w.moves_forward.values().all(|n| *n == 1));
    assert!(w.moves_back.values().all(|n| *n == 1));
    assert_eq!(w.moves_back.len(), 5);
    let message = w.status.message.clone().unwrap_or_default();
    assert!(
        message.contains("rolled back: 2 failed samples"),
        "{message}"
    );
    assert!(
        message.contains("driven by ring default again"),
        "{message}"
    );
}

#[test]
fn a_to_ring_that_never_adopts_fails_at_the_deadline() {
    let mut w = World::new(spec(vec![tenants(1), percent(100)]), 4);
    w.adopts = false;
    w.run_until(200, |w| phase(w) == ReleasePhase::RolledBack);
    let last = w.status.last_samples.last().unwrap();
    assert!(
        last.reason
            .contains("not adopted by ring canary within 30s"),
        "{}",
        last.reason
    );
    assert!(w.now > 30);
    w.run_until(300, |w| w.on_canary() == 0);
}

#[test]
fn trouble_in_both_rings_holds_then_resumes() {
    let mut w = World::new(spec(vec![tenants(2), percent(100)]), 10);
    w.tick();
    w.sick = Some((8, 2));
    w.run_until(100, |w| phase(w) == ReleasePhase::Inconclusive);
    for _ in 0..100 {
        let r = w.tick();
        assert!(r.moves.is_empty(), "nothing moves while holding");
    }
    assert_eq!(phase(&w), ReleasePhase::Inconclusive);
    assert_eq!(w.status.wave, 0, "nor is anything promoted");
    assert_eq!(w.on_canary(), 2, "nor rolled back");
    w.sick = Some((0, 0));
    w.run_until(400, |w| phase(w) == ReleasePhase::Succeeded);
    assert_eq!(w.on_canary(), 10);
}

#[test]
fn no_data_is_never_ok() {
    let mut w = World::new(spec(vec![tenants(2), percent(100)]), 10);
    w.tick();
    w.sick = None;
    w.run_until(100, |w| phase(w) == ReleasePhase::Inconclusive);
    let last = w.status.last_samples.last().unwrap();
    assert_eq!(last.verdict, SampleVerdict::Inconclusive);
    assert!(last.reason.contains("no data"));
}

#[test]
fn an_infrastructure_fault_holds_the_release_and_never_rolls_it_back() {
    // DESIGN section 19: while the control plane fails the operator, what the rings show is
    // void; the release holds (saying why) however long it lasts, past its failure limit, and
    // goes on once the control plane answers again.
    let mut w = World::new(spec(vec![tenants(2), percent(100)]), 10);
    w.tick();
    w.sick = None;
    w.no_sample = "the control plane failed the operator 3s ago (patch leases: 503)".into();
    w.run_until(100, |w| phase(w) == ReleasePhase::Inconclusive);
    for _ in 0..200 {
        assert!(
            w.tick().moves.is_empty(),
            "nothing moves while the samples are void"
        );
    }
    assert_eq!(phase(&w), ReleasePhase::Inconclusive);
    assert_eq!(w.status.samples.failed, 0, "no sample failed");
    assert_eq!(w.on_canary(), 2, "nothing rolled back nor promoted");
    let last = w.status.last_samples.last().unwrap();
    assert_eq!(last.verdict, SampleVerdict::Inconclusive);
    assert_eq!(
        last.reason,
        "no data: the control plane failed the operator 3s ago (patch leases: 503)"
    );
    w.sick = Some((0, 0));
    w.run_until(400, |w| phase(w) == ReleasePhase::Succeeded);
    assert_eq!(w.on_canary(), 10);
}

#[test]
fn pause_stops_everything_and_resume_continues() {
    let mut w = World::new(spec(vec![tenants(2), percent(100)]), 10);
    w.tick();
    w.spec.paused = true;
    for _ in 0..200 {
        let r = w.tick();
        assert!(r.moves.is_empty());
        assert_eq!(r.wake_at, None);
    }
    assert_eq!(phase(&w), ReleasePhase::Paused);
    assert_eq!(w.status.wave, 0, "no bake time passed");
    w.spec.paused = false;
    let r = w.tick();
    assert!(r.notices.iter().any(|n| n.reason == reason::RESUMED));
    w.run_until(400, |w| phase(w) == ReleasePhase::Succeeded);
}

#[test]
fn a_rollback_request_wins_over_a_pause_and_is_acted_on_once() {
    let mut w = World::new(spec(vec![tenants(2), percent(100)]), 10);
    w.tick();
    w.spec.paused = true;
    w.tick();
    w.requests.rollback = Some("r1".into());
    let r = w.tick();
    assert_eq!(phase(&w), ReleasePhase::RolledBack);
    assert_eq!(r.moves.len(), 2);
    assert!(
        r.notices
            .iter()
            .any(|n| n.reason == reason::ROLLED_BACK && n.warning)
    );
    let again = w.tick();
    assert!(
        again.notices.is_empty(),
        "the same id is not acted on twice"
    );
}

#[test]
fn a_succeeded_release_rolls_back_on_request_every_tenant_it_moved() {
    let mut w = World::new(spec(vec![percent(100)]), 6);
    w.requests.promote = Some("p1".into());
    w.requests.promote_full = true;
    w.run_until(20, |w| phase(w) == ReleasePhase::Succeeded);
    assert_eq!(w.on_canary(), 6);
    // Done, then undone (a release across DCs that failed later, or a person).
    w.requests.rollback = Some("after".into());
    let r = w.tick();
    assert_eq!(phase(&w), ReleasePhase::RolledBack);
    assert!(
        w.status
            .rollback_reason
            .as_deref()
            .unwrap()
            .contains("after it succeeded")
    );
    assert!(!r.moves.is_empty());
    assert!(r.moves.iter().all(|m| m.direction == Direction::Back));
    w.run_until(40, |w| w.on_canary() == 0);
    assert!(
        w.moves_back.values().all(|n| *n == 1),
        "each tenant back once"
    );
    // Rolled back is final: another request is noted and ignored.
    w.requests.rollback = Some("again".into());
    let ignored = w.tick();
    assert!(ignored.moves.is_empty());
    assert!(
        ignored
            .notices
            .iter()
            .any(|n| n.reason == reason::REQUEST_IGNORED)
    );
}

#[test]
fn promote_ends_the_bake_and_full_promotes_every_wave() {
    let mut w = World::new(
        spec(vec![tenants(1), percent(10), percent(50), percent(100)]),
        20,
    );
    w.tick();
    w.requests.promote = Some("p1".into());
    w.tick();
    assert_eq!(w.status.wave, 1, "the bake of wave 1 ended at once");
    assert!(w.status.waves[0].promoted);
    w.tick();
    w.requests.promote = Some("p2".into());
    w.requests.promote_full = true;
    w.tick();
    assert!(w.status.promoted_full);
    w.tick();
    assert_eq!(phase(&w), ReleasePhase::Succeeded);
    assert_eq!(w.on_canary(), 20);
    assert!(w.now < 10, "no baking after a full promote");
}

#[test]
fn hand_overs_in_flight_are_bounded() {
    let mut w = World::new(
        OperatorReleaseSpec {
            max_hand_overs: 3,
            ..spec(vec![percent(100)])
        },
        20,
    );
    w.adopts = false;
    let r = w.tick();
    assert_eq!(r.moves.len(), 3);
    let r = w.tick();
    assert!(r.moves.is_empty(), "three in flight already");
    w.adopts = true;
    w.adopt();
    let r = w.tick();
    assert_eq!(r.moves.len(), 3);
}

#[test]
fn a_tenant_created_mid_release_is_moved_in_a_later_wave() {
    let mut w = World::new(spec(vec![percent(50), percent(100)]), 10);
    w.tick();
    w.tenants.push(ReleaseTenant {
        namespace: "team-9".into(),
        name: "late".into(),
        driven_by: Some("default".into()),
        ..ReleaseTenant::default()
    });
    w.tenants.remove(0);
    w.run_until(400, |w| phase(w) == ReleasePhase::Succeeded);
    let late = w.tenants.iter().find(|t| t.name == "late").unwrap();
    assert_eq!(late.ring(), "canary");
    assert_eq!(w.status.movable_tenants, 10);
}

#[test]
fn a_later_release_moves_what_an_earlier_one_moved() {
    let mut w = World::new(spec(vec![percent(100)]), 4);
    for t in &mut w.tenants {
        t.label = Some("default".into());
        t.released_by = Some("an-earlier-release".into());
    }
    w.run_until(100, |w| phase(w) == ReleasePhase::Succeeded);
    assert_eq!(w.on_canary(), 4);
}

// ---- restarts: the successor resumes from the status and the labels ----

proptest! {
    #![proptest_config(ProptestConfig { cases: 64, .. ProptestConfig::default() })]

    /// The judging operator dies after any step (its status recorded, its moves made or not):
    /// the successor steps from what the API shows. No tenant moves twice in one direction,
    /// pinned tenants never move, and the release ends Succeeded or RolledBack with every
    /// tenant where the phase says.
    #[test]
    fn a_restart_after_any_write_resumes(
        n in 1usize..30,
        pinned in proptest::collection::vec(any::<bool>(), 30),
        crash_at in proptest::collection::vec(0i64..300, 0..6),
        sick_from in proptest::option::of(0i64..200),
        hand_overs in 1u32..6,
    ) {
        let mut w = World::new(
            OperatorReleaseSpec { max_hand_overs: hand_overs, ..spec(vec![tenants(1), percent(30), percent(100)]) },
            n,
        );
        for (t, p) in w.tenants.iter_mut().zip(&pinned) {
            if *p { t.label = Some("canary".into()); }
        }
        let pinned_before: Vec<ReleaseTenant> = w.tenants.iter().filter(|t| t.pinned()).cloned().collect();
        let settled = |w: &World| {
            phase(w).is_final()
                && w.tenants.iter().all(|t| t.released_by.is_none() || t.driven_by.as_deref() == Some(t.ring()))
                && (phase(w) != ReleasePhase::RolledBack || w.tenants.iter().all(|t| t.released_by.is_none() || t.ring() == "default"))
        };
        while !settled(&w) {
            prop_assert!(w.now < 3000, "stuck: {:?}", w.status);
            if sick_from.is_some_and(|s| w.now >= s) { w.sick = Some((0, 5)); }
            if crash_at.contains(&w.now) {
                // The step's status is written, its moves are lost with the process.
                let lost = w.step();
                w.status = lost.status;
                w.now += 1;
                continue;
            }
            w.tick();
        }
        prop_assert!(w.moves_forward.values().all(|n| *n == 1));
        prop_assert!(w.moves_back.values().all(|n| *n == 1));
        let pinned_after: Vec<ReleaseTenant> = w.tenants.iter().filter(|t| t.pinned()).cloned().collect();
        prop_assert_eq!(pinned_before, pinned_after);
        match phase(&w) {
            ReleasePhase::Succeeded => prop_assert!(w.tenants.iter().all(|t| t.ring() == "canary")),
            ReleasePhase::RolledBack => prop_assert!(w.tenants.iter().filter(|t| t.released_by.is_some()).all(|t| t.ring() == "default")),
            other => prop_assert!(false, "ended {other}"),
        }
    }

    /// Whatever the status and tenants, a step neither panics nor moves a pinned tenant, nor
    /// more than the hand-over bound.
    #[test]
    fn a_step_on_any_input_keeps_the_bounds(
        n in 0usize..20,
        labels in proptest::collection::vec(proptest::option::of(prop_oneof![Just("default"), Just("canary"), Just("other")]), 20),
        marked in proptest::collection::vec(any::<bool>(), 20),
        driven in proptest::collection::vec(any::<bool>(), 20),
        wave in 0u32..6,
        phase_index in 0usize..6,
        failed in 0u32..5,
        hand_overs in 1u32..5,
        paused in any::<bool>(),
    ) {
        let mut w = World::new(OperatorReleaseSpec { max_hand_overs: hand_overs, paused, ..spec(vec![tenants(1), percent(100)]) }, n);
        for (i, t) in w.tenants.iter_mut().enumerate() {
            t.label = labels[i].map(str::to_owned);
            t.released_by = marked[i].then(|| "to-0-2-0".to_owned());
            t.driven_by = driven[i].then(|| t.ring().to_owned());
        }
        w.status.phase = Some(ReleasePhase::ALL[phase_index]);
        w.status.wave = wave;
        w.status.samples.failed = failed;
        let r = w.step();
        let in_flight = w.tenants.iter().filter(|t| t.released_by.is_some() && t.ring() == "canary" && t.driven_by.as_deref() != Some("canary")).count();
        let forward = r.moves.iter().filter(|m| m.direction == Direction::Forward).count();
        prop_assert!(forward + in_flight <= hand_overs as usize || forward == 0);
        for m in &r.moves {
            let t = w.tenants.iter().find(|t| t.name == m.name && t.namespace == m.namespace).unwrap();
            prop_assert!(!t.pinned());
        }
        if paused && r.status.phase() == ReleasePhase::Paused {
            prop_assert!(r.moves.is_empty());
        }
    }
}
