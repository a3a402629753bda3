//! Rings (DESIGN section 11): the gate every reconcile passes first. It asks the pure rule
//! ([`express_planner::ownership`]) whether this ring owns the tenant, and carries out what the
//! rule says: let go of a tenant whose label moved away, adopt one whose label moved here, wait
//! for an owner that is still alive.
//!
//! Hand-over invariants, and what makes each hold:
//! - **At most one operator acts on a tenant.** An operator acts only while the ExpressCluster's
//!   status names its ring, unreleased. It releases in a reconcile of its own, and its
//!   reconciles of one tenant never overlap, so no step of its is in flight once the release is
//!   written. Releases and claims are written with the resourceVersion read as a precondition:
//!   a label that flipped again since makes them fail (409), and the next reconcile reads anew.
//! - **A step in flight completes exactly once.** Each ring's pod cache holds only pods stamped
//!   with its ring (`express_api::rings::pod_selector`). Adopting from another ring is written
//!   as `adopting` first; then the new owner restamps the tenant's pods with its ring, and acts
//!   only once its caches hold everything of the namespace the API server lists (the last
//!   owner's pod changes and change records included) and it has written itself as the whole
//!   owner. The step recorded before the move is then resumed from its record, as after a
//!   restart. Only the claimant restamps, so two rings never stamp one tenant's pods at once.
//! - **Nothing is orphaned.** A ring whose Lease has no live holder cannot release: the ring the
//!   label names takes the tenant over once that Lease lapses (the same assumption leader
//!   election makes within a ring).

use std::collections::HashMap;
use std::time::Duration;

use express_api::rings::{self, Leadership};
use express_api::{ExpressCluster, OperatorStatus};
use express_planner::ownership::{OwnerLease, Ownership, after_lease, ownership};
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use kube::api::{Api, ApiResource, DynamicObject, ListParams, Patch, PatchParams};
use kube::{Resource, ResourceExt};
use tracing::{debug, info, warn};

use express_api::keys::{FIELD_MANAGER, LABEL_CLUSTER, LABEL_OPERATOR_RING};
use k8s_openapi::api::core::v1::Pod;

use super::events::{self, Notice};
use crate::controller::context::Context;
use crate::controller::error::Error;
use crate::controller::memory::caches::version_number;
use crate::runner::Next;
use express_api::ClusterKey;

/// What the reconcile does after the gate.
pub(crate) enum Gate {
    /// This ring owns the tenant (it may just have adopted it): go on.
    Proceed,
    /// Not this ring's to act on now.
    Stop(Next),
}

/// How soon to look again when the caches have not caught up with a released tenant yet.
const CATCH_UP_RETRY: Duration = Duration::from_millis(200);
/// How soon to look again when the owning ring's Lease could not be read.
const LEASE_UNREADABLE_RETRY: Duration = Duration::from_secs(30);

/// The owner this operator writes into every status it reports.
pub(crate) fn owner(ctx: &Context) -> OperatorStatus {
    OperatorStatus {
        ring: ctx.settings.ring.clone(),
        version: ctx.settings.version.clone(),
        released: None,
        adopting: false,
    }
}

/// The ExpressCluster of a tenant as the caches show it, with this operator's own status
/// writes laid over it.
fn governing(ctx: &Context, key: &ClusterKey) -> Option<std::sync::Arc<ExpressCluster>> {
    let mut cluster = ctx
        .caches
        .clusters
        .in_namespace(Some(&key.namespace))
        .into_iter()
        .find(|c| c.cluster_name() == Some(key.cluster.as_str()))?;
    ctx.written.refresh("ExpressCluster", &mut cluster);
    Some(cluster)
}

