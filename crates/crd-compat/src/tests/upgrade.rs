//! What a build does with its CRDs: apply, leave a newer build's, refuse; and the fields a
//! running build writes that the installed CRDs lack.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use serde_json::{Value, json};

use super::*;

const APPLIED_BY: &str = "example.dev/applied-by-build";

fn applied_by(mut crd: CustomResourceDefinition, version: &str) -> CustomResourceDefinition {
    crd.metadata.annotations = Some(BTreeMap::from([(
        APPLIED_BY.to_string(),
        version.to_string(),
    )]));
    crd
}

fn name(length: Option<i64>) -> Value {
    let mut field = json!({"type": "string"});
    if let Some(max) = length {
        field["maxLength"] = json!(max);
    }
    one("name", field)
}

fn two_fields() -> Value {
    json!({"type": "object", "properties": {
        "name": {"type": "string"}, "recovery": {"type": "boolean"}}})
}

#[test]
fn a_build_that_adds_an_optional_field_applies() {
    let decided = upgrade(
        &[crd(name(None))],
        &[crd(two_fields())],
        Some(&objects(&[json!({"name": "a"})])),
        "0.2.0",
        APPLIED_BY,
    );
    assert_eq!(
        decided,
        Upgrade::Apply(Report {
            compatible: true,
            problems: vec![]
        })
    );
}

#[test]
fn a_build_whose_bound_a_stored_object_violates_is_refused_naming_it() {
    let decided = upgrade(
        &[crd(name(Some(100)))],
        &[crd(name(Some(5)))],
        Some(&objects(&[
            json!({"name": "much-too-long"}),
            json!({"name": "ok"}),
        ])),
        "0.2.0",
        APPLIED_BY,
    );
    let Upgrade::Refuse(report) = decided else {
        panic!("{decided:?}")
    };
    assert_eq!(report.problems.len(), 1);
    assert_eq!(
        report.problems[0].objects,
        vec!["ns/o0: .spec.name (value \"much-too-long\")"]
    );
    // Its twin: the same tightening nobody violates is a warning, and applies.
    let twin = upgrade(
        &[crd(name(Some(100)))],
        &[crd(name(Some(5)))],
        Some(&objects(&[json!({"name": "ok"})])),
        "0.2.0",
        APPLIED_BY,
    );
    assert!(
        matches!(twin, Upgrade::Apply(ref r) if r.compatible && r.problems.len() == 1),
        "{twin:?}"
    );
}

#[test]
fn an_older_build_leaves_a_newer_builds_compatible_crds() {
    let installed = [applied_by(crd(two_fields()), "0.3.0")];
    let decided = upgrade(&installed, &[crd(name(None))], None, "0.2.0", APPLIED_BY);
    assert!(
        matches!(decided, Upgrade::Leave { ref newer, .. } if newer == "0.3.0"),
        "{decided:?}"
    );
    // Without the newer build's mark, the same CRDs are judged as any: dropping a field breaks.
    let unmarked = upgrade(
        &[crd(two_fields())],
        &[crd(name(None))],
        None,
        "0.2.0",
        APPLIED_BY,
    );
    assert!(matches!(unmarked, Upgrade::Refuse(_)), "{unmarked:?}");
    // A mark that is no later (or no version) is no reason to leave them.
    for mark in ["0.2.0", "0.1.9", "not-a-version"] {
        let installed = [applied_by(crd(two_fields()), mark)];
        let decided = upgrade(&installed, &[crd(name(None))], None, "0.2.0", APPLIED_BY);
        assert!(matches!(decided, Upgrade::Refuse(_)), "{mark}: {decided:?}");
    }
}

#[test]
fn newer_crds_that_are_no_successor_of_the_builds_are_refused() {
    // The newer build removed a field this one writes.
    let installed = [applied_by(crd(name(None)), "0.3.0")];
    let decided = upgrade(&installed, &[crd(two_fields())], None, "0.2.0", APPLIED_BY);
    let Upgrade::Refuse(report) = decided else {
        panic!("{decided:?}")
    };
    assert_eq!(report.problems[0].path, ".spec.recovery");
}

#[test]
fn missing_fields_name_the_crd_the_version_and_the_field() {
    assert!(missing_fields(&[crd(two_fields())], &[crd(two_fields())]).is_empty());
    let missing = missing_fields(&[crd(name(None))], &[crd(two_fields())]);
    let got: Vec<_> = missing
        .iter()
        .map(|p| (p.path.as_str(), p.change.as_str()))
        .collect();
    assert_eq!(got, vec![(".spec.recovery", "field not installed")]);
    // A field the installed CRDs have and the build does not is not missing.
    assert!(missing_fields(&[crd(two_fields())], &[crd(name(None))]).is_empty());
    assert_eq!(
        missing_fields(&[], &[crd(name(None))])[0].change,
        "CRD not installed"
    );
    let v2 = crd_of(
        "Namespaced",
        json!([{"name": "v1", "served": true, "storage": false},
               {"name": "v2", "served": true, "storage": true}]),
    );
    let v1 = crd_of(
        "Namespaced",
        json!([{"name": "v1", "served": true, "storage": true}]),
    );
    let missing = missing_fields(&[v1], &[v2]);
    assert_eq!(
        (missing[0].version.as_str(), missing[0].change.as_str()),
        ("v2", "version not served")
    );
}
