//! Where each field of a versioned kind lives at each version: the field-by-field mapping of
//! docs/api.md, as moves of JSON keys.

use serde_json::{Map, Value};

use super::{ANNOTATION_V1ALPHA1_CLUSTER_CONFIG, ConversionError};

type Object = Map<String, Value>;

/// The object under `key` of `parent`, if there is one; anything but an object there is an error
/// naming `path`.
fn object_at<'a>(
    parent: &'a mut Object,
    key: &str,
    path: &str,
) -> Result<Option<&'a mut Object>, ConversionError> {
    match parent.get_mut(key) {
        None => Ok(None),
        Some(Value::Object(map)) => Ok(Some(map)),
        Some(_) => Err(ConversionError::Malformed {
            path: path.to_owned(),
            expected: "an object",
        }),
    }
}

/// Moves `map[from]` to `map[to]`; both present is an error, since one would be lost.
fn rename(map: &mut Object, from: &str, to: &str, path: &str) -> Result<(), ConversionError> {
    let Some(value) = map.remove(from) else {
        return Ok(());
    };
    if map.contains_key(to) {
        return Err(ConversionError::Malformed {
            path: format!("{path}.{to}"),
            expected: "absent (it is where this version keeps the field it converts to)",
        });
    }
    map.insert(to.to_owned(), value);
    Ok(())
}

/// Moves the listed keys of `map` into a new object at `map[into]`, renamed; the object is made
/// only when one of them is present.
fn gather(
    map: &mut Object,
    keys: &[(&str, &str)],
    into: &str,
    path: &str,
) -> Result<(), ConversionError> {
    let mut gathered = Object::new();
    for (from, to) in keys {
        if let Some(value) = map.remove(*from) {
            gathered.insert((*to).to_owned(), value);
        }
    }
    if gathered.is_empty() {
        return Ok(());
    }
    if map.contains_key(into) {
        return Err(ConversionError::Malformed {
            path: format!("{path}.{into}"),
            expected: "absent (it is where this version keeps the fields it converts to)",
        });
    }
    map.insert(into.to_owned(), Value::Object(gathered));
    Ok(())
}

/// The reverse of [`gather`]: the keys of the object at `map[from]` back into `map`, renamed.
fn scatter(
    map: &mut Object,
    from: &str,
    keys: &[(&str, &str)],
    path: &str,
) -> Result<(), ConversionError> {
    let Some(value) = map.remove(from) else {
        return Ok(());
    };
    let Value::Object(mut inner) = value else {
        return Err(ConversionError::Malformed {
            path: format!("{path}.{from}"),
            expected: "an object",
        });
    };
    for (to, key) in keys {
        if let Some(value) = inner.remove(*key) {
            if map.contains_key(*to) {
                return Err(ConversionError::Malformed {
                    path: format!("{path}.{to}"),
                    expected: "absent (it is where this version keeps a field it converts to)",
                });
            }
            map.insert((*to).to_owned(), value);
        }
    }
    Ok(())
}

/// A v1alpha1 prerequisite's condition fields and their v1beta1 names under `condition`.
const CONDITION: [(&str, &str); 2] = [("podConditionType", "type"), ("conditionStatus", "status")];
/// A v1alpha1 prerequisite's pin fields and their v1beta1 names under `pin`.
const PIN: [(&str, &str); 2] = [
    ("expressVersion", "version"),
    ("deploymentRevision", "revision"),
];
/// A node's or a cluster default's fields renamed at v1beta1.
const RENAMED: [(&str, &str); 2] = [
    ("expressVersion", "version"),
    ("configChangeset", "changeset"),
];
/// A node's prerequisite lists: v1alpha1 under `deploymentDependencies`, v1beta1 under `ordering`.
const PREREQUISITE_LISTS: [(&str, &str); 2] = [
    ("provisioningPrerequisites", "provisioning"),
    ("upgradePrerequisites", "upgrade"),
];
/// The ExpressCluster's tenant fields: v1alpha1 at the top of its spec, v1beta1 under `tenant`.
const TENANT: [(&str, &str); 2] = [("tenantID", "id"), ("tenantName", "name")];

#[derive(Clone, Copy)]
enum Direction {
    ToV1beta1,
    ToV1alpha1,
}

