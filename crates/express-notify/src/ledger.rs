//! What was sent, kept in a ConfigMap beside the operator (one per ring, written by its leader
//! only): per destination, the digest of every occurrence it accepted, with the occurrence's
//! instant, for as long as an occurrence may still be sent; the alerts an Alertmanager holds as
//! firing, so that they can be resolved after a restart; and how each destination's deliveries
//! go. A new leader reads it before sending anything: what the old one sent is not repeated,
//! what it had not sent yet is sent.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::occurrence::{Labels, Occurrence};

/// The ConfigMap's key.
pub const LEDGER_KEY: &str = "ledger.json";

/// The ledger's ConfigMap in the operator's namespace: one per ring, written by its leader.
pub fn configmap_name(ring: &str) -> String {
    format!("express-notified-{ring}")
}
/// A ConfigMap holds at most 1 MiB; the ledger stays well below, trimming its oldest entries.
pub const MAX_LEDGER_BYTES: usize = 768 * 1024;
/// The first retry after a failed delivery, doubled each failure up to [`MAX_RETRY_SECONDS`].
pub const FIRST_RETRY_SECONDS: i64 = 5;
pub const MAX_RETRY_SECONDS: i64 = 300;
/// Failures in a row after which a destination counts as failing (status, event, doctor).
pub const FAILING_AFTER: u32 = 3;

#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Ledger {
    /// When this ledger began (unix seconds): nothing that happened before it is sent.
    pub since: i64,
    /// Per destination: the digests of the occurrences it accepted, with their instants.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub sent: BTreeMap<String, BTreeMap<String, i64>>,
    /// Per Alertmanager destination: the alerts it was last told are firing, by digest.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub firing: BTreeMap<String, BTreeMap<String, Labels>>,
    /// Per destination: how its deliveries go.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub health: BTreeMap<String, Health>,
}

/// How a destination's deliveries go.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Health {
    /// The last message it accepted (unix seconds).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_sent_at: Option<i64>,
    /// Deliveries refused or unanswered since the last accepted one.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub failures: u32,
    /// No new attempt before this instant (unix seconds).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub retry_at: Option<i64>,
    /// Why the last delivery failed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_error: Option<String>,
}

fn is_zero(n: &u32) -> bool {
    *n == 0
}

impl Health {
    /// Failing: [`FAILING_AFTER`] deliveries in a row refused or unanswered.
    pub fn is_failing(&self) -> bool {
        self.failures >= FAILING_AFTER
    }
}

impl Ledger {
    /// A ledger that begins now.
    pub fn starting(now: i64) -> Ledger {
        Ledger {
            since: now,
            ..Ledger::default()
        }
    }

    /// Reads the ConfigMap's text. None (never written): a ledger that begins at `absent_since`
    /// (when notifications were configured). One that cannot be read begins again `now`, which
    /// sends nothing twice (everything before `now` is in the past) at the price of what was
    /// not sent.
    pub fn read(text: Option<&str>, absent_since: i64, now: i64) -> (Ledger, Option<String>) {
        match text.map(serde_json::from_str::<Ledger>) {
            None => (Ledger::starting(absent_since), None),
            Some(Ok(ledger)) => (ledger, None),
            Some(Err(e)) => (
                Ledger::starting(now),
                Some(format!(
                    "the ledger could not be read ({e}): it begins again"
                )),
            ),
        }
    }

    pub fn to_text(&self) -> String {
        serde_json::to_string(self).unwrap_or_else(|_| "{}".into())
    }

    pub fn was_sent(&self, destination: &str, digest: &str) -> bool {
        self.sent
            .get(destination)
            .is_some_and(|sent| sent.contains_key(digest))
    }

