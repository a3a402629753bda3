#![allow(clippy::unwrap_used)]
use super::compare::*;
use super::sources::*;
use std::collections::BTreeMap;

use express_api::effective::REVISION_SCHEME;
use express_api::{NodeStatus, Objects};
use serde_json::{Value, json};
use std::sync::Arc;

/// A tenant as the chart renders it: the ExpressCluster with version defaults, and nodes
/// with optional labels, `up` and a version of their own.
fn tenant(version: &str, nodes: &[(&str, Value)]) -> Objects {
    let cluster: express_api::ExpressCluster = serde_json::from_value(json!({
        "apiVersion": "express.dev/v1alpha1", "kind": "ExpressCluster",
        "metadata": {"name": "acme", "namespace": "tenant"},
        "spec": {"defaults": {"backend": {"expressVersion": version, "configChangeset": "cs1"},
                              "frontend": {"expressVersion": version, "configChangeset": "cs1"}}}
    }))
    .unwrap();
    let (mut backends, mut frontends) = (Vec::new(), Vec::new());
    for (name, extra) in nodes {
        let mut object = json!({
            "apiVersion": "express.dev/v1alpha1",
            "metadata": {"name": name, "namespace": "tenant", "generation": 1},
            "spec": {"clusterConfig": {"clusterName": "acme"}},
        });
        if let Some(labels) = extra.get("labels") {
            object["metadata"]["labels"] = labels.clone();
        }
        if let Some(up) = extra.get("up") {
            object["spec"]["up"] = up.clone();
        }
        if name.ends_with("-be") {
            object["kind"] = json!("Backend");
            backends.push(Arc::new(serde_json::from_value(object).unwrap()));
        } else {
            object["kind"] = json!("Frontend");
            frontends.push(Arc::new(serde_json::from_value(object).unwrap()));
        }
    }
    Objects {
        clusters: vec![Arc::new(cluster)],
        backends,
        frontends,
        ..Objects::default()
    }
}

fn sides(objects: &Objects) -> Vec<NodeSide> {
    node_sides(objects, None, &|_, _, n| format!("test {n}"))
}

/// Live facts as the operator leaves them: status desired = what it computes, the pod
/// running it, generation observed.
fn settled(live: &[NodeSide]) -> BTreeMap<(String, String), LiveFacts> {
    live.iter()
        .map(|n| {
            let desired = n.desired();
            (
                (n.namespace.clone(), n.name.clone()),
                LiveFacts {
                    status: Some(NodeStatus {
                        observed_generation: Some(1),
                        desired_revision: desired.clone(),
                        ..NodeStatus::default()
                    }),
                    generation: Some(1),
                    running: desired,
                    kept: BTreeMap::new(),
                },
            )
        })
        .collect()
}

fn row<'a>(rows: &'a [Row], name: &str) -> &'a Row {
    rows.iter().find(|r| r.name == name).unwrap()
}

fn kinds(row: &Row) -> Vec<&'static str> {
    row.discrepancies.iter().map(|d| d.kind).collect()
}

#[test]
fn each_verdict() {
    let live = sides(&tenant(
        "v1",
        &[
            ("acme-be", json!({})),
            ("acme-fe1", json!({})),
            ("acme-fe2", json!({})),
            ("acme-fe9", json!({})),
        ],
    ));
    let facts = settled(&live);
    // fe1 gets its own version (restart), fe2 is set down, fe3 is new, fe9 is gone.
    let local_objects = {
        let mut t = tenant(
            "v1",
            &[
                ("acme-be", json!({})),
                ("acme-fe1", json!({})),
                ("acme-fe2", json!({"up": false})),
                ("acme-fe3", json!({})),
            ],
        );
        Arc::make_mut(&mut Arc::make_mut(&mut t.frontends[0]).spec).express_version =
            Some("v2".into());
        t
    };
    let local = sides(&local_objects);
    let rows = compare(&local, Some((&live, &facts)), false);
    let verdict = |name| row(&rows, name).verdict;
    assert_eq!(verdict("acme-be"), Some(Verdict::Unchanged));
    assert_eq!(verdict("acme-fe1"), Some(Verdict::WillRestart));
    assert_eq!(verdict("acme-fe2"), Some(Verdict::Down));
    assert_eq!(verdict("acme-fe3"), Some(Verdict::New));
    assert_eq!(verdict("acme-fe9"), Some(Verdict::Removed));
    assert!(rows.iter().all(|r| r.discrepancies.is_empty()), "{rows:?}");
    assert_eq!(row(&rows, "acme-be").source, Some("computed"));

    // Offline: revisions and sources, no verdicts.
    let offline = compare(&local, None, true);
    assert!(offline.iter().all(|r| r.verdict.is_none()));
    assert_eq!(offline.len(), 4);
    let spec = row(&offline, "acme-fe1").spec.clone().unwrap();
    assert_eq!(spec["expressVersion"], "v2");
}

