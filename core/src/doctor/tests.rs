use serde_json::{Value, json};

use super::*;
use crate::labels::{CACPPK_LEASE, RECONCILER_LEASE};

const NOW: &str = "2026-12-01T12:00:00Z";

fn now() -> jiff::Timestamp {
    NOW.parse().unwrap()
}

/// `secs` seconds before [`NOW`], RFC 3339.
fn ago(secs: i64) -> String {
    jiff::Timestamp::from_second(now().as_second() - secs)
        .unwrap()
        .to_string()
}

fn obj(kind: &str, ns: &str, name: &str) -> Value {
    json!({"kind": kind, "metadata": {"name": name, "namespace": ns, "creationTimestamp": ago(86_400)}})
}

/// The healthy fleet's worker Machine, as the server sends it.
fn worker_machine() -> Value {
    let mut m = obj("Machine", "team-a", "c1-md-0-abc");
    m["spec"] = json!({"clusterName": "c1", "version": "v1.31.2",
        "infrastructureRef": {"kind": "ByoMachine", "name": "c1-md-0-abc"}});
    m["status"] = json!({"phase": "Running"});
    m
}

fn machines<'a>(objs: impl IntoIterator<Item = &'a Value>) -> Vec<MachineFacts> {
    objs.into_iter().map(MachineFacts::of).collect()
}

fn hosts<'a>(objs: impl IntoIterator<Item = &'a Value>) -> Vec<HostFacts> {
    objs.into_iter().map(HostFacts::of).collect()
}

fn healthy() -> Fleet {
    let mut cluster = obj("Cluster", "team-a", "c1");
    cluster["spec"] = json!({"controlPlaneRef": {"apiGroup": "controlplane.cluster.x-k8s.io", "kind": "KamajiControlPlane", "name": "c1"}});
    let mut kcp = obj("KamajiControlPlane", "team-a", "c1");
    kcp["spec"] = json!({"version": "v1.31.2"});
    kcp["status"] = json!({"version": "v1.31.2"});
    let mut tcp = obj("TenantControlPlane", "team-a", "c1");
    tcp["metadata"]["ownerReferences"] = json!([{"kind": "KamajiControlPlane", "name": "c1", "apiVersion": "controlplane.cluster.x-k8s.io/v1alpha1", "uid": "u"}]);
    tcp["status"] =
        json!({"kubernetesResources": {"version": {"status": "Ready", "version": "v1.31.2"}}});
    Fleet {
        capi_served: true,
        clusters: vec![cluster],
        machines: machines(&[worker_machine()]),
        kamaji_control_planes: vec![kcp],
        tenant_control_planes: vec![tcp],
        cluster_secrets: [(("team-a".into(), "c1".into()), 1)].into(),
        certificates: vec![cert("c1", 400 * 86_400)],
        ..Fleet::default()
    }
}

fn cert(tenant: &str, left: i64) -> TenantCertificate {
    let at = now().as_second() + left;
    TenantCertificate {
        namespace: "team-a".into(),
        tenant: tenant.into(),
        secret: format!("{tenant}-api-server-certificate"),
        key: "apiserver.crt".into(),
        not_after: jiff::Timestamp::from_second(at).unwrap().to_string(),
        not_after_unix: at,
    }
}

/// Check, severity and object name of each finding.
fn rows(all: &[Problem]) -> Vec<(Check, Severity, &str)> {
    all.iter()
        .map(|x| (x.check, x.severity, x.object.name.as_str()))
        .collect()
}

fn checks(f: &Fleet) -> Vec<(Check, Severity, String)> {
    examine(f, &Thresholds::default(), &[], now())
        .into_iter()
        .map(|f| (f.check, f.severity, f.object.name))
        .collect()
}

#[test]
fn a_healthy_fleet_has_no_finding() {
    assert_eq!(checks(&healthy()), vec![]);
}

/// The set's components: `served` APIs, and Deployments for those in `deployed` (available
/// when in `available`).
fn components(served: bool, deployed: &[&str], available: &[&str]) -> Vec<ComponentState> {
    crate::init::set::COMPONENTS
        .iter()
        .map(|c| ComponentState {
            component: c,
            served,
            deployment: deployed.contains(&c.id).then(|| {
                let ready = i64::from(available.contains(&c.id));
                json!({"metadata": {"generation": 1}, "spec": {"replicas": 1},
                    "status": {"observedGeneration": 1, "replicas": 1, "updatedReplicas": 1,
                        "readyReplicas": ready, "availableReplicas": ready}})
            }),
        })
        .collect()
}

#[test]
fn components_missing_or_unavailable_are_named_with_the_init_line() {
    let capi = healthy();
    // A bare cluster: every component missing, each with the line that installs it.
    let bare = Fleet {
        capi_served: true,
        components: Some(components(false, &[], &[])),
        ..capi.clone()
    };
    let found = examine(&bare, &Thresholds::default(), &[], now());
    let missing: Vec<(&str, &str)> = found
        .iter()
        .filter(|p| p.check == Check::ComponentMissing)
        .map(|p| (p.object.name.as_str(), p.fix.as_str()))
        .collect();
    assert_eq!(
        missing.len(),
        crate::init::set::COMPONENTS.len(),
        "{missing:?}"
    );
    assert!(missing.contains(&(
        "byoh-controller-manager",
        "kubectl capi init --infrastructure byoh"
    )));
    // APIs served but no Deployments (controllers run elsewhere, as on the testbed): not judged.
    let elsewhere = Fleet {
        components: Some(components(true, &[], &[])),
        ..capi.clone()
    };
    assert_eq!(checks(&elsewhere), vec![]);
    // Installed; one controller down: named. cert-manager's API is needed by the providers.
    let deployed = ["cluster-api", "infrastructure-byoh", "control-plane-kamaji"];
    let mut some = components(true, &deployed, &["cluster-api", "control-plane-kamaji"]);
    some[0].served = false;
    let one_down = Fleet {
        components: Some(some),
        ..capi.clone()
    };
    assert_eq!(
        checks(&one_down),
        vec![
            (
                Check::ComponentMissing,
                Severity::Error,
                "cert-manager-webhook".into()
            ),
            (
                Check::ComponentUnavailable,
                Severity::Error,
                "byoh-controller-manager".into()
            ),
        ]
    );
    // Our provider without Kamaji: Kamaji is missing; Kamaji without our provider is a choice.
    let mut no_kamaji = components(true, &[], &[]);
    for s in no_kamaji.iter_mut().filter(|s| s.component.id == "kamaji") {
        s.served = false;
    }
    assert_eq!(
        checks(&Fleet {
            components: Some(no_kamaji),
            ..capi.clone()
        }),
        vec![(
            Check::ComponentMissing,
            Severity::Error,
            "kamaji-controller-manager".into()
        )]
    );
    let mut no_ours = components(true, &[], &[]);
    for s in no_ours
        .iter_mut()
        .filter(|s| s.component.id == "control-plane-kamaji")
    {
        s.served = false;
    }
    assert_eq!(
        checks(&Fleet {
            components: Some(no_ours),
            ..capi.clone()
        }),
        vec![]
    );
    // Not read (the reconciler's doctor): nothing judged.
    assert_eq!(
        checks(&Fleet {
            components: None,
            ..capi
        }),
        vec![]
    );
}

