//! The layer under the operator (DESIGN section 19: doctor names the layer underneath): what
//! the API server says of its own readiness. While it is not ready (etcd gone, its storage
//! initialising, its informers not synced) nothing above it can be judged, so the check is
//! first in the decision table.

use crate::{Check, Fleet, Status};

pub const CONTROL_PLANE: &str = "control-plane";

/// What the API server said at `/readyz?verbose`, as doctor read it.
#[derive(Clone, Debug, Default, PartialEq)]
pub enum ControlPlane {
    /// Not asked (a reader without a client of its own, such as the operator's judge).
    #[default]
    NotAsked,
    /// Every readiness check passed.
    Ready,
    /// It answered, not ready: its HTTP status and the checks it says failed (`etcd`,
    /// `informer-sync`...), empty when it did not say which.
    NotReady { status: u16, failing: Vec<String> },
    /// It could not be asked: refused, timed out, or forbidden; the error as read.
    Unanswered(String),
}

impl ControlPlane {
    /// The API server's answer to `/readyz?verbose`: its status and body. A verbose answer lists
    /// each check as `[+]name ok` or `[-]name failed: reason withheld`.
    pub fn from_readyz(status: u16, body: &str) -> ControlPlane {
        if (200..300).contains(&status) {
            return ControlPlane::Ready;
        }
        let failing = body
            .lines()
            .filter_map(|line| line.trim().strip_prefix("[-]"))
            .map(|rest| rest.split_whitespace().next().unwrap_or(rest).to_owned())
            .collect();
        ControlPlane::NotReady { status, failing }
    }

    /// Whether the API server said it is not ready.
    pub fn failing(&self) -> bool {
        matches!(self, ControlPlane::NotReady { .. })
    }
}

/// `fail` while the API server says it is not ready; `warn` when it could not be asked.
pub fn control_plane_check(fleet: &Fleet) -> Check {
    let (status, summary, evidence) = match &fleet.control_plane {
        ControlPlane::NotAsked => (Status::Ok, "not asked".to_owned(), Vec::new()),
        ControlPlane::Ready => (Status::Ok, "the API server is ready".to_owned(), Vec::new()),
        ControlPlane::NotReady { status, failing } => {
            let which = if failing.is_empty() {
                "it does not say which check failed".to_owned()
            } else {
                format!("failing: {}", failing.join(", "))
            };
            let mut evidence = vec![format!("/readyz answered {status}; {which}")];
            if failing.iter().any(|check| check.starts_with("etcd")) {
                evidence.push(
                    "etcd does not answer the API server: writes and consistent reads fail until it does"
                        .to_owned(),
                );
            }
            evidence.extend(fleet.unreadable.iter().cloned());
            (
                Status::Fail,
                format!("the API server says it is not ready ({which})"),
                evidence,
            )
        }
        ControlPlane::Unanswered(error) => (
            Status::Warn,
            "the API server's readiness could not be read".to_owned(),
            vec![error.clone()],
        ),
    };
    Check {
        name: CONTROL_PLANE,
        status,
        summary,
        evidence,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_verbose_readyz_names_its_failing_checks() {
        let body = "[+]ping ok\n[+]log ok\n[-]etcd failed: reason withheld\n[+]informer-sync ok\n\
                    [-]poststarthook/start-apiextensions-informers failed: not finished\n\
                    readyz check failed\n";
        assert_eq!(
            ControlPlane::from_readyz(500, body),
            ControlPlane::NotReady {
                status: 500,
                failing: vec![
                    "etcd".into(),
                    "poststarthook/start-apiextensions-informers".into()
                ],
            }
        );
        assert_eq!(ControlPlane::from_readyz(200, "ok"), ControlPlane::Ready);
        assert_eq!(
            ControlPlane::from_readyz(503, ""),
            ControlPlane::NotReady {
                status: 503,
                failing: vec![],
            }
        );
    }

    #[test]
    fn the_check_fails_only_when_the_api_server_says_it_is_not_ready() {
        let with = |control_plane| Fleet {
            control_plane,
            unreadable: vec![
                "ExpressClusters: the server is currently unable to handle the request".into(),
            ],
            ..Fleet::default()
        };
        let failed = control_plane_check(&with(ControlPlane::NotReady {
            status: 500,
            failing: vec!["etcd".into()],
        }));
        assert_eq!(failed.status, Status::Fail);
        assert_eq!(
            failed.summary,
            "the API server says it is not ready (failing: etcd)"
        );
        assert!(
            failed
                .evidence
                .iter()
                .any(|e| e.starts_with("etcd does not answer"))
        );
        assert!(
            failed
                .evidence
                .iter()
                .any(|e| e.starts_with("ExpressClusters"))
        );
        for (control_plane, status) in [
            (ControlPlane::NotAsked, Status::Ok),
            (ControlPlane::Ready, Status::Ok),
            (ControlPlane::Unanswered("forbidden".into()), Status::Warn),
        ] {
            assert_eq!(control_plane_check(&with(control_plane)).status, status);
        }
    }

    #[test]
    fn a_control_plane_not_ready_is_the_verdict_whatever_else_fails() {
        // No tenant read, and the operator's Lease unseen: the operator layer would fail too,
        // but the layer under it is named.
        let fleet = Fleet {
            control_plane: ControlPlane::NotReady {
                status: 500,
                failing: vec!["etcd".into()],
            },
            ..Fleet::default()
        };
        let report = crate::triage(&fleet, &crate::Thresholds::default());
        assert_eq!(report.verdict, crate::Verdict::Infrastructure);
        assert!(
            report.reason.starts_with(
                "the control plane: the API server says it is not ready (failing: etcd)"
            ),
            "{}",
            report.reason
        );
        assert_eq!(report.checks[0].name, CONTROL_PLANE);
        let ready = Fleet {
            control_plane: ControlPlane::Ready,
            ..Fleet::default()
        };
        assert!(
            !crate::triage(&ready, &crate::Thresholds::default())
                .reason
                .starts_with("the control plane")
        );
    }
}
