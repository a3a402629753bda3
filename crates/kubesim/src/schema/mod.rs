//! The API server's schema rules for custom resources: every write is pruned, defaulted and
//! validated against the CRD version's `openAPIV3Schema`, in that order, as the API server does.
//!
//! - **Pruning** drops fields the structural schema does not declare (unless a level says
//!   `x-kubernetes-preserve-unknown-fields`), and `null`s of fields that are not `nullable`.
//!   The dropped paths are reported, so the request's `fieldValidation` decides whether they are
//!   an error (`Strict`), a `Warning` header (`Warn`, the server's default) or silent (`Ignore`).
//! - **Defaulting** fills absent properties of objects that are present from `default`.
//! - **Validation** checks `type`, `nullable`, `required`, `enum`, `minimum`/`maximum` (and
//!   the exclusive forms), `multipleOf`, `minLength`/`maxLength`, `pattern`,
//!   `minItems`/`maxItems`, `minProperties`/`maxProperties`, `x-kubernetes-int-or-string`,
//!   `items` and `additionalProperties`; every failure becomes one cause naming its field path,
//!   worded as the API server words it.
//! - **CEL rules** (`x-kubernetes-validations`) of every schema node are evaluated by
//!   crd-compat's evaluator (`crd_compat::validation`, the one the compatibility check uses) on
//!   values that passed their schema (no structural cause at or below the node): `self` typed
//!   by the node's schema, `oldSelf` on an update where the old object has a value at that path
//!   (transition rules run only then; list items correlate only in `x-kubernetes-list-type: map`
//!   lists). A failing rule is a cause at the node's path plus its `fieldPath`, with its reason
//!   and message (`spec: Invalid value: fromRing and toRing must differ`). Ratcheting,
//!   as Kubernetes 1.33: a rule that fails on a value an update leaves unchanged is a `Warning`,
//!   not a refusal. A rule the evaluator cannot judge (Kubernetes' own CEL libraries, a typing
//!   cel-rust does not share, `optionalOldSelf`) is skipped, never a refusal.
//!
//! Not checked (recorded in `docs/kubesim.md`): `format`, `allOf`/`anyOf`/`oneOf`/`not`, and
//! CEL's cost limits.

mod rules;

pub(crate) use rules::undefined_field;
mod words;

pub use words::Cause;

use serde_json::{Map, Value};
use words::{SERVER_FIELDS, child, is_integer, property_schema, type_name};

/// What admitting an object found; the object itself is pruned and defaulted in place.
#[derive(Debug, Default, PartialEq)]
pub struct Admission {
    /// Paths of fields the schema does not declare, dropped (`spec.foo`).
    pub unknown_fields: Vec<String>,
    pub causes: Vec<Cause>,
    /// CEL rules that fail on a value the update leaves unchanged (ratcheting): the API server
    /// sends each as a `Warning` instead of refusing, worded as the cause would be.
    pub warnings: Vec<String>,
}

/// Prunes, defaults and validates `object` (a whole custom resource) against `schema`, then
/// evaluates its CEL rules. `old`: on an update, the stored object before the change (`None` on
/// a create). `apiVersion`, `kind` and `metadata` are the API server's, never pruned or
/// validated here.
pub fn admit(schema: &Value, object: &mut Value, old: Option<&Value>) -> Admission {
    let mut admission = Admission::default();
    prune(schema, object, "", true, &mut admission.unknown_fields);
    apply_defaults(schema, object);
    validate(schema, object, "", true, &mut admission.causes);
    let structural = admission.causes.iter().map(|c| c.field.clone()).collect();
    let (mut causes, warnings) = rules::evaluate(schema, object, old, structural);
    admission.causes.append(&mut causes);
    admission.warnings = warnings;
    // Field order, not map order, so messages are the same whatever order a client wrote.
    admission.unknown_fields.sort();
    admission.causes.sort_by(|a, b| a.field.cmp(&b.field));
    admission
}

fn flag(schema: &Value, name: &str) -> bool {
    schema[name].as_bool() == Some(true)
}

