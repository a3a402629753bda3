//! The bounce rules (DESIGN section 6), pure: when a node's `express.dev/bounce` request is
//! refused, waits, starts, moves on or ends, and which pod operation each step needs.
//!
//! A bounce is a short state machine kept in the node's status, so that an operator restarted
//! at any instant carries on where it was:
//!
//! ```text
//! request ──checks fail──▶ Refused
//!    │
//!    ▼ (paused, no free slot, pod already being replaced: wait)
//! Pending ──▶ Terminating ──old pod gone──▶ Starting ──new pod Ready──▶ Succeeded
//!                 │ stuck past the timeout        │ not Ready in time, or ended
//!                 ▼                               ▼
//!               Failed                          Failed
//! ```
//!
//! The uid of the old pod is recorded before it is deleted: a pod with another uid is the
//! replacement, so the old one is deleted at most once per request and never mistaken for the
//! new one. The replacement runs the revision the old pod ran; a bounce never changes a node's
//! revision. A bounce holds a `maxConcurrent` slot from Terminating to its end, and nothing is
//! deleted or created while the cluster is blocked (paused, or its spec invalid).

use express_api::BouncePhase;
use express_api::bounce::{
    APP_STATE_CATCHUP, APP_STATE_REBUILDING, SHUTDOWN_PROTECTION_DISABLED, format_duration,
};
use express_api::keys::ANNOTATION_APP_STATE;

use crate::action::Operation;
use crate::snapshot::{BounceRecord, ClusterSnapshot, NodeIndex, NodeObservation, PodObservation};
use crate::state::NodeState;
use crate::text::clock;

/// A node's bounce after this plan: the record to keep in its status, and where it came from.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BouncePlan {
    pub request_id: String,
    pub phase: BouncePhase,
    /// What it does or waits for, in words that stay the same while nothing changes.
    pub message: String,
    pub force: bool,
    pub timeout_seconds: u64,
    pub pod_uid: Option<String>,
    pub revision: Option<String>,
    /// When the request was taken up; milliseconds since the Unix epoch.
    pub started_at_ms: i64,
    /// When the current phase began.
    pub phase_since_ms: i64,
    /// The phase its status recorded before this plan; None for a request not seen before.
    pub previous: Option<BouncePhase>,
    /// The application reported `Catchup` when the bounce started (it proceeds, with a
    /// warning).
    pub catchup: bool,
}

impl BouncePlan {
    /// The phase changes in this plan (or the request is new): worth an event.
    pub fn is_transition(&self) -> bool {
        self.previous != Some(self.phase)
    }
}

/// The bounce verdicts of one plan, per node (snapshot order).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct Bounces {
    pub plans: Vec<Option<BouncePlan>>,
    pub operations: Vec<(NodeIndex, Operation)>,
    /// The earliest instant a wait times out.
    pub wake_at_ms: Option<i64>,
}

impl Bounces {
    /// No allocation until a node has a bounce: most plans have none.
    pub fn new() -> Self {
        Bounces::default()
    }

    fn plan(&self, index: usize) -> Option<&BouncePlan> {
        self.plans.get(index).and_then(Option::as_ref)
    }

    fn set(&mut self, index: usize, plan: BouncePlan) {
        if self.plans.len() <= index {
            self.plans.resize(index + 1, None);
        }
        self.plans[index] = Some(plan);
    }

    /// The node's pod belongs to its bounce after this plan (the bounce holds its slot).
    pub fn holds_pod(&self, index: usize) -> bool {
        self.plan(index).is_some_and(|b| b.phase.holds_pod())
    }

    fn wake_at(&mut self, at_ms: i64) {
        self.wake_at_ms = Some(self.wake_at_ms.map_or(at_ms, |w| w.min(at_ms)));
    }
}

/// The bounce under way recorded for a node, if any.
pub fn in_progress(node: &NodeObservation) -> Option<&BounceRecord> {
    node.bounce.as_deref().filter(|b| !b.phase.is_final())
}

/// Moves every bounce already holding its pod (Terminating, Starting) one step. `blocked` says
/// why nothing may be deleted or created now, if so.
pub(crate) fn progress(
    snapshot: &ClusterSnapshot,
    blocked: Option<&str>,
    now_ms: i64,
    out: &mut Bounces,
) {
    for (index, node) in snapshot.nodes.iter().enumerate() {
        let Some(record) = in_progress(node).filter(|r| r.phase.holds_pod()) else {
            continue;
        };
        let next = step(index, node, record, blocked, now_ms, out);
        out.set(index, next);
    }
}

