//! A pod as the fields the planner, the operator and triage read of it.

use std::sync::Arc;

use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::jiff::Timestamp;

use super::time::{ApiTime, api_time};
use super::{Interner, Uid, number, shared};
use crate::NodeKind;
use crate::keys::{
    ANNOTATION_APP_STATE, ANNOTATION_EXPRESS_VERSION, ANNOTATION_SHUTDOWN_PROTECTION,
    APP_CONTAINER, LABEL_CLUSTER, LABEL_DEPLOYMENT_REVISION,
};

/// A pod's controller owner reference.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PodOwner {
    pub kind: Arc<str>,
    pub name: Box<str>,
    pub uid: Uid,
}

/// One of a pod's conditions.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PodConditionView {
    pub type_: Arc<str>,
    pub status: Arc<str>,
    last_transition: Option<ApiTime>,
}

impl PodConditionView {
    pub fn last_transition(&self) -> Option<Timestamp> {
        self.last_transition.map(ApiTime::timestamp)
    }
}

/// What a pod's status says, when it has one.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PodStatusView {
    pub phase: Option<Arc<str>>,
    pub conditions: Vec<PodConditionView>,
    /// Restarts summed over its containers.
    pub restarts: i32,
}

/// A pod as every reader of [`crate::Objects`] reads it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PodView {
    pub namespace: Option<Arc<str>>,
    pub name: Box<str>,
    pub uid: Option<Uid>,
    /// The resourceVersion as a number (as etcd and kubesim issue them); None when it is not
    /// one, which readers take as fresh.
    pub resource_version: Option<u64>,
    /// Its `express.dev/cluster` label.
    pub cluster: Option<Arc<str>>,
    /// Its `express.dev/deployment-revision` label.
    pub revision: Option<Arc<str>>,
    /// Its controller owner references: the API server allows one, but a manifest or another
    /// server may carry more, and any of them makes the pod its node's.
    pub controllers: Box<[PodOwner]>,
    /// The Express version it runs: its `express.dev/express-version` annotation, else the tag
    /// of its application container's image.
    pub version: Option<Arc<str>>,
    /// Its `express.dev/app-state` annotation.
    pub app_state: Option<Box<str>>,
    /// Its `express.dev/shutdown-protection` annotation.
    pub shutdown_protection: Option<Box<str>>,
    created: Option<ApiTime>,
    deleted: Option<ApiTime>,
    pub status: Option<PodStatusView>,
}

impl PodView {
    /// The view of `pod`, its repeated strings shared through `interner` when there is one.
    pub fn new(pod: &Pod, interner: Option<&Interner>) -> PodView {
        let meta = &pod.metadata;
        let label = |key: &str| {
            meta.labels
                .as_ref()
                .and_then(|l| l.get(key))
                .map(|v| shared(interner, v))
        };
        let annotation = |key: &str| meta.annotations.as_ref().and_then(|a| a.get(key));
        let image_tag = || {
            let containers = &pod.spec.as_ref()?.containers;
            let container = containers
                .iter()
                .find(|c| c.name == APP_CONTAINER)
                .or(containers.first())?;
            let (repository, tag) = container.image.as_deref()?.rsplit_once(':')?;
            (!tag.contains('/') && !repository.is_empty()).then_some(tag)
        };
        let version = annotation(ANNOTATION_EXPRESS_VERSION)
            .map(String::as_str)
            .or_else(image_tag)
            .map(|v| shared(interner, v));
        let controllers = meta
            .owner_references
            .iter()
            .flatten()
            .filter(|r| r.controller == Some(true))
            .map(|r| PodOwner {
                kind: shared(interner, &r.kind),
                name: r.name.as_str().into(),
                uid: Uid::new(&r.uid),
            })
            .collect();
        let status = pod.status.as_ref().map(|s| PodStatusView {
            phase: s.phase.as_deref().map(|p| shared(interner, p)),
            conditions: s
                .conditions
                .iter()
                .flatten()
                .map(|c| PodConditionView {
                    type_: shared(interner, &c.type_),
                    status: shared(interner, &c.status),
                    last_transition: api_time(c.last_transition_time.as_ref().map(|t| t.0)),
                })
                .collect(),
            restarts: s
                .container_statuses
                .iter()
                .flatten()
                .map(|c| c.restart_count)
                .sum(),
        });
        PodView {
            namespace: meta.namespace.as_deref().map(|n| shared(interner, n)),
            name: meta.name.as_deref().unwrap_or_default().into(),
            uid: meta.uid.as_deref().map(Uid::new),
            resource_version: number(meta.resource_version.as_deref()),
            cluster: label(LABEL_CLUSTER),
            revision: label(LABEL_DEPLOYMENT_REVISION),
            controllers,
            version,
            app_state: annotation(ANNOTATION_APP_STATE).map(|v| v.as_str().into()),
            shutdown_protection: annotation(ANNOTATION_SHUTDOWN_PROTECTION)
                .map(|v| v.as_str().into()),
            created: api_time(meta.creation_timestamp.as_ref().map(|t| t.0)),
            deleted: api_time(meta.deletion_timestamp.as_ref().map(|t| t.0)),
            status,
        }
    }

    pub fn namespace(&self) -> Option<&str> {
        self.namespace.as_deref()
    }

    pub fn terminating(&self) -> bool {
        self.deleted.is_some()
    }

    pub fn created(&self) -> Option<Timestamp> {
        self.created.map(ApiTime::timestamp)
    }

    pub fn deleted(&self) -> Option<Timestamp> {
        self.deleted.map(ApiTime::timestamp)
    }

    /// Whether a controller owner reference names the node `name` of `kind` (and, when given,
    /// that node's uid).
    pub fn controlled_by(&self, kind: NodeKind, name: &str, uid: Option<&str>) -> bool {
        self.controllers.iter().any(|owner| {
            &*owner.kind == kind.as_str()
                && &*owner.name == name
                && uid.is_none_or(|uid| owner.uid.is(uid))
        })
    }
}

impl From<&Pod> for PodView {
    fn from(pod: &Pod) -> Self {
        PodView::new(pod, None)
    }
}
