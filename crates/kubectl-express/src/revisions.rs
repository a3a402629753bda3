//! `kubectl express revisions` and `kubectl express diff` (DESIGN sections 2 and 9): the
//! deployment revision of every node computed from local manifests (files, or a chart rendered
//! by `helm template`) and compared with the live cluster, with the discrepancies that would
//! restart nodes for nothing or leave them stale. The revision and effective spec come from
//! `express_api`, the one implementation the operator uses too.

use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;

use express_api::effective::REVISION_SCHEME;
use express_api::history::KeptSpec;
use express_api::{EffectiveNodeSpec, NodeKind, NodeRef, NodeStatus, Objects, effective_spec};
use serde::Serialize;

use crate::exit::Exit;
use crate::read::live;
use crate::read::manifests::{self, Manifests};

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

/// The nodes of a set of objects, each with its effective spec under its cluster's defaults.
/// `fallback_clusters` give the defaults of a cluster whose ExpressCluster is not among the
/// objects (manifests of nodes only: the live ExpressCluster's defaults apply).
pub fn node_sides(
    objects: &Objects,
    fallback: Option<&Objects>,
    origin: &dyn Fn(NodeKind, &str, &str) -> String,
) -> Vec<NodeSide> {
    let governing = |namespace: &str, cluster: &str| {
        objects
            .express_cluster(namespace, cluster)
            .or_else(|| fallback?.express_cluster(namespace, cluster))
    };
    let side = |node: NodeRef<'_>| -> Option<NodeSide> {
        let (kind, meta, spec) = (node.kind(), node.meta(), node.spec());
        let namespace = node.namespace()?.to_owned();
        let name = node.name().to_owned();
        let cluster = spec.cluster_config.cluster_name.clone();
        let express_cluster = governing(&namespace, &cluster);
        let defaults = express_cluster.and_then(|c| c.spec.defaults.for_kind(kind));
        Some(NodeSide {
            effective: effective_spec(kind, spec, defaults).map_err(|e| e.to_string()),
            label: express_api::effective::revision_override(meta.labels.as_deref())
                .map(str::to_owned),
            up: spec.up,
            origin: origin(kind, &namespace, &name),
            namespace,
            name,
            kind,
            cluster,
        })
    };
    let mut sides: Vec<NodeSide> = objects.nodes().filter_map(side).collect();
    sides.sort_by(|a, b| {
        (a.namespace.as_str(), a.cluster.as_str())
            .cmp(&(b.namespace.as_str(), b.cluster.as_str()))
            .then_with(|| express_api::natural::natural_cmp(&a.name, &b.name))
    });
    sides
}

/// Live facts by (namespace, name).
pub type Facts = BTreeMap<(String, String), LiveFacts>;

/// What the live cluster says of each node, by (namespace, name).
pub fn live_facts(objects: &Objects) -> Facts {
    let mut facts = BTreeMap::new();
    for node in objects.nodes() {
        let (Some(namespace), name) = (node.namespace(), node.name()) else {
            continue;
        };
        let kept = objects
            .revisions
            .iter()
            .filter(|r| r.namespace() == Some(namespace))
            .filter_map(|r| {
                let revision = r.kept_for(node.kind(), name)?;
                Some((revision.to_owned(), r.kept()?.clone()))
            })
            .collect();
        facts.insert(
            (namespace.to_owned(), name.to_owned()),
            LiveFacts {
                status: node.status().cloned(),
                generation: node.meta().generation,
                running: objects
                    .pod(namespace, name)
                    .and_then(|p| p.revision.as_deref().map(str::to_owned)),
                kept,
            },
        );
    }
    facts
}

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

/// Where local objects come from.
#[derive(Clone, Debug, Default)]
pub struct Sources {
    pub files: Vec<PathBuf>,
    pub chart: Option<PathBuf>,
    pub values: Vec<PathBuf>,
    pub set: Vec<String>,
    pub release: String,
    pub helm: Option<PathBuf>,
}

impl Sources {
    pub fn is_local(&self) -> bool {
        !self.files.is_empty() || self.chart.is_some()
    }
}

