//! The CEL pass over a custom resource: every schema node's `x-kubernetes-validations`,
//! evaluated by crd-compat's evaluator on values that passed their schema, with the old
//! object's value at the same path on an update (ratcheting: a rule failing on an unchanged
//! value is a warning), each failure a cause worded as the API server words it.

use serde_json::Value;

use super::words::{Cause, SERVER_FIELDS, child, property_schema, type_name};

/// The causes and warnings of an object's CEL rules; `structural`: the fields the structural
/// validation already refused (a rule at or above one is not run, as on the API server).
pub(super) fn evaluate(
    schema: &Value,
    object: &Value,
    old: Option<&Value>,
    structural: Vec<String>,
) -> (Vec<Cause>, Vec<String>) {
    let mut rules = Rules {
        structural,
        causes: Vec::new(),
        warnings: Vec::new(),
    };
    rules.check(schema, object, old, "", true);
    (rules.causes, rules.warnings)
}

/// The CEL pass: every schema node's `x-kubernetes-validations`, evaluated by crd-compat on a
/// value that passed its schema (no structural cause at or below it), with the old object's value
/// at the same path on an update.
struct Rules {
    /// Fields of the structural causes already found.
    structural: Vec<String>,
    causes: Vec<Cause>,
    warnings: Vec<String>,
}

impl Rules {
    fn check(
        &mut self,
        schema: &Value,
        value: &Value,
        old: Option<&Value>,
        path: &str,
        root: bool,
    ) {
        if value.is_null() {
            return;
        }
        if crd_compat::validation::has_rules(schema) && self.passed_schema(path) {
            self.evaluate(schema, value, old, path, root);
        }
        match value {
            Value::Object(fields) => {
                for (key, field) in fields {
                    if root && SERVER_FIELDS.contains(&key.as_str()) {
                        continue;
                    }
                    if let Some(field_schema) = property_schema(schema, key) {
                        let old_field = old.and_then(|o| o.get(key));
                        self.check(field_schema, field, old_field, &child(path, key), false);
                    }
                }
            }
            Value::Array(items) => {
                let Some(item_schema) = schema.get("items").filter(|i| i.is_object()) else {
                    return;
                };
                for (index, item) in items.iter().enumerate() {
                    let old_item = old.and_then(|o| correlated_item(schema, item, o));
                    self.check(
                        item_schema,
                        item,
                        old_item,
                        &format!("{path}[{index}]"),
                        false,
                    );
                }
            }
            _ => {}
        }
    }

    /// Whether no structural cause names `path` or a field below it.
    fn passed_schema(&self, path: &str) -> bool {
        !self.structural.iter().any(|field| {
            path.is_empty()
                || field == path
                || field
                    .strip_prefix(path)
                    .is_some_and(|rest| rest.starts_with(['.', '[']))
        })
    }

    fn evaluate(
        &mut self,
        schema: &Value,
        value: &Value,
        old: Option<&Value>,
        path: &str,
        root: bool,
    ) {
        // At the root, CEL sees only the name and generateName of metadata, as on the API server.
        let (value, old) = if root {
            (cel_root(value), old.map(cel_root))
        } else {
            (value.clone(), old.cloned())
        };
        // As the API server: a scalar's value is shown, an object's or an array's is not.
        let shown_value = match schema["type"].as_str().unwrap_or(type_name(&value)) {
            "object" | "array" => None,
            _ => Some(super::shown(&value)),
        };
        for failure in crd_compat::validation::validate(schema, &value, old.as_ref()) {
            let cause = rule_cause(&failure, path, shown_value.as_deref());
            if failure.ratcheted {
                self.warnings.push(cause.describe());
            } else {
                self.causes.push(cause);
            }
        }
    }
}

fn cel_root(object: &Value) -> Value {
    let mut object = object.clone();
    if let Some(metadata) = object.get_mut("metadata").and_then(Value::as_object_mut) {
        metadata.retain(|key, _| key == "name" || key == "generateName");
    }
    object
}

/// The old item a list item correlates with: only in a `x-kubernetes-list-type: map` list, the
/// one with the same keys (atomic lists and sets correlate nothing, as for the API server).
fn correlated_item<'a>(schema: &Value, item: &Value, old: &'a Value) -> Option<&'a Value> {
    if schema["x-kubernetes-list-type"].as_str() != Some("map") {
        return None;
    }
    let keys = schema["x-kubernetes-list-map-keys"].as_array()?;
    old.as_array()?.iter().find(|candidate| {
        keys.iter()
            .filter_map(Value::as_str)
            .all(|key| candidate.get(key) == item.get(key))
    })
}

/// A failing rule as the API server's cause: the node's path plus the rule's `fieldPath`, the
/// reason it names and the rule's message, after the value when it is a scalar (Kubernetes 1.37
/// shows no value for an object or an array; earlier releases showed the type, `"object"`).
fn rule_cause(
    failure: &crd_compat::validation::Failure,
    path: &str,
    shown_value: Option<&str>,
) -> Cause {
    use crd_compat::validation::Reason;
    let below = failure.field_path.trim_start_matches('.');
    let field = if below.is_empty() {
        path.to_owned()
    } else if path.is_empty() || below.starts_with('[') {
        format!("{path}{below}")
    } else {
        format!("{path}.{below}")
    };
    let message = match failure.reason {
        Reason::Invalid => match shown_value {
            Some(value) => format!("Invalid value: {value}: {}", failure.message),
            None => format!("Invalid value: {}", failure.message),
        },
        Reason::Forbidden => format!("Forbidden: {}", failure.message),
        Reason::Required => format!("Required value: {}", failure.message),
        Reason::Duplicate => match shown_value {
            Some(value) => format!("Duplicate value: {value}"),
            None => "Duplicate value".to_owned(),
        },
    };
    Cause {
        reason: failure.reason.as_str(),
        field,
        message,
    }
}
