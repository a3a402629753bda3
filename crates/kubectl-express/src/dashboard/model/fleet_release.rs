//! A FleetRelease's page, pure: where the plan stands in words, the DC a person should look at
//! first (the one failing, waiting for approval or unreadable), its stages as a pipeline of
//! DCs (each DC's state, its own release's wave, the soak time left) and the soak samples.
//!
//! Built from the newest of the copies the dashboard's DCs hold (the one a driver wrote last),
//! as `fleet-release NAME` reads it.

use express_api::fleet_release::{DcState, FleetPhase, FleetRelease};
use k8s_openapi::jiff::Timestamp;
use kube::ResourceExt;
use serde::Serialize;

use super::shown::seconds_since;

#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct DcCard {
    pub context: String,
    pub state: String,
    /// "Progressing, wave 2", or "-".
    pub release: String,
    /// Soaking: the time left of its stage's soak.
    pub soak_left: Option<String>,
    pub verdict: Option<String>,
    pub message: String,
    /// The DC a person should look at first.
    pub attention: bool,
    /// The dashboard serves this DC (an action can reach it).
    pub served: bool,
}

#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct StageColumn {
    pub number: usize,
    pub name: String,
    /// It waits for a person's approval before it starts.
    pub approval: bool,
    pub approved: bool,
    /// The stage being released or soaked now.
    pub current: bool,
    pub dcs: Vec<DcCard>,
}

#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct SoakRow {
    pub at: String,
    pub stage: u32,
    pub verdict: String,
    pub reason: String,
}

#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct FleetReleaseView {
    pub name: String,
    pub from_ring: String,
    pub to_ring: String,
    pub phase: String,
    pub why: String,
    /// What happens next, and when.
    pub next: String,
    /// The one line a person needs first: the DC or stage in trouble or waiting (empty: none).
    pub attention: String,
    pub stages: Vec<StageColumn>,
    /// The current soak: "2 ok, 0 failed (limit 1), 4m 10s left".
    pub soak: Option<String>,
    pub samples: Vec<SoakRow>,
    pub paused: bool,
    pub waiting_approval: bool,
    /// Succeeded, failed, aborted or rolled back: only an abort with rollback is left.
    pub over: bool,
    /// The plan's DCs the dashboard does not serve (an action cannot reach them).
    pub unserved: Vec<String>,
}

impl FleetReleaseView {
    /// `served`: the contexts this dashboard holds a client for.
    pub fn of(plan: &FleetRelease, served: &[String], now: Timestamp) -> FleetReleaseView {
        let spec = &plan.spec;
        let status = plan.status.clone().unwrap_or_default();
        let phase = status.phase();
        let soak_left = status.soak.as_ref().map(|soak| {
            let held = i64::try_from(soak.held_seconds).unwrap_or(i64::MAX);
            let soaked = seconds_since(now, soak.started_at.0).saturating_sub(held);
            let left = i64::try_from(spec.soak_seconds)
                .unwrap_or(i64::MAX)
                .saturating_sub(soaked)
                .max(0);
            (soak.stage, express_triage::age(left))
        });
        let attention_of = |state: DcState, stage: usize| {
            matches!(
                state,
                DcState::Failed | DcState::RolledBack | DcState::Unknown
            ) || (phase == FleetPhase::WaitingApproval && stage == status.stage as usize)
        };
        let stages: Vec<StageColumn> = spec
            .stages
            .iter()
            .enumerate()
            .map(|(i, stage)| StageColumn {
                number: i + 1,
                name: stage.name.clone(),
                approval: stage.approval,
                approved: status.approved.contains(&stage.name),
                current: i == status.stage as usize && !phase.is_final(),
                dcs: stage
                    .contexts
                    .iter()
                    .map(|context| {
                        let dc = status.dc(context);
                        let state = dc.map_or(DcState::Waiting, |d| d.state);
                        DcCard {
                            context: context.clone(),
                            state: state.as_str().to_owned(),
                            release: dc.and_then(|d| d.release.as_ref()).map_or_else(
                                || "-".to_owned(),
                                |r| format!("{}, wave {}", r.phase, r.wave + 1),
                            ),
                            soak_left: soak_left
                                .as_ref()
                                .filter(|(s, _)| *s as usize == i && state == DcState::Soaking)
                                .map(|(_, left)| format!("{left} left")),
                            verdict: dc.and_then(|d| d.verdict).map(|v| v.to_string()),
                            message: dc.and_then(|d| d.message.clone()).unwrap_or_default(),
                            attention: attention_of(state, i),
                            served: served.contains(context),
                        }
                    })
                    .collect(),
            })
            .collect();
        let soak = status.soak.as_ref().map(|soak| {
            format!(
                "stage {}: {} ok, {} failed, {} inconclusive{}{}",
                soak.stage + 1,
                soak.ok,
                soak.failed,
                soak.inconclusive,
                soak_left
                    .as_ref()
                    .map(|(_, left)| format!("; {left} left"))
                    .unwrap_or_default(),
                if soak.holding {
                    "; held (the clock stands still)"
                } else {
                    ""
                }
            )
        });
        let samples = status
            .samples
            .iter()
            .rev()
            .take(10)
            .rev()
            .map(|s| SoakRow {
                at: s.at.0.strftime("%H:%M:%S").to_string(),
                stage: s.stage + 1,
                verdict: s.verdict.as_str().to_owned(),
                reason: s.reason.clone(),
            })
            .collect();
        let unserved = spec
            .contexts()
            .map(|(_, c)| c.to_owned())
            .filter(|c| !served.contains(c))
            .collect();
        FleetReleaseView {
            name: plan.name_any(),
            from_ring: spec.from_ring.clone(),
            to_ring: spec.to_ring.clone(),
            phase: phase.as_str().to_owned(),
            why: status.message.clone().unwrap_or_default(),
            next: next_step(plan, phase),
            attention: attention(&stages, phase),
            stages,
            soak,
            samples,
            paused: phase == FleetPhase::Paused,
            waiting_approval: phase == FleetPhase::WaitingApproval,
            over: phase.is_final(),
            unserved,
        }
    }

