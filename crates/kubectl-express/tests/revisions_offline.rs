//! `kubectl-express revisions` without a cluster, run as a process: the JSON pinned for the
//! shipped examples, and a clear message with exit 2 for bad input.

#![allow(clippy::expect_used, clippy::unwrap_used)] // tests fail loudly on unexpected values

use std::path::PathBuf;
use std::process::{Command, Output};

fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn revisions(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_kubectl-express"))
        .arg("revisions")
        .args(args)
        .current_dir(repo())
        .output()
        .expect("run kubectl-express")
}

/// The JSON for `examples/acme`, pinned; `REVISIONS_GOLDEN_WRITE=1` rewrites the golden file
/// after a deliberate change (the revisions of shipped examples must not move by accident:
/// they would restart every node of every tenant).
#[test]
fn the_json_for_the_shipped_examples_is_pinned() {
    let output = revisions(&["-f", "examples/acme", "-o", "json", "-v"]);
    assert_eq!(
        output.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let golden =
        PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/golden/revisions-examples-acme.json");
    let got = String::from_utf8(output.stdout).unwrap();
    if std::env::var_os("REVISIONS_GOLDEN_WRITE").is_some() {
        std::fs::write(&golden, &got).unwrap();
    }
    let want =
        std::fs::read_to_string(&golden).expect("golden file (REVISIONS_GOLDEN_WRITE=1 writes it)");
    assert_eq!(got, want, "revisions of the shipped examples changed");
}

#[test]
fn bad_input_exits_2_naming_the_file_or_the_tool() {
    let dir =
        std::env::temp_dir().join(format!("kubectl-express-revisions-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let bad = dir.join("bad.yaml");
    std::fs::write(
        &bad,
        "apiVersion: express.dev/v1alpha1\nkind: Frontend\nmetadata: {name: acme-fe1, namespace: t}\nspec: {clusterConfig: {clusterName: acme}, expressVersion: 'not a tag!'}\n",
    )
    .unwrap();
    let output = revisions(&["-f", bad.to_str().unwrap()]);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains("bad.yaml") && stderr.contains("acme-fe1"),
        "{stderr}"
    );

    let output = revisions(&[
        "--chart",
        "charts/express-tenant",
        "--helm",
        "/nonexistent/helm",
    ]);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains("/nonexistent/helm not found: install Helm"),
        "{stderr}"
    );

    let output = revisions(&["-f", "examples/acme", "--node", "acme-fe9"]);
    assert_eq!(output.status.code(), Some(2));

    // A gate that cannot look must not read as "a discrepancy" (1): unreachable is 2.
    let dead = dir.join("dead.kubeconfig");
    std::fs::write(
        &dead,
        "apiVersion: v1\nkind: Config\nclusters: [{name: x, cluster: {server: 'http://127.0.0.1:9'}}]\ncontexts: [{name: x, context: {cluster: x, user: x}}]\nusers: [{name: x, user: {}}]\ncurrent-context: x\n",
    )
    .unwrap();
    let output = revisions(&[
        "-f",
        "examples/acme",
        "--live",
        "--kubeconfig",
        dead.to_str().unwrap(),
    ]);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains("cannot list"), "{stderr}");
    let _ = std::fs::remove_dir_all(&dir);
}