#[test]
fn no_cluster_api_is_an_error() {
    let f = Fleet::default();
    assert_eq!(
        checks(&f),
        vec![(
            Check::ClusterApiMissing,
            Severity::Error,
            "cluster.x-k8s.io".into()
        )]
    );
}

#[test]
fn certificates_expired_and_expiring_are_reported_once_per_tenant_with_the_first_to_go() {
    let mut f = healthy();
    f.certificates = vec![
        cert("c1", 20 * 86_400),
        cert("c1", 5 * 86_400),
        cert("c2", -3 * 86_400),
        cert("c3", 31 * 86_400),
    ];
    let all = examine(&f, &Thresholds::default(), &[], now());
    assert_eq!(
        rows(&all),
        vec![
            (Check::CertificateExpired, Severity::Error, "c2"),
            (Check::CertificateExpiring, Severity::Warning, "c1"),
        ]
    );
    assert!(
        all[1].cause.contains("2 certificate(s)"),
        "{}",
        all[1].cause
    );
    assert!(all[1].cause.contains("in 5 days"), "{}", all[1].cause);
    assert_eq!(
        all[0].fix,
        "kubectl kamaji certificates rotate c2 -n team-a --all=true"
    );
    // A shorter threshold leaves the 20-day one out, not the 5-day one.
    let t = Thresholds {
        cert_warn_seconds: 10 * 86_400,
        ..Thresholds::default()
    };
    let short = examine(&f, &t, &[Section::ControlPlanes], now());
    assert!(
        short[1].cause.starts_with("1 certificate(s)"),
        "{}",
        short[1].cause
    );
}

#[test]
fn a_control_plane_not_ready_counts_only_after_stuck_after() {
    let mut f = healthy();
    f.tenant_control_planes[0]["status"]["kubernetesResources"]["version"]["status"] =
        json!("Provisioning");
    assert_eq!(
        checks(&f),
        vec![(Check::ControlPlaneNotReady, Severity::Error, "c1".into())]
    );
    f.tenant_control_planes[0]["metadata"]["creationTimestamp"] = json!(ago(60));
    assert_eq!(checks(&f), vec![]);
}

/// A control plane stuck Migrating gets the command that finishes the migration.
#[test]
fn a_control_plane_stuck_migrating_is_told_to_finish_it() {
    let mut f = healthy();
    f.tenant_control_planes[0]["status"]["kubernetesResources"]["version"]["status"] =
        json!("Migrating");
    f.tenant_control_planes[0]["spec"]["dataStore"] = json!("dedicated");
    // As doctor holds it: pruned as its LIST page arrives.
    f.tenant_control_planes[0] = prune(f.tenant_control_planes[0].clone());
    let all = examine(&f, &Thresholds::default(), &[], now());
    assert_eq!(all.len(), 1, "{all:?}");
    assert_eq!(all[0].check, Check::ControlPlaneNotReady);
    assert!(
        all[0]
            .cause
            .starts_with("Migrating to DataStore dedicated (writes to the tenant are refused"),
        "{}",
        all[0].cause
    );
    assert!(
        all[0]
            .fix
            .starts_with("kubectl kamaji migrate c1 --to dedicated --wait"),
        "{}",
        all[0].fix
    );
}

#[test]
fn machines_stuck_pending_or_deleting_beyond_the_threshold() {
    let mut f = healthy();
    let mut pending = obj("Machine", "team-a", "c1-md-0-new");
    pending["metadata"]["creationTimestamp"] = json!(ago(3600));
    pending["spec"] = json!({"clusterName": "c1", "version": "v1.31.2",
        "infrastructureRef": {"apiGroup": "infrastructure.cluster.x-k8s.io", "kind": "ByoMachine", "name": "c1-md-0-new"}});
    pending["status"] = json!({"phase": "Pending"});
    let mut young = pending.clone();
    young["metadata"]["name"] = json!("c1-md-0-young");
    young["metadata"]["creationTimestamp"] = json!(ago(60));
    let mut deleting = obj("Machine", "team-a", "c1-md-0-old");
    deleting["metadata"]["deletionTimestamp"] = json!(ago(7200));
    deleting["status"] = json!({"phase": "Deleting"});
    deleting["spec"] = json!({"clusterName": "c1"});
    f.machines.extend(machines(&[pending, young, deleting]));
    let all = examine(&f, &Thresholds::default(), &[Section::Workers], now());
    let names: Vec<_> = all.iter().map(|x| x.object.name.as_str()).collect();
    assert_eq!(names, ["c1-md-0-new", "c1-md-0-old"]);
    assert!(all.iter().all(|x| x.check == Check::MachineStuck));
    assert!(
        all[0].cause.starts_with("Pending for 60m"),
        "{}",
        all[0].cause
    );
    assert!(
        all[0].fix.contains("kubectl capi hosts --available"),
        "{}",
        all[0].fix
    );
    assert_eq!(all[1].fix, "kubectl capi describe c1 -n team-a");
}

#[test]
fn workers_newer_than_the_control_plane_or_four_minors_behind_are_skew() {
    let mut f = healthy();
    let worker = |name: &str, v: &str| {
        let mut m = worker_machine();
        m["metadata"]["name"] = json!(name);
        m["spec"]["version"] = json!(v);
        m
    };
    let (newer, old, ok) = (
        worker("newer", "v1.32.0"),
        worker("old", "v1.27.9"),
        worker("ok", "v1.28.1"),
    );
    f.machines.extend(machines(&[newer, old, ok]));
    let got: Vec<_> = checks(&f).into_iter().map(|(c, _, n)| (c, n)).collect();
    assert_eq!(
        got,
        vec![
            (Check::VersionSkew, "newer".to_string()),
            (Check::VersionSkew, "old".to_string())
        ]
    );
}

#[test]
fn failed_and_releasing_hosts() {
    let mut f = healthy();
    let mut failed = obj("ByoHost", "hosts", "h1");
    failed["status"] = json!({"conditions": [{"type": "K8sNodeBootstrapSucceeded", "status": "False",
        "reason": "K8sComponentsInstallationFailed", "severity": "Error"}]});
    let mut releasing = obj("ByoHost", "hosts", "h2");
    releasing["metadata"]["labels"] = json!({"cluster.x-k8s.io/cluster-name": "gone"});
    releasing["status"] =
        json!({"machineRef": {"kind": "ByoMachine", "name": "gone-md-0-x", "namespace": "team-a"}});
    f.byo_hosts = hosts(&[failed, releasing, obj("ByoHost", "hosts", "h3")]);
    let all = examine(&f, &Thresholds::default(), &[Section::Workers], now());
    assert_eq!(
        rows(&all),
        vec![
            (Check::HostFailed, Severity::Error, "h1"),
            (Check::HostReleasing, Severity::Warning, "h2"),
        ]
    );
    assert!(
        all[0].cause.contains("K8sComponentsInstallationFailed"),
        "{}",
        all[0].cause
    );
    assert!(
        all[1]
            .fix
            .starts_with("kubectl capi hosts describe h2 -n hosts")
    );
}

