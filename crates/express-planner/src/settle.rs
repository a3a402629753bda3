//! Whether a cluster's desired state has settled (DESIGN section 3, rule 8), pure.
//!
//! Helm, Argo CD and `kubectl apply` write a tenant's objects one at a time. Planning from a
//! half-written desired state would start changes in the wrong order, so a *new* change (a
//! provision, upgrade or removal not already recorded in progress) starts only once the desired
//! state has settled:
//!
//! - **Rollout barrier.** When some node (up, or set down with its pod still running) or the
//!   ExpressCluster carries `express.dev/rollout-id` and the carriers disagree, nothing new
//!   starts. When every up node
//!   carries it and they agree, the state is settled at once, with no window, unless the
//!   cluster runs no pod yet (a first delivery agrees with itself before it is complete).
//! - **Settle window.** Otherwise the state is settled once no object's desired state (a node's
//!   desired revision, `up` or rollout-id; the ExpressCluster's rollout-id) has changed for
//!   `rollout.settleSeconds`. When each desired state was first seen is recorded in status
//!   ([`DesiredMark`]), so the window survives an operator restart.
//!
//! A disagreement with nothing written for `rollout.settleTimeoutSeconds` is *stalled* (a
//! partial sync): it is reported, and still never acted on.

use std::collections::BTreeMap;
use std::fmt;

use express_api::DeploymentDependencies;

use crate::snapshot::{ClusterSnapshot, DesiredMark, NodeObservation};
use crate::text::{clock, digest};

/// How every message about a settle wait begins.
pub const SETTLE_WAIT: &str = "waiting for the desired state to settle";
/// How a node's message about a stalled settle wait begins.
pub const SETTLE_STALLED: &str = "stalled: ";

impl DesiredMark {
    /// The mark for a desired state seen at `now_ms`: kept from the record when unchanged.
    fn at(mut mark: DesiredMark, recorded: Option<&DesiredMark>, now_ms: i64) -> Self {
        mark.since_ms = recorded
            .filter(|r| {
                r.revision == mark.revision
                    && r.up == mark.up
                    && r.rollout_id == mark.rollout_id
                    && r.ordering == mark.ordering
            })
            .map_or(now_ms, |r| r.since_ms.min(now_ms));
        mark
    }

    fn of_node(node: &NodeObservation, now_ms: i64) -> Self {
        // A down node's revision does not matter to anyone: changing it is no change.
        let revision = node
            .desired
            .as_ref()
            .ok()
            .filter(|_| node.up)
            .map(|d| d.revision.clone());
        let mark = DesiredMark {
            revision,
            up: node.up,
            rollout_id: node.rollout_id.clone(),
            ordering: node.dependencies.as_ref().map(dependencies_digest),
            since_ms: 0,
        };
        DesiredMark::at(mark, node.recorded_desired.as_ref(), now_ms)
    }
}

/// A stable digest of a node's explicit ordering.
fn dependencies_digest(dependencies: &DeploymentDependencies) -> String {
    let mut parts = vec![
        if dependencies.disabled {
            "disabled"
        } else {
            "enabled"
        }
        .to_owned(),
    ];
    for (phase, list) in [
        ("provisioning", &dependencies.provisioning_prerequisites),
        ("upgrade", &dependencies.upgrade_prerequisites),
    ] {
        let Some(list) = list else { continue };
        parts.push(phase.to_owned());
        for p in list {
            parts.push(format!(
                "{}/{}/{}/{}/{}/{}",
                p.express_node,
                p.kind.map(|k| k.to_string()).unwrap_or_default(),
                p.pod_condition_type.as_deref().unwrap_or_default(),
                p.condition_status.as_deref().unwrap_or_default(),
                p.express_version.as_deref().unwrap_or_default(),
                p.deployment_revision.as_deref().unwrap_or_default(),
            ));
        }
    }
    digest(parts.iter().map(String::as_str))
}

/// The objects carrying one rollout-id.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct IdGroup {
    pub rollout_id: String,
    /// The ExpressCluster carries it.
    pub cluster: bool,
    /// Nodes carrying it (up, or down with their pod still running), in snapshot order.
    pub nodes: Vec<String>,
}

/// Where the desired state stands.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum SettleState {
    /// New changes may start.
    Settled,
    /// Within the settle window: the desired state changed at `changed_at_ms`.
    Window {
        changed_at_ms: i64,
        until_ms: i64,
        settle_seconds: u32,
    },
    /// The carriers of `express.dev/rollout-id` disagree. Groups are largest first.
    Disagree {
        groups: Vec<IdGroup>,
        /// Nodes taking part: up, or down with their pod still running.
        nodes: usize,
        /// Nothing was written for `rollout.settleTimeoutSeconds`: a partial sync.
        stalled: bool,
        changed_at_ms: i64,
        timeout_seconds: u32,
    },
}

