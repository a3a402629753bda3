//! Server-side apply and `managedFields`.
//!
//! Fields are tracked as paths: object keys (`f:name`) and items of associative lists
//! (`k:{"name":"x"}`, keyed like strategic merge); any other list is one atomic field. An
//! apply conflicts when it sets a field another manager owns to a different value (unless
//! forced, which takes the field over); fields a manager applied before and no longer applies
//! are removed unless another manager owns them.

use std::collections::{BTreeMap, BTreeSet};

use serde_json::{Map, Value, json};

use crate::api::{Cluster, WriteOptions};
use crate::clock;
use crate::error::ApiError;
use crate::patch::merge_key;
use crate::registry::ResourceType;

#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
enum Segment {
    Field(String),
    Key(String),
}

type Path = Vec<Segment>;

/// Fields that identify the object rather than configure it.
fn ignored(path: &[Segment]) -> bool {
    matches!(path, [Segment::Field(a)] if a == "apiVersion" || a == "kind")
        || matches!(path, [Segment::Field(m), Segment::Field(f)] if m == "metadata"
            && matches!(f.as_str(), "name" | "namespace" | "uid" | "resourceVersion" | "generation" | "creationTimestamp" | "managedFields" | "deletionTimestamp" | "deletionGracePeriodSeconds"))
}

fn list_key(field: &str, items: &[Value]) -> Option<&'static str> {
    let key = merge_key(field).or(Some("name"))?;
    (!items.is_empty() && items.iter().all(|i| i.get(key).is_some())).then_some(key)
}

fn collect(value: &Value, field: &str, path: &mut Path, out: &mut BTreeSet<Path>) {
    match value {
        Value::Object(map) if !map.is_empty() => {
            for (k, v) in map {
                path.push(Segment::Field(k.clone()));
                if !ignored(path) {
                    collect(v, k, path, out);
                }
                path.pop();
            }
        }
        Value::Array(items) => match list_key(field, items) {
            Some(key) => {
                for item in items {
                    path.push(Segment::Key(json!({key: item[key]}).to_string()));
                    out.insert(path.clone());
                    collect(item, "", path, out);
                    path.pop();
                }
            }
            None => {
                out.insert(path.clone());
            }
        },
        _ => {
            out.insert(path.clone());
        }
    }
}

fn fields_of(object: &Value) -> BTreeSet<Path> {
    let mut out = BTreeSet::new();
    collect(object, "", &mut Vec::new(), &mut out);
    out
}

/// Looks a path up in an object.
fn lookup<'a>(object: &'a Value, path: &[Segment]) -> Option<&'a Value> {
    let mut current = object;
    for segment in path {
        current = match segment {
            Segment::Field(f) => current.get(f)?,
            Segment::Key(k) => {
                let key: Map<String, Value> = serde_json::from_str(k).ok()?;
                let (name, id) = key.iter().next()?;
                current
                    .as_array()?
                    .iter()
                    .find(|i| i.get(name) == Some(id))?
            }
        };
    }
    Some(current)
}

fn remove(object: &mut Value, path: &[Segment]) {
    let Some((last, parent_path)) = path.split_last() else {
        return;
    };
    let mut current = object;
    for segment in parent_path {
        let next = match segment {
            Segment::Field(f) => current.get_mut(f),
            Segment::Key(k) => {
                let Ok(key) = serde_json::from_str::<Map<String, Value>>(k) else {
                    return;
                };
                let Some((name, id)) = key.iter().next() else {
                    return;
                };
                current
                    .as_array_mut()
                    .and_then(|a| a.iter_mut().find(|i| i.get(name) == Some(id)))
            }
        };
        match next {
            Some(next) => current = next,
            None => return,
        }
    }
    match last {
        Segment::Field(f) => {
            if let Some(map) = current.as_object_mut() {
                map.remove(f);
            }
        }
        Segment::Key(k) => {
            let Ok(key) = serde_json::from_str::<Map<String, Value>>(k) else {
                return;
            };
            if let (Some((name, id)), Some(items)) = (key.iter().next(), current.as_array_mut()) {
                items.retain(|i| i.get(name) != Some(id));
            }
        }
    }
}

