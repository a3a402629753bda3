//! Report: node and ExpressCluster status (server-side apply under one field manager, only
//! when something other than a timestamp changed) and the per-phase node gauge. Runs after
//! every reconcile, even when an action failed.

use std::collections::HashMap;

use express_api::keys::FIELD_MANAGER;
use express_api::{ExpressCluster, ExpressClusterStatus, NodeStatus};
use express_planner::Blocked;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::api::{ApiResource, DynamicObject, Patch, PatchParams};
use kube::{Resource, ResourceExt};

use express_planner::NodeIndex;

use super::env::{Env, Written};
use super::events;
use crate::controller::error::Error;

use crate::status::quiet_start::quiet_until;
use crate::status::{cluster_status, node_status, same_ignoring_time};
use express_api::conditions::{self, reason};

impl Env<'_> {
    pub(crate) fn node_status(
        &self,
        index: NodeIndex,
        written: &Written,
    ) -> (Option<NodeStatus>, NodeStatus) {
        let observation = self.snapshot.node(index);
        let (kind, name) = (observation.kind, observation.name.as_str());
        let node = self.observed.node(kind, name);
        let previous = written
            .nodes
            .get(&index)
            .or_else(|| node.and_then(|n| n.status()))
            .cloned();
        let generation = node.and_then(|n| n.meta().generation);
        let status = node_status(
            observation,
            index,
            self.plan.node(index),
            self.plan,
            previous.as_ref(),
            generation,
            self.now,
        );
        (previous, status)
    }

    pub(crate) fn cluster_status(
        &self,
        written: &Written,
    ) -> Option<(Option<ExpressClusterStatus>, ExpressClusterStatus)> {
        let cluster = self.governing?;
        let previous = written.cluster.clone().or_else(|| cluster.status.clone());
        let mut status = cluster_status(
            self.snapshot,
            self.plan,
            previous.as_ref(),
            cluster.metadata.generation,
            self.now,
        );
        status.operator = Some(super::handover::owner(self.ctx));
        Some((previous, status))
    }

    pub(crate) async fn write_node_status(
        &self,
        index: NodeIndex,
        status: &NodeStatus,
    ) -> Result<(), kube::Error> {
        let observation = self.snapshot.node(index);
        let (kind, name) = (observation.kind, observation.name.as_str());
        let mut patch = crate::status::patch(&kind.to_string(), status);
        let meta = apply_status(
            &self.ctx.client,
            &kind.api_resource(),
            &self.key.namespace,
            name,
            &patch,
        )
        .await?;
        // The status as serialized for the patch: the overlay keeps the same value.
        self.ctx
            .written
            .remember(kind.as_str(), &meta, patch["status"].take());
        Ok(())
    }

    pub(crate) async fn write_cluster_status(
        &self,
        status: &ExpressClusterStatus,
    ) -> Result<(), Error> {
        let Some(cluster) = self.governing else {
            return Ok(());
        };
        let name = cluster.name_any();
        let mut patch = crate::status::patch("ExpressCluster", status);
        let written = apply_status(
            &self.ctx.client,
            &ApiResource::erase::<ExpressCluster>(&()),
            &self.key.namespace,
            &name,
            &patch,
        )
        .await
        .map_err(|source| Error::WriteStatus {
            object: format!("ExpressCluster {name}"),
            source,
        })?;
        self.ctx
            .written
            .remember("ExpressCluster", &written, patch["status"].take());
        Ok(())
    }
}

