//! CRD-wide rules (scope, versions), CRDs missing from the build or new in it, objects read at
//! another version, the report's order, odd schemas.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use serde_json::{Value, json};

use super::*;

fn version(name: &str, served: bool, storage: bool) -> Value {
    json!({"name": name, "served": served, "storage": storage,
           "schema": {"openAPIV3Schema": {"type": "object"}}})
}

fn changes(
    old: &CustomResourceDefinition,
    new: &CustomResourceDefinition,
) -> Vec<(String, Severity, String)> {
    compare(old, new)
        .into_iter()
        .map(|p| (p.version, p.severity, p.change))
        .collect()
}

#[test]
fn crd_wide_rules() {
    use Severity::{Breaking, Warning};
    let v1 = crd_of("Namespaced", json!([version("v1", true, true)]));
    let cluster = crd_of("Cluster", json!([version("v1", true, true)]));
    let v1_v2 = crd_of(
        "Namespaced",
        json!([version("v1", true, true), version("v2", true, false)]),
    );
    let v2_only = crd_of("Namespaced", json!([version("v2", true, true)]));
    let v1_unserved = crd_of(
        "Namespaced",
        json!([version("v1", false, false), version("v2", true, true)]),
    );
    let s = String::from;

    assert_eq!(
        changes(&v1, &cluster),
        vec![(
            s(""),
            Breaking,
            s("scope changed from Namespaced to Cluster")
        )]
    );
    assert_eq!(changes(&v1, &v1), vec![]);
    assert_eq!(changes(&v1, &v1_v2), vec![], "a served version added");
    assert_eq!(
        changes(&v1_v2, &v1),
        vec![(s("v2"), Breaking, s("served version v2 removed"))]
    );
    assert_eq!(
        changes(&v1, &v1_unserved),
        vec![
            (
                s(""),
                Warning,
                s("storage version moved from v1 to v2: stored objects stay at v1 until rewritten")
            ),
            (s("v1"), Breaking, s("version v1 no longer served")),
        ]
    );
    let stored_v1 = changes(&v1, &v2_only);
    assert!(stored_v1.contains(&(
        s("v1"),
        Breaking,
        s("stored version v1 removed: objects stored at it could no longer be read")
    )));
    assert!(stored_v1.contains(&(s("v1"), Breaking, s("served version v1 removed"))));

    // A version once stored (status.storedVersions) must stay, even unserved.
    let mut was_stored = crd_of(
        "Namespaced",
        json!([version("v0", false, false), version("v1", true, true)]),
    );
    was_stored.status = serde_json::from_value(json!({"storedVersions": ["v0", "v1"]})).unwrap();
    assert_eq!(
        changes(&was_stored, &v1),
        vec![(
            s("v0"),
            Breaking,
            s("stored version v0 removed: objects stored at it could no longer be read")
        )]
    );
    let mut renamed = v1.clone();
    renamed.spec.names.kind = "Gadget".into();
    assert_eq!(
        changes(&v1, &renamed),
        vec![(s(""), Breaking, s("kind renamed from Widget to Gadget"))]
    );
}

