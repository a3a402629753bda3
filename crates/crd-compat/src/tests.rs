//! Table tests: every rule beside its compatible twin, on small CRDs built by hand, then our own
//! CRDs and their CEL rules.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::BTreeMap;

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use serde_json::{Value, json};

use super::*;

const NAME: &str = "widgets.example.dev";

/// A CRD of one kind from its versions, each `{name, served, storage, schema}`.
fn crd_of(scope: &str, versions: Value) -> CustomResourceDefinition {
    serde_json::from_value(json!({
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": NAME},
        "spec": {
            "group": "example.dev",
            "names": {"kind": "Widget", "plural": "widgets"},
            "scope": scope,
            "versions": versions,
        }
    }))
    .unwrap()
}

/// A namespaced CRD with one version, v1, whose `.spec` has this schema.
fn crd(spec: Value) -> CustomResourceDefinition {
    crd_of(
        "Namespaced",
        json!([{"name": "v1", "served": true, "storage": true, "schema": {"openAPIV3Schema": {
            "type": "object",
            "properties": {"metadata": {"type": "object"}, "spec": spec},
        }}}]),
    )
}

/// `{type: object, properties: {name: schema}}`.
fn one(name: &str, schema: Value) -> Value {
    json!({"type": "object", "properties": {name: schema}})
}

/// Stored objects at v1 from their `.spec`, named `ns/o0`, `ns/o1`, ...
fn objects(specs: &[Value]) -> BTreeMap<String, Vec<Stored>> {
    let stored = specs
        .iter()
        .enumerate()
        .map(|(i, spec)| Stored {
            name: format!("ns/o{i}"),
            version: "v1".to_string(),
            object: json!({"metadata": {"name": format!("o{i}")}, "spec": spec}),
        })
        .collect();
    BTreeMap::from([(NAME.to_string(), stored)])
}

