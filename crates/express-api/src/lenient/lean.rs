//! Objects decoded from their text parsing only what is kept: what [`Lenient`](super::Lenient)
//! would drop is skipped by the parser without building an object. Each `managedFields`
//! entry's `fieldsV1` above all (a tree of its own; about a third of a pod's text); of a pod,
//! also its spec but the containers' names and images, and its containers' states (what
//! [`PodView`](crate::views::PodView) holds is kept). Reading a DC is mostly decoding it.

use std::any::{Any, TypeId};
use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{
    Container, ContainerStatus, Pod, PodCondition, PodSpec, PodStatus,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{
    ManagedFieldsEntry, ObjectMeta, OwnerReference, Time,
};
use kube::core::object::{HasSpec, HasStatus};
use serde::de::{DeserializeOwned, IgnoredAny};
use serde::{Deserialize, Deserializer};

use super::{LAST_APPLIED, latest_decoded_writes};
use crate::keys::ANNOTATION_EXPRESS_VERSION;
use crate::{Backend, ExpressCluster, FleetRelease, Frontend, OperatorRelease};

/// An object of this API group, field by field: its metadata decoded leanly, its spec and
/// status by their own types, `apiVersion` and `kind` skipped (the type says them). Each part
/// is parsed once, straight into what is kept.
#[derive(Deserialize)]
struct OurParts<S, St> {
    #[serde(rename = "apiVersion")]
    _api_version: Option<IgnoredAny>,
    #[serde(rename = "kind")]
    _kind: Option<IgnoredAny>,
    metadata: MetaFields,
    spec: S,
    status: Option<St>,
}

/// A kind of this API group, built from its parts.
pub(super) trait OurKind: HasSpec + HasStatus + Sized + 'static
where
    Self::Spec: DeserializeOwned,
    Self::Status: DeserializeOwned,
{
    fn from_parts(metadata: ObjectMeta, spec: Self::Spec, status: Option<Self::Status>) -> Self;

    /// The object decoded from its parts, as `K` (which the caller has checked it is).
    fn decode_as<'de, K: 'static, D: Deserializer<'de>>(deserializer: D) -> Result<K, D::Error> {
        let parts = OurParts::<Self::Spec, Self::Status>::deserialize(deserializer)?;
        same_type(Self::from_parts(
            parts.metadata.into_meta(true),
            parts.spec,
            parts.status,
        ))
    }
}

/// `object` as `K`, which the caller has checked it is (by its `TypeId`).
pub(super) fn same_type<K: 'static, T: 'static, E: serde::de::Error>(object: T) -> Result<K, E> {
    let object: Box<dyn Any> = Box::new(object);
    object
        .downcast::<K>()
        .map(|object| *object)
        .map_err(|_| E::custom("an object decoded as another kind"))
}

/// This API group's kinds (the one list): each built from its parts, and [`our_kind`], which
/// decodes `K` through [`OurKind`] when it is one of them and gives the deserializer back
/// otherwise.
macro_rules! our_kinds {
    ($($kind:ty),+) => {
        $(impl OurKind for $kind {
            fn from_parts(
                metadata: ObjectMeta,
                spec: Self::Spec,
                status: Option<Self::Status>,
            ) -> Self {
                Self { metadata, spec, status }
            }
        })+

        pub(super) fn our_kind<'de, K: 'static, D: Deserializer<'de>>(
            deserializer: D,
        ) -> Result<Result<K, D::Error>, D> {
            let kind = TypeId::of::<K>();
            $(if kind == TypeId::of::<$kind>() {
                return Ok(<$kind>::decode_as(deserializer));
            })+
            Err(deserializer)
        }
    };
}

our_kinds!(
    ExpressCluster,
    Backend,
    Frontend,
    OperatorRelease,
    FleetRelease
);

