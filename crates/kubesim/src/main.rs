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
        /// Seconds between watch bookmarks (for watches that ask for them).
        #[arg(long, default_value_t = 5.0)]
        bookmark_interval: f64,
        /// Seconds a new pod takes to become Ready (unless it or a rule says otherwise).
        #[arg(long, default_value_t = 1.0)]
        startup_seconds: f64,
        /// Seconds a deleted pod takes to terminate (unless it or a rule says otherwise).
        #[arg(long, default_value_t = 1.0)]
        terminate_seconds: f64,
        /// YAML or JSON file with a list of kubelet rules ({image, labels, behavior,
        /// startupSeconds, terminateSeconds}).
        #[arg(long, value_name = "FILE")]
        kubelet_rules: Option<PathBuf>,
        /// Require `Authorization: Bearer TOKEN` on every request; any other request gets 401
        /// Unauthorized. The kubeconfig written by --kubeconfig presents it.
        #[arg(long, value_name = "TOKEN")]
        token: Option<String>,
    },
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let Command::Serve {
        addr,
        kubeconfig,
        allow_non_loopback,
        bookmark_interval,
        startup_seconds,
        terminate_seconds,
        kubelet_rules,
        token,
    } = cli.command;
    if let Some(token) = &token
        && (token.is_empty() || !token.bytes().all(|b| b.is_ascii_graphic()))
    {
        eprintln!("kubesim: --token must be printable ASCII without spaces, and not empty");
        return ExitCode::from(2);
    }
    let rules = match kubelet_rules.as_deref().map(read_rules).transpose() {
        Ok(rules) => rules.unwrap_or_default(),
        Err(message) => {
            eprintln!("kubesim: {message}");
            return ExitCode::from(2);
        }
    };
    if !(bookmark_interval.is_finite() && bookmark_interval > 0.0) {
        eprintln!("kubesim: --bookmark-interval must be a positive number of seconds");
        return ExitCode::from(2);
    }
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
            bookmark_interval: std::time::Duration::from_secs_f64(bookmark_interval),
            pod_termination_seconds: terminate_seconds,
            kubelet: kubesim::kubelet::KubeletConfig {
                startup_seconds,
                terminate_seconds,
                rules,
            },
            token,
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

fn read_rules(path: &std::path::Path) -> Result<Vec<kubesim::kubelet::KubeletRule>, String> {
    let text = std::fs::read_to_string(path)
        .map_err(|e| format!("cannot read {}: {e}", path.display()))?;
    serde_yaml::from_str(&text)
        .map_err(|e| format!("{}: not a list of kubelet rules: {e}", path.display()))
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
