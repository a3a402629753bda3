//! The simulated kubelet and the garbage collector, observed through kube-rs.
#![allow(clippy::expect_used, clippy::unwrap_used)] // tests fail loudly on unexpected values

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::{ConfigMap, Namespace, Pod};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference;
use kube::api::{Api, DeleteParams, PostParams};
use kube::core::ObjectMeta;
use kubesim::kubelet::{Behavior, KubeletConfig, KubeletRule};
use kubesim::{Config, KubeSim};
use serde_json::json;

async fn start() -> (KubeSim, kube::Client) {
    let config = Config {
        pod_termination_seconds: 0.3,
        kubelet: KubeletConfig {
            startup_seconds: 0.2,
            ..KubeletConfig::default()
        },
        ..Config::default()
    };
    let sim = KubeSim::start(config).await.expect("start");
    let client = sim.client().expect("client");
    (sim, client)
}

fn pod(name: &str, image: &str, annotations: &[(&str, &str)]) -> Pod {
    serde_json::from_value(json!({
        "metadata": {"name": name, "annotations": annotations.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect::<BTreeMap<_, _>>()},
        "spec": {"containers": [{"name": "express", "image": image}]}
    }))
    .expect("pod")
}

fn is_ready(pod: &Pod) -> bool {
    pod.status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .into_iter()
        .flatten()
        .any(|c| c.type_ == "Ready" && c.status == "True")
}

fn restarts(pod: &Pod) -> i32 {
    pod.status
        .as_ref()
        .and_then(|s| s.container_statuses.as_ref())
        .and_then(|c| c.first())
        .map_or(0, |c| c.restart_count)
}

