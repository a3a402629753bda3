//! One event store, two views: `v1` Events and `events.k8s.io/v1` Events are the same objects.
//!
//! Events are stored once, in the `v1` form (as the API server stores them in its internal
//! form), and served through `events.k8s.io/v1` by renaming fields both ways:
//!
//! | `events.k8s.io/v1`            | `v1`                                   |
//! |-------------------------------|----------------------------------------|
//! | `regarding`                   | `involvedObject`                       |
//! | `note`                        | `message`                              |
//! | `reportingController`         | `reportingComponent`                   |
//! | `deprecatedSource`            | `source`                               |
//! | `deprecatedCount`             | `count`                                |
//! | `deprecatedFirstTimestamp`    | `firstTimestamp`                       |
//! | `deprecatedLastTimestamp`     | `lastTimestamp`                        |
//! | everything else               | the same name                          |
//!
//! An event written through `events.k8s.io/v1` usually leaves the deprecated fields empty, which
//! would leave `kubectl get events` and `kubectl describe` without a count, a time or a source.
//! So a write through that view also fills the legacy fields from the new ones: `count` from
//! `series.count` (else 1), `lastTimestamp` from `series.lastObservedTime` (else `eventTime`),
//! `firstTimestamp` from `eventTime`, and `source.component` from `reportingController`.

use serde_json::{Map, Value};

use crate::registry::EVENTS_GROUP;

/// `(events.k8s.io/v1 name, v1 name)` of every renamed field.
const RENAMED: &[(&str, &str)] = &[
    ("regarding", "involvedObject"),
    ("note", "message"),
    ("reportingController", "reportingComponent"),
    ("deprecatedSource", "source"),
    ("deprecatedCount", "count"),
    ("deprecatedFirstTimestamp", "firstTimestamp"),
    ("deprecatedLastTimestamp", "lastTimestamp"),
];

/// A stored (`v1`) event as `events.k8s.io/v1` serves it.
pub fn to_events_view(stored: &Value) -> Value {
    let Value::Object(fields) = stored else {
        return stored.clone();
    };
    let mut view = renamed(fields, |(new, core)| (core, new));
    view.insert(
        "apiVersion".into(),
        Value::String(format!("{EVENTS_GROUP}/v1")),
    );
    Value::Object(view)
}

/// An `events.k8s.io/v1` event in the stored (`v1`) form, legacy fields filled in.
pub fn from_events_view(view: &Value) -> Value {
    let Value::Object(fields) = view else {
        return view.clone();
    };
    let mut core = renamed(fields, |(new, core)| (new, core));
    core.insert("apiVersion".into(), Value::String("v1".into()));
    fill_legacy_fields(&mut core);
    Value::Object(core)
}

/// A copy of `fields` with each name `from` renamed to `to`; `direction` picks (from, to) out of
/// a [`RENAMED`] pair.
fn renamed(
    fields: &Map<String, Value>,
    direction: impl Fn((&'static str, &'static str)) -> (&'static str, &'static str),
) -> Map<String, Value> {
    fields
        .iter()
        .map(|(name, value)| {
            let to = RENAMED
                .iter()
                .map(|pair| direction(*pair))
                .find(|(from, _)| from == name)
                .map_or(name.as_str(), |(_, to)| to);
            (to.to_owned(), value.clone())
        })
        .collect()
}

fn fill_legacy_fields(core: &mut Map<String, Value>) {
    let series = core.get("series").filter(|s| s.is_object()).cloned();
    let event_time = core
        .get("eventTime")
        .and_then(Value::as_str)
        .map(to_seconds);
    // A series is the newer writer's running count: it wins over a stale legacy count.
    let count = series
        .as_ref()
        .and_then(|s| s["count"].as_i64())
        .or_else(|| core.get("count").and_then(Value::as_i64))
        .unwrap_or(1);
    core.insert("count".into(), Value::from(count));
    let last_seen = series
        .as_ref()
        .and_then(|s| s["lastObservedTime"].as_str().map(to_seconds))
        .or_else(|| {
            core.get("lastTimestamp")
                .and_then(Value::as_str)
                .map(str::to_owned)
        })
        .or_else(|| event_time.clone());
    if let Some(last_seen) = last_seen {
        core.insert("lastTimestamp".into(), Value::String(last_seen));
    }
    if !core.get("firstTimestamp").is_some_and(Value::is_string)
        && let Some(first) = event_time
    {
        core.insert("firstTimestamp".into(), Value::String(first));
    }
    let has_source = core
        .get("source")
        .is_some_and(|s| s["component"].as_str().is_some_and(|c| !c.is_empty()));
    if !has_source && let Some(controller) = core.get("reportingComponent").and_then(Value::as_str)
    {
        let controller = controller.to_owned();
        let source = core
            .entry("source")
            .or_insert_with(|| Value::Object(Map::new()));
        if !source.is_object() {
            *source = Value::Object(Map::new());
        }
        source["component"] = Value::String(controller);
    }
}

