//! `x-kubernetes-validations` as the API server applies them to a write, for a server that
//! admits custom resources (kubesim): one schema node's rules evaluated on its value with `self`
//! bound (typed by the node's schema) and, on an update, `oldSelf`. The same evaluator as the
//! compatibility check (`cel.rs`), so the project has one reading of CEL.
//!
//! As the API server (Kubernetes 1.33): a transition rule (one reading `oldSelf`) runs only on
//! an update where the old object has a value at the node; a failing rule's message is its
//! `messageExpression` when that gives a usable string, else its `message`, else `failed rule:
//! RULE`; `reason` and `fieldPath` say which cause and where. Ratcheting (KEP-4008): a rule that
//! does not read `oldSelf` and fails on a value equal to the old one is reported as ratcheted,
//! which the server turns into a warning rather than a refusal. A rule this evaluator cannot
//! judge (a Kubernetes CEL library, a typing it does not share, `optionalOldSelf`) is skipped:
//! a server must not refuse what it cannot evaluate.

use cel::Value as CelValue;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::JSONSchemaProps;
use serde::Deserialize;
use serde_json::Value;

use crate::cel::{self as evaluator, Rule, Verdict};

/// The cause a failing rule gives, from its `reason` (`FieldValueInvalid` when it has none).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Reason {
    Invalid,
    Forbidden,
    Required,
    Duplicate,
}

impl Reason {
    fn from_field(reason: Option<&str>) -> Reason {
        match reason {
            Some("FieldValueForbidden") => Reason::Forbidden,
            Some("FieldValueRequired") => Reason::Required,
            Some("FieldValueDuplicate") => Reason::Duplicate,
            _ => Reason::Invalid,
        }
    }

    /// The reason as a `Status` cause names it: `FieldValueInvalid`, ...
    pub fn as_str(self) -> &'static str {
        match self {
            Reason::Invalid => "FieldValueInvalid",
            Reason::Forbidden => "FieldValueForbidden",
            Reason::Required => "FieldValueRequired",
            Reason::Duplicate => "FieldValueDuplicate",
        }
    }
}

/// One rule that fails on a value.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Failure {
    /// The rule's text.
    pub rule: String,
    /// What the API server says of it (its `messageExpression`, `message` or `failed rule: RULE`).
    pub message: String,
    /// The rule's `fieldPath` below the node, as written (`.fromRing`); empty when it has none.
    pub field_path: String,
    pub reason: Reason,
    /// The value is the old one unchanged and the rule does not read `oldSelf`: ratcheting makes
    /// this a warning, not a refusal.
    pub ratcheted: bool,
}

/// One entry of `x-kubernetes-validations`.
#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct Written {
    rule: String,
    #[serde(default)]
    message: Option<String>,
    #[serde(default)]
    message_expression: Option<String>,
    #[serde(default)]
    field_path: Option<String>,
    #[serde(default)]
    reason: Option<String>,
    #[serde(default)]
    optional_old_self: Option<bool>,
}

/// Whether a schema node has rules to evaluate.
pub fn has_rules(schema: &Value) -> bool {
    schema["x-kubernetes-validations"]
        .as_array()
        .is_some_and(|rules| !rules.is_empty())
}

/// Evaluates the `x-kubernetes-validations` of one schema node (`schema`, as in the CRD) on
/// `value`, the node's value, which has passed the node's schema. `old`: on an update, the old
/// object's value at the same path, if it has one (`None` on a create). Every failing rule, in
/// the order written; rules that pass or cannot be judged here give nothing.
pub fn validate(schema: &Value, value: &Value, old: Option<&Value>) -> Vec<Failure> {
    let Some(written) = schema.get("x-kubernetes-validations").cloned() else {
        return Vec::new();
    };
    let rules: Vec<Written> = serde_json::from_value(written).unwrap_or_default();
    let props: Option<JSONSchemaProps> = serde_json::from_value(schema.clone()).ok();
    let props = props.as_ref();
    rules
        .iter()
        .filter_map(|rule| failure(rule, props, value, old))
        .collect()
}

fn failure(
    written: &Written,
    props: Option<&JSONSchemaProps>,
    value: &Value,
    old: Option<&Value>,
) -> Option<Failure> {
    let transition = evaluator::is_transition(&written.rule);
    let mut bound = Vec::new();
    if transition {
        // No optionals here: a rule that wants `oldSelf` as one is not judged.
        if written.optional_old_self == Some(true) {
            return None;
        }
        bound.push(("oldSelf", evaluator::to_cel(old?, props)));
    }
    let message = match Rule::new(&written.rule).evaluate(value, props, &bound) {
        Ok(Ok(CelValue::Bool(true))) | Err(_) => return None,
        Ok(Ok(CelValue::Bool(false))) => message_of(written, props, value, &bound),
        Ok(Ok(_)) => return None,
        Ok(Err(error)) => match evaluator::from_error(&error) {
            Verdict::Fail(_) => {
                return Some(Failure {
                    rule: written.rule.clone(),
                    message: format!("{error} evaluating rule: {}", rule_text(written)),
                    field_path: String::new(),
                    reason: Reason::Invalid,
                    ratcheted: !transition && old == Some(value),
                });
            }
            Verdict::Pass | Verdict::Unjudged(_) => return None,
        },
    };
    Some(Failure {
        rule: written.rule.clone(),
        message,
        field_path: written.field_path.clone().unwrap_or_default(),
        reason: Reason::from_field(written.reason.as_deref()),
        ratcheted: !transition && old == Some(value),
    })
}

