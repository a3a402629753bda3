//! The demo's notifications (DESIGN section 21): a webhook receiver in this process, on
//! loopback, that checks each message's signature and prints every notification it is told,
//! as an SRE's chat would show it; and, when an Alertmanager binary is on the PATH (Debian's
//! prometheus-alertmanager), an Alertmanager the operators send their alerts to, which groups
//! them and hands what it would page about to the same receiver. Every DC's ConfigMap and Secret
//! `express-notifications` name both, with the DC's own name, as the chart would write them.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use k8s_openapi::api::core::v1::{ConfigMap, Secret};
use kube::api::{Api, PostParams};
use serde_json::{Value, json};
use tokio::sync::Notify;

use super::prometheus::{on_path, ready};
use super::tenants::DevError;
use crate::controller::DEFAULT_OPERATOR_NAMESPACE;

/// The webhook's signing key (a demo's: every run makes its own).
fn signing_key() -> String {
    format!("demo-{}", std::process::id())
}

/// What the receiver was told.
#[derive(Default)]
struct Told {
    /// Each notification's id, with how many times it came.
    ids: BTreeMap<String, usize>,
    /// Each trigger, with how many notifications of it came.
    triggers: BTreeMap<String, usize>,
    /// Messages whose signature did not verify.
    unsigned: usize,
}

#[derive(Clone)]
struct Receiver {
    told: Arc<Mutex<Told>>,
    /// Wakes whoever waits for a trigger.
    arrived: Arc<Notify>,
    key: String,
}

/// The receiver, the Alertmanager if any, and what they were told.
pub(super) struct DemoNotifications {
    receiver: Receiver,
    webhook: String,
    alertmanager: Option<(Child, String)>,
    server: tokio::task::JoinHandle<()>,
}

impl DemoNotifications {
    /// Starts the receiver, and an Alertmanager when one is on the PATH (its files under `dir`).
    pub(super) async fn start(dir: &Path) -> Result<DemoNotifications, DevError> {
        let receiver = Receiver {
            told: Arc::default(),
            arrived: Arc::default(),
            key: signing_key(),
        };
        let app = axum::Router::new()
            .route("/hook", axum::routing::post(webhook))
            .route("/alertmanager", axum::routing::post(paged))
            .with_state(receiver.clone());
        let listener = tokio::net::TcpListener::bind(("127.0.0.1", 0))
            .await
            .map_err(|e| DevError::Demo(format!("cannot start the webhook receiver: {e}")))?;
        let addr = listener
            .local_addr()
            .map_err(|e| DevError::Demo(format!("cannot start the webhook receiver: {e}")))?;
        let server = tokio::spawn(async move {
            let _ = axum::serve(listener, app).await;
        });
        let alertmanager = match on_path("prometheus-alertmanager")
            .or_else(|| on_path("alertmanager"))
        {
            Some(binary) => Some(start_alertmanager(&binary, dir, addr)?),
            None => {
                println!(
                    "demo: no Alertmanager on the PATH (Debian's prometheus-alertmanager provides one): notifications go to the webhook only"
                );
                None
            }
        };
        Ok(DemoNotifications {
            receiver,
            webhook: format!("http://{addr}/hook"),
            alertmanager,
            server,
        })
    }

    /// Where the notifications go, in words.
    pub(super) fn describe(&self) -> String {
        match &self.alertmanager {
            Some((_, url)) => format!(
                "a signed webhook ({}) and an Alertmanager ({url}) grouping alerts for the same receiver",
                self.webhook
            ),
            None => format!("a signed webhook ({})", self.webhook),
        }
    }

