//! Least privilege, measured: the operator runs the end-to-end scenarios on kubesim (leader
//! election, provision, upgrade with history pruning, a failed rollout rolled back, abort and
//! retry, pauses in every scope, a bounce), every request it sends is recorded under its own
//! User-Agent, and the chart's RBAC rules (`charts/express-operator/rbac/*.yaml`, which the
//! chart's templates include as they are) must grant exactly that: nothing used missing, nothing
//! granted unused unless a `# unused: <verb> <resource>: why` comment says why, no wildcards.

#![allow(clippy::expect_used, clippy::unwrap_used)] // tests fail loudly on unexpected values

mod support;

use std::collections::BTreeSet;
use std::time::{Duration, Instant};

use express_api::Frontend;
use kube::api::{Api, Patch, PatchParams, PostParams};
use serde_json::json;
use support::*;

const AGENT: &str = "express-operator-rbac-test";

/// `(verb, "resource.group/subresource")` as kubesim counts them.
type Access = (String, String);

fn rules_dir() -> std::path::PathBuf {
    std::path::PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../charts/express-operator/rbac")
}

/// Every (verb, resource) a rules file grants, and the grants its comments say are unused.
fn granted(file: &str) -> (BTreeSet<Access>, BTreeSet<Access>) {
    let text = std::fs::read_to_string(rules_dir().join(file)).unwrap();
    let rules: Vec<k8s_openapi::api::rbac::v1::PolicyRule> = serde_yaml::from_str(&text).unwrap();
    let mut grants = BTreeSet::new();
    for rule in rules {
        assert!(
            rule.resource_names.is_none() || file.contains("operator-namespace"),
            "{rule:?}"
        );
        for group in rule.api_groups.unwrap_or_default() {
            for resource in rule.resources.clone().unwrap_or_default() {
                for verb in &rule.verbs {
                    assert!(
                        group != "*" && resource != "*" && verb != "*",
                        "no wildcards: {file}"
                    );
                    let (plural, sub) = match resource.split_once('/') {
                        Some((plural, sub)) => (plural, Some(sub)),
                        None => (resource.as_str(), None),
                    };
                    let mut name = if group.is_empty() {
                        plural.to_owned()
                    } else {
                        format!("{plural}.{group}")
                    };
                    if let Some(sub) = sub {
                        name = format!("{name}/{sub}");
                    }
                    grants.insert((verb.clone(), name));
                }
            }
        }
    }
    let unused = text
        .lines()
        .filter_map(|l| l.trim().strip_prefix("# unused: "))
        .filter_map(|l| {
            let (access, why) = l.split_once(": ")?;
            assert!(
                !why.trim().is_empty(),
                "an unused grant needs a reason: {l}"
            );
            let (verb, resource) = access.split_once(' ')?;
            Some((verb.to_owned(), resource.to_owned()))
        })
        .collect();
    (grants, unused)
}

async fn wait_until(what: &str, mut done: impl AsyncFnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(30);
    while !done().await {
        assert!(Instant::now() < deadline, "never {what}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

#[tokio::test]
async fn the_chart_grants_exactly_what_the_operator_uses() {
    let env = env_without_operator().await;
    let client = env.sim.client_with_agent(AGENT).unwrap();
    let (leader, _lease) =
        express_operator::leader::elect(client.clone(), "express-system", "rbac")
            .await
            .unwrap();
    tokio::spawn(express_operator::controller::run(
        client,
        express_operator::controller::Settings::cluster_wide("rbac", 2),
        express_operator::metrics::Metrics::new(),
        leader,
    ));

    tenant(
        &env,
        json!({"rollout": {"revisionHistoryLimit": 1}}),
        &[("fe1", json!({})), ("fe2", json!({}))],
    )
    .await;
    settle(&env).await;
    change(&env, v("v2")).await;
    settle(&env).await;

    // Pauses in every scope.
    control(&env, NS, "express-control", "true").await;
    tokio::time::sleep(Duration::from_millis(300)).await;
    control(&env, NS, "express-control", "false").await;
    tokio::time::sleep(Duration::from_millis(300)).await;
    control(&env, "express-system", "express-operator-control", "true").await;
    tokio::time::sleep(Duration::from_millis(300)).await;
    control(&env, "express-system", "express-operator-control", "false").await;
    tokio::time::sleep(Duration::from_millis(300)).await;
    change(&env, json!({"spec": {"paused": true}})).await;
    change(&env, json!({"spec": {"paused": false}})).await;
    settle(&env).await;

    // A bounce.
    Api::<Frontend>::namespaced(env.client.clone(), NS)
        .patch(
            "acme-fe1",
            &PatchParams::default(),
            &Patch::Merge(json!({"metadata": {"annotations": {"express.dev/bounce": "b1"}}})),
        )
        .await
        .unwrap();
    wait_until("bounced", async || {
        frontend(&env, "fe1")
            .await
            .status
            .and_then(|s| s.bounce)
            .and_then(|b| b.phase)
            == Some(express_api::BouncePhase::Succeeded)
    })
    .await;

    // A failed rollout, rolled back; then an abort and a retry.
    let template = json!({"metadata": {"annotations": {"kubesim.dev/behavior": "crash-loop"}}});
    change(&env, json!({"spec": {"defaults": {"frontend": {"expressVersion": "v3", "podTemplate": template}, "backend": {"expressVersion": "v3", "podTemplate": template}}}})).await;
    wait_until("failed", async || {
        let c = Api::<express_api::ExpressCluster>::namespaced(env.client.clone(), NS)
            .get("acme")
            .await
            .unwrap();
        c.status
            .and_then(|s| s.rollout)
            .and_then(|r| r.failed_node)
            .is_some()
    })
    .await;
    let cluster = Api::<express_api::ExpressCluster>::namespaced(env.client.clone(), NS);
    cluster
        .patch("acme", &PatchParams::default(), &Patch::Merge(json!({"metadata": {"annotations": {"express.dev/abort": "a1", "express.dev/retry": "r1"}}})))
        .await
        .unwrap();
    tokio::time::sleep(Duration::from_millis(1500)).await;
    let _ = PostParams::default();

    let counters = env.sim.counters();
    let used: BTreeSet<Access> = counters
        .by_agent
        .get(AGENT)
        .expect("the operator's requests")
        .keys()
        .filter_map(|k| k.split_once(' '))
        .map(|(verb, resource)| (verb.to_owned(), resource.to_owned()))
        .collect();
    let (mut grants, mut unused) = granted("watched-namespaces.yaml");
    let (own, own_unused) = granted("operator-namespace.yaml");
    grants.extend(own);
    unused.extend(own_unused);

    let missing: Vec<&Access> = used.difference(&grants).collect();
    assert!(
        missing.is_empty(),
        "used but not granted: {missing:?}\nused: {used:#?}"
    );
    let idle: Vec<&Access> = grants
        .difference(&used)
        .filter(|g| !unused.contains(*g))
        .collect();
    assert!(
        idle.is_empty(),
        "granted but unused (and no `# unused:` reason): {idle:?}\nused: {used:#?}"
    );
    let stale: Vec<&Access> = unused.difference(&grants).collect();
    assert!(
        stale.is_empty(),
        "`# unused:` comments for grants that do not exist: {stale:?}"
    );
}
