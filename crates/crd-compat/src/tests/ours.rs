//! Our own CRDs: each compatible with itself, and their CEL rules judging stored releases.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use serde_json::{Value, json};

use super::*;

/// Our CRDs, as the build generates them.
fn ours() -> Vec<CustomResourceDefinition> {
    express_api::crd::all()
}

#[test]
fn each_of_our_crds_is_compatible_with_itself() {
    let crds = ours();
    for crd in &crds {
        assert_eq!(compare(crd, crd), vec![], "{:?}", crd.metadata.name);
    }
    // Also through YAML, as they are written to and read from files.
    let read: Vec<CustomResourceDefinition> = crds
        .iter()
        .map(|c| serde_yaml::from_str(&express_api::crd::to_yaml(c).unwrap()).unwrap())
        .collect();
    assert_eq!(
        check(&crds, &read, None),
        Report {
            compatible: true,
            problems: vec![]
        }
    );
}

/// The OperatorRelease CRD without its CEL rules, so that ours count as added.
fn without_rules(crd: &CustomResourceDefinition) -> CustomResourceDefinition {
    fn strip(value: &mut Value) {
        match value {
            Value::Object(map) => {
                map.remove("x-kubernetes-validations");
                map.values_mut().for_each(strip);
            }
            Value::Array(items) => items.iter_mut().for_each(strip),
            _ => {}
        }
    }
    let mut value = serde_json::to_value(crd).unwrap();
    strip(&mut value);
    serde_json::from_value(value).unwrap()
}

#[test]
fn our_cel_rules_judge_stored_releases() {
    let crd = ours()
        .into_iter()
        .find(|c| c.metadata.name.as_deref() == Some("operatorreleases.express.dev"))
        .unwrap();
    let version = crd.spec.versions[0].name.clone();
    let release = |name: &str, spec: Value| Stored {
        name: format!("ns/{name}"),
        version: version.clone(),
        object: json!({"apiVersion": "express.dev/v1alpha1", "kind": "OperatorRelease",
                       "metadata": {"name": name, "namespace": "ns"}, "spec": spec}),
    };
    let good = release(
        "good",
        json!({"fromRing": "a", "toRing": "b", "waves": [{"tenants": 2}, {"percent": 100}]}),
    );
    let bad = release(
        "bad",
        json!({"fromRing": "a", "toRing": "a", "waves": [{"tenants": 2, "percent": 5}, {"percent": 100}]}),
    );
    let old = without_rules(&crd);

    let stored = BTreeMap::from([(crd.metadata.name.clone().unwrap(), vec![good.clone()])]);
    let report = check(
        std::slice::from_ref(&old),
        std::slice::from_ref(&crd),
        Some(&stored),
    );
    assert!(report.compatible, "{report:#?}");
    assert!(
        report
            .problems
            .iter()
            .any(|p| p.change == "CEL rule added: self.fromRing != self.toRing")
    );
    assert!(
        report
            .problems
            .iter()
            .any(|p| p.change == "CEL rule added: has(self.tenants) != has(self.percent)")
    );
    assert!(
        report
            .problems
            .iter()
            .all(|p| p.severity == Severity::Warning && !p.change.contains("not judged"))
    );

    let stored = BTreeMap::from([(crd.metadata.name.clone().unwrap(), vec![good, bad])]);
    let report = check(&[old], &[crd], Some(&stored));
    assert!(!report.compatible);
    let named: Vec<&String> = report.problems.iter().flat_map(|p| &p.objects).collect();
    assert_eq!(
        named,
        vec![
            "ns/bad: .spec (fails: fromRing and toRing must differ)",
            "ns/bad: .spec.waves[0] (fails: a wave gives exactly one of tenants and percent)",
        ]
    );
}
