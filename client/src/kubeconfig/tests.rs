use std::io::Write;
use std::path::PathBuf;

use super::*;

/// A temporary directory (removed when dropped) and its `config`, holding `text` if given.
fn config_file(text: Option<&str>) -> (tempfile::TempDir, PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("config");
    if let Some(t) = text {
        std::fs::write(&path, t).unwrap();
    }
    (dir, path)
}

fn opts(force: bool, set_current: bool) -> MergeOptions<'static> {
    MergeOptions {
        force,
        set_current,
        conflict_hint: "pass --force",
    }
}

fn fetched() -> Value {
    json!({
        "apiVersion": "v1", "kind": "Config",
        "clusters": [{"name": "kubernetes", "cluster": {"server": "https://10.0.0.1:6443", "certificate-authority-data": "Q0E="}}],
        "users": [{"name": "kubernetes-admin", "user": {"client-certificate-data": "Y2VydA==", "client-key-data": "a2V5"}}],
        "contexts": [{"name": "kubernetes-admin@kubernetes", "context": {"cluster": "kubernetes", "user": "kubernetes-admin"}}],
        "current-context": "kubernetes-admin@kubernetes",
    })
}

#[test]
fn rename_then_merge_adds_and_is_idempotent() {
    let add = rename(&fetched(), "prod", "prod-admin", "prod-admin@prod").unwrap();
    assert_eq!(add["contexts"][0]["context"]["cluster"], "prod");
    let base = json!({"apiVersion": "v1", "kind": "Config", "current-context": "mgmt",
        "contexts": [{"name": "mgmt", "context": {"cluster": "mgmt", "user": "me"}}]});
    let (merged, r) = merge(&base, &add, opts(false, false)).unwrap();
    assert_eq!(r.added.len(), 3);
    assert_eq!(merged["current-context"], "mgmt");
    assert_eq!(merged["contexts"].as_array().unwrap().len(), 2);
    let (_, r2) = merge(&merged, &add, opts(false, false)).unwrap();
    assert!(r2.added.is_empty());
    assert_eq!(r2.unchanged.len(), 3);
}

#[test]
fn different_entries_conflict_unless_forced() {
    let add = rename(&fetched(), "prod", "prod-admin", "prod-admin@prod").unwrap();
    let (merged, _) = merge(&json!({}), &add, opts(false, false)).unwrap();
    let mut other = add.clone();
    other["clusters"][0]["cluster"]["server"] = json!("https://10.9.9.9:6443");
    let e = merge(&merged, &other, opts(false, false)).unwrap_err();
    assert_eq!(
        e.to_string(),
        "your kubeconfig already has cluster \"prod\" with other settings; nothing was changed"
    );
    let (m, r) = merge(&merged, &other, opts(true, false)).unwrap();
    assert_eq!(r.replaced, ["cluster \"prod\""]);
    assert_eq!(
        m["clusters"][0]["cluster"]["server"],
        "https://10.9.9.9:6443"
    );
}

#[test]
fn file_merge_is_atomic_private_and_backed_up() {
    use std::os::unix::fs::PermissionsExt;
    let (dir, path) = config_file(Some(
        "apiVersion: v1\nkind: Config\ncurrent-context: mgmt\ncontexts:\n- name: mgmt\n  context: {cluster: mgmt, user: me}\n",
    ));
    let add = rename(&fetched(), "prod", "prod-admin", "prod-admin@prod").unwrap();
    let r = merge_into_file(&path, &add, opts(false, true)).unwrap();
    assert!(r.backup.is_some());
    let mode = std::fs::metadata(&path).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode, 0o600);
    let back = parse(&std::fs::read_to_string(&path).unwrap(), "x").unwrap();
    assert_eq!(back["current-context"], "prod-admin@prod");
    assert_eq!(back["contexts"].as_array().unwrap().len(), 2);
    let bak = std::fs::read_to_string(dir.path().join("config.bak")).unwrap();
    assert!(bak.contains("current-context: mgmt"));
}

