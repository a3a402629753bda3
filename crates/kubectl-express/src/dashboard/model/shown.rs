//! How a time and a node's phase read on a page: the little wordings every view shares.

use express_api::NodeRef;
use k8s_openapi::jiff::Timestamp;

/// Seconds from `then` to `now` (0 when `then` is in the future).
pub(super) fn seconds_since(now: Timestamp, then: Timestamp) -> i64 {
    (now.as_second() - then.as_second()).max(0)
}

pub(super) fn age(now: Timestamp, then: Option<Timestamp>) -> Option<String> {
    then.map(|then| express_triage::age(seconds_since(now, then)))
}

/// A node's phase as the pages show it ("-" before the operator wrote one).
pub(super) fn phase_of(node: &NodeRef<'_>) -> String {
    node.status()
        .and_then(|s| s.phase)
        .map_or_else(|| "-".into(), |p| p.as_str().to_owned())
}
