//! More DESIGN section 3 scenarios end to end, plus pause scopes and leader hand-over.
#![allow(clippy::expect_used, clippy::unwrap_used)] // tests fail loudly on unexpected values

mod support;

use std::time::{Duration, Instant};

use express_api::{Backend, ExpressCluster, Frontend, conditions};
use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, DeleteParams, ListParams, Patch, PatchParams};
use serde_json::json;
use support::*;

#[tokio::test]
async fn deleted_pods_are_recreated_in_order() {
    let env = env().await;
    tenant(
        &env,
        json!({}),
        &[("fe1", json!({})), ("fe2", json!({})), ("fe3", json!({}))],
    )
    .await;
    settle(&env).await;
    let pods = Api::<Pod>::namespaced(env.client.clone(), NS);
    let from = env.created.lock().unwrap().len();
    pods.delete("acme-be", &DeleteParams::default())
        .await
        .expect("delete");
    // A pod deletion changes no generation: until the operator acts, status still says
    // settled. Once the new pod is seen, settle cannot pass early: the operator records the
    // node Provisioning before it creates the pod.
    wait_until("acme-be recreated", async || {
        !since(&env.created, from).is_empty()
    })
    .await;
    settle(&env).await;
    assert_eq!(
        since(&env.created, from),
        ["be"],
        "backend pod deleted: only be comes back"
    );

    let from = env.created.lock().unwrap().len();
    pods.delete("acme-fe2", &DeleteParams::default())
        .await
        .expect("delete");
    pods.delete("acme-fe3", &DeleteParams::default())
        .await
        .expect("delete");
    wait_until("acme-fe2 and acme-fe3 recreated", async || {
        since(&env.created, from).len() >= 2
    })
    .await;
    settle(&env).await;
    assert_eq!(since(&env.created, from), ["fe2", "fe3"]);
}

#[tokio::test]
async fn node_set_down_and_brought_back() {
    let env = env().await;
    tenant(
        &env,
        json!({}),
        &[("fe1", json!({})), ("fe2", json!({})), ("fe3", json!({}))],
    )
    .await;
    settle(&env).await;
    let frontends = Api::<Frontend>::namespaced(env.client.clone(), NS);
    let deleted_from = env.deleted.lock().unwrap().len();
    frontends
        .patch(
            "acme-fe2",
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"up": false}})),
        )
        .await
        .expect("down");
    // fe2 reads Down while its pod still terminates: wait for the deletion itself.
    wait_until("acme-fe2's pod deleted", async || {
        !since(&env.deleted, deleted_from).is_empty()
    })
    .await;
    settle(&env).await;
    assert_eq!(since(&env.deleted, deleted_from), ["fe2"]);
    assert_eq!(
        frontend(&env, "fe2").await.status.and_then(|s| s.phase),
        Some(express_api::NodePhase::Down)
    );

    // While fe2 is down, an upgrade skips it: fe1, be, fe3.
    let from = env.created.lock().unwrap().len();
    change_observed(&env, v("v2")).await;
    settle(&env).await;
    assert_eq!(since(&env.created, from), ["fe1", "be", "fe3"]);

    let from = env.created.lock().unwrap().len();
    frontends
        .patch(
            "acme-fe2",
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"up": true}})),
        )
        .await
        .expect("up");
    // settle waits for fe2's status on its new generation, which cannot say Down.
    settle(&env).await;
    assert_eq!(since(&env.created, from), ["fe2"]);
}

#[tokio::test]
async fn nodes_added_and_removed_mid_rollout() {
    let env = env().await;
    tenant(
        &env,
        json!({}),
        &[
            ("fe1", json!({})),
            ("fe2", json!({})),
            ("fe3", json!({})),
            ("fe4", json!({})),
        ],
    )
    .await;
    settle(&env).await;
    let from = env.created.lock().unwrap().len();
    change_observed(&env, v("v2")).await;
    wait_until("the rollout's first pod created", async || {
        !since(&env.created, from).is_empty()
    })
    .await;
    // Mid-rollout: fe5 joins, fe3 leaves.
    add_frontend(&env, "fe5", json!({})).await;
    Api::<Frontend>::namespaced(env.client.clone(), NS)
        .delete("acme-fe3", &DeleteParams::default())
        .await
        .expect("delete node");
    // settle waits for fe5's first status, so it cannot pass before the operator saw fe5.
    settle(&env).await;
    let order = since(&env.created, from);
    let without_fe3: Vec<&String> = order.iter().filter(|n| *n != "fe3").collect();
    assert_eq!(without_fe3, ["fe1", "fe2", "be", "fe4", "fe5"], "{order:?}");
    assert!(
        Api::<Pod>::namespaced(env.client.clone(), NS)
            .get_opt("acme-fe3")
            .await
            .expect("get")
            .is_none(),
        "the removed node's pod is collected"
    );
    let counts = Api::<ExpressCluster>::namespaced(env.client.clone(), NS)
        .get("acme")
        .await
        .unwrap()
        .status
        .unwrap()
        .nodes
        .unwrap();
    assert_eq!((counts.total, counts.up_to_date), (5, 5));
}

