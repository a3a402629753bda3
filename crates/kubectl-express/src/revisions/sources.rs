//! Where the nodes compared come from: local manifests (files, or a chart rendered by
//! `helm template`) and the live cluster, each node with its effective spec under its
//! cluster's defaults; and [`gather`], which reads what the options name and compares it.

use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;

use express_api::{NodeKind, NodeRef, Objects, effective_spec};

use super::compare::{Facts, LiveFacts, NodeSide, Row, compare};
use crate::read::manifests::{self, Manifests};
use express_client::exit::Exit;
use express_client::read::live;

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
                objects = live::load(
                    client,
                    None,
                    &options.operator_namespace,
                    live::Reading::Everything,
                )
                .await
                .map_err(Exit::usage)?;
            } else {
                for namespace in namespaces {
                    let more = live::load(
                        client,
                        Some(&namespace),
                        &options.operator_namespace,
                        live::Reading::Everything,
                    )
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