/// The settle verdict for one cluster at one instant.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Settle {
    pub state: SettleState,
    /// One per snapshot node, same index.
    pub marks: Vec<DesiredMark>,
    /// The governing ExpressCluster's mark.
    pub cluster_mark: Option<DesiredMark>,
    /// When the verdict changes without any write (window over, disagreement turning stalled):
    /// the caller must look again then.
    pub wake_at_ms: Option<i64>,
}

impl Default for Settle {
    fn default() -> Self {
        Settle {
            state: SettleState::Settled,
            marks: Vec::new(),
            cluster_mark: None,
            wake_at_ms: None,
        }
    }
}

impl Settle {
    pub fn is_settled(&self) -> bool {
        self.state == SettleState::Settled
    }

    /// Words for a node status: stable while the wait lasts, so that waiting nodes are not
    /// rewritten with every object a delivery writes.
    pub fn node_message(&self) -> Option<String> {
        match &self.state {
            SettleState::Settled => None,
            SettleState::Window { settle_seconds, .. } => Some(format!(
                "{SETTLE_WAIT}: no change for rollout.settleSeconds ({settle_seconds} s)"
            )),
            SettleState::Disagree { stalled: false, .. } => Some(format!(
                "{SETTLE_WAIT}: express.dev/rollout-id differs between nodes"
            )),
            SettleState::Disagree { stalled: true, .. } => Some(format!(
                "{SETTLE_STALLED}{SETTLE_WAIT}: {}",
                self.state.describe_groups()
            )),
        }
    }

    /// Words for the ExpressCluster status, with the detail. Instants rather than durations,
    /// so that the words stay the same from one reconcile to the next (a status write wakes
    /// the operator again).
    pub fn message(&self) -> Option<String> {
        match &self.state {
            SettleState::Settled => None,
            SettleState::Window {
                changed_at_ms,
                until_ms,
                settle_seconds,
            } => Some(format!(
                "{SETTLE_WAIT}: it last changed at {}; new changes start at {} (rollout.settleSeconds {settle_seconds} s)",
                clock(*changed_at_ms),
                clock(*until_ms),
            )),
            SettleState::Disagree {
                stalled,
                changed_at_ms,
                timeout_seconds,
                ..
            } => {
                let mut text = format!("{SETTLE_WAIT}: {}", self.state.describe_groups());
                if *stalled {
                    text.push_str(&format!(
                        "; stalled: nothing written since {} (rollout.settleTimeoutSeconds {timeout_seconds} s), a partial sync? Sync the tenant again, or make every object carry the same rollout-id to proceed",
                        clock(*changed_at_ms)
                    ));
                }
                Some(text)
            }
        }
    }
}

impl SettleState {
    /// "rollout-id r2 on ExpressCluster, acme-be (1 of 3 up nodes); r1 on acme-fe1, acme-fe2"
    fn describe_groups(&self) -> String {
        let SettleState::Disagree { groups, nodes, .. } = self else {
            return String::new();
        };
        let mut parts = Vec::new();
        for (i, group) in groups.iter().enumerate() {
            let mut carriers: Vec<&str> = Vec::new();
            if group.cluster {
                carriers.push("ExpressCluster");
            }
            carriers.extend(group.nodes.iter().map(String::as_str));
            let count = format!("{} of {nodes} nodes", group.nodes.len());
            parts.push(if i == 0 {
                format!(
                    "rollout-id {} on {} ({count})",
                    group.rollout_id,
                    carriers.join(", ")
                )
            } else {
                format!("{} on {} ({count})", group.rollout_id, carriers.join(", "))
            });
        }
        parts.join("; ")
    }
}

impl fmt::Display for SettleState {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            SettleState::Settled => f.write_str("settled"),
            SettleState::Window { settle_seconds, .. } => {
                write!(f, "settling (rollout.settleSeconds {settle_seconds} s)")
            }
            SettleState::Disagree { stalled, .. } => {
                if *stalled {
                    f.write_str("stalled: ")?;
                }
                f.write_str(&self.describe_groups())
            }
        }
    }
}