/// One bounce's next step, from which of its pods is seen: the old one (by the uid recorded)
/// or its replacement.
fn step(
    index: usize,
    node: &NodeObservation,
    record: &BounceRecord,
    blocked: Option<&str>,
    now_ms: i64,
    out: &mut Bounces,
) -> BouncePlan {
    let mut next = carried(record, now_ms);
    let old_uid = record.pod_uid.as_deref();
    let pod = node.pod.as_ref();
    let old_pod = pod.filter(|p| old_uid.is_none_or(|uid| p.uid.as_deref() == Some(uid)));
    let new_pod = pod.filter(|p| old_uid.is_some() && p.uid.as_deref() != old_uid);
    match (record.phase, old_pod, new_pod) {
        (BouncePhase::Terminating, Some(old), _) if old.terminating => {
            wait_for_termination(&mut next, node, record, old, now_ms, out);
        }
        (BouncePhase::Terminating, Some(_), _) => {
            // Recorded, but the deletion was not sent (or failed): send it now.
            match blocked {
                Some(why) => next.message = format!("deleting pod {} waits: {why}", node.name),
                None => {
                    next.message = format!("deleting pod {} gracefully", node.name);
                    out.operations
                        .push((NodeIndex(index), Operation::DeleteForBounce));
                }
            }
        }
        (_, None, Some(new)) => {
            if record.phase == BouncePhase::Terminating {
                next.enter(BouncePhase::Starting, now_ms);
            }
            wait_for_ready(&mut next, node, record, new, now_ms, out);
        }
        (_, None, None) if !node.up => {
            next.finish(
                BouncePhase::Failed,
                "the node was set down (up: false) during the bounce; its pod is not recreated"
                    .into(),
                now_ms,
            );
        }
        (_, None, None) => {
            if record.phase == BouncePhase::Terminating {
                next.enter(BouncePhase::Starting, now_ms);
            }
            create_replacement(&mut next, index, node, blocked, out);
        }
        (BouncePhase::Starting, Some(_), _) => {
            // The old pod seen again: the cache is behind; wait for it to go.
            next.message = format!("waiting for the old pod {} to go", node.name);
        }
        _ => {}
    }
    next
}

/// The old pod is terminating: it fails once stuck past the timeout, and is waited for until.
fn wait_for_termination(
    next: &mut BouncePlan,
    node: &NodeObservation,
    record: &BounceRecord,
    old: &PodObservation,
    now_ms: i64,
    out: &mut Bounces,
) {
    let timeout_ms = duration_ms(record.timeout_seconds);
    let since = record.phase_since_ms.unwrap_or(now_ms);
    if now_ms.saturating_sub(since) >= timeout_ms {
        next.finish(
            BouncePhase::Failed,
            format!(
                "pod {} stuck terminating for {}; not forced (it is replaced when it goes)",
                node.name,
                format_duration(record.timeout_seconds)
            ),
            now_ms,
        );
    } else {
        // The annotation is on the pod before its deletion, or the patch failed.
        let protection = if old.shutdown_protection.as_deref() == Some(SHUTDOWN_PROTECTION_DISABLED)
        {
            ""
        } else {
            "; its shutdown protection could not be disabled"
        };
        next.message = format!(
            "waiting for pod {} to terminate gracefully (reported stuck from {}){protection}",
            node.name,
            clock(since.saturating_add(timeout_ms))
        );
        out.wake_at(since.saturating_add(timeout_ms));
    }
}

/// The replacement exists: the bounce succeeds once it is Ready, fails if it ends or is not
/// Ready within the timeout from its creation, and waits meanwhile.
fn wait_for_ready(
    next: &mut BouncePlan,
    node: &NodeObservation,
    record: &BounceRecord,
    new: &PodObservation,
    now_ms: i64,
    out: &mut Bounces,
) {
    if new.is_serving() {
        next.finish(
            BouncePhase::Succeeded,
            format!(
                "pod {} is Ready again on revision {}",
                node.name,
                next.revision.as_deref().unwrap_or("?")
            ),
            now_ms,
        );
    } else if new.has_ended() {
        next.finish(
            BouncePhase::Failed,
            format!("the new pod {} ended before it was Ready", node.name),
            now_ms,
        );
    } else {
        // The wait for Ready starts when the new pod was created.
        let from = new.created_at_ms.unwrap_or(next.phase_since_ms);
        let deadline = from.saturating_add(duration_ms(record.timeout_seconds));
        if now_ms >= deadline && !new.terminating {
            next.finish(
                BouncePhase::Failed,
                format!(
                    "the new pod {} was not Ready within {}",
                    node.name,
                    format_duration(record.timeout_seconds)
                ),
                now_ms,
            );
        } else {
            next.message = format!(
                "waiting for the new pod {} to be Ready (until {})",
                node.name,
                clock(deadline)
            );
            out.wake_at(deadline);
        }
    }
}

