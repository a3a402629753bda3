//! Setting up a cluster for the operator from code: its namespaces and the CRDs. Used by `dev`,
//! the end-to-end tests and the benchmarks (a real installation uses the Helm chart).

use std::time::Duration;

use k8s_openapi::api::core::v1::Namespace;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{Api, PostParams};
use kube::core::ObjectMeta;
use kube::runtime::wait::{await_condition, conditions};

/// Creates a namespace. Used by `dev`, the end-to-end tests and the benchmarks.
pub async fn create_namespace(client: &kube::Client, name: &str) -> Result<Namespace, kube::Error> {
    let namespace = Namespace {
        metadata: ObjectMeta {
            name: Some(name.into()),
            ..Default::default()
        },
        ..Default::default()
    };
    Api::<Namespace>::all(client.clone())
        .create(&PostParams::default(), &namespace)
        .await
}

/// Creates every CRD of the API and waits (up to 5 s each) until it is Established. Used by
/// `dev`, the end-to-end tests and the benchmarks.
pub async fn install_crds(client: &kube::Client) -> Result<(), kube::Error> {
    let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
    for crd in express_api::crd::all() {
        let name = crd.metadata.name.clone().unwrap_or_default();
        crds.create(&PostParams::default(), &crd).await?;
        let _ = tokio::time::timeout(
            Duration::from_secs(5),
            await_condition(crds.clone(), &name, conditions::is_crd_established()),
        )
        .await;
    }
    Ok(())
}
