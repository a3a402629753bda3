//! Publishing events (`events.k8s.io/v1`), with what repeats of an event need and no more.
//!
//! An event repeated within six minutes (same object, type, reason and action) becomes a series
//! on the first one, as kube's `Recorder` and client-go's recorder do. kube's `Recorder` keeps
//! every event it published for that: the whole object, a few kilobytes, kept until its next
//! publish after they expire, in a map that never shrinks. A fleet-wide upgrade publishes an
//! event per node: at 1,000 tenants its recorders held 25 MiB after the burst, and a quiet
//! recorder held them for good. These recorders keep, per event, a hash of its key, its name
//! and its series (under a hundred bytes), in 64 shards of namespaces so that publishes do not
//! wait on one lock, and drop what expired on the fleet figures' timer ([`Recorders::sweep`]).

use std::collections::HashMap;
use std::hash::{DefaultHasher, Hash, Hasher};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::ObjectReference;
use k8s_openapi::api::events::v1::{Event, EventSeries};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{MicroTime, ObjectMeta};
use k8s_openapi::jiff::Timestamp;
use kube::api::{Api, Patch, PatchParams, PostParams};

use crate::long_lived::long_lived;

/// How long a published event can still become a series (kube's and client-go's six minutes).
const SERIES_WINDOW: Duration = Duration::from_secs(6 * 60);

/// Who reports the events.
#[derive(Clone, Debug)]
pub struct Reporter {
    pub controller: String,
    /// This instance (the pod's name).
    pub instance: String,
}

/// One event to publish.
pub(super) struct Occurrence<'a> {
    pub(super) warning: bool,
    pub(super) reason: &'a str,
    pub(super) action: &'a str,
    pub(super) note: &'a str,
}

pub struct Recorders {
    shards: Vec<Mutex<Shard>>,
    client: kube::Client,
    reporter: Reporter,
}

/// The events of some namespaces published within the series window, by key.
#[derive(Default)]
struct Shard(HashMap<u64, Published>);

struct Published {
    name: Box<str>,
    count: i32,
    last: Instant,
}

/// What to do with an occurrence, given what was published.
#[derive(Debug, PartialEq, Eq)]
enum Next {
    Create,
    /// Count it on the series of the event `name`.
    Repeat {
        name: Box<str>,
        count: i32,
    },
}

impl Shard {
    fn next(&self, key: u64, now: Instant) -> Next {
        match self.0.get(&key) {
            Some(published) if !expired(published.last, now) => Next::Repeat {
                name: published.name.clone(),
                count: published.count + 1,
            },
            _ => Next::Create,
        }
    }

    /// Kept for the series window, past the burst that published it: the name is copied
    /// where long-lived objects go (see [`crate::long_lived`]).
    fn published(&mut self, key: u64, name: &str, count: i32, now: Instant) {
        long_lived(|| {
            self.0.insert(
                key,
                Published {
                    name: name.into(),
                    count,
                    last: now,
                },
            );
        });
    }

    /// Drops what can no longer become a series; returns how many are kept.
    fn sweep(&mut self, now: Instant) -> usize {
        self.0.retain(|_, published| !expired(published.last, now));
        self.0.shrink_to_fit();
        self.0.len()
    }
}

fn expired(last: Instant, now: Instant) -> bool {
    now.saturating_duration_since(last) >= SERIES_WINDOW
}

/// What makes two occurrences one series: the object, the type, the reason and the action (the
/// note is the first occurrence's, as with kube's and client-go's recorders).
fn key(occurrence: &Occurrence<'_>, regarding: &ObjectReference) -> u64 {
    let mut hasher = DefaultHasher::new();
    (occurrence.warning, occurrence.reason, occurrence.action).hash(&mut hasher);
    (
        &regarding.api_version,
        &regarding.kind,
        &regarding.namespace,
        &regarding.name,
        &regarding.uid,
    )
        .hash(&mut hasher);
    hasher.finish()
}

impl Recorders {
    const SHARDS: usize = 64;

    pub fn new(client: &kube::Client, reporter: Reporter) -> Recorders {
        Recorders {
            shards: (0..Self::SHARDS).map(|_| Mutex::default()).collect(),
            client: client.clone(),
            reporter,
        }
    }

    fn shard_of(namespace: &str) -> usize {
        let mut hasher = DefaultHasher::new();
        namespace.hash(&mut hasher);
        usize::try_from(hasher.finish() % Self::SHARDS as u64).unwrap_or(0)
    }

    fn shard(&self, namespace: &str) -> std::sync::MutexGuard<'_, Shard> {
        self.shards[Self::shard_of(namespace)]
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// A Warning event on `regarding`, outside a running controller (before it leads).
    pub async fn warn(
        &self,
        regarding: &ObjectReference,
        reason: &str,
        action: &str,
        note: &str,
    ) -> Result<(), kube::Error> {
        let occurrence = Occurrence {
            warning: true,
            reason,
            action,
            note,
        };
        self.publish(&occurrence, regarding).await
    }

