//! Conversion between the API's versions (DESIGN section 18): the pure functions a conversion
//! webhook answers with, whoever serves it (the operator, kubesim's tests).
//!
//! `v1alpha1` is the hub: the operator's own types are `v1alpha1`'s, and every other version
//! converts to and from it. Conversion works on the objects as JSON, moving each field to its
//! name in the other version and leaving every other key as it was, so that what a client wrote
//! reads back exactly as written at either version (a conversion through typed structs would
//! add defaults and drop the difference between an absent field and an empty one). What one
//! version cannot hold rides in an annotation, as Kubernetes' own conversions do:
//! [`ANNOTATION_V1ALPHA1_CLUSTER_CONFIG`].

mod fields;
mod review;

use serde_json::Value;

pub use review::review;

/// On a node at `v1beta1`: the fields of its `v1alpha1` `spec.clusterConfig` that `v1beta1`
/// does not hold (the tenant's id and name, which `v1beta1` keeps on the ExpressCluster), as a
/// JSON object, given back when the node is read at `v1alpha1`. Reserved: the conversion sets
/// and removes it.
pub const ANNOTATION_V1ALPHA1_CLUSTER_CONFIG: &str = "express.dev/v1alpha1-cluster-config";

/// A version of the `express.dev` group this build serves.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum ApiVersion {
    V1alpha1,
    V1beta1,
}

impl ApiVersion {
    /// Every version this build knows, oldest first.
    pub const ALL: [ApiVersion; 2] = [ApiVersion::V1alpha1, ApiVersion::V1beta1];

    /// The version's name (`v1beta1`).
    pub fn name(self) -> &'static str {
        match self {
            ApiVersion::V1alpha1 => crate::keys::VERSION,
            ApiVersion::V1beta1 => crate::v1beta1::VERSION,
        }
    }

    /// An object's `apiVersion` (`express.dev/v1beta1`).
    pub fn api_version(self) -> String {
        format!("{}/{}", crate::keys::GROUP, self.name())
    }

    /// The version an `apiVersion` names, when it is one of this group's that this build knows.
    pub fn of_api_version(api_version: &str) -> Option<ApiVersion> {
        let (group, version) = api_version.split_once('/')?;
        if group != crate::keys::GROUP {
            return None;
        }
        ApiVersion::ALL.into_iter().find(|v| v.name() == version)
    }
}

/// Why an object could not be converted. Each message names what is wrong for the person who
/// reads it in a failed `kubectl get`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ConversionError {
    #[error(
        "{0:?} is not a version this operator build serves (it knows express.dev/v1alpha1 and express.dev/v1beta1)"
    )]
    UnknownVersion(String),
    #[error("the object is not a JSON object with an apiVersion and a kind")]
    NotAnObject,
    #[error("kind {0:?} is not a kind of express.dev this build converts")]
    UnknownKind(String),
    #[error("{kind} exists at express.dev/v1alpha1 only")]
    KindNotVersioned { kind: String },
    #[error("{path} is not {expected}")]
    Malformed {
        path: String,
        expected: &'static str,
    },
}

/// The kinds with more than one version, and how their specs convert.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Versioned {
    Node,
    Cluster,
}

fn versioned(kind: &str) -> Result<Versioned, ConversionError> {
    match kind {
        "Backend" | "Frontend" => Ok(Versioned::Node),
        "ExpressCluster" => Ok(Versioned::Cluster),
        "OperatorRelease" | "FleetRelease" => Err(ConversionError::KindNotVersioned {
            kind: kind.to_owned(),
        }),
        other => Err(ConversionError::UnknownKind(other.to_owned())),
    }
}

/// `object` (any kind of the group, at any version this build knows) at version `to`. Only the
/// `apiVersion`, the spec and this module's annotations change; an object already at `to` comes
/// back as it was.
pub fn convert(mut object: Value, to: ApiVersion) -> Result<Value, ConversionError> {
    let (from, kind) = {
        let map = object.as_object().ok_or(ConversionError::NotAnObject)?;
        let api_version = map
            .get("apiVersion")
            .and_then(Value::as_str)
            .ok_or(ConversionError::NotAnObject)?;
        let kind = map
            .get("kind")
            .and_then(Value::as_str)
            .ok_or(ConversionError::NotAnObject)?;
        let from = ApiVersion::of_api_version(api_version)
            .ok_or_else(|| ConversionError::UnknownVersion(api_version.to_owned()))?;
        (from, kind.to_owned())
    };
    if from == to {
        return Ok(object);
    }
    let versioned = versioned(&kind)?;
    match (versioned, to) {
        (Versioned::Node, ApiVersion::V1beta1) => fields::node_to_v1beta1(&mut object)?,
        (Versioned::Node, ApiVersion::V1alpha1) => fields::node_to_v1alpha1(&mut object)?,
        (Versioned::Cluster, ApiVersion::V1beta1) => fields::cluster_to_v1beta1(&mut object)?,
        (Versioned::Cluster, ApiVersion::V1alpha1) => fields::cluster_to_v1alpha1(&mut object)?,
    }
    object["apiVersion"] = Value::String(to.api_version());
    Ok(object)
}
