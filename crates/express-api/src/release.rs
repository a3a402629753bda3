//! The `OperatorRelease` contract (DESIGN section 12): a new operator build, already deployed as
//! ring `toRing`, takes the movable tenants over from ring `fromRing` in cumulative waves, each
//! baked on clean samples before the next; the leader of `fromRing` judges and moves. This
//! module owns the wire format, the spec's validation (the same rules the CRD's CEL carries, run
//! again before acting) and the marks a release leaves on the tenants it moves.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, Time};
use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::rings::ring_name_problem;

/// ExpressCluster annotation: the release that set its ring label (and so may move it again).
/// A ring label without it was set by someone else and pins the tenant.
pub const ANNOTATION_RELEASED_BY: &str = "express.dev/released-by";
/// ExpressCluster annotation: when that release last moved it (RFC 3339), so that the judge
/// can tell a hand-over that is late from one that just began.
pub const ANNOTATION_MOVED_AT: &str = "express.dev/moved-at";
/// OperatorRelease annotation: end the current bake now; the value is a request id.
pub const ANNOTATION_PROMOTE: &str = "express.dev/promote";
/// OperatorRelease annotation: `"true"` with a promote request: every remaining wave now.
pub const ANNOTATION_PROMOTE_FULL: &str = "express.dev/promote-full";
/// OperatorRelease annotation: roll the release back now; the value is a request id.
pub const ANNOTATION_ROLLBACK: &str = "express.dev/rollback";
/// Lease annotations the ring's leader writes: the identity that wrote them and its build, so
/// that a release can tell which build leads `toRing` (a version written by a former holder
/// does not count).
pub const ANNOTATION_LEADER_IDENTITY: &str = "express.dev/leader-identity";
pub const ANNOTATION_LEADER_VERSION: &str = "express.dev/leader-version";

/// Defaults of the spec's durations and limits.
pub const DEFAULT_BAKE_SECONDS: u64 = 600;
pub const DEFAULT_INTERVAL_SECONDS: u64 = 30;
pub const DEFAULT_FAILURE_LIMIT: u32 = 2;
pub const DEFAULT_ADOPTION_DEADLINE_SECONDS: u64 = 120;
/// Ten minutes: a new build's pods pulled, started and holding `toRing`'s Lease, with room for
/// a slow image pull; far above a Lease's duration.
pub const DEFAULT_LEADER_DEADLINE_SECONDS: u64 = 600;

/// The release's condition on `toRing`'s leader before the first move: `Unknown` while no live
/// leader running the build asked for holds `toRing`'s Lease (since when: its
/// `lastTransitionTime`), `True` once one does, `False` when none did within
/// `leaderDeadlineSeconds` (the release then fails, nothing moved).
pub const CONDITION_TO_RING_LED: &str = "ToRingLed";
pub const DEFAULT_MAX_HAND_OVERS: u32 = 20;
pub const DEFAULT_UNHEALTHY_MARGIN_PERCENT: u32 = 10;

