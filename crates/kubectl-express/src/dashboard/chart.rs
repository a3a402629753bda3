//! A release's signal over time drawn as SVG on the server: the canary ring's line against the
//! stable ring's, time running left to right up to now, the scale from zero to the highest
//! figure shown. A point without data breaks its line rather than drawing a zero.

use maud::{Markup, html};

use super::model::release::{Chart, ChartPoint, figure};

const WIDTH: f64 = 420.0;
const HEIGHT: f64 = 140.0;
/// Room for the scale on the left and the time axis below.
const LEFT: f64 = 44.0;
const BOTTOM: f64 = 22.0;
const TOP: f64 = 10.0;
const RIGHT: f64 = 10.0;

/// The path of one ring's figures: `M` starts each run of points with data.
fn line(points: &[(f64, Option<f64>)], x: impl Fn(f64) -> f64, y: impl Fn(f64) -> f64) -> String {
    let mut d = String::new();
    let mut drawing = false;
    for (at, value) in points {
        match value {
            Some(v) if v.is_finite() => {
                d.push_str(if drawing { " L" } else { " M" });
                d.push_str(&format!("{:.1} {:.1}", x(*at), y(*v)));
                drawing = true;
            }
            _ => drawing = false,
        }
    }
    d.trim_start().to_owned()
}

/// The scale's top: the next round figure at or above `value` (55 → 60, 0.013 → 0.015).
fn round_up(value: f64) -> f64 {
    let magnitude = 10f64.powf(value.log10().floor());
    [1.0, 1.2, 1.5, 2.0, 2.5, 3.0, 4.0, 5.0, 6.0, 8.0, 10.0]
        .into_iter()
        .map(|step| step * magnitude)
        .find(|top| *top >= value * 0.999_999)
        .unwrap_or(value)
}

/// The chart as an `<svg>` element.
pub fn render(chart: &Chart) -> Markup {
    let span = chart
        .points
        .iter()
        .map(|(ago, _, _)| *ago)
        .max()
        .unwrap_or(0)
        .max(10) as f64;
    let top = chart
        .points
        .iter()
        .flat_map(|(_, c, s)| [*c, *s])
        .flatten()
        .filter(|v| v.is_finite())
        .fold(0.0_f64, f64::max);
    let top = if top > 0.0 { round_up(top * 1.1) } else { 1.0 };
    let plot_width = WIDTH - LEFT - RIGHT;
    let plot_height = HEIGHT - TOP - BOTTOM;
    let x = |ago: f64| LEFT + plot_width * (1.0 - ago / span);
    let y = |value: f64| TOP + plot_height * (1.0 - value / top);
    let series = |pick: fn(&ChartPoint) -> Option<f64>| {
        let points: Vec<(f64, Option<f64>)> =
            chart.points.iter().map(|p| (p.0 as f64, pick(p))).collect();
        line(&points, x, y)
    };
    let canary = series(|p| p.1);
    let stable = series(|p| p.2);
    let oldest = express_triage::age(span as i64);
    html! {
        svg class="chart" width=(WIDTH) height=(HEIGHT) viewBox=(format!("0 0 {WIDTH} {HEIGHT}"))
            role="img" aria-label=(format!("{}: {}", chart.signal, chart.latest)) data-signal=(chart.signal)
            data-points=(chart.points.len()) {
            line class="axis" x1=(LEFT) y1=(TOP + plot_height) x2=(WIDTH - RIGHT) y2=(TOP + plot_height) {}
            line class="axis" x1=(LEFT) y1=(TOP) x2=(LEFT) y2=(TOP + plot_height) {}
            line class="grid" x1=(LEFT) y1=(TOP) x2=(WIDTH - RIGHT) y2=(TOP) {}
            text class="scale" x=(LEFT - 4.0) y=(TOP + 4.0) text-anchor="end" { (figure(top)) }
            text class="scale" x=(LEFT - 4.0) y=(TOP + plot_height) text-anchor="end" { "0" }
            text class="scale" x=(LEFT) y=(HEIGHT - 6.0) { (oldest) " ago" }
            text class="scale" x=(WIDTH - RIGHT) y=(HEIGHT - 6.0) text-anchor="end" { "now" }
            @if !stable.is_empty() { path class="series stable" d=(stable) {} }
            @if !canary.is_empty() { path class="series canary" d=(canary) {} }
            @for (ago, c, s) in &chart.points {
                @if let Some(v) = s.filter(|v| v.is_finite()) {
                    circle class="dot stable" cx=(format!("{:.1}", x(*ago as f64))) cy=(format!("{:.1}", y(v))) r="2" {}
                }
                @if let Some(v) = c.filter(|v| v.is_finite()) {
                    circle class="dot canary" cx=(format!("{:.1}", x(*ago as f64))) cy=(format!("{:.1}", y(v))) r="2" {}
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_gap_without_data_breaks_the_line_and_a_chart_without_points_draws_only_axes() {
        let x = |v: f64| v;
        let y = |v: f64| v;
        assert_eq!(
            line(&[(1.0, Some(2.0)), (2.0, None), (3.0, Some(4.0))], x, y),
            "M1.0 2.0 M3.0 4.0"
        );
        assert_eq!(
            line(
                &[(1.0, Some(2.0)), (2.0, Some(f64::NAN)), (3.0, Some(4.0))],
                x,
                y
            ),
            "M1.0 2.0 M3.0 4.0"
        );
        assert_eq!(
            line(&[(1.0, Some(2.0)), (2.0, Some(3.0))], x, y),
            "M1.0 2.0 L2.0 3.0"
        );
        let empty = render(&Chart {
            signal: "s".into(),
            points: Vec::new(),
            latest: String::new(),
        })
        .into_string();
        assert!(!empty.contains("<path"), "{empty}");
        let drawn = render(&Chart {
            signal: "s".into(),
            points: vec![(120, Some(10.0), Some(0.0)), (0, Some(50.0), Some(0.0))],
            latest: String::new(),
        })
        .into_string();
        assert!(drawn.contains("series canary") && drawn.contains("series stable"));
        assert!(drawn.contains("2m ago"), "{drawn}");
        // The highest figure sits below the top of the plot: 50 × 1.1, rounded up.
        assert!(drawn.contains(">60<"), "{drawn}");
        assert_eq!(round_up(0.013), 0.015);
        assert_eq!(round_up(100.0), 100.0);
        assert_eq!(round_up(7.0), 8.0);
    }
}
