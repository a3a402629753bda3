//! The occurrences an object's status shows now. Each is read from what status keeps (a state
//! with its start and finish, a condition with its transition, a wave's finish, a rollback's
//! instant), never from a change seen in passing: a pass that comes late, or a new leader after
//! a restart, finds the same occurrences with the same ids.

use express_api::release::{OperatorRelease, ReleasePhase};
use express_api::{ExpressCluster, RolloutState, conditions};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, Time};
use k8s_openapi::jiff::Timestamp;
use kube::ResourceExt;

use crate::config::ANNOTATION_NOTIFY;
use crate::occurrence::{Fact, Occurrence, Subject, Trigger};

/// What a tenant's status shows: its rollout failed, rolled back, stalled or done.
pub fn tenant(cluster: &ExpressCluster) -> Vec<Occurrence> {
    let (Some(namespace), Some(status)) = (cluster.metadata.namespace.clone(), &cluster.status)
    else {
        return Vec::new();
    };
    let name = cluster.name_any();
    let base = Base {
        subject: Subject {
            kind: "ExpressCluster".into(),
            namespace: Some(namespace.clone()),
            name: name.clone(),
        },
        uid: cluster.uid().unwrap_or_default(),
        subscribed: subscribed(cluster.annotations().get(ANNOTATION_NOTIFY)),
    };
    let mut found = Vec::new();
    let rollout = status.rollout.as_ref();
    let state = rollout.and_then(|r| r.state);
    let started = rollout.and_then(|r| r.started_at.as_ref());
    let halted = condition(&status.conditions, conditions::HALTED);
    let mut facts = vec![fact("tenant", format!("{namespace}/{name}"))];
    if let Some(operator) = &status.operator {
        facts.push(fact(
            "operator",
            format!("ring {} ({})", operator.ring, operator.version),
        ));
    }
    let failed_node = rollout.and_then(|r| r.failed_node.clone());
    let why = halted
        .map(|c| c.message.clone())
        .or_else(|| status.message.clone())
        .unwrap_or_default();
    let retry = format!("kubectl express retry {name} -n {namespace}");
    if state == Some(RolloutState::Failed)
        || (state == Some(RolloutState::RollingBack) && failed_node.is_some())
    {
        let at = instant(halted.map(|c| &c.last_transition_time).or(started));
        let mut facts = facts.clone();
        facts.extend(failed_node.iter().map(|n| fact("failed node", n.clone())));
        facts.push(fact("why", why.clone()));
        found.push(base.occurrence(
            Trigger::RolloutFailed,
            key(started, at),
            at,
            match &failed_node {
                Some(node) => format!("Rollout of {namespace}/{name} failed at node {node}"),
                None => format!("Rollout of {namespace}/{name} failed"),
            },
            facts,
            Some(retry.clone()),
        ));
    }
    if state == Some(RolloutState::RollingBack) {
        let at = instant(halted.map(|c| &c.last_transition_time).or(started));
        let (cause, key_of) = match &status.abort {
            Some(abort) if abort.rollback => (
                format!("abort {} asked for a rollback", abort.request_id),
                format!("abort {}", abort.request_id),
            ),
            _ => (
                "automatic rollback after the failure".into(),
                key(started, at),
            ),
        };
        let mut facts = facts.clone();
        facts.push(fact("cause", cause));
        facts.push(fact("why", why.clone()));
        found.push(base.occurrence(
            Trigger::RolloutRolledBack,
            key_of,
            at,
            format!("Rollout of {namespace}/{name} is rolling back"),
            facts,
            Some(format!("kubectl express status {name} -n {namespace}")),
        ));
    }
    if let Some(stalled) = condition(&status.conditions, conditions::DESIRED_STATE_SETTLED)
        .filter(|c| c.reason == conditions::reason::STALLED)
    {
        let at = stalled.last_transition_time.0;
        let mut facts = facts.clone();
        facts.push(fact("why", stalled.message.clone()));
        found.push(base.occurrence(
            Trigger::RolloutStalled,
            at.to_string(),
            at,
            format!("Desired state of {namespace}/{name} did not settle"),
            facts,
            Some(format!("kubectl express get {name} -n {namespace}")),
        ));
    }
    if let (Some(RolloutState::Complete), Some(started), Some(finished)) =
        (state, started, rollout.and_then(|r| r.finished_at.as_ref()))
    {
        let mut facts = facts;
        facts.push(fact(
            "took",
            seconds(finished.0.as_second() - started.0.as_second()),
        ));
        if let Some(nodes) = &status.nodes {
            facts.push(fact(
                "nodes",
                format!(
                    "{} of {} on their desired revision",
                    nodes.up_to_date, nodes.total
                ),
            ));
        }
        found.push(base.occurrence(
            Trigger::RolloutDone,
            started.0.to_string(),
            finished.0,
            format!("Rollout of {namespace}/{name} is complete"),
            facts,
            None,
        ));
    }
    found
}

