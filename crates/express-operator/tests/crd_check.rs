//! `express-operator crd check` through the real binary: the project keeps its promise (this
//! build's CRDs are compatible with the last released build's, kept in
//! `deploy/released-crds`), a breaking change in files is named, bad input exits 2, and against
//! a DC (kubesim) a tightened bound names the stored objects it would refuse.
#![allow(clippy::expect_used, clippy::unwrap_used)] // tests fail loudly on unexpected values

mod support;

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{Api, PostParams};
use serde_json::{Value, json};

fn repo_root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn crd_check(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_express-operator"))
        .args(["crd", "check"])
        .args(args)
        .output()
        .expect("run express-operator crd check")
}

fn text(output: &Output) -> String {
    format!(
        "exit {:?}\nstdout:\n{}\nstderr:\n{}",
        output.status.code(),
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    )
}

fn scratch(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("crd-check-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// This build's CRDs, written as `crd --output-dir` writes them, with `edit` applied to the
/// one named `name`.
fn crds_with(dir: &Path, name: &str, edit: impl Fn(&mut Value)) {
    for crd in express_api::crd::all() {
        let mut value = serde_json::to_value(&crd).unwrap();
        if crd.metadata.name.as_deref() == Some(name) {
            edit(&mut value);
        }
        let file = dir.join(express_api::crd::file_name(&crd));
        std::fs::write(file, serde_yaml::to_string(&value).unwrap()).unwrap();
    }
}

fn schema<'a>(crd: &'a mut Value, pointer: &str) -> &'a mut Value {
    crd.pointer_mut(&format!("/spec/versions/0/schema/openAPIV3Schema{pointer}"))
        .unwrap_or_else(|| panic!("no {pointer} in the schema"))
}

#[test]
fn this_build_keeps_the_promise_of_the_last_release() {
    let released = repo_root().join("deploy/released-crds/0.1.0");
    let output = crd_check(&["--against", released.to_str().unwrap()]);
    assert_eq!(output.status.code(), Some(0), "{}", text(&output));
    assert!(
        String::from_utf8_lossy(&output.stdout).contains("compatible"),
        "{}",
        text(&output)
    );
}

#[test]
fn a_field_the_build_no_longer_has_is_breaking_and_named() {
    let dir = scratch("removed");
    // The installed CRD has a field this build does not: removing it would lose stored data.
    crds_with(&dir, "operatorreleases.express.dev", |crd| {
        let spec = schema(crd, "/properties/spec/properties");
        spec["retiredField"] = json!({"type": "string"});
    });
    let output = crd_check(&["--against", dir.to_str().unwrap(), "-o", "json"]);
    assert_eq!(output.status.code(), Some(1), "{}", text(&output));
    let report: Value = serde_json::from_slice(&output.stdout).unwrap();
    assert_eq!(report["compatible"], json!(false));
    let problems = report["problems"].as_array().unwrap();
    assert!(
        problems
            .iter()
            .any(|p| p["crd"] == "operatorreleases.express.dev"
                && p["path"].as_str().unwrap().contains("retiredField")
                && p["severity"] == "breaking"),
        "{}",
        text(&output)
    );
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn bad_input_exits_2_and_says_why() {
    let missing = crd_check(&["--against", "/nonexistent/crds"]);
    assert_eq!(missing.status.code(), Some(2), "{}", text(&missing));
    assert!(String::from_utf8_lossy(&missing.stderr).contains("cannot read"));

    let dir = scratch("not-crd");
    std::fs::write(
        dir.join("pod.yaml"),
        "apiVersion: v1\nkind: Pod\nmetadata: {name: p}\n",
    )
    .unwrap();
    let not_crd = crd_check(&["--against", dir.to_str().unwrap()]);
    assert_eq!(not_crd.status.code(), Some(2), "{}", text(&not_crd));
    assert!(String::from_utf8_lossy(&not_crd.stderr).contains("not a CustomResourceDefinition"));

    let other = scratch("other-group");
    crds_with(&other, "backends.express.dev", |crd| {
        crd["spec"]["group"] = json!("example.com");
    });
    let other_group = crd_check(&["--against", other.to_str().unwrap()]);
    assert_eq!(other_group.status.code(), Some(2), "{}", text(&other_group));
    assert!(String::from_utf8_lossy(&other_group.stderr).contains("group example.com"));

    let unknown = crd_check(&[
        "--context",
        "nowhere",
        "--kubeconfig",
        dir.join("pod.yaml").to_str().unwrap(),
    ]);
    assert_eq!(unknown.status.code(), Some(2), "{}", text(&unknown));
    for dir in [dir, other] {
        let _ = std::fs::remove_dir_all(&dir);
    }
}

/// A DC whose ExpressCluster CRD has no bound on `clusterName` stores one too long for this
/// build's bound: the check against the DC names it, and says the change breaks it.
#[tokio::test(flavor = "multi_thread")]
async fn against_a_dc_a_tightened_bound_names_the_stored_objects_it_would_refuse() {
    let (sim, client) = support::kubesim_with_crds(0.15).await;
    let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
    let mut installed = crds.get("expressclusters.express.dev").await.unwrap();
    let mut value = serde_json::to_value(&installed).unwrap();
    let cluster_name = schema(&mut value, "/properties/spec/properties/clusterName");
    let map = cluster_name.as_object_mut().unwrap();
    map.remove("maxLength");
    map.remove("pattern");
    installed = serde_json::from_value(value).unwrap();
    crds.replace(
        "expressclusters.express.dev",
        &PostParams::default(),
        &installed,
    )
    .await
    .unwrap();
    express_operator::install::create_namespace(&client, "team-long")
        .await
        .unwrap();
    let long = "x".repeat(70);
    let object: express_api::ExpressCluster = serde_json::from_value(json!({
        "apiVersion": "express.dev/v1alpha1",
        "kind": "ExpressCluster",
        "metadata": {"name": "shop", "namespace": "team-long"},
        "spec": {"clusterName": long},
    }))
    .unwrap();
    Api::<express_api::ExpressCluster>::namespaced(client.clone(), "team-long")
        .create(&PostParams::default(), &object)
        .await
        .unwrap();

    let dir = scratch("dc");
    let kubeconfig = dir.join("kubeconfig");
    std::fs::write(&kubeconfig, sim.kubeconfig()).unwrap();
    let kubeconfig = kubeconfig.to_str().unwrap().to_owned();
    let output = tokio::task::spawn_blocking(move || {
        crd_check(&["--context", "kubesim", "--kubeconfig", &kubeconfig])
    })
    .await
    .unwrap();
    // What a person reads (shown with --nocapture).
    println!("{}", text(&output));
    assert_eq!(output.status.code(), Some(1), "{}", text(&output));
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(stdout.contains("BREAKING"), "{}", text(&output));
    assert!(stdout.contains(".spec.clusterName"), "{}", text(&output));
    assert!(stdout.contains("team-long/shop"), "{}", text(&output));
    sim.stop();
    let _ = std::fs::remove_dir_all(&dir);
}
