//! `kubectl express doctor [-n NS] [-o text|json]`: is it the infrastructure? Reads the whole
//! fleet the kubeconfig can see (Express objects in every namespace, each operator ring's Lease,
//! Deployment and pods, and Warning events), runs the checks of `express_triage` and gives one
//! verdict. With `-n NS` it then explains that namespace's clusters. Exit 0 healthy, 1 tenant
//! or deployment, 3 infrastructure, 2 when it cannot run.

use std::process::ExitCode;

use express_triage::{Thresholds, Verdict};

use express_client::contexts::select::{FleetArgs, Mode};

use crate::show::doctor::{focus_section, render, verdict_code};
use crate::verbs::args::{OperatorNamespace, Output};
use express_client::exit::Exit;
use express_client::read::triage::read_fleet;

pub(crate) mod across;

#[derive(clap::Args, Debug)]
pub struct Args {
    /// Output: text (the runbook's order: verdict, checks, tenants) or json.
    #[arg(short = 'o', long, value_enum, default_value_t = Output::Text)]
    output: Output,
    /// Count the operator's Warning events this recent.
    #[arg(long, default_value = "15m", value_parser = express_api::bounce::parse_duration)]
    since: u64,
    /// A tenant the operator has not caught up with for longer than this is behind.
    #[arg(long, default_value = "2m", value_parser = express_api::bounce::parse_duration)]
    stale_after: u64,
    /// A rollout finished this recently still explains a tenant's trouble.
    #[arg(long, default_value = "10m", value_parser = express_api::bounce::parse_duration)]
    recent_rollout: u64,
    /// A node a recovery (a lost pod re-created on the revision it ran) has left down this
    /// long is called stuck in the evidence.
    #[arg(long, default_value = "2m", value_parser = express_api::bounce::parse_duration)]
    stuck_recovery: u64,
    /// One symptom is spread when it is in at least this many namespaces...
    #[arg(long, default_value_t = 3)]
    spread_namespaces: usize,
    /// ...and in at least this fraction of the tenants seen.
    #[arg(long, default_value_t = 0.25)]
    spread_fraction: f64,
    /// Across contexts: every context's checks, not only the ones of contexts not healthy.
    #[arg(long)]
    details: bool,
    #[command(flatten)]
    operator: OperatorNamespace,
    #[command(flatten)]
    connect: FleetArgs,
}

/// The exit code of each verdict.
fn exit_code(verdict: Verdict) -> ExitCode {
    ExitCode::from(verdict_code(verdict))
}

impl Args {
    fn thresholds(&self) -> Thresholds {
        Thresholds {
            stale_after_seconds: seconds(self.stale_after),
            spread_namespaces: self.spread_namespaces,
            spread_fraction: self.spread_fraction,
            since_seconds: seconds(self.since),
            recent_rollout_seconds: seconds(self.recent_rollout),
            stuck_recovery_seconds: seconds(self.stuck_recovery),
        }
    }
}

pub fn run(args: Args) -> ExitCode {
    match args.connect.mode() {
        Err(error) => Exit::usage(error.to_string()).report("doctor"),
        Ok(Mode::Single(connect)) => single(&args, &connect),
        Ok(Mode::Fleet(selection)) => {
            express_client::contexts::across::run("doctor", &args.connect, selection, |plan| {
                across::run(
                    args.output,
                    args.details,
                    args.thresholds(),
                    &args.operator.namespace,
                    plan,
                )
            })
        }
    }
}

fn single(args: &Args, connect: &express_client::connect::ConnectArgs) -> ExitCode {
    let focus = connect.namespace.clone();
    super::checked("doctor", connect, true, |client, _| async move {
        let client = client.ok_or_else(|| Exit::usage("no cluster to read"))?;
        let thresholds = args.thresholds();
        let (fleet, objects) = read_fleet(&client, &args.operator.namespace, focus.as_deref())
            .await
            .map_err(Exit::usage)?;
        let report = express_triage::triage(&fleet, &thresholds);
        match args.output {
            Output::Json => println!(
                "{}",
                serde_json::to_string_pretty(&report)
                    .map_err(|e| Exit::usage(format!("cannot write JSON: {e}")))?
            ),
            _ => {
                print!("{}", render(&report, thresholds.stuck_recovery_seconds));
                if let Some(namespace) = &focus {
                    print!(
                        "{}",
                        focus_section(&objects, &args.operator.namespace, namespace)
                    );
                }
            }
        }
        Ok(exit_code(report.verdict))
    })
}

fn seconds(value: u64) -> i64 {
    i64::try_from(value).unwrap_or(i64::MAX)
}
