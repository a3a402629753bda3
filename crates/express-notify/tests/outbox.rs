//! What each destination is sent, pass after pass: once per occurrence, grouped under a flood,
//! retried after a failure, resumed by a new leader from the ledger; an Alertmanager's alerts
//! fire, repeat and resolve.

mod fixtures;

use std::collections::BTreeMap;

use express_notify::outbox::{self, ALERT_REPEAT_SECONDS};
use express_notify::{Ledger, Occurrence, Trigger, observe};
use fixtures::*;
use proptest::prelude::*;

fn failing_tenants(count: usize, spread: i64) -> Vec<Occurrence> {
    (0..count)
        .flat_map(|i| {
            let at = spread * i as i64 / count.max(1) as i64;
            observe::tenant(&tenant(
                "team-a",
                &format!("t{i:04}"),
                failed("backend", at),
            ))
        })
        .collect()
}

/// Occurrences visible at `now`: those whose instant has come.
fn visible(all: &[Occurrence], now: i64) -> Vec<Occurrence> {
    all.iter()
        .filter(|o| o.at.as_second() <= now)
        .cloned()
        .collect()
}

#[test]
fn a_flood_of_a_thousand_failures_is_one_message_a_minute() {
    let config = config(ONE_WEBHOOK);
    let all = failing_tenants(1000, 30);
    let mut ledger = Ledger::starting(secs(0));
    let mut messages = Vec::new();
    for now in (0..300).map(secs) {
        for delivery in outbox::outbox(&config, &visible(&all, now), &ledger, now).deliveries {
            messages.push((now, delivery.new.len()));
            delivery.accepted(&mut ledger, config.dc.as_deref(), now);
        }
    }
    // The first second's failures at once, the rest of the minute's in one message at its end.
    let at_once = all.iter().filter(|o| o.at.as_second() == secs(0)).count();
    assert_eq!(messages.len(), 2, "{messages:?}");
    assert_eq!(messages[0], (secs(0), at_once));
    assert_eq!(messages[1], (secs(60), 1000 - at_once));
    assert_eq!(messages.iter().map(|m| m.1).sum::<usize>(), 1000);
}

#[test]
fn a_quiet_destination_gathers_for_its_wait_then_sends_once() {
    let config = config(
        "
destinations: [{name: hook, type: webhook, url: 'http://r.example', waitSeconds: 10}]
subscriptions: [{destination: hook}]
",
    );
    let all = failing_tenants(3, 6);
    let mut ledger = Ledger::starting(secs(0));
    let mut sent = Vec::new();
    for now in (0..40).map(secs) {
        let out = outbox::outbox(&config, &visible(&all, now), &ledger, now);
        if out.deliveries.is_empty() && now < secs(10) && now >= secs(0) {
            assert_eq!(out.next_look.map(|t| t.as_second()), Some(secs(10)));
        }
        for d in out.deliveries {
            sent.push((now, d.new.len(), d.is_grouped()));
            d.accepted(&mut ledger, None, now);
        }
    }
    assert_eq!(sent, [(secs(10), 3, true)]);
}

#[test]
fn a_failed_delivery_is_retried_with_backoff_and_sent_once_it_is_accepted() {
    let config = config(ONE_WEBHOOK);
    let all = failing_tenants(1, 1);
    let mut ledger = Ledger::starting(secs(0));
    let mut attempts = Vec::new();
    for now in (0..120).map(secs) {
        for d in outbox::outbox(&config, &visible(&all, now), &ledger, now).deliveries {
            attempts.push(now - secs(0));
            if attempts.len() < 4 {
                ledger.refused("hook", "503 Service Unavailable", now);
            } else {
                d.accepted(&mut ledger, None, now);
            }
        }
    }
    assert_eq!(attempts, [0, 5, 15, 35]);
    assert_eq!(ledger.health("hook").failures, 0);
}

