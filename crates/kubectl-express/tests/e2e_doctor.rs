//! `kubectl express doctor` end to end: the real plugin binary against kubesim over HTTP, the
//! real controller with leader election (the Lease `express-operator`), tenants in three
//! namespaces. Every case checks the exit code and the JSON verdict; the text of each verdict
//! is printed (run with `--no-capture` to read it).
#![allow(clippy::expect_used, clippy::unwrap_used)] // tests fail loudly on unexpected values

#[path = "../../express-operator/tests/support/mod.rs"]
mod support;

mod cli;

use std::time::{Duration, Instant};

use cli::kubectl_express;
use express_api::{
    Backend, BackendSpec, ClusterPhase, ExpressCluster, Frontend, FrontendSpec, NodeSpec,
};
use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, DeleteParams, Patch, PatchParams, PostParams};
use kubesim::faults::FaultRule;
use kubesim::kubelet::{Behavior, KubeletRule};
use serde_json::{Value, json};
use support::*;

const TEAMS: [&str; 3] = ["team-a", "team-b", "team-c"];
/// The User-Agent of the operator under test, so that kubesim can stop its writes alone.
const OPERATOR_AGENT: &str = "express-operator";

struct Operator {
    metrics: std::sync::Arc<express_operator::metrics::Metrics>,
    controller: tokio::task::JoinHandle<()>,
    lease: tokio::task::JoinHandle<kube_lease_manager::Result<kube_lease_manager::LeaseManager>>,
}

impl Operator {
    /// The operator dies as a killed process does: nothing it sends lands any more (an
    /// aborted task could still release its Lease on the way out, which a dead process never
    /// does), then its controller and its Lease renewals stop.
    async fn kill(self, env: &Env) {
        env.sim.faults().stop_writes_after(OPERATOR_AGENT, 0);
        self.controller.abort();
        self.lease.abort();
        let _ = self.controller.await;
        let _ = self.lease.await;
    }
}

async fn start_operator(env: &Env) -> Operator {
    let client = env.sim.client_with_agent(OPERATOR_AGENT).unwrap();
    let (leader, lease) =
        express_operator::leader::elect(client.clone(), "express-system", "default", "doctor-e2e")
            .await
            .unwrap();
    let metrics = express_operator::metrics::Metrics::new();
    let controller = tokio::spawn(express_operator::controller::run(
        client,
        express_operator::controller::Settings {
            fleet_metrics_every: Duration::from_millis(200),
            ..express_operator::controller::Settings::cluster_wide("doctor-e2e", 4)
        },
        metrics.clone(),
        leader,
    ));
    Operator {
        metrics,
        controller,
        lease,
    }
}

/// Tenant `shop` (a Backend and one Frontend, at `version`) in namespace `ns`.
async fn shop(env: &Env, ns: &str, version: &str) {
    express_operator::install::create_namespace(&env.client, ns)
        .await
        .unwrap();
    // Each tenant's pods carry their team, for kubelet rules that fail one namespace's pods.
    let template = json!({"metadata": {"labels": {"team": ns}}});
    let mut cluster: ExpressCluster = serde_json::from_value(json!({
        "apiVersion": "express.dev/v1", "kind": "ExpressCluster",
        "metadata": {"name": "shop"},
        "spec": {"rollout": {"settleSeconds": 0, "progressDeadlineSeconds": 3},
                 "defaults": {"backend": {"expressVersion": version, "podTemplate": template},
                              "frontend": {"expressVersion": version, "podTemplate": template}}}
    }))
    .unwrap();
    cluster.metadata.namespace = Some(ns.into());
    Api::<ExpressCluster>::namespaced(env.client.clone(), ns)
        .create(&PostParams::default(), &cluster)
        .await
        .unwrap();
    Api::<Backend>::namespaced(env.client.clone(), ns)
        .create(
            &PostParams::default(),
            &Backend::new("shop-be", BackendSpec(NodeSpec::for_cluster("shop"))),
        )
        .await
        .unwrap();
    Api::<Frontend>::namespaced(env.client.clone(), ns)
        .create(
            &PostParams::default(),
            &Frontend::new("shop-fe1", FrontendSpec(NodeSpec::for_cluster("shop"))),
        )
        .await
        .unwrap();
}