fn kc(name: &str, server: &str) -> Value {
    parse(&format!(
        "apiVersion: v1\nkind: Config\nclusters:\n- name: {name}\n  cluster:\n    server: {server}\ncontexts:\n- name: {name}-admin@{name}\n  context:\n    cluster: {name}\n    user: {name}-admin\ncurrent-context: {name}-admin@{name}\nusers:\n- name: {name}-admin\n  user:\n    token: t-{name}\n"
    ), "test")
    .unwrap()
}

#[test]
fn merge_adds_and_refuses_conflicts() {
    let mut existing = kc("a", "https://a");
    existing["preferences"] = json!({"colors": true});
    let before = existing.clone();
    let (merged, out) = merge(&existing, &kc("b", "https://b"), opts(false, false)).unwrap();
    existing = merged;
    assert_eq!(out.added.len(), 3);
    assert_eq!(out.context, "b-admin@b");
    assert_eq!(existing["current-context"], "a-admin@a");
    assert_eq!(existing["preferences"], before["preferences"]);
    assert_eq!(existing["clusters"][0], before["clusters"][0]);
    // Same content again: nothing to do.
    let (merged, out) = merge(&existing, &kc("b", "https://b"), opts(false, true)).unwrap();
    existing = merged;
    assert_eq!(out.unchanged.len(), 3);
    assert_eq!(existing["current-context"], "b-admin@b");
    // Other content under the same names: refused, untouched.
    let snapshot = existing.clone();
    let err = merge(&existing, &kc("b", "https://b2"), opts(false, false)).unwrap_err();
    assert!(err.to_string().contains("cluster \"b\""), "{err}");
    assert_eq!(existing, snapshot);
    let (merged, out) = merge(&existing, &kc("b", "https://b2"), opts(true, false)).unwrap();
    existing = merged;
    assert_eq!(out.replaced, vec!["cluster \"b\"".to_string()]);
    assert_eq!(existing["clusters"][1]["cluster"]["server"], "https://b2");
}

#[test]
fn malformed_kubeconfigs_are_named() {
    let odd = parse("::: not yaml", "x");
    assert!(odd.is_err() || check_entries(&odd.unwrap()).is_err());
    assert!(parse("a: [", "x").is_err());
    let empty = parse("apiVersion: v1\nclusters: []\n", "x").unwrap();
    assert!(check_entries(&empty).unwrap_err().contains("no clusters"));
    assert!(
        parse("- a\n- b\n", "x")
            .unwrap_err()
            .to_string()
            .contains("mapping")
    );
}

#[test]
fn atomic_write_keeps_the_old_file_on_failure() {
    let (dir, p) = config_file(None);
    write_atomic(&p, b"one", false).unwrap();
    use std::os::unix::fs::PermissionsExt;
    assert_eq!(
        std::fs::metadata(&p).unwrap().permissions().mode() & 0o777,
        0o600
    );
    write_atomic(&p, b"two", false).unwrap();
    assert_eq!(std::fs::read_to_string(&p).unwrap(), "two");
    assert_eq!(backup_path(&p), dir.path().join("config.bak"));
    // No temporary files are left behind.
    assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 1);
}

#[test]
fn removes_the_merged_context_and_its_unshared_entries() {
    let mut doc = json!({
        "apiVersion": "v1", "kind": "Config", "current-context": "c1-admin@c1",
        "clusters": [{"name": "c1", "cluster": {"server": "https://a"}}, {"name": "mgmt", "cluster": {"server": "https://m"}}],
        "users": [{"name": "c1-admin", "user": {}}, {"name": "me", "user": {}}],
        "contexts": [{"name": "c1-admin@c1", "context": {"cluster": "c1", "user": "c1-admin"}},
                     {"name": "mgmt", "context": {"cluster": "mgmt", "user": "me"}}]
    });
    assert_eq!(remove_context(&mut doc, "c1-admin@c1"), (true, true));
    assert_eq!(doc["contexts"].as_array().unwrap().len(), 1);
    assert_eq!(
        doc["clusters"],
        json!([{"name": "mgmt", "cluster": {"server": "https://m"}}])
    );
    assert_eq!(doc["users"], json!([{"name": "me", "user": {}}]));
    assert_eq!(doc["current-context"], "");
    assert_eq!(remove_context(&mut doc, "c1-admin@c1"), (false, false));
    // A user shared with another context stays.
    let mut doc = json!({
        "contexts": [{"name": "c2-admin@c2", "context": {"cluster": "c2", "user": "shared"}},
                     {"name": "x", "context": {"cluster": "x", "user": "shared"}}],
        "users": [{"name": "shared"}], "clusters": [{"name": "c2"}, {"name": "x"}]
    });
    assert_eq!(remove_context(&mut doc, "c2-admin@c2"), (true, false));
    assert_eq!(doc["users"].as_array().unwrap().len(), 1);
    assert_eq!(doc["clusters"], json!([{"name": "x"}]));
}

