//! `kubectl express doctor [-n NS] [-o text|json]`: is it the infrastructure? Reads the whole
//! fleet the kubeconfig can see (Express objects in every namespace, each operator ring's Lease,
//! Deployment and pods, and Warning events), runs the checks of `express_triage` and gives one
//! verdict. With `-n NS` it then explains that namespace's clusters. Exit 0 healthy, 1 tenant
//! or deployment, 3 infrastructure, 2 when it cannot run.

use std::process::ExitCode;

use express_triage::{Fleet, Report, Status, Thresholds, Verdict};
use kube::Client;

use crate::contexts::select::{FleetArgs, Mode};
use crate::contexts::{self};
use crate::exit::Exit;
use crate::read::live;
use crate::show::cluster;

pub(crate) mod across;

#[derive(clap::Args, Debug)]
pub struct Args {
    /// Output: text (the runbook's order: verdict, checks, tenants) or json.
    #[arg(short = 'o', long, default_value = "text", value_parser = ["text", "json"])]
    output: String,
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
    /// The operator's namespace (its Lease, Deployment and operator-wide control ConfigMap).
    #[arg(long, default_value = super::DEFAULT_OPERATOR_NAMESPACE, value_name = "NS")]
    operator_namespace: String,
    #[command(flatten)]
    connect: FleetArgs,
}

/// The exit code of each verdict.
fn exit_code(verdict: Verdict) -> ExitCode {
    ExitCode::from(code(verdict))
}

pub(crate) fn code(verdict: Verdict) -> u8 {
    match verdict {
        Verdict::Healthy => 0,
        Verdict::Tenant | Verdict::Deployment => 1,
        Verdict::Infrastructure => 3,
    }
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
            contexts::across::run("doctor", &args.connect, selection, |plan| {
                across::run(&args, plan)
            })
        }
    }
}

fn single(args: &Args, connect: &crate::connect::ConnectArgs) -> ExitCode {
    let focus = connect.namespace.clone();
    super::checked("doctor", connect, true, |client, _| async move {
        let client = client.ok_or_else(|| Exit::usage("no cluster to read"))?;
        let thresholds = args.thresholds();
        let (fleet, objects) = read_fleet(&client, &args.operator_namespace, focus.as_deref())
            .await
            .map_err(Exit::usage)?;
        let report = express_triage::triage(&fleet, &thresholds);
        match args.output.as_str() {
            "json" => println!(
                "{}",
                serde_json::to_string_pretty(&report)
                    .map_err(|e| Exit::usage(format!("cannot write JSON: {e}")))?
            ),
            _ => {
                print!("{}", render(&report, thresholds.stuck_recovery_seconds));
                if let Some(namespace) = &focus {
                    print!(
                        "{}",
                        focus_section(&objects, &args.operator_namespace, namespace)
                    );
                }
            }
        }
        Ok(exit_code(report.verdict))
    })
}

/// With `-n NS`, the namespace's clusters as `list` shows them.
fn focus_section(
    objects: &express_api::Objects,
    operator_namespace: &str,
    namespace: &str,
) -> String {
    let rows: Vec<cluster::ListRow> = cluster::list_rows(objects, operator_namespace)
        .into_iter()
        .filter(|r| r.namespace == namespace)
        .collect();
    format!("\nNAMESPACE {namespace}\n{}", cluster::render_list(&rows))
}

fn seconds(value: u64) -> i64 {
    i64::try_from(value).unwrap_or(i64::MAX)
}

/// Reads what triage needs. The Express objects must be readable (everywhere, or at least in
/// `focus`); anything else that cannot be read is named in the report instead.
async fn read_fleet(
    client: &Client,
    operator_namespace: &str,
    focus: Option<&str>,
) -> Result<(Fleet, express_api::Objects), String> {
    let mut unreadable = Vec::new();
    let objects = match live::load(client, None, operator_namespace).await {
        Ok(objects) => objects,
        Err(everywhere) => match focus {
            Some(namespace) => {
                let objects = live::load(client, Some(namespace), operator_namespace)
                    .await
                    .map_err(|e| format!("{everywhere}; in {namespace}: {e}"))?;
                unreadable.push(format!(
                    "Express objects outside namespace {namespace} ({everywhere})"
                ));
                objects
            }
            None => return Err(everywhere),
        },
    };
    let fleet = live::fleet_around(client, operator_namespace, &objects, unreadable).await;
    Ok((fleet, objects))
}