fn prune(schema: &Value, value: &mut Value, path: &str, root: bool, unknown: &mut Vec<String>) {
    match value {
        Value::Object(fields) => {
            let preserve = flag(schema, "x-kubernetes-preserve-unknown-fields")
                || schema["additionalProperties"] == Value::Bool(true);
            let mut dropped = Vec::new();
            for (key, field) in fields.iter_mut() {
                if root && SERVER_FIELDS.contains(&key.as_str()) {
                    continue;
                }
                match property_schema(schema, key) {
                    Some(field_schema) => {
                        if field.is_null() && !flag(field_schema, "nullable") {
                            dropped.push((key.clone(), false));
                        } else {
                            prune(field_schema, field, &child(path, key), false, unknown);
                        }
                    }
                    None if preserve => {}
                    None => dropped.push((key.clone(), true)),
                }
            }
            for (key, is_unknown) in dropped {
                fields.remove(&key);
                if is_unknown {
                    unknown.push(child(path, &key));
                }
            }
        }
        Value::Array(items) => {
            if let Some(item_schema) = schema.get("items").filter(|i| i.is_object()) {
                for (index, item) in items.iter_mut().enumerate() {
                    prune(
                        item_schema,
                        item,
                        &format!("{path}[{index}]"),
                        false,
                        unknown,
                    );
                }
            }
        }
        _ => {}
    }
}

fn apply_defaults(schema: &Value, value: &mut Value) {
    match value {
        Value::Object(fields) => {
            if let Some(properties) = schema["properties"].as_object() {
                for (key, field_schema) in properties {
                    if let Some(default) = field_schema.get("default")
                        && !fields.contains_key(key)
                    {
                        fields.insert(key.clone(), default.clone());
                    }
                }
            }
            for (key, field) in fields.iter_mut() {
                if let Some(field_schema) = property_schema(schema, key) {
                    apply_defaults(field_schema, field);
                }
            }
        }
        Value::Array(items) => {
            if let Some(item_schema) = schema.get("items").filter(|i| i.is_object()) {
                for item in items {
                    apply_defaults(item_schema, item);
                }
            }
        }
        _ => {}
    }
}

fn type_matches(expected: &str, value: &Value) -> bool {
    match (expected, value) {
        ("string", Value::String(_))
        | ("boolean", Value::Bool(_))
        | ("number", Value::Number(_))
        | ("array", Value::Array(_))
        | ("object", Value::Object(_)) => true,
        ("integer", Value::Number(number)) => is_integer(number),
        _ => false,
    }
}

/// How the API server shows a value after "Invalid value:": strings quoted, others as JSON.
fn shown(value: &Value) -> String {
    match value {
        Value::String(_) | Value::Number(_) | Value::Bool(_) | Value::Null => value.to_string(),
        other => format!("\"{}\"", type_name(other)),
    }
}

/// A schema bound as Go prints it: `0`, not `0.0`.
fn number_text(bound: &Value) -> String {
    match bound.as_f64() {
        Some(value) if value.fract() == 0.0 && value.abs() < 1e15 => format!("{}", value as i64),
        _ => bound.to_string(),
    }
}

fn invalid(causes: &mut Vec<Cause>, path: &str, value: &Value, why: String) {
    causes.push(Cause {
        reason: "FieldValueInvalid",
        field: path.to_owned(),
        message: format!("Invalid value: {}: {why}", shown(value)),
    });
}

fn validate(schema: &Value, value: &Value, path: &str, root: bool, causes: &mut Vec<Cause>) {
    if value.is_null() && flag(schema, "nullable") {
        return;
    }
    if flag(schema, "x-kubernetes-int-or-string") {
        let fits =
            matches!(value, Value::String(_)) || matches!(value, Value::Number(n) if is_integer(n));
        if !fits {
            causes.push(type_cause(path, value, "integer,string"));
            return;
        }
    } else if let Some(expected) = schema["type"].as_str()
        && !type_matches(expected, value)
    {
        causes.push(type_cause(path, value, expected));
        return;
    }
    if let Some(allowed) = schema["enum"].as_array()
        && !allowed.contains(value)
    {
        let listed: Vec<String> = allowed.iter().map(Value::to_string).collect();
        causes.push(Cause {
            reason: "FieldValueNotSupported",
            field: path.to_owned(),
            message: format!(
                "Unsupported value: {}: supported values: {}",
                value,
                listed.join(", ")
            ),
        });
    }
    match value {
        Value::Number(number) => validate_number(schema, value, number, path, causes),
        Value::String(text) => validate_string(schema, value, text, path, causes),
        Value::Array(items) => {
            let count = items.len();
            if let Some(min) = schema["minItems"].as_u64()
                && (count as u64) < min
            {
                invalid(
                    causes,
                    path,
                    &Value::from(count),
                    format!("{path} in body should have at least {min} items"),
                );
            }
            if let Some(max) = schema["maxItems"].as_u64()
                && (count as u64) > max
            {
                causes.push(Cause {
                    reason: "FieldValueTooMany",
                    field: path.to_owned(),
                    message: format!("Too many: {count}: must have at most {max} items"),
                });
            }
            if let Some(item_schema) = schema.get("items").filter(|i| i.is_object()) {
                for (index, item) in items.iter().enumerate() {
                    validate(
                        item_schema,
                        item,
                        &format!("{path}[{index}]"),
                        false,
                        causes,
                    );
                }
            }
        }
        Value::Object(fields) => validate_object(schema, value, fields, path, root, causes),
        Value::Bool(_) | Value::Null => {}
    }
}

