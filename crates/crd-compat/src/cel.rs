//! CEL, as the API server applies `x-kubernetes-validations` to a stored value: the rule
//! compiled once, `self` bound to the value typed by its schema, the result read as a verdict.
//! cel-rust is not the API server's evaluator (no type-checking, none of Kubernetes' own
//! libraries): what it cannot judge is said so, never counted as a failure.

use std::collections::HashMap;
use std::sync::Arc;

use cel::{Context, Env, ExecutionError, Program, Value as CelValue};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::{
    JSONSchemaProps, JSONSchemaPropsOrArray, JSONSchemaPropsOrBool,
};
use serde_json::Value;

/// What a rule says of one value.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Verdict {
    Pass,
    /// The rule is false (no detail), or its evaluation fails as it would on the API server
    /// (a missing key: the error).
    Fail(String),
    /// This evaluator cannot tell (a function it lacks, a typing it does not share).
    Unjudged(String),
}

/// Whether a rule is a transition rule: it reads `oldSelf`, so it judges updates only.
pub(crate) fn is_transition(rule: &str) -> bool {
    match Program::compile(rule) {
        Ok(program) => program.references().has_variable("oldSelf"),
        // Not compiled here: the text is the best evidence left.
        Err(_) => rule.contains("oldSelf"),
    }
}

/// A rule compiled once, evaluated on many values (the standard environment built once too).
pub(crate) struct Rule {
    program: Result<Program, String>,
    env: Arc<Env>,
}

impl Rule {
    pub(crate) fn new(rule: &str) -> Self {
        Self {
            program: Program::compile(rule)
                .map_err(|e| format!("the rule does not compile here: {e}")),
            env: Arc::new(Env::stdlib()),
        }
    }

    /// The rule that matches `self` against the variable `pattern`, with CEL's `matches` (RE2
    /// syntax, as the API server's patterns are in practice).
    pub(crate) fn pattern() -> Self {
        Self::new("self.matches(pattern)")
    }

    /// Whether `text` matches `pattern`; `self` must come from [`Rule::pattern`].
    pub(crate) fn matches(&self, pattern: &str, text: &Value) -> Verdict {
        let pattern = CelValue::String(Arc::new(pattern.to_string()));
        self.judge(text, None, &[("pattern", pattern)])
    }

    /// Evaluates the rule with `self` bound to `value`, typed by `schema`; `extra` binds more
    /// variables (a pattern for `matches`).
    pub(crate) fn judge(
        &self,
        value: &Value,
        schema: Option<&JSONSchemaProps>,
        extra: &[(&str, CelValue)],
    ) -> Verdict {
        match self.evaluate(value, schema, extra) {
            Err(why) => Verdict::Unjudged(why),
            Ok(Ok(CelValue::Bool(true))) => Verdict::Pass,
            Ok(Ok(CelValue::Bool(false))) => Verdict::Fail(String::new()),
            Ok(Ok(other)) => Verdict::Unjudged(format!("the rule gave {other:?}, not a bool")),
            Ok(Err(error)) => from_error(&error),
        }
    }

    /// The expression's value with `self` bound to `value` (typed by `schema`) and `extra`
    /// bound too; `Err` when it does not compile here.
    pub(crate) fn evaluate(
        &self,
        value: &Value,
        schema: Option<&JSONSchemaProps>,
        extra: &[(&str, CelValue)],
    ) -> Result<Result<CelValue, ExecutionError>, String> {
        let program = self.program.as_ref().map_err(Clone::clone)?;
        let mut context = Context::with_env(Arc::clone(&self.env));
        context.add_variable_from_value("self", to_cel(value, schema));
        for (name, bound) in extra {
            context.add_variable_from_value(*name, bound.clone());
        }
        Ok(program.execute(&context))
    }
}

/// Errors the API server would meet too fail the value; errors that come from this evaluator
/// lacking a function or typing values otherwise leave it unjudged.
pub(crate) fn from_error(error: &ExecutionError) -> Verdict {
    match error {
        ExecutionError::UndeclaredReference(_)
        | ExecutionError::NoSuchOverload(_)
        | ExecutionError::UnexpectedType { .. }
        | ExecutionError::ValuesNotComparable(..)
        | ExecutionError::NotSupportedAsMethod { .. }
        | ExecutionError::UnsupportedTargetType { .. } => {
            Verdict::Unjudged(format!("not evaluated here: {error}"))
        }
        _ => Verdict::Fail(format!("evaluation error: {error}")),
    }
}

fn items_schema(schema: Option<&JSONSchemaProps>) -> Option<&JSONSchemaProps> {
    match schema?.items.as_ref()? {
        JSONSchemaPropsOrArray::Schema(items) => Some(items),
        JSONSchemaPropsOrArray::Schemas(_) => None,
    }
}

