//! The conversion webhook (DESIGN section 18): the HTTPS server that answers the API server's
//! `ConversionReview`s with `express_api::conversion` ([`server`]), the certificates it serves
//! and the authority that signs them ([`authority`]), and when that authority is made, rotated and
//! retired ([`rotation`], pure).
//!
//! `run --conversion-webhook-addr` serves it and keeps its certificates ([`keeper`]); the CRDs
//! that name it are `crd --serve-v1beta1`'s, not yet those a release applies (docs/api.md says
//! where this stands).

pub mod authority;
pub mod keeper;
pub mod rotation;
pub mod server;

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

/// The chart's Service in front of the pods that serve the webhook.
pub const SERVICE_NAME: &str = "express-operator-webhook";

/// How often a replica looks after its certificates.
const LOOK_EVERY: Duration = Duration::from_secs(30);

/// The names of the chart's Service, as the API server calls it, in `namespace`.
pub fn service_names(namespace: &str) -> Vec<String> {
    vec![
        format!("{SERVICE_NAME}.{namespace}.svc"),
        format!("{SERVICE_NAME}.{namespace}.svc.cluster.local"),
    ]
}

/// Serves the webhook on `addr` and keeps its certificates (for `names`), each on a task of its
/// own; returns the address it serves on.
pub async fn start(
    client: kube::Client,
    addr: SocketAddr,
    namespace: &str,
    names: Vec<String>,
) -> std::io::Result<SocketAddr> {
    let listener = tokio::net::TcpListener::bind(addr).await?;
    let served = listener.local_addr()?;
    let certificate = Arc::new(server::ServingCertificate::default());
    let crds = express_api::crd::VERSIONED
        .iter()
        .map(|n| (*n).to_owned())
        .collect();
    let keeper = keeper::Keeper::new(
        client,
        namespace.to_owned(),
        names,
        crds,
        certificate.clone(),
    );
    tokio::spawn(keeper.run(LOOK_EVERY));
    tokio::spawn(async move {
        if let Err(error) = server::serve(listener, certificate).await {
            tracing::error!(%error, "the conversion webhook stopped serving");
        }
    });
    Ok(served)
}
