//! The live verbs end to end: the real `kubectl-express` binary against kubesim with the real
//! operator, for every exit code DESIGN section 9 gives them, and bad input.

#![allow(clippy::expect_used, clippy::unwrap_used)] // tests fail loudly on unexpected values

#[path = "../../express-operator/tests/support/mod.rs"]
mod support;

mod cli;

use std::time::{Duration, Instant};

use cli::kubectl_express;
use express_api::{Backend, BackendSpec, ExpressCluster, NodeSpec, RolloutState};
use kube::api::{Api, PostParams};
use serde_json::{Value, json};
use support::*;

fn version_with(version: &str, behavior: &str, startup: &str) -> Value {
    let template = json!({"metadata": {"annotations": {
        "kubesim.dev/behavior": behavior, "kubesim.dev/startup-seconds": startup}}});
    json!({"spec": {"defaults": {
        "backend": {"expressVersion": version, "podTemplate": template},
        "frontend": {"expressVersion": version, "podTemplate": template}}}})
}

fn pod_writes(env: &Env) -> u64 {
    let c = env.sim.counters();
    c.count("create", "pods") + c.count("delete", "pods")
}

async fn rollout_state(env: &Env) -> Option<RolloutState> {
    Api::<ExpressCluster>::namespaced(env.client.clone(), NS)
        .get("acme")
        .await
        .unwrap()
        .status
        .and_then(|s| s.rollout)
        .and_then(|r| r.state)
}

#[tokio::test]
async fn status_exits_0_when_a_rollout_completes_and_3_on_a_short_timeout() {
    let env = ready_tenant(&["fe1", "fe2"]).await;
    change(&env, version_with("v2", "ready", "0.6")).await;
    let (code, stdout, stderr) =
        kubectl_express(&env, &["status", "acme", "-n", NS, "--timeout", "1s"]).await;
    assert_eq!(code, 3, "{stdout}\n{stderr}");
    assert!(
        stderr.contains("timed out after 1s; last: Progressing: "),
        "{stderr}"
    );
    assert!(stdout.lines().count() >= 1, "{stdout}");

    let (code, stdout, stderr) =
        kubectl_express(&env, &["status", "acme", "-n", NS, "--timeout", "60s"]).await;
    assert_eq!(code, 0, "{stdout}\n{stderr}");
    let last = stdout.lines().last().unwrap();
    assert!(
        last.starts_with("Complete: all 3 up nodes Ready"),
        "{stdout}"
    );
    // Once done, --watch=false says so at once.
    let (code, stdout, _) =
        kubectl_express(&env, &["status", "acme", "-n", NS, "--watch=false"]).await;
    assert_eq!((code, stdout.lines().count()), (0, 1), "{stdout}");
}

#[tokio::test]
async fn status_exits_1_when_a_crash_looping_version_fails() {
    let env = ready_tenant(&["fe1"]).await;
    change(&env, version_with("v2", "crash-loop", "0.1")).await;
    let (code, stdout, stderr) =
        kubectl_express(&env, &["status", "acme", "-n", NS, "--timeout", "60s"]).await;
    assert_eq!(code, 1, "{stdout}\n{stderr}");
    assert!(
        stderr.contains("crash-looping")
            && (stderr.contains("Failed") || stderr.contains("RollingBack")),
        "{stderr}"
    );
}

