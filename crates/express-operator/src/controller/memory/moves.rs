//! Read your own moves: the tenants a release moved, laid over what the caches hold until they
//! show the move. A release's census counts the hand-overs in flight from the tenants it sees;
//! counted from a cache that lags the operator's own label writes, a step would start more
//! hand-overs than `maxHandOvers` allows.

use std::collections::HashMap;
use std::sync::Mutex;

use express_api::ExpressCluster;
use express_api::rings::DEFAULT_RING;
use express_planner::release::{Move, ReleaseTenant};
use k8s_openapi::jiff::Timestamp;
use kube::ResourceExt;

/// A move the API accepted: the tenant's resourceVersion after it, and what it set.
struct Moved {
    version: u64,
    label: Option<String>,
    release: String,
    at: Timestamp,
}

/// Tenants moved, by namespace and name, until the caches have caught up with the move.
#[derive(Default)]
pub struct MovesMade(Mutex<HashMap<(String, String), Moved>>);

fn version_of(cluster: &ExpressCluster) -> Option<u64> {
    cluster.resource_version()?.parse().ok()
}

impl MovesMade {
    /// Moves kept (for the memory metrics).
    pub fn len(&self) -> usize {
        self.0.lock().map(|m| m.len()).unwrap_or(0)
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Records a move, from the object the API answered the move's patch with.
    pub(crate) fn remember(
        &self,
        answered: &ExpressCluster,
        release: &str,
        m: &Move,
        at: Timestamp,
    ) {
        let Some(version) = version_of(answered) else {
            return;
        };
        if let Ok(mut moves) = self.0.lock() {
            moves.insert(
                (m.namespace.clone(), m.name.clone()),
                Moved {
                    version,
                    label: (m.to_ring != DEFAULT_RING).then(|| m.to_ring.clone()),
                    release: release.to_owned(),
                    at,
                },
            );
        }
    }

    /// Lays the moves the caches have not shown yet over `tenants` (as the cache has them in
    /// `clusters`, in the same order), and forgets those they have.
    pub(crate) fn overlay(
        &self,
        clusters: &[std::sync::Arc<ExpressCluster>],
        tenants: &mut [ReleaseTenant],
    ) {
        let Ok(mut moves) = self.0.lock() else {
            return;
        };
        if moves.is_empty() {
            return;
        }
        let mut seen = std::collections::HashSet::new();
        for (cluster, tenant) in clusters.iter().zip(tenants.iter_mut()) {
            let key = (tenant.namespace.clone(), tenant.name.clone());
            let Some(moved) = moves.get(&key) else {
                continue;
            };
            seen.insert(key.clone());
            // A version that is not a number is taken as fresh (nothing to lay over).
            let cached = version_of(cluster).unwrap_or(u64::MAX);
            if cached >= moved.version {
                moves.remove(&key);
                continue;
            }
            tenant.label = moved.label.clone();
            tenant.released_by = Some(moved.release.clone());
            tenant.moved_at = Some(moved.at);
            // Not adopted: the ring it went to has not said so yet, as far as anyone here knows.
            tenant.driven_by = None;
        }
        // A tenant gone from the caches needs no overlay.
        moves.retain(|key, _| seen.contains(key));
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use std::sync::Arc;

    use express_planner::release::Direction;

    use super::*;

    fn cluster(name: &str, version: &str, label: Option<&str>) -> Arc<ExpressCluster> {
        let mut labels = serde_json::Map::new();
        if let Some(label) = label {
            labels.insert("express.dev/operator-ring".into(), label.into());
        }
        Arc::new(
            serde_json::from_value(serde_json::json!({
                "apiVersion": "express.dev/v1alpha1", "kind": "ExpressCluster",
                "metadata": {"name": name, "namespace": "team", "resourceVersion": version, "labels": labels},
                "spec": {}
            }))
            .unwrap(),
        )
    }

    fn tenant(name: &str) -> ReleaseTenant {
        ReleaseTenant {
            namespace: "team".into(),
            name: name.into(),
            driven_by: Some("default".into()),
            ..ReleaseTenant::default()
        }
    }

    #[test]
    fn a_move_counts_until_the_cache_shows_it() {
        let moves = MovesMade::default();
        let forward = Move {
            namespace: "team".into(),
            name: "a".into(),
            to_ring: "canary".into(),
            direction: Direction::Forward,
        };
        let at: Timestamp = "2026-11-26T10:00:00Z".parse().unwrap();
        moves.remember(
            &cluster("a", "12", Some("canary")),
            "to-canary",
            &forward,
            at,
        );
        // The cache is older than the move: the tenant is seen moved, and not adopted.
        let mut tenants = vec![tenant("a"), tenant("b")];
        moves.overlay(
            &[cluster("a", "10", None), cluster("b", "11", None)],
            &mut tenants,
        );
        assert_eq!(tenants[0].label.as_deref(), Some("canary"));
        assert_eq!(tenants[0].released_by.as_deref(), Some("to-canary"));
        assert_eq!(tenants[0].driven_by, None);
        assert_eq!(tenants[1], tenant("b"), "untouched");
        assert_eq!(moves.len(), 1);
        // The cache caught up: nothing laid over, nothing kept.
        let mut tenants = vec![tenant("a")];
        moves.overlay(&[cluster("a", "12", Some("canary"))], &mut tenants);
        assert_eq!(tenants[0], tenant("a"));
        assert!(moves.is_empty());
    }
}
