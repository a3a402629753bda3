//! What conversion costs per object (DESIGN section 18): a Frontend as the tenant chart renders
//! it (two pinned prerequisites, a pod template, the tenant on the node), a status the operator
//! wrote, and an ExpressCluster; each converted to v1beta1 and back, and a `ConversionReview` of
//! a list page's worth of nodes, as the API server sends one when a client lists at the version
//! that is not stored.

#![allow(clippy::expect_used, clippy::unwrap_used)] // a benchmark fails loudly

use std::hint::black_box;

use criterion::{BenchmarkId, Criterion, Throughput, criterion_group, criterion_main};
use express_api::conversion::{ApiVersion, convert, review};
use kube::core::conversion::ConversionReview;
use serde_json::{Value, json};

fn frontend(i: usize) -> Value {
    json!({
        "apiVersion": "express.dev/v1alpha1", "kind": "Frontend",
        "metadata": {"name": format!("shop-fe{i}"), "namespace": "tenant-0042", "uid": "5b1f8a52-0f7e-4d53-9d1c-1f6d0a3e9a11",
                     "resourceVersion": "184467", "generation": 4, "creationTimestamp": "2026-11-01T10:00:00Z",
                     "labels": {"app.kubernetes.io/managed-by": "Helm", "express.dev/cluster": "shop"},
                     "annotations": {"meta.helm.sh/release-name": "shop", "express.dev/rollout-id": "r-17"}},
        "spec": {
            "clusterConfig": {"clusterName": "shop", "tenantID": 42, "tenantName": "acme"},
            "up": true, "expressVersion": "4.2.1", "configChangeset": "cs-0193",
            "podTemplate": {"spec": {"containers": [{"name": "express", "resources": {"requests": {"cpu": "500m", "memory": "1Gi"}}}]}},
            "deploymentDependencies": {"upgradePrerequisites": [
                {"expressNode": "shop-be", "kind": "Backend", "expressVersion": "4.2.1"},
                {"expressNode": format!("shop-fe{}", i + 1), "kind": "Frontend", "podConditionType": "Ready", "conditionStatus": "True"}
            ]}
        },
        "status": {"observedGeneration": 4, "phase": "Ready", "desiredRevision": "8c1e0f4b2a", "runningRevision": "8c1e0f4b2a",
                   "runningVersion": "4.2.1", "podName": format!("shop-fe{i}"), "ready": true, "restarts": 0,
                   "conditions": [{"type": "Ready", "status": "True", "reason": "PodReady", "message": "", "lastTransitionTime": "2026-11-01T10:02:00Z"}]}
    })
}

fn express_cluster() -> Value {
    json!({
        "apiVersion": "express.dev/v1alpha1", "kind": "ExpressCluster",
        "metadata": {"name": "shop", "namespace": "tenant-0042", "uid": "u", "resourceVersion": "184401", "generation": 2},
        "spec": {"clusterName": "shop", "tenantID": 42, "tenantName": "acme",
                 "defaults": {"backend": {"expressVersion": "4.2.1", "configChangeset": "cs-0193"},
                              "frontend": {"expressVersion": "4.2.1", "configChangeset": "cs-0193"}},
                 "dependencies": {"backendUpgradePosition": 2}, "rollout": {"maxConcurrent": 1, "settleSeconds": 10}},
        "status": {"observedGeneration": 2, "phase": "Healthy", "nodes": {"total": 8, "ready": 8, "upToDate": 8, "down": 0}}
    })
}

fn per_object(c: &mut Criterion) {
    let mut group = c.benchmark_group("convert one object");
    let node = frontend(1);
    let node_beta = convert(node.clone(), ApiVersion::V1beta1).unwrap();
    let cluster = express_cluster();
    let cluster_beta = convert(cluster.clone(), ApiVersion::V1beta1).unwrap();
    for (name, object, to) in [
        ("Frontend to v1beta1", &node, ApiVersion::V1beta1),
        ("Frontend to v1alpha1", &node_beta, ApiVersion::V1alpha1),
        ("ExpressCluster to v1beta1", &cluster, ApiVersion::V1beta1),
        (
            "ExpressCluster to v1alpha1",
            &cluster_beta,
            ApiVersion::V1alpha1,
        ),
    ] {
        // The clone is part of what the webhook does too: it owns the objects it decoded.
        group.bench_function(name, |b| {
            b.iter(|| convert(black_box(object.clone()), to).unwrap())
        });
    }
    group.finish();
}

fn reviews(c: &mut Criterion) {
    let mut group = c.benchmark_group("ConversionReview, decoded, answered and encoded");
    for objects in [1usize, 500] {
        let body = serde_json::to_vec(&json!({
            "apiVersion": "apiextensions.k8s.io/v1", "kind": "ConversionReview",
            "request": {"uid": "r", "desiredAPIVersion": "express.dev/v1beta1",
                        "objects": (0..objects).map(frontend).collect::<Vec<_>>()}
        }))
        .unwrap();
        group.throughput(Throughput::Elements(objects as u64));
        group.bench_with_input(BenchmarkId::from_parameter(objects), &body, |b, body| {
            b.iter(|| {
                let parsed: ConversionReview = serde_json::from_slice(black_box(body)).unwrap();
                serde_json::to_vec(&review(parsed)).unwrap()
            })
        });
    }
    group.finish();
}

criterion_group!(benches, per_object, reviews);
criterion_main!(benches);