/// A Warning Event as BYOH v0.5.0's agent records it through client-go's recorder
/// (`HostReconciler.reconcileNormal`, `agent/reconciler/host_reconciler.go`): `count` is how
/// many times the same Event happened, `firstTimestamp` and `lastTimestamp` the first and last.
fn agent_event(
    host: &str,
    reason: &str,
    message: &str,
    count: u64,
    first: i64,
    last: i64,
) -> Value {
    json!({"apiVersion": "v1", "kind": "Event",
           "metadata": {"name": format!("{host}.17f0a1b2c3d4e5f6"), "namespace": "hosts"},
           "involvedObject": {"kind": "ByoHost", "namespace": "hosts", "name": host,
               "apiVersion": "infrastructure.cluster.x-k8s.io/v1beta1", "uid": format!("uid-{host}")},
           "reason": reason, "message": message, "type": "Warning", "count": count,
           "source": {"component": "hostagent-controller"},
           "firstTimestamp": ago(first), "lastTimestamp": ago(last)})
}

/// A ByoHost claimed by a machine whose bootstrap failed, as the agent leaves it after each
/// try (`K8sNodeBootstrapSucceeded` False, `CloudInitExecutionFailed`, no message).
fn failing_host(name: &str) -> Value {
    let mut h = obj("ByoHost", "hosts", name);
    h["metadata"]["labels"] = json!({"cluster.x-k8s.io/cluster-name": "c1"});
    h["status"] = json!({
        "machineRef": {"kind": "ByoMachine", "name": "c1-md-0-abc", "namespace": "team-a"},
        "conditions": [{"type": "K8sNodeBootstrapSucceeded", "status": "False",
            "reason": "CloudInitExecutionFailed", "severity": "Error"}]});
    h
}

#[test]
fn host_events_keep_the_agents_failures_only() {
    let e = HostEvent::of(&agent_event(
        "h1",
        "BootstrapK8sNodeFailed",
        "k8s Node Bootstrap failed",
        7,
        600,
        20,
    ))
    .unwrap();
    assert_eq!(
        (
            e.namespace.as_str(),
            e.host.as_str(),
            e.reason.as_str(),
            e.count
        ),
        ("hosts", "h1", "BootstrapK8sNodeFailed", 7)
    );
    let now = now().as_second();
    assert_eq!(
        (e.first_unix, e.last_unix),
        (Some(now - 600), Some(now - 20))
    );
    // Other reasons, Normal Events and other kinds are not kept.
    let mut normal = agent_event(
        "h1",
        "ResetK8sNodeSucceeded",
        "k8s Node Reset completed",
        7,
        600,
        20,
    );
    normal["type"] = json!("Normal");
    assert_eq!(HostEvent::of(&normal), None);
    let mut other_kind = agent_event("h1", "BootstrapK8sNodeFailed", "", 2, 60, 1);
    other_kind["involvedObject"]["kind"] = json!("ByoMachine");
    assert_eq!(HostEvent::of(&other_kind), None);
    assert_eq!(
        HostEvent::of(&agent_event("h1", "ByoHostSelectionFailed", "", 9, 60, 1)),
        None
    );
    // An events.k8s.io-shaped Event: series and eventTime; no count reads as once.
    let series = json!({"involvedObject": {"kind": "ByoHost", "name": "h2", "namespace": "hosts"},
        "type": "Warning", "reason": "InstallScriptExecutionFailed", "eventTime": ago(300),
        "series": {"count": 4, "lastObservedTime": ago(5)}});
    let e = HostEvent::of(&series).unwrap();
    assert_eq!(
        (e.count, e.first_unix, e.last_unix),
        (4, Some(now - 300), Some(now - 5))
    );
    let mut once = series.clone();
    once.as_object_mut().unwrap().remove("series");
    assert_eq!(HostEvent::of(&once).unwrap().count, 1);
}

#[test]
fn a_host_whose_bootstrap_keeps_failing_is_named_with_its_last_error_and_the_way_out() {
    let mut f = healthy();
    f.byo_hosts = hosts(&[
        failing_host("loop"),
        failing_host("once"),
        failing_host("stale"),
    ]);
    f.host_events = [
        // One Event counted up by the recorder, and a second one after an agent restart.
        agent_event(
            "loop",
            "BootstrapK8sNodeFailed",
            "k8s Node Bootstrap failed",
            5,
            900,
            60,
        ),
        agent_event(
            "loop",
            "BootstrapK8sNodeFailed",
            "k8s Node Bootstrap failed",
            2,
            50,
            10,
        ),
        // Failed once so far: a plain failure.
        agent_event(
            "once",
            "BootstrapK8sNodeFailed",
            "k8s Node Bootstrap failed",
            1,
            30,
            30,
        ),
        // Failed often, but not for over an hour: the loop is not known to go on.
        agent_event(
            "stale",
            "BootstrapK8sNodeFailed",
            "k8s Node Bootstrap failed",
            9,
            9000,
            4000,
        ),
    ]
    .iter()
    .filter_map(HostEvent::of)
    .collect();
    let all = examine(&f, &Thresholds::default(), &[Section::Workers], now());
    assert_eq!(
        rows(&all),
        vec![
            (Check::HostFailed, Severity::Error, "once"),
            (Check::HostFailed, Severity::Error, "stale"),
            (Check::HostBootstrapLoop, Severity::Error, "loop"),
        ]
    );
    let l = &all[2];
    assert_eq!(
        l.cause,
        "its agent failed 7 times in 15m (last 10s ago: BootstrapK8sNodeFailed \"k8s Node Bootstrap failed\", condition CloudInitExecutionFailed) and resets the host and retries forever"
    );
    assert_eq!(
        l.fix,
        "kubectl capi hosts describe loop -n hosts (the failing command's output is in byoh-hostagent's log on the host); to stop it, move its machine to a spare host and cordon it: kubectl capi hosts drain loop -n hosts (kubectl capi hosts retire loop -n hosts --force if its agent is gone)"
    );
    // A host that is not failed (it bootstrapped since) is not looping, whatever its Events.
    let mut recovered = failing_host("loop");
    recovered["status"]["conditions"][0] =
        json!({"type": "K8sNodeBootstrapSucceeded", "status": "True"});
    f.byo_hosts = hosts(&[recovered]);
    f.byo_machines
        .insert(("team-a".to_string(), "c1-md-0-abc".to_string()));
    assert_eq!(
        examine(&f, &Thresholds::default(), &[Section::Workers], now()),
        vec![]
    );
}

