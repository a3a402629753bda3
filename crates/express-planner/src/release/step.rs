//! The step, as its table of contents: refuse an invalid spec, act on requests, wait for
//! `toRing`'s leader, sample, move, bake and advance, in that order (see the module doc of
//! [`super`]). Each gate lives with its concern: [`super::requests`], [`super::waves`],
//! [`super::samples`].

use std::ops::ControlFlow;

use k8s_openapi::jiff::Timestamp;

use super::census::census;
use super::model::{ReleaseSnapshot, ReleaseStep};
use super::stepper::Stepper;
use crate::gates::{Gate, wake_at};

/// The next status, moves, events and wake-up of a release (see the module doc).
pub fn step(s: &ReleaseSnapshot<'_>) -> ReleaseStep {
    let census = census(s.name, s.spec, s.tenants);
    let mut st = Stepper::new(s, &census);
    let wake_at = wake_at(gates(&mut st));
    st.finish(wake_at)
}

/// The gates in the order the module doc gives them; any of them may end the step.
fn gates(st: &mut Stepper<'_>) -> Gate<Option<Timestamp>> {
    st.refuse_invalid_spec()?;
    st.take_rollback_request();
    st.stop_when_over()?;
    st.hold_while_paused()?;
    st.take_promote_request();
    st.start()?;
    let wave = st.enter_wave();
    let last = st.sample(wave)?;
    let holding = st.hold_when_inconclusive(wave, last);
    st.move_forward(wave, holding);
    let bake_end = st.bake(wave, last, holding)?;
    ControlFlow::Continue(st.report_progress(wave, holding, bake_end))
}
