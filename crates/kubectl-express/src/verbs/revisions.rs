//! `kubectl express revisions`: every node's deployment revision computed from local objects
//! (rendered manifests or a chart), compared with what the live cluster runs and wants, before
//! anything restarts. Exit 0 no discrepancy, 1 a discrepancy (or, with `--fail-on-restart`, a
//! node would restart), 2 errors.

use std::path::PathBuf;
use std::process::ExitCode;

use crate::revisions::compare::Verdict;
use crate::revisions::sources::{Options, Sources, gather};
use crate::show::revisions::{render_json, render_table};
use crate::verbs::args::OperatorNamespace;
use express_client::connect::ConnectArgs;
use express_client::exit::{Code, Exit};

/// Local objects: rendered manifests, or a chart rendered with `helm template`.
#[derive(clap::Args, Clone, Debug)]
pub struct LocalArgs {
    /// Rendered manifests, directories or `-` (stdin).
    #[arg(short = 'f', long = "filename", value_name = "FILE")]
    files: Vec<PathBuf>,
    /// A chart to render with `helm template`.
    #[arg(long, value_name = "DIR")]
    chart: Option<PathBuf>,
    /// Values files for the chart.
    #[arg(long = "values", value_name = "FILE", requires = "chart")]
    values: Vec<PathBuf>,
    /// Values set on the command line (k=v).
    #[arg(long = "set", value_name = "K=V", requires = "chart")]
    set: Vec<String>,
    /// The release name to render with.
    #[arg(long, default_value = "express", value_name = "NAME")]
    release: String,
    /// The helm binary (default: helm on PATH).
    #[arg(long, value_name = "PATH")]
    helm: Option<PathBuf>,
}

impl LocalArgs {
    pub fn sources(&self) -> Sources {
        Sources {
            files: self.files.clone(),
            chart: self.chart.clone(),
            values: self.values.clone(),
            set: self.set.clone(),
            release: self.release.clone(),
            helm: self.helm.clone(),
        }
    }
}

/// What `revisions` and `diff` both take: the local objects, the operator's namespace and how
/// to reach the cluster.
#[derive(clap::Args, Debug)]
pub struct CompareArgs {
    #[command(flatten)]
    pub local: LocalArgs,
    #[command(flatten)]
    pub operator: OperatorNamespace,
    #[command(flatten)]
    pub connect: ConnectArgs,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum Output {
    Table,
    Json,
}

// The verb's arguments; its help text is the subcommand's, in main.
#[derive(clap::Args, Debug)]
pub struct Args {
    #[command(flatten)]
    pub compare: CompareArgs,
    /// Compare with the live cluster (implied without -f/--chart).
    #[arg(long)]
    pub live: bool,
    /// Every namespace (live only).
    #[arg(short = 'A', long)]
    pub all_namespaces: bool,
    /// Only this node.
    #[arg(long, value_name = "NAME")]
    pub node: Option<String>,
    /// Show each node's canonical effective spec: exactly what its revision hashes.
    #[arg(short = 'v', long)]
    pub verbose: bool,
    #[arg(short = 'o', long = "output", value_enum, default_value = "table")]
    pub output: Output,
    /// Exit 1 also when any node would restart.
    #[arg(long)]
    pub fail_on_restart: bool,
}

pub fn run(args: Args) -> ExitCode {
    let CompareArgs {
        local,
        operator,
        connect,
    } = args.compare;
    let operator_namespace = operator.namespace;
    let sources = local.sources();
    let live = args.live || !sources.is_local();
    super::checked(
        "revisions",
        &connect,
        live,
        |client, namespace| async move {
            let options = Options {
                sources,
                namespace,
                all_namespaces: args.all_namespaces,
                node: args.node,
                verbose: args.verbose,
                json: args.output == Output::Json,
                fail_on_restart: args.fail_on_restart,
                operator_namespace,
            };
            revisions(client.as_ref(), &options).await
        },
    )
}

async fn revisions(client: Option<&kube::Client>, options: &Options) -> Result<ExitCode, Exit> {
    let (rows, _) = gather(client, options).await?;
    if options.json {
        println!("{}", render_json(&rows));
    } else {
        print!("{}", render_table(&rows, client.is_some()));
    }
    let discrepancy = rows.iter().any(|r| !r.discrepancies.is_empty());
    let restarts = rows.iter().any(|r| r.verdict == Some(Verdict::WillRestart));
    if discrepancy || (options.fail_on_restart && restarts) {
        let why = if discrepancy {
            "discrepancies found"
        } else {
            "nodes would restart (--fail-on-restart)"
        };
        eprintln!("kubectl-express revisions: {why}");
        return Ok(Code::Failed.into());
    }
    Ok(Code::Done.into())
}