#[tokio::test]
async fn per_node_override_and_explicit_prerequisites() {
    let env = env().await;
    // Shaped like the tenant chart's explicit output, with fe3 as a canary that fe1 waits for.
    let prerequisite = |node: &str, kind: &str| json!({"expressNode": node, "kind": kind, "podConditionType": "Ready", "conditionStatus": "True"});
    tenant(&env, json!({}), &[
        ("fe1", json!({"deploymentDependencies": {"provisioningPrerequisites": [prerequisite("acme-be", "Backend")], "upgradePrerequisites": [prerequisite("acme-fe3", "Frontend")]}})),
        ("fe2", json!({"deploymentDependencies": {"provisioningPrerequisites": [prerequisite("acme-fe1", "Frontend")], "upgradePrerequisites": [prerequisite("acme-fe1", "Frontend")]}})),
        ("fe3", json!({"deploymentDependencies": {"provisioningPrerequisites": [prerequisite("acme-fe2", "Frontend")], "upgradePrerequisites": []}})),
    ]).await;
    settle(&env).await;
    assert_eq!(since(&env.created, 0), ["be", "fe1", "fe2", "fe3"]);

    let from = env.created.lock().unwrap().len();
    change_observed(&env, v("v2")).await;
    settle(&env).await;
    assert_eq!(since(&env.created, from), ["fe3", "fe1", "fe2", "be"]);

    // A per-node version changes only that node.
    let from = env.created.lock().unwrap().len();
    Api::<Frontend>::namespaced(env.client.clone(), NS)
        .patch(
            "acme-fe2",
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"expressVersion": "v2-hotfix"}})),
        )
        .await
        .expect("override");
    // settle waits for fe2's status on its new generation, which cannot say Ready before
    // the new pod is.
    settle(&env).await;
    assert_eq!(since(&env.created, from), ["fe2"]);
    assert_eq!(
        frontend(&env, "fe2")
            .await
            .status
            .unwrap()
            .running_version
            .as_deref(),
        Some("v2-hotfix")
    );
}

#[tokio::test]
async fn disabled_ordering_is_still_bounded_by_max_concurrent() {
    let env = env().await;
    tenant(
        &env,
        json!({"dependencies": {"disabled": true}, "rollout": {"maxConcurrent": 2}}),
        &[
            ("fe1", json!({})),
            ("fe2", json!({})),
            ("fe3", json!({})),
            ("fe4", json!({})),
        ],
    )
    .await;
    // Sample the number of pods not Ready while everything provisions at most 2 at a time.
    let pods = Api::<Pod>::namespaced(env.client.clone(), NS);
    let mut most = 0;
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let list = pods.list(&ListParams::default()).await.expect("list");
        let starting = list
            .items
            .iter()
            .filter(|p| {
                !p.status
                    .as_ref()
                    .and_then(|s| s.conditions.as_ref())
                    .into_iter()
                    .flatten()
                    .any(|c| c.type_ == "Ready" && c.status == "True")
            })
            .count();
        most = most.max(starting);
        let ready = list.items.len() - starting;
        if ready == 5 {
            break;
        }
        assert!(Instant::now() < deadline, "did not converge");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert!(
        most <= 2,
        "at most maxConcurrent=2 nodes in flight, saw {most}"
    );
    assert!(most == 2, "with ordering disabled two nodes start together");
}

