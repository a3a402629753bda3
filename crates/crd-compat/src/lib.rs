//! Is a build's CRD compatible with the one a cluster has, and with the objects it stores?
//! (DESIGN.md section 15: the API travels with the build.)
//!
//! A pure library: CRDs and stored objects in, a report out; no I/O, no clock. The rules are
//! crdify's, learned not copied, in rooms by scope: `crd.rs` for what changes the resource
//! (scope, kind, served and stored versions), `property.rs` for what changes a field (removed,
//! newly required, type, enum, bounds, pattern, format, default, CEL rules). A rule only
//! describes a change and the question it puts to stored values; `stored.rs` puts the question
//! (with `cel.rs` for CEL rules and patterns, `format.rs` for formats) and settles how bad the
//! change is: a narrowing no stored object violates is a warning, one that some object violates
//! is breaking and names it.
//!
//! `upgrade` puts the report to use: what a build does with its own CRDs in a cluster (apply,
//! leave a newer build's, refuse), and which fields it writes the installed CRDs lack.
//!
//! `validation` is the same CEL evaluator facing the other way: a server admitting a write
//! (kubesim) evaluates a schema node's `x-kubernetes-validations` with it, as the API server does.

mod cel;
mod crd;
mod finding;
mod format;
mod path;
mod property;
mod report;
mod stored;
mod upgrade;
pub mod validation;

use std::collections::BTreeMap;

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
pub use report::{Problem, Report, Severity, Stored};
pub use upgrade::{Upgrade, missing_fields, upgrade};

fn name_of(crd: &CustomResourceDefinition) -> &str {
    crd.metadata.name.as_deref().unwrap_or_default()
}

/// Every finding of every rule for one CRD pair.
fn findings(
    old: &CustomResourceDefinition,
    new: &CustomResourceDefinition,
) -> Vec<finding::Finding> {
    let mut all = crd::compare(old, new);
    all.extend(property::compare(old, new));
    all
}

fn sorted(mut problems: Vec<Problem>) -> Vec<Problem> {
    problems.sort_by(|a, b| {
        (&a.crd, &a.version, &a.path, &a.change).cmp(&(&b.crd, &b.version, &b.path, &b.change))
    });
    problems
}

/// Compares the CRDs installed (old) with a build's (new), matched by name. `stored`: per CRD
/// name, the objects the cluster stores (`None`: none were read, as against a directory of
/// files). With `Some`, a CRD absent from the map is one the cluster stores no object of.
pub fn check(
    installed: &[CustomResourceDefinition],
    build: &[CustomResourceDefinition],
    stored: Option<&BTreeMap<String, Vec<Stored>>>,
) -> Report {
    let mut problems = Vec::new();
    for old in installed {
        let name = name_of(old);
        let objects: Option<&[Stored]> =
            stored.map(|s| s.get(name).map(Vec::as_slice).unwrap_or_default());
        let Some(new) = build.iter().find(|b| name_of(b) == name) else {
            problems.push(Problem {
                crd: name.to_string(),
                version: String::new(),
                path: String::new(),
                change: format!("the build no longer serves kind {}", old.spec.names.kind),
                severity: Severity::Breaking,
                objects: objects
                    .unwrap_or_default()
                    .iter()
                    .map(|o| o.name.clone())
                    .collect(),
            });
            continue;
        };
        problems.extend(
            findings(old, new)
                .into_iter()
                .map(|f| stored::settle(name, f, objects)),
        );
    }
    let problems = sorted(problems);
    Report {
        compatible: problems.iter().all(|p| p.severity != Severity::Breaking),
        problems,
    }
}

/// The rules alone, one CRD pair, before any stored object is looked at.
pub fn compare(old: &CustomResourceDefinition, new: &CustomResourceDefinition) -> Vec<Problem> {
    let name = name_of(old);
    sorted(
        findings(old, new)
            .into_iter()
            .map(|f| stored::settle(name, f, None))
            .collect(),
    )
}

#[cfg(test)]
mod tests;
