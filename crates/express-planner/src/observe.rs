//! Builds [`ClusterSnapshot`]s from API objects: groups nodes into Express clusters, computes
//! each node's desired revision, matches pods to nodes and works out the pause in force.
//! Shared by the operator (objects from its caches) and the CLI (live objects, or manifests).

use std::collections::{BTreeMap, HashMap};

use express_api::bounce::{DEFAULT_BOUNCE_TIMEOUT_SECONDS, parse_duration};
use express_api::keys::{
    ANNOTATION_ABORT, ANNOTATION_ABORT_ROLLBACK, ANNOTATION_BOUNCE, ANNOTATION_BOUNCE_FORCE,
    ANNOTATION_BOUNCE_TIMEOUT, ANNOTATION_RETRY, ANNOTATION_ROLLOUT_ID, CONTROL_CONFIGMAP_GLOBAL,
    CONTROL_CONFIGMAP_NAMESPACE, LABEL_CLUSTER, LABEL_NODE,
};
use express_api::lenient::Undecodable;
use express_api::names::label_value_problem;
use express_api::views::PodView;
use express_api::{
    BounceStatus, ExpressCluster, NodeChange, NodeKind, NodeRef, ObservedDesired, effective_spec,
};

use crate::snapshot::{
    Abort, AbortRequest, BounceRecord, BounceRequest, Change, ClusterSettings, ClusterSnapshot,
    DesiredMark, DesiredState, ExpressClusterObservation, InvalidRevision, NodeObservation,
    PodCondition, PodObservation, PodPhase, RolloutControl,
};

mod inventory;
mod pause;

use inventory::{Annotations, annotation, namespace_of};
pub use inventory::{Inventory, PodOwnership};
use pause::{control_in, pause_in_force};
pub use pause::{pause_of, pauses};

/// The objects of one (namespace, clusterName).
#[derive(Default)]
struct ClusterGroup<'a> {
    /// ExpressClusters governing it: normally one, more is a spec error.
    claimants: Vec<&'a ExpressCluster>,
    nodes: Vec<NodeRef<'a>>,
    /// Its objects (or objects bearing on it: a control ConfigMap) this build cannot decode.
    unreadable: Vec<&'a Undecodable>,
}

/// The inventory grouped into Express clusters, with what building a snapshot needs.
struct Grouped<'a> {
    inventory: &'a Inventory<'a>,
    groups: BTreeMap<(&'a str, &'a str), ClusterGroup<'a>>,
    pods: HashMap<(&'a str, &'a str), &'a PodView>,
    /// The kinds of the node objects of each (namespace, name): more than one is a conflict.
    names_per_namespace: HashMap<(&'a str, &'a str), Vec<NodeKind>>,
}

/// One snapshot per Express cluster: per (namespace, clusterName) found on nodes or on
/// ExpressClusters, sorted by namespace and name.
pub fn snapshots(inventory: &Inventory<'_>) -> Vec<ClusterSnapshot> {
    let grouped = Grouped::new(inventory);
    grouped
        .groups
        .iter()
        .map(|(&(namespace, cluster_name), group)| grouped.build(namespace, cluster_name, group))
        .collect()
}

/// The snapshot of one Express cluster (the others are grouped, not built), if any object
/// belongs to it.
pub fn snapshot_of(
    inventory: &Inventory<'_>,
    namespace: &str,
    cluster_name: &str,
) -> Option<ClusterSnapshot> {
    let grouped = Grouped::new(inventory);
    let group = grouped.groups.get(&(namespace, cluster_name))?;
    Some(grouped.build(namespace, cluster_name, group))
}

