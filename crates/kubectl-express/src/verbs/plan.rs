//! `kubectl express plan`: what the operator does next and in which order, computed by the
//! operator's own snapshot builder and planner, from the live cluster or (`--offline`) from
//! manifests; `-o mermaid|dot` draws the prerequisite graphs.

use std::path::PathBuf;
use std::process::ExitCode;

use crate::plan::{self, OfflinePlan, OutputFormat, Report};
use crate::show::graph;
use crate::verbs::args::OperatorNamespace;
use express_client::connect::ConnectArgs;
use express_client::exit::{Code, Exit};
use express_client::read::live;

#[derive(clap::Args, Debug)]
pub struct Args {
    /// Only this Express cluster (its clusterName).
    cluster: Option<String>,
    /// Plan from manifests instead of the live cluster.
    #[arg(long)]
    offline: bool,
    /// With --offline: manifest files or directories (`-` reads stdin): ExpressCluster,
    /// Backend, Frontend, and Pods standing for the observed state (no pods = nothing runs).
    #[arg(short = 'f', long = "filename", value_name = "FILE")]
    files: Vec<PathBuf>,
    #[arg(short = 'o', long = "output", value_enum, default_value = "table")]
    output: OutputFormat,
    /// Every namespace (live).
    #[arg(short = 'A', long)]
    all_namespaces: bool,
    #[command(flatten)]
    operator: OperatorNamespace,
    #[command(flatten)]
    connect: ConnectArgs,
}

pub fn run(args: Args) -> ExitCode {
    if args.offline {
        return offline(args);
    }
    if !args.files.is_empty() {
        return Exit::usage(
            "-f reads manifests: add --offline, or drop -f to plan the live cluster",
        )
        .report("plan");
    }
    super::live("plan", &args.connect, |c| async move {
        let namespace = (!args.all_namespaces).then_some(c.namespace.as_str());
        let objects = live::load(
            &c.client,
            namespace,
            &args.operator.namespace,
            live::Reading::Everything,
        )
        .await
        .map_err(Exit::failure)?;
        let cluster = args.cluster.as_deref();
        let report = plan::live(&objects, &args.operator.namespace, cluster);
        if let (Some(cluster), true) = (cluster, report.clusters.is_empty()) {
            return Err(Exit::usage(live::no_cluster(
                namespace.unwrap_or("(any)"),
                cluster,
            )));
        }
        Ok(print(&report, args.output))
    })
}

fn offline(args: Args) -> ExitCode {
    if args.files.is_empty() {
        return Exit::usage("--offline needs -f FILE (manifests to plan from)").report("plan");
    }
    let request = OfflinePlan {
        files: args.files,
        namespace: args.connect.namespace.unwrap_or_else(|| "default".into()),
        operator_namespace: args.operator.namespace,
    };
    match plan::offline(&request) {
        Ok(report) => print(&report, args.output),
        Err(errors) => {
            for error in &errors {
                eprintln!("error: {error}");
            }
            Exit::failure(format!(
                "{} problem(s) found; nothing planned",
                errors.len()
            ))
            .report("plan")
        }
    }
}

/// Prints a plan in the chosen form, warnings on stderr.
fn print(report: &Report, output: OutputFormat) -> ExitCode {
    for warning in &report.warnings {
        eprintln!("warning: {warning}");
    }
    match output {
        OutputFormat::Table => print!("{}", plan::render_table(report)),
        OutputFormat::Json => match plan::render_json(report) {
            Ok(json) => println!("{json}"),
            Err(err) => return Exit::failure(format!("cannot render JSON: {err}")).report("plan"),
        },
        OutputFormat::Mermaid | OutputFormat::Dot => {
            let format = if output == OutputFormat::Mermaid {
                graph::Format::Mermaid
            } else {
                graph::Format::Dot
            };
            for cluster in &report.clusters {
                print!("{}", graph::render(&cluster.snapshot, format));
            }
        }
    }
    Code::Done.into()
}