#[test]
fn a_label_unchanged_while_the_spec_changed_is_a_stale_override() {
    let pinned = json!({"labels": {"express.dev/deployment-revision": "pin-1"}});
    let live = sides(&tenant("v1", &[("acme-fe1", pinned.clone())]));
    let facts = settled(&live);
    let local = sides(&tenant("v2", &[("acme-fe1", pinned)]));
    let rows = compare(&local, Some((&live, &facts)), false);
    let fe1 = row(&rows, "acme-fe1");
    assert_eq!(
        (fe1.source, fe1.verdict),
        (Some("label"), Some(Verdict::Unchanged))
    );
    assert_eq!(kinds(fe1), ["StaleOverride"]);
    assert!(fe1.discrepancies[0].message.contains("will NOT be updated"));
}

#[test]
fn a_label_changed_while_the_spec_did_not_is_an_empty_restart() {
    let live = sides(&tenant(
        "v1",
        &[(
            "acme-fe1",
            json!({"labels": {"express.dev/deployment-revision": "pin-1"}}),
        )],
    ));
    let facts = settled(&live);
    for local_label in [
        json!({"labels": {"express.dev/deployment-revision": "pin-2"}}),
        json!({}),
    ] {
        let local = sides(&tenant("v1", &[("acme-fe1", local_label)]));
        let rows = compare(&local, Some((&live, &facts)), false);
        let fe1 = row(&rows, "acme-fe1");
        assert_eq!(fe1.verdict, Some(Verdict::WillRestart));
        assert_eq!(kinds(fe1), ["EmptyRestart"]);
    }
    // The same label on both sides and the same spec: nothing to say.
    let same = sides(&tenant(
        "v1",
        &[(
            "acme-fe1",
            json!({"labels": {"express.dev/deployment-revision": "pin-1"}}),
        )],
    ));
    let rows = compare(&same, Some((&live, &facts)), false);
    assert!(row(&rows, "acme-fe1").discrepancies.is_empty());
}

#[test]
fn a_desired_revision_the_plugin_does_not_compute_is_algorithm_skew() {
    let live = sides(&tenant("v1", &[("acme-fe1", json!({}))]));
    let mut facts = settled(&live);
    let fe1 = facts.values_mut().next().unwrap();
    fe1.status.as_mut().unwrap().desired_revision = Some("0123456789".into());
    fe1.running = Some("0123456789".into());
    let rows = compare(&live, Some((&live, &facts)), false);
    let fe1 = row(&rows, "acme-fe1");
    assert_eq!(kinds(fe1), ["AlgorithmSkew"]);
    assert!(fe1.discrepancies[0].message.contains(REVISION_SCHEME));
    // Not yet observed by the operator: no verdict on its status.
    let mut unobserved = facts.clone();
    unobserved.values_mut().next().unwrap().generation = Some(2);
    let rows = compare(&live, Some((&live, &unobserved)), false);
    assert!(row(&rows, "acme-fe1").discrepancies.is_empty());
}

#[test]
fn a_live_node_not_running_what_it_wants_is_an_unfinished_rollout() {
    let live = sides(&tenant("v1", &[("acme-fe1", json!({}))]));
    let mut facts = settled(&live);
    facts.values_mut().next().unwrap().running = Some("older".into());
    let rows = compare(&live, Some((&live, &facts)), false);
    let fe1 = row(&rows, "acme-fe1");
    assert_eq!(fe1.verdict, Some(Verdict::WillRestart));
    assert_eq!(kinds(fe1), ["UnfinishedRollout"]);
    // Live only (no local objects): the same.
    let rows = compare(&[], Some((&live, &facts)), false);
    assert_eq!(kinds(row(&rows, "acme-fe1")), ["UnfinishedRollout"]);
}
