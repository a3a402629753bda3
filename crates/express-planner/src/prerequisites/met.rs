//! Whether one resolved prerequisite is met right now, and if not, why (for the waiting node's
//! status).

use std::fmt;

use express_api::NodeKind;

use super::graph::{Graph, Phase, ReachCache, Requirement, Target};
use crate::snapshot::ClusterSnapshot;

/// How a missing Backend is named where a node name is expected (`waitingFor[].node`).
pub const MISSING_BACKEND: &str = "(no Backend)";

/// A prerequisite that is not met, named for the status of the waiting node.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Unmet {
    pub node: String,
    pub kind: Option<NodeKind>,
    pub reason: UnmetReason,
    /// What the prerequisite asks for ("Ready=True on revision abc"), stable while the
    /// prerequisite's state moves through its sub-states; empty for a node not found.
    pub wants: String,
}

impl Unmet {
    /// A description that changes only when the requirement does, not with every step the
    /// prerequisite takes (status shows it, and a status write costs an API call).
    pub fn stable_reason(&self) -> String {
        match &self.reason {
            UnmetReason::UnknownNode { .. }
            | UnmetReason::AmbiguousNode
            | UnmetReason::NoBackend { .. }
            | UnmetReason::InvalidSpec
            | UnmetReason::PodNotOwned => self.reason.to_string(),
            _ => format!("not yet {}", self.wants),
        }
    }
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum UnmetReason {
    UnknownNode {
        cluster: String,
    },
    AmbiguousNode,
    /// Rule 9: the cluster has no Backend object.
    NoBackend {
        cluster: String,
    },
    InvalidSpec,
    PodMissing,
    PodTerminating,
    PodNotOwned,
    ChangingNow,
    Condition {
        type_: String,
        required: String,
        actual: Option<String>,
    },
    Revision {
        required: String,
        running: Option<String>,
    },
    Version {
        required: String,
        running: Option<String>,
    },
}

impl fmt::Display for UnmetReason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            UnmetReason::UnknownNode { cluster } => {
                write!(f, "no such node in Express cluster {cluster}")
            }
            UnmetReason::AmbiguousNode => f.write_str(
                "both a Backend and a Frontend have this name; set kind on the prerequisite",
            ),
            UnmetReason::NoBackend { cluster } => {
                write!(f, "cluster {cluster} has no Backend object")
            }
            UnmetReason::InvalidSpec => f.write_str("its spec is invalid"),
            UnmetReason::PodMissing => f.write_str("pod does not exist"),
            UnmetReason::PodTerminating => f.write_str("pod is terminating"),
            UnmetReason::PodNotOwned => f.write_str("pod is not managed by the operator"),
            UnmetReason::ChangingNow => f.write_str("is being changed in the same step"),
            UnmetReason::Condition {
                type_,
                required,
                actual: Some(actual),
            } => write!(f, "pod condition {type_} is {actual}, needs {required}"),
            UnmetReason::Condition {
                type_,
                required,
                actual: None,
            } => write!(f, "pod has no condition {type_}, needs {required}"),
            UnmetReason::Revision { required, running } => write!(
                f,
                "pod runs revision {}, needs {required}",
                running.as_deref().unwrap_or("(none)")
            ),
            UnmetReason::Version { required, running } => write!(
                f,
                "pod runs version {}, needs {required}",
                running.as_deref().unwrap_or("(unknown)")
            ),
        }
    }
}

impl fmt::Display for Unmet {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.kind {
            Some(kind) => write!(f, "{kind} {}: {}", self.node, self.reason),
            None => write!(f, "{}: {}", self.node, self.reason),
        }
    }
}

/// Context for checking whether requirements are met right now.
pub struct Checker<'s, 'g> {
    pub snapshot: &'s ClusterSnapshot,
    pub graph: &'g Graph<'s>,
    /// Nodes chosen for a change in this same plan: they are about to stop being Ready.
    pub changing_now: &'g [bool],
    /// The phase of the change each node needs now, if any.
    pub pending: &'g [Option<Phase>],
}

