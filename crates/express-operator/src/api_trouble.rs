//! When the operator last met the control plane failing (DESIGN section 19): an answer that is
//! the infrastructure's (a 5xx, no answer at all, 429s that last), never one about the request itself
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

/// How long the API server must keep answering 429 before that is trouble. One 429 is API
/// Priority and Fairness doing its everyday work on a busy server (the request is retried
/// after the Retry-After it names); only throttling that lasts keeps the operator from acting
/// and its rings from showing what a build does.
pub const THROTTLED_FOR: Duration = Duration::from_secs(10);

/// Whether an answer (its status code; `None`: no answer, the connection failed or timed out)
/// is the control plane's trouble rather than the request's.
pub fn is_infrastructure(code: Option<u16>) -> bool {
    match code {
        None => true,
        Some(code) => code == 429 || code >= 500,
    }
}

/// Whether a failed request met the control plane's trouble (see [`is_infrastructure`]): an
/// answer of 5xx or 429, or none at all (the connection failed, timed out or was cut).
pub fn is_infrastructure_error(error: &kube::Error) -> bool {
    match error {
        kube::Error::Api(status) => is_infrastructure(Some(status.code)),
        kube::Error::HyperError(_) | kube::Error::Service(_) | kube::Error::ReadEvents(_) => true,
        _ => false,
    }
}

/// What the control plane last did wrong: failed (a 5xx, no answer), or kept throttling.
#[derive(Debug, Default)]
pub struct ApiTrouble {
    state: Mutex<Seen>,
}

#[derive(Clone, Debug, Default)]
struct Seen {
    /// The last 5xx or unanswered request: when, and what (`verb resource: code`).
    failed: Option<(Timestamp, String)>,
    /// The current run of 429s, each within [`THROTTLED_FOR`] of the one before.
    throttled: Option<Throttling>,
}

#[derive(Clone, Debug)]
struct Throttling {
    since: Timestamp,
    last: Timestamp,
    what: String,
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

fn seconds_between(earlier: Timestamp, later: Timestamp) -> i64 {
    later.duration_since(earlier).as_secs().max(0)
}

fn whole_seconds(duration: Duration) -> i64 {
    i64::try_from(duration.as_secs()).unwrap_or(i64::MAX)
}

impl ApiTrouble {
    /// Records an infrastructure answer (see [`is_infrastructure`]): `code` as answered, `what`
    /// the request (`verb resource: code`).
    pub fn record(&self, at: Timestamp, code: Option<u16>, what: String) {
        let Ok(mut seen) = self.state.lock() else {
            return;
        };
        if code != Some(429) {
            seen.failed = Some((at, what));
            return;
        }
        match seen.throttled.as_mut() {
            Some(run) if seconds_between(run.last, at) <= whole_seconds(THROTTLED_FOR) => {
                run.last = at;
                run.what = what;
            }
            _ => {
                seen.throttled = Some(Throttling {
                    since: at,
                    last: at,
                    what,
                })
            }
        }
    }

    /// The latest trouble that came less than [`VOID_AFTER_TROUBLE`] before `now`: a failure,
    /// or 429s that kept coming for [`THROTTLED_FOR`] or longer.
    pub fn recent(&self, now: Timestamp) -> Option<RecentTrouble> {
        let seen = self.state.lock().ok()?.clone();
        let window = whole_seconds(VOID_AFTER_TROUBLE);
        let failed = seen.failed.map(|(at, what)| RecentTrouble {
            seconds_ago: seconds_between(at, now),
            what,
        });
        let throttled = seen
            .throttled
            .filter(|run| seconds_between(run.since, run.last) >= whole_seconds(THROTTLED_FOR))
            .map(|run| RecentTrouble {
                seconds_ago: seconds_between(run.last, now),
                what: format!(
                    "{}, throttled for {}s",
                    run.what,
                    seconds_between(run.since, run.last)
                ),
            });
        [failed, throttled]
            .into_iter()
            .flatten()
            .filter(|trouble| trouble.seconds_ago < window)
            .min_by_key(|trouble| trouble.seconds_ago)
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
        trouble.record(at(0), Some(503), "patch leases: 503".into());
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
        trouble.record(at(70), None, "list pods: no answer".into());
        assert_eq!(trouble.recent(at(100)).map(|t| t.seconds_ago), Some(30));
    }

    #[test]
    fn one_429_is_everyday_flow_control_but_throttling_that_lasts_is_trouble() {
        let trouble = ApiTrouble::default();
        let at = |s: i64| Timestamp::from_second(1_800_000_000 + s).expect("time");
        let throttle = |s: i64| trouble.record(at(s), Some(429), format!("watch pods: 429 at {s}"));
        throttle(0);
        assert_eq!(trouble.recent(at(1)), None, "a single 429");
        // 429s more than 10 s apart are separate runs, each short.
        throttle(11);
        throttle(22);
        assert_eq!(trouble.recent(at(23)), None, "sparse 429s");
        // A run of 429s, none more than 10 s after the one before, lasting 10 s.
        for s in [40, 44, 48, 50] {
            throttle(s);
        }
        assert_eq!(
            trouble.recent(at(55)),
            Some(RecentTrouble {
                seconds_ago: 5,
                what: "watch pods: 429 at 50, throttled for 10s".into()
            })
        );
        assert_eq!(trouble.recent(at(109)).map(|t| t.seconds_ago), Some(59));
        assert_eq!(
            trouble.recent(at(110)),
            None,
            "a minute after the run ended"
        );
    }

    #[test]
    fn the_latest_of_a_failure_and_a_throttling_is_named() {
        let trouble = ApiTrouble::default();
        let at = |s: i64| Timestamp::from_second(1_800_000_000 + s).expect("time");
        trouble.record(at(0), Some(500), "get leases: 500".into());
        for s in 5..=20 {
            trouble.record(at(s), Some(429), "list pods: 429".into());
        }
        assert_eq!(
            trouble.recent(at(21)).map(|t| t.what),
            Some("list pods: 429, throttled for 15s".into())
        );
        trouble.record(
            at(22),
            Some(504),
            "patch expressclusters/status: 504".into(),
        );
        assert_eq!(
            trouble.recent(at(23)).map(|t| t.what),
            Some("patch expressclusters/status: 504".into())
        );
    }
}