// Each printcolumn repeats `type_ = ...`, which this lint mistakes for a duplicated attribute.
#[allow(clippy::duplicated_attributes)]
#[derive(
    CustomResource, kube::KubeSchema, Clone, Debug, Default, PartialEq, Serialize, Deserialize,
)]
#[kube(
    group = "express.dev",
    version = "v1alpha1",
    kind = "OperatorRelease",
    plural = "operatorreleases",
    shortname = "oprel",
    category = "express",
    namespaced,
    status = "OperatorReleaseStatus",
    printcolumn(name = "Phase", type_ = "string", json_path = ".status.phase"),
    printcolumn(name = "Wave", type_ = "integer", json_path = ".status.wave"),
    printcolumn(name = "Moved", type_ = "integer", json_path = ".status.movedTenants"),
    printcolumn(
        name = "Pinned",
        type_ = "integer",
        json_path = ".status.pinnedTenants",
        priority = 1
    ),
    printcolumn(
        name = "Message",
        type_ = "string",
        json_path = ".status.message",
        priority = 1
    ),
    printcolumn(
        name = "Age",
        type_ = "date",
        json_path = ".metadata.creationTimestamp"
    )
)]
#[x_kube(validation = Rule::new("self.fromRing != self.toRing").message("fromRing and toRing must differ"))]
#[x_kube(validation = Rule::new("has(self.waves[size(self.waves) - 1].percent) && self.waves[size(self.waves) - 1].percent == 100").message("the last wave must be percent: 100"))]
#[serde(rename_all = "camelCase")]
pub struct OperatorReleaseSpec {
    /// The trusted ring: its leader judges and moves tenants.
    #[schemars(length(min = 1, max = 46), pattern(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$"))]
    pub from_ring: String,
    /// The ring running the build under test, deployed beforehand and driving no tenant.
    #[schemars(length(min = 1, max = 46), pattern(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$"))]
    pub to_ring: String,
    /// When set, no tenant moves until `toRing`'s leader reports exactly this build.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub version: Option<String>,
    /// Cumulative share of the movable tenants each wave brings to `toRing`.
    #[schemars(length(min = 1))]
    pub waves: Vec<Wave>,
    /// How long each wave must stay healthy after its last tenant was adopted.
    #[serde(default = "default_bake_seconds")]
    #[schemars(range(min = 1))]
    pub bake_seconds: u64,
    /// How often the verdict is sampled.
    #[serde(default = "default_interval_seconds")]
    #[schemars(range(min = 1))]
    pub interval_seconds: u64,
    /// Failed samples tolerated over the release; one more rolls it back.
    #[serde(default = "default_failure_limit")]
    pub failure_limit: u32,
    /// How long `toRing` may take to adopt a moved tenant before the sample fails. Keep it
    /// above a Lease's duration plus an adoption: a move may meet an owner that just died.
    #[serde(default = "default_adoption_deadline_seconds")]
    #[schemars(range(min = 1))]
    pub adoption_deadline_seconds: u64,
    /// How long `toRing` may go without a live leader running the build asked for before the
    /// first move (a ring whose pods never start, or start another build); past it the release
    /// fails, nothing moved, condition `ToRingLed` False. The wait starts again after a pause.
    /// 0 waits for ever.
    #[serde(default = "default_leader_deadline_seconds")]
    pub leader_deadline_seconds: u64,
    /// Hand-overs in flight at once (moved, not yet adopted).
    #[serde(default = "default_max_hand_overs")]
    #[schemars(range(min = 1))]
    pub max_hand_overs: u32,
    /// How many percentage points more of its tenants `toRing` may have unhealthy than
    /// `fromRing` before a sample fails (and how many either may have before it is in trouble).
    #[serde(default = "default_unhealthy_margin_percent")]
    #[schemars(range(max = 100))]
    pub unhealthy_margin_percent: u32,
    /// Nothing moves, nothing is judged, no bake time passes.
    #[serde(default)]
    pub paused: bool,
    /// The operator's own vital signs, from Prometheus, `toRing` against `fromRing` in every
    /// sample of a bake (DESIGN section 16). Without it the judge reads the tenants alone.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub analysis: Option<crate::analysis::AnalysisSpec>,
}

pub(crate) fn default_bake_seconds() -> u64 {
    DEFAULT_BAKE_SECONDS
}
pub(crate) fn default_interval_seconds() -> u64 {
    DEFAULT_INTERVAL_SECONDS
}
pub(crate) fn default_failure_limit() -> u32 {
    DEFAULT_FAILURE_LIMIT
}
pub(crate) fn default_adoption_deadline_seconds() -> u64 {
    DEFAULT_ADOPTION_DEADLINE_SECONDS
}
pub(crate) fn default_leader_deadline_seconds() -> u64 {
    DEFAULT_LEADER_DEADLINE_SECONDS
}
pub(crate) fn default_max_hand_overs() -> u32 {
    DEFAULT_MAX_HAND_OVERS
}
pub(crate) fn default_unhealthy_margin_percent() -> u32 {
    DEFAULT_UNHEALTHY_MARGIN_PERCENT
}

/// One wave: a number of tenants, or a percentage of the movable ones; cumulative.
#[derive(kube::KubeSchema, Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[x_kube(validation = Rule::new("has(self.tenants) != has(self.percent)").message("a wave gives exactly one of tenants and percent"))]
#[serde(rename_all = "camelCase")]
pub struct Wave {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1))]
    pub tenants: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1, max = 100))]
    pub percent: Option<u32>,
}

