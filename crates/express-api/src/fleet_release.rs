//! The `FleetRelease` contract (DESIGN section 14): one operator build released across data
//! centres in stages, each DC by its own `OperatorRelease` (section 12), each finished stage
//! soaked against the DCs not yet released. There is no hub: every DC the plan names holds an
//! identical copy of the spec in the operator's namespace, and the driver writes the fleet's
//! status into every copy it reaches, so any machine can resume the plan from the DCs.
//!
//! This module owns the wire format, the spec's validation and the requests people write on a
//! copy (annotations, each a request id and the instant it was made, so that between a pause
//! and a resume the newer wins).

use std::collections::BTreeSet;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use k8s_openapi::jiff::Timestamp;
use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::release::{
    OperatorReleaseSpec, ReleasePhase, SampleVerdict, Wave, spec_problems as release_problems,
};
use crate::rings::ring_name_problem;
use crate::verdict::Verdict;

/// OperatorRelease label: the FleetRelease that created it.
pub const LABEL_FLEET_RELEASE: &str = "express.dev/fleet-release";
/// OperatorRelease annotation: the FleetRelease that paused it (and so resumes it; a release a
/// person paused by hand stays paused).
pub const ANNOTATION_PAUSED_BY: &str = "express.dev/paused-by";
/// FleetRelease annotations: a person's requests, each `ID@RFC3339` (see [`Request`]).
pub const ANNOTATION_PAUSE: &str = "express.dev/pause";
pub const ANNOTATION_RESUME: &str = "express.dev/resume";
pub const ANNOTATION_APPROVE: &str = "express.dev/approve";
pub const ANNOTATION_ABORT: &str = "express.dev/abort";
/// With an abort: every DC already released goes back too.
pub const ANNOTATION_ABORT_ROLLBACK: &str = "express.dev/abort-rollback";

pub const DEFAULT_SOAK_SECONDS: u64 = 1800;
pub const DEFAULT_STAGE_DEADLINE_SECONDS: u64 = 21_600;
/// Samples kept in the status, newest last.
pub const SAMPLES_KEPT: usize = 20;

#[allow(clippy::duplicated_attributes)]
#[derive(
    CustomResource, kube::KubeSchema, Clone, Debug, Default, PartialEq, Serialize, Deserialize,
)]
#[kube(
    group = "express.dev",
    version = "v1alpha1",
    kind = "FleetRelease",
    plural = "fleetreleases",
    shortname = "flrel",
    category = "express",
    namespaced,
    status = "FleetReleaseStatus",
    printcolumn(name = "Phase", type_ = "string", json_path = ".status.phase"),
    printcolumn(name = "Stage", type_ = "integer", json_path = ".status.stage"),
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
#[serde(rename_all = "camelCase")]
pub struct FleetReleaseSpec {
    /// The trusted ring of every DC: its leader judges and moves tenants.
    #[schemars(length(min = 1, max = 46), pattern(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$"))]
    pub from_ring: String,
    /// The ring running the build under test in every DC.
    #[schemars(length(min = 1, max = 46), pattern(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$"))]
    pub to_ring: String,
    /// When set, each DC's release waits for `toRing` to report exactly this build.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub version: Option<String>,
    /// The OperatorRelease spec each DC gets, but for its rings and version.
    pub release: ReleaseTemplate,
    /// In order; the DCs of one stage are released at the same time.
    #[schemars(length(min = 1))]
    pub stages: Vec<Stage>,
    /// After a stage's DCs all succeed, how long they are soaked before the next stage.
    #[serde(default = "default_soak_seconds")]
    pub soak_seconds: u64,
    /// A stage whose DCs have not all succeeded this long after it started fails the plan
    /// (paused time and approval waits do not count).
    #[serde(default = "default_stage_deadline_seconds")]
    #[schemars(range(min = 1))]
    pub stage_deadline_seconds: u64,
}

