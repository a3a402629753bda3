//! Act: the thin actuator. Creates pods (keeping each new revision as a ControllerRevision
//! first), deletes them gracefully with a uid precondition, never forced; before a bounce's
//! deletion, asks the application to drop its shutdown protection (best effort).

use express_api::EffectiveNodeSpec;
use express_api::bounce::SHUTDOWN_PROTECTION_DISABLED;
use express_api::keys::{ANNOTATION_SHUTDOWN_PROTECTION, FIELD_MANAGER};
use express_api::views::RevisionView;
use express_planner::{Action, Operation, PodSource};
use k8s_openapi::api::apps::v1::ControllerRevision;
use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, DeleteParams, Patch, PatchParams, PostParams, Preconditions};

use tracing::{info, warn};

use express_planner::NodeIndex;

use super::env::Env;
use super::events;
use crate::controller::error::Error;

use crate::history;
use crate::metrics::ActionLabel;
use crate::pods::{NodeIdentity, build_pod};

/// What the actions did: the nodes whose pod this reconcile retired (`Operation::retires_pod`:
/// the report states them as the deletion leaves them), and the first action that failed.
pub(crate) struct Acted {
    pub(crate) retired: Vec<NodeIndex>,
    pub(crate) result: Result<(), Error>,
}

pub(crate) async fn act(env: &Env<'_>) -> Acted {
    let (ctx, pod_uids) = (env.ctx, &env.observed.pod_uids);
    let pods: Api<Pod> = Api::namespaced(ctx.client.clone(), &env.key.namespace);
    let mut first_error = Ok(());
    let mut retired = Vec::new();
    for action in &env.plan.actions {
        let observation = env.snapshot.node(action.node);
        let uid = pod_uids.get(&action.name);
        let result = match action.operation {
            Operation::CreatePod | Operation::FinishReplacement | Operation::CreateForBounce => {
                create_pod(env, &pods, action).await.map(Some)
            }
            Operation::ReplacePod
            | Operation::ResumeReplacement
            | Operation::RemovePod
            | Operation::DeleteEndedPod => {
                delete_pod(env, &pods, &action.name, uid).await.map(|gone| {
                    if gone && action.operation.retires_pod() {
                        retired.push(action.node);
                    }
                    None
                })
            }
            Operation::DeleteForBounce => {
                let bounced = env
                    .plan
                    .node(action.node)
                    .bounce
                    .as_ref()
                    .and_then(|b| b.pod_uid.as_ref());
                disable_shutdown_protection(env, &pods, action).await;
                delete_pod(env, &pods, &action.name, bounced.or(uid))
                    .await
                    .map(|_| None)
            }
        };
        let label = events::action_label(action.operation);
        ctx.metrics
            .work
            .actions
            .get_or_create(&ActionLabel {
                action: label.into(),
            })
            .inc();
        match result {
            Ok(created) => {
                let waited_for = &env.plan.node(action.node).prerequisites;
                let created = created.as_deref();
                let notice = events::pod_operation(action, observation, waited_for, created);
                info!(node = %action.name, action = label, rollback = action.source.kept_revision().is_some(), "{}", notice.note);
                if events::has_own_event(action.operation, created) {
                    env.publish_on_node(action.node, notice).await;
                }
            }
            Err(err) => {
                env.publish_on_node(action.node, events::action_failed(action, &err))
                    .await;
                if first_error.is_ok() {
                    first_error = Err(err);
                }
            }
        }
    }
    Acted {
        retired,
        result: first_error,
    }
}

