//! kubesim: a local Kubernetes API server emulator with a simulated kubelet, for the operator's
//! end-to-end tests, benchmarks and the `dev` demo. Never the production path: the operator
//! only ever talks to it through the ordinary kube client.
//!
//! [`KubeSim::start`] serves plain HTTP on loopback inside the calling process and hands back
//! a [`kube::Client`], a kubeconfig, the URL, request counters and fault injection. The
//! `kubesim serve` binary runs the same server standalone.

pub mod api;
pub mod apply;
pub mod builtin;
pub mod clock;
pub mod conversion;
pub mod error;
pub mod events;
pub mod faults;
pub mod gc;
pub mod kubelet;
pub mod kubelet_rules;
pub mod logs;
pub mod patch;
pub mod protobuf;
pub mod registry;
pub mod schema;
pub mod selector;
pub mod server;
pub mod shared;
pub mod store;
pub mod table;

use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::sync::Notify;

pub use faults::{Counters, FaultRule};

/// How to start kubesim.
#[derive(Clone, Debug)]
pub struct Config {
    /// Where to listen; port 0 picks a free port.
    pub addr: SocketAddr,
    /// Listening on anything but loopback must be asked for explicitly.
    pub allow_non_loopback: bool,
    /// How often watches that asked for bookmarks get one.
    pub bookmark_interval: Duration,
    /// Changes kept for watches resuming from a resourceVersion.
    pub history_limit: usize,
    /// Simulated termination time of a deleted pod that does not say otherwise.
    pub pod_termination_seconds: f64,
    /// Pod startup delay and behaviour rules of the simulated kubelet.
    pub kubelet: kubelet::KubeletConfig,
    /// A bearer token every request must present (`Authorization: Bearer TOKEN`); any request
    /// without it is answered 401 Unauthorized, as the API server answers refused credentials.
    /// None: no authentication, as before.
    pub token: Option<String>,
}

impl Default for Config {
    fn default() -> Self {
        Config {
            addr: SocketAddr::from(([127, 0, 0, 1], 0)),
            allow_non_loopback: false,
            bookmark_interval: Duration::from_secs(5),
            history_limit: 100_000,
            pod_termination_seconds: 1.0,
            kubelet: kubelet::KubeletConfig::default(),
            token: None,
        }
    }
}

#[derive(Debug, thiserror::Error)]
pub enum StartError {
    #[error(
        "refusing to listen on {0}: kubesim serves unauthenticated HTTP; pass the flag that allows non-loopback addresses if you really mean it"
    )]
    NotLoopback(SocketAddr),
    #[error("cannot listen on {addr}: {source}")]
    Bind {
        addr: SocketAddr,
        source: std::io::Error,
    },
}

/// A running kubesim. Dropping it stops the server.
pub struct KubeSim {
    url: String,
    shared: Arc<shared::Shared>,
    kubelet: Arc<kubelet::Kubelet>,
    shutdown: Mutex<Option<tokio::sync::oneshot::Sender<()>>>,
}

impl KubeSim {
    pub async fn start(config: Config) -> Result<KubeSim, StartError> {
        if !config.addr.ip().is_loopback() && !config.allow_non_loopback {
            return Err(StartError::NotLoopback(config.addr));
        }
        let listener = tokio::net::TcpListener::bind(config.addr)
            .await
            .map_err(|source| StartError::Bind {
                addr: config.addr,
                source,
            })?;
        let local = listener.local_addr().map_err(|source| StartError::Bind {
            addr: config.addr,
            source,
        })?;
        let kubelet = Arc::new(kubelet::Kubelet::new(kubelet::KubeletConfig {
            terminate_seconds: config.pod_termination_seconds,
            ..config.kubelet.clone()
        }));
        let shared = Arc::new(shared::Shared {
            cluster: Mutex::new(api::Cluster::new(
                config.pod_termination_seconds,
                config.history_limit,
            )),
            faults: faults::Faults::default(),
            kubelet_rules: kubelet.shared_rules(),
            bookmark_interval: config.bookmark_interval,
            changed: Notify::new(),
            logs: logs::Logs::default(),
            token: config.token.clone(),
        });
        let kubelet_task = tokio::spawn(kubelet::run(shared.clone(), kubelet.clone()));
        let gc_task = tokio::spawn(gc::run(shared.clone()));
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        let app = server::router(shared.clone());
        tokio::spawn(async move {
            let _ = axum::serve(listener, app)
                .with_graceful_shutdown(async {
                    let _ = stopped.await;
                })
                .await;
            kubelet_task.abort();
            gc_task.abort();
        });
        Ok(KubeSim {
            url: format!("http://{local}"),
            shared,
            kubelet,
            shutdown: Mutex::new(Some(stop)),
        })
    }

    pub fn url(&self) -> &str {
        &self.url
    }

    /// The bearer token it requires, if any.
    pub fn token(&self) -> Option<&str> {
        self.shared.token.as_deref()
    }

    /// A kubeconfig whose current context points at this server (with its token, if it has
    /// one).
    pub fn kubeconfig(&self) -> String {
        kubeconfig_with_token(&self.url, self.shared.token.as_deref())
    }

