//! `kubectl-express`: the kubectl plugin for Express clusters (DESIGN section 9).
//!
//! Verbs: `plan --offline`, which shows the order in which the operator would change nodes,
//! computed by the same planner the operator runs; `bounce`, which asks the operator to
//! restart one node's pod and can follow it to the end.

mod bounce;
mod connect;
mod control;
mod exit;
mod graph;
mod history;
mod live;
mod manifests;
mod plan;
mod revisions;
mod status;
mod view;

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
    /// No colour or symbols, even on a terminal.
    #[arg(long, global = true)]
    no_color: bool,
}

#[derive(Subcommand)]
enum Command {
    /// Show what the operator does next and in which order (live, --offline, or as a graph)
    ///
    /// Reads the live cluster, or manifests with --offline -f; -o mermaid|dot draws the
    /// provisioning and upgrade prerequisite graphs.
    Plan {
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
        output: plan::OutputFormat,
        /// Every namespace (live).
        #[arg(short = 'A', long)]
        all_namespaces: bool,
        /// Namespace of the operator, where the express-operator-control ConfigMap lives.
        #[arg(long, default_value = "express-system")]
        operator_namespace: String,
        #[command(flatten)]
        connect: connect::ConnectArgs,
    },
    /// Restart one node's pod safely, on the revision it runs
    ///
    /// Prints the request id; with --wait, follows the bounce to its end (DESIGN section 6).
    Bounce(bounce::BounceArgs),
    /// Follow a cluster's rollout to its end, with an exit code for pipelines
    ///
    /// Exit 0 done, 1 failed, 3 timeout, 4 paused (with --fail-on-paused), 2 not found.
    Status {
        /// The Express cluster (its clusterName).
        cluster: String,
        /// Give up after this long (e.g. 90s, 10m): exit 3 with the last state.
        #[arg(long, value_name = "DURATION")]
        timeout: Option<String>,
        /// Keep watching until the cluster settles (false: print the state once).
        #[arg(long, default_value_t = true, action = clap::ArgAction::Set, value_name = "BOOL")]
        watch: bool,
        /// Exit 4 when a pause is in force instead of waiting for the resume.
        #[arg(long)]
        fail_on_paused: bool,
        #[command(flatten)]
        connect: connect::ConnectArgs,
    },
    /// Draw a cluster as a tree: every node in upgrade order, with its pod
    Get {
        /// The Express cluster (its clusterName).
        cluster: String,
        /// Redraw on every change; exit when the cluster has settled (0 done, 1 failed).
        #[arg(short = 'w', long)]
        watch: bool,
        #[command(flatten)]
        connect: connect::ConnectArgs,
    },
    /// One line per Express cluster: phase, rollout, progress, ready, paused
    List {
        /// Every namespace.
        #[arg(short = 'A', long)]
        all_namespaces: bool,
        /// The operator's namespace, where express-operator-control lives.
        #[arg(long, default_value = "express-system", value_name = "NS")]
        operator_namespace: String,
        #[command(flatten)]
        connect: connect::ConnectArgs,
    },
    /// List a node's kept revisions, show one, or diff two
    History {
        /// The Backend or Frontend.
        node: String,
        /// Print this revision's kept effective spec (its number or its hash).
        #[arg(long, value_name = "N", conflicts_with = "diff")]
        revision: Option<String>,
        /// Field-level diff between two kept revisions (numbers or hashes).
        #[arg(long, num_args = 2, value_names = ["A", "B"])]
        diff: Option<Vec<String>>,
        #[command(flatten)]
        connect: connect::ConnectArgs,
    },
    /// Check nodes' deployment revisions, local against live, before they restart anything
    ///
    /// Exit 0 no discrepancy, 1 a discrepancy (or, with --fail-on-restart, a node would
    /// restart), 2 errors.
    Revisions {
        #[command(flatten)]
        local: LocalArgs,
        /// Compare with the live cluster (implied without -f/--chart).
        #[arg(long)]
        live: bool,
        /// Every namespace (live only).
        #[arg(short = 'A', long)]
        all_namespaces: bool,
        /// Only this node.
        #[arg(long, value_name = "NAME")]
        node: Option<String>,
        /// Show each node's canonical effective spec: exactly what its revision hashes.
        #[arg(short = 'v', long)]
        verbose: bool,
        #[arg(short = 'o', long = "output", value_enum, default_value = "table")]
        output: RevisionsOutput,
        /// Exit 1 also when any node would restart.
        #[arg(long)]
        fail_on_restart: bool,
        #[arg(long, default_value = "express-system", value_name = "NS")]
        operator_namespace: String,
        #[command(flatten)]
        connect: connect::ConnectArgs,
    },
    /// Field-level diff of the effective spec, live against local, for nodes that would restart
    ///
    /// Exit 0 no difference, 1 differences, 2 errors (like kubectl diff).
    Diff {
        #[command(flatten)]
        local: LocalArgs,
        #[arg(long, default_value = "express-system", value_name = "NS")]
        operator_namespace: String,
        #[command(flatten)]
        connect: connect::ConnectArgs,
    },
    /// Print shell completions (bash, zsh, fish, ...)
    Completion {
        #[arg(value_enum)]
        shell: clap_complete::Shell,
    },
    /// Print the plugin's version and the operator's
    Version {
        /// The operator's namespace (its Deployment and Lease are read there).
        #[arg(long, default_value = "express-system", value_name = "NS")]
        operator_namespace: String,
        #[command(flatten)]
        connect: connect::ConnectArgs,
    },
    /// Pause a cluster, every cluster of a namespace, or every cluster
    Pause(PauseArgs),
    /// Resume what `pause` paused, in the same scope
    Resume(PauseArgs),
    /// Stop a cluster's current rollout, optionally rolling back
    Abort {
        cluster: String,
        /// Return the nodes the rollout changed to their previous revision.
        #[arg(long)]
        rollback: bool,
        /// Return once the operator has recorded the request.
        #[arg(long)]
        wait: bool,
        #[command(flatten)]
        connect: connect::ConnectArgs,
    },
    /// Clear a failed or aborted rollout
    Retry {
        cluster: String,
        /// Return once the operator has recorded the request.
        #[arg(long)]
        wait: bool,
        #[command(flatten)]
        connect: connect::ConnectArgs,
    },
}

