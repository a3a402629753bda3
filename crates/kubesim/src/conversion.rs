//! A CRD's conversion webhook, called as the API server calls it (DESIGN section 18): when an
//! object is read, or written, at a version other than the one it is stored at, the objects go
//! to the webhook in an `apiextensions.k8s.io/v1` `ConversionReview` and what it answers is what
//! the client sees (or what is stored). Only a webhook named by `clientConfig.url` can be
//! called: kubesim runs no Services, so one named by `clientConfig.service` fails every
//! conversion, saying so.
//!
//! The store is read and written under one lock, and a conversion happens inside it: the call is
//! made on a runtime of its own (kubesim's own workers may all be waiting on that lock) and
//! waited for, at most [`TIMEOUT`].

use std::collections::HashMap;
use std::sync::{Arc, Mutex, OnceLock, mpsc};
use std::time::Duration;

use serde_json::{Value, json};

/// How long a conversion may take, as the API server's default webhook timeout allows.
pub const TIMEOUT: Duration = Duration::from_secs(10);

/// A CRD's `spec.conversion` with strategy `Webhook`, and the version its objects are stored at.
#[derive(Clone, Debug, PartialEq)]
pub struct Webhook {
    /// `group/version` new and rewritten objects are stored at.
    pub storage_api_version: String,
    target: Target,
}

#[derive(Clone, Debug, PartialEq)]
enum Target {
    Url {
        url: String,
        ca_pem: Vec<u8>,
    },
    /// `clientConfig.service`, or a config naming nothing: why it cannot be called.
    Unreachable(String),
}

impl Webhook {
    /// The webhook a CRD names, `None` when its strategy is not `Webhook`.
    pub fn of_crd(spec: &Value, group: &str) -> Result<Option<Webhook>, String> {
        let conversion = &spec["conversion"];
        if conversion["strategy"].as_str() != Some("Webhook") {
            return Ok(None);
        }
        let storage = spec["versions"]
            .as_array()
            .into_iter()
            .flatten()
            .find(|v| v["storage"].as_bool() == Some(true))
            .and_then(|v| v["name"].as_str())
            .ok_or("spec.versions: exactly one version must be the storage version")?;
        let config = &conversion["webhook"]["clientConfig"];
        let target = match (config["url"].as_str(), config["service"].is_object()) {
            (Some(url), _) => Target::Url {
                url: url.to_owned(),
                ca_pem: match config["caBundle"].as_str() {
                    Some(encoded) if !encoded.is_empty() => {
                        use base64::Engine as _;
                        base64::engine::general_purpose::STANDARD
                            .decode(encoded)
                            .map_err(|e| {
                                format!("spec.conversion.webhook.clientConfig.caBundle: {e}")
                            })?
                    }
                    _ => Vec::new(),
                },
            },
            (None, true) => Target::Unreachable(
                "kubesim runs no Services: a conversion webhook must be given by clientConfig.url"
                    .to_owned(),
            ),
            (None, false) => {
                return Err(
                    "spec.conversion.webhook.clientConfig: Required value: exactly one of url or service is required"
                        .to_owned(),
                );
            }
        };
        Ok(Some(Webhook {
            storage_api_version: format!("{group}/{storage}"),
            target,
        }))
    }

    /// `objects` at `desired` (`group/version`): the ones already there are left as they are,
    /// the others converted in one review. Errors read as the API server's.
    pub fn convert(&self, objects: Vec<Value>, desired: &str) -> Result<Vec<Value>, String> {
        let pending: Vec<usize> = (0..objects.len())
            .filter(|&i| objects[i]["apiVersion"].as_str() != Some(desired))
            .collect();
        if pending.is_empty() {
            return Ok(objects);
        }
        let (url, ca_pem) = match &self.target {
            Target::Url { url, ca_pem } => (url.clone(), ca_pem.clone()),
            Target::Unreachable(why) => return Err(failed(why)),
        };
        // Only this request's answer is matched against it: unique within the process is enough.
        static REVIEWS: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
        let uid = format!(
            "kubesim-conversion-{}",
            REVIEWS.fetch_add(1, std::sync::atomic::Ordering::Relaxed)
        );
        let review = json!({
            "apiVersion": "apiextensions.k8s.io/v1", "kind": "ConversionReview",
            "request": {"uid": uid, "desiredAPIVersion": desired,
                        "objects": pending.iter().map(|&i| objects[i].clone()).collect::<Vec<_>>()},
        });
        let answer = call(url, ca_pem, review).map_err(|why| failed(&why))?;
        let converted =
            checked_answer(&answer, &uid, desired, pending.len()).map_err(|why| failed(&why))?;
        let mut objects = objects;
        for (index, mut object) in pending.into_iter().zip(converted) {
            // Only labels and annotations of the metadata may change in a conversion; the API
            // server keeps the rest from the object it sent.
            let mut metadata = objects[index]["metadata"].clone();
            for field in ["labels", "annotations"] {
                match object["metadata"].get(field) {
                    Some(value) => metadata[field] = value.clone(),
                    None => {
                        if let Some(map) = metadata.as_object_mut() {
                            map.remove(field);
                        }
                    }
                }
            }
            object["metadata"] = metadata;
            objects[index] = object;
        }
        Ok(objects)
    }