fn default_soak_seconds() -> u64 {
    DEFAULT_SOAK_SECONDS
}
fn default_stage_deadline_seconds() -> u64 {
    DEFAULT_STAGE_DEADLINE_SECONDS
}
/// Every field of an OperatorRelease spec but the rings and the version, with its defaults.
#[derive(kube::KubeSchema, Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ReleaseTemplate {
    #[schemars(length(min = 1))]
    pub waves: Vec<Wave>,
    #[serde(default = "crate::release::default_bake_seconds")]
    pub bake_seconds: u64,
    /// Also how often the soak samples each DC's doctor.
    #[serde(default = "crate::release::default_interval_seconds")]
    pub interval_seconds: u64,
    /// Failed samples tolerated: in each DC's release, and in each stage's soak.
    #[serde(default = "crate::release::default_failure_limit")]
    pub failure_limit: u32,
    #[serde(default = "crate::release::default_adoption_deadline_seconds")]
    pub adoption_deadline_seconds: u64,
    #[serde(default = "crate::release::default_leader_deadline_seconds")]
    pub leader_deadline_seconds: u64,
    #[serde(default = "crate::release::default_max_hand_overs")]
    pub max_hand_overs: u32,
    #[serde(default = "crate::release::default_unhealthy_margin_percent")]
    pub unhealthy_margin_percent: u32,
    /// Each DC's release reads the operator's vital signs from this Prometheus.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub analysis: Option<crate::analysis::AnalysisSpec>,
}

/// One stage: DCs released together, optionally behind a person's approval.
#[derive(kube::KubeSchema, Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Stage {
    #[schemars(length(min = 1, max = 63))]
    pub name: String,
    /// Kubeconfig context names, one per DC.
    #[schemars(length(min = 1))]
    pub contexts: Vec<String>,
    /// Wait for `fleet-release approve` before this stage starts.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub approval: bool,
}

impl FleetReleaseSpec {
    /// The OperatorRelease spec of each DC's release.
    pub fn release_spec(&self) -> OperatorReleaseSpec {
        let t = &self.release;
        OperatorReleaseSpec {
            from_ring: self.from_ring.clone(),
            to_ring: self.to_ring.clone(),
            version: self.version.clone(),
            waves: t.waves.clone(),
            bake_seconds: t.bake_seconds,
            interval_seconds: t.interval_seconds,
            failure_limit: t.failure_limit,
            adoption_deadline_seconds: t.adoption_deadline_seconds,
            leader_deadline_seconds: t.leader_deadline_seconds,
            max_hand_overs: t.max_hand_overs,
            unhealthy_margin_percent: t.unhealthy_margin_percent,
            analysis: t.analysis.clone(),
            paused: false,
        }
    }

    /// Every DC of the plan, in stage order.
    pub fn contexts(&self) -> impl Iterator<Item = (usize, &str)> {
        self.stages
            .iter()
            .enumerate()
            .flat_map(|(i, s)| s.contexts.iter().map(move |c| (i, c.as_str())))
    }

    /// The stage `context` belongs to.
    pub fn stage_of(&self, context: &str) -> Option<usize> {
        self.contexts()
            .find_map(|(i, c)| (c == context).then_some(i))
    }
}

