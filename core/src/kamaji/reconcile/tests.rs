//! Tests of [`decide`](super::decide) (a test for each way a reconcile stops) and of what the
//! TenantControlPlane as applied gives the status ([`published`](super::published)).

use super::*;
use crate::kamaji::api::v1alpha2::{Condition, KamajiControlPlaneSpec, KamajiControlPlaneStatus};
use crate::kamaji::api::{
    DeploymentComponent, ExternalClusterReference, GatewayComponent, IngressComponent,
    NetworkComponent,
};

/// A KamajiControlPlane `cp` in `ns`, owned by the Cluster `cp`, at `version`.
fn kcp(version: &str) -> KamajiControlPlane {
    let mut k = KamajiControlPlane::new(
        "cp",
        KamajiControlPlaneSpec {
            version: version.into(),
            replicas: Some(2),
            ..Default::default()
        },
    );
    k.metadata.namespace = Some("ns".into());
    k.metadata.uid = Some("u-1".into());
    k.metadata.labels = Some([("team".to_string(), "a".to_string())].into());
    k
}

fn remote(mut k: KamajiControlPlane) -> KamajiControlPlane {
    k.spec.fields.deployment = Some(Box::new(DeploymentComponent {
        external_cluster_reference: Some(ExternalClusterReference {
            kubeconfig_secret_name: "far".into(),
            kubeconfig_secret_key: "value".into(),
            kubeconfig_secret_namespace: String::new(),
            deployment_namespace: "tenants".into(),
        }),
        ..Default::default()
    }));
    k
}

fn cluster() -> Value {
    json!({
        "metadata": {"name": "cp", "namespace": "ns"},
        "spec": {"clusterNetwork": {"services": {"cidrBlocks": ["10.96.0.0/16"]}}},
    })
}

const SETUP: Setup<'static> = Setup {
    external_cluster_reference: true,
    tcp_api_version: "kamaji.clastix.io/v1alpha1",
    tcp_spec_schema: &Value::Null,
};

/// A TenantControlPlane at `version`, whose version status Kamaji reports as `status`.
fn tcp(version: &str, status: &str) -> Value {
    json!({
        "metadata": {"name": "cp", "namespace": "ns"},
        "spec": {"kubernetes": {"version": version}},
        "status": {"kubernetesResources": {"version": {"version": version, "status": status}}},
    })
}

fn all(tcp: Option<Value>) -> Found<(), String> {
    Found::All {
        cluster: cluster(),
        place: (),
        tcp,
    }
}

fn decided(k: &KamajiControlPlane, found: Found<(), String>) -> KcpDecision<(), String> {
    decide(k, found, &SETUP)
}

fn reasons(conds: &[Cond]) -> Vec<(&str, bool, &str)> {
    conds
        .iter()
        .map(|c| (c.type_, c.ok, c.reason.as_str()))
        .collect()
}

/// The conditions and the TenantControlPlane of a decision that only writes the status.
fn waits(d: KcpDecision<(), String>) -> (Vec<Cond>, Option<Value>, Option<Note>) {
    match d.then {
        Then::Wait { conds, tcp, event } => (conds, tcp, event),
        other => panic!("expected a wait, got {other:?}"),
    }
}

fn applies(d: KcpDecision<(), String>) -> Apply<()> {
    match d.then {
        Then::Apply(a) => a,
        other => panic!("expected an apply, got {other:?}"),
    }
}

#[test]
fn a_deleted_control_plane_releases_only_its_own_finalizer() {
    let k = remote(kcp("v1.33.0"));
    let deleting = |finalizer, remote| Found::Deleting { finalizer, remote };
    let d = decided(&k, deleting(false, None));
    assert!(matches!(d.then, Then::Finalize(Finalize::NotOurs)));
    // Deleted: not looked at again, even with an external reference.
    assert_eq!(d.requeue, None);
    assert!(!d.add_finalizer);
    let d = decided(&k, deleting(true, None));
    assert!(matches!(d.then, Then::Finalize(Finalize::Release)));
    let d = decided(&k, deleting(true, Some(Ok(()))));
    assert!(matches!(d.then, Then::Finalize(Finalize::DeleteRemote(()))));
    let d = decided(&k, deleting(true, Some(Err("gone".into()))));
    assert!(matches!(d.then, Then::Finalize(Finalize::ReleaseUnreachable(e)) if e == "gone"));
}

