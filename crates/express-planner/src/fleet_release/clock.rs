//! The plan's clock: an instant some seconds after another (saturating: a plan may ask for more
//! seconds than a timestamp holds), seconds between two, the earlier of two wake-ups.

use k8s_openapi::jiff::{SignedDuration, Timestamp};

/// `seconds` after `at`, saturating.
pub(super) fn after(at: Timestamp, seconds: u64) -> Timestamp {
    at.saturating_add(SignedDuration::from_secs(
        i64::try_from(seconds).unwrap_or(i64::MAX),
    ))
    .unwrap_or(Timestamp::MAX)
}

pub(super) fn seconds_between(from: Timestamp, to: Timestamp) -> u64 {
    u64::try_from(to.as_second().saturating_sub(from.as_second())).unwrap_or(0)
}

pub(super) fn earlier(a: Option<Timestamp>, b: Option<Timestamp>) -> Option<Timestamp> {
    match (a, b) {
        (Some(a), Some(b)) => Some(a.min(b)),
        (a, b) => a.or(b),
    }
}
