//! Builds that misbehave on purpose, for the release's analysis to catch (DESIGN section 16):
//! `express-operator run --fault NAME`, a flag only builds with the `dev` feature have (the
//! image has none). Each keeps every tenant healthy while one vital sign goes bad:
//! - `chatty`: four more API reads per reconcile (3x or more what a reconcile sends);
//! - `erring`: every fourth reconcile reports an error after doing its work, and is retried;
//! - `slow`: every reconcile takes 300 ms longer;
//! - `leaky`: resident memory grows by 48 KiB a second (about 2.8 MiB a minute).

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use express_api::{ClusterKey, ExpressCluster};
use kube::api::Api;

/// A misbehaviour.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum Fault {
    Chatty,
    Erring,
    Slow,
    Leaky,
}

impl Fault {
    pub fn as_str(self) -> &'static str {
        match self {
            Fault::Chatty => "chatty",
            Fault::Erring => "erring",
            Fault::Slow => "slow",
            Fault::Leaky => "leaky",
        }
    }
}

/// The extra reads of a chatty reconcile.
const CHATTY_READS: usize = 4;
/// The delay of a slow reconcile.
const SLOW_BY: Duration = Duration::from_millis(300);
/// What a leaky build loses every second.
const LEAK_PER_SECOND: usize = 48 * 1024;

/// What a faulty build does before a reconcile.
pub async fn before_reconcile(fault: Option<Fault>, client: &kube::Client, key: &ClusterKey) {
    match fault {
        Some(Fault::Slow) => tokio::time::sleep(SLOW_BY).await,
        Some(Fault::Chatty) => {
            let api: Api<ExpressCluster> = Api::namespaced(client.clone(), &key.namespace);
            for _ in 0..CHATTY_READS {
                let _ = api.get_opt(&key.cluster).await;
            }
        }
        _ => {}
    }
}

/// Whether a faulty build reports this reconcile as failed (every fourth, when erring).
pub fn fails_this_reconcile(fault: Option<Fault>) -> bool {
    static RECONCILES: AtomicU64 = AtomicU64::new(0);
    fault == Some(Fault::Erring) && RECONCILES.fetch_add(1, Ordering::Relaxed) % 4 == 3
}

/// A leaky build's leak: memory written (so that it is resident) and never freed.
pub async fn leak_forever() {
    let mut every = tokio::time::interval(Duration::from_secs(1));
    loop {
        every.tick().await;
        let lost: &'static mut [u8] = Box::leak(vec![0x5a_u8; LEAK_PER_SECOND].into_boxed_slice());
        std::hint::black_box(lost);
    }
}
