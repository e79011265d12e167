use super::*;

fn head() -> Head {
    Head {
        tenant: TenantRef {
            kind: "KamajiControlPlane".into(),
            namespace: "team-a".into(),
            name: "prod".into(),
        },
        tenant_control_plane: "prod".into(),
        kubernetes_version: "v1.35.4".into(),
        data_store: "default".into(),
        prefix: "/team_a_prod/".into(),
        revision: 42,
        witness: Some("uid-1".into()),
        created: "2026-12-07T10:00:00Z".into(),
        created_by: "kubectl-kamaji test".into(),
    }
}

fn secret(name: &str) -> Value {
    json!({"apiVersion": "v1", "kind": "Secret",
           "metadata": {"name": name, "namespace": "team-a", "uid": "u", "resourceVersion": "7",
                        "ownerReferences": [{"kind": "TenantControlPlane", "name": "prod"}],
                        "labels": {"kamaji.clastix.io/name": "prod"}},
           "data": {"ca.crt": "Zm9v"}})
}

/// The lines of a file with two keys and two objects, and its manifest.
fn file() -> (Vec<Vec<u8>>, BackupManifest) {
    let mut w = Writer::new();
    let mut lines = vec![
        w.key(b"/team_a_prod/registry/namespaces/default", b"v1")
            .unwrap(),
        w.key(b"/team_a_prod/registry/configmaps/default/x", b"\x00\xff")
            .unwrap(),
        w.object(&carried(&secret("prod-ca"))).unwrap(),
        w.object(&json!({"apiVersion": "cluster.x-k8s.io/v1beta2", "kind": "Cluster",
                         "metadata": {"name": "prod", "namespace": "team-a"},
                         "spec": {"controlPlaneRef": {"apiGroup": "controlplane.cluster.x-k8s.io",
                                                      "kind": "KamajiControlPlane", "name": "prod"},
                                  "infrastructureRef": {"kind": "ByoCluster", "name": "prod-infra"}},
                         "status": {"phase": "Provisioned"}}))
            .unwrap(),
    ];
    let (last, m) = w.finish(head()).unwrap();
    lines.push(last);
    (lines, m)
}

/// Reads the lines as the file gives them, without their newlines.
fn read(lines: &[Vec<u8>]) -> Result<BackupManifest, Error> {
    let mut r = Reader::new();
    for l in lines {
        r.line(l.strip_suffix(b"\n").unwrap())?;
    }
    r.finish()
}

#[test]
fn a_written_file_reads_back_with_its_counts() {
    let (lines, m) = file();
    assert_eq!(m.keys, 2);
    assert_eq!(m.key_bytes, 40 + 2 + 42 + 2);
    assert_eq!(m.objects, vec!["Secret/prod-ca", "Cluster/prod"]);
    assert_eq!(m.sha256.len(), 64);
    assert_eq!(read(&lines).unwrap(), m);
    let mut r = Reader::new();
    assert_eq!(
        r.line(&lines[1]).unwrap(),
        Item::Key(
            b"/team_a_prod/registry/configmaps/default/x".to_vec(),
            b"\x00\xff".to_vec()
        )
    );
}

#[test]
fn a_file_cut_short_or_edited_is_refused_with_the_reason() {
    let (lines, _) = file();
    let e = read(&lines[..4]).unwrap_err().to_string();
    assert!(
        e.contains("without its manifest: the file is incomplete"),
        "{e}"
    );

    let mut edited = lines.clone();
    let text = String::from_utf8(edited[2].clone()).unwrap();
    edited[2] = text.replace("Zm9v", "YmFy").into_bytes();
    let e = read(&edited).unwrap_err().to_string();
    assert!(
        e.contains("the file was changed after it was written"),
        "{e}"
    );

    let mut dropped = lines.clone();
    dropped.remove(1);
    let e = read(&dropped).unwrap_err().to_string();
    assert!(e.contains("checksum"), "{e}");

    let mut extra = lines.clone();
    extra.push(lines[0].clone());
    let e = read(&extra).unwrap_err().to_string();
    assert!(e.contains("line 6 follows the manifest"), "{e}");

    let mut garbage = lines;
    garbage[0] = b"{\"key\": 3}\n".to_vec();
    let e = read(&garbage).unwrap_err().to_string();
    assert!(e.contains("line 1 is not a backup line"), "{e}");
}

