//! The step itself: refuse an invalid spec, act on requests, wait for `toRing`'s leader, sample,
//! move, bake and advance, in that order (see the module doc of [`super`]).

use express_api::release::{
    OperatorReleaseSpec, OperatorReleaseStatus, ReleasePhase, ReleaseRequests, Sample,
    SampleCounts, SampleVerdict, WaveStatus, spec_problems,
};
use express_api::rings::lease_name;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, Time};
use k8s_openapi::jiff::Timestamp;

use super::census::{Census, census, count};
use super::{
    CONDITION_VALID, Direction, Move, Notice, ReleaseSnapshot, ReleaseStep, SAMPLES_KEPT, after,
    judge, next_sample, reason,
};

fn set_condition(
    status: &mut OperatorReleaseStatus,
    valid: bool,
    reason: &str,
    message: String,
    now: Timestamp,
) {
    let state = if valid { "True" } else { "False" };
    let since = status
        .conditions
        .iter()
        .find(|c| c.type_ == CONDITION_VALID && c.status == state)
        .map_or(Time(now), |c| c.last_transition_time.clone());
    status.conditions.retain(|c| c.type_ != CONDITION_VALID);
    status.conditions.push(Condition {
        type_: CONDITION_VALID.into(),
        status: state.into(),
        reason: reason.into(),
        message,
        observed_generation: status.observed_generation,
        last_transition_time: since,
    });
}

struct Stepper<'a> {
    s: &'a ReleaseSnapshot<'a>,
    status: OperatorReleaseStatus,
    moves: Vec<Move>,
    notices: Vec<Notice>,
}

impl Stepper<'_> {
    fn notice(&mut self, warning: bool, reason: &'static str, message: String) {
        self.notices.push(Notice {
            warning,
            reason,
            message,
        });
    }

    fn requests(&mut self) -> &mut ReleaseRequests {
        self.status
            .requests
            .get_or_insert_with(ReleaseRequests::default)
    }

    fn begin_rollback(&mut self, why: String) {
        self.status.phase = Some(ReleasePhase::RolledBack);
        self.status.rolled_back_at = Some(Time(self.s.now));
        self.status.rollback_reason = Some(why.clone());
        self.notice(true, reason::ROLLED_BACK, format!("rolling back: {why}"));
    }

    /// Every tenant the release moved goes back, within the hand-over bound.
    fn roll_back(&mut self, census: &Census<'_>) {
        let spec = self.s.spec;
        let budget = (spec.max_hand_overs as usize).saturating_sub(census.returning);
        self.moves
            .extend(census.moved.iter().take(budget).map(|t| Move {
                namespace: t.namespace.clone(),
                name: t.name.clone(),
                to_ring: spec.from_ring.clone(),
                direction: Direction::Back,
            }));
        let why = format!(
            "rolled back: {}",
            self.status
                .rollback_reason
                .as_deref()
                .unwrap_or("no reason recorded")
        );
        let left = census.moved.len() + census.returning;
        self.status.message = Some(if left == 0 {
            format!(
                "{why} (every tenant it moved is driven by ring {} again)",
                spec.from_ring
            )
        } else {
            format!(
                "{why} ({} tenant(s) still on ring {}, {} not yet driven by ring {})",
                census.moved.len(),
                spec.to_ring,
                census.returning,
                spec.from_ring
            )
        });
    }

    fn start_wave(&mut self, wave: usize) {
        self.status.wave = count(wave);
        while self.status.waves.len() <= wave {
            self.status.waves.push(WaveStatus::default());
        }
        if self.status.waves[wave].started_at.is_none() {
            self.status.waves[wave].started_at = Some(Time(self.s.now));
        }
    }
}

