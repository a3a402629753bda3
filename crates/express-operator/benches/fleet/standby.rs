//! 6. A standby replica's start on the settled fleet, its watches filled by paged lists and
//!    by streaming lists (`--streaming-lists`): what a restarted operator or a second replica
//!    costs to get ready, beside the one that leads. A real API server streams from its watch
//!    cache, where kubesim answers both ways from its store, so the two substrates may order
//!    them differently.

use std::time::{Duration, Instant};

use crate::Bench;
use crate::harness::start_standby;
use crate::http::http_get;
use crate::metrics_text::parse;

const RUNS: usize = 2;

/// One start: until `/readyz` answers (every cache filled).
struct Start {
    ready_seconds: f64,
    cpu_seconds: f64,
    /// VmHWM once ready and 10 s after: the fill's peak, not a later burst's.
    peak_rss_mib: f64,
    lists: f64,
    watches: f64,
}

pub async fn standby_starts(bench: &Bench) {
    for (way, extra) in [("paged", &[][..]), ("streamed", &["--streaming-lists"][..])] {
        let mut starts = Vec::new();
        for run in 0..RUNS {
            starts.push(one_start(bench, &format!("standby-{way}-{run}"), extra).await);
        }
        let pick = |value: fn(&Start) -> f64| {
            let mut values: Vec<f64> = starts.iter().map(value).collect();
            values.sort_by(f64::total_cmp);
            (values[0], values[values.len() / 2])
        };
        let (ready, cpu, rss) = (
            pick(|s| s.ready_seconds),
            pick(|s| s.cpu_seconds),
            pick(|s| s.peak_rss_mib),
        );
        let last = starts.last().expect("a start");
        println!(
            "standby start ({way} lists) over {} tenants (best, median of {RUNS}): ready in {:.2}, {:.2} s; CPU {:.2}, {:.2} s; peak RSS {:.0}, {:.0} MiB; {:.0} lists and {:.0} watches opened",
            bench.args.tenants,
            ready.0,
            ready.1,
            cpu.0,
            cpu.1,
            rss.0,
            rss.1,
            last.lists,
            last.watches
        );
    }
}

async fn one_start(bench: &Bench, name: &str, extra: &[&str]) -> Start {
    let standby = start_standby(&bench.args, &bench.sim, &bench.dir, name, extra);
    let started = Instant::now();
    let deadline = started + bench.timeout;
    let ready_url = format!("{}/readyz", standby.metrics);
    loop {
        assert!(Instant::now() < deadline, "timed out: a standby's start");
        if http_get(&ready_url)
            .await
            .is_some_and(|(code, _)| code == 200)
        {
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let ready_seconds = started.elapsed().as_secs_f64();
    let cpu_seconds = standby.process.cpu_seconds();
    tokio::time::sleep(Duration::from_secs(10)).await;
    let (mut lists, mut watches) = (0.0, 0.0);
    if let Some((200, text)) = http_get(&format!("{}/metrics", standby.metrics)).await {
        for sample in parse(&text)
            .into_iter()
            .filter(|s| s.name == "express_operator_api_requests_total")
        {
            match sample.labels.get("verb").map(String::as_str) {
                Some("list") => lists += sample.value,
                Some("watch") => watches += sample.value,
                _ => {}
            }
        }
    }
    Start {
        ready_seconds,
        cpu_seconds,
        peak_rss_mib: standby.process.peak_rss_mib(),
        lists,
        watches,
    }
}