#[tokio::test]
async fn paused_keeps_status_waiting_or_exits_4_and_every_scope_stops_the_operator() {
    let env = ready_tenant(&["fe1"]).await;
    for scope in [
        vec!["acme", "--reason", "change freeze"],
        vec!["--namespace-wide", "--reason", "change freeze"],
        vec!["--all", "--reason", "change freeze"],
    ] {
        let mut pause = vec!["pause", "-n", NS];
        pause.extend(&scope);
        let (code, stdout, stderr) = kubectl_express(&env, &pause).await;
        assert_eq!(code, 0, "{scope:?}: {stderr}");
        assert!(stdout.starts_with("paused "), "{stdout}");
        let deadline = Instant::now() + Duration::from_secs(10);
        while rollout_state(&env).await != Some(RolloutState::Paused) {
            assert!(Instant::now() < deadline, "{scope:?}: never paused");
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        let writes = pod_writes(&env);
        change(&env, json!({"spec": {"defaults": {"frontend": {"expressVersion": format!("v-{}", scope[0])}}}})).await;

        let (code, stdout, stderr) =
            kubectl_express(&env, &["status", "acme", "-n", NS, "--fail-on-paused"]).await;
        assert_eq!(code, 4, "{stdout}\n{stderr}");
        assert!(stderr.contains("change freeze"), "{scope:?}: {stderr}");
        let (code, _, stderr) =
            kubectl_express(&env, &["status", "acme", "-n", NS, "--timeout", "1s"]).await;
        assert_eq!(code, 3, "paused is not final: {stderr}");
        assert_eq!(
            pod_writes(&env),
            writes,
            "{scope:?}: pods written while paused"
        );

        let mut resume = vec!["resume", "-n", NS];
        resume.push(scope[0]);
        let (code, stdout, stderr) = kubectl_express(&env, &resume).await;
        assert_eq!(code, 0, "{stderr}");
        assert!(stdout.starts_with("resumed "), "{stdout}");
        let (code, stdout, stderr) =
            kubectl_express(&env, &["status", "acme", "-n", NS, "--timeout", "60s"]).await;
        assert_eq!(code, 0, "{scope:?}: {stdout}\n{stderr}");
        assert!(pod_writes(&env) > writes);
    }
}

#[tokio::test]
async fn abort_with_rollback_then_retry_each_wait_for_the_operator() {
    let env = ready_tenant(&["fe1", "fe2", "fe3"]).await;
    slow_pods(&env, ":v2", 1.0);
    change_until_first_creation(&env, v("v2")).await;
    let (code, stdout, stderr) =
        kubectl_express(&env, &["abort", "acme", "-n", NS, "--rollback", "--wait"]).await;
    assert_eq!(code, 0, "{stdout}\n{stderr}");
    let id = stdout.trim();
    assert!(id.starts_with("cli-"), "{stdout}");
    assert!(
        stderr.contains(&format!("request {id} recorded")),
        "{stderr}"
    );
    let cluster = Api::<ExpressCluster>::namespaced(env.client.clone(), NS)
        .get("acme")
        .await
        .unwrap();
    let status = cluster.status.unwrap();
    assert_eq!(status.requests.unwrap().abort.as_deref(), Some(id));
    assert!(status.abort.unwrap().rollback);

    let (code, _, stderr) =
        kubectl_express(&env, &["status", "acme", "-n", NS, "--timeout", "30s"]).await;
    assert_eq!(code, 1, "an aborted rollout is final: {stderr}");

    let (code, stdout, stderr) =
        kubectl_express(&env, &["retry", "acme", "-n", NS, "--wait"]).await;
    assert_eq!(code, 0, "{stdout}\n{stderr}");
    let (code, stdout, stderr) =
        kubectl_express(&env, &["status", "acme", "-n", NS, "--timeout", "60s"]).await;
    assert_eq!(
        code, 0,
        "retried, the rollout completes: {stdout}\n{stderr}"
    );
}

#[tokio::test]
async fn without_an_express_cluster_status_reads_the_nodes() {
    let env = env().await;
    Api::<Backend>::namespaced(env.client.clone(), NS)
        .create(
            &PostParams::default(),
            &Backend::new(
                "acme-be",
                BackendSpec(node_spec(json!({"expressVersion": "v1"}))),
            ),
        )
        .await
        .unwrap();
    add_frontend(&env, "fe1", json!({"expressVersion": "v1"})).await;
    let _ = NodeSpec::for_cluster("acme");
    let (code, stdout, stderr) =
        kubectl_express(&env, &["status", "acme", "-n", NS, "--timeout", "60s"]).await;
    assert_eq!(code, 0, "{stdout}\n{stderr}");
    assert!(stdout.contains("no ExpressCluster"), "{stdout}");
}

#[tokio::test]
async fn bad_input_gets_a_message_and_the_documented_exit_code() {
    let env = ready_tenant(&["fe1"]).await;
    let (code, _, stderr) = kubectl_express(&env, &["status", "nope", "-n", NS]).await;
    assert_eq!(code, 2, "{stderr}");
    assert!(
        stderr.contains("no Express cluster nope in namespace tenant"),
        "{stderr}"
    );
    for verb in [
        vec!["abort", "nope"],
        vec!["retry", "nope"],
        vec!["pause", "nope"],
    ] {
        let mut args = verb.clone();
        args.extend(["-n", NS]);
        let (code, _, stderr) = kubectl_express(&env, &args).await;
        assert_eq!(code, 2, "{verb:?}: {stderr}");
        assert!(
            stderr.contains("no ExpressCluster for Express cluster nope in namespace tenant"),
            "{stderr}"
        );
    }
    let (code, _, stderr) = kubectl_express(&env, &["status", "acme", "--no-such-flag"]).await;
    assert_eq!(code, 2, "{stderr}");
    let (code, _, stderr) = kubectl_express(&env, &["pause", "-n", NS]).await;
    assert_eq!(code, 2, "a scope is required: {stderr}");
    let (code, _, stderr) =
        kubectl_express(&env, &["status", "acme", "-n", NS, "--timeout", "soon"]).await;
    assert_eq!(code, 2, "{stderr}");

    // An API server nobody answers on: a clear failure, not a hang.
    let dead =
        std::env::temp_dir().join(format!("kubectl-express-dead-{}.yaml", std::process::id()));
    std::fs::write(&dead, kubesim::kubeconfig_for("http://127.0.0.1:9")).unwrap();
    let started = Instant::now();
    let output = tokio::process::Command::new(env!("CARGO_BIN_EXE_kubectl-express"))
        .args(["status", "acme", "-n", NS, "--kubeconfig"])
        .arg(&dead)
        .output()
        .await
        .unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(1), "{stderr}");
    assert!(stderr.contains("kubectl-express status:"), "{stderr}");
    assert!(started.elapsed() < Duration::from_secs(30));
}