#[test]
fn a_new_leader_sends_what_the_old_one_had_not_and_nothing_it_had() {
    let config = config(ONE_WEBHOOK);
    let all = failing_tenants(2, 0);
    let first = &all[..1];
    let mut ledger = Ledger::starting(secs(0));
    let out = outbox::outbox(&config, first, &ledger, secs(1));
    out.deliveries[0].accepted(&mut ledger, None, secs(1));
    // The old leader dies; the new one reads the ledger back and sees both failures.
    let (read, problem) = Ledger::read(Some(&ledger.to_text()), secs(0), secs(500));
    assert_eq!(problem, None);
    let out = outbox::outbox(&config, &all, &read, secs(500));
    let told: Vec<&str> = out
        .deliveries
        .iter()
        .flat_map(|d| &d.new)
        .map(|o| o.id.as_str())
        .collect();
    assert_eq!(told, [all[1].id.as_str()]);
}

#[test]
fn nothing_older_than_the_ledger_is_announced() {
    let config = config(ONE_WEBHOOK);
    // A tenant whose rollout finished before notifications were set up.
    let old = observe::tenant(&tenant("team-a", "shop", done(10)));
    let ledger = Ledger::starting(secs(3600));
    assert!(
        outbox::outbox(&config, &old, &ledger, secs(3601))
            .deliveries
            .is_empty()
    );
}

#[test]
fn subscriptions_route_by_trigger_namespace_and_annotation() {
    let config = config(
        "
destinations:
  - {name: all, type: webhook, url: 'http://a.example'}
  - {name: failures-a, type: slack, url: 'https://s.example'}
  - {name: pager, type: webhook, url: 'http://p.example'}
  - {name: releases-only, type: webhook, url: 'http://r.example'}
subscriptions:
  - {destination: all}
  - {destination: failures-a, triggers: [rollout-failed], namespaces: [team-a], releases: false}
  - {destination: releases-only, namespaces: [nowhere]}
",
    );
    let route = |o: &Occurrence| -> Vec<String> {
        outbox::routes(&config, o)
            .iter()
            .map(|d| d.name.clone())
            .collect()
    };
    let failure_a = &observe::tenant(&tenant("team-a", "shop", failed("backend", 1)))[0];
    let failure_b = &observe::tenant(&tenant("team-b", "shop", failed("backend", 1)))[0];
    let done_a = &observe::tenant(&tenant("team-a", "shop", done(1)))[0];
    let annotated = &observe::tenant(&tenant_annotated(
        "team-b",
        "shop",
        serde_json::json!({"express.dev/notify": "pager,unknown"}),
        done(1),
    ))[0];
    let rolled_back = &observe::release(&release(
        "r",
        serde_json::json!({"phase": "RolledBack", "rolledBackAt": at(1)}),
    ))[0];
    assert_eq!(route(failure_a), ["all", "failures-a"]);
    assert_eq!(route(failure_b), ["all"]);
    assert_eq!(route(done_a), ["all"]);
    assert_eq!(route(annotated), ["all", "pager"]);
    assert_eq!(route(rolled_back), ["all", "releases-only"]);
}

#[test]
fn an_alertmanager_alert_fires_repeats_and_resolves() {
    let config = config(
        "
dc: dc-a
destinations: [{name: am, type: alertmanager, url: 'http://am.example:9093', waitSeconds: 0}]
subscriptions: [{destination: am}]
",
    );
    let failing = observe::tenant(&tenant("team-a", "shop", failed("backend", 0)));
    let mut ledger = Ledger::starting(secs(0));
    let mut posts = Vec::new();
    for now in (0..200).map(secs) {
        // The failure holds for 150 s, then a retry clears it.
        let shown = if now < secs(150) {
            failing.clone()
        } else {
            Vec::new()
        };
        for d in outbox::outbox(&config, &shown, &ledger, now).deliveries {
            posts.push((now - secs(0), d.firing.len(), d.new.len(), d.resolved.len()));
            d.accepted(&mut ledger, config.dc.as_deref(), now);
        }
    }
    let repeat = ALERT_REPEAT_SECONDS;
    assert_eq!(
        posts,
        [
            (0, 1, 1, 0),
            (repeat, 1, 0, 0),
            (2 * repeat, 1, 0, 0),
            (150, 0, 0, 1)
        ]
    );
    assert!(ledger.firing.is_empty());
    let resolved_labels = failing[0].alert_labels(Some("dc-a"));
    assert_eq!(resolved_labels["alertname"], "ExpressTenantRolloutFailed");
    assert_eq!(resolved_labels["dc"], "dc-a");
}

