//! One fleet across data centres, end to end (issue 41): three kubesim servers as three DCs,
//! each with its own operator (leader election on, as in production) and tenants, in one
//! kubeconfig split over two files merged through `KUBECONFIG`; the real plugin binary reads
//! them with `--all-contexts` / `--context`. Every case checks the exit code and which context
//! each row and verdict belongs to; the text of doctor is printed (`--no-capture` to read it).
#![allow(clippy::expect_used, clippy::unwrap_used)] // tests fail loudly on unexpected values

use std::path::PathBuf;
use std::time::{Duration, Instant};

use express_api::{
    Backend, BackendSpec, ClusterPhase, ExpressCluster, Frontend, FrontendSpec, NodeSpec,
};
use kube::api::{Api, PostParams};
use kubesim::kubelet::KubeletConfig;
use kubesim::{Config, KubeSim};
use serde_json::{Value, json};

/// The User-Agent of each DC's operator, so that kubesim can stop its writes alone.
const OPERATOR_AGENT: &str = "express-operator";
/// The token of the DC started with one (dc-c).
const TOKEN: &str = "dc-c-token";

struct Dc {
    name: &'static str,
    sim: KubeSim,
    client: kube::Client,
    controller: tokio::task::JoinHandle<()>,
    lease: tokio::task::JoinHandle<kube_lease_manager::Result<kube_lease_manager::LeaseManager>>,
}

