//! The generic webhook's JSON (`express.dev/notifications/v1`, documented in
//! `docs/notifications.md`) and its optional signature: HMAC-SHA256 of the body under a key from
//! the destination's Secret, in `x-express-signature-256: sha256=<hex>`.

use k8s_openapi::jiff::Timestamp;
use serde_json::{Value, json};

use crate::config::Config;
use crate::outbox::Delivery;

/// The schema a body names; a change a receiver must know of is a new version.
pub const SCHEMA: &str = "express.dev/notifications/v1";

pub fn body(delivery: &Delivery, config: &Config, now: Timestamp) -> Value {
    let dc = config.dc.as_deref();
    let summary = match delivery.new.as_slice() {
        [one] => one.title.clone(),
        many => super::group_summary(many, dc),
    };
    json!({
        "schema": SCHEMA,
        "delivery": delivery.id(),
        "sentAt": now.to_string(),
        "dc": dc,
        "destination": delivery.destination.name,
        "grouped": delivery.is_grouped(),
        "summary": summary,
        "notifications": delivery.new.iter().map(|o| json!({
            "id": o.id,
            "trigger": o.trigger.as_str(),
            "severity": o.severity().as_str(),
            "at": o.at.to_string(),
            "subject": o.subject,
            "title": o.title,
            "facts": o.facts,
            "act": o.act,
            "link": super::link(config, o),
        })).collect::<Vec<_>>(),
    })
}

/// `sha256=<hex>` of the body under the key.
pub fn signature(key: &[u8], body: &[u8]) -> String {
    let key = ring::hmac::Key::new(ring::hmac::HMAC_SHA256, key);
    let tag = ring::hmac::sign(&key, body);
    let hex: String = tag.as_ref().iter().map(|b| format!("{b:02x}")).collect();
    format!("sha256={hex}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_signature_is_rfc_4231s_hmac_sha256() {
        // RFC 4231, test case 2.
        assert_eq!(
            signature(b"Jefe", b"what do ya want for nothing?"),
            "sha256=5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843"
        );
    }
}
