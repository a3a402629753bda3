//! How a verb ends: an exit code and, for a failure, the message printed on stderr.

use std::process::ExitCode;

/// A verb that did not succeed: 1 failure (the cluster said no, or could not be reached),
/// 2 usage (bad arguments, no such object), 3 timeout, 4 paused (with `--fail-on-paused`).
#[derive(Debug)]
pub struct Exit {
    pub code: u8,
    pub message: String,
}

impl Exit {
    pub fn new(code: u8, message: impl Into<String>) -> Exit {
        Exit {
            code,
            message: message.into(),
        }
    }

    pub fn failure(message: impl Into<String>) -> Exit {
        Exit::new(1, message)
    }

    pub fn usage(message: impl Into<String>) -> Exit {
        Exit::new(2, message)
    }

    /// Prints the message under the verb's name and gives the exit code.
    pub fn report(self, verb: &str) -> ExitCode {
        eprintln!("kubectl-express {verb}: {}", self.message);
        ExitCode::from(self.code)
    }
}

/// Ends a verb: its own exit code, or the failure reported.
pub fn finish(verb: &str, result: Result<ExitCode, Exit>) -> ExitCode {
    result.unwrap_or_else(|exit| exit.report(verb))
}
