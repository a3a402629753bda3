//! The waves: the start behind `toRing`'s leader (and the build asked for), the wave under
//! way entered with its target, tenants moved toward it within the hand-over bound, the bake
//! and the next wave, and where the wave stands.

use std::ops::ControlFlow;

use express_api::release::{CONDITION_TO_RING_LED, ReleasePhase, SampleVerdict};
use express_api::rings::lease_name;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use k8s_openapi::jiff::Timestamp;

use super::census::count;
use super::model::{Direction, Move, reason};
use super::schedule::next_sample;
use super::stepper::{Stepper, Wave, progress_message, set_condition};
use crate::gates::{Gate, after, seconds_between};

impl Stepper<'_> {
    /// Before the first move: toRing must be led, by the build asked for. The start, and a
    /// resume after a pause, are announced.
    pub(super) fn start(&mut self) -> Gate {
        let spec = self.s.spec;
        let started = self
            .status
            .waves
            .first()
            .is_some_and(|w| w.started_at.is_some());
        if !started {
            self.fail_when_api_overdue()?;
            self.leader_arrived()?;
            self.api_settled()?;
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

    /// Continues once `toRing` is led by the build asked for; fails the release, nothing moved,
    /// when it was not within `leaderDeadlineSeconds` of the wait's start (condition `ToRingLed`
    /// Unknown since then). A pause stops that clock: the wait starts again on resume.
    fn leader_arrived(&mut self) -> Gate {
        let spec = self.s.spec;
        let now = self.s.now;
        if self.phase_before == ReleasePhase::Paused {
            self.status
                .conditions
                .retain(|c| !(c.type_ == CONDITION_TO_RING_LED && c.status == "Unknown"));
        }
        let Some(waiting) = self.leader_awaited() else {
            let led_by = self
                .s
                .to_leader
                .as_ref()
                .map_or_else(String::new, |l| l.holder.clone());
            set_condition(
                &mut self.status,
                CONDITION_TO_RING_LED,
                "True",
                reason::LED,
                format!("ring {} is led by {led_by}", spec.to_ring),
                now,
            );
            return ControlFlow::Continue(());
        };
        let waiting_since = self
            .status
            .conditions
            .iter()
            .find(|c| c.type_ == CONDITION_TO_RING_LED && c.status == "Unknown")
            .map(|c| c.last_transition_time.0);
        let deadline = spec.leader_deadline_seconds;
        if let Some(since) = waiting_since
            && deadline > 0
            && seconds_between(since, now) > deadline
        {
            let why = format!(
                "ring {} had no live leader running the build asked for within {deadline}s (leaderDeadlineSeconds): {waiting}",
                spec.to_ring
            );
            set_condition(
                &mut self.status,
                CONDITION_TO_RING_LED,
                "False",
                reason::NO_LEADER,
                why.clone(),
                now,
            );
            self.begin_rollback(why);
            self.roll_back();
            return ControlFlow::Break(None);
        }
        set_condition(
            &mut self.status,
            CONDITION_TO_RING_LED,
            "Unknown",
            reason::LEADER_AWAITED,
            waiting.clone(),
            now,
        );
        self.status.phase = Some(ReleasePhase::Pending);
        self.status.message = Some(waiting);
        ControlFlow::Break(Some(after(now, spec.interval_seconds)))
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
    pub(super) fn enter_wave(&mut self) -> Wave {
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

    /// Moves toward the wave's target, within the hand-over bound.
    pub(super) fn move_forward(&mut self, wave: Wave, holding: bool) {
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
    pub(super) fn bake(
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
            if self.status.waves[index].adopted_at.is_none() {
                self.status.waves[index].adopted_at = Some(Time(now));
            }
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
            self.status.waves[index].adopted_at = None;
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
    pub(super) fn report_progress(
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
