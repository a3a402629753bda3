//! Writing a release across DCs into one DC (DESIGN section 14): the plan's copy (created once,
//! never changed: a different spec under the same name is refused), its status, a person's
//! request (an annotation, `ID@instant`), and the step's actions on the DC's own
//! `OperatorRelease`, each safe to repeat: created if absent, paused, resumed, rolled back. The
//! status is applied whole (server-side apply, one field manager).

use std::collections::BTreeMap;

use express_api::fleet_release::{
    ANNOTATION_PAUSED_BY, FleetRelease, FleetReleaseSpec, FleetReleaseStatus, LABEL_FLEET_RELEASE,
};
use express_api::release::{ANNOTATION_ROLLBACK, OperatorRelease};
use express_planner::fleet_release::FleetAction;
use kube::api::{Api, ObjectMeta, Patch, PatchParams, PostParams};
use kube::{Client, ResourceExt};

use crate::write::control::{FIELD_MANAGER, request_id};

fn params() -> PatchParams {
    PatchParams {
        field_manager: Some(FIELD_MANAGER.into()),
        ..PatchParams::default()
    }
}

/// What writing the plan into a DC found.
#[derive(Debug, PartialEq, Eq)]
pub enum Placed {
    Created,
    /// The same spec was there already.
    Unchanged,
}

/// Writes the plan into a DC unless it holds it already; a different spec under that name is an
/// error naming the DC (no plan is overwritten: the DCs would disagree on what they run).
pub async fn place(
    client: &Client,
    namespace: &str,
    name: &str,
    spec: &FleetReleaseSpec,
) -> Result<Placed, String> {
    let api = Api::<FleetRelease>::namespaced(client.clone(), namespace);
    if let Some(existing) = api
        .get_opt(name)
        .await
        .map_err(|e| format!("cannot read FleetRelease {name}: {e}"))?
    {
        return if &existing.spec == spec {
            Ok(Placed::Unchanged)
        } else {
            Err(format!(
                "FleetRelease {name} in {namespace} holds a different plan: a changed plan is a new FleetRelease (another name)"
            ))
        };
    }
    let plan = FleetRelease {
        metadata: ObjectMeta {
            name: Some(name.to_owned()),
            namespace: Some(namespace.to_owned()),
            ..ObjectMeta::default()
        },
        spec: spec.clone(),
        status: None,
    };
    match api.create(&post(), &plan).await {
        Ok(_) => Ok(Placed::Created),
        // Another driver placed it meanwhile: the same plan, or a refusal next time.
        Err(kube::Error::Api(status)) if status.code == 409 => {
            Box::pin(place(client, namespace, name, spec)).await
        }
        Err(e) => Err(format!(
            "cannot create FleetRelease {name} in {namespace}: {e}"
        )),
    }
}

fn post() -> PostParams {
    PostParams {
        field_manager: Some(FIELD_MANAGER.into()),
        ..PostParams::default()
    }
}

/// Writes the fleet's status into a DC's copy.
pub async fn status(
    client: &Client,
    namespace: &str,
    name: &str,
    status: &FleetReleaseStatus,
) -> Result<(), String> {
    // Applied whole under one field manager, so that a field the step cleared (a pause ended)
    // goes away: a merge patch would keep what it does not name.
    let applied = serde_json::json!({
        "apiVersion": format!("{}/{}", express_api::keys::GROUP, express_api::keys::VERSION),
        "kind": "FleetRelease",
        "status": status,
    });
    Api::<FleetRelease>::namespaced(client.clone(), namespace)
        .patch_status(
            name,
            &PatchParams::apply(FIELD_MANAGER).force(),
            &Patch::Apply(&applied),
        )
        .await
        .map(|_| ())
        .map_err(|e| format!("cannot write the status of FleetRelease {name}: {e}"))
}

/// Puts request annotations on a DC's copy.
pub async fn annotate(
    client: &Client,
    namespace: &str,
    name: &str,
    annotations: &BTreeMap<&str, String>,
) -> Result<(), String> {
    Api::<FleetRelease>::namespaced(client.clone(), namespace)
        .patch(
            name,
            &params(),
            &Patch::Merge(serde_json::json!({"metadata": {"annotations": annotations}})),
        )
        .await
        .map(|_| ())
        .map_err(|e| format!("cannot write the request on FleetRelease {name}: {e}"))
}

/// Acts on a DC's release; what was done, in one line.
pub async fn act(
    client: &Client,
    namespace: &str,
    name: &str,
    spec: &FleetReleaseSpec,
    action: &FleetAction,
) -> Result<String, String> {
    let api = Api::<OperatorRelease>::namespaced(client.clone(), namespace);
    let context = action.context();
    match action {
        FleetAction::Create { .. } => {
            let release = OperatorRelease {
                metadata: ObjectMeta {
                    name: Some(name.to_owned()),
                    namespace: Some(namespace.to_owned()),
                    labels: Some(BTreeMap::from([(
                        LABEL_FLEET_RELEASE.to_owned(),
                        name.to_owned(),
                    )])),
                    ..ObjectMeta::default()
                },
                spec: spec.release_spec(),
                status: None,
            };
            match api.create(&post(), &release).await {
                Ok(_) => Ok(format!("{context}: OperatorRelease {name} created")),
                // There already: created once, by this driver before it died or by another.
                Err(kube::Error::Api(status)) if status.code == 409 => {
                    let existing = api.get(name).await.map_err(|e| e.to_string())?;
                    if existing
                        .labels()
                        .get(LABEL_FLEET_RELEASE)
                        .map(String::as_str)
                        == Some(name)
                    {
                        Ok(format!(
                            "{context}: OperatorRelease {name} was there already"
                        ))
                    } else {
                        Err(format!(
                            "{context}: an OperatorRelease {name} not made by this plan is in the way"
                        ))
                    }
                }
                Err(e) => Err(format!(
                    "{context}: cannot create OperatorRelease {name}: {e}"
                )),
            }
        }
        FleetAction::Pause { .. } | FleetAction::Resume { .. } => {
            let paused = matches!(action, FleetAction::Pause { .. });
            // Marked as this plan's pause, so that the plan resumes it and no other.
            let mark = paused.then_some(name);
            api.patch(
                name,
                &params(),
                &Patch::Merge(serde_json::json!({
                    "metadata": {"annotations": {ANNOTATION_PAUSED_BY: mark}},
                    "spec": {"paused": paused},
                })),
            )
            .await
            .map_err(|e| {
                format!(
                    "{context}: cannot {} OperatorRelease {name}: {e}",
                    if paused { "pause" } else { "resume" }
                )
            })?;
            Ok(format!(
                "{context}: OperatorRelease {name} {}",
                if paused { "paused" } else { "resumed" }
            ))
        }
        FleetAction::RollBack { reason, .. } => {
            let id = request_id();
            api.patch(
                name,
                &params(),
                &Patch::Merge(
                    serde_json::json!({"metadata": {"annotations": {ANNOTATION_ROLLBACK: id}}}),
                ),
            )
            .await
            .map_err(|e| format!("{context}: cannot roll back OperatorRelease {name}: {e}"))?;
            Ok(format!(
                "{context}: OperatorRelease {name} asked to roll back ({reason}; request {id})"
            ))
        }
    }
}
