//! `express-operator dev`: kubesim in-process, the CRDs, sample tenants and the operator, with a
//! kubeconfig to point kubectl at. `--demo` provisions a cluster, rolls out an upgrade while
//! printing each step (node, action, what it waited for, how long it took), and exits.

use std::collections::HashMap;
use std::path::PathBuf;
use std::time::{Duration, Instant};

use express_api::keys::{ANNOTATION_EXPRESS_VERSION, ANNOTATION_ROLLOUT_ID};
use express_api::{
    Backend, BackendSpec, ExpressCluster, ExpressClusterSpec, Frontend, FrontendSpec, NodeDefaults,
    NodeSpec,
};
use express_planner::settle::SETTLE_WAIT;
use futures::StreamExt;
use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, Patch, PatchParams, PostParams, WatchEvent, WatchParams};
use kube::core::ObjectMeta;
use kubesim::kubelet::KubeletConfig;
use kubesim::{Config, KubeSim};
use serde_json::json;

use crate::controller::{self, Settings};
use crate::install::{create_namespace, install_crds};
use crate::metrics::Metrics;

#[derive(Debug, thiserror::Error)]
pub enum DevError {
    #[error("cannot start kubesim: {0}")]
    Start(#[from] kubesim::StartError),
    #[error("kube client: {0}")]
    Kube(#[from] kube::Error),
    #[error("cannot write the kubeconfig {path}: {source}")]
    Kubeconfig {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("leader election: {0}")]
    Lease(String),
    #[error("the demo did not finish within {0:?}")]
    Timeout(Duration),
}

pub struct DevOptions {
    pub kubeconfig: PathBuf,
    pub port: u16,
    pub startup_seconds: f64,
    pub demo: bool,
}

const DEMO_NAMESPACE: &str = "tenant-acme";
/// Simulated pod termination time in the local cluster.
const TERMINATE_SECONDS: f64 = 0.5;

fn defaults(version: &str) -> NodeDefaults {
    NodeDefaults {
        express_version: Some(version.into()),
        config_changeset: Some("867fc47c23".into()),
        image: Some("registry.example/express".into()),
        pod_template: None,
    }
}

/// The settle window of the sample tenants: short, so the local cluster starts at once.
const DEV_SETTLE_SECONDS: u32 = 2;

/// Object metadata as the tenant chart renders it: stamped with the delivery's rollout id.
fn delivered(name: &str, namespace: &str, rollout_id: &str) -> ObjectMeta {
    ObjectMeta {
        name: Some(name.into()),
        namespace: Some(namespace.into()),
        annotations: Some(
            [(ANNOTATION_ROLLOUT_ID.to_owned(), rollout_id.to_owned())]
                .into_iter()
                .collect(),
        ),
        ..ObjectMeta::default()
    }
}

/// Writes a tenant the way the tenant chart delivers one: the ExpressCluster, the Backend, then
/// the Frontends, one object at a time, every object stamped with rollout-id `r1`.
async fn create_tenant(
    client: &kube::Client,
    namespace: &str,
    cluster: &str,
    frontends: usize,
    version: &str,
) -> Result<(), DevError> {
    create_namespace(client, namespace).await?;
    let mut spec = ExpressClusterSpec {
        tenant_name: Some(cluster.into()),
        ..Default::default()
    };
    spec.defaults.backend = Some(defaults(version));
    spec.defaults.frontend = Some(defaults(version));
    spec.rollout.settle_seconds = DEV_SETTLE_SECONDS;
    let mut object = ExpressCluster::new(cluster, spec);
    object.metadata = delivered(cluster, namespace, "r1");
    Api::<ExpressCluster>::namespaced(client.clone(), namespace)
        .create(&PostParams::default(), &object)
        .await?;
    let name = format!("{cluster}-be");
    let mut backend = Backend::new(&name, BackendSpec(NodeSpec::for_cluster(cluster)));
    backend.metadata = delivered(&name, namespace, "r1");
    Api::<Backend>::namespaced(client.clone(), namespace)
        .create(&PostParams::default(), &backend)
        .await?;
    for i in 1..=frontends {
        let name = format!("{cluster}-fe{i}");
        let mut frontend = Frontend::new(&name, FrontendSpec(NodeSpec::for_cluster(cluster)));
        frontend.metadata = delivered(&name, namespace, "r1");
        Api::<Frontend>::namespaced(client.clone(), namespace)
            .create(&PostParams::default(), &frontend)
            .await?;
    }
    Ok(())
}

async fn start(options: &DevOptions) -> Result<(KubeSim, kube::Client), DevError> {
    let sim = KubeSim::start(Config {
        addr: std::net::SocketAddr::from(([127, 0, 0, 1], options.port)),
        kubelet: KubeletConfig {
            startup_seconds: options.startup_seconds,
            terminate_seconds: TERMINATE_SECONDS,
            rules: Vec::new(),
        },
        pod_termination_seconds: TERMINATE_SECONDS,
        ..Config::default()
    })
    .await?;
    std::fs::write(&options.kubeconfig, sim.kubeconfig()).map_err(|source| {
        DevError::Kubeconfig {
            path: options.kubeconfig.clone(),
            source,
        }
    })?;
    let client = sim.client()?;
    install_crds(&client).await?;
    // As the chart runs it: leader election on, holding ring default's Lease in the operator's
    // namespace, so that `kubectl express doctor` and `rings` see the cluster an SRE has.
    let settings = Settings::cluster_wide("express-operator-dev", 8);
    crate::install::create_namespace(&client, &settings.operator_namespace).await?;
    let (leader, _election) = crate::leader::elect(
        client.clone(),
        &settings.operator_namespace,
        &settings.ring,
        &settings.identity,
    )
    .await
    .map_err(|e| DevError::Lease(e.to_string()))?;
    tokio::spawn(controller::run(
        client.clone(),
        settings,
        Metrics::new(),
        leader,
    ));
    Ok((sim, client))
}

pub async fn run(options: DevOptions) -> Result<(), DevError> {
    let (sim, client) = start(&options).await?;
    println!(
        "kubesim serving {}; kubeconfig written to {}",
        sim.url(),
        options.kubeconfig.display()
    );
    if options.demo {
        return demo(&client, options.startup_seconds).await;
    }
    create_tenant(&client, "tenant-acme", "acme", 4, "express-e689.154").await?;
    create_tenant(&client, "tenant-globex", "globex", 2, "express-e689.154").await?;
    println!(
        "sample tenants: tenant-acme/acme (1 backend, 4 frontends), tenant-globex/globex (1 backend, 2 frontends), written like the tenant chart writes them (rollout-id r1; settleSeconds {DEV_SETTLE_SECONDS})"
    );
    println!();
    println!("  export KUBECONFIG={}", options.kubeconfig.display());
    println!("  kubectl get express -A");
    println!(
        "  kubectl patch expresscluster acme -n tenant-acme --type merge -p '{{\"spec\":{{\"defaults\":{{\"frontend\":{{\"expressVersion\":\"express-e689.155\"}}}}}}}}'"
    );
    println!("  kubectl get pods -n tenant-acme -w");
    println!();
    println!("the operator is running; Ctrl-C stops everything");
    let _ = tokio::signal::ctrl_c().await;
    sim.stop();
    Ok(())
}

/// Prints one line per step as observed on the API: a pod created (with what its node waited
/// for), a pod Ready (with how long the step took).
async fn follow(client: kube::Client, origin: Instant, until: usize) -> Result<(), DevError> {
    let pods: Api<Pod> = Api::namespaced(client.clone(), DEMO_NAMESPACE);
    // Only what happens from now on: watch from the current list's resourceVersion.
    let current = pods.list(&Default::default()).await?;
    let from = current
        .metadata
        .resource_version
        .unwrap_or_else(|| "0".into());
    let stream = pods.watch(&WatchParams::default(), &from).await?;
    let mut stream = std::pin::pin!(stream);
    let mut started: HashMap<String, (Instant, String)> = HashMap::new();
    let mut gone: std::collections::HashSet<String> = std::collections::HashSet::new();
    let mut done = 0;
    while done < until {
        let Some(Ok(event)) = stream.next().await else {
            break;
        };
        let stamp = || format!("[{:>5.1}s]", origin.elapsed().as_secs_f64());
        match event {
            WatchEvent::Added(pod) => {
                let name = pod.metadata.name.clone().unwrap_or_default();
                let revision = crate::pods::revision_of(&pod)
                    .unwrap_or_default()
                    .to_owned();
                let version = pod
                    .metadata
                    .annotations
                    .as_ref()
                    .and_then(|a| a.get(ANNOTATION_EXPRESS_VERSION).cloned())
                    .unwrap_or_default();
                // Told by what the watch saw: a pod created where this run saw the old one go
                // replaces it; any other is provisioned.
                let action = if gone.contains(&name) {
                    "upgrade"
                } else {
                    "provision"
                };
                println!(
                    "{} {name:<10} {action:<9} pod created: {version} (revision {revision})",
                    stamp()
                );
                started.insert(name, (Instant::now(), action.to_owned()));
            }
            WatchEvent::Modified(pod) => {
                let name = pod.metadata.name.clone().unwrap_or_default();
                let ready = pod
                    .status
                    .as_ref()
                    .and_then(|s| s.conditions.as_ref())
                    .into_iter()
                    .flatten()
                    .any(|c| c.type_ == "Ready" && c.status == "True");
                if ready && let Some((at, action)) = started.remove(&name) {
                    done += 1;
                    println!(
                        "{} {name:<10} {action:<9} Ready after {:.1}s",
                        stamp(),
                        at.elapsed().as_secs_f64()
                    );
                }
            }
            WatchEvent::Deleted(pod) => {
                let name = pod.metadata.name.unwrap_or_default();
                println!("{} {name:<10} old pod gone", stamp());
                gone.insert(name);
            }
            _ => {}
        }
    }
    Ok(())
}

/// Prints, once per change, what each waiting node waits for.
async fn explain_waits(client: kube::Client, origin: Instant) {
    let frontends: Api<Frontend> = Api::namespaced(client.clone(), DEMO_NAMESPACE);
    let Ok(stream) = frontends.watch(&WatchParams::default(), "0").await else {
        return;
    };
    let mut stream = std::pin::pin!(stream);
    let mut said: HashMap<String, String> = HashMap::new();
    while let Some(Ok(event)) = stream.next().await {
        if let WatchEvent::Added(fe) | WatchEvent::Modified(fe) = event {
            let name = fe.metadata.name.clone().unwrap_or_default();
            let waiting: Vec<String> = fe
                .status
                .iter()
                .flat_map(|s| s.waiting_for.iter())
                .map(|w| format!("{} ({})", w.node, w.reason))
                .collect();
            let settling = fe
                .status
                .as_ref()
                .and_then(|s| s.message.clone())
                .filter(|m| m.contains(SETTLE_WAIT));
            let text = match settling {
                Some(message) if waiting.is_empty() => message,
                _ => waiting.join("; "),
            };
            if !text.is_empty() && said.get(&name) != Some(&text) {
                println!(
                    "[{:>5.1}s] {name:<10} waits: {text}",
                    origin.elapsed().as_secs_f64()
                );
                said.insert(name, text);
            }
        }
    }
}

async fn demo(client: &kube::Client, startup_seconds: f64) -> Result<(), DevError> {
    let origin = Instant::now();
    let limit = Duration::from_secs(120);
    println!(
        "demo: provisioning Express cluster {DEMO_NAMESPACE}/acme (1 backend, 4 frontends; each pod takes {startup_seconds}s to become Ready; a first delivery waits rollout.settleSeconds {DEV_SETTLE_SECONDS}s for all of its objects)"
    );
    let follower = tokio::spawn(follow(client.clone(), origin, 5));
    tokio::time::sleep(Duration::from_millis(200)).await;
    let explainer = tokio::spawn(explain_waits(client.clone(), origin));
    create_tenant(client, DEMO_NAMESPACE, "acme", 4, "express-e689.154").await?;
    tokio::time::timeout(limit, follower)
        .await
        .map_err(|_| DevError::Timeout(limit))?
        .ok();
    let provisioned = origin.elapsed();
    println!(
        "demo: provisioned in {:.1}s (order: backend first, then fe1, fe2, ...)",
        provisioned.as_secs_f64()
    );

    println!(
        "demo: upgrading every node to express-e689.155, written one object at a time in the worst order (backend first), each stamped with rollout-id r2; the operator starts nothing until every node carries r2, then runs fe1, fe2, be, fe3, fe4"
    );
    let follower = tokio::spawn(follow(client.clone(), origin, 5));
    // Let the follower start watching before the change.
    tokio::time::sleep(Duration::from_millis(200)).await;
    let stamp_and_version = json!({
        "metadata": {"annotations": {ANNOTATION_ROLLOUT_ID: "r2"}},
        "spec": {"expressVersion": "express-e689.155"},
    });
    let params = PatchParams::default();
    for node in ["acme-be", "acme-fe4", "acme-fe3", "acme-fe2", "acme-fe1"] {
        println!(
            "[{:>5.1}s] writing {node} (rollout-id r2, express-e689.155)",
            origin.elapsed().as_secs_f64()
        );
        let patch = Patch::Merge(&stamp_and_version);
        if node.ends_with("-be") {
            Api::<Backend>::namespaced(client.clone(), DEMO_NAMESPACE)
                .patch(node, &params, &patch)
                .await?;
        } else {
            Api::<Frontend>::namespaced(client.clone(), DEMO_NAMESPACE)
                .patch(node, &params, &patch)
                .await?;
        }
        tokio::time::sleep(Duration::from_millis(400)).await;
    }
    println!(
        "[{:>5.1}s] writing ExpressCluster acme (rollout-id r2)",
        origin.elapsed().as_secs_f64()
    );
    Api::<ExpressCluster>::namespaced(client.clone(), DEMO_NAMESPACE)
        .patch(
            "acme",
            &params,
            &Patch::Merge(json!({"metadata": {"annotations": {ANNOTATION_ROLLOUT_ID: "r2"}}})),
        )
        .await?;
    // The rollout starts with the last write of the delivery.
    let upgrade_origin = Instant::now();
    tokio::time::timeout(limit, follower)
        .await
        .map_err(|_| DevError::Timeout(limit))?
        .ok();
    explainer.abort();
    let took = upgrade_origin.elapsed().as_secs_f64();
    let bound = 5.0 * (startup_seconds + TERMINATE_SECONDS);
    println!(
        "demo: upgrade complete in {took:.1}s; the critical path (5 nodes one after another, each {TERMINATE_SECONDS}s to terminate and {startup_seconds}s to start) is {bound:.1}s"
    );
    Ok(())
}
