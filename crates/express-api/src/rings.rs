//! Operator rings (DESIGN section 11): which operator drives a tenant. A tenant's ring is the
//! label `express.dev/operator-ring` on its ExpressCluster (absent: [`DEFAULT_RING`]); each
//! ring has its own leader-elected operator and Lease. What the operator and the CLI both need
//! to agree on lives here: the ring of a tenant, the Lease of a ring, whether a Lease has a live
//! holder, and what a ring name may be.

use std::collections::BTreeMap;

use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::jiff::{SignedDuration, Timestamp};

use crate::keys::{LABEL_CLUSTER, LABEL_OPERATOR_RING, LEASE_NAME};

/// The ring of tenants without the label, and of operators started without `--ring`.
pub const DEFAULT_RING: &str = "default";

/// The longest ring name: its Lease, `express-operator-NAME`, must stay a valid label value
/// (63 characters) wherever it is copied.
pub const RING_NAME_MAX: usize = 63 - LEASE_NAME.len() - 1;

/// The ring a tenant belongs to, from its ExpressCluster's labels.
pub fn ring_of(labels: &BTreeMap<String, String>) -> &str {
    labels
        .get(LABEL_OPERATOR_RING)
        .map(String::as_str)
        .filter(|ring| !ring.is_empty())
        .unwrap_or(DEFAULT_RING)
}

/// The Lease a ring's operators contend for: `express-operator` for the default ring, so that
/// an upgrade from a release without rings keeps its Lease, `express-operator-NAME` otherwise.
pub fn lease_name(ring: &str) -> String {
    if ring == DEFAULT_RING {
        LEASE_NAME.to_owned()
    } else {
        format!("{LEASE_NAME}-{ring}")
    }
}

/// The ring a Lease belongs to, if it is one of the operator's Leases.
pub fn ring_of_lease(name: &str) -> Option<&str> {
    if name == LEASE_NAME {
        return Some(DEFAULT_RING);
    }
    name.strip_prefix(LEASE_NAME)
        .and_then(|rest| rest.strip_prefix('-'))
        .filter(|ring| ring_name_problem(ring).is_none())
}

/// The label selector of the pods a ring's operator caches: the Express pods stamped with its
/// ring, or, for the default ring, the ones stamped with none (every pod from before rings).
/// A tenant's pods are restamped when another ring adopts it.
pub fn pod_selector(ring: &str) -> String {
    if ring == DEFAULT_RING {
        format!("{LABEL_CLUSTER},!{LABEL_OPERATOR_RING}")
    } else {
        format!("{LABEL_CLUSTER},{LABEL_OPERATOR_RING}={ring}")
    }
}

/// The ring label a pod of `ring` carries: the ring's name, or none for the default ring.
pub fn pod_label(ring: &str) -> Option<&str> {
    (ring != DEFAULT_RING).then_some(ring)
}

/// Stamps a pod's labels with its ring (see [`pod_selector`]).
pub fn stamp(labels: &mut BTreeMap<String, String>, ring: &str) {
    match pod_label(ring) {
        Some(ring) => {
            labels.insert(LABEL_OPERATOR_RING.to_owned(), ring.to_owned());
        }
        None => {
            labels.remove(LABEL_OPERATOR_RING);
        }
    }
}

/// Why `ring` cannot name a ring: it must be a lowercase DNS label short enough for its Lease.
pub fn ring_name_problem(ring: &str) -> Option<String> {
    if ring.is_empty() {
        return Some("must not be empty".into());
    }
    if ring.len() > RING_NAME_MAX {
        return Some(format!(
            "must be no more than {RING_NAME_MAX} characters (it has {}), so that its Lease \
             name stays valid",
            ring.len()
        ));
    }
    let chars_ok = ring
        .chars()
        .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-');
    (!chars_ok || ring.starts_with('-') || ring.ends_with('-')).then(|| {
        "must consist of lower case alphanumeric characters or '-', and must start and end with \
         an alphanumeric character (a DNS label)"
            .to_owned()
    })
}

/// Whether a ring's Lease has a holder that may still be acting.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Leadership {
    /// Held and renewed recently: the holder may act until `expires`.
    Live { holder: String, expires: Timestamp },
    /// No Lease, no holder, or not renewed within its duration: nobody acts for the ring.
    Vacant,
}