/// What is wrong with a plan, one line each; empty when it can be run.
pub fn spec_problems(spec: &FleetReleaseSpec) -> Vec<String> {
    let mut problems = Vec::new();
    for (field, ring) in [("fromRing", &spec.from_ring), ("toRing", &spec.to_ring)] {
        if let Some(problem) = ring_name_problem(ring) {
            problems.push(format!("{field} {ring:?}: {problem}"));
        }
    }
    // The release's own rules (waves, durations), as each DC's OperatorRelease will see them.
    problems.extend(
        release_problems(&spec.release_spec())
            .into_iter()
            .map(|p| format!("release: {p}")),
    );
    if spec.stages.is_empty() {
        problems.push("stages is empty: give at least one stage of DCs".into());
    }
    let mut seen = BTreeSet::new();
    let mut names = BTreeSet::new();
    for (i, stage) in spec.stages.iter().enumerate() {
        if stage.name.trim().is_empty() {
            problems.push(format!("stages[{i}] has no name"));
        } else if !names.insert(stage.name.as_str()) {
            problems.push(format!("stages[{i}]: the name {:?} is taken", stage.name));
        }
        if stage.contexts.is_empty() {
            problems.push(format!("stages[{i}] ({}) names no DC", stage.name));
        }
        for context in &stage.contexts {
            if context.trim().is_empty() {
                problems.push(format!(
                    "stages[{i}] ({}) names an empty context",
                    stage.name
                ));
            } else if !seen.insert(context.as_str()) {
                problems.push(format!(
                    "context {context} is in two stages: a DC is released once"
                ));
            }
        }
    }
    if spec.stage_deadline_seconds == 0 {
        problems.push("stageDeadlineSeconds must be positive".into());
    }
    problems
}

/// A person's request, as written on a copy: an id (acted on once) and when it was made.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Request {
    pub id: String,
    pub at: Timestamp,
}

impl Request {
    /// The annotation's value: `ID@RFC3339`.
    pub fn to_value(&self) -> String {
        format!("{}@{}", self.id, self.at)
    }

    /// Reads an annotation's value; None for one that is not `ID@RFC3339` (written by hand
    /// wrongly: the driver says so and ignores it).
    pub fn parse(value: &str) -> Option<Request> {
        let (id, at) = value.rsplit_once('@')?;
        if id.is_empty() {
            return None;
        }
        Some(Request {
            id: id.to_owned(),
            at: at.parse().ok()?,
        })
    }
}

/// Where a plan stands (`status.phase`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
pub enum FleetPhase {
    /// Nothing started yet.
    #[default]
    Pending,
    /// A stage's DCs are being released.
    Progressing,
    /// A stage's DCs all succeeded; they are soaked against the DCs not yet released.
    Soaking,
    /// The next stage waits for `approve`.
    WaitingApproval,
    /// A person paused it: no stage starts, in-flight releases are paused, the soak clock stops.
    Paused,
    /// The soak is held: the DCs not yet released are in trouble too, or a DC cannot be read.
    Inconclusive,
    Succeeded,
    /// A DC's release rolled back, a soak failed or a stage passed its deadline.
    Failed,
    /// A person aborted: in-flight DCs rolled back, no stage starts.
    Aborted,
    /// A person aborted with `--rollback`: every DC released went back.
    RolledBack,
}

impl FleetPhase {
    pub const ALL: [FleetPhase; 10] = [
        FleetPhase::Pending,
        FleetPhase::Progressing,
        FleetPhase::Soaking,
        FleetPhase::WaitingApproval,
        FleetPhase::Paused,
        FleetPhase::Inconclusive,
        FleetPhase::Succeeded,
        FleetPhase::Failed,
        FleetPhase::Aborted,
        FleetPhase::RolledBack,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            FleetPhase::Pending => "Pending",
            FleetPhase::Progressing => "Progressing",
            FleetPhase::Soaking => "Soaking",
            FleetPhase::WaitingApproval => "WaitingApproval",
            FleetPhase::Paused => "Paused",
            FleetPhase::Inconclusive => "Inconclusive",
            FleetPhase::Succeeded => "Succeeded",
            FleetPhase::Failed => "Failed",
            FleetPhase::Aborted => "Aborted",
            FleetPhase::RolledBack => "RolledBack",
        }
    }

    /// Nothing more will start.
    pub fn is_final(self) -> bool {
        matches!(
            self,
            FleetPhase::Succeeded
                | FleetPhase::Failed
                | FleetPhase::Aborted
                | FleetPhase::RolledBack
        )
    }

    /// Ended badly: a pipeline step fails on it.
    pub fn is_failure(self) -> bool {
        matches!(
            self,
            FleetPhase::Failed | FleetPhase::Aborted | FleetPhase::RolledBack
        )
    }
}

