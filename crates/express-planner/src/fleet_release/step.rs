//! The step: what each DC shows first, then the requests (an abort, then the newer of a pause
//! and a resume), then the failures (a release rolled back, a stage past its deadline), then the
//! stage under way: started behind its approval, its releases followed, soaked, and on to the
//! next stage in the same step. Each gate lives with its concern: [`super::requests`],
//! [`super::stages`], [`super::soak`].

use std::ops::ControlFlow;

use express_api::fleet_release::{DcState, FleetPhase};
use k8s_openapi::jiff::Timestamp;

use super::model::{FleetSnapshot, FleetStep};
use super::stepper::Stepper;
use crate::gates::after;
use crate::gates::{Gate, wake_at};

/// Decides one step.
pub fn step(s: &FleetSnapshot<'_>) -> FleetStep {
    let mut st = Stepper::new(s);
    let wake_at = wake_at(gates(&mut st));
    st.status.message = st.message.take().or(st.status.message.take());
    FleetStep {
        status: st.status,
        actions: st.actions,
        notices: st.notices,
        wake_at,
    }
}

/// Whether the next step wants the DCs' doctor verdicts: a soak sample is due, or the last
/// stage is about to start and its DCs' verdicts before it are not known yet.
pub fn verdicts_due(s: &FleetSnapshot<'_>) -> bool {
    let status = s.status;
    let phase = status.phase();
    if phase.is_final() || status.paused_since.is_some() {
        return false;
    }
    if let Some(soak) = &status.soak
        && matches!(phase, FleetPhase::Soaking | FleetPhase::Inconclusive)
    {
        return soak
            .last_sample_at
            .as_ref()
            .is_none_or(|at| after(at.0, s.spec.release.interval_seconds) <= s.now);
    }
    let last = s.spec.stages.len().saturating_sub(1);
    let last_started = s.spec.stages.get(last).is_some_and(|stage| {
        stage
            .contexts
            .iter()
            .any(|c| status.dc(c).is_some_and(|d| d.state != DcState::Waiting))
    });
    !last_started
        && status.stage as usize + 1 >= s.spec.stages.len()
        && s.spec.stages.get(last).is_some_and(|stage| {
            stage
                .contexts
                .iter()
                .any(|c| status.dc(c).is_none_or(|d| d.verdict.is_none()))
        })
}

/// The gates in order; any may end the step.
fn gates(st: &mut Stepper<'_>) -> Gate<Option<Timestamp>> {
    st.observe();
    st.refuse_invalid_plan()?;
    st.take_abort()?;
    st.stop_when_over()?;
    st.take_pause_or_resume();
    st.hold_while_paused()?;
    st.fail_on_rolled_back_release()?;
    st.take_early_approval();
    loop {
        let Some(stage) = st.stage_under_way() else {
            st.succeed();
            return ControlFlow::Break(None);
        };
        st.enter_stage(stage)?;
        st.follow_releases(stage)?;
        st.soak(stage)?;
    }
}