/// Removes the objects a removal left empty, up the path, unless another manager owns a field
/// at or below them (an applier that drops its last field of a map drops the map).
fn prune_empty_parents(object: &mut Value, removed: &[Segment], others: &BTreeSet<Path>) {
    for depth in (1..removed.len()).rev() {
        let parent = &removed[..depth];
        let empty =
            lookup(object, parent).is_some_and(|v| v.as_object().is_some_and(|m| m.is_empty()));
        if !empty || others.iter().any(|o| o.starts_with(parent)) {
            return;
        }
        remove(object, parent);
    }
}

/// Merges an applied configuration into an object: objects key by key, associative lists item
/// by item, everything else replaced.
fn merge(target: &mut Value, config: &Value, field: &str) {
    match (target, config) {
        (Value::Object(t), Value::Object(c)) => {
            for (k, v) in c {
                match t.get_mut(k) {
                    Some(existing) => merge(existing, v, k),
                    None => {
                        t.insert(k.clone(), v.clone());
                    }
                }
            }
        }
        (Value::Array(t), Value::Array(c))
            if list_key(field, c).is_some() && list_key(field, t).is_some() =>
        {
            let key = list_key(field, c).unwrap_or("name");
            for item in c {
                match t.iter_mut().find(|x| x.get(key) == item.get(key)) {
                    Some(existing) => merge(existing, item, ""),
                    None => t.push(item.clone()),
                }
            }
        }
        (t, c) => *t = c.clone(),
    }
}

fn to_fields_v1(paths: &BTreeSet<Path>) -> Value {
    let mut root = Map::new();
    for path in paths {
        let mut node = &mut root;
        for (i, segment) in path.iter().enumerate() {
            let name = match segment {
                Segment::Field(f) => format!("f:{f}"),
                Segment::Key(k) => format!("k:{k}"),
            };
            let entry = node.entry(name).or_insert_with(|| json!({}));
            if matches!(segment, Segment::Key(_)) && i + 1 < path.len() {
                entry
                    .as_object_mut()
                    .map(|m| m.insert(".".into(), json!({})));
            }
            match entry.as_object_mut() {
                Some(map) => node = map,
                None => break,
            }
        }
    }
    Value::Object(root)
}

fn from_fields_v1(value: &Value, path: &mut Path, out: &mut BTreeSet<Path>) {
    let Some(map) = value.as_object() else { return };
    if map.is_empty() && !path.is_empty() {
        out.insert(path.clone());
        return;
    }
    for (name, child) in map {
        let segment = if let Some(f) = name.strip_prefix("f:") {
            Segment::Field(f.to_owned())
        } else if let Some(k) = name.strip_prefix("k:") {
            Segment::Key(k.to_owned())
        } else {
            continue;
        };
        path.push(segment);
        if matches!(path.last(), Some(Segment::Key(_))) {
            out.insert(path.clone());
        }
        from_fields_v1(child, path, out);
        path.pop();
    }
}

#[derive(Clone, Debug)]
struct Entry {
    manager: String,
    operation: String,
    subresource: Option<String>,
    fields: BTreeSet<Path>,
    raw: Value,
}

fn entries(object: &Value) -> Vec<Entry> {
    object["metadata"]["managedFields"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|raw| {
            let mut fields = BTreeSet::new();
            from_fields_v1(&raw["fieldsV1"], &mut Vec::new(), &mut fields);
            Entry {
                manager: raw["manager"].as_str().unwrap_or("").to_owned(),
                operation: raw["operation"].as_str().unwrap_or("Update").to_owned(),
                subresource: raw["subresource"].as_str().map(str::to_owned),
                fields,
                raw: raw.clone(),
            }
        })
        .collect()
}

