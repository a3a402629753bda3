//! The work queue: one reconcile at a time per Express cluster, triggers coalesced while it
//! runs, failures retried with exponential backoff per cluster (never a flat requeue), and
//! clusters served in turn.
//!
//! Fairness: a cluster is in the ready queue at most once and joins at the back, so when more
//! clusters are ready than there are reconcile slots they are served round-robin. A cluster
//! that asks to be looked at again (a long rollout) or fails (a hot error loop, backed off per
//! cluster) queues behind everyone already waiting; it cannot take a second turn before they
//! had theirs. Under the client-side API limit this is what keeps one tenant from starving the
//! others.

use std::collections::{HashMap, HashSet, VecDeque};
use std::future::Future;
use std::hash::Hash;
use std::sync::Arc;
use std::time::Duration;

use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};
use tokio::sync::mpsc;
use tokio::task::{self, JoinSet};
use tokio::time::Instant;

/// What a reconcile asks for next.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Next {
    /// Nothing until something changes (the watches will say).
    AwaitChange,
    /// Look again after this long (a rollout deadline, a pod still starting...).
    RequeueAfter(Duration),
}

/// The queue's figures: clusters waiting for a slot, and how long each waited.
#[derive(Clone)]
pub struct QueueMetrics {
    pub depth: Gauge,
    pub wait_seconds: Histogram,
}

impl Default for QueueMetrics {
    fn default() -> Self {
        QueueMetrics {
            depth: Gauge::default(),
            wait_seconds: Histogram::new(exponential_buckets(0.001, 2.0, 16)),
        }
    }
}

/// Exponential backoff per key: 200 ms doubling to 5 minutes, reset by a success.
pub(crate) fn backoff(failures: u32) -> Duration {
    let millis = 200u64.saturating_mul(1u64 << failures.min(11));
    Duration::from_millis(millis.min(300_000))
}

/// Why a reconcile failed, as far as its retry goes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Failure {
    /// Its own work failed (a write refused, a pod that cannot be built): retried with
    /// [`backoff`], up to 5 minutes between tries.
    Work,
    /// The control plane failed it (a 5xx, a 429, no answer): retried with the same backoff
    /// but never more than [`CONTROL_PLANE_RETRY_CAP`] apart. Every key fails alike through
    /// an outage, and a key that reached 5 minutes would sit idle for minutes after the
    /// control plane is back, with nothing changing to wake it.
    ControlPlane,
}

/// The longest wait between retries of a key the control plane failed: about two Leases, so
/// that a fleet resumes within half a minute of an outage's end; the client's own limit and
/// API Priority and Fairness bound what the retries cost meanwhile.
pub const CONTROL_PLANE_RETRY_CAP: Duration = Duration::from_secs(30);

impl Failure {
    /// The wait before the retry that follows `failures` earlier ones of the key.
    pub fn retry_after(self, failures: u32) -> Duration {
        match self {
            Failure::Work => backoff(failures),
            Failure::ControlPlane => backoff(failures).min(CONTROL_PLANE_RETRY_CAP),
        }
    }
}

enum Message<K> {
    Trigger(K),
    Done(K, Result<Next, Failure>),
}