impl Direction {
    /// `(from, to)` of a pair written `(v1alpha1, v1beta1)`.
    fn pick<'a>(self, (alpha, beta): (&'a str, &'a str)) -> (&'a str, &'a str) {
        match self {
            Direction::ToV1beta1 => (alpha, beta),
            Direction::ToV1alpha1 => (beta, alpha),
        }
    }
}

fn rename_all(
    map: &mut Object,
    pairs: &[(&str, &str)],
    direction: Direction,
    path: &str,
) -> Result<(), ConversionError> {
    for pair in pairs {
        let (from, to) = direction.pick(*pair);
        rename(map, from, to, path)?;
    }
    Ok(())
}

fn prerequisite(
    value: &mut Value,
    direction: Direction,
    path: &str,
) -> Result<(), ConversionError> {
    let Value::Object(map) = value else {
        return Err(ConversionError::Malformed {
            path: path.to_owned(),
            expected: "an object",
        });
    };
    let (node_from, node_to) = direction.pick(("expressNode", "node"));
    rename(map, node_from, node_to, path)?;
    match direction {
        Direction::ToV1beta1 => {
            gather(map, &CONDITION, "condition", path)?;
            gather(map, &PIN, "pin", path)
        }
        Direction::ToV1alpha1 => {
            scatter(map, "condition", &CONDITION, path)?;
            scatter(map, "pin", &PIN, path)
        }
    }
}

fn node_ordering(spec: &mut Object, direction: Direction) -> Result<(), ConversionError> {
    let (from, to) = direction.pick(("deploymentDependencies", "ordering"));
    rename(spec, from, to, "spec")?;
    let path = format!("spec.{to}");
    let Some(ordering) = object_at(spec, to, &path)? else {
        return Ok(());
    };
    for pair in PREREQUISITE_LISTS {
        let (from, to) = direction.pick(pair);
        rename(ordering, from, to, &path)?;
        match ordering.get_mut(to) {
            None => {}
            Some(Value::Array(list)) => {
                for (i, item) in list.iter_mut().enumerate() {
                    prerequisite(item, direction, &format!("{path}.{to}[{i}]"))?;
                }
            }
            Some(_) => {
                return Err(ConversionError::Malformed {
                    path: format!("{path}.{to}"),
                    expected: "a list",
                });
            }
        }
    }
    Ok(())
}

fn spec_of(object: &mut Value) -> Result<Option<&mut Object>, ConversionError> {
    let Value::Object(map) = object else {
        return Err(ConversionError::NotAnObject);
    };
    object_at(map, "spec", "spec")
}

fn annotations_of(object: &mut Value) -> Result<Option<&mut Object>, ConversionError> {
    let Value::Object(map) = object else {
        return Err(ConversionError::NotAnObject);
    };
    match object_at(map, "metadata", "metadata")? {
        None => Ok(None),
        Some(metadata) => object_at(metadata, "annotations", "metadata.annotations"),
    }
}

/// Sets (or with `None` removes) one annotation, making or dropping the map as needed: the API
/// server never keeps an empty one, so neither does a conversion.
fn set_annotation(
    object: &mut Value,
    key: &str,
    value: Option<String>,
) -> Result<(), ConversionError> {
    let Value::Object(map) = object else {
        return Err(ConversionError::NotAnObject);
    };
    let metadata = match map.get_mut("metadata") {
        Some(Value::Object(metadata)) => metadata,
        Some(_) => {
            return Err(ConversionError::Malformed {
                path: "metadata".to_owned(),
                expected: "an object",
            });
        }
        None if value.is_none() => return Ok(()),
        None => map
            .entry("metadata")
            .or_insert_with(|| Value::Object(Object::new()))
            .as_object_mut()
            .ok_or(ConversionError::NotAnObject)?,
    };
    match value {
        Some(value) => {
            let annotations = metadata
                .entry("annotations")
                .or_insert_with(|| Value::Object(Object::new()));
            let Value::Object(annotations) = annotations else {
                return Err(ConversionError::Malformed {
                    path: "metadata.annotations".to_owned(),
                    expected: "an object",
                });
            };
            annotations.insert(key.to_owned(), Value::String(value));
        }
        None => {
            if let Some(Value::Object(annotations)) = metadata.get_mut("annotations") {
                annotations.remove(key);
                if annotations.is_empty() {
                    metadata.remove("annotations");
                }
            }
        }
    }
    Ok(())
}

