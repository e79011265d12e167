use serde_json::{Value, json};

use super::*;

fn tcp(spec_ds: &str, status_ds: &str, status: &str) -> Value {
    json!({
        "metadata": {"name": "t", "namespace": "ns", "uid": "u1"},
        "spec": {"dataStore": spec_ds},
        "status": {"storage": {"dataStoreName": status_ds, "driver": "etcd"},
                   "kubernetesResources": {"version": {"status": status}}}
    })
}

fn store(name: &str, driver: &str) -> DataStore {
    DataStore::of(&json!({
        "metadata": {"name": name},
        "spec": {"driver": driver, "endpoints": ["127.0.0.1:1"],
                 "tlsConfig": {
                    "certificateAuthority": {"certificate": {"secretReference": {"name": "ca", "namespace": "k", "keyPath": "ca.crt"}}},
                    "clientCertificate": {"certificate": {"content": "Y2VydA=="},
                                          "privateKey": {"secretReference": {"name": "c", "namespace": "k", "keyPath": "tls.key"}}}}}
    }))
}

fn stores() -> Vec<DataStore> {
    vec![
        store("default", "etcd"),
        store("dedicated", "etcd"),
        store("pg", "PostgreSQL"),
    ]
}

fn preflight_of(
    t: &Value,
    target: &str,
    reach: Reach,
    job: Option<&Value>,
) -> Result<MigratePlan, Error> {
    let stores = stores();
    preflight(&Preflight {
        name: "t",
        namespace: "ns",
        tcp: t,
        kcp: None,
        topology_class: None,
        stores: &stores,
        source: "default",
        target,
        job,
        source_reach: Reach::Answered { tenant_keys: 42 },
        target_reach: reach,
    })
}

#[test]
fn a_datastore_reads_its_driver_endpoints_and_both_kinds_of_content() {
    let d = store("dedicated", "etcd");
    assert!(d.is_etcd());
    assert_eq!(d.endpoints, vec!["127.0.0.1:1"]);
    let tls = d.tls.unwrap();
    assert_eq!(tls.cert, Content::Inline("Y2VydA==".into()));
    assert_eq!(
        tls.ca,
        Content::Secret {
            namespace: "k".into(),
            name: "ca".into(),
            key: "ca.crt".into()
        }
    );
    assert_eq!(
        DataStore::of(&json!({"spec": {"driver": "etcd"}})).tls,
        None
    );
}

#[test]
fn the_prefix_and_its_range_end_are_etcds() {
    assert_eq!(
        etcd_prefix(&json!({"metadata": {"namespace": "my-ns", "name": "t-1"}})),
        "/my_ns_t_1/"
    );
    assert_eq!(
        etcd_prefix(&json!({"metadata": {"namespace": "my-ns", "name": "t"},
                            "status": {"storage": {"setup": {"schema": "kept-name"}}}})),
        "/kept-name/"
    );
    assert_eq!(prefix_range_end(b"/ns_t/"), b"/ns_t0".to_vec());
    assert_eq!(prefix_range_end(&[b'a', 0xff]), b"b".to_vec());
    assert_eq!(prefix_range_end(&[0xff, 0xff]), vec![0]);
}

#[test]
fn the_stage_follows_the_spec_and_the_status() {
    let fresh = tcp("default", "default", "Ready");
    assert_eq!(
        stage("t", None, &fresh, "dedicated").unwrap(),
        Stage::Fresh {
            source: "default".into()
        }
    );
    let under_way = tcp("dedicated", "default", "Migrating");
    assert_eq!(
        stage("t", None, &under_way, "dedicated").unwrap(),
        Stage::UnderWay { source: None }
    );
    // A KamajiControlPlane asked for the target; the reconciler has not written it yet.
    let kcp = json!({"spec": {"dataStoreName": "dedicated"}});
    assert_eq!(
        stage("t", Some(&kcp), &fresh, "dedicated").unwrap(),
        Stage::UnderWay { source: None }
    );
    let mut done = tcp("dedicated", "dedicated", "Ready");
    done["metadata"]["annotations"] = json!({MIGRATING_FROM_ANNOTATION: "default"});
    assert_eq!(
        stage("t", None, &done, "dedicated").unwrap(),
        Stage::Done {
            source: Some("default".into())
        }
    );
    // Under way to somewhere else: refused, and told how to follow it.
    let e = stage("t", None, &under_way, "other").unwrap_err();
    assert!(
        e.to_string()
            .contains("from default to dedicated is under way"),
        "{e}"
    );
    assert!(
        e.hint()
            .unwrap()
            .contains("migrate t --to dedicated --wait")
    );
    let e = stage("t", None, &json!({"status": {}}), "x").unwrap_err();
    assert!(e.to_string().contains("reports no DataStore yet"), "{e}");
}

