//! Comparing nodes' deployment revisions, local against live (DESIGN sections 2 and 9): a row
//! per node with its verdict and the discrepancies that would restart it for nothing or leave
//! it stale. Pure.

use std::collections::{BTreeMap, BTreeSet};

use express_api::effective::REVISION_SCHEME;
use express_api::history::KeptSpec;
use express_api::{EffectiveNodeSpec, NodeKind, NodeStatus};
use serde::Serialize;

/// A node as the revision rules see it, from either side.
#[derive(Clone, Debug)]
pub struct NodeSide {
    pub namespace: String,
    pub name: String,
    pub kind: NodeKind,
    pub cluster: String,
    pub up: bool,
    /// Its `express.dev/deployment-revision` label, if set.
    pub label: Option<String>,
    /// The effective spec (cluster defaults merged with the node), or why it cannot be built.
    pub effective: Result<EffectiveNodeSpec, String>,
    /// Where it was read from (a file and document, or the cluster).
    pub origin: String,
}

impl NodeSide {
    /// The revision the operator acts on: the label when set, else the computed one.
    pub fn desired(&self) -> Option<String> {
        match (&self.label, &self.effective) {
            (Some(label), _) => Some(label.clone()),
            (None, Ok(spec)) => Some(spec.computed_revision()),
            (None, Err(_)) => None,
        }
    }

    fn computed(&self) -> Option<String> {
        self.effective
            .as_ref()
            .ok()
            .map(EffectiveNodeSpec::computed_revision)
    }
}

/// What the live cluster says of a node besides its spec.
#[derive(Clone, Debug, Default)]
pub struct LiveFacts {
    pub status: Option<NodeStatus>,
    pub generation: Option<i64>,
    /// The revision label of its pod.
    pub running: Option<String>,
    /// Specs kept in its ControllerRevisions, by revision.
    pub kept: BTreeMap<String, KeptSpec>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Verdict {
    Unchanged,
    WillRestart,
    New,
    Removed,
    Down,
}

impl Verdict {
    pub fn as_str(self) -> &'static str {
        match self {
            Verdict::Unchanged => "unchanged",
            Verdict::WillRestart => "will restart",
            Verdict::New => "new",
            Verdict::Removed => "removed",
            Verdict::Down => "down",
        }
    }
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Discrepancy {
    /// `StaleOverride`, `EmptyRestart`, `AlgorithmSkew` or `UnfinishedRollout`.
    #[serde(rename = "type")]
    pub kind: &'static str,
    pub message: String,
}

/// One node's row.
#[derive(Clone, Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Row {
    pub namespace: String,
    pub name: String,
    pub kind: NodeKind,
    /// The revision computed from the local effective spec (or its label).
    pub revision: Option<String>,
    /// `computed`, or `label` when `express.dev/deployment-revision` overrides it.
    pub source: Option<&'static str>,
    pub live_desired: Option<String>,
    pub live_running: Option<String>,
    pub verdict: Option<Verdict>,
    pub discrepancies: Vec<Discrepancy>,
    /// The canonical effective spec the revision hashes (with `-v`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub spec: Option<serde_json::Value>,
    #[serde(skip)]
    pub local_effective: Option<EffectiveNodeSpec>,
    #[serde(skip)]
    pub live_effective: Option<EffectiveNodeSpec>,
}

/// Live facts by (namespace, name).
pub type Facts = BTreeMap<(String, String), LiveFacts>;

