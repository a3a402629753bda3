//! Shared set-up of the operator's end-to-end tests: kubesim with a fast kubelet, the CRDs,
//! namespaces, a watch recording pod creations and deletions in order, the operator itself,
//! and a tenant builder.
#![allow(dead_code)] // each test binary uses a different part

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use express_api::{
    Backend, BackendSpec, ExpressCluster, ExpressClusterSpec, Frontend, FrontendSpec, NodeDefaults,
    NodeSpec,
};
use express_operator::controller::{self, Settings};
use express_operator::metrics::Metrics;
use futures::StreamExt;
use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, Patch, PatchParams, PostParams, WatchEvent, WatchParams};
use kube::core::ObjectMeta;
use kubesim::kubelet::KubeletConfig;
use kubesim::{Config, KubeSim};
use serde_json::{Value, json};

pub const NS: &str = "tenant";

pub struct Env {
    pub sim: KubeSim,
    pub client: kube::Client,
    pub created: Arc<Mutex<Vec<String>>>,
    pub deleted: Arc<Mutex<Vec<String>>>,
}

pub fn operator(
    client: &kube::Client,
    identity: &str,
    leader: tokio::sync::watch::Receiver<bool>,
) -> tokio::task::JoinHandle<()> {
    operator_with_metrics(client, identity, leader, Metrics::new())
}

pub fn operator_with_metrics(
    client: &kube::Client,
    identity: &str,
    leader: tokio::sync::watch::Receiver<bool>,
    metrics: std::sync::Arc<Metrics>,
) -> tokio::task::JoinHandle<()> {
    operator_with_settings(client, Settings::cluster_wide(identity, 4), leader, metrics)
}

pub fn operator_with_settings(
    client: &kube::Client,
    settings: Settings,
    leader: tokio::sync::watch::Receiver<bool>,
    metrics: std::sync::Arc<Metrics>,
) -> tokio::task::JoinHandle<()> {
    tokio::spawn(controller::run(client.clone(), settings, metrics, leader))
}

/// kubesim with a fast kubelet (pods Ready `startup_seconds` after creation, 0.1 s to
/// terminate) and the CRDs installed.
pub async fn kubesim_with_crds(startup_seconds: f64) -> (KubeSim, kube::Client) {
    let sim = KubeSim::start(Config {
        pod_termination_seconds: 0.1,
        kubelet: KubeletConfig {
            startup_seconds,
            terminate_seconds: 0.1,
            rules: Vec::new(),
        },
        ..Config::default()
    })
    .await
    .expect("kubesim");
    let client = sim.client().expect("client");
    express_operator::install::install_crds(&client)
        .await
        .expect("CRDs");
    (sim, client)
}

pub async fn env_without_operator() -> Env {
    let (sim, client) = kubesim_with_crds(0.15).await;
    for ns in [NS, "express-system"] {
        express_operator::install::create_namespace(&client, ns)
            .await
            .expect("namespace");
    }
    let (created, deleted) = (
        Arc::new(Mutex::new(Vec::new())),
        Arc::new(Mutex::new(Vec::new())),
    );
    let stream = Api::<Pod>::namespaced(client.clone(), NS)
        .watch(&WatchParams::default(), "0")
        .await
        .expect("watch");
    let (c, d) = (created.clone(), deleted.clone());
    tokio::spawn(async move {
        let mut stream = std::pin::pin!(stream);
        while let Some(Ok(event)) = stream.next().await {
            match event {
                WatchEvent::Added(pod) => c.lock().unwrap().push(
                    pod.metadata
                        .name
                        .unwrap_or_default()
                        .trim_start_matches("acme-")
                        .to_owned(),
                ),
                WatchEvent::Deleted(pod) => d.lock().unwrap().push(
                    pod.metadata
                        .name
                        .unwrap_or_default()
                        .trim_start_matches("acme-")
                        .to_owned(),
                ),
                _ => {}
            }
        }
    });
    Env {
        sim,
        client,
        created,
        deleted,
    }
}

pub async fn env() -> Env {
    let env = env_without_operator().await;
    operator(&env.client, "e2e", tokio::sync::watch::channel(true).1);
    env
}

