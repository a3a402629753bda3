//! A connection that dies without a word (DESIGN section 19): the peer takes the request and
//! never answers, as when a load balancer drops its state or an API server is gone while the
//! packets still reach somewhere. The chaos test on Kubernetes' own control plane met it: a
//! standby's election check hung on such a connection, so it held the Lease it had won without
//! ever acting, and no tenant moved again. Every request the operator sends must fail in bounded
//! time instead, so that it is tried again.
#![allow(clippy::expect_used, clippy::unwrap_used)] // tests fail loudly on unexpected values

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use express_operator::metrics::Metrics;
use express_operator::{leader, throttle};
use k8s_openapi::api::coordination::v1::Lease;
use kube::Api;
use tokio::net::TcpListener;

/// A server on loopback that reads every request and never answers; counts the requests it
/// took, so that a test knows its client got as far as sending one.
async fn black_hole() -> (kube::Config, Arc<AtomicUsize>) {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    let requests = Arc::new(AtomicUsize::new(0));
    let taken = requests.clone();
    tokio::spawn(async move {
        loop {
            let Ok((connection, _)) = listener.accept().await else {
                return;
            };
            let taken = taken.clone();
            tokio::spawn(async move {
                let mut buffer = [0_u8; 4096];
                let mut counted = false;
                // Reads on (so the client's writes complete) and answers nothing.
                while connection.readable().await.is_ok() {
                    match connection.try_read(&mut buffer) {
                        Ok(0) => return,
                        Ok(_) if !counted => {
                            counted = true;
                            taken.fetch_add(1, Ordering::SeqCst);
                        }
                        Ok(_) => {}
                        Err(error) if error.kind() == std::io::ErrorKind::WouldBlock => {}
                        Err(_) => return,
                    }
                }
            });
        }
    });
    let config = kube::Config::new(url.parse().unwrap());
    (config, requests)
}

/// Whether the request failed (rather than hung) within `bound`.
async fn fails_within<T: std::fmt::Debug>(
    bound: Duration,
    request: impl std::future::Future<Output = Result<T, kube::Error>>,
) -> kube::Error {
    tokio::time::timeout(bound, request)
        .await
        .expect("the request hung past its deadline")
        .expect_err("a black hole answered")
}

#[tokio::test]
async fn the_elections_requests_give_up_on_a_dead_connection() {
    let (config, requests) = black_hole().await;
    let client = leader::election_client(config, "default").unwrap();
    let leases: Api<Lease> = Api::namespaced(client, "express-system");
    let error = fails_within(Duration::from_secs(30), leases.get("express-operator")).await;
    assert_eq!(
        requests.load(Ordering::SeqCst),
        1,
        "the request reached the peer"
    );
    assert!(format!("{error:?}").contains("TimedOut"), "{error:?}");
}

#[tokio::test]
async fn the_controllers_requests_give_up_when_no_answer_begins() {
    let (config, requests) = black_hole().await;
    let client = throttle::client_answered_within(
        config,
        throttle::ApiLimits::DEFAULT,
        "default",
        Metrics::new(),
        Duration::from_secs(2),
    )
    .unwrap();
    let leases: Api<Lease> = Api::namespaced(client, "express-system");
    let error = fails_within(Duration::from_secs(30), leases.get("express-operator")).await;
    assert_eq!(
        requests.load(Ordering::SeqCst),
        1,
        "the request reached the peer"
    );
    assert!(matches!(error, kube::Error::Service(_)), "{error:?}");
}
