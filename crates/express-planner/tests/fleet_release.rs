//! The release across DCs (DESIGN section 14) as a pure step, on a paused clock: a table of
//! scenarios (start, done, soak, approval, deadline, every request and its precedence), the
//! DC-against-DC judge, and a property test that kills the driver after every step (some of
//! its actions done, its status write lost or not) and resumes it: no DC is released twice, no
//! stage starts before the one before it passed its soak, and a good plan still succeeds.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::{BTreeMap, BTreeSet};

use express_api::fleet_release::{
    DcState, FleetPhase, FleetReleaseSpec, FleetReleaseStatus, Request,
};
use express_api::release::{ReleasePhase, SampleVerdict};
use express_planner::fleet_release::{
    DcRead, DcSeen, FleetAction, FleetSnapshot, FleetStep, ReleaseSeen, Requests, judge, step,
    verdicts_due,
};
use express_triage::Verdict;
use k8s_openapi::jiff::Timestamp;
use proptest::prelude::*;

const T0: i64 = 1_800_000_000;
/// How long a DC's release takes in the simulated world.
const RELEASE_SECONDS: i64 = 120;

fn at(second: i64) -> Timestamp {
    Timestamp::from_second(T0 + second).unwrap()
}

/// Stages of DCs named `dc-<stage><letter>`; `approval` marks the stages behind a gate.
fn plan(stages: &[usize], approval: &[usize], soak: u64) -> FleetReleaseSpec {
    let stages: Vec<serde_json::Value> = stages
        .iter()
        .enumerate()
        .map(|(i, n)| {
            let contexts: Vec<String> = (0..*n)
                .map(|j| format!("dc-{i}{}", char::from(b'a' + j as u8)))
                .collect();
            serde_json::json!({"name": format!("s{i}"), "contexts": contexts, "approval": approval.contains(&i)})
        })
        .collect();
    serde_json::from_value(serde_json::json!({
        "fromRing": "default", "toRing": "canary",
        "release": {"waves": [{"percent": 100}], "intervalSeconds": 30, "failureLimit": 1},
        "stages": stages, "soakSeconds": soak, "stageDeadlineSeconds": 3600
    }))
    .unwrap()
}

#[derive(Clone, Debug)]
struct SimRelease {
    phase: ReleasePhase,
    created: i64,
    finished_at: Option<i64>,
    paused: bool,
    paused_by_plan: bool,
    rollback_asked: bool,
}

/// The DCs as the API would show them, and what the driver did to them.
#[derive(Clone, Debug)]
struct World {
    spec: FleetReleaseSpec,
    /// The status in the copies (the last one written).
    status: FleetReleaseStatus,
    releases: BTreeMap<String, SimRelease>,
    verdicts: BTreeMap<String, Verdict>,
    unreadable: BTreeSet<String>,
    requests: Requests,
    now: i64,
    /// Creations of a release that was already there (a DC released twice).
    released_twice: Vec<String>,
}

impl World {
    fn new(spec: FleetReleaseSpec) -> World {
        World {
            spec,
            status: FleetReleaseStatus::default(),
            releases: BTreeMap::new(),
            verdicts: BTreeMap::new(),
            unreadable: BTreeSet::new(),
            requests: Requests::default(),
            now: 0,
            released_twice: Vec::new(),
        }
    }

    fn contexts(&self) -> Vec<String> {
        self.spec.contexts().map(|(_, c)| c.to_owned()).collect()
    }

    fn seen(&self, with_verdicts: bool) -> Vec<DcSeen> {
        self.contexts()
            .into_iter()
            .map(|context| {
                let read = if self.unreadable.contains(&context) {
                    Err("connection refused".to_owned())
                } else {
                    Ok(DcRead {
                        release: self.releases.get(&context).map(|r| ReleaseSeen {
                            phase: r.phase,
                            wave: 0,
                            moved: 1,
                            finished_at: r.finished_at.map(at),
                            paused: r.paused,
                            paused_by_plan: r.paused_by_plan,
                            rollback_asked: r.rollback_asked,
                        }),
                        verdict: with_verdicts
                            .then(|| Ok(*self.verdicts.get(&context).unwrap_or(&Verdict::Healthy))),
                    })
                };
                DcSeen { context, read }
            })
            .collect()
    }