#[test]
fn without_the_host_events_a_looping_host_is_a_failed_one_and_the_loop_check_is_not_run() {
    let mut f = healthy();
    f.byo_hosts = hosts(&[failing_host("loop")]);
    f.unread.push(refused(
        FleetRead::HostEvents,
        "list events -n hosts",
        false,
    ));
    let all = examine(&f, &Thresholds::default(), &[Section::Workers], now());
    assert_eq!(
        rows(&all),
        vec![(Check::HostFailed, Severity::Error, "loop")]
    );
    assert_eq!(
        not_checked(&f, &[]),
        vec![NotChecked {
            section: Section::Workers,
            checks: vec![Check::HostBootstrapLoop],
            missing: vec!["list events -n hosts".into()],
        }]
    );
}

#[test]
fn leftovers_tenants_without_a_kamaji_control_plane_and_secrets_without_a_cluster() {
    let mut f = healthy();
    f.tenant_control_planes
        .push(obj("TenantControlPlane", "team-a", "lone"));
    f.cluster_secrets.insert(("team-a".into(), "old".into()), 2);
    // The same cluster name in another namespace exists there only.
    f.cluster_secrets.insert(("team-b".into(), "c1".into()), 1);
    let all = examine(&f, &Thresholds::default(), &[Section::Leftovers], now());
    let got: Vec<_> = all
        .iter()
        .map(|x| (x.check, x.object.namespace.as_str(), x.object.name.as_str()))
        .collect();
    assert_eq!(
        got,
        vec![
            (Check::OrphanTenantControlPlane, "team-a", "lone"),
            (Check::OrphanSecrets, "team-a", "old"),
            (Check::OrphanSecrets, "team-b", "c1"),
        ]
    );
    assert!(all[1].cause.starts_with("2 Secret(s)"), "{}", all[1].cause);
    assert_eq!(
        all[1].fix,
        "kubectl delete secret -n team-a -l cluster.x-k8s.io/cluster-name=old"
    );
}

#[test]
fn operations_paused_clusters_and_failed_or_paused_upgrades() {
    let mut f = healthy();
    f.clusters[0]["spec"]["paused"] = json!(true);
    let mut failed = obj("ClusterUpgrade", "team-a", "c1");
    failed["spec"] = json!({"clusterName": "c1", "version": "v1.32.0"});
    failed["status"] = json!({"phase": "Failed", "message": "step 2 timed out"});
    let mut paused = obj("FleetUpgrade", "team-a", "wave");
    paused["spec"] = json!({"selector": "env=prod", "version": "v1.32.0", "paused": true});
    f.cluster_upgrades.push(failed);
    f.fleet_upgrades.push(paused);
    let all = examine(&f, &Thresholds::default(), &[Section::Operations], now());
    let got: Vec<_> = all
        .iter()
        .map(|x| (x.check, x.severity, x.fix.as_str()))
        .collect();
    assert_eq!(
        got,
        vec![
            (
                Check::UpgradeFailed,
                Severity::Error,
                "kubectl capi upgrade status c1 -n team-a"
            ),
            (
                Check::ClusterPaused,
                Severity::Info,
                "kubectl capi resume c1 -n team-a"
            ),
            (
                Check::UpgradePaused,
                Severity::Info,
                "kubectl -n team-a get fleetupgrade wave -o yaml"
            ),
        ]
    );
    assert!(all[0].cause.contains("step 2 timed out"));
}

#[test]
fn a_stopped_reconciler_and_a_second_provider_from_their_leases() {
    let lease = |name: &str, renewed_ago: i64| LeaseInfo {
        namespace: "kamaji-system".into(),
        name: name.into(),
        renewed_unix: Some(now().as_second() - renewed_ago),
        duration_seconds: 15,
    };
    let mut f = healthy();
    f.leases = vec![lease(RECONCILER_LEASE, 600)];
    assert_eq!(
        checks(&f),
        vec![(
            Check::ReconcilerStopped,
            Severity::Error,
            RECONCILER_LEASE.into()
        )]
    );
    f.leases = vec![lease(RECONCILER_LEASE, 5), lease(CACPPK_LEASE, 3)];
    assert_eq!(
        checks(&f),
        vec![(
            Check::SecondControlPlaneProvider,
            Severity::Error,
            CACPPK_LEASE.into()
        )]
    );
    // CACPPK's Lease alone (it is the provider) is no finding.
    f.leases = vec![lease(CACPPK_LEASE, 3)];
    assert_eq!(checks(&f), vec![]);
}

#[test]
fn only_keeps_the_sections_asked_for_and_counts_add_up() {
    let mut f = healthy();
    f.clusters[0]["spec"]["paused"] = json!(true);
    f.certificates.push(cert("c1", -1));
    let all = examine(&f, &Thresholds::default(), &[], now());
    assert_eq!(
        Counts::of(&all),
        Counts {
            error: 1,
            warning: 0,
            info: 1
        }
    );
    let ops = examine(&f, &Thresholds::default(), &[Section::Operations], now());
    assert_eq!(ops.len(), 1);
    assert_eq!(
        Section::parse("Control-Planes"),
        Some(Section::ControlPlanes)
    );
    assert_eq!(Section::parse("hosts"), None);
}

/// `cert` with a Secret key of its own, to tell which one a summary picked.
fn cert_key(tenant: &str, key: &str, left: i64) -> TenantCertificate {
    TenantCertificate {
        key: key.into(),
        ..cert(tenant, left)
    }
}

#[test]
fn tenant_expiries_keep_the_first_to_go_per_tenant_and_count_the_rest() {
    const DAY: i64 = 86_400;
    let mut other_ns = cert("c1", DAY);
    other_ns.namespace = "team-b".into();
    let certs = vec![
        cert_key("c2", "admin.conf", 400 * DAY),
        cert_key("c1", "apiserver.crt", 20 * DAY),
        cert_key("c1", "front-proxy-client.crt", 5 * DAY),
        cert_key("c1", "late.crt", 5 * DAY),
        cert_key("c1", "gone.crt", -DAY),
        other_ns,
    ];
    let all = tenant_expiries(&certs, 30 * DAY, now().as_second());
    let rows: Vec<(&str, &str, &str, usize, usize)> = all
        .iter()
        .map(|t| {
            let f = &t.first;
            (
                f.namespace.as_str(),
                f.tenant.as_str(),
                f.key.as_str(),
                t.expired,
                t.expiring,
            )
        })
        .collect();
    assert_eq!(
        rows,
        vec![
            ("team-a", "c1", "gone.crt", 1, 3),
            ("team-a", "c2", "admin.conf", 0, 0),
            ("team-b", "c1", "apiserver.crt", 0, 1),
        ]
    );
    // On a tie the certificate read first stays.
    let tie = tenant_expiries(&certs[2..4], 30 * DAY, now().as_second());
    assert_eq!(tie[0].first.key, "front-proxy-client.crt");
    assert_eq!(tenant_expiries(&[], 30 * DAY, 0), vec![]);
}

