//! End to end on kubesim (DESIGN section 3, rules 8 and 9): a tenant's node objects written one
//! at a time, in any order and with any gaps, the way Helm, Argo CD and `kubectl apply` write
//! them, are still rolled out in the DESIGN order. Many tenants run at once, each in its own
//! namespace, under one operator; the order is read from a pod watch (what the API shows).
#![allow(clippy::expect_used, clippy::unwrap_used)] // tests fail loudly on unexpected values

mod support;

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use express_api::keys::ANNOTATION_ROLLOUT_ID;
use express_api::{Backend, ExpressCluster, Frontend, NodePhase};
use futures::StreamExt;
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::api::events::v1::Event;
use kube::api::{Api, Patch, PatchParams, PostParams, WatchEvent, WatchParams};
use kubesim::KubeSim;
use serde_json::{Value, json};

const NODES: [&str; 5] = ["be", "fe1", "fe2", "fe3", "fe4"];
const DESIGN_UPGRADE: [&str; 5] = ["fe1", "fe2", "be", "fe3", "fe4"];
const DESIGN_PROVISIONING: [&str; 5] = ["be", "fe1", "fe2", "fe3", "fe4"];

async fn cluster_with_operator() -> (KubeSim, kube::Client) {
    let (sim, client) = support::kubesim_with_crds(0.2).await;
    express_operator::install::create_namespace(&client, "express-system")
        .await
        .expect("namespace");
    support::operator(&client, "e2e-settle", tokio::sync::watch::channel(true).1);
    (sim, client)
}

/// A small deterministic generator, so that each seeded order can be replayed.
struct Seeded(u64);

impl Seeded {
    fn next(&mut self) -> u64 {
        self.0 = self
            .0
            .wrapping_mul(6_364_136_223_846_793_005)
            .wrapping_add(1_442_695_040_888_963_407);
        self.0 >> 33
    }

    fn below(&mut self, bound: u64) -> u64 {
        self.next() % bound
    }

