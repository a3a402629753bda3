//! The prerequisite graph: the default provisioning and upgrade orders, explicit prerequisites,
//! substitution of intentionally-down nodes, and cycle detection (DESIGN section 3).

use std::collections::HashMap;
use std::fmt;

use express_api::natural::natural_cmp;
use express_api::{
    DEFAULT_PREREQUISITE_CONDITION, DEFAULT_PREREQUISITE_STATUS, NodeKind, Prerequisite,
};

use crate::snapshot::{ClusterSnapshot, NodeObservation};

/// Which of a node's two prerequisite lists applies.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Phase {
    /// The node's pod is missing and must be created.
    Provisioning,
    /// The node's pod runs an old revision and must be replaced.
    Upgrade,
}

impl fmt::Display for Phase {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Phase::Provisioning => "provisioning",
            Phase::Upgrade => "upgrade",
        })
    }
}

/// What a prerequisite points at once names are looked up.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Target<'a> {
    Node(usize),
    /// No node of this cluster has that name (and kind).
    Unknown {
        name: &'a str,
        kind: Option<NodeKind>,
    },
    /// No kind was given and both a Backend and a Frontend have that name.
    Ambiguous {
        name: &'a str,
    },
    /// The default order puts the cluster's Backend here, and the cluster has no Backend
    /// object (rule 9: a cluster's Backend is required).
    MissingBackend,
}

/// A place in a default order list: a node, or the Backend a cluster without one must get.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Slot {
    Node(usize),
    MissingBackend,
}

/// Where a resolved prerequisite comes from (shown by `kubectl express plan -o mermaid|dot`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Origin {
    /// The default order (rule 1), from the node right before it.
    Default,
    /// The node's own `deploymentDependencies`.
    Explicit,
    /// Put in place of an intentionally-down node (the one given), whose own prerequisites
    /// (or, in the default order, whose predecessor) it inherits.
    Substituted { down: usize },
}

/// One resolved prerequisite: a target and what its pod must show.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Requirement<'a> {
    pub target: Target<'a>,
    pub origin: Origin,
    pub condition_type: &'a str,
    pub condition_status: &'a str,
    pub pinned_version: Option<&'a str>,
    pub pinned_revision: Option<&'a str>,
}

impl<'a> Requirement<'a> {
    fn default_on((slot, skipped): (Slot, Option<usize>)) -> Self {
        Requirement {
            target: match slot {
                Slot::Node(node) => Target::Node(node),
                Slot::MissingBackend => Target::MissingBackend,
            },
            origin: match skipped {
                Some(down) => Origin::Substituted { down },
                None => Origin::Default,
            },
            condition_type: DEFAULT_PREREQUISITE_CONDITION,
            condition_status: DEFAULT_PREREQUISITE_STATUS,
            pinned_version: None,
            pinned_revision: None,
        }
    }

    fn explicit(target: Target<'a>, prerequisite: &'a Prerequisite) -> Self {
        Requirement {
            target,
            origin: Origin::Explicit,
            condition_type: prerequisite.condition_type(),
            condition_status: prerequisite.required_status(),
            pinned_version: prerequisite.express_version.as_deref(),
            pinned_revision: prerequisite.deployment_revision.as_deref(),
        }
    }
}

/// The prerequisites cannot be ordered: they form a cycle.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Cycle {
    pub phase: Phase,
    /// The nodes on the cycle, the first repeated at the end.
    pub path: Vec<(NodeKind, String)>,
}

impl Cycle {
    /// A cycle from node indices (first repeated at the end), rotated to start at its smallest
    /// node so that the message does not depend on the order objects were listed in.
    fn new(phase: Phase, nodes: &[NodeObservation], mut path: Vec<usize>) -> Self {
        path.pop();
        let start = (0..path.len())
            .min_by(|&a, &b| {
                let (x, y) = (&nodes[path[a]], &nodes[path[b]]);
                x.kind
                    .cmp(&y.kind)
                    .then_with(|| natural_cmp(&x.name, &y.name))
            })
            .unwrap_or(0);
        path.rotate_left(start);
        if let Some(&first) = path.first() {
            path.push(first);
        }
        Cycle {
            phase,
            path: path
                .into_iter()
                .map(|i| (nodes[i].kind, nodes[i].name.clone()))
                .collect(),
        }
    }
}