/// The rule's message when it has one, else the rule itself (the API server's
/// `ruleErrorString`).
fn rule_text(written: &Written) -> String {
    match written.message.as_deref().map(str::trim) {
        Some(message) if !message.is_empty() => message.to_owned(),
        _ => written.rule.trim().to_owned(),
    }
}

/// A failing rule's message: its `messageExpression` when that gives a non-empty string on one
/// line, else its `message`, else `failed rule: RULE`.
fn message_of(
    written: &Written,
    props: Option<&JSONSchemaProps>,
    value: &Value,
    bound: &[(&str, CelValue)],
) -> String {
    if let Some(expression) = &written.message_expression
        && let Ok(Ok(CelValue::String(text))) = Rule::new(expression).evaluate(value, props, bound)
        && !text.trim().is_empty()
        && !text.contains('\n')
    {
        return text.to_string();
    }
    match written.message.as_deref().map(str::trim) {
        Some(message) if !message.is_empty() => message.to_owned(),
        _ => format!("failed rule: {}", written.rule.trim()),
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;
    use serde_json::json;

    fn node(rules: Value) -> Value {
        json!({"type": "object", "properties": {
            "fromRing": {"type": "string"}, "toRing": {"type": "string"},
            "replicas": {"type": "integer"}},
            "x-kubernetes-validations": rules})
    }

    #[test]
    fn a_failing_rule_says_why_where_and_which_cause() {
        let schema = node(json!([
            {"rule": "self.fromRing != self.toRing", "message": "rings must differ"},
            {"rule": "self.replicas < 3", "fieldPath": ".replicas", "reason": "FieldValueForbidden",
             "messageExpression": "'replicas is ' + string(self.replicas)"},
            {"rule": "self.replicas < 2"},
            {"rule": "self.replicas > 0", "message": "positive"},
        ]));
        let value = json!({"fromRing": "a", "toRing": "a", "replicas": 5});
        let failures = validate(&schema, &value, None);
        let seen: Vec<(&str, &str, Reason)> = failures
            .iter()
            .map(|f| (f.message.as_str(), f.field_path.as_str(), f.reason))
            .collect();
        assert_eq!(
            seen,
            [
                ("rings must differ", "", Reason::Invalid),
                ("replicas is 5", ".replicas", Reason::Forbidden),
                ("failed rule: self.replicas < 2", "", Reason::Invalid),
            ]
        );
        assert!(failures.iter().all(|f| !f.ratcheted));
    }

    #[test]
    fn a_message_expression_that_fails_falls_back_to_the_message() {
        let schema = node(json!([{"rule": "false", "message": "no",
                                   "messageExpression": "self.missing"}]));
        assert_eq!(validate(&schema, &json!({}), None)[0].message, "no");
        let schema = node(json!([{"rule": "false", "messageExpression": "''"}]));
        assert_eq!(
            validate(&schema, &json!({}), None)[0].message,
            "failed rule: false"
        );
    }

    #[test]
    fn transition_rules_judge_updates_only_and_unchanged_values_ratchet() {
        let schema = node(json!([{"rule": "self.toRing == oldSelf.toRing",
                                   "message": "toRing is immutable"}]));
        let old = json!({"toRing": "a"});
        assert!(validate(&schema, &json!({"toRing": "b"}), None).is_empty());
        assert_eq!(
            validate(&schema, &json!({"toRing": "b"}), Some(&old)).len(),
            1
        );
        assert!(validate(&schema, &old, Some(&old)).is_empty());

        let schema = node(json!([{"rule": "self.replicas < 3"}]));
        let old = json!({"replicas": 5});
        let unchanged = validate(&schema, &old, Some(&old));
        assert!(unchanged[0].ratcheted);
        let changed = validate(&schema, &json!({"replicas": 6}), Some(&old));
        assert!(!changed[0].ratcheted);
    }

    #[test]
    fn what_cannot_be_judged_here_is_skipped() {
        let schema = node(json!([
            {"rule": "isURL(self.fromRing)"},
            {"rule": "self.("},
            {"rule": "self.replicas"},
            {"rule": "oldSelf.hasValue()", "optionalOldSelf": true},
        ]));
        let value = json!({"fromRing": "x", "replicas": 1});
        assert!(validate(&schema, &value, None).is_empty());
        assert!(validate(&schema, &value, Some(&value)).is_empty());
        // A missing key fails on the API server too, worded as it words it.
        let schema = node(json!([{"rule": "self.fromRing == 'a'", "message": "a only"}]));
        let failures = validate(&schema, &json!({}), None);
        assert_eq!(
            failures[0].message,
            "No such key: fromRing evaluating rule: a only"
        );
    }
}