impl<'a> Grouped<'a> {
    fn new(inventory: &'a Inventory<'a>) -> Self {
        let mut groups: BTreeMap<(&str, &str), ClusterGroup<'_>> = BTreeMap::new();
        for cluster in inventory.objects.clusters.iter().map(|c| &**c) {
            if let (Some(namespace), Some(name)) = (namespace_of(cluster), cluster.cluster_name()) {
                groups
                    .entry((namespace, name))
                    .or_default()
                    .claimants
                    .push(cluster);
            }
        }
        for node in inventory.objects.nodes() {
            if let Some(key) = node.cluster_names() {
                groups.entry(key).or_default().nodes.push(node);
            }
        }

        for bad in &inventory.objects.undecodable {
            let Some(namespace) = bad.namespace.as_deref() else {
                continue;
            };
            let concerned: Vec<&mut ClusterGroup<'_>> = match (bad.kind.as_str(), &bad.cluster) {
                // A control ConfigMap this build cannot read leaves the pause in force unknown.
                ("ConfigMap", _) => match bad.name.as_str() {
                    CONTROL_CONFIGMAP_GLOBAL if namespace == inventory.operator_namespace => {
                        groups.values_mut().collect()
                    }
                    CONTROL_CONFIGMAP_NAMESPACE => groups
                        .iter_mut()
                        .filter(|((ns, _), _)| *ns == namespace)
                        .map(|(_, group)| group)
                        .collect(),
                    _ => Vec::new(),
                },
                (_, Some(cluster)) => {
                    vec![groups.entry((namespace, cluster.as_str())).or_default()]
                }
                // Whose it is cannot be read: every cluster of the namespace may be concerned.
                (_, None) => groups
                    .iter_mut()
                    .filter(|((ns, _), _)| *ns == namespace)
                    .map(|(_, group)| group)
                    .collect(),
            };
            for group in concerned {
                group.unreadable.push(&**bad);
            }
        }

        let pods: HashMap<(&str, &str), &PodView> = inventory
            .objects
            .pods
            .iter()
            .filter_map(|p| Some(((p.namespace()?, &*p.name), &**p)))
            .collect();
        let mut names_per_namespace: HashMap<(&str, &str), Vec<NodeKind>> = HashMap::new();
        for (namespace, cluster_nodes) in groups.iter().map(|((ns, _), g)| (ns, &g.nodes)) {
            for node in cluster_nodes {
                names_per_namespace
                    .entry((namespace, node.name()))
                    .or_default()
                    .push(node.kind());
            }
        }
        Grouped {
            inventory,
            groups,
            pods,
            names_per_namespace,
        }
    }

    /// The snapshot of one group: its settings and spec errors, then every node observed
    /// (readable ones first, then those this build cannot decode), then the cluster's controls.
    fn build(
        &self,
        namespace: &str,
        cluster_name: &str,
        group: &ClusterGroup<'a>,
    ) -> ClusterSnapshot {
        let inventory = self.inventory;
        let governing = group.claimants.first().copied();
        let spec_errors = spec_errors(cluster_name, group);
        let unreadable: Vec<String> = group.unreadable.iter().map(ToString::to_string).collect();
        let settings = governing.map_or_else(ClusterSettings::default, cluster_settings);
        let mut observations: Vec<NodeObservation> = group
            .nodes
            .iter()
            .map(|node| self.observe_node(namespace, node, governing))
            .collect();
        observations.extend(group.unreadable.iter().filter_map(|bad| {
            let kind = NodeKind::from_kind_name(&bad.kind)?;
            let pod = self.pods.get(&(namespace, bad.name.as_str())).map(|pod| {
                observe_pod(
                    pod,
                    kind,
                    &bad.name,
                    bad.uid.as_deref(),
                    inventory.ownership,
                )
            });
            Some(unreadable_node(bad, kind, pod))
        }));
        ClusterSnapshot {
            namespace: namespace.to_owned(),
            cluster_name: cluster_name.to_owned(),
            settings,
            nodes: observations,
            pause: pause_in_force(
                control_in(inventory.objects),
                inventory.operator_namespace,
                namespace,
                governing,
            ),
            spec_errors,
            unreadable,
            control: governing.map(rollout_control).unwrap_or_default(),
            express_cluster: governing.map(|c| ExpressClusterObservation {
                rollout_id: rollout_id_of(c.metadata.annotations.as_ref()),
                recorded: c
                    .status
                    .as_ref()
                    .and_then(|s| s.observed_desired.as_ref())
                    .and_then(recorded_desired),
            }),
        }
    }

    /// What the planner knows of one readable node: its desired state, its pod, the change
    /// and bounce it recorded, and the revisions it keeps.
    fn observe_node(
        &self,
        namespace: &str,
        node: &NodeRef<'a>,
        governing: Option<&ExpressCluster>,
    ) -> NodeObservation {
        let inventory = self.inventory;
        let name = node.name();
        let pod = self.pods.get(&(namespace, name)).map(|pod| {
            let uid = node.meta.uid.as_ref().map(ToString::to_string);
            observe_pod(pod, node.kind(), name, uid.as_deref(), inventory.ownership)
        });
        let status = node.status();
        let change = status.and_then(|s| s.change.as_ref()).map(recorded_change);
        // Recorded, and the pod on the new revision not created yet.
        let replacing = change.as_ref().is_some_and(|c| {
            c.in_progress()
                && pod
                    .as_ref()
                    .is_none_or(|p| p.revision.as_deref() != Some(c.to.as_str()))
        });
        NodeObservation {
            name: name.to_owned(),
            kind: node.kind(),
            up: node.spec().up,
            desired: self.desired_of(namespace, node, governing),
            dependencies: node.spec().deployment_dependencies.clone(),
            pod,
            replacing,
            change,
            invalid_revisions: status
                .map(|s| s.invalid_revisions.as_slice())
                .unwrap_or_default()
                .iter()
                .map(|r| InvalidRevision {
                    revision: r.revision.clone(),
                    reason: r.reason.clone(),
                })
                .collect(),
            history: history_of(inventory, namespace, node.kind(), name),
            rollout_id: rollout_id_of(node.meta.annotations.as_deref()),
            recorded_desired: status
                .and_then(|s| s.observed_desired.as_ref())
                .and_then(recorded_desired),
            bounce_request: bounce_request_of(node.meta.annotations.as_deref()).map(Box::new),
            bounce: status
                .and_then(|s| s.bounce.as_deref())
                .and_then(recorded_bounce)
                .map(Box::new),
        }
    }

    /// A node's desired state, unless another kind of node in its namespace has its name.
    fn desired_of(
        &self,
        namespace: &str,
        node: &NodeRef<'a>,
        governing: Option<&ExpressCluster>,
    ) -> Result<DesiredState, String> {
        let name = node.name();
        let duplicate = self
            .names_per_namespace
            .get(&(namespace, name))
            .is_some_and(|kinds| kinds.len() > 1);
        if duplicate {
            Err(format!(
                "a Backend and a Frontend are both named {name}; pods are named after their node, so node names must be unique in the namespace"
            ))
        } else {
            desired_state(node, governing)
        }
    }
}

