//! The fleet the benchmark writes: one namespace per tenant, its ExpressCluster, Backend and
//! Frontends, and the older ControllerRevisions a settled fleet keeps.

use express_api::{
    Backend, BackendSpec, ExpressCluster, ExpressClusterSpec, Frontend, FrontendSpec, NodeDefaults,
    NodeSpec,
};
use kube::api::{Api, PostParams};
use serde_json::json;

pub fn namespace(i: usize) -> String {
    format!("t{i:05}")
}

pub async fn create_tenant(client: &kube::Client, ns: &str, frontends: usize) {
    express_operator::install::create_namespace(client, ns)
        .await
        .expect("namespace");
    let defaults = NodeDefaults {
        express_version: Some("v1".into()),
        ..Default::default()
    };
    let mut spec = ExpressClusterSpec::default();
    spec.defaults.backend = Some(defaults.clone());
    spec.defaults.frontend = Some(defaults);
    // One write per change (the benchmark patches the ExpressCluster alone): nothing to settle.
    spec.rollout.settle_seconds = 0;
    let pp = PostParams::default();
    Api::<ExpressCluster>::namespaced(client.clone(), ns)
        .create(&pp, &ExpressCluster::new("t", spec))
        .await
        .expect("cluster");
    Api::<Backend>::namespaced(client.clone(), ns)
        .create(
            &pp,
            &Backend::new("t-be", BackendSpec(NodeSpec::for_cluster("t"))),
        )
        .await
        .expect("backend");
    for i in 1..=frontends {
        Api::<Frontend>::namespaced(client.clone(), ns)
            .create(
                &pp,
                &Frontend::new(
                    &format!("t-fe{i}"),
                    FrontendSpec(NodeSpec::for_cluster("t")),
                ),
            )
            .await
            .expect("frontend");
    }
}

/// Older revisions of every node of a tenant, as the operator keeps them (labels, a number
/// below the one provisioning kept, a body), so that a fresh operator holds a settled history.
pub async fn add_history(client: &kube::Client, ns: &str, frontends: usize, older: usize) {
    use k8s_openapi::api::apps::v1::ControllerRevision;
    let api = Api::<ControllerRevision>::namespaced(client.clone(), ns);
    let nodes = std::iter::once(("backend", "t-be".to_owned()))
        .chain((1..=frontends).map(|i| ("frontend", format!("t-fe{i}"))));
    for (kind, node) in nodes {
        for n in 0..older {
            let revision = format!("old{n:04}");
            let object: ControllerRevision = serde_json::from_value(json!({
                "metadata": {"name": format!("{node}-{revision}"), "labels": {
                    "express.dev/cluster": "t", "express.dev/node": node,
                    "express.dev/kind": kind, "express.dev/deployment-revision": revision}},
                "revision": 0,
                "data": {"expressVersion": format!("v0.{n}"), "imageRepository": "reg/express", "podTemplate": {}},
            }))
            .expect("revision");
            api.create(&PostParams::default(), &object)
                .await
                .expect("older revision");
        }
    }
}