/// Feeds keys to `reconcile`, at most `concurrency` at once, never two for the same key, in
/// turn (see the module doc).
///
/// Every reconcile and every delayed trigger runs in a task owned by this future: dropping or
/// aborting it stops them all, so an operator that is killed (or loses its lease) leaves no
/// reconcile behind that could still write.
pub async fn run<K, F, Fut>(
    mut triggers: mpsc::UnboundedReceiver<K>,
    concurrency: usize,
    metrics: QueueMetrics,
    reconcile: F,
) where
    K: Clone + Eq + Hash + Send + Sync + 'static,
    F: Fn(K) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = Result<Next, Failure>> + Send + 'static,
{
    let concurrency = concurrency.max(1);
    let reconcile = Arc::new(reconcile);
    let mut tasks: JoinSet<Message<K>> = JoinSet::new();
    // Which key each reconcile task works on, so that a panicking reconcile still frees its
    // key (and is retried with backoff like any failure).
    let mut reconciling: HashMap<task::Id, K> = HashMap::new();
    let mut running: HashSet<K> = HashSet::new();
    let mut ready: VecDeque<(K, Instant)> = VecDeque::new();
    let mut queued: HashSet<K> = HashSet::new();
    let mut dirty: HashSet<K> = HashSet::new();
    let mut failures: HashMap<K, u32> = HashMap::new();
    loop {
        let message = tokio::select! {
            trigger = triggers.recv() => match trigger {
                Some(key) => Message::Trigger(key),
                None => return,
            },
            Some(joined) = tasks.join_next_with_id(), if !tasks.is_empty() => match joined {
                Ok((id, message)) => {
                    reconciling.remove(&id);
                    message
                }
                Err(error) => match reconciling.remove(&error.id()) {
                    Some(key) => Message::Done(key, Err(Failure::Work)),
                    None => continue,
                },
            },
        };
        let wanted = match message {
            Message::Trigger(key) => Some(key),
            Message::Done(key, result) => {
                running.remove(&key);
                let again_now = dirty.remove(&key);
                let delay = match result {
                    Ok(Next::AwaitChange) => {
                        failures.remove(&key);
                        None
                    }
                    Ok(Next::RequeueAfter(delay)) => {
                        failures.remove(&key);
                        Some(delay)
                    }
                    Err(failure) => {
                        let count = failures.entry(key.clone()).or_insert(0);
                        *count += 1;
                        Some(failure.retry_after(*count - 1))
                    }
                };
                if let Some(delay) = delay.filter(|_| !again_now) {
                    let key = key.clone();
                    tasks.spawn(async move {
                        tokio::time::sleep(delay).await;
                        Message::Trigger(key)
                    });
                }
                again_now.then_some(key)
            }
        };
        if let Some(key) = wanted {
            if running.contains(&key) {
                dirty.insert(key);
            } else if queued.insert(key.clone()) {
                ready.push_back((key, Instant::now()));
            }
        }
        while running.len() < concurrency
            && let Some((key, since)) = ready.pop_front()
        {
            queued.remove(&key);
            metrics.wait_seconds.observe(since.elapsed().as_secs_f64());
            running.insert(key.clone());
            let reconcile = reconcile.clone();
            let task_key = key.clone();
            let handle = tasks.spawn(async move {
                let result = reconcile(task_key.clone()).await;
                Message::Done(task_key, result)
            });
            reconciling.insert(handle.id(), key);
        }
        metrics
            .depth
            .set(i64::try_from(ready.len()).unwrap_or(i64::MAX));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicUsize, Ordering};

    #[test]
    fn backoff_doubles_and_caps() {
        assert_eq!(backoff(0), Duration::from_millis(200));
        assert_eq!(backoff(1), Duration::from_millis(400));
        assert_eq!(backoff(5), Duration::from_millis(6_400));
        assert_eq!(backoff(40), Duration::from_secs(300));
        assert_eq!(Failure::Work.retry_after(40), Duration::from_secs(300));
        assert_eq!(Failure::ControlPlane.retry_after(3), backoff(3));
        assert_eq!(
            Failure::ControlPlane.retry_after(40),
            CONTROL_PLANE_RETRY_CAP
        );
    }

    /// How many times a key ran in `within`, failing its first `failing` runs as `failure`.
    async fn runs_through_an_outage(failure: Failure, failing: usize, within: Duration) -> usize {
        let (tx, rx) = mpsc::unbounded_channel();
        let runs = Arc::new(AtomicUsize::new(0));
        let r = runs.clone();
        tokio::spawn(run(rx, 1, QueueMetrics::default(), move |_key: u32| {
            let r = r.clone();
            async move {
                if r.fetch_add(1, Ordering::SeqCst) < failing {
                    Err(failure)
                } else {
                    Ok(Next::AwaitChange)
                }
            }
        }));
        tx.send(1).expect("send");
        tokio::time::sleep(within).await;
        runs.load(Ordering::SeqCst)
    }

    #[tokio::test(start_paused = true)]
    async fn a_key_the_control_plane_failed_is_tried_again_within_half_a_minute() {
        // 12 failures through an outage of about 3 minutes: 51 s of doubling (200 ms to
        // 25.6 s), then every 30 s. The 13th run succeeds within 200 s.
        let within = Duration::from_secs(200);
        assert_eq!(
            runs_through_an_outage(Failure::ControlPlane, 12, within).await,
            13
        );
        // The same failures as the key's own work double on: after 102 s, then 205 s.
        assert!(runs_through_an_outage(Failure::Work, 12, within).await < 13);
    }

    #[tokio::test(start_paused = true)]
    async fn never_runs_one_key_twice_at_once_and_coalesces() {
        let (tx, rx) = mpsc::unbounded_channel();
        let active = Arc::new(AtomicUsize::new(0));
        let runs = Arc::new(AtomicUsize::new(0));
        let (a, r) = (active.clone(), runs.clone());
        tokio::spawn(run(rx, 4, QueueMetrics::default(), move |_key: u32| {
            let (a, r) = (a.clone(), r.clone());
            async move {
                assert_eq!(
                    a.fetch_add(1, Ordering::SeqCst),
                    0,
                    "two reconciles of one key at once"
                );
                tokio::time::sleep(Duration::from_millis(50)).await;
                a.fetch_sub(1, Ordering::SeqCst);
                r.fetch_add(1, Ordering::SeqCst);
                Ok(Next::AwaitChange)
            }
        }));
        for _ in 0..10 {
            tx.send(7).expect("send");
        }
        tokio::time::sleep(Duration::from_millis(300)).await;
        // The first run, then one more for everything that arrived meanwhile.
        assert_eq!(runs.load(Ordering::SeqCst), 2);
    }

    /// Records the order keys ran in; key 0 is hot: it asks to run again at once (`hot`) or
    /// fails every time.
    async fn serve_order(hot: Result<Next, Failure>, others: u32) -> Vec<u32> {
        let (tx, rx) = mpsc::unbounded_channel();
        let order = Arc::new(std::sync::Mutex::new(Vec::new()));
        let o = order.clone();
        let metrics = QueueMetrics::default();
        tokio::spawn(run(rx, 1, metrics.clone(), move |key: u32| {
            let o = o.clone();
            async move {
                o.lock().expect("order").push(key);
                tokio::time::sleep(Duration::from_millis(10)).await;
                if key == 0 { hot } else { Ok(Next::AwaitChange) }
            }
        }));
        for key in 0..=others {
            tx.send(key).expect("send");
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
        assert_eq!(
            metrics.depth.get(),
            i64::from(others),
            "all but the running one wait"
        );
        tokio::time::sleep(Duration::from_secs(2)).await;
        order.lock().expect("order").clone()
    }

    #[tokio::test(start_paused = true)]
    async fn a_key_that_asks_again_at_once_takes_its_turn_behind_the_others() {
        let order = serve_order(Ok(Next::RequeueAfter(Duration::ZERO)), 5).await;
        assert_eq!(order[..7], [0, 1, 2, 3, 4, 5, 0], "round-robin: {order:?}");
        assert!(order[6..].iter().all(|k| *k == 0), "then alone, it may run");
    }

    #[tokio::test(start_paused = true)]
    async fn a_key_failing_in_a_loop_backs_off_alone_and_starves_no_one() {
        let order = serve_order(Err(Failure::Work), 5).await;
        assert_eq!(order[..6], [0, 1, 2, 3, 4, 5], "{order:?}");
        // 2 s of a failing key: retries after 200, 400, 800 ms (plus 10 ms runs), not 200 of them.
        let hot_runs = order.iter().filter(|k| **k == 0).count();
        assert_eq!(hot_runs, 4, "{order:?}");
    }

    #[tokio::test(start_paused = true)]
    async fn never_more_than_concurrency_at_once_and_the_wait_is_measured() {
        let (tx, rx) = mpsc::unbounded_channel();
        let active = Arc::new(AtomicUsize::new(0));
        let peak = Arc::new(AtomicUsize::new(0));
        let (a, p) = (active.clone(), peak.clone());
        let metrics = QueueMetrics::default();
        tokio::spawn(run(rx, 3, metrics.clone(), move |_key: u32| {
            let (a, p) = (a.clone(), p.clone());
            async move {
                let now = a.fetch_add(1, Ordering::SeqCst) + 1;
                p.fetch_max(now, Ordering::SeqCst);
                tokio::time::sleep(Duration::from_millis(100)).await;
                a.fetch_sub(1, Ordering::SeqCst);
                Ok(Next::AwaitChange)
            }
        }));
        for key in 0..10 {
            tx.send(key).expect("send");
        }
        tokio::time::sleep(Duration::from_secs(1)).await;
        assert_eq!(peak.load(Ordering::SeqCst), 3);
        assert_eq!(metrics.depth.get(), 0);
        let mut text = String::new();
        let mut registry = prometheus_client::registry::Registry::default();
        registry.register("wait", "", metrics.wait_seconds.clone());
        prometheus_client::encoding::text::encode(&mut text, &registry).expect("encode");
        assert!(text.contains("wait_count 10"), "{text}");
    }

    #[tokio::test(start_paused = true)]
    async fn failures_are_retried_with_backoff() {
        let (work, within) = (Failure::Work, Duration::from_millis(100));
        assert_eq!(
            runs_through_an_outage(work, 2, within).await,
            1,
            "the retry waits 200 ms"
        );
        let within = Duration::from_millis(1100);
        assert_eq!(
            runs_through_an_outage(work, 2, within).await,
            3,
            "200 ms then 400 ms later it succeeded"
        );
    }

    #[tokio::test(start_paused = true)]
    async fn a_panicking_reconcile_frees_its_key_and_is_retried() {
        let (tx, rx) = mpsc::unbounded_channel();
        let runs = Arc::new(AtomicUsize::new(0));
        let r = runs.clone();
        tokio::spawn(run(rx, 1, QueueMetrics::default(), move |_key: u32| {
            let r = r.clone();
            async move {
                if r.fetch_add(1, Ordering::SeqCst) == 0 {
                    panic!("a bug in one reconcile");
                }
                Ok(Next::AwaitChange)
            }
        }));
        tx.send(1).expect("send");
        tokio::time::sleep(Duration::from_millis(100)).await;
        assert_eq!(runs.load(Ordering::SeqCst), 1);
        tokio::time::sleep(Duration::from_millis(200)).await;
        assert_eq!(runs.load(Ordering::SeqCst), 2, "retried after 200 ms");
    }

    #[tokio::test(start_paused = true)]
    async fn stopping_the_queue_stops_its_reconciles_and_requeues() {
        let (tx, rx) = mpsc::unbounded_channel();
        let (started, finished) = (Arc::new(AtomicUsize::new(0)), Arc::new(AtomicUsize::new(0)));
        let (s, f) = (started.clone(), finished.clone());
        let queue = tokio::spawn(run(rx, 2, QueueMetrics::default(), move |key: u32| {
            let (s, f) = (s.clone(), f.clone());
            async move {
                s.fetch_add(1, Ordering::SeqCst);
                if key == 1 {
                    // Still working when the queue is stopped.
                    tokio::time::sleep(Duration::from_secs(10)).await;
                }
                f.fetch_add(1, Ordering::SeqCst);
                Ok(Next::RequeueAfter(Duration::from_secs(1)))
            }
        }));
        tx.send(1).expect("send");
        tx.send(2).expect("send");
        tokio::time::sleep(Duration::from_millis(100)).await;
        assert_eq!(
            (
                started.load(Ordering::SeqCst),
                finished.load(Ordering::SeqCst)
            ),
            (2, 1)
        );
        queue.abort();
        let _ = queue.await;
        tokio::time::sleep(Duration::from_secs(30)).await;
        assert_eq!(
            (
                started.load(Ordering::SeqCst),
                finished.load(Ordering::SeqCst)
            ),
            (2, 1),
            "neither the running reconcile nor the requeue outlives the queue"
        );
    }
}