/// Compares local nodes with live ones (None: no live comparison). Nodes live in a cluster the
/// local objects describe but absent locally are `removed`.
pub fn compare(local: &[NodeSide], live: Option<(&[NodeSide], &Facts)>, verbose: bool) -> Vec<Row> {
    let mut rows = Vec::new();
    let local_clusters: BTreeSet<(&str, &str)> = local
        .iter()
        .map(|n| (n.namespace.as_str(), n.cluster.as_str()))
        .collect();
    let find_live = |n: &NodeSide| {
        live.and_then(|(nodes, _)| {
            nodes
                .iter()
                .find(|l| l.namespace == n.namespace && l.name == n.name && l.kind == n.kind)
        })
    };
    let facts_of = |namespace: &str, name: &str| {
        live.and_then(|(_, facts)| facts.get(&(namespace.to_owned(), name.to_owned())))
    };
    for node in local {
        let live_node = find_live(node);
        let facts = facts_of(&node.namespace, &node.name);
        let live_desired = facts.and_then(|f| f.status.as_ref()?.desired_revision.clone());
        let live_running = facts.and_then(|f| f.running.clone());
        let revision = node.desired();
        let verdict = match (live.is_some(), live_node, node.up) {
            (false, _, _) => None,
            (true, _, false) => Some(Verdict::Down),
            (true, None, true) => Some(Verdict::New),
            (true, Some(_), true) if revision.is_some() && revision == live_running => {
                Some(Verdict::Unchanged)
            }
            (true, Some(_), true) => Some(Verdict::WillRestart),
        };
        let mut discrepancies = Vec::new();
        if let Some(live_node) = live_node {
            discrepancies.extend(label_discrepancies(node, live_node));
            discrepancies.extend(live_discrepancies(live_node, facts));
        }
        rows.push(Row {
            namespace: node.namespace.clone(),
            name: node.name.clone(),
            kind: node.kind,
            source: revision.as_ref().map(|_| {
                if node.label.is_some() {
                    "label"
                } else {
                    "computed"
                }
            }),
            revision,
            live_desired,
            live_running,
            verdict,
            discrepancies,
            spec: verbose
                .then(|| node.effective.as_ref().ok())
                .flatten()
                .and_then(|e| serde_json::from_str(&e.canonical()).ok()),
            local_effective: node.effective.as_ref().ok().cloned(),
            live_effective: live_node.and_then(|l| l.effective.as_ref().ok().cloned()),
        });
    }
    if let Some((live_nodes, facts)) = live {
        let only_live = live_nodes.iter().filter(|l| {
            let described = local_clusters.is_empty()
                || local_clusters.contains(&(l.namespace.as_str(), l.cluster.as_str()));
            let present = local
                .iter()
                .any(|n| n.namespace == l.namespace && n.name == l.name && n.kind == l.kind);
            !present && (described || local.is_empty())
        });
        for live_node in only_live {
            let facts = facts.get(&(live_node.namespace.clone(), live_node.name.clone()));
            let desired = facts.and_then(|f| f.status.as_ref()?.desired_revision.clone());
            let running = facts.and_then(|f| f.running.clone());
            // Live only (no local objects at all): every node is compared with itself.
            let (verdict, revision, source) = if local.is_empty() {
                let revision = live_node.desired();
                let verdict = if !live_node.up {
                    Verdict::Down
                } else if revision.is_some() && revision == running {
                    Verdict::Unchanged
                } else {
                    Verdict::WillRestart
                };
                let source = revision.as_ref().map(|_| {
                    if live_node.label.is_some() {
                        "label"
                    } else {
                        "computed"
                    }
                });
                (verdict, revision, source)
            } else {
                (Verdict::Removed, None, None)
            };
            rows.push(Row {
                namespace: live_node.namespace.clone(),
                name: live_node.name.clone(),
                kind: live_node.kind,
                revision,
                source,
                live_desired: desired,
                live_running: running,
                verdict: Some(verdict),
                discrepancies: live_discrepancies(live_node, facts),
                spec: (verbose && local.is_empty())
                    .then(|| live_node.effective.as_ref().ok())
                    .flatten()
                    .and_then(|e| serde_json::from_str(&e.canonical()).ok()),
                local_effective: None,
                live_effective: live_node.effective.as_ref().ok().cloned(),
            });
        }
    }
    rows.sort_by(|a, b| {
        a.namespace
            .cmp(&b.namespace)
            .then_with(|| express_api::natural::natural_cmp(&a.name, &b.name))
    });
    rows
}

/// Stale override and empty restart: the label against the spec, local against live.
fn label_discrepancies(local: &NodeSide, live: &NodeSide) -> Vec<Discrepancy> {
    let mut found = Vec::new();
    let (Some(local_computed), Some(live_computed)) = (local.computed(), live.computed()) else {
        return found;
    };
    let spec_changed = local_computed != live_computed;
    match (&local.label, &live.label) {
        (Some(local_label), Some(live_label)) if local_label == live_label && spec_changed => {
            found.push(Discrepancy {
                kind: "StaleOverride",
                message: format!(
                    "{} {}: its express.dev/deployment-revision label stays {local_label} while its effective spec changed (computed revision {live_computed} -> {local_computed}): the node will NOT be updated. Change the label with the spec, or remove it",
                    local.kind, local.name
                ),
            });
        }
        (local_label, live_label) if local_label != live_label && !spec_changed => {
            let show = |l: &Option<String>| l.clone().unwrap_or_else(|| "(none)".into());
            if local.desired() != live.desired() {
                found.push(Discrepancy {
                    kind: "EmptyRestart",
                    message: format!(
                        "{} {}: its express.dev/deployment-revision label changes ({} -> {}) but its effective spec does not: the node restarts with no change",
                        local.kind,
                        local.name,
                        show(live_label),
                        show(local_label)
                    ),
                });
            }
        }
        _ => {}
    }
    found
}

/// Algorithm skew and unfinished rollout: what the live node's status says against its spec
/// and its pod.
fn live_discrepancies(live: &NodeSide, facts: Option<&LiveFacts>) -> Vec<Discrepancy> {
    let mut found = Vec::new();
    let Some(facts) = facts else { return found };
    let Some(status) = &facts.status else {
        return found;
    };
    let observed =
        status.observed_generation.is_some() && status.observed_generation == facts.generation;
    if let (true, Some(reported), Some(computed)) =
        (observed, &status.desired_revision, live.desired())
        && *reported != computed
    {
        found.push(Discrepancy {
            kind: "AlgorithmSkew",
            message: format!(
                "{} {}: the operator reports desired revision {reported}, this plugin computes {computed} from the same spec (revision algorithm {REVISION_SCHEME}): deploying with them disagreeing restarts nodes for nothing",
                live.kind, live.name
            ),
        });
    }
    if live.up
        && let (Some(desired), Some(running)) = (&status.desired_revision, &facts.running)
        && desired != running
    {
        found.push(Discrepancy {
            kind: "UnfinishedRollout",
            message: format!(
                "{} {}: runs revision {running} but wants {desired}: mid-rollout or stuck",
                live.kind, live.name
            ),
        });
    }
    found
}
