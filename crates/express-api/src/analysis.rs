//! A release's analysis (DESIGN section 16): the operator's own vital signs, read from
//! Prometheus, `toRing` against `fromRing` over the same window. What a person writes
//! (`spec.analysis`) and what the judge reports (`status.analysis`), in the words every reader
//! shares.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// The window a signal is read over, unless the spec says otherwise.
pub const DEFAULT_WINDOW_SECONDS: u64 = 300;
/// What a custom signal's query says in place of the ring's name.
pub const RING_PLACEHOLDER: &str = "{{ring}}";
/// How many analysed samples `status.analysis.history` keeps.
pub const HISTORY_KEPT: usize = 10;

/// `spec.analysis`: where Prometheus is and what to compare.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct AnalysisSpec {
    pub prometheus: PrometheusSource,
    /// The window each sample reads (at most; never before the wave's bake began).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 30, max = 86400))]
    pub window_seconds: Option<u64>,
    /// The built-in signals compared (default: all of them).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub signals: Option<Vec<Signal>>,
    /// Signals of your own: a PromQL query with a `{{ring}}` placeholder.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub custom: Vec<CustomSignal>,
}

impl AnalysisSpec {
    pub fn window_seconds(&self) -> u64 {
        self.window_seconds.unwrap_or(DEFAULT_WINDOW_SECONDS)
    }

    /// What is wrong with it, in words (empty: nothing).
    pub fn problems(&self) -> Vec<String> {
        let mut problems = Vec::new();
        let address = self.prometheus.address.as_str();
        if !(address.starts_with("http://") || address.starts_with("https://")) {
            problems.push(format!(
                "prometheus.address {address:?} must be an http:// or https:// URL"
            ));
        }
        if self.prometheus.ca_secret.is_some() && !address.starts_with("https://") {
            problems.push("prometheus.caSecret needs an https:// address".into());
        }
        if self.window_seconds() < 30 {
            problems.push(format!(
                "windowSeconds {} must be at least 30",
                self.window_seconds()
            ));
        }
        for (i, custom) in self.custom.iter().enumerate() {
            if !custom.query.contains(RING_PLACEHOLDER) {
                problems.push(format!(
                    "custom[{i}] ({}): its query must name the ring as {RING_PLACEHOLDER}",
                    custom.name
                ));
            }
            if Signal::ALL.iter().any(|s| s.as_str() == custom.name)
                || self.custom[..i].iter().any(|c| c.name == custom.name)
            {
                problems.push(format!("custom[{i}]: the name {:?} is taken", custom.name));
            }
        }
        problems
    }

    /// The built-in signals compared, in a stable order.
    pub fn signals(&self) -> Vec<Signal> {
        let mut chosen = self.signals.clone().unwrap_or_else(|| Signal::ALL.to_vec());
        chosen.sort();
        chosen.dedup();
        chosen
    }
}

/// How to reach Prometheus from the operator's pod.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct PrometheusSource {
    /// Its base URL, e.g. `http://prometheus.monitoring:9090`.
    #[schemars(length(min = 1, max = 2048))]
    pub address: String,
    /// A Secret in the operator's namespace holding a bearer token (`key`, default `token`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bearer_token_secret: Option<SecretKey>,
    /// A Secret in the operator's namespace holding a PEM CA bundle (`key`, default `ca.crt`)
    /// for an `https://` address.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ca_secret: Option<SecretKey>,
}

/// One key of a Secret in the operator's namespace.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct SecretKey {
    pub name: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub key: Option<String>,
}

/// The built-in signals, each worse when higher.
#[derive(
    Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize, JsonSchema,
)]
#[serde(rename_all = "camelCase")]
pub enum Signal {
    /// API requests the operator sends per reconcile.
    ApiRequestsPerReconcile,
    /// Reconciles that fail, of all reconciles.
    ReconcileErrorRatio,
    /// The 95th percentile of a reconcile's duration, in seconds.
    ReconcileLatencyP95,
    /// Resident memory's slope, in bytes per second.
    MemoryGrowth,
}

impl Signal {
    pub const ALL: [Signal; 4] = [
        Signal::ApiRequestsPerReconcile,
        Signal::ReconcileErrorRatio,
        Signal::ReconcileLatencyP95,
        Signal::MemoryGrowth,
    ];

