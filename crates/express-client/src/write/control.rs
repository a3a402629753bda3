//! `pause`, `resume`, `abort`, `retry` and `bounce` (DESIGN sections 4 and 6): the fields,
//! ConfigMaps and annotations the operator reads, written the way a user would write them. The
//! CLI verbs and the dashboard's actions both call these, and say what they did with the
//! [`Done`] they return, so each action has one implementation and one wording.

use std::process::ExitCode;

use express_api::bounce::format_duration;
use express_api::keys::{
    ANNOTATION_ABORT, ANNOTATION_ABORT_ROLLBACK, ANNOTATION_BOUNCE, ANNOTATION_BOUNCE_FORCE,
    ANNOTATION_BOUNCE_TIMEOUT, ANNOTATION_PAUSE_REASON, ANNOTATION_RETRY, CONTROL_CONFIGMAP_GLOBAL,
    CONTROL_CONFIGMAP_NAMESPACE, CONTROL_KEY_PAUSED, CONTROL_KEY_REASON,
};
use express_api::{ExpressCluster, NodeKind};
use futures::StreamExt;
use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{Api, DynamicObject, Patch, PatchParams};
use kube::runtime::{WatchStreamExt, watcher};
use kube::{Client, ResourceExt};

use crate::exit::Exit;
use crate::read::live::express_cluster;

/// The field manager of everything the plugin writes.
pub const FIELD_MANAGER: &str = "kubectl-express";

/// Where a pause applies (DESIGN section 4).
#[derive(Clone, Debug)]
pub enum Scope {
    /// One Express cluster: its ExpressCluster's `spec.paused`.
    Cluster(String),
    /// Every Express cluster of the namespace: ConfigMap `express-control`.
    Namespace,
    /// Every Express cluster the operator manages: ConfigMap `express-operator-control` in its
    /// namespace.
    All { operator_namespace: String },
}

/// Who else writes this object, if a GitOps or Helm tool does: its next sync reverts a field
/// set by hand.
fn managed_by(cluster: &ExpressCluster) -> Option<String> {
    let labels = cluster.labels();
    let annotations = cluster.annotations();
    if let Some(id) = annotations.get("argocd.argoproj.io/tracking-id") {
        return Some(format!("Argo CD (tracking id {id})"));
    }
    if labels
        .get("app.kubernetes.io/managed-by")
        .map(String::as_str)
        == Some("Helm")
        || annotations.contains_key("meta.helm.sh/release-name")
    {
        let release = annotations
            .get("meta.helm.sh/release-name")
            .map(|r| format!(" (release {r})"))
            .unwrap_or_default();
        return Some(format!("Helm{release}"));
    }
    labels
        .get("app.kubernetes.io/instance")
        .map(|app| format!("Argo CD (application {app})"))
}

/// What an action did, in the words the CLI prints and the dashboard shows.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Done {
    /// What was written (stdout for the CLI).
    pub message: String,
    /// What the user should know about it (stderr for the CLI), e.g. a GitOps tool reverting it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub warning: Option<String>,
    /// The request id, for the actions the operator records by id (abort, retry, bounce).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub request_id: Option<String>,
}

impl Done {
    fn said(message: String) -> Done {
        Done {
            message,
            warning: None,
            request_id: None,
        }
    }

    /// Prints it the CLI's way: the message on stdout, a warning on stderr.
    pub fn print(&self) {
        println!("{}", self.message);
        if let Some(warning) = &self.warning {
            eprintln!("warning: {warning}");
        }
    }
}

