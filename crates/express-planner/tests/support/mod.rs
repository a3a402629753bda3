//! Test support: terse snapshot builders and a driver that plays the operator and the kubelet
//! one pod operation at a time, so tests see every intermediate state the planner will see.
#![allow(dead_code)]

use express_api::{DeploymentDependencies, NodeKind, Prerequisite};
use express_planner::simulate::ready_pod;
use express_planner::{
    BounceRecord, ClusterSettings, ClusterSnapshot, DesiredState, NodeObservation, NodeState,
    Operation, Plan, PodCondition, PodObservation, PodPhase, plan,
};

pub const OLD: &str = "rev-old";
pub const NEW: &str = "rev-new";

/// The observed state of one node's pod in a table row.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Pod {
    Missing,
    /// Ready on the old revision.
    Old,
    /// Ready on the desired revision.
    New,
    OldNotReady,
    NewNotReady,
    Terminating,
    Ended,
    /// The node is `up: false` and has no pod.
    Down,
    /// The node is `up: false` but its old pod still runs.
    DownStillRunning,
}

/// `be`, `be2` are Backends, `fe1`... Frontends; every name gets the `acme-` prefix.
pub fn kind_of(short: &str) -> NodeKind {
    if short.starts_with("be") {
        NodeKind::Backend
    } else {
        NodeKind::Frontend
    }
}

/// Short names of a cluster with `backends` Backends (be, be2, ...) and `frontends` Frontends
/// (fe1, fe2, ...).
pub fn node_names(backends: usize, frontends: usize) -> Vec<String> {
    let mut names: Vec<String> = (1..=backends)
        .map(|i| {
            if i == 1 {
                "be".to_owned()
            } else {
                format!("be{i}")
            }
        })
        .collect();
    names.extend((1..=frontends).map(|i| format!("fe{i}")));
    names
}

pub fn full(short: &str) -> String {
    format!("acme-{short}")
}

pub fn pod(revision: &str, ready: bool) -> PodObservation {
    let mut pod = ready_pod(revision, revision);
    if !ready {
        pod.conditions = vec![PodCondition {
            type_: "Ready".into(),
            status: "False".into(),
        }];
    }
    pod
}

pub fn node(short: &str, state: Pod) -> NodeObservation {
    let pod = match state {
        Pod::Missing | Pod::Down => None,
        Pod::Old | Pod::DownStillRunning => Some(pod(OLD, true)),
        Pod::New => Some(pod(NEW, true)),
        Pod::OldNotReady => Some(pod(OLD, false)),
        Pod::NewNotReady => Some(pod(NEW, false)),
        Pod::Terminating => Some(PodObservation {
            terminating: true,
            ..pod(OLD, true)
        }),
        Pod::Ended => Some(PodObservation {
            phase: PodPhase::Failed,
            ..pod(OLD, false)
        }),
    };
    NodeObservation {
        name: full(short),
        kind: kind_of(short),
        up: !matches!(state, Pod::Down | Pod::DownStillRunning),
        desired: Ok(DesiredState {
            revision: NEW.into(),
            version: NEW.into(),
            spec: express_api::EffectiveNodeSpec {
                express_version: NEW.into(),
                config_changeset: None,
                image_repository: "express".into(),
                pod_template: serde_json::Value::Object(Default::default()),
            },
        }),
        dependencies: None,
        pod,
        replacing: false,
        change: None,
        invalid_revisions: Vec::new(),
        history: Vec::new(),
        rollout_id: None,
        recorded_desired: None,
        bounce_request: None,
        bounce: None,
    }
}

/// Default settings, with the settle window off: table rows stand for a desired state that has
/// been complete for a long time (the settle rules have their own tests).
pub fn settled_settings() -> ClusterSettings {
    ClusterSettings {
        settle_seconds: 0,
        ..ClusterSettings::default()
    }
}

pub fn cluster(rows: &[(&str, Pod)]) -> ClusterSnapshot {
    ClusterSnapshot {
        namespace: "tenants".into(),
        cluster_name: "acme".into(),
        settings: settled_settings(),
        nodes: rows
            .iter()
            .map(|&(short, state)| node(short, state))
            .collect(),
        pause: None,
        spec_errors: Vec::new(),
        unreadable: Vec::new(),
        control: Default::default(),
        express_cluster: None,
    }
}

