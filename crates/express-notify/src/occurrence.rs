//! What is worth telling: a [`Trigger`] that fired on one object at one instant, with the facts
//! a person needs to act on it. An occurrence's `id` names it for ever: the same rollout's
//! failure has the same id on every pass, on every replica, after every restart, which is what
//! lets the ledger send it once.

use std::collections::BTreeMap;

use k8s_openapi::jiff::Timestamp;
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

/// What people wait for (DESIGN section 21), by the name subscriptions use.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Trigger {
    /// A tenant's rollout halted on a failed node.
    RolloutFailed,
    /// A tenant's rollout is being rolled back (automatically, or by an abort with rollback).
    RolloutRolledBack,
    /// A tenant's desired state did not settle within its settle timeout.
    RolloutStalled,
    /// A tenant's rollout finished: every up node runs its desired revision.
    RolloutDone,
    /// An OperatorRelease waits: paused by a person, or held because both rings are in trouble
    /// alike (the infrastructure, not the build).
    ReleaseWaiting,
    /// An OperatorRelease's wave ended (baked, or promoted by a person): the next one starts.
    ReleasePromoted,
    /// An OperatorRelease rolled back, with the signal that decided and both rings' figures.
    ReleaseRolledBack,
    /// An OperatorRelease succeeded: every movable tenant on the new build.
    ReleaseDone,
    /// A FleetRelease's next stage waits for a person's `fleet-release approve`.
    FleetWaitingApproval,
    /// A DC of a FleetRelease failed (its release rolled back, its soak failed, its stage
    /// passed its deadline) or was rolled back.
    FleetDcFailed,
    /// A DC of a FleetRelease cannot be read: never counted done, the plan holds.
    FleetDcUnreachable,
    /// A DC of a FleetRelease answers, but its doctor's verdict is `infrastructure`: the
    /// platform under it (API server, etcd, nodes), not the build or a tenant, is in trouble.
    FleetDcInfrastructure,
    /// A FleetRelease failed: no later stage starts.
    FleetFailed,
    /// A person aborted a FleetRelease (with `--rollback`: every DC released went back).
    FleetAborted,
    /// A FleetRelease succeeded in every DC.
    FleetDone,
}

/// How loud: Flagger's three levels, Alertmanager's `severity` label.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Severity {
    Info,
    Warning,
    Error,
}

impl Severity {
    pub fn as_str(self) -> &'static str {
        match self {
            Severity::Info => "info",
            Severity::Warning => "warning",
            Severity::Error => "error",
        }
    }
}

impl Trigger {
    pub const ALL: [Trigger; 15] = [
        Trigger::RolloutFailed,
        Trigger::RolloutRolledBack,
        Trigger::RolloutStalled,
        Trigger::RolloutDone,
        Trigger::ReleaseWaiting,
        Trigger::ReleasePromoted,
        Trigger::ReleaseRolledBack,
        Trigger::ReleaseDone,
        Trigger::FleetWaitingApproval,
        Trigger::FleetDcFailed,
        Trigger::FleetDcUnreachable,
        Trigger::FleetDcInfrastructure,
        Trigger::FleetFailed,
        Trigger::FleetAborted,
        Trigger::FleetDone,
    ];

    /// The name subscriptions, messages and metrics use.
    pub fn as_str(self) -> &'static str {
        match self {
            Trigger::RolloutFailed => "rollout-failed",
            Trigger::RolloutRolledBack => "rollout-rolled-back",
            Trigger::RolloutStalled => "rollout-stalled",
            Trigger::RolloutDone => "rollout-done",
            Trigger::ReleaseWaiting => "release-waiting",
            Trigger::ReleasePromoted => "release-promoted",
            Trigger::ReleaseRolledBack => "release-rolled-back",
            Trigger::ReleaseDone => "release-done",
            Trigger::FleetWaitingApproval => "fleet-waiting-approval",
            Trigger::FleetDcFailed => "fleet-dc-failed",
            Trigger::FleetDcUnreachable => "fleet-dc-unreachable",
            Trigger::FleetDcInfrastructure => "fleet-dc-infrastructure",
            Trigger::FleetFailed => "fleet-failed",
            Trigger::FleetAborted => "fleet-aborted",
            Trigger::FleetDone => "fleet-done",
        }
    }

    pub fn parse(name: &str) -> Option<Trigger> {
        Trigger::ALL.into_iter().find(|t| t.as_str() == name)
    }

    pub fn severity(self) -> Severity {
        match self {
            Trigger::RolloutFailed
            | Trigger::RolloutRolledBack
            | Trigger::ReleaseRolledBack
            | Trigger::FleetDcFailed
            | Trigger::FleetFailed
            | Trigger::FleetAborted => Severity::Error,
            Trigger::RolloutStalled
            | Trigger::ReleaseWaiting
            | Trigger::FleetWaitingApproval
            | Trigger::FleetDcUnreachable
            | Trigger::FleetDcInfrastructure => Severity::Warning,
            Trigger::RolloutDone
            | Trigger::ReleasePromoted
            | Trigger::ReleaseDone
            | Trigger::FleetDone => Severity::Info,
        }
    }

    /// A condition that holds until it clears (an alert that resolves), rather than a moment.
    pub fn is_condition(self) -> bool {
        matches!(
            self,
            Trigger::RolloutFailed
                | Trigger::RolloutStalled
                | Trigger::ReleaseWaiting
                | Trigger::FleetWaitingApproval
                | Trigger::FleetDcUnreachable
                | Trigger::FleetDcInfrastructure
        )
    }

    /// Alertmanager's `alertname`: never one of the chart's PrometheusRule alerts (its
    /// `ExpressRolloutFailed` counts a ring's failures; this one is a tenant's).
    pub fn alert_name(self) -> &'static str {
        match self {
            Trigger::RolloutFailed => "ExpressTenantRolloutFailed",
            Trigger::RolloutRolledBack => "ExpressTenantRolloutRolledBack",
            Trigger::RolloutStalled => "ExpressTenantRolloutStalled",
            Trigger::RolloutDone => "ExpressTenantRolloutDone",
            Trigger::ReleaseWaiting => "ExpressReleaseWaiting",
            Trigger::ReleasePromoted => "ExpressReleasePromoted",
            Trigger::ReleaseRolledBack => "ExpressReleaseRolledBack",
            Trigger::ReleaseDone => "ExpressReleaseDone",
            Trigger::FleetWaitingApproval => "ExpressFleetReleaseWaitingApproval",
            Trigger::FleetDcFailed => "ExpressFleetReleaseDcFailed",
            Trigger::FleetDcUnreachable => "ExpressFleetReleaseDcUnreachable",
            Trigger::FleetDcInfrastructure => "ExpressFleetReleaseDcInfrastructure",
            Trigger::FleetFailed => "ExpressFleetReleaseFailed",
            Trigger::FleetAborted => "ExpressFleetReleaseAborted",
            Trigger::FleetDone => "ExpressFleetReleaseDone",
        }
    }
}

