//! Reading OperatorReleases (DESIGN section 12): one by name, or every one of the operator's
//! namespace, with a clear word when the CRD is not installed.

use express_api::release::OperatorRelease;
use express_notify::Ledger;
use express_planner::api_versions::{DcCrd, dc_versions};
use k8s_openapi::api::core::v1::ConfigMap;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{Api, ListParams};
use kube::{Client, ResourceExt};
use list_pages::ListPaged;

use express_client::exit::Exit;
use express_client::read::unread::Unread;

pub async fn get(client: &Client, namespace: &str, name: &str) -> Result<OperatorRelease, Exit> {
    match Api::<OperatorRelease>::namespaced(client.clone(), namespace)
        .get_opt(name)
        .await
    {
        Ok(Some(release)) => Ok(release),
        Ok(None) => Err(Exit::usage(format!(
            "no OperatorRelease {name} in namespace {namespace} (releases live in the operator's namespace: --operator-namespace)"
        ))),
        Err(e) => Err(not_installed(e, namespace)),
    }
}

pub async fn list(client: &Client, namespace: &str) -> Result<Vec<OperatorRelease>, Exit> {
    let mut releases = Api::<OperatorRelease>::namespaced(client.clone(), namespace)
        .list_paged(&ListParams::default())
        .await
        .map_err(|e| not_installed(e, namespace))?
        .items;
    releases.sort_by_key(|r| (r.creation_timestamp().map(|t| t.0), r.name_any()));
    Ok(releases)
}

/// The notifications ledger of `ring` (DESIGN section 21): what its leader sent, and how its
/// destinations answer. None when notifications are not set up, or it cannot be read (a reader
/// without access to the operator's ConfigMaps sees the rest).
pub async fn notifications(client: &Client, namespace: &str, ring: &str) -> Option<Ledger> {
    let name = express_notify::ledger::configmap_name(ring);
    let map = Api::<ConfigMap>::namespaced(client.clone(), namespace)
        .get_opt(&name)
        .await
        .ok()??;
    let text = map.data?.remove(express_notify::ledger::LEDGER_KEY)?;
    serde_json::from_str(&text).ok()
}

/// Where the DC's API versions stand, from its versioned CRDs; none while each lists one
/// version, or when they cannot be read (a reader without access to CRDs sees the rest).
pub async fn api_versions(client: &Client) -> Option<String> {
    let api: Api<CustomResourceDefinition> = Api::all(client.clone());
    let mut crds = Vec::new();
    for name in express_api::crd::VERSIONED {
        if let Ok(Some(crd)) = api.get_opt(name).await {
            crds.push(DcCrd::of(&crd));
        }
    }
    dc_versions(&crds)
}

fn not_installed(error: kube::Error, namespace: &str) -> Exit {
    match Unread::of(&error, "OperatorRelease", namespace) {
        not_installed @ Unread::NotInstalled(_) => Exit::usage(not_installed.to_string()),
        Unread::Failed(_) => Exit::api(
            format!("cannot read OperatorReleases in namespace {namespace}"),
            &error,
        ),
    }
}
