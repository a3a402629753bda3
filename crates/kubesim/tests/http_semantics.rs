//! Semantics checked at the HTTP level (status codes, headers, raw bodies, watch streams),
//! through kube's raw request API so nothing is hidden by a typed client.
#![allow(clippy::expect_used, clippy::unwrap_used)] // tests fail loudly on unexpected values

use std::time::Duration;

use futures::{AsyncBufReadExt, TryStreamExt};
use kube::client::Body;
use kubesim::{Config, FaultRule, KubeSim};
use serde_json::{Value, json};

async fn start() -> (KubeSim, kube::Client) {
    let config = Config {
        bookmark_interval: Duration::from_millis(100),
        ..Config::default()
    };
    let sim = KubeSim::start(config).await.expect("start");
    let client = sim.client_without_retries().expect("client");
    (sim, client)
}

async fn call(
    client: &kube::Client,
    method: &str,
    path: &str,
    content_type: &str,
    body: Value,
) -> (u16, http::HeaderMap, Value) {
    let body = if body.is_null() {
        Vec::new()
    } else {
        serde_json::to_vec(&body).unwrap()
    };
    call_with_bytes(client, method, path, content_type, body).await
}

async fn call_with_bytes(
    client: &kube::Client,
    method: &str,
    path: &str,
    content_type: &str,
    body: Vec<u8>,
) -> (u16, http::HeaderMap, Value) {
    let request = http::Request::builder()
        .method(method)
        .uri(path)
        .header("content-type", content_type)
        .body(body)
        .unwrap();
    let response = client
        .send(request.map(Body::from))
        .await
        .expect("response");
    let status = response.status().as_u16();
    let headers = response.headers().clone();
    let bytes = http_body_util::BodyExt::collect(response.into_body())
        .await
        .expect("body")
        .to_bytes();
    let value = serde_json::from_slice(&bytes)
        .unwrap_or(Value::String(String::from_utf8_lossy(&bytes).into_owned()));
    (status, headers, value)
}

async fn get(client: &kube::Client, path: &str) -> (u16, Value) {
    let (status, _, value) = call(client, "GET", path, "application/json", Value::Null).await;
    (status, value)
}

async fn post(client: &kube::Client, path: &str, body: Value) -> (u16, Value) {
    let (status, _, value) = call(client, "POST", path, "application/json", body).await;
    (status, value)
}

/// Reads watch events (one JSON object per line) until `count` arrive or the stream ends.
async fn watch_lines(client: &kube::Client, path: &str, count: usize) -> Vec<Value> {
    let request = http::Request::builder().uri(path).body(Vec::new()).unwrap();
    let lines = client
        .request_stream(request)
        .await
        .expect("stream")
        .lines();
    let mut lines = std::pin::pin!(lines);
    let mut events = Vec::new();
    while events.len() < count {
        match tokio::time::timeout(Duration::from_secs(5), lines.try_next()).await {
            Ok(Ok(Some(line))) => events.push(serde_json::from_str(&line).expect("event JSON")),
            _ => break,
        }
    }
    events
}

fn cm(name: &str) -> Value {
    json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name}})
}

#[tokio::test]
async fn discovery_version_and_openapi() {
    let (_sim, client) = start().await;
    let (status, version) = get(&client, "/version").await;
    assert_eq!((status, version["major"].as_str()), (200, Some("1")));
    let (_, api) = get(&client, "/api").await;
    assert_eq!(api["versions"], json!(["v1"]));
    let (_, groups) = get(&client, "/apis").await;
    let names: Vec<&str> = groups["groups"]
        .as_array()
        .unwrap()
        .iter()
        .map(|g| g["name"].as_str().unwrap())
        .collect();
    assert!(
        names.contains(&"coordination.k8s.io")
            && names.contains(&"apps")
            && names.contains(&"events.k8s.io"),
        "{names:?}"
    );
    let (_, core) = get(&client, "/api/v1").await;
    let resources: Vec<&str> = core["resources"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["name"].as_str().unwrap())
        .collect();
    for wanted in [
        "namespaces",
        "pods",
        "pods/status",
        "configmaps",
        "secrets",
        "services",
        "events",
    ] {
        assert!(
            resources.contains(&wanted),
            "{wanted} missing from {resources:?}"
        );
    }
    let (status, _) = get(&client, "/apis/express.dev/v1alpha1").await;
    assert_eq!(status, 404, "not served before its CRD exists");
    let (_, v3) = get(&client, "/openapi/v3").await;
    let url = v3["paths"]["api/v1"]["serverRelativeURL"]
        .as_str()
        .unwrap()
        .to_owned();
    let (status, doc) = get(&client, &url).await;
    assert_eq!(status, 200);
    assert!(
        doc["paths"]["/api/v1/namespaces/{namespace}/pods/{name}"]["patch"]["parameters"]
            .to_string()
            .contains("fieldValidation")
    );
    let (status, v2) = get(&client, "/openapi/v2").await;
    assert_eq!((status, v2["swagger"].as_str()), (200, Some("2.0")));
}