impl std::fmt::Display for Trigger {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The object an occurrence is about.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct Subject {
    /// `ExpressCluster`, `OperatorRelease` or `FleetRelease`.
    pub kind: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub namespace: Option<String>,
    pub name: String,
}

impl std::fmt::Display for Subject {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match &self.namespace {
            Some(namespace) => write!(f, "{} {namespace}/{}", self.kind, self.name),
            None => write!(f, "{} {}", self.kind, self.name),
        }
    }
}

/// One fact of an occurrence, in the order a person reads them.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Fact {
    pub name: String,
    pub value: String,
}

/// A trigger that fired on one object at one instant.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Occurrence {
    /// Names this occurrence for ever (trigger, object and its uid, the instant or request that
    /// makes it this one and not the next).
    pub id: String,
    pub trigger: Trigger,
    pub subject: Subject,
    /// When it happened, as the object's status says (never when it was noticed).
    pub at: Timestamp,
    /// One line: what happened, where.
    pub title: String,
    /// What a person needs to act: why, the figures, which node or wave.
    pub facts: Vec<Fact>,
    /// The command that acts on it, if one does.
    pub act: Option<String>,
    /// Destinations the object itself subscribes to (its notify annotation), besides the
    /// configured subscriptions.
    pub subscribed_by_object: Vec<String>,
}

/// An alert's labels at Alertmanager: what identifies it there.
pub type Labels = BTreeMap<String, String>;

impl Occurrence {
    /// The labels that identify this occurrence's alert (the same on every post), in DC `dc`:
    /// what Alertmanager is sent, and what the ledger keeps of an alert it holds as firing.
    pub fn alert_labels(&self, dc: Option<&str>) -> Labels {
        let mut labels = BTreeMap::from([
            ("alertname".to_owned(), self.trigger.alert_name().to_owned()),
            ("severity".to_owned(), self.severity().as_str().to_owned()),
            ("trigger".to_owned(), self.trigger.as_str().to_owned()),
            ("kind".to_owned(), self.subject.kind.clone()),
            ("name".to_owned(), self.subject.name.clone()),
            ("occurrence".to_owned(), self.digest()),
        ]);
        if let Some(namespace) = &self.subject.namespace {
            labels.insert("namespace".into(), namespace.clone());
        }
        if let Some(dc) = dc {
            labels.insert("dc".into(), dc.to_owned());
        }
        labels
    }

    pub fn severity(&self) -> Severity {
        self.trigger.severity()
    }

    /// A short, stable digest of the id: what the ledger keeps.
    pub fn digest(&self) -> String {
        digest(&self.id)
    }
}

/// The first 16 hex digits of SHA-256: short enough for a ledger of thousands in one ConfigMap,
/// long enough that two occurrences never share one.
pub fn digest(text: &str) -> String {
    let hash = Sha256::digest(text.as_bytes());
    hash.iter().take(8).map(|b| format!("{b:02x}")).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_trigger_reads_back_from_its_name() {
        for trigger in Trigger::ALL {
            assert_eq!(Trigger::parse(trigger.as_str()), Some(trigger));
            let json = serde_json::to_string(&trigger).unwrap_or_default();
            assert_eq!(json, format!("\"{}\"", trigger.as_str()));
        }
        assert_eq!(Trigger::parse("rollout-exploded"), None);
    }

    #[test]
    fn digests_are_short_stable_and_distinct() {
        assert_eq!(digest("a"), digest("a"));
        assert_ne!(digest("a"), digest("b"));
        assert_eq!(digest("a").len(), 16);
    }
}
