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