    fn shuffled(&mut self, items: &[&'static str]) -> Vec<&'static str> {
        let mut items = items.to_vec();
        for i in (1..items.len()).rev() {
            items.swap(i, self.below(i as u64 + 1) as usize);
        }
        items
    }
}

/// One tenant `acme` in its own namespace, shaped like the legacy chart: versions on the nodes.
struct Tenant {
    client: kube::Client,
    namespace: String,
    /// Pods created in the namespace, in order, as a watch saw them.
    created: Arc<Mutex<Vec<String>>>,
}

impl Tenant {
    async fn new(client: &kube::Client, namespace: &str, cluster_spec: Value) -> Tenant {
        express_operator::install::create_namespace(client, namespace)
            .await
            .expect("namespace");
        let created = Arc::new(Mutex::new(Vec::new()));
        let stream = Api::<Pod>::namespaced(client.clone(), namespace)
            .watch(&WatchParams::default(), "0")
            .await
            .expect("watch");
        let log = created.clone();
        tokio::spawn(async move {
            let mut stream = std::pin::pin!(stream);
            while let Some(Ok(event)) = stream.next().await {
                if let WatchEvent::Added(pod) = event {
                    let name = pod.metadata.name.unwrap_or_default();
                    log.lock()
                        .unwrap()
                        .push(name.trim_start_matches("acme-").to_owned());
                }
            }
        });
        let cluster: ExpressCluster = serde_json::from_value(json!({
            "apiVersion": "express.dev/v1alpha1", "kind": "ExpressCluster",
            "metadata": {"name": "acme", "namespace": namespace},
            "spec": cluster_spec,
        }))
        .unwrap();
        Api::<ExpressCluster>::namespaced(client.clone(), namespace)
            .create(&PostParams::default(), &cluster)
            .await
            .expect("cluster");
        Tenant {
            client: client.clone(),
            namespace: namespace.to_owned(),
            created,
        }
    }

    fn created_since(&self, from: usize) -> Vec<String> {
        self.created.lock().unwrap()[from..].to_vec()
    }

    fn created_count(&self) -> usize {
        self.created.lock().unwrap().len()
    }

    /// Writes one node object as a delivery would: created when missing, else patched.
    async fn write(&self, short: &str, version: &str, rollout_id: Option<&str>) {
        let name = format!("acme-{short}");
        let kind = if short == "be" { "Backend" } else { "Frontend" };
        let annotations = match rollout_id {
            Some(id) => json!({ ANNOTATION_ROLLOUT_ID: id }),
            None => json!({}),
        };
        let object = json!({
            "apiVersion": "express.dev/v1alpha1", "kind": kind,
            "metadata": {"name": name, "namespace": self.namespace, "annotations": annotations},
            "spec": {"clusterConfig": {"clusterName": "acme"}, "expressVersion": version},
        });
        // What `kubectl apply --server-side` sends: one object, one request.
        let params = PatchParams::apply("e2e-delivery").force();
        if kind == "Backend" {
            Api::<Backend>::namespaced(self.client.clone(), &self.namespace)
                .patch(&name, &params, &Patch::Apply(&object))
                .await
                .expect("write backend");
        } else {
            Api::<Frontend>::namespaced(self.client.clone(), &self.namespace)
                .patch(&name, &params, &Patch::Apply(&object))
                .await
                .expect("write frontend");
        }
    }

    /// Writes the given nodes in order, waiting `gaps[i]` after the i-th write.
    async fn deliver(
        &self,
        order: &[&str],
        gaps: &[Duration],
        version: impl Fn(&str) -> String,
        rollout_id: Option<&str>,
    ) {
        for (i, short) in order.iter().enumerate() {
            self.write(short, &version(short), rollout_id).await;
            if let Some(gap) = gaps.get(i) {
                tokio::time::sleep(*gap).await;
            }
        }
    }

    /// Waits until every node runs `version` and is Ready, as the node statuses say.
    async fn wait_all_ready_on(&self, version: impl Fn(&str) -> String, within: Duration) {
        let deadline = Instant::now() + within;
        loop {
            let mut done = true;
            for short in NODES {
                let name = format!("acme-{short}");
                let status = if short == "be" {
                    Api::<Backend>::namespaced(self.client.clone(), &self.namespace)
                        .get_opt(&name)
                        .await
                        .unwrap()
                        .and_then(|b| b.status)
                } else {
                    Api::<Frontend>::namespaced(self.client.clone(), &self.namespace)
                        .get_opt(&name)
                        .await
                        .unwrap()
                        .and_then(|f| f.status)
                };
                done &= status.is_some_and(|s| {
                    s.phase == Some(NodePhase::Ready)
                        && s.running_version.as_deref() == Some(version(short).as_str())
                });
            }
            if done {
                return;
            }
            assert!(
                Instant::now() < deadline,
                "{}: not all Ready on the new version; pods created: {:?}",
                self.namespace,
                self.created_since(0)
            );
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    async fn express_cluster(&self) -> ExpressCluster {
        Api::<ExpressCluster>::namespaced(self.client.clone(), &self.namespace)
            .get("acme")
            .await
            .expect("cluster")
    }

    async fn event_reasons(&self) -> Vec<(String, String)> {
        Api::<Event>::namespaced(self.client.clone(), &self.namespace)
            .list(&Default::default())
            .await
            .expect("events")
            .items
            .into_iter()
            .map(|e| (e.reason.unwrap_or_default(), e.note.unwrap_or_default()))
            .collect()
    }
}

fn all(version: &'static str) -> impl Fn(&str) -> String {
    move |_| version.to_owned()
}

/// Provisions a tenant (backend first, quickly) and waits until it runs v1 everywhere.
async fn provisioned(
    client: &kube::Client,
    namespace: &str,
    cluster_spec: Value,
    rollout_id: Option<&str>,
) -> Tenant {
    let tenant = Tenant::new(client, namespace, cluster_spec).await;
    tenant.deliver(&NODES, &[], all("v1"), rollout_id).await;
    tenant
        .wait_all_ready_on(all("v1"), Duration::from_secs(60))
        .await;
    tenant
}

/// The upgrade of every node from v1 to v2, written node by node in each tenant's own order
/// with gaps shorter than the settle window (gaps under 1.5 s, a 3 s window: room for a loaded
/// machine): backend first, reverse, and 20 seeded random orders. Every tenant must upgrade
/// exactly fe1, fe2, be, fe3, fe4.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_upgrade_written_node_by_node_in_any_order_follows_the_design_order() {
    let (_sim, client) = cluster_with_operator().await;
    let spec = json!({"rollout": {"settleSeconds": 3}});
    let mut deliveries: Vec<(String, Vec<&'static str>, Vec<Duration>)> = vec![
        (
            "backend-first".into(),
            NODES.to_vec(),
            vec![Duration::from_millis(400); 4],
        ),
        (
            "reverse".into(),
            NODES.iter().rev().copied().collect(),
            vec![Duration::from_millis(400); 4],
        ),
    ];
    for seed in 1..=20u64 {
        let mut random = Seeded(seed);
        let order = random.shuffled(&NODES);
        let gaps = (0..4)
            .map(|_| Duration::from_millis(random.below(1_500)))
            .collect();
        deliveries.push((format!("seed-{seed}"), order, gaps));
    }

    let runs = deliveries.into_iter().map(|(name, order, gaps)| {
        let (client, spec) = (client.clone(), spec.clone());
        tokio::spawn(async move {
            let tenant = provisioned(&client, &format!("t-{name}"), spec, None).await;
            let from = tenant.created_count();
            tenant.deliver(&order, &gaps, all("v2"), None).await;
            tenant
                .wait_all_ready_on(all("v2"), Duration::from_secs(90))
                .await;
            (name, order, gaps, tenant.created_since(from))
        })
    });
    for run in futures::future::join_all(runs).await {
        let (name, order, gaps, upgraded) = run.expect("tenant run");
        assert_eq!(
            upgraded, DESIGN_UPGRADE,
            "{name}: written in order {order:?} with gaps {gaps:?}"
        );
    }
}

/// With `express.dev/rollout-id` on every object, gaps longer than the settle window (1 s) do
/// not matter: the upgrade waits until every node carries the new id.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_rollout_ids_gaps_longer_than_the_window_keep_the_order() {
    let (_sim, client) = cluster_with_operator().await;
    let spec = json!({"rollout": {"settleSeconds": 1}});
    let mut runs = Vec::new();
    for (seed, order) in [
        (1u64, NODES.to_vec()),
        (2, NODES.iter().rev().copied().collect()),
        (3, Seeded(3).shuffled(&NODES)),
    ] {
        let (client, spec) = (client.clone(), spec.clone());
        runs.push(tokio::spawn(async move {
            let tenant = provisioned(&client, &format!("ids-{seed}"), spec, Some("r1")).await;
            let from = tenant.created_count();
            let mut random = Seeded(seed);
            let gaps: Vec<Duration> = (0..4)
                .map(|_| Duration::from_millis(1_500 + random.below(800)))
                .collect();
            // Halfway through, the cluster says why nothing moves.
            let half = tenant.deliver(&order[..2], &gaps[..2], all("v2"), Some("r2"));
            half.await;
            let status = tenant.express_cluster().await.status.unwrap();
            let settled = status
                .conditions
                .iter()
                .find(|c| c.type_ == "DesiredStateSettled")
                .unwrap();
            assert_eq!(settled.status, "False");
            assert_eq!(settled.reason, "RolloutIdMismatch");
            assert!(
                settled.message.contains("rollout-id") && settled.message.contains("r2"),
                "{}",
                settled.message
            );
            assert!(tenant.created_since(from).is_empty());
            tenant
                .deliver(&order[2..], &gaps[2..], all("v2"), Some("r2"))
                .await;
            tenant
                .wait_all_ready_on(all("v2"), Duration::from_secs(60))
                .await;
            let events = tenant.event_reasons().await;
            assert!(
                events.iter().any(|(reason, note)| reason == "Settling"
                    && note.contains("waiting for the desired state to settle")),
                "{events:?}"
            );
            (order, tenant.created_since(from))
        }));
    }
    for run in futures::future::join_all(runs).await {
        let (order, upgraded) = run.expect("tenant run");
        assert_eq!(upgraded, DESIGN_UPGRADE, "written in order {order:?}");
    }
}

/// From nothing, frontends written before the backend (1.5 s earlier): the backend is still
/// provisioned first (rule 9), with and without a settle window.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn from_nothing_frontends_written_before_the_backend_provision_after_it() {
    let (_sim, client) = cluster_with_operator().await;
    let mut runs = Vec::new();
    for (name, settle) in [("window", 2), ("no-window", 0)] {
        let client = client.clone();
        runs.push(tokio::spawn(async move {
            let spec = json!({"rollout": {"settleSeconds": settle}});
            let tenant = Tenant::new(&client, &format!("new-{name}"), spec).await;
            let gaps = [100, 100, 100, 1_500].map(Duration::from_millis);
            tenant
                .deliver(&["fe3", "fe1", "fe4", "fe2", "be"], &gaps, all("v1"), None)
                .await;
            tenant
                .wait_all_ready_on(all("v1"), Duration::from_secs(60))
                .await;
            (name, tenant.created_since(0))
        }));
    }
    for run in futures::future::join_all(runs).await {
        let (name, provisioned) = run.expect("tenant run");
        assert_eq!(provisioned, DESIGN_PROVISIONING, "{name}");
    }
}

/// A frontend-only change runs fe1, fe2, fe3, fe4; a backend-only change touches only be; both
/// written in random orders with gaps shorter than the window (under 1.5 s against 3 s).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn frontend_only_and_backend_only_changes_written_node_by_node() {
    let (_sim, client) = cluster_with_operator().await;
    let spec = json!({"rollout": {"settleSeconds": 3}});
    let mut runs = Vec::new();
    for seed in 1..=3u64 {
        for backend_only in [false, true] {
            let (client, spec) = (client.clone(), spec.clone());
            runs.push(tokio::spawn(async move {
                let kind = if backend_only { "be" } else { "fe" };
                let tenant = provisioned(&client, &format!("only-{kind}-{seed}"), spec, None).await;
                let from = tenant.created_count();
                let version = move |short: &str| {
                    let changes = (short == "be") == backend_only;
                    if changes { "v2" } else { "v1" }.to_owned()
                };
                let mut random = Seeded(seed);
                // Every object is written (as `kubectl apply -f` of the whole tenant does);
                // only some change. A write that changes nothing is no change, so the gaps
                // that must stay under the window are those between changing writes.
                let order = random.shuffled(&NODES);
                let gaps: Vec<Duration> = order
                    .iter()
                    .map(|short| match (*short == "be") == backend_only {
                        true => Duration::from_millis(random.below(1_500)),
                        false => Duration::ZERO,
                    })
                    .collect();
                tenant.deliver(&order, &gaps, version, None).await;
                tenant
                    .wait_all_ready_on(version, Duration::from_secs(60))
                    .await;
                (
                    backend_only,
                    format!("{order:?} with gaps {gaps:?}"),
                    tenant.created_since(from),
                )
            }));
        }
    }
    for run in futures::future::join_all(runs).await {
        let (backend_only, order, upgraded) = run.expect("tenant run");
        let expected: &[&str] = if backend_only {
            &["be"]
        } else {
            &["fe1", "fe2", "fe3", "fe4"]
        };
        assert_eq!(upgraded, expected, "written in order {order}");
    }
}

