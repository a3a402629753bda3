//! How stored objects are served: the view of one resource (a version relabelled, converted
//! through a CRD's webhook, or the `events.k8s.io` renaming) and a list response built on it.

use std::collections::BTreeMap;

use serde_json::Value;

use crate::error::ApiError;
use crate::registry::{ResourceType, is_events_view};
use crate::selector::{FieldSelector, LabelSelector};
use crate::store::Stored;

/// A list response whose items are shared with the store (no copies until serialized).
pub struct List {
    pub kind: String,
    pub view: View,
    pub metadata: Value,
    pub items: Vec<Stored>,
}

impl List {
    /// The list as a JSON document, written straight from the stored objects (those stored at
    /// another version than the list's, for a CRD with a conversion webhook, converted first,
    /// all in one review).
    pub fn to_json(&self) -> Result<String, ApiError> {
        let converted = self.view.converted(&self.items)?;
        let mut out = String::with_capacity(64 + self.items.len() * 2048);
        out.push_str("{\"kind\":");
        out.push_str(&Value::String(self.kind.clone()).to_string());
        out.push_str(",\"apiVersion\":");
        out.push_str(&Value::String(self.view.api_version.clone()).to_string());
        out.push_str(",\"metadata\":");
        out.push_str(&self.metadata.to_string());
        out.push_str(",\"items\":[");
        for (i, item) in self.items.iter().enumerate() {
            if i > 0 {
                out.push(',');
            }
            match converted.get(&i) {
                Some(object) => out.push_str(&object.to_string()),
                None => out.push_str(&self.view.text(item)?),
            }
        }
        out.push_str("]}");
        Ok(out)
    }

    /// The items parsed, as served.
    pub fn values(&self) -> Result<Vec<Value>, ApiError> {
        let mut converted = self.view.converted(&self.items)?;
        self.items
            .iter()
            .enumerate()
            .map(|(i, item)| match converted.remove(&i) {
                Some(object) => Ok(object),
                None => self.view.value(&item.value()),
            })
            .collect()
    }
}

/// How stored objects are served through one resource: all versions of a resource share
/// storage; without a conversion webhook only the apiVersion is rewritten (parsing only then,
/// as a CRD with conversion strategy None does), with one an object stored at another version
/// goes through the webhook ([`crate::conversion`]); `events.k8s.io` events also rename fields
/// ([`crate::events`]).
#[derive(Clone, Debug)]
pub struct View {
    pub api_version: String,
    kind: String,
    pub(super) events: bool,
    conversion: Option<crate::conversion::Shared>,
}

impl View {
    pub fn of(rt: &ResourceType) -> View {
        View {
            api_version: rt.api_version(),
            kind: rt.kind.clone(),
            events: is_events_view(rt),
            conversion: rt.conversion.clone(),
        }
    }

    /// A stored object's JSON text as served.
    pub fn text<'a>(&self, item: &'a Stored) -> Result<std::borrow::Cow<'a, str>, ApiError> {
        if !self.events && item.index.api_version == self.api_version {
            return Ok(std::borrow::Cow::Borrowed(&item.json));
        }
        Ok(std::borrow::Cow::Owned(
            self.value(&item.value())?.to_string(),
        ))
    }

    /// A stored object as served.
    pub fn value(&self, stored: &Value) -> Result<Value, ApiError> {
        if self.events {
            return Ok(crate::events::to_events_view(stored));
        }
        if stored["apiVersion"].as_str() == Some(self.api_version.as_str()) {
            return Ok(stored.clone());
        }
        if let Some(webhook) = &self.conversion {
            return webhook
                .convert_one(stored.clone(), &self.api_version)
                .map_err(|why| self.conversion_failed(stored, &why));
        }
        let mut value = stored.clone();
        value["apiVersion"] = Value::String(self.api_version.clone());
        Ok(value)
    }

    /// The items (by index) a conversion webhook turned into this view's version, converted in
    /// one review; empty without a webhook.
    fn converted(&self, items: &[Stored]) -> Result<BTreeMap<usize, Value>, ApiError> {
        let Some(webhook) = &self.conversion else {
            return Ok(BTreeMap::new());
        };
        let pending: Vec<usize> = (0..items.len())
            .filter(|&i| items[i].index.api_version != self.api_version)
            .collect();
        if pending.is_empty() {
            return Ok(BTreeMap::new());
        }
        let objects: Vec<Value> = pending.iter().map(|&i| items[i].value()).collect();
        let first = objects[0].clone();
        let converted = webhook
            .convert(objects, &self.api_version)
            .map_err(|why| self.conversion_failed(&first, &why))?;
        Ok(pending.into_iter().zip(converted).collect())
    }

    /// The API server's words for a conversion that failed.
    pub(super) fn conversion_failed(&self, stored: &Value, why: &str) -> ApiError {
        ApiError::internal(format!(
            "conversion webhook for {}, Kind={} failed: {why}",
            stored["apiVersion"].as_str().unwrap_or(""),
            self.kind
        ))
    }

    /// Whether a stored object passes field and label selectors, judged on what is served
    /// (only the events view renames fields, so only it converts before matching).
    pub fn selected(&self, labels: &LabelSelector, fields: &FieldSelector, item: &Stored) -> bool {
        if !labels.matches_stored(item) {
            return false;
        }
        if fields.is_empty() {
            return true;
        }
        let stored = item.value();
        if self.events {
            fields.matches(&crate::events::to_events_view(&stored))
        } else {
            fields.matches(&stored)
        }
    }
}
