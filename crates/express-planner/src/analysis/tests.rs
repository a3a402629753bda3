//! Each verdict of a signal beside its twin, the sample's verdict from its signals, the
//! window's rules; and the property the note reports: the same distribution on both sides
//! never fails at the default floors.

use express_api::analysis::{Signal, SignalVerdict, Worse};
use express_api::release::SampleVerdict;
use proptest::prelude::*;

use super::*;

fn series(canary: Vec<f64>, baseline: Vec<f64>, signal: Signal) -> SignalSeries {
    SignalSeries {
        name: signal.as_str().into(),
        worse: Worse::Higher,
        floor: floor(signal),
        canary: Ok(canary),
        baseline: Ok(baseline),
        quiet: None,
    }
}

/// `n` values around `center`, spread by `spread` (a fixed zig-zag: no randomness in rows).
fn around(center: f64, spread: f64, n: usize) -> Vec<f64> {
    (0..n)
        .map(|i| center + spread * (((i * 7) % 11) as f64 / 10.0 - 0.5))
        .collect()
}

#[test]
fn each_signal_is_worse_only_past_chance_and_its_floor() {
    use Signal::*;
    let rows: Vec<(&str, SignalSeries, SignalVerdict)> = vec![
        (
            "3x the requests per reconcile",
            series(
                around(15.0, 1.0, 30),
                around(5.0, 1.0, 30),
                ApiRequestsPerReconcile,
            ),
            SignalVerdict::Worse,
        ),
        (
            "20% more requests: under the relative floor",
            series(
                around(6.0, 0.5, 30),
                around(5.0, 0.5, 30),
                ApiRequestsPerReconcile,
            ),
            SignalVerdict::Ok,
        ),
        (
            "a fifth of reconciles failing against none",
            series(around(0.22, 0.04, 30), vec![0.0; 30], ReconcileErrorRatio),
            SignalVerdict::Worse,
        ),
        (
            "2% failing against none: under the absolute floor",
            series(around(0.02, 0.01, 30), vec![0.0; 30], ReconcileErrorRatio),
            SignalVerdict::Ok,
        ),
        (
            "300 ms slower",
            series(
                around(0.4, 0.05, 30),
                around(0.1, 0.05, 30),
                ReconcileLatencyP95,
            ),
            SignalVerdict::Worse,
        ),
        (
            "20 ms slower on a 10 ms baseline: under the absolute floor",
            series(
                around(0.03, 0.005, 30),
                around(0.01, 0.005, 30),
                ReconcileLatencyP95,
            ),
            SignalVerdict::Ok,
        ),
        (
            "growing 2 MiB a minute",
            series(
                around(35_000.0, 5_000.0, 30),
                around(0.0, 5_000.0, 30),
                MemoryGrowth,
            ),
            SignalVerdict::Worse,
        ),
        (
            "the same memory slope",
            series(
                around(100.0, 5_000.0, 30),
                around(0.0, 5_000.0, 30),
                MemoryGrowth,
            ),
            SignalVerdict::Ok,
        ),
        (
            "much better than the baseline",
            series(
                around(1.0, 0.2, 30),
                around(9.0, 0.2, 30),
                ApiRequestsPerReconcile,
            ),
            SignalVerdict::Ok,
        ),
        (
            "a large shift on three points: not beyond chance",
            series(
                vec![9.0, 1.0, 20.0],
                vec![1.0, 8.0, 2.0],
                ApiRequestsPerReconcile,
            ),
            SignalVerdict::Ok,
        ),
    ];
    for (name, s, want) in rows {
        let got = read_signal(&s);
        assert_eq!(got.verdict, want, "{name}: {got:?}");
        assert!(got.canary.is_some() && got.baseline.is_some(), "{name}");
    }
}

#[test]
fn quiet_and_no_data_are_neither_ok_nor_worse() {
    let mut quiet = series(vec![], vec![], Signal::ReconcileErrorRatio);
    quiet.quiet = Some(Quiet::Idle);
    assert_eq!(read_signal(&quiet).verdict, SignalVerdict::Quiet);
    let mut missing = series(vec![1.0], vec![], Signal::ReconcileErrorRatio);
    missing.baseline = Err("ring default: no series express_operator_reconciles_total".into());
    let read = read_signal(&missing);
    assert_eq!(read.verdict, SignalVerdict::NoData);
    assert!(read.reason.contains("ring default"), "{read:?}");
    let empty = series(vec![], vec![1.0], Signal::ReconcileErrorRatio);
    assert_eq!(read_signal(&empty).verdict, SignalVerdict::NoData);
    // Points that are not numbers (a ratio over no reconcile) are no values, and no median.
    let gaps = series(
        vec![f64::NAN, 2.0, f64::NAN],
        vec![f64::NAN],
        Signal::ReconcileErrorRatio,
    );
    let read = read_signal(&gaps);
    assert_eq!(
        (read.verdict, read.canary, read.baseline),
        (SignalVerdict::NoData, Some(2.0), None)
    );
}

