//! Every trigger, from the status that shows it: what fires, with which facts, under which id.

mod fixtures;

use express_notify::Trigger;
use express_notify::observe;
use fixtures::*;
use serde_json::json;

fn triggers(status: serde_json::Value) -> Vec<Trigger> {
    observe::tenant(&tenant("team-a", "shop", status))
        .iter()
        .map(|o| o.trigger)
        .collect()
}

#[test]
fn each_rollout_state_fires_its_triggers() {
    let table = [
        (
            "failed",
            failed("frontend-2", 700),
            vec![Trigger::RolloutFailed],
        ),
        (
            "rolling back after a failure",
            rolling_back("frontend-2", 700),
            vec![Trigger::RolloutFailed, Trigger::RolloutRolledBack],
        ),
        ("stalled", stalled(400), vec![Trigger::RolloutStalled]),
        ("done", done(300), vec![Trigger::RolloutDone]),
        ("progressing", progressing(), vec![]),
        ("no status yet", json!({}), vec![]),
    ];
    for (case, status, expected) in table {
        assert_eq!(triggers(status), expected, "{case}");
    }
}

#[test]
fn a_failure_says_where_why_and_what_acts_on_it() {
    let found = observe::tenant(&tenant("team-a", "shop", failed("frontend-2", 700)));
    let failure = &found[0];
    assert_eq!(
        failure.title,
        "Rollout of team-a/shop failed at node frontend-2"
    );
    let facts: Vec<(&str, &str)> = failure
        .facts
        .iter()
        .map(|f| (f.name.as_str(), f.value.as_str()))
        .collect();
    assert_eq!(
        facts,
        [
            ("tenant", "team-a/shop"),
            ("operator", "ring default (0.3.0)"),
            ("failed node", "frontend-2"),
            ("why", "node frontend-2 failed: not Ready after 600s"),
        ]
    );
    assert_eq!(
        failure.act.as_deref(),
        Some("kubectl express retry shop -n team-a")
    );
    assert_eq!(failure.at.to_string(), at(700));
}

#[test]
fn the_same_occurrence_keeps_its_id_and_the_next_rollout_has_another() {
    let first = observe::tenant(&tenant("team-a", "shop", failed("frontend-2", 700)));
    let again = observe::tenant(&tenant("team-a", "shop", failed("frontend-2", 700)));
    assert_eq!(first[0].id, again[0].id);
    // Rolling back after the same failure: the same failure, one rollback more.
    let back = observe::tenant(&tenant("team-a", "shop", rolling_back("frontend-2", 700)));
    assert_eq!(back[0].id, first[0].id);
    let mut next = failed("frontend-2", 900);
    next["rollout"]["startedAt"] = json!(at(800));
    let later = observe::tenant(&tenant("team-a", "shop", next));
    assert_ne!(later[0].id, first[0].id);
    // Another tenant of the same name (deleted and created again) is another object.
    let mut other = tenant("team-a", "shop", failed("frontend-2", 700));
    other.metadata.uid = Some("uid-other".into());
    assert_ne!(observe::tenant(&other)[0].id, first[0].id);
}

#[test]
fn an_abort_with_rollback_is_named_by_its_request() {
    let mut status = rolling_back("frontend-2", 700);
    status["rollout"]["failedNode"] = json!(null);
    status["abort"] = json!({"requestId": "r-42", "rollback": true, "at": at(690)});
    let found = observe::tenant(&tenant("team-a", "shop", status));
    assert_eq!(
        found.iter().map(|o| o.trigger).collect::<Vec<_>>(),
        [Trigger::RolloutRolledBack]
    );
    assert!(found[0].id.ends_with("/abort r-42"), "{}", found[0].id);
    assert!(
        found[0]
            .facts
            .iter()
            .any(|f| f.value == "abort r-42 asked for a rollback")
    );
}

#[test]
fn the_object_subscribes_itself_by_annotation() {
    let cluster = tenant_annotated(
        "team-a",
        "shop",
        json!({"express.dev/notify": "pager, chat,,"}),
        failed("backend", 10),
    );
    assert_eq!(
        observe::tenant(&cluster)[0].subscribed_by_object,
        ["pager", "chat"]
    );
}