    /// One step as the driver takes it: verdicts read only when due.
    fn step(&self) -> FleetStep {
        let probe = FleetSnapshot {
            spec: &self.spec,
            status: &self.status,
            requests: self.requests.clone(),
            dcs: &self.seen(false),
            now: at(self.now),
        };
        let due = verdicts_due(&probe);
        let dcs = self.seen(due);
        step(&FleetSnapshot { dcs: &dcs, ..probe })
    }

    fn apply(&mut self, action: &FleetAction) {
        match action {
            FleetAction::Create { context } => {
                if self.releases.contains_key(context) {
                    self.released_twice.push(context.clone());
                } else {
                    self.releases.insert(
                        context.clone(),
                        SimRelease {
                            phase: ReleasePhase::Progressing,
                            created: self.now,
                            finished_at: None,
                            paused: false,
                            paused_by_plan: false,
                            rollback_asked: false,
                        },
                    );
                }
            }
            FleetAction::Pause { context } => {
                let release = self.release_mut(context);
                release.paused = true;
                release.paused_by_plan = true;
            }
            FleetAction::Resume { context } => {
                let release = self.release_mut(context);
                release.paused = false;
                release.paused_by_plan = false;
            }
            FleetAction::RollBack { context, .. } => {
                self.release_mut(context).rollback_asked = true
            }
        }
    }

    fn release_mut(&mut self, context: &str) -> &mut SimRelease {
        self.releases
            .get_mut(context)
            .expect("an action on a release that is not there")
    }

    /// Steps, acts and writes the status, then lets `seconds` pass.
    fn run(&mut self, seconds: i64) -> FleetStep {
        let decided = self.step();
        for action in &decided.actions {
            self.apply(action);
        }
        self.status = decided.status.clone();
        self.pass(seconds);
        decided
    }

    /// Time passes: releases finish after [`RELEASE_SECONDS`] (unpaused), roll back when asked.
    fn pass(&mut self, seconds: i64) {
        self.now += seconds;
        for release in self.releases.values_mut() {
            if release.rollback_asked {
                release.phase = ReleasePhase::RolledBack;
            } else if release.phase == ReleasePhase::Progressing
                && !release.paused
                && self.now - release.created >= RELEASE_SECONDS
            {
                release.phase = ReleasePhase::Succeeded;
                release.finished_at = Some(release.created + RELEASE_SECONDS);
            }
        }
    }

    fn request(&self, id: &str) -> Option<Request> {
        Some(Request {
            id: id.into(),
            at: at(self.now),
        })
    }

    fn state(&self, context: &str) -> DcState {
        self.status.dc(context).map(|d| d.state).unwrap_or_default()
    }
}

fn creates(step: &FleetStep) -> Vec<&str> {
    step.actions
        .iter()
        .filter_map(|a| match a {
            FleetAction::Create { context } => Some(context.as_str()),
            _ => None,
        })
        .collect()
}

fn rollbacks(step: &FleetStep) -> Vec<&str> {
    step.actions
        .iter()
        .filter_map(|a| match a {
            FleetAction::RollBack { context, .. } => Some(context.as_str()),
            _ => None,
        })
        .collect()
}

/// Runs until the phase is `phase` (at most `steps` steps of `seconds`).
fn run_until(world: &mut World, phase: FleetPhase, steps: usize, seconds: i64) {
    for _ in 0..steps {
        world.run(seconds);
        if world.status.phase() == phase {
            return;
        }
    }
    panic!("not {phase} after {steps} steps: {:#?}", world.status);
}

