//! The step itself: refuse an invalid spec, act on requests, wait for `toRing`'s leader, sample,
//! move, bake and advance, in that order (see the module doc of [`super`]).

use std::ops::ControlFlow;

use express_api::release::{ReleasePhase, Sample, SampleCounts, SampleVerdict, spec_problems};
use express_api::rings::lease_name;
use express_triage::rings::RingHealth;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use k8s_openapi::jiff::Timestamp;

use super::census::{census, count};
use super::judge::judge;
use super::schedule::{after, next_sample};
use super::stepper::{Stepper, progress_message, set_condition};
use super::{CONDITION_VALID, Direction, Move, ReleaseSnapshot, ReleaseStep, SAMPLES_KEPT, reason};

/// What a gate decides: go on to the next gate (with what it found), or end the step here,
/// stepping again at the time given (none: only when something changes).
type Gate<T = ()> = ControlFlow<Option<Timestamp>, T>;

/// The next status, moves, events and wake-up of a release (see the module doc).
pub fn step(s: &ReleaseSnapshot<'_>) -> ReleaseStep {
    let census = census(s.name, s.spec, s.tenants);
    let mut st = Stepper::new(s, &census);
    let wake_at = match gates(&mut st) {
        ControlFlow::Break(wake_at) | ControlFlow::Continue(wake_at) => wake_at,
    };
    st.finish(wake_at)
}

/// The gates in the order the module doc gives them; any of them may end the step.
fn gates(st: &mut Stepper<'_>) -> Gate<Option<Timestamp>> {
    st.refuse_invalid_spec()?;
    st.take_rollback_request();
    st.stop_when_over()?;
    st.hold_while_paused()?;
    st.take_promote_request();
    st.start()?;
    let wave = st.enter_wave();
    let last = st.sample(wave)?;
    let holding = st.hold_when_inconclusive(wave, last);
    st.move_forward(wave, holding);
    let bake_end = st.bake(wave, last, holding)?;
    ControlFlow::Continue(st.report_progress(wave, holding, bake_end))
}

/// The wave a step works on.
#[derive(Clone, Copy)]
struct Wave {
    index: usize,
    /// How many tenants must have moved by the end of it (cumulative).
    target: usize,
    /// Promoted in full: every remaining wave at once, no judging, no baking.
    full: bool,
}