/// Pauses (`paused`) or resumes one scope.
pub async fn set_paused(
    client: &Client,
    namespace: &str,
    scope: &Scope,
    paused: bool,
    reason: Option<&str>,
) -> Result<Done, Exit> {
    let verb = if paused { "paused" } else { "resumed" };
    match scope {
        Scope::Cluster(name) => {
            let cluster = express_cluster(client, namespace, name).await?;
            let object = cluster.name_any();
            let patch = serde_json::json!({
                "metadata": {"annotations": {ANNOTATION_PAUSE_REASON: reason.filter(|_| paused)}},
                "spec": {"paused": paused},
            });
            Api::<ExpressCluster>::namespaced(client.clone(), namespace)
                .patch(&object, &PatchParams::default(), &Patch::Merge(&patch))
                .await
                .map_err(|e| Exit::api(format!("cannot update ExpressCluster {object}"), &e))?;
            Ok(Done {
                warning: managed_by(&cluster).map(|tool| format!(
                    "ExpressCluster {object} is managed by {tool}: its next sync sets spec.paused back to what it declares. For a pause that outlives syncs, use `kubectl express pause --namespace-wide -n {namespace}`"
                )),
                ..Done::said(format!(
                    "{verb} Express cluster {name} in namespace {namespace} (ExpressCluster {object} spec.paused)"
                ))
            })
        }
        Scope::Namespace => {
            write_control(
                client,
                namespace,
                CONTROL_CONFIGMAP_NAMESPACE,
                paused,
                reason,
            )
            .await?;
            Ok(Done::said(format!(
                "{verb} every Express cluster in namespace {namespace} (ConfigMap {CONTROL_CONFIGMAP_NAMESPACE})"
            )))
        }
        Scope::All { operator_namespace } => {
            write_control(
                client,
                operator_namespace,
                CONTROL_CONFIGMAP_GLOBAL,
                paused,
                reason,
            )
            .await?;
            Ok(Done::said(format!(
                "{verb} every Express cluster the operator manages (ConfigMap {CONTROL_CONFIGMAP_GLOBAL} in namespace {operator_namespace})"
            )))
        }
    }
}

/// Server-side applies a control ConfigMap: created if missing, and under one field manager,
/// so that resuming drops the reason the pause wrote.
async fn write_control(
    client: &Client,
    namespace: &str,
    name: &str,
    paused: bool,
    reason: Option<&str>,
) -> Result<(), Exit> {
    let mut data = serde_json::Map::new();
    data.insert(CONTROL_KEY_PAUSED.into(), paused.to_string().into());
    if let (true, Some(reason)) = (paused, reason) {
        data.insert(CONTROL_KEY_REASON.into(), reason.into());
    }
    let object = serde_json::json!({
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": name, "namespace": namespace},
        "data": data,
    });
    Api::<ConfigMap>::namespaced(client.clone(), namespace)
        .patch(
            name,
            &PatchParams::apply(FIELD_MANAGER).force(),
            &Patch::Apply(&object),
        )
        .await
        .map(|_| ())
        .map_err(|e| {
            Exit::api(
                format!("cannot write ConfigMap {name} in namespace {namespace}"),
                &e,
            )
        })
}

/// Which request annotation to write.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Request {
    Abort { rollback: bool },
    Retry,
}

/// Writes an abort or retry request with a new id on the cluster's ExpressCluster.
pub async fn send_request(
    client: &Client,
    namespace: &str,
    cluster: &str,
    request: Request,
) -> Result<Done, Exit> {
    annotate(client, namespace, cluster, request)
        .await
        .map(|(done, _)| done)
}

/// [`send_request`], also naming the ExpressCluster annotated.
async fn annotate(
    client: &Client,
    namespace: &str,
    cluster: &str,
    request: Request,
) -> Result<(Done, String), Exit> {
    let express_cluster = express_cluster(client, namespace, cluster).await?;
    let object = express_cluster.name_any();
    let id = crate::write::control::request_id();
    let (what, annotations) = match request {
        Request::Abort { rollback } => (
            if rollback {
                "abort with rollback"
            } else {
                "abort"
            },
            serde_json::json!({
                ANNOTATION_ABORT: id,
                ANNOTATION_ABORT_ROLLBACK: rollback.then_some("true"),
            }),
        ),
        Request::Retry => ("retry", serde_json::json!({ ANNOTATION_RETRY: id })),
    };
    Api::<ExpressCluster>::namespaced(client.clone(), namespace)
        .patch(
            &object,
            &PatchParams::default(),
            &Patch::Merge(serde_json::json!({"metadata": {"annotations": annotations}})),
        )
        .await
        .map_err(|e| Exit::api(format!("cannot annotate ExpressCluster {object}"), &e))?;
    let done = Done {
        request_id: Some(id.clone()),
        ..Done::said(format!(
            "{what} {id} requested for Express cluster {cluster} in namespace {namespace} (ExpressCluster {object})"
        ))
    };
    Ok((done, object))
}

