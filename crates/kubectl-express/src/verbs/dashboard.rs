//! `kubectl express dashboard [--addr 127.0.0.1:3110] [-n NS | -A] [--read-only]`: serves the
//! dashboard ([`crate::dashboard`]) with the kubeconfig's identity until interrupted. It
//! listens on loopback unless told otherwise; another address must name the host names it is
//! reached by (`--allowed-host`), since the guard refuses any other `Host`.
//!
//! With the fleet verbs' selection (`--context a,b`, `/re/`, `^name`, `--all-contexts`) it
//! serves one fleet page over every DC selected (DESIGN section 13); no selection, or one plain
//! name, serves one context exactly as before.

use std::net::SocketAddr;
use std::process::ExitCode;

use std::time::Duration;

use crate::dashboard::dcs::FleetStart;
use crate::dashboard::server::{self, Settings};
use crate::verbs::args::OperatorNamespace;
use express_client::contexts::select::{FleetArgs, Mode};
use express_client::exit::Exit;

#[derive(clap::Args, Debug)]
pub struct Args {
    /// Where to listen (port 0: any free port; the URL is printed).
    #[arg(long, default_value = "127.0.0.1:3110", value_name = "HOST:PORT")]
    addr: SocketAddr,
    /// Every namespace (default: the namespace of -n or the context).
    #[arg(short = 'A', long)]
    all_namespaces: bool,
    /// Show no action buttons and refuse every action.
    #[arg(long)]
    read_only: bool,
    /// Across contexts: show no action buttons for this context and refuse its actions
    /// (repeatable).
    #[arg(long = "read-only-context", value_name = "NAME")]
    read_only_contexts: Vec<String>,
    /// A host name (with or without :PORT) the dashboard may be reached by, besides the
    /// loopback names; required to listen on another address.
    #[arg(long = "allowed-host", value_name = "HOST[:PORT]")]
    allowed_hosts: Vec<String>,
    /// Seconds between two runs of each DC's doctor: its banner, and a point on each release
    /// page's chart.
    #[arg(long, default_value_t = 15, value_name = "SECONDS")]
    doctor_interval: u64,
    /// Fill the watches by streaming lists where a DC answers them (paged lists otherwise):
    /// spares the API server the LIST, costs this process more CPU.
    #[arg(long)]
    streaming_lists: bool,
    #[command(flatten)]
    operator: OperatorNamespace,
    #[command(flatten)]
    connect: FleetArgs,
}

/// The `Host` values the guard accepts for a server on `address` (its port once known).
pub fn allowed_hosts(address: SocketAddr, extra: &[String]) -> Vec<String> {
    let port = address.port();
    let mut hosts = Vec::new();
    if address.ip().is_loopback() {
        hosts.push(match address {
            SocketAddr::V4(v4) => format!("{}:{port}", v4.ip()),
            SocketAddr::V6(v6) => format!("[{}]:{port}", v6.ip()),
        });
        hosts.push(format!("localhost:{port}"));
    }
    for host in extra {
        let with_port = if host
            .rsplit_once(':')
            .is_some_and(|(_, p)| p.parse::<u16>().is_ok())
            && !host.ends_with(']')
        {
            host.clone()
        } else {
            format!("{host}:{port}")
        };
        hosts.push(with_port);
    }
    // Browsers leave the default port out of Host.
    if port == 80 {
        let bare: Vec<String> = hosts
            .iter()
            .filter_map(|h| h.strip_suffix(":80").map(str::to_owned))
            .collect();
        hosts.extend(bare);
    }
    hosts
}

