//! From API objects to the [`crate::Fleet`] snapshot: a tenant's symptoms, rollout and the
//! instants its spec, status and pods last moved (from `managedFields` and pod conditions, so
//! that a stale operator shows without any history of our own); the operator's Lease,
//! Deployment, pods and Warning events.

use std::collections::BTreeMap;

use express_api::conditions::{self, reason};
use express_api::release;
use express_api::views::{PodView, last_write};
use express_api::{
    ClusterKey, ClusterPhase, ExpressCluster, ExpressClusterStatus, NodeKind, NodeRef, Objects,
};
use k8s_openapi::api::apps::v1 as apps;
use k8s_openapi::api::coordination::v1 as coordination;
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::api::events::v1 as events;
use k8s_openapi::jiff::Timestamp;

use crate::{Deployment, Lease, NodeDown, OperatorPod, Rollout, Symptom, Tenant, Warning, Work};

fn pod_moved(pod: &PodView) -> Option<Timestamp> {
    let ready = pod
        .status
        .iter()
        .flat_map(|s| &s.conditions)
        .filter(|c| &*c.type_ == "Ready")
        .filter_map(|c| c.last_transition());
    [pod.created(), pod.deleted()]
        .into_iter()
        .flatten()
        .chain(ready)
        .max()
}

fn condition_is(cluster: &ExpressCluster, type_: &str, status: &str, reasons: &[&str]) -> bool {
    cluster.status.as_ref().is_some_and(|s| {
        s.conditions.iter().any(|c| {
            c.type_ == type_
                && c.status == status
                && (reasons.is_empty() || reasons.contains(&c.reason.as_str()))
        })
    })
}

fn version(cluster: &ExpressCluster) -> Option<String> {
    let of = |kind| {
        cluster
            .spec
            .defaults
            .for_kind(kind)
            .and_then(|d| d.express_version.clone())
    };
    match (of(NodeKind::Backend), of(NodeKind::Frontend)) {
        (Some(b), Some(f)) if b == f => Some(b),
        (Some(b), Some(f)) => Some(format!("backend {b}, frontend {f}")),
        (b, f) => b.or(f),
    }
}

/// Every Express cluster of `objects` as triage sees it, in key order; `pause_of` gives the
/// widest pause in force for a cluster (its scope name and reason), as the planner's
/// observation finds it. The objects are grouped by cluster in one pass: the operator runs this
/// over its whole cache on a timer, where a lookup per cluster would cost tenants × objects.
pub fn tenants(
    objects: &Objects,
    pause_of: impl Fn(&ClusterKey) -> Option<(String, Option<String>)>,
) -> Vec<Tenant> {
    #[derive(Default)]
    struct Group<'a> {
        cluster: Option<&'a ExpressCluster>,
        nodes: Vec<NodeRef<'a>>,
        pods: Vec<&'a PodView>,
    }
    // Grouped under borrowed (namespace, cluster) names: one key per tenant is copied, not
    // one per object (this runs over the whole fleet on the operator's fleet-figures timer).
    let mut groups: BTreeMap<(&str, &str), Group<'_>> = BTreeMap::new();
    for cluster in &objects.clusters {
        let Some(key) = cluster
            .metadata
            .namespace
            .as_deref()
            .zip(cluster.cluster_name())
        else {
            continue;
        };
        // The first ExpressCluster claiming a cluster governs it (as `Objects::express_cluster`).
        let group = groups.entry(key).or_default();
        if group.cluster.is_none() {
            group.cluster = Some(cluster);
        }
    }
    for node in objects.nodes() {
        if let Some(key) = node.cluster_names() {
            groups.entry(key).or_default().nodes.push(node);
        }
    }
    for pod in &objects.pods {
        let key = pod.namespace().zip(pod.cluster.as_deref());
        if let Some(group) = key.and_then(|k| groups.get_mut(&k)) {
            group.pods.push(pod);
        }
    }
    groups
        .into_iter()
        .map(|((namespace, cluster), group)| {
            let key = ClusterKey::new(namespace, cluster);
            let pause = pause_of(&key);
            tenant(key, group.cluster, &group.nodes, &group.pods, pause)
        })
        .collect()
}

