//! Times: now, an object's age, and the rollout time a restart sets.

use serde_json::Value;

/// Now, for ages.
pub fn now() -> jiff::Timestamp {
    jiff::Timestamp::now()
}

/// The age of an object at `now`.
pub fn age_of(obj: &Value, now: jiff::Timestamp) -> Option<i64> {
    kcore::json::str_at(obj, &["metadata", "creationTimestamp"])
        .and_then(|t| kcore::text::seconds_since(t, now))
}

/// The rollout time for a restart: the next whole second, RFC 3339 as metav1.Time writes it.
/// metav1.Time has second precision and CAPI rolls machines created strictly before the rollout
/// time, so "now" truncated could miss a machine created in this very second; rounding up
/// cannot.
pub fn rollout_time() -> String {
    let next = jiff::Timestamp::now().as_second().saturating_add(1);
    jiff::Timestamp::from_second(next)
        .unwrap_or_else(|_| jiff::Timestamp::now())
        .strftime("%Y-%m-%dT%H:%M:%SZ")
        .to_string()
}