async fn all_healthy(env: &Env) -> bool {
    for ns in TEAMS {
        let Ok(cluster) = Api::<ExpressCluster>::namespaced(env.client.clone(), ns)
            .get("shop")
            .await
        else {
            return false;
        };
        let healthy = cluster.status.as_ref().is_some_and(|s| {
            s.phase == Some(ClusterPhase::Healthy)
                && s.observed_generation == cluster.metadata.generation
        });
        if !healthy {
            return false;
        }
    }
    true
}

/// Three healthy tenants driven by a leading operator.
async fn fleet(versions: [&str; 3]) -> (Env, Operator) {
    let env = env_without_operator().await;
    let operator = start_operator(&env).await;
    for (ns, version) in TEAMS.iter().zip(versions) {
        shop(&env, ns, version).await;
    }
    wait_until("healthy", async || all_healthy(&env).await).await;
    (env, operator)
}

/// Runs `doctor -o json` (with `flags`) until it gives `verdict`; returns its JSON, after
/// printing the text output of the same verdict.
async fn doctor_until(env: &Env, verdict: &str, flags: &[&str]) -> Value {
    doctor_until_with(env, verdict, flags, |_| true).await
}

/// [`doctor_until`], until the report also satisfies `because` (the verdict for the reason
/// the test sets up, not for a passing state of the fleet).
async fn doctor_until_with(
    env: &Env,
    verdict: &str,
    flags: &[&str],
    because: impl Fn(&Value) -> bool,
) -> Value {
    let expected_code = match verdict {
        "healthy" => 0,
        "tenant" | "deployment" => 1,
        _ => 3,
    };
    let deadline = Instant::now() + Duration::from_secs(45);
    loop {
        let mut args = vec!["doctor", "-o", "json"];
        args.extend(flags);
        let last = kubectl_express(env, &args).await;
        let json: Value = serde_json::from_str(&last.1).unwrap_or(Value::Null);
        if json["verdict"] == verdict && because(&json) {
            assert_eq!(last.0, expected_code, "exit code of {verdict}: {}", last.2);
            let mut text_args = vec!["doctor"];
            text_args.extend(flags);
            let (code, text, _) = kubectl_express(env, &text_args).await;
            eprintln!("---- doctor {} (exit {code})\n{text}", flags.join(" "));
            return json;
        }
        assert!(
            Instant::now() < deadline,
            "doctor never said {verdict}: exit {}\n{}\n{}",
            last.0,
            last.1,
            last.2
        );
        tokio::time::sleep(Duration::from_millis(300)).await;
    }
}

fn check<'a>(report: &'a Value, name: &str) -> &'a Value {
    report["checks"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["name"] == name)
        .unwrap()
}

/// Every pod of the teams of `namespaces` (by their `team` label) behaves so from now on.
fn teams_pods_behave(env: &Env, namespaces: &[&str], behavior: Behavior) {
    for ns in namespaces {
        env.sim.kubelet().add_rule(KubeletRule {
            labels: [("team".to_owned(), (*ns).to_owned())].into(),
            behavior: Some(behavior),
            ..KubeletRule::default()
        });
    }
}

/// The pods of `namespaces` fail as on a broken node pool: the kubelet crash-loops every pod
/// of those teams, and the running ones are lost (deleted); the operator replaces them with no
/// change to any spec.
async fn pods_fail_in(env: &Env, namespaces: &[&str]) {
    teams_pods_behave(env, namespaces, Behavior::CrashLoop);
    for ns in namespaces {
        let pods = Api::<Pod>::namespaced(env.client.clone(), ns);
        for pod in ["shop-be", "shop-fe1"] {
            if let Err(e) = pods.delete(pod, &DeleteParams::default()).await {
                panic!("deleting {ns}/{pod}: {e}");
            }
        }
    }
}

fn unhealthy_namespaces(report: &Value) -> Vec<String> {
    report["tenants"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|t| t["symptoms"].as_array().is_some_and(|s| !s.is_empty()))
        .map(|t| t["namespace"].as_str().unwrap().to_owned())
        .collect()
}