/// `metav1.Time` holds whole seconds: `2026-11-22T09:00:00.123456Z` becomes `...09:00:00Z`.
fn to_seconds(micro_time: &str) -> String {
    match micro_time.split_once('.') {
        Some((whole, _)) => format!("{whole}Z"),
        None => micro_time.to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn recorder_event() -> Value {
        json!({
            "apiVersion": "events.k8s.io/v1", "kind": "Event",
            "metadata": {"name": "acme-fe2.1", "namespace": "tenant-acme"},
            "eventTime": "2026-11-22T09:00:00.123456Z",
            "reportingController": "express-operator", "reportingInstance": "express-operator-0",
            "action": "Upgrade", "reason": "NodeUpgradeStarted", "type": "Normal",
            "regarding": {"kind": "Frontend", "name": "acme-fe2", "namespace": "tenant-acme",
                          "apiVersion": "express.dev/v1alpha1", "uid": "u-1"},
            "note": "upgrading to 9.1",
        })
    }

    #[test]
    fn an_event_written_through_events_k8s_io_reads_as_a_core_event() {
        let core = from_events_view(&recorder_event());
        assert_eq!(core["apiVersion"], "v1");
        assert_eq!(core["involvedObject"]["name"], "acme-fe2");
        assert_eq!(core["message"], "upgrading to 9.1");
        assert_eq!(core["reportingComponent"], "express-operator");
        assert_eq!(core["source"], json!({"component": "express-operator"}));
        assert_eq!(core["count"], 1);
        assert_eq!(core["firstTimestamp"], "2026-11-22T09:00:00Z");
        assert_eq!(core["lastTimestamp"], "2026-11-22T09:00:00Z");
        assert!(core.get("regarding").is_none() && core.get("note").is_none());
    }

    #[test]
    fn a_series_sets_the_legacy_count_and_last_time() {
        let mut event = recorder_event();
        event["series"] = json!({"count": 4, "lastObservedTime": "2026-11-22T09:05:00.000001Z"});
        // A stale legacy count from the previous read does not win over the series.
        event["deprecatedCount"] = json!(3);
        let core = from_events_view(&event);
        assert_eq!(core["count"], 4);
        assert_eq!(core["lastTimestamp"], "2026-11-22T09:05:00Z");
        assert_eq!(core["firstTimestamp"], "2026-11-22T09:00:00Z");
    }

    #[test]
    fn the_two_views_round_trip() {
        let core = from_events_view(&recorder_event());
        let view = to_events_view(&core);
        for field in [
            "regarding",
            "note",
            "reportingController",
            "eventTime",
            "action",
        ] {
            assert_eq!(view[field], recorder_event()[field], "{field}");
        }
        assert_eq!(view["deprecatedCount"], 1);
        assert_eq!(view["apiVersion"], "events.k8s.io/v1");
        assert_eq!(from_events_view(&view), core);
    }

    #[test]
    fn a_core_event_keeps_its_own_source_and_count() {
        let core = json!({"apiVersion": "v1", "kind": "Event", "metadata": {"name": "e"},
            "involvedObject": {"kind": "Pod", "name": "p"}, "message": "pulled",
            "source": {"component": "kubelet", "host": "node-1"}, "count": 7,
            "firstTimestamp": "2026-11-22T08:00:00Z", "lastTimestamp": "2026-11-22T08:30:00Z"});
        let view = to_events_view(&core);
        assert_eq!(view["deprecatedSource"]["host"], "node-1");
        assert_eq!(view["deprecatedCount"], 7);
        assert_eq!(view["note"], "pulled");
        assert_eq!(from_events_view(&view), core);
    }
}
