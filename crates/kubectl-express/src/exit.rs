//! How a verb ends: an exit code from [`Code`] and, for a failure, the message printed on
//! stderr. Every verb's exit codes come from here.

use std::process::ExitCode;

/// The plugin's exit codes (the same for every verb).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Code {
    /// Done: the request was made, the rollout is complete, nothing differs.
    Done = 0,
    /// Failed: the cluster said no, could not be reached, or the rollout failed; `revisions`
    /// and `diff` also use it for "discrepancies found" / "differences found".
    Failed = 1,
    /// Bad arguments or no such object.
    Usage = 2,
    /// A `--timeout` ran out (or, with `status --watch=false`, not done yet).
    Timeout = 3,
    /// A pause is in force (`status --fail-on-paused`).
    Paused = 4,
}

impl From<Code> for ExitCode {
    fn from(code: Code) -> ExitCode {
        ExitCode::from(code as u8)
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