#[test]
fn versions_served_side_by_side_need_a_conversion_unless_their_schemas_are_the_same() {
    let v1 = crd_of("Namespaced", json!([version("v1", true, true)]));
    let same_schema = crd_of(
        "Namespaced",
        json!([version("v1", true, true), version("v2", true, false)]),
    );
    assert_eq!(
        changes(&v1, &same_schema),
        vec![],
        "the same schema needs no conversion"
    );
    let other_schema = json!({"name": "v2", "served": true, "storage": false,
        "schema": {"openAPIV3Schema": {"type": "object", "properties": {"spec": {"type": "object"}}}}});
    let unconverted = crd_of(
        "Namespaced",
        json!([version("v1", true, true), other_schema.clone()]),
    );
    let found = changes(&v1, &unconverted);
    assert_eq!(found.len(), 1, "{found:?}");
    assert_eq!(
        (found[0].0.as_str(), found[0].1),
        ("v2", Severity::Breaking)
    );
    assert!(
        found[0]
            .2
            .starts_with("versions v1 and v2 are served without a conversion"),
        "{found:?}"
    );

    let mut converted = unconverted.clone();
    converted.spec.conversion = serde_json::from_value(json!({"strategy": "Webhook", "webhook": {
        "conversionReviewVersions": ["v1"],
        "clientConfig": {"service": {"namespace": "ops", "name": "conv"}}}}))
    .unwrap();
    assert_eq!(changes(&v1, &converted), vec![]);
    let mut nowhere = converted.clone();
    nowhere.spec.conversion = serde_json::from_value(json!({"strategy": "Webhook", "webhook": {
        "conversionReviewVersions": ["v1"], "clientConfig": {}}}))
    .unwrap();
    assert_eq!(
        changes(&v1, &nowhere),
        vec![(
            String::new(),
            Severity::Breaking,
            "conversion strategy Webhook names no webhook to call (neither a service nor a url)"
                .into()
        )]
    );
    // An unserved version converts nothing.
    let mut unserved = other_schema;
    unserved["served"] = json!(false);
    let listed = crd_of("Namespaced", json!([version("v1", true, true), unserved]));
    assert_eq!(changes(&v1, &listed), vec![]);
}

#[test]
fn crds_missing_from_the_build_or_new_in_it() {
    let widget = crd(one("a", json!({"type": "string"})));
    let mut other = widget.clone();
    other.metadata.name = Some("gadgets.example.dev".into());
    let stored = objects(&[json!({})]);

    let report = check(std::slice::from_ref(&widget), &[], Some(&stored));
    assert!(!report.compatible);
    assert_eq!(report.problems.len(), 1);
    assert_eq!(
        report.problems[0].change,
        "the build no longer serves kind Widget"
    );
    assert_eq!(report.problems[0].objects, vec!["ns/o0"]);

    let report = check(
        std::slice::from_ref(&widget),
        &[widget.clone(), other],
        Some(&stored),
    );
    assert_eq!(
        report,
        Report {
            compatible: true,
            problems: vec![]
        }
    );
}

#[test]
fn objects_read_at_another_version_are_not_judged() {
    let before = crd(one("n", json!({"type": "integer", "maximum": 100.0})));
    let after = crd(one("n", json!({"type": "integer", "maximum": 50.0})));
    let mut stored = objects(&[json!({"n": 70})]);
    for object in stored.values_mut().flatten() {
        object.version = "v0".into();
    }
    let report = check(&[before], &[after], Some(&stored));
    assert!(report.compatible);
    assert_eq!(
        report.problems[0].change,
        "maximum lowered from 100 to 50 (no stored object read at v1: check against a cluster)"
    );
}

#[test]
fn problems_are_sorted_and_serialise_lowercase() {
    let before = crd(
        json!({"type": "object", "properties": {"b": {"type": "string"}, "a": {"type": "string"}}}),
    );
    let after = crd(json!({"type": "object"}));
    let paths: Vec<String> = compare(&before, &after)
        .into_iter()
        .map(|p| p.path)
        .collect();
    assert_eq!(paths, vec![".spec.a", ".spec.b"]);
    assert_eq!(
        serde_json::to_value(Severity::Breaking).unwrap(),
        json!("breaking")
    );
    assert!(NOT_READ.starts_with(" (no stored"));
}

#[test]
fn odd_schemas_do_not_panic() {
    let odd = [
        json!({}),
        json!({"type": "array", "items": [{"type": "string"}]}),
        json!({"type": "object", "additionalProperties": false}),
        json!({"type": "string", "pattern": "(", "format": "ipv4", "maxLength": -1}),
        json!({"x-kubernetes-validations": [{"rule": "self.("}, {"rule": "isURL(self)"}]}),
        json!({"type": "integer", "enum": [1, "x", null], "maximum": 1e300}),
    ];
    let values = [
        json!(null),
        json!([1, "x"]),
        json!({"k": {}}),
        json!("(("),
        json!(1.5),
        json!(u64::MAX),
    ];
    for old in &odd {
        for new in &odd {
            let specs: Vec<Value> = values.to_vec();
            let stored = objects(&specs);
            let _ = check(&[crd(old.clone())], &[crd(new.clone())], Some(&stored));
        }
    }
}