#[test]
fn a_good_plan_releases_stage_by_stage_soaks_each_and_succeeds() {
    let mut world = World::new(plan(&[1, 2], &[], 600));
    let first = world.run(10);
    assert_eq!(creates(&first), ["dc-0a"]);
    assert_eq!(world.status.phase(), FleetPhase::Progressing);
    assert_eq!(world.state("dc-0a"), DcState::Releasing);
    assert_eq!(world.state("dc-1a"), DcState::Waiting);
    // Done at 120 s: soaking, timed from the release's own finish.
    run_until(&mut world, FleetPhase::Soaking, 20, 10);
    assert_eq!(world.state("dc-0a"), DcState::Soaking);
    let soak = world.status.soak.clone().unwrap();
    assert_eq!(soak.started_at.0, at(RELEASE_SECONDS));
    // Nothing of stage 1 until the soak has run its 600 s.
    while world.status.phase() == FleetPhase::Soaking {
        let decided = world.run(30);
        if world.now < RELEASE_SECONDS + 600 {
            assert!(
                creates(&decided).is_empty(),
                "at {}: {decided:?}",
                world.now
            );
        }
    }
    assert!(world.releases.contains_key("dc-1a") && world.releases.contains_key("dc-1b"));
    assert!(
        world
            .status
            .samples
            .iter()
            .all(|s| s.verdict == SampleVerdict::Ok)
    );
    assert_eq!(world.state("dc-0a"), DcState::Succeeded);
    run_until(&mut world, FleetPhase::Succeeded, 200, 30);
    assert!(
        world
            .contexts()
            .iter()
            .all(|c| world.state(c) == DcState::Succeeded)
    );
    assert!(world.released_twice.is_empty());
    // Done is done: another step changes nothing and asks nothing.
    let again = world.run(30);
    assert!(again.actions.is_empty());
    assert_eq!(again.status.phase(), FleetPhase::Succeeded);
}

#[test]
fn a_soak_whose_time_ran_out_before_the_driver_looked_still_takes_a_sample_first() {
    // A 5 s soak, a driver stepping every 20 s: the stage is seen done after its soak time.
    let mut world = World::new(plan(&[1, 1], &[], 5));
    run_until(&mut world, FleetPhase::Soaking, 20, 20);
    assert!(world.status.samples.is_empty());
    assert!(!world.releases.contains_key("dc-1a"), "not on time alone");
    let sampled = world.run(0);
    assert!(
        sampled
            .notices
            .iter()
            .any(|n| n.message.starts_with("soak of stage 0: Ok")),
        "{:?}",
        sampled.notices
    );
    assert_eq!(creates(&sampled), ["dc-1a"]);
    assert_eq!(world.status.samples.len(), 1);
    // Trouble seen at that one sample fails the stage instead.
    let mut troubled = World::new(plan(&[1, 1], &[], 5));
    troubled.spec.release.failure_limit = 0;
    run_until(&mut troubled, FleetPhase::Soaking, 20, 20);
    troubled.verdicts.insert("dc-0a".into(), Verdict::Tenant);
    assert!(creates(&troubled.run(0)).is_empty());
    assert_eq!(troubled.status.phase(), FleetPhase::Failed);
}

#[test]
fn an_approval_gate_waits_for_approve_and_an_early_approve_passes_it() {
    let mut world = World::new(plan(&[1, 1], &[1], 60));
    run_until(&mut world, FleetPhase::WaitingApproval, 40, 30);
    assert!(!world.releases.contains_key("dc-1a"));
    assert!(world.status.message.as_deref().unwrap().contains("approve"));
    // Waiting does not run into the stage deadline.
    world.pass(7200);
    assert_eq!(world.run(30).status.phase(), FleetPhase::WaitingApproval);
    world.requests.approve = world.request("cli-approve-1");
    let approved = world.run(30);
    assert_eq!(creates(&approved), ["dc-1a"]);
    assert_eq!(world.status.approved, ["s1"]);
    // The same request again is not a second approval.
    assert!(
        world
            .run(30)
            .notices
            .iter()
            .all(|n| !n.message.contains("approved"))
    );

    // Approved before the gate is reached: the gate is passed when it comes.
    let mut early = World::new(plan(&[1, 1], &[1], 60));
    early.requests.approve = early.request("cli-approve-early");
    early.run(10);
    assert_eq!(early.status.approved, ["s1"]);
    run_until(&mut early, FleetPhase::Progressing, 40, 30);
    for _ in 0..40 {
        early.run(30);
        assert_ne!(early.status.phase(), FleetPhase::WaitingApproval);
    }
    assert!(early.releases.contains_key("dc-1a"));
}