/// Creates the Frontend CRD (the express-api one), answering its status and body.
async fn create_frontend_crd(client: &kube::Client) -> (u16, Value) {
    let crd = serde_json::to_value(express_api::crd::all().remove(2)).unwrap();
    post(
        client,
        "/apis/apiextensions.k8s.io/v1/customresourcedefinitions",
        crd,
    )
    .await
}

#[tokio::test]
async fn crd_becomes_served_with_table_columns() {
    let (_sim, client) = start().await;
    let (status, created) = create_frontend_crd(&client).await;
    assert_eq!(status, 201);
    let established = created["status"]["conditions"]
        .as_array()
        .unwrap()
        .iter()
        .any(|c| c["type"] == "Established" && c["status"] == "True");
    assert!(established);
    let (status, resources) = get(&client, "/apis/express.dev/v1alpha1").await;
    assert_eq!(status, 200);
    assert!(resources.to_string().contains("frontends/status"));
    let frontend = json!({"apiVersion": "express.dev/v1alpha1", "kind": "Frontend", "metadata": {"name": "acme-fe1"},
        "spec": {"clusterConfig": {"clusterName": "acme"}}});
    assert_eq!(
        post(
            &client,
            "/apis/express.dev/v1alpha1/namespaces/default/frontends",
            frontend
        )
        .await
        .0,
        201
    );
    let request = http::Request::builder()
        .uri("/apis/express.dev/v1alpha1/namespaces/default/frontends")
        .header(
            "accept",
            "application/json;as=Table;v=v1;g=meta.k8s.io,application/json",
        )
        .body(Vec::new())
        .unwrap();
    let table: Value = client.request(request).await.expect("table");
    assert_eq!(table["kind"], "Table");
    let columns: Vec<&str> = table["columnDefinitions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["name"].as_str().unwrap())
        .collect();
    assert_eq!(&columns[..3], ["Name", "Cluster", "Phase"]);
    assert_eq!(table["rows"][0]["cells"][0], "acme-fe1");
    assert_eq!(table["rows"][0]["cells"][1], "acme");
}

#[tokio::test]
async fn status_errors_carry_reason_code_and_message() {
    let (_sim, client) = start().await;
    let (status, body) = get(&client, "/api/v1/namespaces/default/configmaps/nope").await;
    assert_eq!(status, 404);
    assert_eq!(
        (
            body["kind"].as_str(),
            body["reason"].as_str(),
            body["code"].as_u64()
        ),
        (Some("Status"), Some("NotFound"), Some(404))
    );
    assert_eq!(body["message"], "configmaps \"nope\" not found");
    let (status, body) = post(
        &client,
        "/api/v1/namespaces/default/configmaps",
        json!({"metadata": {"name": "Bad_Name"}}),
    )
    .await;
    assert_eq!((status, body["reason"].as_str()), (422, Some("Invalid")));
    let (status, _) = get(&client, "/api/v1/namespaces/default/widgets").await;
    assert_eq!(status, 404);
    let (status, _, body) = call(
        &client,
        "PATCH",
        "/api/v1/namespaces/default/configmaps/nope",
        "text/plain",
        json!({}),
    )
    .await;
    assert_eq!(
        (status, body["reason"].as_str()),
        (415, Some("UnsupportedMediaType"))
    );
}

#[tokio::test]
async fn watch_resumes_bookmarks_and_410_in_stream() {
    let (sim, client) = start().await;
    post(&client, "/api/v1/namespaces/default/configmaps", cm("a")).await;
    let (_, list) = get(&client, "/api/v1/namespaces/default/configmaps").await;
    let rv = list["metadata"]["resourceVersion"]
        .as_str()
        .unwrap()
        .to_owned();
    post(&client, "/api/v1/namespaces/default/configmaps", cm("b")).await;

    let events = watch_lines(&client, &format!("/api/v1/namespaces/default/configmaps?watch=true&resourceVersion={rv}&allowWatchBookmarks=true"), 2).await;
    assert_eq!(events[0]["type"], "ADDED");
    assert_eq!(
        events[0]["object"]["metadata"]["name"], "b",
        "resumes after the list"
    );
    assert_eq!(events[1]["type"], "BOOKMARK");

    sim.compact();
    // Too old: HTTP 200 and an ERROR event carrying a 410 Status, then the stream ends.
    let request = http::Request::builder()
        .uri(format!(
            "/api/v1/namespaces/default/configmaps?watch=true&resourceVersion={rv}"
        ))
        .body(Vec::new())
        .unwrap();
    let response = client
        .send(request.map(Body::from))
        .await
        .expect("response");
    assert_eq!(response.status().as_u16(), 200);
    let events = watch_lines(
        &client,
        &format!("/api/v1/namespaces/default/configmaps?watch=true&resourceVersion={rv}"),
        3,
    )
    .await;
    assert_eq!(events.len(), 1);
    assert_eq!(events[0]["type"], "ERROR");
    assert_eq!(
        (
            events[0]["object"]["code"].as_u64(),
            events[0]["object"]["reason"].as_str()
        ),
        (Some(410), Some("Expired"))
    );
}

#[tokio::test]
async fn send_initial_events_ends_with_the_marked_bookmark() {
    let (_sim, client) = start().await;
    for name in ["a", "b"] {
        post(&client, "/api/v1/namespaces/default/configmaps", cm(name)).await;
    }
    let events = watch_lines(&client, "/api/v1/namespaces/default/configmaps?watch=true&sendInitialEvents=true&resourceVersionMatch=NotOlderThan&allowWatchBookmarks=true", 3).await;
    let kinds: Vec<&str> = events.iter().map(|e| e["type"].as_str().unwrap()).collect();
    assert_eq!(kinds, ["ADDED", "ADDED", "BOOKMARK"]);
    assert_eq!(
        events[2]["object"]["metadata"]["annotations"]["k8s.io/initial-events-end"],
        "true"
    );
    let (status, body) = get(
        &client,
        "/api/v1/namespaces/default/configmaps?watch=true&sendInitialEvents=true",
    )
    .await;
    assert_eq!(
        (status, body["reason"].as_str()),
        (422, Some("Invalid")),
        "refused without resourceVersionMatch"
    );
}

#[tokio::test]
async fn a_watch_of_a_custom_resource_from_before_its_crd_is_too_old() {
    let (_sim, client) = start().await;
    post(
        &client,
        "/api/v1/namespaces/default/configmaps",
        cm("before"),
    )
    .await;
    let crd = json!({"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
        "metadata": {"name": "gadgets.example.dev"},
        "spec": {"group": "example.dev", "scope": "Namespaced",
                 "names": {"plural": "gadgets", "kind": "Gadget"},
                 "versions": [{"name": "v1", "served": true, "storage": true, "schema": {"openAPIV3Schema":
                     {"type": "object", "x-kubernetes-preserve-unknown-fields": true}}}]}});
    let (status, created) = post(
        &client,
        "/apis/apiextensions.k8s.io/v1/customresourcedefinitions",
        crd,
    )
    .await;
    assert_eq!(status, 201, "{created}");
    let began = created["metadata"]["resourceVersion"].as_str().unwrap();
    let gadgets = "/apis/example.dev/v1/namespaces/default/gadgets";
    post(
        &client,
        gadgets,
        json!({"apiVersion": "example.dev/v1", "kind": "Gadget", "metadata": {"name": "g"}}),
    )
    .await;
    // The API server's watch cache of a custom resource begins with it: from an earlier
    // revision, an ERROR 410 and the end of the stream, in its words.
    let events = watch_lines(
        &client,
        &format!("{gadgets}?watch=true&resourceVersion=1"),
        2,
    )
    .await;
    assert_eq!(
        events,
        [
            json!({"type": "ERROR", "object": {"kind": "Status", "apiVersion": "v1", "metadata": {},
            "status": "Failure", "message": format!("too old resource version: 1 ({began})"),
            "reason": "Expired", "code": 410}})
        ]
    );
    let events = watch_lines(
        &client,
        &format!("{gadgets}?watch=true&resourceVersion={began}"),
        1,
    )
    .await;
    assert_eq!(
        (&events[0]["type"], &events[0]["object"]["metadata"]["name"]),
        (&json!("ADDED"), &json!("g")),
        "from the CRD's own revision on, its history is there"
    );
    // Built-in resources keep theirs from the start.
    let events = watch_lines(
        &client,
        "/api/v1/namespaces/default/configmaps?watch=true&resourceVersion=1",
        1,
    )
    .await;
    assert_eq!(events[0]["type"], "ADDED");
}

#[tokio::test]
async fn an_injected_403_reads_as_rbacs_refusal_and_other_codes_carry_their_reason() {
    let (sim, client) = start().await;
    for (verb, resource, status) in [
        ("list", "configmaps", 403),
        ("get", "leases.coordination.k8s.io", 403),
        ("list", "namespaces", 403),
        ("list", "secrets", 400),
    ] {
        sim.faults().add_rule(FaultRule {
            verb: Some(verb.into()),
            resource: Some(resource.into()),
            rate: 1.0,
            status,
            retry_after_seconds: None,
        });
    }
    let refused = |message: &str, details: Value| {
        json!({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
               "message": message, "reason": "Forbidden", "details": details, "code": 403})
    };
    assert_eq!(
        get(&client, "/api/v1/namespaces/default/configmaps").await,
        (
            403,
            refused(
                "configmaps is forbidden: User \"kubesim\" cannot list resource \"configmaps\" in API group \"\" in the namespace \"default\"",
                json!({"kind": "configmaps"})
            )
        )
    );
    assert_eq!(
        get(
            &client,
            "/apis/coordination.k8s.io/v1/namespaces/default/leases/l"
        )
        .await,
        (
            403,
            refused(
                "leases.coordination.k8s.io \"l\" is forbidden: User \"kubesim\" cannot get resource \"leases\" in API group \"coordination.k8s.io\" in the namespace \"default\"",
                json!({"name": "l", "group": "coordination.k8s.io", "kind": "leases"})
            )
        )
    );
    assert_eq!(
        get(&client, "/api/v1/namespaces").await.1["message"],
        "namespaces is forbidden: User \"kubesim\" cannot list resource \"namespaces\" in API group \"\" at the cluster scope"
    );
    let (status, bad) = get(&client, "/api/v1/namespaces/default/secrets").await;
    assert_eq!((status, bad["reason"].as_str()), (400, Some("BadRequest")));
}

#[tokio::test]
async fn faults_counters_and_closed_watches() {
    let (sim, client) = start().await;
    sim.faults().add_rule(FaultRule {
        verb: Some("create".into()),
        resource: Some("configmaps".into()),
        rate: 1.0,
        status: 429,
        retry_after_seconds: Some(2),
    });
    let (status, headers, body) = call(
        &client,
        "POST",
        "/api/v1/namespaces/default/configmaps",
        "application/json",
        cm("x"),
    )
    .await;
    // As API Priority and Fairness answers: plain text, not a Status; the wait in Retry-After.
    assert_eq!(
        (status, body),
        (
            429,
            Value::String("Too many requests, please try again later.\n".into())
        )
    );
    let header = |name: &str| headers.get(name).and_then(|v| v.to_str().ok());
    assert_eq!(
        (header("retry-after"), header("content-type")),
        (Some("2"), Some("text/plain; charset=utf-8"))
    );
    sim.faults().clear();
    sim.faults().add_rule(FaultRule {
        verb: None,
        resource: Some("secrets".into()),
        rate: 1.0,
        status: 503,
        retry_after_seconds: None,
    });
    assert_eq!(
        get(&client, "/api/v1/namespaces/default/secrets").await.0,
        503
    );
    assert_eq!(
        get(&client, "/api/v1/namespaces/default/configmaps")
            .await
            .0,
        200,
        "other resources unaffected"
    );
    sim.faults().clear();

    sim.faults().set_latency(Duration::from_millis(150));
    let started = std::time::Instant::now();
    get(&client, "/api/v1/namespaces/default/configmaps").await;
    assert!(started.elapsed() >= Duration::from_millis(150));
    sim.faults().set_latency(Duration::ZERO);

    let counters = sim.counters();
    assert_eq!(counters.count("create", "configmaps"), 1);
    assert_eq!(counters.count("list", "secrets"), 1);
    let (_, over_http) = get(&client, "/kubesim/counters").await;
    assert_eq!(over_http["byVerbAndResource"]["create configmaps"], 1);
    // Per User-Agent alone, for a benchmark that polls them at fleet size.
    let probe = sim.client_with_agent("probe/1.0").unwrap();
    get(&probe, "/api/v1/namespaces/default/configmaps").await;
    let (code, agents) = get(&client, "/kubesim/counters/agents").await;
    assert_eq!(code, 200);
    assert_eq!(agents["probe/1.0"], json!({"list configmaps": 1}));

    // Closing all watches ends open streams.
    let watching = tokio::spawn({
        let client = client.clone();
        async move {
            watch_lines(
                &client,
                "/api/v1/namespaces/default/configmaps?watch=true&resourceVersion=0",
                100,
            )
            .await
        }
    });
    tokio::time::sleep(Duration::from_millis(200)).await;
    sim.faults().close_watches();
    let events = tokio::time::timeout(Duration::from_secs(3), watching)
        .await
        .expect("watch ended")
        .expect("task");
    assert!(events.len() < 100);
}

#[tokio::test]
async fn strategic_merge_for_built_in_kinds_merges_lists_by_key() {
    let (_sim, client) = start().await;
    let pod = json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"},
        "spec": {"containers": [{"name": "a", "image": "x:1"}, {"name": "b", "image": "y:1"}]}});
    assert_eq!(
        post(&client, "/api/v1/namespaces/default/pods", pod)
            .await
            .0,
        201
    );
    let (status, _, patched) = call(
        &client,
        "PATCH",
        "/api/v1/namespaces/default/pods/p",
        "application/strategic-merge-patch+json",
        json!({"metadata": {"labels": {"tier": "fe"}}, "spec": {"containers": [{"name": "b", "image": "y:2"}]}}),
    )
    .await;
    assert_eq!(status, 200);
    let containers: Vec<(String, String)> = patched["spec"]["containers"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| {
            (
                c["name"].as_str().unwrap().to_owned(),
                c["image"].as_str().unwrap().to_owned(),
            )
        })
        .collect();
    assert_eq!(
        containers,
        [
            ("a".to_owned(), "x:1".to_owned()),
            ("b".to_owned(), "y:2".to_owned())
        ]
    );
    assert_eq!(patched["metadata"]["labels"]["tier"], "fe");
}