#[test]
fn the_certificates_condition_says_which_goes_first_when_and_the_fix() {
    const DAY: i64 = 86_400;
    let warn = 30 * DAY;
    let t = now().as_second();
    let of = |certs: &[TenantCertificate]| {
        let e = tenant_expiries(certs, warn, t);
        certificates_condition("c1", e.first(), warn, t)
    };
    let fix = "renew them: kubectl kamaji certificates rotate c1 -n team-a --all=true";

    let soon = of(&[cert("c1", 400 * DAY), cert("c1", 5 * DAY + 3600)]);
    assert_eq!((soon.status, soon.reason), (true, "Expiring"));
    assert!(
        soon.message.contains("1 certificate(s) expire within 30d")
            && soon
                .message
                .contains("apiserver.crt of Secret c1-api-server-certificate first")
            && soon.message.contains("(5 days left)")
            && soon.message.ends_with(fix),
        "{}",
        soon.message
    );

    let gone = of(&[cert("c1", 5 * DAY), cert("c1", -DAY)]);
    assert_eq!((gone.status, gone.reason), (true, "Expired"));
    assert!(
        gone.message
            .starts_with("1 certificate(s) expired, apiserver.crt")
            && gone.message.ends_with(fix),
        "{}",
        gone.message
    );

    // Not expiring: no days left in the message, so that it stays the same from day to day.
    let fine = of(&[cert("c1", 400 * DAY)]);
    assert_eq!((fine.status, fine.reason), (false, "NotExpiring"));
    assert!(
        fine.message
            .starts_with("no certificate expires within 30d")
            && !fine.message.contains("days"),
        "{}",
        fine.message
    );
    assert_eq!(
        of(&[cert("c1", 400 * DAY)]),
        certificates_condition(
            "c1",
            tenant_expiries(&[cert("c1", 400 * DAY)], warn, t + DAY).first(),
            warn,
            t + DAY
        )
    );
    // Exactly at the threshold is no longer expiring; one second earlier is.
    assert_eq!(of(&[cert("c1", warn)]).reason, "NotExpiring");
    assert_eq!(of(&[cert("c1", warn - 1)]).reason, "Expiring");

    let none = certificates_condition("c1", None, warn, t);
    assert_eq!((none.status, none.reason), (false, "NotExpiring"));
    assert!(
        none.message.contains("kamaji.clastix.io/name=c1"),
        "{}",
        none.message
    );
}

#[test]
fn pruned_objects_give_the_same_findings() {
    let mut f = healthy();
    f.clusters[0]["spec"]["paused"] = json!(true);
    f.clusters[0]["metadata"]["annotations"] =
        json!({"kubectl.kubernetes.io/last-applied-configuration": "{...}"});
    f.tenant_control_planes[0]["status"]["kubernetesResources"]["version"]["status"] =
        json!("Provisioning");
    f.tenant_control_planes[0]["status"]["kubernetesResources"]["deployment"] =
        json!({"big": "x".repeat(1000)});
    let mut m = worker_machine();
    m["metadata"]["name"] = json!("stuck");
    m["metadata"]["managedFields"] = json!([{"manager": "capi"}]);
    m["status"] = json!({"phase": "Provisioning", "addresses": [{"type": "InternalIP"}],
        "deprecated": {"v1beta1": {"conditions": [{"type": "Ready", "status": "False", "reason": "WaitingForHost", "severity": "Info"}]}}});
    // A v1beta2 Machine: seven conditions, of which the checks read Ready.
    let mut m2 = worker_machine();
    m2["metadata"]["name"] = json!("stuck2");
    m2["status"] = json!({"phase": "Provisioning", "conditions": [
        {"type": "Available", "status": "False", "reason": "NotAvailable", "lastTransitionTime": ago(60)},
        {"type": "Ready", "status": "False", "reason": "NotReady", "message": "* InfrastructureReady: no host",
         "lastTransitionTime": ago(60), "observedGeneration": 2},
        {"type": "UpToDate", "status": "True", "reason": "UpToDate"}]});
    f.machines.extend(machines(&[m, m2]));
    let mut host = obj("ByoHost", "hosts", "h1");
    host["status"] = json!({"hostinfo": {"osname": "linux"}, "conditions": [{"type": "K8sNodeBootstrapSucceeded",
        "status": "False", "reason": "CleanK8sNodeFailed", "severity": "Error"}]});
    let mut releasing = obj("ByoHost", "hosts", "h2");
    releasing["metadata"]["annotations"] =
        json!({"byoh.infrastructure.cluster.x-k8s.io/unregistering": ""});
    f.byo_hosts = hosts(&[host, releasing]);
    let mut cu = obj("ClusterUpgrade", "team-a", "c1");
    cu["spec"] = json!({"clusterName": "c1", "paused": true, "version": "v1.32.0"});
    cu["status"] = json!({"phase": "Running", "plan": [{"number": 1}]});
    f.cluster_upgrades.push(cu);
    let before = examine(&f, &Thresholds::default(), &[], now());
    assert!(before.len() >= 5, "{before:#?}");
    let prune_all = |l: &mut Vec<Value>| {
        *l = l.drain(..).map(prune).collect();
    };
    let mut p = f.clone();
    for l in [
        &mut p.clusters,
        &mut p.tenant_control_planes,
        &mut p.kamaji_control_planes,
        &mut p.cluster_upgrades,
        &mut p.fleet_upgrades,
    ] {
        prune_all(l);
    }
    assert_eq!(examine(&p, &Thresholds::default(), &[], now()), before);
    // Machines are held as facts: Ready's message in either contract, else its reason.
    assert_eq!(p.machines[1].not_ready.as_deref(), Some("WaitingForHost"));
    assert_eq!(
        p.machines[2].not_ready.as_deref(),
        Some("* InfrastructureReady: no host")
    );
    assert!(
        p.tenant_control_planes[0]["status"]["kubernetesResources"]
            .get("deployment")
            .is_none()
    );
}

#[test]
fn a_datastore_naming_a_missing_secret_or_key_is_unusable() {
    let ds = |name: &str, secret: &str| {
        json!({"metadata": {"name": name}, "spec": {"driver": "etcd", "tlsConfig": {
            "certificateAuthority": {"certificate": {"secretReference":
                {"name": secret, "namespace": "kamaji-system", "keyPath": "ca.crt"}}},
            "clientCertificate": {"certificate": {"content": "Y2VydA=="},
                                  "privateKey": {"content": "a2V5"}}}}})
    };
    let mut f = healthy();
    f.datastores = vec![ds("ok", "ca"), ds("nokey", "other"), ds("gone", "absent")];
    f.datastore_secrets = [
        (
            "kamaji-system/ca".to_string(),
            Some(vec!["ca.crt".to_string()]),
        ),
        (
            "kamaji-system/other".to_string(),
            Some(vec!["tls.crt".to_string()]),
        ),
        ("kamaji-system/absent".to_string(), None),
    ]
    .into();
    let all = examine(&f, &Thresholds::default(), &[], now());
    assert_eq!(
        rows(&all),
        vec![
            (Check::DataStoreUnusable, Severity::Error, "gone"),
            (Check::DataStoreUnusable, Severity::Error, "nokey"),
        ]
    );
    assert!(
        all[0]
            .cause
            .starts_with("Secret kamaji-system/absent does not exist")
    );
    assert!(
        all[1]
            .cause
            .starts_with("Secret kamaji-system/other has no key ca.crt")
    );
}

