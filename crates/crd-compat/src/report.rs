//! The answer's types: a problem per change, the stored objects it is judged against, and the
//! verdict. Kept out of the crate root so the rooms that build them need not import it.

use serde::Serialize;

/// How bad a change is.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Severity {
    Warning,
    Breaking,
}

/// One change of a CRD and what it does.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Problem {
    /// The CRD's name, e.g. "operatorreleases.express.dev".
    pub crd: String,
    /// "v1alpha1", or "" for a CRD-wide change (scope).
    pub version: String,
    /// The field: ".spec.waves[*].percent", "" for CRD-wide.
    pub path: String,
    /// In words, e.g. "maximum lowered from 100 to 50".
    pub change: String,
    pub severity: Severity,
    /// Stored objects it concerns: "namespace/name: .spec.x (value 70)"; empty when none or
    /// not read.
    pub objects: Vec<String>,
}

impl Problem {
    /// `crd version path: change`, the one wording of a problem's first line.
    pub fn headline(&self) -> String {
        let mut line = self.crd.clone();
        for part in [&self.version, &self.path] {
            if !part.is_empty() {
                line.push(' ');
                line.push_str(part);
            }
        }
        format!("{line}: {}", self.change)
    }
}

/// One stored object of a CRD's kind, as a cluster holds it.
#[derive(Clone, Debug, PartialEq)]
pub struct Stored {
    /// "namespace/name", or "name" when cluster-scoped.
    pub name: String,
    /// The version it was read at, e.g. "v1alpha1".
    pub version: String,
    pub object: serde_json::Value,
}

/// The verdict: compatible when no problem is Breaking.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Report {
    pub compatible: bool,
    pub problems: Vec<Problem>,
}
