//! `express-operator run`'s wiring, started as the binary starts it (flags parsed, sorted into
//! options, then `run::run`) against kubesim: the metrics server answers, leader election takes
//! the ring's Lease, the controller drives a tenant, and the process ends when asked.
#![allow(clippy::expect_used, clippy::unwrap_used)] // tests fail loudly on unexpected values

mod support;

use std::time::Duration;

use clap::Parser;
use express_operator::run::{self, RunArgs};
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::Pod;
use kube::Api;
use kube::api::ListParams;
use serde_json::json;
use support::*;

/// The operator's command line, `run`'s part of it.
#[derive(Parser)]
struct Line {
    #[command(flatten)]
    run: RunArgs,
}

fn options(args: &[&str], env: &[(&str, &str)]) -> run::Options {
    let line = Line::try_parse_from(std::iter::once("run").chain(args.iter().copied()))
        .expect("flags parse");
    line.run.into_options(|name| {
        env.iter()
            .find(|(key, _)| *key == name)
            .map(|(_, value)| (*value).to_owned())
    })
}

#[test]
fn the_flags_and_the_pods_environment_sort_into_options() {
    let in_a_pod = options(
        &["--leader-elect", "--ring", "canary", "--namespace", "a"],
        &[
            ("POD_NAMESPACE", "ops"),
            ("POD_NAME", "express-operator-0"),
            ("HOSTNAME", "host"),
        ],
    );
    assert_eq!(in_a_pod.operator_namespace, "ops");
    assert_eq!(in_a_pod.api.operator_namespace, "ops");
    assert_eq!(in_a_pod.identity, "express-operator-0");
    assert_eq!(in_a_pod.pod.as_deref(), Some("express-operator-0"));
    assert_eq!(in_a_pod.ring, "canary");
    assert_eq!(in_a_pod.namespaces, ["a"]);
    assert!(in_a_pod.leader_elect);

    let outside = options(&["--operator-namespace", "mine"], &[("HOSTNAME", "host")]);
    assert_eq!(outside.operator_namespace, "mine");
    assert_eq!(outside.identity, "host");
    assert_eq!(outside.pod, None, "outside a pod nothing is labelled");

    let bare = options(&[], &[]);
    assert_eq!(bare.operator_namespace, "express-system");
    assert!(bare.identity.starts_with("express-operator-"));
}

/// The operator run bare paces itself as the chart runs it: the figures in docs/benchmarks.md
/// measured at the chart's defaults hold for either.
#[test]
fn the_binarys_defaults_are_the_charts() {
    let values: serde_yaml::Value = serde_yaml::from_str(
        &std::fs::read_to_string(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../../charts/express-operator/values.yaml"
        ))
        .expect("the chart's values"),
    )
    .expect("YAML");
    let bare = options(&[], &[]);
    assert_eq!(
        values["kubeApi"]["qps"].as_f64(),
        Some(bare.tuning.limits.qps)
    );
    assert_eq!(
        values["kubeApi"]["burst"].as_u64(),
        Some(u64::from(bare.tuning.limits.burst))
    );
    assert_eq!(
        values["concurrency"].as_u64(),
        Some(bare.tuning.concurrency as u64)
    );
}

#[test]
fn flags_that_need_another_are_refused() {
    for args in [
        vec!["run", "--serve-v1beta1"],
        vec!["run", "--conversion-webhook-name", "x"],
        vec!["run", "--ring", "Not_A_Ring"],
    ] {
        assert!(
            Line::try_parse_from(args.clone()).is_err(),
            "{args:?} should be refused"
        );
    }
}

async fn http_status(addr: std::net::SocketAddr, path: &str) -> Option<u16> {
    let request = format!("GET {path} HTTP/1.0\r\nHost: test\r\n\r\n");
    let response = tokio::task::spawn_blocking(move || {
        use std::io::{Read, Write};
        let mut stream = std::net::TcpStream::connect(addr).ok()?;
        stream.write_all(request.as_bytes()).ok()?;
        let mut response = String::new();
        stream.read_to_string(&mut response).ok()?;
        Some(response)
    })
    .await
    .ok()??;
    response.split_whitespace().nth(1)?.parse().ok()
}

fn free_addr() -> std::net::SocketAddr {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    listener.local_addr().expect("addr")
}

#[tokio::test]
async fn run_starts_against_kubesim_drives_a_tenant_and_stops_when_asked() {
    let (sim, client) = kubesim_with_crds(0.15).await;
    for ns in [NS, "express-system"] {
        express_operator::install::create_namespace(&client, ns)
            .await
            .expect("namespace");
    }
    let metrics = free_addr();
    let options = options(
        &[
            "--leader-elect",
            "--metrics-addr",
            &metrics.to_string(),
            "--namespace",
            NS,
        ],
        &[("POD_NAME", "wiring-test")],
    );
    let config = sim.agent_config("express-operator").expect("config");
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let running = tokio::spawn(run::run(config, options, async {
        let _ = stopped.await;
    }));

    tenant_with(&client, json!({}), &[("fe1", json!({}))]).await;
    wait_until("the metrics server is up and healthy", async || {
        http_status(metrics, "/healthz").await == Some(200)
    })
    .await;
    wait_until("the ring's Lease held by this instance", async || {
        Api::<Lease>::namespaced(client.clone(), "express-system")
            .get_opt(&express_api::rings::lease_name("default"))
            .await
            .ok()
            .flatten()
            .and_then(|lease| lease.spec?.holder_identity)
            .as_deref()
            == Some("wiring-test")
    })
    .await;
    wait_until("the tenant's pods created and ready", async || {
        let pods = Api::<Pod>::namespaced(client.clone(), NS)
            .list(&ListParams::default())
            .await
            .map(|l| l.items)
            .unwrap_or_default();
        pods.len() == 2
            && pods.iter().all(|p| {
                p.status
                    .as_ref()
                    .and_then(|s| s.conditions.as_ref())
                    .is_some_and(|c| c.iter().any(|c| c.type_ == "Ready" && c.status == "True"))
            })
    })
    .await;
    wait_until("ready once the caches synced", async || {
        http_status(metrics, "/readyz").await == Some(200)
    })
    .await;

    stop.send(()).expect("run still running");
    let ended = tokio::time::timeout(Duration::from_secs(10), running)
        .await
        .expect("run ends when asked")
        .expect("run's task");
    assert!(ended.is_ok(), "run ended with {ended:?}");
}
