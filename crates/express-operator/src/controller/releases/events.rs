//! The events of the releases: what a release step decided to tell, on the OperatorRelease, and
//! a tenant it moved, on its ExpressCluster.

pub(super) use crate::controller::events::{Notice, publish};

/// What a release step decided to tell, on the OperatorRelease (action `release`).
pub(crate) fn release_notice(notice: &express_planner::release::Notice) -> Notice {
    if notice.warning {
        Notice::warning(notice.reason, "release", notice.message.clone())
    } else {
        Notice::normal(notice.reason, "release", notice.message.clone())
    }
}

/// A release moved a tenant (forward to the build under test, or back), on its ExpressCluster.
pub(crate) fn tenant_moved(release: &str, ring: &str, back: bool) -> Notice {
    // A reason of its own each way: kube's Recorder counts a repeat of one reason on one object
    // as a series of the first note, which would hide the return behind the move.
    if back {
        Notice::normal(
            "ReturnedByRelease",
            "return_ring",
            format!(
                "OperatorRelease {release} rolled back: moved back to ring {ring}, whose operator adopts it"
            ),
        )
    } else {
        Notice::normal(
            "MovedByRelease",
            "move_ring",
            format!("OperatorRelease {release} moved it to ring {ring}, whose operator adopts it"),
        )
    }
}
