//! Property test of the kubeconfig merge: over 1,000 generated kubeconfigs, a merge
//! keeps every entry it was given and every other field as it was, adds exactly the new
//! entries, and refuses (changing nothing) when a name is taken by other content.

use kclient::kubeconfig::{MergeOptions, merge};
use proptest::prelude::*;
use serde_json::{Value, json};

fn opts(force: bool) -> MergeOptions<'static> {
    MergeOptions {
        force,
        set_current: false,
        conflict_hint: "pass --force",
    }
}

/// A kubeconfig with `n` clusters, users and contexts named `<prefix><i>`, extra fields
/// (preferences, extensions) and one current context.
fn kubeconfig(prefix: &str, servers: &[u16], current: bool) -> Value {
    let clusters: Vec<Value> = servers
        .iter()
        .enumerate()
        .map(|(i, port)| json!({"name": format!("{prefix}{i}"), "cluster": {"server": format!("https://10.0.0.{i}:{port}"), "extensions": [{"name": "x", "extension": {"n": i}}]}}))
        .collect();
    let users: Vec<Value> = (0..servers.len())
        .map(
            |i| json!({"name": format!("{prefix}{i}"), "user": {"token": format!("t{i}{prefix}")}}),
        )
        .collect();
    let contexts: Vec<Value> = (0..servers.len())
        .map(|i| json!({"name": format!("{prefix}{i}"), "context": {"cluster": format!("{prefix}{i}"), "user": format!("{prefix}{i}"), "namespace": "ns"}}))
        .collect();
    let mut v = json!({"apiVersion": "v1", "kind": "Config", "preferences": {"colors": true},
        "clusters": clusters, "users": users, "contexts": contexts});
    if current && !servers.is_empty() {
        v["current-context"] = json!(format!("{prefix}0"));
    }
    v
}

fn names(v: &Value, list: &str) -> Vec<String> {
    v[list]
        .as_array()
        .map(|a| {
            a.iter()
                .map(|e| e["name"].as_str().unwrap_or_default().to_string())
                .collect()
        })
        .unwrap_or_default()
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 1000, failure_persistence: None, ..ProptestConfig::default() })]

    #[test]
    fn merging_adds_exactly_the_new_entries(
        base_ports in prop::collection::vec(1u16..65535, 0..12),
        add_ports in prop::collection::vec(1u16..65535, 1..4),
        current in any::<bool>(),
    ) {
        let base = kubeconfig("b", &base_ports, current);
        let add = kubeconfig("a", &add_ports, true);
        let (merged, report) = merge(&base, &add, opts(false)).unwrap();
        for list in ["clusters", "users", "contexts"] {
            let base_items = base[list].as_array().unwrap();
            let merged_items = merged[list].as_array().unwrap();
            prop_assert_eq!(merged_items.len(), base_items.len() + add_ports.len());
            // Every entry that was there is there, unchanged, in its place.
            prop_assert_eq!(&merged_items[..base_items.len()], &base_items[..]);
            prop_assert_eq!(names(&merged, list)[base_items.len()..].to_vec(), names(&add, list));
        }
        prop_assert_eq!(&merged["preferences"], &base["preferences"]);
        prop_assert_eq!(report.added.len(), 3 * add_ports.len());
        // The current context changes only when there was none.
        if current && !base_ports.is_empty() {
            prop_assert_eq!(&merged["current-context"], &base["current-context"]);
        } else {
            prop_assert_eq!(&merged["current-context"], &json!("a0"));
        }
        // Merging again changes nothing.
        let (again, report) = merge(&merged, &add, opts(false)).unwrap();
        prop_assert_eq!(&again, &merged);
        prop_assert!(report.added.is_empty() && report.replaced.is_empty());
    }

    #[test]
    fn a_taken_name_is_refused_unless_forced(
        base_ports in prop::collection::vec(1u16..65535, 1..8),
        other in 1u16..65535,
    ) {
        let base = kubeconfig("b", &base_ports, true);
        // Same names as the base's first entry, other server.
        let mut add = kubeconfig("b", &[other], true);
        add["clusters"][0]["cluster"]["server"] = json!("https://192.0.2.1:1");
        let refused = merge(&base, &add, opts(false));
        prop_assert!(refused.is_err());
        let (forced, report) = merge(&base, &add, opts(true)).unwrap();
        prop_assert!(report.replaced.iter().any(|r| r == "cluster \"b0\""));
        prop_assert_eq!(forced["clusters"].as_array().unwrap().len(), base_ports.len());
        prop_assert_eq!(&forced["clusters"][0]["cluster"]["server"], &json!("https://192.0.2.1:1"));
        // Everything else is the base's.
        prop_assert_eq!(
            &forced["clusters"].as_array().unwrap()[1..],
            &base["clusters"].as_array().unwrap()[1..]
        );
    }
}
