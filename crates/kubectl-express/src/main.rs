//! `kubectl-express`: the kubectl plugin for Express clusters (DESIGN section 9). This file is
//! the menu: the subcommands and their help, each dispatched to its module in the library's
//! [`verbs`].

// jemalloc rather than the system allocator: a DC's read allocates and frees some 20 objects a
// tenant within a second, which glibc's allocator served at about a third of the CPU. The
// `system-allocator` feature leaves it out, for a heap profiler that follows malloc.
#[cfg(not(feature = "system-allocator"))]
#[global_allocator]
static ALLOCATOR: tikv_jemallocator::Jemalloc = tikv_jemallocator::Jemalloc;

use kubectl_express::{text, verbs};
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
    Plan(verbs::plan::Args),
    /// Restart one node's pod safely, on the revision it runs
    ///
    /// Prints the request id; with --wait, follows the bounce to its end (DESIGN section 6).
    Bounce(verbs::bounce::Args),
    /// Follow a cluster's rollout to its end, with an exit code for pipelines
    ///
    /// Exit 0 done, 1 failed, 3 timeout, 4 paused (with --fail-on-paused), 2 not found.
    Status(verbs::status::Args),
    /// Draw a cluster as a tree: every node in upgrade order, with its pod
    Get(verbs::get::Args),
    /// One line per Express cluster: phase, rollout, progress, ready, paused, operator ring
    ///
    /// With --all-contexts or a --context selection, every DC selected, a CONTEXT column first;
    /// exit 4 when a context could not be read.
    List(verbs::list::Args),
    /// List a node's kept revisions, show one, or diff two
    History(verbs::history::Args),
    /// Check nodes' deployment revisions, local against live, before they restart anything
    ///
    /// Exit 0 no discrepancy, 1 a discrepancy (or, with --fail-on-restart, a node would
    /// restart), 2 errors.
    Revisions(verbs::revisions::Args),
    /// Field-level diff of the effective spec, live against local, for nodes that would restart
    ///
    /// Exit 0 no difference, 1 differences, 2 errors (like kubectl diff).
    Diff(verbs::diff::Args),
    /// Is it the infrastructure? Fleet triage for the on-call, with one verdict
    ///
    /// Checks the operator (Lease, Deployment), whether it keeps up, how trouble spreads across
    /// namespaces, rollouts in progress, pauses and aborts, and the operator's Warning events.
    /// Exit 0 healthy, 1 tenant or deployment, 3 infrastructure, 2 cannot run. With
    /// --all-contexts or a --context selection: a verdict per DC and one for the fleet naming
    /// the DC; exit 4 when a context could not be read (unless one read is at 3).
    Doctor(verbs::doctor::Args),
    /// Which operator ring drives which tenants, and whether each ring has a live leader
    ///
    /// One row per ring: its Lease holder, the operator versions its tenants report, how many
    /// tenants it has and how many are rolling out. Exit 0 every tenant's ring has a live
    /// leader, 1 some tenant's ring has none (named on stderr), 2 cannot run; across contexts
    /// (--all-contexts, --context ...), 4 when a context could not be read.
    Rings(verbs::rings::Args),
    /// One operator build released across DCs, stage by stage, each stage soaked against the DCs
    /// not yet released
    ///
    /// `run -f PLAN` writes the plan into every DC it names and drives it; `run NAME` resumes it
    /// from the DCs. Without an action: the plan's stages and DCs. Exit 0 succeeded, 1 failed,
    /// aborted or rolled back, 2 cannot run, 3 held inconclusive, 4 a DC not read, 5 later.
    FleetRelease(verbs::fleet_release::Args),
    /// The operator's own releases: a new build promoted ring by ring, or rolled back
    ///
    /// Without NAME, every OperatorRelease of the operator's namespace; with it, its waves,
    /// the last samples and the phase's reason. `release pause|resume|promote [--full]|abort
    /// NAME` steer one. Exit 0 pending, progressing, paused or succeeded, 1 rolled back or
    /// inconclusive, 2 cannot run.
    Release(verbs::release::Args),
    /// Serve a live web UI of the fleet and each tenant's order graph, with the CLI's actions
    ///
    /// Listens on 127.0.0.1:3110 by default, with the kubeconfig's identity; every action asks
    /// for confirmation, and --read-only removes them.
    Dashboard(verbs::dashboard::Args),
    /// Print shell completions (bash, zsh, fish, ...)
    Completion(verbs::completion::Args),
    /// Print the plugin's version and the operator's
    Version(verbs::version::Args),
    /// Pause a cluster, every cluster of a namespace, or every cluster
    Pause(verbs::pause::Args),
    /// Resume what `pause` paused, in the same scope
    Resume(verbs::pause::Args),
    /// Stop a cluster's current rollout, optionally rolling back
    Abort(verbs::abort::Args),
    /// Clear a failed or aborted rollout
    Retry(verbs::retry::Args),
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let style = text::Style::detect(cli.no_color);
    match cli.command {
        Command::Plan(args) => verbs::plan::run(args),
        Command::Bounce(args) => verbs::bounce::run(args),
        Command::Status(args) => verbs::status::run(args),
        Command::Get(args) => verbs::get::run(args, style),
        Command::List(args) => verbs::list::run(args),
        Command::History(args) => verbs::history::run(args),
        Command::Revisions(args) => verbs::revisions::run(args),
        Command::Diff(args) => verbs::diff::run(args),
        Command::Doctor(args) => verbs::doctor::run(args),
        Command::Rings(args) => verbs::rings::run(args),
        Command::Release(args) => verbs::release::run(args),
        Command::FleetRelease(args) => verbs::fleet_release::run(args),
        Command::Dashboard(args) => verbs::dashboard::run(args),
        Command::Completion(args) => verbs::completion::run::<Cli>(args),
        Command::Version(args) => verbs::version::run(args),
        Command::Pause(args) => verbs::pause::run(args, true),
        Command::Resume(args) => verbs::pause::run(args, false),
        Command::Abort(args) => verbs::abort::run(args),
        Command::Retry(args) => verbs::retry::run(args),
    }
}

#[cfg(test)]
mod tests {
    use clap::CommandFactory as _;

    /// clap checks a menu only when a verb is parsed; this checks every verb's arguments at
    /// once (unique ids, flags that do not clash with a shared one).
    #[test]
    fn every_verb_s_arguments_are_well_formed() {
        super::Cli::command().debug_assert();
    }
}