#[test]
fn each_release_phase_fires_its_triggers() {
    let waves = json!([
        {"target": 2, "startedAt": at(0), "finishedAt": at(600)},
        {"target": 9, "startedAt": at(600), "finishedAt": at(1300), "promoted": true},
        {"target": 17, "startedAt": at(1300)},
    ]);
    let table = [
        (
            "progressing past two waves",
            json!({"phase": "Progressing", "wave": 2, "waves": waves}),
            vec![Trigger::ReleasePromoted, Trigger::ReleasePromoted],
        ),
        (
            "paused",
            json!({"phase": "Paused", "wave": 0, "waves": [{"target": 2, "startedAt": at(0)}]}),
            vec![Trigger::ReleaseWaiting],
        ),
        (
            "held",
            json!({"phase": "Inconclusive", "wave": 0, "message": "both rings unhealthy",
                   "waves": [{"target": 2, "startedAt": at(0)}]}),
            vec![Trigger::ReleaseWaiting],
        ),
        (
            "rolled back",
            json!({"phase": "RolledBack", "rolledBackAt": at(900),
                   "rollbackReason": "2 failed samples: canary error rate",
                   "waves": [{"target": 2, "startedAt": at(0)}]}),
            vec![Trigger::ReleaseRolledBack],
        ),
        (
            "succeeded",
            json!({"phase": "Succeeded", "wave": 2, "waves": [
                {"target": 2, "startedAt": at(0), "finishedAt": at(600)},
                {"target": 9, "startedAt": at(600), "finishedAt": at(1300)},
                {"target": 17, "startedAt": at(1300), "finishedAt": at(2000)}]}),
            vec![
                Trigger::ReleasePromoted,
                Trigger::ReleasePromoted,
                Trigger::ReleaseDone,
            ],
        ),
        ("pending", json!({"phase": "Pending"}), vec![]),
    ];
    for (case, status, expected) in table {
        let found = observe::release(&release("to-0-4-0", status));
        assert_eq!(
            found.iter().map(|o| o.trigger).collect::<Vec<_>>(),
            expected,
            "{case}"
        );
    }
}

#[test]
fn a_rollback_carries_the_deciding_signal_and_both_rings_figures() {
    let status = json!({
        "phase": "RolledBack", "rolledBackAt": at(900),
        "rollbackReason": "failure limit reached",
        "lastSamples": [
            {"at": at(800), "verdict": "Ok", "reason": "clean"},
            {"at": at(880), "verdict": "Failed", "reason": "ring canary: reconcile errors worse"},
        ],
        "analysis": {"at": at(880), "baseline": "default", "signals": [
            {"signal": "reconcile-errors", "canary": 0.25, "baseline": 0.01,
             "verdict": "Worse", "reason": "p=0.001"},
            {"signal": "restarts", "canary": 0.0, "baseline": 0.0, "verdict": "Ok", "reason": "same"},
        ]},
    });
    let found = observe::release(&release("to-0-4-0", status));
    let facts: Vec<String> = found[0]
        .facts
        .iter()
        .map(|f| format!("{}: {}", f.name, f.value))
        .collect();
    assert!(
        facts.contains(&"failed sample: ring canary: reconcile errors worse".into()),
        "{facts:?}"
    );
    assert!(
        facts.contains(
            &"signal reconcile-errors: canary 0.250 against default 0.010 (p=0.001)".into()
        ),
        "{facts:?}"
    );
    assert!(
        !facts.iter().any(|f| f.starts_with("signal restarts")),
        "{facts:?}"
    );
}

fn fleet_triggers(status: serde_json::Value, teller: Option<&str>) -> Vec<Trigger> {
    observe::fleet_release(&fleet(status), teller)
        .iter()
        .map(|o| o.trigger)
        .collect()
}

#[test]
fn each_plan_phase_fires_its_triggers_in_its_teller_only() {
    let waiting = json!({"phase": "WaitingApproval", "stage": 1, "updatedAt": at(100),
        "dataCenters": [dc("dev-a", 0, "Succeeded"), dc("dev-b", 1, "Waiting"), dc("dev-c", 1, "Waiting")]});
    let table = [
        (
            "waiting",
            waiting.clone(),
            vec![Trigger::FleetWaitingApproval],
        ),
        (
            "a DC failed",
            json!({"phase": "Failed", "stage": 1, "updatedAt": at(100), "message": "dev-b rolled back",
                   "dataCenters": [dc("dev-a", 0, "Succeeded"), dc("dev-b", 1, "Failed"), dc("dev-c", 1, "Releasing")]}),
            vec![Trigger::FleetDcFailed, Trigger::FleetFailed],
        ),
        (
            "aborted with rollback",
            json!({"phase": "RolledBack", "updatedAt": at(100),
                   "dataCenters": [dc("dev-a", 0, "RolledBack")]}),
            vec![Trigger::FleetDcFailed, Trigger::FleetAborted],
        ),
        (
            "done",
            json!({"phase": "Succeeded", "updatedAt": at(100),
                   "dataCenters": [dc("dev-a", 0, "Succeeded"), dc("dev-b", 1, "Succeeded"), dc("dev-c", 1, "Succeeded")]}),
            vec![Trigger::FleetDone],
        ),
        (
            "progressing",
            json!({"phase": "Progressing", "dataCenters": [dc("dev-a", 0, "Releasing")]}),
            vec![],
        ),
    ];
    for (case, status, expected) in table {
        assert_eq!(
            fleet_triggers(status.clone(), Some("dev-a")),
            expected,
            "{case}"
        );
        // Another DC of the plan holds the same copy: it leaves the telling to dev-a.
        assert_eq!(
            fleet_triggers(status.clone(), Some("dev-b")),
            vec![],
            "{case} in dev-b"
        );
        // A DC whose configuration does not name it tells all the same.
        assert_eq!(fleet_triggers(status, None), expected, "{case} unnamed");
    }
    let told = observe::fleet_release(&fleet(waiting), Some("dev-a"));
    assert_eq!(
        told[0].title,
        "FleetRelease to-0-4-0: stage 2 of 2 (rest) waits for approval"
    );
    assert_eq!(
        told[0].act.as_deref(),
        Some("kubectl express fleet-release approve to-0-4-0")
    );
}

