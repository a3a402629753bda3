//! OperatorReleases (DESIGN section 12) as people see and steer them: the rendering of one
//! release or of the fleet's, and the requests a person makes (pause, resume, promote, abort),
//! written the way a user would write them. `kubectl express release` and the dashboard both
//! use these, so each has one implementation and one wording.

use express_api::release::{
    ANNOTATION_PROMOTE, ANNOTATION_PROMOTE_FULL, ANNOTATION_ROLLBACK, OperatorRelease, ReleasePhase,
};
use k8s_openapi::jiff::Timestamp;
use kube::api::{Api, ListParams, Patch, PatchParams};
use kube::{Client, ResourceExt};

use crate::control::{Done, FIELD_MANAGER};
use crate::exit::{Code, Exit};
use crate::view::{NONE, table};

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

/// The exit code a release's phase gives: 0 pending, progressing, paused or succeeded; 1 rolled
/// back or inconclusive.
pub fn code(phase: ReleasePhase) -> Code {
    match phase {
        ReleasePhase::RolledBack | ReleasePhase::Inconclusive => Code::Failed,
        _ => Code::Done,
    }
}

pub async fn get(client: &Client, namespace: &str, name: &str) -> Result<OperatorRelease, Exit> {
    match Api::<OperatorRelease>::namespaced(client.clone(), namespace)
        .get_opt(name)
        .await
    {
        Ok(Some(release)) => Ok(release),
        Ok(None) => Err(Exit::usage(format!(
            "no OperatorRelease {name} in namespace {namespace} (releases live in the operator's namespace: --operator-namespace)"
        ))),
        Err(e) => Err(not_installed(e, namespace)),
    }
}

pub async fn list(client: &Client, namespace: &str) -> Result<Vec<OperatorRelease>, Exit> {
    let mut releases = Api::<OperatorRelease>::namespaced(client.clone(), namespace)
        .list(&ListParams::default())
        .await
        .map_err(|e| not_installed(e, namespace))?
        .items;
    releases.sort_by_key(|r| (r.creation_timestamp().map(|t| t.0), r.name_any()));
    Ok(releases)
}