    /// Writes `dc`'s ConfigMap and Secret `express-notifications`.
    pub(super) async fn configure(&self, client: &kube::Client, dc: &str) -> Result<(), DevError> {
        let mut destinations = vec![json!({
            "name": "sre", "type": "webhook", "url": self.webhook,
            "signingSecretKey": "sre-hmac", "groupSeconds": 2, "waitSeconds": 0,
        })];
        // Every trigger but a tenant's rollout done: the sample tenants were provisioned about
        // when the configuration was written, and the demo is about the release.
        let everything_but_done: Vec<&str> = express_notify::Trigger::ALL
            .iter()
            .map(|t| t.as_str())
            .filter(|t| *t != "rollout-done")
            .collect();
        let mut subscriptions =
            vec![json!({"destination": "sre", "triggers": everything_but_done})];
        if let Some((_, url)) = &self.alertmanager {
            destinations.push(json!({"name": "alertmanager", "type": "alertmanager", "url": url, "waitSeconds": 0}));
            subscriptions.push(json!({"destination": "alertmanager", "triggers": [
                "rollout-failed", "release-waiting", "release-rolled-back",
                "fleet-waiting-approval", "fleet-dc-failed", "fleet-dc-unreachable", "fleet-dc-infrastructure",
                "fleet-failed"]}));
        }
        let config =
            json!({"dc": dc, "destinations": destinations, "subscriptions": subscriptions});
        let text = serde_yaml::to_string(&config).map_err(|e| DevError::Demo(e.to_string()))?;
        let map: ConfigMap = serde_json::from_value(json!({
            "metadata": {"name": "express-notifications"},
            "data": {"notifications.yaml": text},
        }))
        .map_err(|e| DevError::Demo(e.to_string()))?;
        Api::<ConfigMap>::namespaced(client.clone(), DEFAULT_OPERATOR_NAMESPACE)
            .create(&PostParams::default(), &map)
            .await?;
        let secret: Secret = serde_json::from_value(json!({
            "metadata": {"name": "express-notifications"},
            "stringData": {"sre-hmac": self.receiver.key},
        }))
        .map_err(|e| DevError::Demo(e.to_string()))?;
        Api::<Secret>::namespaced(client.clone(), DEFAULT_OPERATOR_NAMESPACE)
            .create(&PostParams::default(), &secret)
            .await?;
        Ok(())
    }

    /// Waits until one of `triggers` has been told, or `within` passed; whether it was.
    pub(super) async fn wait_for(&self, triggers: &[&str], within: Duration) -> bool {
        let deadline = Instant::now() + within;
        loop {
            let arrived = self.receiver.arrived.notified();
            if self.count(triggers) > 0 {
                return true;
            }
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() || tokio::time::timeout(left, arrived).await.is_err() {
                return self.count(triggers) > 0;
            }
        }
    }

    fn count(&self, triggers: &[&str]) -> usize {
        let told = self.receiver.told.lock().unwrap_or_else(|e| e.into_inner());
        triggers.iter().filter_map(|t| told.triggers.get(*t)).sum()
    }

    /// One line: how many notifications, how many came twice, how many were not signed.
    pub(super) fn summary(&self) -> String {
        let told = self.receiver.told.lock().unwrap_or_else(|e| e.into_inner());
        let repeated = told.ids.values().filter(|n| **n > 1).count();
        let triggers: Vec<String> = told
            .triggers
            .iter()
            .map(|(t, n)| format!("{n} {t}"))
            .collect();
        format!(
            "demo: the webhook was told {} notifications ({}), {repeated} of them more than once, {} unsigned",
            told.ids.len(),
            triggers.join(", "),
            told.unsigned
        )
    }
}

impl Drop for DemoNotifications {
    fn drop(&mut self) {
        self.server.abort();
        if let Some((process, _)) = &mut self.alertmanager {
            let _ = process.kill();
            let _ = process.wait();
        }
    }
}

