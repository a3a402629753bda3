//! `kubectl express rings [-n NS] [-o text|json] [--operator-namespace NS]`: which operator
//! ring drives which tenants, and whether each ring has a live leader (DESIGN section 11). A
//! ring is found on a tenant (its ExpressCluster's `express.dev/operator-ring` label, or the
//! ring `status.operator` names as its unreleased owner) or on a Lease of the operator
//! namespace. Exit 0 when every tenant's ring has a live leader, 1 when some tenant's ring has
//! none (named on stderr), 2 when it cannot run. Leases it may not read leave leadership
//! unknown: a warning, and exit 0 as far as leaders go.
//!
//! `read::rings::survey` is the verb without the cluster: rows from the ExpressClusters and
//! Leases read, at an instant; `read::rings` reads them.

mod across;

use std::process::ExitCode;

use crate::contexts::tail;
use crate::read::rings::{Read, read};
use crate::show::rings::{render, unserved_lines};
use crate::verbs::args::{OperatorNamespace, Output};
use express_client::contexts::select::{FleetArgs, Mode};
use express_client::exit::{Code, Exit};

#[derive(clap::Args, Debug)]
pub struct Args {
    /// Output: text (a table, then the tenants no live operator serves, on stderr) or json.
    #[arg(short = 'o', long, value_enum, default_value_t = Output::Text)]
    output: Output,
    #[command(flatten)]
    operator: OperatorNamespace,
    #[command(flatten)]
    connect: FleetArgs,
}

pub fn run(args: Args) -> ExitCode {
    match args.connect.mode() {
        Err(error) => Exit::usage(error.to_string()).report("rings"),
        Ok(Mode::Single(connect)) => single(&args, &connect),
        Ok(Mode::Fleet(selection)) => {
            express_client::contexts::across::run("rings", &args.connect, selection, |plan| {
                across::run(args.output, &args.operator.namespace, plan)
            })
        }
    }
}

fn single(args: &Args, connect: &express_client::connect::ConnectArgs) -> ExitCode {
    let focus = connect.namespace.clone();
    super::checked("rings", connect, true, |client, _| async move {
        let client = client.ok_or_else(|| Exit::usage("no cluster to read"))?;
        let Read { survey, warnings } = read(&client, focus.as_deref(), &args.operator.namespace)
            .await
            .map_err(Exit::usage)?;
        match args.output {
            Output::Json => tail::print_json(
                &serde_json::to_value(&survey)
                    .map_err(|e| Exit::usage(format!("cannot write JSON: {e}")))?,
            )?,
            _ => print!("{}", render(&survey)),
        }
        for line in warnings {
            eprintln!("kubectl-express rings: {line}");
        }
        let lines = unserved_lines(&survey);
        for line in &lines {
            eprintln!("kubectl-express rings: {line}");
        }
        Ok(if lines.is_empty() {
            Code::Done
        } else {
            Code::Failed
        }
        .into())
    })
}