/// Runs `helm template` on the chart and returns its output.
fn render_chart(sources: &Sources, chart: &PathBuf, namespace: &str) -> Result<String, Exit> {
    let helm = sources
        .helm
        .clone()
        .unwrap_or_else(|| PathBuf::from("helm"));
    let mut command = std::process::Command::new(&helm);
    command
        .arg("template")
        .arg(&sources.release)
        .arg(chart)
        .arg("--namespace")
        .arg(namespace);
    for values in &sources.values {
        command.arg("--values").arg(values);
    }
    for set in &sources.set {
        command.arg("--set").arg(set);
    }
    let output = command.output().map_err(|e| {
        Exit::usage(if e.kind() == std::io::ErrorKind::NotFound {
            format!(
                "{} not found: install Helm, or give its path with --helm",
                helm.display()
            )
        } else {
            format!("cannot run {}: {e}", helm.display())
        })
    })?;
    if !output.status.success() {
        return Err(Exit::usage(format!(
            "helm template {} failed: {}",
            chart.display(),
            String::from_utf8_lossy(&output.stderr).trim()
        )));
    }
    Ok(String::from_utf8_lossy(&output.stdout).into_owned())
}

/// The local objects: the files, and the chart rendered.
pub fn load_local(sources: &Sources, namespace: &str) -> Result<Manifests, Exit> {
    let mut texts = Vec::new();
    if let Some(chart) = &sources.chart {
        texts.push((
            format!("helm template {}", chart.display()),
            render_chart(sources, chart, namespace)?,
        ));
    }
    manifests::load_lenient(&sources.files, &texts, namespace).map_err(|errors| {
        Exit::usage(
            errors
                .iter()
                .map(ToString::to_string)
                .collect::<Vec<_>>()
                .join("\n"),
        )
    })
}

/// Local nodes from manifests, with the live ExpressClusters as fallback defaults.
pub fn local_sides(manifests: &Manifests, live: Option<&Objects>) -> Vec<NodeSide> {
    node_sides(&manifests.objects, live, &|kind, namespace, name| {
        manifests
            .origin(&kind.to_string(), namespace, name)
            .map_or_else(|| "local".to_owned(), ToString::to_string)
    })
}

pub fn live_sides(objects: &Objects) -> Vec<NodeSide> {
    node_sides(objects, None, &|kind, namespace, name| {
        format!("live {kind} {namespace}/{name}")
    })
}

/// Local specs that cannot be built are errors (exit 2), naming where they came from.
pub fn spec_errors(local: &[NodeSide]) -> Vec<String> {
    local
        .iter()
        .filter_map(|n| {
            n.effective
                .as_ref()
                .err()
                .map(|why| format!("{}: {} {}/{}: {why}", n.origin, n.kind, n.namespace, n.name))
        })
        .collect()
}

#[derive(Serialize)]
struct Json<'a> {
    nodes: &'a [Row],
}

pub fn render_json(rows: &[Row]) -> String {
    serde_json::to_string_pretty(&Json { nodes: rows }).unwrap_or_default()
}

pub fn render_table(rows: &[Row], live: bool) -> String {
    let dash = |v: &Option<String>| v.clone().unwrap_or_else(|| "-".into());
    let mut header = vec!["NAMESPACE", "NODE", "KIND", "REVISION", "SOURCE"];
    if live {
        header.extend(["LIVE DESIRED", "LIVE RUNNING", "VERDICT"]);
    }
    let table_rows: Vec<Vec<String>> = rows
        .iter()
        .map(|r| {
            let mut cells = vec![
                r.namespace.clone(),
                r.name.clone(),
                r.kind.to_string(),
                dash(&r.revision),
                r.source.unwrap_or("-").to_owned(),
            ];
            if live {
                cells.extend([
                    dash(&r.live_desired),
                    dash(&r.live_running),
                    r.verdict.map_or("-", Verdict::as_str).to_owned(),
                ]);
            }
            cells
        })
        .collect();
    let mut out = crate::show::text::table(&header, &table_rows);
    let discrepancies: Vec<&Discrepancy> = rows.iter().flat_map(|r| &r.discrepancies).collect();
    if !discrepancies.is_empty() {
        out.push('\n');
        for d in discrepancies {
            out.push_str(&format!("{}: {}\n", d.kind, d.message));
        }
    }
    for row in rows {
        if let Some(spec) = &row.spec {
            out.push_str(&format!(
                "\n{}/{} hashes ({REVISION_SCHEME}):\n{}\n",
                row.namespace,
                row.name,
                serde_json::to_string_pretty(spec).unwrap_or_default()
            ));
        }
    }
    out
}

