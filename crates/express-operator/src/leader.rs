//! Leader election: one Lease per operator ring in the operator's namespace
//! (`express-operator` for the default ring, `express-operator-RING` otherwise), held through
//! `kube-lease-manager`. The controller acts (and writes) only while it holds its ring's Lease.

use tokio::sync::watch;

/// Starts contending for the ring's Lease; the receiver says whether this instance holds it now.
/// The returned task keeps renewing (or trying) until it is dropped or aborted.
pub async fn elect(
    client: kube::Client,
    namespace: &str,
    ring: &str,
    identity: &str,
) -> Result<
    (
        watch::Receiver<bool>,
        tokio::task::JoinHandle<kube_lease_manager::Result<kube_lease_manager::LeaseManager>>,
    ),
    kube_lease_manager::LeaseManagerError,
> {
    let manager =
        kube_lease_manager::LeaseManagerBuilder::new(client, express_api::rings::lease_name(ring))
            .with_namespace(namespace)
            .with_identity(identity)
            .with_duration(15)
            .with_grace(5)
            .build()
            .await?;
    Ok(manager.watch().await)
}