fn crash_loop(template_version: &str) -> Value {
    let template = json!({"metadata": {"annotations": {"kubesim.dev/behavior": "crash-loop"}}});
    json!({"spec": {"defaults": {
        "backend": {"expressVersion": template_version, "podTemplate": template},
        "frontend": {"expressVersion": template_version, "podTemplate": template}}}})
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn healthy_then_a_crash_looping_upgrade_is_a_deployment() {
    let (env, operator) = fleet(["v1", "v1", "v1"]).await;
    let healthy = doctor_until(&env, "healthy", &[]).await;
    // The operator publishes the same fleet view, every symptom included at zero.
    wait_until("the fleet in the operator's metrics", async || {
        let text = operator.metrics.encode();
        text.contains("express_operator_tenants{ring=\"default\"} 3")
            && text.contains("express_operator_unhealthy_namespaces{symptom=\"InvalidSpec\"} 0")
    })
    .await;
    assert_eq!(check(&healthy, "operator")["status"], "ok");
    assert!(
        check(&healthy, "operator")["summary"]
            .as_str()
            .unwrap()
            .contains("doctor-e2e")
    );

    Api::<ExpressCluster>::namespaced(env.client.clone(), "team-a")
        .patch(
            "shop",
            &PatchParams::default(),
            &Patch::Merge(crash_loop("v2")),
        )
        .await
        .unwrap();
    let report = doctor_until(&env, "deployment", &[]).await;
    let tenant = &report["tenants"][0];
    assert_eq!(tenant["namespace"], "team-a");
    assert_eq!(tenant["explainedByRollout"], true);
    assert!(report["verdict"] == "deployment");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_operator_killed_is_the_infrastructure_once_its_lease_expires() {
    let (env, operator) = fleet(["v1", "v1", "v1"]).await;
    operator.kill(&env).await;
    // The Lease lasts 15 s after its last renewal.
    let report = doctor_until_with(&env, "infrastructure", &[], |r| {
        check(r, "operator")["status"] == "fail"
    })
    .await;
    let operator_check = check(&report, "operator");
    assert_eq!(operator_check["status"], "fail");
    let summary = operator_check["summary"].as_str().unwrap();
    assert!(
        summary.contains("express-system/express-operator") && summary.contains("ago"),
        "names the Lease and its age: {summary}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_operator_stopped_while_generations_move_is_a_backlog() {
    let (env, operator) = fleet(["v1", "v1", "v1"]).await;
    operator.kill(&env).await;
    for ns in TEAMS {
        Api::<ExpressCluster>::namespaced(env.client.clone(), ns)
            .patch(
                "shop",
                &PatchParams::default(),
                &Patch::Merge(
                    json!({"spec": {"defaults": {"frontend": {"expressVersion": "v2"}}}}),
                ),
            )
            .await
            .unwrap();
    }
    // The three patches may straddle a second (timestamps have whole seconds): wait until
    // every tenant is past the threshold, not only the first one patched.
    let report = doctor_until_with(&env, "infrastructure", &["--stale-after", "2s"], |r| {
        check(r, "keeping-up")["summary"]
            .as_str()
            .is_some_and(|s| s.contains("behind on 3 tenant(s)"))
    })
    .await;
    let keeping_up = check(&report, "keeping-up");
    assert_eq!(keeping_up["status"], "fail", "{keeping_up}");
    assert!(
        keeping_up["summary"]
            .as_str()
            .unwrap()
            .contains("behind on 3 tenant(s) in 3 namespace(s)")
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_user_who_cannot_read_leases_gets_a_warning_and_still_a_verdict() {
    let (env, _operator) = fleet(["v1", "v1", "v1"]).await;
    env.sim.faults().add_rule(FaultRule {
        verb: Some("get".into()),
        resource: Some("leases.coordination.k8s.io".into()),
        rate: 1.0,
        status: 403,
        retry_after_seconds: None,
    });
    let report = doctor_until(&env, "healthy", &[]).await;
    env.sim.faults().clear();
    assert_eq!(check(&report, "operator")["status"], "warn");
    let access = check(&report, "access");
    assert_eq!(access["status"], "warn");
    assert!(
        access["summary"]
            .as_str()
            .unwrap()
            .contains("Lease express-system/express-operator: forbidden"),
        "{access}"
    );
}

/// The tenants were created seconds before their pods fail: `--recent-rollout 1s` makes that
/// creation old news, as it is for a tenant created days ago.
const CREATED_LONG_AGO: [&str; 2] = ["--recent-rollout", "1s"];

/// When each object of kind `K` in `ns` was created.
async fn creations<K>(env: &Env, ns: &str) -> Vec<k8s_openapi::jiff::Timestamp>
where
    K: kube::Resource<Scope = k8s_openapi::NamespaceResourceScope, DynamicType = ()>
        + Clone
        + serde::de::DeserializeOwned
        + std::fmt::Debug,
{
    Api::<K>::namespaced(env.client.clone(), ns)
        .list(&Default::default())
        .await
        .unwrap()
        .iter()
        .filter_map(|o| o.meta().creation_timestamp.clone().map(|t| t.0))
        .collect()
}

/// Waits until the last creation of the fleet's objects is more than [`CREATED_LONG_AGO`] old
/// (timestamps have whole seconds, hence 3 s on the clock), so that what follows cannot pass
/// for the provisioning rollout.
async fn creation_is_old_news(env: &Env) {
    let mut created = Vec::new();
    for ns in TEAMS {
        created.extend(creations::<ExpressCluster>(env, ns).await);
        created.extend(creations::<Backend>(env, ns).await);
        created.extend(creations::<Frontend>(env, ns).await);
    }
    let last = created.into_iter().max().unwrap();
    wait_until("the fleet's creation is old news", async || {
        k8s_openapi::jiff::Timestamp::now()
            .duration_since(last)
            .as_secs()
            >= 3
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_tenant_failing_with_no_upgrade_is_the_tenant() {
    let (env, _operator) = fleet(["v1", "v1", "v1"]).await;
    creation_is_old_news(&env).await;
    pods_fail_in(&env, &["team-b"]).await;
    let report = doctor_until_with(&env, "tenant", &CREATED_LONG_AGO, |r| {
        unhealthy_namespaces(r) == ["team-b"]
    })
    .await;
    let tenant = report["tenants"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["namespace"] == "team-b")
        .unwrap();
    assert_eq!(tenant["explainedByRollout"], false, "{tenant}");
    assert_eq!(check(&report, "spread")["status"], "warn");
    assert_eq!(check(&report, "operator")["status"], "ok");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pods_failing_in_every_namespace_with_no_rollout_is_the_infrastructure() {
    let (env, _operator) = fleet(["v1", "v1", "v1"]).await;
    creation_is_old_news(&env).await;
    pods_fail_in(&env, &TEAMS).await;
    let report = doctor_until_with(&env, "infrastructure", &CREATED_LONG_AGO, |r| {
        check(r, "spread")["status"] == "fail"
    })
    .await;
    let spread = check(&report, "spread");
    let summary = spread["summary"].as_str().unwrap();
    assert!(
        summary.contains("in 3 namespaces") && summary.contains("no rollout explaining it"),
        "{spread}"
    );
    assert_eq!(check(&report, "operator")["status"], "ok");
    assert_eq!(check(&report, "keeping-up")["status"], "ok");
}

/// The pods of `namespaces` run but never turn Ready (a broken node pool, a readiness
/// dependency failing), and one pod of each is lost (an eviction): the operator re-creates it
/// on the revision its node ran. Nothing in the desired state changed.
async fn pods_lost_and_never_ready_in(env: &Env, namespaces: &[&str]) {
    // Every node provisioned and Ready first (a cluster is Healthy as soon as its first node
    // is, before its frontend object is seen).
    for ns in namespaces {
        wait_until("both nodes Ready", async || {
            Api::<ExpressCluster>::namespaced(env.client.clone(), ns)
                .get("shop")
                .await
                .ok()
                .and_then(|c| c.status)
                .and_then(|s| s.nodes)
                .is_some_and(|n| n.total == 2 && n.ready == 2)
        })
        .await;
    }
    teams_pods_behave(env, namespaces, Behavior::NeverReady);
    for ns in namespaces {
        Api::<Pod>::namespaced(env.client.clone(), ns)
            .delete("shop-fe1", &DeleteParams::default())
            .await
            .unwrap_or_else(|e| panic!("deleting {ns}/shop-fe1: {e}"));
    }
}

/// The node the recovery re-creates, as the operator's status says it: a recovery in
/// progress, on the revision the node ran.
async fn recovering(env: &Env, ns: &str) -> bool {
    Api::<Frontend>::namespaced(env.client.clone(), ns)
        .get("shop-fe1")
        .await
        .ok()
        .and_then(|f| f.status)
        .and_then(|s| s.change)
        .is_some_and(|c| c.recovery && c.state == express_api::ChangeState::InProgress)
}

/// DESIGN section 12: right after the tenants were provisioned (no `--recent-rollout`
/// shortening), a lost pod re-created on its revision and never Ready is the tenant's trouble,
/// not a deployment, from the first samples; the ExpressCluster keeps its last rollout
/// Complete and shows the node down (Degraded, NodeRecovering), and so do `list` and the Argo
/// CD health check.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lost_pod_never_ready_again_is_the_tenant_not_a_rollout() {
    let (env, _operator) = fleet(["v1", "v1", "v1"]).await;
    pods_lost_and_never_ready_in(&env, &["team-b"]).await;
    let lost = Instant::now();
    wait_until("the recovery recorded", async || {
        recovering(&env, "team-b").await
    })
    .await;
    let report = doctor_until_with(&env, "tenant", &[], |r| {
        unhealthy_namespaces(r) == ["team-b"]
    })
    .await;
    assert!(
        lost.elapsed() < Duration::from_secs(15),
        "doctor said tenant {:?} after the pod was lost",
        lost.elapsed()
    );
    let tenant = report["tenants"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["namespace"] == "team-b")
        .unwrap();
    assert_eq!(tenant["explainedByRollout"], false, "{tenant}");
    assert_eq!(tenant["symptoms"], json!(["NodesNotReady"]), "{tenant}");
    assert_eq!(tenant["rollout"]["state"], "Complete", "{tenant}");
    assert_eq!(tenant["nodesDown"][0]["node"], "shop-fe1", "{tenant}");
    assert_eq!(tenant["nodesDown"][0]["work"], "recovery", "{tenant}");

    // The status every reader reads: the last delivery, and the node down being recovered.
    let cluster = Api::<ExpressCluster>::namespaced(env.client.clone(), "team-b")
        .get("shop")
        .await
        .unwrap();
    let status = cluster.status.clone().unwrap();
    assert_eq!(status.phase, Some(ClusterPhase::Degraded), "{status:?}");
    assert_eq!(
        status.rollout.as_ref().and_then(|r| r.state),
        Some(express_api::RolloutState::Complete),
        "{status:?}"
    );
    assert!(
        status.rollout.as_ref().unwrap().current.is_empty(),
        "{status:?}"
    );
    let ready = status
        .conditions
        .iter()
        .find(|c| c.type_ == "Ready")
        .unwrap();
    assert_eq!(
        (ready.status.as_str(), ready.reason.as_str()),
        ("False", "NodeRecovering")
    );
    let progressing = status
        .conditions
        .iter()
        .find(|c| c.type_ == "Progressing")
        .unwrap();
    assert_eq!(progressing.status, "False", "{progressing:?}");

    let (code, list, _) = kubectl_express(&env, &["list", "-n", "team-b"]).await;
    assert_eq!(code, 0, "{list}");
    let row = list.lines().find(|l| l.contains("shop")).unwrap();
    assert!(
        row.contains("Degraded") && row.contains("Complete") && !row.contains("Progressing"),
        "{list}"
    );

    let script =
        argocd_checks::read(&argocd_checks::kind_dir("ExpressCluster").join("health.lua")).unwrap();
    let health = argocd_checks::health(&script, &serde_json::to_value(&cluster).unwrap()).unwrap();
    assert_eq!(health.status, "Degraded", "{health:?}");
    assert!(
        health.message.starts_with("recovering shop-fe1"),
        "{health:?}"
    );
}

/// The same in three of four namespaces: the infrastructure, not three rollouts.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn lost_pods_never_ready_in_three_of_four_namespaces_is_the_infrastructure() {
    let (env, _operator) = fleet(["v1", "v1", "v1"]).await;
    shop(&env, "team-d", "v1").await;
    wait_until("team-d healthy", async || {
        Api::<ExpressCluster>::namespaced(env.client.clone(), "team-d")
            .get("shop")
            .await
            .ok()
            .and_then(|c| c.status)
            .is_some_and(|s| s.phase == Some(ClusterPhase::Healthy))
    })
    .await;
    pods_lost_and_never_ready_in(&env, &TEAMS).await;
    let report = doctor_until_with(&env, "infrastructure", &[], |r| {
        check(r, "spread")["status"] == "fail"
    })
    .await;
    let spread = check(&report, "spread");
    assert!(
        spread["summary"]
            .as_str()
            .unwrap()
            .contains("NodesNotReady in 3 namespaces"),
        "{spread}"
    );
    assert_eq!(check(&report, "operator")["status"], "ok");
    assert_eq!(check(&report, "keeping-up")["status"], "ok");
}
