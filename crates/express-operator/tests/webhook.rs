//! The conversion webhook's server on loopback, reached over TLS as the API server reaches it:
//! trusting only the `caBundle`. A review is answered, a body that is no review gets a `Failure`,
//! and a serving certificate moved to a new authority mid-traffic fails no request of a client
//! that trusts the bundle holding both.

#![allow(clippy::expect_used, clippy::unwrap_used)] // the shared set-up fails loudly

mod support;

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{SystemTime, UNIX_EPOCH};

use express_operator::controller::api::webhook::authority::{
    Authority, Validity, bundle, new_authority, new_serving, validity_of,
};
use express_operator::controller::api::webhook::rotation::{
    Policy, authority_validity, serving_validity,
};
use express_operator::controller::api::webhook::server::{PATH, ServingCertificate, serve};
use http_body_util::{BodyExt, Full};
use hyper::body::Bytes;
use hyper_util::client::legacy::Client;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::TokioExecutor;
use serde_json::{Value, json};

fn now() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs() as i64)
        .unwrap_or_default()
}

fn authority() -> Authority {
    new_authority(authority_validity(now(), &Policy::default())).unwrap_or_else(|e| panic!("{e}"))
}

fn serving_from(
    authority: &Authority,
) -> express_operator::controller::api::webhook::authority::Serving {
    let validity =
        validity_of(&authority.certificate, "test authority").unwrap_or_else(|e| panic!("{e}"));
    new_serving(
        authority,
        &["127.0.0.1".to_owned(), "localhost".to_owned()],
        serving_validity(validity, now(), &Policy::default()),
    )
    .unwrap_or_else(|e| panic!("{e}"))
}

type HttpsClient = Client<hyper_rustls::HttpsConnector<HttpConnector>, Full<Bytes>>;

/// A client trusting `ca_bundle` only, as the API server trusts a CRD's `caBundle`.
fn client_trusting(ca_bundle: &str) -> HttpsClient {
    use rustls::pki_types::CertificateDer;
    use rustls::pki_types::pem::PemObject;
    let mut roots = rustls::RootCertStore::empty();
    for certificate in CertificateDer::pem_slice_iter(ca_bundle.as_bytes()) {
        roots
            .add(certificate.unwrap_or_else(|e| panic!("{e}")))
            .unwrap_or_else(|e| panic!("{e}"));
    }
    let tls = rustls::ClientConfig::builder_with_provider(Arc::new(
        rustls::crypto::ring::default_provider(),
    ))
    .with_safe_default_protocol_versions()
    .unwrap_or_else(|e| panic!("{e}"))
    .with_root_certificates(roots)
    .with_no_client_auth();
    let connector = hyper_rustls::HttpsConnectorBuilder::new()
        .with_tls_config(tls)
        .https_only()
        .enable_http1()
        .build();
    Client::builder(TokioExecutor::new()).build(connector)
}

async fn post(client: &HttpsClient, url: &str, body: Vec<u8>) -> Result<(u16, Value), String> {
    let request = hyper::Request::post(url)
        .header("content-type", "application/json")
        .body(Full::new(Bytes::from(body)))
        .map_err(|e| e.to_string())?;
    let response = client
        .request(request)
        .await
        .map_err(|e| format!("{e:?}"))?;
    let status = response.status().as_u16();
    let bytes = response
        .into_body()
        .collect()
        .await
        .map_err(|e| e.to_string())?
        .to_bytes();
    let body = serde_json::from_slice(&bytes)
        .map_err(|e| format!("{e}: {}", String::from_utf8_lossy(&bytes)))?;
    Ok((status, body))
}

fn review(name: &str) -> Vec<u8> {
    serde_json::to_vec(&json!({
        "apiVersion": "apiextensions.k8s.io/v1", "kind": "ConversionReview",
        "request": {"uid": format!("uid-{name}"), "desiredAPIVersion": "express.dev/v1beta1", "objects": [
            {"apiVersion": "express.dev/v1alpha1", "kind": "Backend",
             "metadata": {"name": name, "namespace": "tenant-a"},
             "spec": {"clusterConfig": {"clusterName": "shop"}, "expressVersion": "2.0"}}
        ]}
    }))
    .unwrap_or_default()
}

async fn start(
    certificate: Arc<ServingCertificate>,
) -> (String, tokio::task::JoinHandle<std::io::Result<()>>) {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    let address = listener.local_addr().unwrap_or_else(|e| panic!("{e}"));
    let task = tokio::spawn(serve(listener, certificate));
    (format!("https://{address}{PATH}"), task)
}