fn tenant(
    key: ClusterKey,
    cluster: Option<&ExpressCluster>,
    nodes: &[NodeRef<'_>],
    pods: &[&PodView],
    pause: Option<(String, Option<String>)>,
) -> Tenant {
    let status = cluster.and_then(|c| c.status.as_ref());
    let rollout = rollout(cluster, status);
    let nodes_down = nodes_down(nodes);
    let symptoms = symptoms(cluster, status, rollout.as_ref(), &nodes_down);
    Tenant {
        namespace: key.namespace,
        cluster: key.cluster,
        ring: ring(cluster),
        owner_ring: status
            .and_then(|s| s.operator.as_ref())
            .filter(|o| o.released.is_none() && !o.ring.is_empty())
            .map(|o| o.ring.clone()),
        released: status
            .and_then(|s| s.operator.as_ref())
            .and_then(|o| Some((o.ring.clone(), o.released.as_ref()?.0))),
        generation: cluster.and_then(|c| c.metadata.generation).unwrap_or(0),
        observed_generation: match cluster {
            Some(c) => c.status.as_ref().and_then(|s| s.observed_generation),
            // Without an ExpressCluster there is no generation to observe.
            None => Some(0),
        },
        spec_changed: spec_changed(cluster),
        desired_changed: desired_changed(cluster, nodes),
        last_node_change: last_delivery_started(nodes),
        nodes_down,
        failed_at: status
            .into_iter()
            .flat_map(|s| s.conditions.iter())
            .find(|c| c.type_ == conditions::HALTED && c.status == "True")
            .map(|c| c.last_transition_time.0),
        progress_deadline_seconds: cluster
            .map_or(600, |c| i64::from(c.spec.rollout.progress_deadline_seconds)),
        status_changed: status_changed(cluster, nodes),
        pods_changed: pods.iter().filter_map(|p| pod_moved(p)).max(),
        symptoms,
        rollout,
        pause,
        aborted: status.is_some_and(|s| s.abort.is_some()),
    }
}

fn rollout(
    cluster: Option<&ExpressCluster>,
    status: Option<&ExpressClusterStatus>,
) -> Option<Rollout> {
    status.and_then(|s| s.rollout.as_ref()).map(|r| Rollout {
        state: r.state.map(|s| s.as_str().to_owned()),
        started: r.started_at.as_ref().map(|t| t.0),
        finished: r.finished_at.as_ref().map(|t| t.0),
        version: cluster.and_then(version),
        failed_node: r.failed_node.clone(),
    })
}

/// What the ExpressCluster's status says is wrong, then whether nodes are down.
fn symptoms(
    cluster: Option<&ExpressCluster>,
    status: Option<&ExpressClusterStatus>,
    rollout: Option<&Rollout>,
    nodes_down: &[NodeDown],
) -> Vec<Symptom> {
    let mut symptoms = cluster.map_or_else(Vec::new, |c| cluster_symptoms(c, status, rollout));
    if nodes_not_ready(status, rollout, nodes_down) {
        symptoms.push(Symptom::NodesNotReady);
    }
    symptoms
}

fn cluster_symptoms(
    cluster: &ExpressCluster,
    status: Option<&ExpressClusterStatus>,
    rollout: Option<&Rollout>,
) -> Vec<Symptom> {
    let mut symptoms = Vec::new();
    let state = rollout.and_then(|r| r.state.as_deref());
    if state == Some("Failed") || status.and_then(|s| s.phase) == Some(ClusterPhase::Failed) {
        symptoms.push(Symptom::Failed);
    }
    if state == Some("RollingBack") {
        symptoms.push(Symptom::RollingBack);
    }
    if state == Some("Aborted") {
        symptoms.push(Symptom::Aborted);
    }
    if condition_is(cluster, conditions::INVALID_SPEC, "True", &[]) {
        symptoms.push(Symptom::InvalidSpec);
    }
    if condition_is(
        cluster,
        conditions::DESIRED_STATE_SETTLED,
        "False",
        &[reason::STALLED],
    ) {
        symptoms.push(Symptom::SettleStalled);
    }
    if condition_is(cluster, conditions::OBJECTS_READABLE, "False", &[]) {
        symptoms.push(Symptom::Unreadable);
    }
    symptoms
}

/// A node a delivery replaces is briefly not Ready: only a rollout at rest makes it a
/// symptom. A node down that no delivery moves (recovered, or not at all) always is; a
/// bounce under way is not, until the operator fails it at its timeout.
fn nodes_not_ready(
    status: Option<&ExpressClusterStatus>,
    rollout: Option<&Rollout>,
    nodes_down: &[NodeDown],
) -> bool {
    let changing = rollout.is_some_and(|r| r.active());
    let symptomatic = nodes_down.iter().any(|n| match n.work {
        Some(Work::Delivery) => !changing,
        Some(Work::Bounce) => false,
        Some(Work::Recovery) | None => true,
    });
    symptomatic || status.and_then(|s| s.phase) == Some(ClusterPhase::Degraded)
}

fn ring(cluster: Option<&ExpressCluster>) -> String {
    cluster
        .map_or(express_api::rings::DEFAULT_RING, |c| {
            express_api::rings::ring_of(kube::ResourceExt::labels(c))
        })
        .to_owned()
}

/// The spec's last write, or the ExpressCluster's creation.
fn spec_changed(cluster: Option<&ExpressCluster>) -> Option<Timestamp> {
    cluster.and_then(|c| {
        last_write(&c.metadata, false).or(c.metadata.creation_timestamp.as_ref().map(|t| t.0))
    })
}

/// The latest change of what is desired: the ExpressCluster's spec or any node's.
fn desired_changed(cluster: Option<&ExpressCluster>, nodes: &[NodeRef<'_>]) -> Option<Timestamp> {
    spec_changed(cluster)
        .into_iter()
        .chain(
            nodes
                .iter()
                .filter_map(|n| n.meta.written().or(n.meta.created())),
        )
        .max()
}

/// When the latest delivery to a node started.
fn last_delivery_started(nodes: &[NodeRef<'_>]) -> Option<Timestamp> {
    nodes
        .iter()
        .filter_map(|n| {
            let change = n.status()?.change.as_ref()?;
            (change.work() == Work::Delivery).then_some(change.started_at.as_ref()?.0)
        })
        .max()
}

/// The latest status write, of the ExpressCluster or of any node.
fn status_changed(cluster: Option<&ExpressCluster>, nodes: &[NodeRef<'_>]) -> Option<Timestamp> {
    cluster
        .and_then(|c| last_write(&c.metadata, true))
        .into_iter()
        .chain(nodes.iter().filter_map(|n| n.meta.status_written()))
        .max()
}

/// The up nodes whose status says they are not Ready, and what moves each.
fn nodes_down(nodes: &[NodeRef<'_>]) -> Vec<NodeDown> {
    nodes
        .iter()
        .filter(|n| n.spec().up)
        .filter_map(|n| {
            let status = n.status().filter(|s| s.ready == Some(false))?;
            let work = express_api::delivery::down_node_work(status);
            let since = match work {
                Some(Work::Bounce) => status.bounce.as_ref().and_then(|b| b.started_at.as_ref()),
                Some(Work::Delivery | Work::Recovery) => {
                    status.change.as_ref().and_then(|c| c.started_at.as_ref())
                }
                None => status
                    .conditions
                    .iter()
                    .find(|c| c.type_ == conditions::READY)
                    .map(|c| &c.last_transition_time),
            };
            let delivered = status
                .change
                .as_ref()
                .filter(|c| {
                    work.is_none()
                        && status.pod_name.is_some()
                        && !c.recovery
                        && c.state == express_api::ChangeState::Succeeded
                        && status.desired_revision.as_deref() == Some(c.to_revision.as_str())
                })
                .and_then(|c| c.finished_at.as_ref())
                .map(|t| t.0);
            Some(NodeDown {
                node: n.name().to_owned(),
                work,
                since: since.map(|t| t.0),
                delivered,
            })
        })
        .collect()
}

pub fn lease(lease: &coordination::Lease) -> Lease {
    let spec = lease.spec.as_ref();
    Lease {
        namespace: lease.metadata.namespace.clone().unwrap_or_default(),
        name: lease.metadata.name.clone().unwrap_or_default(),
        holder: spec.and_then(|s| s.holder_identity.clone()),
        renewed: spec
            .and_then(|s| s.renew_time.as_ref().or(s.acquire_time.as_ref()))
            .map(|t| t.0),
        duration_seconds: spec.and_then(|s| s.lease_duration_seconds).map(i64::from),
        version: leader_version(lease),
        api_behind: said(lease, express_api::api_record::ANNOTATION_API_BEHIND),
        cannot_read: said(lease, express_api::api_record::ANNOTATION_CANNOT_READ),
    }
}

/// What a ring's leader wrote on its Lease under `key`, when it wrote something.
fn said(lease: &coordination::Lease, key: &str) -> Option<String> {
    lease
        .metadata
        .annotations
        .as_ref()
        .and_then(|a| a.get(key))
        .filter(|text| !text.is_empty())
        .cloned()
}

/// The build a Lease's holder reports: the version annotation, counted only when the identity
/// written beside it is the holder's (a former holder's version says nothing of the current).
pub fn leader_version(lease: &coordination::Lease) -> Option<String> {
    let holder = lease.spec.as_ref()?.holder_identity.as_deref()?;
    let annotations = lease.metadata.annotations.as_ref()?;
    (annotations.get(release::ANNOTATION_LEADER_IDENTITY)? == holder)
        .then(|| annotations.get(release::ANNOTATION_LEADER_VERSION).cloned())
        .flatten()
}

/// A release of either kind as triage reads it.
pub fn release(release: &impl Released) -> crate::ReleaseSeen {
    let metadata = kube::Resource::meta(release);
    let (from_ring, to_ring) = release.rings();
    crate::ReleaseSeen {
        name: metadata.name.clone().unwrap_or_default(),
        from_ring: from_ring.to_owned(),
        to_ring: to_ring.to_owned(),
        phase: release.phase_seen(),
        message: release.message().map(str::to_owned),
        api_breaking: release.api_breaking(),
    }
}

/// What triage reads of a release, whichever kind it is.
pub trait Released: kube::Resource {
    /// `fromRing` and `toRing`.
    fn rings(&self) -> (&str, &str);
    fn phase_seen(&self) -> crate::ReleaseSeenPhase;
    fn message(&self) -> Option<&str>;
    /// Whether the build being released found its CRDs would break the DC.
    fn api_breaking(&self) -> bool {
        false
    }
}

impl Released for express_api::OperatorRelease {
    fn rings(&self) -> (&str, &str) {
        (&self.spec.from_ring, &self.spec.to_ring)
    }

    fn phase_seen(&self) -> crate::ReleaseSeenPhase {
        crate::ReleaseSeenPhase::Operator(
            self.status.as_ref().map(|s| s.phase()).unwrap_or_default(),
        )
    }

    fn message(&self) -> Option<&str> {
        self.status.as_ref()?.message.as_deref()
    }

    fn api_breaking(&self) -> bool {
        self.status.as_ref().is_some_and(|s| {
            s.conditions.iter().any(|c| {
                c.type_ == express_api::api_record::CONDITION_API_COMPATIBLE && c.status == "False"
            })
        })
    }
}

impl Released for express_api::FleetRelease {
    fn rings(&self) -> (&str, &str) {
        (&self.spec.from_ring, &self.spec.to_ring)
    }

    fn phase_seen(&self) -> crate::ReleaseSeenPhase {
        crate::ReleaseSeenPhase::Fleet(self.status.as_ref().map(|s| s.phase()).unwrap_or_default())
    }

    fn message(&self) -> Option<&str> {
        self.status.as_ref()?.message.as_deref()
    }
}

/// The label the operator chart puts on every ring's Deployment and pods, and its value (a
/// ring's pods may carry `express-operator-RING`).
pub const OPERATOR_NAME_LABEL: &str = "app.kubernetes.io/name";
pub const OPERATOR_NAME: &str = "express-operator";

/// Whether a pod of the operator's namespace is one of the operator's (any ring).
pub fn is_operator_pod(labels: &BTreeMap<String, String>) -> bool {
    labels.get(OPERATOR_NAME_LABEL).is_some_and(|n| {
        n == OPERATOR_NAME
            || n.strip_prefix(OPERATOR_NAME)
                .is_some_and(|rest| rest.starts_with('-'))
    })
}

pub fn deployment(deployment: &apps::Deployment) -> Deployment {
    Deployment {
        namespace: deployment.metadata.namespace.clone().unwrap_or_default(),
        name: deployment.metadata.name.clone().unwrap_or_default(),
        replicas: deployment.spec.replicas.unwrap_or(1),
        available: deployment
            .status
            .as_ref()
            .and_then(|s| s.available_replicas)
            .unwrap_or(0),
    }
}

pub fn operator_pod(pod: &Pod) -> OperatorPod {
    let containers = pod
        .status
        .as_ref()
        .and_then(|s| s.container_statuses.as_ref())
        .into_iter()
        .flatten();
    let mut restarts = 0;
    let mut waiting = None;
    for container in containers {
        restarts += container.restart_count;
        if let Some(reason) = container
            .state
            .as_ref()
            .and_then(|s| s.waiting.as_ref())
            .and_then(|w| w.reason.clone())
        {
            waiting = Some(reason);
        }
    }
    OperatorPod {
        name: pod.metadata.name.clone().unwrap_or_default(),
        restarts,
        waiting,
    }
}

/// A Warning event, when `event` is one.
pub fn warning(event: &events::Event) -> Option<Warning> {
    if event.type_.as_deref() != Some("Warning") {
        return None;
    }
    let series = event.series.as_ref();
    Some(Warning {
        namespace: event.metadata.namespace.clone().unwrap_or_default(),
        reason: event.reason.clone().unwrap_or_default(),
        count: series.map_or(1, |s| u32::try_from(s.count).unwrap_or(1)),
        last: series
            .map(|s| s.last_observed_time.0)
            .or(event.event_time.as_ref().map(|t| t.0))
            .or(event.metadata.creation_timestamp.as_ref().map(|t| t.0)),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use express_api::keys::LABEL_CLUSTER;
    use express_api::views::NodeView;
    use express_api::{Backend, BackendSpec, NodeSpec};
    use std::sync::Arc;

    fn meta<K: kube::Resource>(mut object: K, namespace: &str) -> Arc<K> {
        object.meta_mut().namespace = Some(namespace.into());
        Arc::new(object)
    }

    #[test]
    fn groups_each_clusters_objects_by_namespace_and_cluster_name() {
        let cluster = |ns: &str, generation: i64| {
            let mut c: ExpressCluster = serde_json::from_value(serde_json::json!({
                "apiVersion": "express.dev/v1", "kind": "ExpressCluster",
                "metadata": {"name": "shop", "generation": generation}, "spec": {}
            }))
            .unwrap();
            c.metadata.namespace = Some(ns.into());
            Arc::new(c)
        };
        let backend = |ns: &str| {
            let backend = meta(
                Backend::new("shop-be", BackendSpec(NodeSpec::for_cluster("shop"))),
                ns,
            );
            Arc::new(NodeView::from(&*backend))
        };
        let pod = |ns: &str, name: &str| {
            let pod: Pod = serde_json::from_value(serde_json::json!({
                "metadata": {"name": name, "namespace": ns,
                             "labels": {LABEL_CLUSTER: "shop"},
                             "creationTimestamp": "2026-11-24T10:00:00Z"}
            }))
            .unwrap();
            Arc::new(PodView::from(&pod))
        };
        let objects = Objects {
            clusters: vec![cluster("a", 4), cluster("a", 9), cluster("b", 7)],
            backends: vec![backend("a"), backend("b"), backend("c")],
            pods: vec![pod("b", "shop-be"), pod("c", "other")],
            ..Objects::default()
        };
        let tenants = tenants(&objects, |key| {
            (key.namespace == "b").then(|| ("namespace".to_string(), None))
        });
        let seen: Vec<(&str, i64, bool, bool)> = tenants
            .iter()
            .map(|t| {
                (
                    t.namespace.as_str(),
                    t.generation,
                    t.pods_changed.is_some(),
                    t.pause.is_some(),
                )
            })
            .collect();
        assert_eq!(
            seen,
            [
                ("a", 4, false, false), // the first ExpressCluster governs
                ("b", 7, true, true),
                ("c", 0, true, false), // nodes only, no ExpressCluster
            ]
        );
        assert_eq!(tenants[2].observed_generation, Some(0));
    }
}
