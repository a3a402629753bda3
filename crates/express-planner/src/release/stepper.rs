//! The step's working state: the status being written, the moves and events so far, and the
//! edits to them that more than one gate makes.

use express_api::release::{
    OperatorReleaseSpec, OperatorReleaseStatus, ReleasePhase, ReleaseRequests, WaveStatus,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, Time};
use k8s_openapi::jiff::Timestamp;

use super::census::{Census, count};
use super::model::{Direction, Move, ReleaseSnapshot, ReleaseStep, reason};
use crate::gates::Notice;

/// The wave a step works on.
#[derive(Clone, Copy)]
pub(super) struct Wave {
    pub(super) index: usize,
    /// How many tenants must have moved by the end of it (cumulative).
    pub(super) target: usize,
    /// Promoted in full: every remaining wave at once, no judging, no baking.
    pub(super) full: bool,
}

pub(super) struct Stepper<'a> {
    pub(super) s: &'a ReleaseSnapshot<'a>,
    pub(super) census: &'a Census<'a>,
    /// The phase the step began in: what the events compare against.
    pub(super) phase_before: ReleasePhase,
    pub(super) status: OperatorReleaseStatus,
    pub(super) moves: Vec<Move>,
    pub(super) notices: Vec<Notice>,
}

impl<'a> Stepper<'a> {
    pub(super) fn new(s: &'a ReleaseSnapshot<'a>, census: &'a Census<'a>) -> Self {
        let mut status = s.status.clone();
        status.observed_generation = s.generation;
        status.movable_tenants = count(census.movable());
        status.moved_tenants = count(census.moved.len());
        status.adopted_tenants = count(census.adopted);
        status.pinned_tenants = count(census.pinned);
        Stepper {
            s,
            census,
            phase_before: s.status.phase(),
            status,
            moves: Vec::new(),
            notices: Vec::new(),
        }
    }

    pub(super) fn finish(self, wake_at: Option<Timestamp>) -> ReleaseStep {
        ReleaseStep {
            status: self.status,
            moves: self.moves,
            notices: self.notices,
            wake_at,
        }
    }

    pub(super) fn notice(&mut self, warning: bool, reason: &'static str, message: String) {
        self.notices.push(Notice {
            warning,
            reason,
            message,
        });
    }

    pub(super) fn requests(&mut self) -> &mut ReleaseRequests {
        self.status
            .requests
            .get_or_insert_with(ReleaseRequests::default)
    }

    pub(super) fn begin_rollback(&mut self, why: String) {
        self.status.phase = Some(ReleasePhase::RolledBack);
        self.status.rolled_back_at = Some(Time(self.s.now));
        self.status.rollback_reason = Some(why.clone());
        self.notice(true, reason::ROLLED_BACK, format!("rolling back: {why}"));
    }

    /// Every tenant the release moved goes back, within the hand-over bound.
    pub(super) fn roll_back(&mut self) {
        let spec = self.s.spec;
        let census = self.census;
        let budget = (spec.max_hand_overs as usize).saturating_sub(census.returning);
        self.moves
            .extend(census.moved.iter().take(budget).map(|t| Move {
                namespace: t.namespace.clone(),
                name: t.name.clone(),
                to_ring: spec.from_ring.clone(),
                direction: Direction::Back,
            }));
        let why = format!(
            "rolled back: {}",
            self.status
                .rollback_reason
                .as_deref()
                .unwrap_or("no reason recorded")
        );
        let left = census.moved.len() + census.returning;
        self.status.message = Some(if left == 0 {
            format!(
                "{why} (every tenant it moved is driven by ring {} again)",
                spec.from_ring
            )
        } else {
            format!(
                "{why} ({} tenant(s) still on ring {}, {} not yet driven by ring {})",
                census.moved.len(),
                spec.to_ring,
                census.returning,
                spec.from_ring
            )
        });
    }

    pub(super) fn start_wave(&mut self, wave: usize) {
        self.status.wave = count(wave);
        while self.status.waves.len() <= wave {
            self.status.waves.push(WaveStatus::default());
        }
        if self.status.waves[wave].started_at.is_none() {
            self.status.waves[wave].started_at = Some(Time(self.s.now));
        }
    }

    pub(super) fn succeed(&mut self, wave: usize) {
        let spec = self.s.spec;
        self.status.waves[wave].finished_at = Some(Time(self.s.now));
        self.status.phase = Some(ReleasePhase::Succeeded);
        let message = format!(
            "every movable tenant ({}) is driven by ring {}; {} pinned tenant(s) untouched",
            self.status.moved_tenants, spec.to_ring, self.status.pinned_tenants
        );
        self.status.message = Some(message.clone());
        self.notice(false, reason::SUCCEEDED, message);
    }
}

/// Sets a condition of the release; its `lastTransitionTime` moves only when its status does.
pub(super) fn set_condition(
    status: &mut OperatorReleaseStatus,
    type_: &str,
    state: &str,
    reason: &str,
    message: String,
    now: Timestamp,
) {
    let since = status
        .conditions
        .iter()
        .find(|c| c.type_ == type_ && c.status == state)
        .map_or(Time(now), |c| c.last_transition_time.clone());
    status.conditions.retain(|c| c.type_ != type_);
    status.conditions.push(Condition {
        type_: type_.into(),
        status: state.into(),
        reason: reason.into(),
        message,
        observed_generation: status.observed_generation,
        last_transition_time: since,
    });
}

pub(super) fn progress_message(
    status: &OperatorReleaseStatus,
    spec: &OperatorReleaseSpec,
    census: &Census<'_>,
    target: usize,
    holding: bool,
    bake_end: Option<Timestamp>,
    now: Timestamp,
) -> String {
    let wave = format!("wave {} of {}", status.wave + 1, spec.waves.len());
    if holding {
        let why = status.last_samples.last().map_or("", |s| s.reason.as_str());
        return format!("{wave}: holding, neither promoting nor rolling back: {why}");
    }
    if census.moved.len() < target || census.adopted < census.moved.len() {
        return format!(
            "{wave}: {} of {target} tenant(s) moved to ring {}, {} adopted",
            census.moved.len(),
            spec.to_ring,
            census.adopted
        );
    }
    match bake_end {
        Some(end) => format!(
            "{wave}: baking, {}s left ({} ok, {} failed of {} tolerated)",
            (end.as_second() - now.as_second()).max(0),
            status.samples.ok,
            status.samples.failed,
            spec.failure_limit
        ),
        None => format!("{wave}: {target} tenant(s) adopted; waiting for an ok sample to bake"),
    }
}