async fn eventually<T>(
    what: &str,
    timeout: Duration,
    mut probe: impl AsyncFnMut() -> Option<T>,
) -> T {
    let deadline = Instant::now() + timeout;
    loop {
        if let Some(value) = probe().await {
            return value;
        }
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
}

#[tokio::test]
async fn pods_start_become_ready_and_terminate_gracefully() {
    let (_sim, client) = start().await;
    let pods: Api<Pod> = Api::namespaced(client, "default");
    let created = pods
        .create(&PostParams::default(), &pod("p", "express:v1", &[]))
        .await
        .expect("create");
    assert_eq!(
        created.status.and_then(|s| s.phase).as_deref(),
        Some("Pending")
    );
    let ready = eventually("Ready", Duration::from_secs(5), async || {
        pods.get("p").await.ok().filter(is_ready)
    })
    .await;
    assert_eq!(
        ready.status.as_ref().and_then(|s| s.phase.as_deref()),
        Some("Running")
    );

    pods.delete("p", &DeleteParams::default())
        .await
        .expect("delete");
    let terminating = pods.get("p").await.expect("still there while terminating");
    assert!(terminating.metadata.deletion_timestamp.is_some());
    eventually("gone", Duration::from_secs(5), async || {
        pods.get_opt("p")
            .await
            .expect("get")
            .is_none()
            .then_some(())
    })
    .await;
}

#[tokio::test]
async fn behaviours_from_annotations() {
    let (_sim, client) = start().await;
    let pods: Api<Pod> = Api::namespaced(client, "default");
    pods.create(
        &PostParams::default(),
        &pod(
            "never",
            "express:v1",
            &[("kubesim.dev/behavior", "never-ready")],
        ),
    )
    .await
    .expect("create");
    pods.create(
        &PostParams::default(),
        &pod(
            "crash",
            "express:v1",
            &[("kubesim.dev/behavior", "crash-loop")],
        ),
    )
    .await
    .expect("create");
    pods.create(
        &PostParams::default(),
        &pod(
            "stuck",
            "express:v1",
            &[("kubesim.dev/behavior", "stuck-terminating")],
        ),
    )
    .await
    .expect("create");
    pods.create(
        &PostParams::default(),
        &pod(
            "slow",
            "express:v1",
            &[("kubesim.dev/startup-seconds", "1")],
        ),
    )
    .await
    .expect("create");

    let crashing = eventually("restarts", Duration::from_secs(5), async || {
        pods.get("crash").await.ok().filter(|p| restarts(p) >= 2)
    })
    .await;
    let waiting = crashing
        .status
        .and_then(|s| s.container_statuses)
        .and_then(|c| c.into_iter().next())
        .and_then(|c| c.state)
        .and_then(|s| s.waiting);
    assert_eq!(
        waiting.and_then(|w| w.reason).as_deref(),
        Some("CrashLoopBackOff")
    );
    assert!(!is_ready(&pods.get("never").await.expect("never")));
    assert!(
        !is_ready(&pods.get("slow").await.expect("slow")),
        "startup-seconds 1 is not over yet"
    );
    eventually("slow Ready", Duration::from_secs(5), async || {
        pods.get("slow").await.ok().filter(is_ready)
    })
    .await;

    eventually("stuck Ready", Duration::from_secs(5), async || {
        pods.get("stuck").await.ok().filter(is_ready)
    })
    .await;
    pods.delete("stuck", &DeleteParams::default())
        .await
        .expect("delete");
    tokio::time::sleep(Duration::from_millis(800)).await;
    let stuck = pods.get("stuck").await.expect("never finishes deleting");
    assert!(stuck.metadata.deletion_timestamp.is_some());
    assert!(!is_ready(&stuck), "a terminating pod is not Ready");
}

#[tokio::test]
async fn behaviour_rules_match_images_at_run_time() {
    let (sim, client) = start().await;
    sim.kubelet().add_rule(KubeletRule {
        image: Some("express:broken".into()),
        behavior: Some(Behavior::NeverReady),
        ..Default::default()
    });
    let pods: Api<Pod> = Api::namespaced(client, "default");
    pods.create(
        &PostParams::default(),
        &pod("bad", "registry/express:broken", &[]),
    )
    .await
    .expect("create");
    pods.create(
        &PostParams::default(),
        &pod("good", "registry/express:fine", &[]),
    )
    .await
    .expect("create");
    eventually("good Ready", Duration::from_secs(5), async || {
        pods.get("good").await.ok().filter(is_ready)
    })
    .await;
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(!is_ready(&pods.get("bad").await.expect("bad")));
}

fn owned_config_map(name: &str, owner: &ConfigMap) -> ConfigMap {
    ConfigMap {
        metadata: ObjectMeta {
            name: Some(name.into()),
            owner_references: Some(vec![OwnerReference {
                api_version: "v1".into(),
                kind: "ConfigMap".into(),
                name: owner.metadata.name.clone().unwrap(),
                uid: owner.metadata.uid.clone().unwrap(),
                controller: Some(true),
                block_owner_deletion: Some(true),
            }]),
            ..Default::default()
        },
        ..Default::default()
    }
}

async fn owner_and_child(cms: &Api<ConfigMap>, owner: &str, child: &str) {
    let created = cms
        .create(
            &PostParams::default(),
            &ConfigMap {
                metadata: ObjectMeta {
                    name: Some(owner.into()),
                    ..Default::default()
                },
                ..Default::default()
            },
        )
        .await
        .expect("owner");
    cms.create(&PostParams::default(), &owned_config_map(child, &created))
        .await
        .expect("child");
}

#[tokio::test]
async fn garbage_collection_background_foreground_and_orphan() {
    let (_sim, client) = start().await;
    let cms: Api<ConfigMap> = Api::namespaced(client.clone(), "default");

    owner_and_child(&cms, "bg-owner", "bg-child").await;
    cms.delete("bg-owner", &DeleteParams::background())
        .await
        .expect("delete");
    eventually(
        "background child gone",
        Duration::from_secs(5),
        async || {
            cms.get_opt("bg-child")
                .await
                .expect("get")
                .is_none()
                .then_some(())
        },
    )
    .await;

    owner_and_child(&cms, "fg-owner", "fg-child").await;
    cms.delete("fg-owner", &DeleteParams::foreground())
        .await
        .expect("delete");
    eventually(
        "foreground: both gone",
        Duration::from_secs(5),
        async || {
            let owner = cms.get_opt("fg-owner").await.expect("get");
            let child = cms.get_opt("fg-child").await.expect("get");
            (owner.is_none() && child.is_none()).then_some(())
        },
    )
    .await;

    owner_and_child(&cms, "or-owner", "or-child").await;
    cms.delete("or-owner", &DeleteParams::orphan())
        .await
        .expect("delete");
    let orphan = eventually("orphaned", Duration::from_secs(5), async || {
        let owner_gone = cms.get_opt("or-owner").await.expect("get").is_none();
        cms.get_opt("or-child").await.expect("get").filter(|c| {
            owner_gone
                && c.metadata
                    .owner_references
                    .as_ref()
                    .is_none_or(|r| r.is_empty())
        })
    })
    .await;
    assert!(orphan.metadata.deletion_timestamp.is_none());
}

#[tokio::test]
async fn deleting_a_namespace_deletes_its_contents() {
    let (_sim, client) = start().await;
    let namespaces: Api<Namespace> = Api::all(client.clone());
    namespaces
        .create(
            &PostParams::default(),
            &Namespace {
                metadata: ObjectMeta {
                    name: Some("tenant".into()),
                    ..Default::default()
                },
                ..Default::default()
            },
        )
        .await
        .expect("namespace");
    let cms: Api<ConfigMap> = Api::namespaced(client.clone(), "tenant");
    cms.create(
        &PostParams::default(),
        &ConfigMap {
            metadata: ObjectMeta {
                name: Some("c".into()),
                ..Default::default()
            },
            ..Default::default()
        },
    )
    .await
    .expect("cm");
    namespaces
        .delete("tenant", &DeleteParams::default())
        .await
        .expect("delete");
    eventually("namespace gone", Duration::from_secs(5), async || {
        namespaces
            .get_opt("tenant")
            .await
            .expect("get")
            .is_none()
            .then_some(())
    })
    .await;
    assert!(cms.get_opt("c").await.expect("get").is_none());
}

#[tokio::test]
async fn pod_logs_tell_the_kubelet_story_and_previous_holds_the_crashed_run() {
    use kube::api::LogParams;
    let (_sim, client) = start().await;
    let pods: Api<Pod> = Api::namespaced(client.clone(), "default");
    pods.create(&PostParams::default(), &pod("web", "express:v1", &[]))
        .await
        .unwrap();
    eventually("web Ready", Duration::from_secs(10), async || {
        pods.get("web").await.ok().filter(is_ready)
    })
    .await;
    let text = pods.logs("web", &LogParams::default()).await.unwrap();
    assert_eq!(
        text,
        "kubesim: container express started with image express:v1\nkubesim: container express is Ready\n"
    );
    let tail = pods
        .logs(
            "web",
            &LogParams {
                tail_lines: Some(1),
                timestamps: true,
                ..LogParams::default()
            },
        )
        .await
        .unwrap();
    let (at, line) = tail.trim_end().split_once(' ').unwrap();
    assert!(at.starts_with("20") && at.ends_with('Z'), "{tail}");
    assert_eq!(line, "kubesim: container express is Ready");
    let no_previous = pods
        .logs(
            "web",
            &LogParams {
                previous: true,
                ..LogParams::default()
            },
        )
        .await
        .unwrap_err();
    assert!(
        no_previous
            .to_string()
            .contains("previous terminated container"),
        "{no_previous}"
    );
    let wrong = pods
        .logs(
            "web",
            &LogParams {
                container: Some("sidecar".into()),
                ..LogParams::default()
            },
        )
        .await
        .unwrap_err();
    assert!(
        wrong
            .to_string()
            .contains("container sidecar is not valid for pod web"),
        "{wrong}"
    );
    assert!(pods.logs("nope", &LogParams::default()).await.is_err());

    // Followed: every line until the container exits, then the stream ends.
    let mut follow = pods
        .log_stream(
            "web",
            &LogParams {
                follow: true,
                ..LogParams::default()
            },
        )
        .await
        .unwrap();
    pods.delete("web", &DeleteParams::default()).await.unwrap();
    let mut followed = String::new();
    let read = tokio::time::timeout(Duration::from_secs(10), async {
        use futures::AsyncBufReadExt;
        let mut lines = (&mut follow).lines();
        while let Some(Ok(line)) = futures::StreamExt::next(&mut lines).await {
            followed.push_str(&line);
            followed.push('\n');
        }
    })
    .await;
    assert!(read.is_ok(), "the followed log never ended: {followed}");
    assert!(followed.contains("received SIGTERM"), "{followed}");
    assert!(
        followed.ends_with("kubesim: container express exited with code 0\n"),
        "{followed}"
    );

    // A crash-looping pod: the previous run is the one that crashed.
    pods.create(
        &PostParams::default(),
        &pod(
            "crashy",
            "express:v2",
            &[("kubesim.dev/behavior", "crash-loop")],
        ),
    )
    .await
    .unwrap();
    eventually(
        "crashy restarted twice",
        Duration::from_secs(10),
        async || pods.get("crashy").await.ok().filter(|p| restarts(p) >= 2),
    )
    .await;
    let previous = pods
        .logs(
            "crashy",
            &LogParams {
                previous: true,
                ..LogParams::default()
            },
        )
        .await
        .unwrap();
    assert!(
        previous
            .trim_end()
            .ends_with("crashed: exit code 1 (kubesim.dev/behavior: crash-loop)"),
        "{previous}"
    );
    let current = pods.logs("crashy", &LogParams::default()).await.unwrap();
    assert!(
        current.starts_with("kubesim: container express restarted (restart"),
        "{current}"
    );
}