pub(crate) async fn gate(ctx: &Context, key: &ClusterKey) -> Result<Gate, Error> {
    let me = ctx.settings.ring.as_str();
    let Some(cluster) = governing(ctx, key) else {
        // Nodes without an ExpressCluster have no ring label: the default ring's.
        return Ok(if me == rings::DEFAULT_RING {
            Gate::Proceed
        } else {
            Gate::Stop(Next::AwaitChange)
        });
    };
    let label = rings::ring_of(cluster.labels());
    let recorded = cluster.status.as_ref().and_then(|s| s.operator.as_ref());
    let mut decision = ownership(me, label, recorded);
    if let Ownership::OwnedBy { ring } = &decision {
        let (lease, leadership) = owner_lease(ctx, ring).await;
        decision = after_lease(ring, lease);
        if let Ownership::OwnedBy { ring } = &decision {
            debug!(owner = %ring, "the tenant's label names this ring; waiting for its owner to release it");
            return Ok(Gate::Stop(match leadership {
                // Look again when the owner's Lease would lapse without a renewal.
                Some(Leadership::Live { expires, .. }) => Next::RequeueAfter(until(expires)),
                _ => Next::RequeueAfter(LEASE_UNREADABLE_RETRY),
            }));
        }
    }
    match decision {
        Ownership::Act => Ok(Gate::Proceed),
        Ownership::NotOurs | Ownership::OwnedBy { .. } => Ok(Gate::Stop(Next::AwaitChange)),
        Ownership::UnreadableOwner => {
            warn!("the tenant's status names an owner this build cannot read; not acting");
            Ok(Gate::Stop(Next::AwaitChange))
        }
        Ownership::Release { to } => {
            if write_owner(ctx, &cluster, released(ctx)).await?.is_some() {
                info!(to = %to, "released the tenant: its ring label names another ring");
                publish(ctx, &cluster, events::released(me, &to)).await;
                ctx.metrics.handovers_inc("released");
            }
            Ok(Gate::Stop(Next::AwaitChange))
        }
        Ownership::Adopt { from, catch_up } => {
            let how = match (
                from.as_deref(),
                recorded.is_some_and(|o| o.released.is_some()),
            ) {
                (Some(from), true) => format!("from ring {from}, which released it"),
                (Some(from), false) => {
                    format!("from ring {from}, whose Lease has no live holder")
                }
                (None, _) => "back, before another ring adopted it".to_owned(),
            };
            // From another ring: claimed as `adopting` until its pods are in this ring's watch.
            let claim = OperatorStatus {
                adopting: catch_up,
                ..owner(ctx)
            };
            let Some(claimed) = write_owner(ctx, &cluster, claim).await? else {
                return Ok(Gate::Stop(Next::AwaitChange));
            };
            info!(from = from.as_deref().unwrap_or(me), "adopted the tenant");
            publish(ctx, &cluster, events::adopted(me, &how)).await;
            ctx.metrics.handovers_inc("adopted");
            if catch_up {
                finish_adoption(ctx, key, &claimed).await
            } else {
                Ok(Gate::Proceed)
            }
        }
        Ownership::FinishAdoption => finish_adoption(ctx, key, &cluster).await,
    }
}

/// Brings a tenant claimed from another ring into this ring's watch: restamps its pods with
/// this ring (the last owner's are invisible to this ring's pod cache), waits until the caches
/// hold everything of the namespace the API server lists, and only then writes this ring as
/// the owner, under the resourceVersion read, and lets the reconcile act.
async fn finish_adoption(
    ctx: &Context,
    key: &ClusterKey,
    cluster: &ExpressCluster,
) -> Result<Gate, Error> {
    let restamped = restamp_pods(ctx, key).await?;
    if restamped > 0 {
        info!(
            pods = restamped,
            "restamped the tenant's pods with this ring"
        );
    }
    if !caught_up(ctx, &key.namespace).await? {
        debug!("adopting: the caches have not caught up with the last owner yet");
        return Ok(Gate::Stop(Next::RequeueAfter(CATCH_UP_RETRY)));
    }
    Ok(match write_owner(ctx, cluster, owner(ctx)).await? {
        Some(_) => Gate::Proceed,
        None => Gate::Stop(Next::AwaitChange),
    })
}