pub fn node_spec(extra: Value) -> NodeSpec {
    let mut spec = serde_json::to_value(NodeSpec::for_cluster("acme")).unwrap();
    if let (Some(map), Some(extra)) = (spec.as_object_mut(), extra.as_object()) {
        map.extend(extra.clone());
    }
    serde_json::from_value(spec).unwrap()
}

/// Creates the ExpressCluster `acme` (versions v1 by default), its Backend, then the given
/// Frontends. Unless the spec sets `rollout.settleSeconds`, the settle window is off: these
/// tests change the desired state in one write (the settle rules have tests of their own).
pub async fn tenant(env: &Env, cluster_spec: Value, frontends: &[(&str, Value)]) {
    tenant_with(&env.client, cluster_spec, frontends).await;
}

/// [`tenant`], for tests with a set-up of their own.
pub async fn tenant_with(client: &kube::Client, cluster_spec: Value, frontends: &[(&str, Value)]) {
    let settle_given = cluster_spec.pointer("/rollout/settleSeconds").is_some();
    let mut spec: ExpressClusterSpec = serde_json::from_value(cluster_spec).unwrap();
    if !settle_given {
        spec.rollout.settle_seconds = 0;
    }
    let defaults = NodeDefaults {
        express_version: Some("v1".into()),
        ..Default::default()
    };
    spec.defaults.backend.get_or_insert(defaults.clone());
    spec.defaults.frontend.get_or_insert(defaults);
    Api::<ExpressCluster>::namespaced(client.clone(), NS)
        .create(&PostParams::default(), &ExpressCluster::new("acme", spec))
        .await
        .expect("cluster");
    Api::<Backend>::namespaced(client.clone(), NS)
        .create(
            &PostParams::default(),
            &Backend::new("acme-be", BackendSpec(NodeSpec::for_cluster("acme"))),
        )
        .await
        .expect("backend");
    for (name, extra) in frontends {
        add_frontend_with(client, name, extra.clone()).await;
    }
}

pub async fn add_frontend(env: &Env, name: &str, extra: Value) {
    add_frontend_with(&env.client, name, extra).await;
}

pub async fn add_frontend_with(client: &kube::Client, name: &str, extra: Value) {
    Api::<Frontend>::namespaced(client.clone(), NS)
        .create(
            &PostParams::default(),
            &Frontend::new(&format!("acme-{name}"), FrontendSpec(node_spec(extra))),
        )
        .await
        .expect("frontend");
}

/// A fresh environment with tenant `acme` (default specs, these frontends) provisioned and
/// settled.
pub async fn ready_tenant(frontends: &[&str]) -> Env {
    let env = env().await;
    let fes: Vec<(&str, Value)> = frontends.iter().map(|f| (*f, json!({}))).collect();
    tenant(&env, json!({}), &fes).await;
    settle(&env).await;
    env
}

