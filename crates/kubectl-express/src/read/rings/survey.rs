//! Operator rings surveyed, pure (DESIGN section 11): [`survey`] turns the ExpressClusters and
//! ring Leases read at an instant into a row per ring (its leader, the operator versions its
//! tenants report, how many it drives and how many roll out, the release it takes part in) and
//! the tenants no ring serves. `show::rings` draws it.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use express_api::rings::{self, Leadership};
use express_api::{ClusterKey, ExpressCluster};
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::jiff::Timestamp;
use kube::ResourceExt as _;
use serde::Serialize;

/// One ring, as `-o json` prints it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct RingRow {
    pub ring: String,
    /// The Lease's holder while it is live; None when vacant, or when Leases are unreadable.
    pub leader: Option<String>,
    /// When the leader's hold lapses unless it renews.
    pub lease_expires: Option<Timestamp>,
    /// The versions this ring's operators wrote in `status.operator` of the tenants they own.
    pub versions: Vec<String>,
    /// Tenants whose label names this ring.
    pub tenants: usize,
    /// Of those, the ones whose rollout is under way.
    pub rolling_out: usize,
    /// Of those, `namespace/cluster` of each while the ring has no live leader.
    pub tenants_without_leader: Vec<String>,
    /// The ring has no Lease, yet an operator of the ring observed every one of its tenants'
    /// generations: it runs without leader election (a warning, not a ring nobody serves).
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub driven_without_lease: bool,
    /// The OperatorRelease the ring takes part in, while one is not over.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub release: Option<RingRelease>,
}

/// A release a ring takes part in (DESIGN section 12).
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct RingRelease {
    pub name: String,
    /// `from` (the trusted ring, which judges) or `to` (the build under test).
    pub role: &'static str,
    pub phase: String,
    /// The wave being moved or baked, from 1, of how many.
    pub wave: u32,
    pub waves: usize,
}

impl RingRelease {
    /// "to-0-2-0 (to, Progressing, wave 2/4)".
    pub fn describe(&self) -> String {
        format!(
            "{} ({}, {}, wave {}/{})",
            self.name, self.role, self.phase, self.wave, self.waves
        )
    }
}

/// Names, on each ring, the newest release not over that moves tenants from or to it; adds a
/// row for a ring only a release names.
pub fn with_releases(survey: &mut Survey, releases: &[express_api::OperatorRelease]) {
    let mut live: Vec<&express_api::OperatorRelease> = releases
        .iter()
        .filter(|r| !r.status.as_ref().is_some_and(|s| s.phase().is_final()))
        .collect();
    live.sort_by_key(|r| std::cmp::Reverse(r.creation_timestamp().map(|t| t.0)));
    for release in live {
        let status = release.status.clone().unwrap_or_default();
        for (ring, role) in [
            (&release.spec.from_ring, "from"),
            (&release.spec.to_ring, "to"),
        ] {
            let Some(row) = survey.rings.iter_mut().find(|r| &r.ring == ring) else {
                continue;
            };
            row.release.get_or_insert_with(|| RingRelease {
                name: release.name_any(),
                role,
                phase: status.phase().to_string(),
                wave: status.wave + 1,
                waves: release.spec.waves.len(),
            });
        }
    }
}

/// What `rings` reports.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Survey {
    pub rings: Vec<RingRow>,
    /// Every tenant whose ring has no live leader, `namespace/cluster`, sorted.
    pub unserved: Vec<String>,
    /// False when the Leases could not be read: then no leader is known and nothing counts as
    /// unserved, rather than every tenant.
    pub leaders_known: bool,
}

#[derive(Default)]
struct Tally {
    versions: BTreeSet<String>,
    tenants: usize,
    rolling_out: usize,
    /// `namespace/cluster` of each tenant labelled for the ring.
    members: Vec<String>,
    /// Tenants labelled for the ring whose owner is not the ring, or whose generation it has
    /// not observed.
    unobserved: usize,
}