#[test]
fn a_dc_in_trouble_while_the_unreleased_are_healthy_fails_the_soak_and_rolls_back() {
    let mut world = World::new(plan(&[1, 1], &[], 600));
    run_until(&mut world, FleetPhase::Soaking, 30, 10);
    world.verdicts.insert("dc-0a".into(), Verdict::Deployment);
    let mut rolled = Vec::new();
    for _ in 0..10 {
        let decided = world.run(30);
        rolled.extend(rollbacks(&decided).into_iter().map(str::to_owned));
        if world.status.phase() == FleetPhase::Failed {
            break;
        }
    }
    assert_eq!(world.status.phase(), FleetPhase::Failed);
    // failureLimit 1: the second failed sample fails it, well before the soak would end.
    assert_eq!(world.status.soak.as_ref().unwrap().failed, 2);
    assert!(world.now < RELEASE_SECONDS + 600);
    assert_eq!(rolled, ["dc-0a"]);
    assert!(
        world
            .status
            .message
            .as_deref()
            .unwrap()
            .contains("dc-0a deployment")
    );
    // The next stage never starts; the DC ends rolled back.
    for _ in 0..5 {
        assert!(creates(&world.run(30)).is_empty());
    }
    assert!(!world.releases.contains_key("dc-1a"));
    assert_eq!(world.state("dc-0a"), DcState::RolledBack);
    assert_eq!(world.state("dc-1a"), DcState::Waiting);
}

#[test]
fn trouble_on_both_sides_or_an_unreadable_dc_holds_the_soak_clock() {
    let mut world = World::new(plan(&[1, 1], &[], 300));
    run_until(&mut world, FleetPhase::Soaking, 30, 10);
    world
        .verdicts
        .insert("dc-0a".into(), Verdict::Infrastructure);
    world
        .verdicts
        .insert("dc-1a".into(), Verdict::Infrastructure);
    for _ in 0..20 {
        world.run(30);
    }
    assert_eq!(world.status.phase(), FleetPhase::Inconclusive);
    assert!(
        !world.releases.contains_key("dc-1a"),
        "held: the soak clock stood still"
    );
    let soak = world.status.soak.clone().unwrap();
    assert_eq!(soak.failed, 0);
    assert!(soak.held_seconds >= 540, "{soak:?}");
    // Trouble gone: the soak goes on for what it had left, then the next stage.
    world.verdicts.clear();
    run_until(&mut world, FleetPhase::Progressing, 40, 30);
    assert!(world.releases.contains_key("dc-1a"));

    // A DC of the stage that cannot be read holds too, never counts as done.
    let mut dark = World::new(plan(&[1, 1], &[], 300));
    run_until(&mut dark, FleetPhase::Soaking, 30, 10);
    dark.unreadable.insert("dc-0a".into());
    for _ in 0..20 {
        dark.run(30);
    }
    assert_eq!(dark.status.phase(), FleetPhase::Inconclusive);
    assert_eq!(dark.state("dc-0a"), DcState::Unknown);
    assert!(!dark.releases.contains_key("dc-1a"));
}

#[test]
fn the_last_stage_is_judged_against_itself_before_its_release() {
    let mut world = World::new(plan(&[1], &[], 300));
    let first = world.run(10);
    assert_eq!(creates(&first), ["dc-0a"]);
    assert_eq!(
        world.status.dc("dc-0a").unwrap().baseline,
        Some(Verdict::Healthy)
    );
    run_until(&mut world, FleetPhase::Soaking, 30, 10);
    world.verdicts.insert("dc-0a".into(), Verdict::Tenant);
    run_until(&mut world, FleetPhase::Failed, 10, 30);
    assert!(
        world
            .status
            .message
            .as_deref()
            .unwrap()
            .contains("healthy when its stage started")
    );

    // In trouble before it started too: held, not failed.
    let mut sick = World::new(plan(&[1], &[], 300));
    sick.verdicts.insert("dc-0a".into(), Verdict::Tenant);
    run_until(&mut sick, FleetPhase::Soaking, 30, 10);
    for _ in 0..5 {
        sick.run(30);
    }
    assert_eq!(sick.status.phase(), FleetPhase::Inconclusive);
}

#[test]
fn a_release_rolled_back_by_its_own_judge_fails_the_plan_and_stops_what_follows() {
    let mut world = World::new(plan(&[2, 1], &[], 60));
    world.run(10);
    world.releases.get_mut("dc-0a").unwrap().phase = ReleasePhase::RolledBack;
    let failed = world.run(10);
    assert_eq!(world.status.phase(), FleetPhase::Failed);
    assert_eq!(
        rollbacks(&failed),
        ["dc-0b"],
        "the stage's release still in flight goes back"
    );
    assert_eq!(world.state("dc-0a"), DcState::RolledBack);
    for _ in 0..20 {
        assert!(creates(&world.run(30)).is_empty());
    }
    assert_eq!(world.state("dc-1a"), DcState::Waiting);
}