fn prod(name: &str) -> Value {
    rename(
        &fetched(),
        name,
        &format!("{name}-admin"),
        &format!("{name}-admin@{name}"),
    )
    .unwrap()
}

// Without the lock, 20 concurrent merges kept only 11 (capi) and 7 (kamaji) of the 20 contexts.
#[test]
fn concurrent_merges_all_land() {
    let (dir, path) = config_file(None);
    let threads: Vec<_> = (0..20)
        .map(|i| {
            let path = path.clone();
            std::thread::spawn(move || {
                merge_into_file(&path, &prod(&format!("c{i}")), opts(false, false))
            })
        })
        .collect();
    for t in threads {
        t.join().unwrap().unwrap();
    }
    let back = parse(&std::fs::read_to_string(&path).unwrap(), "x").unwrap();
    assert_eq!(back["contexts"].as_array().unwrap().len(), 20);
    // No lock or temporary file is left behind.
    let names: Vec<String> = std::fs::read_dir(dir.path())
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().to_string())
        .collect();
    assert!(
        names.iter().all(|n| n == "config" || n == "config.bak"),
        "{names:?}"
    );
}

// A read-only (0444) kubeconfig, which kubectl refuses to write, was once overwritten.
#[test]
fn a_read_only_kubeconfig_is_refused_and_a_mode_is_kept() {
    use std::os::unix::fs::PermissionsExt;
    let (_dir, path) = config_file(Some("apiVersion: v1\nkind: Config\n"));
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o444)).unwrap();
    let e = merge_into_file(&path, &prod("p"), opts(false, false)).unwrap_err();
    assert!(e.to_string().contains("read-only"), "{e}");
    assert_eq!(
        std::fs::read_to_string(&path).unwrap(),
        "apiVersion: v1\nkind: Config\n"
    );
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o640)).unwrap();
    merge_into_file(&path, &prod("p"), opts(false, false)).unwrap();
    let mode = std::fs::metadata(&path).unwrap().permissions().mode() & 0o777;
    assert_eq!(
        mode, 0o600,
        "owner bits kept, credentials not group-readable"
    );
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o700)).unwrap();
    merge_into_file(&path, &prod("q"), opts(false, false)).unwrap();
    let mode = std::fs::metadata(&path).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode, 0o700, "the owner's bits are the owner's");
}

// A symlink planted at config.bak once received the credentials.
#[test]
fn a_planted_backup_symlink_is_replaced_not_followed() {
    let (dir, path) = config_file(None);
    let elsewhere = dir.path().join("elsewhere");
    std::fs::write(&path, "apiVersion: v1\nkind: Config\n").unwrap();
    std::fs::write(&elsewhere, "untouched").unwrap();
    std::os::unix::fs::symlink(&elsewhere, dir.path().join("config.bak")).unwrap();
    merge_into_file(&path, &prod("p"), opts(false, false)).unwrap();
    assert_eq!(std::fs::read_to_string(&elsewhere).unwrap(), "untouched");
    assert!(
        !std::fs::symlink_metadata(dir.path().join("config.bak"))
            .unwrap()
            .is_symlink()
    );
}

