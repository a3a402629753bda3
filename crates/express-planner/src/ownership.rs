//! Who may act on a tenant (DESIGN section 11, rings): pure, from the ring label, the owner the
//! ExpressCluster's status names and, when it comes to that, whether the owning ring's Lease is
//! held. The operator asks it first in every reconcile, because a requeue can fire after a move.
//!
//! The fence is the status, written under a resourceVersion precondition: an operator acts only
//! while the status names its ring and is not released; it lets go by writing `released` (never
//! while one of its steps is in flight, because its reconciles of one tenant never overlap); the
//! ring the label names adopts by writing itself as owner. Either write fails when the object
//! changed since it was read, so a label that flips back and forth resolves to one owner. A ring
//! whose Lease has no live holder cannot release, and is taken over instead.

use express_api::OperatorStatus;
use express_api::rings::DEFAULT_RING;

/// What a ring's operator does with a tenant.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Ownership {
    /// This ring owns the tenant: observe, plan, act, report.
    Act,
    /// The label names another ring: write `released`, then leave the tenant alone.
    Release { to: String },
    /// The label names this ring and nobody holds the tenant: write this ring as owner, then
    /// act. `catch_up` when another ring's operator may have acted last: the claim is written as
    /// `adopting`, and the operator acts only after [`Ownership::FinishAdoption`].
    Adopt {
        from: Option<String>,
        catch_up: bool,
    },
    /// This ring claimed the tenant from another: bring its pods into this ring's watch and
    /// wait until the caches show everything the last owner wrote, then write this ring as the
    /// owner (not adopting) and act.
    FinishAdoption,
    /// The label names this ring, another still owns the tenant: wait for it to release,
    /// or for its Lease to lapse (ask [`after_lease`]).
    OwnedBy { ring: String },
    /// The status names an owner this build cannot read: wait until that owner writes again.
    UnreadableOwner,
    /// Another ring's tenant: nothing to do.
    NotOurs,
}

/// Whether the ring that owns a tenant has a live leader.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum OwnerLease {
    /// Held and renewed: its operator may be acting, it will release.
    Live,
    /// Missing, unheld or lapsed: nobody acts for that ring.
    Vacant,
    /// It could not be read (forbidden, unreachable): assume live.
    Unknown,
}

/// What ring `me` does with a tenant whose ExpressCluster carries ring `label` and status owner
/// `owner` (None: nobody wrote one yet, which is the default ring's: the release before rings).
pub fn ownership(me: &str, label: &str, owner: Option<&OperatorStatus>) -> Ownership {
    let (owner_ring, released, adopting) = match owner {
        Some(status) => (
            status.ring.as_str(),
            status.released.is_some(),
            status.adopting,
        ),
        None => (DEFAULT_RING, false, false),
    };
    if owner_ring.is_empty() {
        return if label == me {
            Ownership::UnreadableOwner
        } else {
            Ownership::NotOurs
        };
    }
    match (label == me, owner_ring == me, released) {
        (true, true, false) if adopting => Ownership::FinishAdoption,
        (true, true, false) => Ownership::Act,
        // Our own release, taken back before anyone adopted: nobody acted since.
        (true, true, true) => Ownership::Adopt {
            from: None,
            catch_up: false,
        },
        (true, false, true) => Ownership::Adopt {
            from: Some(owner_ring.to_owned()),
            catch_up: true,
        },
        (true, false, false) => Ownership::OwnedBy {
            ring: owner_ring.to_owned(),
        },
        (false, true, false) => Ownership::Release {
            to: label.to_owned(),
        },
        (false, _, _) => Ownership::NotOurs,
    }
}

