//! `meta.k8s.io/v1` Table output, which `kubectl get` asks for: a Name column, the resource's
//! printer columns and Age, evaluated with simple JSONPath (`.a.b[0].c`).

use serde_json::{Value, json};

use crate::clock;
use crate::registry::ResourceType;

/// Evaluates a simple JSONPath (`.status.phase`, `.spec.containers[0].image`).
pub fn json_path<'a>(object: &'a Value, path: &str) -> Option<&'a Value> {
    let mut current = object;
    for part in path
        .trim_start_matches('.')
        .split('.')
        .filter(|p| !p.is_empty())
    {
        let (field, indexes) = match part.find('[') {
            Some(i) => (&part[..i], &part[i..]),
            None => (part, ""),
        };
        if !field.is_empty() {
            current = current.get(field)?;
        }
        for index in indexes.split('[').filter(|s| !s.is_empty()) {
            let index: usize = index.trim_end_matches(']').parse().ok()?;
            current = current.get(index)?;
        }
    }
    Some(current)
}

fn columns(rt: &ResourceType) -> Vec<(String, String, String, i64)> {
    let mut columns = vec![(
        "Name".to_owned(),
        "string".to_owned(),
        ".metadata.name".to_owned(),
        0,
    )];
    for c in &rt.printer_columns {
        columns.push((
            c.name.clone(),
            c.type_.clone(),
            c.json_path.clone(),
            c.priority,
        ));
    }
    if !columns.iter().any(|(name, ..)| name == "Age") {
        columns.push((
            "Age".into(),
            "date".into(),
            ".metadata.creationTimestamp".into(),
            0,
        ));
    }
    columns
}

/// A Table of `objects`, one row each, carrying the object's metadata for kubectl.
pub fn table(rt: &ResourceType, objects: &[&Value], resource_version: &str) -> Value {
    let columns = columns(rt);
    let definitions: Vec<Value> = columns
        .iter()
        .map(|(name, type_, _, priority)| {
            json!({"name": name, "type": type_, "format": if name == "Name" { "name" } else { "" },
                   "description": name, "priority": priority})
        })
        .collect();
    let now = clock::parse_rfc3339(&clock::now()).unwrap_or(0);
    let rows: Vec<Value> = objects
        .iter()
        .map(|object| {
            let cells: Vec<Value> = columns
                .iter()
                .map(|(_, type_, path, _)| match json_path(object, path) {
                    None | Some(Value::Null) => Value::Null,
                    // Like the API server, dates are shown as ages.
                    Some(Value::String(date)) if type_ == "date" => {
                        match clock::parse_rfc3339(date) {
                            Some(then) => json!(clock::human_duration(now - then)),
                            None => json!(date),
                        }
                    }
                    Some(value) => value.clone(),
                })
                .collect();
            json!({"cells": cells, "object": {
                "kind": "PartialObjectMetadata", "apiVersion": "meta.k8s.io/v1",
                "metadata": object["metadata"]}})
        })
        .collect();
    json!({
        "kind": "Table",
        "apiVersion": "meta.k8s.io/v1",
        "metadata": {"resourceVersion": resource_version},
        "columnDefinitions": definitions,
        "rows": rows,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths() {
        let o = json!({"spec": {"containers": [{"image": "x"}]}, "status": {"phase": "Running"}});
        assert_eq!(json_path(&o, ".status.phase"), Some(&json!("Running")));
        assert_eq!(
            json_path(&o, ".spec.containers[0].image"),
            Some(&json!("x"))
        );
        assert_eq!(json_path(&o, ".spec.containers[3].image"), None);
    }
}