fn type_cause(path: &str, value: &Value, expected: &str) -> Cause {
    let actual = type_name(value);
    Cause {
        reason: "FieldValueTypeInvalid",
        field: path.to_owned(),
        message: format!(
            "Invalid value: \"{actual}\": {path} in body must be of type {expected}: \"{actual}\""
        ),
    }
}

fn validate_number(
    schema: &Value,
    value: &Value,
    number: &serde_json::Number,
    path: &str,
    causes: &mut Vec<Cause>,
) {
    let Some(actual) = number.as_f64() else {
        return;
    };
    let exclusive_min = flag(schema, "exclusiveMinimum");
    if let Some(min) = schema["minimum"].as_f64() {
        if exclusive_min && actual <= min {
            invalid(
                causes,
                path,
                value,
                format!(
                    "{path} in body should be greater than {}",
                    schema["minimum"]
                ),
            );
        } else if actual < min {
            invalid(
                causes,
                path,
                value,
                format!(
                    "{path} in body should be greater than or equal to {}",
                    schema["minimum"]
                ),
            );
        }
    }
    let exclusive_max = flag(schema, "exclusiveMaximum");
    if let Some(max) = schema["maximum"].as_f64() {
        if exclusive_max && actual >= max {
            invalid(
                causes,
                path,
                value,
                format!(
                    "{path} in body should be less than {}",
                    number_text(&schema["maximum"])
                ),
            );
        } else if actual > max {
            invalid(
                causes,
                path,
                value,
                format!(
                    "{path} in body should be less than or equal to {}",
                    schema["maximum"]
                ),
            );
        }
    }
    if let Some(factor) = schema["multipleOf"].as_f64().filter(|f| *f > 0.0)
        && (actual / factor).fract() != 0.0
    {
        invalid(
            causes,
            path,
            value,
            format!(
                "{path} in body should be a multiple of {}",
                schema["multipleOf"]
            ),
        );
    }
}

fn validate_string(schema: &Value, value: &Value, text: &str, path: &str, causes: &mut Vec<Cause>) {
    let length = text.chars().count() as u64;
    if let Some(min) = schema["minLength"].as_u64()
        && length < min
    {
        invalid(
            causes,
            path,
            value,
            format!("{path} in body should be at least {min} chars long"),
        );
    }
    if let Some(max) = schema["maxLength"].as_u64()
        && length > max
    {
        causes.push(Cause {
            reason: "FieldValueTooLong",
            field: path.to_owned(),
            message: format!("Too long: may not be more than {max} bytes"),
        });
    }
    if let Some(pattern) = schema["pattern"].as_str() {
        match regex::Regex::new(pattern) {
            Ok(regex) if !regex.is_match(text) => {
                invalid(
                    causes,
                    path,
                    value,
                    format!("{path} in body should match '{pattern}'"),
                );
            }
            Ok(_) => {}
            // The API server refuses such a CRD; kubesim serves it, so say why it cannot check.
            Err(err) => invalid(
                causes,
                path,
                value,
                format!("the schema's pattern '{pattern}' does not compile: {err}"),
            ),
        }
    }
}

