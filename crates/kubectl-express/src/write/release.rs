//! A person's requests on an OperatorRelease (pause, resume, promote, abort), written the way a
//! user would write them. `kubectl express release` and the dashboard both call these, so each
//! has one implementation and one wording.

use express_api::release::{
    ANNOTATION_PROMOTE, ANNOTATION_PROMOTE_FULL, ANNOTATION_ROLLBACK, OperatorRelease, ReleasePhase,
};
use express_api::rings::{Leadership, leadership, lease_name};
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::jiff::Timestamp;
use kube::api::{Api, Patch, PatchParams};
use kube::{Client, ResourceExt};

use crate::read::release::get;
use express_client::exit::Exit;
use express_client::write::control::{Done, FIELD_MANAGER};

/// A person's request on a release.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Request {
    Pause,
    Resume,
    /// End the current bake now; `full`: every remaining wave now, no more baking.
    Promote {
        full: bool,
    },
    /// Roll back now.
    Abort,
}

impl Request {
    pub fn name(self) -> &'static str {
        match self {
            Request::Pause => "pause",
            Request::Resume => "resume",
            Request::Promote { full: false } => "promote",
            Request::Promote { full: true } => "promote --full",
            Request::Abort => "abort",
        }
    }
}

/// Makes a request: `spec.paused` for pause and resume (declarative, as Argo CD would set it),
/// a request id on an annotation for promote and abort (each acted on once).
pub async fn request(
    client: &Client,
    namespace: &str,
    name: &str,
    request: Request,
) -> Result<Done, Exit> {
    let release = get(client, namespace, name).await?;
    let phase = release
        .status
        .as_ref()
        .map(|s| s.phase())
        .unwrap_or_default();
    // A release that succeeded can still be rolled back; nothing else is asked of a final one.
    let undo = request == Request::Abort && phase == ReleasePhase::Succeeded;
    if phase.is_final() && !undo {
        return Err(Exit::failure(format!(
            "OperatorRelease {name} is {phase}: nothing to {} (a new attempt is a new release)",
            request.name()
        )));
    }
    let id = express_client::write::control::request_id();
    let patch = match request {
        Request::Pause | Request::Resume => {
            serde_json::json!({"spec": {"paused": request == Request::Pause}})
        }
        Request::Promote { full } => serde_json::json!({"metadata": {"annotations": {
            ANNOTATION_PROMOTE: id,
            ANNOTATION_PROMOTE_FULL: if full { Some("true") } else { None },
        }}}),
        Request::Abort => {
            serde_json::json!({"metadata": {"annotations": {ANNOTATION_ROLLBACK: id}}})
        }
    };
    Api::<OperatorRelease>::namespaced(client.clone(), namespace)
        .patch(
            name,
            &PatchParams {
                field_manager: Some(FIELD_MANAGER.into()),
                ..PatchParams::default()
            },
            &Patch::Merge(&patch),
        )
        .await
        .map_err(|e| {
            Exit::api(
                format!("cannot {} OperatorRelease {name}", request.name()),
                &e,
            )
        })?;
    let message = match request {
        Request::Pause => format!(
            "operatorrelease/{name} paused: nothing moves, nothing is judged until it is resumed"
        ),
        Request::Resume => format!("operatorrelease/{name} resumed"),
        Request::Promote { full: false } => format!(
            "operatorrelease/{name}: promote requested (id {id}): the current wave ends its bake once its tenants are adopted"
        ),
        Request::Promote { full: true } => format!(
            "operatorrelease/{name}: full promotion requested (id {id}): every remaining wave now, no more baking or judging"
        ),
        Request::Abort if undo => format!(
            "operatorrelease/{name} succeeded: rollback requested (id {id}): every tenant it moved goes back to ring {}",
            release.spec.from_ring
        ),
        Request::Abort => format!(
            "operatorrelease/{name}: abort requested (id {id}): every moved tenant goes back to ring {}",
            release.spec.from_ring
        ),
    };
    // Only the leader of fromRing moves tenants: without one the request waits for it.
    let warning = match request {
        Request::Abort => leaderless(client, namespace, &release.spec.from_ring).await,
        _ => None,
    }
    .into_iter()
    .chain(managed_by_git(&release))
    .reduce(|a, b| format!("{a}; {b}"));
    let request_id = matches!(request, Request::Promote { .. } | Request::Abort).then_some(id);
    Ok(Done {
        message,
        warning,
        request_id,
    })
}

/// Says so when `ring` has no live leader: the request is recorded and acted on once one leads
/// (nothing when the Lease cannot be read: the request stands either way).
async fn leaderless(client: &Client, namespace: &str, ring: &str) -> Option<String> {
    let lease = Api::<Lease>::namespaced(client.clone(), namespace)
        .get_opt(&lease_name(ring))
        .await
        .ok()?;
    match leadership(lease.as_ref(), Timestamp::now()) {
        Leadership::Live { .. } => None,
        Leadership::Vacant => Some(format!(
            "ring {ring} has no leader now: the request is recorded and acted on once ring {ring}'s leader runs"
        )),
    }
}

/// A release applied from Git gets `spec.paused` back on the next sync.
fn managed_by_git(release: &OperatorRelease) -> Option<String> {
    release
        .annotations()
        .get("argocd.argoproj.io/tracking-id")
        .map(|id| {
            format!(
                "Argo CD tracks this release ({id}): a sync sets spec.paused back to what Git says; change it in Git (or use the Argo CD action)"
            )
        })
}
