//! The simulated kubelet: pods go Pending → Running → Ready after a startup delay, deletions
//! finish after a simulated termination time, and per-pod behaviour comes from annotations
//! (`kubesim.dev/behavior`, `kubesim.dev/startup-seconds`, `kubesim.dev/terminate-seconds`) or
//! from rules matching the image or labels, settable at start and at run time.
//!
//! It reacts to store events (a pod created, a pod marked for deletion) with one timer task per
//! transition, so idle pods cost nothing. Its writes go straight to the store (they are not
//! client requests and are not counted).

use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::{Value, json};
use tokio::sync::broadcast::error::RecvError;

use crate::api::POD_KEY;
use crate::clock;
use crate::kubelet_rules::{KubeletRules, Plan};
use crate::shared::Shared;
use crate::store::{EventType, Object};

pub use crate::kubelet_rules::{
    ANNOTATION_BEHAVIOR, ANNOTATION_STARTUP, ANNOTATION_TERMINATE, Behavior, KubeletConfig,
    KubeletRule,
};

pub struct Kubelet {
    /// Shared with [`Shared`], through which the server changes them at run time.
    rules: Arc<KubeletRules>,
    /// Uids of pods whose termination clock is running.
    terminating: InFlight,
    /// Uids of pods being started. A relist after missed events reacts to every pod again;
    /// without this, each relist started every still-Pending pod once more (duplicate status
    /// writes and log lines, and more missed events: the load time grew with the square of
    /// the pod count).
    starting: InFlight,
}

/// Uids of pods with a kubelet task under way, so a second reaction to the same pod does not
/// start another.
#[derive(Default)]
struct InFlight(Mutex<std::collections::HashSet<String>>);

impl InFlight {
    /// Whether the caller is the first to take `uid` (and now holds it).
    fn claim(&self, uid: &str) -> bool {
        self.0
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .insert(uid.to_owned())
    }

    fn release(&self, uid: &str) {
        self.0.lock().unwrap_or_else(|p| p.into_inner()).remove(uid);
    }
}

impl Kubelet {
    pub fn new(config: KubeletConfig) -> Self {
        Kubelet {
            rules: Arc::new(KubeletRules::new(config)),
            terminating: InFlight::default(),
            starting: InFlight::default(),
        }
    }

    /// The rules this kubelet follows, for [`Shared`] to hold.
    pub fn shared_rules(&self) -> Arc<KubeletRules> {
        self.rules.clone()
    }

    pub fn set_rules(&self, rules: Vec<KubeletRule>) {
        self.rules.set_rules(rules);
    }

    pub fn add_rule(&self, rule: KubeletRule) {
        self.rules.add_rule(rule);
    }

    pub fn rules(&self) -> Vec<KubeletRule> {
        self.rules.rules()
    }
}

/// Runs the kubelet until the server's event stream closes.
pub async fn run(shared: Arc<Shared>, kubelet: Arc<Kubelet>) {
    let mut events = shared.lock().store.subscribe();
    loop {
        let event = match events.recv().await {
            Ok(event) => event,
            Err(RecvError::Lagged(_)) => {
                // Missed events: look at every pod again.
                let pods: Vec<Object> = shared
                    .lock()
                    .store
                    .list(POD_KEY, None)
                    .map(|(_, p)| p.object())
                    .collect();
                for pod in pods {
                    react(&shared, &kubelet, &pod, None);
                }
                continue;
            }
            Err(RecvError::Closed) => return,
        };
        if event.resource != POD_KEY || event.kind == EventType::Deleted {
            continue;
        }
        react(&shared, &kubelet, &event.object.value(), Some(event.kind));
    }
}

fn uid(pod: &Value) -> String {
    pod["metadata"]["uid"].as_str().unwrap_or("").to_owned()
}