#[tokio::test]
async fn pause_by_namespace_and_operator_configmaps() {
    let env = env().await;
    tenant(&env, json!({}), &[("fe1", json!({}))]).await;
    settle(&env).await;
    for (namespace, name, scope) in [
        (NS, "express-control", "namespace"),
        (
            "express-system",
            "express-operator-control",
            "operator-wide",
        ),
    ] {
        control(&env, namespace, name, "true").await;
        wait_until(&format!("Paused ({scope}) reported"), async || {
            cluster(&env).await.status.is_some_and(|s| {
                s.conditions
                    .iter()
                    .any(|c| c.type_ == conditions::PAUSED && c.status == "True")
            })
        })
        .await;
        // Counted from here: an operator ignoring the pause acts before it reports.
        let writes = env.sim.counters().writes_to("pods");
        change_observed(&env, v(&format!("v-{scope}"))).await;
        // A window, not a wait: a pod write now would come from a later reconcile.
        tokio::time::sleep(Duration::from_millis(500)).await;
        assert_eq!(
            env.sim.counters().writes_to("pods"),
            writes,
            "paused ({scope}): no pod writes"
        );
        let status = cluster(&env).await.status.unwrap();
        let message = status.message.unwrap_or_default();
        assert!(
            message.contains(scope) && message.contains("change freeze"),
            "{message}"
        );
        control(&env, namespace, name, "false").await;
        // Status says Paused until the operator sees the resume, so settle cannot pass early.
        settle(&env).await;
    }
}

