//! Leader election: the Lease `express-operator` in the operator's namespace, held through
//! `kube-lease-manager`. The controller acts (and writes) only while it holds the Lease.

use tokio::sync::watch;

pub use express_api::keys::LEASE_NAME;

/// Starts contending for the Lease; the receiver says whether this instance holds it now.
/// The returned task keeps renewing (or trying) until it is dropped or aborted.
pub async fn elect(
    client: kube::Client,
    namespace: &str,
    identity: &str,
) -> Result<
    (
        watch::Receiver<bool>,
        tokio::task::JoinHandle<kube_lease_manager::Result<kube_lease_manager::LeaseManager>>,
    ),
    kube_lease_manager::LeaseManagerError,
> {
    let manager = kube_lease_manager::LeaseManagerBuilder::new(client, LEASE_NAME)
        .with_namespace(namespace)
        .with_identity(identity)
        .with_duration(15)
        .with_grace(5)
        .build()
        .await?;
    Ok(manager.watch().await)
}
