//! A release's clock: when the next sample is due, and the time a number of seconds after
//! another (saturating, since a spec may ask for more seconds than a timestamp can hold).

use express_api::release::{OperatorReleaseSpec, OperatorReleaseStatus, ReleasePhase};
use k8s_openapi::jiff::{SignedDuration, Timestamp};

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

pub(crate) fn after(at: Timestamp, seconds: u64) -> Timestamp {
    at.saturating_add(SignedDuration::from_secs(
        i64::try_from(seconds).unwrap_or(i64::MAX),
    ))
    .unwrap_or(Timestamp::MAX)
}