/// What an OperatorRelease's status shows: waiting, a wave promoted, rolled back, done.
pub fn release(release: &OperatorRelease) -> Vec<Occurrence> {
    let Some(status) = &release.status else {
        return Vec::new();
    };
    let spec = &release.spec;
    let seen = Release {
        release,
        status,
        name: release.name_any(),
        base: Base {
            subject: Subject {
                kind: "OperatorRelease".into(),
                namespace: release.metadata.namespace.clone(),
                name: release.name_any(),
            },
            uid: release.uid().unwrap_or_default(),
            subscribed: subscribed(release.annotations().get(ANNOTATION_NOTIFY)),
        },
        rings: fact(
            "rings",
            format!(
                "{} -> {}{}",
                spec.from_ring,
                spec.to_ring,
                spec.version
                    .as_ref()
                    .map(|v| format!(" (build {v})"))
                    .unwrap_or_default()
            ),
        ),
        moved: fact(
            "tenants",
            format!(
                "{} of {} moved, {} adopted",
                status.moved_tenants, status.movable_tenants, status.adopted_tenants
            ),
        ),
        waves: spec.waves.len(),
    };
    let mut found: Vec<Occurrence> = seen.waiting().into_iter().collect();
    found.extend(seen.promoted());
    found.extend(seen.rolled_back());
    found.extend(seen.done());
    found
}

/// One release as its occurrences read it.
struct Release<'a> {
    release: &'a OperatorRelease,
    status: &'a express_api::OperatorReleaseStatus,
    name: String,
    base: Base,
    rings: Fact,
    moved: Fact,
    waves: usize,
}

impl Release<'_> {
    fn phase(&self) -> ReleasePhase {
        self.status.phase.unwrap_or_default()
    }

    /// Paused by a person, or held (both rings in trouble alike).
    fn waiting(&self) -> Option<Occurrence> {
        let (status, name, phase) = (self.status, &self.name, self.phase());
        if !matches!(phase, ReleasePhase::Paused | ReleasePhase::Inconclusive) {
            return None;
        }
        // The phase's condition says since when; a release without one waits since the wave
        // it is on started.
        let since = status
            .conditions
            .iter()
            .filter(|c| c.reason == phase.as_str() || c.type_ == phase.as_str())
            .map(|c| c.last_transition_time.0)
            .max()
            .or_else(|| {
                status
                    .waves
                    .get(status.wave as usize)
                    .and_then(|w| w.started_at.as_ref())
                    .map(|t| t.0)
            })
            .unwrap_or(Timestamp::UNIX_EPOCH);
        let why = match phase {
            ReleasePhase::Paused => "paused (spec.paused): nothing moves, nothing is judged".into(),
            _ => status.message.clone().unwrap_or_else(|| {
                "both rings in trouble alike: held, neither promoted nor rolled back".into()
            }),
        };
        Some(self.base.occurrence(
            Trigger::ReleaseWaiting,
            format!("{phase} {since}"),
            since,
            format!(
                "OperatorRelease {name} waits at wave {} of {}: {phase}",
                status.wave + 1,
                self.waves
            ),
            vec![self.rings.clone(), self.moved.clone(), fact("why", why)],
            Some(match phase {
                ReleasePhase::Paused => format!("kubectl express release resume {name}"),
                _ => format!("kubectl express doctor; kubectl express release {name}"),
            }),
        ))
    }

    /// Every wave before the last that finished.
    fn promoted(&self) -> Vec<Occurrence> {
        let (status, name, waves) = (self.status, &self.name, self.waves);
        let to_ring = &self.release.spec.to_ring;
        let samples = &status.samples;
        let mut found = Vec::new();
        for (index, wave) in status
            .waves
            .iter()
            .enumerate()
            .take(waves.saturating_sub(1))
        {
            let Some(finished) = &wave.finished_at else {
                continue;
            };
            let how = if wave.promoted {
                "promoted by a person"
            } else {
                "baked"
            };
            found.push(self.base.occurrence(
                Trigger::ReleasePromoted,
                format!("wave {index}"),
                finished.0,
                format!(
                    "OperatorRelease {name}: wave {} of {waves} {how}, wave {} starts",
                    index + 1,
                    index + 2
                ),
                vec![
                    self.rings.clone(),
                    fact("wave", format!("{} tenants on {to_ring}", wave.target)),
                    self.moved.clone(),
                    fact(
                        "samples",
                        format!(
                            "{} ok, {} failed, {} inconclusive",
                            samples.ok, samples.failed, samples.inconclusive
                        ),
                    ),
                ],
                None,
            ));
        }
        found
    }

    fn rolled_back(&self) -> Option<Occurrence> {
        let (status, name) = (self.status, &self.name);
        if self.phase() != ReleasePhase::RolledBack {
            return None;
        }
        let at = status
            .rolled_back_at
            .as_ref()
            .map(|t| t.0)
            .unwrap_or(Timestamp::UNIX_EPOCH);
        let mut facts = vec![
            self.rings.clone(),
            self.moved.clone(),
            fact(
                "why",
                status
                    .rollback_reason
                    .clone()
                    .unwrap_or_else(|| "rolled back".into()),
            ),
        ];
        facts.extend(deciding_figures(self.release));
        Some(self.base.occurrence(
            Trigger::ReleaseRolledBack,
            at.to_string(),
            at,
            format!(
                "OperatorRelease {name} rolled back: tenants return to {}",
                self.release.spec.from_ring
            ),
            facts,
            Some(format!("kubectl express release {name}")),
        ))
    }

    fn done(&self) -> Option<Occurrence> {
        if self.phase() != ReleasePhase::Succeeded {
            return None;
        }
        let at = self
            .status
            .waves
            .iter()
            .filter_map(|w| w.finished_at.as_ref().map(|t| t.0))
            .max()
            .unwrap_or(Timestamp::UNIX_EPOCH);
        Some(self.base.occurrence(
            Trigger::ReleaseDone,
            "succeeded".into(),
            at,
            format!(
                "OperatorRelease {} succeeded: {} leads its tenants",
                self.name, self.release.spec.to_ring
            ),
            vec![self.rings.clone(), self.moved.clone()],
            None,
        ))
    }
}