/// What is wrong with a group's spec as a whole: a cluster name that cannot be a label, more
/// than one ExpressCluster claiming it, and objects of no node kind this build cannot read.
fn spec_errors(cluster_name: &str, group: &ClusterGroup<'_>) -> Vec<String> {
    let clusters = &group.claimants;
    let mut spec_errors = Vec::new();
    if let Some(why) = label_value_problem(cluster_name) {
        spec_errors.push(format!(
            "clusterName {cluster_name:?} cannot be its pods' {LABEL_CLUSTER} label: it {why}"
        ));
    }
    if clusters.len() > 1 {
        let names: Vec<&str> = clusters
            .iter()
            .filter_map(|c| c.metadata.name.as_deref())
            .collect();
        spec_errors.push(format!(
            "ExpressClusters {} all claim Express cluster {cluster_name}; keep one",
            names.join(", ")
        ));
    }
    spec_errors.extend(
        group
            .unreadable
            .iter()
            .filter(|bad| NodeKind::from_kind_name(&bad.kind).is_none())
            .map(|bad| format!("cannot read {bad}")),
    );
    spec_errors
}

fn cluster_settings(cluster: &ExpressCluster) -> ClusterSettings {
    ClusterSettings {
        dependencies_disabled: cluster.spec.dependencies.disabled,
        backend_upgrade_position: cluster.spec.dependencies.backend_upgrade_position,
        max_concurrent: cluster.spec.rollout.max_concurrent,
        progress_deadline_seconds: cluster.spec.rollout.progress_deadline_seconds,
        auto_rollback: cluster.spec.rollout.auto_rollback,
        settle_seconds: cluster.spec.rollout.settle_seconds,
        settle_timeout_seconds: cluster.spec.rollout.settle_timeout_seconds,
        revision_history_limit: cluster.spec.rollout.revision_history_limit,
    }
}