/// Stamps every pod of the tenant with this operator's ring; the number it changed.
async fn restamp_pods(ctx: &Context, key: &ClusterKey) -> Result<usize, Error> {
    let me = ctx.settings.ring.as_str();
    let api: Api<Pod> = Api::namespaced(ctx.client.clone(), &key.namespace);
    let selector = format!("{LABEL_CLUSTER}={}", key.cluster);
    let listed = api
        .list(&ListParams::default().labels(&selector))
        .await
        .map_err(|source| Error::ReadForAdoption {
            kind: "Pod".into(),
            source,
        })?;
    let mut restamped = 0;
    for pod in listed.items {
        if pod.labels().get(LABEL_OPERATOR_RING).map(String::as_str) == rings::pod_label(me) {
            continue;
        }
        let name = pod.name_any();
        let patch = serde_json::json!({
            "metadata": {"labels": {LABEL_OPERATOR_RING: rings::pod_label(me)}},
        });
        let params = PatchParams {
            field_manager: Some(FIELD_MANAGER.into()),
            ..PatchParams::default()
        };
        match api.patch(&name, &params, &Patch::Merge(&patch)).await {
            Ok(_) => restamped += 1,
            // Gone meanwhile: nothing to bring over.
            Err(kube::Error::Api(status)) if status.code == 404 => {}
            Err(source) => return Err(Error::Restamp { pod: name, source }),
        }
    }
    Ok(restamped)
}

fn released(ctx: &Context) -> OperatorStatus {
    OperatorStatus {
        released: Some(Time(k8s_openapi::jiff::Timestamp::now())),
        ..owner(ctx)
    }
}

fn until(at: k8s_openapi::jiff::Timestamp) -> Duration {
    let left = at.as_millisecond() - k8s_openapi::jiff::Timestamp::now().as_millisecond();
    // A little past the moment, so that the Lease has lapsed when we look.
    Duration::from_millis(u64::try_from(left).unwrap_or(0) + 500)
}

/// Whether the ring that owns a tenant has a live leader, read from its Lease.
async fn owner_lease(ctx: &Context, ring: &str) -> (OwnerLease, Option<Leadership>) {
    let name = rings::lease_name(ring);
    let api: Api<Lease> = Api::namespaced(ctx.client.clone(), &ctx.settings.operator_namespace);
    match api.get_opt(&name).await {
        Ok(lease) => {
            let leadership = rings::leadership(lease.as_ref(), k8s_openapi::jiff::Timestamp::now());
            let state = match leadership {
                Leadership::Live { .. } => OwnerLease::Live,
                Leadership::Vacant => OwnerLease::Vacant,
            };
            (state, Some(leadership))
        }
        Err(err) => {
            warn!(lease = %name, error = %err, "cannot read the owning ring's Lease; waiting");
            (OwnerLease::Unknown, None)
        }
    }
}

/// Writes `status.operator` alone, only if the ExpressCluster is still the version read.
/// False when it changed meanwhile (409): the watch brings the new version and another look.
async fn write_owner(
    ctx: &Context,
    cluster: &ExpressCluster,
    operator: OperatorStatus,
) -> Result<Option<ExpressCluster>, Error> {
    let name = cluster.name_any();
    let namespace = cluster.namespace().unwrap_or_default();
    let mut operator = serde_json::to_value(&operator).unwrap_or_default();
    // A merge patch keeps what it does not name: an adoption must remove `released` outright,
    // and a finished one `adopting` (left `true`, the tenant would read as never adopted).
    if let Some(fields) = operator.as_object_mut() {
        fields.entry("released").or_insert(serde_json::Value::Null);
        fields.entry("adopting").or_insert(serde_json::Value::Null);
    }
    let patch = serde_json::json!({
        "metadata": {"resourceVersion": cluster.resource_version()},
        "status": {"operator": operator},
    });
    let api: Api<ExpressCluster> = Api::namespaced(ctx.client.clone(), &namespace);
    let params = PatchParams {
        field_manager: Some(FIELD_MANAGER.into()),
        ..PatchParams::default()
    };
    match api
        .patch_status(&name, &params, &Patch::Merge(&patch))
        .await
    {
        Ok(written) => {
            if let Some(status) = &written.status {
                ctx.written.remember(
                    "ExpressCluster",
                    &written.metadata,
                    serde_json::to_value(status).unwrap_or_default(),
                );
            }
            Ok(Some(written))
        }
        Err(kube::Error::Api(status)) if status.code == 409 => {
            debug!("the ExpressCluster changed since it was read; looking again");
            Ok(None)
        }
        Err(source) => Err(Error::WriteOwner {
            object: format!("ExpressCluster {name}"),
            source,
        }),
    }
}