/// The runbook's order: the verdict and why, each check with its evidence, then the tenants.
pub fn render(report: &Report, stuck_after_seconds: i64) -> String {
    let mut out = format!(
        "VERDICT: {}\n  {}\n\nCHECKS\n",
        report.verdict.as_str(),
        report.reason
    );
    let width = report
        .checks
        .iter()
        .map(|c| c.name.len())
        .max()
        .unwrap_or(0);
    for check in &report.checks {
        let mark = match check.status {
            Status::Ok => "ok  ",
            Status::Warn => "warn",
            Status::Fail => "FAIL",
        };
        out.push_str(&format!(
            "  [{mark}] {:width$}  {}\n",
            check.name, check.summary
        ));
        for line in &check.evidence {
            out.push_str(&format!("         {:width$}  - {line}\n", ""));
        }
    }
    if report.tenants.is_empty() {
        out.push_str("\nTENANTS\n  none to report\n");
        return out;
    }
    let rows: Vec<[String; 6]> = report
        .tenants
        .iter()
        .map(|t| {
            let rollout = t.rollout.as_ref();
            [
                t.namespace.clone(),
                t.cluster.clone(),
                if t.symptoms.is_empty() {
                    "-".into()
                } else {
                    t.symptoms
                        .iter()
                        .map(|s| s.as_str())
                        .collect::<Vec<_>>()
                        .join(",")
                },
                rollout
                    .and_then(|r| r.state.clone())
                    .unwrap_or_else(|| "-".into()),
                rollout
                    .and_then(|r| r.version.clone())
                    .unwrap_or_else(|| "-".into()),
                {
                    let why = match (t.explained_by_rollout, t.behind_seconds) {
                        (_, Some(s)) => format!("operator behind {}", express_triage::age(s)),
                        (true, None) => "follows the rollout".into(),
                        (false, None)
                            if t.symptoms.is_empty()
                                && t.rollout.as_ref().is_some_and(|r| r.active()) =>
                        {
                            "rolling out".into()
                        }
                        (false, None) if t.symptoms.is_empty() => "-".into(),
                        (false, None) => "no rollout explains it".into(),
                    };
                    // The nodes down no delivery moves (and bounces): what L2 looks at next.
                    let nodes: Vec<String> = t
                        .nodes_down
                        .iter()
                        .filter(|n| n.work != Some(express_triage::Work::Delivery))
                        .map(|n| n.describe(stuck_after_seconds))
                        .collect();
                    if nodes.is_empty() {
                        why
                    } else {
                        format!("{why}: {}", nodes.join("; "))
                    }
                },
            ]
        })
        .collect();
    let header = [
        "NAMESPACE",
        "CLUSTER",
        "SYMPTOMS",
        "ROLLOUT",
        "VERSION",
        "WHY",
    ];
    let widths: Vec<usize> = (0..6)
        .map(|i| {
            rows.iter()
                .map(|r| r[i].len())
                .chain([header[i].len()])
                .max()
                .unwrap_or(0)
        })
        .collect();
    let line = |cells: &[&str]| {
        let mut text = String::from(" ");
        for (i, cell) in cells.iter().enumerate() {
            if i + 1 == cells.len() {
                text.push_str(&format!(" {cell}"));
            } else {
                text.push_str(&format!(" {cell:w$}", w = widths[i]));
            }
        }
        text.push('\n');
        text
    };
    out.push_str("\nTENANTS\n");
    out.push_str(&line(&header));
    for row in &rows {
        let cells: Vec<&str> = row.iter().map(String::as_str).collect();
        out.push_str(&line(&cells));
    }
    out
}
