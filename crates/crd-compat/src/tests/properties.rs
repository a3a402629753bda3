//! Property tests: any schema is compatible with itself, any pair and any stored objects are
//! judged without a panic, a cluster that stores nothing judges as none read.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use proptest::prelude::*;

use super::*;

const KEYS: [&str; 4] = ["a", "b", "c", "d"];

/// Schemas of many shapes: leaves with bounds, enums, patterns, defaults and rules, inside
/// objects (some fields required) and arrays.
fn any_schema() -> impl Strategy<Value = Value> {
    let leaf = (
        prop::sample::select(vec!["string", "integer", "number", "boolean"]),
        prop::option::of(0..5i64),
        prop::option::of(prop::sample::select(vec!["^[a-c]*$", "^x"])),
        prop::option::of(prop::collection::vec(0..3i64, 1..3)),
        prop::option::of(prop::sample::select(vec![
            "self == self",
            "self != 1",
            "size(self) < 2",
        ])),
    )
        .prop_map(|(kind, bound, pattern, choices, rule)| {
            let mut schema = json!({"type": kind});
            if let Some(n) = bound {
                schema["maximum"] = json!(n);
                schema["maxLength"] = json!(n);
                schema["default"] = json!(n);
            }
            if let Some(p) = pattern {
                schema["pattern"] = json!(p);
            }
            if let Some(c) = choices {
                schema["enum"] = json!(c);
            }
            if let Some(r) = rule {
                schema["x-kubernetes-validations"] = json!([{"rule": r}]);
            }
            schema
        });
    leaf.prop_recursive(3, 24, 4, |inner| {
        prop_oneof![
            (inner.clone(), prop::option::of(0..3i64)).prop_map(|(items, max)| {
                let mut schema = json!({"type": "array", "items": items});
                if let Some(m) = max {
                    schema["maxItems"] = json!(m);
                }
                schema
            }),
            (
                prop::collection::btree_map(prop::sample::select(KEYS.to_vec()), inner, 0..4),
                prop::collection::vec(prop::sample::select(KEYS.to_vec()), 0..2),
            )
                .prop_map(|(properties, required)| {
                    json!({"type": "object", "properties": properties, "required": required})
                }),
        ]
    })
}

fn any_json() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        (-3..300i64).prop_map(Value::from),
        any::<f64>().prop_map(Value::from),
        "[a-z]{0,4}".prop_map(Value::String),
    ];
    leaf.prop_recursive(3, 24, 4, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..3).prop_map(Value::Array),
            prop::collection::btree_map(prop::sample::select(KEYS.to_vec()), inner, 0..4).prop_map(
                |map| Value::Object(map.into_iter().map(|(k, v)| (k.to_owned(), v)).collect())
            ),
        ]
    })
}

fn severities(report: &Report) -> Vec<(String, Severity)> {
    report
        .problems
        .iter()
        .map(|p| (p.path.clone(), p.severity))
        .collect()
}

proptest! {
    /// Any schema is compatible with itself.
    #[test]
    fn a_schema_is_compatible_with_itself(schema in any_schema()) {
        prop_assert_eq!(compare(&crd(schema.clone()), &crd(schema)), vec![]);
    }

    /// Any two schemas and any stored objects: no panic, the verdict is the severities',
    /// and a cluster that stores nothing judges as no cluster read does.
    #[test]
    fn any_pair_is_judged(old in any_schema(), new in any_schema(), specs in prop::collection::vec(any_json(), 0..3)) {
        let (old, new) = (crd(old), crd(new));
        let stored = objects(&specs);
        let report = check(std::slice::from_ref(&old), std::slice::from_ref(&new), Some(&stored));
        prop_assert_eq!(report.compatible, report.problems.iter().all(|p| p.severity == Severity::Warning));
        let unread = check(std::slice::from_ref(&old), std::slice::from_ref(&new), None);
        let empty = check(std::slice::from_ref(&old), std::slice::from_ref(&new), Some(&BTreeMap::new()));
        prop_assert_eq!(severities(&unread), severities(&empty));
        prop_assert_eq!(report.problems.len(), unread.problems.len());
    }
}