/// Applies `patch` to the status of `name` under this operator's field manager, and returns
/// the metadata the write left (name, namespace, resourceVersion: what the overlay of its own
/// writes needs). The rest of the object the server answers with is skipped, not decoded: its
/// `managedFields` alone decoded to a few hundred allocations, a tenth of the operator's CPU
/// in a fleet-wide upgrade at 10,000 tenants.
async fn apply_status(
    client: &kube::Client,
    resource: &ApiResource,
    namespace: &str,
    name: &str,
    patch: &serde_json::Value,
) -> Result<ObjectMeta, kube::Error> {
    #[derive(serde::Deserialize)]
    struct Written {
        metadata: WrittenMeta,
    }
    #[derive(serde::Deserialize)]
    #[serde(rename_all = "camelCase")]
    struct WrittenMeta {
        name: Option<String>,
        namespace: Option<String>,
        resource_version: Option<String>,
    }
    let params = PatchParams::apply(FIELD_MANAGER).force();
    let path = <DynamicObject as Resource>::url_path(resource, Some(namespace));
    let mut request = kube::core::Request::new(path)
        .patch_subresource("status", name, &params, &Patch::Apply(patch))
        .map_err(kube::Error::BuildRequest)?;
    request.extensions_mut().insert("patch_subresource");
    let written: Written = client.request(request).await?;
    Ok(ObjectMeta {
        name: written.metadata.name,
        namespace: written.metadata.namespace,
        resource_version: written.metadata.resource_version,
        ..ObjectMeta::default()
    })
}

pub(crate) async fn report(env: &Env<'_>, written: &mut Written) -> Result<(), Error> {
    let mut result = Ok(());
    let phases = report_nodes(env, written, &mut result).await;
    env.ctx
        .metrics
        .set_tenant_nodes(&env.key.namespace, &env.key.cluster, &phases);
    if let Some((previous, status)) = env.cluster_status(written) {
        publish_cluster_transitions(env, previous.as_ref(), &status).await;
        if previous
            .as_ref()
            .is_none_or(|p| !same_ignoring_time(p, &status))
        {
            match env.write_cluster_status(&status).await {
                Ok(()) => written.cluster = Some(status),
                Err(err) if result.is_ok() => result = Err(err),
                Err(_) => {}
            }
        }
    } else if let Some(Blocked::InvalidSpec(why)) = &env.plan.blocked {
        publish_invalid_spec_on_nodes(env, why).await;
    }
    result
}

/// Writes each node's status that changed and is this reconcile's to write, keeping the first
/// failure in `result` and going on with the others; returns the nodes by phase.
async fn report_nodes(
    env: &Env<'_>,
    written: &mut Written,
    result: &mut Result<(), Error>,
) -> HashMap<express_api::NodePhase, i64> {
    let mut phases: HashMap<express_api::NodePhase, i64> = HashMap::new();
    for index in env.snapshot.indices() {
        let (previous, status) = env.node_status(index, written);
        if env.governing.is_none() {
            // No ExpressCluster to carry the settle condition: tell it on each waiting node.
            env.publish_settle_wait(
                index,
                previous.as_ref().and_then(|p| p.message.as_deref()),
                status.message.as_deref(),
            )
            .await;
        }
        *phases
            .entry(status.phase.unwrap_or(express_api::NodePhase::Waiting))
            .or_default() += 1;
        if !node_status_due(env, written, index, previous.as_ref(), &status) {
            continue;
        }
        if let Some(until) = previous.as_ref().and_then(|previous| {
            quiet_until(
                previous,
                &status,
                env.snapshot.node(index).pod.as_ref(),
                env.now.0.as_millisecond(),
            )
        }) {
            written.kept_back_until_ms = Some(
                written
                    .kept_back_until_ms
                    .map_or(until, |earlier| earlier.min(until)),
            );
            continue;
        }
        let observation = env.snapshot.node(index);
        match env.write_node_status(index, &status).await {
            Ok(()) => {
                written.nodes.insert(index, status);
            }
            Err(source) if result.is_ok() => {
                *result = Err(Error::WriteStatus {
                    object: format!("{} {}", observation.kind, observation.name),
                    source,
                });
            }
            Err(_) => {}
        }
    }
    phases
}