#[test]
fn the_preflight_passes_a_ready_tenant_to_an_empty_etcd_of_its_driver() {
    let t = tcp("default", "default", "Ready");
    let plan = preflight_of(&t, "dedicated", Reach::Answered { tenant_keys: 0 }, None).unwrap();
    assert_eq!(plan.prefix, "/ns_t/");
    assert_eq!(plan.tenant_keys, Some(42));
    assert_eq!(plan.writes, Writes::TenantControlPlane);
    assert!(plan.notes.is_empty());
    let lines = plan.lines("t").join("\n");
    assert!(
        lines.contains("from DataStore default to dedicated (etcd driver) (42 keys under /ns_t/)"),
        "{lines}"
    );
    assert!(
        lines.contains("3. the copy left on default (/ns_t/) is removed"),
        "{lines}"
    );
    // An in-cluster name is a note, not a refusal: Kamaji's Job dials it from the cluster.
    let plan = preflight_of(
        &t,
        "dedicated",
        Reach::NotFromHere("no such host".into()),
        None,
    )
    .unwrap();
    assert!(
        plan.notes[0].contains("not checked from here (no such host)"),
        "{:?}",
        plan.notes
    );
}

#[test]
fn the_preflight_refuses_what_kamaji_cannot_finish() {
    let t = tcp("default", "default", "Ready");
    let answered = || Reach::Answered { tenant_keys: 0 };
    for (target, reach, job, status, want) in [
        (
            "pg",
            answered(),
            None,
            "Ready",
            "uses the PostgreSQL driver and t's data is in default (etcd)",
        ),
        (
            "dedicatd",
            answered(),
            None,
            "Ready",
            "DataStore \"dedicatd\" not found",
        ),
        (
            "dedicated",
            Reach::Failed("connection refused".into()),
            None,
            "Ready",
            "does not answer at 127.0.0.1:1: connection refused",
        ),
        (
            "dedicated",
            Reach::Answered { tenant_keys: 7 },
            None,
            "Ready",
            "already holds 7 keys under /ns_t/",
        ),
        (
            "dedicated",
            answered(),
            Some(json!({"metadata": {"name": "migrate-u1", "namespace": "kamaji-system"}})),
            "Ready",
            "migration Job migrate-u1 for t exists already",
        ),
        (
            "dedicated",
            answered(),
            None,
            "Upgrading",
            "t is Upgrading; Kamaji migrates a Ready control plane",
        ),
    ] {
        let mut t = t.clone();
        t["status"]["kubernetesResources"]["version"]["status"] = json!(status);
        let e = preflight_of(&t, target, reach, job.as_ref()).unwrap_err();
        assert!(e.to_string().contains(want), "{target}: {e}");
        assert!(e.hint().is_some(), "{target}: no hint");
    }
    let e = preflight_of(&t, "dedicatd", answered(), None).unwrap_err();
    assert!(
        e.hint().unwrap().contains("did you mean dedicated?"),
        "{:?}",
        e.hint()
    );
}