impl Dc {
    /// A DC: kubesim (with `token`, if any), the CRDs, its operator elected leader, and a tenant
    /// `shop` in each of `namespaces`, all healthy.
    async fn start(name: &'static str, token: Option<&str>, namespaces: &[&str]) -> Dc {
        let sim = KubeSim::start(Config {
            pod_termination_seconds: 0.1,
            kubelet: KubeletConfig {
                startup_seconds: 0.15,
                terminate_seconds: 0.1,
                rules: Vec::new(),
            },
            token: token.map(Into::into),
            ..Config::default()
        })
        .await
        .unwrap();
        let client = sim.client().unwrap();
        express_operator::install::install_crds(&client)
            .await
            .unwrap();
        express_operator::install::create_namespace(&client, "express-system")
            .await
            .unwrap();
        let operator = sim.client_with_agent(OPERATOR_AGENT).unwrap();
        let identity = format!("operator-{name}");
        let (leader, lease) = express_operator::leader::elect(
            operator.clone(),
            "express-system",
            "default",
            &identity,
        )
        .await
        .unwrap();
        let controller = tokio::spawn(express_operator::controller::run(
            operator,
            express_operator::controller::Settings::cluster_wide(&identity, 4),
            express_operator::metrics::Metrics::new(),
            leader,
        ));
        for ns in namespaces {
            shop(&client, ns).await;
        }
        let dc = Dc {
            name,
            sim,
            client,
            controller,
            lease,
        };
        let deadline = Instant::now() + Duration::from_secs(45);
        while !dc.healthy(namespaces).await {
            assert!(Instant::now() < deadline, "{name} never became healthy");
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
        dc
    }

    async fn healthy(&self, namespaces: &[&str]) -> bool {
        for ns in namespaces {
            let Ok(cluster) = Api::<ExpressCluster>::namespaced(self.client.clone(), ns)
                .get("shop")
                .await
            else {
                return false;
            };
            if !cluster.status.as_ref().is_some_and(|s| {
                s.phase == Some(ClusterPhase::Healthy)
                    && s.observed_generation == cluster.metadata.generation
            }) {
                return false;
            }
        }
        true
    }

    /// The operator dies as a killed process does: nothing it sends lands any more, its
    /// controller and Lease renewals stop (its Lease lapses 15 s after the last renewal).
    async fn kill_operator(&self) {
        self.sim.faults().stop_writes_after(OPERATOR_AGENT, 0);
        self.controller.abort();
        self.lease.abort();
    }
}

/// Tenant `shop` (a Backend and one Frontend) in namespace `ns`.
async fn shop(client: &kube::Client, ns: &str) {
    express_operator::install::create_namespace(client, ns)
        .await
        .unwrap();
    let mut cluster: ExpressCluster = serde_json::from_value(json!({
        "apiVersion": "express.dev/v1", "kind": "ExpressCluster",
        "metadata": {"name": "shop"},
        "spec": {"rollout": {"settleSeconds": 0},
                 "defaults": {"backend": {"expressVersion": "v1"},
                              "frontend": {"expressVersion": "v1"}}}
    }))
    .unwrap();
    cluster.metadata.namespace = Some(ns.into());
    Api::<ExpressCluster>::namespaced(client.clone(), ns)
        .create(&PostParams::default(), &cluster)
        .await
        .unwrap();
    Api::<Backend>::namespaced(client.clone(), ns)
        .create(
            &PostParams::default(),
            &Backend::new("shop-be", BackendSpec(NodeSpec::for_cluster("shop"))),
        )
        .await
        .unwrap();
    Api::<Frontend>::namespaced(client.clone(), ns)
        .create(
            &PostParams::default(),
            &Frontend::new("shop-fe1", FrontendSpec(NodeSpec::for_cluster("shop"))),
        )
        .await
        .unwrap();
}

/// A kubeconfig file of `contexts` (name, server, token), each with its own cluster and user
/// entry, plus a user `shared` that both files define (the warning names both files).
fn kubeconfig_file(path: &PathBuf, contexts: &[(&str, &str, Option<&str>)], current: &str) {
    let mut text = String::from("apiVersion: v1\nkind: Config\nclusters:\n");
    for (name, server, _) in contexts {
        text.push_str(&format!(
            "- name: {name}\n  cluster: {{server: '{server}'}}\n"
        ));
    }
    text.push_str("users:\n- name: shared\n  user: {}\n");
    for (name, _, token) in contexts {
        let user = match token {
            Some(token) => format!("{{token: {token}}}"),
            None => "{}".into(),
        };
        text.push_str(&format!("- name: user-{name}\n  user: {user}\n"));
    }
    text.push_str("contexts:\n");
    for (name, _, _) in contexts {
        text.push_str(&format!(
            "- name: {name}\n  context: {{cluster: {name}, user: user-{name}, namespace: default}}\n"
        ));
    }
    text.push_str(&format!("current-context: {current}\n"));
    std::fs::write(path, text).unwrap();
}

/// The fleet's kubeconfig: dc-a and dc-b in one file, dc-c (with its token) and `extra`
/// contexts in the other; returns the `KUBECONFIG` value and both paths.
fn kubeconfig(
    test: &str,
    dcs: &[&Dc],
    extra: &[(&str, &str, Option<&str>)],
) -> (String, PathBuf, PathBuf) {
    let directory = std::env::temp_dir().join(format!(
        "kubectl-express-fleet-{}-{test}",
        std::process::id()
    ));
    std::fs::create_dir_all(&directory).unwrap();
    let (one, two) = (directory.join("one.yaml"), directory.join("two.yaml"));
    fn entry<'a>(dc: &&'a Dc) -> (&'a str, &'a str, Option<&'a str>) {
        (dc.name, dc.sim.url(), (dc.name == "dc-c").then_some(TOKEN))
    }
    let first: Vec<_> = dcs.iter().filter(|d| d.name != "dc-c").map(entry).collect();
    let mut second: Vec<_> = dcs.iter().filter(|d| d.name == "dc-c").map(entry).collect();
    second.extend_from_slice(extra);
    kubeconfig_file(&one, &first, "dc-a");
    kubeconfig_file(&two, &second, "dc-c");
    (format!("{}:{}", one.display(), two.display()), one, two)
}

/// Runs the plugin with `KUBECONFIG` set to `kubeconfig`; the exit code, stdout and stderr.
async fn plugin(kubeconfig: &str, args: &[&str]) -> (i32, String, String) {
    let output = tokio::process::Command::new(env!("CARGO_BIN_EXE_kubectl-express"))
        .args(args)
        .env("KUBECONFIG", kubeconfig)
        .output()
        .await
        .unwrap();
    (
        output.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&output.stdout).into_owned(),
        String::from_utf8_lossy(&output.stderr).into_owned(),
    )
}

async fn plugin_json(kubeconfig: &str, args: &[&str]) -> (i32, Value) {
    let (code, stdout, stderr) = plugin(kubeconfig, args).await;
    let json = serde_json::from_str(&stdout)
        .unwrap_or_else(|e| panic!("{args:?}: not JSON ({e}): {stdout}\n{stderr}"));
    (code, json)
}

/// The entry of `context` in a fleet JSON.
fn entry<'a>(json: &'a Value, context: &str) -> &'a Value {
    json["contexts"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["context"] == context)
        .unwrap_or_else(|| panic!("no entry for {context}: {json}"))
}