/// The next status, moves, events and wake-up of a release (see the module doc).
pub fn step(s: &ReleaseSnapshot<'_>) -> ReleaseStep {
    let spec = s.spec;
    let now = s.now;
    let mut st = Stepper {
        s,
        status: s.status.clone(),
        moves: Vec::new(),
        notices: Vec::new(),
    };
    st.status.observed_generation = s.generation;
    let census = census(s.name, spec, s.tenants);
    st.status.movable_tenants = count(census.movable());
    st.status.moved_tenants = count(census.moved.len());
    st.status.adopted_tenants = count(census.adopted);
    st.status.pinned_tenants = count(census.pinned);
    let finish = |st: Stepper<'_>, wake_at: Option<Timestamp>| ReleaseStep {
        status: st.status,
        moves: st.moves,
        notices: st.notices,
        wake_at,
    };

    // Refused: nothing moves until the spec is fixed (a rollback under way goes on).
    let problems = spec_problems(spec);
    if !problems.is_empty() {
        let was_refused = st
            .status
            .conditions
            .iter()
            .any(|c| c.type_ == CONDITION_VALID && c.status == "False");
        let message = format!("refused: {}", problems.join("; "));
        set_condition(
            &mut st.status,
            false,
            reason::INVALID_SPEC,
            message.clone(),
            now,
        );
        if st.status.phase.is_none() {
            st.status.phase = Some(ReleasePhase::Pending);
        }
        st.status.message = Some(format!("{message}; nothing moves until the spec is fixed"));
        if !was_refused {
            st.notice(true, reason::INVALID_SPEC, message);
        }
        return finish(st, None);
    }
    set_condition(
        &mut st.status,
        true,
        "Valid",
        "the spec can be acted on".into(),
        now,
    );

    let phase = st.status.phase();
    if let Some(id) = s.requests.rollback.clone().filter(|id| {
        st.status
            .requests
            .as_ref()
            .and_then(|r| r.rollback.as_ref())
            != Some(id)
    }) {
        st.requests().rollback = Some(id.clone());
        if phase.is_final() {
            st.notice(
                false,
                reason::REQUEST_IGNORED,
                format!("rollback request {id} ignored: the release is already {phase}"),
            );
        } else {
            st.begin_rollback(format!("aborted by request {id}"));
        }
    }
    match st.status.phase() {
        ReleasePhase::RolledBack => {
            st.roll_back(&census);
            return finish(st, None);
        }
        ReleasePhase::Succeeded => return finish(st, None),
        _ => {}
    }

    if spec.paused {
        if phase != ReleasePhase::Paused {
            st.notice(false, reason::PAUSED, "paused by spec.paused".into());
        }
        st.status.phase = Some(ReleasePhase::Paused);
        st.status.message = Some(format!(
            "paused by spec.paused at wave {} of {}: nothing moves, nothing is judged, no bake time passes",
            st.status.wave + 1,
            spec.waves.len()
        ));
        if let Some(wave) = st.status.waves.get_mut(st.status.wave as usize) {
            wave.bake_since = None;
        }
        return finish(st, None);
    }

    if let Some(id) = s
        .requests
        .promote
        .clone()
        .filter(|id| st.status.requests.as_ref().and_then(|r| r.promote.as_ref()) != Some(id))
    {
        st.requests().promote = Some(id.clone());
        if s.requests.promote_full {
            st.status.promoted_full = true;
            st.notice(
                false,
                reason::PROMOTED,
                format!(
                    "promote request {id}: every remaining wave now, no more baking or judging"
                ),
            );
        } else {
            let wave = st.status.wave as usize;
            st.start_wave(wave);
            st.status.waves[wave].promoted = true;
            st.notice(
                false,
                reason::PROMOTED,
                format!(
                    "promote request {id}: wave {} ends its bake once its tenants are adopted",
                    wave + 1
                ),
            );
        }
    }

    // Before the first move: toRing must be led, by the build asked for.
    let started = st
        .status
        .waves
        .first()
        .is_some_and(|w| w.started_at.is_some());
    if !started {
        let waiting = match (&s.to_leader, &spec.version) {
            (None, _) => Some(format!(
                "waiting for a live leader of ring {} (Lease {}); nothing moves before",
                spec.to_ring,
                lease_name(&spec.to_ring)
            )),
            (Some(leader), Some(version)) if leader.version.as_ref() != Some(version) => {
                Some(format!(
                    "ring {} is led by {} reporting {}, not {version}; nothing moves before",
                    spec.to_ring,
                    leader.holder,
                    leader
                        .version
                        .as_deref()
                        .map_or_else(|| "no build".to_owned(), |v| format!("build {v}"))
                ))
            }
            _ => None,
        };
        if let Some(waiting) = waiting {
            st.status.phase = Some(ReleasePhase::Pending);
            st.status.message = Some(waiting);
            return finish(st, Some(after(now, spec.interval_seconds)));
        }
        st.notice(
            false,
            reason::STARTED,
            format!(
                "moving {} movable tenant(s) from ring {} to ring {} in {} wave(s); {} pinned",
                census.movable(),
                spec.from_ring,
                spec.to_ring,
                spec.waves.len(),
                census.pinned
            ),
        );
    } else if phase == ReleasePhase::Paused {
        st.notice(
            false,
            reason::RESUMED,
            "resumed: spec.paused is false".into(),
        );
    }
    let wave = (st.status.wave as usize).min(spec.waves.len() - 1);
    st.start_wave(wave);
    let full = st.status.promoted_full;
    let target = if full {
        census.movable()
    } else {
        spec.waves[wave].target(census.movable())
    };
    st.status.waves[wave].target = count(target);

    // A sample, when due.
    let mut last = st.status.last_samples.last().map(|x| x.verdict);
    if !full
        && next_sample(spec, &st.status).is_none_or(|at| at <= now)
        && let Some(health) = &s.health
    {
        let (verdict, why) = match health {
            Err(unread) => (
                SampleVerdict::Inconclusive,
                format!("no data: could not read {unread}"),
            ),
            Ok((from, to)) => {
                let late: Vec<String> = census
                    .moved
                    .iter()
                    .filter(|t| t.driven_by.as_deref() != Some(spec.to_ring.as_str()))
                    .filter(|t| {
                        let since = t
                            .moved_at
                            .or(st.status.waves[wave].started_at.as_ref().map(|w| w.0));
                        since.is_some_and(|at| after(at, spec.adoption_deadline_seconds) < now)
                    })
                    .map(|t| format!("{}/{}", t.namespace, t.name))
                    .collect();
                judge(
                    from,
                    to,
                    &late,
                    spec.adoption_deadline_seconds,
                    spec.unhealthy_margin_percent,
                )
            }
        };
        let counts: &mut SampleCounts = &mut st.status.samples;
        match verdict {
            SampleVerdict::Ok => counts.ok += 1,
            SampleVerdict::Failed => counts.failed += 1,
            SampleVerdict::Inconclusive => counts.inconclusive += 1,
        }
        st.status.last_samples.push(Sample {
            at: Time(now),
            verdict,
            reason: why.clone(),
        });
        let excess = st.status.last_samples.len().saturating_sub(SAMPLES_KEPT);
        st.status.last_samples.drain(..excess);
        last = Some(verdict);
        match verdict {
            SampleVerdict::Failed => {
                let failed = st.status.samples.failed;
                st.notice(
                    true,
                    reason::SAMPLE_FAILED,
                    format!(
                        "failed sample {failed} (limit {}): {why}",
                        spec.failure_limit
                    ),
                );
                if failed > spec.failure_limit {
                    st.begin_rollback(format!(
                        "{failed} failed samples, over the limit of {}; the last: {why}",
                        spec.failure_limit
                    ));
                    st.roll_back(&census);
                    return finish(st, None);
                }
            }
            SampleVerdict::Inconclusive if phase != ReleasePhase::Inconclusive => {
                st.notice(true, reason::INCONCLUSIVE, format!("holding: {why}"));
            }
            _ => {}
        }
        if verdict != SampleVerdict::Ok {
            st.status.waves[wave].bake_since = None;
        }
    }
    let holding = last == Some(SampleVerdict::Inconclusive) && !full;
    st.status.phase = Some(if holding {
        ReleasePhase::Inconclusive
    } else {
        ReleasePhase::Progressing
    });

    // Moves, within the hand-over bound.
    if !holding && census.moved.len() < target {
        let budget = (spec.max_hand_overs as usize).saturating_sub(census.in_flight());
        let wanted = target - census.moved.len();
        st.moves.extend(
            census
                .unmoved
                .iter()
                .take(wanted.min(budget))
                .map(|t| Move {
                    namespace: t.namespace.clone(),
                    name: t.name.clone(),
                    to_ring: spec.to_ring.clone(),
                    direction: Direction::Forward,
                }),
        );
    }

    // Bake, then the next wave.
    let wave_in = census.moved.len() >= target && census.adopted == census.moved.len();
    let mut bake_end = None;
    if full {
        if wave_in {
            succeed(&mut st, wave);
            return finish(st, None);
        }
    } else if wave_in && !holding {
        let promoted = st.status.waves[wave].promoted;
        if last == Some(SampleVerdict::Ok) && st.status.waves[wave].bake_since.is_none() {
            st.status.waves[wave].bake_since = Some(Time(now));
        }
        let baked = st.status.waves[wave]
            .bake_since
            .as_ref()
            .map(|since| after(since.0, spec.bake_seconds));
        if promoted || baked.is_some_and(|end| end <= now) {
            st.status.waves[wave].finished_at = Some(Time(now));
            if wave + 1 == spec.waves.len() {
                succeed(&mut st, wave);
                return finish(st, None);
            }
            st.start_wave(wave + 1);
            let next = &spec.waves[wave + 1];
            let started = format!(
                "wave {} of {} ({next}): {} tenant(s) to ring {}",
                wave + 2,
                spec.waves.len(),
                next.target(census.movable()),
                spec.to_ring
            );
            st.status.message = Some(format!("{started}, moving"));
            st.notice(false, reason::WAVE_STARTED, started);
            // Straight on: the next step moves the next wave's tenants.
            return finish(st, Some(now));
        }
        bake_end = baked;
    } else if !wave_in {
        st.status.waves[wave].bake_since = None;
    }

    st.status.message = Some(progress_message(
        &st.status, spec, &census, target, holding, bake_end, now,
    ));
    let wake_at = [next_sample(spec, &st.status), bake_end]
        .into_iter()
        .flatten()
        .min()
        .or(Some(after(now, spec.interval_seconds)));
    finish(st, if full { None } else { wake_at })
}

