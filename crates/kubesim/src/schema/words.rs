//! The words every pass over a custom resource shares: a [`Cause`] of a 422 as the API server
//! lists it, the fields the server owns, a field's path, the schema of a property, the JSON type
//! name the server reports.

use serde_json::Value;

/// One reason an object is invalid: the cause of a 422, as `Status.details.causes` lists it.
#[derive(Clone, Debug, PartialEq)]
pub struct Cause {
    /// `FieldValueInvalid`, `FieldValueRequired`, `FieldValueNotSupported`, ...
    pub reason: &'static str,
    /// The field's path, `spec.nodes[0].name`.
    pub field: String,
    /// The message after the path, `Required value`.
    pub message: String,
}

impl Cause {
    /// `field: Invalid value: "value": why`, a `FieldValueInvalid` cause.
    pub fn invalid(field: &str, value: &str, why: &str) -> Cause {
        Cause {
            reason: "FieldValueInvalid",
            field: field.to_owned(),
            message: format!("Invalid value: {value:?}: {why}"),
        }
    }

    /// `spec.up: Invalid value: ...`, the form the API server puts in its message.
    pub fn describe(&self) -> String {
        format!("{}: {}", self.field, self.message)
    }
}

/// The top-level fields the API server owns, never pruned, validated or seen by CEL.
pub(super) const SERVER_FIELDS: [&str; 3] = ["apiVersion", "kind", "metadata"];

/// The path of `key` below `path` (`spec.name`).
pub(super) fn child(path: &str, key: &str) -> String {
    if path.is_empty() {
        key.to_owned()
    } else {
        format!("{path}.{key}")
    }
}

/// The schema for an object's property `key`, or of its additional properties.
pub(super) fn property_schema<'a>(schema: &'a Value, key: &str) -> Option<&'a Value> {
    schema["properties"]
        .get(key)
        .or_else(|| schema.get("additionalProperties").filter(|a| a.is_object()))
}

/// The JSON type name the API server reports for a value.
pub(super) fn type_name(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "boolean",
        Value::Number(number) if is_integer(number) => "integer",
        Value::Number(_) => "number",
        Value::String(_) => "string",
        Value::Array(_) => "array",
        Value::Object(_) => "object",
    }
}

pub(super) fn is_integer(number: &serde_json::Number) -> bool {
    number.is_i64() || number.is_u64() || number.as_f64().is_some_and(|f| f.fract() == 0.0)
}