#[tokio::test]
async fn refuses_non_loopback_addresses() {
    let config = Config {
        addr: "0.0.0.0:0".parse().unwrap(),
        ..Config::default()
    };
    let refused = KubeSim::start(config).await;
    assert!(matches!(refused, Err(kubesim::StartError::NotLoopback(_))));
}

/// A watch with a selector sees an object leave it as DELETED and enter it as ADDED, as the API
/// server does; changes outside the selection are not sent. Checked on a resumed watch (the
/// changes replayed from history) and a live one (the changes after it started).
#[tokio::test]
async fn selector_watches_see_objects_enter_and_leave() {
    let (_sim, client) = start().await;
    let labelled = |name: &str, team: &str| {
        json!({"apiVersion": "v1", "kind": "ConfigMap",
               "metadata": {"name": name, "labels": {"team": team}}})
    };
    post(
        &client,
        "/api/v1/namespaces/default/configmaps",
        labelled("a", "blue"),
    )
    .await;
    let (_, list) = get(&client, "/api/v1/namespaces/default/configmaps").await;
    let rv = list["metadata"]["resourceVersion"]
        .as_str()
        .unwrap()
        .to_owned();
    let relabel = |name: &'static str, team: &'static str| {
        let client = client.clone();
        async move {
            let (status, _, _) = call(
                &client,
                "PATCH",
                &format!("/api/v1/namespaces/default/configmaps/{name}"),
                "application/merge-patch+json",
                json!({"metadata": {"labels": {"team": team}}}),
            )
            .await;
            assert_eq!(status, 200);
        }
    };
    relabel("a", "red").await; // leaves team=blue
    post(
        &client,
        "/api/v1/namespaces/default/configmaps",
        labelled("b", "red"),
    )
    .await; // never in
    relabel("b", "blue").await; // enters team=blue
    relabel("b", "blue").await; // unchanged: no event at all

    let path = format!(
        "/api/v1/namespaces/default/configmaps?watch=true&labelSelector=team%3Dblue&resourceVersion={rv}"
    );
    let replayed = watch_lines(&client, &path, 2).await;
    let seen: Vec<(&str, &str)> = replayed
        .iter()
        .map(|e| {
            (
                e["type"].as_str().unwrap(),
                e["object"]["metadata"]["name"].as_str().unwrap(),
            )
        })
        .collect();
    assert_eq!(seen, [("DELETED", "a"), ("ADDED", "b")]);
    // DELETED carries the object's new state, as the API server's does.
    assert_eq!(replayed[0]["object"]["metadata"]["labels"]["team"], "red");

    // Live: start watching now, then move b out and a back in.
    let (_, list) = get(&client, "/api/v1/namespaces/default/configmaps").await;
    let now = list["metadata"]["resourceVersion"]
        .as_str()
        .unwrap()
        .to_owned();
    let live_path = format!(
        "/api/v1/namespaces/default/configmaps?watch=true&labelSelector=team%3Dblue&resourceVersion={now}"
    );
    let watcher = tokio::spawn({
        let client = client.clone();
        async move { watch_lines(&client, &live_path, 2).await }
    });
    tokio::time::sleep(Duration::from_millis(200)).await;
    relabel("b", "green").await;
    relabel("a", "blue").await;
    let live = watcher.await.unwrap();
    let seen: Vec<(&str, &str)> = live
        .iter()
        .map(|e| {
            (
                e["type"].as_str().unwrap(),
                e["object"]["metadata"]["name"].as_str().unwrap(),
            )
        })
        .collect();
    assert_eq!(seen, [("DELETED", "b"), ("ADDED", "a")]);
}

