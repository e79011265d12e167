//! kubectl's AGE column.

use serde_json::Value;

/// kubectl's AGE of an object.
pub fn age(obj: &Value) -> String {
    let seconds = obj["metadata"]["creationTimestamp"]
        .as_str()
        .and_then(|t| kcore::text::seconds_since(t, jiff::Timestamp::now()));
    kcore::text::age_cell(seconds)
}
