//! One ring's side of a release sample (DESIGN section 12): doctor's own checks run over the
//! tenants a ring's label names and that ring's operator alone, so that the release judge
//! compares two rings with the signals L2 reads, not with a copy of them.

use serde::Serialize;

use crate::checks::{KEEPING_UP, OPERATOR};
use crate::verdict::triage;
use crate::{ControlPlane, Fleet, Status, Symptom, Thresholds};

/// What doctor's checks say of one ring.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct RingHealth {
    pub ring: String,
    /// Tenants whose label names the ring.
    pub tenants: usize,
    /// Of those, the ones with a symptom no rollout explains (`namespace/cluster`).
    pub unhealthy: Vec<String>,
    /// Of those, the ones the ring's operator cannot read (some object fails to decode).
    pub unreadable: Vec<String>,
    /// The operator check's failure (no live leader, crash-looping pods...), if it fails.
    pub operator: Option<String>,
    /// The keeping-up check's failure (generations not observed, statuses not moving).
    pub behind: Option<String>,
}

impl RingHealth {
    /// The share of its tenants that are unhealthy, in percent (0 without tenants).
    pub fn unhealthy_percent(&self) -> f64 {
        if self.tenants == 0 {
            0.0
        } else {
            self.unhealthy.len() as f64 * 100.0 / self.tenants as f64
        }
    }

    /// Its operator layer fails: no leader, crash loops, or tenants left behind.
    pub fn operator_trouble(&self) -> Option<String> {
        match (&self.operator, &self.behind) {
            (Some(a), Some(b)) => Some(format!("{a}; {b}")),
            (Some(a), None) | (None, Some(a)) => Some(a.clone()),
            (None, None) => None,
        }
    }
}

/// Doctor's checks over `ring`'s tenants and operator alone.
pub fn ring_health(fleet: &Fleet, ring: &str, limits: &Thresholds) -> RingHealth {
    let of_ring = Fleet {
        now: fleet.now,
        rings: fleet
            .rings
            .iter()
            .filter(|r| r.name == ring)
            .cloned()
            .collect(),
        tenants: fleet
            .tenants
            .iter()
            .filter(|t| t.ring == ring)
            .cloned()
            .collect(),
        warnings: Vec::new(),
        unreadable: Vec::new(),
        releases: Vec::new(),
        // A ring is judged on its own tenants and operator, not on plans across DCs nor on the
        // control plane under every ring.
        fleet_releases: Vec::new(),
        control_plane: ControlPlane::NotAsked,
    };
    let report = triage(&of_ring, limits);
    let failing = |name: &str| {
        report
            .checks
            .iter()
            .find(|c| c.name == name && c.status == Status::Fail)
            .map(|c| c.summary.clone())
    };
    let unexplained = report
        .tenants
        .iter()
        .filter(|t| !t.symptoms.is_empty() && !t.explained_by_rollout);
    RingHealth {
        ring: ring.to_owned(),
        tenants: of_ring.tenants.len(),
        unhealthy: unexplained
            .clone()
            .map(|t| format!("{}/{}", t.namespace, t.cluster))
            .collect(),
        unreadable: unexplained
            .filter(|t| t.symptoms.contains(&Symptom::Unreadable))
            .map(|t| format!("{}/{}", t.namespace, t.cluster))
            .collect(),
        operator: failing(OPERATOR),
        behind: failing(KEEPING_UP),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{Lease, LeaseSeen, Ring, Tenant};
    use k8s_openapi::jiff::Timestamp;

    const NOW: i64 = 1_800_000_000;

    fn at(seconds_ago: i64) -> Timestamp {
        Timestamp::from_second(NOW - seconds_ago).unwrap_or_default()
    }

    fn ring(name: &str, renewed_ago: i64) -> Ring {
        Ring {
            name: name.into(),
            lease: LeaseSeen::Seen(Lease {
                namespace: "express-system".into(),
                name: express_api::rings::lease_name(name),
                holder: Some(format!("{name}-1")),
                renewed: Some(at(renewed_ago)),
                duration_seconds: Some(15),
                version: None,
                api_behind: None,
                cannot_read: None,
            }),
            deployment: None,
            pods: Vec::new(),
        }
    }

    fn tenant(namespace: &str, ring: &str, symptoms: Vec<Symptom>) -> Tenant {
        Tenant {
            namespace: namespace.into(),
            cluster: "shop".into(),
            ring: ring.into(),
            owner_ring: Some(ring.into()),
            generation: 1,
            observed_generation: Some(1),
            symptoms,
            ..Tenant::default()
        }
    }

    #[test]
    fn each_ring_sees_its_own_tenants_and_operator() {
        let fleet = Fleet {
            now: at(0),
            rings: vec![ring("default", 2), ring("canary", 60)],
            tenants: vec![
                tenant("a", "default", vec![]),
                tenant("b", "default", vec![Symptom::NodesNotReady]),
                tenant("c", "canary", vec![Symptom::Unreadable]),
            ],
            ..Fleet::default()
        };
        let limits = Thresholds::default();
        let default = ring_health(&fleet, "default", &limits);
        assert_eq!(default.tenants, 2);
        assert_eq!(default.unhealthy, vec!["b/shop".to_owned()]);
        assert!(default.unreadable.is_empty());
        assert_eq!(default.operator, None);
        assert!((default.unhealthy_percent() - 50.0).abs() < 1e-9);

        let canary = ring_health(&fleet, "canary", &limits);
        assert_eq!(canary.tenants, 1);
        assert_eq!(canary.unreadable, vec!["c/shop".to_owned()]);
        let operator = canary.operator.unwrap_or_default();
        assert!(operator.contains("ring canary"), "{operator}");
        assert!(operator.contains("expired"), "{operator}");
    }

    #[test]
    fn a_ring_without_its_lease_or_tenants_has_an_operator_failure() {
        let fleet = Fleet {
            now: at(0),
            rings: vec![Ring {
                name: "canary".into(),
                lease: LeaseSeen::Missing {
                    namespace: "express-system".into(),
                    name: "express-operator-canary".into(),
                },
                deployment: None,
                pods: Vec::new(),
            }],
            ..Fleet::default()
        };
        let health = ring_health(&fleet, "canary", &Thresholds::default());
        assert_eq!(health.tenants, 0);
        assert!(health.operator_trouble().is_some());
    }

    #[test]
    fn a_tenant_left_behind_is_the_rings_trouble() {
        let mut behind = tenant("a", "canary", vec![]);
        behind.generation = 2;
        behind.spec_changed = Some(at(600));
        let fleet = Fleet {
            now: at(0),
            rings: vec![ring("canary", 1)],
            tenants: vec![behind],
            ..Fleet::default()
        };
        let health = ring_health(&fleet, "canary", &Thresholds::default());
        assert!(health.behind.is_some(), "{health:?}");
    }
}
