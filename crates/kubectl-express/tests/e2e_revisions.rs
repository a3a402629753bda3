//! `revisions` and `diff` end to end: the real binary against kubesim and the real operator,
//! with manifests written as a user's pipeline would render them.

#![allow(clippy::expect_used, clippy::unwrap_used)] // tests fail loudly on unexpected values

#[path = "../../express-operator/tests/support/mod.rs"]
mod support;

mod cli;

use std::path::PathBuf;

use cli::kubectl_express;
use express_api::{Backend, ExpressCluster, Frontend};
use kube::api::{Api, ListParams, Patch, PatchParams};
use serde_json::{Value, json};
use support::*;

/// The tenant's objects as a chart would render them: what is live, without status and
/// server fields; `edit` changes them first.
async fn rendered(env: &Env, edit: impl Fn(&mut Vec<Value>)) -> PathBuf {
    let mut objects: Vec<Value> = Vec::new();
    let strip = |mut v: Value| {
        let meta = v["metadata"].clone();
        v["metadata"] = json!({"name": meta["name"], "namespace": meta["namespace"]});
        if let Some(labels) = meta.get("labels") {
            v["metadata"]["labels"] = labels.clone();
        }
        if let Some(map) = v.as_object_mut() {
            map.remove("status");
        }
        v
    };
    let params = ListParams::default();
    for c in Api::<ExpressCluster>::namespaced(env.client.clone(), NS)
        .list(&params)
        .await
        .unwrap()
    {
        objects.push(strip(serde_json::to_value(c).unwrap()));
    }
    for b in Api::<Backend>::namespaced(env.client.clone(), NS)
        .list(&params)
        .await
        .unwrap()
    {
        objects.push(strip(serde_json::to_value(b).unwrap()));
    }
    for f in Api::<Frontend>::namespaced(env.client.clone(), NS)
        .list(&params)
        .await
        .unwrap()
    {
        objects.push(strip(serde_json::to_value(f).unwrap()));
    }
    edit(&mut objects);
    let text: Vec<String> = objects
        .iter()
        .map(|o| serde_yaml::to_string(o).unwrap())
        .collect();
    static RENDERED: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
    let path = std::env::temp_dir().join(format!(
        "kubectl-express-revisions-{}-{}.yaml",
        std::process::id(),
        RENDERED.fetch_add(1, std::sync::atomic::Ordering::SeqCst)
    ));
    std::fs::write(&path, text.join("---\n")).unwrap();
    path
}

fn node_mut<'a>(objects: &'a mut [Value], name: &str) -> &'a mut Value {
    objects
        .iter_mut()
        .find(|o| o["metadata"]["name"] == name)
        .unwrap()
}

fn verdicts(stdout: &str) -> Vec<(String, String, Vec<String>)> {
    let json: Value = serde_json::from_str(stdout).unwrap();
    json["nodes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|n| {
            (
                n["name"].as_str().unwrap().to_owned(),
                n["verdict"].as_str().unwrap_or("-").to_owned(),
                n["discrepancies"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .map(|d| d["type"].as_str().unwrap().to_owned())
                    .collect(),
            )
        })
        .collect()
}