/// A partial sync (two nodes of five get the new rollout-id, then nothing) never proceeds; after
/// `settleTimeoutSeconds` the ExpressCluster says Stalled, naming the nodes, with a Warning
/// event. Writing the rest releases it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_partial_sync_stalls_visibly_and_never_proceeds_on_its_own() {
    let (_sim, client) = cluster_with_operator().await;
    let spec = json!({"rollout": {"settleSeconds": 1, "settleTimeoutSeconds": 2}});
    let tenant = provisioned(&client, "partial", spec, Some("r1")).await;
    let from = tenant.created_count();
    tenant
        .deliver(&["fe3", "be"], &[Duration::ZERO], all("v2"), Some("r2"))
        .await;
    let deadline = Instant::now() + Duration::from_secs(20);
    let condition = loop {
        let status = tenant.express_cluster().await.status.unwrap_or_default();
        if let Some(c) = status
            .conditions
            .iter()
            .find(|c| c.type_ == "DesiredStateSettled" && c.reason == "Stalled")
        {
            break c.clone();
        }
        assert!(Instant::now() < deadline, "never stalled: {status:?}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    assert_eq!(condition.status, "False");
    for node in ["acme-be", "acme-fe3", "acme-fe1"] {
        assert!(condition.message.contains(node), "{}", condition.message);
    }
    let events = tenant.event_reasons().await;
    assert!(
        events
            .iter()
            .any(|(reason, note)| reason == "SettleStalled" && note.contains("acme-fe3")),
        "{events:?}"
    );
    // Nothing was changed on a half-applied state.
    assert!(tenant.created_since(from).is_empty());
    tenant
        .deliver(&["fe1", "fe2", "fe4"], &[], all("v2"), Some("r2"))
        .await;
    tenant
        .wait_all_ready_on(all("v2"), Duration::from_secs(60))
        .await;
    assert_eq!(tenant.created_since(from), DESIGN_UPGRADE);
}
