//! Observe: the objects of one Express cluster, taken from the caches (with the operator's own
//! status writes laid over them) and reduced to the planner's snapshot.

use std::collections::HashMap;

use express_api::{Backend, ExpressCluster, Frontend, NodeKind, NodeStatus};
use express_planner::ClusterSnapshot;
use express_planner::observe::{Inventory, PodOwnership, snapshot_of};
use k8s_openapi::api::apps::v1::ControllerRevision;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::Resource;

use super::{ClusterKey, Context};

/// The node objects of one cluster, by kind and name.
pub(super) struct Nodes {
    backends: HashMap<String, Backend>,
    frontends: HashMap<String, Frontend>,
}

impl Nodes {
    pub(super) fn meta(&self, kind: NodeKind, name: &str) -> Option<&ObjectMeta> {
        match kind {
            NodeKind::Backend => self.backends.get(name).map(|b| &b.metadata),
            NodeKind::Frontend => self.frontends.get(name).map(|f| &f.metadata),
        }
    }

    pub(super) fn status(&self, kind: NodeKind, name: &str) -> Option<&NodeStatus> {
        match kind {
            NodeKind::Backend => self.backends.get(name).and_then(|b| b.status.as_ref()),
            NodeKind::Frontend => self.frontends.get(name).and_then(|f| f.status.as_ref()),
        }
    }

    pub(super) fn reference(
        &self,
        kind: NodeKind,
        name: &str,
    ) -> Option<k8s_openapi::api::core::v1::ObjectReference> {
        match kind {
            NodeKind::Backend => self.backends.get(name).map(|b| b.object_ref(&())),
            NodeKind::Frontend => self.frontends.get(name).map(|f| f.object_ref(&())),
        }
    }
}

/// What one reconcile works from: the cluster's snapshot and the objects the actuator needs.
pub(super) struct Observed {
    pub(super) snapshot: ClusterSnapshot,
    /// The ExpressCluster governing the cluster, if any.
    pub(super) governing: Option<ExpressCluster>,
    pub(super) nodes: Nodes,
    /// Pod name to uid: deletes are preconditioned on the pod observed.
    pub(super) pod_uids: HashMap<String, String>,
    pub(super) revisions: Vec<ControllerRevision>,
}

/// Reads one Express cluster from the caches, laying the operator's own recent status writes
/// over them; None when the cluster has no object left.
pub(super) fn observe(ctx: &Context, key: &ClusterKey) -> Option<Observed> {
    let caches = &ctx.caches;
    let mut clusters = caches.clusters.in_namespace(&key.namespace);
    let mut backends = caches.backends.in_namespace(&key.namespace);
    let mut frontends = caches.frontends.in_namespace(&key.namespace);
    clusters
        .iter_mut()
        .for_each(|c| ctx.written.refresh("ExpressCluster", c));
    backends
        .iter_mut()
        .for_each(|b| ctx.written.refresh("Backend", b));
    frontends
        .iter_mut()
        .for_each(|f| ctx.written.refresh("Frontend", f));
    let mut pods = caches.pods.in_namespace(&key.namespace);
    ctx.written_pods.refresh(&mut pods);
    let revisions = caches.revisions.in_namespace(&key.namespace);
    let mut controls = caches.controls.in_namespace(&key.namespace);
    controls.extend(
        caches
            .controls
            .in_namespace(&ctx.settings.operator_namespace),
    );
    let inventory = Inventory {
        clusters: &clusters,
        backends: &backends,
        frontends: &frontends,
        pods: &pods,
        config_maps: &controls,
        controller_revisions: &revisions,
        operator_namespace: &ctx.settings.operator_namespace,
        ownership: PodOwnership::OwnerReference,
    };
    let snapshot = snapshot_of(&inventory, &key.namespace, &key.cluster)?;
    let governing = clusters
        .iter()
        .find(|c| c.cluster_name() == Some(key.cluster.as_str()))
        .cloned();
    let nodes = Nodes {
        backends: backends
            .into_iter()
            .filter(|b| b.spec.cluster_config.cluster_name == key.cluster)
            .filter_map(|b| Some((b.metadata.name.clone()?, b)))
            .collect(),
        frontends: frontends
            .into_iter()
            .filter(|f| f.spec.cluster_config.cluster_name == key.cluster)
            .filter_map(|f| Some((f.metadata.name.clone()?, f)))
            .collect(),
    };
    let pod_uids: HashMap<String, String> = pods
        .iter()
        .filter_map(|p| Some((p.metadata.name.clone()?, p.metadata.uid.clone()?)))
        .collect();

    Some(Observed {
        snapshot,
        governing,
        nodes,
        pod_uids,
        revisions,
    })
}