/// A Backend or Frontend from v1alpha1 to v1beta1 (its `apiVersion` is the caller's).
pub(super) fn node_to_v1beta1(object: &mut Value) -> Result<(), ConversionError> {
    let mut kept = None;
    if let Some(spec) = spec_of(object)? {
        if let Some(config) = spec.remove("clusterConfig") {
            let Value::Object(mut config) = config else {
                return Err(ConversionError::Malformed {
                    path: "spec.clusterConfig".to_owned(),
                    expected: "an object",
                });
            };
            let name = config.remove("clusterName");
            // Without a name, even an empty clusterConfig is kept, so that it reads back as it
            // was written.
            if !config.is_empty() || name.is_none() {
                kept = Some(Value::Object(config).to_string());
            }
            if let Some(name) = name {
                if spec.contains_key("cluster") {
                    return Err(ConversionError::Malformed {
                        path: "spec.cluster".to_owned(),
                        expected: "absent (it is where v1beta1 keeps clusterConfig.clusterName)",
                    });
                }
                spec.insert("cluster".to_owned(), name);
            }
        }
        rename_all(spec, &RENAMED, Direction::ToV1beta1, "spec")?;
        node_ordering(spec, Direction::ToV1beta1)?;
    }
    set_annotation(object, ANNOTATION_V1ALPHA1_CLUSTER_CONFIG, kept)
}

/// A Backend or Frontend from v1beta1 to v1alpha1.
pub(super) fn node_to_v1alpha1(object: &mut Value) -> Result<(), ConversionError> {
    // A kept clusterConfig that does not read as an object is left where it is rather than
    // failing every read of the node: it is then lost at v1alpha1, nothing else is.
    let kept = annotations_of(object)?
        .and_then(|a| a.get(ANNOTATION_V1ALPHA1_CLUSTER_CONFIG))
        .and_then(Value::as_str)
        .and_then(|text| serde_json::from_str::<Object>(text).ok());
    let restored = kept.is_some();
    if let Some(spec) = spec_of(object)? {
        let cluster = spec.remove("cluster");
        if cluster.is_some() || kept.is_some() {
            let mut config = kept.unwrap_or_default();
            if let Some(name) = cluster {
                config.insert("clusterName".to_owned(), name);
            }
            if spec.contains_key("clusterConfig") {
                return Err(ConversionError::Malformed {
                    path: "spec.clusterConfig".to_owned(),
                    expected: "absent at v1beta1 (spec.cluster names the cluster)",
                });
            }
            spec.insert("clusterConfig".to_owned(), Value::Object(config));
        }
        rename_all(spec, &RENAMED, Direction::ToV1alpha1, "spec")?;
        node_ordering(spec, Direction::ToV1alpha1)?;
    }
    if restored {
        set_annotation(object, ANNOTATION_V1ALPHA1_CLUSTER_CONFIG, None)?;
    }
    Ok(())
}

fn cluster_defaults(spec: &mut Object, direction: Direction) -> Result<(), ConversionError> {
    let Some(defaults) = object_at(spec, "defaults", "spec.defaults")? else {
        return Ok(());
    };
    for kind in ["backend", "frontend"] {
        let path = format!("spec.defaults.{kind}");
        if let Some(kind_defaults) = object_at(defaults, kind, &path)? {
            rename_all(kind_defaults, &RENAMED, direction, &path)?;
        }
    }
    Ok(())
}

/// An ExpressCluster from v1alpha1 to v1beta1.
pub(super) fn cluster_to_v1beta1(object: &mut Value) -> Result<(), ConversionError> {
    let Some(spec) = spec_of(object)? else {
        return Ok(());
    };
    rename(spec, "clusterName", "cluster", "spec")?;
    gather(spec, &TENANT, "tenant", "spec")?;
    rename(spec, "dependencies", "ordering", "spec")?;
    cluster_defaults(spec, Direction::ToV1beta1)
}

/// An ExpressCluster from v1beta1 to v1alpha1.
pub(super) fn cluster_to_v1alpha1(object: &mut Value) -> Result<(), ConversionError> {
    let Some(spec) = spec_of(object)? else {
        return Ok(());
    };
    rename(spec, "cluster", "clusterName", "spec")?;
    scatter(spec, "tenant", &TENANT, "spec")?;
    rename(spec, "ordering", "dependencies", "spec")?;
    cluster_defaults(spec, Direction::ToV1alpha1)
}
