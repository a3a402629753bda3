//! Label selectors (`a=b`, `a!=b`, `a in (x,y)`, `a notin (x)`, `a`, `!a`) and field selectors
//! (`path=value`, `path==value`, `path!=value` over any dotted path, e.g. `metadata.name`).

use serde_json::Value;

use crate::error::ApiError;

#[derive(Debug, Clone, PartialEq)]
enum LabelRequirement {
    Equals(String, String),
    NotEquals(String, String),
    In(String, Vec<String>),
    NotIn(String, Vec<String>),
    Exists(String),
    NotExists(String),
}

#[derive(Debug, Clone, Default, PartialEq)]
pub struct LabelSelector(Vec<LabelRequirement>);

impl LabelSelector {
    pub fn parse(text: &str) -> Result<Self, ApiError> {
        let invalid = |why: &str| {
            ApiError::bad_request(format!("unable to parse label selector {text:?}: {why}"))
        };
        let mut requirements = Vec::new();
        for part in split_top_level(text) {
            let part = part.trim();
            if part.is_empty() {
                continue;
            }
            let requirement = if let Some(key) = part.strip_prefix('!') {
                LabelRequirement::NotExists(key.trim().to_owned())
            } else if let Some((key, values)) = split_set(part, " notin ") {
                LabelRequirement::NotIn(key, values.ok_or_else(|| invalid("expected ( values )"))?)
            } else if let Some((key, values)) = split_set(part, " in ") {
                LabelRequirement::In(key, values.ok_or_else(|| invalid("expected ( values )"))?)
            } else if let Some((key, value)) = part.split_once("!=") {
                LabelRequirement::NotEquals(key.trim().to_owned(), value.trim().to_owned())
            } else if let Some((key, value)) =
                part.split_once("==").or_else(|| part.split_once('='))
            {
                LabelRequirement::Equals(key.trim().to_owned(), value.trim().to_owned())
            } else if part
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || "-_./".contains(c))
            {
                LabelRequirement::Exists(part.to_owned())
            } else {
                return Err(invalid("unexpected characters"));
            };
            requirements.push(requirement);
        }
        Ok(LabelSelector(requirements))
    }

    pub fn matches(&self, object: &Value) -> bool {
        let labels = &object["metadata"]["labels"];
        self.matches_with(|key| labels.get(key).and_then(Value::as_str))
    }

    /// Matches a stored object through its label index, without parsing it.
    pub fn matches_stored(&self, object: &crate::store::Stored) -> bool {
        self.matches_with(|key| object.label(key))
    }

    fn matches_with<'a>(&self, get: impl Fn(&str) -> Option<&'a str>) -> bool {
        self.0.iter().all(|r| match r {
            LabelRequirement::Equals(k, v) => get(k) == Some(v.as_str()),
            LabelRequirement::NotEquals(k, v) => get(k) != Some(v.as_str()),
            LabelRequirement::In(k, vs) => get(k).is_some_and(|x| vs.iter().any(|v| v == x)),
            LabelRequirement::NotIn(k, vs) => get(k).is_none_or(|x| vs.iter().all(|v| v != x)),
            LabelRequirement::Exists(k) => get(k).is_some(),
            LabelRequirement::NotExists(k) => get(k).is_none(),
        })
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
}

/// Splits on commas that are not inside parentheses.
fn split_top_level(text: &str) -> Vec<&str> {
    let mut parts = Vec::new();
    let (mut depth, mut start) = (0i32, 0usize);
    for (i, c) in text.char_indices() {
        match c {
            '(' => depth += 1,
            ')' => depth -= 1,
            ',' if depth == 0 => {
                parts.push(&text[start..i]);
                start = i + 1;
            }
            _ => {}
        }
    }
    parts.push(&text[start..]);
    parts
}

fn split_set(part: &str, operator: &str) -> Option<(String, Option<Vec<String>>)> {
    let (key, rest) = part.split_once(operator)?;
    let rest = rest.trim();
    let values = rest
        .strip_prefix('(')
        .and_then(|r| r.strip_suffix(')'))
        .map(|inner| {
            inner
                .split(',')
                .map(|v| v.trim().to_owned())
                .filter(|v| !v.is_empty())
                .collect()
        });
    Some((key.trim().to_owned(), values))
}

#[derive(Debug, Clone, Default, PartialEq)]
pub struct FieldSelector(Vec<(Vec<String>, bool, String)>);

impl FieldSelector {
    pub fn parse(text: &str) -> Result<Self, ApiError> {
        let mut requirements = Vec::new();
        for part in text.split(',').map(str::trim).filter(|p| !p.is_empty()) {
            let (path, equal, value) = if let Some((p, v)) = part.split_once("!=") {
                (p, false, v)
            } else if let Some((p, v)) = part.split_once("==").or_else(|| part.split_once('=')) {
                (p, true, v)
            } else {
                return Err(ApiError::bad_request(format!(
                    "invalid field selector {text:?}: expected field=value or field!=value"
                )));
            };
            requirements.push((
                path.trim().split('.').map(str::to_owned).collect(),
                equal,
                value.trim().to_owned(),
            ));
        }
        Ok(FieldSelector(requirements))
    }

    pub fn matches(&self, object: &Value) -> bool {
        self.0.iter().all(|(path, equal, value)| {
            let mut current = object;
            for segment in path {
                current = &current[segment.as_str()];
            }
            let actual = match current {
                Value::String(s) => s.clone(),
                Value::Null => String::new(),
                other => other.to_string(),
            };
            (actual == *value) == *equal
        })
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn label_selectors() {
        let o = json!({"metadata": {"labels": {"app": "web", "tier": "fe"}}});
        for (selector, expected) in [
            ("app=web", true),
            ("app==web,tier=fe", true),
            ("app!=web", false),
            ("app in (db, web)", true),
            ("app notin (web)", false),
            ("tier", true),
            ("!tier", false),
            ("missing notin (x)", true),
            ("", true),
        ] {
            assert_eq!(
                LabelSelector::parse(selector).expect("parses").matches(&o),
                expected,
                "{selector}"
            );
        }
        assert!(LabelSelector::parse("app in web").is_err());
    }

    #[test]
    fn field_selectors() {
        let o =
            json!({"metadata": {"name": "a", "namespace": "n"}, "status": {"phase": "Running"}});
        assert!(
            FieldSelector::parse("metadata.name=a,metadata.namespace==n")
                .expect("ok")
                .matches(&o)
        );
        assert!(
            !FieldSelector::parse("metadata.name!=a")
                .expect("ok")
                .matches(&o)
        );
        assert!(
            FieldSelector::parse("status.phase=Running")
                .expect("ok")
                .matches(&o)
        );
        assert!(
            FieldSelector::parse("spec.nodeName=")
                .expect("ok")
                .matches(&o)
        );
        assert!(FieldSelector::parse("nonsense").is_err());
    }
}
