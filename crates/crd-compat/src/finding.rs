//! What a rule finds, before any stored object is looked at: a change, its effect, and the
//! question to put to each stored value (the probe). Rules only describe; `stored.rs` asks the
//! questions and settles the severity.

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::JSONSchemaProps;
use serde_json::Value;

use crate::path::Path;

/// How a change weighs, before stored objects are looked at.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Effect {
    /// Breaking whatever the cluster stores; the probe only names the objects it concerns.
    Breaking,
    /// A warning whatever the cluster stores.
    Warning,
    /// A narrowing: a warning while no stored object violates it, breaking once one does.
    Narrowed,
}

/// A numeric bound of the schema, as the new schema states it.
#[derive(Clone, Debug, PartialEq)]
pub(crate) enum Bound {
    MaxLength(i64),
    MinLength(i64),
    MaxItems(i64),
    MinItems(i64),
    MaxProperties(i64),
    MinProperties(i64),
    Maximum { limit: f64, exclusive: bool },
    Minimum { limit: f64, exclusive: bool },
}

/// The question a change puts to each stored value at its place.
#[derive(Clone, Debug, PartialEq)]
pub(crate) enum Probe {
    /// Any value here is concerned (a removed field).
    Present,
    /// An object here that lacks this key is concerned (a new required field); asked at the
    /// finding's parent path.
    Missing(String),
    /// A value not of this schema type (`integer`, `string`, ...) is concerned.
    Type(String),
    /// A value outside these is concerned (an enum narrowed).
    OneOf(Vec<Value>),
    Bound(Bound),
    /// A string that does not match this regular expression is concerned.
    Pattern(String),
    /// A string not in this format is concerned (known formats only).
    Format(String),
    /// A value for which this CEL rule is false is concerned; the schema types the value
    /// (a `number` field's 5 is the double 5.0, as the API server sees it).
    Cel {
        rule: String,
        message: Option<String>,
        schema: Box<JSONSchemaProps>,
    },
}

/// One change found by one rule.
#[derive(Clone, Debug)]
pub(crate) struct Finding {
    /// The version it is found in, "" for a CRD-wide change.
    pub(crate) version: String,
    pub(crate) path: Path,
    pub(crate) change: String,
    pub(crate) effect: Effect,
    pub(crate) probe: Option<Probe>,
}

impl Finding {
    pub(crate) fn new(path: &Path, change: impl Into<String>, effect: Effect) -> Self {
        Self {
            version: String::new(),
            path: path.clone(),
            change: change.into(),
            effect,
            probe: None,
        }
    }

    pub(crate) fn probe(mut self, probe: Probe) -> Self {
        self.probe = Some(probe);
        self
    }
}
