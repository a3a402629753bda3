//! Table tests: every rule beside its compatible twin, on small CRDs built by hand
//! ([`property_rules`], [`crd_rules`]), then our own CRDs and their CEL rules ([`ours`]), and
//! property tests ([`properties`]). This file holds the helpers they share.

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

mod crd_rules;
mod ours;
mod properties;
mod property_rules;
mod upgrade;