/// The old pod is gone: create its replacement on the same revision, unless blocked.
fn create_replacement(
    next: &mut BouncePlan,
    index: usize,
    node: &NodeObservation,
    blocked: Option<&str>,
    out: &mut Bounces,
) {
    match blocked {
        Some(why) => {
            next.message = format!("the old pod is gone; creating the new one waits: {why}")
        }
        None => {
            next.message = format!(
                "creating pod {} on revision {}",
                node.name,
                next.revision.as_deref().unwrap_or("?")
            );
            out.operations
                .push((NodeIndex(index), Operation::CreateForBounce));
        }
    }
}

/// Takes up new bounce requests and those waiting (Pending): refuses those that may not run,
/// starts those that may (each takes a free slot unless its node already holds one), and keeps
/// the rest Pending with what they wait for. `states` are the nodes' states; a node whose
/// bounce starts becomes [`NodeState::Bouncing`].
pub(crate) fn admit(
    snapshot: &ClusterSnapshot,
    states: &mut [NodeState],
    blocked: Option<&str>,
    in_flight: usize,
    free_slots: &mut usize,
    now_ms: i64,
    out: &mut Bounces,
) {
    // Only nodes with a request or a bounce recorded matter; most plans have none.
    let mut order: Vec<usize> = (0..snapshot.nodes.len())
        .filter(|&i| {
            let node = &snapshot.nodes[i];
            node.bounce_request.is_some() || node.bounce.is_some() || out.plan(i).is_some()
        })
        .collect();
    if order.is_empty() {
        return;
    }
    order.sort_by(|&a, &b| {
        express_api::natural::natural_cmp(&snapshot.nodes[a].name, &snapshot.nodes[b].name)
    });
    for index in order {
        let node = &snapshot.nodes[index];
        if out.plan(index).is_some() {
            if let (Some(Some(plan)), Some(queued)) =
                (out.plans.get_mut(index), queued_request(node))
            {
                plan.message = format!("{}; request {queued} runs after this one", plan.message);
            }
            continue;
        }
        let Some(next) = requested(node, now_ms) else {
            continue;
        };
        let mut plan = next.plan;
        let start = match checks(node, plan.force, next.timeout_seconds_requested) {
            Ok(start) => start,
            Err(why) => {
                plan.finish(BouncePhase::Refused, why, now_ms);
                out.set(index, plan);
                continue;
            }
        };
        plan.timeout_seconds = start.timeout_seconds;
        plan.catchup = start.catchup;
        let catchup_note = if start.catchup {
            " (the application is catching up: it proceeds anyway)"
        } else {
            ""
        };
        let state = &states[index];
        let needs_slot = !state.in_flight();
        let wait = if let Some(why) = blocked {
            Some(format!("waits: {why}"))
        } else if matches!(
            state,
            NodeState::Terminating | NodeState::Replacing | NodeState::Removing
        ) {
            Some("waits for the replacement of its pod in progress to finish".to_owned())
        } else if needs_slot && *free_slots == 0 {
            Some(format!(
                "waits for a free slot: {in_flight} of maxConcurrent {} nodes changing",
                snapshot.settings.max_concurrent
            ))
        } else {
            None
        };
        match wait {
            Some(wait) => {
                if plan.phase != BouncePhase::Pending {
                    plan.enter(BouncePhase::Pending, now_ms);
                }
                plan.message = format!("{wait}{catchup_note}");
            }
            None => {
                if needs_slot {
                    *free_slots -= 1;
                }
                plan.enter(BouncePhase::Terminating, now_ms);
                plan.pod_uid = start.pod_uid;
                plan.revision = start.revision;
                plan.message = format!("deleting pod {} gracefully{catchup_note}", node.name);
                states[index] = NodeState::Bouncing;
                out.operations
                    .push((NodeIndex(index), Operation::DeleteForBounce));
            }
        }
        out.set(index, plan);
    }
}

/// A bounce's next record, starting from what was recorded.
fn carried(record: &BounceRecord, now_ms: i64) -> BouncePlan {
    BouncePlan {
        request_id: record.request_id.clone(),
        phase: record.phase,
        message: record.message.clone().unwrap_or_default(),
        force: record.force,
        timeout_seconds: record.timeout_seconds,
        pod_uid: record.pod_uid.clone(),
        revision: record.revision.clone(),
        started_at_ms: record.started_at_ms.unwrap_or(now_ms),
        phase_since_ms: record.phase_since_ms.unwrap_or(now_ms),
        previous: Some(record.phase),
        catchup: false,
    }
}

