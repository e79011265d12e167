//! Table cells as kubectl prints them: `<none>` for an empty one (ages are
//! `kcore::text::age_cell`).

/// `<none>` for empty cells, as kubectl prints them.
pub fn or_none(s: Option<&str>) -> String {
    match s {
        Some(s) if !s.is_empty() => s.to_string(),
        _ => "<none>".into(),
    }
}
