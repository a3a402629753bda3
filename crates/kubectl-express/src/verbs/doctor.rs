//! `kubectl express doctor [-n NS] [-o text|json]`: is it the infrastructure? Reads the whole
//! fleet the kubeconfig can see (Express objects in every namespace, each operator ring's Lease,
//! Deployment and pods, and Warning events), runs the checks of `express_triage` and gives one
//! verdict. With `-n NS` it then explains that namespace's clusters. Exit 0 healthy, 1 tenant
//! or deployment, 3 infrastructure, 2 when it cannot run.

use std::collections::HashMap;
use std::process::ExitCode;

use express_api::keys::REPORTING_CONTROLLER;
use express_api::rings;
use express_triage::observe;
use express_triage::{Fleet, LeaseSeen, Report, Ring, Status, Thresholds, Verdict};
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::api::events::v1::Event;
use kube::api::{Api, ListParams};
use kube::{Client, ResourceExt as _};

use super::forbidden;
use crate::connect::ConnectArgs;
use crate::exit::Exit;
use crate::{live, view};

/// The label the operator chart puts on every ring's Deployment.
const OPERATOR_SELECTOR: &str = "app.kubernetes.io/name=express-operator";
const NAME_LABEL: &str = "app.kubernetes.io/name";
const OPERATOR_NAME: &str = "express-operator";

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
    connect: ConnectArgs,
}

/// The exit code of each verdict.
fn exit_code(verdict: Verdict) -> ExitCode {
    ExitCode::from(match verdict {
        Verdict::Healthy => 0,
        Verdict::Tenant | Verdict::Deployment => 1,
        Verdict::Infrastructure => 3,
    })
}

pub fn run(args: Args) -> ExitCode {
    let focus = args.connect.namespace.clone();
    super::checked("doctor", &args.connect, true, |client, _| async move {
        let client = client.ok_or_else(|| Exit::usage("no cluster to read"))?;
        let thresholds = Thresholds {
            stale_after_seconds: seconds(args.stale_after),
            spread_namespaces: args.spread_namespaces,
            spread_fraction: args.spread_fraction,
            since_seconds: seconds(args.since),
            recent_rollout_seconds: seconds(args.recent_rollout),
        };
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
                print!("{}", render(&report));
                if let Some(namespace) = &focus {
                    let rows: Vec<view::ListRow> =
                        view::list_rows(&objects, &args.operator_namespace)
                            .into_iter()
                            .filter(|r| &r.namespace == namespace)
                            .collect();
                    println!("\nNAMESPACE {namespace}");
                    print!("{}", view::render_list(&rows));
                }
            }
        }
        Ok(exit_code(report.verdict))
    })
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
    let fleet = fleet_around(client, operator_namespace, &objects, unreadable).await;
    Ok((fleet, objects))
}

/// What triage needs besides the Express objects already read: each ring's Lease, Deployment
/// and pods, and the operator's Warning events. What cannot be read is named in `unreadable`.
/// The dashboard's banner calls it with the objects its watches hold.
pub(crate) async fn fleet_around(
    client: &Client,
    operator_namespace: &str,
    objects: &express_api::Objects,
    mut unreadable: Vec<String>,
) -> Fleet {
    let inventory = live::inventory(objects, operator_namespace);
    let pauses: HashMap<express_api::ClusterKey, (String, Option<String>)> =
        express_planner::observe::snapshots(&inventory)
            .into_iter()
            .filter_map(|s| {
                let pause = s.pause?;
                Some((
                    express_api::ClusterKey::new(s.namespace, s.cluster_name),
                    (pause.scope.name().to_owned(), pause.reason),
                ))
            })
            .collect();
    let tenants = observe::tenants(objects, |key| pauses.get(key).cloned());

    // Every ring with a tenant, and `default` always: each is checked for a live leader.
    let mut ring_names: std::collections::BTreeSet<String> =
        tenants.iter().map(|t| t.ring.clone()).collect();
    ring_names.insert(rings::DEFAULT_RING.to_owned());
    let selected = ListParams::default().labels(OPERATOR_SELECTOR);
    let deployments = match Api::<Deployment>::namespaced(client.clone(), operator_namespace)
        .list(&selected)
        .await
    {
        Ok(list) => list.items,
        Err(error) => {
            unreadable.push(format!(
                "Deployments in {operator_namespace}: {}",
                reason(&error)
            ));
            Vec::new()
        }
    };
    // Pods of every ring: the chart names a ring's pods `express-operator-RING`.
    let operator_pods = match Api::<Pod>::namespaced(client.clone(), operator_namespace)
        .list(&ListParams::default())
        .await
    {
        Ok(list) => list
            .items
            .into_iter()
            .filter(|p| {
                p.labels().get(NAME_LABEL).is_some_and(|n| {
                    n == OPERATOR_NAME || n.starts_with(&format!("{OPERATOR_NAME}-"))
                })
            })
            .collect(),
        Err(error) => {
            unreadable.push(format!("pods in {operator_namespace}: {}", reason(&error)));
            Vec::new()
        }
    };
    let mut fleet_rings = Vec::new();
    for ring in ring_names {
        let (namespace, name) = (operator_namespace.to_owned(), rings::lease_name(&ring));
        let lease = match Api::<Lease>::namespaced(client.clone(), operator_namespace)
            .get_opt(&name)
            .await
        {
            Ok(Some(lease)) => LeaseSeen::Seen(observe::lease(&lease)),
            Ok(None) => LeaseSeen::Missing { namespace, name },
            Err(error) => {
                unreadable.push(format!("Lease {namespace}/{name}: {}", reason(&error)));
                LeaseSeen::Unreadable { namespace, name }
            }
        };
        fleet_rings.push(Ring {
            deployment: deployments
                .iter()
                .find(|d| rings::ring_of(d.labels()) == ring)
                .map(observe::deployment),
            pods: operator_pods
                .iter()
                .filter(|p| rings::ring_of(p.labels()) == ring)
                .map(observe::operator_pod)
                .collect(),
            name: ring,
            lease,
        });
    }
    let warnings = match Api::<Event>::all(client.clone())
        .list(&ListParams::default())
        .await
    {
        Ok(list) => list
            .items
            .iter()
            .filter(|e| e.reporting_controller.as_deref() == Some(REPORTING_CONTROLLER))
            .filter_map(observe::warning)
            .collect(),
        Err(error) => {
            unreadable.push(format!("Events: {}", reason(&error)));
            Vec::new()
        }
    };
    Fleet {
        now: k8s_openapi::jiff::Timestamp::now(),
        rings: fleet_rings,
        tenants,
        warnings,
        unreadable,
    }
}

/// Why a read failed, in a few words.
fn reason(error: &kube::Error) -> String {
    if forbidden(error) {
        "forbidden".into()
    } else {
        error.to_string()
    }
}

/// The runbook's order: the verdict and why, each check with its evidence, then the tenants.
pub fn render(report: &Report) -> String {
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
                match (t.explained_by_rollout, t.behind_seconds) {
                    (_, Some(s)) => format!("operator behind {}", express_triage::age(s)),
                    (true, None) => "follows the rollout".into(),
                    (false, None) if t.symptoms.is_empty() => "rolling out".into(),
                    (false, None) => "no rollout explains it".into(),
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