impl BouncePlan {
    fn enter(&mut self, phase: BouncePhase, now_ms: i64) {
        self.phase = phase;
        self.phase_since_ms = now_ms;
    }

    fn finish(&mut self, phase: BouncePhase, message: String, now_ms: i64) {
        self.enter(phase, now_ms);
        self.message = message;
    }
}

/// A request to take up now: a Pending one, or a new id once the last bounce is over.
struct Requested {
    plan: BouncePlan,
    /// The timeout as requested (for a Pending bounce: as recorded).
    timeout_seconds_requested: Result<u64, String>,
}

fn requested(node: &NodeObservation, now_ms: i64) -> Option<Requested> {
    if let Some(record) = in_progress(node) {
        // Pending (the others hold their pod and were moved on by `progress`).
        return (record.phase == BouncePhase::Pending).then(|| Requested {
            plan: carried(record, now_ms),
            timeout_seconds_requested: Ok(record.timeout_seconds),
        });
    }
    let request = node.bounce_request.as_ref()?;
    if node
        .bounce
        .as_ref()
        .is_some_and(|b| b.request_id == request.id)
    {
        return None;
    }
    Some(Requested {
        plan: BouncePlan {
            request_id: request.id.clone(),
            phase: BouncePhase::Pending,
            message: String::new(),
            force: request.force,
            timeout_seconds: *request
                .timeout_seconds
                .as_ref()
                .unwrap_or(&express_api::bounce::DEFAULT_BOUNCE_TIMEOUT_SECONDS),
            pod_uid: None,
            revision: None,
            started_at_ms: now_ms,
            phase_since_ms: now_ms,
            previous: None,
            catchup: false,
        },
        timeout_seconds_requested: request.timeout_seconds.clone(),
    })
}

/// A request id waiting behind the bounce under way, if any.
fn queued_request(node: &NodeObservation) -> Option<&str> {
    let current = in_progress(node)?;
    node.bounce_request
        .as_ref()
        .map(|r| r.id.as_str())
        .filter(|id| *id != current.request_id)
}

/// What starting a bounce needs from the node as it is now.
struct Start {
    pod_uid: Option<String>,
    revision: Option<String>,
    timeout_seconds: u64,
    catchup: bool,
}

/// The refusals of DESIGN section 6, in the order an SRE would look for them.
fn checks(
    node: &NodeObservation,
    force: bool,
    timeout: Result<u64, String>,
) -> Result<Start, String> {
    let timeout_seconds = timeout?;
    if !node.up {
        return Err(
            "the node is intentionally down (up: false); there is nothing to bounce".into(),
        );
    }
    let Some(pod) = &node.pod else {
        return Err(format!(
            "the node has no pod (pod {} does not exist); there is nothing to bounce",
            node.name
        ));
    };
    if !pod.owned {
        return Err(format!(
            "pod {} is not controlled by this node; the operator leaves it alone",
            node.name
        ));
    }
    if pod.app_state.as_deref() == Some(APP_STATE_REBUILDING) && !force {
        return Err(format!(
            "the application is {APP_STATE_REBUILDING} (pod annotation {ANNOTATION_APP_STATE}); a bounce would interrupt it. Bounce with --force to restart it anyway"
        ));
    }
    let running = pod.revision.as_deref();
    let on_desired = match (&node.desired, running) {
        (Ok(desired), Some(running)) => desired.revision == running,
        _ => false,
    };
    if !on_desired {
        let wants = match &node.desired {
            Ok(desired) => format!("the node wants revision {}", desired.revision),
            Err(why) => format!("the node's spec is invalid ({why})"),
        };
        let Some(running) = running else {
            return Err(format!(
                "its pod carries no revision label, so the revision to restart it on is unknown; {wants}"
            ));
        };
        if !force {
            return Err(format!(
                "its pod runs revision {running} but {wants}: a bounce would apply a pending change out of order. Let the rollout change it, or bounce with --force to restart it on revision {running}"
            ));
        }
        if !node.history.iter().any(|r| r == running) {
            return Err(format!(
                "no ControllerRevision keeps revision {running}, which its pod runs: it cannot be restarted on it"
            ));
        }
    }
    Ok(Start {
        pod_uid: pod.uid.clone(),
        revision: running.map(str::to_owned),
        timeout_seconds,
        catchup: pod.app_state.as_deref() == Some(APP_STATE_CATCHUP),
    })
}

fn duration_ms(seconds: u64) -> i64 {
    i64::try_from(seconds.saturating_mul(1000)).unwrap_or(i64::MAX)
}
