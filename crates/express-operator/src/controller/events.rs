//! Events: one event before it is published ([`Notice`]) and its publishing on the object it
//! is about. Each room words the events of what it does, once: a tenant's reconcile in
//! `tenant/events.rs`, the releases in `releases/events.rs`, the API's lifecycle in
//! `api/events.rs`; a new event is a new builder there.

use kube::runtime::events::EventType;
use tracing::warn;

use super::context::Context;
use super::recorders::Occurrence;

/// One event, before it is published.
pub(crate) struct Notice {
    pub(crate) type_: EventType,
    pub(crate) reason: &'static str,
    /// What the operator did or checked (the event's `action`).
    pub(crate) action: &'static str,
    pub(crate) note: String,
}

impl Notice {
    pub(crate) fn normal(reason: &'static str, action: &'static str, note: String) -> Self {
        Notice {
            type_: EventType::Normal,
            reason,
            action,
            note,
        }
    }

    pub(crate) fn warning(reason: &'static str, action: &'static str, note: String) -> Self {
        Notice {
            type_: EventType::Warning,
            reason,
            action,
            note,
        }
    }
}

/// Publishes `notice` on the object `reference` names (none: nowhere), through the recorders.
pub(crate) async fn publish(
    ctx: &Context,
    reference: Option<k8s_openapi::api::core::v1::ObjectReference>,
    notice: Notice,
) {
    let Some(reference) = reference else { return };
    let occurrence = Occurrence {
        warning: notice.type_ == EventType::Warning,
        reason: notice.reason,
        action: notice.action,
        note: &notice.note,
    };
    if let Err(err) = ctx.recorders.publish(&occurrence, &reference).await {
        warn!(error = %err, reason = notice.reason, "cannot publish event");
    }
}
