//! When the webhook's certificate authority is made, rotated and retired, and which authority
//! signs a replica's serving certificate: pure decisions over what is kept and the time.
//!
//! Never a gap: a new authority joins the CRDs' `caBundle` beside the old one; serving
//! certificates move to it only once every CRD has held it for `propagation` (the API servers
//! read a CRD's `caBundle` from their watch, within seconds); the old one leaves the bundle only
//! after every replica had `switch_grace` to move.

use super::authority::Validity;

const DAY: i64 = 24 * 60 * 60;

/// The lifetimes and margins (seconds).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Policy {
    pub authority_lifetime: i64,
    /// A new authority is made when the current one has less than this left.
    pub authority_renew_before: i64,
    pub serving_lifetime: i64,
    /// A serving certificate is issued again when it has less than this left.
    pub serving_renew_before: i64,
    /// How long every CRD holds a new authority before serving certificates move to it.
    pub propagation: i64,
    /// How long after that the old authority stays in the bundle.
    pub switch_grace: i64,
    /// A serving certificate starts this far in the past, for clocks a little behind.
    pub clock_skew: i64,
}

impl Default for Policy {
    fn default() -> Self {
        Policy {
            authority_lifetime: 365 * DAY,
            authority_renew_before: 90 * DAY,
            serving_lifetime: 30 * DAY,
            serving_renew_before: 10 * DAY,
            propagation: 5 * 60,
            switch_grace: 10 * 60,
            clock_skew: 5 * 60,
        }
    }
}

impl Policy {
    /// Lifetimes of minutes, for a test of rotation on a live API server: an authority is
    /// replaced 40 s after it is made, serving certificates are issued again every minute, and
    /// the margins are the seconds an API server needs to read a CRD's `caBundle`.
    pub fn minutes() -> Policy {
        Policy {
            authority_lifetime: 180,
            authority_renew_before: 140,
            serving_lifetime: 120,
            serving_renew_before: 60,
            propagation: 10,
            switch_grace: 15,
            clock_skew: 300,
        }
    }

    /// How often a replica looks after its certificates: often enough to follow a propagation
    /// of this policy four times over, and at least every `at_least`.
    pub fn look_every(&self, at_least: std::time::Duration) -> std::time::Duration {
        let quarter = u64::try_from(self.propagation / 4).unwrap_or(0).max(1);
        at_least.min(std::time::Duration::from_secs(quarter))
    }
}

/// What the operator keeps of its authorities: the current one, the one it replaced while the
/// overlap lasts, and since when every CRD's `caBundle` holds the current one.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Kept {
    pub current: Validity,
    pub previous: Option<Validity>,
    pub current_in_bundle_since: Option<i64>,
}

/// The next thing to do to the kept authorities.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Upkeep {
    /// None is kept, or the current one has expired: make one (the bundle is then it alone).
    Create,
    /// Some CRD's `caBundle` is not the kept authorities' bundle: write it.
    WriteBundle,
    /// Every CRD holds the current authority: note since when.
    MarkInBundle,
    /// The current authority nears its end: make a new one, keeping this one as previous.
    Rotate,
    /// Every replica had time to move to the current authority: drop the previous one.
    RetirePrevious,
    Nothing,
}

/// What to do next, given what is kept, whether every CRD's `caBundle` is the kept one, and
/// the time.
pub fn upkeep(kept: Option<&Kept>, crds_hold_bundle: bool, now: i64, policy: &Policy) -> Upkeep {
    let Some(kept) = kept else {
        return Upkeep::Create;
    };
    if kept.current.not_after <= now {
        return Upkeep::Create;
    }
    if !crds_hold_bundle {
        return Upkeep::WriteBundle;
    }
    let Some(since) = kept.current_in_bundle_since else {
        return Upkeep::MarkInBundle;
    };
    if let Some(previous) = kept.previous {
        let switched = since + policy.propagation + policy.switch_grace;
        return if now >= switched || previous.not_after <= now {
            Upkeep::RetirePrevious
        } else {
            Upkeep::Nothing
        };
    }
    if kept.current.not_after - now <= policy.authority_renew_before {
        return Upkeep::Rotate;
    }
    Upkeep::Nothing
}

