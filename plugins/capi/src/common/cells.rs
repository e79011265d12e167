//! Table cells as kubectl prints them: `<none>` for an empty one, ages as `5m` or `3d`.

/// `5m`, `3d`: the AGE column, or `<unknown>`.
pub fn age(seconds: Option<i64>) -> String {
    match seconds {
        Some(s) => kcore::text::age(s),
        None => "<unknown>".into(),
    }
}

/// `<none>` for empty cells, as kubectl prints them.
pub fn or_none(s: Option<&str>) -> String {
    match s {
        Some(s) if !s.is_empty() => s.to_string(),
        _ => "<none>".into(),
    }
}