fn validate_object(
    schema: &Value,
    value: &Value,
    fields: &Map<String, Value>,
    path: &str,
    root: bool,
    causes: &mut Vec<Cause>,
) {
    if let Some(required) = schema["required"].as_array() {
        for name in required.iter().filter_map(Value::as_str) {
            if !fields.contains_key(name) {
                causes.push(Cause {
                    reason: "FieldValueRequired",
                    field: child(path, name),
                    message: "Required value".to_owned(),
                });
            }
        }
    }
    let count = fields.len() as u64;
    if let Some(min) = schema["minProperties"].as_u64()
        && count < min
    {
        invalid(
            causes,
            path,
            value,
            format!("{path} in body should have at least {min} properties"),
        );
    }
    if let Some(max) = schema["maxProperties"].as_u64()
        && count > max
    {
        invalid(
            causes,
            path,
            value,
            format!("{path} in body should have at most {max} properties"),
        );
    }
    for (key, field) in fields {
        if root && SERVER_FIELDS.contains(&key.as_str()) {
            continue;
        }
        if let Some(field_schema) = property_schema(schema, key) {
            validate(field_schema, field, &child(path, key), false, causes);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn schema() -> Value {
        json!({
            "type": "object",
            "properties": {
                "spec": {
                    "type": "object",
                    "required": ["name"],
                    "properties": {
                        "name": {"type": "string", "minLength": 1, "maxLength": 8,
                                 "pattern": "^[a-z]+$"},
                        "up": {"type": "boolean", "default": true},
                        "replicas": {"type": "integer", "minimum": 0, "maximum": 5},
                        "mode": {"type": "string", "enum": ["Fast", "Safe"]},
                        "note": {"type": "string", "nullable": true},
                        "port": {"x-kubernetes-int-or-string": true},
                        "tags": {"type": "array", "maxItems": 2, "items": {"type": "string"}},
                        "labels": {"type": "object", "additionalProperties": {"type": "string"}},
                        "template": {"type": "object", "x-kubernetes-preserve-unknown-fields": true},
                        "limits": {"type": "object", "properties": {
                            "cpu": {"type": "string", "default": "1"}}},
                    },
                },
                "status": {"type": "object", "properties": {"phase": {"type": "string"}}},
            },
        })
    }

    fn admitted(mut object: Value) -> (Value, Admission) {
        let admission = admit(&schema(), &mut object, None);
        (object, admission)
    }

    #[test]
    fn a_valid_object_is_defaulted_and_keeps_what_the_schema_preserves() {
        let (object, admission) = admitted(json!({
            "apiVersion": "x/v1", "kind": "K", "metadata": {"name": "a", "anything": 1},
            "spec": {"name": "abc", "port": "http", "template": {"free": {"form": true}},
                     "labels": {"a": "b"}, "limits": {}, "note": null},
        }));
        assert_eq!(admission, Admission::default());
        assert_eq!(object["spec"]["up"], true);
        assert_eq!(object["spec"]["limits"]["cpu"], "1");
        assert_eq!(object["spec"]["template"]["free"]["form"], true);
        assert_eq!(
            object["spec"]["note"],
            Value::Null,
            "nullable keeps its null"
        );
        assert_eq!(
            object["metadata"]["anything"], 1,
            "metadata is not the schema's"
        );
        assert!(
            object.get("status").is_none(),
            "absent objects are not created by defaults"
        );
    }

    #[test]
    fn unknown_fields_are_pruned_and_reported_with_their_paths() {
        let (object, admission) = admitted(json!({
            "spec": {"name": "abc", "typo": 1, "limits": {"cpu": "2", "gpu": 1},
                     "replicas": null},
            "extra": true,
        }));
        assert_eq!(
            admission.unknown_fields,
            ["extra", "spec.limits.gpu", "spec.typo"]
        );
        assert!(admission.causes.is_empty(), "{:?}", admission.causes);
        assert_eq!(
            object,
            json!({"spec": {"name": "abc", "up": true, "limits": {"cpu": "2"}}})
        );
    }

    #[test]
    fn every_rule_is_worded_as_the_api_server_words_it() {
        let (_, admission) = admitted(json!({
            "spec": {"up": "yes", "replicas": 9, "mode": "Slow", "name": "ABCDEFGHIJ",
                     "port": true, "tags": ["a", "b", "c"], "labels": {"a": 1}},
        }));
        let described: Vec<String> = admission.causes.iter().map(Cause::describe).collect();
        assert_eq!(
            described,
            [
                "spec.labels.a: Invalid value: \"integer\": spec.labels.a in body must be of type string: \"integer\"",
                "spec.mode: Unsupported value: \"Slow\": supported values: \"Fast\", \"Safe\"",
                "spec.name: Too long: may not be more than 8 bytes",
                "spec.name: Invalid value: \"ABCDEFGHIJ\": spec.name in body should match '^[a-z]+$'",
                "spec.port: Invalid value: \"boolean\": spec.port in body must be of type integer,string: \"boolean\"",
                "spec.replicas: Invalid value: 9: spec.replicas in body should be less than or equal to 5",
                "spec.tags: Too many: 3: must have at most 2 items",
                "spec.up: Invalid value: \"string\": spec.up in body must be of type boolean: \"string\"",
            ]
        );
        let (_, admission) = admitted(json!({"spec": {"replicas": 1.5, "name": ""}}));
        let described: Vec<String> = admission.causes.iter().map(Cause::describe).collect();
        assert_eq!(
            described,
            [
                "spec.name: Invalid value: \"\": spec.name in body should be at least 1 chars long",
                "spec.name: Invalid value: \"\": spec.name in body should match '^[a-z]+$'",
                "spec.replicas: Invalid value: \"number\": spec.replicas in body must be of type integer: \"number\"",
            ]
        );
        let (_, admission) = admitted(json!({"spec": {}}));
        assert_eq!(
            admission.causes,
            [Cause {
                reason: "FieldValueRequired",
                field: "spec.name".into(),
                message: "Required value".into()
            }]
        );
    }

    /// An OperatorRelease-like schema with CEL rules at the spec, at list items and at a leaf.
    fn release_schema() -> Value {
        json!({"type": "object", "properties": {
            "spec": {"type": "object",
                "properties": {
                    "fromRing": {"type": "string"}, "toRing": {"type": "string"},
                    "replicas": {"type": "integer", "minimum": 0},
                    "waves": {"type": "array", "items": {"type": "object",
                        "properties": {"tenants": {"type": "integer"}, "percent": {"type": "integer"}},
                        "x-kubernetes-validations": [{"rule": "has(self.tenants) != has(self.percent)",
                            "message": "a wave gives exactly one of tenants and percent"}]}},
                    "owner": {"type": "string", "x-kubernetes-validations": [
                        {"rule": "self == oldSelf", "message": "owner is immutable"}]},
                    "url": {"type": "string", "x-kubernetes-validations": [{"rule": "isURL(self)"}]},
                },
                "x-kubernetes-validations": [
                    {"rule": "self.fromRing != self.toRing", "message": "fromRing and toRing must differ"},
                    {"rule": "self.toRing != 'attic'"},
                    {"rule": "!has(self.replicas) || self.replicas < 10", "fieldPath": ".replicas",
                     "reason": "FieldValueForbidden",
                     "messageExpression": "'replicas ' + string(self.replicas) + ' is too many'"},
                ]},
            "status": {"type": "object", "properties": {"phase": {"type": "string"}}},
        }})
    }

    fn release(spec: Value) -> Value {
        json!({"apiVersion": "express.dev/v1alpha1", "kind": "OperatorRelease",
               "metadata": {"name": "r"}, "spec": spec})
    }

    fn described(causes: &[Cause]) -> Vec<String> {
        causes.iter().map(Cause::describe).collect()
    }

    #[test]
    fn cel_rules_pass_or_refuse_with_their_message_field_and_reason() {
        let schema = release_schema();
        let mut valid = release(json!({"fromRing": "a", "toRing": "b", "replicas": 3,
            "waves": [{"tenants": 1}, {"percent": 100}], "url": "not checked here"}));
        assert_eq!(admit(&schema, &mut valid, None), Admission::default());

        let mut invalid = release(
            json!({"fromRing": "attic", "toRing": "attic", "replicas": 12,
            "waves": [{"tenants": 1}, {"tenants": 2, "percent": 100}]}),
        );
        let admission = admit(&schema, &mut invalid, None);
        assert_eq!(
            described(&admission.causes),
            [
                "spec: Invalid value: fromRing and toRing must differ",
                "spec: Invalid value: failed rule: self.toRing != 'attic'",
                "spec.replicas: Forbidden: replicas 12 is too many",
                "spec.waves[1]: Invalid value: a wave gives exactly one of tenants and percent",
            ]
        );
        let reasons: Vec<&str> = admission.causes.iter().map(|c| c.reason).collect();
        assert_eq!(
            reasons,
            [
                "FieldValueInvalid",
                "FieldValueInvalid",
                "FieldValueForbidden",
                "FieldValueInvalid"
            ]
        );
    }

    #[test]
    fn cel_rules_run_only_on_values_that_passed_the_schema() {
        let mut object = release(json!({"fromRing": "a", "toRing": "a", "replicas": -1}));
        let admission = admit(&release_schema(), &mut object, None);
        assert_eq!(
            described(&admission.causes),
            [
                "spec.replicas: Invalid value: -1: spec.replicas in body should be greater than or equal to 0"
            ]
        );
    }

    #[test]
    fn transition_rules_judge_updates_of_values_the_old_object_has() {
        let schema = release_schema();
        let spec = |owner: Option<&str>| {
            let mut spec = json!({"fromRing": "a", "toRing": "b"});
            if let Some(owner) = owner {
                spec["owner"] = json!(owner);
            }
            release(spec)
        };
        let old = spec(Some("ann"));
        assert!(
            admit(&schema, &mut spec(Some("ann")), None)
                .causes
                .is_empty()
        );
        assert!(
            admit(&schema, &mut spec(Some("ann")), Some(&old))
                .causes
                .is_empty()
        );
        assert!(
            admit(&schema, &mut spec(Some("bob")), Some(&spec(None)))
                .causes
                .is_empty()
        );
        let changed = admit(&schema, &mut spec(Some("bob")), Some(&old));
        assert_eq!(
            described(&changed.causes),
            ["spec.owner: Invalid value: \"bob\": owner is immutable"]
        );
    }

    #[test]
    fn an_update_leaving_an_invalid_value_unchanged_ratchets() {
        let schema = release_schema();
        let old = release(json!({"fromRing": "a", "toRing": "a"}));
        let mut status_only = old.clone();
        status_only["status"] = json!({"phase": "Moving"});
        let admission = admit(&schema, &mut status_only, Some(&old));
        assert!(admission.causes.is_empty(), "{:?}", admission.causes);
        assert_eq!(
            admission.warnings,
            ["spec: Invalid value: fromRing and toRing must differ"]
        );
        let mut other_invalid = release(json!({"fromRing": "b", "toRing": "b"}));
        let admission = admit(&schema, &mut other_invalid, Some(&old));
        assert_eq!(
            described(&admission.causes),
            ["spec: Invalid value: fromRing and toRing must differ"]
        );
        // The same invalid value on a create is refused: nothing to ratchet against.
        assert_eq!(admit(&schema, &mut old.clone(), None).causes.len(), 1);
    }

    fn frontend_schema() -> &'static Value {
        static SCHEMA: std::sync::OnceLock<Value> = std::sync::OnceLock::new();
        SCHEMA.get_or_init(|| {
            let crd = serde_json::to_value(express_api::crd::all().remove(2)).unwrap_or_default();
            crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"].clone()
        })
    }

    fn any_json() -> impl proptest::strategy::Strategy<Value = Value> {
        use proptest::prelude::*;
        let keys = proptest::sample::select(vec![
            "spec",
            "status",
            "up",
            "clusterConfig",
            "clusterName",
            "deploymentDependencies",
            "provisioningPrerequisites",
            "expressNode",
            "kind",
            "phase",
            "tpyo",
            "podTemplate",
        ]);
        let leaf = prop_oneof![
            Just(Value::Null),
            any::<bool>().prop_map(Value::Bool),
            any::<i64>().prop_map(Value::from),
            any::<f64>().prop_map(Value::from),
            "[a-zA-Z]{0,6}".prop_map(Value::String),
        ];
        leaf.prop_recursive(5, 64, 6, move |inner| {
            prop_oneof![
                proptest::collection::vec(inner.clone(), 0..4).prop_map(Value::Array),
                proptest::collection::btree_map(keys.clone(), inner, 0..5).prop_map(|map| {
                    Value::Object(map.into_iter().map(|(k, v)| (k.to_owned(), v)).collect())
                }),
            ]
        })
    }

    proptest::proptest! {
        /// Any JSON against the real Frontend schema: no panic, and admission is idempotent:
        /// what was pruned and defaulted once has nothing left to prune or default.
        #[test]
        fn admission_never_panics_and_is_idempotent(object in any_json()) {
            let schema = frontend_schema();
            proptest::prop_assume!(schema["properties"]["spec"].is_object());
            let mut once = object;
            let first = admit(schema, &mut once, None);
            let mut twice = once.clone();
            let second = admit(schema, &mut twice, None);
            proptest::prop_assert!(second.unknown_fields.is_empty(), "{:?}", second.unknown_fields);
            proptest::prop_assert_eq!(&once, &twice);
            proptest::prop_assert_eq!(first.causes, second.causes);
        }
    }
}
