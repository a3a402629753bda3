//! The CustomResourceDefinitions of this API, as served and as committed under `deploy/crds`.

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::CustomResourceExt;

use crate::{Backend, ExpressCluster, FleetRelease, Frontend, OperatorRelease};

/// Every CRD of the API, in a stable order.
pub fn all() -> Vec<CustomResourceDefinition> {
    vec![
        ExpressCluster::crd(),
        Backend::crd(),
        Frontend::crd(),
        OperatorRelease::crd(),
        FleetRelease::crd(),
    ]
}

/// File name under `deploy/crds` for a CRD.
pub fn file_name(crd: &CustomResourceDefinition) -> String {
    format!("{}.yaml", crd.metadata.name.as_deref().unwrap_or("unnamed"))
}

/// Renders one CRD as a YAML document (without the `---` separator).
pub fn to_yaml(crd: &CustomResourceDefinition) -> Result<String, serde_yaml::Error> {
    serde_yaml::to_string(crd)
}

/// Renders every CRD as one multi-document YAML stream.
pub fn all_to_yaml() -> Result<String, serde_yaml::Error> {
    let mut out = String::new();
    for crd in all() {
        out.push_str("---\n");
        out.push_str(&to_yaml(&crd)?);
    }
    Ok(out)
}

/// Where the API server reaches the conversion webhook: a Service in the cluster (the chart's),
/// or a URL (an operator run outside the cluster, as the tests run it).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum WebhookAt {
    Service {
        namespace: String,
        name: String,
        port: i32,
    },
    Url(String),
}

/// The CRDs as a build that serves `v1beta1` beside `v1alpha1` applies them: the versioned kinds
/// (ExpressCluster, Backend, Frontend) serve both, store `v1alpha1`, and convert through the
/// webhook at `at` (its `caBundle` is the operator's to write, not part of what is applied);
/// the release kinds are as [`all`] has them. At `v1beta1`, v1alpha1's field names are refused
/// with the name to write instead ([`crate::v1beta1::old_names`]), never silently pruned.
pub fn serving_v1beta1(at: &WebhookAt) -> Result<Vec<CustomResourceDefinition>, String> {
    use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::{
        CustomResourceConversion, ServiceReference, WebhookClientConfig, WebhookConversion,
    };
    let client_config = match at {
        WebhookAt::Service {
            namespace,
            name,
            port,
        } => WebhookClientConfig {
            service: Some(ServiceReference {
                namespace: namespace.clone(),
                name: name.clone(),
                path: Some(WEBHOOK_PATH.to_owned()),
                port: Some(*port),
            }),
            ..WebhookClientConfig::default()
        },
        WebhookAt::Url(url) => WebhookClientConfig {
            url: Some(url.clone()),
            ..WebhookClientConfig::default()
        },
    };
    let conversion = CustomResourceConversion {
        strategy: "Webhook".to_owned(),
        webhook: Some(WebhookConversion {
            client_config: Some(client_config),
            conversion_review_versions: vec!["v1".to_owned()],
        }),
    };
    let merged = |alpha: CustomResourceDefinition, mut beta: CustomResourceDefinition| {
        crate::v1beta1::old_names::refuse_at(&mut beta, crate::v1beta1::VERSION)?;
        let mut crd = kube::core::crd::merge_crds(vec![alpha, beta], crate::keys::VERSION)
            .map_err(|e| e.to_string())?;
        crd.spec.conversion = Some(conversion.clone());
        Ok::<_, String>(crd)
    };
    Ok(vec![
        merged(ExpressCluster::crd(), crate::v1beta1::ExpressCluster::crd())?,
        merged(Backend::crd(), crate::v1beta1::Backend::crd())?,
        merged(Frontend::crd(), crate::v1beta1::Frontend::crd())?,
        OperatorRelease::crd(),
        FleetRelease::crd(),
    ])
}

/// The CRDs of the kinds with more than one version: those whose `caBundle` the operator keeps.
pub const VERSIONED: [&str; 3] = [
    "expressclusters.express.dev",
    "backends.express.dev",
    "frontends.express.dev",
];

/// The path the webhook answers on.
pub const WEBHOOK_PATH: &str = "/convert";

/// The chart's Service in front of the operator's pods that serve the webhook: where the CRDs
/// send conversions when no URL is given.
pub const WEBHOOK_SERVICE: &str = "express-operator-webhook";

/// The port of [`WEBHOOK_SERVICE`].
pub const WEBHOOK_SERVICE_PORT: i32 = 443;