fn succeed(st: &mut Stepper<'_>, wave: usize) {
    let spec = st.s.spec;
    st.status.waves[wave].finished_at = Some(Time(st.s.now));
    st.status.phase = Some(ReleasePhase::Succeeded);
    let message = format!(
        "every movable tenant ({}) is driven by ring {}; {} pinned tenant(s) untouched",
        st.status.moved_tenants, spec.to_ring, st.status.pinned_tenants
    );
    st.status.message = Some(message.clone());
    st.notice(false, reason::SUCCEEDED, message);
}

fn progress_message(
    status: &OperatorReleaseStatus,
    spec: &OperatorReleaseSpec,
    census: &Census<'_>,
    target: usize,
    holding: bool,
    bake_end: Option<Timestamp>,
    now: Timestamp,
) -> String {
    let wave = format!("wave {} of {}", status.wave + 1, spec.waves.len());
    if holding {
        let why = status.last_samples.last().map_or("", |s| s.reason.as_str());
        return format!("{wave}: holding, neither promoting nor rolling back: {why}");
    }
    if census.moved.len() < target || census.adopted < census.moved.len() {
        return format!(
            "{wave}: {} of {target} tenant(s) moved to ring {}, {} adopted",
            census.moved.len(),
            spec.to_ring,
            census.adopted
        );
    }
    match bake_end {
        Some(end) => format!(
            "{wave}: baking, {}s left ({} ok, {} failed of {} tolerated)",
            (end.as_second() - now.as_second()).max(0),
            status.samples.ok,
            status.samples.failed,
            spec.failure_limit
        ),
        None => format!("{wave}: {target} tenant(s) adopted; waiting for an ok sample to bake"),
    }
}
