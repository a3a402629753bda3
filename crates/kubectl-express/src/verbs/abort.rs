//! `kubectl express abort CLUSTER [--rollback]`: stops a cluster's current rollout (DESIGN
//! section 4) through the `express.dev/abort` annotation, optionally rolling back.

use std::process::ExitCode;

use express_client::connect::ConnectArgs;
use express_client::write::control::{self, Request};

#[derive(clap::Args, Debug)]
pub struct Args {
    cluster: String,
    /// Return the nodes the rollout changed to their previous revision.
    #[arg(long)]
    rollback: bool,
    /// Return once the operator has recorded the request.
    #[arg(long)]
    wait: bool,
    #[command(flatten)]
    connect: ConnectArgs,
}

pub fn run(args: Args) -> ExitCode {
    super::live("abort", &args.connect, |c| async move {
        let request = Request::Abort {
            rollback: args.rollback,
        };
        control::request(&c.client, &c.namespace, &args.cluster, request, args.wait).await
    })
}