#[tokio::test]
async fn matching_manifests_pass_and_one_changed_version_restarts_exactly_that_node() {
    let env = ready_tenant(&["fe1", "fe2"]).await;
    let same = rendered(&env, |_| {}).await;
    let (code, stdout, stderr) = kubectl_express(
        &env,
        &[
            "revisions",
            "-f",
            same.to_str().unwrap(),
            "--live",
            "-o",
            "json",
        ],
    )
    .await;
    assert_eq!(code, 0, "{stdout}\n{stderr}");
    assert!(
        verdicts(&stdout)
            .iter()
            .all(|(_, v, d)| v == "unchanged" && d.is_empty()),
        "{stdout}"
    );

    let changed = rendered(&env, |objects| {
        node_mut(objects, "acme-fe2")["spec"]["expressVersion"] = json!("v2");
    })
    .await;
    let file = changed.to_str().unwrap();
    let (code, stdout, stderr) =
        kubectl_express(&env, &["revisions", "-f", file, "--live", "-o", "json"]).await;
    assert_eq!(code, 0, "{stderr}");
    let got = verdicts(&stdout);
    assert_eq!(
        got.iter()
            .map(|(n, v, _)| (n.as_str(), v.as_str()))
            .collect::<Vec<_>>(),
        [
            ("acme-be", "unchanged"),
            ("acme-fe1", "unchanged"),
            ("acme-fe2", "will-restart")
        ]
    );
    let (code, _, stderr) = kubectl_express(
        &env,
        &["revisions", "-f", file, "--live", "--fail-on-restart"],
    )
    .await;
    assert_eq!(code, 1, "{stderr}");
    assert!(stderr.contains("nodes would restart"), "{stderr}");

    let (code, stdout, stderr) = kubectl_express(&env, &["diff", "-f", file]).await;
    assert_eq!(code, 1, "{stderr}");
    assert!(
        stdout.contains("--- tenant/acme-fe2 live (kept"),
        "{stdout}"
    );
    assert!(
        stdout.contains("~ expressVersion: \"v1\" -> \"v2\""),
        "{stdout}"
    );
    assert!(!stdout.contains("acme-fe1"), "{stdout}");
    let (code, stdout, _) = kubectl_express(&env, &["diff", "-f", same.to_str().unwrap()]).await;
    assert_eq!((code, stdout.as_str()), (0, ""));
}

#[tokio::test]
async fn a_stale_override_and_an_empty_restart_each_exit_1_naming_the_node() {
    let env = ready_tenant(&["fe1", "fe2"]).await;
    Api::<Frontend>::namespaced(env.client.clone(), NS)
        .patch(
            "acme-fe1",
            &PatchParams::default(),
            &Patch::Merge(
                json!({"metadata": {"labels": {"express.dev/deployment-revision": "pin-1"}}}),
            ),
        )
        .await
        .unwrap();
    settle(&env).await;

    let stale = rendered(&env, |objects| {
        node_mut(objects, "acme-fe1")["spec"]["expressVersion"] = json!("v2");
    })
    .await;
    let (code, stdout, stderr) = kubectl_express(
        &env,
        &["revisions", "-f", stale.to_str().unwrap(), "--live"],
    )
    .await;
    assert_eq!(code, 1, "{stdout}\n{stderr}");
    assert!(
        stdout.contains("StaleOverride: Frontend acme-fe1: "),
        "{stdout}"
    );
    assert!(stderr.contains("discrepancies found"), "{stderr}");

    let empty = rendered(&env, |objects| {
        node_mut(objects, "acme-fe1")["metadata"]["labels"]["express.dev/deployment-revision"] =
            json!("pin-2");
    })
    .await;
    let (code, stdout, _) = kubectl_express(
        &env,
        &["revisions", "-f", empty.to_str().unwrap(), "--live"],
    )
    .await;
    assert_eq!(code, 1, "{stdout}");
    assert!(
        stdout.contains("EmptyRestart: Frontend acme-fe1: "),
        "{stdout}"
    );
}

#[tokio::test]
async fn algorithm_skew_is_reported_with_both_revisions() {
    let env = env_without_operator().await;
    let running = operator(&env.client, "skew", tokio::sync::watch::channel(true).1);
    tenant(&env, json!({}), &[("fe1", json!({}))]).await;
    settle(&env).await;
    running.abort();
    // The operator stopped; a status written by a build that hashes differently.
    Api::<Frontend>::namespaced(env.client.clone(), NS)
        .patch_status(
            "acme-fe1",
            &PatchParams::default(),
            &Patch::Merge(json!({"status": {"desiredRevision": "0000000000"}})),
        )
        .await
        .unwrap();
    let (code, stdout, stderr) =
        kubectl_express(&env, &["revisions", "-n", NS, "-o", "json"]).await;
    assert_eq!(code, 1, "{stdout}\n{stderr}");
    let fe1 = verdicts(&stdout)
        .into_iter()
        .find(|(n, ..)| n == "acme-fe1")
        .unwrap();
    assert!(fe1.2.contains(&"AlgorithmSkew".to_owned()), "{stdout}");
    assert!(
        stdout.contains("the operator reports desired revision 0000000000, this plugin computes"),
        "{stdout}"
    );
    assert!(stdout.contains("express.dev/revision/v1"), "{stdout}");
}
