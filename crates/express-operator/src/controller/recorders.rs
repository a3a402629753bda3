//! Event recorders, one per shard of namespaces, and giving back what they cache once quiet.
//!
//! kube's `Recorder` keeps every event it published in the last six minutes (to count a repeat
//! as a series) and walks all of them on each publish: one recorder for a whole fleet walked
//! every tenant's recent events on every event, quadratic in a fleet-wide upgrade (a quarter of
//! the operator's CPU at 10,000 tenants). An object's events always go to the same shard, so
//! repeats still form a series.
//!
//! kube drops an expired event only on the shard's next publish, and its map keeps its capacity:
//! after a burst (a fleet-wide upgrade publishes an event per node) a shard that goes quiet
//! would hold its events for ever. [`Recorders::sweep`] replaces each shard quiet for longer
//! than kube's cache lifetime by a fresh recorder: everything the old one held had expired, so
//! no series is lost.

use std::hash::{DefaultHasher, Hash, Hasher};
use std::sync::RwLock;
use std::time::{Duration, Instant};

use kube::runtime::events::{Recorder, Reporter};

/// How long kube's `Recorder` keeps a published event (its `CACHE_TTL`), with a margin.
const RECORDER_CACHE_LIFETIME: Duration = Duration::from_secs(6 * 60 + 30);

pub struct Recorders {
    shards: Vec<RwLock<Shard>>,
    client: kube::Client,
    reporter: Reporter,
}

struct Shard {
    recorder: Recorder,
    /// When it last published, if it has since it was made.
    last_publish: Option<Instant>,
}

impl Recorders {
    const SHARDS: usize = 64;

    pub fn new(client: &kube::Client, reporter: &Reporter) -> Recorders {
        let recorders = Recorders {
            shards: Vec::new(),
            client: client.clone(),
            reporter: reporter.clone(),
        };
        let shards = (0..Self::SHARDS)
            .map(|_| RwLock::new(recorders.fresh()))
            .collect();
        Recorders {
            shards,
            ..recorders
        }
    }

    fn fresh(&self) -> Shard {
        Shard {
            recorder: Recorder::new(self.client.clone(), self.reporter.clone()),
            last_publish: None,
        }
    }

    fn shard_of(namespace: &str) -> usize {
        let mut hasher = DefaultHasher::new();
        namespace.hash(&mut hasher);
        usize::try_from(hasher.finish() % Self::SHARDS as u64).unwrap_or(0)
    }

    /// The recorder of a namespace's shard, to publish with at `now` (it shares its cache).
    pub(super) fn for_namespace(&self, namespace: &str, now: Instant) -> Recorder {
        let lock = &self.shards[Self::shard_of(namespace)];
        let mut shard = lock
            .write()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        shard.last_publish = Some(now);
        shard.recorder.clone()
    }

    /// Replaces every shard quiet since before `now` minus kube's cache lifetime by a fresh
    /// one; returns how many shards may still hold events (published within the lifetime).
    pub fn sweep(&self, now: Instant) -> usize {
        let mut holding = 0;
        for lock in &self.shards {
            let mut shard = lock
                .write()
                .unwrap_or_else(|poisoned| poisoned.into_inner());
            match shard.last_publish {
                Some(last) if expired(last, now) => *shard = self.fresh(),
                Some(_) => holding += 1,
                None => {}
            }
        }
        holding
    }
}

/// Whether everything a recorder last used at `last` cached has expired at `now`.
fn expired(last: Instant, now: Instant) -> bool {
    now.saturating_duration_since(last) > RECORDER_CACHE_LIFETIME
}

#[cfg(test)]
mod tests {
    use super::*;

    fn recorders() -> Recorders {
        let config = kube::Config::new("http://127.0.0.1:9".parse().expect("url"));
        let client = kube::Client::try_from(config).expect("client");
        let reporter = Reporter {
            controller: "c".into(),
            instance: None,
        };
        Recorders::new(&client, &reporter)
    }

    #[tokio::test]
    async fn a_namespace_always_has_the_same_shard_and_namespaces_are_spread() {
        assert_eq!(
            Recorders::shard_of("tenant-1"),
            Recorders::shard_of("tenant-1")
        );
        let used: std::collections::HashSet<usize> = (0..1000)
            .map(|i| Recorders::shard_of(&format!("tenant-{i}")))
            .collect();
        assert_eq!(
            used.len(),
            Recorders::SHARDS,
            "every shard takes some namespaces"
        );
    }

    #[tokio::test]
    async fn a_quiet_shard_is_replaced_once_its_events_expired_and_a_busy_one_is_kept() {
        let recorders = recorders();
        let start = Instant::now();
        let _ = recorders.for_namespace("tenant-1", start);
        let _ = recorders.for_namespace("tenant-2", start + Duration::from_secs(300));
        let busy = Recorders::shard_of("tenant-2");
        assert_ne!(Recorders::shard_of("tenant-1"), busy, "two shards");
        assert_eq!(recorders.sweep(start + Duration::from_secs(60)), 2);
        // tenant-1's shard has been quiet past the lifetime; tenant-2's has not.
        assert_eq!(recorders.sweep(start + Duration::from_secs(6 * 60 + 31)), 1);
        let quiet = &recorders.shards[Recorders::shard_of("tenant-1")];
        assert!(
            quiet.read().expect("lock").last_publish.is_none(),
            "replaced"
        );
        assert_eq!(
            recorders.sweep(start + Duration::from_secs(300 + 6 * 60 + 31)),
            0
        );
    }
}
