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
}

impl Exit {
    pub fn new(code: Code, message: impl Into<String>) -> Exit {
        Exit {
            code,
            message: message.into(),
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
