//! 7. The dashboard over the settled fleet, as a person opens it with `kubectl express
//!    dashboard -A`: its first listing of every tenant (wall, CPU, peak RSS), then changes of
//!    one tenant each (its namespace's control ConfigMap pausing it) until the page shows it
//!    paused: how long a person waits for the change, and what the redraw costs the dashboard.

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{Api, DeleteParams, PostParams};
use serde_json::Value;

use crate::Bench;
use crate::harness::{Process, cpu_seconds, target_binary};
use crate::http::http_get;
use crate::measure::percentile;
use crate::tenants::namespace;

/// Tenants paused one at a time, each change its own window.
const CHANGES: usize = 10;

pub async fn dashboard(bench: &Bench, plugin: Option<PathBuf>) {
    let plugin = plugin.unwrap_or_else(|| target_binary("kubectl-express"));
    if !plugin.exists() {
        println!("dashboard: skipped ({} not built)", plugin.display());
        return;
    }
    let tenants = bench.args.tenants;
    let started = Instant::now();
    let (process, url) = open(&plugin, &bench.sim.admin_kubeconfig).await;
    let deadline = started + Duration::from_secs(600);
    loop {
        assert!(
            Instant::now() < deadline,
            "the dashboard never listed every tenant"
        );
        if let Some(page) = tenants_page(&url, "").await
            && page["total"].as_u64().unwrap_or(0) >= tenants as u64
            && !page["doctor"].is_null()
        {
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    println!(
        "dashboard: first listing of {tenants} tenants (every tenant counted, the doctor's banner drawn): wall {:.2} s; CPU {:.2} s; peak RSS {:.0} MiB",
        started.elapsed().as_secs_f64(),
        cpu_seconds(process.pid()),
        process.peak_rss_mib()
    );
    tokio::time::sleep(Duration::from_secs(3)).await;

    let control = |ns: &str| Api::<ConfigMap>::namespaced(bench.sim.client.clone(), ns);
    let (mut shown_after, mut cpu_ms) = (Vec::new(), Vec::new());
    for i in 1..=CHANGES.min(tenants.saturating_sub(1)) {
        let ns = namespace(i);
        let cpu_before = cpu_seconds(process.pid());
        let changed = Instant::now();
        let mut pause = ConfigMap::default();
        pause.metadata.name = Some(express_api::keys::CONTROL_CONFIGMAP_NAMESPACE.into());
        pause.data = Some(
            [
                ("paused".to_owned(), "true".to_owned()),
                ("reason".to_owned(), "fleet benchmark".to_owned()),
            ]
            .into(),
        );
        control(&ns)
            .create(&PostParams::default(), &pause)
            .await
            .expect("a tenant's control ConfigMap");
        let deadline = changed + Duration::from_secs(120);
        loop {
            assert!(
                Instant::now() < deadline,
                "the dashboard never showed {ns} paused"
            );
            let shown = tenants_page(&url, &ns).await.is_some_and(|page| {
                page["tenants"][0]["paused"]
                    .as_str()
                    .is_some_and(|p| !matches!(p, "" | "-" | "false"))
            });
            if shown {
                break;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        shown_after.push(changed.elapsed().as_secs_f64() * 1000.0);
        cpu_ms.push((cpu_seconds(process.pid()) - cpu_before) * 1000.0);
    }
    for i in 1..=shown_after.len() {
        control(&namespace(i))
            .delete(
                express_api::keys::CONTROL_CONFIGMAP_NAMESPACE,
                &DeleteParams::default(),
            )
            .await
            .expect("the tenant resumed");
    }
    shown_after.sort_by(f64::total_cmp);
    cpu_ms.sort_by(f64::total_cmp);
    println!(
        "dashboard: a tenant paused, shown paused on the page after p50 {:.0} ms, max {:.0} ms (its own watch of the namespace's control ConfigMap, then its page); the dashboard's CPU over each change p50 {:.1} ms; {} changes",
        percentile(&shown_after, 50.0),
        shown_after.last().copied().unwrap_or(f64::NAN),
        percentile(&cpu_ms, 50.0),
        shown_after.len()
    );
    drop(process);
}

/// The dashboard started on any free loopback port, and the URL it printed.
async fn open(plugin: &Path, kubeconfig: &Path) -> (Process, String) {
    let mut child = Command::new(plugin)
        .args(["dashboard", "-A", "--addr", "127.0.0.1:0"])
        // One doctor run, at start: the banner the first listing waits for.
        .args(["--doctor-interval", "3600"])
        .env("KUBECONFIG", kubeconfig)
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap_or_else(|e| panic!("cannot start {}: {e}", plugin.display()));
    let stdout = child.stdout.take().expect("the dashboard's stdout");
    let process = Process::own(child);
    let url = tokio::task::spawn_blocking(move || {
        let mut lines = BufReader::new(stdout);
        let mut line = String::new();
        loop {
            line.clear();
            let read = lines.read_line(&mut line).expect("the dashboard's stdout");
            assert!(read > 0, "the dashboard exited before printing its URL");
            if let Some(at) = line.find("http://127.0.0.1:") {
                let url: String = line[at..]
                    .chars()
                    .take_while(|c| !c.is_whitespace())
                    .collect();
                // Whatever else it prints is read, so that a full pipe never stops it.
                std::thread::spawn(move || std::io::copy(&mut lines, &mut std::io::sink()));
                return url.trim_end_matches('/').to_owned();
            }
        }
    })
    .await
    .expect("the dashboard's URL");
    (process, url)
}

/// The fleet page's data, filtered by `query` (a namespace) when not empty.
async fn tenants_page(url: &str, query: &str) -> Option<Value> {
    let path = if query.is_empty() {
        format!("{url}/api/tenants")
    } else {
        format!("{url}/api/tenants?q={query}")
    };
    match http_get(&path).await {
        Some((200, body)) => serde_json::from_str(&body).ok(),
        _ => None,
    }
}
