//! Snapshots for the status table tests: a cluster `acme` whose nodes want revision `r2`.

use express_api::NodeKind;
use express_planner::{
    ClusterSettings, ClusterSnapshot, DesiredState, NodeObservation, PodCondition, PodObservation,
    PodPhase,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, Time};

/// Status and reason of the condition `type_`; panics when it is missing.
pub fn condition<'a>(conditions: &'a [Condition], type_: &str) -> (&'a str, &'a str) {
    let c = conditions
        .iter()
        .find(|c| c.type_ == type_)
        .unwrap_or_else(|| panic!("no condition {type_}"));
    (c.status.as_str(), c.reason.as_str())
}

pub const NOW_MS: i64 = 1_700_000_000_000;

pub fn now() -> Time {
    Time(k8s_openapi::jiff::Timestamp::from_millisecond(NOW_MS).unwrap_or_default())
}

pub fn pod(revision: &str, ready: bool) -> PodObservation {
    PodObservation {
        owned: true,
        uid: None,
        app_state: None,
        shutdown_protection: None,
        revision: Some(revision.into()),
        version: Some(format!("v-{revision}")),
        phase: PodPhase::Running,
        conditions: vec![PodCondition {
            type_: "Ready".into(),
            status: if ready { "True" } else { "False" }.into(),
        }],
        terminating: false,
        restarts: 0,
        created_at_ms: Some(NOW_MS - 1_000),
    }
}

/// `be` is the Backend, anything else a Frontend; every name gets the `acme-` prefix.
pub fn node(short: &str, pod: Option<PodObservation>) -> NodeObservation {
    NodeObservation {
        name: format!("acme-{short}"),
        kind: if short == "be" {
            NodeKind::Backend
        } else {
            NodeKind::Frontend
        },
        up: true,
        desired: Ok(DesiredState {
            revision: "r2".into(),
            version: "v-r2".into(),
            spec: express_api::EffectiveNodeSpec {
                express_version: "v-r2".into(),
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
        history: vec!["r1".into(), "r2".into()],
        rollout_id: None,
        recorded_desired: None,
        bounce_request: None,
        bounce: None,
    }
}

/// A cluster with the settle window off (its rows stand for a settled desired state).
pub fn cluster(nodes: Vec<NodeObservation>) -> ClusterSnapshot {
    ClusterSnapshot {
        namespace: "tenant".into(),
        cluster_name: "acme".into(),
        settings: ClusterSettings {
            settle_seconds: 0,
            ..ClusterSettings::default()
        },
        nodes,
        pause: None,
        spec_errors: Vec::new(),
        unreadable: Vec::new(),
        control: Default::default(),
        express_cluster: None,
    }
}