/// The change a node's status records, as the planner reads it.
fn recorded_change(change: &NodeChange) -> Change {
    Change {
        kind: change.kind,
        state: change.state,
        from: change.from_revision.clone(),
        to: change.to_revision.clone(),
        sequence: change.sequence,
        rollout: change.rollout.clone(),
        recovery: change.recovery,
    }
}

/// An object's `express.dev/rollout-id`, trimmed; blank counts as absent.
fn rollout_id_of(annotations: Option<&Annotations>) -> Option<String> {
    annotation(annotations, ANNOTATION_ROLLOUT_ID)
}

/// A node's `express.dev/bounce` request and its options.
fn bounce_request_of(annotations: Option<&Annotations>) -> Option<BounceRequest> {
    Some(BounceRequest {
        id: annotation(annotations, ANNOTATION_BOUNCE)?,
        force: annotation(annotations, ANNOTATION_BOUNCE_FORCE)
            .is_some_and(|v| v.eq_ignore_ascii_case("true")),
        timeout_seconds: match annotation(annotations, ANNOTATION_BOUNCE_TIMEOUT) {
            None => Ok(DEFAULT_BOUNCE_TIMEOUT_SECONDS),
            Some(text) => parse_duration(&text)
                .map_err(|why| format!("annotation {ANNOTATION_BOUNCE_TIMEOUT}: {why}")),
        },
    })
}

/// The bounce a status recorded; one without a phase (written by another version) is ignored.
fn recorded_bounce(status: &BounceStatus) -> Option<BounceRecord> {
    Some(BounceRecord {
        request_id: status.request_id.clone(),
        phase: status.phase?,
        message: status.message.clone(),
        force: status.force,
        timeout_seconds: status
            .timeout_seconds
            .unwrap_or(DEFAULT_BOUNCE_TIMEOUT_SECONDS),
        pod_uid: status.pod_uid.clone(),
        revision: status.revision.clone(),
        started_at_ms: status.started_at.as_ref().map(|t| t.0.as_millisecond()),
        phase_since_ms: status.phase_since.as_ref().map(|t| t.0.as_millisecond()),
    })
}

/// The desired state a status recorded; without a time it tells nothing and is ignored.
fn recorded_desired(observed: &ObservedDesired) -> Option<DesiredMark> {
    Some(DesiredMark {
        revision: observed.revision.clone(),
        up: observed.up,
        rollout_id: observed.rollout_id.clone(),
        ordering: observed.ordering.clone(),
        since_ms: observed.since.as_ref()?.0.as_millisecond(),
    })
}

fn desired_state(
    node: &NodeRef<'_>,
    cluster: Option<&ExpressCluster>,
) -> Result<DesiredState, String> {
    // The node's name is its pod's name and the pod's `express.dev/node` label value.
    let name = node.name();
    if let Some(why) = label_value_problem(name) {
        return Err(format!(
            "the node name {name:?} cannot be its pod's {LABEL_NODE} label: it {why}"
        ));
    }
    let defaults = cluster.and_then(|c| c.spec.defaults.for_kind(node.kind()));
    let effective =
        effective_spec(node.kind(), node.spec(), defaults).map_err(|e| e.to_string())?;
    Ok(DesiredState {
        revision: effective.desired_revision(node.meta.labels.as_deref()),
        version: effective.express_version.clone(),
        spec: effective,
    })
}