/// Local objects: rendered manifests, or a chart rendered with `helm template`.
#[derive(clap::Args, Clone, Debug)]
struct LocalArgs {
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
    fn sources(&self) -> revisions::Sources {
        revisions::Sources {
            files: self.files.clone(),
            chart: self.chart.clone(),
            values: self.values.clone(),
            set: self.set.clone(),
            release: self.release.clone(),
            helm: self.helm.clone(),
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
enum RevisionsOutput {
    Table,
    Json,
}

/// Runs `revisions` or `diff`: every error, unreachable cluster included, exits 2.
fn check<F, Fut>(verb: &str, connect: &connect::ConnectArgs, live: bool, run: F) -> ExitCode
where
    F: FnOnce(Option<kube::Client>, String) -> Fut,
    Fut: std::future::Future<Output = Result<ExitCode, exit::Exit>>,
{
    let runtime = match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(runtime) => runtime,
        Err(err) => return exit::Exit::usage(format!("cannot start: {err}")).report(verb),
    };
    exit::finish(
        verb,
        runtime.block_on(async {
            if !live {
                let namespace = connect
                    .namespace
                    .clone()
                    .unwrap_or_else(|| "default".into());
                return run(None, namespace).await;
            }
            let connection = connect.connect().await.map_err(exit::Exit::usage)?;
            run(Some(connection.client), connection.namespace).await
        }),
    )
}

#[derive(clap::Args)]
#[command(group(clap::ArgGroup::new("scope").required(true).args(["cluster", "namespace_wide", "all"])))]
struct PauseArgs {
    /// The Express cluster (its ExpressCluster's spec.paused).
    cluster: Option<String>,
    /// Every Express cluster of the namespace (ConfigMap express-control).
    #[arg(long)]
    namespace_wide: bool,
    /// Every Express cluster the operator manages (ConfigMap express-operator-control).
    #[arg(long)]
    all: bool,
    /// Why (shown in every paused cluster's status).
    #[arg(long, value_name = "TEXT")]
    reason: Option<String>,
    /// The operator's namespace, where express-operator-control lives.
    #[arg(long, default_value = "express-system", value_name = "NS")]
    operator_namespace: String,
    #[command(flatten)]
    connect: connect::ConnectArgs,
}

/// A request id nobody else generates: the instant to the millisecond and this process.
pub fn request_id() -> String {
    let now = k8s_openapi::jiff::Timestamp::now();
    format!(
        "cli-{}-{:x}",
        now.strftime("%Y%m%dt%H%M%S%3f"),
        std::process::id()
    )
}

/// Runs a live verb: connects, then runs it on a single-threaded runtime.
fn live<F, Fut>(verb: &str, connect: &connect::ConnectArgs, run: F) -> ExitCode
where
    F: FnOnce(connect::Connection) -> Fut,
    Fut: std::future::Future<Output = Result<ExitCode, exit::Exit>>,
{
    let runtime = match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(runtime) => runtime,
        Err(err) => return exit::Exit::failure(format!("cannot start: {err}")).report(verb),
    };
    exit::finish(
        verb,
        runtime.block_on(async {
            let connection = connect.connect().await.map_err(exit::Exit::failure)?;
            run(connection).await
        }),
    )
}

fn pause_scope(args: &PauseArgs) -> control::Scope {
    match (&args.cluster, args.all) {
        (Some(cluster), _) => control::Scope::Cluster(cluster.clone()),
        (None, true) => control::Scope::All {
            operator_namespace: args.operator_namespace.clone(),
        },
        (None, false) => control::Scope::Namespace,
    }
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let style = view::Style::detect(cli.no_color);
    match cli.command {
        Command::Plan {
            cluster,
            offline,
            files,
            output,
            all_namespaces,
            operator_namespace,
            connect,
        } => {
            if offline {
                if files.is_empty() {
                    return exit::Exit::usage("--offline needs -f FILE (manifests to plan from)")
                        .report("plan");
                }
                let request = plan::OfflinePlan {
                    files,
                    namespace: connect.namespace.unwrap_or_else(|| "default".into()),
                    operator_namespace,
                };
                return match plan::offline(&request) {
                    Ok(report) => print_plan(&report, output),
                    Err(errors) => {
                        for error in &errors {
                            eprintln!("error: {error}");
                        }
                        exit::Exit::failure(format!(
                            "{} problem(s) found; nothing planned",
                            errors.len()
                        ))
                        .report("plan")
                    }
                };
            }
            if !files.is_empty() {
                return exit::Exit::usage(
                    "-f reads manifests: add --offline, or drop -f to plan the live cluster",
                )
                .report("plan");
            }
            live("plan", &connect, |c| async move {
                let namespace = (!all_namespaces).then_some(c.namespace.as_str());
                let objects = live::load(&c.client, namespace, &operator_namespace)
                    .await
                    .map_err(exit::Exit::failure)?;
                let report = plan::live(&objects, &operator_namespace, cluster.as_deref());
                if let (Some(cluster), true) = (&cluster, report.clusters.is_empty()) {
                    return Err(exit::Exit::usage(format!(
                        "no Express cluster {cluster} in namespace {}",
                        namespace.unwrap_or("(any)")
                    )));
                }
                Ok(print_plan(&report, output))
            })
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
        Command::Status {
            cluster,
            timeout,
            watch,
            fail_on_paused,
            connect,
        } => {
            let timeout = match timeout.as_deref().map(express_api::bounce::parse_duration) {
                None => None,
                Some(Ok(seconds)) => Some(std::time::Duration::from_secs(seconds)),
                Some(Err(why)) => {
                    return exit::Exit::usage(format!("--timeout: {why}")).report("status");
                }
            };
            live("status", &connect, |c| async move {
                let args = status::StatusArgs {
                    cluster,
                    namespace: c.namespace.clone(),
                    timeout,
                    watch,
                    fail_on_paused,
                };
                status::run(&c.client, &args).await
            })
        }
        Command::Get {
            cluster,
            watch,
            connect,
        } => live("get", &connect, |c| async move {
            get(&c, &cluster, watch, style).await
        }),
        Command::List {
            all_namespaces,
            operator_namespace,
            connect,
        } => live("list", &connect, |c| async move {
            let namespace = (!all_namespaces).then_some(c.namespace.as_str());
            let objects = live::load(&c.client, namespace, &operator_namespace)
                .await
                .map_err(exit::Exit::failure)?;
            print!(
                "{}",
                view::render_list(&view::list_rows(&objects, &operator_namespace))
            );
            Ok(ExitCode::SUCCESS)
        }),
        Command::History {
            node,
            revision,
            diff,
            connect,
        } => live("history", &connect, |c| async move {
            let show = match (revision, diff) {
                (Some(revision), _) => history::Show::Revision(revision),
                (None, Some(pair)) if pair.len() == 2 => {
                    history::Show::Diff(pair[0].clone(), pair[1].clone())
                }
                _ => history::Show::Table,
            };
            history::run(&c.client, &c.namespace, &node, show).await
        }),
        Command::Revisions {
            local,
            live,
            all_namespaces,
            node,
            verbose,
            output,
            fail_on_restart,
            operator_namespace,
            connect,
        } => {
            let sources = local.sources();
            let live = live || !sources.is_local();
            check(
                "revisions",
                &connect,
                live,
                |client, namespace| async move {
                    let options = revisions::Options {
                        sources,
                        namespace,
                        all_namespaces,
                        node,
                        verbose,
                        json: output == RevisionsOutput::Json,
                        fail_on_restart,
                        operator_namespace,
                    };
                    revisions::revisions(client.as_ref(), &options).await
                },
            )
        }
        Command::Diff {
            local,
            operator_namespace,
            connect,
        } => {
            let sources = local.sources();
            if !sources.is_local() {
                return exit::Exit::usage("diff needs local objects: -f FILE or --chart DIR")
                    .report("diff");
            }
            check("diff", &connect, true, |client, namespace| async move {
                let Some(client) = client else {
                    return Err(exit::Exit::usage("diff needs the live cluster"));
                };
                let options = revisions::Options {
                    sources,
                    namespace,
                    all_namespaces: false,
                    node: None,
                    verbose: false,
                    json: false,
                    fail_on_restart: false,
                    operator_namespace,
                };
                revisions::diff(&client, &options).await
            })
        }
        Command::Completion { shell } => {
            use clap::CommandFactory as _;
            clap_complete::generate(
                shell,
                &mut Cli::command(),
                "kubectl-express",
                &mut std::io::stdout(),
            );
            ExitCode::SUCCESS
        }
        Command::Version {
            operator_namespace,
            connect,
        } => {
            println!("kubectl-express {}", env!("CARGO_PKG_VERSION"));
            live("version", &connect, |c| async move {
                println!(
                    "operator: {}",
                    operator_version(&c.client, &operator_namespace).await
                );
                Ok(ExitCode::SUCCESS)
            })
        }
        Command::Pause(args) => live("pause", &args.connect.clone(), |c| async move {
            control::set_paused(
                &c.client,
                &c.namespace,
                &pause_scope(&args),
                true,
                args.reason.as_deref(),
            )
            .await
        }),
        Command::Resume(args) => live("resume", &args.connect.clone(), |c| async move {
            control::set_paused(&c.client, &c.namespace, &pause_scope(&args), false, None).await
        }),
        Command::Abort {
            cluster,
            rollback,
            wait,
            connect,
        } => live("abort", &connect, |c| async move {
            control::request(
                &c.client,
                &c.namespace,
                &cluster,
                control::Request::Abort { rollback },
                wait,
            )
            .await
        }),
        Command::Retry {
            cluster,
            wait,
            connect,
        } => live("retry", &connect, |c| async move {
            control::request(
                &c.client,
                &c.namespace,
                &cluster,
                control::Request::Retry,
                wait,
            )
            .await
        }),
    }
}

/// Prints a plan in the chosen form, warnings on stderr.
fn print_plan(report: &plan::Report, output: plan::OutputFormat) -> ExitCode {
    for warning in &report.warnings {
        eprintln!("warning: {warning}");
    }
    match output {
        plan::OutputFormat::Table => print!("{}", plan::render_table(report)),
        plan::OutputFormat::Json => match plan::render_json(report) {
            Ok(json) => println!("{json}"),
            Err(err) => {
                return exit::Exit::failure(format!("cannot render JSON: {err}")).report("plan");
            }
        },
        plan::OutputFormat::Mermaid | plan::OutputFormat::Dot => {
            let format = if output == plan::OutputFormat::Mermaid {
                graph::Format::Mermaid
            } else {
                graph::Format::Dot
            };
            for cluster in &report.clusters {
                print!("{}", graph::render(&cluster.snapshot, format));
            }
        }
    }
    ExitCode::SUCCESS
}

/// `get`: the tree once, or (`-w`) redrawn on every change until the cluster settles.
async fn get(
    c: &connect::Connection,
    cluster: &str,
    watch: bool,
    style: view::Style,
) -> Result<ExitCode, exit::Exit> {
    let namespace = c.namespace.as_str();
    let missing = || {
        exit::Exit::usage(format!(
            "no Express cluster {cluster} in namespace {namespace} (no ExpressCluster and no node names it)"
        ))
    };
    let found = |objects: &express_api::Objects| {
        objects.express_cluster(namespace, cluster).is_some()
            || !objects.nodes_of(namespace, cluster).is_empty()
    };
    if !watch {
        let objects = live::load(&c.client, Some(namespace), "")
            .await
            .map_err(exit::Exit::failure)?;
        if !found(&objects) {
            return Err(missing());
        }
        print!("{}", view::render_tree(&objects, namespace, cluster, style));
        return Ok(ExitCode::SUCCESS);
    }
    let mut watched = live::Watched::start(&c.client, namespace);
    watched.ready().await.map_err(exit::Exit::failure)?;
    let mut last = String::new();
    loop {
        let objects = watched.objects();
        if !found(&objects) {
            return Err(missing());
        }
        let tree = view::render_tree(&objects, namespace, cluster, style);
        if tree != last {
            if style.color {
                // Redraw in place on a terminal; plain output appends each drawing.
                print!("\x1b[2J\x1b[H");
            } else if !last.is_empty() {
                println!();
            }
            print!("{tree}");
            last = tree;
        }
        match view::settled(&objects, namespace, cluster) {
            Some(status::Outcome::Done) => return Ok(ExitCode::SUCCESS),
            Some(_) => return Ok(ExitCode::from(1)),
            None => {}
        }
        watched.changed().await.map_err(exit::Exit::failure)?;
    }
}

/// The operator's version: the image of its Deployment `express-operator` (as the chart names
/// it), else who holds its Lease; what could not be read is said, not an error.
async fn operator_version(client: &kube::Client, namespace: &str) -> String {
    use k8s_openapi::api::apps::v1::Deployment;
    use k8s_openapi::api::coordination::v1::Lease;
    use kube::api::Api;
    match Api::<Deployment>::namespaced(client.clone(), namespace)
        .get_opt("express-operator")
        .await
    {
        Ok(Some(deployment)) => {
            let image = deployment
                .spec
                .template
                .spec
                .and_then(|s| s.containers.into_iter().next())
                .and_then(|c| c.image);
            if let Some(image) = image {
                return format!("{image} (Deployment {namespace}/express-operator)");
            }
        }
        Ok(None) => {}
        Err(err) => return format!("unknown (cannot read the cluster: {err})"),
    }
    match Api::<Lease>::namespaced(client.clone(), namespace)
        .get_opt("express-operator")
        .await
    {
        Ok(Some(lease)) => match lease.spec.and_then(|s| s.holder_identity) {
            Some(holder) => format!(
                "running as {holder} (Lease {namespace}/express-operator); version unknown: no Deployment express-operator"
            ),
            None => format!("no leader holds Lease {namespace}/express-operator"),
        },
        Ok(None) => {
            format!("not found in namespace {namespace} (no Deployment or Lease express-operator)")
        }
        Err(err) => format!("unknown (cannot read the cluster: {err})"),
    }
}
