//! What a check is asked (against what, in which output), what it was made against, and why
//! it could not be made: the words [`super::read`], [`super::show`] and the table of contents
//! share.

use std::path::PathBuf;

/// Where the installed CRDs come from.
#[derive(Clone, Debug)]
pub enum Against {
    /// CRD YAML files, as `express-operator crd --output-dir` writes them.
    Directory(PathBuf),
    /// A kubeconfig context: its CRDs and every object it stores of each kind, and what each
    /// ring's build knows (the Leases of `operator_namespace`).
    Context {
        kubeconfig: Option<PathBuf>,
        context: String,
        operator_namespace: String,
    },
}

/// How the output looks.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, clap::ValueEnum)]
pub enum Output {
    #[default]
    Text,
    Json,
}

/// Why the check could not be made.
#[derive(Debug, thiserror::Error)]
pub enum CheckError {
    /// An unreadable or non-CRD file, a CRD of another group, an unknown context, a DC
    /// without this API: nothing to compare with.
    #[error("{0}")]
    BadInput(String),
    /// The DC did not answer, or refused a read.
    #[error("{0}")]
    Unreadable(String),
}

impl CheckError {
    pub fn exit_code(&self) -> u8 {
        match self {
            CheckError::BadInput(_) => 2,
            CheckError::Unreadable(_) => 4,
        }
    }
}

/// What the check was made against, for the report's first line.
#[derive(Clone, Debug)]
pub enum Source {
    Directory(String),
    Context(String),
}
