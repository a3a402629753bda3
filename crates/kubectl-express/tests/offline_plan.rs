//! `kubectl-express plan --offline`, run as a process: output shapes, orders, and a clear
//! message with a non-zero exit for every kind of bad input.

#![allow(clippy::expect_used, clippy::unwrap_used)] // tests fail loudly on unexpected values

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

use serde_json::{Value, json};

fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..")
}

struct Scratch(PathBuf);

impl Scratch {
    fn new(name: &str) -> Self {
        let dir =
            std::env::temp_dir().join(format!("kubectl-express-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).expect("scratch dir");
        Scratch(dir)
    }

    fn file(&self, name: &str, text: &str) -> PathBuf {
        let path = self.0.join(name);
        std::fs::write(&path, text).expect("write");
        path
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

fn plan(args: &[&str], files: &[&Path]) -> Output {
    let mut command = Command::new(env!("CARGO_BIN_EXE_kubectl-express"));
    command.args(["plan", "--offline"]).args(args);
    for file in files {
        command.arg("-f").arg(file);
    }
    command.output().expect("run kubectl-express")
}

fn stderr(output: &Output) -> String {
    String::from_utf8_lossy(&output.stderr).into_owned()
}

fn json_plan(files: &[&Path]) -> Value {
    let output = plan(&["-o", "json"], files);
    assert!(output.status.success(), "{}", stderr(&output));
    serde_json::from_slice(&output.stdout).expect("JSON on stdout")
}

fn steps(plan: &Value) -> Vec<(String, String, Vec<String>)> {
    plan["clusters"][0]["steps"]
        .as_array()
        .expect("steps")
        .iter()
        .map(|s| {
            (
                s["node"].as_str().expect("node").to_owned(),
                s["action"].as_str().expect("action").to_owned(),
                s["waitsFor"]
                    .as_array()
                    .expect("waitsFor")
                    .iter()
                    .map(|w| w.as_str().expect("name").to_owned())
                    .collect(),
            )
        })
        .collect()
}

const NODE: &str = r#"
apiVersion: express.dev/v1alpha1
kind: Frontend
metadata: {name: NAME, namespace: t}
spec:
  clusterConfig: {clusterName: c}
  expressVersion: v1
"#;

fn frontend(name: &str) -> String {
    NODE.replace("NAME", name)
}

#[test]
fn provisioning_from_nothing_has_the_exact_json_shape() {
    let plan = json_plan(&[&repo().join("examples/acme")]);
    assert_eq!(
        plan,
        json!({"clusters": [{
            "namespace": "tenant-acme",
            "name": "acme",
            "steps": [
                {"node": "acme-be", "action": "Provision", "waitsFor": []},
                {"node": "acme-fe1", "action": "Provision", "waitsFor": ["acme-be"]},
                {"node": "acme-fe2", "action": "Provision", "waitsFor": ["acme-fe1"]},
                {"node": "acme-fe3", "action": "Provision", "waitsFor": ["acme-fe2"]},
                {"node": "acme-fe4", "action": "Provision", "waitsFor": ["acme-fe3"]},
            ]
        }]})
    );
}

#[test]
fn upgrade_order_from_observed_pods() {
    let plan = json_plan(&[
        &repo().join("examples/acme"),
        &repo().join("examples/observed"),
    ]);
    let order: Vec<(String, String)> = steps(&plan).into_iter().map(|(n, a, _)| (n, a)).collect();
    let expected: Vec<(String, String)> =
        ["acme-fe1", "acme-fe2", "acme-be", "acme-fe3", "acme-fe4"]
            .iter()
            .map(|n| (n.to_string(), "Upgrade".to_string()))
            .collect();
    assert_eq!(order, expected);
}

#[test]
fn table_output_lists_each_step() {
    let output = plan(&[], &[&repo().join("examples/acme")]);
    assert!(output.status.success());
    let text = String::from_utf8(output.stdout).expect("utf-8");
    assert!(
        text.contains("Express cluster tenant-acme/acme (5 nodes, 5 up)"),
        "{text}"
    );
    assert!(
        text.lines()
            .any(|l| l.split_whitespace().collect::<Vec<_>>()
                == ["2", "acme-fe1", "Frontend", "Provision", "acme-be"]),
        "{text}"
    );
}

#[test]
fn reads_stdin_lists_and_default_namespace() {
    let list = r#"{"apiVersion": "v1", "kind": "List", "items": [
        {"apiVersion": "express.dev/v1alpha1", "kind": "Backend", "metadata": {"name": "x-be"},
         "spec": {"clusterConfig": {"clusterName": "x"}, "expressVersion": "v1"}},
        {"apiVersion": "express.dev/v1alpha1", "kind": "Frontend", "metadata": {"name": "x-fe1"},
         "spec": {"clusterConfig": {"clusterName": "x"}, "expressVersion": "v1"}}
    ]}"#;
    let mut child = Command::new(env!("CARGO_BIN_EXE_kubectl-express"))
        .args([
            "plan",
            "--offline",
            "-f",
            "-",
            "-o",
            "json",
            "-n",
            "tenant-x",
        ])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn");
    child
        .stdin
        .take()
        .expect("stdin")
        .write_all(list.as_bytes())
        .expect("write");
    let output = child.wait_with_output().expect("wait");
    assert!(output.status.success(), "{}", stderr(&output));
    let plan: Value = serde_json::from_slice(&output.stdout).expect("json");
    assert_eq!(plan["clusters"][0]["namespace"], "tenant-x");
    assert_eq!(steps(&plan).len(), 2);
}

#[test]
fn pods_on_the_desired_revision_mean_nothing_to_do() {
    let scratch = Scratch::new("uptodate");
    let nodes = scratch.file("nodes.yaml", &frontend("c-fe1"));
    // Ask the planner what the desired revision is by provisioning first, then write a pod on it.
    let revision = express_api::effective_spec(
        express_api::NodeKind::Frontend,
        &express_api::NodeSpec {
            express_version: Some("v1".into()),
            ..express_api::NodeSpec::for_cluster("c")
        },
        None,
    )
    .expect("valid")
    .computed_revision();
    let pod = scratch.file(
        "pod.yaml",
        &format!(
            "apiVersion: v1\nkind: Pod\nmetadata: {{name: c-fe1, namespace: t, labels: {{express.dev/deployment-revision: \"{revision}\"}}}}\nspec: {{containers: [{{name: express, image: express:v1}}]}}\n"
        ),
    );
    assert!(steps(&json_plan(&[&nodes, &pod])).is_empty());
    let table = plan(&[], &[&nodes, &pod]);
    assert!(String::from_utf8_lossy(&table.stdout).contains("nothing to do"));
}

#[test]
fn paused_cluster_plans_nothing_and_says_why() {
    let scratch = Scratch::new("paused");
    let nodes = scratch.file("nodes.yaml", &frontend("c-fe1"));
    let control = scratch.file(
        "control.yaml",
        "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: express-control, namespace: t}\ndata: {paused: \"true\", reason: incident 42}\n",
    );
    assert!(steps(&json_plan(&[&nodes, &control])).is_empty());
    let output = plan(&[], &[&nodes, &control]);
    let text = String::from_utf8_lossy(&output.stdout);
    assert!(
        text.contains("paused (namespace (ConfigMap express-control)): incident 42"),
        "{text}"
    );
}

fn assert_fails_with(files: &[&Path], needles: &[&str]) {
    let output = plan(&["-o", "json"], files);
    assert_eq!(
        output.status.code(),
        Some(1),
        "stdout: {}",
        String::from_utf8_lossy(&output.stdout)
    );
    assert!(output.stdout.is_empty(), "nothing is planned on bad input");
    let text = stderr(&output);
    for needle in needles {
        assert!(text.contains(needle), "expected {needle:?} in:\n{text}");
    }
    assert!(!text.contains("panicked"), "{text}");
}

#[test]
fn malformed_yaml_names_the_file_and_document() {
    let scratch = Scratch::new("malformed");
    let file = scratch.file(
        "bad.yaml",
        &format!("{}---\nkind: [unclosed\n", frontend("c-fe1")),
    );
    assert_fails_with(&[&file], &["bad.yaml (document 2): not valid YAML"]);
}

#[test]
fn unknown_kind_is_refused() {
    let scratch = Scratch::new("kind");
    let file = scratch.file(
        "x.yaml",
        "apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: d}\n",
    );
    assert_fails_with(
        &[&file],
        &["x.yaml (document 1): unsupported object Deployment (apps/v1)"],
    );
}

#[test]
fn duplicate_names_are_refused_naming_both_places() {
    let scratch = Scratch::new("dup");
    let a = scratch.file("a.yaml", &frontend("c-fe1"));
    let b = scratch.file("b.yaml", &frontend("c-fe1"));
    assert_fails_with(
        &[&a, &b],
        &[
            "b.yaml (document 1): Frontend t/c-fe1 is also defined in",
            "a.yaml (document 1)",
        ],
    );

    let backend = frontend("c-fe1").replace("kind: Frontend", "kind: Backend");
    let c = scratch.file("c.yaml", &backend);
    assert_fails_with(
        &[&a, &c],
        &["a Backend and a Frontend are both named c-fe1"],
    );
}

#[test]
fn wrong_field_types_name_the_field() {
    let scratch = Scratch::new("types");
    let file = scratch.file(
        "t.yaml",
        &frontend("c-fe1").replace("expressVersion: v1", "up: maybe"),
    );
    assert_fails_with(
        &[&file],
        &["t.yaml (document 1): Frontend t/c-fe1: spec.up: invalid type"],
    );
}

#[test]
fn missing_version_is_an_error() {
    let scratch = Scratch::new("version");
    let file = scratch.file(
        "v.yaml",
        &frontend("c-fe1").replace("  expressVersion: v1\n", ""),
    );
    assert_fails_with(
        &[&file],
        &["v.yaml (document 1): Frontend t/c-fe1: no expressVersion"],
    );
}

#[test]
fn cycle_is_an_error_naming_the_cycle() {
    let scratch = Scratch::new("cycle");
    let with_prerequisite = |name: &str, on: &str| {
        format!(
            "{}  deploymentDependencies:\n    upgradePrerequisites:\n    - {{expressNode: {on}, kind: Frontend}}\n",
            frontend(name)
        )
    };
    let file = scratch.file(
        "c.yaml",
        &format!(
            "{}---\n{}",
            with_prerequisite("c-fe1", "c-fe2"),
            with_prerequisite("c-fe2", "c-fe1")
        ),
    );
    assert_fails_with(
        &[&file],
        &[
            "Express cluster t/c: upgrade prerequisites form a cycle: Frontend c-fe1 -> Frontend c-fe2 -> Frontend c-fe1",
        ],
    );
}

#[test]
fn unknown_prerequisite_is_an_error_naming_the_object() {
    let scratch = Scratch::new("unknown");
    let file = scratch.file(
        "u.yaml",
        &format!(
            "{}  deploymentDependencies:\n    provisioningPrerequisites:\n    - {{expressNode: c-be, kind: Backend}}\n",
            frontend("c-fe1")
        ),
    );
    assert_fails_with(
        &[&file],
        &[
            "u.yaml (document 1): Frontend c-fe1: provisioning prerequisite Backend c-be: no such node in Express cluster c",
        ],
    );
}

#[test]
fn missing_file_and_garbage_are_errors_not_panics() {
    let scratch = Scratch::new("garbage");
    assert_fails_with(&[&scratch.0.join("nope.yaml")], &["nope.yaml"]);
    let scalar = scratch.file("scalar.yaml", "just a string\n");
    assert_fails_with(&[&scalar], &["a document must be a mapping"]);
    let nameless = scratch.file(
        "nameless.yaml",
        "apiVersion: express.dev/v1alpha1\nkind: Backend\nspec: {}\n",
    );
    assert_fails_with(&[&nameless], &["Backend has no metadata.name"]);
    let binary = scratch.0.join("binary.yaml");
    std::fs::write(&binary, [0xff, 0xfe, 0x00, 0x12]).expect("write");
    assert_fails_with(&[&binary], &["binary.yaml"]);
}

#[test]
fn empty_input_plans_nothing() {
    let scratch = Scratch::new("empty");
    let empty = scratch.file("empty.yaml", "---\n---\n");
    let output = plan(&[], &[&empty]);
    assert!(output.status.success());
    assert!(String::from_utf8_lossy(&output.stdout).contains("no Express cluster found"));
}

#[test]
fn files_without_offline_and_offline_without_files_are_usage_errors() {
    let output = Command::new(env!("CARGO_BIN_EXE_kubectl-express"))
        .args(["plan", "-f", "x.yaml"])
        .output()
        .expect("run");
    assert_eq!(output.status.code(), Some(2));
    assert!(stderr(&output).contains("-f reads manifests: add --offline"));
    let output = Command::new(env!("CARGO_BIN_EXE_kubectl-express"))
        .args(["plan", "--offline"])
        .output()
        .expect("run");
    assert_eq!(output.status.code(), Some(2));
    assert!(stderr(&output).contains("--offline needs -f FILE"));
    let bad_flag = Command::new(env!("CARGO_BIN_EXE_kubectl-express"))
        .args(["plan", "--offline", "-f", "x", "-o", "xml"])
        .output()
        .expect("run");
    assert_eq!(bad_flag.status.code(), Some(2));
}

#[test]
fn files_whose_rollout_ids_disagree_plan_nothing_and_say_why() {
    let scratch = Scratch::new("rollout-ids");
    let node = |kind: &str, name: &str, id: &str| {
        format!(
            "apiVersion: express.dev/v1alpha1\nkind: {kind}\nmetadata:\n  name: {name}\n  annotations: {{express.dev/rollout-id: {id}}}\nspec: {{clusterConfig: {{clusterName: acme}}, expressVersion: v2}}\n"
        )
    };
    let half_written = scratch.file(
        "tenant.yaml",
        &[
            node("Backend", "acme-be", "r2"),
            node("Frontend", "acme-fe1", "r1"),
            node("Frontend", "acme-fe2", "r2"),
        ]
        .join("---\n"),
    );
    let output = plan(&[], &[&half_written]);
    assert!(output.status.success(), "{}", stderr(&output));
    let text = String::from_utf8_lossy(&output.stdout);
    assert!(
        text.contains("nothing starts: waiting for the desired state to settle")
            && text.contains("r2 on acme-be, acme-fe2 (2 of 3 nodes); r1 on acme-fe1"),
        "{text}"
    );
    assert_eq!(steps(&json_plan(&[&half_written])), vec![]);

    // The same files with one id: a complete delivery, planned in the default order.
    let complete = scratch.file(
        "complete.yaml",
        &[
            node("Backend", "acme-be", "r2"),
            node("Frontend", "acme-fe1", "r2"),
            node("Frontend", "acme-fe2", "r2"),
        ]
        .join("---\n"),
    );
    let order: Vec<String> = steps(&json_plan(&[&complete]))
        .into_iter()
        .map(|(node, _, _)| node)
        .collect();
    assert_eq!(order, ["acme-be", "acme-fe1", "acme-fe2"]);
}