/// Which kept authority signs serving certificates now.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Signer {
    Current,
    Previous,
}

/// The previous authority until every CRD has held the current one for `propagation` (and while
/// the previous one is still valid); the current one otherwise.
pub fn signer(kept: &Kept, now: i64, policy: &Policy) -> Signer {
    let propagated = kept
        .current_in_bundle_since
        .is_some_and(|since| now >= since + policy.propagation);
    match kept.previous {
        Some(previous) if !propagated && previous.not_after > now => Signer::Previous,
        _ => Signer::Current,
    }
}

/// The validity a new authority gets.
pub fn authority_validity(now: i64, policy: &Policy) -> Validity {
    Validity {
        not_before: now - policy.clock_skew,
        not_after: now + policy.authority_lifetime,
    }
}

/// The validity a new serving certificate gets: never past its authority's end.
pub fn serving_validity(authority: Validity, now: i64, policy: &Policy) -> Validity {
    Validity {
        not_before: (now - policy.clock_skew).max(authority.not_before),
        not_after: (now + policy.serving_lifetime).min(authority.not_after),
    }
}

/// Whether a replica issues its serving certificate again: it has none, it was signed by another
/// authority than the one that signs now, or it nears its end.
pub fn serving_due(
    serving: Option<Validity>,
    signed_by_signer: bool,
    now: i64,
    policy: &Policy,
) -> bool {
    match serving {
        None => true,
        Some(validity) => {
            !signed_by_signer
                || validity.not_after - now <= policy.serving_renew_before
                || validity.not_before > now
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const NOW: i64 = 1_800_000_000;

    fn valid(from: i64, to: i64) -> Validity {
        Validity {
            not_before: from,
            not_after: to,
        }
    }

    #[test]
    fn an_authority_lives_through_its_whole_cycle_without_a_gap() {
        let policy = Policy::default();
        let year = valid(NOW, NOW + 365 * DAY);
        let mut kept = Kept {
            current: year,
            previous: None,
            current_in_bundle_since: None,
        };
        assert_eq!(upkeep(None, false, NOW, &policy), Upkeep::Create);
        assert_eq!(
            upkeep(Some(&kept), false, NOW, &policy),
            Upkeep::WriteBundle
        );
        assert_eq!(
            upkeep(Some(&kept), true, NOW, &policy),
            Upkeep::MarkInBundle
        );
        kept.current_in_bundle_since = Some(NOW);
        assert_eq!(signer(&kept, NOW, &policy), Signer::Current);
        assert_eq!(
            upkeep(Some(&kept), true, NOW + DAY, &policy),
            Upkeep::Nothing
        );

        // 90 days before its end, a new authority joins; the old one keeps signing until every
        // CRD has held the new one for the propagation time.
        let rotate_at = NOW + 275 * DAY;
        assert_eq!(
            upkeep(Some(&kept), true, rotate_at - 1, &policy),
            Upkeep::Nothing
        );
        assert_eq!(
            upkeep(Some(&kept), true, rotate_at, &policy),
            Upkeep::Rotate
        );
        let mut rotated = Kept {
            current: valid(rotate_at, rotate_at + 365 * DAY),
            previous: Some(year),
            current_in_bundle_since: None,
        };
        assert_eq!(
            upkeep(Some(&rotated), false, rotate_at, &policy),
            Upkeep::WriteBundle
        );
        assert_eq!(signer(&rotated, rotate_at + DAY, &policy), Signer::Previous);
        assert_eq!(
            upkeep(Some(&rotated), true, rotate_at + 60, &policy),
            Upkeep::MarkInBundle
        );
        rotated.current_in_bundle_since = Some(rotate_at + 60);
        let propagated = rotate_at + 60 + policy.propagation;
        assert_eq!(signer(&rotated, propagated - 1, &policy), Signer::Previous);
        assert_eq!(signer(&rotated, propagated, &policy), Signer::Current);

        // The old one leaves the bundle only after the replicas had time to move.
        let retire = propagated + policy.switch_grace;
        assert_eq!(
            upkeep(Some(&rotated), true, retire - 1, &policy),
            Upkeep::Nothing
        );
        assert_eq!(
            upkeep(Some(&rotated), true, retire, &policy),
            Upkeep::RetirePrevious
        );
    }

    #[test]
    fn both_policies_keep_the_margins_a_rotation_without_a_gap_needs() {
        for policy in [Policy::default(), Policy::minutes()] {
            // The old authority leaves the bundle before it expires, and before the new one
            // is itself due for replacement.
            let retired_after = policy.propagation + policy.switch_grace;
            assert!(retired_after < policy.authority_renew_before, "{policy:?}");
            assert!(
                retired_after < policy.authority_lifetime - policy.authority_renew_before,
                "{policy:?}"
            );
            assert!(
                policy.serving_renew_before < policy.serving_lifetime,
                "{policy:?}"
            );
            assert!(
                policy.serving_lifetime <= policy.authority_lifetime,
                "{policy:?}"
            );
            let look = policy.look_every(std::time::Duration::from_secs(30));
            assert!(
                look.as_secs() * 4 <= policy.propagation.max(4) as u64,
                "{policy:?}"
            );
        }
    }

    #[test]
    fn a_bundle_someone_rewrote_is_written_again_before_anything_else() {
        let policy = Policy::default();
        let kept = Kept {
            current: valid(NOW, NOW + 10 * DAY),
            previous: Some(valid(NOW - 300 * DAY, NOW + DAY)),
            current_in_bundle_since: Some(NOW),
        };
        assert_eq!(
            upkeep(Some(&kept), false, NOW + DAY / 2, &policy),
            Upkeep::WriteBundle
        );
    }

    #[test]
    fn an_expired_authority_is_replaced_and_an_expired_previous_never_signs() {
        let policy = Policy::default();
        let expired = Kept {
            current: valid(NOW - 400 * DAY, NOW - DAY),
            previous: None,
            current_in_bundle_since: Some(NOW - 400 * DAY),
        };
        assert_eq!(upkeep(Some(&expired), true, NOW, &policy), Upkeep::Create);

        let stale_previous = Kept {
            current: valid(NOW, NOW + 365 * DAY),
            previous: Some(valid(NOW - 365 * DAY, NOW - 1)),
            current_in_bundle_since: None,
        };
        assert_eq!(signer(&stale_previous, NOW, &policy), Signer::Current);
        let kept = Kept {
            current_in_bundle_since: Some(NOW),
            ..stale_previous
        };
        assert_eq!(
            upkeep(Some(&kept), true, NOW, &policy),
            Upkeep::RetirePrevious
        );
    }

    #[test]
    fn a_serving_certificate_is_issued_again_when_its_signer_moved_or_its_end_nears() {
        let policy = Policy::default();
        // Never past its authority's end, never before its start.
        let ending = serving_validity(valid(NOW - DAY, NOW + 20 * DAY), NOW, &policy);
        assert_eq!(ending, valid(NOW - policy.clock_skew, NOW + 20 * DAY));
        let young = serving_validity(valid(NOW - 60, NOW + 365 * DAY), NOW, &policy);
        assert_eq!(young.not_before, NOW - 60);
        let fresh = serving_validity(valid(NOW - 5 * DAY, NOW + 365 * DAY), NOW, &policy);
        assert_eq!(fresh, valid(NOW - policy.clock_skew, NOW + 30 * DAY));

        assert!(serving_due(None, true, NOW, &policy));
        assert!(!serving_due(Some(fresh), true, NOW, &policy));
        assert!(serving_due(Some(fresh), false, NOW, &policy));
        assert!(!serving_due(Some(fresh), true, NOW + 20 * DAY - 1, &policy));
        assert!(serving_due(Some(fresh), true, NOW + 20 * DAY, &policy));
        assert!(serving_due(
            Some(valid(NOW + 60, NOW + 30 * DAY)),
            true,
            NOW,
            &policy
        ));
    }
}