/// Waits until the operator has seen the latest spec of the ExpressCluster and of every node
/// and reports all of them settled (Healthy; every node Ready or Down).
pub async fn settle(env: &Env) {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let cluster = Api::<ExpressCluster>::namespaced(env.client.clone(), NS)
            .get("acme")
            .await
            .expect("cluster");
        let healthy = cluster.status.as_ref().is_some_and(|s| {
            s.phase == Some(express_api::ClusterPhase::Healthy)
                && s.observed_generation == cluster.metadata.generation
        });
        let settled = |meta: &ObjectMeta, status: Option<&express_api::NodeStatus>| {
            status.is_some_and(|s| {
                s.observed_generation == meta.generation
                    && matches!(
                        s.phase,
                        Some(express_api::NodePhase::Ready | express_api::NodePhase::Down)
                    )
            })
        };
        let backends = Api::<Backend>::namespaced(env.client.clone(), NS)
            .list(&Default::default())
            .await
            .expect("backends");
        let frontends = Api::<Frontend>::namespaced(env.client.clone(), NS)
            .list(&Default::default())
            .await
            .expect("frontends");
        let nodes_settled = backends
            .items
            .iter()
            .all(|b| settled(&b.metadata, b.status.as_ref()))
            && frontends
                .items
                .iter()
                .all(|f| settled(&f.metadata, f.status.as_ref()));
        if healthy && nodes_settled {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "never settled: {:?}",
            cluster.status
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

pub fn since(log: &Arc<Mutex<Vec<String>>>, from: usize) -> Vec<String> {
    log.lock().unwrap()[from..].to_vec()
}

pub async fn change(env: &Env, patch: Value) {
    Api::<ExpressCluster>::namespaced(env.client.clone(), NS)
        .patch("acme", &PatchParams::default(), &Patch::Merge(patch))
        .await
        .expect("patch");
    tokio::time::sleep(Duration::from_millis(200)).await;
}

pub fn v(version: &str) -> Value {
    json!({"spec": {"defaults": {"backend": {"expressVersion": version}, "frontend": {"expressVersion": version}}}})
}

/// The ExpressCluster `acme` as the API shows it now.
pub async fn cluster(env: &Env) -> ExpressCluster {
    Api::<ExpressCluster>::namespaced(env.client.clone(), NS)
        .get("acme")
        .await
        .expect("cluster")
}

pub async fn frontend(env: &Env, name: &str) -> Frontend {
    Api::<Frontend>::namespaced(env.client.clone(), NS)
        .get(&format!("acme-{name}"))
        .await
        .expect("frontend")
}

/// Two operator instances contending for the Lease (2 s, grace 1 s): alpha first, so it leads,
/// then beta.
pub struct Contenders {
    pub alpha_leader: tokio::sync::watch::Receiver<bool>,
    pub beta_leader: tokio::sync::watch::Receiver<bool>,
    kill_alpha: Option<Box<dyn FnOnce() + Send>>,
}

impl Contenders {
    pub async fn start(env: &Env) -> Contenders {
        use kube_lease_manager::LeaseManagerBuilder;
        let elect = |identity: &'static str| {
            LeaseManagerBuilder::new(env.client.clone(), "express-operator")
                .with_namespace("express-system")
                .with_identity(identity)
                .with_duration(2)
                .with_grace(1)
                .build()
        };
        let (alpha_leader, alpha_lease) = elect("alpha").await.expect("alpha").watch().await;
        tokio::time::sleep(Duration::from_millis(300)).await;
        // Dropping a task handle detaches the task: beta keeps contending.
        let (beta_leader, _beta_lease) = elect("beta").await.expect("beta").watch().await;
        let alpha = operator(&env.client, "alpha", alpha_leader.clone());
        let _beta = operator(&env.client, "beta", beta_leader.clone());
        Contenders {
            alpha_leader,
            beta_leader,
            kill_alpha: Some(Box::new(move || {
                alpha.abort();
                alpha_lease.abort();
            })),
        }
    }

    /// The leader dies: its controller and its lease renewal stop.
    pub fn kill_alpha(&mut self) {
        if let Some(kill) = self.kill_alpha.take() {
            kill();
        }
    }
}

/// New pods whose image contains `image` take `startup_seconds` to be Ready.
pub fn slow_pods(env: &Env, image: &str, startup_seconds: f64) {
    env.sim.kubelet().add_rule(kubesim::kubelet::KubeletRule {
        image: Some(image.into()),
        startup_seconds: Some(startup_seconds),
        ..Default::default()
    });
}

/// Applies `patch` to the ExpressCluster and waits until the operator created its first pod
/// for it; returns where the creations of that change start in `env.created`.
pub async fn change_until_first_creation(env: &Env, patch: Value) -> usize {
    let from = env.created.lock().unwrap().len();
    change(env, patch).await;
    let deadline = Instant::now() + Duration::from_secs(20);
    while since(&env.created, from).is_empty() {
        assert!(Instant::now() < deadline, "the operator created no pod");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    from
}

/// Writes only the operator makes (pods, ControllerRevisions, statuses).
pub fn operator_writes(sim: &KubeSim) -> u64 {
    let counters = sim.counters();
    counters.count("create", "pods")
        + counters.count("delete", "pods")
        + counters.count("patch", "pods")
        + counters.count("create", "controllerrevisions")
        + counters.count("patch", "backends.express.dev/status")
        + counters.count("patch", "frontends.express.dev/status")
        + counters.count("patch", "expressclusters.express.dev/status")
}

/// Writes the control ConfigMap `name` (express-control or express-operator-control) in
/// `namespace`: `paused` ("true"/"false"), with a reason.
pub async fn control(env: &Env, namespace: &str, name: &str, paused: &str) {
    let cm = k8s_openapi::api::core::v1::ConfigMap {
        metadata: ObjectMeta {
            name: Some(name.into()),
            ..Default::default()
        },
        data: Some(
            [
                ("paused".to_string(), paused.to_string()),
                ("reason".to_string(), "change freeze".to_string()),
            ]
            .into(),
        ),
        ..Default::default()
    };
    Api::<k8s_openapi::api::core::v1::ConfigMap>::namespaced(env.client.clone(), namespace)
        .patch(
            name,
            &PatchParams::apply("test").force(),
            &Patch::Apply(&cm),
        )
        .await
        .expect("control configmap");
}

/// An operator whose client sends User-Agent `agent`, so that kubesim counts and stops its
/// writes apart from the test's own.
pub fn operator_as(env: &Env, agent: &str) -> tokio::task::JoinHandle<()> {
    let client = env.sim.client_with_agent(agent).expect("client");
    operator(&client, agent, tokio::sync::watch::channel(true).1)
}

/// Waits until `agent` has a write refused by its write stop (true) or `done` holds (false);
/// past `deadline`, fails with what `state` describes.
pub async fn refused_or_done(
    env: &Env,
    agent: &str,
    deadline: Instant,
    mut done: impl AsyncFnMut() -> bool,
    mut state: impl AsyncFnMut() -> String,
) -> bool {
    let mut refusals = env.sim.faults().refusals();
    loop {
        if env
            .sim
            .faults()
            .write_stop(agent)
            .is_some_and(|stop| stop.refused > 0)
        {
            return true;
        }
        if done().await {
            return false;
        }
        assert!(
            Instant::now() < deadline,
            "{agent}: no progress: {}",
            state().await
        );
        let _ = tokio::time::timeout(Duration::from_millis(20), refusals.changed()).await;
    }
}

/// Runs the operator one write per life: each life may make one write, is killed at its
/// first refused one (kubesim's write stop), and a fresh operator takes over, until `done`
/// holds. Returns the number of lives; fails with what `state` describes when the lives make
/// no progress within `timeout`.
pub async fn one_write_per_life(
    env: &Env,
    timeout: Duration,
    mut done: impl AsyncFnMut() -> bool,
    mut state: impl AsyncFnMut() -> String,
) -> usize {
    let deadline = Instant::now() + timeout;
    let mut lives = 0;
    loop {
        lives += 1;
        let agent = format!("operator-life-{lives}");
        env.sim.faults().stop_writes_after(&agent, 1);
        let running = operator_as(env, &agent);
        let refused = refused_or_done(env, &agent, deadline, &mut done, &mut state).await;
        running.abort();
        let _ = running.await;
        if !refused {
            return lives;
        }
    }
}

/// Polls `done` every 20 ms until it holds; after 30 s, fails saying that `what` never
/// happened.
pub async fn wait_until(what: &str, done: impl AsyncFnMut() -> bool) {
    wait_until_for(what, Duration::from_secs(30), done).await;
}

/// [`wait_until`] with a deadline of `within`.
pub async fn wait_until_for(what: &str, within: Duration, mut done: impl AsyncFnMut() -> bool) {
    let deadline = Instant::now() + within;
    while !done().await {
        assert!(
            Instant::now() < deadline,
            "never happened within {within:?}: {what}"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// Applies `patch` to the ExpressCluster and waits until the operator has reported a status
/// for the generation it made, so that what status says next is about the new spec. [`change`]
/// cannot wait so: some of its callers have no operator able to write at that point.
pub async fn change_observed(env: &Env, patch: Value) {
    let api = Api::<ExpressCluster>::namespaced(env.client.clone(), NS);
    let generation = api
        .patch("acme", &PatchParams::default(), &Patch::Merge(patch))
        .await
        .expect("patch")
        .metadata
        .generation
        .expect("generation");
    wait_until(
        &format!("the operator reported on ExpressCluster generation {generation}"),
        async || {
            let status = api.get("acme").await.expect("cluster").status;
            status
                .and_then(|s| s.observed_generation)
                .is_some_and(|observed| observed >= generation)
        },
    )
    .await;
}

/// The value of the first sample line of a `/metrics` text starting with `prefix`.
pub fn sample(text: &str, prefix: &str) -> f64 {
    text.lines()
        .find(|l| l.starts_with(prefix))
        .and_then(|l| l.rsplit(' ').next())
        .and_then(|v| v.parse().ok())
        .unwrap_or_else(|| panic!("no sample {prefix} in:\n{text}"))
}
