//! Which window a sample's signals are read over, and against what. A wave is judged on what
//! it does, not on its hand-over: the window starts once the wave's tenants are all adopted
//! (never before), and spans at most `windowSeconds`. The baseline is `fromRing` over the same
//! window while it still drives tenants; once it drives none (the last wave, nothing pinned),
//! `toRing` is compared with its own values before the wave began, as a FleetRelease's last
//! stage is compared with itself.
//!
//! Each point of a signal is a rate or a slope over a look-back ([`look_back_seconds`]); a
//! point whose look-back reaches before the adoption would measure the hand-over (the canary's
//! heap growing as it takes the tenants on, the baseline's as it lets them go), so each signal
//! is read only from the first point clear of it ([`AnalysisWindow::span`]).

use express_api::analysis::Signal;
use express_api::release::{OperatorReleaseSpec, OperatorReleaseStatus};
use k8s_openapi::jiff::{SignedDuration, Timestamp};

use crate::gates::seconds_between;

/// A window shorter than this is not judged yet: the sample rests on the tenants.
pub const SHORTEST_WINDOW_SECONDS: u64 = 15;

/// What the canary is compared with.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Baseline {
    /// Another ring over the same window.
    Ring(String),
    /// The canary ring itself, over a window as long that ends when the wave began.
    Before {
        ring: String,
        wave: usize,
        until: Timestamp,
    },
}

/// The window of one sample's analysis.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AnalysisWindow {
    pub canary_ring: String,
    pub start: Timestamp,
    pub end: Timestamp,
    /// Seconds between the points read.
    pub step_seconds: u64,
    pub baseline: Baseline,
    /// When the wave's tenants were all adopted: no point's look-back reaches before it.
    pub adopted_at: Timestamp,
}

/// How far back each point of a built-in signal looks, in seconds: its rate's range (four
/// steps, so that every point holds several scrapes), and for the heap's slope at least 30 s
/// (the heap's figures are published every 5 s). `None`, a custom signal: its query says.
pub fn look_back_seconds(signal: Option<Signal>, step_seconds: u64) -> u64 {
    let rate = step_seconds * 4;
    match signal {
        Some(Signal::MemoryGrowth) => rate.max(30),
        Some(_) => rate,
        None => 0,
    }
}

/// How long after a change its figures can reach Prometheus, beyond one step: the heap's are
/// published every 5 s; counters are current at each scrape, taken at least once a step.
const PUBLISHED_WITHIN_SECONDS: u64 = 5;

/// The canary's and the baseline's spans for one signal.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Spans<'a> {
    pub canary: (Timestamp, Timestamp),
    pub baseline_ring: &'a str,
    pub baseline: (Timestamp, Timestamp),
}

impl AnalysisWindow {
    /// The spans over which a signal whose points look back `look_back` seconds is read: the
    /// window less its first points, whose look-back reaches into the hand-over (as
    /// Prometheus saw it: a figure of the adoption's moment can land a scrape and a
    /// publication later); the baseline's as long. `None` while no point is clear of it (the
    /// signal is settling).
    pub fn span(&self, look_back: u64) -> Option<Spans<'_>> {
        let lag = self.step_seconds + PUBLISHED_WITHIN_SECONDS;
        let clear = self
            .adopted_at
            .checked_add(SignedDuration::from_secs(
                i64::try_from(look_back.saturating_add(lag)).unwrap_or(i64::MAX),
            ))
            .ok()?;
        let start = self.start.max(clear);
        if start > self.end {
            return None;
        }
        let (baseline_ring, baseline) = match &self.baseline {
            Baseline::Ring(ring) => (ring.as_str(), (start, self.end)),
            Baseline::Before { ring, until, .. } => {
                let length = self.end.duration_since(start);
                (
                    ring.as_str(),
                    (until.checked_sub(length).unwrap_or(*until), *until),
                )
            }
        };
        Some(Spans {
            canary: (start, self.end),
            baseline_ring,
            baseline,
        })
    }

    /// The baseline in words.
    pub fn describe_baseline(&self) -> String {
        match &self.baseline {
            Baseline::Ring(ring) => format!("ring {ring}"),
            Baseline::Before { ring, wave, .. } => {
                format!("ring {ring} before wave {}", wave + 1)
            }
        }
    }
}

/// The window to read now, if the release has analysis and its wave has been adopted long
/// enough. `from_ring_drives_tenants`: whether `fromRing` still drives any tenant.
pub fn window(
    spec: &OperatorReleaseSpec,
    status: &OperatorReleaseStatus,
    from_ring_drives_tenants: bool,
    now: Timestamp,
) -> Option<AnalysisWindow> {
    let analysis = spec.analysis.as_ref()?;
    let index = status.wave as usize;
    let wave = status.waves.get(index)?;
    let adopted_at = wave.adopted_at.as_ref()?.0;
    let length = seconds_between(adopted_at, now).min(analysis.window_seconds());
    if length < SHORTEST_WINDOW_SECONDS {
        return None;
    }
    let baseline = if from_ring_drives_tenants {
        Baseline::Ring(spec.from_ring.clone())
    } else {
        Baseline::Before {
            ring: spec.to_ring.clone(),
            wave: index,
            until: wave.started_at.as_ref().map_or(adopted_at, |t| t.0),
        }
    };
    Some(AnalysisWindow {
        canary_ring: spec.to_ring.clone(),
        start: now
            .checked_sub(SignedDuration::from_secs(
                i64::try_from(length).unwrap_or(i64::MAX),
            ))
            .unwrap_or(now),
        end: now,
        step_seconds: (analysis.window_seconds() / 20).clamp(1, 60),
        baseline,
        adopted_at,
    })
}