/// A node this build cannot decode: up as far as anyone can tell, with a spec that cannot be
/// computed, so that nothing is done to it and nothing waiting on it proceeds.
fn unreadable_node(
    bad: &Undecodable,
    kind: NodeKind,
    pod: Option<PodObservation>,
) -> NodeObservation {
    NodeObservation {
        name: bad.name.clone(),
        kind,
        up: true,
        desired: Err(format!("cannot read {bad}")),
        dependencies: None,
        pod,
        replacing: false,
        change: None,
        invalid_revisions: Vec::new(),
        history: Vec::new(),
        rollout_id: None,
        recorded_desired: None,
        bounce_request: None,
        bounce: None,
    }
}

fn observe_pod(
    pod: &PodView,
    kind: NodeKind,
    name: &str,
    uid: Option<&str>,
    ownership: PodOwnership,
) -> PodObservation {
    let owned = match ownership {
        PodOwnership::Name => true,
        PodOwnership::OwnerReference => pod.controlled_by(kind, name, uid),
    };
    let status = pod.status.as_ref();
    // A manifest standing for observed state (offline) often has no status: read it as a pod
    // that runs and is Ready, which is what writing it down usually means.
    let phase = match (status.and_then(|s| s.phase.as_deref()), ownership) {
        (Some("Pending"), _) => PodPhase::Pending,
        (Some("Running"), _) => PodPhase::Running,
        (Some("Succeeded"), _) => PodPhase::Succeeded,
        (Some("Failed"), _) => PodPhase::Failed,
        (None, PodOwnership::Name) if status.is_none() => PodPhase::Running,
        (None, PodOwnership::OwnerReference) => PodPhase::Pending,
        _ => PodPhase::Unknown,
    };
    let conditions = match status {
        None if ownership == PodOwnership::Name => vec![PodCondition {
            type_: "Ready".into(),
            status: "True".into(),
        }],
        _ => status
            .into_iter()
            .flat_map(|s| &s.conditions)
            .map(|c| PodCondition {
                type_: c.type_.to_string(),
                status: c.status.to_string(),
            })
            .collect(),
    };
    PodObservation {
        owned,
        uid: pod.uid.as_ref().map(ToString::to_string),
        app_state: pod.app_state.as_deref().map(str::to_owned),
        shutdown_protection: pod.shutdown_protection.as_deref().map(str::to_owned),
        revision: pod.revision.as_deref().map(str::to_owned),
        version: pod.version.as_deref().map(str::to_owned),
        phase,
        conditions,
        terminating: pod.terminating(),
        restarts: status.map_or(0, |s| s.restarts),
        // creationTimestamp has a resolution of one second: take the latest instant it may
        // stand for, so that a progress deadline never fires early.
        created_at_ms: pod
            .created()
            .map(|t| t.as_millisecond())
            .map(|ms| if ms % 1000 == 0 { ms + 999 } else { ms }),
    }
}

/// Revisions kept for a node, from the labels of its ControllerRevisions.
fn history_of(
    inventory: &Inventory<'_>,
    namespace: &str,
    kind: NodeKind,
    name: &str,
) -> Vec<String> {
    inventory
        .objects
        .revisions
        .iter()
        .filter(|r| r.namespace() == Some(namespace))
        .filter_map(|r| r.kept_for(kind, name))
        .map(str::to_owned)
        .collect()
}

/// Abort and retry requests on an ExpressCluster and what its status recorded of them.
fn rollout_control(cluster: &ExpressCluster) -> RolloutControl {
    let annotation = |key: &str| annotation(cluster.metadata.annotations.as_ref(), key);
    let status = cluster.status.as_ref();
    let requests = status.and_then(|s| s.requests.as_ref());
    RolloutControl {
        abort_request: annotation(ANNOTATION_ABORT).map(|id| AbortRequest {
            id,
            rollback: annotation(ANNOTATION_ABORT_ROLLBACK)
                .is_some_and(|v| v.eq_ignore_ascii_case("true")),
        }),
        retry_request: annotation(ANNOTATION_RETRY),
        handled_abort: requests.and_then(|r| r.abort.clone()),
        handled_retry: requests.and_then(|r| r.retry.clone()),
        abort: status.and_then(|s| s.abort.as_ref()).map(|a| Abort {
            request_id: a.request_id.clone(),
            rollback: a.rollback,
            revisions: a.revisions.clone(),
        }),
    }
}