/// Writes the managed fields back, dropping ownership of fields the object no longer has (a
/// field removed by any write is owned by nobody).
fn write_entries(object: &mut Value, entries: &[Entry], api_version: &str) {
    let entries: Vec<Entry> = entries
        .iter()
        .map(|e| Entry {
            fields: e
                .fields
                .iter()
                .filter(|p| lookup(object, p).is_some())
                .cloned()
                .collect(),
            ..e.clone()
        })
        .collect();
    let list: Vec<Value> = entries
        .iter()
        .filter(|e| !e.fields.is_empty())
        .map(|e| {
            let mut raw = e.raw.clone();
            if !raw.is_object() {
                raw = json!({});
            }
            raw["manager"] = json!(e.manager);
            raw["operation"] = json!(e.operation);
            raw["apiVersion"] = raw
                .get("apiVersion")
                .cloned()
                .filter(|v| v.is_string())
                .unwrap_or(json!(api_version));
            // Only the entry of the write being recorded is new (its raw is empty); the others
            // keep the time of their own last write, as the API server keeps it.
            if raw.get("time").is_none_or(|t| !t.is_string()) {
                raw["time"] = json!(clock::now());
            }
            raw["fieldsType"] = json!("FieldsV1");
            raw["fieldsV1"] = to_fields_v1(&e.fields);
            if let Some(sub) = &e.subresource {
                raw["subresource"] = json!(sub);
            }
            raw
        })
        .collect();
    if let Some(meta) = object.get_mut("metadata").and_then(Value::as_object_mut) {
        if list.is_empty() {
            meta.remove("managedFields");
        } else {
            meta.insert("managedFields".into(), Value::Array(list));
        }
    }
}

/// Records a non-apply write by `manager`. A create (`previous` None) owns every field not owned
/// by an applier; an update owns, as the API server has it, what it owned before and what it
/// changed, and takes what it changed from every other manager (a metadata patch leaves the
/// status to whoever applied it, even under the same manager name).
pub fn record_update(
    object: &mut Value,
    previous: Option<&Value>,
    manager: &str,
    api_version: &str,
) {
    let mut all = entries(object);
    let applied: BTreeSet<Path> = all
        .iter()
        .filter(|e| e.operation == "Apply" && e.manager != manager)
        .flat_map(|e| e.fields.iter().cloned())
        .collect();
    let owned: BTreeSet<Path> = match previous {
        None => fields_of(object).difference(&applied).cloned().collect(),
        Some(previous) => {
            let before: BTreeSet<Path> = all
                .iter()
                .filter(|e| e.manager == manager && e.operation == "Update")
                .flat_map(|e| e.fields.iter().cloned())
                .collect();
            fields_of(object)
                .into_iter()
                .filter(|p| before.contains(p) || lookup(previous, p) != lookup(object, p))
                .collect()
        }
    };
    all.retain(|e| !(e.manager == manager && e.operation == "Update"));
    for entry in &mut all {
        entry.fields.retain(|f| !owned.contains(f));
    }
    all.push(Entry {
        manager: manager.to_owned(),
        operation: "Update".into(),
        subresource: None,
        fields: owned,
        raw: json!({}),
    });
    write_entries(object, &all, api_version);
}

/// An apply: the configuration is read and named, then it creates the object, or it is checked
/// for conflicts with other managers and merged into the object, which records who applied what.
#[allow(clippy::too_many_arguments)]
pub fn server_side_apply(
    cluster: &mut Cluster,
    rt: &ResourceType,
    namespace: &str,
    name: &str,
    subresource: Option<&str>,
    current: Option<crate::store::Object>,
    body: &[u8],
    options: &WriteOptions,
) -> Result<Value, ApiError> {
    let manager = field_manager(options)?;
    let config = apply_configuration(body, name)?;
    let applied = fields_of(&config);
    let Some(current) = current else {
        if subresource.is_some() {
            return Err(ApiError::not_found(&rt.group, &rt.plural, name));
        }
        let object = first_apply(&config, manager, applied, &rt.api_version());
        let create = WriteOptions {
            field_manager: None,
            ..options.clone()
        };
        return cluster.create(rt, namespace, object, &create);
    };
    let mut managers = entries(&current);
    let conflicts = conflicts(&current, &config, &managers, &manager, &applied);
    if !conflicts.is_empty() && !options.force {
        return Err(conflict_error(&conflicts));
    }
    let mut next = merge_applied(
        &current,
        &config,
        &mut managers,
        &manager,
        subresource,
        &applied,
    );
    managers.push(Entry {
        manager,
        operation: "Apply".into(),
        subresource: subresource.map(str::to_owned),
        fields: applied,
        raw: json!({}),
    });
    write_entries(&mut next, &managers, &rt.api_version());
    let write = WriteOptions {
        field_manager: None,
        ..options.clone()
    };
    cluster.apply_write(rt, namespace, name, subresource, &current, next, &write)
}

/// The applier's name, which an apply must give.
fn field_manager(options: &WriteOptions) -> Result<String, ApiError> {
    options
        .field_manager
        .clone()
        .filter(|m| !m.is_empty())
        .ok_or_else(|| {
            ApiError::invalid_option(
                "PatchOptions",
                "fieldManager",
                "FieldValueRequired",
                "Required value: is required for apply patch",
            )
        })
}