fn react(shared: &Arc<Shared>, kubelet: &Arc<Kubelet>, pod: &Value, kind: Option<EventType>) {
    let terminating = pod["metadata"]["deletionTimestamp"].is_string();
    let started = pod["status"]["startTime"].is_string();
    let plan = kubelet.rules.plan(pod);
    let namespace = pod["metadata"]["namespace"]
        .as_str()
        .unwrap_or("")
        .to_owned();
    let name = pod["metadata"]["name"].as_str().unwrap_or("").to_owned();
    let uid = uid(pod);
    if terminating {
        // Only the event that set deletionTimestamp starts the termination clock.
        if !kubelet.terminating.claim(&uid) {
            return;
        }
        mark_not_ready(shared, &namespace, &name, &uid);
        if plan.behavior == Behavior::StuckTerminating {
            return;
        }
        let shared = shared.clone();
        let kubelet = kubelet.clone();
        tokio::spawn(async move {
            tokio::time::sleep(plan.terminate).await;
            finish_termination(&shared, &namespace, &name, &uid);
            kubelet.terminating.release(&uid);
        });
        return;
    }
    if !started && (kind == Some(EventType::Added) || kind.is_none()) {
        if !kubelet.starting.claim(&uid) {
            return;
        }
        let shared = shared.clone();
        let kubelet = kubelet.clone();
        tokio::spawn(async move {
            start(&shared, &namespace, &name, &uid, plan).await;
            kubelet.starting.release(&uid);
        });
    }
}

fn with_pod(
    shared: &Shared,
    namespace: &str,
    name: &str,
    uid: &str,
    change: impl FnOnce(&mut Value) -> bool,
) {
    let mut cluster = shared.lock();
    let Some(current) = cluster.store.get(POD_KEY, namespace, name) else {
        return;
    };
    if current["metadata"]["uid"].as_str() != Some(uid) {
        return;
    }
    let mut next = (*current).clone();
    if change(&mut next) {
        cluster
            .store
            .put(POD_KEY, namespace, name, next, EventType::Modified);
        drop(cluster);
        shared.changed.notify_waiters();
    }
}

fn condition(type_: &str, status: bool, now: &str) -> Value {
    json!({"type": type_, "status": if status { "True" } else { "False" }, "lastProbeTime": null, "lastTransitionTime": now})
}

fn pod_status(
    pod: &Value,
    ready: bool,
    restarts: i64,
    waiting_reason: Option<&str>,
    now: &str,
    started: &str,
) -> Value {
    let containers: Vec<Value> = pod["spec"]["containers"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|c| {
            let state = match waiting_reason {
                Some(reason) => json!({"waiting": {"reason": reason, "message": "back-off restarting failed container"}}),
                None => json!({"running": {"startedAt": started}}),
            };
            json!({"name": c["name"], "image": c["image"], "imageID": format!("kubesim://{}", c["image"].as_str().unwrap_or("")),
                   "ready": ready, "started": waiting_reason.is_none(), "restartCount": restarts, "state": state,
                   "containerID": format!("kubesim://{}", c["name"].as_str().unwrap_or(""))})
        })
        .collect();
    json!({
        "phase": "Running",
        "conditions": [
            condition("PodReadyToStartContainers", true, now),
            condition("Initialized", true, now),
            condition("Ready", ready, now),
            condition("ContainersReady", ready, now),
            condition("PodScheduled", true, now),
        ],
        "hostIP": "10.0.0.1",
        "podIP": "10.244.0.10",
        "podIPs": [{"ip": "10.244.0.10"}],
        "startTime": started,
        "qosClass": "BestEffort",
        "containerStatuses": containers,
    })
}

/// Names and images of a pod's containers.
fn containers(pod: &Value) -> Vec<(String, String)> {
    pod["spec"]["containers"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|c| {
            (
                c["name"].as_str().unwrap_or("").to_owned(),
                c["image"].as_str().unwrap_or("").to_owned(),
            )
        })
        .collect()
}

/// Writes a line to every container's log of a pod.
fn log_all(
    shared: &Shared,
    uid: &str,
    containers: &[(String, String)],
    line: impl Fn(&str, &str) -> String,
) {
    for (name, image) in containers {
        shared.logs.write(uid, name, line(name, image));
    }
}