#[tokio::test]
async fn a_context_the_kubeconfig_lacks_exits_2_naming_the_contexts_it_has_for_every_verb() {
    let env = env_without_operator().await;
    for verb in [
        vec!["get", "acme", "-n", NS],
        vec!["status", "acme", "-n", NS],
        vec!["list"],
        vec!["doctor"],
        vec!["rings"],
        vec!["pause", "acme", "-n", NS],
        vec!["revisions", "-n", NS],
    ] {
        let args: Vec<&str> = verb
            .iter()
            .copied()
            .chain(["--context", "nosuch"])
            .collect();
        let (code, _, stderr) = kubectl_express(&env, &args).await;
        assert_eq!(code, 2, "{verb:?}: {stderr}");
        assert!(
            stderr.contains(r#"no context named "nosuch" in the kubeconfig (it has: kubesim)"#),
            "{verb:?}: {stderr}"
        );
    }
}

#[tokio::test]
async fn get_draws_the_tree_and_with_w_exits_when_the_rollout_settles_and_list_shows_every_cluster()
{
    let env = ready_tenant(&["fe1", "fe2"]).await;
    let (code, stdout, stderr) = kubectl_express(&env, &["get", "acme", "-n", NS]).await;
    assert_eq!(code, 0, "{stderr}");
    assert!(stdout.contains("acme (ExpressCluster)"), "{stdout}");
    for node in ["acme-be", "acme-fe1", "acme-fe2"] {
        assert!(stdout.contains(&format!("──{node}  ")), "{node}: {stdout}");
    }
    assert!(!stdout.contains('\x1b'), "no colour when not on a terminal");

    change(&env, version_with("v2", "ready", "0.4")).await;
    let (code, stdout, stderr) = kubectl_express(&env, &["get", "acme", "-n", NS, "-w"]).await;
    assert_eq!(code, 0, "{stderr}");
    let drawings = stdout.matches("Name:").count();
    assert!(drawings >= 2, "redrawn on changes: {stdout}");
    let last = stdout.rsplit("Name:").next().unwrap();
    assert!(last.contains("Complete  3/3"), "{last}");

    let (code, stdout, _) = kubectl_express(&env, &["list", "-A"]).await;
    assert_eq!(code, 0);
    assert!(stdout.starts_with("NAMESPACE  CLUSTER"), "{stdout}");
    assert!(
        stdout
            .lines()
            .any(|l| l.starts_with("tenant") && l.contains("acme") && l.contains("Healthy")),
        "{stdout}"
    );

    let (code, _, stderr) = kubectl_express(&env, &["get", "nope", "-n", NS]).await;
    assert_eq!(code, 2, "{stderr}");
    assert!(
        stderr.contains("no Express cluster nope in namespace tenant"),
        "{stderr}"
    );
}

#[tokio::test]
async fn live_plan_agrees_with_what_the_operator_does_next_mid_rollout() {
    let env = ready_tenant(&["fe1", "fe2", "fe3", "fe4"]).await;
    slow_pods(&env, ":v2", 2.0);
    let created_from = change_until_first_creation(&env, v("v2")).await;
    let (code, stdout, stderr) =
        kubectl_express(&env, &["plan", "acme", "-n", NS, "-o", "json"]).await;
    assert_eq!(code, 0, "{stderr}");
    let planned: Value = serde_json::from_str(&stdout).unwrap();
    let steps: Vec<String> = planned["clusters"][0]["steps"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| {
            s["node"]
                .as_str()
                .unwrap()
                .trim_start_matches("acme-")
                .to_owned()
        })
        .collect();
    assert_eq!(planned["clusters"][0]["name"], "acme");
    let (code, table, _) = kubectl_express(&env, &["plan", "-n", NS]).await;
    assert_eq!(code, 0);
    assert!(table.contains("Express cluster tenant/acme"), "{table}");
    let (code, graph, _) =
        kubectl_express(&env, &["plan", "acme", "-n", NS, "-o", "mermaid"]).await;
    assert_eq!(code, 0);
    assert!(
        graph.contains("flowchart LR")
            && graph.contains("u_acme_fe1 -->|\"waiting: not yet Ready=True")
            && graph.contains("| u_acme_fe2"),
        "{graph}"
    );

    settle(&env).await;
    let created = since(&env.created, created_from);
    assert_eq!(created.len(), 5, "{created:?}");
    assert_eq!(
        created[1..].to_vec(),
        steps,
        "the operator went {created:?}, the plan said {steps:?}"
    );
    let (code, _, stderr) = kubectl_express(&env, &["plan", "nope", "-n", NS]).await;
    assert_eq!(code, 2, "{stderr}");
}

#[tokio::test]
async fn history_lists_shows_and_diffs_kept_revisions() {
    let env = ready_tenant(&["fe1"]).await;
    change(&env, v("v2")).await;
    settle(&env).await;
    let (code, stdout, stderr) = kubectl_express(&env, &["history", "acme-fe1", "-n", NS]).await;
    assert_eq!(code, 0, "{stderr}");
    let lines: Vec<&str> = stdout.lines().collect();
    assert_eq!(lines.len(), 3, "{stdout}");
    assert!(lines[0].starts_with("NO  REVISION"), "{stdout}");
    assert!(
        lines[1].starts_with("1 ") && lines[1].contains(" v1 "),
        "{stdout}"
    );
    assert!(
        lines[2].starts_with("2 ") && lines[2].ends_with("running, desired"),
        "{stdout}"
    );

    let (code, stdout, _) =
        kubectl_express(&env, &["history", "acme-fe1", "-n", NS, "--diff", "1", "2"]).await;
    assert_eq!(code, 0);
    assert!(
        stdout.contains("~ expressVersion: \"v1\" -> \"v2\""),
        "{stdout}"
    );
    let (code, stdout, _) =
        kubectl_express(&env, &["history", "acme-fe1", "-n", NS, "--revision", "1"]).await;
    assert_eq!(code, 0);
    assert!(stdout.contains("expressVersion: v1"), "{stdout}");

    let (code, _, stderr) =
        kubectl_express(&env, &["history", "acme-fe1", "-n", NS, "--revision", "9"]).await;
    assert_eq!(code, 2, "{stderr}");
    assert!(stderr.contains("has no kept revision 9"), "{stderr}");
    let (code, _, stderr) = kubectl_express(&env, &["history", "acme-fe9", "-n", NS]).await;
    assert_eq!(code, 2, "{stderr}");
    assert!(
        stderr.contains("no Backend or Frontend named acme-fe9 in namespace tenant"),
        "{stderr}"
    );
}

#[tokio::test]
async fn pausing_a_cluster_helm_manages_warns_that_a_sync_reverts_it() {
    let env = ready_tenant(&["fe1"]).await;
    Api::<ExpressCluster>::namespaced(env.client.clone(), NS)
        .patch(
            "acme",
            &kube::api::PatchParams::default(),
            &kube::api::Patch::Merge(json!({"metadata": {
                "labels": {"app.kubernetes.io/managed-by": "Helm"},
                "annotations": {"meta.helm.sh/release-name": "acme"}}})),
        )
        .await
        .unwrap();
    let (code, _, stderr) = kubectl_express(&env, &["pause", "acme", "-n", NS]).await;
    assert_eq!(code, 0, "{stderr}");
    assert!(
        stderr.contains("managed by Helm (release acme)")
            && stderr.contains("kubectl express pause --namespace-wide -n tenant"),
        "{stderr}"
    );
}

#[tokio::test]
async fn version_and_completion() {
    let env = env().await;
    let (code, stdout, stderr) = kubectl_express(&env, &["version"]).await;
    assert_eq!(code, 0, "{stderr}");
    let mut lines = stdout.lines();
    assert_eq!(
        lines.next(),
        Some(concat!("kubectl-express ", env!("CARGO_PKG_VERSION")))
    );
    assert!(
        lines
            .next()
            .unwrap()
            .starts_with("operator: not found in namespace express-system"),
        "{stdout}"
    );
    for shell in ["bash", "zsh", "fish"] {
        let output = tokio::process::Command::new(env!("CARGO_BIN_EXE_kubectl-express"))
            .args(["completion", shell])
            .output()
            .await
            .unwrap();
        assert_eq!(output.status.code(), Some(0), "{shell}");
        assert!(
            String::from_utf8_lossy(&output.stdout).contains("bounce"),
            "{shell}"
        );
    }
}