impl std::fmt::Display for FleetPhase {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Where one DC stands in the plan.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
pub enum DcState {
    /// Not started (also when the plan ended before its stage).
    #[default]
    Waiting,
    Releasing,
    Soaking,
    Succeeded,
    Failed,
    RolledBack,
    /// It cannot be read now; never counted done or skipped.
    Unknown,
}

impl DcState {
    pub fn as_str(self) -> &'static str {
        match self {
            DcState::Waiting => "Waiting",
            DcState::Releasing => "Releasing",
            DcState::Soaking => "Soaking",
            DcState::Succeeded => "Succeeded",
            DcState::Failed => "Failed",
            DcState::RolledBack => "RolledBack",
            DcState::Unknown => "Unknown",
        }
    }
}

/// A DC's own OperatorRelease, as the plan last read it.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct DcRelease {
    #[schemars(with = "String")]
    pub phase: ReleasePhase,
    #[serde(default)]
    pub wave: u32,
    #[serde(default)]
    pub moved_tenants: u32,
}

/// One DC of the plan.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct DcStatus {
    pub context: String,
    pub stage: u32,
    pub state: DcState,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub release: Option<DcRelease>,
    /// Its doctor's verdict, when the soak last read it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(with = "Option<String>")]
    pub verdict: Option<Verdict>,
    /// Its doctor's verdict when its stage started: the last stage is compared with it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(with = "Option<String>")]
    pub baseline: Option<Verdict>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub started_at: Option<Time>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub succeeded_at: Option<Time>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
}

/// One soak sample: the DCs of the stage against the DCs not yet released.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct SoakSample {
    pub at: Time,
    pub stage: u32,
    /// `Ok`, `Failed` or `Inconclusive`.
    #[schemars(with = "String")]
    pub verdict: SampleVerdict,
    pub reason: String,
}

/// A stage's soak so far.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct SoakStatus {
    pub stage: u32,
    /// When the stage's last release finished: the soak is timed from there.
    pub started_at: Time,
    /// Seconds the soak clock stood still (held inconclusive, or paused).
    #[serde(default)]
    pub held_seconds: u64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_sample_at: Option<Time>,
    #[serde(default)]
    pub ok: u32,
    #[serde(default)]
    pub failed: u32,
    #[serde(default)]
    pub inconclusive: u32,
    /// The last sample was inconclusive: the clock stands still until one is not.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub holding: bool,
}

/// Request ids acted on, each once.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct FleetRequests {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pause: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resume: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub approve: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub abort: Option<String>,
}

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct FleetReleaseStatus {
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        deserialize_with = "crate::lenient::or_absent"
    )]
    pub phase: Option<FleetPhase>,
    /// The stage being released or soaked (0-based).
    #[serde(default)]
    pub stage: u32,
    /// When the current stage started, and the seconds of it spent paused.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stage_started_at: Option<Time>,
    #[serde(default)]
    pub stage_paused_seconds: u64,
    /// Since when the plan is paused (the paused time is counted from it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub paused_since: Option<Time>,
    /// Stages whose approval gate was passed, by name.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub approved: Vec<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub data_centers: Vec<DcStatus>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub soak: Option<SoakStatus>,
    /// The latest soak samples, newest last.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub samples: Vec<SoakSample>,
    #[serde(default)]
    pub requests: FleetRequests,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
    /// When a driver last wrote it: the copy written last is the one to resume from.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub updated_at: Option<Time>,
}

impl FleetReleaseStatus {
    pub fn phase(&self) -> FleetPhase {
        self.phase.unwrap_or_default()
    }

