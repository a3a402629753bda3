//! What a build does with its own CRDs in a cluster (DESIGN section 15), decided from what the
//! cluster has and stores: apply them (compatible), leave them (a newer build applied the
//! cluster's, and they are a compatible successor of the build's: a build never downgrades a
//! CRD), or refuse (breaking). And the other question a running build asks: which fields that
//! it writes do the installed CRDs lack?

use std::collections::BTreeMap;

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;

use crate::property::{self, FIELD_REMOVED};
use crate::report::{Problem, Report, Severity};
use crate::{Stored, check, name_of, sorted, stored};

/// The decision, with the report it rests on.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Upgrade {
    /// Compatible (warnings in the report): apply the build's CRDs.
    Apply(Report),
    /// The cluster's CRDs were applied by build `newer`, later than this one, and they are a
    /// compatible successor of this build's: leave them.
    Leave { newer: String, report: Report },
    /// Applying would break what the cluster serves or stores (or the cluster's newer CRDs
    /// are no successor of this build's): write nothing.
    Refuse(Report),
}

/// Decides what a build of version `build_version` does with its CRDs. `applied_by` is the
/// annotation under which a build records its version on the CRDs it applies.
pub fn upgrade(
    installed: &[CustomResourceDefinition],
    build: &[CustomResourceDefinition],
    stored: Option<&BTreeMap<String, Vec<Stored>>>,
    build_version: &str,
    applied_by: &str,
) -> Upgrade {
    if let Some(newer) = newer_build(installed, build_version, applied_by) {
        // The step the newer build took, from this build's CRDs to the cluster's.
        let report = check(build, installed, None);
        return if report.compatible {
            Upgrade::Leave { newer, report }
        } else {
            Upgrade::Refuse(report)
        };
    }
    let report = check(installed, build, stored);
    if report.compatible {
        Upgrade::Apply(report)
    } else {
        Upgrade::Refuse(report)
    }
}

/// The latest build recorded on an installed CRD, if it is later than `build_version` (both
/// read as semantic versions; anything else is not "later").
fn newer_build(
    installed: &[CustomResourceDefinition],
    build_version: &str,
    applied_by: &str,
) -> Option<String> {
    let ours = semver::Version::parse(build_version).ok()?;
    installed
        .iter()
        .filter_map(|crd| crd.metadata.annotations.as_ref()?.get(applied_by))
        .filter_map(|text| Some((semver::Version::parse(text).ok()?, text)))
        .filter(|(version, _)| *version > ours)
        .max_by(|a, b| a.0.cmp(&b.0))
        .map(|(_, text)| text.clone())
}

/// What the build's CRDs declare that the installed ones lack: a CRD, a served version, a
/// field. A build writing those loses them (the API server prunes unknown fields).
pub fn missing_fields(
    installed: &[CustomResourceDefinition],
    build: &[CustomResourceDefinition],
) -> Vec<Problem> {
    let mut problems = Vec::new();
    for ours in build {
        let name = name_of(ours);
        let Some(theirs) = installed.iter().find(|i| name_of(i) == name) else {
            problems.push(missing(name, "", "CRD not installed"));
            continue;
        };
        for version in ours.spec.versions.iter().filter(|v| v.served) {
            if !theirs
                .spec
                .versions
                .iter()
                .any(|v| v.served && v.name == version.name)
            {
                problems.push(missing(name, &version.name, "version not served"));
            }
        }
        problems.extend(
            property::compare(ours, theirs)
                .into_iter()
                .filter(|f| f.change == FIELD_REMOVED)
                .map(|f| {
                    let mut problem = stored::settle(name, f, None);
                    problem.change = "field not installed".to_owned();
                    problem
                }),
        );
    }
    sorted(problems)
}

fn missing(crd: &str, version: &str, change: &str) -> Problem {
    Problem {
        crd: crd.to_owned(),
        version: version.to_owned(),
        path: String::new(),
        change: change.to_owned(),
        severity: Severity::Breaking,
        objects: Vec::new(),
    }
}