    /// The stage waiting for approval, by name.
    pub fn waiting_stage(&self) -> Option<&StageColumn> {
        self.stages
            .iter()
            .find(|s| s.current)
            .filter(|_| self.waiting_approval)
    }
}

/// The DC or stage a person should look at first, in words.
fn attention(stages: &[StageColumn], phase: FleetPhase) -> String {
    let troubled: Vec<String> = stages
        .iter()
        .flat_map(|s| &s.dcs)
        .filter(|d| d.attention && d.state != "Waiting")
        .map(|d| {
            if d.message.is_empty() {
                format!("{} is {}", d.context, d.state)
            } else {
                format!("{} is {}: {}", d.context, d.state, d.message)
            }
        })
        .collect();
    if !troubled.is_empty() {
        return troubled.join("; ");
    }
    match stages.iter().find(|s| s.current) {
        Some(stage) if phase == FleetPhase::WaitingApproval => format!(
            "stage {} ({}: {}) waits for approval",
            stage.number,
            stage.name,
            stage
                .dcs
                .iter()
                .map(|d| d.context.as_str())
                .collect::<Vec<_>>()
                .join(", ")
        ),
        _ => String::new(),
    }
}

fn next_step(plan: &FleetRelease, phase: FleetPhase) -> String {
    let status = plan.status.clone().unwrap_or_default();
    let stage = status.stage as usize;
    let stages = &plan.spec.stages;
    let following = stages.get(stage + 1).map_or_else(
        || "the plan succeeds".to_owned(),
        |s| format!("stage {} ({}) starts", stage + 2, s.name),
    );
    match phase {
        FleetPhase::Pending => "the driver starts stage 1".into(),
        FleetPhase::Progressing => format!(
            "stage {}'s DCs finish their releases, then soak for {}s against the DCs not yet \
             released",
            stage + 1,
            plan.spec.soak_seconds
        ),
        FleetPhase::Soaking => format!("once the soak passes, {following}"),
        FleetPhase::WaitingApproval => format!(
            "stage {} ({}) starts once a person approves it",
            stage + 1,
            stages.get(stage).map_or("", |s| s.name.as_str())
        ),
        FleetPhase::Paused => {
            "no stage starts, in-flight releases stay paused and the soak clock stands still \
             until it is resumed"
                .into()
        }
        FleetPhase::Inconclusive => {
            "held: the soak's clock stands still until a sample is clean again".into()
        }
        FleetPhase::Succeeded => {
            "nothing (an abort with rollback would still move every DC back)".into()
        }
        FleetPhase::Failed | FleetPhase::Aborted => {
            "nothing more starts; an abort with rollback moves the released DCs back".into()
        }
        FleetPhase::RolledBack => "nothing: every released DC went back".into(),
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    fn plan(status: serde_json::Value) -> FleetRelease {
        serde_json::from_value(serde_json::json!({
            "apiVersion": "express.dev/v1alpha1", "kind": "FleetRelease",
            "metadata": {"name": "to-canary", "namespace": "express-system"},
            "spec": {"fromRing": "default", "toRing": "canary", "release": {"waves": [{"percent": 100}]},
                     "stages": [{"name": "first", "contexts": ["dc-a"]},
                                {"name": "rest", "contexts": ["dc-b", "dc-c"], "approval": true}],
                     "soakSeconds": 600},
            "status": status,
        }))
        .unwrap()
    }

    fn served() -> Vec<String> {
        vec!["dc-a".into(), "dc-b".into()]
    }

    fn now() -> Timestamp {
        "2026-11-27T12:10:00Z".parse().unwrap()
    }

    #[test]
    fn a_stage_waiting_for_approval_is_what_a_person_sees_first() {
        let view = FleetReleaseView::of(
            &plan(serde_json::json!({
                "phase": "WaitingApproval", "stage": 1,
                "dataCenters": [{"context": "dc-a", "stage": 0, "state": "Succeeded",
                                 "release": {"phase": "Succeeded", "wave": 0}}],
            })),
            &served(),
            now(),
        );
        assert_eq!(
            view.attention,
            "stage 2 (rest: dc-b, dc-c) waits for approval"
        );
        assert_eq!(view.waiting_stage().map(|s| s.name.as_str()), Some("rest"));
        let cards: Vec<(&str, &str, bool, bool)> = view
            .stages
            .iter()
            .flat_map(|s| &s.dcs)
            .map(|d| (d.context.as_str(), d.state.as_str(), d.attention, d.served))
            .collect();
        assert_eq!(
            cards,
            [
                ("dc-a", "Succeeded", false, true),
                ("dc-b", "Waiting", true, true),
                ("dc-c", "Waiting", true, false)
            ]
        );
        assert_eq!(view.stages[0].dcs[0].release, "Succeeded, wave 1");
        assert_eq!(view.unserved, ["dc-c"]);
        assert!(view.stages[1].current && view.stages[1].approval && !view.stages[1].approved);
        assert_eq!(view.next, "stage 2 (rest) starts once a person approves it");
    }

    #[test]
    fn a_failed_dc_is_named_first_and_a_soaking_dc_shows_the_time_left() {
        let failed = FleetReleaseView::of(
            &plan(serde_json::json!({
                "phase": "Failed", "stage": 1, "message": "dc-b rolled back",
                "dataCenters": [
                    {"context": "dc-a", "stage": 0, "state": "Succeeded"},
                    {"context": "dc-b", "stage": 1, "state": "RolledBack", "message": "its release rolled back"},
                    {"context": "dc-c", "stage": 1, "state": "Succeeded"}],
            })),
            &served(),
            now(),
        );
        assert_eq!(
            failed.attention,
            "dc-b is RolledBack: its release rolled back"
        );
        assert!(failed.over && failed.waiting_stage().is_none());
        assert!(!failed.stages.iter().any(|s| s.current));

        let soaking = FleetReleaseView::of(
            &plan(serde_json::json!({
                "phase": "Soaking", "stage": 0,
                "dataCenters": [{"context": "dc-a", "stage": 0, "state": "Soaking"}],
                "soak": {"stage": 0, "startedAt": "2026-11-27T12:00:00Z", "heldSeconds": 60,
                         "ok": 3, "failed": 0, "inconclusive": 1},
                "samples": [{"at": "2026-11-27T12:09:00Z", "stage": 0, "verdict": "Ok", "reason": "fine"}],
            })),
            &served(),
            now(),
        );
        // 600 s of soak, 600 s since it started, 60 of them held: 60 s left.
        assert_eq!(
            soaking.stages[0].dcs[0].soak_left.as_deref(),
            Some("1m left")
        );
        assert_eq!(
            soaking.soak.as_deref(),
            Some("stage 1: 3 ok, 0 failed, 1 inconclusive; 1m left")
        );
        assert_eq!(soaking.attention, "");
        assert_eq!(soaking.samples[0].stage, 1);
        assert_eq!(soaking.next, "once the soak passes, stage 2 (rest) starts");
    }
}
