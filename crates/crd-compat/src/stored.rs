//! Stored objects against the findings: each finding's probe put to every value a stored object
//! holds at its place, under the new schema of the version the object was read at. This is
//! where a narrowing becomes breaking (a stored value violates it) or stays a warning, and where
//! the objects a change concerns are named.

use serde_json::Value;

use crate::cel::{self, Verdict};
use crate::finding::{Bound, Effect, Finding, Probe};
use crate::format;
use crate::report::{Problem, Severity, Stored};

/// What the stored objects said of one finding.
#[derive(Default)]
struct Evidence {
    /// `namespace/name: .spec.x (value 70)`, one per concerned value.
    concerned: Vec<String>,
    /// Why some values could not be judged (the first reason, and how many).
    unjudged: Option<(String, usize)>,
}

/// Turns a finding into a problem, given the CRD's stored objects (`None`: none were read).
pub(crate) fn settle(crd: &str, finding: Finding, objects: Option<&[Stored]>) -> Problem {
    let at_version: Option<Vec<&Stored>> = objects.map(|all| {
        all.iter()
            .filter(|o| finding.version.is_empty() || o.version == finding.version)
            .collect()
    });
    let evidence = match (&finding.probe, &at_version) {
        (Some(probe), Some(objects)) => gather(&finding, probe, objects),
        _ => Evidence::default(),
    };
    let severity = match finding.effect {
        Effect::Breaking => Severity::Breaking,
        Effect::Warning => Severity::Warning,
        Effect::Narrowed if evidence.concerned.is_empty() => Severity::Warning,
        Effect::Narrowed => Severity::Breaking,
    };
    let mut change = finding.change;
    if finding.effect == Effect::Narrowed {
        match (objects, &at_version) {
            (None, _) => change.push_str(" (no stored objects read: check against a cluster)"),
            (Some(all), Some(here)) if here.is_empty() && !all.is_empty() => {
                change.push_str(&format!(
                    " (no stored object read at {}: check against a cluster)",
                    finding.version
                ))
            }
            _ => {}
        }
    }
    if let Some((why, count)) = &evidence.unjudged {
        change.push_str(&format!(" ({count} stored value(s) not judged: {why})"));
    }
    Problem {
        crd: crd.to_string(),
        version: finding.version,
        path: finding.path.render(),
        change,
        severity,
        objects: evidence.concerned,
    }
}

fn gather(finding: &Finding, probe: &Probe, objects: &[&Stored]) -> Evidence {
    // A new required field is asked of the object that should hold it.
    let place = match probe {
        Probe::Missing(_) => finding.path.parent(),
        _ => finding.path.clone(),
    };
    let rule = match probe {
        Probe::Cel { rule, .. } => Some(cel::Rule::new(rule)),
        Probe::Pattern(_) => Some(cel::Rule::pattern()),
        _ => None,
    };
    let mut evidence = Evidence::default();
    for object in objects {
        for (at, value) in place.values_in(&object.object) {
            match judge(probe, rule.as_ref(), value) {
                Verdict::Pass => {}
                Verdict::Fail(detail) => {
                    let at = if at.is_empty() { "." } else { at.as_str() };
                    evidence
                        .concerned
                        .push(format!("{}: {at} ({detail})", object.name));
                }
                Verdict::Unjudged(why) => {
                    let entry = evidence.unjudged.get_or_insert((why, 0));
                    entry.1 += 1;
                }
            }
        }
    }
    evidence.concerned.sort();
    evidence
}

/// A value as told in a problem: compact JSON, cut when long.
fn shown(value: &Value) -> String {
    const MAX: usize = 60;
    let text = value.to_string();
    if text.chars().count() <= MAX {
        return text;
    }
    let cut: String = text.chars().take(MAX).collect();
    format!("{cut}...")
}

fn value_detail(value: &Value) -> String {
    format!("value {}", shown(value))
}

fn fails(bad: bool, value: &Value) -> Verdict {
    if bad {
        Verdict::Fail(value_detail(value))
    } else {
        Verdict::Pass
    }
}

