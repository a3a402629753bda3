//! Operator rings as people see them (DESIGN section 11), pure: [`survey`] turns the
//! ExpressClusters and ring Leases read at an instant into a row per ring (its leader, the
//! operator versions its tenants report, how many it drives and how many roll out, the release
//! it takes part in) and the tenants no ring serves; the table and the lines on stderr.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use express_api::rings::{self, Leadership};
use express_api::{ClusterKey, ExpressCluster};
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::jiff::Timestamp;
use kube::ResourceExt as _;
use serde::Serialize;

use crate::show::text::{NONE, table};

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
    fn describe(&self) -> String {
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

/// The columns of a ring's line (a RELEASE column may follow: [`with_release_column`]).
pub const RING_HEADER: [&str; 5] = ["RING", "LEADER", "VERSION", "TENANTS", "ROLLING OUT"];

/// A line per ring of `survey`, under [`RING_HEADER`].
pub fn ring_rows(survey: &Survey) -> Vec<Vec<String>> {
    survey
        .rings
        .iter()
        .map(|r| {
            vec![
                r.ring.clone(),
                match (&r.leader, survey.leaders_known) {
                    (Some(holder), _) => holder.clone(),
                    (None, _) if r.driven_without_lease => "<no lease>".into(),
                    (None, true) => NONE.into(),
                    (None, false) => "<unknown>".into(),
                },
                if r.versions.is_empty() {
                    NONE.into()
                } else {
                    r.versions.join(",")
                },
                r.tenants.to_string(),
                r.rolling_out.to_string(),
            ]
        })
        .collect()
}

/// The table: one line per ring.
pub fn render(survey: &Survey) -> String {
    if survey.rings.is_empty() {
        return "No operator rings found (no ExpressClusters, no ring Leases).\n".into();
    }
    let rows = ring_rows(survey);
    let mut header = RING_HEADER.to_vec();
    let rows = with_release_column(&mut header, rows, survey.rings.iter().map(|r| &r.release));
    table(&header, &rows)
}

/// A RELEASE column at the end, only when some ring takes part in a release (the table is
/// otherwise what it was before releases).
pub fn with_release_column<'a>(
    header: &mut Vec<&'static str>,
    mut rows: Vec<Vec<String>>,
    releases: impl Iterator<Item = &'a Option<RingRelease>>,
) -> Vec<Vec<String>> {
    let releases: Vec<&Option<RingRelease>> = releases.collect();
    if releases.iter().all(|r| r.is_none()) {
        return rows;
    }
    header.push("RELEASE");
    for (row, release) in rows.iter_mut().zip(releases) {
        row.push(
            release
                .as_ref()
                .map_or_else(|| NONE.to_owned(), RingRelease::describe),
        );
    }
    rows
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

/// One line per ring whose tenants no live operator serves.
pub fn unserved_lines(survey: &Survey) -> Vec<String> {
    survey
        .rings
        .iter()
        .filter(|r| !r.tenants_without_leader.is_empty())
        .map(|r| {
            format!(
                "ring {} has no live operator: {}",
                r.ring,
                r.tenants_without_leader.join(", ")
            )
        })
        .collect()
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use express_api::ExpressCluster;
    use k8s_openapi::api::coordination::v1::Lease;
    use k8s_openapi::api::coordination::v1::LeaseSpec;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::MicroTime;
    use k8s_openapi::jiff::Timestamp;
    use serde_json::{Value, json};
    use std::sync::Arc;

    const NOW: i64 = 1_800_000_000;

    fn at(second: i64) -> Timestamp {
        Timestamp::from_second(second).unwrap()
    }

    /// Tenant `namespace/acme` labelled for `ring` (None: no label), with `status`.
    fn tenant(namespace: &str, ring: Option<&str>, status: Value) -> Arc<ExpressCluster> {
        let mut metadata = json!({"name": "acme", "namespace": namespace});
        if let Some(ring) = ring {
            metadata["labels"] = json!({"express.dev/operator-ring": ring});
        }
        Arc::new(
            serde_json::from_value(json!({
                "apiVersion": "express.dev/v1", "kind": "ExpressCluster",
                "metadata": metadata, "spec": {}, "status": status,
            }))
            .unwrap(),
        )
    }

    fn owned(ring: &str, version: &str, rollout: &str) -> Value {
        json!({"operator": {"ring": ring, "version": version}, "rollout": {"state": rollout}})
    }

    /// The Lease `name` held by `holder`, renewed `ago` seconds before now for 15 seconds.
    fn lease(name: &str, holder: &str, ago: i64) -> Lease {
        Lease {
            metadata: kube::core::ObjectMeta {
                name: Some(name.into()),
                namespace: Some("express-system".into()),
                ..Default::default()
            },
            spec: Some(LeaseSpec {
                holder_identity: Some(holder.into()),
                renew_time: Some(MicroTime(at(NOW - ago))),
                lease_duration_seconds: Some(15),
                ..LeaseSpec::default()
            }),
        }
    }

    /// Each ring as `RING LEADER VERSIONS TENANTS ROLLING WITHOUT` for a compact comparison.
    fn lines(survey: &Survey) -> Vec<String> {
        survey
            .rings
            .iter()
            .map(|r| {
                format!(
                    "{} {} {} {} {} [{}]",
                    r.ring,
                    r.leader.as_deref().unwrap_or("-"),
                    if r.versions.is_empty() {
                        "-".into()
                    } else {
                        r.versions.join(",")
                    },
                    r.tenants,
                    r.rolling_out,
                    r.tenants_without_leader.join(" ")
                )
            })
            .collect()
    }

    #[test]
    fn rings_by_table() {
        let live_default = lease("express-operator", "op-a", 1);
        let live_canary = lease("express-operator-canary", "op-c", 2);
        // What, tenants, Leases, the rings (as `lines` writes them), the unserved tenants.
        type Case = (
            &'static str,
            Vec<Arc<ExpressCluster>>,
            Vec<Lease>,
            Vec<&'static str>,
            Vec<&'static str>,
        );
        let cases: Vec<Case> = vec![
            ("no tenants, no Leases", vec![], vec![], vec![], vec![]),
            (
                "the default ring with a live Lease; unlabelled and empty labels are default",
                vec![
                    tenant("a", None, owned("default", "0.5.0", "Complete")),
                    tenant("b", Some(""), owned("default", "0.5.0", "Progressing")),
                ],
                vec![live_default.clone()],
                vec!["default op-a 0.5.0 2 1 []"],
                vec![],
            ),
            (
                "canary tenants with no Lease are unserved",
                vec![
                    tenant("a", None, owned("default", "0.5.0", "Complete")),
                    tenant("b", Some("canary"), json!({})),
                    tenant("c", Some("canary"), owned("canary", "0.6.0", "RollingBack")),
                ],
                vec![live_default.clone()],
                vec![
                    "default op-a 0.5.0 1 0 []",
                    "canary - 0.6.0 2 1 [b/acme c/acme]",
                ],
                vec!["b/acme", "c/acme"],
            ),
            (
                "a lapsed Lease leads nobody",
                vec![tenant("a", None, owned("default", "0.5.0", "Complete"))],
                vec![lease("express-operator", "op-a", 16)],
                vec!["default - 0.5.0 1 0 [a/acme]"],
                vec!["a/acme"],
            ),
            (
                "a ring's Lease without tenants still shows, other Leases do not",
                vec![],
                vec![live_canary.clone(), lease("something-else", "x", 1)],
                vec!["canary op-c - 0 0 []"],
                vec![],
            ),
            (
                "a released tenant counts in its label's ring; its version in nobody's",
                vec![
                    tenant(
                        "a",
                        Some("canary"),
                        json!({"operator": {"ring": "default", "version": "0.5.0",
                                            "released": "2026-11-22T06:00:00Z"}}),
                    ),
                    tenant("b", Some("canary"), owned("canary", "0.6.0", "Complete")),
                ],
                vec![live_default.clone(), live_canary.clone()],
                vec!["default op-a - 0 0 []", "canary op-c 0.6.0 2 0 []"],
                vec![],
            ),
            (
                "mid-move the version is the owner's, and several versions are joined",
                vec![
                    tenant(
                        "a",
                        Some("canary"),
                        owned("default", "0.5.0", "Progressing"),
                    ),
                    tenant("b", None, owned("default", "0.5.1", "Complete")),
                ],
                vec![live_default.clone(), live_canary.clone()],
                vec!["default op-a 0.5.0,0.5.1 1 0 []", "canary op-c - 1 1 []"],
                vec![],
            ),
            (
                "a ring still owning a tenant whose label moved shows, with no tenants of its own",
                vec![tenant("a", None, owned("blue", "0.4.0", "Complete"))],
                vec![live_default.clone()],
                vec!["default op-a - 1 0 []", "blue - 0.4.0 0 0 []"],
                vec![],
            ),
        ];
        for (name, clusters, leases, want, unserved) in cases {
            let survey = survey(&clusters, Some(&leases), at(NOW));
            assert_eq!(lines(&survey), want, "{name}");
            assert_eq!(survey.unserved, unserved, "{name}");
            assert!(survey.leaders_known, "{name}");
        }
    }

    #[test]
    fn unreadable_leases_know_no_leader_and_leave_nobody_unserved() {
        let clusters = vec![tenant("b", Some("canary"), json!({}))];
        let survey = survey(&clusters, None, at(NOW));
        assert_eq!(lines(&survey), ["canary - - 1 0 []"]);
        assert!(survey.unserved.is_empty() && !survey.leaders_known);
        assert!(unserved_lines(&survey).is_empty());
        assert!(render(&survey).contains("canary  <unknown>  <none>"));
    }

    #[test]
    fn the_table_the_json_and_the_lines_on_stderr() {
        let clusters = vec![
            tenant("a", None, owned("default", "0.5.0", "Complete")),
            tenant("b", Some("canary"), json!({})),
            tenant("c", Some("canary"), json!({})),
        ];
        let leases = [lease("express-operator", "op-a", 1)];
        let survey = survey(&clusters, Some(&leases), at(NOW));
        assert_eq!(
            render(&survey),
            "RING     LEADER  VERSION  TENANTS  ROLLING OUT\n\
             default  op-a    0.5.0    1        0\n\
             canary   <none>  <none>   2        0\n"
        );
        assert_eq!(
            unserved_lines(&survey),
            ["ring canary has no live operator: b/acme, c/acme"]
        );
        let json = serde_json::to_value(&survey).unwrap();
        assert_eq!(
            json,
            json!({
                "rings": [
                    {"ring": "default", "leader": "op-a", "leaseExpires": at(NOW + 14),
                     "versions": ["0.5.0"], "tenants": 1, "rollingOut": 0,
                     "tenantsWithoutLeader": []},
                    {"ring": "canary", "leader": null, "leaseExpires": null, "versions": [],
                     "tenants": 2, "rollingOut": 0,
                     "tenantsWithoutLeader": ["b/acme", "c/acme"]},
                ],
                "unserved": ["b/acme", "c/acme"],
                "leadersKnown": true,
            })
        );
        assert_eq!(
            render(&Survey {
                rings: vec![],
                unserved: vec![],
                leaders_known: true
            }),
            "No operator rings found (no ExpressClusters, no ring Leases).\n"
        );
    }

    #[test]
    fn a_ring_names_the_release_it_takes_part_in_until_it_is_over() {
        let release = |name: &str, phase: &str, created: i64| -> express_api::OperatorRelease {
            serde_json::from_value(json!({
                "apiVersion": "express.dev/v1alpha1", "kind": "OperatorRelease",
                "metadata": {"name": name, "namespace": "express-system",
                             "creationTimestamp": at(NOW - created).to_string()},
                "spec": {"fromRing": "default", "toRing": "canary",
                         "waves": [{"tenants": 1}, {"percent": 100}]},
                "status": {"phase": phase, "wave": 1}
            }))
            .unwrap_or_else(|e| panic!("{e}"))
        };
        let clusters = vec![
            tenant("a", None, owned("default", "0.5.0", "Complete")),
            tenant("b", Some("canary"), owned("canary", "0.6.0", "Complete")),
        ];
        let mut rings = survey(&clusters, Some(&[]), at(NOW));
        with_releases(
            &mut rings,
            &[
                release("old", "RolledBack", 3600),
                release("to-0-6-0", "Progressing", 60),
            ],
        );
        let described: Vec<Option<String>> = rings
            .rings
            .iter()
            .map(|r| r.release.as_ref().map(RingRelease::describe))
            .collect();
        assert_eq!(
            described,
            [
                Some("to-0-6-0 (from, Progressing, wave 2/2)".to_owned()),
                Some("to-0-6-0 (to, Progressing, wave 2/2)".to_owned()),
            ]
        );
        let text = render(&rings);
        assert!(
            text.lines().next().unwrap_or("").ends_with("RELEASE"),
            "{text}"
        );
        // Without a release under way the table is what it was.
        let mut quiet = survey(&clusters, Some(&[]), at(NOW));
        with_releases(&mut quiet, &[release("old", "Succeeded", 60)]);
        assert!(!render(&quiet).contains("RELEASE"));
    }
}