#[test]
fn no_cluster_owner_waits_and_says_so_once_with_an_event() {
    let mut k = kcp("v1.33.0");
    let (conds, tcp, event) = waits(decided(&k, Found::NoClusterOwner));
    assert_eq!(
        reasons(&conds),
        [(CREATED, false, "WaitingForClusterOwner")]
    );
    assert!(conds[0].message.contains("spec.controlPlaneRef"));
    assert_eq!(tcp, None);
    let note = event.expect("an event the first time");
    assert_eq!(note.reason, "WaitingForClusterOwner");
    assert_eq!(note.message, conds[0].message);
    // Once the status says so, no second Event.
    k.status = Some(KamajiControlPlaneStatus {
        conditions: vec![Condition {
            type_: CREATED.into(),
            status: "False".into(),
            reason: "WaitingForClusterOwner".into(),
            ..Default::default()
        }],
        ..Default::default()
    });
    let (_, _, event) = waits(decided(&k, Found::NoClusterOwner));
    assert_eq!(event, None);
}

#[test]
fn a_missing_cluster_waits() {
    let found = Found::ClusterMissing {
        namespace: "ns".into(),
        name: "gone".into(),
    };
    let (conds, tcp, event) = waits(decided(&kcp("v1.33.0"), found));
    assert_eq!(reasons(&conds), [(CREATED, false, "ClusterNotFound")]);
    assert_eq!(
        conds[0].message,
        "the owning Cluster ns/gone does not exist"
    );
    assert_eq!((tcp, event), (None, None));
}

#[test]
fn paused_by_the_cluster_or_an_annotation_waits() {
    let mut k = kcp("v1.33.0");
    let mut c = cluster();
    assert!(!paused(&c, &k));
    c["spec"]["paused"] = json!(true);
    assert!(paused(&c, &k));
    let mut c = cluster();
    c["metadata"]["annotations"] = json!({PAUSED_ANNOTATION: ""});
    assert!(paused(&c, &k));
    k.metadata.annotations = Some([(PAUSED_ANNOTATION.to_string(), String::new())].into());
    assert!(paused(&cluster(), &k));

    let (conds, tcp, _) = waits(decided(&k, Found::Paused));
    assert_eq!(reasons(&conds), [("Paused", true, "Paused")]);
    assert!(conds[0].message.contains("reconciliation is paused"));
    assert_eq!(tcp, None);
}

#[test]
fn an_external_reference_without_the_flag_waits_and_an_unreachable_cluster_fails() {
    let k = remote(kcp("v1.33.0"));
    let (conds, _, _) = waits(decided(&k, Found::ExternalReferenceDisabled));
    assert_eq!(
        reasons(&conds),
        [
            ("Paused", false, "NotPaused"),
            (EXTERNAL, false, "FeatureDisabled")
        ]
    );
    let d = decided(&k, Found::ExternalClusterUnreachable("no Secret".into()));
    // Looked at again every 30 s: the other cluster is not watched.
    assert_eq!(d.requeue, Some(Duration::from_secs(300)));
    let Then::Fail { conds, error } = d.then else {
        panic!("expected a failure")
    };
    assert_eq!(error, "no Secret");
    assert_eq!(
        reasons(&conds),
        [("Paused", false, "NotPaused"), (EXTERNAL, false, "Failed")]
    );
    assert_eq!(conds[1].message, "no Secret");
}

#[test]
fn a_watch_behind_this_process_writes_nothing() {
    let d = decided(&kcp("v1.33.0"), Found::TcpBehind);
    assert!(matches!(d.then, Then::Nothing));
    assert_eq!(d.requeue, None);
}

#[test]
fn a_spec_out_of_bounds_waits_and_keeps_the_tcp_as_it_is() {
    let mut k = kcp("v1.33.0");
    k.spec.replicas = Some(100);
    let t = tcp("v1.33.0", "Ready");
    let (conds, read, _) = waits(decided(&k, all(Some(t.clone()))));
    assert_eq!(
        reasons(&conds),
        [
            ("Paused", false, "NotPaused"),
            (CREATED, false, "InvalidSpec")
        ]
    );
    assert!(conds[1].message.contains("spec.replicas 100"));
    assert_eq!(read, Some(t));
}

#[test]
fn a_minor_downgrade_is_refused() {
    let (conds, read, _) = waits(decided(&kcp("v1.32.0"), all(Some(tcp("v1.33.1", "Ready")))));
    assert_eq!(
        reasons(&conds),
        [
            ("Paused", false, "NotPaused"),
            (CREATED, false, "VersionRefused")
        ]
    );
    assert!(conds[1].message.contains("downgrading the minor version"));
    assert!(read.is_some());
}

