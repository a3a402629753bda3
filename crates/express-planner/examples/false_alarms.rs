//! How often the analysis's default floors fail a canary that is no different from its baseline
//! (the false-alarm rate), and how often they catch a real regression (the power), measured by
//! drawing both sides from known distributions:
//!
//! `cargo run --release -p express-planner --example false_alarms [-- TRIALS]`
//!
//! Each trial draws `points` values per side, log-normally spread around the signal's typical
//! level (spread `sigma`: 0.3 is a calm operator, 1.0 a very noisy one), and asks
//! [`read_signal`] for a verdict. A fixed seed: the figures are the same on every run.

use express_api::analysis::{Signal, SignalVerdict, Worse};
use express_planner::analysis::{SignalSeries, floor, read_signal};

/// xorshift64*: enough randomness for a census of verdicts, and no dependency.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> f64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        let bits = self.0.wrapping_mul(0x2545_f491_4f6c_dd1d) >> 11;
        (bits as f64 + 0.5) / (1u64 << 53) as f64
    }

    /// A standard normal draw (Box-Muller).
    fn normal(&mut self) -> f64 {
        let (u, v) = (self.next(), self.next());
        (-2.0 * u.ln()).sqrt() * (std::f64::consts::TAU * v).cos()
    }
}

/// A signal's typical healthy level, and the level a faulty build of the acceptance tests
/// shows (`run --fault`), by the driven reconciles' definitions (docs/benchmarks.md: measured
/// healthy, 0 requests and errors per driven reconcile and a p95 of 2 to 3 ms; chatty, 4 more
/// reads; erring, every fourth reconcile failed; slow, 300 ms more). A log-normal draw cannot
/// centre on 0: the healthy requests and errors are drawn around small stand-ins above it.
fn levels(signal: Signal) -> (f64, f64) {
    match signal {
        Signal::ApiRequestsPerReconcile => (0.1, 4.0),
        Signal::ReconcileErrorRatio => (0.01, 0.25),
        Signal::ReconcileLatencyP95 => (0.003, 0.3),
        // A slope is centred on 0: spread around a 100 KiB/min drift, the leak 2.8 MiB/min.
        Signal::MemoryGrowth => (100.0 * 1024.0 / 60.0, 2.8 * 1024.0 * 1024.0 / 60.0),
    }
}

fn draw(rng: &mut Rng, level: f64, sigma: f64, points: usize) -> Vec<f64> {
    (0..points)
        .map(|_| level * (sigma * rng.normal()).exp())
        .collect()
}

fn rate(
    rng: &mut Rng,
    signal: Signal,
    canary: f64,
    base: f64,
    sigma: f64,
    points: usize,
    trials: u32,
) -> f64 {
    let mut worse = 0u32;
    for _ in 0..trials {
        let series = SignalSeries {
            name: signal.as_str().into(),
            worse: Worse::Higher,
            floor: floor(signal),
            canary: Ok(draw(rng, canary, sigma, points)),
            baseline: Ok(draw(rng, base, sigma, points)),
            quiet: None,
        };
        if read_signal(&series).verdict == SignalVerdict::Worse {
            worse += 1;
        }
    }
    f64::from(worse) / f64::from(trials)
}

fn main() {
    let trials: u32 = std::env::args()
        .nth(1)
        .and_then(|t| t.parse().ok())
        .unwrap_or(20_000);
    let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
    println!("{trials} trials per row; points per side, log-normal spread sigma");
    println!(
        "{:<24} {:>6} {:>5} {:>12} {:>10}",
        "signal", "points", "sigma", "false alarm", "caught"
    );
    for signal in Signal::ALL {
        let (healthy, faulty) = levels(signal);
        for (points, sigma) in [(20, 0.3), (20, 1.0), (6, 0.3), (60, 0.3)] {
            let false_alarm = rate(&mut rng, signal, healthy, healthy, sigma, points, trials);
            let caught = rate(&mut rng, signal, faulty, healthy, sigma, points, trials);
            println!(
                "{:<24} {points:>6} {sigma:>5.1} {:>11.3}% {:>9.1}%",
                signal.as_str(),
                false_alarm * 100.0,
                caught * 100.0
            );
        }
    }
}