/// Creates a node's pod: from the node's spec (keeping that spec as a ControllerRevision
/// first), or for a rollback from the spec a ControllerRevision kept.
pub(crate) async fn create_pod(
    env: &Env<'_>,
    pods: &Api<Pod>,
    action: &Action,
) -> Result<String, Error> {
    let (kind, name) = (action.kind, action.name.as_str());
    let build = |why: String| Error::BuildPod {
        node: name.to_owned(),
        why,
    };
    let Some(node) = env.observed.node(kind, name) else {
        return Err(build("the node object is gone".into()));
    };
    let Some(identity) = NodeIdentity::of(node) else {
        return Err(build("the node object has no uid".into()));
    };
    let revisions = &env.observed.objects.revisions;
    let kept = history::of_node(revisions.iter().map(|r| &**r), &identity);
    let (effective, revision): (EffectiveNodeSpec, String) = match &action.source {
        PodSource::Kept(revision) => {
            let wanted = history::revision_name(name, revision);
            let missing = || {
                build(format!(
                    "no ControllerRevision {wanted} keeps revision {revision}"
                ))
            };
            if !kept.iter().any(|r| r.is_named(&wanted)) {
                return Err(missing());
            }
            // The cache holds revisions without their bodies: fetch the one this pod needs.
            let api: Api<ControllerRevision> =
                Api::namespaced(env.ctx.client.clone(), &env.key.namespace);
            let kept_revision = match api.get(&wanted).await {
                Ok(kept_revision) => kept_revision,
                Err(kube::Error::Api(status)) if status.code == 404 => return Err(missing()),
                Err(source) => {
                    return Err(Error::ReadRevision {
                        node: name.to_owned(),
                        revision: revision.clone(),
                        source,
                    });
                }
            };
            // Still this node's (the name could have been taken by another object since).
            if RevisionView::from(&kept_revision)
                .kept_for(identity.kind, &identity.name)
                .is_none()
            {
                return Err(missing());
            }
            (
                history::spec_of(&kept_revision).map_err(build)?,
                revision.clone(),
            )
        }
        PodSource::Desired => {
            // The snapshot computed the effective spec: the pod is built from exactly what
            // was planned.
            let desired = env
                .snapshot
                .node(action.node)
                .desired
                .as_ref()
                .map_err(|why| build(why.clone()))?;
            keep_revision(env, &identity, &desired.spec, &desired.revision, &kept).await?;
            (desired.spec.clone(), desired.revision.clone())
        }
    };
    let pod = build_pod(&identity, &effective, &revision, &env.ctx.settings.ring).map_err(build)?;
    let params = PostParams {
        field_manager: Some(FIELD_MANAGER.into()),
        ..PostParams::default()
    };
    match pods.create(&params, &pod).await {
        Ok(created) => {
            // Until the pod cache shows it (a relisting watch can take seconds), reconciles
            // see it through the overlay instead of creating it again.
            let ctx = env.ctx;
            let relists_begun = ctx.caches.pods.relists_begun(&env.key.namespace);
            ctx.written_pods.remember_created(&created, relists_begun);
            Ok(revision)
        }
        // Created by an earlier attempt whose answer was lost: the watch will show it.
        Err(kube::Error::Api(status)) if status.code == 409 => Ok(revision),
        Err(source) => Err(Error::CreatePod {
            pod: name.to_owned(),
            source,
        }),
    }
}

