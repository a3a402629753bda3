//! One pass of the notify loop at fleet size, without its I/O (DESIGN section 21): what a
//! leader spends every 2 s reading 10,000 tenants for occurrences, asking the outbox what is
//! due against a ledger that already holds a flood's 1,000 failures, and writing the ledger's
//! text to compare with what it last stored.

#![allow(clippy::expect_used, clippy::unwrap_used)] // a bench fails loudly on unexpected values

#[path = "../tests/fixtures/mod.rs"]
mod fixtures;

use std::hint::black_box;

use criterion::{Criterion, criterion_group, criterion_main};
use express_api::ExpressCluster;
use express_notify::{Ledger, Occurrence, observe, outbox};
use fixtures::*;

const TENANTS: usize = 10_000;
const FAILING: usize = 1_000;

/// A fleet of `TENANTS`: every tenth failed within the last minute, the rest done an hour ago.
fn fleet() -> Vec<ExpressCluster> {
    (0..TENANTS)
        .map(|i| {
            let status = if i % (TENANTS / FAILING) == 0 {
                failed("backend", 3600 + (i % 60) as i64)
            } else {
                done(60)
            };
            tenant(&format!("team-{:03}", i / 100), &format!("t{i:05}"), status)
        })
        .collect()
}

fn occurrences(fleet: &[ExpressCluster]) -> Vec<Occurrence> {
    fleet.iter().flat_map(observe::tenant).collect()
}

fn pass(c: &mut Criterion) {
    let config = config(ONE_WEBHOOK);
    let fleet = fleet();
    let found = occurrences(&fleet);
    // The flood told: every failure sent and recorded, as after its minute of grouping.
    let mut ledger = Ledger::starting(secs(3000));
    for now in (3600..3800).step_by(2).map(secs) {
        for delivery in outbox::outbox(&config, &found, &ledger, now).deliveries {
            delivery.accepted(&mut ledger, config.dc.as_deref(), now);
        }
    }
    let now = secs(3900);
    assert!(
        outbox::outbox(&config, &found, &ledger, now)
            .deliveries
            .is_empty(),
        "the flood was told before the pass measured"
    );

    let mut group = c.benchmark_group("notify pass, 10,000 tenants, 1,000 failures told");
    group.bench_function("observe every tenant", |b| {
        b.iter(|| occurrences(black_box(&fleet)))
    });
    group.bench_function("outbox: nothing new is due", |b| {
        b.iter(|| outbox::outbox(&config, black_box(&found), &ledger, now))
    });
    group.bench_function("the ledger's text", |b| b.iter(|| ledger.to_text()));
    group.bench_function("a whole pass", |b| {
        b.iter(|| {
            let found = occurrences(black_box(&fleet));
            let out = outbox::outbox(&config, &found, &ledger, now);
            (out, ledger.to_text())
        })
    });
    group.finish();
}

criterion_group!(benches, pass);
criterion_main!(benches);
