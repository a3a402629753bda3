//! `kubectl express pause` and `resume`: one Express cluster (its ExpressCluster's
//! `spec.paused`), every cluster of a namespace (ConfigMap `express-control`) or every cluster
//! the operator manages (ConfigMap `express-operator-control`), DESIGN section 4.

use std::process::ExitCode;

use crate::verbs::args::OperatorNamespace;
use express_client::connect::ConnectArgs;
use express_client::write::control::{self, Scope};

#[derive(clap::Args, Debug)]
#[command(group(clap::ArgGroup::new("scope").required(true).args(["cluster", "namespace_wide", "all"])))]
pub struct Args {
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
    #[command(flatten)]
    operator: OperatorNamespace,
    #[command(flatten)]
    connect: ConnectArgs,
}

impl Args {
    fn scope(&self) -> Scope {
        match (&self.cluster, self.all) {
            (Some(cluster), _) => Scope::Cluster(cluster.clone()),
            (None, true) => Scope::All {
                operator_namespace: self.operator.namespace.clone(),
            },
            (None, false) => Scope::Namespace,
        }
    }
}

/// `pause` (`paused`) or `resume`.
pub fn run(args: Args, paused: bool) -> ExitCode {
    let verb = if paused { "pause" } else { "resume" };
    let reason = args.reason.clone().filter(|_| paused);
    let connect = args.connect.clone();
    super::live(verb, &connect, |c| async move {
        control::set_paused(
            &c.client,
            &c.namespace,
            &args.scope(),
            paused,
            reason.as_deref(),
        )
        .await?
        .print();
        Ok(ExitCode::SUCCESS)
    })
}