#[test]
fn lower_is_worse_when_a_custom_signal_says_so() {
    let mut s = series(
        around(50.0, 2.0, 20),
        around(100.0, 2.0, 20),
        Signal::ApiRequestsPerReconcile,
    );
    s.floor = CUSTOM_FLOOR;
    assert_eq!(read_signal(&s).verdict, SignalVerdict::Ok);
    s.worse = Worse::Lower;
    assert_eq!(read_signal(&s).verdict, SignalVerdict::Worse);
}

#[test]
fn a_sample_fails_on_a_worse_signal_holds_on_no_data_and_is_ok_otherwise() {
    let worse = series(
        around(15.0, 1.0, 30),
        around(5.0, 1.0, 30),
        Signal::ApiRequestsPerReconcile,
    );
    let fine = series(
        around(5.0, 1.0, 30),
        around(5.0, 1.0, 30),
        Signal::ReconcileLatencyP95,
    );
    let mut missing = fine.clone();
    missing.canary = Err("ring canary: no series".into());
    let mut quiet = fine.clone();
    quiet.quiet = Some(Quiet::Idle);
    let of = |signals: Vec<SignalSeries>| {
        analyse(&Analysis {
            baseline: "ring default".into(),
            signals: Ok(signals),
        })
    };
    let (readings, verdict, why) = of(vec![worse.clone(), missing.clone()]);
    assert_eq!((readings.len(), verdict), (2, SampleVerdict::Failed));
    assert!(
        why.starts_with("signal worse than ring default: apiRequestsPerReconcile"),
        "{why}"
    );
    let (_, verdict, why) = of(vec![fine.clone(), missing]);
    assert_eq!(verdict, SampleVerdict::Inconclusive);
    assert!(why.contains("ring canary: no series"), "{why}");
    assert_eq!(of(vec![fine, quiet]).1, SampleVerdict::Ok);
    let (readings, verdict, why) = analyse(&Analysis {
        baseline: "ring default".into(),
        signals: Err("connection refused".into()),
    });
    assert!(readings.is_empty());
    assert_eq!(verdict, SampleVerdict::Inconclusive);
    assert_eq!(why, "no data: Prometheus: connection refused");
}

/// A window of `length` seconds ending `since_adoption` seconds after the wave's adoption
/// (at second 1,000,000), read every second, against ring default.
fn window_after_adoption(since_adoption: i64, length: i64) -> AnalysisWindow {
    let at = |s: i64| k8s_openapi::jiff::Timestamp::from_second(1_000_000 + s).unwrap_or_default();
    AnalysisWindow {
        canary_ring: "canary".into(),
        start: at(since_adoption - length),
        end: at(since_adoption),
        step_seconds: 1,
        baseline: Baseline::Ring("default".into()),
        adopted_at: at(0),
    }
}

fn seconds_after_adoption(t: k8s_openapi::jiff::Timestamp) -> i64 {
    t.as_second() - 1_000_000
}

#[test]
fn a_signal_is_read_only_from_its_first_point_clear_of_the_hand_over() {
    let early = window_after_adoption(15, 15);
    // Clear: the look-back, then a step and 5 s for the figures to reach Prometheus.
    let rates = early
        .span(4)
        .expect("a rate's points clear after 4 + 1 + 5 s");
    assert_eq!(
        (
            seconds_after_adoption(rates.canary.0),
            seconds_after_adoption(rates.canary.1)
        ),
        (10, 15)
    );
    assert_eq!(
        rates.baseline, rates.canary,
        "ring default over the same span"
    );
    assert_eq!(
        early.span(30),
        None,
        "the heap's 30 s slope is still settling"
    );

    let later = window_after_adoption(45, 30);
    let heap = later.span(30).expect("clear from second 36");
    assert_eq!(seconds_after_adoption(heap.canary.0), 36);
    let rates = later.span(4).expect("the whole window");
    assert_eq!(seconds_after_adoption(rates.canary.0), 15);

    // Against itself before the wave: a span as long, ending when the wave began.
    let mut before = later.clone();
    let until = k8s_openapi::jiff::Timestamp::from_second(900_000).unwrap_or_default();
    before.baseline = Baseline::Before {
        ring: "canary".into(),
        wave: 1,
        until,
    };
    let heap = before.span(30).expect("clear from second 36");
    assert_eq!(heap.baseline_ring, "canary");
    assert_eq!(
        (heap.baseline.0.as_second(), heap.baseline.1.as_second()),
        (900_000 - 9, 900_000)
    );
}