/// Keeps `revision` of a node as a ControllerRevision (if not kept yet) and prunes the node's
/// history to `revisionHistoryLimit`, sparing the revisions it runs, wants or may return to.
pub(crate) async fn keep_revision(
    env: &Env<'_>,
    node: &NodeIdentity,
    effective: &EffectiveNodeSpec,
    revision: &str,
    kept: &[&RevisionView],
) -> Result<(), Error> {
    let api: Api<ControllerRevision> = Api::namespaced(env.ctx.client.clone(), &env.key.namespace);
    let failed = |source| Error::KeepRevision {
        node: node.name.to_owned(),
        revision: revision.to_owned(),
        source,
    };
    let name = history::revision_name(&node.name, revision);
    let mut kept: Vec<&RevisionView> = kept.to_vec();
    let created;
    if !kept.iter().any(|r| r.is_named(&name)) {
        let number = kept.iter().filter_map(|r| r.number).max().unwrap_or(0) + 1;
        let object =
            history::build(node, effective, revision, number).map_err(|why| Error::BuildPod {
                node: node.name.to_owned(),
                why,
            })?;
        let params = PostParams {
            field_manager: Some(FIELD_MANAGER.into()),
            ..PostParams::default()
        };
        created = match api.create(&params, &object).await {
            Ok(created) => RevisionView::from(&created),
            Err(kube::Error::Api(status)) if status.code == 409 => RevisionView::from(&object),
            Err(source) => return Err(failed(source)),
        };
        kept.push(&created);
    }
    let limit = env.snapshot.settings.revision_history_limit as usize;
    let observation = env.snapshot.nodes.iter().find(|n| n.name == node.name);
    let mut protected: Vec<&str> = vec![revision];
    if let Some(observation) = observation {
        protected.extend(observation.pod.as_ref().and_then(|p| p.revision.as_deref()));
        if let Some(change) = &observation.change {
            protected.extend(change.from.as_deref());
            protected.push(&change.to);
        }
    }
    for stale in history::to_prune(&kept, limit.max(1), &protected) {
        match api.delete(&stale, &DeleteParams::default()).await {
            Ok(_) => {}
            Err(kube::Error::Api(status)) if status.code == 404 => {}
            Err(source) => return Err(failed(source)),
        }
    }
    Ok(())
}

/// Graceful delete of exactly the pod observed (uid precondition), never forced: no grace
/// period is ever given, so the pod's own `terminationGracePeriodSeconds` applies. True when
/// this call deleted it; false when it was already gone or replaced.
pub(crate) async fn delete_pod(
    env: &Env<'_>,
    pods: &Api<Pod>,
    name: &str,
    uid: Option<&String>,
) -> Result<bool, Error> {
    let params = DeleteParams {
        preconditions: uid.map(|uid| Preconditions {
            uid: Some(uid.clone()),
            resource_version: None,
        }),
        ..DeleteParams::default()
    };
    match pods.delete(name, &params).await {
        Ok(outcome) => {
            // A graceful delete answers with the pod, now terminating.
            if let Some(terminating) = outcome.left() {
                env.ctx.written_pods.remember(&terminating);
            }
            Ok(true)
        }
        // Already gone, or replaced by another pod meanwhile: nothing to do now.
        Err(kube::Error::Api(status)) if status.code == 404 || status.code == 409 => Ok(false),
        Err(source) => Err(Error::DeletePod {
            pod: name.to_owned(),
            source,
        }),
    }
}

/// Before a bounce deletes a pod: annotate it `express.dev/shutdown-protection: disabled`, so
/// that the application lets itself be stopped. Best effort: a failure is told (event, log; the
/// bounce's status message says it while the pod terminates) and the bounce proceeds.
async fn disable_shutdown_protection(env: &Env<'_>, pods: &Api<Pod>, action: &Action) {
    let observed = env.snapshot.node(action.node).pod.as_ref();
    if observed.and_then(|p| p.shutdown_protection.as_deref()) == Some(SHUTDOWN_PROTECTION_DISABLED)
    {
        return;
    }
    // A merge patch of one annotation, guarded by the pod's uid: it never lands on a
    // replacement that took the name meanwhile.
    let uid = observed.and_then(|p| p.uid.clone());
    let patch = serde_json::json!({
        "metadata": {
            "uid": uid,
            "annotations": { ANNOTATION_SHUTDOWN_PROTECTION: SHUTDOWN_PROTECTION_DISABLED },
        }
    });
    let params = PatchParams {
        field_manager: Some(FIELD_MANAGER.into()),
        ..PatchParams::default()
    };
    let notice = match pods
        .patch(&action.name, &params, &Patch::Merge(&patch))
        .await
    {
        Ok(patched) => {
            env.ctx.written_pods.remember(&patched);
            events::shutdown_protection_disabled(&action.name)
        }
        Err(err) => {
            warn!(node = %action.name, error = %err, "cannot disable shutdown protection; bouncing anyway");
            events::shutdown_protection_kept(&action.name, &err)
        }
    };
    env.publish_on_node(action.node, notice).await;
}