/// Whether a node's status is written by this reconcile: it changed, and no action on the node
/// made the state seen before acting stale.
fn node_status_due(
    env: &Env<'_>,
    written: &Written,
    index: NodeIndex,
    previous: Option<&NodeStatus>,
    status: &NodeStatus,
) -> bool {
    if previous.is_some_and(|p| same_ignoring_time(p, status)) {
        return false;
    }
    // A node whose pod was just created (or deleted for a bounce, or ended) is reported by
    // the reconcile its watch event brings: the state seen before acting is already stale.
    // One whose pod was just retired is reported now, as the snapshot shows it: terminating.
    let action = env.plan.action_on(index);
    let retired_now = action.is_some_and(|a| a.operation.retires_pod())
        && env
            .snapshot
            .node(index)
            .pod
            .as_ref()
            .is_some_and(|p| p.terminating);
    !(action.is_some() && !retired_now && !written.nodes.contains_key(&index))
}

/// The events the ExpressCluster's new status calls for, each told once, when its state begins:
/// paused, settling stalled (or waiting to settle), objects unreadable, spec invalid.
async fn publish_cluster_transitions(
    env: &Env<'_>,
    previous: Option<&ExpressClusterStatus>,
    status: &ExpressClusterStatus,
) {
    let plan = env.plan;
    if became_true(previous, status, conditions::PAUSED) {
        env.publish_on_cluster(events::paused(status.message.clone().unwrap_or_default()))
            .await;
    }
    if stalled(Some(status)) && !stalled(previous) {
        env.publish_on_cluster(events::settle_stalled(
            plan.settle.message().unwrap_or_default(),
        ))
        .await;
    } else if events::waits_to_settle(status.message.as_deref())
        && !events::waits_to_settle(previous.and_then(|p| p.message.as_deref()))
    {
        env.publish_on_cluster(events::settling(plan.settle.message().unwrap_or_default()))
            .await;
    }
    if let Some(message) = unreadable(Some(status))
        && unreadable(previous).as_ref() != Some(&message)
    {
        env.publish_on_cluster(events::undecodable(message)).await;
    }
    if became_true(previous, status, conditions::INVALID_SPEC)
        && let Some(Blocked::InvalidSpec(why)) = &plan.blocked
    {
        env.publish_on_cluster(events::invalid_spec(why.clone()))
            .await;
    }
}

/// Whether the condition is True now and was not before.
fn became_true(
    previous: Option<&ExpressClusterStatus>,
    status: &ExpressClusterStatus,
    type_: &str,
) -> bool {
    let is_true = |s: &ExpressClusterStatus| {
        s.conditions
            .iter()
            .find(|c| c.type_ == type_)
            .map(|c| c.status == "True")
    };
    is_true(status) == Some(true) && previous.and_then(is_true) != Some(true)
}

/// Whether settling the desired state stalled.
fn stalled(status: Option<&ExpressClusterStatus>) -> bool {
    status
        .and_then(|s| {
            s.conditions
                .iter()
                .find(|c| c.type_ == conditions::DESIRED_STATE_SETTLED)
        })
        .is_some_and(|c| c.status == "False" && c.reason == reason::STALLED)
}

/// Why some objects cannot be read, when they cannot.
fn unreadable(status: Option<&ExpressClusterStatus>) -> Option<String> {
    status
        .and_then(|s| {
            s.conditions
                .iter()
                .find(|c| c.type_ == conditions::OBJECTS_READABLE)
        })
        .filter(|c| c.status == "False")
        .map(|c| c.message.clone())
}

/// No ExpressCluster to carry the condition: every node's status says it, and an event on each
/// node not yet saying it records it.
async fn publish_invalid_spec_on_nodes(env: &Env<'_>, why: &str) {
    let snapshot = env.snapshot;
    for (index, observation) in snapshot.indices().zip(&snapshot.nodes) {
        let had = env
            .observed
            .node(observation.kind, &observation.name)
            .and_then(|n| n.status()?.message.clone());
        if had.as_deref().is_none_or(|m| !m.contains(why)) {
            env.publish_on_node(index, events::invalid_spec(why.to_owned()))
                .await;
        }
    }
}