#[test]
fn look_backs_are_four_steps_and_the_heaps_at_least_30_s() {
    assert_eq!(
        look_back_seconds(Some(Signal::ApiRequestsPerReconcile), 15),
        60
    );
    assert_eq!(look_back_seconds(Some(Signal::MemoryGrowth), 1), 30);
    assert_eq!(look_back_seconds(Some(Signal::MemoryGrowth), 15), 60);
    assert_eq!(look_back_seconds(None, 15), 0);
}

/// The cause of a healthy canary's failed sample (issue 69): the canary's heap steps up as it
/// takes the wave's tenants on, and a slope whose look-back spans the step reads as growth.
/// Prometheus's `deriv` over `look_back` seconds of 1 s scrapes, at the points of `span`, of a
/// heap `step` bytes higher from the adoption on, as Prometheus sees it: published at the next
/// 5 s mark (5 s after the adoption at worst) and scraped a second later.
fn heap_slopes(span: (i64, i64), look_back: i64, step: f64) -> Vec<f64> {
    let heap = |u: i64| if u >= 6 { step } else { 0.0 };
    (span.0..=span.1)
        .map(|t| {
            let xs: Vec<f64> = (t - look_back + 1..=t).map(|u| u as f64).collect();
            let ys: Vec<f64> = (t - look_back + 1..=t).map(heap).collect();
            let n = xs.len() as f64;
            let (mx, my) = (xs.iter().sum::<f64>() / n, ys.iter().sum::<f64>() / n);
            let covariance: f64 = xs.iter().zip(&ys).map(|(x, y)| (x - mx) * (y - my)).sum();
            let variance: f64 = xs.iter().map(|x| (x - mx) * (x - mx)).sum();
            covariance / variance
        })
        .collect()
}

#[test]
fn a_heap_step_at_the_hand_over_is_no_leak() {
    let look_back = look_back_seconds(Some(Signal::MemoryGrowth), 1);
    let step = 768.0 * 1024.0;
    let flat = |n: usize| around(0.0, 200.0, n);
    // Read over the whole window, as before this was fixed, an early sample's slopes span the
    // step: worse than a flat baseline, a false alarm.
    let early = window_after_adoption(20, 20);
    let whole = (
        seconds_after_adoption(early.start),
        seconds_after_adoption(early.end),
    );
    let slopes = heap_slopes(whole, look_back as i64, step);
    let n = slopes.len();
    let read = read_signal(&series(slopes, flat(n), Signal::MemoryGrowth));
    assert_eq!(read.verdict, SignalVerdict::Worse, "{read:?}");
    // Now: nothing to read yet, then only slopes clear of the step.
    assert_eq!(early.span(look_back), None);
    // Clear of the adoption by the look-back alone was not enough: the step reached Prometheus
    // after it.
    let at_30 = heap_slopes((30, 31), look_back as i64, step);
    assert!(at_30.iter().all(|slope| *slope > 10_000.0), "{at_30:?}");
    for since_adoption in [36, 40, 45, 60] {
        let window = window_after_adoption(since_adoption, 30.min(since_adoption));
        let spans = window.span(look_back).expect("clear of the hand-over");
        let clear = (
            seconds_after_adoption(spans.canary.0),
            seconds_after_adoption(spans.canary.1),
        );
        let slopes = heap_slopes(clear, look_back as i64, step);
        let n = slopes.len();
        let read = read_signal(&series(slopes, flat(n), Signal::MemoryGrowth));
        assert_eq!(
            read.verdict,
            SignalVerdict::Ok,
            "{since_adoption} s: {read:?}"
        );
    }
}

proptest! {
    /// The same distribution on both sides (any centre, noise up to ±10% of it, any sizes)
    /// never fails at the default floors: noise that small cannot shift the medians apart by
    /// more than a fifth, and every relative floor is above that (a quarter of 90%, or more).
    #[test]
    fn the_same_distribution_never_fails(
        center in 0.001f64..1e6,
        canary_noise in proptest::collection::vec(-0.1f64..0.1, 3..60),
        baseline_noise in proptest::collection::vec(-0.1f64..0.1, 3..60),
        signal in proptest::sample::select(Signal::ALL.to_vec()),
    ) {
        let values = |noise: &[f64]| noise.iter().map(|n| center * (1.0 + n)).collect::<Vec<_>>();
        let s = series(values(&canary_noise), values(&baseline_noise), signal);
        prop_assert_ne!(read_signal(&s).verdict, SignalVerdict::Worse);
    }

    /// Any values, finite or not, any sizes: a verdict, never a panic.
    #[test]
    fn any_values_get_a_verdict(
        canary in proptest::collection::vec(proptest::num::f64::ANY, 0..20),
        baseline in proptest::collection::vec(proptest::num::f64::ANY, 0..20),
    ) {
        let _ = read_signal(&series(canary, baseline, Signal::MemoryGrowth));
    }
}
