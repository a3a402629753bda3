//! Settle marks as status records them, shared by the node and ExpressCluster statuses.

use express_api::ObservedDesired;
use express_planner::DesiredMark;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::MicroTime;

/// A settle mark as written to status. Marks carry the instant they were first seen, so a
/// mark kept from the previous status keeps its instant.
pub(super) fn observed_desired(mark: &DesiredMark) -> ObservedDesired {
    ObservedDesired {
        revision: mark.revision.clone(),
        up: mark.up,
        rollout_id: mark.rollout_id.clone(),
        ordering: mark.ordering.clone(),
        since: k8s_openapi::jiff::Timestamp::from_millisecond(mark.since_ms)
            .ok()
            .map(MicroTime),
    }
}
