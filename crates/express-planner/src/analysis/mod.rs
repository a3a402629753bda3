//! The operator's vital signs in a release's sample (DESIGN section 16), as pure functions:
//! which window to read and against which baseline ([`window`]), and what each signal's values
//! say ([`read_signal`], [`analyse`]). The operator reads the values from Prometheus; nothing
//! here does I/O.
//!
//! A signal is *worse* only when the canary's values rank above the baseline's beyond chance
//! (Mann-Whitney, one-sided, [`SIGNIFICANCE`]) **and** the shift between them clears the
//! signal's effect floor, relative to the baseline and absolute (so that noise, and a tiny
//! difference on tiny numbers, never fail a release). *Quiet*: neither ring did the work the
//! signal measures. *No data*: a side could not be read; never ok, never a failure.

mod rank_test;
mod window;

use express_api::analysis::{Signal, SignalReading, SignalVerdict, Worse};
use express_api::release::SampleVerdict;

pub use rank_test::{RankComparison, compare, median};
pub use window::{AnalysisWindow, Baseline, Spans, look_back_seconds, window};

/// How sure the rank test must be (one-sided p below this) before a signal can be worse.
pub const SIGNIFICANCE: f64 = 0.01;

/// The smallest shift that matters: a worse signal's shift exceeds both.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct EffectFloor {
    /// A fraction of the baseline's median (0.5: half as much again).
    pub relative: f64,
    /// In the signal's own unit.
    pub absolute: f64,
}

/// The default floor of a built-in signal.
pub fn floor(signal: Signal) -> EffectFloor {
    match signal {
        // Half as many requests again, and at least one more per reconcile.
        Signal::ApiRequestsPerReconcile => EffectFloor {
            relative: 0.5,
            absolute: 1.0,
        },
        // Half as many failures again, and at least 5 points more.
        Signal::ReconcileErrorRatio => EffectFloor {
            relative: 0.5,
            absolute: 0.05,
        },
        // A quarter slower, and at least 100 ms.
        Signal::ReconcileLatencyP95 => EffectFloor {
            relative: 0.25,
            absolute: 0.1,
        },
        // Growing at least 1 MiB a minute faster (a healthy operator's slope is about 0).
        Signal::MemoryGrowth => EffectFloor {
            relative: 0.5,
            absolute: 1024.0 * 1024.0 / 60.0,
        },
    }
}

/// The floor of a custom signal: a quarter worse.
pub const CUSTOM_FLOOR: EffectFloor = EffectFloor {
    relative: 0.25,
    absolute: 0.0,
};

/// One signal's values over the window, as the operator read them.
#[derive(Clone, Debug, PartialEq)]
pub struct SignalSeries {
    pub name: String,
    pub worse: Worse,
    pub floor: EffectFloor,
    /// The canary's values (`Err`: what could not be read).
    pub canary: Result<Vec<f64>, String>,
    pub baseline: Result<Vec<f64>, String>,
    /// Why there is nothing to judge, if so.
    pub quiet: Option<Quiet>,
}

/// Why a signal has nothing to judge in a sample (never ok, never a failure: the sample rests
/// on the other signals and the tenants).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Quiet {
    /// Neither ring did the work this signal measures in the window.
    Idle,
    /// Every point's look-back still reaches into the wave's hand-over.
    Settling { look_back_seconds: u64 },
}

impl Quiet {
    fn reason(self) -> String {
        match self {
            Quiet::Idle => "neither ring reconciled in the window".into(),
            Quiet::Settling { look_back_seconds } => format!(
                "settling: every point's {look_back_seconds}s look-back still reaches into the hand-over"
            ),
        }
    }
}

/// What the operator read for one sample.
#[derive(Clone, Debug, PartialEq)]
pub struct Analysis {
    /// What the baseline is, in words (`ring default`, `ring canary before wave 3`).
    pub baseline: String,
    /// Every signal, or why Prometheus could not be read at all.
    pub signals: Result<Vec<SignalSeries>, String>,
}

