//! `kubectl express version`: the plugin's version and the operator's (the image of its
//! Deployment, else who holds its Lease).

use std::process::ExitCode;

use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::coordination::v1::Lease;
use kube::api::Api;

use crate::verbs::args::OperatorNamespace;
use express_client::connect::ConnectArgs;
use express_client::exit::Code;

#[derive(clap::Args, Debug)]
pub struct Args {
    #[command(flatten)]
    operator: OperatorNamespace,
    #[command(flatten)]
    connect: ConnectArgs,
}

pub fn run(args: Args) -> ExitCode {
    println!("kubectl-express {}", env!("CARGO_PKG_VERSION"));
    super::live("version", &args.connect, |c| async move {
        let operator = operator_version(&c.client, &args.operator.namespace).await;
        println!("operator: {operator}");
        Ok(Code::Done.into())
    })
}

/// The operator's version: the image of its Deployment `express-operator` (as the chart names
/// it), else who holds its Lease; what could not be read is said, not an error.
async fn operator_version(client: &kube::Client, namespace: &str) -> String {
    match Api::<Deployment>::namespaced(client.clone(), namespace)
        .get_opt("express-operator")
        .await
    {
        Ok(Some(deployment)) => {
            let image = deployment
                .spec
                .template
                .spec
                .and_then(|s| s.containers.into_iter().next())
                .and_then(|c| c.image);
            if let Some(image) = image {
                return format!("{image} (Deployment {namespace}/express-operator)");
            }
        }
        Ok(None) => {}
        Err(err) => return format!("unknown (cannot read the cluster: {err})"),
    }
    match Api::<Lease>::namespaced(client.clone(), namespace)
        .get_opt("express-operator")
        .await
    {
        Ok(Some(lease)) => match lease.spec.and_then(|s| s.holder_identity) {
            Some(holder) => format!(
                "running as {holder} (Lease {namespace}/express-operator); version unknown: no Deployment express-operator"
            ),
            None => format!("no leader holds Lease {namespace}/express-operator"),
        },
        Ok(None) => {
            format!("not found in namespace {namespace} (no Deployment or Lease express-operator)")
        }
        Err(err) => format!("unknown (cannot read the cluster: {err})"),
    }
}
