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

/// The first rule of a version's schema that the API server would not compile because it
/// reads a field of its object that CEL does not know: one the object does not declare, or
/// declares without a type (only typed properties become fields of the object's CEL type). In
/// the API server's words, with the rule's place; none when every `self.FIELD` is known. Only
/// the field right after `self.` of an object with `properties` is checked (a map's keys are
/// any; the root's `apiVersion`, `kind` and `metadata` are always there).
pub(crate) fn undefined_field(schema: &Value) -> Option<String> {
    undefined_field_at(schema, "spec.validation.openAPIV3Schema", true)
}

fn undefined_field_at(node: &Value, path: &str, root: bool) -> Option<String> {
    let properties = node.get("properties").and_then(Value::as_object);
    if let (Some(properties), Some(rules)) = (
        properties.filter(|_| node.get("additionalProperties").is_none()),
        node.get("x-kubernetes-validations")
            .and_then(Value::as_array),
    ) {
        for (index, rule) in rules.iter().enumerate() {
            let text = rule["rule"].as_str().unwrap_or_default();
            for field in fields_of_self(text) {
                let always_there = root && matches!(field, "apiVersion" | "kind" | "metadata");
                let typed = properties.get(field).is_some_and(|p| {
                    p.get("type").is_some() || p["x-kubernetes-int-or-string"] == true
                });
                if !always_there && !typed {
                    return Some(format!(
                        "{path}.x-kubernetes-validations[{index}].rule: Invalid value: {text:?}: compilation failed: ERROR: undefined field '{field}'"
                    ));
                }
            }
        }
    }
    for (name, child) in properties.into_iter().flatten() {
        if let Some(problem) =
            undefined_field_at(child, &format!("{path}.properties[{name}]"), false)
        {
            return Some(problem);
        }
    }
    node.get("items")
        .and_then(|items| undefined_field_at(items, &format!("{path}.items"), false))
}

/// The field names a rule reads right after `self.` (`has(self.x)`, `self.x == 1`).
fn fields_of_self(rule: &str) -> Vec<&str> {
    let mut fields = Vec::new();
    let mut rest = rule;
    while let Some(at) = rest.find("self.") {
        let before = rest[..at].chars().next_back();
        let after = &rest[at + "self.".len()..];
        let end = after
            .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
            .unwrap_or(after.len());
        let starts_a_name = after.starts_with(|c: char| c.is_ascii_alphabetic() || c == '_');
        // `oldSelf.x` and `myself.x` are not `self`.
        if starts_a_name && !before.is_some_and(|c| c.is_ascii_alphanumeric() || c == '_') {
            fields.push(&after[..end]);
        }
        rest = &after[end..];
    }
    fields
}

#[cfg(test)]
mod undefined_field_tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_rule_reading_an_untyped_or_undeclared_field_does_not_compile() {
        let with = |declared: Value, rule: &str| {
            json!({"type": "object", "properties": {"spec": {
                "type": "object", "properties": declared,
                "x-kubernetes-validations": [{"rule": rule}]}}})
        };
        let typed = json!({"a": {"type": "string"}});
        assert_eq!(undefined_field(&with(typed.clone(), "!has(self.a)")), None);
        assert_eq!(
            undefined_field(&with(typed.clone(), "oldSelf.b == self.a")),
            None
        );
        let untyped = json!({"a": {"x-kubernetes-preserve-unknown-fields": true}});
        let problem = undefined_field(&with(untyped, "!has(self.a)")).expect("refused");
        assert!(
            problem.starts_with(
                "spec.validation.openAPIV3Schema.properties[spec].x-kubernetes-validations[0].rule"
            ) && problem.ends_with("undefined field 'a'"),
            "{problem}"
        );
        assert!(undefined_field(&with(typed, "self.b == 1")).is_some());
        // A map's keys are any; the root always has its metadata.
        let map = json!({"type": "object", "additionalProperties": {"type": "string"},
                         "x-kubernetes-validations": [{"rule": "has(self.any)"}]});
        assert_eq!(
            undefined_field(&json!({"type": "object", "properties": {"m": map}})),
            None
        );
        let root = json!({"type": "object", "properties": {"spec": {"type": "object"}},
                          "x-kubernetes-validations": [{"rule": "self.metadata.name.size() < 10"}]});
        assert_eq!(undefined_field(&root), None);
        // In a list's items too.
        let items = json!({"type": "object", "properties": {"l": {"type": "array", "items": {
            "type": "object", "properties": {"n": {"type": "string"}},
            "x-kubernetes-validations": [{"rule": "has(self.m)"}]}}}});
        assert!(
            undefined_field(&items)
                .is_some_and(|p| p.contains(".items.x-kubernetes-validations[0]"))
        );
    }
}
