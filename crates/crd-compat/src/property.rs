//! Per-property rules: the old and the new schema of each version both CRDs have, walked
//! together (`properties`, `items`, `additionalProperties`), every rule asked at every place
//! both schemas reach. One function per rule; each is given the place and the two schemas there
//! and says what it finds. The root `metadata` is the API server's, not ours: it is not walked.

use std::collections::BTreeSet;

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::{
    CustomResourceDefinition, CustomResourceDefinitionVersion, JSONSchemaProps,
    JSONSchemaPropsOrArray, JSONSchemaPropsOrBool,
};
use serde_json::Value;

use crate::cel;
use crate::finding::{Bound, Effect, Finding, Probe};
use crate::path::{Path, Step};

/// The change [`field_removed`] names; the check of a build on an API behind it looks for it.
pub(crate) const FIELD_REMOVED: &str = "field removed";

type Rule = fn(&Path, &JSONSchemaProps, &JSONSchemaProps) -> Vec<Finding>;

/// The per-property rules, in the order they are told at one place.
const RULES: &[Rule] = &[
    field_removed,
    required_added,
    type_changed,
    enum_narrowed,
    length_bounds,
    item_bounds,
    property_bounds,
    maximum_lowered,
    minimum_raised,
    pattern_changed,
    format_changed,
    unknown_fields_pruned,
    default_changed,
    cel_rule_added,
];

fn schema(version: &CustomResourceDefinitionVersion) -> Option<&JSONSchemaProps> {
    version.schema.as_ref()?.open_api_v3_schema.as_ref()
}

/// Every version both CRDs have, its two schemas compared.
pub(crate) fn compare(
    old: &CustomResourceDefinition,
    new: &CustomResourceDefinition,
) -> Vec<Finding> {
    let mut out = Vec::new();
    for before in &old.spec.versions {
        let Some(after) = new.spec.versions.iter().find(|v| v.name == before.name) else {
            continue;
        };
        if let (Some(old_schema), Some(new_schema)) = (schema(before), schema(after)) {
            let start = out.len();
            walk(&Path::root(), old_schema, new_schema, &mut out);
            for finding in &mut out[start..] {
                finding.version.clone_from(&before.name);
            }
        }
    }
    out
}

fn walk(path: &Path, old: &JSONSchemaProps, new: &JSONSchemaProps, out: &mut Vec<Finding>) {
    out.extend(RULES.iter().flat_map(|rule| rule(path, old, new)));
    if let (Some(before), Some(after)) = (&old.properties, &new.properties) {
        for (name, old_child) in before {
            if path.is_root() && name == "metadata" {
                continue;
            }
            if let Some(new_child) = after.get(name) {
                walk(
                    &path.child(Step::Field(name.clone())),
                    old_child,
                    new_child,
                    out,
                );
            }
        }
    }
    if let (
        Some(JSONSchemaPropsOrArray::Schema(before)),
        Some(JSONSchemaPropsOrArray::Schema(after)),
    ) = (&old.items, &new.items)
    {
        walk(&path.child(Step::Item), before, after, out);
    }
    if let (
        Some(JSONSchemaPropsOrBool::Schema(before)),
        Some(JSONSchemaPropsOrBool::Schema(after)),
    ) = (&old.additional_properties, &new.additional_properties)
    {
        walk(&path.child(Step::Entry), before, after, out);
    }
}

fn field(path: &Path, name: &str) -> Path {
    path.child(Step::Field(name.to_string()))
}

fn show(value: &Value) -> String {
    value.to_string()
}

/// A stored value of a field the schema drops is pruned, and clients that set it are refused.
fn field_removed(path: &Path, old: &JSONSchemaProps, new: &JSONSchemaProps) -> Vec<Finding> {
    let Some(before) = &old.properties else {
        return Vec::new();
    };
    let after = new.properties.as_ref();
    before
        .keys()
        .filter(|name| !(path.is_root() && *name == "metadata"))
        .filter(|name| after.is_none_or(|a| !a.contains_key(*name)))
        .map(|name| {
            Finding::new(&field(path, name), FIELD_REMOVED, Effect::Breaking).probe(Probe::Present)
        })
        .collect()
}

/// An object without a newly required field can no longer be updated (not even its status),
/// unless the field has a default, which the API server fills in on read.
fn required_added(path: &Path, old: &JSONSchemaProps, new: &JSONSchemaProps) -> Vec<Finding> {
    let before: BTreeSet<&String> = old.required.iter().flatten().collect();
    new.required
        .iter()
        .flatten()
        .filter(|name| !before.contains(name))
        .map(|name| {
            let defaulted = new
                .properties
                .as_ref()
                .and_then(|p| p.get(name))
                .is_some_and(|p| p.default.is_some());
            let (change, effect) = if defaulted {
                ("required field added, with a default", Effect::Warning)
            } else {
                ("required field added", Effect::Breaking)
            };
            Finding::new(&field(path, name), change, effect).probe(Probe::Missing(name.clone()))
        })
        .collect()
}