struct Row {
    name: &'static str,
    old: Value,
    new: Value,
    /// `.spec` of each stored object; `None`: none read.
    stored: Option<Vec<Value>>,
    /// (path, severity, text the change starts with, objects named)
    want: Vec<(&'static str, Severity, &'static str, Vec<&'static str>)>,
}

fn row(name: &'static str, old: Value, new: Value) -> Row {
    Row {
        name,
        old,
        new,
        stored: None,
        want: Vec::new(),
    }
}

impl Row {
    fn stored(mut self, specs: Vec<Value>) -> Self {
        self.stored = Some(specs);
        self
    }
    fn wants(
        mut self,
        path: &'static str,
        severity: Severity,
        change: &'static str,
        objects: Vec<&'static str>,
    ) -> Self {
        self.want.push((path, severity, change, objects));
        self
    }
}

fn run(rows: Vec<Row>) {
    for row in rows {
        let stored = row.stored.as_deref().map(objects);
        let report = check(&[crd(row.old)], &[crd(row.new)], stored.as_ref());
        let got: Vec<_> = report
            .problems
            .iter()
            .map(|p| {
                (
                    p.path.as_str(),
                    p.severity,
                    p.change.as_str(),
                    p.objects.clone(),
                )
            })
            .collect();
        assert_eq!(got.len(), row.want.len(), "{}: {got:#?}", row.name);
        for ((path, severity, change, objects), want) in got.iter().zip(&row.want) {
            assert_eq!(
                (*path, *severity),
                (want.0, want.1),
                "{}: {change}",
                row.name
            );
            assert!(
                change.starts_with(want.2),
                "{}: {change:?} does not start with {:?}",
                row.name,
                want.2
            );
            assert_eq!(objects, &want.3, "{}", row.name);
        }
        let breaking = row.want.iter().any(|w| w.1 == Severity::Breaking);
        assert_eq!(report.compatible, !breaking, "{}", row.name);
        assert!(
            report
                .problems
                .iter()
                .all(|p| p.crd == NAME && p.version == "v1"),
            "{}",
            row.name
        );
    }
}

const NOT_READ: &str = " (no stored objects read: check against a cluster)";

#[test]
fn bounds() {
    use Severity::{Breaking, Warning};
    let max = |m: f64| one("percent", json!({"type": "integer", "maximum": m}));
    run(vec![
        row("maximum lowered, none read", max(100.0), max(50.0)).wants(
            ".spec.percent",
            Warning,
            "maximum lowered from 100 to 50 (no stored objects read: check against a cluster)",
            vec![],
        ),
        row("maximum lowered, one violates", max(100.0), max(50.0))
            .stored(vec![json!({"percent": 70}), json!({"percent": 20})])
            .wants(
                ".spec.percent",
                Breaking,
                "maximum lowered from 100 to 50",
                vec!["ns/o0: .spec.percent (value 70)"],
            ),
        row("maximum lowered, all within", max(100.0), max(50.0))
            .stored(vec![json!({"percent": 20}), json!({})])
            .wants(
                ".spec.percent",
                Warning,
                "maximum lowered from 100 to 50",
                vec![],
            ),
        row("maximum raised", max(50.0), max(100.0)),
        row(
            "exclusiveMaximum turned on",
            max(100.0),
            one(
                "percent",
                json!({"type": "integer", "maximum": 100.0, "exclusiveMaximum": true}),
            ),
        )
        .stored(vec![json!({"percent": 100})])
        .wants(
            ".spec.percent",
            Breaking,
            "maximum 100 made exclusive",
            vec!["ns/o0: .spec.percent (value 100)"],
        ),
        row(
            "minimum raised",
            one("n", json!({"type": "integer", "minimum": 0.0})),
            one("n", json!({"type": "integer", "minimum": 1.0})),
        )
        .stored(vec![json!({"n": 0})])
        .wants(
            ".spec.n",
            Breaking,
            "minimum raised from 0 to 1",
            vec!["ns/o0: .spec.n (value 0)"],
        ),
        row(
            "minimum lowered",
            one("n", json!({"type": "integer", "minimum": 1.0})),
            one("n", json!({"type": "integer", "minimum": 0.0})),
        ),
        row(
            "maxLength set",
            one("s", json!({"type": "string"})),
            one("s", json!({"type": "string", "maxLength": 3})),
        )
        .stored(vec![json!({"s": "abcd"}), json!({"s": "abc"})])
        .wants(
            ".spec.s",
            Breaking,
            "maxLength set to 3",
            vec!["ns/o0: .spec.s (value \"abcd\")"],
        ),
        row(
            "maxLength removed",
            one("s", json!({"type": "string", "maxLength": 3})),
            one("s", json!({"type": "string"})),
        ),
        row(
            "minItems raised",
            one(
                "l",
                json!({"type": "array", "items": {"type": "string"}, "minItems": 0}),
            ),
            one(
                "l",
                json!({"type": "array", "items": {"type": "string"}, "minItems": 1}),
            ),
        )
        .stored(vec![json!({"l": ["a"]})])
        .wants(".spec.l", Warning, "minItems raised from 0 to 1", vec![]),
        row(
            "maxItems lowered",
            one(
                "l",
                json!({"type": "array", "items": {"type": "string"}, "maxItems": 3}),
            ),
            one(
                "l",
                json!({"type": "array", "items": {"type": "string"}, "maxItems": 1}),
            ),
        )
        .wants(".spec.l", Warning, "maxItems lowered from 3 to 1", vec![]),
    ]);
}

#[test]
fn nested_places() {
    use Severity::{Breaking, Warning};
    let waves = |max: f64| {
        one(
            "waves",
            json!({"type": "array", "items": one("percent", json!({"type": "integer", "maximum": max}))}),
        )
    };
    let labels = |len: i64| {
        one(
            "labels",
            json!({"type": "object", "additionalProperties": {"type": "string", "maxLength": len}}),
        )
    };
    run(vec![
        row("maximum in items", waves(100.0), waves(50.0))
            .stored(vec![json!({"waves": [{"percent": 10}, {"percent": 60}]})])
            .wants(
                ".spec.waves[*].percent",
                Breaking,
                "maximum lowered",
                vec!["ns/o0: .spec.waves[1].percent (value 60)"],
            ),
        row("maxLength in map values", labels(10), labels(2)).wants(
            ".spec.labels.*",
            Warning,
            "maxLength lowered from 10 to 2",
            vec![],
        ),
        row("maxLength in map values, stored", labels(10), labels(2))
            .stored(vec![json!({"labels": {"a": "xyz", "b": "x"}})])
            .wants(
                ".spec.labels.*",
                Breaking,
                "maxLength lowered from 10 to 2",
                vec!["ns/o0: .spec.labels.a (value \"xyz\")"],
            ),
    ]);
}

#[test]
fn fields_types_enums() {
    use Severity::{Breaking, Warning};
    let ab =
        json!({"type": "object", "properties": {"a": {"type": "string"}, "b": {"type": "string"}}});
    let a = json!({"type": "object", "properties": {"a": {"type": "string"}}});
    let required = |r: Value| json!({"type": "object", "required": r, "properties": {"a": {"type": "string"}, "b": {"type": "string"}}});
    let color = |e: Value| one("color", json!({"type": "string", "enum": e}));
    run(vec![
        row("field removed", ab.clone(), a.clone())
            .stored(vec![json!({"b": "x"}), json!({"a": "y"})])
            .wants(".spec.b", Breaking, "field removed", vec!["ns/o0: .spec.b (value \"x\")"]),
        row("field added, optional", a.clone(), ab.clone()),
        row("required added", required(json!(["a"])), required(json!(["a", "b"])))
            .stored(vec![json!({"a": "x"}), json!({"a": "x", "b": "y"})])
            .wants(".spec.b", Breaking, "required field added", vec!["ns/o0: .spec (no b)"]),
        row("required kept", required(json!(["a"])), required(json!(["a"]))),
        row(
            "required added with a default",
            one("b", json!({"type": "string"})),
            json!({"type": "object", "required": ["b"], "properties": {"b": {"type": "string", "default": "x"}}}),
        )
        .wants(".spec.b", Warning, "default added: \"x\"", vec![])
        .wants(".spec.b", Warning, "required field added, with a default", vec![]),
        row("type changed", one("n", json!({"type": "string"})), one("n", json!({"type": "integer"})))
            .stored(vec![json!({"n": "7"}), json!({"n": 7})])
            .wants(".spec.n", Breaking, "type changed from string to integer", vec!["ns/o0: .spec.n (value \"7\")"]),
        row("type kept", one("n", json!({"type": "string"})), one("n", json!({"type": "string"}))),
        row("enum value removed", color(json!(["red", "blue"])), color(json!(["red"])))
            .stored(vec![json!({"color": "blue"}), json!({"color": "red"})])
            .wants(".spec.color", Breaking, "enum values removed: \"blue\"", vec!["ns/o0: .spec.color (value \"blue\")"]),
        row("enum value added", color(json!(["red"])), color(json!(["red", "blue"]))),
        row("enum introduced", one("color", json!({"type": "string"})), color(json!(["red"])))
            .wants(".spec.color", Breaking, "enum introduced: \"red\"", vec![]),
        row(
            "default changed",
            one("n", json!({"type": "integer", "default": 1})),
            one("n", json!({"type": "integer", "default": 2})),
        )
        .stored(vec![json!({})])
        .wants(".spec.n", Warning, "default changed from 1 to 2", vec![]),
    ]);
}

#[test]
fn text_constraints() {
    use Severity::{Breaking, Warning};
    let s = |extra: Value| {
        let mut schema = json!({"type": "string"});
        if let (Some(into), Some(from)) = (schema.as_object_mut(), extra.as_object()) {
            into.extend(from.clone());
        }
        one("s", schema)
    };
    run(vec![
        row(
            "pattern added, none read",
            s(json!({})),
            s(json!({"pattern": "^[a-z]+$"})),
        )
        .wants(
            ".spec.s",
            Warning,
            "pattern added: ^[a-z]+$ (no stored objects read",
            vec![],
        ),
        row(
            "pattern added, one fails",
            s(json!({})),
            s(json!({"pattern": "^[a-z]+$"})),
        )
        .stored(vec![json!({"s": "Abc"}), json!({"s": "abc"})])
        .wants(
            ".spec.s",
            Breaking,
            "pattern added: ^[a-z]+$",
            vec!["ns/o0: .spec.s (value \"Abc\")"],
        ),
        row(
            "pattern removed",
            s(json!({"pattern": "^[a-z]+$"})),
            s(json!({})),
        ),
        row(
            "pattern changed",
            s(json!({"pattern": "^[a-z]+$"})),
            s(json!({"pattern": "^[a-c]+$"})),
        )
        .stored(vec![json!({"s": "abc"})])
        .wants(
            ".spec.s",
            Warning,
            "pattern changed from ^[a-z]+$ to ^[a-c]+$",
            vec![],
        ),
        row(
            "pattern this engine lacks",
            s(json!({})),
            s(json!({"pattern": "^(?=a)a$"})),
        )
        .stored(vec![json!({"s": "a"})])
        .wants(
            ".spec.s",
            Warning,
            "pattern added: ^(?=a)a$ (1 stored value(s) not judged",
            vec![],
        ),
        row(
            "format added",
            s(json!({})),
            s(json!({"format": "date-time"})),
        )
        .stored(vec![json!({"s": "yesterday"})])
        .wants(
            ".spec.s",
            Breaking,
            "format added: date-time",
            vec!["ns/o0: .spec.s (value \"yesterday\")"],
        ),
        row(
            "format added, not checked here",
            s(json!({})),
            s(json!({"format": "hostname"})),
        )
        .stored(vec![json!({"s": "a.b"})])
        .wants(
            ".spec.s",
            Warning,
            "format added: hostname (1 stored value(s) not judged",
            vec![],
        ),
    ]);
}

#[test]
fn cel_rules() {
    use Severity::{Breaking, Warning};
    let rules = |rules: Value| {
        json!({"type": "object", "x-kubernetes-validations": rules,
               "properties": {"from": {"type": "string"}, "to": {"type": "string"}}})
    };
    let none = rules(json!([]));
    let differ =
        rules(json!([{"rule": "self.from != self.to", "message": "from and to must differ"}]));
    run(vec![
        row("rule added, one fails", none.clone(), differ.clone())
            .stored(vec![
                json!({"from": "a", "to": "a"}),
                json!({"from": "a", "to": "b"}),
            ])
            .wants(
                ".spec",
                Breaking,
                "CEL rule added: self.from != self.to",
                vec!["ns/o0: .spec (fails: from and to must differ)"],
            ),
        row("rule added, all pass", none.clone(), differ.clone())
            .stored(vec![json!({"from": "a", "to": "b"})])
            .wants(
                ".spec",
                Warning,
                "CEL rule added: self.from != self.to",
                vec![],
            ),
        row("rule added, none read", none.clone(), differ.clone()).wants(
            ".spec",
            Warning,
            "CEL rule added: self.from != self.to (no stored objects read",
            vec![],
        ),
        row("rule kept", differ.clone(), differ.clone())
            .stored(vec![json!({"from": "a", "to": "a"})]),
        row("rule removed", differ.clone(), none.clone()),
        row(
            "rule changed",
            differ.clone(),
            rules(json!([{"rule": "self.from < self.to", "message": "from and to must differ"}])),
        )
        .stored(vec![json!({"from": "b", "to": "a"})])
        .wants(
            ".spec",
            Breaking,
            "CEL rule changed from self.from != self.to to self.from < self.to",
            vec!["ns/o0: .spec (fails: from and to must differ)"],
        ),
        row(
            "transition rule added",
            none.clone(),
            rules(json!([{"rule": "self.from == oldSelf.from"}])),
        )
        .stored(vec![json!({"from": "a"})])
        .wants(
            ".spec",
            Warning,
            "CEL rule added: self.from == oldSelf.from (a transition rule",
            vec![],
        ),
    ]);
}

#[test]
fn metadata_is_not_walked() {
    let with_metadata = |m: Value| {
        crd_of(
            "Namespaced",
            json!([{"name": "v1", "served": true, "storage": true,
                    "schema": {"openAPIV3Schema": {"type": "object", "properties": {"metadata": m}}}}]),
        )
    };
    let before =
        with_metadata(json!({"type": "object", "properties": {"name": {"type": "string"}}}));
    let after = with_metadata(
        json!({"type": "object", "properties": {"name": {"type": "string", "maxLength": 5}}}),
    );
    assert_eq!(compare(&before, &after), vec![]);
}

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

mod properties {
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
                prop::collection::btree_map(prop::sample::select(KEYS.to_vec()), inner, 0..4)
                    .prop_map(|map| Value::Object(
                        map.into_iter().map(|(k, v)| (k.to_owned(), v)).collect()
                    )),
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
}