/// `diff`: for every node that would restart, the effective spec live (kept for its desired
/// revision, else recomputed from the live objects) against local.
pub fn render_diff(rows: &[Row], facts: &BTreeMap<(String, String), LiveFacts>) -> (String, bool) {
    let mut out = String::new();
    let mut differs = false;
    for row in rows
        .iter()
        .filter(|r| r.verdict == Some(Verdict::WillRestart))
    {
        let Some(local) = &row.local_effective else {
            continue;
        };
        let kept = facts
            .get(&(row.namespace.clone(), row.name.clone()))
            .and_then(|f| f.kept.get(row.live_desired.as_deref()?).cloned());
        let (live, from) = match (kept, &row.live_effective) {
            (Some(kept), _) => (kept, "kept"),
            (None, Some(live)) => (KeptSpec::from(live), "recomputed"),
            (None, None) => continue,
        };
        differs = true;
        out.push_str(&format!(
            "--- {}/{} live ({from}, revision {})\n+++ {}/{} local (revision {})\n",
            row.namespace,
            row.name,
            row.live_desired.as_deref().unwrap_or("?"),
            row.namespace,
            row.name,
            row.revision.as_deref().unwrap_or("?"),
        ));
        out.push_str(&crate::show::history::diff(&live, &KeptSpec::from(local)));
        out.push('\n');
    }
    (out, differs)
}

pub struct Options {
    pub sources: Sources,
    pub namespace: String,
    pub all_namespaces: bool,
    pub node: Option<String>,
    pub verbose: bool,
    pub json: bool,
    pub fail_on_restart: bool,
    pub operator_namespace: String,
}