async fn start(shared: &Arc<Shared>, namespace: &str, name: &str, uid: &str, plan: Plan) {
    let started = clock::now();
    let mut images = Vec::new();
    // Scheduled and started at once; Ready only after the startup delay.
    with_pod(shared, namespace, name, uid, |pod| {
        if pod["metadata"]["deletionTimestamp"].is_string() {
            return false;
        }
        images = containers(pod);
        pod["status"] = pod_status(pod, false, 0, None, &started, &started);
        true
    });
    log_all(shared, uid, &images, |c, image| {
        format!("kubesim: container {c} started with image {image}")
    });
    tokio::time::sleep(plan.startup).await;
    match plan.behavior {
        Behavior::Ready | Behavior::StuckTerminating => {
            let mut ready = false;
            with_pod(shared, namespace, name, uid, |pod| {
                if pod["metadata"]["deletionTimestamp"].is_string() {
                    return false;
                }
                pod["status"] = pod_status(pod, true, 0, None, &clock::now(), &started);
                ready = true;
                true
            });
            if ready {
                log_all(shared, uid, &images, |c, _| {
                    format!("kubesim: container {c} is Ready")
                });
            }
        }
        Behavior::NeverReady => {
            log_all(shared, uid, &images, |c, _| {
                format!(
                    "kubesim: container {c} is running but never Ready (kubesim.dev/behavior: never-ready)"
                )
            });
        }
        Behavior::CrashLoop => {
            let mut restarts = 0;
            let period = plan.startup.max(Duration::from_millis(200));
            loop {
                restarts += 1;
                let mut alive = false;
                with_pod(shared, namespace, name, uid, |pod| {
                    if pod["metadata"]["deletionTimestamp"].is_string() {
                        return false;
                    }
                    alive = true;
                    pod["status"] = pod_status(
                        pod,
                        false,
                        restarts,
                        Some("CrashLoopBackOff"),
                        &clock::now(),
                        &started,
                    );
                    true
                });
                if !alive {
                    return;
                }
                for (c, image) in &images {
                    shared.logs.write(uid, c, format!("kubesim: container {c} crashed: exit code 1 (kubesim.dev/behavior: crash-loop)"));
                    shared.logs.restart(uid, c, format!("kubesim: container {c} restarted (restart {restarts}) with image {image}"));
                }
                tokio::time::sleep(period).await;
            }
        }
    }
}

/// A terminating pod's containers are shutting down: it is no longer Ready.
fn mark_not_ready(shared: &Shared, namespace: &str, name: &str, uid: &str) {
    with_pod(shared, namespace, name, uid, |pod| {
        let grace = pod["metadata"]["deletionGracePeriodSeconds"]
            .as_i64()
            .unwrap_or(0);
        for (c, _) in containers(pod) {
            shared.logs.write(uid, &c, format!("kubesim: container {c} received SIGTERM (termination requested, grace {grace}s)"));
        }
        if !pod["status"]["conditions"].is_array() {
            return false;
        }
        if let Some(containers) = pod["status"]["containerStatuses"].as_array_mut() {
            for c in containers {
                c["ready"] = json!(false);
            }
        }
        if let Some(conditions) = pod["status"]["conditions"].as_array_mut() {
            for c in conditions
                .iter_mut()
                .filter(|c| c["type"] == "Ready" || c["type"] == "ContainersReady")
            {
                c["status"] = json!("False");
            }
        }
        true
    });
}

/// The containers have stopped: the pod goes away unless finalizers hold it, in which case
/// the API server removes it when the last finalizer goes (grace is over).
fn finish_termination(shared: &Shared, namespace: &str, name: &str, uid: &str) {
    let mut cluster = shared.lock();
    let Some(current) = cluster.store.get(POD_KEY, namespace, name) else {
        return;
    };
    if current["metadata"]["uid"].as_str() != Some(uid) {
        return;
    }
    for (c, _) in containers(&current) {
        shared.logs.end(
            uid,
            &c,
            format!("kubesim: container {c} exited with code 0"),
        );
    }
    let held = current["metadata"]["finalizers"]
        .as_array()
        .is_some_and(|f| !f.is_empty());
    if held {
        let mut next = (*current).clone();
        next["metadata"]["deletionGracePeriodSeconds"] = json!(0);
        cluster
            .store
            .put(POD_KEY, namespace, name, next, EventType::Modified);
    } else {
        cluster.store.remove(POD_KEY, namespace, name);
    }
    drop(cluster);
    shared.changed.notify_waiters();
}
