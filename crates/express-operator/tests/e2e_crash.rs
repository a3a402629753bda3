//! Crash safety at every write (issue 23, DESIGN section 5): kubesim freezes the operator's
//! client right after its Nth write and the test kills the operator there, so the world holds
//! exactly its first N writes. A fresh operator then finishes the upgrade of a 6-node tenant;
//! the order holds and every node is replaced exactly once, for every N.
#![allow(clippy::expect_used, clippy::unwrap_used)] // tests fail loudly on unexpected values

mod support;

use std::time::{Duration, Instant};

use express_api::ClusterPhase;
use serde_json::{Value, json};
use support::*;

const ORDER: [&str; 6] = ["fe1", "fe2", "be", "fe3", "fe4", "fe5"];

/// A settled 6-node tenant (five Frontends and the Backend) driven by an operator running as
/// `agent`.
async fn six_node_tenant(agent: &str) -> (Env, tokio::task::JoinHandle<()>) {
    let env = env_without_operator().await;
    let running = operator_as(&env, agent);
    let fes: Vec<(&str, Value)> = ["fe1", "fe2", "fe3", "fe4", "fe5"]
        .iter()
        .map(|n| (*n, json!({})))
        .collect();
    tenant(&env, json!({}), &fes).await;
    settle(&env).await;
    (env, running)
}

async fn healthy(env: &Env) -> bool {
    cluster(env)
        .await
        .status
        .is_some_and(|s| s.phase == Some(ClusterPhase::Healthy))
}

/// The upgrade to v2 finished from `from` on: six creations and six deletions.
fn upgrade_done(env: &Env, from: (usize, usize)) -> bool {
    since(&env.created, from.0).len() >= 6 && since(&env.deleted, from.1).len() >= 6
}

fn marks(env: &Env) -> (usize, usize) {
    (
        env.created.lock().unwrap().len(),
        env.deleted.lock().unwrap().len(),
    )
}

/// Each node replaced exactly once, in the order of DESIGN section 3.
fn assert_replaced_once_in_order(env: &Env, from: (usize, usize), case: &str) {
    assert_eq!(since(&env.created, from.0), ORDER, "{case}: creations");
    let mut deleted = since(&env.deleted, from.1);
    deleted.sort();
    let mut expected = ORDER.map(String::from).to_vec();
    expected.sort();
    assert_eq!(deleted, expected, "{case}: every node deleted exactly once");
}

/// One crash: the operator may make `writes` writes after the upgrade is asked for, is killed
/// at its first refused write, and a fresh operator finishes. Returns whether the stop was
/// reached (false: the whole upgrade took fewer writes).
async fn crash_after(writes: u64) -> bool {
    let (env, running) = six_node_tenant("operator-before-crash").await;
    let from = marks(&env);
    env.sim
        .faults()
        .stop_writes_after("operator-before-crash", writes);
    change(&env, v("v2")).await;
    let deadline = Instant::now() + Duration::from_secs(60);
    let case = format!("killed after write {writes}");
    let reached = refused_or_done(
        &env,
        "operator-before-crash",
        deadline,
        async || upgrade_done(&env, from) && healthy(&env).await,
        async || format!("{:?}", since(&env.created, from.0)),
    )
    .await;
    running.abort();
    let _ = running.await;
    let _after = operator_as(&env, "operator-after-crash");
    while !upgrade_done(&env, from) {
        assert!(
            Instant::now() < deadline,
            "{case}: the upgrade never finished"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    settle(&env).await;
    assert_replaced_once_in_order(&env, from, &case);
    reached
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn killed_after_write_n_for_every_n_the_upgrade_finishes_once_in_order() {
    // Eight crashes at a time, each in its own kubesim, until a batch holds an N past the
    // upgrade's last write.
    const BATCH: u64 = 8;
    let mut first = 1;
    loop {
        let reached = futures::future::join_all((first..first + BATCH).map(crash_after)).await;
        // How many writes an upgrade takes varies a little with timing (a status written
        // once or twice), so the batch that runs out is finished whole.
        if let Some(past_the_end) = reached.iter().position(|r| !*r) {
            let writes = first + past_the_end as u64;
            eprintln!(
                "killed after each of writes 1..{}; the first run out of writes at N = {writes}",
                first + BATCH - 1
            );
            return;
        }
        first += BATCH;
        assert!(first < 400, "the upgrade never ran out of writes");
    }
}

#[tokio::test]
async fn an_operator_allowed_one_write_per_life_finishes_the_upgrade_once_in_order() {
    let (env, running) = six_node_tenant("operator-life-0").await;
    running.abort();
    let _ = running.await;
    let from = marks(&env);
    change(&env, v("v2")).await;
    let lives = one_write_per_life(
        &env,
        Duration::from_secs(120),
        async || upgrade_done(&env, from) && healthy(&env).await,
        async || format!("{:?}", since(&env.created, from.0)),
    )
    .await;
    let _last = operator_as(&env, "operator-last");
    settle(&env).await;
    assert_replaced_once_in_order(&env, from, "one write per life");
    eprintln!("{lives} lives");
    assert!(
        lives >= 12,
        "six creations and six deletions take a life each at least: {lives} lives"
    );
}
