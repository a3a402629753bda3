//! `kubectl express list [-A]`: one line per Express cluster: phase, rollout, progress,
//! ready nodes and the pause in force.

use std::process::ExitCode;

use crate::connect::ConnectArgs;
use crate::exit::{Code, Exit};
use crate::{live, view};

#[derive(clap::Args, Debug)]
pub struct Args {
    /// Every namespace.
    #[arg(short = 'A', long)]
    all_namespaces: bool,
    /// The operator's namespace, where express-operator-control lives.
    #[arg(long, default_value = super::DEFAULT_OPERATOR_NAMESPACE, value_name = "NS")]
    operator_namespace: String,
    #[command(flatten)]
    connect: ConnectArgs,
}

pub fn run(args: Args) -> ExitCode {
    super::live("list", &args.connect, |c| async move {
        let namespace = (!args.all_namespaces).then_some(c.namespace.as_str());
        let objects = live::load(&c.client, namespace, &args.operator_namespace)
            .await
            .map_err(Exit::failure)?;
        let rows = view::list_rows(&objects, &args.operator_namespace);
        print!("{}", view::render_list(&rows));
        Ok(Code::Done.into())
    })
}