/// A request body over the API server's 3 MiB limit is refused with 413 and a Status naming the
/// limit; nothing is stored. A large body under it is accepted.
#[tokio::test]
async fn bodies_over_the_limit_are_refused_with_413() {
    let (_sim, client) = start().await;
    let big = |name: &str, bytes: usize| {
        json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name},
               "data": {"blob": "x".repeat(bytes)}})
    };
    let (status, body) = post(
        &client,
        "/api/v1/namespaces/default/configmaps",
        big("huge", 4 * 1024 * 1024),
    )
    .await;
    assert_eq!(
        (status, body["reason"].as_str(), body["code"].as_u64()),
        (413, Some("RequestEntityTooLarge"), Some(413)),
        "{body}"
    );
    assert!(
        body["message"]
            .as_str()
            .unwrap()
            .contains("limit is 3145728"),
        "{body}"
    );
    let (status, _) = get(&client, "/api/v1/namespaces/default/configmaps/huge").await;
    assert_eq!(status, 404, "nothing stored");
    let (status, _) = post(
        &client,
        "/api/v1/namespaces/default/configmaps",
        big("large", 1024 * 1024),
    )
    .await;
    assert_eq!(status, 201);
}

#[tokio::test]
async fn uids_are_immutable_and_every_delete_is_recorded_with_its_grace_period() {
    let (sim, client) = start().await;
    let path = "/api/v1/namespaces/default/configmaps";
    let (status, created) = post(&client, path, json!({"metadata": {"name": "cm"}})).await;
    assert_eq!(status, 201, "{created}");
    let uid = created["metadata"]["uid"].as_str().unwrap().to_owned();

    // A merge patch naming another uid changes an immutable field: 422, nothing written.
    let (status, _, body) = call(
        &client,
        "PATCH",
        &format!("{path}/cm"),
        "application/merge-patch+json",
        json!({"metadata": {"uid": "someone-else", "labels": {"a": "b"}}}),
    )
    .await;
    assert_eq!(
        (status, body["reason"].as_str()),
        (422, Some("Invalid")),
        "{body}"
    );
    assert!(body["message"].as_str().unwrap().contains("metadata.uid"));
    // Naming its own uid is a guard that holds.
    let (status, _, body) = call(
        &client,
        "PATCH",
        &format!("{path}/cm"),
        "application/merge-patch+json",
        json!({"metadata": {"uid": uid, "labels": {"a": "b"}}}),
    )
    .await;
    assert_eq!(
        (status, body["metadata"]["labels"]["a"].as_str()),
        (200, Some("b"))
    );
    // An update for another object of that name is a failed precondition: 409.
    let mut replaced = body.clone();
    replaced["metadata"]["uid"] = json!("someone-else");
    let (status, _, body) = call(
        &client,
        "PUT",
        &format!("{path}/cm"),
        "application/json",
        replaced,
    )
    .await;
    assert_eq!(status, 409, "{body}");
    assert!(
        body["message"]
            .as_str()
            .unwrap()
            .contains("Precondition failed: UID")
    );

    let (status, _, _) = call(
        &client,
        "DELETE",
        &format!("{path}/cm?gracePeriodSeconds=0"),
        "application/json",
        json!({"preconditions": {"uid": uid}}),
    )
    .await;
    assert_eq!(status, 200);
    let (status, _, _) = call(
        &client,
        "DELETE",
        &format!("{path}/cm"),
        "application/json",
        Value::Null,
    )
    .await;
    assert_eq!(status, 404);
    let deletes = sim.deletes();
    assert_eq!(deletes.len(), 2, "{deletes:?}");
    assert_eq!(
        (
            deletes[0].resource.as_str(),
            deletes[0].name.as_str(),
            deletes[0].grace_period_seconds,
            deletes[0].precondition_uid.as_deref(),
            deletes[0].status,
        ),
        ("configmaps", "cm", Some(0), Some(uid.as_str()), 200)
    );
    assert_eq!(
        (deletes[1].grace_period_seconds, deletes[1].status),
        (None, 404)
    );
    let (status, over_http) = get(&client, "/kubesim/deletes").await;
    assert_eq!((status, over_http.as_array().map(Vec::len)), (200, Some(2)));
}

