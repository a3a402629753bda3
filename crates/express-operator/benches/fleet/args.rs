//! The benchmark's command line.

use std::path::PathBuf;

use clap::{Parser, ValueEnum};

/// Where the fleet runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum Substrate {
    /// `kubesim serve`, started by the benchmark.
    Kubesim,
    /// Kubernetes' own control plane, started by `scripts/real-cluster.sh up` (`--cluster`).
    Real,
}

#[derive(Parser, Debug)]
#[command(about = "Fleet benchmark: kubesim and the operator in processes of their own")]
pub struct Args {
    /// Where the fleet runs: kubesim, or Kubernetes' own control plane (`--cluster`);
    /// `scripts/fleet-bench.sh --substrate real` starts one.
    #[arg(long, value_enum, default_value_t = Substrate::Kubesim)]
    pub substrate: Substrate,
    /// `--substrate real`: the directory of a running control plane
    /// (`scripts/real-cluster.sh up DIR`) where `scripts/chart-operator.py account DIR` wrote
    /// the operator's ServiceAccount kubeconfig: the operator runs as the chart's account,
    /// under the chart's RBAC and API Priority and Fairness level.
    #[arg(long, required_if_eq("substrate", "real"))]
    pub cluster: Option<PathBuf>,
    /// The operator's flags as the chart passes them, one a line
    /// (`scripts/chart-operator.py args`): used instead of --kube-qps, --kube-burst and
    /// --concurrency, so that the figures are the chart's defaults'.
    #[arg(long)]
    pub chart_args: Option<PathBuf>,
    /// Tenants (Express clusters), one namespace each.
    #[arg(long, default_value_t = 1000)]
    pub tenants: usize,
    /// Frontends per tenant (plus one Backend).
    #[arg(long, default_value_t = 7)]
    pub frontends: usize,
    /// The operator's --kube-qps (the benchmark's default lifts the limit out of the way of
    /// the measurement; pass the production default, 20, to see the limit's effect).
    #[arg(long, default_value_t = 5000.0)]
    pub kube_qps: f64,
    /// The operator's --kube-burst.
    #[arg(long, default_value_t = 5000)]
    pub kube_burst: u32,
    /// The operator's --concurrency.
    #[arg(long, default_value_t = 64)]
    pub concurrency: usize,
    /// Seconds a simulated pod takes to become Ready.
    #[arg(long, default_value_t = 1.0)]
    pub startup_seconds: f64,
    /// Seconds a deleted simulated pod takes to terminate.
    #[arg(long, default_value_t = 1.0)]
    pub terminate_seconds: f64,
    /// The kubesim binary (default: target/release/kubesim).
    #[arg(long)]
    pub kubesim: Option<PathBuf>,
    /// The express-operator binary (default: target/release/express-operator).
    #[arg(long)]
    pub operator: Option<PathBuf>,
    /// The kubectl-express binary whose reads of the fleet are measured after the upgrade
    /// (default: target/release/kubectl-express; none there: the reads are skipped).
    #[arg(long)]
    pub plugin: Option<PathBuf>,
    /// Give up on a phase after this many seconds.
    #[arg(long, default_value_t = 3600)]
    pub timeout_seconds: u64,
    /// ControllerRevisions per node of a settled fleet (it keeps up to `revisionHistoryLimit`,
    /// 10 by default): after the cold start on the fleet as provisioned (one a node), the
    /// benchmark adds the ones provisioning did not create, labelled as the operator labels
    /// them, and measures a second cold start over them; the upgrade then runs on that fleet.
    #[arg(long, default_value_t = 1)]
    pub revisions: usize,
    /// Seconds to wait at rest before each memory reading: past the operator's fleet metrics
    /// interval (15 s), which publishes its memory figures, and its allocator's purge delay.
    #[arg(long, default_value_t = 20)]
    pub rest_seconds: u64,
    /// Stop after the cold starts (both, with `--revisions`): the fresh operator's figures
    /// without the half hour a fleet-wide upgrade takes at 10,000 tenants.
    #[arg(long)]
    pub stop_after_cold_starts: bool,
    /// After the measured upgrade, this many more fleet-wide upgrades in a row (each to a new
    /// version), with the operator's RSS at rest and its API requests after each: what a week
    /// of rollouts does to a long-lived operator. 0: none.
    #[arg(long, default_value_t = 0)]
    pub upgrades: u32,
    /// Passed by `cargo bench`.
    #[arg(long, hide = true)]
    pub bench: bool,
}
