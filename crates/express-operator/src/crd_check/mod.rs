//! `express-operator crd check` (DESIGN section 15): is this build's API compatible with what a
//! cluster has and stores? Its table of contents: read what is installed ([`read`]: CRD files
//! of a directory, or a DC's CRDs and every object it stores of each kind, a page at a time),
//! judge it with the rules of `crd-compat`, and say so ([`show`]: text or JSON) with an exit
//! code: 0 compatible (warnings printed), 1 breaking, 2 bad input, 4 the DC could not be read.

pub mod inputs;
pub mod read;
pub mod show;

use crd_compat::{Problem, Report, Severity, check};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;

pub use inputs::{Against, CheckError, Output, Source};

/// The exit code of a report: 0 compatible, 1 breaking.
pub fn exit_code(report: &Report) -> u8 {
    if report.compatible { 0 } else { 1 }
}

/// Reads what is installed, checks `build` (this build's CRDs) against it, prints the report,
/// and gives the exit code.
pub async fn run(against: &Against, build: &[CustomResourceDefinition], output: Output) -> u8 {
    match checked(against, build).await {
        Ok((report, source)) => {
            print!("{}", show::render(&report, &source, output));
            exit_code(&report)
        }
        Err(error) => {
            eprintln!("express-operator crd check: {error}");
            error.exit_code()
        }
    }
}

/// The report, and what it was made against (for its first line).
async fn checked(
    against: &Against,
    build: &[CustomResourceDefinition],
) -> Result<(Report, Source), CheckError> {
    let installed = match against {
        Against::Directory(dir) => read::from_directory(dir)?,
        Against::Context {
            kubeconfig,
            context,
            operator_namespace,
        } => read::from_context(kubeconfig.as_deref(), context, operator_namespace, build).await?,
    };
    let mut report = check(&installed.crds, build, installed.stored.as_ref());
    if let Some(rings) = &installed.rings {
        report.problems.extend(storage_moved_before_rings_know_it(
            &installed.crds,
            build,
            rings,
        ));
        report.compatible = report
            .problems
            .iter()
            .all(|p| p.severity != Severity::Breaking);
    }
    Ok((report, installed.source))
}

/// A storage version moved while a ring's build does not know the new one (or does not say):
/// that build could not read what is then stored, and a rollback to it would strand data
/// (DESIGN section 18). Breaking, naming the rings.
pub fn storage_moved_before_rings_know_it(
    installed: &[CustomResourceDefinition],
    build: &[CustomResourceDefinition],
    rings: &[(String, Option<Vec<String>>)],
) -> Vec<Problem> {
    let mut problems = Vec::new();
    for new in build {
        let name = new.metadata.name.clone().unwrap_or_default();
        let Some(old) = installed
            .iter()
            .find(|c| c.metadata.name == new.metadata.name)
        else {
            continue;
        };
        let (Some(before), Some(after)) = (read::storage_version(old), read::storage_version(new))
        else {
            continue;
        };
        if before == after {
            continue;
        }
        let behind: Vec<String> = rings
            .iter()
            .filter_map(|(ring, known)| match known {
                Some(known) if known.contains(&after) => None,
                Some(known) => Some(format!("ring {ring} knows {}", known.join(", "))),
                None => Some(format!("ring {ring} does not say what it knows")),
            })
            .collect();
        if behind.is_empty() {
            continue;
        }
        problems.push(Problem {
            crd: name,
            version: after.clone(),
            path: String::new(),
            change: format!(
                "storage version moved from {before} to {after} before every ring's build knows it ({})",
                behind.join("; ")
            ),
            severity: Severity::Breaking,
            objects: Vec::new(),
        });
    }
    problems
}

#[cfg(test)]
mod tests {
    use super::*;

    fn crd(storage: &str) -> CustomResourceDefinition {
        serde_json::from_value(serde_json::json!({
            "metadata": {"name": "backends.express.dev"},
            "spec": {"group": "express.dev", "scope": "Namespaced",
                     "names": {"kind": "Backend", "plural": "backends"},
                     "versions": [
                        {"name": "v1alpha1", "served": true, "storage": storage == "v1alpha1"},
                        {"name": "v1beta1", "served": true, "storage": storage == "v1beta1"}]}
        }))
        .unwrap_or_else(|e| panic!("{e}"))
    }

    fn knows(versions: &[&str]) -> Option<Vec<String>> {
        Some(versions.iter().map(|v| (*v).to_owned()).collect())
    }

    #[test]
    fn a_storage_move_is_breaking_until_every_ring_knows_the_new_version() {
        let (alpha, beta) = (crd("v1alpha1"), crd("v1beta1"));
        let everyone = [
            ("default".to_owned(), knows(&["v1alpha1", "v1beta1"])),
            ("canary".to_owned(), knows(&["v1alpha1", "v1beta1"])),
        ];
        assert!(
            storage_moved_before_rings_know_it(
                std::slice::from_ref(&alpha),
                std::slice::from_ref(&beta),
                &everyone
            )
            .is_empty()
        );
        assert!(
            storage_moved_before_rings_know_it(
                std::slice::from_ref(&beta),
                std::slice::from_ref(&beta),
                &[]
            )
            .is_empty()
        );
        let behind = [
            ("default".to_owned(), knows(&["v1alpha1"])),
            ("canary".to_owned(), knows(&["v1alpha1", "v1beta1"])),
            ("old".to_owned(), None),
        ];
        let problems = storage_moved_before_rings_know_it(&[alpha], &[beta], &behind);
        assert_eq!(problems.len(), 1);
        assert_eq!(problems[0].severity, Severity::Breaking);
        assert_eq!(
            problems[0].change,
            "storage version moved from v1alpha1 to v1beta1 before every ring's build knows it (ring default knows v1alpha1; ring old does not say what it knows)"
        );
    }
}