#[tokio::test]
async fn unknown_prerequisite_waits_and_says_so() {
    let env = env().await;
    tenant(&env, json!({}), &[("fe1", json!({"deploymentDependencies": {"provisioningPrerequisites": [{"expressNode": "acme-be9", "kind": "Backend"}]}}))]).await;
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let status = frontend(&env, "fe1").await.status;
        if let Some(status) = status.filter(|s| s.phase == Some(express_api::NodePhase::Waiting)) {
            assert_eq!(status.waiting_for[0].node, "acme-be9");
            assert!(
                status.waiting_for[0].reason.contains("no such node"),
                "{status:?}"
            );
            break;
        }
        assert!(
            Instant::now() < deadline,
            "fe1 never said what it waits for"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert!(
        Api::<Pod>::namespaced(env.client.clone(), NS)
            .get_opt("acme-fe1")
            .await
            .unwrap()
            .is_none()
    );
}

#[tokio::test]
async fn only_the_leader_acts_and_the_other_takes_over() {
    let env = env_without_operator().await;
    let mut contenders = Contenders::start(&env).await;
    let (alpha_leader, beta_leader) = (
        contenders.alpha_leader.clone(),
        contenders.beta_leader.clone(),
    );
    tenant(&env, json!({}), &[("fe1", json!({})), ("fe2", json!({}))]).await;
    settle(&env).await;
    assert!(*alpha_leader.borrow() && !*beta_leader.borrow());

    // Only the holder acted: every event so far was published by alpha.
    let events = Api::<k8s_openapi::api::events::v1::Event>::namespaced(env.client.clone(), NS)
        .list(&ListParams::default())
        .await
        .expect("events");
    assert!(!events.items.is_empty());
    assert!(
        events
            .items
            .iter()
            .all(|e| e.reporting_instance.as_deref() == Some("alpha")),
        "only the leader acts"
    );

    // The leader dies (operator and lease renewal gone): the other takes over when the lease
    // expires, and finishes the next rollout.
    contenders.kill_alpha();
    let deadline = Instant::now() + Duration::from_secs(15);
    while !*beta_leader.borrow() {
        assert!(Instant::now() < deadline, "beta never became leader");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let from = env.created.lock().unwrap().len();
    change_observed(&env, v("v2")).await;
    settle(&env).await;
    assert_eq!(since(&env.created, from), ["fe1", "fe2", "be"]);
}

#[tokio::test]
async fn per_node_disabled_lifts_ordering_for_that_node_only() {
    let env = env().await;
    tenant(
        &env,
        json!({"rollout": {"maxConcurrent": 2}}),
        &[
            ("fe1", json!({})),
            ("fe2", json!({})),
            ("fe3", json!({"deploymentDependencies": {"disabled": true}})),
        ],
    )
    .await;
    settle(&env).await;
    // fe3 ignores ordering and starts with the backend; fe1 and fe2 keep waiting in turn.
    assert_eq!(since(&env.created, 0), ["be", "fe3", "fe1", "fe2"]);
}

#[tokio::test]
async fn an_ended_pod_is_recreated() {
    let env = env().await;
    tenant(&env, json!({}), &[("fe1", json!({}))]).await;
    settle(&env).await;
    let pods = Api::<Pod>::namespaced(env.client.clone(), NS);
    let before = pods.get("acme-fe1").await.expect("pod").metadata.uid;
    let from = env.created.lock().unwrap().len();
    pods.patch_status(
        "acme-fe1",
        &PatchParams::default(),
        &Patch::Merge(json!({"status": {"phase": "Failed"}})),
    )
    .await
    .expect("the pod ends");
    // A pod status changes no generation: until the operator acts, status still says settled.
    wait_until("acme-fe1 recreated", async || {
        !since(&env.created, from).is_empty()
    })
    .await;
    settle(&env).await;
    assert_eq!(since(&env.created, from), ["fe1"]);
    assert_ne!(
        pods.get("acme-fe1").await.expect("pod").metadata.uid,
        before,
        "a new pod"
    );
}

/// One plain HTTP/1.0 GET: status code and body.
async fn http_get(addr: std::net::SocketAddr, path: &str) -> (u16, String) {
    let path = path.to_owned();
    let response = tokio::task::spawn_blocking(move || {
        use std::io::{Read, Write};
        let mut stream = std::net::TcpStream::connect(addr).expect("connect");
        stream
            .write_all(format!("GET {path} HTTP/1.0\r\nHost: test\r\n\r\n").as_bytes())
            .expect("request");
        let mut response = String::new();
        stream.read_to_string(&mut response).expect("response");
        response
    })
    .await
    .expect("http");
    let code = response
        .split_whitespace()
        .nth(1)
        .and_then(|c| c.parse().ok())
        .expect("status line");
    let body = response
        .split_once("\r\n\r\n")
        .map(|(_, b)| b.to_owned())
        .unwrap_or_default();
    (code, body)
}

#[tokio::test]
async fn metrics_health_and_readiness_are_served() {
    let env = env_without_operator().await;
    let metrics = express_operator::metrics::Metrics::new();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let addr = listener.local_addr().expect("addr");
    tokio::spawn(express_operator::metrics::serve_on(
        listener,
        metrics.clone(),
    ));
    assert_eq!(http_get(addr, "/healthz").await.0, 200);
    assert_eq!(
        http_get(addr, "/readyz").await.0,
        503,
        "not ready before the caches sync"
    );

    operator_with_metrics(
        &env.client,
        "e2e",
        tokio::sync::watch::channel(true).1,
        metrics,
    );
    tenant(&env, json!({}), &[("fe1", json!({})), ("fe2", json!({}))]).await;
    settle(&env).await;
    assert_eq!(http_get(addr, "/readyz").await.0, 200);
    let (code, text) = http_get(addr, "/metrics").await;
    assert_eq!(code, 200);
    assert!(sample(&text, "express_operator_reconciles_total{result=\"ok\"}") >= 3.0);
    assert_eq!(
        sample(
            &text,
            "express_operator_actions_total{action=\"create_pod\"}"
        ),
        3.0
    );
    assert_eq!(
        sample(
            &text,
            "express_operator_nodes{namespace=\"tenant\",cluster=\"acme\",phase=\"Ready\"}"
        ),
        3.0
    );
    assert!(sample(&text, "express_operator_reconcile_duration_seconds_count") >= 3.0);
    assert_eq!(
        sample(&text, "express_operator_rollout_failures_total"),
        0.0
    );
    // Only the phases a tenant has nodes in have a series.
    assert!(!text.contains("phase=\"Failed\""), "{text}");

    // A deleted tenant's series go with it: a Failed one left behind would keep alerting.
    let delete = DeleteParams::default();
    Api::<ExpressCluster>::namespaced(env.client.clone(), NS)
        .delete("acme", &delete)
        .await
        .expect("delete the ExpressCluster");
    Api::<Backend>::namespaced(env.client.clone(), NS)
        .delete("acme-be", &delete)
        .await
        .expect("delete the Backend");
    for frontend in ["acme-fe1", "acme-fe2"] {
        Api::<Frontend>::namespaced(env.client.clone(), NS)
            .delete(frontend, &delete)
            .await
            .expect("delete a Frontend");
    }
    wait_until("the deleted tenant's node series are gone", async || {
        !http_get(addr, "/metrics")
            .await
            .1
            .contains("express_operator_nodes{")
    })
    .await;
}