/// Runs `doctor -o json` with `args` until its fleet verdict is `verdict`; returns the JSON and
/// the exit code, after printing the text of the same call.
async fn doctor_until(kubeconfig: &str, args: &[&str], verdict: &str) -> (i32, Value) {
    let deadline = Instant::now() + Duration::from_secs(60);
    let mut json_args = vec!["doctor", "-o", "json"];
    json_args.extend(args);
    loop {
        let (code, json) = plugin_json(kubeconfig, &json_args).await;
        if json["verdict"] == verdict {
            let mut text_args = vec!["doctor"];
            text_args.extend(args);
            let (text_code, text, _) = plugin(kubeconfig, &text_args).await;
            eprintln!("---- doctor {} (exit {text_code})\n{text}", args.join(" "));
            return (code, json);
        }
        assert!(
            Instant::now() < deadline,
            "doctor never said {verdict}: exit {code}\n{json:#}"
        );
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn three_dcs_read_as_one_fleet_then_one_operator_killed_is_infrastructure_in_that_dc() {
    let a = Dc::start("dc-a", None, &["team-a", "team-b"]).await;
    let b = Dc::start("dc-b", None, &["team-a"]).await;
    let c = Dc::start("dc-c", Some(TOKEN), &["team-c"]).await;
    let (kubeconfig, one, two) = kubeconfig("read", &[&a, &b, &c], &[]);

    // The selection, and the warning for the user both files define.
    let (code, stdout, stderr) =
        plugin(&kubeconfig, &["list", "--all-contexts", "--list-contexts"]).await;
    assert_eq!(
        (code, stdout.as_str()),
        (0, "dc-a\ndc-b\ndc-c\n"),
        "{stderr}"
    );
    assert!(
        stderr.contains(&format!(
            "user \"shared\" is defined in {} and in {}",
            one.display(),
            two.display()
        )),
        "{stderr}"
    );
    let (code, stdout, _) = plugin(
        &kubeconfig,
        &["list", "--context", "/-[bc]$/", "--list-contexts"],
    )
    .await;
    assert_eq!((code, stdout.as_str()), (0, "dc-b\ndc-c\n"));
    let (code, _, stderr) = plugin(&kubeconfig, &["list", "--context", "dc-a,dc-z"]).await;
    assert_eq!(code, 2, "{stderr}");
    assert!(stderr.contains("no context named \"dc-z\""), "{stderr}");

    // No selection flag: the current context alone (the first file's), as before.
    let (code, stdout, _) = plugin(&kubeconfig, &["list", "-A"]).await;
    assert_eq!(code, 0);
    assert!(stdout.starts_with("NAMESPACE "), "{stdout}");
    assert_eq!(stdout.lines().count(), 3, "dc-a's two tenants: {stdout}");

    // list: a CONTEXT column, each row under its own DC.
    let (code, stdout, stderr) = plugin(&kubeconfig, &["list", "-A", "--all-contexts"]).await;
    assert_eq!(code, 0, "{stderr}");
    let rows: Vec<(String, String)> = stdout
        .lines()
        .skip(1)
        .map(|l| {
            let cells: Vec<&str> = l.split_whitespace().collect();
            (cells[0].to_owned(), format!("{}/{}", cells[1], cells[2]))
        })
        .collect();
    let want: Vec<(String, String)> = [
        ("dc-a", "team-a/shop"),
        ("dc-a", "team-b/shop"),
        ("dc-b", "team-a/shop"),
        ("dc-c", "team-c/shop"),
    ]
    .iter()
    .map(|(c, t)| ((*c).to_owned(), (*t).to_owned()))
    .collect();
    assert_eq!(rows, want, "{stdout}");
    assert!(stdout.starts_with("CONTEXT  NAMESPACE"), "{stdout}");
    let (code, json) =
        plugin_json(&kubeconfig, &["list", "-A", "--all-contexts", "-o", "json"]).await;
    assert_eq!(code, 0);
    assert_eq!(json["total"], 4);
    for (context, namespaces) in [
        ("dc-a", vec!["team-a", "team-b"]),
        ("dc-b", vec!["team-a"]),
        ("dc-c", vec!["team-c"]),
    ] {
        let e = entry(&json, context);
        assert_eq!(e["status"], "ok", "{e}");
        assert_eq!(e["error"], Value::Null);
        let got: Vec<&str> = e["clusters"]
            .as_array()
            .unwrap()
            .iter()
            .map(|r| r["namespace"].as_str().unwrap())
            .collect();
        assert_eq!(got, namespaces, "{context}");
    }

    // rings: each DC's own leader.
    let (code, json) = plugin_json(&kubeconfig, &["rings", "--all-contexts", "-o", "json"]).await;
    assert_eq!(code, 0, "{json:#}");
    for (context, tenants) in [("dc-a", 2), ("dc-b", 1), ("dc-c", 1)] {
        let ring = &entry(&json, context)["rings"][0];
        assert_eq!(ring["ring"], "default");
        assert_eq!(ring["leader"], format!("operator-{context}"), "{ring}");
        assert_eq!(ring["tenants"], tenants, "{context}");
    }
    let (code, stdout, _) = plugin(&kubeconfig, &["rings", "--all-contexts"]).await;
    assert_eq!(code, 0);
    for context in ["dc-a", "dc-b", "dc-c"] {
        assert!(
            stdout
                .lines()
                .any(|l| l.starts_with(context) && l.contains(&format!("operator-{context}"))),
            "{stdout}"
        );
    }

    // doctor: healthy everywhere.
    let (code, json) = doctor_until(&kubeconfig, &["--all-contexts"], "healthy").await;
    assert_eq!(code, 0, "{json:#}");
    for context in ["dc-a", "dc-b", "dc-c"] {
        assert_eq!(entry(&json, context)["verdict"], "healthy");
    }
    let version = entry(&json, "dc-a")["operatorVersions"].clone();
    assert_eq!(version.as_array().map(Vec::len), Some(1), "{json:#}");

    // dc-b's operator dies: infrastructure in dc-b, the others healthy on the same build.
    b.kill_operator().await;
    let (code, json) = doctor_until(&kubeconfig, &["--all-contexts"], "infrastructure").await;
    assert_eq!(code, 3);
    assert_eq!(json["headline"], "infrastructure in dc-b", "{json:#}");
    assert!(
        json["reason"]
            .as_str()
            .unwrap()
            .contains("dc-a and dc-c run the same operator build and are healthy"),
        "{json:#}"
    );
    assert_eq!(entry(&json, "dc-b")["verdict"], "infrastructure");
    assert_eq!(entry(&json, "dc-a")["verdict"], "healthy");
    assert_eq!(entry(&json, "dc-c")["verdict"], "healthy");
    let (code, text, _) = plugin(&kubeconfig, &["doctor", "--all-contexts"]).await;
    assert_eq!(code, 3);
    assert!(
        text.starts_with("FLEET VERDICT: infrastructure in dc-b\n"),
        "{text}"
    );
    assert!(
        text.contains("\n=== CONTEXT dc-b\nVERDICT: infrastructure\n"),
        "{text}"
    );
    // Leaving dc-b out, the fleet is healthy again.
    let (code, json) =
        plugin_json(&kubeconfig, &["doctor", "--context", "^dc-b", "-o", "json"]).await;
    assert_eq!((code, &json["verdict"]), (0, &json!("healthy")), "{json:#}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dcs_that_cannot_be_read_are_named_and_the_exit_code_says_incomplete() {
    let a = Dc::start("dc-a", None, &["team-a"]).await;
    let b = Dc::start("dc-b", None, &["team-b"]).await;
    let c = Dc::start("dc-c", Some(TOKEN), &["team-c"]).await;
    // A server that accepts connections and never answers.
    let silent = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let silent_url = format!("http://{}", silent.local_addr().unwrap());
    let (kubeconfig, _, _) = kubeconfig(
        "unread",
        &[&a, &b, &c],
        &[
            ("dc-c-intruder", c.sim.url(), Some("not-the-token")),
            ("dc-silent", &silent_url, None),
        ],
    );

    // Refused credentials: Unauthorized, named for that context; the rest answered.
    let (code, json) = doctor_until(
        &kubeconfig,
        &["--context", "/^dc-[abc]/", "--context-timeout", "3s"],
        "unknown",
    )
    .await;
    assert_eq!(code, 4, "{json:#}");
    let intruder = entry(&json, "dc-c-intruder");
    assert_eq!(
        (
            &intruder["status"],
            &intruder["error"],
            &intruder["verdict"]
        ),
        (
            &json!("forbidden"),
            &json!("Unauthorized"),
            &json!("unknown")
        )
    );
    for context in ["dc-a", "dc-b", "dc-c"] {
        assert_eq!(entry(&json, context)["verdict"], "healthy", "{json:#}");
    }
    assert_eq!(json["unread"], json!(["dc-c-intruder"]));
    let (code, stdout, _) = plugin(
        &kubeconfig,
        &["list", "-A", "--context", "dc-c,dc-c-intruder"],
    )
    .await;
    assert_eq!(code, 4);
    assert!(
        stdout.contains("context dc-c-intruder: forbidden (Unauthorized)"),
        "{stdout}"
    );
    assert!(
        stdout
            .lines()
            .any(|l| l.starts_with("dc-c ") && l.contains("team-c")),
        "{stdout}"
    );

    // A server that never answers costs the timeout, not the whole command.
    let started = Instant::now();
    let (code, json) = plugin_json(
        &kubeconfig,
        &[
            "doctor",
            "-o",
            "json",
            "--context",
            "dc-a,dc-silent",
            "--context-timeout",
            "2s",
        ],
    )
    .await;
    let took = started.elapsed();
    assert_eq!(code, 4, "{json:#}");
    let dead = entry(&json, "dc-silent");
    assert_eq!(
        (&dead["status"], &dead["error"]),
        (&json!("unreachable"), &json!("timeout after 2s"))
    );
    assert!(took < Duration::from_secs(8), "took {took:?}");
    assert_eq!(entry(&json, "dc-a")["verdict"], "healthy");

    // dc-b stopped: unreachable, the others answered, exit 4.
    b.kill_operator().await;
    b.sim.stop();
    let started = Instant::now();
    let args = [
        "--context",
        "^dc-c-intruder,^dc-silent",
        "--all-contexts",
        "--context-timeout",
        "3s",
    ];
    let (code, json) = doctor_until(&kubeconfig, &args, "unknown").await;
    assert!(started.elapsed() < Duration::from_secs(30));
    assert_eq!(code, 4, "{json:#}");
    let stopped = entry(&json, "dc-b");
    assert_eq!(stopped["status"], "unreachable", "{stopped}");
    assert_eq!(stopped["verdict"], "unknown");
    assert!(stopped["elapsedMs"].as_u64().unwrap() <= 3_500, "{stopped}");
    assert_eq!(entry(&json, "dc-a")["verdict"], "healthy");
    assert_eq!(entry(&json, "dc-c")["verdict"], "healthy");
    let (code, text, _) = plugin(
        &kubeconfig,
        &[
            "doctor",
            "--all-contexts",
            "--context",
            "^dc-c-intruder,^dc-silent",
        ],
    )
    .await;
    assert_eq!(code, 4);
    assert!(text.starts_with("FLEET VERDICT: unknown\n"), "{text}");
    assert!(
        text.contains("\n=== CONTEXT dc-b\nVERDICT: unknown\n  could not be read: unreachable"),
        "{text}"
    );

    // A reached DC at infrastructure keeps exit 3; --require-all makes it 4.
    a.kill_operator().await;
    let (code, json) = doctor_until(&kubeconfig, &args, "infrastructure").await;
    assert_eq!(code, 3, "{json:#}");
    assert_eq!(json["headline"], "infrastructure in dc-a");
    assert!(
        json["reason"].as_str().unwrap().contains("not read: dc-b"),
        "{json:#}"
    );
    let mut strict = args.to_vec();
    strict.extend(["--require-all", "-o", "json"]);
    strict.insert(0, "doctor");
    let (code, _) = plugin_json(&kubeconfig, &strict).await;
    assert_eq!(code, 4);

    // Credentials that may not list ExpressClusters: forbidden, saying what was refused.
    c.sim.faults().add_rule(kubesim::FaultRule {
        verb: Some("list".into()),
        resource: Some("expressclusters.express.dev".into()),
        rate: 1.0,
        status: 403,
        retry_after_seconds: None,
    });
    let (code, json) = plugin_json(
        &kubeconfig,
        &["rings", "-o", "json", "--context", "dc-a,dc-c"],
    )
    .await;
    assert_eq!(code, 4, "{json:#}");
    let refused = entry(&json, "dc-c");
    assert_eq!(
        (&refused["status"], &refused["error"]),
        (
            &json!("forbidden"),
            &json!("forbidden: cannot list expressclusters")
        )
    );
    assert_eq!(entry(&json, "dc-a")["status"], "ok");
    drop(silent);
}