    /// A kube client for this server, configured as in production (it retries 429, 503 and
    /// 504 responses).
    pub fn client(&self) -> Result<kube::Client, kube::Error> {
        kube::Client::try_from(self.client_config()?)
    }
    /// [`KubeSim::client`] sending `User-Agent: agent`, so that its requests are counted apart
    /// (`Counters::by_agent`).
    pub fn client_with_agent(&self, agent: &str) -> Result<kube::Client, kube::Error> {
        kube::Client::try_from(self.agent_config(agent)?)
    }

    /// [`KubeSim::client_with_agent`] that never retries: a test sees each refusal as sent
    /// (a write stop answers 503, which the production client would retry with backoff).
    pub fn client_with_agent_without_retries(
        &self,
        agent: &str,
    ) -> Result<kube::Client, kube::Error> {
        let mut config = self.agent_config(agent)?;
        config.default_retry = false;
        kube::Client::try_from(config)
    }

    /// The configuration of [`KubeSim::client_with_agent`], for a client built with layers of
    /// its own.
    pub fn agent_config(&self, agent: &str) -> Result<kube::Config, kube::Error> {
        let mut config = self.client_config()?;
        let value = axum::http::HeaderValue::from_str(agent)
            .map_err(|e| kube::Error::Service(Box::new(e)))?;
        config.headers.push((axum::http::header::USER_AGENT, value));
        Ok(config)
    }

    /// A kube client that never retries, for tests that must see every response as sent.
    pub fn client_without_retries(&self) -> Result<kube::Client, kube::Error> {
        let mut config = self.client_config()?;
        config.default_retry = false;
        kube::Client::try_from(config)
    }

    fn client_config(&self) -> Result<kube::Config, kube::Error> {
        let url = self
            .url
            .parse()
            .map_err(|e: axum::http::uri::InvalidUri| kube::Error::Service(Box::new(e)))?;
        let mut config = kube::Config::new(url);
        if let Some(token) = &self.shared.token {
            let value = axum::http::HeaderValue::from_str(&format!("Bearer {token}"))
                .map_err(|e| kube::Error::Service(Box::new(e)))?;
            config
                .headers
                .push((axum::http::header::AUTHORIZATION, value));
        }
        Ok(config)
    }

    pub fn counters(&self) -> Counters {
        self.shared.faults.counters()
    }

    /// Every delete request served, with its grace period and preconditions.
    pub fn deletes(&self) -> Vec<faults::DeleteRequest> {
        self.shared.faults.deletes()
    }

    pub fn reset_counters(&self) {
        self.shared.faults.reset_counters();
    }

    pub fn faults(&self) -> &faults::Faults {
        &self.shared.faults
    }

    /// Forgets watch history: resuming from any earlier resourceVersion gets 410 Gone.
    pub fn compact(&self) {
        self.shared.lock().store.compact();
    }

    /// Stores `object` (of resource `group`/`version`/`plural`) as it is, skipping the checks an
    /// API request goes through (field types, labels, schema): what an API server of another
    /// version, or a CRD since tightened, can leave in storage. For tests of clients that must
    /// survive such objects; nothing reachable over HTTP does this.
    pub fn store_unchecked(
        &self,
        (group, version, plural): (&str, &str, &str),
        namespace: &str,
        object: serde_json::Value,
    ) -> Result<serde_json::Value, error::ApiError> {
        let mut cluster = self.shared.lock();
        let rt = cluster
            .registry
            .find(group, version, plural)
            .cloned()
            .ok_or_else(|| error::ApiError::not_found(group, plural, ""))?;
        let options = api::WriteOptions {
            unchecked: true,
            ..api::WriteOptions::default()
        };
        let stored = cluster.create(&rt, namespace, object, &options);
        drop(cluster);
        self.shared.changed.notify_waiters();
        stored
    }

    /// The current (highest) resourceVersion.
    pub fn resource_version(&self) -> u64 {
        self.shared.lock().store.revision()
    }

    /// The simulated kubelet, to set behaviour rules at run time.
    pub fn kubelet(&self) -> &kubelet::Kubelet {
        &self.kubelet
    }

    pub fn shared(&self) -> &Arc<shared::Shared> {
        &self.shared
    }

    pub fn stop(&self) {
        if let Some(stop) = self
            .shutdown
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .take()
        {
            let _ = stop.send(());
        }
        self.shared.faults.close_watches();
    }
}

impl Drop for KubeSim {
    fn drop(&mut self) {
        self.stop();
    }
}

pub fn kubeconfig_for(url: &str) -> String {
    kubeconfig_with_token(url, None)
}

/// [`kubeconfig_for`] whose user presents `token` (None: no credentials).
pub fn kubeconfig_with_token(url: &str, token: Option<&str>) -> String {
    let user = match token {
        // JSON strings are YAML strings: any token is written safely.
        Some(token) => format!("{{token: {}}}", serde_json::Value::String(token.to_owned())),
        None => "{}".to_owned(),
    };
    format!(
        "apiVersion: v1
kind: Config
clusters:
- name: kubesim
  cluster:
    server: {url}
contexts:
- name: kubesim
  context:
    cluster: kubesim
    user: kubesim
    namespace: default
current-context: kubesim
users:
- name: kubesim
  user: {user}
"
    )
}
