//! `express-operator`: the operator binary (DESIGN section 9).
//!
//! Today it prints the CustomResourceDefinitions (`crd`); the controller (`run`) and the local
//! development cluster (`dev`) arrive with the operator itself.

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use clap::{Parser, Subcommand};

#[derive(Parser)]
#[command(
    name = "express-operator",
    version,
    about = "Kubernetes operator for Express clusters"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Print every CustomResourceDefinition as YAML (or write one file per CRD).
    Crd {
        /// Write `<crd-name>.yaml` files into this directory instead of printing.
        #[arg(long, value_name = "DIR")]
        output_dir: Option<PathBuf>,
    },
}

#[derive(Debug, thiserror::Error)]
enum Error {
    #[error("cannot render CRDs as YAML: {0}")]
    Render(#[from] serde_yaml::Error),
    #[error("cannot write {path}: {source}")]
    Write {
        path: PathBuf,
        source: std::io::Error,
    },
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let result = match cli.command {
        Command::Crd { output_dir: None } => express_api::crd::all_to_yaml()
            .map(|yaml| print!("{yaml}"))
            .map_err(Error::from),
        Command::Crd {
            output_dir: Some(dir),
        } => write_crds(&dir),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(err) => {
            eprintln!("express-operator: {err}");
            ExitCode::FAILURE
        }
    }
}

fn write_crds(dir: &Path) -> Result<(), Error> {
    std::fs::create_dir_all(dir).map_err(|source| Error::Write {
        path: dir.to_owned(),
        source,
    })?;
    for crd in express_api::crd::all() {
        let path = dir.join(express_api::crd::file_name(&crd));
        let yaml = express_api::crd::to_yaml(&crd)?;
        std::fs::write(&path, yaml).map_err(|source| Error::Write { path, source })?;
    }
    Ok(())
}
