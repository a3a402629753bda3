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
    /// The API's answer that failed the reconcile, if it was a request that failed.
    fn request_error(&self) -> Option<&kube::Error> {
        match self {
            Error::CreatePod { source, .. }
            | Error::DeletePod { source, .. }
            | Error::Record { source, .. }
            | Error::KeepRevision { source, .. }
            | Error::ReadRevision { source, .. }
            | Error::WriteStatus { source, .. }
            | Error::WriteOwner { source, .. }
            | Error::ReadForAdoption { source, .. }
            | Error::Restamp { source, .. }
            | Error::RecordRelease { source, .. }
            | Error::MoveTenant { source, .. } => Some(source),
            Error::BuildPod { .. } | Error::InjectedFault { .. } => None,
        }
    }

    /// How the runner retries it: the control plane's own failure (a 5xx, 429, no answer) is
    /// no fault of the tenant's, and its retries stay close so that the tenant moves again
    /// soon after the control plane is back.
    pub fn failure(&self) -> crate::runner::Failure {
        match self.request_error() {
            Some(error) if crate::api_trouble::is_infrastructure_error(error) => {
                crate::runner::Failure::ControlPlane
            }
            _ => crate::runner::Failure::Work,
        }
    }

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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::runner::Failure;

    fn answered(code: u16) -> kube::Error {
        kube::Error::Api(
            kube::core::Status::failure("answer", "Reason")
                .with_code(code)
                .boxed(),
        )
    }

    #[test]
    fn the_control_plane_failing_a_request_is_told_from_the_work_failing() {
        let write = |source| Error::WriteStatus {
            object: "team-a/shop".into(),
            source,
        };
        for code in [429, 500, 503, 504] {
            assert_eq!(
                write(answered(code)).failure(),
                Failure::ControlPlane,
                "{code}"
            );
        }
        let cut = kube::Error::Service("connection reset".into());
        assert_eq!(write(cut).failure(), Failure::ControlPlane);
        for code in [400, 403, 404, 409, 422] {
            assert_eq!(write(answered(code)).failure(), Failure::Work, "{code}");
        }
        let unbuildable = Error::BuildPod {
            node: "shop-fe1".into(),
            why: "bad template".into(),
        };
        assert_eq!(unbuildable.failure(), Failure::Work);
    }
}
