//! What the occurrences of every kind share: an object's subject, uid and own subscriptions
//! ([`Base`]), and the small readings of status (a condition, an instant, a fact).

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, Time};
use k8s_openapi::jiff::Timestamp;

use crate::occurrence::{Fact, Occurrence, Subject, Trigger};

/// What every occurrence of one object shares.
pub(super) struct Base {
    pub(super) subject: Subject,
    pub(super) uid: String,
    pub(super) subscribed: Vec<String>,
}

impl Base {
    pub(super) fn occurrence(
        &self,
        trigger: Trigger,
        key: String,
        at: Timestamp,
        title: String,
        facts: Vec<Fact>,
        act: Option<String>,
    ) -> Occurrence {
        let subject = &self.subject;
        Occurrence {
            id: format!(
                "{trigger}/{}/{}/{}/{}/{key}",
                subject.kind,
                subject.namespace.as_deref().unwrap_or(""),
                subject.name,
                self.uid
            ),
            trigger,
            subject: subject.clone(),
            at,
            title,
            facts: facts.into_iter().filter(|f| !f.value.is_empty()).collect(),
            act,
            subscribed_by_object: self.subscribed.clone(),
        }
    }
}

/// The destinations an object's notify annotation names.
pub(super) fn subscribed(annotation: Option<&String>) -> Vec<String> {
    annotation
        .map(|names| {
            names
                .split(',')
                .map(str::trim)
                .filter(|n| !n.is_empty())
                .map(str::to_owned)
                .collect()
        })
        .unwrap_or_default()
}

pub(super) fn condition<'a>(conditions: &'a [Condition], type_: &str) -> Option<&'a Condition> {
    conditions.iter().find(|c| c.type_ == type_)
}

pub(super) fn instant(time: Option<&Time>) -> Timestamp {
    time.map(|t| t.0).unwrap_or(Timestamp::UNIX_EPOCH)
}

/// What makes a rollout's occurrence this rollout's: its start, else the instant itself.
pub(super) fn key(started: Option<&Time>, at: Timestamp) -> String {
    started.map(|t| t.0).unwrap_or(at).to_string()
}

pub(super) fn fact(name: &str, value: String) -> Fact {
    Fact {
        name: name.into(),
        value,
    }
}

pub(super) fn seconds(total: i64) -> String {
    let total = total.max(0);
    match (total / 60, total % 60) {
        (0, s) => format!("{s}s"),
        (m, s) => format!("{m}m{s:02}s"),
    }
}

/// The rings a release moves tenants between, and the build it asks for.
pub(super) fn rings(from: &str, to: &str, version: Option<&str>) -> Fact {
    let build = version.map(|v| format!(" (build {v})")).unwrap_or_default();
    fact("rings", format!("{from} -> {to}{build}"))
}
