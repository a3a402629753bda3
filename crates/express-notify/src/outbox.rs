//! What each destination is sent now. For a webhook or Slack: every occurrence routed to it,
//! recent enough and not in the ledger, as one message, or one grouped message when several
//! are due; at most one message per `groupSeconds`, the first of a quiet spell after
//! `waitSeconds` to gather what comes with it (a flood of 1,000 failing tenants is one message a
//! minute, not 1,000). For an Alertmanager: every condition that holds, as firing alerts posted
//! again each minute (an alert not posted again expires), events as alerts that end on their
//! own, and what stopped holding as resolved. A destination whose last delivery failed waits
//! for its retry; nothing here ever waits on, or holds back, a rollout or a release.

use std::collections::{BTreeMap, BTreeSet};

use k8s_openapi::jiff::Timestamp;

use crate::config::{Config, Destination, DestinationKind};
use crate::ledger::Ledger;
use crate::occurrence::{Labels, Occurrence};

/// An Alertmanager forgets an alert not posted again within its `resolve_timeout` (5 minutes
/// by default): firing alerts are posted again this often.
pub const ALERT_REPEAT_SECONDS: i64 = 60;
/// How long an event's alert (a rollout done, a release rolled back) stays up.
pub const EVENT_ALERT_SECONDS: i64 = 600;

/// One delivery to one destination.
#[derive(Clone, Debug, PartialEq)]
pub struct Delivery {
    pub destination: Destination,
    /// The occurrences this delivery tells for the first time, oldest first.
    pub new: Vec<Occurrence>,
    /// Alertmanager: every condition that holds now (posted again, as firing).
    pub firing: Vec<Occurrence>,
    /// Alertmanager: the alerts that stopped holding, by their labels (posted as resolved).
    pub resolved: Vec<Labels>,
}

impl Delivery {
    /// Several occurrences in one message: rendered as a group.
    pub fn is_grouped(&self) -> bool {
        self.new.len() > 1
    }

    /// The destination accepted this delivery: the ledger records its occurrences as sent and,
    /// for an Alertmanager, the alerts it now holds as firing.
    pub fn accepted(&self, ledger: &mut Ledger, dc: Option<&str>, now: i64) {
        let firing = (self.destination.kind == DestinationKind::Alertmanager).then(|| {
            self.firing
                .iter()
                .map(|o| (o.digest(), o.alert_labels(dc)))
                .collect()
        });
        ledger.accepted(
            &self.destination.name,
            self.new.iter().map(|o| (o.digest(), o.at.as_second())),
            firing,
            now,
        );
    }

    /// Names this delivery for the receiver, the same on a repeat: the digest of what it tells.
    pub fn id(&self) -> String {
        let ids: Vec<&str> = self
            .new
            .iter()
            .chain(&self.firing)
            .map(|o| o.id.as_str())
            .collect();
        crate::occurrence::digest(&ids.join("\n"))
    }
}

/// What to send now, and when to look again.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Outbox {
    pub deliveries: Vec<Delivery>,
    /// Every (destination, digest) due but not sent in this pass (a window not open yet, a
    /// retry not due): what is dropped if it leaves without being sent.
    pub waiting: BTreeSet<(String, String)>,
    /// The earliest instant something not sent now becomes due.
    pub next_look: Option<Timestamp>,
}

/// The destinations an occurrence is routed to: every subscription that matches it, and the
/// ones its object names (when configured), each once.
pub fn routes<'a>(config: &'a Config, occurrence: &Occurrence) -> Vec<&'a Destination> {
    let mut names: BTreeSet<&str> = config
        .subscriptions
        .iter()
        .filter(|s| s.triggers.is_empty() || s.triggers.contains(&occurrence.trigger))
        .filter(|s| match occurrence.subject.kind.as_str() {
            "ExpressCluster" => {
                s.namespaces.is_empty()
                    || occurrence
                        .subject
                        .namespace
                        .as_ref()
                        .is_some_and(|ns| s.namespaces.contains(ns))
            }
            _ => s.releases,
        })
        .map(|s| s.destination.as_str())
        .collect();
    names.extend(occurrence.subscribed_by_object.iter().map(String::as_str));
    config
        .destinations
        .iter()
        .filter(|d| names.contains(d.name.as_str()))
        .collect()
}