/// One signal's verdict, with the medians shown beside it.
pub fn read_signal(series: &SignalSeries) -> SignalReading {
    let middle = |side: &Result<Vec<f64>, String>| {
        let mut finite: Vec<f64> = side
            .as_ref()
            .ok()?
            .iter()
            .copied()
            .filter(|v| v.is_finite())
            .collect();
        (!finite.is_empty()).then(|| median(&mut finite))
    };
    let mut reading = SignalReading {
        signal: series.name.clone(),
        canary: middle(&series.canary),
        baseline: middle(&series.baseline),
        verdict: SignalVerdict::Ok,
        reason: String::new(),
    };
    if let Some(quiet) = series.quiet {
        reading.verdict = SignalVerdict::Quiet;
        reading.reason = quiet.reason();
        return reading;
    }
    let (canary, baseline) = match (&series.canary, &series.baseline) {
        (Err(why), _) | (_, Err(why)) => {
            reading.verdict = SignalVerdict::NoData;
            reading.reason = why.clone();
            return reading;
        }
        (Ok(canary), Ok(baseline)) => (canary, baseline),
    };
    // Lower is worse: compare the negated values, so that "greater" still means worse.
    let oriented = |values: &[f64]| -> Vec<f64> {
        match series.worse {
            Worse::Higher => values.to_vec(),
            Worse::Lower => values.iter().map(|v| -v).collect(),
        }
    };
    let Some(found) = compare(&oriented(canary), &oriented(baseline)) else {
        reading.verdict = SignalVerdict::NoData;
        reading.reason = format!(
            "no values in the window ({} canary, {} baseline)",
            canary.len(),
            baseline.len()
        );
        return reading;
    };
    let needed = series
        .floor
        .absolute
        .max(series.floor.relative * found.baseline_median.abs());
    if found.p_greater < SIGNIFICANCE && found.shift > needed {
        reading.verdict = SignalVerdict::Worse;
        reading.reason = format!(
            "worse by {} (p = {:.4}; floor {})",
            figure(found.shift),
            found.p_greater,
            figure(needed)
        );
    }
    reading
}

/// Every signal read, and the sample's verdict from them alone: failed naming the signals
/// worse, inconclusive naming those without data, else ok.
pub fn analyse(analysis: &Analysis) -> (Vec<SignalReading>, SampleVerdict, String) {
    let signals = match &analysis.signals {
        Err(why) => {
            return (
                Vec::new(),
                SampleVerdict::Inconclusive,
                format!("no data: Prometheus: {why}"),
            );
        }
        Ok(signals) => signals,
    };
    let readings: Vec<SignalReading> = signals.iter().map(read_signal).collect();
    let named = |verdict: SignalVerdict| -> Vec<String> {
        readings
            .iter()
            .filter(|r| r.verdict == verdict)
            .map(|r| format!("{} ({})", r.signal, r.reason))
            .collect()
    };
    let (worse, missing) = (named(SignalVerdict::Worse), named(SignalVerdict::NoData));
    let (verdict, why) = if !worse.is_empty() {
        (
            SampleVerdict::Failed,
            format!(
                "signal worse than {}: {}",
                analysis.baseline,
                worse.join("; ")
            ),
        )
    } else if !missing.is_empty() {
        (
            SampleVerdict::Inconclusive,
            format!("no data for signal {}", missing.join("; ")),
        )
    } else {
        (
            SampleVerdict::Ok,
            format!("every signal ok or quiet against {}", analysis.baseline),
        )
    };
    (readings, verdict, why)
}

/// Every signal's figures, as a sample's event keeps them: `signal canary vs baseline
/// (verdict)`, medians over the window, `-` where a ring had none.
pub fn evidence(readings: &[SignalReading]) -> String {
    let side = |v: Option<f64>| v.map_or_else(|| "-".to_owned(), figure);
    readings
        .iter()
        .map(|r| {
            format!(
                "{} {} vs {} ({})",
                r.signal,
                side(r.canary),
                side(r.baseline),
                r.verdict.as_str()
            )
        })
        .collect::<Vec<_>>()
        .join(", ")
}

/// A figure in few digits.
fn figure(value: f64) -> String {
    if value.abs() >= 100.0 {
        format!("{value:.0}")
    } else {
        format!("{value:.3}")
    }
}

#[cfg(test)]
mod tests;