impl fmt::Display for Cycle {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} prerequisites form a cycle: ", self.phase)?;
        for (i, (kind, name)) in self.path.iter().enumerate() {
            if i > 0 {
                f.write_str(" -> ")?;
            }
            write!(f, "{kind} {name}")?;
        }
        Ok(())
    }
}

/// The resolved prerequisite graph of one cluster.
#[derive(Debug)]
pub struct Graph<'a> {
    /// Up nodes in default provisioning order: backends, then frontends.
    pub provisioning_order: Vec<usize>,
    /// Up nodes in default upgrade order: the first `backendUpgradePosition` frontends, the
    /// backends, the remaining frontends.
    pub upgrade_order: Vec<usize>,
    provisioning: Vec<Vec<Requirement<'a>>>,
    upgrade: Vec<Vec<Requirement<'a>>>,
}

impl<'a> Graph<'a> {
    pub fn requirements(&self, phase: Phase, node: usize) -> &[Requirement<'a>] {
        match phase {
            Phase::Provisioning => &self.provisioning[node],
            Phase::Upgrade => &self.upgrade[node],
        }
    }

    /// Whether `from`'s pending change waits, directly or through other nodes' pending changes,
    /// for `to`. `pending[n]` is the phase node `n` needs now (None: it needs no gated change).
    pub fn change_waits_for(
        &self,
        pending: &[Option<Phase>],
        from: usize,
        to: usize,
        cache: &mut ReachCache,
    ) -> bool {
        cache.reach.entry(from).or_insert_with(|| {
            let mut seen = vec![false; pending.len()];
            let mut stack = vec![from];
            while let Some(node) = stack.pop() {
                let Some(phase) = pending[node] else { continue };
                for requirement in self.requirements(phase, node) {
                    if let Target::Node(next) = requirement.target
                        && !seen[next]
                    {
                        seen[next] = true;
                        stack.push(next);
                    }
                }
            }
            seen
        })[to]
    }
}

/// Memo of wait-for reachability, kept for the duration of one plan.
#[derive(Debug, Default)]
pub struct ReachCache {
    reach: HashMap<usize, Vec<bool>>,
}

