//! A replacement pod's start, reported only if it takes a while (DESIGN section 20: a node step
//! writes what a reader needs, nothing twice).
//!
//! A node's change writes its status when the change is recorded (its old pod going), when the
//! new pod appears, and when that pod is Ready. The middle write says only that the pod exists
//! and is not Ready yet, which the change record (Upgrading, to revision R, not Ready) already
//! tells a reader, and the pod itself shows. Most pods start within seconds, and then the
//! Ready write follows at once: the middle one costs a write per node and tells nobody
//! anything. So it waits [`QUIET_START_MS`] from the pod's creation; a pod Ready by then is
//! reported once, Ready; a slower one is reported starting at that moment, as before.

use express_api::conditions;
use express_api::{ChangeState, NodeStatus};
use express_planner::PodObservation;

/// How long a replacement pod may start before its node's status says it is starting. 15 s:
/// on a busy control plane (the scheduler, the kubelet and the API server all loaded) a pod
/// that starts in a second on an idle one takes over 5 s as often as not, and then its node
/// was written once more for nothing; a start of over 15 s is worth telling, and still far
/// inside any progress deadline.
pub const QUIET_START_MS: i64 = 15_000;

/// When `status`, which differs from the `previous` one written, need not be written yet: it
/// tells only that `pod`, the replacement an in-progress change recorded, exists and is not
/// Ready, and the pod is younger than [`QUIET_START_MS`]. Returns the moment to look again
/// (the status is written then if nothing wrote it before); `None`: write it now.
pub fn quiet_until(
    previous: &NodeStatus,
    status: &NodeStatus,
    pod: Option<&PodObservation>,
    now_ms: i64,
) -> Option<i64> {
    let pod = pod?;
    let change = status.change.as_ref()?;
    let recorded = previous.change.as_ref()?;
    let starting_replacement = change.state == ChangeState::InProgress
        && change == recorded
        && pod.revision.as_deref() == Some(change.to_revision.as_str())
        && !pod.terminating
        && status.ready == Some(false)
        && previous.ready == Some(false)
        && status.phase == previous.phase
        && pod.restarts == 0;
    if !starting_replacement {
        return None;
    }
    let quiet_until = pod.created_at_ms?.checked_add(QUIET_START_MS)?;
    if now_ms >= quiet_until {
        return None;
    }
    // Only what the pod's appearance changes may differ (its name, revision, version and
    // restarts, the UpToDate condition, the phase's wording: "new pod starting" after
    // "replacing its pod"); anything else is news now.
    let mut as_before = status.clone();
    as_before.message.clone_from(&previous.message);
    as_before.pod_name.clone_from(&previous.pod_name);
    as_before
        .running_revision
        .clone_from(&previous.running_revision);
    as_before
        .running_version
        .clone_from(&previous.running_version);
    as_before.restarts = previous.restarts;
    let up_to_date = |s: &NodeStatus| {
        s.conditions
            .iter()
            .find(|c| c.type_ == conditions::UP_TO_DATE)
            .cloned()
    };
    if let (Some(before), Some(now)) = (
        up_to_date(previous),
        as_before
            .conditions
            .iter_mut()
            .find(|c| c.type_ == conditions::UP_TO_DATE),
    ) {
        *now = before;
    }
    super::same_ignoring_time(previous, &as_before).then_some(quiet_until)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::status::fixtures::{NOW_MS, now, pod};
    use express_api::{ChangeKind, NodeChange, NodePhase};
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition;
    use proptest::prelude::*;

    /// When the fixtures' pods were created.
    const CREATED: i64 = NOW_MS - 1_000;

    fn condition(type_: &str, status: bool) -> Condition {
        Condition {
            type_: type_.into(),
            status: if status { "True" } else { "False" }.into(),
            reason: "R".into(),
            message: String::new(),
            observed_generation: Some(2),
            last_transition_time: now(),
        }
    }

    fn change(state: ChangeState) -> NodeChange {
        NodeChange {
            kind: ChangeKind::Upgrade,
            state,
            from_revision: Some("r1".into()),
            to_revision: "r2".into(),
            sequence: 1,
            rollout: "rollout-1".into(),
            recovery: false,
            reason: None,
            started_at: None,
            finished_at: None,
        }
    }

    /// The status the change record left: old pod gone, not Ready, Upgrading.
    fn recorded() -> NodeStatus {
        NodeStatus {
            phase: Some(NodePhase::Upgrading),
            desired_revision: Some("r2".into()),
            ready: Some(false),
            message: Some("replacing its pod".into()),
            conditions: vec![
                condition(conditions::READY, false),
                condition(conditions::UP_TO_DATE, false),
            ],
            change: Some(change(ChangeState::InProgress)),
            ..NodeStatus::default()
        }
    }

    /// The same node once its replacement exists and starts.
    fn starting() -> NodeStatus {
        let mut status = recorded();
        status.pod_name = Some("acme-fe1".into());
        status.running_revision = Some("r2".into());
        status.running_version = Some("v2".into());
        status.restarts = Some(0);
        status.message = Some("new pod starting".into());
        status.conditions[1] = condition(conditions::UP_TO_DATE, true);
        status
    }

    /// The replacement the change recorded: revision r2, not Ready.
    fn replacement() -> PodObservation {
        pod("r2", false)
    }

    #[test]
    fn a_young_replacement_waits_until_its_quiet_start_ends() {
        let pod = replacement();
        assert_eq!(
            quiet_until(&recorded(), &starting(), Some(&pod), CREATED + 1_000),
            Some(CREATED + QUIET_START_MS)
        );
        assert_eq!(
            quiet_until(
                &recorded(),
                &starting(),
                Some(&pod),
                CREATED + QUIET_START_MS
            ),
            None,
            "a slow start is reported once the quiet start ends"
        );
    }

    #[test]
    fn anything_else_is_written_at_once() {
        let pod = replacement();
        let soon = CREATED + 1_000;
        let mut ready = starting();
        ready.ready = Some(true);
        ready.conditions[0] = condition(conditions::READY, true);
        assert_eq!(quiet_until(&recorded(), &ready, Some(&pod), soon), None);

        let mut failed = starting();
        failed.change = Some(change(ChangeState::Failed));
        assert_eq!(quiet_until(&recorded(), &failed, Some(&pod), soon), None);

        let mut other_news = starting();
        other_news.desired_revision = Some("r3".into());
        assert_eq!(
            quiet_until(&recorded(), &other_news, Some(&pod), soon),
            None
        );

        let mut other_phase = starting();
        other_phase.phase = Some(NodePhase::NotReady);
        assert_eq!(
            quiet_until(&recorded(), &other_phase, Some(&pod), soon),
            None
        );

        let old_revision = PodObservation {
            revision: Some("r1".into()),
            ..replacement()
        };
        assert_eq!(
            quiet_until(&recorded(), &starting(), Some(&old_revision), soon),
            None,
            "a pod of another revision than the change's is news"
        );
        let crashed = PodObservation {
            restarts: 1,
            ..replacement()
        };
        assert_eq!(
            quiet_until(&recorded(), &starting(), Some(&crashed), soon),
            None
        );
        let undated = PodObservation {
            created_at_ms: None,
            ..replacement()
        };
        assert_eq!(
            quiet_until(&recorded(), &starting(), Some(&undated), soon),
            None
        );
        assert_eq!(quiet_until(&recorded(), &starting(), None, soon), None);
        let mut unrecorded = recorded();
        unrecorded.change = None;
        assert_eq!(
            quiet_until(&unrecorded, &starting(), Some(&pod), soon),
            None
        );
    }

    proptest! {
        /// Never quiet past the pod's quiet start, never about a Ready node, and a status
        /// kept back is always written by the moment returned.
        #[test]
        fn quiet_only_briefly_and_never_about_readiness(
            now in CREATED - 10_000..CREATED + 20_000,
            ready in any::<bool>(),
            restarts in 0i32..3,
            same_change in any::<bool>(),
        ) {
            let pod = PodObservation { restarts, ..replacement() };
            let mut status = starting();
            status.ready = Some(ready);
            if !same_change {
                status.change = Some(change(ChangeState::Succeeded));
            }
            if let Some(until) = quiet_until(&recorded(), &status, Some(&pod), now) {
                prop_assert!(!ready);
                prop_assert!(same_change);
                prop_assert_eq!(restarts, 0);
                prop_assert!(now < until && until == CREATED + QUIET_START_MS);
            }
        }
    }
}