impl Wave {
    /// How many of `movable` tenants are on `toRing` once this wave is moved.
    pub fn target(&self, movable: usize) -> usize {
        match (self.tenants, self.percent) {
            (Some(n), _) => (n as usize).min(movable),
            (None, Some(p)) => (movable * p.min(100) as usize).div_ceil(100),
            (None, None) => 0,
        }
    }
}

impl std::fmt::Display for Wave {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match (self.tenants, self.percent) {
            (Some(n), _) => write!(f, "{n} tenant(s)"),
            (None, Some(p)) => write!(f, "{p}%"),
            (None, None) => f.write_str("(empty)"),
        }
    }
}

/// What is wrong with a spec, one line each; empty when it can be acted on. The same rules as
/// the CRD's schema and CEL, for an API server that does not run them (and for older CRDs).
pub fn spec_problems(spec: &OperatorReleaseSpec) -> Vec<String> {
    let mut problems = Vec::new();
    for (field, ring) in [("fromRing", &spec.from_ring), ("toRing", &spec.to_ring)] {
        if let Some(problem) = ring_name_problem(ring) {
            problems.push(format!("{field} {ring:?}: {problem}"));
        }
    }
    if spec.from_ring == spec.to_ring {
        problems.push(format!(
            "fromRing and toRing are both {:?}: a release moves tenants between two rings",
            spec.from_ring
        ));
    }
    if spec.waves.is_empty() {
        problems.push("waves is empty: give at least one, the last at percent: 100".into());
    }
    let (mut last_percent, mut last_tenants) = (0, 0);
    for (i, wave) in spec.waves.iter().enumerate() {
        match (wave.tenants, wave.percent) {
            (Some(_), Some(_)) | (None, None) => problems.push(format!(
                "waves[{i}] must give exactly one of tenants and percent"
            )),
            (Some(0), None) => problems.push(format!("waves[{i}].tenants must be at least 1")),
            (Some(n), None) => {
                if n < last_tenants {
                    problems.push(format!(
                        "waves[{i}].tenants {n} is below an earlier wave's {last_tenants}: waves are cumulative"
                    ));
                }
                last_tenants = n;
            }
            (None, Some(p)) => {
                if !(1..=100).contains(&p) {
                    problems.push(format!("waves[{i}].percent {p} must be within 1-100"));
                } else if p < last_percent {
                    problems.push(format!(
                        "waves[{i}].percent {p} is below an earlier wave's {last_percent}: waves are cumulative"
                    ));
                }
                last_percent = last_percent.max(p);
            }
        }
    }
    if let Some(last) = spec.waves.last()
        && last.percent != Some(100)
    {
        problems.push(format!(
            "the last wave is {last}: it must be percent: 100, so that a release that succeeds leaves every movable tenant on {}",
            spec.to_ring
        ));
    }
    for (field, value) in [
        ("bakeSeconds", spec.bake_seconds),
        ("intervalSeconds", spec.interval_seconds),
        ("adoptionDeadlineSeconds", spec.adoption_deadline_seconds),
        ("maxHandOvers", u64::from(spec.max_hand_overs)),
    ] {
        if value == 0 {
            problems.push(format!("{field} must be positive"));
        }
    }
    if let Some(analysis) = &spec.analysis {
        problems.extend(
            analysis
                .problems()
                .into_iter()
                .map(|p| format!("analysis: {p}")),
        );
    }
    if spec.unhealthy_margin_percent > 100 {
        problems.push(format!(
            "unhealthyMarginPercent {} must be within 0-100",
            spec.unhealthy_margin_percent
        ));
    }
    problems
}

/// Where a release stands (`status.phase`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
pub enum ReleasePhase {
    /// Waiting before the first move: `toRing` has no live leader, or not the build asked for,
    /// or the spec is invalid.
    #[default]
    Pending,
    /// Moving a wave's tenants, or baking it.
    Progressing,
    /// `spec.paused`: nothing moves, nothing is judged.
    Paused,
    /// Both rings in trouble alike (the infrastructure, not the build): held, neither promoted
    /// nor rolled back, until samples are clean again.
    Inconclusive,
    /// Every movable tenant is on `toRing`, adopted, the last wave baked (or promoted).
    Succeeded,
    /// Failed past the limit, or aborted: every moved tenant goes (or went) back.
    RolledBack,
}

