//! Request counters and fault injection, shared by the server, the library API and the
//! `/kubesim/*` HTTP endpoints.

use std::collections::{BTreeMap, HashMap};
use std::sync::Mutex;
use std::time::Duration;

use serde::{Deserialize, Serialize};
use tokio::sync::watch;

/// Requests served, by verb and resource, and in total by reads and writes.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Counters {
    /// `"<verb> <resource>"`, e.g. `"create pods"`, `"patch frontends.express.dev/status"`.
    pub by_verb_and_resource: BTreeMap<String, u64>,
    pub reads: u64,
    pub writes: u64,
    /// The same `"<verb> <resource>"` counts, per User-Agent of the clients that sent one: what
    /// one client (e.g. the operator) used, told apart from the test driving it.
    #[serde(default)]
    pub by_agent: BTreeMap<String, BTreeMap<String, u64>>,
    /// Per User-Agent and `"<verb> <resource>"`, the namespaces the requests were in (`""` for
    /// a cluster-wide request) with their counts: where a client reached, for RBAC measurements.
    #[serde(default)]
    pub by_agent_namespace: BTreeMap<String, BTreeMap<String, BTreeMap<String, u64>>>,
}

impl Counters {
    pub fn count(&self, verb: &str, resource: &str) -> u64 {
        self.by_verb_and_resource
            .get(&format!("{verb} {resource}"))
            .copied()
            .unwrap_or(0)
    }

    /// Write requests whose resource starts with `resource` (e.g. `pods`).
    pub fn writes_to(&self, resource: &str) -> u64 {
        self.by_verb_and_resource
            .iter()
            .filter(|(k, _)| {
                let (verb, res) = k.split_once(' ').unwrap_or(("", ""));
                is_write(verb) && (res == resource || res.starts_with(&format!("{resource}/")))
            })
            .map(|(_, v)| v)
            .sum()
    }
}

/// One delete request as the client sent it: what it asked to delete and with which grace
/// period and preconditions. Tests read these to prove a client never forces a deletion.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct DeleteRequest {
    /// As in the counters: `pods`, `frontends.express.dev`...
    pub resource: String,
    pub namespace: String,
    pub name: String,
    /// `gracePeriodSeconds` from the query or the body; None: the object's own.
    pub grace_period_seconds: Option<i64>,
    pub precondition_uid: Option<String>,
    /// The HTTP status answered.
    pub status: u16,
}

pub fn is_write(verb: &str) -> bool {
    matches!(
        verb,
        "create" | "update" | "patch" | "delete" | "deletecollection"
    )
}

/// One injected failure: requests matching verb and resource (None = any) fail with `status`
/// at `rate` (0.0 to 1.0). A 429 is API Priority and Fairness's: plain text, and
/// `Retry-After` (`retry_after_seconds`, else 1). A 403 is RBAC's refusal, in its words; any
/// other code a `Status` with the reason the API server gives it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct FaultRule {
    #[serde(default)]
    pub verb: Option<String>,
    #[serde(default)]
    pub resource: Option<String>,
    pub rate: f64,
    pub status: u16,
    #[serde(default)]
    pub retry_after_seconds: Option<u64>,
}

/// Where one client's writes stop: after `remaining` more, every write it sends is refused
/// (503) until the stop is lifted, and each refusal is counted. Tests use this to freeze an
/// operator right after its Nth write and kill it there.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct WriteStop {
    pub remaining: u64,
    pub refused: u64,
}

pub struct Faults {
    rules: Mutex<Vec<FaultRule>>,
    write_stops: Mutex<HashMap<String, WriteStop>>,
    /// Bumped on every refused write, for tests waiting for a stop to be reached.
    refusals: watch::Sender<u64>,
    latency: Mutex<Duration>,
    counters: Mutex<Counters>,
    deletes: Mutex<Vec<DeleteRequest>>,
    /// Bumped to close every open watch.
    watch_epoch: watch::Sender<u64>,
}

impl Default for Faults {
    fn default() -> Self {
        Faults {
            rules: Mutex::new(Vec::new()),
            write_stops: Mutex::new(HashMap::new()),
            refusals: watch::channel(0).0,
            latency: Mutex::new(Duration::ZERO),
            counters: Mutex::new(Counters::default()),
            deletes: Mutex::new(Vec::new()),
            watch_epoch: watch::channel(0).0,
        }
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}

impl Faults {
    pub fn add_rule(&self, rule: FaultRule) {
        lock(&self.rules).push(rule);
    }

