//! Alertmanager's v2 API (`POST /api/v2/alerts`): a condition that holds is a firing alert
//! (no `endsAt`: Alertmanager keeps it for its `resolve_timeout`, and the operator posts it again
//! each minute), one that stopped holding is posted with `endsAt` now (resolved), an event is an
//! alert that ends on its own. Labels identify an alert: the same labels on every post
//! ([`Occurrence::alert_labels`]).

use std::collections::BTreeMap;

use k8s_openapi::jiff::{SignedDuration, Timestamp};
use serde_json::{Value, json};

use crate::config::Config;
use crate::occurrence::Occurrence;
use crate::outbox::{Delivery, EVENT_ALERT_SECONDS};

pub const PATH: &str = "/api/v2/alerts";

pub fn body(delivery: &Delivery, config: &Config, now: Timestamp) -> Value {
    let mut alerts = Vec::new();
    for o in &delivery.firing {
        alerts.push(alert(o, config, None));
    }
    for o in delivery.new.iter().filter(|o| !o.trigger.is_condition()) {
        let ends = o.at.max(now) + SignedDuration::from_secs(EVENT_ALERT_SECONDS);
        alerts.push(alert(o, config, Some(ends)));
    }
    for labels in &delivery.resolved {
        alerts.push(json!({"labels": labels, "endsAt": now.to_string()}));
    }
    Value::Array(alerts)
}

fn alert(o: &Occurrence, config: &Config, ends: Option<Timestamp>) -> Value {
    let description: Vec<String> = o
        .facts
        .iter()
        .map(|f| format!("{}: {}", f.name, f.value))
        .collect();
    let mut annotations = BTreeMap::from([
        ("summary".to_owned(), o.title.clone()),
        ("description".to_owned(), description.join("\n")),
    ]);
    if let Some(act) = &o.act {
        annotations.insert("command".into(), act.clone());
    }
    let mut alert = json!({
        "labels": o.alert_labels(config.dc.as_deref()),
        "annotations": annotations,
        "startsAt": o.at.to_string(),
    });
    if let Some(ends) = ends {
        alert["endsAt"] = json!(ends.to_string());
    }
    if let Some(link) = super::link(config, o) {
        alert["generatorURL"] = json!(link);
    }
    alert
}