// A writer with a predictable `.config.tmp-<pid>` once let a symlink planted there receive the
// credentials (mode 0644), and `config` itself became a symlink.
#[test]
fn a_planted_temporary_symlink_receives_nothing() {
    use std::os::unix::fs::PermissionsExt;
    let (dir, path) = config_file(None);
    let elsewhere = dir.path().join("elsewhere");
    std::fs::write(&elsewhere, "untouched").unwrap();
    for name in [
        format!(".config.tmp-{}", std::process::id()),
        ".config.tmp".into(),
    ] {
        std::os::unix::fs::symlink(&elsewhere, dir.path().join(name)).unwrap();
    }
    merge_into_file(&path, &prod("p"), opts(false, false)).unwrap();
    assert_eq!(std::fs::read_to_string(&elsewhere).unwrap(), "untouched");
    let meta = std::fs::symlink_metadata(&path).unwrap();
    assert!(meta.is_file() && !meta.is_symlink());
    assert_eq!(meta.permissions().mode() & 0o777, 0o600);
}

// `capi delete --yes` once removed a context of the same name pointing at another server.
#[test]
fn removal_needs_the_server_it_added() {
    let (_dir, path) = config_file(None);
    merge_into_file(&path, &prod("c1"), opts(false, true)).unwrap();
    let before = std::fs::read_to_string(&path).unwrap();
    let other_server = Added {
        servers: vec!["https://10.9.9.9:6443".to_string()],
        users: vec![],
    };
    // The same server, other credentials: someone else's context of that name.
    let other_user = Added {
        servers: vec!["https://10.0.0.1:6443".to_string()],
        users: vec![json!({"token": "someone-else"})],
    };
    for other in [other_server, other_user] {
        assert_eq!(
            remove_context_from_file(&path, "c1-admin@c1", &other).unwrap(),
            ContextRemoval::NotOurs
        );
        assert_eq!(std::fs::read_to_string(&path).unwrap(), before);
    }
    let ours = Added {
        servers: vec!["https://10.0.0.1:6443".to_string()],
        users: fetched()["users"]
            .as_array()
            .unwrap()
            .iter()
            .map(|u| u["user"].clone())
            .collect(),
    };
    assert_eq!(
        remove_context_from_file(&path, "c1-admin@c1", &ours).unwrap(),
        ContextRemoval::Removed { was_current: true }
    );
    assert_eq!(
        remove_context_from_file(&path, "c1-admin@c1", &ours).unwrap(),
        ContextRemoval::Absent
    );
}

// On a full disk a writer once left a 0-byte config.bak. A 64 KiB tmpfs filled to the last
// byte stands in for the full disk (mounting needs root, as the testbed does).
#[test]
fn a_full_disk_leaves_the_old_file_and_no_empty_backup() {
    let dir = tempfile::tempdir().unwrap();
    let mount = std::process::Command::new("mount")
        .args(["-t", "tmpfs", "-o", "size=64k", "tmpfs"])
        .arg(dir.path())
        .status()
        .expect("run mount");
    assert!(
        mount.success(),
        "mounting a tmpfs needs root, as the rest of the suite does"
    );
    let path = dir.path().join("config");
    let result = std::panic::catch_unwind(|| {
        let before = "apiVersion: v1\nkind: Config\ncurrent-context: mgmt\n";
        std::fs::write(&path, before).unwrap();
        // Fill the rest of the file system.
        let filler = dir.path().join("filler");
        let mut f = std::fs::File::create(&filler).unwrap();
        let chunk = vec![0u8; 4096];
        while f.write_all(&chunk).is_ok() {}
        let _ = f.write_all(&[0u8]);
        drop(f);
        let e = merge_into_file(&path, &prod("p"), opts(false, false)).unwrap_err();
        assert!(e.to_string().contains("cannot write"), "{e}");
        assert_eq!(std::fs::read_to_string(&path).unwrap(), before);
        let names: Vec<String> = std::fs::read_dir(dir.path())
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().to_string())
            .collect();
        // The backup is written whole or not at all, and no temporary or lock file stays.
        for n in &names {
            assert!(
                n == "config" || n == "filler" || n == "config.bak",
                "{names:?}"
            );
        }
        if names.iter().any(|n| n == "config.bak") {
            assert_eq!(
                std::fs::read_to_string(dir.path().join("config.bak")).unwrap(),
                before
            );
        }
    });
    let _ = std::process::Command::new("umount")
        .arg(dir.path())
        .status();
    if let Err(p) = result {
        std::panic::resume_unwind(p);
    }
}
