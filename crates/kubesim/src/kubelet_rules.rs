//! What the simulated kubelet does with a pod: the behaviour annotations, the rules matching an
//! image or labels, and the defaults, settable at start and at run time. The kubelet reads them
//! for each pod; the server's control endpoint changes them, through `Shared`,
//! without reaching the kubelet itself.

use std::collections::BTreeMap;
use std::sync::Mutex;
use std::time::Duration;

use serde::{Deserialize, Serialize};
use serde_json::Value;

pub const ANNOTATION_BEHAVIOR: &str = "kubesim.dev/behavior";
pub const ANNOTATION_STARTUP: &str = "kubesim.dev/startup-seconds";
pub const ANNOTATION_TERMINATE: &str = "kubesim.dev/terminate-seconds";

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Behavior {
    #[default]
    Ready,
    NeverReady,
    CrashLoop,
    StuckTerminating,
}

impl Behavior {
    fn parse(text: &str) -> Option<Behavior> {
        match text.trim() {
            "ready" => Some(Behavior::Ready),
            "never-ready" => Some(Behavior::NeverReady),
            "crash-loop" => Some(Behavior::CrashLoop),
            "stuck-terminating" => Some(Behavior::StuckTerminating),
            _ => None,
        }
    }
}

/// Behaviour for pods whose image contains `image` and/or whose labels include `labels`.
/// The first matching rule wins; pod annotations win over rules.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct KubeletRule {
    #[serde(default)]
    pub image: Option<String>,
    #[serde(default)]
    pub labels: BTreeMap<String, String>,
    #[serde(default)]
    pub behavior: Option<Behavior>,
    #[serde(default)]
    pub startup_seconds: Option<f64>,
    #[serde(default)]
    pub terminate_seconds: Option<f64>,
}

impl KubeletRule {
    fn matches(&self, pod: &Value) -> bool {
        let image_ok = self.image.as_deref().is_none_or(|wanted| {
            pod["spec"]["containers"]
                .as_array()
                .into_iter()
                .flatten()
                .any(|c| c["image"].as_str().is_some_and(|i| i.contains(wanted)))
        });
        let labels_ok = self
            .labels
            .iter()
            .all(|(k, v)| pod["metadata"]["labels"][k].as_str() == Some(v.as_str()));
        image_ok && labels_ok
    }
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct KubeletConfig {
    pub startup_seconds: f64,
    pub terminate_seconds: f64,
    pub rules: Vec<KubeletRule>,
}

impl Default for KubeletConfig {
    fn default() -> Self {
        KubeletConfig {
            startup_seconds: 1.0,
            terminate_seconds: 1.0,
            rules: Vec::new(),
        }
    }
}

/// What the kubelet does with one pod.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) struct Plan {
    pub(crate) behavior: Behavior,
    pub(crate) startup: Duration,
    pub(crate) terminate: Duration,
}

fn seconds(value: f64) -> Duration {
    Duration::from_secs_f64(if value.is_finite() {
        value.clamp(0.0, 86_400.0)
    } else {
        0.0
    })
}

/// The kubelet's configuration, behind a lock so that rules can change while it runs.
pub struct KubeletRules {
    config: Mutex<KubeletConfig>,
}

impl KubeletRules {
    pub fn new(config: KubeletConfig) -> Self {
        KubeletRules {
            config: Mutex::new(config),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, KubeletConfig> {
        self.config.lock().unwrap_or_else(|p| p.into_inner())
    }

    pub fn set_rules(&self, rules: Vec<KubeletRule>) {
        self.lock().rules = rules;
    }

    pub fn add_rule(&self, rule: KubeletRule) {
        self.lock().rules.push(rule);
    }

    pub fn rules(&self) -> Vec<KubeletRule> {
        self.lock().rules.clone()
    }

    pub(crate) fn plan(&self, pod: &Value) -> Plan {
        let config = self.lock();
        let rule = config.rules.iter().find(|r| r.matches(pod));
        let annotation = |key: &str| pod["metadata"]["annotations"][key].as_str();
        let number = |key: &str| annotation(key).and_then(|v| v.trim().parse::<f64>().ok());
        Plan {
            behavior: annotation(ANNOTATION_BEHAVIOR)
                .and_then(Behavior::parse)
                .or(rule.and_then(|r| r.behavior))
                .unwrap_or_default(),
            startup: seconds(
                number(ANNOTATION_STARTUP)
                    .or(rule.and_then(|r| r.startup_seconds))
                    .unwrap_or(config.startup_seconds),
            ),
            terminate: seconds(
                number(ANNOTATION_TERMINATE)
                    .or(rule.and_then(|r| r.terminate_seconds))
                    .unwrap_or(config.terminate_seconds),
            ),
        }
    }
}