fn type_name(schema: &JSONSchemaProps) -> Option<String> {
    if schema.x_kubernetes_int_or_string == Some(true) {
        return Some("int-or-string".to_string());
    }
    schema.type_.clone()
}

/// Any type change, a widening too: the build still running decodes the old type.
fn type_changed(path: &Path, old: &JSONSchemaProps, new: &JSONSchemaProps) -> Vec<Finding> {
    let change = match (type_name(old), type_name(new)) {
        (Some(before), Some(after)) if before != after => {
            format!("type changed from {before} to {after}")
        }
        (None, Some(after)) => format!("type set to {after}"),
        _ => return Vec::new(),
    };
    let probe = type_name(new).map(Probe::Type);
    let finding = Finding::new(path, change, Effect::Breaking);
    vec![match probe {
        Some(p) => finding.probe(p),
        None => finding,
    }]
}

/// A value the new enum leaves out is refused on the next write.
fn enum_narrowed(path: &Path, old: &JSONSchemaProps, new: &JSONSchemaProps) -> Vec<Finding> {
    let Some(after) = &new.enum_ else {
        return Vec::new();
    };
    let allowed: Vec<Value> = after.iter().map(|v| v.0.clone()).collect();
    let change = match &old.enum_ {
        None => format!(
            "enum introduced: {}",
            allowed.iter().map(show).collect::<Vec<_>>().join(", ")
        ),
        Some(before) => {
            let removed: Vec<String> = before
                .iter()
                .filter(|v| !allowed.contains(&v.0))
                .map(|v| show(&v.0))
                .collect();
            if removed.is_empty() {
                return Vec::new();
            }
            format!("enum values removed: {}", removed.join(", "))
        }
    };
    vec![Finding::new(path, change, Effect::Breaking).probe(Probe::OneOf(allowed))]
}

/// An upper bound set where there was none, or lowered.
fn upper(name: &str, old: Option<i64>, new: Option<i64>) -> Option<String> {
    match (old, new) {
        (None, Some(n)) => Some(format!("{name} set to {n}")),
        (Some(o), Some(n)) if n < o => Some(format!("{name} lowered from {o} to {n}")),
        _ => None,
    }
}

/// A lower bound set where there was none, or raised.
fn lower(name: &str, old: Option<i64>, new: Option<i64>) -> Option<String> {
    match (old, new) {
        (None, Some(n)) => Some(format!("{name} set to {n}")),
        (Some(o), Some(n)) if n > o => Some(format!("{name} raised from {o} to {n}")),
        _ => None,
    }
}

fn bound_findings(path: &Path, found: [(Option<String>, Option<Bound>); 2]) -> Vec<Finding> {
    found
        .into_iter()
        .filter_map(|(change, bound)| {
            Some(Finding::new(path, change?, Effect::Narrowed).probe(Probe::Bound(bound?)))
        })
        .collect()
}

fn length_bounds(path: &Path, old: &JSONSchemaProps, new: &JSONSchemaProps) -> Vec<Finding> {
    bound_findings(
        path,
        [
            (
                upper("maxLength", old.max_length, new.max_length),
                new.max_length.map(Bound::MaxLength),
            ),
            (
                lower("minLength", old.min_length, new.min_length),
                new.min_length.map(Bound::MinLength),
            ),
        ],
    )
}

fn item_bounds(path: &Path, old: &JSONSchemaProps, new: &JSONSchemaProps) -> Vec<Finding> {
    bound_findings(
        path,
        [
            (
                upper("maxItems", old.max_items, new.max_items),
                new.max_items.map(Bound::MaxItems),
            ),
            (
                lower("minItems", old.min_items, new.min_items),
                new.min_items.map(Bound::MinItems),
            ),
        ],
    )
}

fn property_bounds(path: &Path, old: &JSONSchemaProps, new: &JSONSchemaProps) -> Vec<Finding> {
    bound_findings(
        path,
        [
            (
                upper("maxProperties", old.max_properties, new.max_properties),
                new.max_properties.map(Bound::MaxProperties),
            ),
            (
                lower("minProperties", old.min_properties, new.min_properties),
                new.min_properties.map(Bound::MinProperties),
            ),
        ],
    )
}

/// How a numeric limit moved (`verb`: "lowered" or "raised"); `tighter` says which way narrows.
fn limit_change(
    (name, verb): (&str, &str),
    old: (Option<f64>, bool),
    new: (Option<f64>, bool),
    tighter: fn(f64, f64) -> bool,
) -> Option<String> {
    let (Some(after), exclusive) = new else {
        return None;
    };
    let exclusive_note = if exclusive { " (exclusive)" } else { "" };
    match old {
        (None, _) => Some(format!("{name} set to {after}{exclusive_note}")),
        (Some(before), _) if tighter(before, after) => Some(format!(
            "{name} {verb} from {before} to {after}{exclusive_note}"
        )),
        (Some(before), false) if before == after && exclusive => {
            Some(format!("{name} {after} made exclusive"))
        }
        _ => None,
    }
}