#[test]
fn when_the_first_dc_cannot_be_read_the_next_one_tells_and_names_it() {
    let status = json!({"phase": "Soaking", "stage": 0, "updatedAt": at(100),
        "dataCenters": [dc("dev-a", 0, "Unknown"), dc("dev-b", 1, "Waiting"), dc("dev-c", 1, "Waiting")]});
    assert_eq!(observe::fleet_teller(&fleet(status.clone())), Some("dev-b"));
    assert_eq!(fleet_triggers(status.clone(), Some("dev-a")), vec![]);
    let told = observe::fleet_release(&fleet(status), Some("dev-b"));
    assert_eq!(
        told.iter().map(|o| o.trigger).collect::<Vec<_>>(),
        [Trigger::FleetDcUnreachable]
    );
    assert_eq!(
        told[0].title,
        "FleetRelease to-0-4-0: DC dev-a cannot be read"
    );
}

#[test]
fn a_dc_whose_doctor_says_infrastructure_is_told_once_a_stage_while_the_plan_runs() {
    let with_verdict = |state: &str, verdict: &str| {
        let mut d = dc("dev-b", 1, state);
        d["verdict"] = json!(verdict);
        d
    };
    let plan = |phase: &str, dev_b: serde_json::Value| {
        json!({"phase": phase, "stage": 1, "updatedAt": at(100),
               "dataCenters": [dc("dev-a", 0, "Succeeded"), dev_b]})
    };
    let table = [
        (
            "soaking, the doctor at infrastructure",
            plan("Soaking", with_verdict("Soaking", "infrastructure")),
            vec![Trigger::FleetDcInfrastructure],
        ),
        (
            "held by it",
            plan("Inconclusive", with_verdict("Soaking", "infrastructure")),
            vec![Trigger::FleetDcInfrastructure],
        ),
        (
            "a DC not yet released counts too",
            plan("Soaking", with_verdict("Waiting", "infrastructure")),
            vec![Trigger::FleetDcInfrastructure],
        ),
        (
            "healthy again: the alert resolves",
            plan("Soaking", with_verdict("Soaking", "healthy")),
            vec![],
        ),
        (
            "a tenant's trouble is not the platform's",
            plan("Soaking", with_verdict("Soaking", "tenant")),
            vec![],
        ),
        (
            "failed: its own trigger says it, with the verdict among the facts",
            plan("Failed", with_verdict("Failed", "infrastructure")),
            vec![Trigger::FleetDcFailed, Trigger::FleetFailed],
        ),
        (
            "unreadable: its own trigger says it",
            plan("Inconclusive", with_verdict("Unknown", "infrastructure")),
            vec![Trigger::FleetDcUnreachable],
        ),
        (
            "the plan ended: the last verdict read is stale",
            plan("Succeeded", with_verdict("Succeeded", "infrastructure")),
            vec![Trigger::FleetDone],
        ),
    ];
    for (case, status, expected) in table {
        assert_eq!(fleet_triggers(status, Some("dev-a")), expected, "{case}");
    }
    let told = observe::fleet_release(
        &fleet(plan("Soaking", with_verdict("Soaking", "infrastructure"))),
        Some("dev-a"),
    );
    assert_eq!(
        told[0].title,
        "FleetRelease to-0-4-0: DC dev-b's doctor says infrastructure"
    );
    assert_eq!(
        told[0].act.as_deref(),
        Some("kubectl express doctor --context dev-b")
    );
    assert!(Trigger::FleetDcInfrastructure.is_condition());
    // The next stage's reading is another occurrence; the same stage's is the same one.
    let again = observe::fleet_release(
        &fleet(plan(
            "Inconclusive",
            with_verdict("Soaking", "infrastructure"),
        )),
        Some("dev-a"),
    );
    assert_eq!(again[0].id, told[0].id);
    let mut next_stage = with_verdict("Soaking", "infrastructure");
    next_stage["stage"] = json!(2);
    let later = observe::fleet_release(&fleet(plan("Soaking", next_stage)), Some("dev-a"));
    assert_ne!(later[0].id, told[0].id);
}