/// Resolves every node's provisioning and upgrade prerequisites and checks both graphs for
/// cycles.
pub fn resolve(snapshot: &ClusterSnapshot) -> Result<Graph<'_>, Cycle> {
    let nodes = &snapshot.nodes;
    let mut backends: Vec<usize> = (0..nodes.len())
        .filter(|&i| nodes[i].kind == NodeKind::Backend)
        .collect();
    let mut frontends: Vec<usize> = (0..nodes.len())
        .filter(|&i| nodes[i].kind == NodeKind::Frontend)
        .collect();
    backends.sort_by(|&a, &b| natural_cmp(&nodes[a].name, &nodes[b].name));
    frontends.sort_by(|&a, &b| natural_cmp(&nodes[a].name, &nodes[b].name));

    // Rule 9: without any Backend object, the default orders keep the Backend's place, and the
    // node after it waits for a Backend to appear (a half-applied tenant, or a mistake). Other
    // missing objects shorten nothing: frontend numbering may have gaps.
    let backend_slots: Vec<Slot> = if backends.is_empty() {
        vec![Slot::MissingBackend]
    } else {
        backends.iter().map(|&i| Slot::Node(i)).collect()
    };
    let frontend_slots: Vec<Slot> = frontends.iter().map(|&i| Slot::Node(i)).collect();
    let full_provisioning: Vec<Slot> = backend_slots
        .iter()
        .chain(&frontend_slots)
        .copied()
        .collect();
    let split = (snapshot.settings.backend_upgrade_position as usize).min(frontends.len());
    let full_upgrade: Vec<Slot> = frontend_slots[..split]
        .iter()
        .chain(&backend_slots)
        .chain(&frontend_slots[split..])
        .copied()
        .collect();

    let resolver = Resolver {
        snapshot,
        index: NodeIndex::new(nodes),
        default_provisioning: nearest_up_predecessors(nodes, &full_provisioning),
        default_upgrade: nearest_up_predecessors(nodes, &full_upgrade),
    };

    let mut provisioning = Vec::with_capacity(nodes.len());
    let mut upgrade = Vec::with_capacity(nodes.len());
    for (node, observation) in nodes.iter().enumerate() {
        // A down node is never ordered itself; its prerequisites only matter where another
        // node's prerequisite is substituted through it, and are resolved there.
        if observation.up {
            provisioning.push(resolver.requirements(node, Phase::Provisioning, &mut Vec::new())?);
            upgrade.push(resolver.requirements(node, Phase::Upgrade, &mut Vec::new())?);
        } else {
            provisioning.push(Vec::new());
            upgrade.push(Vec::new());
        }
    }
    let only_up = |order: Vec<Slot>| -> Vec<usize> {
        order
            .into_iter()
            .filter_map(|slot| match slot {
                Slot::Node(i) if nodes[i].up => Some(i),
                _ => None,
            })
            .collect()
    };
    let graph = Graph {
        provisioning_order: only_up(full_provisioning),
        upgrade_order: only_up(full_upgrade),
        provisioning,
        upgrade,
    };
    for phase in [Phase::Provisioning, Phase::Upgrade] {
        if let Some(path) = find_cycle(nodes, |node| graph.requirements(phase, node)) {
            return Err(Cycle::new(phase, nodes, path));
        }
    }
    Ok(graph)
}

/// For each node, the nearest slot before it in `order` that is up (a missing Backend counts
/// as up: it is required): each node waits for its predecessor once intentionally-down nodes are
/// removed from the list (rule 1). A down node gets the same answer, which is exactly what
/// substituting it needs.
/// With each predecessor, the down node right before this one, when one was skipped.
fn nearest_up_predecessors(
    nodes: &[NodeObservation],
    order: &[Slot],
) -> Vec<Option<(Slot, Option<usize>)>> {
    let mut predecessor = vec![None; nodes.len()];
    let mut last_up = None;
    let mut skipped = None;
    for &slot in order {
        match slot {
            Slot::Node(node) => {
                predecessor[node] = last_up.map(|up| (up, skipped));
                if nodes[node].up {
                    last_up = Some(slot);
                    skipped = None;
                } else {
                    skipped = Some(node);
                }
            }
            Slot::MissingBackend => {
                last_up = Some(slot);
                skipped = None;
            }
        }
    }
    predecessor
}

/// Finds the node a prerequisite names.
pub(super) struct NodeIndex<'a> {
    by_kind_and_name: HashMap<(NodeKind, &'a str), usize>,
}

impl<'a> NodeIndex<'a> {
    pub(super) fn new(nodes: &'a [NodeObservation]) -> Self {
        NodeIndex {
            by_kind_and_name: nodes
                .iter()
                .enumerate()
                .map(|(i, n)| ((n.kind, n.name.as_str()), i))
                .collect(),
        }
    }

    pub(super) fn lookup(&self, prerequisite: &'a Prerequisite) -> Target<'a> {
        let name = prerequisite.express_node.as_str();
        match prerequisite.kind {
            Some(kind) => match self.by_kind_and_name.get(&(kind, name)) {
                Some(&i) => Target::Node(i),
                None => Target::Unknown {
                    name,
                    kind: Some(kind),
                },
            },
            None => {
                let backend = self.by_kind_and_name.get(&(NodeKind::Backend, name));
                let frontend = self.by_kind_and_name.get(&(NodeKind::Frontend, name));
                match (backend, frontend) {
                    (Some(&i), None) | (None, Some(&i)) => Target::Node(i),
                    (Some(_), Some(_)) => Target::Ambiguous { name },
                    (None, None) => Target::Unknown { name, kind: None },
                }
            }
        }
    }
}

struct Resolver<'a> {
    snapshot: &'a ClusterSnapshot,
    index: NodeIndex<'a>,
    default_provisioning: Vec<Option<(Slot, Option<usize>)>>,
    default_upgrade: Vec<Option<(Slot, Option<usize>)>>,
}