impl Stepper<'_> {
    /// Refused: nothing moves until the spec is fixed (a rollback under way goes on).
    fn refuse_invalid_spec(&mut self) -> Gate {
        let now = self.s.now;
        let problems = spec_problems(self.s.spec);
        if problems.is_empty() {
            set_condition(
                &mut self.status,
                true,
                "Valid",
                "the spec can be acted on".into(),
                now,
            );
            return ControlFlow::Continue(());
        }
        let was_refused = self
            .status
            .conditions
            .iter()
            .any(|c| c.type_ == CONDITION_VALID && c.status == "False");
        let message = format!("refused: {}", problems.join("; "));
        set_condition(
            &mut self.status,
            false,
            reason::INVALID_SPEC,
            message.clone(),
            now,
        );
        if self.status.phase.is_none() {
            self.status.phase = Some(ReleasePhase::Pending);
        }
        self.status.message = Some(format!("{message}; nothing moves until the spec is fixed"));
        if !was_refused {
            self.notice(true, reason::INVALID_SPEC, message);
        }
        ControlFlow::Break(None)
    }

    /// A rollback request not acted on yet: recorded, and obeyed unless the release is over.
    fn take_rollback_request(&mut self) {
        let phase = self.phase_before;
        let Some(id) = self.s.requests.rollback.clone().filter(|id| {
            self.status
                .requests
                .as_ref()
                .and_then(|r| r.rollback.as_ref())
                != Some(id)
        }) else {
            return;
        };
        self.requests().rollback = Some(id.clone());
        match phase {
            ReleasePhase::RolledBack => self.notice(
                false,
                reason::REQUEST_IGNORED,
                format!("rollback request {id} ignored: the release is already {phase}"),
            ),
            // A release that succeeded can still be undone (a release across DCs that failed
            // later, or a person): every tenant it moved goes back, as mid-release.
            ReleasePhase::Succeeded => {
                self.begin_rollback(format!("rolled back after it succeeded, by request {id}"))
            }
            _ => self.begin_rollback(format!("aborted by request {id}")),
        }
    }

    /// A rolled-back release goes on returning the tenants it moved; a succeeded one is done.
    fn stop_when_over(&mut self) -> Gate {
        match self.status.phase() {
            ReleasePhase::RolledBack => {
                self.roll_back();
                ControlFlow::Break(None)
            }
            ReleasePhase::Succeeded => ControlFlow::Break(None),
            _ => ControlFlow::Continue(()),
        }
    }

    /// `spec.paused`: nothing moves, nothing is judged, and the bake starts again after.
    fn hold_while_paused(&mut self) -> Gate {
        let spec = self.s.spec;
        if !spec.paused {
            return ControlFlow::Continue(());
        }
        if self.phase_before != ReleasePhase::Paused {
            self.notice(false, reason::PAUSED, "paused by spec.paused".into());
        }
        self.status.phase = Some(ReleasePhase::Paused);
        self.status.message = Some(format!(
            "paused by spec.paused at wave {} of {}: nothing moves, nothing is judged, no bake time passes",
            self.status.wave + 1,
            spec.waves.len()
        ));
        if let Some(wave) = self.status.waves.get_mut(self.status.wave as usize) {
            wave.bake_since = None;
        }
        ControlFlow::Break(None)
    }

    /// A promote request not acted on yet: the current wave ends its bake, or (`full`) every
    /// remaining wave goes at once.
    fn take_promote_request(&mut self) {
        let s = self.s;
        let Some(id) = s.requests.promote.clone().filter(|id| {
            self.status
                .requests
                .as_ref()
                .and_then(|r| r.promote.as_ref())
                != Some(id)
        }) else {
            return;
        };
        self.requests().promote = Some(id.clone());
        if s.requests.promote_full {
            self.status.promoted_full = true;
            self.notice(
                false,
                reason::PROMOTED,
                format!(
                    "promote request {id}: every remaining wave now, no more baking or judging"
                ),
            );
        } else {
            let wave = self.status.wave as usize;
            self.start_wave(wave);
            self.status.waves[wave].promoted = true;
            self.notice(
                false,
                reason::PROMOTED,
                format!(
                    "promote request {id}: wave {} ends its bake once its tenants are adopted",
                    wave + 1
                ),
            );
        }
    }

    /// Before the first move: toRing must be led, by the build asked for. The start, and a
    /// resume after a pause, are announced.
    fn start(&mut self) -> Gate {
        let spec = self.s.spec;
        let started = self
            .status
            .waves
            .first()
            .is_some_and(|w| w.started_at.is_some());
        if !started {
            if let Some(waiting) = self.leader_awaited() {
                self.status.phase = Some(ReleasePhase::Pending);
                self.status.message = Some(waiting);
                return ControlFlow::Break(Some(after(self.s.now, spec.interval_seconds)));
            }
            self.notice(
                false,
                reason::STARTED,
                format!(
                    "moving {} movable tenant(s) from ring {} to ring {} in {} wave(s); {} pinned",
                    self.census.movable(),
                    spec.from_ring,
                    spec.to_ring,
                    spec.waves.len(),
                    self.census.pinned
                ),
            );
        } else if self.phase_before == ReleasePhase::Paused {
            self.notice(
                false,
                reason::RESUMED,
                "resumed: spec.paused is false".into(),
            );
        }
        ControlFlow::Continue(())
    }

    /// Why the first move must still wait for toRing's leader, if it must.
    fn leader_awaited(&self) -> Option<String> {
        let spec = self.s.spec;
        match (&self.s.to_leader, &spec.version) {
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
        }
    }

    /// The wave this step works on, started if it was not, with its target recorded.
    fn enter_wave(&mut self) -> Wave {
        let spec = self.s.spec;
        let index = (self.status.wave as usize).min(spec.waves.len() - 1);
        self.start_wave(index);
        let full = self.status.promoted_full;
        let target = if full {
            self.census.movable()
        } else {
            spec.waves[index].target(self.census.movable())
        };
        self.status.waves[index].target = count(target);
        Wave {
            index,
            target,
            full,
        }
    }

    /// A sample, when due: judged and kept; failed samples over the limit roll the release
    /// back. Goes on with the latest verdict, taken now or before.
    fn sample(&mut self, wave: Wave) -> Gate<Option<SampleVerdict>> {
        let s = self.s;
        let spec = s.spec;
        let last = self.status.last_samples.last().map(|x| x.verdict);
        let due = next_sample(spec, &self.status).is_none_or(|at| at <= s.now);
        if wave.full || !due {
            return ControlFlow::Continue(last);
        }
        let Some(health) = &s.health else {
            return ControlFlow::Continue(last);
        };
        let (verdict, why) = self.judge_sample(health, wave);
        self.keep_sample(verdict, &why);
        match verdict {
            SampleVerdict::Failed => {
                let failed = self.status.samples.failed;
                self.notice(
                    true,
                    reason::SAMPLE_FAILED,
                    format!(
                        "failed sample {failed} (limit {}): {why}",
                        spec.failure_limit
                    ),
                );
                if failed > spec.failure_limit {
                    self.begin_rollback(format!(
                        "{failed} failed samples, over the limit of {}; the last: {why}",
                        spec.failure_limit
                    ));
                    self.roll_back();
                    return ControlFlow::Break(None);
                }
            }
            SampleVerdict::Inconclusive if self.phase_before != ReleasePhase::Inconclusive => {
                self.notice(true, reason::INCONCLUSIVE, format!("holding: {why}"));
            }
            _ => {}
        }
        if verdict != SampleVerdict::Ok {
            self.status.waves[wave.index].bake_since = None;
        }
        ControlFlow::Continue(Some(verdict))
    }

    /// One sample's verdict from the rings' health, with the moved tenants adopted late.
    fn judge_sample(
        &self,
        health: &Result<(RingHealth, RingHealth), String>,
        wave: Wave,
    ) -> (SampleVerdict, String) {
        let spec = self.s.spec;
        let now = self.s.now;
        match health {
            Err(unread) => (
                SampleVerdict::Inconclusive,
                format!("no data: could not read {unread}"),
            ),
            Ok((from, to)) => {
                let late: Vec<String> = self
                    .census
                    .moved
                    .iter()
                    .filter(|t| t.driven_by.as_deref() != Some(spec.to_ring.as_str()))
                    .filter(|t| {
                        let since = t.moved_at.or(self.status.waves[wave.index]
                            .started_at
                            .as_ref()
                            .map(|w| w.0));
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
        }
    }

    /// Counts the sample and keeps the last [`SAMPLES_KEPT`].
    fn keep_sample(&mut self, verdict: SampleVerdict, why: &str) {
        let counts: &mut SampleCounts = &mut self.status.samples;
        match verdict {
            SampleVerdict::Ok => counts.ok += 1,
            SampleVerdict::Failed => counts.failed += 1,
            SampleVerdict::Inconclusive => counts.inconclusive += 1,
        }
        self.status.last_samples.push(Sample {
            at: Time(self.s.now),
            verdict,
            reason: why.to_owned(),
        });
        let excess = self.status.last_samples.len().saturating_sub(SAMPLES_KEPT);
        self.status.last_samples.drain(..excess);
    }

    /// Inconclusive holds (unless promoted in full): the phase says whether the release holds.
    fn hold_when_inconclusive(&mut self, wave: Wave, last: Option<SampleVerdict>) -> bool {
        let holding = last == Some(SampleVerdict::Inconclusive) && !wave.full;
        self.status.phase = Some(if holding {
            ReleasePhase::Inconclusive
        } else {
            ReleasePhase::Progressing
        });
        holding
    }

    /// Moves toward the wave's target, within the hand-over bound.
    fn move_forward(&mut self, wave: Wave, holding: bool) {
        let spec = self.s.spec;
        let census = self.census;
        if holding || census.moved.len() >= wave.target {
            return;
        }
        let budget = (spec.max_hand_overs as usize).saturating_sub(census.in_flight());
        let wanted = wave.target - census.moved.len();
        self.moves.extend(
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

    /// Bake, then the next wave. Goes on with when the bake ends, if it is under way.
    fn bake(
        &mut self,
        wave: Wave,
        last: Option<SampleVerdict>,
        holding: bool,
    ) -> Gate<Option<Timestamp>> {
        let spec = self.s.spec;
        let now = self.s.now;
        let census = self.census;
        let index = wave.index;
        let wave_in = census.moved.len() >= wave.target && census.adopted == census.moved.len();
        let mut bake_end = None;
        if wave.full {
            if wave_in {
                self.succeed(index);
                return ControlFlow::Break(None);
            }
        } else if wave_in && !holding {
            let promoted = self.status.waves[index].promoted;
            if last == Some(SampleVerdict::Ok) && self.status.waves[index].bake_since.is_none() {
                self.status.waves[index].bake_since = Some(Time(now));
            }
            let baked = self.status.waves[index]
                .bake_since
                .as_ref()
                .map(|since| after(since.0, spec.bake_seconds));
            if promoted || baked.is_some_and(|end| end <= now) {
                self.status.waves[index].finished_at = Some(Time(now));
                if index + 1 == spec.waves.len() {
                    self.succeed(index);
                    return ControlFlow::Break(None);
                }
                self.next_wave(index);
                // Straight on: the next step moves the next wave's tenants.
                return ControlFlow::Break(Some(now));
            }
            bake_end = baked;
        } else if !wave_in {
            self.status.waves[index].bake_since = None;
        }
        ControlFlow::Continue(bake_end)
    }

    fn next_wave(&mut self, index: usize) {
        let spec = self.s.spec;
        self.start_wave(index + 1);
        let next = &spec.waves[index + 1];
        let started = format!(
            "wave {} of {} ({next}): {} tenant(s) to ring {}",
            index + 2,
            spec.waves.len(),
            next.target(self.census.movable()),
            spec.to_ring
        );
        self.status.message = Some(format!("{started}, moving"));
        self.notice(false, reason::WAVE_STARTED, started);
    }

    /// Where the wave stands, and when to look again: the next sample or the bake's end.
    fn report_progress(
        &mut self,
        wave: Wave,
        holding: bool,
        bake_end: Option<Timestamp>,
    ) -> Option<Timestamp> {
        let spec = self.s.spec;
        let now = self.s.now;
        self.status.message = Some(progress_message(
            &self.status,
            spec,
            self.census,
            wave.target,
            holding,
            bake_end,
            now,
        ));
        let wake_at = [next_sample(spec, &self.status), bake_end]
            .into_iter()
            .flatten()
            .min()
            .or(Some(after(now, spec.interval_seconds)));
        if wave.full { None } else { wake_at }
    }
}