pub fn prerequisite(short: &str) -> Prerequisite {
    Prerequisite {
        express_node: full(short),
        kind: Some(kind_of(short)),
        ..Prerequisite::default()
    }
}

pub fn node_mut<'a>(snapshot: &'a mut ClusterSnapshot, short: &str) -> &'a mut NodeObservation {
    let name = full(short);
    snapshot
        .nodes
        .iter_mut()
        .find(|n| n.name == name)
        .unwrap_or_else(|| panic!("no node {name}"))
}

pub fn set_upgrade_prerequisites(snapshot: &mut ClusterSnapshot, short: &str, on: &[Prerequisite]) {
    node_mut(snapshot, short)
        .dependencies
        .get_or_insert_with(DeploymentDependencies::default)
        .upgrade_prerequisites = Some(on.to_vec());
}

pub fn set_provisioning_prerequisites(
    snapshot: &mut ClusterSnapshot,
    short: &str,
    on: &[Prerequisite],
) {
    node_mut(snapshot, short)
        .dependencies
        .get_or_insert_with(DeploymentDependencies::default)
        .provisioning_prerequisites = Some(on.to_vec());
}

/// What the operator's status report does with a plan's settle marks: each node keeps its mark.
pub fn record_marks(snapshot: &mut ClusterSnapshot, plan: &Plan) {
    for (node, mark) in snapshot.nodes.iter_mut().zip(&plan.settle.marks) {
        node.recorded_desired = Some(mark.clone());
    }
}

/// What the operator's status report does with a plan's bounces: each node keeps its record.
pub fn record_bounces(snapshot: &mut ClusterSnapshot, plan: &Plan) {
    for (node, node_plan) in snapshot.nodes.iter_mut().zip(&plan.nodes) {
        if let Some(bounce) = &node_plan.bounce {
            node.bounce = Some(Box::new(BounceRecord {
                request_id: bounce.request_id.clone(),
                phase: bounce.phase,
                message: Some(bounce.message.clone()),
                force: bounce.force,
                timeout_seconds: bounce.timeout_seconds,
                pod_uid: bounce.pod_uid.clone(),
                revision: bounce.revision.clone(),
                started_at_ms: Some(bounce.started_at_ms),
                phase_since_ms: Some(bounce.phase_since_ms),
            }));
        }
    }
}

/// A change the driver saw the planner start, in the words of `kubectl express plan`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Started {
    pub node: String,
    pub action: &'static str,
}

/// Plays operator and kubelet: applies each planned operation as a real pod operation would
/// land (deletes leave a terminating pod, creates leave a starting pod), and only then lets
/// time pass (terminating pods vanish, starting pods become Ready).
pub struct Driver {
    pub snapshot: ClusterSnapshot,
    pub started: Vec<Started>,
    pub plans: usize,
    /// The instant every plan is made at (milliseconds since the epoch).
    pub now_ms: i64,
    /// Pod deletions sent for bounces, by node name.
    pub bounce_deletes: Vec<String>,
    /// Uids given to created pods.
    next_uid: u64,
}

impl Driver {
    pub fn new(snapshot: ClusterSnapshot) -> Self {
        Driver {
            snapshot,
            started: Vec::new(),
            plans: 0,
            now_ms: 0,
            bounce_deletes: Vec::new(),
            next_uid: 0,
        }
    }

    fn new_uid(&mut self) -> Option<String> {
        self.next_uid += 1;
        Some(format!("uid-new-{}", self.next_uid))
    }

