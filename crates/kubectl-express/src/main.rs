//! `kubectl-express`: the kubectl plugin for Express clusters (DESIGN section 9).
//!
//! Verbs: `plan --offline`, which shows the order in which the operator would change nodes,
//! computed by the same planner the operator runs; `bounce`, which asks the operator to
//! restart one node's pod and can follow it to the end.

mod bounce;
mod connect;
mod control;
mod exit;
mod live;
mod manifests;
mod plan;
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
    /// Follow an Express cluster until its rollout ends: exit 0 done, 1 failed, 3 timeout,
    /// 4 paused (with --fail-on-paused), 2 not found.
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
    /// Draw an Express cluster as a tree: the ExpressCluster, every node in upgrade order, its pod.
    Get {
        /// The Express cluster (its clusterName).
        cluster: String,
        /// Redraw on every change; exit when the cluster has settled (0 done, 1 failed).
        #[arg(short = 'w', long)]
        watch: bool,
        #[command(flatten)]
        connect: connect::ConnectArgs,
    },
    /// One line per Express cluster: phase, rollout, progress, current node, ready, paused.
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
    /// Pause an Express cluster, every cluster of a namespace, or every cluster.
    Pause(PauseArgs),
    /// Resume what `pause` paused, in the same scope.
    Resume(PauseArgs),
    /// Stop the current rollout of an Express cluster (prints the request id).
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
    /// Clear a failed or aborted rollout of an Express cluster (prints the request id).
    Retry {
        cluster: String,
        /// Return once the operator has recorded the request.
        #[arg(long)]
        wait: bool,
        #[command(flatten)]
        connect: connect::ConnectArgs,
    },
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
            let objects = live::Objects::load(&c.client, namespace, &operator_namespace)
                .await
                .map_err(exit::Exit::failure)?;
            print!(
                "{}",
                view::render_list(&view::list_rows(&objects, &operator_namespace))
            );
            Ok(ExitCode::SUCCESS)
        }),
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
    let found = |objects: &live::Objects| {
        objects.express_cluster(namespace, cluster).is_some()
            || !objects.nodes_of(namespace, cluster).is_empty()
    };
    if !watch {
        let objects = live::Objects::load(&c.client, Some(namespace), "")
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
