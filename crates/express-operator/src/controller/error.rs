//! Errors of one reconcile. Each variant is meaningful to an operator reading an event or a log;
//! [`Error::kind`] labels the `express_operator_reconcile_errors_total` metric.

/// Errors of one reconcile, each meaningful to an operator reading an event or a log.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("cannot create pod {pod}: {source}")]
    CreatePod { pod: String, source: kube::Error },
    #[error("cannot delete pod {pod}: {source}")]
    DeletePod { pod: String, source: kube::Error },
    #[error("cannot record {what} in the status of {object} before acting: {source}")]
    Record {
        what: String,
        object: String,
        source: kube::Error,
    },
    #[error("cannot keep revision {revision} of {node} as a ControllerRevision: {source}")]
    KeepRevision {
        node: String,
        revision: String,
        source: kube::Error,
    },
    #[error("cannot read ControllerRevision of {node} keeping revision {revision}: {source}")]
    ReadRevision {
        node: String,
        revision: String,
        source: kube::Error,
    },
    #[error("cannot write the status of {object}: {source}")]
    WriteStatus { object: String, source: kube::Error },
    #[error("cannot build the pod of {node}: {why}")]
    BuildPod { node: String, why: String },
    #[error("cannot write the owning operator ring into the status of {object}: {source}")]
    WriteOwner { object: String, source: kube::Error },
    #[error(
        "cannot list the namespace's {kind}s before adopting the tenant from another ring: {source}"
    )]
    ReadForAdoption { kind: String, source: kube::Error },
    #[error(
        "cannot move pod {pod} into this operator ring's watch (its ring label) while adopting the tenant: {source}"
    )]
    Restamp { pod: String, source: kube::Error },
    #[error(
        "cannot record the status of OperatorRelease {release} before moving tenants: {source}"
    )]
    RecordRelease {
        release: String,
        source: kube::Error,
    },
    #[error("cannot move tenant {tenant} to ring {ring} for OperatorRelease {release}: {source}")]
    MoveTenant {
        tenant: String,
        ring: String,
        release: String,
        source: kube::Error,
    },
    #[error(
        "fault {fault} injected after the reconcile did its work (a dev build run with --fault)"
    )]
    InjectedFault { fault: &'static str },
}

impl Error {
    pub fn kind(&self) -> &'static str {
        match self {
            Error::CreatePod { .. } => "create_pod",
            Error::DeletePod { .. } => "delete_pod",
            Error::Record { .. } => "record",
            Error::KeepRevision { .. } => "keep_revision",
            Error::ReadRevision { .. } => "read_revision",
            Error::WriteStatus { .. } => "write_status",
            Error::BuildPod { .. } => "build_pod",
            Error::WriteOwner { .. } => "write_owner",
            Error::ReadForAdoption { .. } => "read_for_adoption",
            Error::Restamp { .. } => "restamp",
            Error::RecordRelease { .. } => "record_release",
            Error::MoveTenant { .. } => "move_tenant",
            Error::InjectedFault { .. } => "injected_fault",
        }
    }
}