#[tokio::test]
async fn a_review_is_answered_over_tls_to_a_client_trusting_the_bundle() {
    let authority = authority();
    let certificate = Arc::new(ServingCertificate::default());
    certificate
        .set(&serving_from(&authority))
        .unwrap_or_else(|e| panic!("{e}"));
    let (url, task) = start(certificate).await;
    let client = client_trusting(&bundle([authority.certificate.as_str()]));

    let (status, answer) = post(&client, &url, review("shop-be"))
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(status, 200);
    assert_eq!(answer["response"]["uid"], "uid-shop-be");
    assert_eq!(answer["response"]["result"]["status"], "Success");
    assert_eq!(
        answer["response"]["convertedObjects"][0]["apiVersion"],
        "express.dev/v1beta1"
    );
    assert_eq!(
        answer["response"]["convertedObjects"][0]["spec"],
        json!({"cluster": "shop", "version": "2.0"})
    );

    let (status, answer) = post(&client, &url, b"{not json".to_vec())
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(status, 400);
    assert_eq!(answer["response"]["result"]["status"], "Failure");
    assert!(
        answer["response"]["result"]["message"]
            .as_str()
            .unwrap_or_default()
            .starts_with("the body is not a ConversionReview"),
        "{answer}"
    );

    // A client trusting another authority is refused at the handshake.
    let stranger = client_trusting(&authority_pem_of_another());
    assert!(post(&stranger, &url, review("x")).await.is_err());
    task.abort();
}