/// The apply body as an object named as on the URL.
fn apply_configuration(body: &[u8], name: &str) -> Result<Value, ApiError> {
    let text =
        std::str::from_utf8(body).map_err(|_| ApiError::bad_request("apply body is not UTF-8"))?;
    let config: Value = serde_yaml::from_str(text)
        .map_err(|e| ApiError::bad_request(format!("invalid apply configuration: {e}")))?;
    if !config.is_object() {
        return Err(ApiError::bad_request(
            "apply configuration must be an object",
        ));
    }
    let mut config = config;
    match config["metadata"]["name"].as_str() {
        // The name comes from the URL when the configuration leaves it out.
        None => {
            if !config["metadata"].is_object() {
                config["metadata"] = json!({});
            }
            config["metadata"]["name"] = json!(name);
        }
        Some(given) if given != name => {
            return Err(ApiError::bad_request(format!(
                "the name of the applied object ({given}) does not match the name on the URL ({name})"
            )));
        }
        Some(_) => {}
    }
    Ok(config)
}

/// The object an apply creates: the configuration, owned wholly by its applier.
fn first_apply(
    config: &Value,
    manager: String,
    applied: BTreeSet<Path>,
    api_version: &str,
) -> Value {
    let mut object = config.clone();
    write_entries(
        &mut object,
        &[Entry {
            manager,
            operation: "Apply".into(),
            subresource: None,
            fields: applied,
            raw: json!({}),
        }],
        api_version,
    );
    object
}

/// The fields the configuration sets to another value than another manager left them at: each
/// as that manager and the field's path.
fn conflicts(
    current: &Value,
    config: &Value,
    managers: &[Entry],
    manager: &str,
    applied: &BTreeSet<Path>,
) -> Vec<(String, String)> {
    let mut conflicts = Vec::new();
    for entry in managers.iter().filter(|e| e.manager != manager) {
        for path in entry.fields.intersection(applied) {
            if lookup(current, path) != lookup(config, path) {
                conflicts.push((entry.manager.clone(), describe(path)));
            }
        }
    }
    conflicts
}

/// A 409 worded as the API server words an apply conflict: one cause per field
/// (`FieldManagerConflict`, the field, the manager), the message singular for one conflict and
/// grouped by manager for several.
fn conflict_error(conflicts: &[(String, String)]) -> ApiError {
    let message = match conflicts {
        [(manager, path)] => {
            format!("Apply failed with 1 conflict: conflict with \"{manager}\": {path}")
        }
        _ => {
            let mut by_manager: BTreeMap<&str, Vec<&str>> = BTreeMap::new();
            for (manager, path) in conflicts {
                by_manager.entry(manager).or_default().push(path);
            }
            let lines: Vec<String> = by_manager
                .iter()
                .flat_map(|(manager, paths)| {
                    std::iter::once(format!("conflicts with \"{manager}\":"))
                        .chain(paths.iter().map(|path| format!("- {path}")))
                })
                .collect();
            format!(
                "Apply failed with {} conflicts: {}",
                conflicts.len(),
                lines.join("\n")
            )
        }
    };
    let causes: Vec<Value> = conflicts
        .iter()
        .map(|(manager, path)| {
            json!({"reason": "FieldManagerConflict", "message": format!("conflict with \"{manager}\""), "field": path})
        })
        .collect();
    ApiError::apply_conflict(message, causes)
}

/// The object with the configuration merged in and the fields the applier dropped since its
/// last apply removed; `managers` loses the contested fields and the applier's previous entry.
fn merge_applied(
    current: &Value,
    config: &Value,
    managers: &mut Vec<Entry>,
    manager: &str,
    subresource: Option<&str>,
    applied: &BTreeSet<Path>,
) -> Value {
    // An applier's entries are per subresource, as the API server keeps them: applying the
    // status leaves what the same manager applied to the object itself.
    let same_entry = |e: &Entry| {
        e.manager == manager && e.operation == "Apply" && e.subresource.as_deref() == subresource
    };
    let previously: BTreeSet<Path> = managers
        .iter()
        .filter(|e| same_entry(e))
        .flat_map(|e| e.fields.iter().cloned())
        .collect();
    // Forcing takes contested fields over.
    for entry in managers.iter_mut().filter(|e| e.manager != manager) {
        entry.fields.retain(|f| !applied.contains(f));
    }
    let others: BTreeSet<Path> = managers
        .iter()
        .filter(|e| e.manager != manager)
        .flat_map(|e| e.fields.iter().cloned())
        .collect();
    let mut next = current.clone();
    merge(&mut next, config, "");
    for dropped in previously.difference(applied) {
        if !others
            .iter()
            .any(|o| o.starts_with(dropped) || dropped.starts_with(o))
        {
            remove(&mut next, dropped);
            prune_empty_parents(&mut next, dropped, &others);
        }
    }
    managers.retain(|e| !same_entry(e));
    next
}

