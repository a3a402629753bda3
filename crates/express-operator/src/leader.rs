//! Leader election: one Lease per operator ring in the operator's namespace
//! (`express-operator` for the default ring, `express-operator-RING` otherwise), held through
//! `kube-lease-manager`. The controller acts (and writes) only while it holds its ring's Lease.
//!
//! A build contends only while it can read what the DC stores (DESIGN section 18): where a CRD
//! stores at a version it does not know, or no longer serves the version it reads, it refuses to
//! lead, lets the Lease go to a replica that can, and says why on the Lease (an annotation
//! doctor reads, and a Warning event).

use std::time::Duration;

use express_api::api_record::ANNOTATION_CANNOT_READ;
use express_api::keys::VERSION;
use express_planner::api_versions::{CannotRead, cannot_read};
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::ObjectReference;
use kube::api::{Api, Patch, PatchParams};
use tokio::sync::watch;
use tracing::{info, warn};

use crate::controller::{Recorders, Reporter};

/// How often a build that refuses to lead looks again, and a leader makes sure it still can.
const READ_CHECK_EVERY: Duration = Duration::from_secs(30);

/// How long any request of the election may take (to connect, and between reads and writes).
/// Well within the Lease's 15 s: a renewal or a check lost on a dead connection fails and is
/// tried again, instead of holding the election, and with it who leads, for good.
const ELECTION_REQUEST_TIMEOUT: Duration = Duration::from_secs(5);

/// The election's own client, apart from the controller's: its few requests never wait behind
/// the controller's limit, and each gives up after [`ELECTION_REQUEST_TIMEOUT`] (client-go's
/// leader election does the same with its renew deadline).
pub fn election_client(
    mut config: kube::Config,
    ring: &str,
) -> Result<kube::Client, crate::throttle::ClientError> {
    config.connect_timeout = Some(ELECTION_REQUEST_TIMEOUT);
    config.read_timeout = Some(ELECTION_REQUEST_TIMEOUT);
    config.write_timeout = Some(ELECTION_REQUEST_TIMEOUT);
    if !config
        .headers
        .iter()
        .any(|(name, _)| name == http::header::USER_AGENT)
    {
        let agent = http::HeaderValue::from_str(&crate::throttle::user_agent(ring))
            .map_err(crate::throttle::ClientError::UserAgent)?;
        config.headers.push((http::header::USER_AGENT, agent));
    }
    Ok(kube::Client::try_from(config)?)
}

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

/// This instance's part in its ring's election, to end it on the way out.
pub struct Candidacy {
    withdraw: watch::Sender<bool>,
    task: tokio::task::JoinHandle<()>,
}

impl Candidacy {
    /// Gives the Lease up if this instance holds it, and stops contending: a replica shutting
    /// down (a rolling update, a node drained) hands over at once instead of leaving its
    /// standby to wait out the Lease (15 s). Returns once the Lease is released.
    pub async fn withdraw(self) {
        let _ = self.withdraw.send(true);
        let _ = self.task.await;
    }
}

/// Contends for the ring's Lease while this build, knowing `known`, can read what the DC
/// stores; the receiver says whether it leads now. Where it cannot, it does not contend (and
/// gives the Lease up if it held it), checks again every [`READ_CHECK_EVERY`], and says why.
/// Contends until [`Candidacy::withdraw`] (or until the candidacy is dropped: its owner is
/// gone).
pub fn elect_while_readable(
    client: kube::Client,
    namespace: String,
    ring: String,
    identity: String,
    known: Vec<String>,
) -> (watch::Receiver<bool>, Candidacy) {
    let (leading, receiver) = watch::channel(false);
    let (withdraw, mut withdrawn) = watch::channel(false);
    let task = tokio::spawn(async move {
        let refusal = Refusal {
            client: client.clone(),
            namespace: namespace.clone(),
            ring: ring.clone(),
            identity: identity.clone(),
        };
        loop {
            if *withdrawn.borrow() {
                return;
            }
            let problems = unreadable(&client, &known).await;
            if !problems.is_empty() {
                refusal.say(&problems).await;
                tokio::select! {
                    () = tokio::time::sleep(READ_CHECK_EVERY) => {}
                    _ = withdrawn.changed() => return,
                }
                continue;
            }
            refusal.clear().await;
            let (mut held, task) = match elect(client.clone(), &namespace, &ring, &identity).await {
                Ok(elected) => elected,
                Err(error) => {
                    warn!(%error, "cannot contend for the ring's Lease; trying again");
                    tokio::time::sleep(READ_CHECK_EVERY).await;
                    continue;
                }
            };
            let mut checks = tokio::time::interval(READ_CHECK_EVERY);
            checks.tick().await;
            loop {
                tokio::select! {
                    changed = held.changed() => {
                        if changed.is_err() {
                            break;
                        }
                        let now = *held.borrow_and_update();
                        if now != *leading.borrow() {
                            if now {
                                info!(ring = %ring, identity = %identity, "holding the ring's Lease: leading");
                            } else {
                                info!(ring = %ring, identity = %identity, "lost the ring's Lease: observing only");
                            }
                        }
                        let _ = leading.send(now);
                    }
                    _ = checks.tick() => {
                        if !unreadable(&client, &known).await.is_empty() {
                            break;
                        }
                    }
                    _ = withdrawn.changed() => {
                        info!("withdrawing from the ring's election: giving the Lease up");
                        break;
                    }
                }
            }
            // Dropping the receiver gives the Lease up; the controller stops acting first.
            let _ = leading.send(false);
            drop(held);
            let _ = task.await;
        }
    });
    (receiver, Candidacy { withdraw, task })
}

