//! When the operator last met the control plane failing (DESIGN section 19): an answer that is
//! the infrastructure's (a 5xx, a 429, no answer at all), never one about the request itself
//! (a 4xx such as a conflict). Every request the operator sends is seen by the throttle layer,
//! which records such answers here; a release's judge voids its samples while the trouble is
//! recent, so that an outage is never judged as the build's fault: a ring's Lease that expired
//! while etcd was away, or tenants whose status writes failed, say nothing about a build.

use std::sync::Mutex;
use std::time::Duration;

use k8s_openapi::jiff::Timestamp;

/// How long after the control plane's last failing answer a release's samples stay void: a
/// Lease (15 s) expires and is taken again, and the rings' operators catch up with what they
/// could not write, well within it.
pub const VOID_AFTER_TROUBLE: Duration = Duration::from_secs(60);

/// Whether an answer (its status code; `None`: no answer, the connection failed or timed out)
/// is the control plane's trouble rather than the request's.
pub fn is_infrastructure(code: Option<u16>) -> bool {
    match code {
        None => true,
        Some(code) => code == 429 || code >= 500,
    }
}

/// The last failing answer: when, and what (`verb resource: code`).
#[derive(Debug, Default)]
pub struct ApiTrouble {
    last: Mutex<Option<(Timestamp, String)>>,
}

/// Trouble recent enough to void a sample.
#[derive(Clone, Debug, PartialEq)]
pub struct RecentTrouble {
    pub seconds_ago: i64,
    pub what: String,
}

impl std::fmt::Display for RecentTrouble {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "the control plane failed the operator {}s ago ({}); samples are void until it has answered for {}s",
            self.seconds_ago,
            self.what,
            VOID_AFTER_TROUBLE.as_secs()
        )
    }
}

impl ApiTrouble {
    pub fn record(&self, at: Timestamp, what: String) {
        if let Ok(mut last) = self.last.lock() {
            *last = Some((at, what));
        }
    }

    /// The last trouble, if it came less than [`VOID_AFTER_TROUBLE`] before `now`.
    pub fn recent(&self, now: Timestamp) -> Option<RecentTrouble> {
        let last = self.last.lock().ok()?.clone()?;
        let seconds_ago = now.duration_since(last.0).as_secs().max(0);
        let window = i64::try_from(VOID_AFTER_TROUBLE.as_secs()).unwrap_or(i64::MAX);
        (seconds_ago < window).then_some(RecentTrouble {
            seconds_ago,
            what: last.1,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_the_servers_own_failures_count() {
        for code in [None, Some(429), Some(500), Some(503), Some(504)] {
            assert!(is_infrastructure(code), "{code:?}");
        }
        for code in [
            Some(200),
            Some(201),
            Some(400),
            Some(403),
            Some(404),
            Some(409),
            Some(410),
            Some(422),
        ] {
            assert!(!is_infrastructure(code), "{code:?}");
        }
    }

    #[test]
    fn trouble_voids_samples_for_a_minute_then_no_more() {
        let trouble = ApiTrouble::default();
        let at = |s: i64| Timestamp::from_second(1_800_000_000 + s).expect("time");
        assert_eq!(trouble.recent(at(0)), None);
        trouble.record(at(0), "patch leases: 503".into());
        assert_eq!(
            trouble.recent(at(12)),
            Some(RecentTrouble {
                seconds_ago: 12,
                what: "patch leases: 503".into()
            })
        );
        assert_eq!(
            trouble.recent(at(12)).map(|t| t.to_string()).as_deref(),
            Some(
                "the control plane failed the operator 12s ago (patch leases: 503); samples are void until it has answered for 60s"
            )
        );
        assert_eq!(trouble.recent(at(60)), None);
        // Newer trouble starts the minute again.
        trouble.record(at(70), "list pods: error".into());
        assert_eq!(trouble.recent(at(100)).map(|t| t.seconds_ago), Some(30));
    }
}