async fn post_bytes(
    client: &kube::Client,
    path: &str,
    content_type: &str,
    body: Vec<u8>,
) -> (u16, Value) {
    let (status, _, value) = call_with_bytes(client, "POST", path, content_type, body).await;
    (status, value)
}

/// `k8s\0` + runtime.Unknown{typeMeta, raw}, as client-go writes a protobuf body.
fn protobuf_body(api_version: &str, kind: &str, raw: Vec<u8>) -> Vec<u8> {
    use prost::Message as _;
    let envelope = k8s_pb::apimachinery::pkg::runtime::Unknown {
        type_meta: Some(k8s_pb::apimachinery::pkg::runtime::TypeMeta {
            api_version: Some(api_version.into()),
            kind: Some(kind.into()),
        }),
        raw: Some(raw),
        content_encoding: None,
        content_type: None,
    };
    [b"k8s\0".as_slice(), &envelope.encode_to_vec()].concat()
}

/// Protobuf bodies are decoded into the object a JSON body would carry; bodies that are not
/// protobuf, truncated, of a kind kubesim cannot map, or too large are refused with a 4xx naming
/// the problem, and nothing is stored.
#[tokio::test]
async fn protobuf_bodies_are_decoded_and_bad_ones_refused() {
    use prost::Message as _;
    const PROTOBUF: &str = "application/vnd.kubernetes.protobuf";
    let (_sim, client) = start().await;
    let path = "/api/v1/namespaces/default/configmaps";
    let configmap = |name: &str, blob: String| k8s_pb::api::core::v1::ConfigMap {
        metadata: Some(k8s_pb::apimachinery::pkg::apis::meta::v1::ObjectMeta {
            name: Some(name.into()),
            ..Default::default()
        }),
        data: [("blob".to_owned(), blob)].into(),
        ..Default::default()
    };

    let good = protobuf_body(
        "v1",
        "ConfigMap",
        configmap("pb", "hello".into()).encode_to_vec(),
    );
    let (status, body) = post_bytes(&client, path, PROTOBUF, good.clone()).await;
    assert_eq!(
        (status, &body["data"]),
        (201, &json!({"blob": "hello"})),
        "{body}"
    );
    let (status, body) = get(&client, "/api/v1/namespaces/default/configmaps/pb").await;
    assert_eq!((status, body["kind"].as_str()), (200, Some("ConfigMap")));

    let refusals = [
        (
            "truncated",
            good[..good.len() - 4].to_vec(),
            PROTOBUF,
            400,
            "could not be decoded",
        ),
        (
            "wrong envelope",
            b"{\"kind\":\"ConfigMap\"}".to_vec(),
            PROTOBUF,
            400,
            "prefix",
        ),
        (
            "unmapped kind",
            protobuf_body("apps/v1", "Deployment", Vec::new()),
            PROTOBUF,
            415,
            "apps/v1/Deployment",
        ),
        (
            "unknown media type",
            b"\xa1\x00".to_vec(),
            "application/cbor",
            415,
            "application/cbor",
        ),
        (
            "over the limit",
            protobuf_body(
                "v1",
                "ConfigMap",
                configmap("huge", "x".repeat(4 << 20)).encode_to_vec(),
            ),
            PROTOBUF,
            413,
            "limit",
        ),
    ];
    for (case, bytes, content_type, code, words) in refusals {
        let (status, body) = post_bytes(&client, path, content_type, bytes).await;
        assert_eq!(
            (status, body["code"].as_u64()),
            (code, Some(u64::from(code))),
            "{case}: {body}"
        );
        let message = body["message"].as_str().unwrap_or_default();
        assert!(message.contains(words), "{case}: {message}");
    }
    let (_, list) = get(&client, path).await;
    assert_eq!(
        list["items"].as_array().map(Vec::len),
        Some(1),
        "only the good one is stored"
    );
}