    /// Plans once and applies the actions. Returns how many actions there were.
    pub fn act(&mut self) -> usize {
        let current = plan(&self.snapshot, self.now_ms);
        self.plans += 1;
        for action in &current.actions {
            let uid = self.new_uid();
            let node = &mut self.snapshot.nodes[action.node.0];
            match action.operation {
                Operation::DeleteForBounce => {
                    let pod = node.pod.as_mut().expect("bounce deletes a missing pod");
                    assert!(!pod.terminating, "bounce deletes a terminating pod");
                    pod.shutdown_protection = Some("disabled".into());
                    pod.terminating = true;
                    self.bounce_deletes.push(node.name.clone());
                    continue;
                }
                Operation::CreateForBounce => {
                    assert!(node.pod.is_none(), "bounce creates over a pod");
                    let revision = action
                        .pod_revision(node)
                        .expect("bounce without revision")
                        .to_owned();
                    node.pod = Some(PodObservation {
                        uid,
                        ..pod(&revision, false)
                    });
                    continue;
                }
                _ => {}
            }
            let desired = node
                .desired
                .clone()
                .expect("planner acted on an invalid node");
            let label = match action.operation {
                Operation::CreatePod => Some("Provision"),
                Operation::ReplacePod => Some("Upgrade"),
                Operation::RemovePod => Some("Delete"),
                // The provisioning that follows is what starts the node again.
                Operation::DeleteEndedPod
                | Operation::ResumeReplacement
                | Operation::FinishReplacement => None,
                Operation::DeleteForBounce | Operation::CreateForBounce => continue,
            };
            if let Some(label) = label {
                self.started.push(Started {
                    node: node.name.clone(),
                    action: label,
                });
            }
            if let Some(record) = &action.record {
                node.change = Some(record.clone());
            }
            match action.operation {
                Operation::CreatePod | Operation::FinishReplacement => {
                    assert!(
                        node.pod.is_none(),
                        "create over an existing pod: {}",
                        node.name
                    );
                    let revision = action.source.kept_revision().unwrap_or(&desired.revision);
                    node.pod = Some(PodObservation {
                        uid,
                        ..pod(revision, false)
                    });
                    node.replacing = false;
                }
                Operation::ReplacePod => {
                    node.replacing = true;
                    terminate(node);
                }
                Operation::ResumeReplacement | Operation::RemovePod | Operation::DeleteEndedPod => {
                    terminate(node)
                }
                Operation::DeleteForBounce | Operation::CreateForBounce => {}
            }
        }
        record_bounces(&mut self.snapshot, &current);
        current.actions.len()
    }

    /// Lets time pass for the nodes `advance` selects: a terminating pod disappears, a
    /// starting pod becomes Ready. Returns whether anything changed.
    pub fn tick(&mut self, mut advance: impl FnMut(usize) -> bool) -> bool {
        let mut changed = false;
        for (i, node) in self.snapshot.nodes.iter_mut().enumerate() {
            let Some(p) = &mut node.pod else { continue };
            if !advance(i) {
                continue;
            }
            if p.terminating {
                node.pod = None;
                changed = true;
            } else if p.owned && !p.is_ready() && !p.has_ended() {
                p.conditions = vec![PodCondition {
                    type_: "Ready".into(),
                    status: "True".into(),
                }];
                p.phase = PodPhase::Running;
                // What the operator's status report does when the new pod is Ready.
                if let Some(change) = &mut node.change
                    && p.revision.as_deref() == Some(change.to.as_str())
                {
                    change.state = express_api::ChangeState::Succeeded;
                }
                changed = true;
            }
        }
        changed
    }

    /// Runs until nothing more happens; returns false if it did not settle within the bound.
    pub fn run_to_end(&mut self) -> bool {
        let bound = 8 * self.snapshot.nodes.len() + 32;
        for _ in 0..bound {
            let acted = self.act();
            let ticked = self.tick(|_| true);
            if acted == 0 && !ticked {
                return true;
            }
        }
        false
    }

    pub fn order(&self) -> Vec<String> {
        self.started
            .iter()
            .map(|s| s.node.trim_start_matches("acme-").to_owned())
            .collect()
    }

    pub fn all_converged(&self) -> bool {
        plan(&self.snapshot, self.now_ms)
            .nodes
            .iter()
            .all(|p| matches!(p.state, NodeState::UpToDate | NodeState::Down))
    }
}

fn terminate(node: &mut NodeObservation) {
    if let Some(p) = &mut node.pod {
        p.terminating = true;
    }
}

/// The order in which nodes are started, driving the cluster to the end.
pub fn rollout_order(snapshot: ClusterSnapshot) -> Vec<String> {
    let mut driver = Driver::new(snapshot);
    assert!(driver.run_to_end(), "rollout did not settle");
    driver.order()
}
