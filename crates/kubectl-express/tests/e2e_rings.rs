//! `kubectl express rings` and the RING column of `list` end to end: the real plugin binary
//! against kubesim over HTTP. No operator runs: each ring's leader is a Lease written as an
//! elected operator writes it, and each tenant's owner the `status.operator` its operator would
//! report, so that every case is exact.
#![allow(clippy::expect_used, clippy::unwrap_used)] // tests fail loudly on unexpected values

#[path = "../../express-operator/tests/support/mod.rs"]
mod support;

mod cli;

use cli::kubectl_express;
use express_api::ExpressCluster;
use k8s_openapi::api::coordination::v1::{Lease, LeaseSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::MicroTime;
use kube::api::{Api, Patch, PatchParams, PostParams};
use kubesim::faults::FaultRule;
use serde_json::{Value, json};
use support::*;

/// Tenant `acme` in namespace `ns`, labelled for `ring` (None: no label), with `status`.
async fn tenant_in(env: &Env, ns: &str, ring: Option<&str>, status: Value) {
    if ns != NS {
        express_operator::install::create_namespace(&env.client, ns)
            .await
            .unwrap();
    }
    let mut metadata = json!({"name": "acme", "namespace": ns});
    if let Some(ring) = ring {
        metadata["labels"] = json!({"express.dev/operator-ring": ring});
    }
    let cluster: ExpressCluster = serde_json::from_value(json!({
        "apiVersion": "express.dev/v1", "kind": "ExpressCluster",
        "metadata": metadata, "spec": {}
    }))
    .unwrap();
    let api = Api::<ExpressCluster>::namespaced(env.client.clone(), ns);
    api.create(&PostParams::default(), &cluster).await.unwrap();
    api.patch_status(
        "acme",
        &PatchParams::default(),
        &Patch::Merge(json!({"status": status})),
    )
    .await
    .unwrap();
}

/// The Lease of a ring, held by `holder` and renewed now, as an elected operator keeps it.
async fn lease(env: &Env, name: &str, holder: &str) {
    let now = MicroTime(k8s_openapi::jiff::Timestamp::now());
    let lease = Lease {
        metadata: kube::core::ObjectMeta {
            name: Some(name.into()),
            ..Default::default()
        },
        spec: Some(LeaseSpec {
            holder_identity: Some(holder.into()),
            acquire_time: Some(now.clone()),
            renew_time: Some(now),
            lease_duration_seconds: Some(300),
            ..LeaseSpec::default()
        }),
    };
    Api::<Lease>::namespaced(env.client.clone(), "express-system")
        .create(&PostParams::default(), &lease)
        .await
        .unwrap();
}

fn forbid(env: &Env, verb: &str) {
    env.sim.faults().add_rule(FaultRule {
        verb: Some(verb.into()),
        resource: Some("leases.coordination.k8s.io".into()),
        rate: 1.0,
        status: 403,
        retry_after_seconds: None,
    });
}

/// A table line's cells: columns are two spaces apart at least, cells have one at most.
fn cells(line: &str) -> Vec<&str> {
    line.split("  ")
        .map(str::trim)
        .filter(|c| !c.is_empty())
        .collect()
}

fn ring<'a>(report: &'a Value, name: &str) -> &'a Value {
    report["rings"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["ring"] == name)
        .unwrap_or_else(|| panic!("no ring {name}: {report}"))
}

