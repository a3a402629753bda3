//! One module per verb (argo-rollouts' layout): each has a `#[derive(clap::Args)]` struct and
//! a `run` that ends in an exit code from [`express_client::exit::Code`]. This module holds what they
//! share: running a verb on a single-threaded runtime, connected or not, and request ids.

pub mod abort;
pub mod args;
pub mod bounce;
pub mod completion;
pub mod dashboard;
pub mod diff;
pub mod doctor;
pub mod fleet_release;
pub mod get;
pub mod history;
pub mod list;
pub mod pause;
pub mod plan;
pub mod release;
pub mod retry;
pub mod revisions;
pub mod rings;
pub mod status;
pub mod version;

use std::future::Future;
use std::process::ExitCode;

use express_client::connect::{ConnectArgs, Connection};
use express_client::contexts::select::known_context;
use express_client::exit::Exit;
use express_client::runtime::{block_on, run_on};

/// The operator's namespace when a verb is not told otherwise (the chart's default).
pub const DEFAULT_OPERATOR_NAMESPACE: &str = "express-system";

/// [`live`] on a runtime with a thread per core: for a verb that serves (the dashboard), so that
/// rendering one page does not hold up the others and the watches.
pub fn live_serving<F, Fut>(verb: &str, connect: &ConnectArgs, run: F) -> ExitCode
where
    F: FnOnce(Connection) -> Fut,
    Fut: Future<Output = Result<ExitCode, Exit>>,
{
    run_on(
        tokio::runtime::Builder::new_multi_thread(),
        verb,
        Exit::failure,
        async {
            known_context(connect).map_err(Exit::usage)?;
            let connection = connect.connect().await.map_err(Exit::failure)?;
            run(connection).await
        },
    )
}

/// Runs a live verb: connects (a connection failure exits 1), then runs it.
pub fn live<F, Fut>(verb: &str, connect: &ConnectArgs, run: F) -> ExitCode
where
    F: FnOnce(Connection) -> Fut,
    Fut: Future<Output = Result<ExitCode, Exit>>,
{
    block_on(verb, Exit::failure, async {
        known_context(connect).map_err(Exit::usage)?;
        let connection = connect.connect().await.map_err(Exit::failure)?;
        run(connection).await
    })
}

/// Runs a verb that may work offline (`revisions`, `diff`): every error, an unreachable
/// cluster included, exits 2. Offline, the namespace is the flag's or `default`.
pub fn checked<F, Fut>(verb: &str, connect: &ConnectArgs, live: bool, run: F) -> ExitCode
where
    F: FnOnce(Option<kube::Client>, String) -> Fut,
    Fut: Future<Output = Result<ExitCode, Exit>>,
{
    block_on(verb, Exit::usage, async {
        if !live {
            let namespace = connect
                .namespace
                .clone()
                .unwrap_or_else(|| "default".into());
            return run(None, namespace).await;
        }
        known_context(connect).map_err(Exit::usage)?;
        let connection = connect.connect().await.map_err(Exit::usage)?;
        run(Some(connection.client), connection.namespace).await
    })
}