#[test]
fn a_spec_kamaji_cannot_take_waits() {
    // Both an ingress and a gateway: no TenantControlPlane can be built.
    let mut k = kcp("v1.33.0");
    k.spec.fields.network = Some(Box::new(NetworkComponent {
        ingress: Some(IngressComponent {
            hostname: "in.example".into(),
            ..Default::default()
        }),
        gateway: Some(GatewayComponent {
            hostname: "gw.example".into(),
            ..Default::default()
        }),
        ..Default::default()
    }));
    let (conds, _, _) = waits(decided(&k, all(None)));
    assert_eq!(
        reasons(&conds),
        [
            ("Paused", false, "NotPaused"),
            ("VersionUpgrade", false, "UpToDate"),
            (CREATED, false, "InvalidSpec")
        ]
    );
    // Dual stack on a Kamaji whose CRD has one CIDR field only.
    let schema = json!({"properties": {"networkProfile": {"properties": {"serviceCidr": {"type": "string"}}}}});
    let setup = Setup {
        tcp_spec_schema: &schema,
        ..SETUP
    };
    let mut c = cluster();
    c["spec"]["clusterNetwork"]["services"]["cidrBlocks"] = json!(["10.96.0.0/16", "fd00::/108"]);
    let found = Found::<(), String>::All {
        cluster: c,
        place: (),
        tcp: None,
    };
    let (conds, _, _) = waits(decide(&kcp("v1.33.0"), found, &setup));
    let last = conds.last().expect("a condition");
    assert_eq!(
        (last.type_, last.reason.as_str()),
        (CREATED, "UnsupportedByInstalledKamaji")
    );
    assert!(last.message.contains("dual stack"), "{}", last.message);
}

#[test]
fn a_local_tcp_is_applied_owned_by_its_control_plane() {
    let k = kcp("1.33.0");
    let d = decided(&k, all(None));
    assert!(!d.add_finalizer);
    assert_eq!(d.requeue, None);
    let a = applies(d);
    assert_eq!(
        reasons(&a.conds),
        [
            ("Paused", false, "NotPaused"),
            ("VersionUpgrade", false, "UpToDate")
        ]
    );
    assert_eq!(a.body["apiVersion"], "kamaji.clastix.io/v1alpha1");
    assert_eq!(a.body["kind"], "TenantControlPlane");
    let meta = &a.body["metadata"];
    assert_eq!(
        (&meta["name"], &meta["namespace"]),
        (&json!("cp"), &json!("ns"))
    );
    assert_eq!(meta["labels"], json!({"team": "a"}));
    // No annotations to copy: none written (an empty map changes the object every time).
    assert!(meta.get("annotations").is_none());
    assert_eq!(meta["ownerReferences"][0]["uid"], "u-1");
    assert_eq!(meta["ownerReferences"][0]["blockOwnerDeletion"], true);
    assert_eq!(a.body["spec"]["kubernetes"]["version"], "v1.33.0");
    assert_eq!(a.cluster, cluster());
    assert_eq!(a.tcp, None);
}

#[test]
fn a_remote_tcp_is_applied_after_the_finalizer_and_looked_at_again() {
    let k = remote(kcp("v1.33.0"));
    let d = decided(&k, all(None));
    assert!(d.add_finalizer);
    assert_eq!(d.requeue, Some(Duration::from_secs(300)));
    let a = applies(d);
    assert_eq!(a.conds[1], Cond::yes(EXTERNAL, "Succeeded"));
    let meta = &a.body["metadata"];
    assert_eq!(meta["name"], "kcp-u-1");
    assert_eq!(meta["namespace"], "tenants");
    // ownerReferences do not cross clusters.
    assert!(meta.get("ownerReferences").is_none());
    // Already carrying the finalizer: not added again.
    let mut k = k;
    k.metadata.finalizers = Some(vec![ECR_FINALIZER.into()]);
    assert!(!decided(&k, all(None)).add_finalizer);
    // Without the flag nothing is looked at again.
    let setup = Setup {
        external_cluster_reference: false,
        ..SETUP
    };
    assert_eq!(
        decide(&k, Found::<(), String>::ExternalReferenceDisabled, &setup).requeue,
        None
    );
}

