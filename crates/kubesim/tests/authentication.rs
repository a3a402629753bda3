//! `kubesim serve --token`: with a token, every request must present it as a bearer token;
//! any other request is answered as the API server answers refused credentials (401, a Status
//! with reason Unauthorized). kubectl's view of the same is in tests/acceptance.
#![allow(clippy::expect_used, clippy::unwrap_used)] // tests fail loudly on unexpected values

use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::Namespace;
use kube::api::{Api, ListParams};
use kube::config::{KubeConfigOptions, Kubeconfig};
use kubesim::{Config, KubeSim};
use serde_json::{Value, json};

const TOKEN: &str = "s3cret-dc-a";

/// A client for `url` that sends `authorization` (None: no credentials at all), never retrying.
fn client_sending(url: &str, authorization: Option<&str>) -> kube::Client {
    let mut config = kube::Config::new(url.parse().unwrap());
    config.default_retry = false;
    if let Some(value) = authorization {
        config.headers.push((
            http::header::AUTHORIZATION,
            http::HeaderValue::from_str(value).unwrap(),
        ));
    }
    kube::Client::try_from(config).unwrap()
}

/// GET `path` with `client`: the status code and the body as JSON.
async fn get(client: &kube::Client, path: &str) -> (u16, Value) {
    let request = http::Request::builder().uri(path).body(Vec::new()).unwrap();
    let response = client
        .send(request.map(kube::client::Body::from))
        .await
        .expect("response");
    let status = response.status().as_u16();
    let bytes = http_body_util::BodyExt::collect(response.into_body())
        .await
        .expect("body")
        .to_bytes();
    (
        status,
        serde_json::from_slice(&bytes).unwrap_or(Value::Null),
    )
}

fn unauthorized() -> Value {
    json!({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
           "message": "Unauthorized", "reason": "Unauthorized", "code": 401})
}

#[tokio::test]
async fn any_request_without_the_token_gets_the_api_servers_401() {
    let sim = KubeSim::start(Config {
        token: Some(TOKEN.into()),
        ..Config::default()
    })
    .await
    .unwrap();
    for (what, authorization) in [
        ("no credentials", None),
        ("another token", Some("Bearer not-the-token")),
        ("the token, not as a bearer token", Some(TOKEN)),
        ("basic credentials", Some("Basic a3ViZTpzaW0=")),
    ] {
        let client = client_sending(sim.url(), authorization);
        for path in [
            "/api/v1/namespaces",
            "/version",
            "/apis",
            "/api/v1/namespaces/default/pods?watch=true",
            "/kubesim/counters",
        ] {
            assert_eq!(
                get(&client, path).await,
                (401, unauthorized()),
                "{what}: {path}"
            );
        }
        // kube's typed API sees the same as any client does: an API error, code 401.
        let refused = Api::<Namespace>::all(client)
            .list(&ListParams::default())
            .await
            .unwrap_err();
        assert!(
            matches!(&refused, kube::Error::Api(s) if s.code == 401 && s.reason == "Unauthorized"),
            "{what}: {refused:?}"
        );
    }
    // The right token opens every path.
    let client = client_sending(sim.url(), Some(&format!("Bearer {TOKEN}")));
    assert_eq!(get(&client, "/version").await.0, 200);
    assert_eq!(get(&client, "/api/v1/namespaces").await.0, 200);
    // So do the library's own client and the kubeconfig it writes, which present it.
    assert!(
        Api::<Namespace>::all(sim.client().unwrap())
            .list(&ListParams::default())
            .await
            .is_ok()
    );
    let kubeconfig = Kubeconfig::from_yaml(&sim.kubeconfig()).unwrap();
    let config = kube::Config::from_custom_kubeconfig(kubeconfig, &KubeConfigOptions::default())
        .await
        .unwrap();
    let names: Vec<String> = Api::<Namespace>::all(kube::Client::try_from(config).unwrap())
        .list(&ListParams::default())
        .await
        .unwrap()
        .items
        .into_iter()
        .filter_map(|n| n.metadata.name)
        .collect();
    assert!(names.contains(&"default".to_owned()), "{names:?}");
}

#[tokio::test]
async fn without_a_token_nothing_is_asked() {
    let sim = KubeSim::start(Config::default()).await.unwrap();
    let client = client_sending(sim.url(), None);
    assert_eq!(get(&client, "/api/v1/namespaces").await.0, 200);
    // Credentials nobody asked for are ignored, as before.
    let client = client_sending(sim.url(), Some("Bearer anything"));
    assert_eq!(get(&client, "/api/v1/namespaces").await.0, 200);
    assert!(!sim.kubeconfig().contains("token"));
}

/// The `kubesim serve` binary: `--token` guards the server, and the kubeconfig it writes
/// presents the token.
#[tokio::test]
async fn serve_with_a_token() {
    let directory = std::env::temp_dir().join(format!("kubesim-token-{}", std::process::id()));
    std::fs::create_dir_all(&directory).unwrap();
    let kubeconfig = directory.join("kubeconfig");
    let _ = std::fs::remove_file(&kubeconfig);
    let mut child = tokio::process::Command::new(env!("CARGO_BIN_EXE_kubesim"))
        .args(["serve", "--token", TOKEN, "--kubeconfig"])
        .arg(&kubeconfig)
        .stdout(std::process::Stdio::null())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(20);
    let text = loop {
        if let Ok(text) = std::fs::read_to_string(&kubeconfig)
            && text.contains("current-context")
        {
            break text;
        }
        assert!(Instant::now() < deadline, "kubesim serve did not start");
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    assert!(text.contains(TOKEN), "{text}");
    let url = text
        .lines()
        .find_map(|l| l.trim().strip_prefix("server: "))
        .unwrap()
        .to_owned();
    assert_eq!(
        get(&client_sending(&url, None), "/api/v1/namespaces").await,
        (401, unauthorized())
    );
    let config = kube::Config::from_custom_kubeconfig(
        Kubeconfig::from_yaml(&text).unwrap(),
        &KubeConfigOptions::default(),
    )
    .await
    .unwrap();
    assert!(
        Api::<Namespace>::all(kube::Client::try_from(config).unwrap())
            .list(&ListParams::default())
            .await
            .is_ok()
    );
    child.kill().await.unwrap();
    let _ = std::fs::remove_dir_all(&directory);

    // A token that cannot be sent in a header is refused up front.
    let refused = tokio::process::Command::new(env!("CARGO_BIN_EXE_kubesim"))
        .args(["serve", "--token", "two words"])
        .output()
        .await
        .unwrap();
    assert_eq!(refused.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&refused.stderr).contains("--token"));
}