impl ReleasePhase {
    pub const ALL: [ReleasePhase; 6] = [
        ReleasePhase::Pending,
        ReleasePhase::Progressing,
        ReleasePhase::Paused,
        ReleasePhase::Inconclusive,
        ReleasePhase::Succeeded,
        ReleasePhase::RolledBack,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            ReleasePhase::Pending => "Pending",
            ReleasePhase::Progressing => "Progressing",
            ReleasePhase::Paused => "Paused",
            ReleasePhase::Inconclusive => "Inconclusive",
            ReleasePhase::Succeeded => "Succeeded",
            ReleasePhase::RolledBack => "RolledBack",
        }
    }

    /// No tenant moves forward again (a rolled-back release still returns what it moved).
    pub fn is_final(self) -> bool {
        matches!(self, ReleasePhase::Succeeded | ReleasePhase::RolledBack)
    }
}

impl std::fmt::Display for ReleasePhase {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// One sample's verdict.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
pub enum SampleVerdict {
    Ok,
    Failed,
    Inconclusive,
}

impl SampleVerdict {
    pub fn as_str(self) -> &'static str {
        match self {
            SampleVerdict::Ok => "Ok",
            SampleVerdict::Failed => "Failed",
            SampleVerdict::Inconclusive => "Inconclusive",
        }
    }
}

/// One comparison of the two rings.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Sample {
    pub at: Time,
    pub verdict: SampleVerdict,
    /// Why, naming the ring and the signal.
    pub reason: String,
}

/// Samples by verdict, over the whole release.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct SampleCounts {
    #[serde(default)]
    pub ok: u32,
    #[serde(default)]
    pub failed: u32,
    #[serde(default)]
    pub inconclusive: u32,
}

/// One wave's timeline.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct WaveStatus {
    /// Tenants on `toRing` once this wave is moved (from the movable count when it started).
    #[serde(default)]
    pub target: u32,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub started_at: Option<Time>,
    /// When the wave's last tenant was adopted: its analysis window starts there, not before.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub adopted_at: Option<Time>,
    /// Since when the wave bakes: its last tenant adopted and every sample since ok.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bake_since: Option<Time>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub finished_at: Option<Time>,
    /// Ended by a person's promote rather than by its bake.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub promoted: bool,
}

/// Request ids acted on; each is acted on once.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ReleaseRequests {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub promote: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rollback: Option<String>,
}

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct OperatorReleaseStatus {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observed_generation: Option<i64>,
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        deserialize_with = "crate::lenient::or_absent"
    )]
    pub phase: Option<ReleasePhase>,
    /// Index into `spec.waves` of the wave being moved or baked.
    #[serde(default)]
    pub wave: u32,
    /// One entry per wave started.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub waves: Vec<WaveStatus>,
    /// Tenants this release moved that are on `toRing` now.
    #[serde(default)]
    pub moved_tenants: u32,
    /// Of those, the ones `toRing` drives (adopted).
    #[serde(default)]
    pub adopted_tenants: u32,
    /// Tenants the release may move (in `fromRing`, or moved by it).
    #[serde(default)]
    pub movable_tenants: u32,
    /// Tenants whose ring label someone else set: never moved.
    #[serde(default)]
    pub pinned_tenants: u32,
    /// A person promoted every remaining wave: no more baking or judging.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub promoted_full: bool,
    #[serde(default)]
    pub samples: SampleCounts,
    /// The latest samples, newest last.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub last_samples: Vec<Sample>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub requests: Option<ReleaseRequests>,
    /// When the rollback began, and why.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rolled_back_at: Option<Time>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rollback_reason: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub conditions: Vec<Condition>,
    /// What `toRing`'s build did with its own CRDs before the first move (DESIGN section 15).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub api: Option<crate::api_record::ApiRecord>,
    /// The latest analysed sample's signals and a short history (with `spec.analysis`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub analysis: Option<crate::analysis::AnalysisStatus>,
    /// Where the DC's API versions stand (DESIGN section 18), on the DC's newest release: its
    /// steps go on after the release that listed a version has ended.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub api_versions: Option<ApiVersionsSeen>,
}

/// A DC's API versions as a leader whose build carries a newer version last found them.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ApiVersionsSeen {
    /// The step, in the words `kubectl express release` uses: `v1beta1: listed`, `served`,
    /// `storage moved, migrated 3/7`, `trimmed`.
    pub step: String,
    pub seen_at: Time,
}