/// A TenantControlPlane at a version Kamaji refused a change to is an error naming
/// Kamaji's words; one at a version it accepts is not, and pruning keeps the version read.
#[test]
fn a_control_plane_at_a_version_kamaji_refuses() {
    let mut f = healthy();
    let mut newer = obj("TenantControlPlane", "team-a", "c2");
    newer["spec"] =
        json!({"kubernetes": {"version": "v1.35.0", "kubelet": {"cgroupfs": "systemd"}}});
    newer["status"] =
        json!({"kubernetesResources": {"version": {"status": "Ready", "version": "v1.35.0"}}});
    f.tenant_control_planes[0]["spec"] = json!({"kubernetes": {"version": "v1.30.2"}});
    f.tenant_control_planes.push(prune(newer));
    f.kamaji_refusals.insert(
        "v1.35.0".into(),
        "unable to upgrade to a version greater than the supported one, actually 1.30.2".into(),
    );
    let all = examine(&f, &Thresholds::default(), &[Section::ControlPlanes], now());
    assert_eq!(
        rows(&all),
        vec![(Check::VersionOutsideKamajiRange, Severity::Error, "c2")]
    );
    assert!(
        all[0].cause.contains("runs Kubernetes v1.35.0"),
        "{}",
        all[0].cause
    );
    assert!(all[0].cause.contains("actually 1.30.2"), "{}", all[0].cause);
    assert!(
        all[0]
            .fix
            .starts_with("install a Kamaji release that supports v1.35.0")
    );
}

/// An installer template no ByoMachineTemplate names is a leftover (info); one named
/// (same namespace by default, or another by an explicit namespace), or younger than
/// `--stuck-after`, is not. Pruning keeps the installerRef read.
#[test]
fn installer_templates_no_machine_template_names() {
    let mut f = healthy();
    let mut bmt = obj("ByoMachineTemplate", "team-a", "c1-md-0");
    bmt["spec"] = json!({"template": {"spec": {"installerRef": {
        "kind": "K8sInstallerConfigTemplate", "name": "c1-md-0"}}}});
    let mut other = obj("ByoMachineTemplate", "team-a", "c2-md-0");
    other["spec"] = json!({"template": {"spec": {"installerRef": {
        "kind": "K8sInstallerConfigTemplate", "name": "shared", "namespace": "installers"}}}});
    f.byo_machine_templates = vec![prune(bmt), prune(other)];
    let mut young = obj("K8sInstallerConfigTemplate", "team-a", "new");
    young["metadata"]["creationTimestamp"] = json!(ago(60));
    f.installer_templates = vec![
        obj("K8sInstallerConfigTemplate", "team-a", "c1-md-0"),
        obj("K8sInstallerConfigTemplate", "installers", "shared"),
        obj("K8sInstallerConfigTemplate", "team-a", "shared"),
        obj("K8sInstallerConfigTemplate", "team-a", "gone-md-0"),
        young,
    ];
    let all = examine(&f, &Thresholds::default(), &[Section::Leftovers], now());
    assert_eq!(
        rows(&all),
        vec![
            (Check::UnusedInstallerTemplate, Severity::Info, "gone-md-0"),
            (Check::UnusedInstallerTemplate, Severity::Info, "shared"),
        ]
    );
    assert_eq!(
        all[0].fix,
        "kubectl delete k8sinstallerconfigtemplate gone-md-0 -n team-a"
    );
    assert_eq!(all[1].object.namespace, "team-a");
}

/// A ClusterUpgrade whose running step started longer than `--stuck-after` ago is
/// stalled (a warning naming the step and its message); a younger running step, or a step
/// already done, is not. Pruning keeps the steps read.
#[test]
fn a_running_upgrade_step_older_than_stuck_after_is_stalled() {
    let mut f = healthy();
    let mut slow = obj("ClusterUpgrade", "team-a", "c1");
    slow["spec"] = json!({"clusterName": "c1", "version": "v1.33.0"});
    slow["status"] = json!({"phase": "Running", "steps": [
        {"number": 1, "phase": "Succeeded", "startedAt": ago(7200)},
        {"number": 2, "phase": "Running", "startedAt": ago(3600),
         "message": "MachineDeployment c1-md-0: 1/3 up to date"}]});
    let mut fresh = obj("ClusterUpgrade", "team-a", "c2");
    fresh["spec"] = json!({"clusterName": "c2", "version": "v1.33.0"});
    fresh["status"] = json!({"phase": "Running", "steps": [
        {"number": 1, "phase": "Running", "startedAt": ago(60)}]});
    f.cluster_upgrades = vec![prune(slow), prune(fresh)];
    let all = examine(&f, &Thresholds::default(), &[Section::Operations], now());
    assert_eq!(
        rows(&all),
        vec![(Check::UpgradeStalled, Severity::Warning, "c1")]
    );
    assert_eq!(
        all[0].cause,
        format!(
            "step 2 has been running for {}: MachineDeployment c1-md-0: 1/3 up to date",
            crate::text::age(3600)
        )
    );
    assert_eq!(all[0].fix, "kubectl capi upgrade status c1 -n team-a");
}

/// A CRD still listing an old stored version is a warning with the migration as its
/// fix; a conversion webhook that fails is an error naming the version and the message.
/// A provider whose CRDs all implement only v1beta1 is named once (info); one with a v1beta2
/// contract label on any CRD, Cluster API's own groups, and unlabelled CRDs are not.
#[test]
fn providers_of_the_v1beta1_contract_only_are_named_once() {
    let crd = |name: &str, group: &str, contracts: &[&str], provider: &str| CrdInfo {
        name: name.into(),
        group: group.into(),
        contracts: contracts.iter().map(|s| s.to_string()).collect(),
        provider: provider.into(),
        ..CrdInfo::default()
    };
    let infra = "infrastructure.cluster.x-k8s.io";
    let f = Fleet {
        crds: vec![
            crd(
                "byohosts.infrastructure.cluster.x-k8s.io",
                infra,
                &["v1beta1"],
                "infrastructure-byoh",
            ),
            crd(
                "byomachines.infrastructure.cluster.x-k8s.io",
                infra,
                &["v1beta1"],
                "infrastructure-byoh",
            ),
            crd(
                "kamajicontrolplanes.controlplane.cluster.x-k8s.io",
                "controlplane.cluster.x-k8s.io",
                &["v1beta2"],
                "control-plane-kamaji",
            ),
            crd(
                "foos.infrastructure.cluster.x-k8s.io",
                infra,
                &["v1beta1", "v1beta2"],
                "infrastructure-foo",
            ),
            crd(
                "clusters.cluster.x-k8s.io",
                "cluster.x-k8s.io",
                &["v1beta1"],
                "",
            ),
            crd(
                "bars.infrastructure.cluster.x-k8s.io",
                infra,
                &[],
                "infrastructure-bar",
            ),
        ],
        ..healthy()
    };
    assert_eq!(
        checks(&f),
        vec![(
            Check::ProviderContractV1beta1Only,
            Severity::Info,
            "infrastructure-byoh".into()
        )]
    );
}

