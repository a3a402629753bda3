//! How a verb ends: an exit code from [`Code`] and, for a failure, the message printed on
//! stderr. Every verb's exit codes come from here.

use std::process::ExitCode;

/// Every exit status any verb returns. A number means one thing per verb; where two verbs
/// give one number two meanings (3, 4), `docs/cli.md` has the table. The numbers scripts rely
/// on do not change (an Argo Workflow retries `fleet-release run` on 4 and 5).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Code {
    /// Done: the request was made, the rollout is complete, nothing differs, healthy.
    Done,
    /// Failed: the cluster said no, could not be reached, or the rollout or release failed;
    /// `revisions` and `diff` also use it for "discrepancies found" / "differences found",
    /// `doctor` for a tenant or deployment verdict.
    Failed,
    /// Bad arguments or no such object.
    Usage,
    /// A `--timeout` ran out (or, with `status --watch=false`, not done yet).
    Timeout,
    /// `doctor`: the infrastructure verdict.
    Infrastructure,
    /// `fleet-release run`: held inconclusive at its `--timeout`.
    Inconclusive,
    /// A pause is in force (`status --fail-on-paused`).
    Paused,
    /// Across contexts: some context could not be read; `fleet-release`: a DC could not be.
    Incomplete,
    /// `fleet-release run`: paused, waiting for approval, or still progressing: run it later.
    Later,
}

impl Code {
    /// The number the process exits with.
    pub const fn number(self) -> u8 {
        match self {
            Code::Done => 0,
            Code::Failed => 1,
            Code::Usage => 2,
            Code::Timeout | Code::Infrastructure | Code::Inconclusive => 3,
            Code::Paused | Code::Incomplete => 4,
            Code::Later => 5,
        }
    }
}

impl From<Code> for ExitCode {
    fn from(code: Code) -> ExitCode {
        ExitCode::from(code.number())
    }
}

/// A verb that did not succeed, and why.
#[derive(Debug)]
pub struct Exit {
    pub code: Code,
    pub message: String,
    /// The API server's status code, when it is the API server that said no (the dashboard
    /// answers with it: a 403 from RBAC is not a 502).
    pub api_status: Option<u16>,
}

impl Exit {
    pub fn new(code: Code, message: impl Into<String>) -> Exit {
        Exit {
            code,
            message: message.into(),
            api_status: None,
        }
    }

    /// A failure the API server answered: `message`, then the error, keeping its status code.
    pub fn api(message: impl std::fmt::Display, error: &kube::Error) -> Exit {
        Exit {
            api_status: match error {
                kube::Error::Api(status) => Some(status.code),
                _ => None,
            },
            ..Exit::failure(format!("{message}: {error}"))
        }
    }

    pub fn failure(message: impl Into<String>) -> Exit {
        Exit::new(Code::Failed, message)
    }

    pub fn usage(message: impl Into<String>) -> Exit {
        Exit::new(Code::Usage, message)
    }

    /// Prints the message under the verb's name and gives the exit code.
    pub fn report(self, verb: &str) -> ExitCode {
        eprintln!("kubectl-express {verb}: {}", self.message);
        self.code.into()
    }
}

/// Ends a verb: its own exit code, or the failure reported.
pub fn finish(verb: &str, result: Result<ExitCode, Exit>) -> ExitCode {
    result.unwrap_or_else(|exit| exit.report(verb))
}