/// [`Ownership::OwnedBy`] once the owning ring's Lease is read: a ring with no live leader
/// cannot release, so the labelled ring takes the tenant over.
pub fn after_lease(owner_ring: &str, lease: OwnerLease) -> Ownership {
    match lease {
        OwnerLease::Vacant => Ownership::Adopt {
            from: Some(owner_ring.to_owned()),
            catch_up: true,
        },
        OwnerLease::Live | OwnerLease::Unknown => Ownership::OwnedBy {
            ring: owner_ring.to_owned(),
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;

    fn owned(ring: &str) -> OperatorStatus {
        OperatorStatus {
            ring: ring.into(),
            version: "1.0.0".into(),
            released: None,
            adopting: false,
        }
    }

    fn adopting(ring: &str) -> OperatorStatus {
        OperatorStatus {
            adopting: true,
            ..owned(ring)
        }
    }

    fn released(ring: &str) -> OperatorStatus {
        OperatorStatus {
            released: Some(Time(k8s_openapi::jiff::Timestamp::UNIX_EPOCH)),
            ..owned(ring)
        }
    }

    /// Every combination of label, owner and release, from both rings' side.
    #[test]
    fn the_ownership_table() {
        use Ownership::*;
        let adopt = |from: Option<&str>, catch_up| Adopt {
            from: from.map(Into::into),
            catch_up,
        };
        let rows: Vec<(&str, &str, Option<OperatorStatus>, Ownership)> = vec![
            // A tenant from before rings is the default ring's.
            ("default", "default", None, Act),
            ("canary", "default", None, NotOurs),
            (
                "default",
                "canary",
                None,
                Release {
                    to: "canary".into(),
                },
            ),
            (
                "canary",
                "canary",
                None,
                OwnedBy {
                    ring: "default".into(),
                },
            ),
            // Owned by the ring its label names.
            ("default", "default", Some(owned("default")), Act),
            ("canary", "default", Some(owned("default")), NotOurs),
            ("canary", "canary", Some(owned("canary")), Act),
            ("default", "canary", Some(owned("canary")), NotOurs),
            // The label moved: the owner releases, the new ring waits for it.
            (
                "default",
                "canary",
                Some(owned("default")),
                Release {
                    to: "canary".into(),
                },
            ),
            (
                "canary",
                "canary",
                Some(owned("default")),
                OwnedBy {
                    ring: "default".into(),
                },
            ),
            // Released: the labelled ring adopts, catching up when another ring acted last.
            (
                "canary",
                "canary",
                Some(released("default")),
                adopt(Some("default"), true),
            ),
            ("default", "canary", Some(released("default")), NotOurs),
            // Flipped back before anyone adopted.
            (
                "default",
                "default",
                Some(released("default")),
                adopt(None, false),
            ),
            ("canary", "default", Some(released("default")), NotOurs),
            // A third ring: neither acts, the owner releases.
            ("blue", "canary", Some(owned("default")), NotOurs),
            ("default", "blue", Some(released("canary")), NotOurs),
            // Claimed from another ring, its pods not yet in this ring's watch: finish first.
            ("canary", "canary", Some(adopting("canary")), FinishAdoption),
            ("default", "canary", Some(adopting("canary")), NotOurs),
            (
                "canary",
                "default",
                Some(adopting("canary")),
                Release {
                    to: "default".into(),
                },
            ),
            // An owner this build cannot read.
            ("default", "default", Some(owned("")), UnreadableOwner),
            ("canary", "default", Some(owned("")), NotOurs),
        ];
        for (me, label, owner, expected) in rows {
            assert_eq!(
                ownership(me, label, owner.as_ref()),
                expected,
                "ring {me}, label {label}, owner {owner:?}"
            );
        }
    }

    #[test]
    fn a_ring_without_a_live_leader_is_taken_over() {
        assert_eq!(
            after_lease("default", OwnerLease::Vacant),
            Ownership::Adopt {
                from: Some("default".into()),
                catch_up: true
            }
        );
        for lease in [OwnerLease::Live, OwnerLease::Unknown] {
            assert_eq!(
                after_lease("default", lease),
                Ownership::OwnedBy {
                    ring: "default".into()
                }
            );
        }
    }
}
