//! The CRDs committed under `deploy/crds` and in the operator chart's `crds/` must be exactly
//! what the code generates, byte for byte, so a change to the API types cannot ship without its
//! CRD (regenerate both with `cargo run -p express-operator -- crd --output-dir deploy/crds`
//! and `... --output-dir charts/express-operator/crds`).

#![allow(clippy::expect_used, clippy::unwrap_used)] // tests fail loudly on unexpected values

use std::path::PathBuf;
use std::process::Command;

fn repo_root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..")
}

#[test]
fn committed_crds_match_generated() {
    for dir in ["deploy/crds", "charts/express-operator/crds"] {
        committed_crds_in(dir);
    }
}

fn committed_crds_in(relative: &str) {
    let dir = repo_root().join(relative);
    let mut expected_files = Vec::new();
    for crd in express_api::crd::all() {
        let name = express_api::crd::file_name(&crd);
        let generated = express_api::crd::to_yaml(&crd).expect("render");
        let committed = std::fs::read_to_string(dir.join(&name))
            .unwrap_or_else(|e| panic!("{relative}/{name} missing ({e}); regenerate the CRDs"));
        assert_eq!(
            committed, generated,
            "{relative}/{name} is stale; regenerate the CRDs"
        );
        expected_files.push(name);
    }
    let mut present: Vec<String> = std::fs::read_dir(&dir)
        .expect("the CRD directory")
        .filter_map(|e| e.ok()?.file_name().into_string().ok())
        .collect();
    present.sort();
    expected_files.sort();
    assert_eq!(
        present, expected_files,
        "{relative} holds files the code does not generate"
    );
}

#[test]
fn crd_command_prints_every_crd() {
    let output = Command::new(env!("CARGO_BIN_EXE_express-operator"))
        .arg("crd")
        .output()
        .expect("run express-operator crd");
    assert!(output.status.success());
    let text = String::from_utf8(output.stdout).expect("utf-8");
    let documents: Vec<serde_yaml::Value> = serde_yaml::Deserializer::from_str(&text)
        .map(|doc| serde::Deserialize::deserialize(doc).expect("valid YAML"))
        .collect();
    let names: Vec<&str> = documents
        .iter()
        .map(|d| d["metadata"]["name"].as_str().expect("name"))
        .collect();
    assert_eq!(
        names,
        [
            "expressclusters.express.dev",
            "backends.express.dev",
            "frontends.express.dev",
            "operatorreleases.express.dev",
            "fleetreleases.express.dev"
        ]
    );
    for doc in &documents {
        assert_eq!(
            doc["spec"]["names"]["categories"][0].as_str(),
            Some("express")
        );
        let version = &doc["spec"]["versions"][0];
        assert_eq!(version["name"].as_str(), Some("v1alpha1"));
        assert!(
            version["subresources"]["status"].is_mapping(),
            "status subresource"
        );
        let columns: Vec<&str> = version["additionalPrinterColumns"]
            .as_sequence()
            .expect("printer columns")
            .iter()
            .filter_map(|c| c["name"].as_str())
            .collect();
        // `kubectl get operatorreleases` shows phase, wave, moved, age (DESIGN section 12);
        // `kubectl get fleetreleases` its phase and stage in any DC (section 14).
        let wanted: &[&str] = match doc["spec"]["names"]["kind"].as_str() {
            Some("OperatorRelease") => &["Phase", "Wave", "Moved", "Age"],
            Some("FleetRelease") => &["Phase", "Stage", "Age"],
            _ => &["Phase", "Ready", "Age"],
        };
        for wanted in wanted {
            assert!(
                columns.contains(wanted),
                "missing column {wanted}: {columns:?}"
            );
        }
    }
    assert_eq!(
        documents[1]["spec"]["names"]["shortNames"][0].as_str(),
        Some("be")
    );
}

#[test]
fn crd_output_dir_writes_files() {
    let dir = std::env::temp_dir().join(format!("express-crds-{}", std::process::id()));
    let status = Command::new(env!("CARGO_BIN_EXE_express-operator"))
        .args(["crd", "--output-dir"])
        .arg(&dir)
        .status()
        .expect("run");
    assert!(status.success());
    assert!(dir.join("frontends.express.dev.yaml").exists());
    let _ = std::fs::remove_dir_all(&dir);
}