    /// Lets the client with User-Agent `agent` write `writes` more times; every write after
    /// that is refused until [`Faults::lift_write_stop`]. Replaces an earlier stop for `agent`.
    pub fn stop_writes_after(&self, agent: &str, writes: u64) {
        lock(&self.write_stops).insert(
            agent.to_owned(),
            WriteStop {
                remaining: writes,
                refused: 0,
            },
        );
    }

    pub fn lift_write_stop(&self, agent: &str) {
        lock(&self.write_stops).remove(agent);
    }

    /// The stop set for `agent`, with what is left of it and how many writes it refused.
    pub fn write_stop(&self, agent: &str) -> Option<WriteStop> {
        lock(&self.write_stops).get(agent).copied()
    }

    /// Bumped on every write refused by a stop.
    pub fn refusals(&self) -> watch::Receiver<u64> {
        self.refusals.subscribe()
    }

    /// Whether this write from `agent` passes its stop (and takes one from what is left).
    pub fn admit_write(&self, agent: Option<&str>) -> bool {
        let Some(agent) = agent else { return true };
        let mut stops = lock(&self.write_stops);
        let Some(stop) = stops.get_mut(agent) else {
            return true;
        };
        if stop.remaining > 0 {
            stop.remaining -= 1;
            return true;
        }
        stop.refused += 1;
        drop(stops);
        self.refusals.send_modify(|n| *n += 1);
        false
    }

    pub fn clear(&self) {
        lock(&self.rules).clear();
        lock(&self.write_stops).clear();
        *lock(&self.latency) = Duration::ZERO;
    }

    pub fn set_latency(&self, latency: Duration) {
        *lock(&self.latency) = latency;
    }

    pub fn latency(&self) -> Duration {
        *lock(&self.latency)
    }

    pub fn rules(&self) -> Vec<FaultRule> {
        lock(&self.rules).clone()
    }

    /// The injected failure for this request, if the dice say so.
    pub fn roll(&self, verb: &str, resource: &str) -> Option<FaultRule> {
        let rules = lock(&self.rules);
        rules
            .iter()
            .find(|r| {
                r.verb.as_deref().is_none_or(|v| v == verb)
                    && r.resource
                        .as_deref()
                        .is_none_or(|x| x == resource || resource.starts_with(&format!("{x}/")))
                    && rand::random::<f64>() < r.rate
            })
            .cloned()
    }

    pub fn count(&self, verb: &str, resource: &str) {
        self.count_in(None, verb, resource, None);
    }

    /// Counts a request, under its client's User-Agent and, when it was namespaced, its
    /// namespace (`None`: cluster-wide).
    pub fn count_in(
        &self,
        agent: Option<&str>,
        verb: &str,
        resource: &str,
        namespace: Option<&str>,
    ) {
        let mut counters = lock(&self.counters);
        let key = format!("{verb} {resource}");
        if let Some(agent) = agent {
            *counters
                .by_agent_namespace
                .entry(agent.to_owned())
                .or_default()
                .entry(key.clone())
                .or_default()
                .entry(namespace.unwrap_or_default().to_owned())
                .or_default() += 1;
            *counters
                .by_agent
                .entry(agent.to_owned())
                .or_default()
                .entry(key.clone())
                .or_default() += 1;
        }
        *counters.by_verb_and_resource.entry(key).or_default() += 1;
        if is_write(verb) {
            counters.writes += 1;
        } else {
            counters.reads += 1;
        }
    }

    pub fn counters(&self) -> Counters {
        lock(&self.counters).clone()
    }

    /// Only the per-User-Agent counts of [`Counters::by_agent`]: what a benchmark polls every
    /// second, without the per-namespace detail that grows with the fleet.
    pub fn agent_counters(&self) -> BTreeMap<String, BTreeMap<String, u64>> {
        lock(&self.counters).by_agent.clone()
    }

    pub fn reset_counters(&self) {
        *lock(&self.counters) = Counters::default();
        lock(&self.deletes).clear();
    }

    pub fn record_delete(&self, request: DeleteRequest) {
        lock(&self.deletes).push(request);
    }

    /// Every delete request served since the start (or the last counter reset), in order.
    pub fn deletes(&self) -> Vec<DeleteRequest> {
        lock(&self.deletes).clone()
    }

    pub fn close_watches(&self) {
        self.watch_epoch.send_modify(|epoch| *epoch += 1);
    }

    pub fn watch_epoch(&self) -> watch::Receiver<u64> {
        self.watch_epoch.subscribe()
    }
}