#[test]
fn a_stage_past_its_deadline_fails_and_paused_time_does_not_count() {
    let mut world = World::new(plan(&[1, 1], &[], 60));
    world.unreadable.insert("dc-0a".into());
    let waiting = world.run(600);
    assert!(
        creates(&waiting).is_empty(),
        "an unreadable DC is not released blind"
    );
    assert_eq!(world.state("dc-0a"), DcState::Unknown);
    assert_eq!(world.status.phase(), FleetPhase::Progressing);
    // Paused for two hours: not counted against the deadline.
    world.requests.pause = world.request("cli-pause");
    world.run(7200);
    world.requests.resume = world.request("cli-resume");
    world.run(60);
    world.run(3000);
    // 7,860 s after the stage started, 660 of them not paused: still within its hour.
    assert_eq!(world.status.phase(), FleetPhase::Progressing);
    world.run(10);
    assert_eq!(world.status.phase(), FleetPhase::Failed);
    assert!(
        world
            .status
            .message
            .as_deref()
            .unwrap()
            .contains("not done 3600s after it started")
    );
    assert!(!world.releases.contains_key("dc-1a"));
}

#[test]
fn pause_holds_everything_and_the_newer_of_pause_and_resume_wins() {
    let mut world = World::new(plan(&[2], &[], 60));
    world.run(10);
    world.requests.pause = world.request("cli-pause-1");
    let paused = world.run(10);
    assert_eq!(paused.status.phase(), FleetPhase::Paused);
    let pauses: Vec<_> = paused
        .actions
        .iter()
        .filter(|a| matches!(a, FleetAction::Pause { .. }))
        .collect();
    assert_eq!(pauses.len(), 2);
    // Paused releases do not finish; nothing starts.
    world.pass(600);
    assert!(
        world
            .releases
            .values()
            .all(|r| r.phase == ReleasePhase::Progressing)
    );
    // A resume older than the pause loses; a newer one wins.
    world.requests.resume = Some(Request {
        id: "cli-resume-old".into(),
        at: at(0),
    });
    assert_eq!(world.run(10).status.phase(), FleetPhase::Paused);
    world.requests.resume = world.request("cli-resume-2");
    let resumed = world.run(10);
    assert_eq!(resumed.status.phase(), FleetPhase::Progressing);
    assert!(
        resumed
            .actions
            .iter()
            .all(|a| matches!(a, FleetAction::Resume { .. }))
    );
    assert_eq!(resumed.actions.len(), 2);
    run_until(&mut world, FleetPhase::Succeeded, 40, 30);
}

#[test]
fn a_dc_unreadable_when_the_plan_is_resumed_is_resumed_once_it_is_read_and_a_person_s_pause_stands()
{
    let mut world = World::new(plan(&[2], &[], 60));
    world.run(10);
    world.requests.pause = world.request("cli-pause");
    world.run(10);
    world.unreadable.insert("dc-0b".into());
    world.requests.resume = world.request("cli-resume");
    let resumed = world.run(10);
    assert_eq!(
        resumed.actions,
        [FleetAction::Resume {
            context: "dc-0a".into()
        }]
    );
    world.unreadable.clear();
    let later = world.run(10);
    assert_eq!(
        later.actions,
        [FleetAction::Resume {
            context: "dc-0b".into()
        }]
    );
    // A person pauses dc-0a's own release by hand: the plan leaves it so.
    world.releases.get_mut("dc-0a").unwrap().paused = true;
    for _ in 0..5 {
        assert!(world.run(30).actions.is_empty());
    }
    assert!(world.releases["dc-0a"].paused);
}