/// The fields of a pod that are kept.
#[derive(Deserialize)]
pub(super) struct PodFields {
    metadata: MetaFields,
    spec: Option<SpecFields>,
    status: Option<StatusFields>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct MetaFields {
    managed_fields: Option<Vec<ManagedFields>>,
    name: Option<String>,
    generate_name: Option<String>,
    namespace: Option<String>,
    uid: Option<String>,
    resource_version: Option<String>,
    generation: Option<i64>,
    labels: Option<BTreeMap<String, String>>,
    annotations: Option<BTreeMap<String, String>>,
    owner_references: Option<Vec<OwnerReference>>,
    finalizers: Option<Vec<String>>,
    creation_timestamp: Option<Time>,
    deletion_timestamp: Option<Time>,
    deletion_grace_period_seconds: Option<i64>,
}

/// A `managedFields` entry without its `fieldsV1`.
#[derive(Deserialize)]
struct ManagedFields {
    manager: Option<String>,
    operation: Option<String>,
    subresource: Option<String>,
    time: Option<Time>,
}

impl MetaFields {
    /// The metadata kept: without the last-applied annotation, and the two latest writes of
    /// `managedFields` when `with_writes` (none otherwise).
    fn into_meta(self, with_writes: bool) -> ObjectMeta {
        let annotations = self.annotations.map(|mut annotations| {
            annotations.remove(LAST_APPLIED);
            annotations
        });
        let managed_fields = self.managed_fields.filter(|_| with_writes).map(|entries| {
            let entries: Vec<ManagedFieldsEntry> = entries
                .into_iter()
                .map(|entry| ManagedFieldsEntry {
                    manager: entry.manager,
                    operation: entry.operation,
                    subresource: entry.subresource,
                    time: entry.time,
                    ..ManagedFieldsEntry::default()
                })
                .collect();
            latest_decoded_writes(&entries)
        });
        ObjectMeta {
            name: self.name,
            generate_name: self.generate_name,
            namespace: self.namespace,
            uid: self.uid,
            resource_version: self.resource_version,
            generation: self.generation,
            labels: self.labels,
            annotations,
            owner_references: self.owner_references,
            finalizers: self.finalizers,
            creation_timestamp: self.creation_timestamp,
            deletion_timestamp: self.deletion_timestamp,
            deletion_grace_period_seconds: self.deletion_grace_period_seconds,
            managed_fields,
            ..ObjectMeta::default()
        }
    }
}

#[derive(Deserialize)]
struct SpecFields {
    containers: Vec<ContainerFields>,
}

#[derive(Deserialize)]
struct ContainerFields {
    name: String,
    image: Option<String>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct StatusFields {
    phase: Option<String>,
    conditions: Option<Vec<ConditionFields>>,
    container_statuses: Option<Vec<ContainerStatusFields>>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct ConditionFields {
    #[serde(rename = "type")]
    type_: String,
    status: String,
    last_transition_time: Option<Time>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct ContainerStatusFields {
    name: String,
    #[serde(default)]
    ready: bool,
    #[serde(default)]
    restart_count: i32,
}

impl From<PodFields> for Pod {
    /// The pod with the fields kept, as `Lenient` keeps a pod: no spec when its
    /// `express.dev/express-version` annotation names its version (the image's tag is not read
    /// then), no `kubectl.kubernetes.io/last-applied-configuration` annotation.
    fn from(fields: PodFields) -> Pod {
        let PodFields {
            metadata,
            spec,
            status,
        } = fields;
        let metadata = metadata.into_meta(false);
        let annotated = metadata
            .annotations
            .as_ref()
            .is_some_and(|a| a.contains_key(ANNOTATION_EXPRESS_VERSION));
        Pod {
            metadata,
            spec: spec.filter(|_| !annotated).map(|spec| PodSpec {
                containers: spec
                    .containers
                    .into_iter()
                    .map(|c| Container {
                        name: c.name,
                        image: c.image,
                        ..Container::default()
                    })
                    .collect(),
                ..PodSpec::default()
            }),
            status: status.map(|status| PodStatus {
                phase: status.phase,
                conditions: status.conditions.map(|conditions| {
                    conditions
                        .into_iter()
                        .map(|c| PodCondition {
                            type_: c.type_,
                            status: c.status,
                            last_transition_time: c.last_transition_time,
                            ..PodCondition::default()
                        })
                        .collect()
                }),
                container_statuses: status.container_statuses.map(|statuses| {
                    statuses
                        .into_iter()
                        .map(|c| ContainerStatus {
                            name: c.name,
                            ready: c.ready,
                            restart_count: c.restart_count,
                            ..ContainerStatus::default()
                        })
                        .collect()
                }),
                ..PodStatus::default()
            }),
        }
    }
}