#[test]
fn crds_with_old_stored_versions_or_a_failing_conversion() {
    let mut f = healthy();
    let crd = |name: &str, stored: &[&str]| CrdInfo {
        name: name.into(),
        group: "cluster.x-k8s.io".into(),
        storage_version: "v1beta2".into(),
        kind: String::new(),
        plural: String::new(),
        other_served: vec!["v1beta1".into()],
        stored_versions: stored.iter().map(|s| s.to_string()).collect(),
        webhook_conversion: true,
        conversion_failure: None,
        contracts: Vec::new(),
        provider: String::new(),
    };
    let mut failing = crd("machines.cluster.x-k8s.io", &["v1beta2"]);
    failing.conversion_failure = Some((
        "v1beta1".into(),
        "conversion webhook for cluster.x-k8s.io/v1beta2, Kind=Machine failed: connection refused"
            .into(),
    ));
    f.crds = vec![
        crd("clusters.cluster.x-k8s.io", &["v1beta1", "v1beta2"]),
        failing,
        crd("machinesets.cluster.x-k8s.io", &["v1beta2"]),
    ];
    let all = examine(&f, &Thresholds::default(), &[Section::Management], now());
    assert_eq!(
        rows(&all),
        vec![
            (
                Check::ConversionFailing,
                Severity::Error,
                "machines.cluster.x-k8s.io"
            ),
            (
                Check::CrdStoredVersions,
                Severity::Warning,
                "clusters.cluster.x-k8s.io"
            ),
        ]
    );
    assert!(
        all[0]
            .cause
            .starts_with("reading it at v1beta1 fails in its conversion webhook"),
        "{}",
        all[0].cause
    );
    assert!(
        all[1]
            .cause
            .starts_with("objects may still be stored at v1beta1 (it stores v1beta2 now)")
    );
    assert!(all[1].fix.ends_with(
        "kubectl patch crd clusters.cluster.x-k8s.io --subresource=status --type=merge -p '{\"status\":{\"storedVersions\":[\"v1beta2\"]}}'"
    ));
    let ours = |g: &str| CrdInfo {
        group: g.into(),
        ..CrdInfo::default()
    };
    assert!(ours("infrastructure.cluster.x-k8s.io").is_fleet_api());
    assert!(ours("kamaji.clastix.io").is_fleet_api());
    assert!(!ours("example.com").is_fleet_api());
    assert!(!ours("notcluster.x-k8s.io").is_fleet_api());
}

/// A BootstrapKubeconfig whose token expired before its host registered is a
/// warning; one whose host registered is info; a fresh one for a host still to come is none.
#[test]
fn bootstrap_kubeconfigs_no_host_needs() {
    let mut f = healthy();
    let bkc = |name: &str, age: i64| {
        let mut b = obj("BootstrapKubeconfig", "hosts", name);
        b["metadata"]["creationTimestamp"] = json!(ago(age));
        b
    };
    f.byo_hosts = hosts(&[obj("ByoHost", "hosts", "h1")]);
    f.bootstrap_kubeconfigs = vec![
        bkc("bootstrap-kubeconfig-h1", 60),
        bkc("bootstrap-kubeconfig-h2", 3 * 3600),
        bkc("bootstrap-kubeconfig-h3", 60),
    ];
    let all = examine(&f, &Thresholds::default(), &[Section::Leftovers], now());
    assert_eq!(
        rows(&all),
        vec![
            (
                Check::UnusedBootstrapKubeconfig,
                Severity::Warning,
                "bootstrap-kubeconfig-h2"
            ),
            (
                Check::UnusedBootstrapKubeconfig,
                Severity::Info,
                "bootstrap-kubeconfig-h1"
            ),
        ]
    );
    assert!(
        all[0].cause.contains("cannot register with it"),
        "{}",
        all[0].cause
    );
    assert!(
        all[0].fix.contains("kubectl capi hosts add"),
        "{}",
        all[0].fix
    );
    assert_eq!(
        all[1].fix,
        "kubectl delete bootstrapkubeconfig bootstrap-kubeconfig-h1 -n hosts"
    );
}

/// A Machine whose Node stopped reporting (Cluster API's mirror of the Node's Ready
/// Unknown), named by its BYOH host when it has one, in either contract; a Node still starting
/// or a workload cluster that cannot be reached is not a silent host.
#[test]
fn machines_whose_node_stopped_reporting_name_their_host() {
    let mut f = healthy();
    let node_ready = |reason: &str, message: &str| {
        json!({"type": "NodeReady", "status": "Unknown", "reason": reason, "message": message,
            "lastTransitionTime": ago(300)})
    };
    let silent = node_ready(
        "NodeReadyUnknown",
        "* Node.Ready: Kubelet stopped posting node status.",
    );
    // v1beta2, on a BYOH host.
    let mut on_host = worker_machine();
    on_host["metadata"]["name"] = json!("on-host");
    on_host["spec"]["providerID"] = json!("byoh://h1/x1");
    on_host["status"]["conditions"] = json!([silent.clone()]);
    // v1beta1 (its v1beta2 conditions under status.v1beta2), no host known.
    let mut elsewhere = worker_machine();
    elsewhere["metadata"]["name"] = json!("elsewhere");
    elsewhere["status"]["v1beta2"] = json!({"conditions": [silent]});
    let mut starting = worker_machine();
    starting["metadata"]["name"] = json!("starting");
    starting["status"]["conditions"] = json!([node_ready(
        "NodeReadyUnknown",
        "* Node.Ready: Condition not yet reported"
    )]);
    let mut cut_off = worker_machine();
    cut_off["metadata"]["name"] = json!("cut-off");
    cut_off["status"]["conditions"] = json!([node_ready(
        "ConnectionDown",
        "Last successful probe at 2026-12-01T11:00:00Z"
    )]);
    f.machines
        .extend(machines(&[on_host, elsewhere, starting, cut_off]));
    let mut h1 = obj("ByoHost", "hosts", "h1");
    h1["metadata"]["labels"] = json!({"cluster.x-k8s.io/cluster-name": "c1"});
    h1["status"] = json!({"machineRef": {"kind": "ByoMachine", "name": "on-host", "namespace": "team-a"},
        "conditions": [{"type": "K8sNodeBootstrapSucceeded", "status": "True"}]});
    f.byo_hosts = hosts(&[h1]);
    f.byo_machines.insert(("team-a".into(), "on-host".into()));
    let all = examine(&f, &Thresholds::default(), &[Section::Workers], now());
    assert_eq!(
        rows(&all),
        vec![
            (Check::HostUnreachable, Severity::Error, "h1"),
            (Check::HostUnreachable, Severity::Error, "elsewhere"),
        ]
    );
    assert_eq!(all[0].object.kind, "ByoHost");
    assert_eq!(
        all[0].cause,
        "the Node of Machine on-host (cluster c1) stopped reporting 5m ago: Kubelet stopped posting node status."
    );
    assert!(
        all[0]
            .fix
            .ends_with("kubectl capi hosts retire h1 -n hosts"),
        "{}",
        all[0].fix
    );
    assert_eq!(all[1].object.kind, "Machine");
    assert!(
        all[1].fix.ends_with("kubectl capi describe c1 -n team-a"),
        "{}",
        all[1].fix
    );
}

