//! The `/kubesim/...` control endpoints tests drive: counters, deletes, faults, compaction.

use std::time::Duration;

use axum::body::Bytes;
use axum::http::{Method, StatusCode};
use axum::response::Response;
use serde_json::{Value, json};

use crate::error::ApiError;
use crate::faults::FaultRule;
use crate::shared::Shared;

use super::{error_response, json_response};

/// `/kubesim/...`: counters, faults, watch closing and history compaction over HTTP.
pub(super) fn control(shared: &Shared, method: &Method, rest: &[&str], body: &Bytes) -> Response {
    match (method.as_str(), rest) {
        ("GET", ["counters"]) => json_response(StatusCode::OK, &json!(shared.faults.counters())),
        ("GET", ["counters", "agents"]) => {
            json_response(StatusCode::OK, &json!(shared.faults.agent_counters()))
        }
        ("GET", ["deletes"]) => json_response(StatusCode::OK, &json!(shared.faults.deletes())),
        ("DELETE", ["counters"]) => {
            shared.faults.reset_counters();
            json_response(StatusCode::OK, &json!({}))
        }
        ("GET", ["faults"]) => json_response(
            StatusCode::OK,
            &json!({"rules": shared.faults.rules(), "latencyMillis": shared.faults.latency().as_millis() as u64}),
        ),
        ("POST", ["faults"]) => match serde_json::from_slice::<FaultRule>(body) {
            Ok(rule) => {
                shared.faults.add_rule(rule);
                json_response(StatusCode::OK, &json!({}))
            }
            Err(e) => error_response(&ApiError::bad_request(format!("invalid fault rule: {e}"))),
        },
        ("POST", ["latency"]) => match serde_json::from_slice::<Value>(body)
            .ok()
            .and_then(|v| v["millis"].as_u64())
        {
            Some(millis) => {
                shared.faults.set_latency(Duration::from_millis(millis));
                json_response(StatusCode::OK, &json!({}))
            }
            None => error_response(&ApiError::bad_request("expected {\"millis\": N}")),
        },
        ("POST", ["write-stops"]) => match serde_json::from_slice::<Value>(body)
            .ok()
            .and_then(|v| Some((v["agent"].as_str()?.to_owned(), v["after"].as_u64()?)))
        {
            Some((agent, after)) => {
                shared.faults.stop_writes_after(&agent, after);
                json_response(StatusCode::OK, &json!({}))
            }
            None => error_response(&ApiError::bad_request(
                "expected {\"agent\": USER-AGENT, \"after\": N}",
            )),
        },
        ("GET", ["write-stops", agent]) => match shared.faults.write_stop(agent) {
            Some(stop) => json_response(
                StatusCode::OK,
                &json!({"remaining": stop.remaining, "refused": stop.refused}),
            ),
            None => error_response(&ApiError::path_not_found(&format!(
                "/kubesim/write-stops/{agent}"
            ))),
        },
        ("DELETE", ["write-stops", agent]) => {
            shared.faults.lift_write_stop(agent);
            json_response(StatusCode::OK, &json!({}))
        }
        ("DELETE", ["faults"]) => {
            shared.faults.clear();
            json_response(StatusCode::OK, &json!({}))
        }
        ("GET", ["kubelet", "rules"]) => {
            json_response(StatusCode::OK, &json!(shared.kubelet_rules.rules()))
        }
        ("POST", ["kubelet", "rules"]) => {
            match serde_json::from_slice::<crate::kubelet::KubeletRule>(body) {
                Ok(rule) => {
                    shared.kubelet_rules.add_rule(rule);
                    json_response(StatusCode::OK, &json!({}))
                }
                Err(e) => {
                    error_response(&ApiError::bad_request(format!("invalid kubelet rule: {e}")))
                }
            }
        }
        ("DELETE", ["kubelet", "rules"]) => {
            shared.kubelet_rules.set_rules(Vec::new());
            json_response(StatusCode::OK, &json!({}))
        }
        ("POST", ["close-watches"]) => {
            shared.faults.close_watches();
            json_response(StatusCode::OK, &json!({}))
        }
        ("POST", ["compact"]) => {
            shared.lock().store.compact();
            json_response(StatusCode::OK, &json!({}))
        }
        _ => error_response(&ApiError::path_not_found(&format!(
            "/kubesim/{}",
            rest.join("/")
        ))),
    }
}