#[tokio::test]
async fn rings_name_the_tenants_no_live_operator_serves_until_their_ring_has_a_leader() {
    let env = env_without_operator().await;
    let default = json!({"operator": {"ring": "default", "version": "0.5.0"},
                         "rollout": {"state": "Complete"}});
    tenant_in(&env, NS, None, default.clone()).await;
    tenant_in(&env, "tenant-z", Some("default"), default).await;
    // One canary tenant still waits for its first owner; the other was let go by the default
    // ring mid-rollout.
    tenant_in(&env, "tenant-a", Some("canary"), json!({})).await;
    tenant_in(
        &env,
        "tenant-b",
        Some("canary"),
        json!({"operator": {"ring": "default", "version": "0.5.0",
                            "released": "2026-11-22T06:00:00Z"},
               "rollout": {"state": "Progressing"}}),
    )
    .await;
    lease(&env, "express-operator", "operator-default-1").await;

    let (code, stdout, stderr) = kubectl_express(&env, &["rings"]).await;
    println!("{stdout}{stderr}");
    assert_eq!(code, 1, "{stdout}\n{stderr}");
    assert!(
        stderr.contains("ring canary has no live operator: tenant-a/acme, tenant-b/acme"),
        "{stderr}"
    );
    let rows: Vec<Vec<&str>> = stdout.lines().map(cells).collect();
    assert_eq!(
        rows,
        [
            vec!["RING", "LEADER", "VERSION", "TENANTS", "ROLLING OUT"],
            vec!["default", "operator-default-1", "0.5.0", "2", "0"],
            vec!["canary", "<none>", "<none>", "2", "1"],
        ],
        "{stdout}"
    );

    let (code, stdout, stderr) = kubectl_express(&env, &["rings", "-o", "json"]).await;
    assert_eq!(code, 1, "{stdout}\n{stderr}");
    let report: Value = serde_json::from_str(&stdout).unwrap();
    assert_eq!(
        report["unserved"],
        json!(["tenant-a/acme", "tenant-b/acme"])
    );
    assert_eq!(report["leadersKnown"], true);
    assert_eq!(ring(&report, "canary")["leader"], Value::Null);
    assert_eq!(ring(&report, "default")["leader"], "operator-default-1");
    assert!(ring(&report, "default")["leaseExpires"].is_string());

    // Only `get` on Leases allowed: the rings the tenants name are still read one by one.
    forbid(&env, "list");
    let (code, stdout, stderr) = kubectl_express(&env, &["rings"]).await;
    assert_eq!(code, 1, "{stdout}\n{stderr}");
    assert!(stdout.contains("operator-default-1"), "{stdout}");
    // No Lease readable: leaders unknown, said so, and no tenant claimed unserved.
    forbid(&env, "get");
    let (code, stdout, stderr) = kubectl_express(&env, &["rings"]).await;
    env.sim.faults().clear();
    println!("{stdout}{stderr}");
    assert_eq!(code, 0, "{stdout}\n{stderr}");
    assert!(
        stderr.contains("cannot read Lease express-system/") && stderr.contains("forbidden"),
        "{stderr}"
    );
    assert!(stdout.contains("<unknown>") && !stderr.contains("has no live operator"));

    lease(&env, "express-operator-canary", "operator-canary-1").await;
    let (code, stdout, stderr) = kubectl_express(&env, &["rings", "-o", "json"]).await;
    assert_eq!(code, 0, "{stdout}\n{stderr}");
    let report: Value = serde_json::from_str(&stdout).unwrap();
    assert_eq!(report["unserved"], json!([]));
    let canary = ring(&report, "canary");
    assert_eq!(canary["leader"], "operator-canary-1");
    assert_eq!(
        (&canary["tenants"], &canary["rollingOut"]),
        (&json!(2), &json!(1))
    );
    assert_eq!(canary["tenantsWithoutLeader"], json!([]));
    assert_eq!(ring(&report, "default")["versions"], json!(["0.5.0"]));

    let (code, stdout, stderr) = kubectl_express(&env, &["list", "-A"]).await;
    println!("{stdout}");
    assert_eq!(code, 0, "{stderr}");
    let header = stdout.lines().next().unwrap();
    assert!(
        header.contains("RING") && header.ends_with("OPERATOR VERSION"),
        "{header}"
    );
    for (ns, ring, version) in [
        (NS, "default", "0.5.0"),
        ("tenant-z", "default", "0.5.0"),
        ("tenant-a", "canary", "<none>"),
        ("tenant-b", "canary (released)", "0.5.0"),
    ] {
        let line = stdout
            .lines()
            .find(|l| l.split_whitespace().next() == Some(ns))
            .unwrap_or_else(|| panic!("no line for {ns}: {stdout}"));
        assert_eq!(cells(line)[8..], [ring, version], "{ns}: {line}");
    }

    let (code, _, stderr) = kubectl_express(&env, &["rings", "-o", "yaml"]).await;
    assert_eq!(code, 2, "{stderr}");
}