/// The leadership a Lease shows at `now`, read the way a contender reads it: a holder counts
/// until its last renewal plus the Lease's duration has passed.
pub fn leadership(lease: Option<&Lease>, now: Timestamp) -> Leadership {
    let Some(spec) = lease.and_then(|l| l.spec.as_ref()) else {
        return Leadership::Vacant;
    };
    let Some(holder) = spec.holder_identity.clone().filter(|h| !h.is_empty()) else {
        return Leadership::Vacant;
    };
    let Some(renewed) = spec
        .renew_time
        .as_ref()
        .or(spec.acquire_time.as_ref())
        .map(|t| t.0)
    else {
        return Leadership::Vacant;
    };
    let duration = SignedDuration::from_secs(i64::from(spec.lease_duration_seconds.unwrap_or(0)));
    let expires = renewed.checked_add(duration).unwrap_or(renewed);
    if expires > now {
        Leadership::Live { holder, expires }
    } else {
        Leadership::Vacant
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use k8s_openapi::api::coordination::v1::LeaseSpec;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::MicroTime;

    fn lease(holder: Option<&str>, renewed: Option<i64>, seconds: i32) -> Lease {
        Lease {
            spec: Some(LeaseSpec {
                holder_identity: holder.map(Into::into),
                renew_time: renewed.map(|s| MicroTime(Timestamp::from_second(s).unwrap())),
                lease_duration_seconds: Some(seconds),
                ..LeaseSpec::default()
            }),
            ..Lease::default()
        }
    }

    fn at(second: i64) -> Timestamp {
        Timestamp::from_second(second).unwrap()
    }

    #[test]
    fn the_ring_is_the_label_or_default() {
        let mut labels = BTreeMap::new();
        assert_eq!(ring_of(&labels), DEFAULT_RING);
        labels.insert(LABEL_OPERATOR_RING.into(), String::new());
        assert_eq!(ring_of(&labels), DEFAULT_RING);
        labels.insert(LABEL_OPERATOR_RING.into(), "canary".into());
        assert_eq!(ring_of(&labels), "canary");
    }

    #[test]
    fn the_default_ring_keeps_the_lease_of_a_release_without_rings() {
        assert_eq!(lease_name(DEFAULT_RING), "express-operator");
        assert_eq!(lease_name("canary"), "express-operator-canary");
        assert_eq!(ring_of_lease("express-operator"), Some(DEFAULT_RING));
        assert_eq!(ring_of_lease("express-operator-canary"), Some("canary"));
        assert_eq!(ring_of_lease("express-operatorx"), None);
        assert_eq!(ring_of_lease("other"), None);
        assert_eq!(ring_of_lease("express-operator-"), None);
    }

    #[test]
    fn a_ring_caches_the_pods_stamped_with_it_and_default_the_unstamped() {
        assert_eq!(
            pod_selector(DEFAULT_RING),
            "express.dev/cluster,!express.dev/operator-ring"
        );
        assert_eq!(
            pod_selector("canary"),
            "express.dev/cluster,express.dev/operator-ring=canary"
        );
        let mut labels = BTreeMap::from([(LABEL_OPERATOR_RING.to_owned(), "x".to_owned())]);
        stamp(&mut labels, "canary");
        assert_eq!(ring_of(&labels), "canary");
        stamp(&mut labels, DEFAULT_RING);
        assert!(labels.is_empty());
    }

    #[test]
    fn ring_names_are_dns_labels_that_leave_room_for_the_lease() {
        assert_eq!(ring_name_problem("canary"), None);
        assert_eq!(ring_name_problem("ring-2"), None);
        for bad in ["", "Canary", "-a", "a-", "a_b", "a.b"] {
            assert!(ring_name_problem(bad).is_some(), "{bad:?}");
        }
        let longest = "a".repeat(RING_NAME_MAX);
        assert_eq!(ring_name_problem(&longest), None);
        assert_eq!(lease_name(&longest).len(), 63);
        assert!(ring_name_problem(&format!("{longest}a")).is_some());
    }

    #[test]
    fn a_lease_is_live_until_its_renewal_plus_its_duration() {
        assert_eq!(leadership(None, at(100)), Leadership::Vacant);
        let held = lease(Some("op-1"), Some(100), 15);
        assert_eq!(
            leadership(Some(&held), at(114)),
            Leadership::Live {
                holder: "op-1".into(),
                expires: at(115)
            }
        );
        assert_eq!(leadership(Some(&held), at(115)), Leadership::Vacant);
        assert_eq!(
            leadership(Some(&lease(None, Some(100), 15)), at(101)),
            Leadership::Vacant
        );
        assert_eq!(
            leadership(Some(&lease(Some(""), Some(100), 15)), at(101)),
            Leadership::Vacant
        );
        assert_eq!(
            leadership(Some(&lease(Some("op-1"), None, 15)), at(101)),
            Leadership::Vacant
        );
    }
}
