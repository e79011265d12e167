//! `kubectl kamaji backup` and `restore` on the real Kamaji v1.0.0: a live tenant's objects
//! written, backed up, the tenant deleted (Kamaji removes its keys), restored from the file; the
//! objects read back through the kubeconfig taken before the backup (the CA came back with the
//! keys) and `/version` answers. A file cut short or changed is refused, and a restore onto a
//! name or prefix in use is refused, with nothing written. In the live suite, so it shares its
//! testbed.

use std::io::{Read, Write};

use crate::common::*;
use testbed::fixtures::run::assert_contains;

fn gunzip(path: &std::path::Path) -> String {
    let mut text = String::new();
    flate2::read::GzDecoder::new(std::fs::File::open(path).unwrap())
        .read_to_string(&mut text)
        .unwrap();
    text
}

fn gzip(path: &std::path::Path, text: &str) {
    let mut gz = flate2::write::GzEncoder::new(
        std::fs::File::create(path).unwrap(),
        flate2::Compression::default(),
    );
    gz.write_all(text.as_bytes()).unwrap();
    gz.finish().unwrap();
}

#[tokio::test]
async fn a_tenant_backed_up_deleted_and_restored_serves_its_objects_again() {
    let (tb, client, ns, _rec) = live_namespace("backup").await;
    let name = "bk";
    let tenant_kc = live_tenant(tb, &ns, name);
    write_configmap(&tenant_kc, "before-backup", "kept");
    let store = testbed_etcd(tb, "default").await;
    let prefix = format!("/{}_{name}/", ns.replace('-', "_"));

    // -o is the file here; an output format typed out of habit is refused.
    let line = fails(&kamaji(tb, &ns, &["backup", name, "-o", "json"]), 2);
    assert_contains(
        &line,
        "backup's -o names the file to write, not an output format",
    );

    let file = tb.dir.join(format!("{ns}-{name}.kamaji-backup"));
    let out = ok(&kamaji(
        tb,
        &ns,
        &["backup", name, "-o", file.to_str().unwrap()],
    ));
    assert_contains(
        &out,
        &format!(
            "KamajiControlPlane {ns}/{name} (Kubernetes v1.35.4), DataStore default, prefix {prefix}"
        ),
    );
    assert_contains(
        &out,
        &format!("backup of {name} written to {}", file.display()),
    );
    {
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(&file).unwrap().permissions().mode();
        assert_eq!(
            mode & 0o777,
            0o600,
            "the backup holds the tenant's keys and CA"
        );
    }
    let text = gunzip(&file);
    let manifest: serde_json::Value = serde_json::from_str(text.lines().last().unwrap()).unwrap();
    let manifest = &manifest["manifest"];
    let keys = manifest["keys"].as_u64().unwrap();
    assert!(
        keys > 50,
        "a live tenant has more keys than {keys}: {manifest}"
    );
    for o in [
        "Secret/bk-ca",
        "Secret/bk-sa-certificate",
        "KamajiControlPlane/bk",
        "Cluster/bk",
    ] {
        assert!(
            manifest["objects"].as_array().unwrap().contains(&o.into()),
            "{o}: {manifest}"
        );
    }
    assert!(manifest["witness"].is_string(), "{manifest}");
    // Many at once, by label, into a directory made for them (0700).
    let dir = tb.dir.join(format!("{ns}-many"));
    let selector = format!("cluster.x-k8s.io/cluster-name={name}");
    let many = ok(&kamaji(
        tb,
        &ns,
        &[
            "backup",
            "-l",
            &selector,
            "-o",
            dir.to_str().unwrap(),
            "--max-parallel",
            "2",
        ],
    ));
    let one = dir.join(format!("{ns}.{name}.kamaji-backup"));
    assert_contains(&many, &format!("{ns}/{name}: "));
    assert_contains(&many, &format!("written to {}", one.display()));
    assert!(gunzip(&one).lines().count() > 50, "{many}");

    // Bad files and taken names: refused, nothing written (under another name, so the check
    // that nothing was written looks at a prefix nobody else uses).
    let copy = format!("/{}_bk_copy/", ns.replace('-', "_"));
    let cut = tb.dir.join(format!("{ns}-cut.kamaji-backup"));
    let bytes = std::fs::read(&file).unwrap();
    std::fs::write(&cut, &bytes[..bytes.len() / 2]).unwrap();
    let edited = tb.dir.join(format!("{ns}-edited.kamaji-backup"));
    gzip(
        &edited,
        &text.replacen(
            "\"kind\":\"Secret\"",
            "\"kind\":\"Secret\",\"type\":\"x\"",
            1,
        ),
    );
    for (bad, why) in [
        (&cut, "is refused: it is not a whole gzip stream"),
        (&edited, "the file was changed after it was written"),
    ] {
        let line = fails(
            &kamaji(
                tb,
                &ns,
                &["restore", bad.to_str().unwrap(), "--new-name", "bk-copy"],
            ),
            1,
        );
        assert_contains(&line, &format!("the backup {} ", bad.display()));
        assert_contains(&line, why);
    }
    let taken = fails(&kamaji(tb, &ns, &["restore", file.to_str().unwrap()]), 1);
    assert_contains(
        &taken,
        &format!("Secret {ns}/bk-ca already exists: the restore would overwrite it"),
    );
    assert_eq!(
        store.count(&copy).await.unwrap(),
        0,
        "a refused restore wrote keys"
    );
    let kcp_copy = get(&client, &ns, &kcp_ar(), "bk-copy").await;
    assert!(kcp_copy.is_none(), "a refused restore created {kcp_copy:?}");

    // Deleted, its keys gone with it; then restored from the file.
    let deleted = ok(&delete_wait(tb, &ns, name, "180s"));
    assert_contains(
        &deleted,
        "bk is gone; DataStore default no longer holds its data",
    );
    // Kamaji v1.0.0 clears the prefix while the tenant's API server still runs, which writes
    // kube-system again before it stops; delete --wait removes that once the pods are gone.
    let left = store
        .range_page(&prefix, prefix.as_bytes(), 0, 100)
        .await
        .unwrap();
    let names: Vec<String> = left
        .kvs
        .iter()
        .map(|(k, _)| String::from_utf8_lossy(k).to_string())
        .collect();
    assert!(names.is_empty(), "delete --wait left keys: {names:?}");
    let dry = ok(&kamaji(
        tb,
        &ns,
        &["restore", file.to_str().unwrap(), "--dry-run=client"],
    ));
    assert_contains(
        &dry,
        &format!("would restore bk as {ns}/bk on DataStore default under {prefix} (dry run)"),
    );
    assert_eq!(
        store.count(&prefix).await.unwrap(),
        0,
        "a dry run wrote keys"
    );
    let restored = kamaji(
        tb,
        &ns,
        &["restore", file.to_str().unwrap(), "--timeout", "300s"],
    );
    let out = ok(&restored);
    assert_contains(
        &out,
        &format!("{ns}/bk restored: bk answers with Kubernetes v1.35.4"),
    );
    assert_contains(&out, "its kube-system Namespace is the one backed up");
    assert_contains(
        &stderr(&restored),
        &format!("{keys} keys written to DataStore default under {prefix}"),
    );
    // The kubeconfig taken before the backup still works: the CA came back.
    assert_eq!(read_configmap(&tenant_kc, "before-backup"), "kept");
    assert!(store.count(&prefix).await.unwrap() >= keys);

    // A re-run finds its own objects and finishes (nothing to do) instead of refusing.
    let again = kamaji(tb, &ns, &["restore", file.to_str().unwrap()]);
    assert_contains(&ok(&again), &format!("{ns}/bk restored"));
    assert_contains(
        &stderr(&again),
        "was restored from this file up to its objects: finishing",
    );
    ok(&delete_wait(tb, &ns, name, "180s"));
}

