//! What the views' property tests share to generate API objects as JSON.

use k8s_openapi::jiff::Timestamp;
use proptest::prelude::*;
use serde_json::Value;

/// Absent, or a value of `s`.
pub fn opt<T: std::fmt::Debug + Clone>(
    s: impl Strategy<Value = T>,
) -> impl Strategy<Value = Option<T>> {
    prop::option::of(s)
}

/// A timestamp as the API writes it, `s` seconds after the epoch.
pub fn time(s: i64) -> String {
    Timestamp::from_second(s).unwrap().to_string()
}

/// Sets `key` of the object `m` to `v`, when there is one.
pub fn put(m: &mut Value, key: &str, v: Option<Value>) {
    if let Some(v) = v {
        m[key] = v;
    }
}