impl<'a> Resolver<'a> {
    /// `down_chain` holds the down nodes being substituted on the way here, to detect a cycle
    /// that runs only through down nodes (it would otherwise never end).
    fn requirements(
        &self,
        node: usize,
        phase: Phase,
        down_chain: &mut Vec<usize>,
    ) -> Result<Vec<Requirement<'a>>, Cycle> {
        let observation = &self.snapshot.nodes[node];
        let dependencies = observation.dependencies.as_ref();
        if self.snapshot.settings.dependencies_disabled || dependencies.is_some_and(|d| d.disabled)
        {
            return Ok(Vec::new());
        }
        let explicit = dependencies.and_then(|d| match phase {
            Phase::Provisioning => d.provisioning_prerequisites.as_ref(),
            Phase::Upgrade => d.upgrade_prerequisites.as_ref(),
        });
        let Some(explicit) = explicit else {
            let default = match phase {
                Phase::Provisioning => self.default_provisioning[node],
                Phase::Upgrade => self.default_upgrade[node],
            };
            return Ok(default.map(Requirement::default_on).into_iter().collect());
        };

        let mut resolved = Vec::with_capacity(explicit.len());
        for prerequisite in explicit {
            let target = self.index.lookup(prerequisite);
            match target {
                Target::Node(down) if !self.snapshot.nodes[down].up => {
                    if let Some(start) = down_chain.iter().position(|&n| n == down) {
                        let mut path: Vec<usize> = down_chain[start..].to_vec();
                        path.push(down);
                        return Err(Cycle::new(phase, &self.snapshot.nodes, path));
                    }
                    down_chain.push(down);
                    let substituted = self.requirements(down, phase, down_chain)?;
                    down_chain.pop();
                    resolved.extend(substituted.into_iter().map(|r| Requirement {
                        origin: Origin::Substituted { down },
                        ..r
                    }));
                }
                target => resolved.push(Requirement::explicit(target, prerequisite)),
            }
        }
        Ok(resolved)
    }
}

/// Finds one cycle among the edges of up nodes, iteratively (chains can be thousands long).
fn find_cycle<'r, 'a: 'r>(
    nodes: &[NodeObservation],
    edges: impl Fn(usize) -> &'r [Requirement<'a>],
) -> Option<Vec<usize>> {
    #[derive(Clone, Copy, PartialEq)]
    enum Mark {
        New,
        OnPath,
        Done,
    }
    let mut mark = vec![Mark::New; nodes.len()];
    for root in (0..nodes.len()).filter(|&i| nodes[i].up) {
        if mark[root] != Mark::New {
            continue;
        }
        // Each frame: a node on the current path and the index of its next edge to follow.
        let mut path: Vec<(usize, usize)> = vec![(root, 0)];
        mark[root] = Mark::OnPath;
        while let Some(&mut (node, ref mut next_edge)) = path.last_mut() {
            let node_edges = edges(node);
            if *next_edge == node_edges.len() {
                mark[node] = Mark::Done;
                path.pop();
                continue;
            }
            let edge = node_edges[*next_edge];
            *next_edge += 1;
            let Target::Node(next) = edge.target else {
                continue;
            };
            match mark[next] {
                Mark::Done => {}
                Mark::New => {
                    mark[next] = Mark::OnPath;
                    path.push((next, 0));
                }
                Mark::OnPath => {
                    let start = path.iter().position(|&(n, _)| n == next).unwrap_or(0);
                    let mut cycle: Vec<usize> = path[start..].iter().map(|&(n, _)| n).collect();
                    cycle.push(next);
                    return Some(cycle);
                }
            }
        }
    }
    None
}