fn authority_pem_of_another() -> String {
    authority().certificate
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_certificate_moved_to_a_new_authority_mid_traffic_fails_no_request() {
    let old = authority();
    let new = authority();
    assert_ne!(old.certificate, new.certificate);
    let certificate = Arc::new(ServingCertificate::default());
    certificate
        .set(&serving_from(&old))
        .unwrap_or_else(|e| panic!("{e}"));
    let (url, task) = start(certificate.clone()).await;

    // The API server holds the bundle with both while the replicas move.
    let both = client_trusting(&bundle([
        old.certificate.as_str(),
        new.certificate.as_str(),
    ]));
    let stop = Arc::new(AtomicBool::new(false));
    let traffic = {
        let (stop, url) = (stop.clone(), url.clone());
        let trusted = bundle([old.certificate.as_str(), new.certificate.as_str()]);
        tokio::spawn(async move {
            let mut answered = 0;
            while !stop.load(Ordering::Relaxed) {
                // A fresh client per request: every request makes a new handshake.
                let fresh = client_trusting(&trusted);
                let (status, answer) = post(&fresh, &url, review("shop-be")).await?;
                if status != 200 || answer["response"]["result"]["status"] != "Success" {
                    return Err(format!("{status}: {answer}"));
                }
                answered += 1;
            }
            Ok::<_, String>(answered)
        })
    };
    tokio::time::sleep(std::time::Duration::from_millis(300)).await;
    certificate
        .set(&serving_from(&new))
        .unwrap_or_else(|e| panic!("{e}"));
    tokio::time::sleep(std::time::Duration::from_millis(300)).await;
    stop.store(true, Ordering::Relaxed);
    let answered = traffic
        .await
        .unwrap_or_else(|e| panic!("{e}"))
        .unwrap_or_else(|e| panic!("{e}"));
    assert!(answered > 2, "only {answered} requests were made");

    // Served from the new authority now: a client trusting only the old one is refused, one
    // trusting only the new one is answered.
    let only_old = client_trusting(&old.certificate);
    assert!(post(&only_old, &url, review("x")).await.is_err());
    let only_new = client_trusting(&new.certificate);
    assert!(post(&only_new, &url, review("x")).await.is_ok());
    assert!(post(&both, &url, review("x")).await.is_ok());
    task.abort();
}

#[test]
fn a_serving_certificate_reads_back_with_the_validity_it_was_issued_with() {
    let authority = authority();
    let authority_validity =
        validity_of(&authority.certificate, "authority").unwrap_or_else(|e| panic!("{e}"));
    let wanted = Validity {
        not_before: now() - 60,
        not_after: now() + 3600,
    };
    let serving = new_serving(
        &authority,
        &["express-operator-webhook.express-system.svc".to_owned()],
        wanted,
    )
    .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(
        validity_of(&serving.certificate, "serving").ok(),
        Some(wanted)
    );
    assert!(authority_validity.not_after > wanted.not_after);
    assert!(validity_of("not a certificate", "x").is_err());
}

mod keeper {
    //! The keeper on kubesim through a whole cycle of its authority (made, written into the
    //! CRD, rotated, retired), with lifetimes of minutes; at every step a client trusting what
    //! the CRD's `caBundle` holds then reaches the webhook.

    use super::*;
    use express_operator::controller::api::webhook::keeper::{Keeper, SECRET_NAME};
    use express_operator::controller::api::webhook::rotation::Upkeep;
    use k8s_openapi::api::core::v1::Secret;
    use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
    use kube::api::{Api, PostParams};

    use crate::support;

    const CRD: &str = "backends.express.dev";

    async fn crd_bundle(client: &kube::Client) -> String {
        let crd = Api::<CustomResourceDefinition>::all(client.clone())
            .get(CRD)
            .await
            .unwrap_or_else(|e| panic!("{e}"));
        let bundle = crd
            .spec
            .conversion
            .and_then(|c| c.webhook)
            .and_then(|w| w.client_config)
            .and_then(|c| c.ca_bundle)
            .map(|b| b.0)
            .unwrap_or_default();
        String::from_utf8(bundle).unwrap_or_default()
    }

    /// The Backend CRD naming the webhook, as a build that serves v1beta1 would apply it (its
    /// `caBundle` left to the keeper).
    async fn converting_crd(client: &kube::Client) {
        let api = Api::<CustomResourceDefinition>::all(client.clone());
        let mut crd = api.get(CRD).await.unwrap_or_else(|e| panic!("{e}"));
        crd.spec.conversion = Some(
            serde_json::from_value(json!({
                "strategy": "Webhook",
                "webhook": {"conversionReviewVersions": ["v1"],
                            "clientConfig": {"url": "https://127.0.0.1:9443/convert"}}
            }))
            .unwrap_or_else(|e| panic!("{e}")),
        );
        api.replace(CRD, &PostParams::default(), &crd)
            .await
            .unwrap_or_else(|e| panic!("{e}"));
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn an_authority_is_made_written_rotated_and_retired_and_the_bundle_always_trusts_what_is_served()
     {
        let (_sim, client) = support::kubesim_with_crds(0.1).await;
        express_operator::install::create_namespace(&client, "express-system")
            .await
            .unwrap_or_else(|e| panic!("{e}"));
        converting_crd(&client).await;
        assert!(crd_bundle(&client).await.is_empty());
        // Minutes, not a year: rotation is due 100 s after an authority is made.
        let policy = Policy {
            authority_lifetime: 1000,
            authority_renew_before: 900,
            serving_lifetime: 600,
            serving_renew_before: 60,
            propagation: 20,
            switch_grace: 30,
            clock_skew: 300,
        };
        // Two replicas, each with its own server and certificate.
        let mut replicas = Vec::new();
        for _ in 0..2 {
            let certificate = Arc::new(ServingCertificate::default());
            let (url, task) = start(certificate.clone()).await;
            let keeper = Keeper::new(
                client.clone(),
                "express-system".into(),
                vec!["127.0.0.1".into()],
                vec![CRD.into()],
                certificate.clone(),
            )
            .with_policy(policy);
            replicas.push((keeper, certificate, url, task));
        }
        let t0 = now();
        let mut steps = Vec::new();
        let mut bundles = Vec::new();
        // The replicas look in turn, at the times given: they agree through the API server.
        for (at, who) in [
            (0, 0),
            (0, 1),
            (1, 0),
            (2, 1),
            (3, 0),
            (100, 1),
            (101, 0),
            (102, 1),
            (110, 0),
            (123, 1),
            (140, 0),
            (153, 1),
            (154, 0),
            (155, 1),
        ] {
            let step = replicas[who]
                .0
                .look(t0 + at)
                .await
                .unwrap_or_else(|e| panic!("at +{at}: {e}"));
            steps.push((at, step));
            let bundle = crd_bundle(&client).await;
            for (_, certificate, url, _) in &replicas {
                if bundle.is_empty() || !certificate.is_set() {
                    continue;
                }
                // What the API server would trust now reaches what every replica serves now.
                let (status, _) = post(&client_trusting(&bundle), url, review("be"))
                    .await
                    .unwrap_or_else(|e| {
                        panic!(
                            "at +{at} ({step:?}) the bundle does not trust what {url} serves: {e}"
                        )
                    });
                assert_eq!(status, 200);
            }
            if bundles.last() != Some(&bundle) {
                bundles.push(bundle);
            }
        }
        use Upkeep::*;
        assert_eq!(
            steps,
            vec![
                (0, Create),
                (0, WriteBundle),
                (1, MarkInBundle),
                (2, Nothing),
                (3, Nothing),
                (100, Rotate),
                (101, WriteBundle),
                (102, MarkInBundle),
                (110, Nothing),
                (123, Nothing),
                (140, Nothing),
                (153, RetirePrevious),
                (154, WriteBundle),
                (155, Nothing)
            ]
        );
        // No bundle, the first authority, both, the second.
        let counts: Vec<usize> = bundles
            .iter()
            .map(|b| b.matches("BEGIN CERTIFICATE").count())
            .collect();
        assert_eq!(counts, vec![0, 1, 2, 1]);
        let secret = Api::<Secret>::namespaced(client.clone(), "express-system")
            .get(SECRET_NAME)
            .await
            .unwrap_or_else(|e| panic!("{e}"));
        let keys: Vec<_> = secret.data.unwrap_or_default().into_keys().collect();
        assert_eq!(keys, vec!["ca.crt", "ca.key"]);
        for (_, _, _, task) in replicas {
            task.abort();
        }
    }
}

mod membership {
    //! Who serves the webhook, on kubesim: two pods, one of a build that knows both versions and
    //! one of a build that knows only v1alpha1; each labels itself by what the CRDs list, and a
    //! version listed before it is served already keeps the older build out.

    use express_operator::controller::api::webhook::membership::Membership;
    use k8s_openapi::api::core::v1::Pod;
    use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
    use kube::api::{Api, ListParams, PostParams};
    use serde_json::json;

    use crate::support;

    const NS: &str = "express-system";
    const CRD: &str = "backends.express.dev";

    async fn operator_pod(client: &kube::Client, name: &str) {
        let pod: Pod = serde_json::from_value(json!({
            "apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": name, "namespace": NS,
                         "labels": {"app.kubernetes.io/part-of": "express-operator"}},
            "spec": {"containers": [{"name": "express-operator", "image": "express-operator"}]}
        }))
        .unwrap_or_else(|e| panic!("{e}"));
        Api::<Pod>::namespaced(client.clone(), NS)
            .create(&PostParams::default(), &pod)
            .await
            .unwrap_or_else(|e| panic!("{e}"));
    }

    /// The Backend CRD listing `v1beta1` beside `v1alpha1`, served or not.
    async fn list_v1beta1(client: &kube::Client, served: bool) {
        let api = Api::<CustomResourceDefinition>::all(client.clone());
        let mut crd = api.get(CRD).await.unwrap_or_else(|e| panic!("{e}"));
        crd.spec.versions.retain(|v| v.name == "v1alpha1");
        let mut beta = crd.spec.versions[0].clone();
        beta.name = "v1beta1".into();
        beta.served = served;
        beta.storage = false;
        crd.spec.versions.push(beta);
        api.replace(CRD, &PostParams::default(), &crd)
            .await
            .unwrap_or_else(|e| panic!("{e}"));
    }

    /// The pods the chart's Service selects.
    async fn selected(client: &kube::Client) -> Vec<String> {
        let params = ListParams::default()
            .labels("app.kubernetes.io/part-of=express-operator,express.dev/conversion=serving");
        let mut names: Vec<String> = Api::<Pod>::namespaced(client.clone(), NS)
            .list(&params)
            .await
            .unwrap_or_else(|e| panic!("{e}"))
            .items
            .into_iter()
            .filter_map(|p| p.metadata.name)
            .collect();
        names.sort();
        names
    }

    fn known(versions: &[&str]) -> Vec<String> {
        versions.iter().map(|v| (*v).to_owned()).collect()
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn only_pods_whose_build_knows_every_listed_version_are_selected() {
        let (_sim, client) = support::kubesim_with_crds(0.1).await;
        express_operator::install::create_namespace(&client, NS)
            .await
            .unwrap_or_else(|e| panic!("{e}"));
        operator_pod(&client, "express-operator-new").await;
        operator_pod(&client, "express-operator-old").await;
        let membership = |pod: &str, versions: &[&str]| {
            Membership::new(
                client.clone(),
                NS.into(),
                pod.into(),
                known(versions),
                vec![CRD.into()],
            )
        };
        let new = membership("express-operator-new", &["v1alpha1", "v1beta1"]);
        let old = membership("express-operator-old", &["v1alpha1"]);

        // One version: both builds know it, both serve.
        assert!(new.look().await.unwrap_or_else(|e| panic!("{e}")));
        assert!(old.look().await.unwrap_or_else(|e| panic!("{e}")));
        assert_eq!(
            selected(&client).await,
            ["express-operator-new", "express-operator-old"]
        );
        let annotations = Api::<Pod>::namespaced(client.clone(), NS)
            .get("express-operator-old")
            .await
            .unwrap_or_else(|e| panic!("{e}"))
            .metadata
            .annotations
            .unwrap_or_default();
        assert_eq!(annotations["express.dev/api-versions"], "v1alpha1");

        // v1beta1 listed, not served yet: the older build leaves first.
        list_v1beta1(&client, false).await;
        assert!(!old.look().await.unwrap_or_else(|e| panic!("{e}")));
        assert!(new.look().await.unwrap_or_else(|e| panic!("{e}")));
        assert_eq!(selected(&client).await, ["express-operator-new"]);

        // Served: still only the build that knows it.
        list_v1beta1(&client, true).await;
        assert!(!old.look().await.unwrap_or_else(|e| panic!("{e}")));
        assert!(new.look().await.unwrap_or_else(|e| panic!("{e}")));
        assert_eq!(selected(&client).await, ["express-operator-new"]);
    }
}
