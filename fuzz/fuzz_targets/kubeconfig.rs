//! The kubeconfig parser and merge on any file content: no panic, and a merge that succeeds
//! keeps every entry the file had.
#![no_main]

use libfuzzer_sys::fuzz_target;
use kclient::kubeconfig::{MergeOptions, merge, parse};

fuzz_target!(|data: &[u8]| {
    let Ok(s) = std::str::from_utf8(data) else {
        return;
    };
    let Ok(base) = parse(s, "fuzz") else {
        return;
    };
    let add = serde_json::json!({"apiVersion": "v1", "kind": "Config",
        "clusters": [{"name": "fz", "cluster": {"server": "https://10.0.0.1:6443"}}],
        "users": [{"name": "fz", "user": {"token": "t"}}],
        "contexts": [{"name": "fz", "context": {"cluster": "fz", "user": "fz"}}],
        "current-context": "fz"});
    let opts = MergeOptions {
        force: false,
        set_current: false,
        conflict_hint: "",
    };
    if let Ok((merged, _)) = merge(&base, &add, opts) {
        for list in ["clusters", "users", "contexts"] {
            if let Some(items) = base[list].as_array() {
                for item in items {
                    let kept = merged[list]
                        .as_array()
                        .is_some_and(|m| m.contains(item));
                    assert!(kept, "{list} entry lost: {item}");
                }
            }
        }
    }
});