pub fn run(args: Args) -> ExitCode {
    if !args.addr.ip().is_loopback() && args.allowed_hosts.is_empty() {
        return Exit::usage(format!(
            "--addr {}: listening beyond loopback serves the dashboard, and its actions, to other machines; name the host names it will be reached by with --allowed-host",
            args.addr
        ))
        .report("dashboard");
    }
    let mode = match args.connect.mode() {
        Ok(mode) => mode,
        Err(e) => return Exit::usage(e.to_string()).report("dashboard"),
    };
    match mode {
        Mode::Single(connect) => {
            if !args.read_only_contexts.is_empty() {
                return Exit::usage(
                    "--read-only-context applies across contexts (--context a,b, /regex/ or --all-contexts); with one context use --read-only",
                )
                .report("dashboard");
            }
            super::live_serving("dashboard", &connect, |c| async move {
                let (listener, settings) = bind(&args).await?;
                let namespace = (!args.all_namespaces).then(|| c.namespace.clone());
                let banner = banner(&args, &settings);
                server::serve(c.client, namespace, settings, listener, move |_| {
                    println!("{banner}");
                })
                .await?;
                Ok(ExitCode::SUCCESS)
            })
        }
        Mode::Fleet(selection) => {
            let fleet_args = args.connect.clone();
            express_client::contexts::across::run(
                "dashboard",
                &fleet_args,
                selection,
                |plan| async move {
                    let unknown: Vec<&String> = args
                        .read_only_contexts
                        .iter()
                        .filter(|c| !plan.contexts.contains(c))
                        .collect();
                    if let Some(context) = unknown.first() {
                        return Err(Exit::usage(format!(
                            "--read-only-context {context}: not among the contexts selected ({})",
                            plan.contexts.join(", ")
                        )));
                    }
                    let (listener, settings) = bind(&args).await?;
                    let banner = banner(&args, &settings);
                    let start = FleetStart {
                        loaded: plan.loaded,
                        contexts: plan.contexts,
                        namespace: plan.namespace,
                        all_namespaces: args.all_namespaces,
                        read_only_contexts: args.read_only_contexts.clone(),
                        deadline: plan.deadline.max(Duration::from_secs(1)),
                    };
                    server::serve_fleet(start, settings, listener, move |_| {
                        println!("{banner}");
                    })
                    .await?;
                    Ok(ExitCode::SUCCESS)
                },
            )
        }
    }
}

/// Listens on `--addr`, and the settings for the address it got.
async fn bind(args: &Args) -> Result<(tokio::net::TcpListener, Settings), Exit> {
    let listener = tokio::net::TcpListener::bind(args.addr)
        .await
        .map_err(|e| Exit::failure(format!("cannot listen on {}: {e}", args.addr)))?;
    let bound = listener
        .local_addr()
        .map_err(|e| Exit::failure(format!("cannot read the listening address: {e}")))?;
    let settings = Settings {
        operator_namespace: args.operator.namespace.clone(),
        read_only: args.read_only,
        allowed_hosts: allowed_hosts(bound, &args.allowed_hosts),
        doctor_every: std::time::Duration::from_secs(args.doctor_interval.max(1)),
        streaming_lists: args.streaming_lists,
    };
    Ok((listener, settings))
}

/// The line saying where the dashboard is. The URL a browser may use: the address itself on
/// loopback, else the first --allowed-host (a wildcard address is nobody's Host).
fn banner(args: &Args, settings: &Settings) -> String {
    let url_host = settings
        .allowed_hosts
        .first()
        .cloned()
        .unwrap_or_else(|| args.addr.to_string());
    format!(
        "Express dashboard at http://{url_host}/{} (Ctrl-C stops it)",
        if args.read_only { " (read-only)" } else { "" }
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn loopback_answers_to_its_address_and_localhost_and_named_hosts_get_the_port() {
        let v4: SocketAddr = "127.0.0.1:3110".parse().unwrap_or_else(|_| unreachable!());
        assert_eq!(allowed_hosts(v4, &[]), ["127.0.0.1:3110", "localhost:3110"]);
        let v6: SocketAddr = "[::1]:8080".parse().unwrap_or_else(|_| unreachable!());
        assert_eq!(allowed_hosts(v6, &[]), ["[::1]:8080", "localhost:8080"]);
        let any: SocketAddr = "0.0.0.0:3110".parse().unwrap_or_else(|_| unreachable!());
        assert_eq!(
            allowed_hosts(any, &["ops.example".into(), "ops.example:443".into()]),
            ["ops.example:3110", "ops.example:443"]
        );
        let http: SocketAddr = "127.0.0.1:80".parse().unwrap_or_else(|_| unreachable!());
        assert_eq!(
            allowed_hosts(http, &[]),
            ["127.0.0.1:80", "localhost:80", "127.0.0.1", "localhost"]
        );
    }
}
