//! Field paths: how a place in a schema is named (`.spec.waves[*].percent`) and how the values
//! at that place are found in a stored object (`.spec.waves[1].percent`). A path is kept as
//! steps rather than text so that finding values never has to parse a rendered string.

use serde_json::Value;

/// One step down a schema.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Step {
    /// A named property (`properties`).
    Field(String),
    /// Every item of an array (`items`).
    Item,
    /// Every value of a map (`additionalProperties`).
    Entry,
}

/// Where a rule applies, from the root of the object (the empty path).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct Path(Vec<Step>);

impl Path {
    pub(crate) fn root() -> Self {
        Self::default()
    }

    pub(crate) fn child(&self, step: Step) -> Self {
        let mut steps = self.0.clone();
        steps.push(step);
        Self(steps)
    }

    /// The path one step up; the root is its own parent.
    pub(crate) fn parent(&self) -> Self {
        let mut steps = self.0.clone();
        steps.pop();
        Self(steps)
    }

    pub(crate) fn is_root(&self) -> bool {
        self.0.is_empty()
    }

    /// The schema's name of this place: `.spec.waves[*].percent`, `.spec.labels.*`.
    pub(crate) fn render(&self) -> String {
        let mut out = String::new();
        for step in &self.0 {
            match step {
                Step::Field(name) => {
                    out.push('.');
                    out.push_str(name);
                }
                Step::Item => out.push_str("[*]"),
                Step::Entry => out.push_str(".*"),
            }
        }
        out
    }

    /// Every value an object holds at this place, each with its own concrete path
    /// (`.spec.waves[1].percent`). A place the object does not reach gives nothing; odd shapes
    /// (a string where the schema says object) give nothing either.
    pub(crate) fn values_in<'a>(&self, object: &'a Value) -> Vec<(String, &'a Value)> {
        let mut found = vec![(String::new(), object)];
        for step in &self.0 {
            found = found
                .into_iter()
                .flat_map(|(at, value)| descend(step, &at, value))
                .collect();
        }
        found
    }
}

fn descend<'a>(step: &Step, at: &str, value: &'a Value) -> Vec<(String, &'a Value)> {
    match (step, value) {
        (Step::Field(name), Value::Object(map)) => map
            .get(name)
            .map(|v| (format!("{at}.{name}"), v))
            .into_iter()
            .collect(),
        (Step::Item, Value::Array(items)) => items
            .iter()
            .enumerate()
            .map(|(i, v)| (format!("{at}[{i}]"), v))
            .collect(),
        (Step::Entry, Value::Object(map)) => {
            map.iter().map(|(k, v)| (format!("{at}.{k}"), v)).collect()
        }
        _ => Vec::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn renders_and_finds_values() {
        let path = Path::root()
            .child(Step::Field("spec".into()))
            .child(Step::Field("waves".into()))
            .child(Step::Item)
            .child(Step::Field("percent".into()));
        assert_eq!(path.render(), ".spec.waves[*].percent");
        let object =
            json!({"spec": {"waves": [{"percent": 10}, {"tenants": []}, {"percent": 100}]}});
        let found: Vec<_> = path
            .values_in(&object)
            .into_iter()
            .map(|(at, v)| (at, v.clone()))
            .collect();
        assert_eq!(
            found,
            vec![
                (".spec.waves[0].percent".to_string(), json!(10)),
                (".spec.waves[2].percent".to_string(), json!(100)),
            ]
        );
        assert_eq!(path.parent().render(), ".spec.waves[*]");
        assert!(path.values_in(&json!("odd")).is_empty());
    }

    #[test]
    fn map_entries() {
        let path = Path::root()
            .child(Step::Field("labels".into()))
            .child(Step::Entry);
        assert_eq!(path.render(), ".labels.*");
        let object = json!({"labels": {"a": "x"}});
        let found = path.values_in(&object);
        assert_eq!(found, vec![(".labels.a".to_string(), &json!("x"))]);
    }
}