#[test]
fn minors_are_stepped_one_at_a_time() {
    let k = kcp("v1.35.0");
    // Ready at 1.33: the next minor is written.
    let a = applies(decided(&k, all(Some(tcp("v1.33.9", "Ready")))));
    let vu = &a.conds[1];
    assert_eq!(
        (vu.type_, vu.ok, vu.reason.as_str()),
        ("VersionUpgrade", true, "SteppingMinor")
    );
    assert!(
        vu.message
            .starts_with("upgrading v1.33.9 to v1.35.0 one minor at a time")
    );
    assert!(
        a.body["spec"]["kubernetes"]["version"]
            .as_str()
            .unwrap()
            .starts_with("v1.34.")
    );
    // Still rolling out: the current version is kept.
    let a = applies(decided(&k, all(Some(tcp("v1.33.9", "Upgrading")))));
    assert_eq!(a.conds[1].reason, "WaitingForStep");
    assert_eq!(a.body["spec"]["kubernetes"]["version"], "v1.33.9");
    // The desired version written, Kamaji not there yet.
    let a = applies(decided(&kcp("v1.33.9"), all(Some(tcp("v1.33.2", "Ready")))));
    assert_eq!(a.conds[1].reason, "RollingOut");
    assert_eq!(
        a.conds[1].message,
        "Kamaji is rolling out v1.33.9 (it reports v1.33.2, Ready)"
    );
}

#[test]
fn the_tcp_as_applied_gives_the_endpoint_and_readiness() {
    let k = kcp("v1.33.0");
    // No endpoint reported yet: the reconcile waits for Kamaji.
    let p = published(&k, &tcp("v1.33.0", "Provisioning"), false);
    assert_eq!(p.endpoint, None);
    assert_eq!(
        (p.address.type_, p.address.ok, p.address.reason.as_str()),
        ("TenantControlPlaneAddressReady", false, "WaitingForKamaji")
    );
    assert_eq!(
        reasons(&p.readiness),
        [
            ("KamajiControlPlaneIsInitialized", false, "Pending"),
            ("KamajiControlPlaneIsReady", false, "Pending"),
            ("Available", false, "NotAvailable")
        ]
    );
    assert!(p.readiness[1].message.starts_with(
        "TenantControlPlane version status is \"Provisioning\" with 0 available replica(s)"
    ));

    let mut t = tcp("v1.33.0", "Ready");
    t["status"]["controlPlaneEndpoint"] = json!("10.0.0.5:6443");
    t["status"]["kubernetesResources"]["deployment"] =
        json!({"replicas": 2, "availableReplicas": 2, "selector": "app=cp"});
    let p = published(&k, &t, false);
    assert_eq!(
        p.endpoint.as_ref().map(ToString::to_string).as_deref(),
        Some("10.0.0.5:6443")
    );
    assert_eq!(
        p.address,
        Cond::yes("TenantControlPlaneAddressReady", "Succeeded")
    );
    assert!(p.readiness.iter().all(|c| c.ok));
    assert_eq!(
        p.state,
        TcpState {
            initialized: true,
            ready: true,
            version: "v1.33.0".into(),
            replicas: Some(2),
            ready_replicas: Some(0),
            available_replicas: Some(2),
            updated_replicas: Some(0),
            unavailable_replicas: Some(0),
            selector: Some("app=cp".into()),
        }
    );
}

#[test]
fn with_no_tcp_the_state_is_the_status_as_it_was() {
    let mut k = kcp("v1.33.0");
    k.status = Some(KamajiControlPlaneStatus {
        version: "v1.32.4".into(),
        ..Default::default()
    });
    let s = TcpState::of(None, &k, true);
    assert_eq!(
        s,
        TcpState {
            initialized: true,
            version: "v1.32.4".into(),
            ..Default::default()
        }
    );
    // Initialized stays so once said, whatever the TenantControlPlane reports now.
    assert!(TcpState::of(Some(&tcp("v1.33.0", "Upgrading")), &k, true).initialized);
    assert!(!TcpState::of(Some(&tcp("v1.33.0", "Upgrading")), &k, false).initialized);
}

#[test]
fn a_failed_apply_and_the_secrets_say_how_they_went() {
    assert_eq!(tcp_created(None), Cond::yes(CREATED, "Succeeded"));
    assert_eq!(
        tcp_created(Some("denied".into())),
        Cond::no(CREATED, "Failed", "denied")
    );
    let c = "KubeadmResourcesCreated";
    assert_eq!(
        SecretsPublished::Done.condition(),
        Cond::yes(c, "Succeeded")
    );
    assert_eq!(
        SecretsPublished::Waiting("later".into()).condition(),
        Cond::no(c, "WaitingForKamaji", "later")
    );
    assert_eq!(
        SecretsPublished::Failed("no key".into()).condition(),
        Cond::no(c, "Failed", "no key")
    );
}

#[test]
fn where_the_tcp_lives() {
    let at = tcp_at(&kcp("v1.33.0"));
    assert_eq!(
        at,
        TcpAt {
            namespace: "ns".into(),
            name: "cp".into(),
            remote: false
        }
    );
    let at = tcp_at(&remote(kcp("v1.33.0")));
    assert_eq!(
        (at.namespace.as_str(), at.name.as_str(), at.remote),
        ("tenants", "kcp-u-1", true)
    );
}
