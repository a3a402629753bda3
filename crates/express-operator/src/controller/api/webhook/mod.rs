//! The conversion webhook (DESIGN section 18): the HTTPS server that answers the API server's
//! `ConversionReview`s with `express_api::conversion` ([`server`]), the certificates it serves
//! and the authority that signs them ([`authority`]), and when that authority is made, rotated and
//! retired ([`rotation`], pure), and which pods may serve it ([`membership`]: only those whose
//! build knows every version the CRDs list).
//!
//! `run --conversion-webhook-addr` serves it and keeps its certificates ([`keeper`]); the CRDs
//! that name it are those of a build run with `--serve-v1beta1` (`crd --serve-v1beta1` prints
//! them), which its releases apply (docs/api.md).

pub mod authority;
pub mod keeper;
pub mod membership;
pub mod rotation;
pub mod server;

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

/// How often a replica looks after its certificates.
const LOOK_EVERY: Duration = Duration::from_secs(30);

/// The names of the chart's Service, as the API server calls it, in `namespace`.
pub fn service_names(namespace: &str) -> Vec<String> {
    use express_api::crd::WEBHOOK_SERVICE;
    vec![
        format!("{WEBHOOK_SERVICE}.{namespace}.svc"),
        format!("{WEBHOOK_SERVICE}.{namespace}.svc.cluster.local"),
    ]
}

/// Where and as whom a replica serves the webhook.
pub struct Serving {
    /// The address to listen on.
    pub addr: SocketAddr,
    /// The operator's namespace (its Secret, its pods).
    pub namespace: String,
    /// The names the serving certificate is for.
    pub names: Vec<String>,
    /// This replica's pod, labelled while its build knows every listed version; none when the
    /// operator runs outside a pod (then nothing selects it: it is called by URL).
    pub pod: Option<String>,
    /// The API versions this build knows (a test may pretend to be an older build).
    pub known: Vec<String>,
    /// When the certificates are made, rotated and retired (a test may ask for minutes).
    pub policy: rotation::Policy,
}

/// Serves the webhook and keeps its certificates and this pod's membership, each on a task of
/// its own; returns the address it serves on.
pub async fn start(client: kube::Client, serving: Serving) -> std::io::Result<SocketAddr> {
    let listener = tokio::net::TcpListener::bind(serving.addr).await?;
    let served = listener.local_addr()?;
    let certificate = Arc::new(server::ServingCertificate::default());
    let crds: Vec<String> = express_api::crd::VERSIONED
        .iter()
        .map(|n| (*n).to_owned())
        .collect();
    let keeper = keeper::Keeper::new(
        client.clone(),
        serving.namespace.clone(),
        serving.names,
        crds.clone(),
        certificate.clone(),
    )
    .with_policy(serving.policy);
    tokio::spawn(keeper.run(serving.policy.look_every(LOOK_EVERY)));
    match serving.pod {
        Some(pod) => {
            let membership =
                membership::Membership::new(client, serving.namespace, pod, serving.known, crds);
            tokio::spawn(membership.run(LOOK_EVERY));
        }
        None => tracing::info!(
            "conversion webhook: no POD_NAME, so no pod to label; reachable by URL only"
        ),
    }
    tokio::spawn(async move {
        if let Err(error) = server::serve(listener, certificate).await {
            tracing::error!(%error, "the conversion webhook stopped serving");
        }
    });
    Ok(served)
}