    /// Publishes `occurrence` on `regarding`: a new event, or one more on the series of the same
    /// event published within six minutes.
    pub(super) async fn publish(
        &self,
        occurrence: &Occurrence<'_>,
        regarding: &ObjectReference,
    ) -> Result<(), kube::Error> {
        let namespace = regarding.namespace.as_deref().unwrap_or("default");
        let events: Api<Event> = Api::namespaced(self.client.clone(), namespace);
        let key = key(occurrence, regarding);
        let next = self.shard(namespace).next(key, Instant::now());
        if let Next::Repeat { name, count } = next {
            let series = EventSeries {
                count,
                last_observed_time: MicroTime(Timestamp::now()),
            };
            let patch = serde_json::json!({ "series": series });
            match events
                .patch(&name, &PatchParams::default(), &Patch::Merge(&patch))
                .await
            {
                Ok(_) => {
                    self.shard(namespace)
                        .published(key, &name, count, Instant::now());
                    return Ok(());
                }
                // Expired on the server (events live an hour there): start a new one.
                Err(kube::Error::Api(status)) if status.code == 404 => {}
                Err(err) => return Err(err),
            }
        }
        let created = events
            .create(&PostParams::default(), &self.event(occurrence, regarding))
            .await?;
        if let Some(name) = created.metadata.name {
            self.shard(namespace)
                .published(key, &name, 1, Instant::now());
        }
        Ok(())
    }

    /// A new event, named as kube and client-go name theirs (the object's name, then the time).
    fn event(&self, occurrence: &Occurrence<'_>, regarding: &ObjectReference) -> Event {
        let now = Timestamp::now();
        let object = regarding
            .name
            .as_deref()
            .unwrap_or(&self.reporter.controller);
        Event {
            metadata: ObjectMeta {
                name: Some(format!("{object}.{:x}", now.as_nanosecond())),
                namespace: regarding.namespace.clone(),
                ..ObjectMeta::default()
            },
            event_time: Some(MicroTime(now)),
            type_: Some(
                if occurrence.warning {
                    "Warning"
                } else {
                    "Normal"
                }
                .into(),
            ),
            reason: Some(occurrence.reason.into()),
            action: Some(occurrence.action.into()),
            note: Some(occurrence.note.into()),
            regarding: Some(regarding.clone()),
            reporting_controller: Some(self.reporter.controller.clone()),
            reporting_instance: Some(self.reporter.instance.clone()),
            ..Event::default()
        }
    }

    /// Forgets the events that can no longer become a series; returns how many are kept.
    pub fn sweep(&self, now: Instant) -> usize {
        self.shards
            .iter()
            .map(|shard| {
                shard
                    .lock()
                    .unwrap_or_else(|poisoned| poisoned.into_inner())
                    .sweep(now)
            })
            .sum()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn node(name: &str, uid: &str) -> ObjectReference {
        ObjectReference {
            api_version: Some("express.dev/v1alpha1".into()),
            kind: Some("Frontend".into()),
            namespace: Some("tenant".into()),
            name: Some(name.into()),
            uid: Some(uid.into()),
            ..ObjectReference::default()
        }
    }

    fn occurrence<'a>(reason: &'a str, note: &'a str) -> Occurrence<'a> {
        Occurrence {
            warning: false,
            reason,
            action: "replace_pod",
            note,
        }
    }

    #[test]
    fn a_repeat_within_the_window_is_counted_on_the_first_event() {
        let mut shard = Shard::default();
        let start = Instant::now();
        let first = key(&occurrence("Replacing", "to r2"), &node("acme-fe1", "u1"));
        assert_eq!(shard.next(first, start), Next::Create);
        shard.published(first, "acme-fe1.1", 1, start);
        // The note does not make another event; another node or reason does.
        let again = key(&occurrence("Replacing", "to r3"), &node("acme-fe1", "u1"));
        assert_eq!(first, again);
        assert_eq!(
            shard.next(again, start + Duration::from_secs(300)),
            Next::Repeat {
                name: "acme-fe1.1".into(),
                count: 2
            }
        );
        for other in [
            key(&occurrence("Replacing", "to r2"), &node("acme-fe2", "u2")),
            key(&occurrence("Created", "to r2"), &node("acme-fe1", "u1")),
            key(
                &occurrence("Replacing", "to r2"),
                &node("acme-fe1", "u-new"),
            ),
        ] {
            assert_ne!(other, first);
            assert_eq!(shard.next(other, start), Next::Create);
        }
        // Six minutes after the last occurrence: a new event.
        assert_eq!(shard.next(first, start + SERIES_WINDOW), Next::Create);
    }

    #[test]
    fn a_sweep_forgets_what_expired_and_keeps_the_rest() {
        let mut shard = Shard::default();
        let start = Instant::now();
        for n in 0..100u64 {
            shard.published(n, &format!("e{n}"), 1, start);
        }
        shard.published(1_000, "late", 3, start + Duration::from_secs(200));
        assert_eq!(shard.sweep(start + Duration::from_secs(60)), 101);
        assert_eq!(shard.sweep(start + SERIES_WINDOW), 1);
        assert_eq!(
            shard.sweep(start + SERIES_WINDOW + Duration::from_secs(200)),
            0
        );
        assert_eq!(shard.0.capacity(), 0, "the map gives its memory back");
    }

    #[test]
    fn namespaces_spread_over_every_shard_and_keep_theirs() {
        assert_eq!(
            Recorders::shard_of("tenant-1"),
            Recorders::shard_of("tenant-1")
        );
        let used: std::collections::HashSet<usize> = (0..1000)
            .map(|i| Recorders::shard_of(&format!("tenant-{i}")))
            .collect();
        assert_eq!(used.len(), Recorders::SHARDS);
    }
}
