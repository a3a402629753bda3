//! Operator rings as people see them (DESIGN section 11), pure: the table of a
//! [`Survey`] (a row per ring, a RELEASE column while a ring takes part in a release) and the
//! lines on stderr for the tenants no ring serves.

use crate::read::rings::survey::{RingRelease, Survey};
use crate::text::{NONE, table};

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
    use crate::read::rings::survey::{survey, with_releases};
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