/// Every CRD of this API whose stored objects this build cannot read; none when the CRDs could
/// not be read (the API server's trouble is not a reason to refuse, and a leader that cannot
/// reach it cannot act anyway).
async fn unreadable(client: &kube::Client, known: &[String]) -> Vec<CannotRead> {
    match crate::crd_check::read::versioned_crds(client).await {
        Ok(dc) => cannot_read(&dc, known, VERSION),
        Err(error) => {
            warn!(%error, "cannot read the CRDs to tell whether this build can read what it stores");
            Vec::new()
        }
    }
}

/// Where a refusal is said: the ring's Lease.
struct Refusal {
    client: kube::Client,
    namespace: String,
    ring: String,
    identity: String,
}

impl Refusal {
    fn lease(&self) -> Api<Lease> {
        Api::namespaced(self.client.clone(), &self.namespace)
    }

    async fn say(&self, problems: &[CannotRead]) {
        let text = problems
            .iter()
            .map(|p| format!("{}: {}", p.crd, p.why))
            .collect::<Vec<_>>()
            .join("; ");
        let note = format!(
            "{} refuses to lead ring {}: this build cannot read what the DC stores ({text}); run a build that knows the storage version",
            self.identity, self.ring
        );
        warn!(ring = %self.ring, problems = %text, "this build cannot read what the DC stores; not leading");
        let name = express_api::rings::lease_name(&self.ring);
        let patch = serde_json::json!({"metadata": {"annotations": {ANNOTATION_CANNOT_READ: note.clone()}}});
        match self
            .lease()
            .patch(&name, &PatchParams::default(), &Patch::Merge(&patch))
            .await
        {
            Ok(_) => {}
            Err(kube::Error::Api(status)) if status.code == 404 => {}
            Err(error) => {
                warn!(%error, lease = %name, "cannot say on the ring's Lease why this build does not lead")
            }
        }
        let recorders = Recorders::new(
            &self.client,
            Reporter {
                controller: express_api::keys::REPORTING_CONTROLLER.into(),
                instance: self.identity.clone(),
            },
        );
        let regarding = ObjectReference {
            api_version: Some("coordination.k8s.io/v1".into()),
            kind: Some("Lease".into()),
            name: Some(name),
            namespace: Some(self.namespace.clone()),
            ..ObjectReference::default()
        };
        if let Err(error) = recorders
            .warn(&regarding, "CannotReadStoredAPI", "refuse_to_lead", &note)
            .await
        {
            warn!(%error, "cannot publish why this build does not lead");
        }
    }

    /// Removes a refusal this or an earlier build left on the Lease, once this one can read.
    async fn clear(&self) {
        let name = express_api::rings::lease_name(&self.ring);
        let said = match self.lease().get_opt(&name).await {
            Ok(lease) => lease.is_some_and(|l| {
                l.metadata
                    .annotations
                    .is_some_and(|a| a.contains_key(ANNOTATION_CANNOT_READ))
            }),
            Err(_) => false,
        };
        if !said {
            return;
        }
        let patch =
            serde_json::json!({"metadata": {"annotations": {ANNOTATION_CANNOT_READ: null}}});
        if self
            .lease()
            .patch(&name, &PatchParams::default(), &Patch::Merge(&patch))
            .await
            .is_ok()
        {
            info!(ring = %self.ring, "this build can read what the DC stores; contending for the ring's Lease");
        }
    }
}