fn maximum_lowered(path: &Path, old: &JSONSchemaProps, new: &JSONSchemaProps) -> Vec<Finding> {
    let exclusive = |s: &JSONSchemaProps| s.exclusive_maximum == Some(true);
    let change = limit_change(
        ("maximum", "lowered"),
        (old.maximum, exclusive(old)),
        (new.maximum, exclusive(new)),
        |before, after| after < before,
    );
    let bound = new.maximum.map(|limit| Bound::Maximum {
        limit,
        exclusive: exclusive(new),
    });
    bound_findings(path, [(change, bound), (None, None)])
}

fn minimum_raised(path: &Path, old: &JSONSchemaProps, new: &JSONSchemaProps) -> Vec<Finding> {
    let exclusive = |s: &JSONSchemaProps| s.exclusive_minimum == Some(true);
    let change = limit_change(
        ("minimum", "raised"),
        (old.minimum, exclusive(old)),
        (new.minimum, exclusive(new)),
        |before, after| after > before,
    );
    let bound = new.minimum.map(|limit| Bound::Minimum {
        limit,
        exclusive: exclusive(new),
    });
    bound_findings(path, [(change, bound), (None, None)])
}

/// A text constraint (pattern, format) added or changed.
fn text_change(name: &str, old: Option<&String>, new: Option<&String>) -> Option<String> {
    match (old, new) {
        (None, Some(after)) => Some(format!("{name} added: {after}")),
        (Some(before), Some(after)) if before != after => {
            Some(format!("{name} changed from {before} to {after}"))
        }
        _ => None,
    }
}

fn pattern_changed(path: &Path, old: &JSONSchemaProps, new: &JSONSchemaProps) -> Vec<Finding> {
    let Some(change) = text_change("pattern", old.pattern.as_ref(), new.pattern.as_ref()) else {
        return Vec::new();
    };
    let probe = new.pattern.clone().map(Probe::Pattern);
    vec![Finding {
        probe,
        ..Finding::new(path, change, Effect::Narrowed)
    }]
}

fn format_changed(path: &Path, old: &JSONSchemaProps, new: &JSONSchemaProps) -> Vec<Finding> {
    let Some(change) = text_change("format", old.format.as_ref(), new.format.as_ref()) else {
        return Vec::new();
    };
    let probe = new.format.clone().map(Probe::Format);
    vec![Finding {
        probe,
        ..Finding::new(path, change, Effect::Narrowed)
    }]
}

/// Fields the schema does not name were kept; now the API server prunes them on the next write.
fn unknown_fields_pruned(
    path: &Path,
    old: &JSONSchemaProps,
    new: &JSONSchemaProps,
) -> Vec<Finding> {
    let preserves = |s: &JSONSchemaProps| s.x_kubernetes_preserve_unknown_fields == Some(true);
    if preserves(old) && !preserves(new) {
        return vec![Finding::new(
            path,
            "unknown fields no longer preserved",
            Effect::Breaking,
        )];
    }
    Vec::new()
}

/// Objects read without the field get another value than before: not refused, but not the same.
fn default_changed(path: &Path, old: &JSONSchemaProps, new: &JSONSchemaProps) -> Vec<Finding> {
    let change = match (&old.default, &new.default) {
        (None, None) => return Vec::new(),
        (Some(before), Some(after)) if before == after => return Vec::new(),
        (None, Some(after)) => format!("default added: {}", show(&after.0)),
        (Some(before), None) => format!("default removed (was {})", show(&before.0)),
        (Some(before), Some(after)) => format!(
            "default changed from {} to {}",
            show(&before.0),
            show(&after.0)
        ),
    };
    vec![Finding::new(path, change, Effect::Warning)]
}

/// A new rule (matched by its text) refuses the next write of an object it fails. A rule whose
/// text changed is a new rule; when it keeps the message of one that went, it is told as changed.
/// Transition rules (`oldSelf`) judge updates only and are not evaluated on stored objects.
fn cel_rule_added(path: &Path, old: &JSONSchemaProps, new: &JSONSchemaProps) -> Vec<Finding> {
    let before = old.x_kubernetes_validations.as_deref().unwrap_or_default();
    let after = new.x_kubernetes_validations.as_deref().unwrap_or_default();
    let mut out = Vec::new();
    for rule in after
        .iter()
        .filter(|r| !before.iter().any(|b| b.rule == r.rule))
    {
        let replaced = before.iter().find(|b| {
            b.message.is_some()
                && b.message == rule.message
                && !after.iter().any(|a| a.rule == b.rule)
        });
        let change = match replaced {
            Some(old_rule) => format!("CEL rule changed from {} to {}", old_rule.rule, rule.rule),
            None => format!("CEL rule added: {}", rule.rule),
        };
        if cel::is_transition(&rule.rule) {
            out.push(Finding::new(
                path,
                format!("{change} (a transition rule: judges updates only)"),
                Effect::Warning,
            ));
            continue;
        }
        out.push(
            Finding::new(path, change, Effect::Narrowed).probe(Probe::Cel {
                rule: rule.rule.clone(),
                message: rule.message.clone(),
                schema: Box::new(new.clone()),
            }),
        );
    }
    out
}