/// Without `fieldValidation` the API server's default is Warn: unknown fields are pruned and
/// each is named in a `Warning: 299` header. An unknown directive is a 400.
#[tokio::test]
async fn unknown_fields_warn_by_default_with_a_warning_header_each() {
    let (_sim, client) = start().await;
    let (status, _) = create_frontend_crd(&client).await;
    assert_eq!(status, 201);
    let path = "/apis/express.dev/v1alpha1/namespaces/default/frontends";
    let frontend = json!({"apiVersion": "express.dev/v1alpha1", "kind": "Frontend",
        "metadata": {"name": "acme-fe1"},
        "spec": {"clusterConfig": {"clusterName": "acme", "colour": "red"}, "tpyo": 1}});
    let (status, headers, body) =
        call(&client, "POST", path, "application/json", frontend.clone()).await;
    assert_eq!(status, 201, "{body}");
    let warnings: Vec<&str> = headers
        .get_all("warning")
        .iter()
        .filter_map(|v| v.to_str().ok())
        .collect();
    assert_eq!(
        warnings,
        [
            r#"299 - "unknown field \"spec.clusterConfig.colour\"""#,
            r#"299 - "unknown field \"spec.tpyo\"""#
        ]
    );
    assert_eq!(body["spec"].get("tpyo"), None);
    assert_eq!(body["spec"]["clusterConfig"].get("colour"), None);

    let (status, headers, body) = call(
        &client,
        "POST",
        &format!("{path}?fieldValidation=Loose"),
        "application/json",
        frontend,
    )
    .await;
    assert_eq!(
        (status, body["reason"].as_str()),
        (400, Some("BadRequest")),
        "{body}"
    );
    assert!(
        body["message"]
            .as_str()
            .unwrap()
            .contains("Unsupported value: \"Loose\"")
    );
    assert!(headers.get("warning").is_none());
}