    /// As the spec and the status name it.
    pub fn as_str(self) -> &'static str {
        match self {
            Signal::ApiRequestsPerReconcile => "apiRequestsPerReconcile",
            Signal::ReconcileErrorRatio => "reconcileErrorRatio",
            Signal::ReconcileLatencyP95 => "reconcileLatencyP95",
            Signal::MemoryGrowth => "memoryGrowth",
        }
    }
}

/// A signal of your own.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct CustomSignal {
    #[schemars(length(min = 1, max = 63))]
    pub name: String,
    /// PromQL giving one value per evaluation; `{{ring}}` stands for the ring's name.
    #[schemars(length(min = 1, max = 4096))]
    pub query: String,
    /// Which way is worse (default: higher).
    #[serde(default)]
    pub worse: Worse,
}

/// Which way a custom signal is worse.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub enum Worse {
    #[default]
    Higher,
    Lower,
}

/// One signal's verdict in a sample.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub enum SignalVerdict {
    /// No worse than the baseline (or not by enough to matter).
    Ok,
    /// Worse, beyond chance and beyond the effect floor: the sample fails.
    Worse,
    /// Nothing to measure: a ring did not do the work in the window, or every point still
    /// looks back into the wave's hand-over.
    Quiet,
    /// Prometheus could not be read, or a ring's series are missing: the sample is
    /// inconclusive.
    NoData,
}

impl SignalVerdict {
    pub fn as_str(self) -> &'static str {
        match self {
            SignalVerdict::Ok => "Ok",
            SignalVerdict::Worse => "Worse",
            SignalVerdict::Quiet => "Quiet",
            SignalVerdict::NoData => "NoData",
        }
    }
}

/// One signal as the latest sample read it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct SignalReading {
    pub signal: String,
    /// The canary's median over the window (none: no data).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub canary: Option<f64>,
    /// The baseline's median over the window (none: no data).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub baseline: Option<f64>,
    pub verdict: SignalVerdict,
    /// Why, in words (the test's figures for Worse, what is missing for NoData).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub reason: String,
}

/// One analysed sample, briefly.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct AnalysisSample {
    pub at: Time,
    /// The signals worse, or without data (empty: every signal ok or quiet).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub worse: Vec<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub no_data: Vec<String>,
}

/// `status.analysis`: the latest sample's signals and a short history.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct AnalysisStatus {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub at: Option<Time>,
    /// What the baseline was: `ring default` or `ring canary before wave 3`.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub baseline: String,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub signals: Vec<SignalReading>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub history: Vec<AnalysisSample>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn default_signals_are_all_in_a_stable_order() {
        let spec = AnalysisSpec::default();
        assert_eq!(spec.signals(), Signal::ALL.to_vec());
        assert_eq!(spec.window_seconds(), DEFAULT_WINDOW_SECONDS);
        let chosen = AnalysisSpec {
            signals: Some(vec![
                Signal::MemoryGrowth,
                Signal::ReconcileErrorRatio,
                Signal::MemoryGrowth,
            ]),
            ..AnalysisSpec::default()
        };
        assert_eq!(
            chosen.signals(),
            vec![Signal::ReconcileErrorRatio, Signal::MemoryGrowth]
        );
    }

    #[test]
    fn a_spec_that_cannot_be_used_says_why() {
        let good = AnalysisSpec {
            prometheus: PrometheusSource {
                address: "http://prometheus.monitoring:9090".into(),
                ..PrometheusSource::default()
            },
            ..AnalysisSpec::default()
        };
        assert!(good.problems().is_empty());
        let bad = AnalysisSpec {
            prometheus: PrometheusSource {
                address: "prometheus:9090".into(),
                ca_secret: Some(SecretKey::default()),
                ..PrometheusSource::default()
            },
            window_seconds: Some(10),
            custom: vec![CustomSignal {
                name: "memoryGrowth".into(),
                query: "up".into(),
                worse: Worse::Higher,
            }],
            ..AnalysisSpec::default()
        };
        let problems = bad.problems().join("\n");
        for expected in [
            "http:// or https://",
            "caSecret needs",
            "at least 30",
            "{{ring}}",
            "is taken",
        ] {
            assert!(problems.contains(expected), "{expected}: {problems}");
        }
    }

    #[test]
    fn signals_read_as_the_spec_writes_them() {
        for signal in Signal::ALL {
            let written = serde_json::to_value(signal).unwrap_or_default();
            assert_eq!(written.as_str(), Some(signal.as_str()));
        }
    }
}