/// What one probe says of one value. Values of another shape than the probe asks about (a
/// number under `maxLength`) pass: the type rule speaks for them.
fn judge(probe: &Probe, rule: Option<&cel::Rule>, value: &Value) -> Verdict {
    match probe {
        Probe::Present => Verdict::Fail(value_detail(value)),
        Probe::Missing(key) => match value {
            Value::Object(map) if !map.contains_key(key) => Verdict::Fail(format!("no {key}")),
            _ => Verdict::Pass,
        },
        Probe::Type(type_name) => fails(!type_fits(type_name, value), value),
        // A null is the nullable rule's business, not the enum's.
        Probe::OneOf(allowed) => fails(!value.is_null() && !allowed.contains(value), value),
        Probe::Bound(bound) => fails(violates(bound, value), value),
        Probe::Pattern(pattern) => match (value, rule) {
            (Value::String(_), Some(rule)) => match rule.matches(pattern, value) {
                Verdict::Fail(why) if why.is_empty() => Verdict::Fail(value_detail(value)),
                // A pattern this regex engine does not take (ECMA's lookahead) is not the value's fault.
                Verdict::Fail(why) => {
                    Verdict::Unjudged(format!("the pattern is not evaluated here: {why}"))
                }
                other => other,
            },
            _ => Verdict::Pass,
        },
        Probe::Format(name) => match value {
            Value::String(text) => match format::conforms(name, text) {
                Some(ok) => fails(!ok, value),
                None => Verdict::Unjudged(format!("format {name} is not checked here")),
            },
            _ => Verdict::Pass,
        },
        Probe::Cel {
            rule: text,
            message,
            schema,
        } => {
            let Some(rule) = rule else {
                return Verdict::Unjudged("rule not compiled".to_string());
            };
            match rule.judge(value, Some(schema), &[]) {
                Verdict::Fail(why) => {
                    let told = message.as_deref().unwrap_or(text);
                    Verdict::Fail(if why.is_empty() {
                        format!("fails: {told}")
                    } else {
                        format!("fails: {told}; {why}")
                    })
                }
                other => other,
            }
        }
    }
}

fn type_fits(type_name: &str, value: &Value) -> bool {
    match (type_name, value) {
        // Null is the nullable rule's business, not the type's.
        (_, Value::Null) => true,
        ("object", v) => v.is_object(),
        ("array", v) => v.is_array(),
        ("string", v) => v.is_string(),
        ("boolean", v) => v.is_boolean(),
        ("number", v) => v.is_number(),
        ("integer", Value::Number(n)) => {
            n.is_i64() || n.is_u64() || n.as_f64().is_some_and(|f| f.fract() == 0.0)
        }
        ("int-or-string", v) => v.is_string() || type_fits("integer", v),
        ("integer", _) => false,
        // A type this crate does not know: not judged as wrong.
        _ => true,
    }
}

fn count_over(count: usize, limit: i64) -> bool {
    i64::try_from(count).unwrap_or(i64::MAX) > limit
}

fn count_under(count: usize, limit: i64) -> bool {
    i64::try_from(count).unwrap_or(i64::MAX) < limit
}

fn violates(bound: &Bound, value: &Value) -> bool {
    match (bound, value) {
        (Bound::MaxLength(n), Value::String(s)) => count_over(s.chars().count(), *n),
        (Bound::MinLength(n), Value::String(s)) => count_under(s.chars().count(), *n),
        (Bound::MaxItems(n), Value::Array(a)) => count_over(a.len(), *n),
        (Bound::MinItems(n), Value::Array(a)) => count_under(a.len(), *n),
        (Bound::MaxProperties(n), Value::Object(m)) => count_over(m.len(), *n),
        (Bound::MinProperties(n), Value::Object(m)) => count_under(m.len(), *n),
        (Bound::Maximum { limit, exclusive }, Value::Number(n)) => n
            .as_f64()
            .is_some_and(|v| v > *limit || (*exclusive && v == *limit)),
        (Bound::Minimum { limit, exclusive }, Value::Number(n)) => n
            .as_f64()
            .is_some_and(|v| v < *limit || (*exclusive && v == *limit)),
        _ => false,
    }
}
