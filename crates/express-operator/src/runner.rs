//! The work queue: one reconcile at a time per Express cluster, triggers coalesced while it
//! runs, failures retried with exponential backoff (never a flat requeue).

use std::collections::{HashMap, HashSet};
use std::future::Future;
use std::hash::Hash;
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::{Semaphore, mpsc};

/// What a reconcile asks for next.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Next {
    /// Nothing until something changes (the watches will say).
    AwaitChange,
    /// Look again after this long (a rollout deadline, a pod still starting...).
    RequeueAfter(Duration),
}

/// Exponential backoff per key: 200 ms doubling to 5 minutes, reset by a success.
fn backoff(failures: u32) -> Duration {
    let millis = 200u64.saturating_mul(1u64 << failures.min(11));
    Duration::from_millis(millis.min(300_000))
}

enum Message<K> {
    Trigger(K),
    Done(K, Result<Next, ()>),
}

/// Feeds keys to `reconcile`, at most `concurrency` at once and never two for the same key.
pub async fn run<K, F, Fut>(
    mut triggers: mpsc::UnboundedReceiver<K>,
    concurrency: usize,
    reconcile: F,
) where
    K: Clone + Eq + Hash + Send + Sync + 'static,
    F: Fn(K) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = Result<Next, ()>> + Send + 'static,
{
    let reconcile = Arc::new(reconcile);
    let permits = Arc::new(Semaphore::new(concurrency.max(1)));
    let (internal, mut messages) = mpsc::unbounded_channel::<Message<K>>();
    let mut running: HashSet<K> = HashSet::new();
    let mut dirty: HashSet<K> = HashSet::new();
    let mut failures: HashMap<K, u32> = HashMap::new();
    loop {
        let message = tokio::select! {
            trigger = triggers.recv() => match trigger {
                Some(key) => Message::Trigger(key),
                None => return,
            },
            Some(message) = messages.recv() => message,
        };
        let key = match message {
            Message::Trigger(key) => key,
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
                    Err(()) => {
                        let count = failures.entry(key.clone()).or_insert(0);
                        *count += 1;
                        Some(backoff(*count - 1))
                    }
                };
                if let Some(delay) = delay.filter(|_| !again_now) {
                    let internal = internal.clone();
                    let key = key.clone();
                    tokio::spawn(async move {
                        tokio::time::sleep(delay).await;
                        let _ = internal.send(Message::Trigger(key));
                    });
                }
                if !again_now {
                    continue;
                }
                key
            }
        };
        if running.contains(&key) {
            dirty.insert(key);
            continue;
        }
        running.insert(key.clone());
        let (reconcile, permits, internal) = (reconcile.clone(), permits.clone(), internal.clone());
        tokio::spawn(async move {
            let permit = permits.acquire_owned().await;
            let result = reconcile(key.clone()).await;
            drop(permit);
            let _ = internal.send(Message::Done(key, result));
        });
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
    }

    #[tokio::test]
    async fn never_runs_one_key_twice_at_once_and_coalesces() {
        let (tx, rx) = mpsc::unbounded_channel();
        let active = Arc::new(AtomicUsize::new(0));
        let runs = Arc::new(AtomicUsize::new(0));
        let (a, r) = (active.clone(), runs.clone());
        tokio::spawn(run(rx, 4, move |_key: u32| {
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

    #[tokio::test]
    async fn failures_are_retried_with_backoff() {
        let (tx, rx) = mpsc::unbounded_channel();
        let runs = Arc::new(AtomicUsize::new(0));
        let r = runs.clone();
        tokio::spawn(run(rx, 1, move |_key: u32| {
            let r = r.clone();
            async move {
                let n = r.fetch_add(1, Ordering::SeqCst);
                if n < 2 {
                    Err(())
                } else {
                    Ok(Next::AwaitChange)
                }
            }
        }));
        tx.send(1).expect("send");
        tokio::time::sleep(Duration::from_millis(100)).await;
        assert_eq!(runs.load(Ordering::SeqCst), 1, "the retry waits 200 ms");
        tokio::time::sleep(Duration::from_millis(1000)).await;
        assert_eq!(
            runs.load(Ordering::SeqCst),
            3,
            "200 ms then 400 ms later it succeeded"
        );
    }
}
