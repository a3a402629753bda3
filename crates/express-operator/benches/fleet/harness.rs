//! The processes under test: kubesim and the operator, each started from its binary and killed
//! when dropped, with what `/proc` says of them.

use std::net::{SocketAddr, TcpListener};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use kube::config::{KubeConfigOptions, Kubeconfig};

use crate::args::Args;

/// A child process that is killed when dropped, so that a failed run leaves nothing behind.
pub struct Process(Child);

impl Drop for Process {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

impl Process {
    fn pid(&self) -> u32 {
        self.0.id()
    }

    /// Resident set size, MiB, from `/proc/PID/status`.
    pub fn rss_mib(&self) -> f64 {
        proc_status_kib(self.pid(), "VmRSS:") / 1024.0
    }

    /// Peak resident set size, MiB.
    pub fn peak_rss_mib(&self) -> f64 {
        proc_status_kib(self.pid(), "VmHWM:") / 1024.0
    }

    /// Anonymous resident memory (the heap, not the mapped binary), MiB.
    pub fn rss_anon_mib(&self) -> f64 {
        proc_status_kib(self.pid(), "RssAnon:") / 1024.0
    }

    /// User plus system CPU time so far, seconds, from `/proc/PID/stat` (in USER_HZ, 100 on
    /// Linux).
    pub fn cpu_seconds(&self) -> f64 {
        let stat =
            std::fs::read_to_string(format!("/proc/{}/stat", self.pid())).unwrap_or_default();
        // The command name may hold spaces: count fields after its closing parenthesis.
        let fields: Vec<&str> = stat
            .rsplit_once(')')
            .map(|(_, rest)| rest.split_whitespace().collect())
            .unwrap_or_default();
        let ticks = |i: usize| {
            fields
                .get(i)
                .and_then(|v| v.parse::<f64>().ok())
                .unwrap_or(0.0)
        };
        // utime and stime are fields 14 and 15 of the line, 12 and 13 after the name.
        (ticks(11) + ticks(12)) / 100.0
    }
}

fn proc_status_kib(pid: u32, field: &str) -> f64 {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .unwrap_or_default()
        .lines()
        .find(|l| l.starts_with(field))
        .and_then(|l| l.split_whitespace().nth(1))
        .and_then(|kb| kb.parse::<f64>().ok())
        .unwrap_or(0.0)
}

fn target_binary(name: &str) -> PathBuf {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let target = std::env::var_os("CARGO_TARGET_DIR").map_or(root.join("target"), PathBuf::from);
    target.join("release").join(name)
}

fn free_port() -> SocketAddr {
    TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("a free loopback port")
}

pub struct Sim {
    _process: Process,
    pub client: kube::Client,
    pub url: String,
}

pub async fn start_kubesim(args: &Args, dir: &Path) -> Sim {
    let kubeconfig = dir.join("kubeconfig");
    let binary = args
        .kubesim
        .clone()
        .unwrap_or_else(|| target_binary("kubesim"));
    let process = Process(
        Command::new(&binary)
            .args(["serve", "--addr", "127.0.0.1:0", "--kubeconfig"])
            .arg(&kubeconfig)
            .args(["--startup-seconds", &args.startup_seconds.to_string()])
            .args(["--terminate-seconds", &args.terminate_seconds.to_string()])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap_or_else(|e| panic!("cannot start {}: {e}", binary.display())),
    );
    let deadline = Instant::now() + Duration::from_secs(10);
    while std::fs::read_to_string(&kubeconfig).map_or(true, |s| s.trim().is_empty()) {
        assert!(Instant::now() < deadline, "kubesim did not start");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let config = kube::Config::from_custom_kubeconfig(
        Kubeconfig::read_from(&kubeconfig).expect("kubeconfig"),
        &KubeConfigOptions::default(),
    )
    .await
    .expect("kubeconfig");
    let url = config
        .cluster_url
        .to_string()
        .trim_end_matches('/')
        .to_owned();
    let client = kube::Client::try_from(config).expect("client");
    express_operator::install::install_crds(&client)
        .await
        .expect("CRDs");
    Sim {
        _process: process,
        client,
        url,
    }
}

pub struct Operator {
    pub process: Process,
    pub metrics: String,
}

pub fn start_operator(args: &Args, dir: &Path, life: usize) -> Operator {
    let binary = args
        .operator
        .clone()
        .unwrap_or_else(|| target_binary("express-operator"));
    let metrics = free_port();
    let log = std::fs::File::create(dir.join(format!("operator-{life}.log"))).expect("log");
    let process = Process(
        Command::new(&binary)
            .args(["run", "--metrics-addr", &metrics.to_string()])
            .args(["--kube-qps", &args.kube_qps.to_string()])
            .args(["--kube-burst", &args.kube_burst.to_string()])
            .args(["--concurrency", &args.concurrency.to_string()])
            .env("KUBECONFIG", dir.join("kubeconfig"))
            .env("RUST_LOG", "warn")
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .unwrap_or_else(|e| panic!("cannot start {}: {e}", binary.display())),
    );
    Operator {
        process,
        metrics: format!("http://{metrics}"),
    }
}