/// The rings seen in `clusters` and `leases` at `now`; `leases` None when they could not be
/// read. Leases that are not a ring's are ignored, so the caller may pass every Lease of the
/// operator namespace.
pub fn survey(
    clusters: &[Arc<ExpressCluster>],
    leases: Option<&[Lease]>,
    now: Timestamp,
) -> Survey {
    // The first ExpressCluster claiming a cluster governs it, as the operator reads it.
    let mut tenants: BTreeMap<ClusterKey, &ExpressCluster> = BTreeMap::new();
    for cluster in clusters {
        if let (Some(namespace), Some(name)) = (
            cluster.metadata.namespace.as_deref(),
            cluster.cluster_name(),
        ) {
            tenants
                .entry(ClusterKey::new(namespace, name))
                .or_insert(cluster);
        }
    }

    let mut tallies: BTreeMap<String, Tally> = BTreeMap::new();
    let leases_by_ring: BTreeMap<&str, &Lease> = leases
        .unwrap_or_default()
        .iter()
        .filter_map(|lease| {
            Some((
                rings::ring_of_lease(lease.metadata.name.as_deref()?)?,
                lease,
            ))
        })
        .collect();
    for ring in leases_by_ring.keys() {
        tallies.entry((*ring).to_owned()).or_default();
    }
    for (key, cluster) in &tenants {
        let status = cluster.status.as_ref();
        let tally = tallies
            .entry(rings::ring_of(cluster.labels()).to_owned())
            .or_default();
        tally.tenants += 1;
        if status
            .and_then(|s| s.rollout.as_ref())
            .and_then(|r| r.state)
            .is_some_and(|s| s.is_active())
        {
            tally.rolling_out += 1;
        }
        tally
            .members
            .push(format!("{}/{}", key.namespace, key.cluster));
        let observed_by_ring = status.is_some_and(|s| {
            s.observed_generation == cluster.metadata.generation
                && s.operator
                    .as_ref()
                    .is_some_and(|o| o.ring == rings::ring_of(cluster.labels()))
        });
        if !observed_by_ring {
            tally.unobserved += 1;
        }
        // The version belongs to the ring that still owns the tenant, wherever its label points:
        // mid-move that is the ring it is leaving.
        if let Some(owner) = status
            .and_then(|s| s.operator.as_ref())
            .filter(|o| o.released.is_none() && !o.ring.is_empty())
        {
            let tally = tallies.entry(owner.ring.clone()).or_default();
            if !owner.version.is_empty() {
                tally.versions.insert(owner.version.clone());
            }
        }
    }

    let mut rows: Vec<RingRow> = tallies
        .into_iter()
        .map(|(ring, tally)| {
            let leadership =
                leases.map(|_| rings::leadership(leases_by_ring.get(ring.as_str()).copied(), now));
            // Unknown leadership names nobody: only a Lease read as vacant leaves tenants
            // without a leader.
            let lease_missing = leases.is_some() && !leases_by_ring.contains_key(ring.as_str());
            let driven_without_lease = lease_missing && tally.tenants > 0 && tally.unobserved == 0;
            let vacant = matches!(leadership, Some(Leadership::Vacant)) && !driven_without_lease;
            let (leader, lease_expires) = match leadership {
                Some(Leadership::Live { holder, expires }) => (Some(holder), Some(expires)),
                Some(Leadership::Vacant) | None => (None, None),
            };
            RingRow {
                ring,
                leader,
                lease_expires,
                versions: tally.versions.into_iter().collect(),
                tenants: tally.tenants,
                rolling_out: tally.rolling_out,
                tenants_without_leader: if vacant { tally.members } else { Vec::new() },
                driven_without_lease,
                release: None,
            }
        })
        .collect();
    // The default ring first: it drives every tenant nobody labelled.
    rows.sort_by(|a, b| {
        (a.ring != rings::DEFAULT_RING, &a.ring).cmp(&(b.ring != rings::DEFAULT_RING, &b.ring))
    });
    let mut unserved: Vec<String> = rows
        .iter()
        .flat_map(|r| r.tenants_without_leader.iter().cloned())
        .collect();
    unserved.sort();
    Survey {
        rings: rows,
        unserved,
        leaders_known: leases.is_some(),
    }
}

/// One warning per ring an operator drives without leader election.
pub fn without_lease_lines(survey: &Survey) -> Vec<String> {
    survey
        .rings
        .iter()
        .filter(|r| r.driven_without_lease)
        .map(|r| {
            format!(
                "warning: ring {} has no Lease, yet its operator observed all {} of its tenants: it runs without leader election (run it with --leader-elect, as the chart does)",
                r.ring, r.tenants
            )
        })
        .collect()
}
