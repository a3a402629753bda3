//! A delivery in its destination's format: the documented webhook JSON ([`webhook`]), Slack's
//! Block Kit ([`slack`]), Alertmanager's v2 alerts ([`alertmanager`]). Every format carries what
//! a person needs to act: what, where (the DC), why, the figures, the command, a link.

pub mod alertmanager;
pub mod slack;
pub mod webhook;

use k8s_openapi::jiff::Timestamp;

use crate::config::{Config, DestinationKind};
use crate::occurrence::Occurrence;
use crate::outbox::Delivery;

/// The header naming a delivery (the same on a repeat: receivers may drop the second).
pub const DELIVERY_HEADER: &str = "x-express-delivery";
/// The header carrying a webhook body's HMAC-SHA256, as `sha256=<hex>`.
pub const SIGNATURE_HEADER: &str = "x-express-signature-256";

/// What is posted: the path under the destination's URL, the body, the headers.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Message {
    /// Appended to the destination's URL (Alertmanager's API path; empty otherwise).
    pub path: &'static str,
    pub body: Vec<u8>,
    pub headers: Vec<(&'static str, String)>,
}

/// Renders a delivery for its destination, signed with `signing_key` when one is given.
pub fn render(
    delivery: &Delivery,
    config: &Config,
    signing_key: Option<&[u8]>,
    now: Timestamp,
) -> Message {
    let (path, body) = match delivery.destination.kind {
        DestinationKind::Webhook => ("", webhook::body(delivery, config, now)),
        DestinationKind::Slack => ("", slack::body(delivery, config)),
        DestinationKind::Alertmanager => (
            alertmanager::PATH,
            alertmanager::body(delivery, config, now),
        ),
    };
    let body = serde_json::to_vec(&body).unwrap_or_default();
    let mut headers = vec![
        ("content-type", "application/json".to_owned()),
        (DELIVERY_HEADER, delivery.id()),
    ];
    if let Some(key) = signing_key {
        headers.push((SIGNATURE_HEADER, webhook::signature(key, &body)));
    }
    Message {
        path,
        body,
        headers,
    }
}

/// The dashboard's page of an occurrence's object, when the configuration names a dashboard.
pub fn link(config: &Config, occurrence: &Occurrence) -> Option<String> {
    let base = config.dashboard_url.as_deref()?.trim_end_matches('/');
    let subject = &occurrence.subject;
    Some(match (subject.kind.as_str(), &subject.namespace) {
        ("ExpressCluster", Some(namespace)) => {
            format!("{base}/tenants/{namespace}/{}", subject.name)
        }
        _ => format!("{base}/releases/{}", subject.name),
    })
}

/// One line for a group: how many, of which triggers.
pub fn group_summary(occurrences: &[Occurrence], dc: Option<&str>) -> String {
    let mut counts: std::collections::BTreeMap<&str, usize> = std::collections::BTreeMap::new();
    for o in occurrences {
        *counts.entry(o.trigger.as_str()).or_default() += 1;
    }
    let parts: Vec<String> = counts.iter().map(|(t, n)| format!("{n} {t}")).collect();
    format!(
        "{} notifications{}: {}",
        occurrences.len(),
        dc.map(|dc| format!(" from {dc}")).unwrap_or_default(),
        parts.join(", ")
    )
}
