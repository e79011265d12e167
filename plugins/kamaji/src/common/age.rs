//! kubectl's AGE column.

use serde_json::Value;

/// kubectl's AGE of an object.
pub fn age(obj: &Value) -> String {
    obj["metadata"]["creationTimestamp"]
        .as_str()
        .and_then(|t| kcore::text::seconds_since(t, jiff::Timestamp::now()))
        .map(kcore::text::age)
        .unwrap_or_else(|| "<unknown>".into())
}
