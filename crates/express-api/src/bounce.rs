//! The bounce contract (DESIGN section 6): the phases a bounce request goes through, the record
//! the operator keeps of it in a node's status, the application states that bear on it and the
//! duration syntax of `express.dev/bounce-timeout` (shared with `kubectl express bounce`).

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{MicroTime, Time};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// `express.dev/app-state` value: the application rebuilds its data; a bounce is refused
/// unless forced.
pub const APP_STATE_REBUILDING: &str = "Rebuilding";
/// `express.dev/app-state` value: the application catches up; a bounce warns and proceeds.
pub const APP_STATE_CATCHUP: &str = "Catchup";
/// `express.dev/shutdown-protection` value the operator sets before deleting a bounced pod.
pub const SHUTDOWN_PROTECTION_DISABLED: &str = "disabled";
/// How long each wait of a bounce may take when `express.dev/bounce-timeout` says nothing.
pub const DEFAULT_BOUNCE_TIMEOUT_SECONDS: u64 = 600;

/// Where a bounce request stands (`status.bounce.phase`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
pub enum BouncePhase {
    /// Accepted, waiting for the cluster to be unpaused or for a `maxConcurrent` slot.
    Pending,
    /// The old pod is being deleted (gracefully).
    Terminating,
    /// The old pod is gone; the new one is being created or is not Ready yet.
    Starting,
    /// The new pod is Ready.
    Succeeded,
    /// A wait ran past its timeout, or the new pod ended.
    Failed,
    /// The node could not be bounced; nothing was done.
    Refused,
}

impl BouncePhase {
    pub const ALL: [BouncePhase; 6] = [
        BouncePhase::Pending,
        BouncePhase::Terminating,
        BouncePhase::Starting,
        BouncePhase::Succeeded,
        BouncePhase::Failed,
        BouncePhase::Refused,
    ];

    /// The name status carries.
    pub fn as_str(self) -> &'static str {
        match self {
            BouncePhase::Pending => "Pending",
            BouncePhase::Terminating => "Terminating",
            BouncePhase::Starting => "Starting",
            BouncePhase::Succeeded => "Succeeded",
            BouncePhase::Failed => "Failed",
            BouncePhase::Refused => "Refused",
        }
    }

    /// The request is over: nothing more is done for it.
    pub fn is_final(self) -> bool {
        matches!(
            self,
            BouncePhase::Succeeded | BouncePhase::Failed | BouncePhase::Refused
        )
    }

    /// The node's pod is being restarted: the bounce holds a `maxConcurrent` slot.
    pub fn holds_pod(self) -> bool {
        matches!(self, BouncePhase::Terminating | BouncePhase::Starting)
    }
}

impl std::fmt::Display for BouncePhase {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Progress of the node's last bounce request (DESIGN section 6). Everything the operator needs
/// to carry on after a restart is here: the pod being replaced, the revision the new one runs,
/// and when the current wait began.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct BounceStatus {
    #[serde(default)]
    pub request_id: String,
    /// Lenient on read: a phase this version does not know reads as absent.
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        deserialize_with = "crate::lenient::or_absent"
    )]
    pub phase: Option<BouncePhase>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub started_at: Option<Time>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub finished_at: Option<Time>,
    /// The request was forced (`express.dev/bounce-force: "true"`).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub force: bool,
    /// How long each wait may take, in seconds, as requested.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timeout_seconds: Option<u64>,
    /// The uid of the pod being restarted: a pod with another uid is the new one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pod_uid: Option<String>,
    /// The revision the new pod runs: the one the old pod ran (a bounce never changes it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub revision: Option<String>,
    /// When the current phase began: the start of its wait.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub phase_since: Option<MicroTime>,
}

