//! v1alpha1's field names, refused at v1beta1 with the name to write instead.
//!
//! Once a DC serves v1beta1, kubectl's plain `frontend` means v1beta1 (the newest served
//! version), so a runbook's `kubectl patch frontend NAME -p '{"spec":{"expressVersion":...}}'`
//! writes at v1beta1. Left alone, the API server prunes `expressVersion` as an unknown field and
//! answers `patched (no change)`: the change is lost without an error. So the v1beta1 schema
//! declares each renamed field where it stood, with a rule that refuses it and names its new
//! name: the write fails, and says what to write. Nothing is stored under an old name, so no
//! stored object can break a rule, and a conversion never sees one.

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use serde_json::{Value, json};

/// One field renamed at v1beta1: the object it stood in (`spec`, `spec.ordering.upgrade[]`),
/// its v1alpha1 name and type, and where it is at v1beta1.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Renamed {
    pub within: &'static str,
    pub old: &'static str,
    /// Its OpenAPI type at v1alpha1. Declared at v1beta1 with it: the API server gives a rule
    /// only the typed fields of its object (an untyped one would make `has()` refer to a field
    /// CEL does not know, and the whole CRD would be refused).
    pub type_: &'static str,
    pub new: &'static str,
}

const fn renamed(
    within: &'static str,
    old: &'static str,
    type_: &'static str,
    new: &'static str,
) -> Renamed {
    Renamed {
        within,
        old,
        type_,
        new,
    }
}

/// The renamed fields of a Backend's or a Frontend's spec itself (docs/api.md, "Field by field").
const NODE_SPEC: [Renamed; 4] = [
    renamed(
        "spec",
        "clusterConfig",
        "object",
        "spec.cluster (the tenant is the ExpressCluster's spec.tenant)",
    ),
    renamed("spec", "expressVersion", "string", "spec.version"),
    renamed("spec", "configChangeset", "string", "spec.changeset"),
    renamed("spec", "deploymentDependencies", "object", "spec.ordering"),
];

/// The lists of prerequisites a node's spec holds at v1beta1.
const PREREQUISITE_LISTS: [&str; 2] = ["spec.ordering.provisioning[]", "spec.ordering.upgrade[]"];

/// The renamed fields of one prerequisite, in either list: its v1alpha1 name, type, and its
/// place within the prerequisite at v1beta1.
const PREREQUISITE: [(&str, &str, &str); 5] = [
    ("expressNode", "string", "node"),
    ("podConditionType", "string", "condition.type"),
    ("conditionStatus", "string", "condition.status"),
    ("expressVersion", "string", "pin.version"),
    ("deploymentRevision", "string", "pin.revision"),
];

/// The renamed fields of a Backend's or a Frontend's spec, its prerequisites' included.
pub fn node() -> Vec<Renamed> {
    let prerequisites = PREREQUISITE_LISTS.into_iter().flat_map(|within| {
        PREREQUISITE
            .into_iter()
            .map(move |(old, type_, new)| renamed(within, old, type_, new))
    });
    NODE_SPEC.into_iter().chain(prerequisites).collect()
}

/// The renamed fields of an ExpressCluster's spec.
pub const CLUSTER: [Renamed; 8] = [
    renamed("spec", "clusterName", "string", "spec.cluster"),
    renamed("spec", "tenantID", "integer", "spec.tenant.id"),
    renamed("spec", "tenantName", "string", "spec.tenant.name"),
    renamed("spec", "dependencies", "object", "spec.ordering"),
    renamed(
        "spec.defaults.backend",
        "expressVersion",
        "string",
        "spec.defaults.backend.version",
    ),
    renamed(
        "spec.defaults.backend",
        "configChangeset",
        "string",
        "spec.defaults.backend.changeset",
    ),
    renamed(
        "spec.defaults.frontend",
        "expressVersion",
        "string",
        "spec.defaults.frontend.version",
    ),
    renamed(
        "spec.defaults.frontend",
        "configChangeset",
        "string",
        "spec.defaults.frontend.changeset",
    ),
];

/// The renamed fields of the kind a CRD serves (none for a kind that kept its names).
pub fn of_kind(kind: &str) -> Vec<Renamed> {
    match kind {
        "Backend" | "Frontend" => node(),
        "ExpressCluster" => CLUSTER.to_vec(),
        _ => Vec::new(),
    }
}