#[test]
fn a_key_outside_the_prefix_is_refused_even_with_a_matching_checksum() {
    let mut w = Writer::new();
    let mut lines = vec![
        w.key(b"/team_a_prod/registry/a", b"1").unwrap(),
        w.key(b"/team_a_other/registry/a", b"1").unwrap(),
    ];
    lines.push(w.finish(head()).unwrap().0);
    let e = read(&lines).unwrap_err().to_string();
    assert!(
        e.contains("the key on line 2 lies outside the tenant's prefix /team_a_prod/"),
        "{e}"
    );
}

#[test]
fn another_format_is_refused_naming_it() {
    let (mut lines, mut m) = file();
    m.format = "capi-kamaji.io/tenant-backup/v9".into();
    let mut last = serde_json::to_vec(&Line::Manifest(Box::new(m))).unwrap();
    last.push(b'\n');
    *lines.last_mut().unwrap() = last;
    let e = read(&lines).unwrap_err().to_string();
    assert!(
        e.contains("it is a capi-kamaji.io/tenant-backup/v9 backup"),
        "{e}"
    );
}

#[test]
fn carried_objects_lose_what_the_server_and_controllers_set() {
    let c = carried(&secret("prod-ca"));
    assert!(c["metadata"]["uid"].is_null());
    assert!(c["metadata"]["resourceVersion"].is_null());
    assert!(c["metadata"]["ownerReferences"].is_null());
    assert_eq!(c["metadata"]["labels"]["kamaji.clastix.io/name"], "prod");
    assert_eq!(c["data"]["ca.crt"], "Zm9v");
}

#[test]
fn a_restore_as_another_name_renames_the_objects_refs_keys_and_datastore() {
    let (_, m) = file();
    let t = RestoreTarget::of(&m, Some("team-b"), Some("copy"), Some("dedicated"));
    assert_eq!(t.prefix(&m), "/team_b_copy/");
    assert_eq!(
        t.key(&m, b"/team_a_prod/registry/x").unwrap(),
        b"/team_b_copy/registry/x".to_vec()
    );
    assert_eq!(t.key(&m, b"/team_a_produce/registry/x"), None);
    let s = t.object(&m, &secret("prod-ca"));
    assert_eq!(s["metadata"]["name"], "copy-ca");
    assert_eq!(s["metadata"]["namespace"], "team-b");
    assert_eq!(s["metadata"]["labels"]["kamaji.clastix.io/name"], "copy");
    assert_eq!(
        s["metadata"]["annotations"][RESTORED_FROM],
        restored_from(&m)
    );
    let cluster = json!({"kind": "Cluster", "metadata": {"name": "prod", "namespace": "team-a"},
        "spec": {"controlPlaneRef": {"kind": "KamajiControlPlane", "name": "prod", "namespace": "team-a"},
                 "infrastructureRef": {"kind": "ByoCluster", "name": "prod-infra"}}});
    let c = t.object(&m, &cluster);
    assert_eq!(c["metadata"]["name"], "copy");
    assert_eq!(c["spec"]["controlPlaneRef"]["name"], "copy");
    assert_eq!(c["spec"]["controlPlaneRef"]["namespace"], "team-b");
    assert_eq!(c["spec"]["infrastructureRef"]["name"], "copy-infra");
    assert!(c["spec"]["infrastructureRef"].get("namespace").is_none());
    let kcp = t.object(
        &m,
        &json!({"kind": "KamajiControlPlane",
        "metadata": {"name": "prod", "labels": {"cluster.x-k8s.io/cluster-name": "prod"}},
        "spec": {"dataStoreName": "default"}}),
    );
    assert_eq!(kcp["spec"]["dataStoreName"], "dedicated");
    assert_eq!(
        kcp["metadata"]["labels"]["cluster.x-k8s.io/cluster-name"],
        "copy"
    );
    // A name that only starts with the tenant's, without a dash, is another object's.
    let other = t.object(&m, &secret("production-ca"));
    assert_eq!(other["metadata"]["name"], "production-ca");
}

