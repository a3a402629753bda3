//! What every local cluster of `dev` shares: its errors, and sample tenants written the way the
//! tenant chart delivers them.

use std::path::PathBuf;
use std::time::Duration;

use express_api::keys::ANNOTATION_ROLLOUT_ID;
use express_api::{
    Backend, BackendSpec, ExpressCluster, ExpressClusterSpec, Frontend, FrontendSpec, NodeDefaults,
    NodeSpec,
};
use kube::api::{Api, PostParams};
use kube::core::ObjectMeta;

use crate::install::create_namespace;

#[derive(Debug, thiserror::Error)]
pub enum DevError {
    #[error("cannot start kubesim: {0}")]
    Start(#[from] kubesim::StartError),
    #[error("kube client: {0}")]
    Kube(#[from] kube::Error),
    #[error("cannot write the kubeconfig {path}: {source}")]
    Kubeconfig {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("leader election: {0}")]
    Lease(String),
    #[error("the demo did not finish within {0:?}")]
    Timeout(Duration),
    #[error("{0}")]
    Demo(String),
}

fn defaults(version: &str) -> NodeDefaults {
    NodeDefaults {
        express_version: Some(version.into()),
        config_changeset: Some("867fc47c23".into()),
        image: Some("registry.example/express".into()),
        pod_template: None,
    }
}

/// The settle window of the sample tenants: short, so the local cluster starts at once.
pub(super) const DEV_SETTLE_SECONDS: u32 = 2;

/// Object metadata as the tenant chart renders it: stamped with the delivery's rollout id.
fn delivered(name: &str, namespace: &str, rollout_id: &str) -> ObjectMeta {
    ObjectMeta {
        name: Some(name.into()),
        namespace: Some(namespace.into()),
        annotations: Some(
            [(ANNOTATION_ROLLOUT_ID.to_owned(), rollout_id.to_owned())]
                .into_iter()
                .collect(),
        ),
        ..ObjectMeta::default()
    }
}

/// Writes a tenant the way the tenant chart delivers one: the ExpressCluster, the Backend, then
/// the Frontends, one object at a time, every object stamped with rollout-id `r1`.
pub(super) async fn create_tenant(
    client: &kube::Client,
    namespace: &str,
    cluster: &str,
    frontends: usize,
    version: &str,
) -> Result<(), DevError> {
    create_pinned_tenant(client, namespace, cluster, frontends, version, None).await
}

/// [`create_tenant`], its ExpressCluster labelled for operator ring `ring` when given (pinned
/// there: no release moves it).
pub(super) async fn create_pinned_tenant(
    client: &kube::Client,
    namespace: &str,
    cluster: &str,
    frontends: usize,
    version: &str,
    ring: Option<&str>,
) -> Result<(), DevError> {
    create_namespace(client, namespace).await?;
    let mut spec = ExpressClusterSpec {
        tenant_name: Some(cluster.into()),
        ..Default::default()
    };
    spec.defaults.backend = Some(defaults(version));
    spec.defaults.frontend = Some(defaults(version));
    spec.rollout.settle_seconds = DEV_SETTLE_SECONDS;
    let mut object = ExpressCluster::new(cluster, spec);
    object.metadata = delivered(cluster, namespace, "r1");
    if let Some(ring) = ring {
        object.metadata.labels = Some(
            [(
                express_api::keys::LABEL_OPERATOR_RING.to_owned(),
                ring.to_owned(),
            )]
            .into_iter()
            .collect(),
        );
    }
    Api::<ExpressCluster>::namespaced(client.clone(), namespace)
        .create(&PostParams::default(), &object)
        .await?;
    let name = format!("{cluster}-be");
    let mut backend = Backend::new(&name, BackendSpec(NodeSpec::for_cluster(cluster)));
    backend.metadata = delivered(&name, namespace, "r1");
    Api::<Backend>::namespaced(client.clone(), namespace)
        .create(&PostParams::default(), &backend)
        .await?;
    for i in 1..=frontends {
        let name = format!("{cluster}-fe{i}");
        let mut frontend = Frontend::new(&name, FrontendSpec(NodeSpec::for_cluster(cluster)));
        frontend.metadata = delivered(&name, namespace, "r1");
        Api::<Frontend>::namespaced(client.clone(), namespace)
            .create(&PostParams::default(), &frontend)
            .await?;
    }
    Ok(())
}