#[test]
fn abort_wins_and_abort_with_rollback_undoes_even_a_success() {
    let mut world = World::new(plan(&[1, 1], &[], 60));
    world.run(10);
    world.requests.abort = world.request("cli-abort");
    world.requests.pause = world.request("cli-pause");
    let aborted = world.run(10);
    assert_eq!(world.status.phase(), FleetPhase::Aborted);
    assert_eq!(rollbacks(&aborted), ["dc-0a"]);
    // Acted on once: the same request again asks nothing.
    assert!(world.run(10).actions.is_empty());
    assert!(!world.releases.contains_key("dc-1a"));
    assert_eq!(world.state("dc-0a"), DcState::RolledBack);

    let mut done = World::new(plan(&[1, 1], &[], 60));
    run_until(&mut done, FleetPhase::Succeeded, 100, 30);
    done.requests.abort = done.request("cli-abort-plain");
    let plain = done.run(10);
    assert!(plain.actions.is_empty());
    assert_eq!(done.status.phase(), FleetPhase::Succeeded);
    done.requests.abort = done.request("cli-abort-rollback");
    done.requests.abort_rollback = true;
    let back = done.run(10);
    assert_eq!(rollbacks(&back), ["dc-0a", "dc-1a"]);
    assert_eq!(done.status.phase(), FleetPhase::RolledBack);
    done.run(10);
    assert!(
        done.contexts()
            .iter()
            .all(|c| done.state(c) == DcState::RolledBack)
    );
}

#[test]
fn an_invalid_copy_changes_nothing() {
    let mut spec = plan(&[1, 1], &[], 60);
    spec.stages[1].contexts = vec!["dc-0a".into()];
    let mut world = World::new(spec);
    let refused = world.run(10);
    assert!(refused.actions.is_empty());
    assert!(
        world
            .status
            .message
            .as_deref()
            .unwrap()
            .starts_with("invalid plan: context dc-0a is in two stages")
    );
}

#[test]
fn the_judge_by_table() {
    use Verdict::{Healthy, Infrastructure, Tenant};
    let ok = SampleVerdict::Ok;
    // (what, the stage, the DCs not yet released, the last stage before it, the verdict)
    type Case<'a> = (
        &'a str,
        Vec<(&'a str, Result<Verdict, &'a str>)>,
        Vec<(&'a str, Verdict)>,
        Vec<(&'a str, Option<Verdict>)>,
        SampleVerdict,
    );
    let cases: Vec<Case<'_>> = vec![
        (
            "all healthy",
            vec![("a", Ok(Healthy))],
            vec![("b", Healthy)],
            vec![],
            ok,
        ),
        (
            "stage in trouble, others fine",
            vec![("a", Ok(Tenant))],
            vec![("b", Healthy)],
            vec![],
            SampleVerdict::Failed,
        ),
        (
            "both in trouble",
            vec![("a", Ok(Tenant))],
            vec![("b", Infrastructure)],
            vec![],
            SampleVerdict::Inconclusive,
        ),
        (
            "the stage unreadable",
            vec![("a", Err("timeout"))],
            vec![("b", Healthy)],
            vec![],
            SampleVerdict::Inconclusive,
        ),
        (
            "others in trouble only",
            vec![("a", Ok(Healthy))],
            vec![("b", Tenant)],
            vec![],
            ok,
        ),
        (
            "last stage, worse than before",
            vec![("a", Ok(Tenant))],
            vec![],
            vec![("a", Some(Healthy))],
            SampleVerdict::Failed,
        ),
        (
            "last stage, as before",
            vec![("a", Ok(Tenant))],
            vec![],
            vec![("a", Some(Tenant))],
            SampleVerdict::Inconclusive,
        ),
        (
            "last stage, before unknown",
            vec![("a", Ok(Tenant))],
            vec![],
            vec![("a", None)],
            SampleVerdict::Inconclusive,
        ),
        (
            "last stage, healthy",
            vec![("a", Ok(Healthy))],
            vec![],
            vec![("a", Some(Tenant))],
            ok,
        ),
    ];
    for (what, stage, unreleased, baseline, want) in cases {
        let got = judge(&stage, &unreleased, &baseline);
        assert_eq!(got.verdict, want, "{what}: {}", got.reason);
        assert_eq!(
            !got.in_trouble.is_empty(),
            want == SampleVerdict::Failed,
            "{what}"
        );
    }
}

/// What a dying driver leaves: after a step, the first `done` of its actions and, if
/// `written`, its status.
#[derive(Clone, Copy, Debug)]
struct Crash {
    done: usize,
    written: bool,
}