/// What changes for people when a DC serves v1beta1, said before it does (the release's event
/// when its CRDs list the version, `kubectl express release`) and in docs/api.md.
pub const WHAT_CHANGES: &str = "once v1beta1 is served, kubectl's plain `expressclusters`, \
`backends` and `frontends` read and write v1beta1, whose fields are renamed (expressVersion is \
version, configChangeset is changeset, clusterConfig.clusterName and clusterName are cluster, \
deploymentDependencies and dependencies are ordering); a write with v1alpha1's names at v1beta1 \
is refused, naming the new one: write the new names, or address \
`<kind>.v1alpha1.express.dev` to keep the old ones";

/// What a write under an old name is told. One wording, in the API server's answer.
pub fn message(renamed: &Renamed, plural: &str) -> String {
    format!(
        "{within}.{old} is v1alpha1's name; this write is at v1beta1, where it is {new}. Once a DC \
         serves v1beta1, kubectl's plain `{plural}` reads and writes v1beta1: write the new name, \
         or address `{plural}.v1alpha1.express.dev` to keep v1alpha1's names",
        within = renamed.within,
        old = renamed.old,
        new = renamed.new,
    )
}

/// The schema node of the object `within` names (`spec.ordering.upgrade[]`), below a version's
/// `openAPIV3Schema`.
fn object_at<'a>(schema: &'a mut Value, within: &str) -> Option<&'a mut Value> {
    within.split('.').try_fold(schema, |node, step| {
        let (field, items) = match step.strip_suffix("[]") {
            Some(field) => (field, true),
            None => (step, false),
        };
        let node = node.get_mut("properties")?.get_mut(field)?;
        if items {
            node.get_mut("items")
        } else {
            Some(node)
        }
    })
}

/// Declares every old name of the CRD's kind in the schema of its `version` and refuses it
/// there. A CRD without that version, or a kind that kept its names, is left as it is; a place
/// the table names and the schema lacks is an error (the table and the types disagree).
pub fn refuse_at(crd: &mut CustomResourceDefinition, version: &str) -> Result<(), String> {
    let kind = crd.spec.names.kind.clone();
    let plural = crd.spec.names.plural.clone();
    let Some(served) = crd.spec.versions.iter_mut().find(|v| v.name == version) else {
        return Ok(());
    };
    let Some(validation) = served.schema.as_mut() else {
        return Err(format!("{kind} {version} has no schema"));
    };
    let Some(props) = validation.open_api_v3_schema.take() else {
        return Err(format!("{kind} {version} has no schema"));
    };
    let mut schema = serde_json::to_value(props).map_err(|e| e.to_string())?;
    for renamed in of_kind(&kind) {
        let object = object_at(&mut schema, renamed.within)
            .ok_or_else(|| format!("{kind} {version} has no {}", renamed.within))?;
        declare(object, &renamed, &plural)?;
    }
    validation.open_api_v3_schema =
        Some(serde_json::from_value(schema).map_err(|e| e.to_string())?);
    Ok(())
}