fn not_installed(error: kube::Error, namespace: &str) -> Exit {
    match &error {
        kube::Error::Api(status) if status.code == 404 => Exit::usage(
            "the OperatorRelease CRD is not installed: apply this build's CRDs (deploy/crds, or the chart's crds/) first",
        ),
        _ => Exit::api(
            format!("cannot read OperatorReleases in namespace {namespace}"),
            &error,
        ),
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
    if phase.is_final() {
        return Err(Exit::failure(format!(
            "OperatorRelease {name} is {phase}: nothing to {} (a new attempt is a new release)",
            request.name()
        )));
    }
    let id = crate::verbs::request_id();
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
        Request::Abort => format!(
            "operatorrelease/{name}: abort requested (id {id}): every moved tenant goes back to ring {}",
            release.spec.from_ring
        ),
    };
    let request_id = matches!(request, Request::Promote { .. } | Request::Abort).then_some(id);
    Ok(Done {
        message,
        warning: managed_by_git(&release),
        request_id,
    })
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

fn ago(at: Option<Timestamp>, now: Timestamp) -> String {
    at.map_or_else(
        || NONE.to_owned(),
        |at| {
            let seconds = u64::try_from(now.as_second() - at.as_second()).unwrap_or(0);
            format!("{} ago", express_api::bounce::format_duration(seconds))
        },
    )
}

/// The columns of the list of releases.
pub const LIST_HEADER: [&str; 8] = [
    "NAME", "PHASE", "FROM", "TO", "WAVE", "MOVED", "PINNED", "AGE",
];

/// One row per release, in the order given.
pub fn list_rows(releases: &[OperatorRelease], now: Timestamp) -> Vec<Vec<String>> {
    releases
        .iter()
        .map(|r| {
            let status = r.status.clone().unwrap_or_default();
            vec![
                r.name_any(),
                status.phase().to_string(),
                r.spec.from_ring.clone(),
                r.spec.to_ring.clone(),
                format!("{}/{}", status.wave + 1, r.spec.waves.len()),
                format!("{}/{}", status.moved_tenants, status.movable_tenants),
                status.pinned_tenants.to_string(),
                ago(r.creation_timestamp().map(|t| t.0), now).replace(" ago", ""),
            ]
        })
        .collect()
}

/// One line per release: the fleet's releases, oldest first.
pub fn render_list(releases: &[OperatorRelease], now: Timestamp) -> String {
    if releases.is_empty() {
        return "No OperatorReleases.\n".into();
    }
    table(&LIST_HEADER, &list_rows(releases, now))
}

/// One release: where it stands and why, its waves, its last samples.
pub fn render(release: &OperatorRelease, now: Timestamp) -> String {
    let spec = &release.spec;
    let status = release.status.clone().unwrap_or_default();
    let mut out = format!(
        "OperatorRelease {}/{}: {}\n",
        release.namespace().unwrap_or_default(),
        release.name_any(),
        status.phase()
    );
    out.push_str(&format!(
        "  ring {} -> ring {}{}\n",
        spec.from_ring,
        spec.to_ring,
        spec.version
            .as_ref()
            .map(|v| format!(" (build {v})"))
            .unwrap_or_default()
    ));
    if let Some(message) = &status.message {
        out.push_str(&format!("  {message}\n"));
    }
    out.push_str(&format!(
        "  tenants: {} moved ({} adopted) of {} movable, {} pinned\n",
        status.moved_tenants, status.adopted_tenants, status.movable_tenants, status.pinned_tenants
    ));
    out.push_str(&format!(
        "  samples: {} ok, {} failed (limit {}), {} inconclusive{}\n",
        status.samples.ok,
        status.samples.failed,
        spec.failure_limit,
        status.samples.inconclusive,
        if status.promoted_full {
            "; promoted in full: no more judging"
        } else {
            ""
        }
    ));
    let rows: Vec<Vec<String>> = spec
        .waves
        .iter()
        .enumerate()
        .map(|(i, wave)| {
            let seen = status.waves.get(i);
            let state = match seen {
                Some(w) if w.finished_at.is_some() => {
                    if w.promoted { "promoted" } else { "baked" }.to_owned()
                }
                // A rolled-back release's last wave neither moves nor bakes any more.
                Some(_) if status.phase() == ReleasePhase::RolledBack => "stopped".into(),
                Some(w) => match &w.bake_since {
                    Some(since) => {
                        let left =
                            spec.bake_seconds as i64 - (now.as_second() - since.0.as_second());
                        format!(
                            "baking, {} left",
                            express_api::bounce::format_duration(u64::try_from(left).unwrap_or(0))
                        )
                    }
                    None if i == status.wave as usize && !status.phase().is_final() => {
                        "moving".into()
                    }
                    None => NONE.into(),
                },
                None => "waiting".into(),
            };
            vec![
                (i + 1).to_string(),
                wave.to_string(),
                seen.map_or_else(|| NONE.into(), |w| w.target.to_string()),
                ago(seen.and_then(|w| w.started_at.as_ref()).map(|t| t.0), now),
                ago(seen.and_then(|w| w.finished_at.as_ref()).map(|t| t.0), now),
                state,
            ]
        })
        .collect();
    out.push('\n');
    out.push_str(&table(
        &["WAVE", "SIZE", "TENANTS", "STARTED", "FINISHED", "STATE"],
        &rows,
    ));
    if !status.last_samples.is_empty() {
        out.push_str("\nLast samples:\n");
        for sample in &status.last_samples {
            out.push_str(&format!(
                "  {} {:<12} {}\n",
                ago(Some(sample.at.0), now),
                sample.verdict.as_str(),
                sample.reason
            ));
        }
    }
    if let Some(reason) = &status.rollback_reason {
        out.push_str(&format!("\nRolled back: {reason}\n"));
    }
    out
}
