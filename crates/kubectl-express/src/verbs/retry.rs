//! `kubectl express retry CLUSTER`: clears a failed or aborted rollout (DESIGN section 5)
//! through the `express.dev/retry` annotation.

use std::process::ExitCode;

use express_client::connect::ConnectArgs;
use express_client::write::control::{self, Request};

#[derive(clap::Args, Debug)]
pub struct Args {
    cluster: String,
    /// Return once the operator has recorded the request.
    #[arg(long)]
    wait: bool,
    #[command(flatten)]
    connect: ConnectArgs,
}

pub fn run(args: Args) -> ExitCode {
    super::live("retry", &args.connect, |c| async move {
        control::request(
            &c.client,
            &c.namespace,
            &args.cluster,
            Request::Retry,
            args.wait,
        )
        .await
    })
}