/// The webhook: every notification printed once, as it comes, a repeat said to be one.
async fn webhook(
    State(receiver): State<Receiver>,
    headers: HeaderMap,
    body: axum::body::Bytes,
) -> StatusCode {
    let signature = headers
        .get(express_notify::render::SIGNATURE_HEADER)
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default();
    let signed =
        signature == express_notify::render::webhook::signature(receiver.key.as_bytes(), &body);
    let Ok(message) = serde_json::from_slice::<Value>(&body) else {
        return StatusCode::BAD_REQUEST;
    };
    let dc = message["dc"].as_str().unwrap_or("?").to_owned();
    {
        let mut told = receiver.told.lock().unwrap_or_else(|e| e.into_inner());
        if !signed {
            told.unsigned += 1;
        }
        for n in message["notifications"].as_array().into_iter().flatten() {
            let id = n["id"].as_str().unwrap_or_default().to_owned();
            let trigger = n["trigger"].as_str().unwrap_or_default().to_owned();
            let seen = told.ids.entry(id).or_default();
            *seen += 1;
            let again = if *seen > 1 { " (AGAIN)" } else { "" };
            if *seen == 1 {
                *told.triggers.entry(trigger.clone()).or_default() += 1;
            }
            println!(
                "notified sre from {dc}: [{}] {}{again}",
                n["severity"].as_str().unwrap_or_default(),
                n["title"].as_str().unwrap_or_default()
            );
            if let Some(act) = n["act"].as_str() {
                println!("    -> {act}");
            }
        }
    }
    receiver.arrived.notify_waiters();
    StatusCode::NO_CONTENT
}

/// What Alertmanager pages about: one line per group it sends.
async fn paged(body: axum::body::Bytes) -> StatusCode {
    let Ok(message) = serde_json::from_slice::<Value>(&body) else {
        return StatusCode::BAD_REQUEST;
    };
    let alerts = message["alerts"].as_array().map_or(0, Vec::len);
    println!(
        "alertmanager: {} {} alert(s) {}",
        message["status"].as_str().unwrap_or_default(),
        alerts,
        message["groupLabels"]
    );
    StatusCode::NO_CONTENT
}

/// Alertmanager on loopback, grouping by alert name and DC, sending to the receiver.
fn start_alertmanager(
    binary: &Path,
    dir: &Path,
    receiver: SocketAddr,
) -> Result<(Child, String), DevError> {
    let failed = |why: String| DevError::Demo(format!("cannot start alertmanager: {why}"));
    let dir = dir.join("alertmanager");
    std::fs::create_dir_all(&dir).map_err(|e| failed(format!("{}: {e}", dir.display())))?;
    let listener = std::net::TcpListener::bind("127.0.0.1:0").map_err(|e| failed(e.to_string()))?;
    let addr = listener.local_addr().map_err(|e| failed(e.to_string()))?;
    drop(listener);
    let config = format!(
        "route: {{receiver: demo, group_by: [alertname, dc], group_wait: 1s, group_interval: 2s, repeat_interval: 1h}}\nreceivers:\n  - name: demo\n    webhook_configs: [{{url: 'http://{receiver}/alertmanager', send_resolved: true}}]\n"
    );
    let config_path = dir.join("alertmanager.yml");
    std::fs::write(&config_path, config).map_err(|e| failed(e.to_string()))?;
    let log =
        std::fs::File::create(dir.join("alertmanager.log")).map_err(|e| failed(e.to_string()))?;
    let mut process = Command::new(binary)
        .arg(format!("--config.file={}", config_path.display()))
        .arg(format!("--storage.path={}", dir.join("data").display()))
        .arg(format!("--web.listen-address={addr}"))
        .arg("--cluster.listen-address=")
        .arg("--log.level=warn")
        .stdout(Stdio::null())
        .stderr(log)
        .spawn()
        .map_err(|e| failed(e.to_string()))?;
    let deadline = Instant::now() + Duration::from_secs(30);
    while !ready(addr) {
        if Instant::now() > deadline || process.try_wait().ok().flatten().is_some() {
            let _ = process.kill();
            return Err(failed(format!(
                "not ready within 30 s (see {})",
                dir.join("alertmanager.log").display()
            )));
        }
        std::thread::sleep(Duration::from_millis(200));
    }
    Ok((process, format!("http://{addr}")))
}
