//! Observe: the objects of one Express cluster's namespace, taken from the caches (shared with
//! the reflectors, with the operator's own recent writes laid over them) and reduced to the
//! planner's snapshot.

use std::collections::HashMap;

use express_api::{ExpressCluster, NodeKind, NodeRef, Objects};
use express_planner::ClusterSnapshot;
use express_planner::observe::{Inventory, PodOwnership, snapshot_of};

use crate::controller::context::Context;
use express_api::ClusterKey;

/// What one reconcile works from: the cluster's snapshot and the objects the actuator needs.
pub(crate) struct Observed {
    pub(crate) snapshot: ClusterSnapshot,
    /// The namespace's objects, as the snapshot was built from them.
    pub(crate) objects: Objects,
    /// Pod name to uid: deletes are preconditioned on the pod observed.
    pub(crate) pod_uids: HashMap<String, String>,
}

impl Observed {
    /// The ExpressCluster governing the cluster, if any.
    pub(crate) fn governing(&self) -> Option<&ExpressCluster> {
        let snapshot = &self.snapshot;
        self.objects
            .express_cluster(&snapshot.namespace, &snapshot.cluster_name)
    }

    /// A node of the namespace by kind and name.
    pub(crate) fn node(&self, kind: NodeKind, name: &str) -> Option<NodeRef<'_>> {
        self.objects.node(&self.snapshot.namespace, kind, name)
    }
}

/// Reads one Express cluster from the caches, laying the operator's own recent writes over
/// them; None when the cluster has no object left.
pub(crate) fn observe(ctx: &Context, key: &ClusterKey) -> Option<Observed> {
    // How far the pod cache had caught up, read before the pods: they are at least as new.
    let pods_synced = ctx.caches.pods.synced(&key.namespace);
    let mut objects = ctx.caches.objects(Some(&key.namespace));
    objects
        .clusters
        .iter_mut()
        .for_each(|c| ctx.written.refresh("ExpressCluster", c));
    objects
        .backends
        .iter_mut()
        .for_each(|b| ctx.written.refresh("Backend", b));
    objects
        .frontends
        .iter_mut()
        .for_each(|f| ctx.written.refresh("Frontend", f));
    ctx.written_pods
        .refresh(&key.namespace, pods_synced, &mut objects.pods);
    let inventory = Inventory {
        objects: &objects,
        operator_namespace: &ctx.settings.operator_namespace,
        ownership: PodOwnership::OwnerReference,
    };
    let snapshot = snapshot_of(&inventory, &key.namespace, &key.cluster)?;
    let pod_uids: HashMap<String, String> = objects
        .pods
        .iter()
        .filter_map(|p| Some((p.name.to_string(), p.uid.as_ref()?.to_string())))
        .collect();

    Some(Observed {
        snapshot,
        objects,
        pod_uids,
    })
}
