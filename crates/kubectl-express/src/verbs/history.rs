//! `kubectl express history NODE`: the revisions the operator kept for a node
//! (ControllerRevisions, DESIGN section 5), which one runs and which one is desired; one
//! revision's kept effective spec (`--revision`); a field-level diff between two (`--diff`).

use std::process::ExitCode;

use express_api::history::KeptSpec;
use express_api::keys::LABEL_NODE;
use k8s_openapi::api::apps::v1::ControllerRevision;
use kube::Client;
use kube::api::{Api, ListParams};

use list_pages::ListPaged;

use crate::show::history::{diff, kept_of, pick, render};
use express_client::connect::ConnectArgs;
use express_client::exit::{Code, Exit};
use express_client::read::live::find_node;

// The verb's arguments; its help text is the subcommand's, in main.
#[derive(clap::Args, Debug)]
pub struct Args {
    /// The Backend or Frontend.
    pub node: String,
    /// Print this revision's kept effective spec (its number or its hash).
    #[arg(long, value_name = "N", conflicts_with = "diff")]
    pub revision: Option<String>,
    /// Field-level diff between two kept revisions (numbers or hashes).
    #[arg(long, num_args = 2, value_names = ["A", "B"])]
    pub diff: Option<Vec<String>>,
    #[command(flatten)]
    pub connect: ConnectArgs,
}

enum Show {
    Table,
    Revision(String),
    Diff(String, String),
}

pub fn run(args: Args) -> ExitCode {
    let show = match (args.revision, args.diff) {
        (Some(revision), _) => Show::Revision(revision),
        (None, Some(pair)) if pair.len() == 2 => Show::Diff(pair[0].clone(), pair[1].clone()),
        _ => Show::Table,
    };
    let node = args.node;
    super::live("history", &args.connect, |c| async move {
        history(&c.client, &c.namespace, &node, show).await
    })
}

async fn history(
    client: &Client,
    namespace: &str,
    node: &str,
    show: Show,
) -> Result<ExitCode, Exit> {
    let (kind, status) = find_node(client, namespace, node).await?;
    let revisions = Api::<ControllerRevision>::namespaced(client.clone(), namespace)
        .list_paged(&ListParams::default().labels(&format!("{LABEL_NODE}={node}")))
        .await
        .map_err(|e| {
            Exit::failure(format!(
                "cannot list ControllerRevisions in namespace {namespace}: {e}"
            ))
        })?;
    let kept = kept_of(&revisions.items, kind, node);
    let spec_of = |which: &str| -> Result<&KeptSpec, Exit> {
        let kept = pick(&kept, which).ok_or_else(|| {
            Exit::usage(format!(
                "{kind} {node} has no kept revision {which} (see `kubectl express history {node}`)"
            ))
        })?;
        kept.spec
            .as_ref()
            .map_err(|why| Exit::failure(format!("revision {which} of {node}: {why}")))
    };
    match show {
        Show::Table => {
            if kept.is_empty() {
                println!("{kind} {node} has no kept revisions yet");
            } else {
                let now = k8s_openapi::jiff::Timestamp::now().as_millisecond();
                print!("{}", render(&kept, status.as_ref(), now));
            }
        }
        Show::Revision(which) => {
            let spec = spec_of(&which)?;
            let yaml = serde_yaml::to_string(spec)
                .map_err(|e| Exit::failure(format!("cannot print revision {which}: {e}")))?;
            print!("{yaml}");
        }
        Show::Diff(a, b) => {
            let (left, right) = (spec_of(&a)?, spec_of(&b)?);
            print!("{}", diff(left, right));
        }
    }
    Ok(Code::Done.into())
}