/// The old name as a property of `object` (so that it reaches the rule instead of being pruned)
/// and the rule that refuses it.
fn declare(object: &mut Value, renamed: &Renamed, plural: &str) -> Result<(), String> {
    let Some(map) = object.as_object_mut() else {
        return Err(format!("{} is not an object schema", renamed.within));
    };
    let properties = map
        .entry("properties")
        .or_insert_with(|| json!({}))
        .as_object_mut()
        .ok_or_else(|| format!("{} has malformed properties", renamed.within))?;
    let mut declared = json!({
        "type": renamed.type_,
        "description": format!("v1alpha1's name, refused at v1beta1: write {}.", renamed.new),
    });
    if renamed.type_ == "object" {
        declared["x-kubernetes-preserve-unknown-fields"] = json!(true);
    }
    properties.insert(renamed.old.to_owned(), declared);
    let rules = map
        .entry("x-kubernetes-validations")
        .or_insert_with(|| json!([]))
        .as_array_mut()
        .ok_or_else(|| format!("{} has malformed rules", renamed.within))?;
    rules.push(json!({
        "rule": format!("!has(self.{})", renamed.old),
        "message": message(renamed, plural),
        "fieldPath": format!(".{}", renamed.old),
        "reason": "FieldValueForbidden",
    }));
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use kube::CustomResourceExt;

    fn beta(mut crd: CustomResourceDefinition) -> Value {
        refuse_at(&mut crd, "v1beta1").expect("every place the table names exists");
        serde_json::to_value(&crd.spec.versions[0].schema).expect("schema")["openAPIV3Schema"]
            .clone()
    }

    #[test]
    fn every_old_name_is_declared_and_refused_where_it_stood() {
        for (crd, table) in [
            (crate::v1beta1::Frontend::crd(), &node()[..]),
            (crate::v1beta1::Backend::crd(), &node()[..]),
            (crate::v1beta1::ExpressCluster::crd(), &CLUSTER[..]),
        ] {
            let plural = crd.spec.names.plural.clone();
            let mut schema = beta(crd);
            for renamed in table {
                let object = object_at(&mut schema, renamed.within).expect("the place");
                assert!(
                    object["properties"][renamed.old].is_object(),
                    "{renamed:?} declared"
                );
                let rules = object["x-kubernetes-validations"]
                    .as_array()
                    .expect("rules");
                let rule = rules
                    .iter()
                    .find(|r| r["fieldPath"] == format!(".{}", renamed.old))
                    .expect("a rule for the old name");
                assert_eq!(rule["rule"], format!("!has(self.{})", renamed.old));
                assert_eq!(rule["reason"], "FieldValueForbidden");
                let said = rule["message"].as_str().expect("message");
                assert!(said.contains(renamed.new), "{said}");
                assert!(said.contains(&format!("{plural}.v1alpha1.express.dev")));
            }
        }
    }

    /// Every property schema named `name` anywhere in `schema`.
    fn properties_named<'a>(schema: &'a Value, name: &str, found: &mut Vec<&'a Value>) {
        match schema {
            Value::Object(map) => {
                if let Some(property) = map.get("properties").and_then(|p| p.get(name)) {
                    found.push(property);
                }
                map.values().for_each(|v| properties_named(v, name, found));
            }
            Value::Array(items) => items.iter().for_each(|v| properties_named(v, name, found)),
            _ => {}
        }
    }

    #[test]
    fn the_old_names_are_v1alpha1s_with_their_type_and_no_longer_v1beta1s() {
        // Each old name is a property of the v1alpha1 schema, of the type declared for it, and
        // none is a property of the v1beta1 types where it is refused: a refusal never hides a
        // field v1beta1 has, and a write that type-checks at v1alpha1 meets the rule, not a
        // type error.
        let schema = |crd: CustomResourceDefinition| {
            serde_json::to_value(&crd.spec.versions[0].schema).expect("schema")["openAPIV3Schema"]
                .clone()
        };
        for (alpha, beta, table) in [
            (
                schema(crate::Frontend::crd()),
                schema(crate::v1beta1::Frontend::crd()),
                &node()[..],
            ),
            (
                schema(crate::ExpressCluster::crd()),
                schema(crate::v1beta1::ExpressCluster::crd()),
                &CLUSTER[..],
            ),
        ] {
            for renamed in table {
                let mut beta = beta.clone();
                let at_beta = object_at(&mut beta, renamed.within).expect("the v1beta1 place");
                assert!(
                    at_beta["properties"].get(renamed.old).is_none(),
                    "{renamed:?} is a v1beta1 field"
                );
                let mut found = Vec::new();
                properties_named(&alpha, renamed.old, &mut found);
                assert!(
                    found.iter().any(|p| p["type"] == renamed.type_),
                    "{renamed:?}: no v1alpha1 property of that name and type: {found:?}"
                );
            }
        }
    }

    #[test]
    fn a_kind_that_kept_its_names_and_a_missing_version_are_left_alone() {
        let mut release = crate::OperatorRelease::crd();
        let before = release.clone();
        refuse_at(&mut release, "v1alpha1").expect("nothing to do");
        assert_eq!(release, before);
        let mut frontend = crate::Frontend::crd();
        let before = frontend.clone();
        refuse_at(&mut frontend, "v1beta1").expect("no such version");
        assert_eq!(frontend, before);
    }
}