/// A DataStore with a tlsConfig and no clientCertificate stops Kamaji v1.0.0's whole
/// manager; one without tlsConfig, or with both, does not.
#[test]
fn a_datastore_that_stops_kamaji_is_an_error() {
    let mut f = healthy();
    f.datastores = vec![
        json!({"metadata": {"name": "no-client"}, "spec": {"driver": "PostgreSQL", "tlsConfig": {
            "certificateAuthority": {"certificate": {"content": "Y2E="}}}}}),
        json!({"metadata": {"name": "no-tls"}, "spec": {"driver": "MySQL"}}),
        json!({"metadata": {"name": "both"}, "spec": {"driver": "etcd", "tlsConfig": {
            "certificateAuthority": {"certificate": {"content": "Y2E="}},
            "clientCertificate": {"certificate": {"content": "Y2VydA=="}, "privateKey": {"content": "a2V5"}}}}}),
    ];
    let all = examine(&f, &Thresholds::default(), &[], now());
    assert_eq!(
        rows(&all),
        vec![(Check::DataStoreStopsKamaji, Severity::Error, "no-client")]
    );
    assert!(
        all[0].fix.starts_with("kubectl edit datastore no-client"),
        "{}",
        all[0].fix
    );
}

fn refused(input: FleetRead, missing: &str, partial: bool) -> Unread {
    Unread {
        input,
        missing: missing.into(),
        partial,
    }
}

#[test]
fn everything_read_leaves_nothing_unchecked() {
    assert_eq!(not_checked(&healthy(), &[]), vec![]);
}

#[test]
fn a_kind_refused_whole_skips_the_checks_that_need_it_and_says_so_per_section() {
    // A paused cluster whose Clusters could not be read: with an empty list the Secrets of c1
    // would read as orphaned, and the pause would be missed in silence.
    let mut f = healthy();
    f.clusters[0]["spec"]["paused"] = json!(true);
    f.clusters.clear();
    f.unread.push(refused(
        FleetRead::Clusters,
        "list clusters.cluster.x-k8s.io -A",
        false,
    ));
    assert_eq!(checks(&f), vec![]);
    let gaps = not_checked(&f, &[]);
    let lines: Vec<String> = gaps.iter().map(ToString::to_string).collect();
    assert_eq!(
        lines,
        vec![
            "workers: VersionSkew (lacks list clusters.cluster.x-k8s.io -A)",
            "leftovers: OrphanSecrets (lacks list clusters.cluster.x-k8s.io -A)",
            "operations: ClusterPaused (lacks list clusters.cluster.x-k8s.io -A)",
        ]
    );
    // --only: the other sections' gaps are not said.
    let ops = not_checked(&f, &[Section::Operations]);
    assert_eq!(
        (ops.len(), ops[0].section, ops[0].checks.clone()),
        (1, Section::Operations, vec![Check::ClusterPaused])
    );
}

#[test]
fn a_read_refused_in_part_still_runs_its_checks_on_what_was_read() {
    // Certificates read in team-a and refused in team-b: team-a's expired one is still found.
    let mut f = healthy();
    f.certificates = vec![cert("c1", -86_400)];
    f.unread.push(refused(
        FleetRead::Certificates,
        "list secrets -n team-b",
        true,
    ));
    f.unread.push(refused(
        FleetRead::KamajiRefusals,
        "patch tenantcontrolplanes.kamaji.clastix.io -n team-a",
        true,
    ));
    f.unread
        .push(refused(FleetRead::Certificates, "list secrets -A", true));
    let found = checks(&f);
    assert_eq!(found[0].0, Check::CertificateExpired, "{found:?}");
    let gaps = not_checked(&f, &[]);
    assert_eq!(gaps.len(), 1, "{gaps:?}");
    assert_eq!(
        gaps[0],
        NotChecked {
            section: Section::ControlPlanes,
            checks: vec![
                Check::CertificateExpired,
                Check::CertificateExpiring,
                Check::VersionOutsideKamajiRange
            ],
            missing: vec![
                "list secrets -A".into(),
                "list secrets -n team-b".into(),
                "patch tenantcontrolplanes.kamaji.clastix.io -n team-a".into()
            ],
        }
    );
    assert_eq!(
        serde_json::to_value(&gaps[0]).unwrap(),
        json!({"section": "control-planes",
            "checks": ["CertificateExpired", "CertificateExpiring", "VersionOutsideKamajiRange"],
            "missing": ["list secrets -A", "list secrets -n team-b",
                "patch tenantcontrolplanes.kamaji.clastix.io -n team-a"]})
    );
}

#[test]
fn unread_hosts_or_byo_machines_make_no_released_hosts_up() {
    // A claimed host whose ByoMachine was not read would look released.
    let mut f = healthy();
    let mut h = obj("ByoHost", "team-a", "h1");
    h["status"] =
        json!({"machineRef": {"kind": "ByoMachine", "name": "c1-md-0-abc", "namespace": "team-a"}});
    f.byo_hosts = hosts(&[h]);
    assert!(
        examine(&f, &Thresholds::default(), &[Section::Workers], now())
            .iter()
            .any(|p| p.check == Check::HostReleasing),
        "the test's premise: without its ByoMachine the host reads as releasing"
    );
    f.unread.push(refused(
        FleetRead::ByoMachines,
        "list byomachines.infrastructure.cluster.x-k8s.io -A",
        false,
    ));
    assert_eq!(
        examine(&f, &Thresholds::default(), &[Section::Workers], now()),
        vec![]
    );
    assert_eq!(
        not_checked(&f, &[])[0].checks,
        vec![Check::HostFailed, Check::HostReleasing]
    );
}