/// What each destination is sent now (`now` in unix seconds, as the ledger keeps it).
pub fn outbox(config: &Config, occurrences: &[Occurrence], ledger: &Ledger, now: i64) -> Outbox {
    let horizon = now.saturating_sub(i64::try_from(config.max_age_seconds).unwrap_or(i64::MAX));
    let oldest_sendable = horizon.max(ledger.since);
    let mut routed: BTreeMap<&str, Vec<&Occurrence>> = BTreeMap::new();
    for occurrence in occurrences {
        for destination in routes(config, occurrence) {
            routed
                .entry(&destination.name)
                .or_default()
                .push(occurrence);
        }
    }
    let mut out = Outbox::default();
    for destination in &config.destinations {
        let mine = routed.remove(destination.name.as_str()).unwrap_or_default();
        let mut due: Vec<&Occurrence> = mine
            .iter()
            .copied()
            .filter(|o| o.at.as_second() >= oldest_sendable)
            .filter(|o| !ledger.was_sent(&destination.name, &o.digest()))
            .collect();
        due.sort_by(|a, b| (a.at, &a.id).cmp(&(b.at, &b.id)));
        due.dedup_by(|a, b| a.id == b.id);
        let plan = match destination.kind {
            DestinationKind::Alertmanager => alerts(destination, &mine, due, ledger, now),
            DestinationKind::Webhook | DestinationKind::Slack => {
                messages(destination, due, ledger, now)
            }
        };
        match plan {
            Ready::Now(delivery) => out.deliveries.push(delivery),
            Ready::Later(at, waiting) => {
                out.waiting.extend(
                    waiting
                        .iter()
                        .map(|o| (destination.name.clone(), o.digest())),
                );
                out.next_look = earliest(out.next_look, at);
            }
            Ready::Nothing => {}
        }
    }
    out
}

enum Ready<'a> {
    Now(Delivery),
    Later(i64, Vec<&'a Occurrence>),
    Nothing,
}

/// A webhook's or Slack's: one message with everything due, once its window opens.
fn messages<'a>(
    destination: &Destination,
    due: Vec<&'a Occurrence>,
    ledger: &Ledger,
    now: i64,
) -> Ready<'a> {
    let Some(oldest) = due.first() else {
        return Ready::Nothing;
    };
    let health = ledger.health(&destination.name);
    let window_opens = health
        .last_sent_at
        .map(|at| at.saturating_add(seconds(destination.group_seconds)))
        .unwrap_or(i64::MIN);
    let gathered = oldest
        .at
        .as_second()
        .saturating_add(seconds(destination.wait_seconds));
    let ready_at = window_opens
        .max(gathered)
        .max(health.retry_at.unwrap_or(i64::MIN));
    if now < ready_at {
        return Ready::Later(ready_at, due);
    }
    Ready::Now(Delivery {
        destination: destination.clone(),
        new: due.into_iter().cloned().collect(),
        firing: Vec::new(),
        resolved: Vec::new(),
    })
}

/// An Alertmanager's: the conditions that hold, the new events, what stopped holding; posted
/// when that changes (after `waitSeconds`) and again every minute while anything fires.
fn alerts<'a>(
    destination: &Destination,
    mine: &[&Occurrence],
    due: Vec<&'a Occurrence>,
    ledger: &Ledger,
    now: i64,
) -> Ready<'a> {
    let mut firing: Vec<&Occurrence> = mine
        .iter()
        .copied()
        .filter(|o| o.trigger.is_condition())
        .collect();
    firing.sort_by(|a, b| a.id.cmp(&b.id));
    firing.dedup_by(|a, b| a.id == b.id);
    let firing_now: BTreeSet<String> = firing.iter().map(|o| o.digest()).collect();
    let was_firing = ledger.firing.get(&destination.name);
    let resolved: Vec<Labels> = was_firing
        .into_iter()
        .flatten()
        .filter(|(digest, _)| !firing_now.contains(*digest))
        .map(|(_, labels)| labels.clone())
        .collect();
    let changed = !due.is_empty()
        || !resolved.is_empty()
        || was_firing
            .map(|f| f.keys().cloned().collect::<BTreeSet<_>>())
            .unwrap_or_default()
            != firing_now;
    if !changed && firing.is_empty() {
        return Ready::Nothing;
    }
    let health = ledger.health(&destination.name);
    let last = health.last_sent_at.unwrap_or(i64::MIN);
    let ready_at = if changed {
        let gathered = due
            .iter()
            .map(|o| o.at.as_second())
            .min()
            .map_or(i64::MIN, |at| {
                at.saturating_add(seconds(destination.wait_seconds))
            });
        last.saturating_add(seconds(destination.wait_seconds))
            .max(gathered)
    } else {
        last.saturating_add(ALERT_REPEAT_SECONDS)
    }
    .max(health.retry_at.unwrap_or(i64::MIN));
    if now < ready_at {
        return Ready::Later(ready_at, due);
    }
    Ready::Now(Delivery {
        destination: destination.clone(),
        new: due.into_iter().cloned().collect(),
        firing: firing.into_iter().cloned().collect(),
        resolved,
    })
}

fn seconds(value: u64) -> i64 {
    i64::try_from(value).unwrap_or(i64::MAX)
}

fn earliest(current: Option<Timestamp>, at: i64) -> Option<Timestamp> {
    match Timestamp::from_second(at) {
        Ok(at) => Some(current.map_or(at, |c| c.min(at))),
        Err(_) => current,
    }
}