async fn publish(ctx: &Context, cluster: &ExpressCluster, notice: Notice) {
    events::publish(ctx, Some(cluster.object_ref(&())), notice).await;
}

/// Whether this operator's caches hold everything of a namespace the API server lists now:
/// every listed object at least as new as listed, and nothing it does not list unless newer
/// than the list. Asked before adopting a tenant another ring's operator may have acted on
/// last, whose writes this operator has not made itself.
async fn caught_up(ctx: &Context, namespace: &str) -> Result<bool, Error> {
    let caches = &ctx.caches;
    let pod_selector = rings::pod_selector(&ctx.settings.ring);
    let checks = [
        (
            ApiResource::erase::<Pod>(&()),
            Some(pod_selector.as_str()),
            caches.pods.versions(namespace),
        ),
        (
            ApiResource::erase::<express_api::Backend>(&()),
            None,
            caches.backends.versions(namespace),
        ),
        (
            ApiResource::erase::<express_api::Frontend>(&()),
            None,
            caches.frontends.versions(namespace),
        ),
        (
            ApiResource::erase::<k8s_openapi::api::apps::v1::ControllerRevision>(&()),
            Some(LABEL_CLUSTER),
            caches.revisions.versions(namespace),
        ),
    ];
    for (resource, selector, cached) in checks {
        let api: Api<DynamicObject> =
            Api::namespaced_with(ctx.client.clone(), namespace, &resource);
        let mut params = ListParams::default();
        if let Some(selector) = selector {
            params = params.labels(selector);
        }
        let listed = api
            .list(&params)
            .await
            .map_err(|source| Error::ReadForAdoption {
                kind: resource.kind.clone(),
                source,
            })?;
        let listed_at = version_number(listed.metadata.resource_version.as_deref());
        let listed: HashMap<String, u64> = listed
            .items
            .iter()
            .filter_map(|o| {
                Some((
                    o.metadata.name.clone()?,
                    version_number(o.resource_version().as_deref()),
                ))
            })
            .collect();
        if !covers(&cached, &listed, listed_at) {
            return Ok(false);
        }
    }
    Ok(true)
}

/// Whether `cached` (name to resourceVersion) holds at least what a list taken at `listed_at`
/// returned.
fn covers(cached: &HashMap<String, u64>, listed: &HashMap<String, u64>, listed_at: u64) -> bool {
    listed
        .iter()
        .all(|(name, version)| cached.get(name).is_some_and(|c| c >= version))
        && cached
            .iter()
            .all(|(name, version)| listed.contains_key(name) || *version > listed_at)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn versions(pairs: &[(&str, u64)]) -> HashMap<String, u64> {
        pairs.iter().map(|(n, v)| ((*n).to_owned(), *v)).collect()
    }

    #[test]
    fn caches_cover_a_list_when_they_hold_it_or_newer() {
        let listed = versions(&[("a", 5), ("b", 7)]);
        assert!(covers(&versions(&[("a", 5), ("b", 7)]), &listed, 9));
        assert!(covers(&versions(&[("a", 6), ("b", 7)]), &listed, 9));
        // Created after the list.
        assert!(covers(
            &versions(&[("a", 5), ("b", 7), ("c", 10)]),
            &listed,
            9
        ));
        // An older version, a missing object, an object deleted before the list.
        assert!(!covers(&versions(&[("a", 4), ("b", 7)]), &listed, 9));
        assert!(!covers(&versions(&[("a", 5)]), &listed, 9));
        assert!(!covers(
            &versions(&[("a", 5), ("b", 7), ("c", 8)]),
            &listed,
            9
        ));
    }
}
