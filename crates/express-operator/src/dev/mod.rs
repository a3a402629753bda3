//! `express-operator dev`: kubesim in-process, the CRDs, sample tenants and the operator, with a
//! kubeconfig to point kubectl at. `--demo` provisions a cluster, rolls out an upgrade while
//! printing each step (node, action, what it waited for, how long it took), and exits.
//! `--dcs N` runs N such DCs instead ([`dcs`]), and its demo a release across them.

use std::collections::HashMap;
use std::path::PathBuf;
use std::time::{Duration, Instant};

use express_api::keys::{ANNOTATION_EXPRESS_VERSION, ANNOTATION_ROLLOUT_ID};
use express_api::{Backend, ExpressCluster, Frontend};
use express_planner::settle::SETTLE_WAIT;
use futures::StreamExt;
use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, Patch, PatchParams, WatchEvent, WatchParams};
use kubesim::kubelet::KubeletConfig;
use kubesim::{Config, KubeSim};
use serde_json::json;

mod dcs;
mod notifications;
mod prometheus;
mod tenants;

pub use self::tenants::DevError;
use self::tenants::{DEV_SETTLE_SECONDS, create_tenant};
use crate::controller::{self, Settings};
use crate::install::install_crds;
use crate::metrics::Metrics;

pub struct DevOptions {
    pub kubeconfig: PathBuf,
    pub port: u16,
    pub startup_seconds: f64,
    pub demo: bool,
    /// Local DCs: 1 is the single cluster; more run [`dcs`].
    pub dcs: usize,
    /// With `dcs` and the demo: the DC whose canary build cannot write.
    pub fail_in: Option<String>,
}

const DEMO_NAMESPACE: &str = "tenant-acme";
/// Simulated pod termination time in the local cluster.
const TERMINATE_SECONDS: f64 = 0.5;

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
    if options.dcs > 1 {
        return dcs::run(dcs::DcsOptions {
            kubeconfig: options.kubeconfig,
            dcs: options.dcs,
            startup_seconds: options.startup_seconds,
            demo: options.demo,
            fail_in: options.fail_in,
        })
        .await;
    }
    if let Some(dc) = &options.fail_in {
        return Err(DevError::Demo(format!(
            "--fail-in {dc} needs several DCs (--dcs 2 or more)"
        )));
    }
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