fn describe(path: &[Segment]) -> String {
    path.iter()
        .map(|s| match s {
            Segment::Field(f) => format!(".{f}"),
            Segment::Key(k) => format!("[{k}]"),
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_write_stamps_only_its_own_entry_with_the_time() {
        let long_ago = "2020-01-01T00:00:00Z";
        let mut object = json!({"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": "c", "managedFields": [{
                "manager": "helm", "operation": "Apply", "apiVersion": "v1", "time": long_ago,
                "fieldsType": "FieldsV1", "fieldsV1": {"f:data": {"f:a": {}}}}]},
            "data": {"a": "1"}});
        let previous = object.clone();
        object["data"]["b"] = json!("2");
        record_update(&mut object, Some(&previous), "operator", "v1");
        let entries = object["metadata"]["managedFields"].as_array().unwrap();
        let time_of = |manager: &str| {
            entries.iter().find(|e| e["manager"] == manager).unwrap()["time"]
                .as_str()
                .unwrap()
                .to_owned()
        };
        assert_eq!(time_of("helm"), long_ago, "{entries:?}");
        assert_ne!(time_of("operator"), long_ago);
    }

    #[test]
    fn an_update_owns_what_it_changed_not_what_the_same_manager_applied() {
        // A driver applies the status and, as the same manager, patches an annotation: the
        // status stays its apply's, so that the next apply can clear a field of it.
        let mut object = json!({"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": "c", "managedFields": [{
                "manager": "driver", "operation": "Apply", "apiVersion": "v1", "subresource": "status",
                "fieldsType": "FieldsV1", "fieldsV1": {"f:status": {"f:pausedSince": {}, "f:phase": {}}}}]},
            "status": {"pausedSince": "t", "phase": "Paused"}});
        let previous = object.clone();
        object["metadata"]["annotations"] = json!({"resume": "r1"});
        record_update(&mut object, Some(&previous), "driver", "v1");
        let entries = object["metadata"]["managedFields"].as_array().unwrap();
        let fields_of = |operation: &str| {
            entries
                .iter()
                .find(|e| e["operation"] == operation)
                .unwrap()["fieldsV1"]
                .clone()
        };
        assert_eq!(
            fields_of("Apply"),
            json!({"f:status": {"f:pausedSince": {}, "f:phase": {}}})
        );
        assert_eq!(
            fields_of("Update"),
            json!({"f:metadata": {"f:annotations": {"f:resume": {}}}})
        );
    }

    #[test]
    fn fields_round_trip_through_fields_v1() {
        let object = json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "labels": {"a": "1"}},
            "spec": {"containers": [{"name": "c", "image": "x"}], "tolerations": [{"key": "k"}]}});
        let fields = fields_of(&object);
        let mut back = BTreeSet::new();
        from_fields_v1(&to_fields_v1(&fields), &mut Vec::new(), &mut back);
        assert_eq!(fields, back);
        assert!(
            fields
                .iter()
                .all(|p| !ignored(&p[..p.len().min(2)]) || p.len() > 2)
        );
    }
}

#[cfg(test)]
mod prune_tests {
    use super::*;

    #[test]
    fn dropping_the_last_field_of_a_map_drops_the_map() {
        let mut object = json!({"status": {"replacement": {"toRevision": "r"}, "phase": "Ready"}});
        let path = vec![
            Segment::Field("status".into()),
            Segment::Field("replacement".into()),
            Segment::Field("toRevision".into()),
        ];
        remove(&mut object, &path);
        prune_empty_parents(&mut object, &path, &BTreeSet::new());
        assert_eq!(object, json!({"status": {"phase": "Ready"}}));
    }
}