impl OperatorReleaseStatus {
    pub fn phase(&self) -> ReleasePhase {
        self.phase.unwrap_or_default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(waves: Vec<Wave>) -> OperatorReleaseSpec {
        OperatorReleaseSpec {
            from_ring: "default".into(),
            to_ring: "canary".into(),
            waves,
            bake_seconds: 1,
            interval_seconds: 1,
            adoption_deadline_seconds: 1,
            max_hand_overs: 1,
            ..OperatorReleaseSpec::default()
        }
    }

    fn percent(p: u32) -> Wave {
        Wave {
            tenants: None,
            percent: Some(p),
        }
    }

    fn tenants(n: u32) -> Wave {
        Wave {
            tenants: Some(n),
            percent: None,
        }
    }

    #[test]
    fn a_valid_spec_has_no_problems() {
        assert_eq!(
            spec_problems(&spec(vec![tenants(1), percent(10), percent(100)])),
            Vec::<String>::new()
        );
    }

    #[test]
    fn each_rule_is_named() {
        let cases: Vec<(&str, OperatorReleaseSpec, &str)> = vec![
            ("no waves", spec(vec![]), "waves is empty"),
            (
                "last below 100",
                spec(vec![percent(50)]),
                "the last wave is 50%",
            ),
            (
                "last a count",
                spec(vec![tenants(3)]),
                "the last wave is 3 tenant(s)",
            ),
            (
                "decreasing",
                spec(vec![percent(50), percent(10), percent(100)]),
                "waves[1].percent 10 is below an earlier wave's 50",
            ),
            (
                "over 100",
                spec(vec![percent(101)]),
                "waves[0].percent 101 must be within 1-100",
            ),
            (
                "both",
                spec(vec![
                    Wave {
                        tenants: Some(1),
                        percent: Some(100),
                    },
                    percent(100),
                ]),
                "waves[0] must give exactly one",
            ),
            (
                "same rings",
                OperatorReleaseSpec {
                    to_ring: "default".into(),
                    ..spec(vec![percent(100)])
                },
                "fromRing and toRing are both",
            ),
            (
                "bad ring",
                OperatorReleaseSpec {
                    to_ring: "Canary".into(),
                    ..spec(vec![percent(100)])
                },
                "toRing \"Canary\"",
            ),
            (
                "zero interval",
                OperatorReleaseSpec {
                    interval_seconds: 0,
                    ..spec(vec![percent(100)])
                },
                "intervalSeconds must be positive",
            ),
        ];
        for (name, spec, expected) in cases {
            let problems = spec_problems(&spec);
            assert!(
                problems.iter().any(|p| p.contains(expected)),
                "{name}: {problems:?} should say {expected:?}"
            );
        }
    }

    #[test]
    fn wave_targets_round_up_and_cap() {
        assert_eq!(percent(10).target(15), 2);
        assert_eq!(percent(10).target(10), 1);
        assert_eq!(percent(10).target(0), 0);
        assert_eq!(percent(100).target(7), 7);
        assert_eq!(percent(1).target(1), 1);
        assert_eq!(tenants(5).target(3), 3);
        assert_eq!(tenants(1).target(100), 1);
    }

    #[test]
    fn defaults_fill_a_minimal_spec() {
        let spec: OperatorReleaseSpec = serde_json::from_value(serde_json::json!({
            "fromRing": "default", "toRing": "canary", "waves": [{"percent": 100}]
        }))
        .unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(spec.bake_seconds, DEFAULT_BAKE_SECONDS);
        assert_eq!(spec.interval_seconds, DEFAULT_INTERVAL_SECONDS);
        assert_eq!(spec.failure_limit, DEFAULT_FAILURE_LIMIT);
        assert_eq!(
            spec.adoption_deadline_seconds,
            DEFAULT_ADOPTION_DEADLINE_SECONDS
        );
        assert_eq!(
            spec.leader_deadline_seconds,
            DEFAULT_LEADER_DEADLINE_SECONDS
        );
        assert!(spec_problems(&spec).is_empty());
    }

    #[test]
    fn phases_are_their_wire_names() {
        for phase in ReleasePhase::ALL {
            assert_eq!(
                serde_json::to_value(phase).ok(),
                Some(phase.as_str().into())
            );
        }
    }
}
