//! `kubectl express status CLUSTER`: one line each time the cluster's state or message
//! changes, and an exit code a pipeline can use (DESIGN section 9): 0 the rollout is Complete
//! and the cluster Healthy, 1 Failed, Aborted, RollingBack or InvalidSpec, 3 timeout (or, with
//! `--watch=false`, not done yet), 4 paused with `--fail-on-paused`, 2 no such cluster.

use std::process::ExitCode;
use std::time::Duration;

use express_api::Objects;

use crate::show::status::{Outcome, StatusLine, assess};
use express_client::connect::ConnectArgs;
use express_client::exit::{Code, Exit};
use express_client::read::live::{self, Watched};

// The verb's arguments; its help text is the subcommand's, in main.
#[derive(clap::Args, Debug)]
pub struct Args {
    /// The Express cluster (its clusterName).
    pub cluster: String,
    /// Give up after this long (e.g. 90s, 10m): exit 3 with the last state.
    #[arg(long, value_name = "DURATION")]
    pub timeout: Option<String>,
    /// Keep watching until the cluster settles (false: print the state once).
    #[arg(long, default_value_t = true, action = clap::ArgAction::Set, value_name = "BOOL")]
    pub watch: bool,
    /// Exit 4 when a pause is in force instead of waiting for the resume.
    #[arg(long)]
    pub fail_on_paused: bool,
    #[command(flatten)]
    pub connect: ConnectArgs,
}

pub fn run(args: Args) -> ExitCode {
    let timeout = match args
        .timeout
        .as_deref()
        .map(express_api::bounce::parse_duration)
    {
        None => None,
        Some(Ok(seconds)) => Some(Duration::from_secs(seconds)),
        Some(Err(why)) => return Exit::usage(format!("--timeout: {why}")).report("status"),
    };
    let connect = args.connect.clone();
    super::live("status", &connect, |c| async move {
        follow(&c.client, &c.namespace, &args, timeout).await
    })
}

fn assess_objects(objects: &Objects, namespace: &str, cluster: &str) -> Result<StatusLine, Exit> {
    let express_cluster = objects.express_cluster(namespace, cluster);
    let nodes = objects.nodes_of(namespace, cluster);
    if express_cluster.is_none() && nodes.is_empty() {
        return Err(Exit::usage(live::no_cluster(namespace, cluster)));
    }
    Ok(assess(express_cluster, &nodes))
}

/// The exit code a line ends the verb with, if it ends it.
fn exit_for(line: &StatusLine, args: &Args) -> Option<ExitCode> {
    match line.outcome {
        Outcome::Done => Some(Code::Done.into()),
        Outcome::Failed => {
            eprintln!("kubectl-express status: {line}");
            Some(Code::Failed.into())
        }
        Outcome::Paused if args.fail_on_paused => {
            eprintln!("kubectl-express status: {line}");
            Some(Code::Paused.into())
        }
        Outcome::Paused | Outcome::Waiting => None,
    }
}

async fn follow(
    client: &kube::Client,
    namespace: &str,
    args: &Args,
    timeout: Option<Duration>,
) -> Result<ExitCode, Exit> {
    let cluster = args.cluster.as_str();
    if !args.watch {
        let objects = live::load(client, Some(namespace), "", live::Reading::Everything)
            .await
            .map_err(Exit::failure)?;
        let line = assess_objects(&objects, namespace, cluster)?;
        println!("{line}");
        return Ok(exit_for(&line, args).unwrap_or_else(|| Code::Timeout.into()));
    }
    let mut watched = Watched::start(client, namespace);
    let mut last: Option<StatusLine> = None;
    let follow = async {
        watched.ready().await.map_err(Exit::failure)?;
        loop {
            let line = assess_objects(&watched.objects(), namespace, cluster)?;
            if last.as_ref() != Some(&line) {
                println!("{line}");
                last = Some(line.clone());
            }
            if let Some(code) = exit_for(&line, args) {
                return Ok(code);
            }
            watched.changed().await.map_err(Exit::failure)?;
        }
    };
    match timeout {
        None => follow.await,
        Some(timeout) => match tokio::time::timeout(timeout, follow).await {
            Ok(result) => result,
            Err(_) => Err(Exit::new(
                Code::Timeout,
                format!(
                    "timed out after {}; last: {}",
                    express_api::bounce::format_duration(timeout.as_secs()),
                    last.map_or_else(|| "nothing read".to_owned(), |l| l.to_string())
                ),
            )),
        },
    }
}
