//! 5. The L2's reads of the fleet as a person runs them once it has settled: the plugin's
//!    `doctor` and `list -A` over every tenant, with a person's (cluster-admin) kubeconfig, on
//!    either substrate: its wall time, CPU and peak RSS, best and median of three.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Instant;

use crate::harness::target_binary;

const RUNS: usize = 3;

/// One run of the plugin: wall seconds, CPU seconds (user + system), peak RSS MiB.
struct Run {
    wall: f64,
    cpu: f64,
    peak_rss_mib: f64,
}

pub async fn reads(plugin: Option<PathBuf>, kubeconfig: &Path, tenants: usize) {
    let plugin = plugin.unwrap_or_else(|| target_binary("kubectl-express"));
    if !plugin.exists() {
        println!(
            "reads: skipped ({} not built: cargo build --release -p kubectl-express)",
            plugin.display()
        );
        return;
    }
    for argv in [
        &["doctor", "-o", "json"][..],
        &["list", "-A", "-o", "json"][..],
    ] {
        let (plugin, kubeconfig) = (plugin.clone(), kubeconfig.to_owned());
        let runs = tokio::task::spawn_blocking(move || {
            (0..RUNS)
                .map(|_| run(&plugin, &kubeconfig, argv))
                .collect::<Vec<_>>()
        })
        .await
        .expect("the plugin's runs");
        let pick = |value: fn(&Run) -> f64| {
            let mut values: Vec<f64> = runs.iter().map(value).collect();
            values.sort_by(f64::total_cmp);
            (values[0], values[values.len() / 2])
        };
        let (wall, cpu, rss) = (pick(|r| r.wall), pick(|r| r.cpu), pick(|r| r.peak_rss_mib));
        println!(
            "reads: `kubectl express {}` over {tenants} tenants (best, median of {RUNS}): wall {:.2}, {:.2} s; CPU {:.2}, {:.2} s; peak RSS {:.0}, {:.0} MiB",
            argv.join(" "),
            wall.0,
            wall.1,
            cpu.0,
            cpu.1,
            rss.0,
            rss.1
        );
    }
}

/// Runs the plugin to its end and reads what it used from the kernel's account of it. Unsafe
/// because std reaps a child without its resource usage, and polling `/proc` would miss the
/// last moments, where the plugin writes its answer.
#[allow(unsafe_code)]
fn run(plugin: &Path, kubeconfig: &Path, argv: &[&str]) -> Run {
    let started = Instant::now();
    let child = Command::new(plugin)
        .args(argv)
        .env("KUBECONFIG", kubeconfig)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap_or_else(|e| panic!("cannot start {}: {e}", plugin.display()));
    let pid = i32::try_from(child.id()).expect("a pid");
    let mut status = 0;
    // SAFETY: `usage` is a plain C struct the call fills; `pid` is this process's own child,
    // reaped here (and never waited on through `child`, which is dropped without a wait).
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    let reaped = unsafe { libc::wait4(pid, &mut status, 0, &mut usage) };
    assert_eq!(reaped, pid, "wait4 on the plugin");
    drop(child);
    let wall = started.elapsed().as_secs_f64();
    assert!(
        libc::WIFEXITED(status),
        "`kubectl express {}` did not exit",
        argv.join(" ")
    );
    let seconds = |t: libc::timeval| t.tv_sec as f64 + t.tv_usec as f64 / 1e6;
    Run {
        wall,
        cpu: seconds(usage.ru_utime) + seconds(usage.ru_stime),
        // Linux gives ru_maxrss in KiB.
        peak_rss_mib: usage.ru_maxrss as f64 / 1024.0,
    }
}
