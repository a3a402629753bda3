//! Why a kind of ours could not be read: its CRD is not installed (the one wording, for every
//! verb and the driver), or the API server said something else.

/// A read of one of our kinds that failed.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum Unread {
    /// The API server does not serve the kind (404 on its list or get): an operator build
    /// older than the kind, or CRDs not applied.
    #[error(
        "the {0} CRD is not installed: apply this build's CRDs (deploy/crds, or the chart's crds/) first"
    )]
    NotInstalled(&'static str),
    /// Any other refusal or failure, worded with what was read.
    #[error("{0}")]
    Failed(String),
}

impl Unread {
    /// Sorts a failed read of `kind` in `namespace`.
    pub fn of(error: &kube::Error, kind: &'static str, namespace: &str) -> Unread {
        match error {
            kube::Error::Api(status) if status.code == 404 => Unread::NotInstalled(kind),
            _ => Unread::Failed(format!(
                "cannot read {kind}s in namespace {namespace}: {error}"
            )),
        }
    }
}