/// Reads what the options name and compares it; the live objects too when asked.
pub async fn gather(
    client: Option<&kube::Client>,
    options: &Options,
) -> Result<(Vec<Row>, BTreeMap<(String, String), LiveFacts>), Exit> {
    let local = if options.sources.is_local() {
        Some(load_local(&options.sources, &options.namespace)?)
    } else {
        None
    };
    let live_objects = match client {
        Some(client) => {
            let mut objects = Objects::default();
            let namespaces: BTreeSet<String> = match &local {
                Some(m) if m.objects.nodes().next().is_some() => m
                    .objects
                    .nodes()
                    .filter_map(|n| n.namespace().map(str::to_owned))
                    .collect(),
                _ => [options.namespace.clone()].into(),
            };
            if options.all_namespaces && local.is_none() {
                objects = live::load(client, None, &options.operator_namespace)
                    .await
                    .map_err(Exit::usage)?;
            } else {
                for namespace in namespaces {
                    let more = live::load(client, Some(&namespace), &options.operator_namespace)
                        .await
                        .map_err(Exit::usage)?;
                    objects.extend(more);
                }
            }
            Some(objects)
        }
        None => None,
    };
    let local_nodes = local
        .as_ref()
        .map(|m| local_sides(m, live_objects.as_ref()))
        .unwrap_or_default();
    let errors = spec_errors(&local_nodes);
    if !errors.is_empty() {
        return Err(Exit::usage(errors.join("\n")));
    }
    let live_nodes = live_objects.as_ref().map(live_sides);
    let facts = live_objects.as_ref().map(live_facts).unwrap_or_default();
    let mut rows = compare(
        &local_nodes,
        live_nodes.as_deref().map(|nodes| (nodes, &facts)),
        options.verbose,
    );
    if let Some(node) = &options.node {
        rows.retain(|r| &r.name == node);
        if rows.is_empty() {
            return Err(Exit::usage(format!("no node {node} in what was read")));
        }
    }
    Ok((rows, facts))
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use serde_json::{Value, json};
    use std::sync::Arc;

    /// A tenant as the chart renders it: the ExpressCluster with version defaults, and nodes
    /// with optional labels, `up` and a version of their own.
    fn tenant(version: &str, nodes: &[(&str, Value)]) -> Objects {
        let cluster: express_api::ExpressCluster = serde_json::from_value(json!({
            "apiVersion": "express.dev/v1alpha1", "kind": "ExpressCluster",
            "metadata": {"name": "acme", "namespace": "tenant"},
            "spec": {"defaults": {"backend": {"expressVersion": version, "configChangeset": "cs1"},
                                  "frontend": {"expressVersion": version, "configChangeset": "cs1"}}}
        }))
        .unwrap();
        let (mut backends, mut frontends) = (Vec::new(), Vec::new());
        for (name, extra) in nodes {
            let mut object = json!({
                "apiVersion": "express.dev/v1alpha1",
                "metadata": {"name": name, "namespace": "tenant", "generation": 1},
                "spec": {"clusterConfig": {"clusterName": "acme"}},
            });
            if let Some(labels) = extra.get("labels") {
                object["metadata"]["labels"] = labels.clone();
            }
            if let Some(up) = extra.get("up") {
                object["spec"]["up"] = up.clone();
            }
            if name.ends_with("-be") {
                object["kind"] = json!("Backend");
                backends.push(Arc::new(serde_json::from_value(object).unwrap()));
            } else {
                object["kind"] = json!("Frontend");
                frontends.push(Arc::new(serde_json::from_value(object).unwrap()));
            }
        }
        Objects {
            clusters: vec![Arc::new(cluster)],
            backends,
            frontends,
            ..Objects::default()
        }
    }

    fn sides(objects: &Objects) -> Vec<NodeSide> {
        node_sides(objects, None, &|_, _, n| format!("test {n}"))
    }

    /// Live facts as the operator leaves them: status desired = what it computes, the pod
    /// running it, generation observed.
    fn settled(live: &[NodeSide]) -> BTreeMap<(String, String), LiveFacts> {
        live.iter()
            .map(|n| {
                let desired = n.desired();
                (
                    (n.namespace.clone(), n.name.clone()),
                    LiveFacts {
                        status: Some(NodeStatus {
                            observed_generation: Some(1),
                            desired_revision: desired.clone(),
                            ..NodeStatus::default()
                        }),
                        generation: Some(1),
                        running: desired,
                        kept: BTreeMap::new(),
                    },
                )
            })
            .collect()
    }

    fn row<'a>(rows: &'a [Row], name: &str) -> &'a Row {
        rows.iter().find(|r| r.name == name).unwrap()
    }

    fn kinds(row: &Row) -> Vec<&'static str> {
        row.discrepancies.iter().map(|d| d.kind).collect()
    }

    #[test]
    fn each_verdict() {
        let live = sides(&tenant(
            "v1",
            &[
                ("acme-be", json!({})),
                ("acme-fe1", json!({})),
                ("acme-fe2", json!({})),
                ("acme-fe9", json!({})),
            ],
        ));
        let facts = settled(&live);
        // fe1 gets its own version (restart), fe2 is set down, fe3 is new, fe9 is gone.
        let local_objects = {
            let mut t = tenant(
                "v1",
                &[
                    ("acme-be", json!({})),
                    ("acme-fe1", json!({})),
                    ("acme-fe2", json!({"up": false})),
                    ("acme-fe3", json!({})),
                ],
            );
            Arc::make_mut(&mut t.frontends[0]).spec.express_version = Some("v2".into());
            t
        };
        let local = sides(&local_objects);
        let rows = compare(&local, Some((&live, &facts)), false);
        let verdict = |name| row(&rows, name).verdict;
        assert_eq!(verdict("acme-be"), Some(Verdict::Unchanged));
        assert_eq!(verdict("acme-fe1"), Some(Verdict::WillRestart));
        assert_eq!(verdict("acme-fe2"), Some(Verdict::Down));
        assert_eq!(verdict("acme-fe3"), Some(Verdict::New));
        assert_eq!(verdict("acme-fe9"), Some(Verdict::Removed));
        assert!(rows.iter().all(|r| r.discrepancies.is_empty()), "{rows:?}");
        assert_eq!(row(&rows, "acme-be").source, Some("computed"));

        // Offline: revisions and sources, no verdicts.
        let offline = compare(&local, None, true);
        assert!(offline.iter().all(|r| r.verdict.is_none()));
        assert_eq!(offline.len(), 4);
        let spec = row(&offline, "acme-fe1").spec.clone().unwrap();
        assert_eq!(spec["expressVersion"], "v2");
    }

    #[test]
    fn a_label_unchanged_while_the_spec_changed_is_a_stale_override() {
        let pinned = json!({"labels": {"express.dev/deployment-revision": "pin-1"}});
        let live = sides(&tenant("v1", &[("acme-fe1", pinned.clone())]));
        let facts = settled(&live);
        let local = sides(&tenant("v2", &[("acme-fe1", pinned)]));
        let rows = compare(&local, Some((&live, &facts)), false);
        let fe1 = row(&rows, "acme-fe1");
        assert_eq!(
            (fe1.source, fe1.verdict),
            (Some("label"), Some(Verdict::Unchanged))
        );
        assert_eq!(kinds(fe1), ["StaleOverride"]);
        assert!(fe1.discrepancies[0].message.contains("will NOT be updated"));
    }

    #[test]
    fn a_label_changed_while_the_spec_did_not_is_an_empty_restart() {
        let live = sides(&tenant(
            "v1",
            &[(
                "acme-fe1",
                json!({"labels": {"express.dev/deployment-revision": "pin-1"}}),
            )],
        ));
        let facts = settled(&live);
        for local_label in [
            json!({"labels": {"express.dev/deployment-revision": "pin-2"}}),
            json!({}),
        ] {
            let local = sides(&tenant("v1", &[("acme-fe1", local_label)]));
            let rows = compare(&local, Some((&live, &facts)), false);
            let fe1 = row(&rows, "acme-fe1");
            assert_eq!(fe1.verdict, Some(Verdict::WillRestart));
            assert_eq!(kinds(fe1), ["EmptyRestart"]);
        }
        // The same label on both sides and the same spec: nothing to say.
        let same = sides(&tenant(
            "v1",
            &[(
                "acme-fe1",
                json!({"labels": {"express.dev/deployment-revision": "pin-1"}}),
            )],
        ));
        let rows = compare(&same, Some((&live, &facts)), false);
        assert!(row(&rows, "acme-fe1").discrepancies.is_empty());
    }

    #[test]
    fn a_desired_revision_the_plugin_does_not_compute_is_algorithm_skew() {
        let live = sides(&tenant("v1", &[("acme-fe1", json!({}))]));
        let mut facts = settled(&live);
        let fe1 = facts.values_mut().next().unwrap();
        fe1.status.as_mut().unwrap().desired_revision = Some("0123456789".into());
        fe1.running = Some("0123456789".into());
        let rows = compare(&live, Some((&live, &facts)), false);
        let fe1 = row(&rows, "acme-fe1");
        assert_eq!(kinds(fe1), ["AlgorithmSkew"]);
        assert!(fe1.discrepancies[0].message.contains(REVISION_SCHEME));
        // Not yet observed by the operator: no verdict on its status.
        let mut unobserved = facts.clone();
        unobserved.values_mut().next().unwrap().generation = Some(2);
        let rows = compare(&live, Some((&live, &unobserved)), false);
        assert!(row(&rows, "acme-fe1").discrepancies.is_empty());
    }

    #[test]
    fn a_live_node_not_running_what_it_wants_is_an_unfinished_rollout() {
        let live = sides(&tenant("v1", &[("acme-fe1", json!({}))]));
        let mut facts = settled(&live);
        facts.values_mut().next().unwrap().running = Some("older".into());
        let rows = compare(&live, Some((&live, &facts)), false);
        let fe1 = row(&rows, "acme-fe1");
        assert_eq!(fe1.verdict, Some(Verdict::WillRestart));
        assert_eq!(kinds(fe1), ["UnfinishedRollout"]);
        // Live only (no local objects): the same.
        let rows = compare(&[], Some((&live, &facts)), false);
        assert_eq!(kinds(row(&rows, "acme-fe1")), ["UnfinishedRollout"]);
    }
}
