//! The benchmark's own watches on the fleet (clusters and pods, with when each change was seen),
//! and waiting on what they saw.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use express_api::{ClusterPhase, ExpressCluster};
use futures::StreamExt;
use k8s_openapi::api::core::v1::Pod;
use kube::api::Api;
use kube::runtime::{WatchStreamExt, watcher};

/// What the benchmark's watches saw, with the instant it saw it.
#[derive(Default)]
pub struct Seen {
    /// Per namespace: generation, observed generation, phase Healthy, nodes up to date.
    pub clusters: HashMap<String, (i64, i64, bool, u32)>,
    /// Pods by uid: (namespace, node name, Ready since, deletion seen at).
    pub pods: HashMap<String, PodSeen>,
}

#[derive(Clone, Debug)]
pub struct PodSeen {
    pub namespace: String,
    pub name: String,
    /// When the watch first saw the pod: its creation, to the watch's delay.
    pub first_seen_at: Instant,
    pub ready_at: Option<Instant>,
    pub deleting_at: Option<Instant>,
}

impl Seen {
    pub fn done(&self, tenants: usize, nodes: u32, generation: i64) -> usize {
        self.clusters
            .values()
            .filter(|(g, observed, healthy, up_to_date)| {
                *g >= generation && observed == g && *healthy && *up_to_date == nodes
            })
            .count()
            .min(tenants)
    }
}

pub fn watch_fleet(client: &kube::Client, seen: Arc<Mutex<Seen>>) {
    // With a backoff: at the end kubesim goes first, and a watch retrying at once never yields,
    // which kept the runtime from shutting down.
    let clusters = watcher(
        Api::<ExpressCluster>::all(client.clone()),
        watcher::Config::default(),
    )
    .default_backoff();
    let seen_clusters = seen.clone();
    tokio::spawn(async move {
        let mut events = std::pin::pin!(clusters);
        while let Some(event) = events.next().await {
            let Ok(watcher::Event::Apply(c) | watcher::Event::InitApply(c)) = event else {
                continue;
            };
            let status = c.status.as_ref();
            let entry = (
                c.metadata.generation.unwrap_or(0),
                status.and_then(|s| s.observed_generation).unwrap_or(0),
                status.and_then(|s| s.phase) == Some(ClusterPhase::Healthy),
                status
                    .and_then(|s| s.nodes.as_ref())
                    .map_or(0, |n| n.up_to_date),
            );
            let ns = c.metadata.namespace.clone().unwrap_or_default();
            seen_clusters.lock().unwrap().clusters.insert(ns, entry);
        }
    });
    let pods = watcher(
        Api::<Pod>::all(client.clone()),
        watcher::Config::default().labels(express_api::keys::LABEL_CLUSTER),
    )
    .default_backoff();
    tokio::spawn(async move {
        let mut events = std::pin::pin!(pods);
        while let Some(event) = events.next().await {
            let Ok(watcher::Event::Apply(p) | watcher::Event::InitApply(p)) = event else {
                continue;
            };
            let now = Instant::now();
            let ready = p
                .status
                .as_ref()
                .and_then(|s| s.conditions.as_ref())
                .is_some_and(|cs| cs.iter().any(|c| c.type_ == "Ready" && c.status == "True"));
            let uid = p.metadata.uid.clone().unwrap_or_default();
            let mut seen = seen.lock().unwrap();
            let entry = seen.pods.entry(uid).or_insert_with(|| PodSeen {
                namespace: p.metadata.namespace.clone().unwrap_or_default(),
                name: p.metadata.name.clone().unwrap_or_default(),
                first_seen_at: now,
                ready_at: None,
                deleting_at: None,
            });
            if ready && entry.ready_at.is_none() {
                entry.ready_at = Some(now);
            }
            if p.metadata.deletion_timestamp.is_some() && entry.deleting_at.is_none() {
                entry.deleting_at = Some(now);
            }
        }
    });
}

pub async fn until(what: &str, timeout: Duration, mut done: impl FnMut() -> bool) {
    let deadline = Instant::now() + timeout;
    while !done() {
        assert!(Instant::now() < deadline, "timed out: {what}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}