#[test]
fn without_flags_a_restore_keeps_every_name() {
    let (_, m) = file();
    let t = RestoreTarget::of(&m, None, None, None);
    assert_eq!(t.prefix(&m), m.prefix);
    assert_eq!(
        t.object(&m, &secret("prod-ca"))["metadata"]["name"],
        "prod-ca"
    );
}

#[test]
fn objects_are_restored_secrets_first_cluster_last() {
    let mut objs = [
        json!({"kind": "Cluster"}),
        json!({"kind": "KamajiControlPlane"}),
        json!({"kind": "ByoCluster"}),
        json!({"kind": "Secret"}),
    ];
    objs.sort_by_key(restore_rank);
    let kinds: Vec<&str> = objs.iter().map(|o| o["kind"].as_str().unwrap()).collect();
    assert_eq!(
        kinds,
        ["Secret", "ByoCluster", "KamajiControlPlane", "Cluster"]
    );
}

#[test]
fn a_manifest_is_described_in_two_lines() {
    let (_, m) = file();
    let d = describe(&m);
    assert_eq!(
        d[0],
        "KamajiControlPlane team-a/prod (Kubernetes v1.35.4), DataStore default, prefix /team_a_prod/ at revision 42"
    );
    assert!(
        d[1].starts_with("2 keys (86 bytes), objects: 1 Cluster, 1 Secret;"),
        "{}",
        d[1]
    );
}

#[test]
fn a_move_puts_the_control_plane_to_sleep_and_the_restore_wakes_it() {
    let kcp = json!({"kind": "KamajiControlPlane", "metadata": {"name": "prod"},
                     "spec": {"replicas": 3, "dataStoreName": "default"}});
    let patch = sleep_patch(&kcp, "https://target:6443");
    assert_eq!(patch["spec"]["replicas"], 0);
    assert_eq!(patch["metadata"]["annotations"][MOVING_REPLICAS], "3");
    assert_eq!(
        patch["metadata"]["annotations"][MOVING_TO],
        "https://target:6443"
    );
    let mut asleep = kcp.clone();
    asleep["spec"]["replicas"] = json!(0);
    asleep["metadata"]["annotations"] = patch["metadata"]["annotations"].clone();
    assert_eq!(moving_to(&asleep), Some("https://target:6443"));
    // A re-run keeps the first run's count, not the 0 it set.
    assert_eq!(
        sleep_patch(&asleep, "https://target:6443")["metadata"]["annotations"][MOVING_REPLICAS],
        "3"
    );
    let (_, m) = file();
    let restored = RestoreTarget::of(&m, None, None, None).object(&m, &asleep);
    assert_eq!(restored["spec"]["replicas"], 3);
    assert!(
        restored["metadata"]["annotations"].get(MOVING_TO).is_none(),
        "{restored}"
    );
    assert!(
        restored["metadata"]["annotations"]
            .get(MOVING_REPLICAS)
            .is_none()
    );

    let tcp = json!({"kind": "TenantControlPlane", "metadata": {"name": "t"}, "spec": {}});
    let patch = sleep_patch(&tcp, "https://x");
    assert_eq!(patch["spec"]["controlPlane"]["deployment"]["replicas"], 0);
    assert_eq!(
        patch["metadata"]["annotations"][MOVING_REPLICAS], "2",
        "Kamaji's default"
    );
    assert_eq!(woken(&tcp), tcp, "nothing to wake");
}