/// `abort` and `retry` on the command line: sends the request, prints its id, and with `wait`
/// returns once the operator recorded it in `status.requests`.
pub async fn request(
    client: &Client,
    namespace: &str,
    cluster: &str,
    request: Request,
    wait: bool,
) -> Result<ExitCode, Exit> {
    let (done, object) = annotate(client, namespace, cluster, request).await?;
    let id = done.request_id.clone().unwrap_or_default();
    println!("{id}");
    eprintln!("{}", done.message);
    if !wait {
        return Ok(ExitCode::SUCCESS);
    }
    let api = Api::<ExpressCluster>::namespaced(client.clone(), namespace);
    let recorded = |c: &ExpressCluster| {
        let requests = c.status.as_ref()?.requests.as_ref()?;
        match request {
            Request::Abort { .. } => requests.abort.clone(),
            Request::Retry => requests.retry.clone(),
        }
    };
    let config = watcher::Config::default().fields(&format!("metadata.name={object}"));
    let mut events = std::pin::pin!(watcher(api, config).default_backoff().applied_objects());
    while let Some(event) = events.next().await {
        let cluster =
            event.map_err(|e| Exit::failure(format!("lost the watch on {object}: {e}")))?;
        if recorded(&cluster).as_deref() == Some(id.as_str()) {
            let message = cluster
                .status
                .as_ref()
                .and_then(|s| s.message.clone())
                .unwrap_or_default();
            eprintln!("request {id} recorded by the operator: {message}");
            return Ok(ExitCode::SUCCESS);
        }
    }
    Err(Exit::failure(format!(
        "the watch on {object} ended before request {id} was recorded"
    )))
}

/// Asks the operator to bounce one node (DESIGN section 6): writes the request annotations
/// with a new id. Every request says all of its options: a force or a timeout left by an
/// earlier request must not apply to this one.
pub async fn request_bounce(
    client: &Client,
    namespace: &str,
    node: &str,
    force: bool,
    timeout_seconds: Option<u64>,
) -> Result<(NodeKind, Done), Exit> {
    let (kind, _) = crate::read::live::find_node(client, namespace, node).await?;
    let nodes: Api<DynamicObject> =
        Api::namespaced_with(client.clone(), namespace, &kind.api_resource());
    let id = crate::write::control::request_id();
    let patch = serde_json::json!({
        "metadata": {
            "annotations": {
                ANNOTATION_BOUNCE: id,
                ANNOTATION_BOUNCE_FORCE: force.then_some("true"),
                ANNOTATION_BOUNCE_TIMEOUT: timeout_seconds.map(format_duration),
            }
        }
    });
    nodes
        .patch(node, &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .map_err(|e| Exit::api(format!("cannot request the bounce of {kind} {node}"), &e))?;
    Ok((
        kind,
        Done {
            request_id: Some(id.clone()),
            ..Done::said(format!(
                "bounce {id} requested for {kind} {node} in namespace {namespace}"
            ))
        },
    ))
}

/// A request id nobody else generates: the instant to the millisecond and this process.
pub fn request_id() -> String {
    let now = k8s_openapi::jiff::Timestamp::now();
    format!(
        "cli-{}-{:x}",
        now.strftime("%Y%m%dt%H%M%S%3f"),
        std::process::id()
    )
}