    /// Which of `occurrences` each destination accepted, as (destination, occurrence), in the
    /// occurrences' order: what `kubectl express release` shows was sent to whom.
    pub fn told<'a>(&'a self, occurrences: &'a [Occurrence]) -> Vec<(&'a str, &'a Occurrence)> {
        occurrences
            .iter()
            .flat_map(|o| {
                let digest = o.digest();
                self.sent
                    .iter()
                    .filter(move |(_, sent)| sent.contains_key(&digest))
                    .map(move |(destination, _)| (destination.as_str(), o))
            })
            .collect()
    }

    pub fn health(&self, destination: &str) -> Health {
        self.health.get(destination).cloned().unwrap_or_default()
    }

    /// A destination accepted a delivery: its occurrences are sent, its alerts fire as given.
    pub fn accepted(
        &mut self,
        destination: &str,
        sent: impl IntoIterator<Item = (String, i64)>,
        firing: Option<BTreeMap<String, Labels>>,
        now: i64,
    ) {
        self.sent
            .entry(destination.to_owned())
            .or_default()
            .extend(sent);
        if let Some(firing) = firing {
            if firing.is_empty() {
                self.firing.remove(destination);
            } else {
                self.firing.insert(destination.to_owned(), firing);
            }
        }
        self.health.insert(
            destination.to_owned(),
            Health {
                last_sent_at: Some(now),
                ..Health::default()
            },
        );
    }

    /// A delivery failed: the next attempt waits, twice as long each time, up to five minutes.
    pub fn refused(&mut self, destination: &str, why: &str, now: i64) {
        let health = self.health.entry(destination.to_owned()).or_default();
        health.failures = health.failures.saturating_add(1);
        let doubling = FIRST_RETRY_SECONDS
            .saturating_mul(1_i64 << (health.failures - 1).min(16))
            .min(MAX_RETRY_SECONDS);
        health.retry_at = Some(now.saturating_add(doubling));
        health.last_error = Some(why.chars().take(300).collect());
    }

    /// Forgets what can no longer be sent again (older than `max_age`), destinations no longer
    /// configured, and, past [`MAX_LEDGER_BYTES`], the oldest entries, moving `since` past them
    /// so that what is forgotten is never sent again either.
    pub fn trim(&mut self, configured: &[&str], now: i64, max_age: i64) {
        let horizon = now.saturating_sub(max_age);
        self.sent.retain(|d, _| configured.contains(&d.as_str()));
        self.health.retain(|d, _| configured.contains(&d.as_str()));
        for sent in self.sent.values_mut() {
            sent.retain(|_, at| *at >= horizon);
        }
        self.sent.retain(|_, sent| !sent.is_empty());
        // Each round forgets the oldest tenth: a few serialisations, not one per entry.
        while self.to_text().len() > MAX_LEDGER_BYTES {
            let mut instants: Vec<i64> = self
                .sent
                .values()
                .flat_map(|s| s.values())
                .copied()
                .collect();
            if instants.is_empty() {
                break;
            }
            instants.sort_unstable();
            let cut = instants[instants.len() / 10];
            self.since = self.since.max(cut.saturating_add(1));
            for sent in self.sent.values_mut() {
                sent.retain(|_, at| *at > cut);
            }
            self.sent.retain(|_, sent| !sent.is_empty());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn retries_double_up_to_five_minutes_and_a_success_clears_them() {
        let mut ledger = Ledger::starting(0);
        let mut waits = Vec::new();
        for _ in 0..9 {
            ledger.refused("d", "503", 1000);
            waits.push(ledger.health("d").retry_at.unwrap_or_default() - 1000);
        }
        assert_eq!(waits, [5, 10, 20, 40, 80, 160, 300, 300, 300]);
        assert!(ledger.health("d").is_failing());
        ledger.accepted("d", [("x".into(), 900)], None, 1100);
        assert_eq!(
            ledger.health("d"),
            Health {
                last_sent_at: Some(1100),
                ..Health::default()
            }
        );
        assert!(ledger.was_sent("d", "x") && !ledger.was_sent("e", "x"));
    }

    #[test]
    fn a_ledger_reads_back_and_an_unreadable_one_begins_again() {
        let mut ledger = Ledger::starting(10);
        ledger.accepted("d", [("x".into(), 12)], None, 13);
        let (again, problem) = Ledger::read(Some(&ledger.to_text()), 0, 99);
        assert_eq!((again, problem), (ledger, None));
        let (fresh, problem) = Ledger::read(Some("{not json"), 0, 99);
        assert_eq!(fresh, Ledger::starting(99));
        assert!(problem.is_some_and(|p| p.contains("begins again")));
    }

    #[test]
    fn trimming_forgets_the_old_and_the_unconfigured() {
        let mut ledger = Ledger::starting(0);
        ledger.accepted("d", [("old".into(), 10), ("new".into(), 90)], None, 95);
        ledger.accepted("gone", [("x".into(), 90)], None, 95);
        ledger.trim(&["d"], 100, 50);
        assert!(ledger.was_sent("d", "new") && !ledger.was_sent("d", "old"));
        assert!(!ledger.sent.contains_key("gone") && !ledger.health.contains_key("gone"));
    }

    #[test]
    fn an_oversized_ledger_moves_its_beginning_past_what_it_forgets() {
        let mut ledger = Ledger::starting(0);
        let many = (0..40_000).map(|i| (format!("{i:016x}"), i64::from(i)));
        ledger.accepted("d", many, None, 50_000);
        ledger.trim(&["d"], 50_000, 1_000_000);
        assert!(ledger.to_text().len() <= MAX_LEDGER_BYTES);
        let kept_from = ledger.sent["d"].values().min().copied().unwrap_or_default();
        assert!(ledger.since > 0 && ledger.since <= kept_from);
        assert!(ledger.was_sent("d", &format!("{:016x}", 39_999)));
    }
}
