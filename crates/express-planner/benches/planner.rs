//! Planner cost per cluster size (DESIGN section 10). The clusters are caught mid-upgrade, the
//! expensive case: a third of the nodes already on the new revision, one in flight, the rest
//! waiting with unmet prerequisites whose reasons are all rendered.

#![allow(clippy::expect_used, clippy::unwrap_used)] // tests fail loudly on unexpected values

use std::hint::black_box;

use criterion::{BenchmarkId, Criterion, criterion_group, criterion_main};
use express_api::NodeKind;
use express_planner::simulate::ready_pod;
use express_planner::{ClusterSettings, ClusterSnapshot, DesiredState, NodeObservation, plan};

fn mid_upgrade(nodes: usize, backends: usize) -> ClusterSnapshot {
    let observations = (0..nodes)
        .map(|i| {
            let (kind, name) = if i < backends {
                (NodeKind::Backend, format!("t-be{}", i + 1))
            } else {
                (NodeKind::Frontend, format!("t-fe{}", i - backends + 1))
            };
            let upgraded = i >= backends && (i - backends) < nodes / 3;
            let in_flight = i >= backends && (i - backends) == nodes / 3;
            let mut pod = ready_pod(if upgraded || in_flight { "new" } else { "old" }, "v");
            if in_flight {
                pod.conditions.clear();
            }
            NodeObservation {
                name,
                kind,
                up: i % 17 != 5,
                desired: Ok(DesiredState {
                    revision: "new".into(),
                    version: "v".into(),
                    spec: express_api::EffectiveNodeSpec {
                        express_version: "v".into(),
                        config_changeset: None,
                        image_repository: "express".into(),
                        pod_template: serde_json::Value::Object(Default::default()),
                    },
                }),
                dependencies: None,
                pod: Some(pod),
                replacing: false,
                change: None,
                invalid_revisions: Vec::new(),
                history: Vec::new(),
                rollout_id: None,
                recorded_desired: None,
                bounce_request: None,
                bounce: None,
            }
        })
        .collect();
    ClusterSnapshot {
        namespace: "bench".into(),
        cluster_name: "t".into(),
        settings: ClusterSettings {
            settle_seconds: 0,
            ..ClusterSettings::default()
        },
        nodes: observations,
        pause: None,
        spec_errors: Vec::new(),
        unreadable: Vec::new(),
        control: Default::default(),
        express_cluster: None,
    }
}

fn plan_one_cluster(c: &mut Criterion) {
    let mut group = c.benchmark_group("plan_one_cluster");
    for size in [10usize, 100, 1_000] {
        let snapshot = mid_upgrade(size, 1);
        group.bench_with_input(BenchmarkId::from_parameter(size), &snapshot, |b, s| {
            b.iter(|| plan(black_box(s), 0))
        });
    }
    group.finish();
}

fn replan_many_clusters(c: &mut Criterion) {
    let clusters: Vec<ClusterSnapshot> = (0..10_000).map(|_| mid_upgrade(8, 1)).collect();
    let mut group = c.benchmark_group("replan_clusters");
    group.sample_size(20);
    group.bench_function("10000x8", |b| {
        b.iter(|| {
            clusters
                .iter()
                .map(|s| plan(black_box(s), 0).actions.len())
                .sum::<usize>()
        })
    });
    group.finish();
}

criterion_group!(benches, plan_one_cluster, replan_many_clusters);
criterion_main!(benches);