impl Checker<'_, '_> {
    /// Rule 2: the target's pod exists, runs the required revision (or pinned version/revision)
    /// and shows the required condition.
    ///
    /// One deliberate relaxation, for provisioning only: when the target still needs an upgrade
    /// and that upgrade waits, directly or through other nodes' pending changes, for the
    /// waiting node, "runs its desired revision" becomes "runs any revision". Insisting would
    /// deadlock: a frontend whose pod is lost mid-upgrade would wait for a backend whose upgrade
    /// waits for that frontend. Provisioning and upgrade lists are each acyclic, so every such
    /// circle has a provisioning edge into a node awaiting its upgrade; relaxing exactly those
    /// edges breaks every circle and nothing else.
    pub fn check(
        &self,
        waiting: usize,
        phase: Phase,
        requirement: &Requirement<'_>,
        cache: &mut ReachCache,
    ) -> Option<Unmet> {
        let target = match requirement.target {
            Target::Node(target) => target,
            Target::Unknown { name, kind } => {
                return Some(Unmet {
                    node: name.to_owned(),
                    kind,
                    reason: UnmetReason::UnknownNode {
                        cluster: self.snapshot.cluster_name.clone(),
                    },
                    wants: String::new(),
                });
            }
            Target::Ambiguous { name } => {
                return Some(Unmet {
                    node: name.to_owned(),
                    kind: None,
                    reason: UnmetReason::AmbiguousNode,
                    wants: String::new(),
                });
            }
            Target::MissingBackend => {
                return Some(Unmet {
                    node: MISSING_BACKEND.to_owned(),
                    kind: Some(NodeKind::Backend),
                    reason: UnmetReason::NoBackend {
                        cluster: self.snapshot.cluster_name.clone(),
                    },
                    wants: String::new(),
                });
            }
        };
        let node = &self.snapshot.nodes[target];
        let unmet = |reason| {
            let condition = format!(
                "{}={}",
                requirement.condition_type, requirement.condition_status
            );
            let wants = match (requirement.pinned_revision, requirement.pinned_version) {
                (Some(revision), _) => format!("{condition} on revision {revision}"),
                (None, Some(version)) => format!("{condition} on version {version}"),
                (None, None) => match &node.desired {
                    Ok(desired) => format!("{condition} on revision {}", desired.revision),
                    Err(_) => condition,
                },
            };
            Some(Unmet {
                node: node.name.clone(),
                kind: Some(node.kind),
                reason,
                wants,
            })
        };
        let Some(pod) = &node.pod else {
            return unmet(UnmetReason::PodMissing);
        };
        if !pod.owned {
            return unmet(UnmetReason::PodNotOwned);
        }
        if pod.terminating {
            return unmet(UnmetReason::PodTerminating);
        }
        if let Some(required) = requirement.pinned_revision
            && pod.revision.as_deref() != Some(required)
        {
            return unmet(UnmetReason::Revision {
                required: required.to_owned(),
                running: pod.revision.clone(),
            });
        }
        if let Some(required) = requirement.pinned_version
            && pod.version.as_deref() != Some(required)
        {
            return unmet(UnmetReason::Version {
                required: required.to_owned(),
                running: pod.version.clone(),
            });
        }
        if requirement.pinned_revision.is_none() && requirement.pinned_version.is_none() {
            let Ok(desired) = &node.desired else {
                return unmet(UnmetReason::InvalidSpec);
            };
            let on_desired = pod.revision.as_deref() == Some(desired.revision.as_str());
            let relaxed = phase == Phase::Provisioning
                && self.pending[target] == Some(Phase::Upgrade)
                && self
                    .graph
                    .change_waits_for(self.pending, target, waiting, cache);
            if !on_desired && !relaxed {
                return unmet(UnmetReason::Revision {
                    required: desired.revision.clone(),
                    running: pod.revision.clone(),
                });
            }
        }
        let actual = pod.condition(requirement.condition_type);
        if actual != Some(requirement.condition_status) {
            return unmet(UnmetReason::Condition {
                type_: requirement.condition_type.to_owned(),
                required: requirement.condition_status.to_owned(),
                actual: actual.map(str::to_owned),
            });
        }
        // Met as observed, but the target is about to be disrupted by this very plan.
        if self.changing_now[target] {
            return unmet(UnmetReason::ChangingNow);
        }
        None
    }
}
