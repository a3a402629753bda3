//! `kubectl express bounce NODE`: asks the operator to restart one node's pod (DESIGN section
//! 6) by writing the request annotations, prints the request id, and with `--wait` follows
//! `status.bounce` until the request ends. Exit codes: 0 requested (or, waiting, Succeeded),
//! 1 Failed or Refused (or the cluster could not be reached), 2 no such node or bad arguments.

use std::process::ExitCode;

use express_api::bounce::parse_duration;
use express_api::keys::ANNOTATION_BOUNCE;
use express_api::{BouncePhase, BounceStatus};
use futures::StreamExt;
use kube::ResourceExt;
use kube::api::{Api, DynamicObject};
use kube::runtime::{WatchStreamExt, watcher};

use express_client::connect::{ConnectArgs, Connection};
use express_client::exit::{Code, Exit};
use express_client::write::control;

#[derive(clap::Args, Debug)]
pub struct Args {
    /// The Backend or Frontend to bounce.
    pub node: String,
    /// Bounce even while the application is Rebuilding, or a node not on its desired revision
    /// (it restarts on the revision it runs).
    #[arg(long)]
    pub force: bool,
    /// Follow the bounce until it ends, printing each phase; exit 0 on Succeeded, 1 on Failed
    /// or Refused.
    #[arg(long)]
    pub wait: bool,
    /// How long each wait of the bounce may take: for the old pod to terminate, and for the new
    /// one to be Ready (e.g. 90s, 10m, 1h30m; the operator's default is 10m).
    #[arg(long, value_name = "DURATION")]
    pub timeout: Option<String>,
    #[command(flatten)]
    pub connect: ConnectArgs,
}

pub fn run(args: Args) -> ExitCode {
    let timeout = match args.timeout.as_deref().map(parse_duration).transpose() {
        Ok(timeout) => timeout,
        Err(why) => return Exit::usage(format!("--timeout: {why}")).report("bounce"),
    };
    let connect = args.connect.clone();
    super::live("bounce", &connect, |c| async move {
        bounce(c, &args, timeout).await
    })
}

async fn bounce(
    connection: Connection,
    args: &Args,
    timeout: Option<u64>,
) -> Result<ExitCode, Exit> {
    let (client, namespace) = (connection.client, connection.namespace);
    let name = args.node.as_str();
    let (kind, done) =
        control::request_bounce(&client, &namespace, name, args.force, timeout).await?;
    let id = done.request_id.clone().unwrap_or_default();
    println!("{id}");
    eprintln!("{}", done.message);
    if !args.wait {
        return Ok(Code::Done.into());
    }
    let nodes: Api<DynamicObject> =
        Api::namespaced_with(client.clone(), &namespace, &kind.api_resource());
    follow(nodes, name, &id).await
}

/// The node's `status.bounce` (None when it has none, or one this build cannot read).
fn bounce_of(node: &DynamicObject) -> Option<BounceStatus> {
    let bounce = node.data.get("status")?.get("bounce")?;
    serde_json::from_value(bounce.clone()).ok()
}

/// Watches the node until its bounce `id` ends, printing each phase and message once.
async fn follow(api: Api<DynamicObject>, name: &str, id: &str) -> Result<ExitCode, Exit> {
    let config = watcher::Config::default().fields(&format!("metadata.name={name}"));
    let mut events = std::pin::pin!(watcher(api, config).default_backoff());
    let mut last: Option<(BouncePhase, String)> = None;
    let mut taken_up = false;
    while let Some(event) = events.next().await {
        let event = event.map_err(|e| Exit::failure(format!("lost the watch on {name}: {e}")))?;
        let node = match event {
            watcher::Event::Apply(node) | watcher::Event::InitApply(node) => node,
            watcher::Event::Delete(_) => {
                return Err(Exit::failure(format!(
                    "node {name} was deleted during bounce {id}"
                )));
            }
            watcher::Event::Init | watcher::Event::InitDone => continue,
        };
        let bounce = bounce_of(&node).filter(|b| b.request_id == id);
        let bounce = bounce.as_ref();
        let Some(bounce) = bounce else {
            let requested = node
                .annotations()
                .get(ANNOTATION_BOUNCE)
                .map(String::as_str);
            if !taken_up && requested.is_some_and(|r| r.trim() != id) {
                return Err(Exit::failure(format!(
                    "bounce {id} was replaced by request {} before the operator took it up",
                    requested.unwrap_or_default()
                )));
            }
            continue;
        };
        taken_up = true;
        let (Some(phase), message) = (bounce.phase, bounce.message.clone().unwrap_or_default())
        else {
            continue;
        };
        if last.as_ref() != Some(&(phase, message.clone())) {
            println!("{phase}: {message}");
            last = Some((phase, message.clone()));
        }
        match phase {
            BouncePhase::Succeeded => return Ok(Code::Done.into()),
            BouncePhase::Failed | BouncePhase::Refused => {
                return Err(Exit::failure(format!("bounce {id} {phase}: {message}")));
            }
            _ => {}
        }
    }
    Err(Exit::failure(format!(
        "the watch on {name} ended during bounce {id}"
    )))
}
