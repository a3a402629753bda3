//! Spec validation: explicit prerequisites that can never be met because the node they name
//! does not exist, or is named ambiguously.

use std::fmt;

use express_api::NodeKind;

use super::graph::{NodeIndex, Phase, Target};
use crate::snapshot::ClusterSnapshot;

/// An explicit prerequisite that names no node of its cluster, or names one ambiguously.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DanglingPrerequisite {
    pub node: String,
    pub kind: NodeKind,
    pub phase: Phase,
    pub reference: String,
    pub problem: String,
}

impl fmt::Display for DanglingPrerequisite {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} {}: {} prerequisite {}: {}",
            self.kind, self.node, self.phase, self.reference, self.problem
        )
    }
}

/// Every explicit prerequisite, of either phase and whatever the nodes' states, that can never
/// be met because its node does not exist (or is ambiguous). The planner only makes such a node
/// wait; tools that check manifests before they are applied report these as errors.
pub fn dangling_prerequisites(snapshot: &ClusterSnapshot) -> Vec<DanglingPrerequisite> {
    let index = NodeIndex::new(&snapshot.nodes);
    let mut dangling = Vec::new();
    for node in &snapshot.nodes {
        let Some(dependencies) = &node.dependencies else {
            continue;
        };
        let lists = [
            (
                Phase::Provisioning,
                &dependencies.provisioning_prerequisites,
            ),
            (Phase::Upgrade, &dependencies.upgrade_prerequisites),
        ];
        for (phase, list) in lists {
            for prerequisite in list.iter().flatten() {
                let problem = match index.lookup(prerequisite) {
                    Target::Node(_) | Target::MissingBackend => continue,
                    Target::Unknown { .. } => {
                        format!("no such node in Express cluster {}", snapshot.cluster_name)
                    }
                    Target::Ambiguous { .. } => {
                        "both a Backend and a Frontend have this name; set kind".to_owned()
                    }
                };
                dangling.push(DanglingPrerequisite {
                    node: node.name.clone(),
                    kind: node.kind,
                    phase,
                    reference: match prerequisite.kind {
                        Some(kind) => format!("{kind} {}", prerequisite.express_node),
                        None => prerequisite.express_node.clone(),
                    },
                    problem,
                });
            }
        }
    }
    dangling
}
