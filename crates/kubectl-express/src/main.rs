//! `kubectl-express`: the kubectl plugin for Express clusters (DESIGN section 9).
//!
//! Verbs: `plan --offline`, which shows the order in which the operator would change nodes,
//! computed by the same planner the operator runs; `bounce`, which asks the operator to
//! restart one node's pod and can follow it to the end.

mod bounce;
mod connect;
mod manifests;
mod plan;

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Parser, Subcommand};

#[derive(Parser)]
#[command(
    name = "kubectl-express",
    version,
    about = "kubectl plugin for Express clusters"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Show what the operator would do next, and in which order, for every Express cluster.
    Plan {
        /// Plan from manifests instead of a live cluster (required in this version).
        #[arg(long)]
        offline: bool,
        /// Manifest files or directories (`-` reads stdin): ExpressCluster, Backend, Frontend,
        /// and Pods standing for the observed state (no pods = nothing running).
        #[arg(short = 'f', long = "filename", value_name = "FILE", required = true)]
        files: Vec<PathBuf>,
        #[arg(short = 'o', long = "output", value_enum, default_value = "table")]
        output: plan::OutputFormat,
        /// Namespace for objects that do not name one.
        #[arg(short = 'n', long, default_value = "default")]
        namespace: String,
        /// Namespace of the operator, where the express-operator-control ConfigMap lives.
        #[arg(long, default_value = "express-system")]
        operator_namespace: String,
    },
    /// Restart one node's pod safely (DESIGN section 6): prints the request id; with --wait,
    /// follows the bounce to its end.
    Bounce(bounce::BounceArgs),
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    match cli.command {
        Command::Plan {
            offline,
            files,
            output,
            namespace,
            operator_namespace,
        } => {
            if !offline {
                eprintln!(
                    "kubectl-express plan: only --offline planning is available in this version; run it with --offline -f FILE..."
                );
                return ExitCode::from(2);
            }
            let request = plan::OfflinePlan {
                files,
                namespace,
                operator_namespace,
            };
            run_offline_plan(&request, output)
        }
        Command::Bounce(args) => match tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
        {
            Ok(runtime) => runtime.block_on(bounce::run(args)),
            Err(err) => {
                eprintln!("kubectl-express: cannot start: {err}");
                ExitCode::FAILURE
            }
        },
    }
}

fn run_offline_plan(request: &plan::OfflinePlan, output: plan::OutputFormat) -> ExitCode {
    let report = match plan::offline(request) {
        Ok(report) => report,
        Err(errors) => {
            for error in &errors {
                eprintln!("error: {error}");
            }
            eprintln!(
                "kubectl-express plan: {} problem(s) found; nothing planned",
                errors.len()
            );
            return ExitCode::FAILURE;
        }
    };
    for warning in &report.warnings {
        eprintln!("warning: {warning}");
    }
    match output {
        plan::OutputFormat::Table => print!("{}", plan::render_table(&report)),
        plan::OutputFormat::Json => match plan::render_json(&report) {
            Ok(json) => println!("{json}"),
            Err(err) => {
                eprintln!("kubectl-express plan: cannot render JSON: {err}");
                return ExitCode::FAILURE;
            }
        },
    }
    ExitCode::SUCCESS
}