fn field_schema<'a>(schema: Option<&'a JSONSchemaProps>, key: &str) -> Option<&'a JSONSchemaProps> {
    let schema = schema?;
    if let Some(property) = schema.properties.as_ref().and_then(|p| p.get(key)) {
        return Some(property);
    }
    match schema.additional_properties.as_ref()? {
        JSONSchemaPropsOrBool::Schema(values) => Some(values),
        JSONSchemaPropsOrBool::Bool(_) => None,
    }
}

/// A JSON value as CEL sees it under its schema: integers are `int` (`uint` only past i64),
/// a `number` field is a double even when written as 5.
pub(crate) fn to_cel(value: &Value, schema: Option<&JSONSchemaProps>) -> CelValue {
    match value {
        Value::Null => CelValue::Null,
        Value::Bool(b) => CelValue::Bool(*b),
        Value::Number(n) => {
            let is_number = schema.and_then(|s| s.type_.as_deref()) == Some("number");
            match (n.as_i64(), n.as_u64(), n.as_f64()) {
                (Some(i), _, _) if !is_number => CelValue::Int(i),
                (None, Some(u), _) if !is_number => CelValue::UInt(u),
                (_, _, Some(f)) => CelValue::Float(f),
                _ => CelValue::Null,
            }
        }
        Value::String(s) => CelValue::String(Arc::new(s.clone())),
        Value::Array(items) => {
            let schema = items_schema(schema);
            CelValue::List(Arc::new(items.iter().map(|v| to_cel(v, schema)).collect()))
        }
        Value::Object(map) => {
            let converted: HashMap<String, CelValue> = map
                .iter()
                .map(|(k, v)| (k.clone(), to_cel(v, field_schema(schema, k))))
                .collect();
            CelValue::from(converted)
        }
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;
    use serde_json::json;

    #[test]
    fn rules_judge_values() {
        let differ = Rule::new("self.fromRing != self.toRing");
        assert_eq!(
            differ.judge(&json!({"fromRing": "a", "toRing": "b"}), None, &[]),
            Verdict::Pass
        );
        assert!(matches!(
            differ.judge(&json!({"fromRing": "a", "toRing": "a"}), None, &[]),
            Verdict::Fail(_)
        ));
        // A missing key fails on the API server as well.
        assert!(matches!(
            differ.judge(&json!({"fromRing": "a"}), None, &[]),
            Verdict::Fail(_)
        ));
        let one_of = Rule::new("has(self.tenants) != has(self.percent)");
        assert_eq!(
            one_of.judge(&json!({"percent": 10}), None, &[]),
            Verdict::Pass
        );
        assert_eq!(
            one_of.judge(&json!({"tenants": ["t1"]}), None, &[]),
            Verdict::Pass
        );
        assert!(matches!(
            one_of.judge(&json!({"tenants": [], "percent": 5}), None, &[]),
            Verdict::Fail(_)
        ));
        assert!(matches!(
            one_of.judge(&json!({}), None, &[]),
            Verdict::Fail(_)
        ));
    }

    #[test]
    fn what_this_evaluator_lacks_is_unjudged() {
        assert!(matches!(
            Rule::new("self.(").judge(&json!(1), None, &[]),
            Verdict::Unjudged(_)
        ));
        assert!(matches!(
            Rule::new("isURL(self)").judge(&json!("x"), None, &[]),
            Verdict::Unjudged(_)
        ));
        assert!(matches!(
            Rule::new("self + 1").judge(&json!(1), None, &[]),
            Verdict::Unjudged(_)
        ));
    }

    #[test]
    fn numbers_are_typed_by_the_schema() {
        let number: JSONSchemaProps = serde_json::from_value(json!({"type": "number"})).unwrap();
        assert_eq!(to_cel(&json!(5), Some(&number)), CelValue::Float(5.0));
        assert_eq!(to_cel(&json!(5), None), CelValue::Int(5));
        assert_eq!(
            Rule::new("self > 4.5").judge(&json!(5), Some(&number), &[]),
            Verdict::Pass
        );
        assert_eq!(
            Rule::new("self <= 100").judge(&json!(70), None, &[]),
            Verdict::Pass
        );
    }

    #[test]
    fn transition_rules_and_patterns() {
        assert!(is_transition("self == oldSelf"));
        assert!(!is_transition("self.a == self.b"));
        let pattern = Rule::pattern();
        assert_eq!(pattern.matches("^[a-z]+$", &json!("abc")), Verdict::Pass);
        assert!(matches!(
            pattern.matches("^[a-z]+$", &json!("ABC")),
            Verdict::Fail(_)
        ));
    }
}