/// `move` between two management clusters, both running the real Kamaji v1.0.0: this suite's
/// testbed and the CAPI 1.10 one (`testbed_v1beta1_real`, its own API server, etcd and
/// DataStore). A standalone TenantControlPlane moves with `--delete-origin`: it answers on the
/// target at the same endpoint through the kubeconfig taken before (same CA), with the object
/// written before; the origin holds neither the TenantControlPlane nor a key of it; a re-run
/// says there is nothing left to move. A KamajiControlPlane whose Cluster is v1beta2 is refused
/// by the v1beta1-only target before the origin stops.
#[tokio::test]
async fn a_tenant_moves_to_another_management_cluster_and_leaves_nothing_behind() {
    let tb = testbed_real().await;
    let (client, ns) = tb.namespace("move").await;
    let there = testbed_v1beta1_real().await;
    let there_client = there.client().await;
    let namespace: k8s_openapi::api::core::v1::Namespace =
        serde_json::from_value(serde_json::json!({"metadata": {"name": ns}})).unwrap();
    kube::Api::<k8s_openapi::api::core::v1::Namespace>::all(there_client.clone())
        .create(&kube::api::PostParams::default(), &namespace)
        .await
        .unwrap();
    let name = "mv";
    create_standalone_tcp(&client, &ns, name, free_port()).await;
    ready_tcp(&client, &ns, name).await;
    let tenant_kc = tenant_kubeconfig(tb, &ns, name);
    admin_may_write(&tenant_kc).await;
    write_configmap(&tenant_kc, "before-move", "moved");
    let store = testbed_etcd(tb, "default").await;
    let prefix = format!("/{}_{name}/", ns.replace('-', "_"));
    assert!(store.count(&prefix).await.unwrap() > 0);

    let to = there.kubeconfig.to_str().unwrap();
    let file = tb.dir.join(format!("{ns}-{name}.kamaji-move"));
    let args = [
        "move",
        name,
        "--to-kubeconfig",
        to,
        "--delete-origin",
        "--yes",
        "--file",
        file.to_str().unwrap(),
        "--timeout",
        "300s",
    ];
    let moved = kamaji(tb, &ns, &args);
    let out = ok(&moved);
    assert_contains(
        &out,
        &format!("{ns}/mv restored: mv answers with Kubernetes v1.35.4"),
    );
    assert_contains(
        &out,
        "mv is gone; DataStore default no longer holds its data",
    );
    assert_contains(&out, "mv moved to https://");
    assert!(!file.exists(), "the move left its backup behind");
    // The target serves it: the kubeconfig taken on the origin reads the object written there.
    assert_eq!(read_configmap(&tenant_kc, "before-move"), "moved");
    let on_target = get(&there_client, &ns, &tcp_ar(), name)
        .await
        .expect("mv on the target");
    assert!(on_target["metadata"]["annotations"]["capi-kamaji.io/restored-from"].is_string());
    assert_eq!(
        on_target["spec"]["controlPlane"]["deployment"]["replicas"], 1,
        "replicas given back"
    );
    assert!(
        get(&client, &ns, &tcp_ar(), name).await.is_none(),
        "mv is still on the origin"
    );
    assert_eq!(
        store.count(&prefix).await.unwrap(),
        0,
        "the origin keeps keys of mv"
    );
    let again = ok(&kamaji(tb, &ns, &args));
    assert_contains(&again, "mv runs on https://");
    assert_contains(&again, "already: nothing left to move");

    // A KamajiControlPlane with a v1beta2 Cluster: the v1beta1-only target is refused up front.
    let rec = start_reconciler(tb, &ns);
    let port = free_port().to_string();
    ok(&create_tenant(
        tb,
        &ns,
        "kc",
        "none",
        &port,
        &["--datastore", "default"],
    ));
    let refused = fails(
        &kamaji(tb, &ns, &["move", "kc", "--to-kubeconfig", to, "--yes"]),
        1,
    );
    assert_contains(
        &refused,
        "Cluster cluster.x-k8s.io/v1beta2 is not served here (served: v1beta1)",
    );
    let kcp = get(&client, &ns, &kcp_ar(), "kc").await.unwrap();
    assert_eq!(
        kcp["spec"]["replicas"], 1,
        "a refused move stopped the origin"
    );
    assert!(kcp["metadata"]["annotations"]["capi-kamaji.io/moving-to"].is_null());
    ok(&delete_wait(tb, &ns, "kc", "180s"));
    drop(rec);
    let cleanup = kamaji_env(
        there,
        &ns,
        &["delete", name, "--yes", "--wait", "--timeout", "180s"],
        &[],
    );
    ok(&cleanup);
}
