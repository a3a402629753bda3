//! `express-operator`: the operator binary (DESIGN section 9): `run` (the controller), `crd`
//! (print the CRDs), `dev` (local cluster, sample tenants, operator).

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Parser, Subcommand};
use express_operator::controller;
use express_operator::run::{self, RunArgs};

// The only unsafe code of the workspace: jemalloc's C API, behind a safe `GlobalAlloc`. Without
// the `jemalloc` feature (the local demo's quick build) the system allocator serves, and neither
// the heap's figures nor its compaction exist.
#[cfg(feature = "jemalloc")]
#[allow(unsafe_code)]
mod allocator;
mod crd_verb;

use crd_verb::{CrdAction, crd_check_command, crds, print_crds, write_crds};

#[derive(Parser)]
#[command(
    name = "express-operator",
    version,
    about = "Kubernetes operator for Express clusters"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Run the controller against the cluster of the kubeconfig (or in-cluster config).
    Run(Box<RunArgs>),
    /// Local cluster (kubesim), CRDs, sample tenants and the operator; keeps running.
    #[cfg(feature = "dev")]
    Dev {
        /// Provision a cluster, roll out an upgrade printing each step, then exit.
        #[arg(long)]
        demo: bool,
        /// Where to write the kubeconfig of the local cluster.
        #[arg(long, default_value = "express-dev.kubeconfig")]
        kubeconfig: PathBuf,
        /// Port of the local API server (0 picks a free one).
        #[arg(long, default_value_t = 0)]
        port: u16,
        /// Seconds each simulated pod takes to become Ready.
        #[arg(long, default_value_t = 1.0)]
        startup_seconds: f64,
        /// Local DCs (1 to 5): each its own kubesim with two operator rings, one kubeconfig
        /// with a context per DC; with --demo, a release across them.
        #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u8).range(1..=5))]
        dcs: u8,
        /// With --dcs and --demo: the DC whose canary build cannot write (it rolls back and the
        /// release stops).
        #[arg(long, value_name = "DC", requires = "demo")]
        fail_in: Option<String>,
    },
    /// Print every CustomResourceDefinition as YAML (or write one file per CRD); `crd check`
    /// compares them with what a cluster has and stores.
    #[command(args_conflicts_with_subcommands = true)]
    Crd {
        #[command(subcommand)]
        action: Option<CrdAction>,
        /// Write `<crd-name>.yaml` files into this directory instead of printing.
        #[arg(long, value_name = "DIR")]
        output_dir: Option<PathBuf>,
        /// Serve v1beta1 beside v1alpha1 (still stored), converted by the operator's webhook
        /// (DESIGN section 18): the CRDs a build serving it applies, not yet `deploy/crds`.
        #[arg(long)]
        serve_v1beta1: bool,
        /// With --serve-v1beta1: the URL the API server reaches the webhook at (an operator run
        /// outside the cluster); default the chart's Service
        /// express-system/express-operator-webhook, port 443.
        #[arg(long, value_name = "URL", requires = "serve_v1beta1")]
        webhook_url: Option<String>,
    },
}

#[derive(Debug, thiserror::Error)]
enum Error {
    #[error(transparent)]
    Crd(#[from] crd_verb::CrdError),
    #[error("cannot reach the cluster (kubeconfig or in-cluster config): {0}")]
    Client(kube::Error),
    #[error("cannot start the runtime: {0}")]
    Runtime(std::io::Error),
    #[error(transparent)]
    Run(#[from] run::RunError),
    #[error("{0}")]
    #[cfg(feature = "dev")]
    Dev(express_operator::dev::DevError),
}

/// The allocator, with the long-lived caches in an arena of their own (`allocator`).
#[cfg(feature = "jemalloc")]
#[global_allocator]
static ALLOCATOR: allocator::LifetimeArenas = allocator::LifetimeArenas;

/// What the heap compaction asks of the allocator, where the allocator offers it.
#[cfg(feature = "jemalloc")]
fn heap_compactor() -> Option<controller::HeapCompactor> {
    Some(controller::HeapCompactor {
        heap: allocator::heap,
        without_thread_cache: allocator::without_thread_cache,
        return_free_pages: allocator::return_free_pages,
    })
}

#[cfg(not(feature = "jemalloc"))]
fn heap_compactor() -> Option<controller::HeapCompactor> {
    None
}

fn main() -> ExitCode {
    #[cfg(feature = "jemalloc")]
    allocator::reserve_long_lived_arena();
    let cli = Cli::parse();
    let result = match cli.command {
        Command::Crd {
            action: Some(check),
            ..
        } => return crd_check_command(check),
        Command::Crd {
            action: None,
            output_dir,
            serve_v1beta1,
            webhook_url,
        } => crds(serve_v1beta1, webhook_url)
            .and_then(|crds| match output_dir {
                Some(dir) => write_crds(&dir, &crds),
                None => print_crds(&crds),
            })
            .map_err(Error::from),
        #[cfg(feature = "dev")]
        Command::Dev {
            demo,
            kubeconfig,
            port,
            startup_seconds,
            dcs,
            fail_in,
        } => {
            if std::env::var_os("RUST_LOG").is_some() {
                init_tracing();
            }
            let options = express_operator::dev::DevOptions {
                kubeconfig,
                port,
                startup_seconds,
                demo,
                dcs: usize::from(dcs),
                fail_in,
            };
            tokio::runtime::Runtime::new()
                .map_err(Error::Runtime)
                .and_then(|rt| {
                    rt.block_on(express_operator::dev::run(options))
                        .map_err(Error::Dev)
                })
        }
        Command::Run(args) => run_command(*args),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(err) => {
            eprintln!("express-operator: {err}");
            ExitCode::FAILURE
        }
    }
}

fn init_tracing() {
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| "info,kube=warn".into());
    tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_target(false)
        .init();
}

/// `run`: the flags sorted into what the wiring takes, on a runtime of its own.
fn run_command(args: RunArgs) -> Result<(), Error> {
    init_tracing();
    let mut options = args.into_options(|name| std::env::var(name).ok());
    options.compact_heap = heap_compactor();
    let runtime = tokio::runtime::Runtime::new().map_err(Error::Runtime)?;
    runtime.block_on(async {
        let config = kube::Config::infer()
            .await
            .map_err(|e| Error::Client(kube::Error::InferConfig(e)))?;
        run::run(config, options, run::shutdown_signal())
            .await
            .map_err(Error::from)
    })
}
