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
use k8s_openapi::jiff::{SignedDuration, Timestamp};
use kube::api::{Api, Patch, PatchParams};
use tokio::sync::watch;
use tracing::{info, warn};

use crate::controller::{Recorders, Reporter};

/// How often a build that refuses to lead looks again, and a leader makes sure it still can.
const READ_CHECK_EVERY: Duration = Duration::from_secs(30);

/// How long the Lease lasts after a renewal: another replica may take it once it has not been
/// renewed for this long.
const LEASE_SECONDS: u64 = 15;

/// How long before the Lease would expire its holder renews it: every 5 s, so that two renewals
/// can fail before the holder stops acting.
const RENEW_BEFORE_SECONDS: u64 = 10;

/// How long after the Lease's last renewal its holder may act: it stops 5 s before another
/// replica may take the Lease over, whatever its renewals are doing (client-go's renew
/// deadline). The lease manager keeps believing it holds a Lease it could not renew until it
/// reads otherwise, which during an outage can be after another replica took it: both acted.
const RENEW_DEADLINE: Duration = Duration::from_secs(10);

/// How often the holder reads its Lease to know how long it may still act, and how long that
/// read may take at most (never past the deadline: a read that takes longer is no news, and the
/// deadline stands).
const TENURE_CHECK_EVERY: Duration = Duration::from_secs(2);
const TENURE_READ_WITHIN: Duration = Duration::from_secs(4);

/// How long from now until `until`; zero once it has passed, or when there is none.
fn time_left(until: Option<Timestamp>) -> Duration {
    until
        .and_then(|until| Duration::try_from(until.duration_since(Timestamp::now())).ok())
        .unwrap_or(Duration::ZERO)
}

/// Until when `identity` may act on `lease`: its last renewal plus [`RENEW_DEADLINE`], if it
/// holds the Lease; `None` if another holds it or it says no renewal.
pub fn tenure_until(lease: &Lease, identity: &str) -> Option<Timestamp> {
    let spec = lease.spec.as_ref()?;
    if spec.holder_identity.as_deref() != Some(identity) {
        return None;
    }
    let renewed = spec.renew_time.as_ref()?.0;
    let deadline = SignedDuration::try_from(RENEW_DEADLINE).ok()?;
    renewed.checked_add(deadline).ok()
}

/// Reads the Lease's tenure for `identity`: `Some(until)` from a fresh read, `Ok(None)` when it
/// does not hold it, `Err` when the read failed or took too long (no news).
async fn read_tenure(
    leases: &Api<Lease>,
    name: &str,
    identity: &str,
    within: Duration,
) -> Result<Option<Timestamp>, ()> {
    match tokio::time::timeout(within, leases.get_opt(name)).await {
        Ok(Ok(Some(lease))) => Ok(tenure_until(&lease, identity)),
        Ok(Ok(None)) => Ok(None),
        Ok(Err(_)) | Err(_) => Err(()),
    }
}

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
            .with_duration(LEASE_SECONDS)
            .with_grace(RENEW_BEFORE_SECONDS)
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
            let leases: Api<Lease> = Api::namespaced(client.clone(), &namespace);
            let lease_name = express_api::rings::lease_name(&ring);
            let mut tenure = tokio::time::interval(TENURE_CHECK_EVERY);
            tenure.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            // What the lease manager says, and until when this instance may act on it.
            let (mut holds, mut until): (bool, Option<Timestamp>) = (false, None);
            loop {
                tokio::select! {
                    changed = held.changed() => {
                        if changed.is_err() {
                            break;
                        }
                        holds = *held.borrow_and_update();
                        until = None;
                        if holds {
                            until = read_tenure(&leases, &lease_name, &identity, TENURE_READ_WITHIN)
                                .await
                                .ok()
                                .flatten();
                        }
                    }
                    _ = tenure.tick(), if holds => {
                        // While acting, never read past the deadline: acting stops on time
                        // whatever the read does. Past it, a read may take its time.
                        let left = time_left(until);
                        let within = if left.is_zero() { TENURE_READ_WITHIN } else { left.min(TENURE_READ_WITHIN) };
                        // A failed read is no news: the deadline already known stands.
                        if let Ok(read) = read_tenure(&leases, &lease_name, &identity, within).await {
                            until = read;
                        }
                    }
                    () = tokio::time::sleep(time_left(until)), if *leading.borrow() => {}
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
                let acting = holds && until.is_some_and(|until| Timestamp::now() < until);
                if acting != *leading.borrow() {
                    if acting {
                        info!(ring = %ring, identity = %identity, "holding the ring's Lease: leading");
                    } else if holds {
                        warn!(ring = %ring, identity = %identity, "the ring's Lease not renewed within its deadline: not acting until it is");
                    } else {
                        info!(ring = %ring, identity = %identity, "lost the ring's Lease: observing only");
                    }
                    let _ = leading.send(acting);
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

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::coordination::v1::LeaseSpec;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::MicroTime;

    fn lease(holder: Option<&str>, renewed: Option<i64>) -> Lease {
        Lease {
            spec: Some(LeaseSpec {
                holder_identity: holder.map(str::to_owned),
                renew_time: renewed
                    .map(|s| MicroTime(Timestamp::from_second(1_800_000_000 + s).expect("time"))),
                lease_duration_seconds: Some(15),
                ..LeaseSpec::default()
            }),
            ..Lease::default()
        }
    }

    #[test]
    fn the_holder_may_act_until_ten_seconds_after_its_last_renewal() {
        let at = |s: i64| Timestamp::from_second(1_800_000_000 + s).expect("time");
        assert_eq!(
            tenure_until(&lease(Some("replica-1"), Some(0)), "replica-1"),
            Some(at(10))
        );
        // Five seconds before another replica may take the Lease over.
        assert!(at(10) < at(i64::try_from(LEASE_SECONDS).expect("seconds")));
        // Another holder, or no renewal, and this instance may not act at all.
        assert_eq!(
            tenure_until(&lease(Some("replica-2"), Some(0)), "replica-1"),
            None
        );
        assert_eq!(tenure_until(&lease(None, Some(0)), "replica-1"), None);
        assert_eq!(
            tenure_until(&lease(Some("replica-1"), None), "replica-1"),
            None
        );
        assert_eq!(tenure_until(&Lease::default(), "replica-1"), None);
    }

    #[test]
    fn renewals_come_twice_within_the_deadline() {
        // The lease manager renews RENEW_BEFORE_SECONDS before expiry: every 5 s, so one
        // renewal can fail and the next still lands before the holder must stop.
        let renew_every = LEASE_SECONDS - RENEW_BEFORE_SECONDS;
        assert!(2 * renew_every <= RENEW_DEADLINE.as_secs());
        assert!(RENEW_DEADLINE.as_secs() < LEASE_SECONDS);
    }

    #[test]
    fn time_left_is_never_negative() {
        assert_eq!(time_left(None), Duration::ZERO);
        assert_eq!(
            time_left(Some(Timestamp::now() - SignedDuration::from_secs(3))),
            Duration::ZERO
        );
        let left = time_left(Some(Timestamp::now() + SignedDuration::from_secs(5)));
        assert!(left > Duration::from_secs(4) && left <= Duration::from_secs(5));
    }
}
