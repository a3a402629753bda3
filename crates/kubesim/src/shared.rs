//! State shared by the HTTP server, the simulated kubelet, the garbage collector and the
//! library: the cluster behind one lock, faults, logs and the change notification.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::sync::Notify;

use crate::api::Cluster;
use crate::faults::Faults;
use crate::kubelet_rules::KubeletRules;

/// State shared by the server, the simulated kubelet, the garbage collector and the library.
pub struct Shared {
    pub cluster: Mutex<Cluster>,
    pub faults: Faults,
    /// The simulated kubelet's rules (the server sets them at run time).
    pub kubelet_rules: Arc<KubeletRules>,
    pub bookmark_interval: Duration,
    /// Woken after every write, for the background controllers.
    pub changed: Notify,
    /// What the simulated kubelet's containers wrote.
    pub logs: crate::logs::Logs,
    /// When set, every request must carry `Authorization: Bearer <token>`; any other gets 401.
    pub token: Option<String>,
}

impl Shared {
    pub fn lock(&self) -> std::sync::MutexGuard<'_, Cluster> {
        self.cluster
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }
}
