//! The fleet view for alerts (ring counts, doctor's figures), recomputed from the caches on a
//! timer, never per reconcile, and how long it waits between two recomputations.

use std::time::Instant;

use super::context::Context;

/// Recomputes the fleet view (ring counts, doctor's figures) from the caches; returns how long
/// that took.
pub(super) fn publish_fleet_view(context: &Context) -> std::time::Duration {
    let started = Instant::now();
    let objects = context.caches.objects(None);
    let mut tenants = express_triage::observe::tenants(&objects, |_| None);
    context.metrics.set_ring_tenants(
        &context.settings.ring,
        tenants.iter().map(|t| t.ring.as_str()),
    );
    // Each ring's operator reports its own ring's tenants, so that rings add up.
    tenants.retain(|t| t.ring == context.settings.ring);
    context.metrics.set_fleet(
        &context.settings.ring,
        &express_triage::fleet_figures(&tenants, k8s_openapi::jiff::Timestamp::now()),
    );
    drop((objects, tenants));
    let took = started.elapsed();
    context
        .metrics
        .work
        .fleet_view_seconds
        .observe(took.as_secs_f64());
    took
}

/// How long the fleet view waits before its next recomputation: its interval, or a hundred
/// times what the last one took when that is longer. The pass over every tenant then costs at
/// most a hundredth of a core however large the fleet: at 10,000 tenants it would otherwise be
/// a tenth of what the operator spends on a fleet-wide upgrade, whose length grows with the
/// fleet too.
pub fn fleet_view_pause(
    every: std::time::Duration,
    took: std::time::Duration,
) -> std::time::Duration {
    every.max(took.saturating_mul(100))
}

#[cfg(test)]
mod tests {
    use super::fleet_view_pause;
    use std::time::Duration;

    #[test]
    fn the_fleet_view_waits_a_hundred_times_what_it_took_when_that_is_longer() {
        let every = Duration::from_secs(15);
        for (took_ms, pause_s) in [(0, 15), (40, 15), (150, 15), (400, 40), (2_000, 200)] {
            assert_eq!(
                fleet_view_pause(every, Duration::from_millis(took_ms)),
                Duration::from_secs(pause_s),
                "took {took_ms} ms"
            );
        }
        assert_eq!(fleet_view_pause(every, Duration::MAX), Duration::MAX);
    }
}