fn crash() -> impl Strategy<Value = Option<Crash>> {
    prop_oneof![
        2 => Just(None),
        1 => (0usize..3, any::<bool>()).prop_map(|(done, written)| Some(Crash { done, written })),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(200))]

    #[test]
    fn a_driver_killed_after_any_step_is_resumed_without_a_dc_released_twice(
        stages in prop::collection::vec(1usize..3, 1..4),
        soak in prop::sample::select(vec![0u64, 60, 300]),
        crashes in prop::collection::vec(crash(), 120),
        seconds in prop::sample::select(vec![10i64, 30, 90]),
    ) {
        let mut world = World::new(plan(&stages, &[], soak));
        for crashed in crashes {
            let decided = world.step();
            // Every stage started only after the one before it passed its soak.
            for created in creates(&decided) {
                let stage = world.spec.stage_of(created).unwrap();
                for (earlier, context) in world.spec.contexts().filter(|(i, _)| *i < stage) {
                    let release = world.releases.get(context);
                    let finished = release.and_then(|r| r.finished_at);
                    prop_assert!(
                        finished.is_some_and(|f| world.now - f >= soak as i64),
                        "{created} created at {} while {context} (stage {earlier}) finished at {finished:?}",
                        world.now
                    );
                }
                prop_assert!(!world.releases.contains_key(created), "{created} created twice");
            }
            match crashed {
                None => {
                    for action in &decided.actions {
                        world.apply(action);
                    }
                    world.status = decided.status.clone();
                }
                Some(Crash { done, written }) => {
                    for action in decided.actions.iter().take(done) {
                        world.apply(action);
                    }
                    if written {
                        world.status = decided.status.clone();
                    }
                }
            }
            world.pass(seconds);
            if world.status.phase() == FleetPhase::Succeeded {
                break;
            }
        }
        prop_assert!(world.released_twice.is_empty(), "{:?}", world.released_twice);
        // Crashes or not, a healthy fleet gets there: keep stepping without crashes.
        for _ in 0..400 {
            if world.status.phase() == FleetPhase::Succeeded {
                break;
            }
            world.run(seconds);
        }
        prop_assert_eq!(world.status.phase(), FleetPhase::Succeeded, "{:#?}", world.status);
        let every: BTreeSet<String> = world.contexts().into_iter().collect();
        let released: BTreeSet<String> = world.releases.keys().cloned().collect();
        prop_assert_eq!(every, released);
    }

    #[test]
    fn the_step_never_panics_and_never_acts_while_paused(
        stages in prop::collection::vec(1usize..3, 1..3),
        verdicts in prop::collection::vec(prop::sample::select(vec![Verdict::Healthy, Verdict::Tenant, Verdict::Infrastructure]), 6),
        unreadable in prop::collection::vec(any::<bool>(), 6),
        steps in 1usize..60,
    ) {
        let mut world = World::new(plan(&stages, &[1], 60));
        for (i, context) in world.contexts().into_iter().enumerate() {
            world.verdicts.insert(context.clone(), verdicts[i % verdicts.len()]);
            if unreadable[i % unreadable.len()] && i % 2 == 1 {
                world.unreadable.insert(context);
            }
        }
        for _ in 0..steps {
            world.run(30);
        }
        world.requests.pause = world.request("cli-pause");
        let paused = world.run(30);
        let only_pauses = paused.actions.iter().all(|a| matches!(a, FleetAction::Pause { .. }));
        prop_assert!(only_pauses, "{:?}", paused.actions);
        for _ in 0..5 {
            let held = world.run(300);
            if world.status.phase() == FleetPhase::Paused {
                let only_pauses = held.actions.iter().all(|a| matches!(a, FleetAction::Pause { .. }));
                prop_assert!(only_pauses, "{:?}", held.actions);
                prop_assert!(creates(&held).is_empty());
            }
        }
    }
}

#[test]
fn verdicts_are_read_only_for_a_sample_or_the_last_stage_s_baseline() {
    let world = World::new(plan(&[1, 1], &[], 600));
    let snapshot = |w: &World| -> bool {
        verdicts_due(&FleetSnapshot {
            spec: &w.spec,
            status: &w.status,
            requests: Requests::default(),
            dcs: &w.seen(false),
            now: at(w.now),
        })
    };
    assert!(
        !snapshot(&world),
        "stage 0 of 2 starting: no verdict needed"
    );
    let mut world = world;
    run_until(&mut world, FleetPhase::Soaking, 30, 10);
    // The first sample is due at once, the next one an interval later.
    world.run(1);
    assert!(!snapshot(&world));
    world.pass(30);
    assert!(snapshot(&world));
    let single = World::new(plan(&[1], &[], 600));
    assert!(
        snapshot(&single),
        "the last stage's verdicts before it starts"
    );
}
