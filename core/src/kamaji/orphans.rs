//! DataStore hygiene: the key prefixes of an etcd DataStore that no tenant owns
//! (`kubectl kamaji datastores --orphans`).
//!
//! Each tenant's API server writes under `/<schema>/` ([`super::migrate::etcd_prefix`]). Kamaji
//! leaves a deleted tenant's keys behind in some cases (clastix/kamaji#700), and a tenant moved
//! by `kubectl kamaji migrate` leaves its origin's copy until the migration removes it. A prefix
//! that no TenantControlPlane on the DataStore owns is an orphan. A first segment that cannot be
//! a Kamaji schema (lower-case letters, digits and `_`, with a `_` between namespace and name) is
//! not Kamaji's: an etcd shared with something else. It is listed apart and never pruned.

use std::collections::BTreeSet;

use serde::Serialize;

/// The most prefixes read from one DataStore: past it, the listing says it stopped.
pub const MAX_PREFIXES: usize = 10_000;

/// The most keys read to size one orphaned prefix: past it, the size is a lower bound.
pub const MAX_SIZED_KEYS: u64 = 100_000;

/// One top-level prefix of a DataStore and how many keys lie under it.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Prefix {
    pub datastore: String,
    /// `/<schema>/`.
    pub prefix: String,
    pub keys: u64,
    /// The keys' and values' bytes (orphans only: sizing reads every value), and whether that
    /// is all of them (false past [`MAX_SIZED_KEYS`]: a lower bound).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub bytes: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub bytes_exact: Option<bool>,
}

/// The top-level prefix `/<segment>/` of an etcd key, if it has one (a key that starts with `/`
/// and has a second `/`, with a segment between them).
pub fn top_prefix(key: &[u8]) -> Option<String> {
    let rest = key.strip_prefix(b"/")?;
    let end = rest.iter().position(|b| *b == b'/')?;
    if end == 0 {
        return None;
    }
    let segment = std::str::from_utf8(&rest[..end]).ok()?;
    Some(format!("/{segment}/"))
}

/// Whether `/<segment>/` can be a Kamaji tenant's schema.
pub fn is_kamaji_schema(prefix: &str) -> bool {
    let Some(segment) = prefix.strip_prefix('/').and_then(|p| p.strip_suffix('/')) else {
        return false;
    };
    segment.contains('_')
        && !segment.starts_with('_')
        && !segment.ends_with('_')
        && segment
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_')
}

/// What one DataStore holds that no tenant owns.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Unowned {
    /// Kamaji-shaped prefixes no tenant on the DataStore owns.
    pub orphans: Vec<Prefix>,
    /// Prefixes that are not Kamaji's: shown, never pruned.
    pub foreign: Vec<Prefix>,
}

/// Sorts the `found` prefixes of a DataStore against the prefixes its tenants `owned`.
pub fn unowned(found: Vec<Prefix>, owned: &BTreeSet<String>) -> Unowned {
    let mut out = Unowned::default();
    for p in found {
        if owned.contains(&p.prefix) {
            continue;
        }
        if is_kamaji_schema(&p.prefix) {
            out.orphans.push(p);
        } else {
            out.foreign.push(p);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn top_prefixes_of_keys() {
        assert_eq!(
            top_prefix(b"/team_a_c1/registry/pods/x").as_deref(),
            Some("/team_a_c1/")
        );
        assert_eq!(top_prefix(b"/lone").as_deref(), None);
        assert_eq!(top_prefix(b"//x").as_deref(), None);
        assert_eq!(top_prefix(b"registry/x").as_deref(), None);
        assert_eq!(top_prefix(b"/\xff/x").as_deref(), None);
    }

    #[test]
    fn orphans_are_kamaji_shaped_and_unowned_the_rest_is_left_alone() {
        let p = |prefix: &str, keys| Prefix {
            datastore: "default".into(),
            prefix: prefix.into(),
            keys,
            ..Prefix::default()
        };
        let owned = BTreeSet::from(["/team_a_c1/".to_string()]);
        let got = unowned(
            vec![
                p("/team_a_c1/", 40),
                p("/team_a_gone/", 12),
                p("/registry/", 900),
                p("/Odd_Case/", 1),
                p("/trailing_/", 1),
            ],
            &owned,
        );
        assert_eq!(got.orphans, [p("/team_a_gone/", 12)]);
        let foreign: Vec<&str> = got.foreign.iter().map(|f| f.prefix.as_str()).collect();
        assert_eq!(foreign, ["/registry/", "/Odd_Case/", "/trailing_/"]);
    }
}
