//! `kubectl express diff`: a field-level diff of the effective spec, live against local, for
//! the nodes that would restart. Exit 0 no difference, 1 differences, 2 errors (like kubectl
//! diff).

use std::process::ExitCode;

use super::revisions::CompareArgs;
use crate::revisions::sources::{Options, gather};
use crate::show::revisions::render_diff;
use express_client::exit::{Code, Exit};

pub type Args = CompareArgs;

pub fn run(args: Args) -> ExitCode {
    let sources = args.local.sources();
    if !sources.is_local() {
        return Exit::usage("diff needs local objects: -f FILE or --chart DIR").report("diff");
    }
    super::checked(
        "diff",
        &args.connect,
        true,
        |client, namespace| async move {
            let Some(client) = client else {
                return Err(Exit::usage("diff needs the live cluster"));
            };
            let options = Options {
                sources,
                namespace,
                all_namespaces: false,
                node: None,
                verbose: false,
                json: false,
                fail_on_restart: false,
                operator_namespace: args.operator.namespace,
            };
            let (rows, facts) = gather(Some(&client), &options).await?;
            let (text, differs) = render_diff(&rows, &facts);
            print!("{text}");
            Ok(if differs { Code::Failed } else { Code::Done }.into())
        },
    )
}
