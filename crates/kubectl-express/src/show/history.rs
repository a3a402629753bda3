//! The revisions the operator kept for a node (ControllerRevisions, DESIGN section 5): reading
//! them, the table of which one runs and which one is desired, and a field-level diff between
//! two kept specs. Used by the `history`, `revisions` and `diff` verbs.

use std::collections::BTreeMap;
use std::fmt::Write as _;

use express_api::history::{KeptSpec, kept_revision_of};
use express_api::{NodeKind, NodeStatus};
use k8s_openapi::api::apps::v1::ControllerRevision;
use serde_json::Value;

/// One kept revision of a node.
#[derive(Clone, Debug, PartialEq)]
pub struct Kept {
    /// The ControllerRevision's `revision` number (1, 2, ... in the order they were kept).
    pub number: i64,
    /// The deployment revision (hash) it keeps.
    pub revision: String,
    pub spec: Result<KeptSpec, String>,
    pub created_ms: Option<i64>,
}

/// The node's kept revisions, oldest first.
pub fn kept_of(revisions: &[ControllerRevision], kind: NodeKind, name: &str) -> Vec<Kept> {
    let mut kept: Vec<Kept> = revisions
        .iter()
        .filter_map(|r| {
            let revision = kept_revision_of(r.metadata.labels.as_ref(), kind, name)?;
            Some(Kept {
                number: r.revision.unwrap_or(0),
                revision: revision.to_owned(),
                spec: serde_json::from_value(r.data.0.clone())
                    .map_err(|e| format!("not a kept spec: {e}")),
                created_ms: r
                    .metadata
                    .creation_timestamp
                    .as_ref()
                    .map(|t| t.0.as_millisecond()),
            })
        })
        .collect();
    kept.sort_by_key(|k| k.number);
    kept
}

/// "5s", "12m", "3h", "4d": how long ago, as kubectl prints ages.
fn age(created_ms: Option<i64>, now_ms: i64) -> String {
    let Some(created) = created_ms else {
        return "-".into();
    };
    let seconds = (now_ms - created).max(0) / 1000;
    match seconds {
        s if s < 120 => format!("{s}s"),
        s if s < 7200 => format!("{}m", s / 60),
        s if s < 172_800 => format!("{}h", s / 3600),
        s => format!("{}d", s / 86_400),
    }
}

/// The history table: number, revision, version, changeset, age, and which runs / is desired.
pub fn render(kept: &[Kept], status: Option<&NodeStatus>, now_ms: i64) -> String {
    let running = status.and_then(|s| s.running_revision.as_deref());
    let desired = status.and_then(|s| s.desired_revision.as_deref());
    let rows: Vec<Vec<String>> = kept
        .iter()
        .map(|k| {
            let (version, changeset) = match &k.spec {
                Ok(spec) => (
                    spec.express_version.clone(),
                    spec.config_changeset.clone().unwrap_or_else(|| "-".into()),
                ),
                Err(_) => ("?".into(), "?".into()),
            };
            let marks: Vec<&str> = [
                (running == Some(k.revision.as_str())).then_some("running"),
                (desired == Some(k.revision.as_str())).then_some("desired"),
            ]
            .into_iter()
            .flatten()
            .collect();
            vec![
                k.number.to_string(),
                k.revision.clone(),
                version,
                changeset,
                age(k.created_ms, now_ms),
                marks.join(", "),
            ]
        })
        .collect();
    crate::text::table(
        &["NO", "REVISION", "VERSION", "CHANGESET", "AGE", ""],
        &rows,
    )
}

/// A kept revision by its number or its revision hash.
pub fn pick<'a>(kept: &'a [Kept], which: &str) -> Option<&'a Kept> {
    kept.iter()
        .find(|k| k.revision == which)
        .or_else(|| kept.iter().find(|k| k.number.to_string() == which))
}

/// Every leaf of a JSON value by its path (`podTemplate.spec.containers[0].image`).
fn leaves(value: &Value, path: String, out: &mut BTreeMap<String, Value>) {
    match value {
        Value::Object(map) if !map.is_empty() => {
            for (key, child) in map {
                let next = if path.is_empty() {
                    key.clone()
                } else {
                    format!("{path}.{key}")
                };
                leaves(child, next, out);
            }
        }
        Value::Array(items) if !items.is_empty() => {
            for (i, child) in items.iter().enumerate() {
                leaves(child, format!("{path}[{i}]"), out);
            }
        }
        leaf => {
            out.insert(path, leaf.clone());
        }
    }
}

/// A field-level diff of two kept specs: `~ path: a -> b`, `+ path: b`, `- path: a`.
pub fn diff(a: &KeptSpec, b: &KeptSpec) -> String {
    let (mut left, mut right) = (BTreeMap::new(), BTreeMap::new());
    leaves(
        &serde_json::to_value(a).unwrap_or_default(),
        String::new(),
        &mut left,
    );
    leaves(
        &serde_json::to_value(b).unwrap_or_default(),
        String::new(),
        &mut right,
    );
    let mut out = String::new();
    let keys: std::collections::BTreeSet<&String> = left.keys().chain(right.keys()).collect();
    for key in keys {
        match (left.get(key), right.get(key)) {
            (Some(x), Some(y)) if x != y => {
                let _ = writeln!(out, "~ {key}: {x} -> {y}");
            }
            (Some(x), None) => {
                let _ = writeln!(out, "- {key}: {x}");
            }
            (None, Some(y)) => {
                let _ = writeln!(out, "+ {key}: {y}");
            }
            _ => {}
        }
    }
    if out.is_empty() {
        out.push_str("no difference\n");
    }
    out
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use serde_json::json;

    fn spec(version: &str, image: &str) -> KeptSpec {
        serde_json::from_value(json!({
            "expressVersion": version, "imageRepository": "express",
            "podTemplate": {"spec": {"containers": [{"name": "express", "image": image}]}}
        }))
        .unwrap()
    }

    #[test]
    fn a_diff_names_each_changed_field_by_its_path() {
        let mut b = spec("v2", "reg/express:v2");
        b.config_changeset = Some("cs-7".into());
        let text = diff(&spec("v1", "reg/express:v1"), &b);
        assert_eq!(
            text,
            "+ configChangeset: \"cs-7\"\n~ expressVersion: \"v1\" -> \"v2\"\n~ podTemplate.spec.containers[0].image: \"reg/express:v1\" -> \"reg/express:v2\"\n"
        );
        assert_eq!(diff(&b, &b), "no difference\n");
    }

    #[test]
    fn the_table_marks_what_runs_and_what_is_desired() {
        let kept = vec![
            Kept {
                number: 1,
                revision: "aaa".into(),
                spec: Ok(spec("v1", "x")),
                created_ms: Some(0),
            },
            Kept {
                number: 2,
                revision: "bbb".into(),
                spec: Ok(spec("v2", "x")),
                created_ms: Some(3_600_000),
            },
        ];
        let status = NodeStatus {
            running_revision: Some("aaa".into()),
            desired_revision: Some("bbb".into()),
            ..NodeStatus::default()
        };
        let text = render(&kept, Some(&status), 7_200_000);
        assert_eq!(
            text,
            "NO  REVISION  VERSION  CHANGESET  AGE\n1   aaa       v1       -          2h   running\n2   bbb       v2       -          60m  desired\n"
        );
        assert_eq!(pick(&kept, "2").map(|k| k.revision.as_str()), Some("bbb"));
        assert_eq!(pick(&kept, "aaa").map(|k| k.number), Some(1));
        assert!(pick(&kept, "9").is_none());
    }
}
