//! What a node step writes (DESIGN section 20: what a reader needs, nothing twice), counted on
//! a lone tenant, where no other tenant's work can fold two transitions into one write: every
//! status write of a node is seen on a watch of its kind, with the phase and message it told.
#![allow(clippy::expect_used, clippy::unwrap_used)] // tests fail loudly on unexpected values

mod support;

use std::sync::{Arc, Mutex};

use express_api::{Backend, Frontend, NodeStatus};
use futures::StreamExt;
use kube::api::{Api, WatchEvent, WatchParams};
use support::*;

/// Every status a node of `kind` showed, in order, as (node, phase, message, ready, pod).
type Seen = Arc<Mutex<Vec<(String, String, String, bool, Option<String>)>>>;

fn watch_statuses<K>(env: &Env) -> Seen
where
    K: kube::Resource<Scope = kube::core::NamespaceResourceScope, DynamicType = ()>
        + Clone
        + serde::de::DeserializeOwned
        + std::fmt::Debug
        + Send
        + 'static,
    K: HasNodeStatus,
{
    let seen: Seen = Arc::default();
    let api = Api::<K>::namespaced(env.client.clone(), NS);
    let into = seen.clone();
    tokio::spawn(async move {
        let stream = api
            .watch(&WatchParams::default(), "0")
            .await
            .expect("watch");
        let mut stream = std::pin::pin!(stream);
        let mut last: std::collections::HashMap<String, Option<NodeStatus>> = Default::default();
        while let Some(Ok(event)) = stream.next().await {
            let (WatchEvent::Added(node) | WatchEvent::Modified(node)) = event else {
                continue;
            };
            let name = node.meta().name.clone().unwrap_or_default();
            let status = node.node_status().cloned();
            if last.get(&name) == Some(&status) {
                continue;
            }
            last.insert(name.clone(), status.clone());
            if let Some(s) = status {
                into.lock().unwrap().push((
                    name,
                    format!("{:?}", s.phase),
                    s.message.unwrap_or_default(),
                    s.ready == Some(true),
                    s.pod_name,
                ));
            }
        }
    });
    seen
}

trait HasNodeStatus {
    fn node_status(&self) -> Option<&NodeStatus>;
}

impl HasNodeStatus for Frontend {
    fn node_status(&self) -> Option<&NodeStatus> {
        self.status.as_ref()
    }
}

impl HasNodeStatus for Backend {
    fn node_status(&self) -> Option<&NodeStatus> {
        self.status.as_ref()
    }
}

/// A lone tenant's upgrade writes each node's status at most three times: the desired
/// revision at the spec change (nodes that wait), the change record as its old pod goes, and
/// its new pod Ready. The new pod's start, quicker than the quiet start, is not a write of its
/// own.
#[tokio::test]
async fn a_node_step_writes_its_status_at_most_three_times() {
    let env = ready_tenant(&["fe1", "fe2"]).await;
    let frontends = watch_statuses::<Frontend>(&env);
    let backends = watch_statuses::<Backend>(&env);
    tokio::time::sleep(std::time::Duration::from_millis(300)).await;
    let from = (
        frontends.lock().unwrap().len(),
        backends.lock().unwrap().len(),
    );
    // As the benchmarks' pods: a second to start, time enough for a write of its own.
    slow_pods(&env, "v2", 1.0);
    let writes_before = env.sim.counters();
    change(&env, v("v2")).await;
    settle(&env).await;
    let counters = env.sim.counters();
    let status_writes = |kind: &str| {
        counters.count("patch", &format!("{kind}.express.dev/status"))
            - writes_before.count("patch", &format!("{kind}.express.dev/status"))
    };
    let shown: Vec<_> = frontends.lock().unwrap()[from.0..]
        .iter()
        .chain(&backends.lock().unwrap()[from.1..])
        .cloned()
        .collect();
    let per_node = (status_writes("frontends") + status_writes("backends")) as f64 / 3.0;
    assert!(
        per_node <= 3.0,
        "{per_node:.2} status writes a node; what they showed: {shown:#?}"
    );
    assert!(
        !shown
            .iter()
            .any(|(_, _, message, ..)| message.contains("new pod starting")),
        "a pod Ready within its quiet start is not reported starting: {shown:#?}"
    );
}

/// A pod slower than the quiet start is reported starting once it has passed, with its name:
/// a reader is never left without the pod for longer than that.
#[tokio::test]
async fn a_slow_start_is_reported_once_the_quiet_start_has_passed() {
    let env = ready_tenant(&["fe1"]).await;
    let frontends = watch_statuses::<Frontend>(&env);
    tokio::time::sleep(std::time::Duration::from_millis(300)).await;
    slow_pods(&env, "v2", 20.0);
    change(&env, v("v2")).await;
    wait_until_for(
        "fe1 reported starting",
        std::time::Duration::from_secs(30),
        async || {
            frontends
                .lock()
                .unwrap()
                .iter()
                .any(|(node, _, message, ready, pod)| {
                    node == "acme-fe1"
                        && message == "new pod starting"
                        && !ready
                        && pod.as_deref() == Some("acme-fe1")
                })
        },
    )
    .await;
}