/// Decides whether the desired state of `snapshot` has settled at `now_ms`.
pub fn assess(snapshot: &ClusterSnapshot, now_ms: i64) -> Settle {
    let settings = &snapshot.settings;
    let marks: Vec<DesiredMark> = snapshot
        .nodes
        .iter()
        .map(|n| DesiredMark::of_node(n, now_ms))
        .collect();
    let cluster_mark = snapshot.express_cluster.as_ref().map(|c| {
        let mark = DesiredMark {
            revision: None,
            up: true,
            rollout_id: c.rollout_id.clone(),
            ordering: Some(format!(
                "dependencies.disabled={} backendUpgradePosition={}",
                settings.dependencies_disabled, settings.backend_upgrade_position
            )),
            since_ms: 0,
        };
        DesiredMark::at(mark, c.recorded.as_ref(), now_ms)
    });
    let changed_at_ms = marks
        .iter()
        .chain(&cluster_mark)
        .map(|m| m.since_ms)
        .max()
        .unwrap_or(i64::MIN);

    let up: Vec<&NodeObservation> = snapshot.nodes.iter().filter(|n| n.up).collect();
    // A node set down takes part while its pod still runs: the delivery that set it down is
    // not complete before the rest of it has arrived, and its removal is a change.
    let participants: Vec<&NodeObservation> = snapshot
        .nodes
        .iter()
        .filter(|n| n.up || n.pod.is_some())
        .collect();
    let cluster_id = snapshot
        .express_cluster
        .as_ref()
        .and_then(|c| c.rollout_id.as_deref());
    let mut by_id: BTreeMap<&str, IdGroup> = BTreeMap::new();
    let carriers = cluster_id.map(|id| (id, None)).into_iter().chain(
        participants
            .iter()
            .filter_map(|n| Some((n.rollout_id.as_deref()?, Some(n.name.as_str())))),
    );
    for (id, node) in carriers {
        let group = by_id.entry(id).or_insert_with(|| IdGroup {
            rollout_id: id.to_owned(),
            cluster: false,
            nodes: Vec::new(),
        });
        match node {
            Some(name) => group.nodes.push(name.to_owned()),
            None => group.cluster = true,
        }
    }
    let every_up_node_carries = !up.is_empty() && up.iter().all(|n| n.rollout_id.is_some());

    let mut wake_at_ms = None;
    let state = if by_id.len() > 1 {
        let mut groups: Vec<IdGroup> = by_id.into_values().collect();
        // Largest first; the ExpressCluster's id breaks a tie (it is usually written with the
        // new delivery's settings).
        groups.sort_by(|a, b| {
            (b.nodes.len() + usize::from(b.cluster))
                .cmp(&(a.nodes.len() + usize::from(a.cluster)))
                .then(b.cluster.cmp(&a.cluster))
                .then(a.rollout_id.cmp(&b.rollout_id))
        });
        let timeout_ms = i64::from(settings.settle_timeout_seconds.max(1)) * 1000;
        let stall_at = changed_at_ms.saturating_add(timeout_ms);
        let stalled = now_ms >= stall_at;
        if !stalled {
            wake_at_ms = Some(stall_at);
        }
        SettleState::Disagree {
            groups,
            nodes: participants.len(),
            stalled,
            changed_at_ms,
            timeout_seconds: settings.settle_timeout_seconds,
        }
    } else if every_up_node_carries && snapshot.nodes.iter().any(|n| n.pod.is_some()) {
        // Agreement proves the delivery complete only against an earlier one: a cluster that
        // runs no pod yet is being created, and its first objects agree with each other before
        // the rest exist. Then the window applies too.
        SettleState::Settled
    } else {
        let until_ms = changed_at_ms.saturating_add(i64::from(settings.settle_seconds) * 1000);
        if settings.settle_seconds > 0 && now_ms < until_ms {
            wake_at_ms = Some(until_ms);
            SettleState::Window {
                changed_at_ms,
                until_ms,
                settle_seconds: settings.settle_seconds,
            }
        } else {
            SettleState::Settled
        }
    };
    Settle {
        state,
        marks,
        cluster_mark,
        wake_at_ms,
    }
}

/// A node whose missing or ended pod is restored on the revision it already ran: capacity
/// coming back, never a new change, so never delayed by the settle rules.
pub fn restores_lost_pod(node: &NodeObservation) -> bool {
    let Ok(desired) = &node.desired else {
        return false;
    };
    match &node.pod {
        Some(pod) => pod.has_ended() && pod.revision.as_deref() == Some(desired.revision.as_str()),
        // The one rule of what a node ran (`express_api::delivery::ran`): a recovery lost
        // again is restored again.
        None => node
            .change
            .as_ref()
            .is_some_and(|c| c.ran(&desired.revision)),
    }
}
