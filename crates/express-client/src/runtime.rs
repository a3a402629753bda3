//! Running a verb: its future on a runtime (one thread, or one per core for a verb that reads
//! several contexts at once), ended with its exit code.

use std::future::Future;
use std::process::ExitCode;

use crate::exit::{self, Exit};

/// Runs a verb's future on a single-threaded runtime and ends it with its exit code.
pub fn block_on(
    verb: &str,
    cannot_start: fn(String) -> Exit,
    work: impl Future<Output = Result<ExitCode, Exit>>,
) -> ExitCode {
    run_on(
        tokio::runtime::Builder::new_current_thread(),
        verb,
        cannot_start,
        work,
    )
}

/// [`block_on`] on a runtime with a thread per core: for a verb whose work is several tasks
/// at once (reading several contexts).
pub fn block_on_threads(
    verb: &str,
    cannot_start: fn(String) -> Exit,
    work: impl Future<Output = Result<ExitCode, Exit>>,
) -> ExitCode {
    run_on(
        tokio::runtime::Builder::new_multi_thread(),
        verb,
        cannot_start,
        work,
    )
}

pub fn run_on(
    mut builder: tokio::runtime::Builder,
    verb: &str,
    cannot_start: fn(String) -> Exit,
    work: impl Future<Output = Result<ExitCode, Exit>>,
) -> ExitCode {
    match builder.enable_all().build() {
        Ok(runtime) => exit::finish(verb, runtime.block_on(work)),
        Err(err) => cannot_start(format!("cannot start: {err}")).report(verb),
    }
}