/// The signals that decided a rollback and both rings' figures (the latest analysed sample),
/// and the last failed sample's reason: "it failed" is not enough to act on.
fn deciding_figures(release: &OperatorRelease) -> Vec<Fact> {
    let Some(status) = &release.status else {
        return Vec::new();
    };
    let mut facts = Vec::new();
    if let Some(sample) = status
        .last_samples
        .iter()
        .rev()
        .find(|s| s.verdict == express_api::release::SampleVerdict::Failed)
    {
        facts.push(fact("failed sample", sample.reason.clone()));
    }
    if let Some(analysis) = &status.analysis {
        for reading in analysis
            .signals
            .iter()
            .filter(|r| r.verdict != express_api::analysis::SignalVerdict::Ok)
        {
            facts.push(fact(
                &format!("signal {}", reading.signal),
                format!(
                    "{} {} against {} {} ({})",
                    release.spec.to_ring,
                    figure(reading.canary),
                    analysis.baseline,
                    figure(reading.baseline),
                    reading.reason
                ),
            ));
        }
    }
    facts
}

fn figure(value: Option<f64>) -> String {
    match value {
        Some(v) if v.is_finite() => format!("{v:.3}"),
        Some(_) | None => "no data".into(),
    }
}

/// What every occurrence of one object shares.
struct Base {
    subject: Subject,
    uid: String,
    subscribed: Vec<String>,
}

impl Base {
    fn occurrence(
        &self,
        trigger: Trigger,
        key: String,
        at: Timestamp,
        title: String,
        facts: Vec<Fact>,
        act: Option<String>,
    ) -> Occurrence {
        let subject = &self.subject;
        Occurrence {
            id: format!(
                "{trigger}/{}/{}/{}/{}/{key}",
                subject.kind,
                subject.namespace.as_deref().unwrap_or(""),
                subject.name,
                self.uid
            ),
            trigger,
            subject: subject.clone(),
            at,
            title,
            facts: facts.into_iter().filter(|f| !f.value.is_empty()).collect(),
            act,
            subscribed_by_object: self.subscribed.clone(),
        }
    }
}

/// The destinations an object's notify annotation names.
fn subscribed(annotation: Option<&String>) -> Vec<String> {
    annotation
        .map(|names| {
            names
                .split(',')
                .map(str::trim)
                .filter(|n| !n.is_empty())
                .map(str::to_owned)
                .collect()
        })
        .unwrap_or_default()
}

fn condition<'a>(conditions: &'a [Condition], type_: &str) -> Option<&'a Condition> {
    conditions.iter().find(|c| c.type_ == type_)
}

fn instant(time: Option<&Time>) -> Timestamp {
    time.map(|t| t.0).unwrap_or(Timestamp::UNIX_EPOCH)
}

/// What makes a rollout's occurrence this rollout's: its start, else the instant itself.
fn key(started: Option<&Time>, at: Timestamp) -> String {
    started.map(|t| t.0).unwrap_or(at).to_string()
}

fn fact(name: &str, value: String) -> Fact {
    Fact {
        name: name.into(),
        value,
    }
}

fn seconds(total: i64) -> String {
    let total = total.max(0);
    match (total / 60, total % 60) {
        (0, s) => format!("{s}s"),
        (m, s) => format!("{m}m{s:02}s"),
    }
}