#[test]
fn a_topology_managed_control_plane_is_refused_and_a_kcp_gets_the_write() {
    let t = tcp("default", "default", "Ready");
    let stores = stores();
    let kcp = json!({"spec": {}});
    let mut p = Preflight {
        name: "t",
        namespace: "ns",
        tcp: &t,
        kcp: Some(&kcp),
        topology_class: Some("kamaji-class"),
        stores: &stores,
        source: "default",
        target: "dedicated",
        job: None,
        source_reach: Reach::NotChecked,
        target_reach: Reach::Answered { tenant_keys: 0 },
    };
    let e = preflight(&p).unwrap_err();
    assert!(e.to_string().contains("ClusterClass kamaji-class"), "{e}");
    p.topology_class = None;
    let plan = preflight(&p).unwrap();
    assert_eq!(plan.writes, Writes::KamajiControlPlane);
    assert_eq!(plan.tenant_keys, None);
    assert_eq!(
        target_patch(&plan.writes, "dedicated", "default"),
        json!({"spec": {"dataStoreName": "dedicated"}})
    );
    assert_eq!(
        target_patch(&Writes::TenantControlPlane, "dedicated", "default")["metadata"]["annotations"]
            [MIGRATING_FROM_ANNOTATION],
        "default"
    );
    assert_eq!(
        source_patch("default")["metadata"]["annotations"][MIGRATING_FROM_ANNOTATION],
        "default"
    );
    assert!(finished_patch()["metadata"]["annotations"][MIGRATING_FROM_ANNOTATION].is_null());
    assert_eq!(
        nudge_patch(7)["metadata"]["annotations"][NUDGE_ANNOTATION],
        "7"
    );
    let finished = finished_patch();
    let cleared = finished["metadata"]["annotations"].as_object().unwrap();
    assert!(cleared.contains_key(NUDGE_ANNOTATION) && cleared[NUDGE_ANNOTATION].is_null());
}

#[test]
fn progress_follows_kamajis_status_and_job() {
    let job = |conds: Value, active: i64| json!({"metadata": {"name": "migrate-u1"}, "status": {"active": active, "conditions": conds}});
    let cases = [
        (
            tcp("default", "default", "Ready"),
            None,
            MigrationProgress::Requested,
        ),
        (
            tcp("dedicated", "default", "Ready"),
            None,
            MigrationProgress::Starting,
        ),
        (
            tcp("dedicated", "default", "Migrating"),
            Some(job(json!([]), 0)),
            MigrationProgress::Copying {
                job: "migrate-u1".into(),
                active: false,
            },
        ),
        (
            tcp("dedicated", "default", "Migrating"),
            Some(job(json!([]), 1)),
            MigrationProgress::Copying {
                job: "migrate-u1".into(),
                active: true,
            },
        ),
        (
            tcp("dedicated", "default", "Migrating"),
            Some(job(json!([{"type": "Complete", "status": "True"}]), 0)),
            MigrationProgress::Switching,
        ),
        (
            tcp("dedicated", "default", "Migrating"),
            None,
            MigrationProgress::Switching,
        ),
        (
            tcp("dedicated", "dedicated", "Migrating"),
            None,
            MigrationProgress::Switching,
        ),
        (
            tcp("dedicated", "dedicated", "Ready"),
            None,
            MigrationProgress::Ready,
        ),
        (
            tcp("dedicated", "default", "Migrating"),
            Some(job(
                json!([{"type": "Failed", "status": "True", "message": "BackoffLimitExceeded"}]),
                0,
            )),
            MigrationProgress::Failed {
                job: "migrate-u1".into(),
                message: "BackoffLimitExceeded".into(),
            },
        ),
    ];
    for (t, j, want) in cases {
        let got = MigrationProgress::of(&t, j.as_ref(), "dedicated");
        assert_eq!(got, want, "{t}");
        assert!(!got.line("t", "dedicated").is_empty());
    }
    assert_eq!(job_name("u1"), "migrate-u1");
}

#[test]
fn a_complete_job_gets_complete_first_for_kamaji_v1_0_0() {
    let met = json!({"type": "SuccessCriteriaMet", "status": "True"});
    let complete = json!({"type": "Complete", "status": "True"});
    let job = |c: Value| json!({"status": {"conditions": c}});
    // As the Job controller of Kubernetes v1.31+ writes them.
    let patch = complete_first(&job(json!([met, complete]))).unwrap();
    assert_eq!(patch, json!({"status": {"conditions": [complete, met]}}));
    // Already first, not complete, no conditions: nothing to do.
    assert_eq!(complete_first(&job(json!([complete, met]))), None);
    assert_eq!(complete_first(&job(json!([met]))), None);
    assert_eq!(complete_first(&json!({})), None);
}
