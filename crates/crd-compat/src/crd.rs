//! CRD-wide rules: what changes the resource itself rather than one field (its scope, its kind,
//! the versions it serves and stores). One function per rule; each is given the old and the new
//! CRD and says what it finds.

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::{
    CustomResourceDefinition, CustomResourceDefinitionVersion,
};

use crate::finding::{Effect, Finding};
use crate::path::Path;

type Rule = fn(&CustomResourceDefinition, &CustomResourceDefinition) -> Vec<Finding>;

/// The CRD-wide rules, in the order they are told.
const RULES: &[Rule] = &[
    scope_changed,
    kind_changed,
    served_version_removed,
    stored_version_removed,
    storage_version_moved,
    conversion_missing,
];

pub(crate) fn compare(
    old: &CustomResourceDefinition,
    new: &CustomResourceDefinition,
) -> Vec<Finding> {
    RULES.iter().flat_map(|rule| rule(old, new)).collect()
}

fn crd_wide(change: String, effect: Effect) -> Finding {
    Finding::new(&Path::root(), change, effect)
}

fn in_version(version: &str, change: String, effect: Effect) -> Finding {
    let mut finding = crd_wide(change, effect);
    finding.version = version.to_string();
    finding
}

/// A namespaced resource made cluster-wide (or back) changes every object's name: clients and
/// stored objects no longer meet.
fn scope_changed(old: &CustomResourceDefinition, new: &CustomResourceDefinition) -> Vec<Finding> {
    if old.spec.scope == new.spec.scope {
        return Vec::new();
    }
    vec![crd_wide(
        format!(
            "scope changed from {} to {}",
            old.spec.scope, new.spec.scope
        ),
        Effect::Breaking,
    )]
}

/// The running build and every client name the kind; renaming it strands them.
fn kind_changed(old: &CustomResourceDefinition, new: &CustomResourceDefinition) -> Vec<Finding> {
    let (before, after) = (&old.spec.names.kind, &new.spec.names.kind);
    if before == after {
        return Vec::new();
    }
    vec![crd_wide(
        format!("kind renamed from {before} to {after}"),
        Effect::Breaking,
    )]
}

fn version<'a>(
    crd: &'a CustomResourceDefinition,
    name: &str,
) -> Option<&'a CustomResourceDefinitionVersion> {
    crd.spec.versions.iter().find(|v| v.name == name)
}

/// A client of a version the cluster serves (the build still running there among them) is
/// refused once it is no longer served.
fn served_version_removed(
    old: &CustomResourceDefinition,
    new: &CustomResourceDefinition,
) -> Vec<Finding> {
    old.spec
        .versions
        .iter()
        .filter(|v| v.served)
        .filter_map(|v| match version(new, &v.name) {
            None => Some(in_version(
                &v.name,
                format!("served version {} removed", v.name),
                Effect::Breaking,
            )),
            Some(n) if !n.served => Some(in_version(
                &v.name,
                format!("version {} no longer served", v.name),
                Effect::Breaking,
            )),
            Some(_) => None,
        })
        .collect()
}

/// Objects stored at a version can be read only while the CRD lists it: the old storage version
/// and every version in `status.storedVersions` must stay.
fn stored_version_removed(
    old: &CustomResourceDefinition,
    new: &CustomResourceDefinition,
) -> Vec<Finding> {
    let mut stored: Vec<&str> = old
        .spec
        .versions
        .iter()
        .filter(|v| v.storage)
        .map(|v| v.name.as_str())
        .collect();
    if let Some(listed) = old.status.as_ref().and_then(|s| s.stored_versions.as_ref()) {
        stored.extend(listed.iter().map(String::as_str));
    }
    stored.sort_unstable();
    stored.dedup();
    stored
        .into_iter()
        .filter(|name| version(new, name).is_none())
        .map(|name| {
            in_version(
                name,
                format!(
                    "stored version {name} removed: objects stored at it could no longer be read"
                ),
                Effect::Breaking,
            )
        })
        .collect()
}

/// A new storage version is compatible while both are served and convertible, but objects
/// stay at the old one until rewritten: worth a warning.
fn storage_version_moved(
    old: &CustomResourceDefinition,
    new: &CustomResourceDefinition,
) -> Vec<Finding> {
    let storage = |crd: &CustomResourceDefinition| {
        crd.spec
            .versions
            .iter()
            .find(|v| v.storage)
            .map(|v| v.name.clone())
    };
    match (storage(old), storage(new)) {
        (Some(before), Some(after)) if before != after => vec![crd_wide(
            format!(
                "storage version moved from {before} to {after}: stored objects stay at {before} until rewritten"
            ),
            Effect::Warning,
        )],
        _ => Vec::new(),
    }
}

/// Versions served side by side need a conversion between them unless their schemas are the
/// same: with strategy `None` the API server serves an object stored at one version as another
/// with only its `apiVersion` changed, so a field named differently reads as absent and a write
/// at the other version stores the wrong shape. Strategy `Webhook` needs a webhook to call.
fn conversion_missing(
    _old: &CustomResourceDefinition,
    new: &CustomResourceDefinition,
) -> Vec<Finding> {
    let served: Vec<&CustomResourceDefinitionVersion> =
        new.spec.versions.iter().filter(|v| v.served).collect();
    if served.len() < 2 {
        return Vec::new();
    }
    let conversion = new.spec.conversion.as_ref();
    if conversion.is_some_and(|c| c.strategy == "Webhook") {
        let callable = conversion
            .and_then(|c| c.webhook.as_ref())
            .and_then(|w| w.client_config.as_ref())
            .is_some_and(|c| c.service.is_some() || c.url.is_some());
        if callable {
            return Vec::new();
        }
        return vec![crd_wide(
            "conversion strategy Webhook names no webhook to call (neither a service nor a url)"
                .to_string(),
            Effect::Breaking,
        )];
    }
    let schema = |v: &CustomResourceDefinitionVersion| {
        v.schema
            .as_ref()
            .and_then(|s| s.open_api_v3_schema.as_ref())
            .and_then(|s| serde_json::to_value(s).ok())
    };
    let first = served[0];
    served[1..]
        .iter()
        .filter(|v| schema(v) != schema(first))
        .map(|v| {
            in_version(
                &v.name,
                format!(
                    "versions {} and {} are served without a conversion (strategy None) but their schemas differ: an object stored at one would read as the other unchanged; convert through a webhook",
                    first.name, v.name
                ),
                Effect::Breaking,
            )
        })
        .collect()
}
