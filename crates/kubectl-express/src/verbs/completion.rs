//! `kubectl express completion SHELL`: shell completions for the plugin.

use std::process::ExitCode;

use clap::CommandFactory;

use express_client::exit::Code;

#[derive(clap::Args, Debug)]
pub struct Args {
    #[arg(value_enum)]
    shell: clap_complete::Shell,
}

/// Prints the completions of the command line `Cli` describes.
pub fn run<Cli: CommandFactory>(args: Args) -> ExitCode {
    clap_complete::generate(
        args.shell,
        &mut Cli::command(),
        "kubectl-express",
        &mut std::io::stdout(),
    );
    Code::Done.into()
}
