//! What a cluster has installed: the CRD files of a directory (every document a CRD of this
//! API's group), or a DC's CRDs of this API and every object it stores of each kind, read at
//! the version it stores, a page at a time.

use std::collections::BTreeMap;
use std::path::Path;

use crd_compat::Stored;
use express_api::api_record::ANNOTATION_RING_API_VERSIONS;
use express_api::keys::GROUP;
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{Api, ApiResource, DynamicObject, ListParams};
use kube::config::{KubeConfigOptions, Kubeconfig};
use list_pages::ListPaged;

use super::inputs::{CheckError, Source};

/// What was read.
pub struct Installed {
    pub crds: Vec<CustomResourceDefinition>,
    /// Per CRD name, its stored objects (None: none were read, as from files).
    pub stored: Option<BTreeMap<String, Vec<Stored>>>,
    /// Each ring with the versions its build says it knows (its Lease); None: not read, as
    /// from files.
    pub rings: Option<Vec<(String, Option<Vec<String>>)>>,
    pub source: Source,
}

/// Every `.yaml`/`.yml` file of `dir`, each document a CRD of this API's group.
pub fn from_directory(dir: &Path) -> Result<Installed, CheckError> {
    let entries = std::fs::read_dir(dir)
        .map_err(|e| CheckError::BadInput(format!("cannot read {}: {e}", dir.display())))?;
    let mut files: Vec<_> = entries
        .filter_map(Result::ok)
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|x| x == "yaml" || x == "yml"))
        .collect();
    files.sort();
    if files.is_empty() {
        return Err(CheckError::BadInput(format!(
            "{} holds no CRD files (*.yaml), as `express-operator crd --output-dir` writes them",
            dir.display()
        )));
    }
    let mut crds = Vec::new();
    for file in &files {
        crds.extend(crds_of_file(file)?);
    }
    Ok(Installed {
        crds,
        stored: None,
        rings: None,
        source: Source::Directory(dir.display().to_string()),
    })
}

fn crds_of_file(file: &Path) -> Result<Vec<CustomResourceDefinition>, CheckError> {
    let text = std::fs::read_to_string(file)
        .map_err(|e| CheckError::BadInput(format!("cannot read {}: {e}", file.display())))?;
    let mut crds = Vec::new();
    for (index, document) in serde_yaml::Deserializer::from_str(&text).enumerate() {
        let value: serde_yaml::Value = serde::Deserialize::deserialize(document)
            .map_err(|e| CheckError::BadInput(format!("{} is not YAML: {e}", file.display())))?;
        if value.is_null() {
            continue;
        }
        let crd = crd_of(value).map_err(|why| {
            CheckError::BadInput(format!(
                "{} (document {}): {why}",
                file.display(),
                index + 1
            ))
        })?;
        crds.push(crd);
    }
    Ok(crds)
}

/// A document as a CRD of this API, or why it is not one.
fn crd_of(value: serde_yaml::Value) -> Result<CustomResourceDefinition, String> {
    let kind = value.get("kind").and_then(serde_yaml::Value::as_str);
    if kind != Some("CustomResourceDefinition") {
        return Err(format!(
            "not a CustomResourceDefinition (kind {})",
            kind.unwrap_or("missing")
        ));
    }
    let crd: CustomResourceDefinition =
        serde_yaml::from_value(value).map_err(|e| format!("not a valid CRD: {e}"))?;
    if crd.spec.group != GROUP {
        return Err(format!(
            "a CRD of group {}, not of this API ({GROUP})",
            crd.spec.group
        ));
    }
    Ok(crd)
}

/// A client for `context` of the kubeconfig (`--kubeconfig`, else `$KUBECONFIG`, else
/// `~/.kube/config`).
async fn client(kubeconfig: Option<&Path>, context: &str) -> Result<kube::Client, CheckError> {
    let config = match kubeconfig {
        Some(path) => Kubeconfig::read_from(path),
        None => Kubeconfig::read(),
    }
    .map_err(|e| CheckError::BadInput(format!("cannot read the kubeconfig: {e}")))?;
    let names: Vec<&str> = config.contexts.iter().map(|c| c.name.as_str()).collect();
    if !names.contains(&context) {
        return Err(CheckError::BadInput(format!(
            "no context named {context:?} in the kubeconfig (it has: {})",
            names.join(", ")
        )));
    }
    let options = KubeConfigOptions {
        context: Some(context.to_owned()),
        ..KubeConfigOptions::default()
    };
    let config = kube::Config::from_custom_kubeconfig(config.clone(), &options)
        .await
        .map_err(|e| CheckError::BadInput(format!("context {context}: {e}")))?;
    kube::Client::try_from(config)
        .map_err(|e| CheckError::BadInput(format!("context {context}: {e}")))
}

/// The DC's CRDs of this API (those of `build` it has) and every object of each.
pub async fn from_context(
    kubeconfig: Option<&Path>,
    context: &str,
    operator_namespace: &str,
    build: &[CustomResourceDefinition],
) -> Result<Installed, CheckError> {
    let client = client(kubeconfig, context).await?;
    let rings = ring_versions(&client, operator_namespace)
        .await
        .map_err(|e| CheckError::Unreadable(format!("context {context}: {e}")))?;
    let (crds, stored) = from_client(&client, build)
        .await
        .map_err(|e| CheckError::Unreadable(format!("context {context}: {e}")))?;
    if crds.is_empty() {
        return Err(CheckError::BadInput(format!(
            "context {context} has none of this API's CRDs ({GROUP}): the first install applies them (the chart's crds/, or `express-operator crd | kubectl apply -f -`); there is nothing to check against"
        )));
    }
    Ok(Installed {
        crds,
        stored: Some(stored),
        rings: Some(rings),
        source: Source::Context(context.to_owned()),
    })
}