/// Reads a duration such as `90s`, `10m`, `1h30m` or `45` (seconds) into seconds. Units: `h`,
/// `m`, `s`; zero, fractions, negative and unit-less mixtures are refused with a message that
/// shows the accepted forms.
pub fn parse_duration(text: &str) -> Result<u64, String> {
    let text = text.trim();
    let refuse = |why: &str| {
        Err(format!(
            "invalid duration {text:?}: {why} (use e.g. 90s, 10m or 1h30m)"
        ))
    };
    if text.is_empty() {
        return refuse("it is empty");
    }
    if text.bytes().all(|b| b.is_ascii_digit()) {
        return match text.parse::<u64>() {
            Ok(0) => refuse("it must be more than zero"),
            Ok(seconds) => Ok(seconds),
            Err(_) => refuse("it is too large"),
        };
    }
    let mut total: u64 = 0;
    let mut number = String::new();
    let mut last_unit = u64::MAX;
    for c in text.chars() {
        if c.is_ascii_digit() {
            number.push(c);
            continue;
        }
        let unit = match c {
            'h' => 3600,
            'm' => 60,
            's' => 1,
            _ => return refuse(&format!("{c:?} is not a unit")),
        };
        if number.is_empty() {
            return refuse("a unit has no number before it");
        }
        if unit >= last_unit {
            return refuse("units must go from hours down to seconds, each once");
        }
        last_unit = unit;
        let Some(value) = number
            .parse::<u64>()
            .ok()
            .and_then(|n| n.checked_mul(unit))
            .and_then(|n| n.checked_add(total))
        else {
            return refuse("it is too large");
        };
        total = value;
        number.clear();
    }
    if !number.is_empty() {
        return refuse("a number has no unit after it");
    }
    if total == 0 {
        return refuse("it must be more than zero");
    }
    Ok(total)
}

/// A duration in the form [`parse_duration`] reads: `90s`, `10m`, `1h30m`.
pub fn format_duration(seconds: u64) -> String {
    let (hours, minutes, secs) = (seconds / 3600, seconds % 3600 / 60, seconds % 60);
    let mut text = String::new();
    if hours > 0 {
        text.push_str(&format!("{hours}h"));
    }
    if minutes > 0 {
        text.push_str(&format!("{minutes}m"));
    }
    if secs > 0 || text.is_empty() {
        text.push_str(&format!("{secs}s"));
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_read_as_kubectl_writes_them() {
        for (text, seconds) in [
            ("90s", 90),
            ("10m", 600),
            ("1h30m", 5400),
            ("1h2m3s", 3723),
            ("45", 45),
            (" 2m ", 120),
            ("120m", 7200),
        ] {
            assert_eq!(parse_duration(text), Ok(seconds), "{text}");
        }
    }

    #[test]
    fn bad_durations_are_refused_with_the_accepted_forms() {
        for text in [
            "", "0", "0s", "1.5m", "-3s", "10x", "m", "5m10", "10s5m", "1m1m", "ten",
        ] {
            let error = match parse_duration(text) {
                Err(e) => e,
                Ok(v) => panic!("{text:?} read as {v}"),
            };
            assert!(error.contains("90s, 10m or 1h30m"), "{error}");
        }
        assert!(parse_duration("99999999999999999999h").is_err());
    }

    #[test]
    fn formatted_durations_read_back() {
        for seconds in [1, 59, 60, 61, 90, 600, 3600, 3723, 86400] {
            assert_eq!(parse_duration(&format_duration(seconds)), Ok(seconds));
        }
        assert_eq!(format_duration(90), "1m30s");
        assert_eq!(format_duration(600), "10m");
    }

    #[test]
    fn phases_are_the_wire_names_and_unknown_ones_read_as_absent() {
        for phase in BouncePhase::ALL {
            assert_eq!(
                serde_json::to_value(phase).ok(),
                Some(phase.as_str().into())
            );
        }
        let read = |phase: &str| -> BounceStatus {
            serde_json::from_value(serde_json::json!({"requestId": "r", "phase": phase}))
                .unwrap_or_else(|e| panic!("{e}"))
        };
        assert_eq!(read("Starting").phase, Some(BouncePhase::Starting));
        assert_eq!(read("Exploded").phase, None);
    }
}
