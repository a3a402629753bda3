//! A release's schedule: when the next sample is due.

use express_api::release::{OperatorReleaseSpec, OperatorReleaseStatus, ReleasePhase};
use k8s_openapi::jiff::Timestamp;

use crate::gates::after;

/// Whether the next step takes a sample (the controller reads the rings' health only then).
pub fn sample_due(
    spec: &OperatorReleaseSpec,
    status: &OperatorReleaseStatus,
    now: Timestamp,
) -> bool {
    let judging = matches!(
        status.phase(),
        ReleasePhase::Progressing | ReleasePhase::Inconclusive
    ) && !status.promoted_full
        && !spec.paused;
    judging && next_sample(spec, status).is_none_or(|at| at <= now)
}

pub(crate) fn next_sample(
    spec: &OperatorReleaseSpec,
    status: &OperatorReleaseStatus,
) -> Option<Timestamp> {
    let last = status.last_samples.last()?;
    Some(after(last.at.0, spec.interval_seconds))
}
