//! A tenant's occurrences: its rollout failed, rolled back, stalled or done.

use express_api::{ExpressCluster, RolloutState, conditions};
use kube::ResourceExt;

use super::base::{Base, condition, fact, instant, key, seconds, subscribed};
use crate::config::ANNOTATION_NOTIFY;
use crate::occurrence::{Occurrence, Subject, Trigger};

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
