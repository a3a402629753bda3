//! `kubesim serve`: runs the emulator until SIGINT or SIGTERM.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Parser, Subcommand};

#[derive(Parser)]
#[command(
    name = "kubesim",
    version,
    about = "Local Kubernetes API server emulator with a simulated kubelet"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Serve the Kubernetes API over plain HTTP.
    Serve {
        /// Address to listen on; port 0 picks a free port.
        #[arg(long, default_value = "127.0.0.1:0")]
        addr: SocketAddr,
        /// Write a kubeconfig pointing at the server here.
        #[arg(long)]
        kubeconfig: Option<PathBuf>,
        /// Allow listening on a non-loopback address (unauthenticated!).
        #[arg(long)]
        allow_non_loopback: bool,
    },
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let Command::Serve {
        addr,
        kubeconfig,
        allow_non_loopback,
    } = cli.command;
    let runtime = match tokio::runtime::Runtime::new() {
        Ok(runtime) => runtime,
        Err(err) => {
            eprintln!("kubesim: cannot start the runtime: {err}");
            return ExitCode::FAILURE;
        }
    };
    runtime.block_on(async move {
        let config = kubesim::Config {
            addr,
            allow_non_loopback,
            ..kubesim::Config::default()
        };
        let sim = match kubesim::KubeSim::start(config).await {
            Ok(sim) => sim,
            Err(err) => {
                eprintln!("kubesim: {err}");
                return ExitCode::FAILURE;
            }
        };
        if let Some(path) = &kubeconfig
            && let Err(err) = std::fs::write(path, sim.kubeconfig())
        {
            eprintln!("kubesim: cannot write {}: {err}", path.display());
            return ExitCode::FAILURE;
        }
        println!("kubesim serving {}", sim.url());
        if let Some(path) = &kubeconfig {
            println!(
                "kubeconfig written to {} (export KUBECONFIG={})",
                path.display(),
                path.display()
            );
        }
        wait_for_signal().await;
        sim.stop();
        ExitCode::SUCCESS
    })
}

async fn wait_for_signal() {
    use tokio::signal::unix::{SignalKind, signal};
    match signal(SignalKind::terminate()) {
        Ok(mut term) => {
            tokio::select! {
                _ = tokio::signal::ctrl_c() => {}
                _ = term.recv() => {}
            }
        }
        Err(_) => {
            let _ = tokio::signal::ctrl_c().await;
        }
    }
}
