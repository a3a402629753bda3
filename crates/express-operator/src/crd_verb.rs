//! The `crd` verb: print this build's CRDs (or write one file per CRD), and `crd check`, which
//! compares them with what a cluster has and stores ([`express_operator::crd_check`]).

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use clap::Subcommand;
use express_operator::{controller, crd_check};
use express_planner::api_versions::{ApiFlags, CarriedApiError, carried_api};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;

/// Why the CRDs could not be printed or written.
#[derive(Debug, thiserror::Error)]
pub(crate) enum CrdError {
    #[error("cannot render CRDs as YAML: {0}")]
    Render(#[from] serde_yaml::Error),
    #[error("cannot write {path}: {source}")]
    Write {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error(transparent)]
    Carried(#[from] CarriedApiError),
}

#[derive(Subcommand)]
pub(crate) enum CrdAction {
    /// Is this build's API compatible with what is installed? Against CRD files, or a DC's CRDs
    /// and every object it stores
    ///
    /// Exit 0 compatible (warnings printed), 1 breaking, 2 bad input (an unreadable or non-CRD
    /// file, a CRD of another group, an unknown context, a DC without this API), 4 the DC could
    /// not be read.
    Check {
        /// CRD YAML files, as `express-operator crd --output-dir` writes them.
        #[arg(
            long,
            value_name = "DIR",
            required_unless_present = "context",
            conflicts_with = "context"
        )]
        against: Option<PathBuf>,
        /// A kubeconfig context: its CRDs, and every object it stores of each kind.
        #[arg(long, value_name = "NAME")]
        context: Option<String>,
        /// The kubeconfig naming the context (default: $KUBECONFIG, then ~/.kube/config).
        #[arg(long, value_name = "FILE", requires = "context")]
        kubeconfig: Option<PathBuf>,
        /// Text for people, JSON for scripts.
        #[arg(short = 'o', long, value_enum, default_value_t = crd_check::Output::Text)]
        output: crd_check::Output,
        /// Check the CRDs of a build carrying v1beta1 beside v1alpha1 (as `crd --serve-v1beta1`
        /// prints them).
        #[arg(long)]
        serve_v1beta1: bool,
        /// With --serve-v1beta1: the URL those CRDs send conversions to.
        #[arg(long, value_name = "URL", requires = "serve_v1beta1")]
        webhook_url: Option<String>,
        /// With --context: the operator's namespace, whose rings' Leases say which versions each
        /// ring's build knows (a storage version moved before every ring knows it is breaking).
        #[arg(long, value_name = "NS", default_value = controller::DEFAULT_OPERATOR_NAMESPACE, requires = "context")]
        operator_namespace: String,
    },
}

/// `crd check`: its exit code is the answer (crd_check::run says which).
pub(crate) fn crd_check_command(check: CrdAction) -> ExitCode {
    let CrdAction::Check {
        against,
        context,
        kubeconfig,
        output,
        serve_v1beta1,
        webhook_url,
        operator_namespace,
    } = check;
    let build = match crds(serve_v1beta1, webhook_url) {
        Ok(build) => build,
        Err(error) => {
            eprintln!("express-operator crd check: {error}");
            return ExitCode::from(2);
        }
    };
    let against = match (against, context) {
        (Some(dir), _) => crd_check::Against::Directory(dir),
        (None, Some(context)) => crd_check::Against::Context {
            kubeconfig,
            context,
            operator_namespace,
        },
        // clap requires one of them.
        (None, None) => return ExitCode::from(2),
    };
    match tokio::runtime::Runtime::new() {
        Ok(runtime) => ExitCode::from(runtime.block_on(crd_check::run(&against, &build, output))),
        Err(error) => {
            eprintln!("express-operator crd check: cannot start the runtime: {error}");
            ExitCode::from(2)
        }
    }
}

/// The CRDs `crd` prints: those a build run with the same flags carries (with `serve_v1beta1`,
/// serving v1beta1 through its webhook, at `webhook_url` or the chart's Service).
pub(crate) fn crds(
    serve_v1beta1: bool,
    webhook_url: Option<String>,
) -> Result<Vec<CustomResourceDefinition>, CrdError> {
    let flags = ApiFlags {
        serve_v1beta1,
        webhook_url,
        operator_namespace: controller::DEFAULT_OPERATOR_NAMESPACE.to_owned(),
        known: Vec::new(),
    };
    Ok(carried_api(&flags)?.crds())
}

pub(crate) fn print_crds(crds: &[CustomResourceDefinition]) -> Result<(), CrdError> {
    for crd in crds {
        print!("---\n{}", express_api::crd::to_yaml(crd)?);
    }
    Ok(())
}

pub(crate) fn write_crds(dir: &Path, crds: &[CustomResourceDefinition]) -> Result<(), CrdError> {
    std::fs::create_dir_all(dir).map_err(|source| CrdError::Write {
        path: dir.to_owned(),
        source,
    })?;
    for crd in crds {
        let path = dir.join(express_api::crd::file_name(crd));
        let yaml = express_api::crd::to_yaml(crd)?;
        std::fs::write(&path, yaml).map_err(|source| CrdError::Write { path, source })?;
    }
    Ok(())
}
