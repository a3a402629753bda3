//! The pause in force for a cluster (operator-wide, namespace, cluster), for one cluster or for
//! a whole fleet in one pass.

use std::collections::HashMap;

use express_api::keys::{
    ANNOTATION_PAUSE_REASON, CONTROL_CONFIGMAP_GLOBAL, CONTROL_CONFIGMAP_NAMESPACE,
    CONTROL_KEY_PAUSED, CONTROL_KEY_REASON,
};
use express_api::{ClusterKey, ExpressCluster, Objects};
use k8s_openapi::api::core::v1::ConfigMap;

use super::inventory::{Inventory, annotation, namespace_of};
use crate::snapshot::{Pause, PauseScope};

/// The pause in force for Express cluster `cluster_name` of `namespace`, without building its
/// snapshot (a fleet listing needs this column for every tenant, and nothing else a snapshot
/// computes).
pub fn pause_of(inventory: &Inventory<'_>, namespace: &str, cluster_name: &str) -> Option<Pause> {
    pause_in_force(
        control_in(inventory.objects),
        inventory.operator_namespace,
        namespace,
        inventory.objects.express_cluster(namespace, cluster_name),
    )
}

/// The control ConfigMap `name` of `namespace` among `objects` (the first, if two), found by
/// a scan: for one cluster's pause; a fleet's go through [`pauses`].
pub(super) fn control_in<'a>(objects: &'a Objects) -> impl Fn(&str, &str) -> Option<&'a ConfigMap> {
    move |namespace, name| {
        objects.config_maps.iter().map(|cm| &**cm).find(|cm| {
            namespace_of(*cm) == Some(namespace) && cm.metadata.name.as_deref() == Some(name)
        })
    }
}

/// The pause in force for every Express cluster an ExpressCluster or a node names, read in one
/// pass (the control ConfigMaps and ExpressClusters indexed once), so a fleet's pauses cost what
/// the fleet costs, not its square.
pub fn pauses(inventory: &Inventory<'_>) -> HashMap<ClusterKey, Pause> {
    let objects = inventory.objects;
    let controls: HashMap<(&str, &str), &ConfigMap> = objects
        .config_maps
        .iter()
        .rev() // the first of two same-named ConfigMaps wins, as in `pause_of`
        .filter_map(|cm| Some(((namespace_of(&**cm)?, cm.metadata.name.as_deref()?), &**cm)))
        .collect();
    let mut governing: HashMap<(&str, &str), &ExpressCluster> = HashMap::new();
    for cluster in objects.clusters.iter().map(|c| &**c) {
        if let (Some(namespace), Some(name)) = (namespace_of(cluster), cluster.cluster_name()) {
            governing.entry((namespace, name)).or_insert(cluster);
        }
    }
    objects
        .cluster_keys()
        .into_iter()
        .filter_map(|key| {
            let cluster = governing
                .get(&(key.namespace.as_str(), key.cluster.as_str()))
                .copied();
            let pause = pause_in_force(
                |namespace, name| controls.get(&(namespace, name)).copied(),
                inventory.operator_namespace,
                &key.namespace,
                cluster,
            )?;
            Some((key, pause))
        })
        .collect()
}

/// The widest pause in force for a cluster: operator-wide, then namespace, then the cluster.
pub(super) fn pause_in_force<'c>(
    control: impl Fn(&str, &str) -> Option<&'c ConfigMap>,
    operator_namespace: &str,
    namespace: &str,
    cluster: Option<&ExpressCluster>,
) -> Option<Pause> {
    let paused_by = |cm: &ConfigMap| {
        let data = cm.data.as_ref()?;
        let paused = data
            .get(CONTROL_KEY_PAUSED)?
            .trim()
            .eq_ignore_ascii_case("true");
        paused.then(|| {
            data.get(CONTROL_KEY_REASON)
                .cloned()
                .filter(|r| !r.trim().is_empty())
        })
    };
    if let Some(reason) = control(operator_namespace, CONTROL_CONFIGMAP_GLOBAL).and_then(paused_by)
    {
        return Some(Pause {
            scope: PauseScope::Operator,
            reason,
        });
    }
    if let Some(reason) = control(namespace, CONTROL_CONFIGMAP_NAMESPACE).and_then(paused_by) {
        return Some(Pause {
            scope: PauseScope::Namespace,
            reason,
        });
    }
    cluster.filter(|c| c.spec.paused).map(|c| Pause {
        scope: PauseScope::Cluster,
        reason: annotation(c.metadata.annotations.as_ref(), ANNOTATION_PAUSE_REASON),
    })
}
