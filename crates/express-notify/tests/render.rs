//! Each destination's format: the webhook's documented JSON and its signature, Slack's Block
//! Kit within Slack's limits even under a flood, Alertmanager's alerts.

mod fixtures;

use express_notify::render::{self, SIGNATURE_HEADER, slack};
use express_notify::{Ledger, Occurrence, observe, outbox};
use fixtures::*;
use serde_json::Value;

fn delivery(config_text: &str, shown: &[Occurrence]) -> (express_notify::Config, outbox::Delivery) {
    let config = config(config_text);
    let ledger = Ledger::starting(secs(0));
    let mut out = outbox::outbox(&config, shown, &ledger, secs(10_000));
    assert_eq!(out.deliveries.len(), 1);
    (config, out.deliveries.remove(0))
}

fn body(message: &render::Message) -> Value {
    serde_json::from_slice(&message.body).unwrap_or_default()
}

fn now() -> k8s_openapi::jiff::Timestamp {
    at(10_000).parse().unwrap_or_default()
}

#[test]
fn a_webhook_body_names_its_schema_dc_and_each_notification_and_is_signed() {
    let shown = observe::tenant(&tenant("team-a", "shop", failed("frontend-2", 5)));
    let (config, delivery) = delivery(
        "
dc: dc-a
dashboardUrl: http://dash.example/
destinations: [{name: hook, type: webhook, url: 'http://h.example', signingSecretKey: k}]
subscriptions: [{destination: hook}]
",
        &shown,
    );
    let message = render::render(&delivery, &config, Some(b"secret"), now());
    let json = body(&message);
    assert_eq!(json["schema"], "express.dev/notifications/v1");
    assert_eq!(json["dc"], "dc-a");
    assert_eq!(json["grouped"], false);
    assert_eq!(
        json["summary"],
        "Rollout of team-a/shop failed at node frontend-2"
    );
    let n = &json["notifications"][0];
    assert_eq!(n["trigger"], "rollout-failed");
    assert_eq!(n["severity"], "error");
    assert_eq!(n["subject"]["namespace"], "team-a");
    assert_eq!(n["link"], "http://dash.example/tenants/team-a/shop");
    assert_eq!(n["act"], "kubectl express retry shop -n team-a");
    assert_eq!(n["id"], shown[0].id.as_str());
    let signature = message
        .headers
        .iter()
        .find(|(name, _)| *name == SIGNATURE_HEADER)
        .map(|(_, v)| v.clone());
    assert_eq!(
        signature,
        Some(render::webhook::signature(b"secret", &message.body))
    );
}

/// Every text object of a Block Kit message, with its limit.
fn texts(blocks: &[Value]) -> Vec<(String, usize)> {
    let mut out = Vec::new();
    for block in blocks {
        match block["type"].as_str() {
            Some("header") => out.push((
                block["text"]["text"].as_str().unwrap_or("").into(),
                slack::MAX_HEADER,
            )),
            Some("section") => {
                if let Some(t) = block["text"]["text"].as_str() {
                    out.push((t.into(), slack::MAX_TEXT));
                }
                for f in block["fields"].as_array().into_iter().flatten() {
                    out.push((f["text"].as_str().unwrap_or("").into(), 2000));
                }
            }
            Some("context") => {
                for e in block["elements"].as_array().into_iter().flatten() {
                    out.push((e["text"].as_str().unwrap_or("").into(), slack::MAX_TEXT));
                }
            }
            other => panic!("block type {other:?} not expected"),
        }
    }
    out
}

#[test]
fn a_slack_flood_stays_within_slacks_limits() {
    let shown: Vec<Occurrence> = (0..1000)
        .flat_map(|i| {
            let status = if i % 3 == 0 {
                done(5)
            } else {
                failed("backend", 5)
            };
            observe::tenant(&tenant(
                "team-a",
                &format!("tenant-with-a-long-name-{i:04}"),
                status,
            ))
        })
        .collect();
    let (config, delivery) = delivery(
        "
destinations: [{name: chat, type: slack, url: 'https://s.example'}]
subscriptions: [{destination: chat}]
",
        &shown,
    );
    let json = body(&render::render(&delivery, &config, None, now()));
    let blocks = json["blocks"].as_array().cloned().unwrap_or_default();
    assert!(!blocks.is_empty() && blocks.len() <= slack::MAX_BLOCKS);
    for (text, limit) in texts(&blocks) {
        assert!(!text.is_empty() && text.chars().count() <= limit, "{text}");
    }
    assert_eq!(
        json["text"],
        "1000 notifications: 334 rollout-done, 666 rollout-failed"
    );
    let listed = blocks[1]["text"]["text"].as_str().unwrap_or("");
    assert!(listed.ends_with("… and 656 more"), "{listed}");
}

#[test]
fn a_single_slack_message_has_its_facts_as_fields_and_its_command() {
    let shown = observe::tenant(&tenant("team-a", "shop", failed("frontend-2", 5)));
    let (config, delivery) = delivery(
        "
dc: dc-a
destinations: [{name: chat, type: slack, url: 'https://s.example'}]
subscriptions: [{destination: chat}]
",
        &shown,
    );
    let json = body(&render::render(&delivery, &config, None, now()));
    let blocks = json["blocks"].as_array().cloned().unwrap_or_default();
    assert_eq!(
        blocks[0]["text"]["text"],
        "🔴 Rollout of team-a/shop failed at node frontend-2 (dc-a)"
    );
    let fields = blocks[1]["fields"].as_array().cloned().unwrap_or_default();
    assert!(fields.len() <= slack::MAX_FIELDS);
    assert_eq!(fields[2]["text"], "*failed node*\nfrontend-2");
    assert_eq!(
        blocks[2]["elements"][0]["text"],
        "`kubectl express retry shop -n team-a`"
    );
    for (text, limit) in texts(&blocks) {
        assert!(text.chars().count() <= limit);
    }
}

#[test]
fn alertmanager_gets_firing_conditions_events_that_end_and_resolutions() {
    let mut shown = observe::tenant(&tenant("team-a", "shop", failed("backend", 5)));
    shown.extend(observe::tenant(&tenant("team-a", "cart", done(5))));
    let (config, delivery) = delivery(
        "
dc: dc-a
destinations: [{name: am, type: alertmanager, url: 'http://am.example:9093'}]
subscriptions: [{destination: am}]
",
        &shown,
    );
    let message = render::render(&delivery, &config, None, now());
    assert_eq!(message.path, "/api/v2/alerts");
    let alerts = body(&message).as_array().cloned().unwrap_or_default();
    assert_eq!(alerts.len(), 2);
    let failed_alert = &alerts[0];
    assert_eq!(
        failed_alert["labels"]["alertname"],
        "ExpressTenantRolloutFailed"
    );
    assert_eq!(failed_alert["labels"]["dc"], "dc-a");
    assert!(
        failed_alert.get("endsAt").is_none(),
        "a condition fires until it clears"
    );
    assert_eq!(
        failed_alert["annotations"]["command"],
        "kubectl express retry shop -n team-a"
    );
    let done_alert = &alerts[1];
    assert_eq!(
        done_alert["labels"]["alertname"],
        "ExpressTenantRolloutDone"
    );
    assert_eq!(done_alert["endsAt"], at(10_600).as_str());
}
