//! The processes under test: kubesim (or Kubernetes' own control plane, started beforehand by
//! `scripts/real-cluster.sh`) and the operator, each started from its binary and killed when
//! dropped, with what `/proc` says of them.

use std::net::{SocketAddr, TcpListener};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use kube::config::{KubeConfigOptions, Kubeconfig};

use crate::args::{Args, Substrate};

/// A child process that is killed when dropped, so that a failed run leaves nothing behind.
pub struct Process(Child);

impl Drop for Process {
    /// Asked to stop first (SIGTERM, as Kubernetes asks a pod), so that an operator hands its
    /// Lease over as a rolling update would; killed if it has not exited within 10 s.
    fn drop(&mut self) {
        let asked = Command::new("kill")
            .args(["-TERM", &self.0.id().to_string()])
            .status()
            .is_ok_and(|s| s.success());
        let deadline = Instant::now() + Duration::from_secs(10);
        while asked && Instant::now() < deadline {
            if matches!(self.0.try_wait(), Ok(Some(_))) {
                return;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

impl Process {
    /// Takes `child` over: it is asked to stop (then killed) when dropped.
    pub fn own(child: Child) -> Self {
        Self(child)
    }

    pub fn pid(&self) -> u32 {
        self.0.id()
    }

    /// Resident set size, MiB, from `/proc/PID/status`.
    pub fn rss_mib(&self) -> f64 {
        rss_mib(self.pid())
    }

    /// Peak resident set size, MiB.
    pub fn peak_rss_mib(&self) -> f64 {
        proc_status_kib(self.pid(), "VmHWM:") / 1024.0
    }

    /// Anonymous resident memory (the heap, not the mapped binary), MiB.
    pub fn rss_anon_mib(&self) -> f64 {
        proc_status_kib(self.pid(), "RssAnon:") / 1024.0
    }

    /// User plus system CPU time so far, seconds.
    pub fn cpu_seconds(&self) -> f64 {
        cpu_seconds(self.pid())
    }
}

/// Resident set size of process `pid`, MiB, from `/proc/PID/status`.
pub fn rss_mib(pid: u32) -> f64 {
    proc_status_kib(pid, "VmRSS:") / 1024.0
}

/// User plus system CPU time of process `pid` so far, seconds, from `/proc/PID/stat` (in
/// USER_HZ, 100 on Linux).
pub fn cpu_seconds(pid: u32) -> f64 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
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

fn proc_status_kib(pid: u32, field: &str) -> f64 {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .unwrap_or_default()
        .lines()
        .find(|l| l.starts_with(field))
        .and_then(|l| l.split_whitespace().nth(1))
        .and_then(|kb| kb.parse::<f64>().ok())
        .unwrap_or(0.0)
}

pub fn target_binary(name: &str) -> PathBuf {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let target = std::env::var_os("CARGO_TARGET_DIR").map_or(root.join("target"), PathBuf::from);
    target.join("release").join(name)
}

fn free_port() -> SocketAddr {
    TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("a free loopback port")
}

/// The API server the fleet lives on, and how the operator reaches it.
pub struct Sim {
    /// kubesim's process; none on the real control plane, which outlives the benchmark.
    _process: Option<Process>,
    /// As cluster-admin: the benchmark's own client.
    pub client: kube::Client,
    pub url: String,
    pub substrate: Substrate,
    /// The kubeconfig the operator runs with: kubesim's, or the chart's ServiceAccount's.
    pub operator_kubeconfig: PathBuf,
    /// A person's kubeconfig (cluster-admin): what the plugin's reads run with.
    pub admin_kubeconfig: PathBuf,
    /// The real control plane's directory (`scripts/real-cluster.sh up DIR`).
    pub cluster: Option<PathBuf>,
    /// The metrics address of the operator running now: on the real control plane its
    /// requests are counted from its own metrics, which nobody else's requests reach.
    pub operator_metrics: Mutex<Option<String>>,
}

/// The API server of `--substrate`: kubesim started, or the real control plane attached.
pub async fn start_substrate(args: &Args, dir: &Path) -> Sim {
    match args.substrate {
        Substrate::Kubesim => start_kubesim(args, dir).await,
        Substrate::Real => {
            let cluster = args
                .cluster
                .clone()
                .expect("--cluster names the real control plane");
            attach_real(&cluster).await
        }
    }
}

async fn client_of(kubeconfig: &Path) -> (kube::Client, String) {
    let config = kube::Config::from_custom_kubeconfig(
        Kubeconfig::read_from(kubeconfig).expect("kubeconfig"),
        &KubeConfigOptions::default(),
    )
    .await
    .expect("kubeconfig");
    let url = config
        .cluster_url
        .to_string()
        .trim_end_matches('/')
        .to_owned();
    (kube::Client::try_from(config).expect("client"), url)
}

/// The operator's namespace, which the chart's Deployment names (its Lease and control
/// ConfigMap live there).
async fn ensure_operator_namespace(client: &kube::Client) {
    match express_operator::install::create_namespace(
        client,
        express_operator::controller::DEFAULT_OPERATOR_NAMESPACE,
    )
    .await
    {
        Ok(_) => {}
        Err(kube::Error::Api(status)) if status.code == 409 => {}
        Err(e) => panic!("the operator's namespace: {e}"),
    }
}

async fn attach_real(cluster: &Path) -> Sim {
    let (client, url) = client_of(&cluster.join("kubeconfig")).await;
    let operator_kubeconfig = cluster.join("express-operator.kubeconfig");
    assert!(
        operator_kubeconfig.exists(),
        "{} is missing: scripts/chart-operator.py account {} writes it",
        operator_kubeconfig.display(),
        cluster.display()
    );
    express_operator::install::install_crds(&client)
        .await
        .expect("CRDs");
    ensure_operator_namespace(&client).await;
    Sim {
        _process: None,
        client,
        url,
        substrate: Substrate::Real,
        operator_kubeconfig,
        admin_kubeconfig: cluster.join("kubeconfig"),
        cluster: Some(cluster.to_owned()),
        operator_metrics: Mutex::new(None),
    }
}

async fn start_kubesim(args: &Args, dir: &Path) -> Sim {
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
    let (client, url) = client_of(&kubeconfig).await;
    express_operator::install::install_crds(&client)
        .await
        .expect("CRDs");
    ensure_operator_namespace(&client).await;
    Sim {
        _process: Some(process),
        client,
        url,
        substrate: Substrate::Kubesim,
        operator_kubeconfig: kubeconfig.clone(),
        admin_kubeconfig: kubeconfig,
        cluster: None,
        operator_metrics: Mutex::new(None),
    }
}

pub struct Operator {
    pub process: Process,
    pub metrics: String,
}

/// The operator's flags but `--metrics-addr`: the chart's (`--chart-args`), or the
/// benchmark's limits and concurrency.
pub fn operator_flags(args: &Args) -> Vec<String> {
    match &args.chart_args {
        Some(path) => std::fs::read_to_string(path)
            .unwrap_or_else(|e| panic!("{}: {e}", path.display()))
            .lines()
            .map(str::trim)
            .filter(|line| !line.is_empty() && !line.starts_with("--metrics-addr"))
            .map(str::to_owned)
            .collect(),
        None => [
            "run".to_owned(),
            format!("--kube-qps={}", args.kube_qps),
            format!("--kube-burst={}", args.kube_burst),
            format!("--concurrency={}", args.concurrency),
        ]
        .into(),
    }
}

/// The operator that runs the fleet: its requests are what the phases count.
pub fn start_operator(args: &Args, sim: &Sim, dir: &Path, life: usize) -> Operator {
    let operator = spawn_operator(args, sim, dir, &format!("bench-{life}"), &[]);
    *sim.operator_metrics.lock().expect("lock") = Some(operator.metrics.clone());
    operator
}

/// Another replica beside the one that leads, with `extra` flags: it fills its caches and
/// waits for the Lease, as a standby or a restarted operator does. Its requests are its own
/// (its metrics), never counted as the fleet's operator's.
pub fn start_standby(args: &Args, sim: &Sim, dir: &Path, name: &str, extra: &[&str]) -> Operator {
    spawn_operator(args, sim, dir, name, extra)
}

fn spawn_operator(args: &Args, sim: &Sim, dir: &Path, name: &str, extra: &[&str]) -> Operator {
    let binary = args
        .operator
        .clone()
        .unwrap_or_else(|| target_binary("express-operator"));
    let metrics = free_port();
    let log = std::fs::File::create(dir.join(format!("operator-{name}.log"))).expect("log");
    let process = Process(
        Command::new(&binary)
            .args(operator_flags(args))
            .args(extra)
            .arg(format!("--metrics-addr={metrics}"))
            .env("KUBECONFIG", &sim.operator_kubeconfig)
            .env("POD_NAME", format!("express-operator-{name}"))
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
