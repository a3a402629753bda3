//! `express-operator crd check` (DESIGN section 15): is this build's API compatible with what a
//! cluster has and stores? Its table of contents: read what is installed ([`read`]: CRD files
//! of a directory, or a DC's CRDs and every object it stores of each kind, a page at a time),
//! judge it with the rules of `crd-compat`, and say so ([`show`]: text or JSON) with an exit
//! code: 0 compatible (warnings printed), 1 breaking, 2 bad input, 4 the DC could not be read.

pub mod inputs;
pub mod read;
pub mod show;

use crd_compat::{Report, check};

pub use inputs::{Against, CheckError, Output, Source};

/// The exit code of a report: 0 compatible, 1 breaking.
pub fn exit_code(report: &Report) -> u8 {
    if report.compatible { 0 } else { 1 }
}

/// Reads what is installed, checks this build's CRDs against it, prints the report, and gives
/// the exit code.
pub async fn run(against: &Against, output: Output) -> u8 {
    match checked(against).await {
        Ok((report, source)) => {
            print!("{}", show::render(&report, &source, output));
            exit_code(&report)
        }
        Err(error) => {
            eprintln!("express-operator crd check: {error}");
            error.exit_code()
        }
    }
}

/// The report, and what it was made against (for its first line).
async fn checked(against: &Against) -> Result<(Report, Source), CheckError> {
    let build = express_api::crd::all();
    let installed = match against {
        Against::Directory(dir) => read::from_directory(dir)?,
        Against::Context {
            kubeconfig,
            context,
        } => read::from_context(kubeconfig.as_deref(), context, &build).await?,
    };
    let report = check(&installed.crds, &build, installed.stored.as_ref());
    Ok((report, installed.source))
}
