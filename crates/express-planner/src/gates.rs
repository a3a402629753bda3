//! What both release machines (one DC's [`release`](crate::release), the one across DCs,
//! [`fleet_release`](crate::fleet_release)) are made of: a step is a table of contents of
//! gates, each a [`Gate`] that goes on or ends the step with when to look again; the clock they
//! read (an instant some seconds after another, seconds between two, the earlier of two
//! wake-ups); and the [`Notice`] each step leaves for people.

use std::ops::ControlFlow;

use k8s_openapi::jiff::{SignedDuration, Timestamp};

/// What a gate decides: go on to the next gate (with what it found), or end the step here,
/// stepping again at the time given (none: only when something changes).
pub(crate) type Gate<T = ()> = ControlFlow<Option<Timestamp>, T>;

/// The wake-up a finished table of contents gives, whichever way it ended.
pub(crate) fn wake_at(gates: Gate<Option<Timestamp>>) -> Option<Timestamp> {
    match gates {
        ControlFlow::Break(wake_at) | ControlFlow::Continue(wake_at) => wake_at,
    }
}

/// `seconds` after `at`, saturating: a spec may ask for more seconds than a timestamp holds.
pub(crate) fn after(at: Timestamp, seconds: u64) -> Timestamp {
    at.saturating_add(SignedDuration::from_secs(
        i64::try_from(seconds).unwrap_or(i64::MAX),
    ))
    .unwrap_or(Timestamp::MAX)
}

/// Whole seconds from `from` to `to`; none when `to` is not later.
pub(crate) fn seconds_between(from: Timestamp, to: Timestamp) -> u64 {
    u64::try_from(to.as_second().saturating_sub(from.as_second())).unwrap_or(0)
}

/// The earlier of two wake-ups; either alone when the other is none.
pub(crate) fn earlier(a: Option<Timestamp>, b: Option<Timestamp>) -> Option<Timestamp> {
    match (a, b) {
        (Some(a), Some(b)) => Some(a.min(b)),
        (a, b) => a.or(b),
    }
}

/// What a step did, for people: an event on an OperatorRelease, a line the FleetRelease's
/// driver prints.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Notice {
    pub warning: bool,
    /// One word per thing a release does (an event's reason).
    pub reason: &'static str,
    pub message: String,
}
