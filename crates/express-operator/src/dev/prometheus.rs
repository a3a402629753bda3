//! The demo's Prometheus (DESIGN section 16): when a `prometheus` binary is on the PATH (Debian's
//! package), the demo starts one on loopback scraping every ring's operator of every DC each
//! second, and the release runs with `spec.analysis`; without one, the demo says the analysis
//! is skipped, and why. The DCs' operators share this one process and kubesim's clients, so
//! neither memory nor API requests are theirs alone: the demo compares reconcile errors and
//! latency.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use super::tenants::DevError;

/// A running Prometheus, stopped when dropped.
pub struct DemoPrometheus {
    process: Child,
    pub url: String,
}

/// The `prometheus` binary on the PATH, or why there is none.
pub fn find() -> Result<PathBuf, String> {
    on_path("prometheus").ok_or_else(|| {
        "no `prometheus` on the PATH (Debian's prometheus package provides it)".into()
    })
}

/// The binary `name` in a directory of the PATH.
pub(super) fn on_path(name: &str) -> Option<PathBuf> {
    let path = std::env::var_os("PATH").unwrap_or_default();
    std::env::split_paths(&path)
        .map(|dir| dir.join(name))
        .find(|candidate| candidate.is_file())
}

impl DemoPrometheus {
    /// Starts `binary` with its data under `dir`, scraping `targets`, and waits until it is
    /// ready (up to 30 s).
    pub fn start(
        binary: &Path,
        dir: &Path,
        targets: &[SocketAddr],
    ) -> Result<DemoPrometheus, DevError> {
        let failed = |why: String| DevError::Demo(format!("cannot start prometheus: {why}"));
        std::fs::create_dir_all(dir).map_err(|e| failed(format!("{}: {e}", dir.display())))?;
        let listener =
            std::net::TcpListener::bind("127.0.0.1:0").map_err(|e| failed(e.to_string()))?;
        let addr = listener.local_addr().map_err(|e| failed(e.to_string()))?;
        drop(listener);
        let targets: Vec<String> = targets.iter().map(|t| format!("'{t}'")).collect();
        let config = format!(
            "global: {{scrape_interval: 1s, scrape_timeout: 1s}}\nscrape_configs:\n  - job_name: express-operator\n    static_configs: [{{targets: [{}]}}]\n",
            targets.join(", ")
        );
        let config_path = dir.join("prometheus.yml");
        std::fs::write(&config_path, config).map_err(|e| failed(e.to_string()))?;
        let log =
            std::fs::File::create(dir.join("prometheus.log")).map_err(|e| failed(e.to_string()))?;
        let process = Command::new(binary)
            .arg(format!("--config.file={}", config_path.display()))
            .arg(format!(
                "--storage.tsdb.path={}",
                dir.join("data").display()
            ))
            .arg(format!("--web.listen-address={addr}"))
            .arg("--log.level=warn")
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .map_err(|e| failed(e.to_string()))?;
        let mut prometheus = DemoPrometheus {
            process,
            url: format!("http://{addr}"),
        };
        let deadline = Instant::now() + Duration::from_secs(30);
        while !ready(addr) {
            if Instant::now() > deadline || prometheus.process.try_wait().ok().flatten().is_some() {
                return Err(failed(format!(
                    "not ready within 30 s (see {})",
                    dir.join("prometheus.log").display()
                )));
            }
            std::thread::sleep(Duration::from_millis(200));
        }
        Ok(prometheus)
    }
}

impl Drop for DemoPrometheus {
    fn drop(&mut self) {
        let _ = self.process.kill();
        let _ = self.process.wait();
    }
}

/// Whether a Prometheus server (Prometheus, Alertmanager) answers `/-/ready` with 200.
pub(super) fn ready(addr: SocketAddr) -> bool {
    use std::io::{Read, Write};
    let Ok(mut stream) = std::net::TcpStream::connect_timeout(&addr, Duration::from_millis(500))
    else {
        return false;
    };
    let _ = stream.set_read_timeout(Some(Duration::from_secs(1)));
    if stream
        .write_all(b"GET /-/ready HTTP/1.0\r\nHost: localhost\r\n\r\n")
        .is_err()
    {
        return false;
    }
    let mut answer = [0u8; 16];
    stream.read(&mut answer).is_ok_and(|n| {
        answer[..n].starts_with(b"HTTP/1.0 200") || answer[..n].starts_with(b"HTTP/1.1 200")
    })
}