/// What could not be read, and why.
#[derive(Debug, thiserror::Error)]
#[error("cannot read {what}: {source}")]
pub struct Unreadable {
    pub what: String,
    #[source]
    pub source: kube::Error,
}

/// The CRDs of `build` a cluster has (each read by name: the operator may get only its own)
/// and, per CRD name, every object it stores of each.
pub async fn from_client(
    client: &kube::Client,
    build: &[CustomResourceDefinition],
) -> Result<(Vec<CustomResourceDefinition>, BTreeMap<String, Vec<Stored>>), Unreadable> {
    let crds = installed_crds(client, build).await?;
    let mut stored = BTreeMap::new();
    for crd in &crds {
        let name = crd.metadata.name.clone().unwrap_or_default();
        let objects = stored_objects(client, crd)
            .await
            .map_err(|source| Unreadable {
                what: format!("the {} objects", crd.spec.names.kind),
                source,
            })?;
        stored.insert(name, objects);
    }
    Ok((crds, stored))
}

/// The CRDs of `build` a cluster has, each read by name.
pub async fn installed_crds(
    client: &kube::Client,
    build: &[CustomResourceDefinition],
) -> Result<Vec<CustomResourceDefinition>, Unreadable> {
    let names: Vec<String> = build
        .iter()
        .map(|wanted| wanted.metadata.name.clone().unwrap_or_default())
        .collect();
    crds_named(client, names.iter().map(String::as_str)).await
}

/// The CRDs of these names a cluster has, each read by name (RBAC grants `get` by name; a
/// CRD not installed is left out).
async fn crds_named(
    client: &kube::Client,
    names: impl IntoIterator<Item = &str>,
) -> Result<Vec<CustomResourceDefinition>, Unreadable> {
    let crds_api: Api<CustomResourceDefinition> = Api::all(client.clone());
    let mut crds = Vec::new();
    for name in names {
        let found = crds_api.get_opt(name).await.map_err(|source| Unreadable {
            what: format!("CustomResourceDefinition {name}"),
            source,
        })?;
        crds.extend(found);
    }
    Ok(crds)
}

/// The DC's CRDs of the kinds with more than one version, as the version steps read them (a
/// CRD not installed is left out).
pub async fn versioned_crds(
    client: &kube::Client,
) -> Result<Vec<express_planner::api_versions::DcCrd>, Unreadable> {
    let crds = crds_named(client, express_api::crd::VERSIONED).await?;
    Ok(crds
        .iter()
        .map(express_planner::api_versions::DcCrd::of)
        .collect())
}

/// Each ring of the operator's namespace with the versions its build says it knows (its
/// Lease's `express.dev/api-versions`; none said: None).
pub async fn ring_versions(
    client: &kube::Client,
    namespace: &str,
) -> Result<Vec<(String, Option<Vec<String>>)>, Unreadable> {
    let leases: Api<Lease> = Api::namespaced(client.clone(), namespace);
    let listed = leases
        .list(&ListParams::default())
        .await
        .map_err(|source| Unreadable {
            what: format!("the operator's Leases in namespace {namespace}"),
            source,
        })?;
    Ok(listed
        .items
        .iter()
        .filter_map(|lease| {
            let name = lease.metadata.name.as_deref()?;
            let ring = express_api::rings::ring_of_lease(name)?.to_owned();
            let known = lease
                .metadata
                .annotations
                .as_ref()
                .and_then(|a| a.get(ANNOTATION_RING_API_VERSIONS))
                .map(|k| k.split(',').map(str::to_owned).collect());
            Some((ring, known))
        })
        .collect())
}

/// Every object of `crd`'s kind, in every namespace, read at the version it is stored at.
async fn stored_objects(
    client: &kube::Client,
    crd: &CustomResourceDefinition,
) -> Result<Vec<Stored>, kube::Error> {
    let Some(version) = storage_version(crd) else {
        return Ok(Vec::new());
    };
    let resource = resource_at(crd, &version);
    let api: Api<DynamicObject> = Api::all_with(client.clone(), &resource);
    let list = api.list_paged(&ListParams::default()).await?;
    Ok(list
        .items
        .into_iter()
        .map(|object| {
            let name = match &object.metadata.namespace {
                Some(namespace) => format!(
                    "{namespace}/{}",
                    object.metadata.name.as_deref().unwrap_or_default()
                ),
                None => object.metadata.name.clone().unwrap_or_default(),
            };
            Stored {
                name,
                version: version.clone(),
                object: serde_json::to_value(&object).unwrap_or_default(),
            }
        })
        .collect())
}

/// The resource a CRD serves at `version`, for a dynamic client.
pub fn resource_at(crd: &CustomResourceDefinition, version: &str) -> ApiResource {
    ApiResource {
        group: crd.spec.group.clone(),
        version: version.to_owned(),
        api_version: format!("{}/{version}", crd.spec.group),
        kind: crd.spec.names.kind.clone(),
        plural: crd.spec.names.plural.clone(),
    }
}

/// The version a CRD stores its objects at.
pub fn storage_version(crd: &CustomResourceDefinition) -> Option<String> {
    crd.spec
        .versions
        .iter()
        .find(|v| v.storage)
        .map(|v| v.name.clone())
}
