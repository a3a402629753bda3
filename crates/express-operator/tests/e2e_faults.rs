//! Faults of the API server reach the real controller: kubesim fails the operator's requests on
//! purpose, and the tests check through the API what the operator did meanwhile.
#![allow(clippy::expect_used, clippy::unwrap_used)] // tests fail loudly on unexpected values

mod support;

use std::time::{Duration, Instant};

use kubesim::faults::FaultRule;
use serde_json::json;
use support::*;

fn pod_deletes(env: &Env) -> Vec<String> {
    env.sim
        .deletes()
        .into_iter()
        .filter(|d| d.resource == "pods")
        .map(|d| d.name)
        .collect()
}

/// While the record of a change cannot be written (every status write of a Frontend fails),
/// no pod is touched: the operator keeps trying, with backoff, and the rollout starts only once
/// the record lands, then completes in order with each node replaced once.
#[tokio::test]
async fn no_pod_is_touched_until_the_change_record_lands() {
    let env = ready_tenant(&["fe1", "fe2"]).await;
    let status_writes = || {
        env.sim
            .counters()
            .count("patch", "frontends.express.dev/status")
    };
    env.sim.faults().add_rule(FaultRule {
        verb: Some("patch".into()),
        resource: Some("frontends.express.dev/status".into()),
        rate: 1.0,
        status: 500,
        retry_after_seconds: None,
    });
    let before = status_writes();
    change(&env, v("v2")).await;
    // The first change of the default order is acme-fe1's: its record is refused again and
    // again, and nothing is deleted meanwhile.
    let deadline = Instant::now() + Duration::from_secs(20);
    while status_writes() < before + 3 {
        assert!(Instant::now() < deadline, "the operator stopped trying");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert!(pod_deletes(&env).is_empty(), "{:?}", pod_deletes(&env));

    env.sim.faults().clear();
    settle(&env).await;
    assert_eq!(pod_deletes(&env), ["acme-fe1", "acme-fe2", "acme-be"]);
}

/// A watch cut and a compaction in the middle of a rollout: the operator relists and finishes
/// it without acting twice on any node.
#[tokio::test]
async fn a_watch_cut_and_a_compaction_mid_rollout_change_no_node_twice() {
    let env = ready_tenant(&["fe1", "fe2", "fe3"]).await;
    let first_delete = Instant::now() + Duration::from_secs(20);
    change(&env, v("v2")).await;
    while pod_deletes(&env).is_empty() {
        assert!(Instant::now() < first_delete, "the rollout never started");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    env.sim.compact();
    env.sim.faults().close_watches();
    settle(&env).await;
    assert_eq!(
        pod_deletes(&env),
        ["acme-fe1", "acme-fe2", "acme-be", "acme-fe3"]
    );
    // Four pods created on v1, four on v2: no creation was repeated after the relist (the
    // test's own watch was cut too, so kubesim's counters are the witness).
    assert_eq!(env.sim.counters().count("create", "pods"), 8);
}

/// A 429 with Retry-After is honoured: the operator does not ask again before the time is up,
/// whatever else happens meanwhile, and provisions the tenant once the server takes requests.
/// (kube's client does this: its retry layer, on by default, waits out Retry-After on 429 and
/// 503; the operator's own backoff only sees a request the client gave up on.)
#[tokio::test]
async fn a_retry_after_is_honoured() {
    let env = env().await;
    env.sim.faults().add_rule(FaultRule {
        verb: Some("create".into()),
        resource: Some("pods".into()),
        rate: 1.0,
        status: 429,
        retry_after_seconds: Some(3),
    });
    tenant(&env, json!({}), &[("fe1", json!({}))]).await;
    let creates = || env.sim.counters().count("create", "pods");
    let deadline = Instant::now() + Duration::from_secs(20);
    while creates() == 0 {
        assert!(Instant::now() < deadline, "no pod creation was tried");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    // Its status writes and watch events keep coming; the creation is not tried again before
    // the 3 s the server asked for (the backoff alone would have tried four times by now).
    tokio::time::sleep(Duration::from_millis(2_000)).await;
    assert_eq!(creates(), 1);
    env.sim.faults().clear();
    settle(&env).await;
    assert_eq!(creates(), 3, "the refused one again, then the two others");
}

/// Every request slowed down (100 ms added to each): the rollout takes longer and still keeps
/// the DESIGN order, one change at a time.
#[tokio::test]
async fn added_latency_slows_the_rollout_and_keeps_its_order() {
    let env = ready_tenant(&["fe1", "fe2"]).await;
    env.sim.faults().set_latency(Duration::from_millis(100));
    change(&env, v("v2")).await;
    settle(&env).await;
    env.sim.faults().clear();
    assert_eq!(pod_deletes(&env), ["acme-fe1", "acme-fe2", "acme-be"]);
    assert_eq!(env.sim.counters().count("create", "pods"), 6);
}