    pub fn dc(&self, context: &str) -> Option<&DcStatus> {
        self.data_centers.iter().find(|d| d.context == context)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn plan() -> FleetReleaseSpec {
        serde_json::from_value(serde_json::json!({
            "fromRing": "default", "toRing": "canary",
            "release": {"waves": [{"tenants": 1}, {"percent": 100}]},
            "stages": [
                {"name": "canary-dc", "contexts": ["dc-a"]},
                {"name": "rest", "contexts": ["dc-b", "dc-c"], "approval": true}
            ]
        }))
        .unwrap_or_else(|e| panic!("{e}"))
    }

    #[test]
    fn a_minimal_plan_takes_the_defaults_and_is_valid() {
        let plan = plan();
        assert_eq!(plan.soak_seconds, DEFAULT_SOAK_SECONDS);
        assert_eq!(plan.stage_deadline_seconds, DEFAULT_STAGE_DEADLINE_SECONDS);
        assert_eq!(
            plan.release.bake_seconds,
            crate::release::DEFAULT_BAKE_SECONDS
        );
        assert_eq!(spec_problems(&plan), Vec::<String>::new());
        let release = plan.release_spec();
        assert_eq!(
            (release.from_ring.as_str(), release.to_ring.as_str()),
            ("default", "canary")
        );
        assert_eq!(release.waves.len(), 2);
        assert_eq!(plan.stage_of("dc-c"), Some(1));
        assert_eq!(plan.stage_of("dc-x"), None);
    }

    #[test]
    fn each_rule_is_named() {
        let with = |edit: fn(&mut FleetReleaseSpec)| {
            let mut plan = plan();
            edit(&mut plan);
            spec_problems(&plan)
        };
        let cases: Vec<(&str, Vec<String>, &str)> = vec![
            ("no stages", with(|p| p.stages.clear()), "stages is empty"),
            (
                "a DC twice",
                with(|p| p.stages[1].contexts.push("dc-a".into())),
                "context dc-a is in two stages",
            ),
            (
                "an empty stage",
                with(|p| p.stages[1].contexts.clear()),
                "stages[1] (rest) names no DC",
            ),
            (
                "a name twice",
                with(|p| p.stages[1].name = "canary-dc".into()),
                "the name \"canary-dc\" is taken",
            ),
            (
                "the release's own rules",
                with(|p| {
                    p.release.waves = vec![Wave {
                        tenants: None,
                        percent: Some(50),
                    }]
                }),
                "release: the last wave is 50%",
            ),
            (
                "same rings",
                with(|p| p.to_ring = "default".into()),
                "fromRing and toRing are both",
            ),
            (
                "no deadline",
                with(|p| p.stage_deadline_seconds = 0),
                "stageDeadlineSeconds",
            ),
        ];
        for (what, problems, expected) in cases {
            assert!(
                problems.iter().any(|p| p.contains(expected)),
                "{what}: {problems:?} should say {expected:?}"
            );
        }
    }

    #[test]
    fn requests_are_an_id_and_an_instant() {
        let at: Timestamp = "2026-11-26T10:00:00Z"
            .parse()
            .unwrap_or_else(|e| panic!("{e}"));
        let request = Request {
            id: "cli-1".into(),
            at,
        };
        assert_eq!(request.to_value(), "cli-1@2026-11-26T10:00:00Z");
        assert_eq!(Request::parse(&request.to_value()), Some(request));
        for bad in ["", "cli-1", "@2026-11-26T10:00:00Z", "cli-1@yesterday"] {
            assert_eq!(Request::parse(bad), None, "{bad:?}");
        }
    }

    #[test]
    fn phases_are_their_wire_names() {
        for phase in FleetPhase::ALL {
            assert_eq!(
                serde_json::to_value(phase).ok(),
                Some(phase.as_str().into())
            );
        }
        assert!(FleetPhase::RolledBack.is_failure() && FleetPhase::Succeeded.is_final());
        assert!(!FleetPhase::Paused.is_final());
    }
}
