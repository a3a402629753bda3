//! One sample of a release: `toRing` against `fromRing`, each side as doctor's checks see it.

use express_api::release::SampleVerdict;
use express_triage::rings::RingHealth;

/// One sample: `toRing` against `fromRing`, with the moved tenants `toRing` has not adopted in
/// time. Failed when `toRing` is worse and `fromRing` is not; inconclusive when both are in
/// trouble alike; ok otherwise.
pub fn judge(
    from: &RingHealth,
    to: &RingHealth,
    unadopted: &[String],
    adoption_deadline_seconds: u64,
    margin_percent: u32,
) -> (SampleVerdict, String) {
    let margin = f64::from(margin_percent);
    let share = |h: &RingHealth| {
        format!(
            "{} of {} tenant(s) unhealthy ({:.0}%)",
            h.unhealthy.len(),
            h.tenants,
            h.unhealthy_percent()
        )
    };
    let names = |list: &[String]| {
        let mut shown: Vec<&str> = list.iter().take(5).map(String::as_str).collect();
        let more = list.len().saturating_sub(5);
        let more = format!("and {more} more");
        if list.len() > 5 {
            shown.push(&more);
        }
        shown.join(", ")
    };
    // What only the build under test can be blamed for, unless its own ring's operator layer is
    // in trouble too.
    let mut faults: Vec<String> = Vec::new();
    if let Some(trouble) = to.operator_trouble() {
        faults.push(trouble);
    }
    if !unadopted.is_empty() {
        faults.push(format!(
            "{} moved tenant(s) not adopted by ring {} within {}s: {}",
            unadopted.len(),
            to.ring,
            adoption_deadline_seconds,
            names(unadopted)
        ));
    }
    if !to.unreadable.is_empty() {
        faults.push(format!(
            "ring {} cannot read {} tenant(s): {}",
            to.ring,
            to.unreadable.len(),
            names(&to.unreadable)
        ));
    }
    let worse =
        !to.unhealthy.is_empty() && to.unhealthy_percent() > from.unhealthy_percent() + margin;
    if worse {
        faults.push(format!(
            "ring {}: {} ({}) against ring {}'s {:.0}% (margin {margin_percent} points)",
            to.ring,
            share(to),
            names(&to.unhealthy),
            from.ring,
            from.unhealthy_percent()
        ));
    }
    let elevated = |h: &RingHealth| !h.unhealthy.is_empty() && h.unhealthy_percent() > margin;
    if let Some(trouble) = from.operator_trouble() {
        let to_side = if faults.is_empty() {
            format!("ring {}: {}", to.ring, share(to))
        } else {
            faults.join("; ")
        };
        return if faults.is_empty() && !elevated(to) {
            (
                SampleVerdict::Ok,
                format!(
                    "ring {} is not worse ({to_side}) while ring {} is in trouble: {trouble}",
                    to.ring, from.ring
                ),
            )
        } else {
            (
                SampleVerdict::Inconclusive,
                format!("both rings in trouble: {to_side}; {trouble}"),
            )
        };
    }
    if !faults.is_empty() {
        return (
            SampleVerdict::Failed,
            format!(
                "{} while ring {} is fine ({})",
                faults.join("; "),
                from.ring,
                share(from)
            ),
        );
    }
    if elevated(to) && elevated(from) {
        return (
            SampleVerdict::Inconclusive,
            format!(
                "both rings in trouble alike: ring {}: {}; ring {}: {}",
                to.ring,
                share(to),
                from.ring,
                share(from)
            ),
        );
    }
    (
        SampleVerdict::Ok,
        format!(
            "ring {}: {}; ring {}: {}",
            to.ring,
            share(to),
            from.ring,
            share(from)
        ),
    )
}