    /// One object at `desired`.
    pub fn convert_one(&self, object: Value, desired: &str) -> Result<Value, String> {
        self.convert(vec![object], desired)?
            .pop()
            .ok_or_else(|| failed("the webhook answered no object"))
    }
}

fn failed(why: &str) -> String {
    format!("conversion webhook failed: {why}")
}

/// The converted objects of a review's answer, refused unless it answers this request whole.
fn checked_answer(
    answer: &Value,
    uid: &str,
    desired: &str,
    count: usize,
) -> Result<Vec<Value>, String> {
    let response = &answer["response"];
    if response["uid"].as_str() != Some(uid) {
        return Err(format!(
            "expected response uid {uid:?}, got {:?}",
            response["uid"]
        ));
    }
    if response["result"]["status"].as_str() != Some("Success") {
        let message = response["result"]["message"]
            .as_str()
            .unwrap_or("no message");
        return Err(format!("the webhook refused the conversion: {message}"));
    }
    let converted = response["convertedObjects"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    if converted.len() != count {
        return Err(format!(
            "expected {count} converted objects, got {}",
            converted.len()
        ));
    }
    if let Some(wrong) = converted
        .iter()
        .find(|o| o["apiVersion"].as_str() != Some(desired))
    {
        return Err(format!(
            "invalid apiVersion {:?} of a converted object, expected {desired:?}",
            wrong["apiVersion"]
        ));
    }
    Ok(converted)
}

/// The runtime conversions are made on; never one of kubesim's workers.
fn runtime() -> &'static tokio::runtime::Runtime {
    static RUNTIME: OnceLock<tokio::runtime::Runtime> = OnceLock::new();
    RUNTIME.get_or_init(|| {
        tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .thread_name("kubesim-conversion")
            .enable_all()
            .build()
            .unwrap_or_else(|error| panic!("kubesim cannot start its conversion runtime: {error}"))
    })
}

/// One client per webhook and authority, so that its connection is kept between reviews.
fn client_for(url: &str, ca_pem: &[u8]) -> Result<kube::Client, String> {
    type Clients = Mutex<HashMap<(String, Vec<u8>), kube::Client>>;
    static CLIENTS: OnceLock<Clients> = OnceLock::new();
    let clients = CLIENTS.get_or_init(Default::default);
    let key = (url.to_owned(), ca_pem.to_vec());
    if let Some(client) = clients.lock().map_err(|e| e.to_string())?.get(&key) {
        return Ok(client.clone());
    }
    let uri: http::Uri = url.parse().map_err(|e| format!("url {url:?}: {e}"))?;
    let base = format!(
        "{}://{}",
        uri.scheme_str().unwrap_or("https"),
        uri.authority().map(|a| a.as_str()).unwrap_or_default()
    );
    let mut config = kube::Config::new(base.parse().map_err(|e| format!("url {url:?}: {e}"))?);
    if !ca_pem.is_empty() {
        use rustls_pki_types::CertificateDer;
        use rustls_pki_types::pem::PemObject as _;
        let roots = CertificateDer::pem_slice_iter(ca_pem)
            .map(|cert| cert.map(|c| c.as_ref().to_vec()))
            .collect::<Result<Vec<_>, _>>()
            .map_err(|e| format!("caBundle: {e}"))?;
        config.root_cert = Some(roots);
    }
    config.connect_timeout = Some(TIMEOUT);
    config.read_timeout = Some(TIMEOUT);
    let client = kube::Client::try_from(config).map_err(|e| e.to_string())?;
    clients
        .lock()
        .map_err(|e| e.to_string())?
        .insert(key, client.clone());
    Ok(client)
}

/// POSTs `review` to the webhook and waits for its answer.
fn call(url: String, ca_pem: Vec<u8>, review: Value) -> Result<Value, String> {
    let named = url.clone();
    let (sender, answer) = mpsc::channel();
    runtime().spawn(async move {
        let result = async {
            let client = client_for(&url, &ca_pem)?;
            let path = url
                .parse::<http::Uri>()
                .ok()
                .and_then(|u| u.path_and_query().map(|p| p.as_str().to_owned()))
                .unwrap_or_else(|| "/".to_owned());
            let body = serde_json::to_vec(&review).map_err(|e| e.to_string())?;
            let request = http::Request::post(path)
                .header(http::header::CONTENT_TYPE, "application/json")
                .body(body)
                .map_err(|e| e.to_string())?;
            client
                .request::<Value>(request)
                .await
                .map_err(|e| format!("Post {url:?}: {e}"))
        }
        .await;
        let _ = sender.send(result);
    });
    answer
        .recv_timeout(TIMEOUT + Duration::from_secs(1))
        .map_err(|_| format!("Post {named:?}: the webhook did not answer in {TIMEOUT:?}"))?
}

/// The shared handle a registry's types keep.
pub type Shared = Arc<Webhook>;