/// One destination's life in a simulation: what it was sent, and when.
#[derive(Default, Debug)]
struct Received {
    told: BTreeMap<String, usize>,
    messages: Vec<i64>,
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 64, ..ProptestConfig::default() })]

    /// Whatever the flood, the failures and the restarts: every occurrence reaches every
    /// destination it is routed to exactly once, and no webhook gets two messages within its
    /// group interval.
    #[test]
    fn every_occurrence_is_told_once_and_floods_stay_grouped(
        instants in prop::collection::vec(0i64..900, 0..60),
        group_seconds in 1u64..120,
        wait_seconds in 0u64..30,
        // At most 12 refusals: their backoffs (5 s doubling to 5 min) add up to 2,115 s, which the
        // simulation's 4,000 s outlast after the last occurrence (900 s).
        refusals in prop::collection::vec(any::<bool>(), 0..12),
        restarts in prop::collection::vec(0i64..1200, 0..4),
    ) {
        let config = config(&format!("
destinations:
  - {{name: hook, type: webhook, url: 'http://h.example', groupSeconds: {group_seconds}, waitSeconds: {wait_seconds}}}
  - {{name: chat, type: slack, url: 'https://s.example', groupSeconds: {group_seconds}}}
subscriptions:
  - {{destination: hook}}
  - {{destination: chat, triggers: [rollout-failed]}}
"));
        let all: Vec<Occurrence> = instants.iter().enumerate().flat_map(|(i, at)| {
            let status = if i % 2 == 0 { failed("backend", *at) } else { done(*at) };
            observe::tenant(&tenant("ns", &format!("t{i}"), status))
        }).collect();
        let mut ledger = Ledger::starting(secs(0));
        let mut refusals = refusals.into_iter();
        let mut received: BTreeMap<String, Received> = BTreeMap::new();
        for now in (0..4000).step_by(3).map(secs) {
            if restarts.iter().any(|r| secs(*r) == now) {
                ledger = Ledger::read(Some(&ledger.to_text()), secs(0), now).0;
            }
            let out = outbox::outbox(&config, &visible(&all, now), &ledger, now);
            let mut seen = std::collections::BTreeSet::new();
            for d in out.deliveries {
                prop_assert!(seen.insert(d.destination.name.clone()), "two deliveries to one destination in a pass");
                if refusals.next().unwrap_or(false) {
                    ledger.refused(&d.destination.name, "503", now);
                    continue;
                }
                let r = received.entry(d.destination.name.clone()).or_default();
                r.messages.push(now);
                for o in &d.new {
                    *r.told.entry(o.id.clone()).or_default() += 1;
                }
                d.accepted(&mut ledger, None, now);
            }
        }
        for (name, r) in &received {
            for (id, times) in &r.told {
                prop_assert_eq!(*times, 1, "{} told {} {} times", name, id, times);
            }
            for pair in r.messages.windows(2) {
                prop_assert!(pair[1] - pair[0] >= group_seconds as i64, "{name}: {:?}", r.messages);
            }
        }
        let hook = received.get("hook").map(|r| r.told.len()).unwrap_or(0);
        prop_assert_eq!(hook, all.len());
        let failures = all.iter().filter(|o| o.trigger == Trigger::RolloutFailed).count();
        prop_assert_eq!(received.get("chat").map(|r| r.told.len()).unwrap_or(0), failures);
    }

    /// No input makes the outbox panic: any ledger text, any instants.
    #[test]
    fn the_outbox_never_panics(text in ".{0,200}", now in any::<i64>(), at in -100_000i64..100_000) {
        let (ledger, _) = Ledger::read(Some(&text), now, now);
        let config = config(ONE_WEBHOOK);
        let shown = observe::tenant(&tenant("ns", "t", failed("backend", at)));
        let _ = outbox::outbox(&config, &shown, &ledger, now);
    }
}
