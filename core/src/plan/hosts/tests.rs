use super::*;
use crate::labels::PAUSED_ANNOTATION;
use serde_json::json;

const NOW: &str = "2026-11-30T08:00:00Z";

fn now() -> jiff::Timestamp {
    NOW.parse().unwrap()
}

/// A ByoHost as the agent registers it (status.hostinfo, status.network), in `default`.
fn host(name: &str) -> Value {
    json!({
        "apiVersion": "infrastructure.cluster.x-k8s.io/v1beta1",
        "kind": "ByoHost",
        "metadata": {
            "name": name, "namespace": "default", "uid": format!("uid-{name}"),
            "creationTimestamp": "2026-11-28T08:00:00Z",
            "labels": {"role": "worker", "site": "rack-1"}
        },
        "spec": {},
        "status": {
            "conditions": [{"type": "K8sNodeBootstrapSucceeded", "status": "False",
                "reason": "WaitingForMachineRefToBeAssigned", "severity": "Info",
                "lastTransitionTime": "2026-11-28T08:00:05Z"}],
            "hostinfo": {"osname": "linux", "osimage": "Ubuntu 20.04.6 LTS", "architecture": "amd64"},
            "network": [
                {"connected": true, "ipAddrs": ["172.17.0.1/16"], "macAddr": "02:42:ac:11:00:01",
                 "networkInterfaceName": "docker0", "isDefault": false},
                {"connected": true, "ipAddrs": ["10.0.0.11/24", "fe80::1/64"], "macAddr": "52:54:00:12:34:56",
                 "networkInterfaceName": "eth0", "isDefault": true}
            ]
        }
    })
}

/// Attach a host to ByoMachine `ns/bm` of cluster `cluster`, as the ByoMachine controller does.
fn attach(mut h: Value, ns: &str, bm: &str, cluster: &str) -> Value {
    let labels = h["metadata"]["labels"].as_object_mut().unwrap();
    labels.insert(CLUSTER_NAME_LABEL.into(), json!(cluster));
    labels.insert(BYOMACHINE_NAME_LABEL.into(), json!(format!("{ns}.{bm}")));
    h["metadata"]["annotations"] = json!({
        K8S_VERSION_ANNOTATION: "v1.33.1",
        "byoh.infrastructure.cluster.x-k8s.io/endpointip": "10.0.0.100",
        "byoh.infrastructure.cluster.x-k8s.io/bundle-registry": "projects.registry.vmware.com/cluster_api_provider_bringyourownhost"
    });
    h["status"]["machineRef"] = json!({"apiVersion": "infrastructure.cluster.x-k8s.io/v1beta1",
        "kind": "ByoMachine", "namespace": ns, "name": bm, "uid": format!("uid-{bm}")});
    h
}

fn with_bootstrap_secret(mut h: Value) -> Value {
    h["spec"]["bootstrapSecret"] =
        json!({"kind": "Secret", "namespace": "team-a", "name": "c1-md-0-abcde"});
    h
}

fn set_conditions(mut h: Value, conds: Value) -> Value {
    h["status"]["conditions"] = conds;
    h
}

fn running(h: Value) -> Value {
    set_conditions(
        with_bootstrap_secret(h),
        json!([
            {"type": "K8sComponentsInstallationSucceeded", "status": "True", "lastTransitionTime": "2026-11-29T08:00:00Z"},
            {"type": "K8sNodeBootstrapSucceeded", "status": "True", "lastTransitionTime": "2026-11-29T08:05:00Z"}
        ]),
    )
}

fn byomachine(ns: &str, name: &str, machine: &str) -> Value {
    json!({
        "apiVersion": "infrastructure.cluster.x-k8s.io/v1beta1", "kind": "ByoMachine",
        "metadata": {"name": name, "namespace": ns, "labels": {CLUSTER_NAME_LABEL: "c1"},
            "ownerReferences": [{"apiVersion": "cluster.x-k8s.io/v1beta2", "kind": "Machine", "name": machine,
                "uid": "u", "controller": true, "blockOwnerDeletion": true}]},
        "spec": {"providerID": format!("byoh://{name}/abc123"), "selector": {"matchLabels": {"role": "worker"}}},
        "status": {"ready": true, "conditions": [{"type": "BYOHostReady", "status": "True"}]}
    })
}

fn machine(ns: &str, name: &str, cluster: &str, host: &str) -> Value {
    json!({
        "apiVersion": "cluster.x-k8s.io/v1beta2", "kind": "Machine",
        "metadata": {"name": name, "namespace": ns, "labels": {CLUSTER_NAME_LABEL: cluster}},
        "spec": {"clusterName": cluster, "version": "v1.33.1", "providerID": format!("byoh://{host}/abc123"),
            "bootstrap": {"configRef": {"apiGroup": "bootstrap.cluster.x-k8s.io", "kind": "KubeadmConfig", "name": name}},
            "infrastructureRef": {"apiGroup": "infrastructure.cluster.x-k8s.io", "kind": "ByoMachine", "name": format!("bm-{name}")}},
        "status": {"phase": "Running", "nodeRef": {"name": host}}
    })
}

fn cluster(ns: &str, name: &str) -> Value {
    json!({"apiVersion": "cluster.x-k8s.io/v1beta2", "kind": "Cluster", "metadata": {"name": name, "namespace": ns}})
}

#[test]
fn free_host_is_available_with_facts() {
    let hosts = vec![host("node001")];
    let inv = Inventory::build(&hosts, &[], &[], &[], Some(now()));
    let r = inv.row(&hosts[0]);
    assert_eq!(r.state, HostState::Available);
    assert_eq!(r.ip.as_deref(), Some("10.0.0.11"));
    assert_eq!(r.os.as_deref(), Some("linux"));
    assert_eq!(r.arch.as_deref(), Some("amd64"));
    assert_eq!(r.os_image.as_deref(), Some("Ubuntu 20.04.6 LTS"));
    assert_eq!(r.age_seconds, Some(2 * 86400));
    assert_eq!(crate::text::age_cell(r.age_seconds), "2d");
    assert_eq!(r.cluster, None);
    assert_eq!(r.machine, None);
    assert_eq!(
        r.reason.as_deref(),
        Some("WaitingForMachineRefToBeAssigned")
    );
    assert_eq!(r.labels.get("site").map(String::as_str), Some("rack-1"));
    assert_eq!(r.version, None);
    // The Kubernetes it carries, as its onboarding script labelled it.
    let mut h = host("node002");
    h["metadata"]["labels"]["capi-kamaji.io/kubernetes-version"] = json!("v1.35.4");
    let hosts = vec![h];
    let inv = Inventory::build(&hosts, &[], &[], &[], Some(now()));
    assert_eq!(inv.row(&hosts[0]).version.as_deref(), Some("v1.35.4"));
}

#[test]
fn running_host_joins_byomachine_machine_cluster() {
    let hosts = vec![running(attach(host("node002"), "team-a", "bm-m1", "c1"))];
    let bms = vec![byomachine("team-a", "bm-m1", "m1")];
    let ms = vec![machine("team-a", "m1", "c1", "node002")];
    let cs = vec![cluster("team-a", "c1")];
    let inv = Inventory::build(&hosts, &bms, &ms, &cs, Some(now()));
    let r = inv.row(&hosts[0]);
    assert_eq!(r.state, HostState::Running);
    assert_eq!(r.cluster.as_deref(), Some("c1"));
    assert_eq!(r.byo_machine.as_deref(), Some("team-a/bm-m1"));
    assert_eq!(r.machine.as_deref(), Some("m1"));
    assert_eq!(r.machine_phase.as_deref(), Some("Running"));
    assert_eq!(r.node.as_deref(), Some("node002"));
    assert_eq!(r.version.as_deref(), Some("v1.33.1"));
    assert_eq!(r.provider_id.as_deref(), Some("byoh://node002/abc123"));
    assert!(inv.cluster_of(&hosts[0]).is_some());
    let d = inv.diagnose(&hosts[0]);
    assert_eq!(
        d.summary,
        "running: node node002 of cluster c1 (machine m1)"
    );
    assert!(d.hints.is_empty(), "{:?}", d.hints);
}

#[test]
fn machine_found_without_owner_refs() {
    // A ByoMachine whose ownerReferences were not (yet) set: the Machine's infrastructureRef links it.
    let hosts = vec![running(attach(host("node003"), "team-a", "bm-m2", "c1"))];
    let mut bm = byomachine("team-a", "bm-m2", "m2");
    bm["metadata"]
        .as_object_mut()
        .unwrap()
        .remove("ownerReferences");
    let bms = vec![bm];
    let ms = vec![machine("team-a", "m2", "c1", "elsewhere")];
    let inv = Inventory::build(&hosts, &bms, &ms, &[], None);
    assert_eq!(inv.row(&hosts[0]).machine.as_deref(), Some("m2"));
    assert_eq!(inv.row(&hosts[0]).age_seconds, None);
}

#[test]
fn states_from_labels_annotations_conditions() {
    let claimed = attach(host("h"), "team-a", "bm-m1", "c1");
    let bms = vec![byomachine("team-a", "bm-m1", "m1")];
    let cases: Vec<(Value, HostState)> = vec![
        (host("h"), HostState::Available),
        // machineRef set, no bootstrap data yet
        (claimed.clone(), HostState::Reserved),
        // cluster label without machineRef (attach half-done)
        (
            {
                let mut h = host("h");
                h["metadata"]["labels"][CLUSTER_NAME_LABEL] = json!("c1");
                h
            },
            HostState::Reserved,
        ),
        // bootstrap data delivered, but the agent has not reported since the claim
        (with_bootstrap_secret(claimed.clone()), HostState::Reserved),
        (
            set_conditions(
                with_bootstrap_secret(claimed.clone()),
                json!([{"type": "K8sNodeBootstrapSucceeded", "status": "False", "reason": "BootstrapDataSecretUnavailable"}]),
            ),
            HostState::Provisioning,
        ),
        // stale conditions from an earlier claim do not count as progress
        (
            set_conditions(
                with_bootstrap_secret(claimed.clone()),
                json!([{"type": "K8sComponentsInstallationSucceeded", "status": "False", "reason": "K8sNodeAbsent"},
                       {"type": "K8sNodeBootstrapSucceeded", "status": "False", "reason": "K8sNodeAbsent"}]),
            ),
            HostState::Reserved,
        ),
        // --skip-installation hosts: installed by hand, bootstrapping
        (
            set_conditions(
                with_bootstrap_secret(claimed.clone()),
                json!([{"type": "K8sComponentsInstallationSucceeded", "status": "True"},
                       {"type": "K8sNodeBootstrapSucceeded", "status": "False", "reason": "K8sNodeAbsent"}]),
            ),
            HostState::Provisioning,
        ),
        (
            set_conditions(
                claimed.clone(),
                json!([{"type": "K8sComponentsInstallationSucceeded", "status": "False", "reason": "K8sInstallationSecretUnavailable"}]),
            ),
            HostState::Provisioning,
        ),
        (running(claimed.clone()), HostState::Running),
        (
            {
                let mut h = running(claimed.clone());
                h["metadata"]["annotations"][UNREGISTERING_ANNOTATION] = json!("");
                h
            },
            HostState::Releasing,
        ),
        (
            set_conditions(
                with_bootstrap_secret(claimed.clone()),
                json!([{"type": "K8sComponentsInstallationSucceeded", "status": "False", "reason": "K8sComponentsInstallationFailed",
                    "severity": "Error", "message": "dpkg: error processing package kubelet"}]),
            ),
            HostState::Failed,
        ),
        (
            set_conditions(
                with_bootstrap_secret(claimed.clone()),
                json!([{"type": "K8sNodeBootstrapSucceeded", "status": "False", "reason": "CloudInitExecutionFailed", "severity": "Error"}]),
            ),
            HostState::Failed,
        ),
        (
            set_conditions(
                claimed.clone(),
                json!([{"type": "K8sNodeBootstrapSucceeded", "status": "False", "reason": "CleanK8sDirectoriesFailed"}]),
            ),
            HostState::Failed,
        ),
        (
            {
                let mut h = running(claimed.clone());
                h["metadata"]["annotations"][PAUSED_ANNOTATION] = json!("");
                h
            },
            HostState::Paused,
        ),
        // cleaned-up host: K8sNodeAbsent and no claim
        (
            set_conditions(
                host("h"),
                json!([{"type": "K8sNodeBootstrapSucceeded", "status": "False", "reason": "K8sNodeAbsent"}]),
            ),
            HostState::Available,
        ),
    ];
    for (i, (h, want)) in cases.iter().enumerate() {
        let hosts = vec![h.clone()];
        let inv = Inventory::build(&hosts, &bms, &[], &[], None);
        assert_eq!(inv.state(h), *want, "case {i}: {h}");
    }
}

#[test]
fn host_whose_byomachine_is_gone_is_releasing() {
    let hosts = vec![running(attach(host("node009"), "team-a", "bm-gone", "c1"))];
    let bms = vec![byomachine("team-a", "bm-other", "m1")];
    let inv = Inventory::build(&hosts, &bms, &[], &[], None);
    assert_eq!(inv.state(&hosts[0]), HostState::Releasing);
    let d = inv.diagnose(&hosts[0]);
    assert!(
        d.summary.contains("team-a/bm-gone is gone"),
        "{}",
        d.summary
    );
    assert!(d.summary.ends_with("is the host agent running?"));
    assert!(
        d.hints.iter().any(|h| h == "cluster c1 no longer exists"),
        "{:?}",
        d.hints
    );
}

#[test]
fn byomachine_label_alone_links_the_host() {
    let mut h = running(host("n"));
    h["metadata"]["labels"][BYOMACHINE_NAME_LABEL] = json!("team-a.bm.with.dots");
    h["metadata"]["labels"][CLUSTER_NAME_LABEL] = json!("c1");
    let hosts = vec![h];
    let bms = vec![byomachine("team-a", "bm.with.dots", "m1")];
    let ms = vec![machine("team-a", "m1", "c1", "n")];
    let inv = Inventory::build(&hosts, &bms, &ms, &[], None);
    let r = inv.row(&hosts[0]);
    assert_eq!(r.byo_machine.as_deref(), Some("team-a/bm.with.dots"));
    assert_eq!(r.machine.as_deref(), Some("m1"));
    assert_eq!(r.state, HostState::Running);
}

#[test]
fn diagnosis_in_plain_words() {
    let claimed = attach(host("h"), "team-a", "bm-m1", "c1");
    let bms = vec![byomachine("team-a", "bm-m1", "m1")];
    let ms = vec![machine("team-a", "m1", "c1", "h")];
    let cs = vec![cluster("team-a", "c1")];
    let diag = |h: Value| {
        let hosts = vec![h];
        Inventory::build(&hosts, &bms, &ms, &cs, None).diagnose(&hosts[0])
    };
    let mut rel = running(claimed.clone());
    rel["metadata"]["annotations"][UNREGISTERING_ANNOTATION] = json!("");
    assert_eq!(
        diag(rel).summary,
        "released but the agent has not cleaned up: is the host agent running?"
    );
    let failed = set_conditions(
        with_bootstrap_secret(claimed.clone()),
        json!([{"type": "K8sComponentsInstallationSucceeded", "status": "False", "reason": "K8sComponentsInstallationFailed",
            "severity": "Error", "message": "exit status 100"}]),
    );
    assert_eq!(
        diag(failed).summary,
        "failed: install script error: exit status 100"
    );
    let cloud = set_conditions(
        claimed.clone(),
        json!([{"type": "K8sNodeBootstrapSucceeded", "status": "False", "reason": "CloudInitExecutionFailed"}]),
    );
    assert_eq!(
        diag(cloud).summary,
        "failed: bootstrap (cloud-init / kubeadm) error"
    );
    assert!(diag(claimed.clone()).summary.starts_with(
        "reserved by ByoMachine team-a/bm-m1: waiting for the machine's bootstrap data"
    ));
    assert_eq!(
        diag(with_bootstrap_secret(claimed.clone())).summary,
        "reserved by ByoMachine team-a/bm-m1, but the agent has not started on it: is the host agent running?"
    );
    assert!(diag(host("h")).summary.starts_with("available"));
    let mut paused = running(claimed.clone());
    paused["metadata"]["annotations"][PAUSED_ANNOTATION] = json!("");
    assert!(
        diag(paused)
            .summary
            .contains("cluster c1 (or its ByoMachine) is paused")
    );
    let inst = set_conditions(
        claimed.clone(),
        json!([{"type": "K8sComponentsInstallationSucceeded", "status": "False", "reason": "K8sInstallationSecretUnavailable"}]),
    );
    assert!(diag(inst).summary.contains("installation secret"));
    let mut bare = host("h");
    bare["status"] = json!({});
    assert!(
        diag(bare)
            .hints
            .iter()
            .any(|h| h.contains("never reported host facts"))
    );
}

#[test]
fn waiting_for_the_installation_secret_names_the_missing_object() {
    let waiting = set_conditions(
        with_bootstrap_secret(attach(host("h"), "team-a", "bm-m1", "c1")),
        json!([{"type": "K8sComponentsInstallationSucceeded", "status": "False", "reason": "K8sInstallationSecretUnavailable"}]),
    );
    let ms = vec![machine("team-a", "m1", "c1", "h")];
    let cs = vec![cluster("team-a", "c1")];
    let diag = |bms: Vec<Value>| {
        let hosts = vec![waiting.clone()];
        Inventory::build(&hosts, &bms, &ms, &cs, None).diagnose(&hosts[0])
    };

    // No installerRef: BYOH never makes a K8sInstallerConfig, so no secret ever comes.
    let d = diag(vec![byomachine("team-a", "bm-m1", "m1")]);
    assert_eq!(d.state, HostState::Provisioning);
    assert_eq!(
        d.summary,
        "provisioning: the agent waits for an installation secret, but ByoMachine team-a/bm-m1 has no installerRef, so BYOH makes no K8sInstallerConfig"
    );
    assert!(
        d.hints.iter().any(|h| h
            == "if the host has Kubernetes pre-installed, run its agent with --skip-installation; otherwise re-create the workers from a ByoMachineTemplate whose installerRef names a K8sInstallerConfigTemplate (kubectl kamaji create does, unless --preinstalled-hosts)"),
        "{:?}",
        d.hints
    );

    // With one: name the K8sInstallerConfig that is not ready (BYOH names it after the
    // ByoMachine, in its namespace).
    let mut bm = byomachine("team-a", "bm-m1", "m1");
    bm["spec"]["installerRef"] = json!({"apiVersion": "infrastructure.cluster.x-k8s.io/v1beta1",
        "kind": "K8sInstallerConfigTemplate", "name": "c1-md-0", "namespace": "team-a"});
    let d = diag(vec![bm]);
    assert_eq!(
        d.summary,
        "provisioning: waiting for the installation secret: K8sInstallerConfig team-a/bm-m1 (from K8sInstallerConfigTemplate team-a/c1-md-0) is not ready"
    );
    assert!(
        d.hints
            .iter()
            .any(|h| h.contains("kubectl describe k8sinstallerconfig -n team-a bm-m1")),
        "{:?}",
        d.hints
    );

    // ByoMachine listed as metadata only (no spec to read): say what is known.
    let mut meta_only = byomachine("team-a", "bm-m1", "m1");
    meta_only.as_object_mut().unwrap().remove("spec");
    meta_only.as_object_mut().unwrap().remove("status");
    let d = diag(vec![meta_only]);
    assert!(
        d.summary
            .starts_with("provisioning: waiting for the installation secret"),
        "{}",
        d.summary
    );
}

#[test]
fn pending_machines_name_the_selector() {
    let hosts = vec![
        host("a"),
        running(attach(host("b"), "team-a", "bm-1", "c1")),
        {
            let mut h = host("c");
            h["metadata"]["labels"]["role"] = json!("cp");
            h
        },
    ];
    let mut waiting = byomachine("team-a", "bm-2", "m2");
    waiting["status"] = json!({"conditions": [{"type": "BYOHostReady", "status": "False", "reason": "BYOHostsUnavailable", "severity": "Info"}]});
    waiting["spec"]["selector"] = json!({"matchLabels": {"role": "gpu"}});
    let mut waiting2 = waiting.clone();
    waiting2["metadata"]["name"] = json!("bm-3");
    waiting2["spec"]["selector"] = json!({"matchLabels": {"role": "worker"}});
    let bms = vec![byomachine("team-a", "bm-1", "m1"), waiting, waiting2];
    let inv = Inventory::build(&hosts, &bms, &[], &[], None);
    let p = inv.pending_machines(&bms);
    assert_eq!(p.len(), 2);
    assert_eq!(p[0].byo_machine, "team-a/bm-2");
    assert_eq!(p[0].matching_free_hosts, 0);
    assert_eq!(
        p[0].message,
        "no host matches selector {role=gpu}: 2 free hosts in total; add hosts or relabel the template"
    );
    assert_eq!(p[1].matching_free_hosts, 1);
}

#[test]
fn filters_and_summary() {
    let mut hosts = Vec::new();
    let mut bms = Vec::new();
    for i in 0..12 {
        hosts.push(host(&format!("free-{i}")));
    }
    for i in 0..25 {
        let bm = format!("bm-{i}");
        hosts.push(running(attach(
            host(&format!("run-{i}")),
            "team-a",
            &bm,
            if i < 20 { "c1" } else { "c2" },
        )));
        bms.push(byomachine("team-a", &bm, &format!("m-{i}")));
    }
    for i in 0..2 {
        let mut h = running(attach(
            host(&format!("rel-{i}")),
            "team-a",
            &format!("gone-{i}"),
            "c1",
        ));
        h["metadata"]["annotations"][UNREGISTERING_ANNOTATION] = json!("");
        hosts.push(h);
    }
    hosts.push(set_conditions(
        attach(host("bad"), "team-a", "bm-0", "c1"),
        json!([{"type": "K8sNodeBootstrapSucceeded", "status": "False", "reason": "CloudInitExecutionFailed"}]),
    ));
    let inv = Inventory::build(&hosts, &bms, &[], &[], None);
    let rows = inv.rows();
    let s = HostSummary::of(&rows);
    assert_eq!(
        s.to_string(),
        "40 hosts: 12 available, 25 running, 2 releasing, 1 failed"
    );
    assert_eq!(s.count(HostState::Running), 25);

    let f = HostFilter {
        cluster: Some("c2".into()),
        ..Default::default()
    };
    assert_eq!(inv.rows().iter().filter(|r| f.matches(r)).count(), 5);
    let f = HostFilter {
        available: true,
        ..Default::default()
    };
    assert_eq!(f.apply(rows.clone()).len(), 12);
    let f = HostFilter {
        states: vec![HostState::Releasing, HostState::Failed],
        ..Default::default()
    };
    assert_eq!(f.apply(rows.clone()).len(), 3);
    let f = HostFilter {
        selector: Some(
            LabelSelector::parse("role=worker,cluster.x-k8s.io/cluster-name=c1").unwrap(),
        ),
        ..Default::default()
    };
    assert_eq!(f.apply(rows.clone()).len(), 23);
    let f = HostFilter {
        namespace: Some("other".into()),
        ..Default::default()
    };
    assert!(f.apply(rows).is_empty());

    assert_eq!(HostSummary::of(&[]).to_string(), "0 hosts: 0 available");
    let one = vec![inv.row(&hosts[0])];
    assert_eq!(HostSummary::of(&one).to_string(), "1 host: 1 available");
}

#[test]
fn state_parse() {
    assert_eq!(HostState::parse("running").unwrap(), HostState::Running);
    assert_eq!(
        HostState::parse(" Releasing ").unwrap(),
        HostState::Releasing
    );
    let e = HostState::parse("busy").unwrap_err().to_string();
    assert!(e.contains("busy") && e.contains("Available"), "{e}");
}

#[test]
fn tolerates_fork_fields_and_sparse_objects() {
    // Platform9 fork: extra status fields and labels; and a host with nothing but a name.
    let mut h = running(attach(host("pf9"), "team-a", "bm-1", "c1"));
    h["status"]["lastHeartbeatTime"] = json!("2026-11-30T07:59:00Z");
    h["status"]["agentVersion"] = json!("v0.5.86");
    h["spec"]["uninstallationSecret"] = json!({"name": "x"});
    h["metadata"]["labels"]["byoh.infrastructure.cluster.x-k8s.io/os-family"] = json!("ubuntu");
    let sparse = json!({"metadata": {"name": "bare"}});
    let hosts = vec![
        h,
        sparse,
        json!({"metadata": {"name": "weird", "labels": {"x": 1}}, "status": {"network": "nope", "conditions": {}}}),
    ];
    let bms = vec![byomachine("team-a", "bm-1", "m1")];
    let inv = Inventory::build(&hosts, &bms, &[], &[], Some(now()));
    let rows = inv.rows();
    assert_eq!(rows[0].state, HostState::Running);
    assert_eq!(rows[1].state, HostState::Available);
    assert_eq!(rows[1].ip, None);
    assert_eq!(rows[1].age_seconds, None);
    assert_eq!(rows[2].state, HostState::Available);
    assert!(rows[2].labels.is_empty());
}

#[test]
fn interfaces_and_default_ip() {
    let h = host("n");
    let ifs = interfaces(&h);
    assert_eq!(ifs.len(), 2);
    assert!(ifs[1].is_default && ifs[1].connected);
    assert_eq!(ifs[1].addresses, vec!["10.0.0.11/24", "fe80::1/64"]);
    let mut nodefault = host("n");
    nodefault["status"]["network"] = json!([{"networkInterfaceName": "lo", "ipAddrs": []}, {"networkInterfaceName": "eth1", "ipAddrs": ["192.168.1.5/24"]}]);
    assert_eq!(default_ip(&nodefault).as_deref(), Some("192.168.1.5"));
    assert_eq!(
        host_from_provider_id("byoh://node005/gije0o"),
        Some("node005")
    );
    assert_eq!(host_from_provider_id("openstack:///abc"), None);
}

#[test]
fn five_thousand_hosts_join_in_linear_time() {
    // Correctness at scale (speed itself is measured by `make bench`, not asserted here).
    let n = 5000;
    let mut hosts = Vec::with_capacity(n);
    let mut bms = Vec::with_capacity(n);
    let mut ms = Vec::with_capacity(n);
    for i in 0..n {
        let hn = format!("node{i:05}");
        if i % 2 == 0 {
            let bm = format!("bm-{i}");
            hosts.push(running(attach(host(&hn), "team-a", &bm, "big")));
            bms.push(byomachine("team-a", &bm, &format!("m-{i}")));
            ms.push(machine("team-a", &format!("m-{i}"), "big", &hn));
        } else {
            hosts.push(host(&hn));
        }
    }
    let cs = vec![cluster("team-a", "big")];
    let inv = Inventory::build(&hosts, &bms, &ms, &cs, Some(now()));
    let rows = inv.rows();
    assert_eq!(rows.len(), n);
    assert_eq!(rows[4998].machine.as_deref(), Some("m-4998"));
    assert_eq!(
        HostSummary::of(&rows).to_string(),
        "5000 hosts: 2500 available, 2500 running"
    );
}

#[test]
fn the_pool_counts_free_matching_hosts_and_those_already_serving_the_cluster() {
    let host = |name: &str, labels: Value, claimed_by: Option<&str>| {
        let mut h = json!({"metadata": {"name": name, "namespace": "hosts", "labels": labels}});
        if let Some(c) = claimed_by {
            h["metadata"]["labels"]["cluster.x-k8s.io/cluster-name"] = json!(c);
            h["status"] = json!({"machineRef": {"kind": "ByoMachine", "name": format!("{c}-x"), "namespace": "team-a"}});
        }
        h
    };
    let hosts = vec![
        host("h1", json!({"site": "ams"}), None),
        host("h2", json!({"site": "fra"}), None),
        host("h3", json!({"site": "ams"}), Some("c1")),
        host("h4", json!({"site": "ams"}), Some("other")),
    ];
    let ams = BTreeMap::from([("site".to_string(), "ams".to_string())]);
    let p = PoolCheck::of(&hosts, "team-a", "c1", &ams, None, 3);
    assert_eq!((p.serving, p.free, p.missing()), (1, 1, 1));
    // No selector: every free host matches.
    let p = PoolCheck::of(&hosts, "team-a", "c1", &BTreeMap::new(), None, 3);
    assert_eq!((p.serving, p.free, p.missing()), (1, 2, 0));
    // The same name in another namespace is another cluster.
    let p = PoolCheck::of(&hosts, "team-b", "c1", &ams, None, 1);
    assert_eq!((p.serving, p.free, p.missing()), (0, 1, 0));
    // Workers on the hosts' own Kubernetes: a free host of another minor does not count.
    let mut hosts = hosts;
    hosts[0]["metadata"]["labels"]["capi-kamaji.io/kubernetes-version"] = json!("v1.35.4");
    let v136 = crate::version::KubeVersion::parse_v("v1.36.3").unwrap();
    let p = PoolCheck::of(&hosts, "team-a", "c1", &ams, Some(&v136), 2);
    assert_eq!((p.serving, p.free, p.missing()), (1, 0, 1));
    assert_eq!(p.misfits, "h1 (v1.35.4)");
    let v135 = crate::version::KubeVersion::parse_v("v1.35.0").unwrap();
    let p = PoolCheck::of(&hosts, "team-a", "c1", &ams, Some(&v135), 2);
    assert_eq!((p.free, p.missing(), p.misfits.as_str()), (1, 0, ""));
}

/// A host reporting `addrs` on one interface, with `labels`.
fn on_network(name: &str, labels: Value, addrs: Value) -> Value {
    json!({"metadata": {"name": name, "namespace": "hosts", "labels": labels},
           "status": {"network": [{"networkInterfaceName": "eth0", "ipAddrs": addrs}]}})
}

#[test]
fn an_address_is_inside_a_network_a_host_reports_or_outside_all_of_them() {
    // The fixture's hosts report docker0 172.17.0.1/16 and eth0 10.0.0.11/24, fe80::1/64.
    let hosts = [host("h1"), host("h2")];
    assert_eq!(
        address_fit("10.0.0.200", &hosts),
        AddressFit::Inside("10.0.0.11/24".into())
    );
    assert_eq!(
        address_fit("172.17.200.9", &hosts),
        AddressFit::Inside("172.17.0.1/16".into())
    );
    // Outside: the networks seen, each once, IPv4 first, as networks.
    assert_eq!(
        address_fit("10.0.1.5", &hosts),
        AddressFit::Outside(vec![
            "10.0.0.0/24".into(),
            "172.17.0.0/16".into(),
            "fe80::/64".into()
        ])
    );
    // The network's own bounds.
    assert!(matches!(
        address_fit("10.0.0.0", &hosts),
        AddressFit::Inside(_)
    ));
    assert!(matches!(
        address_fit("10.0.0.255", &hosts),
        AddressFit::Inside(_)
    ));
    assert!(matches!(
        address_fit("10.0.1.0", &hosts),
        AddressFit::Outside(_)
    ));
}

#[test]
fn ipv6_addresses_are_judged_against_ipv6_networks() {
    let hosts = [on_network(
        "v6",
        json!({}),
        json!(["2001:db8:1::10/64", "192.168.7.2/24"]),
    )];
    assert_eq!(
        address_fit("2001:db8:1::ffff", &hosts),
        AddressFit::Inside("2001:db8:1::10/64".into())
    );
    assert_eq!(
        address_fit("2001:db8:2::1", &hosts),
        AddressFit::Outside(vec!["192.168.7.0/24".into(), "2001:db8:1::/64".into()])
    );
    // An IPv4 address is not in an IPv6 network, nor the other way round.
    assert!(matches!(
        address_fit("192.168.8.1", &hosts),
        AddressFit::Outside(_)
    ));
    assert!(matches!(
        address_fit("::ffff:192.168.7.9", &hosts),
        AddressFit::Outside(_)
    ));
}

#[test]
fn malformed_ip_addrs_are_skipped_and_no_network_judges_nothing() {
    // A bare address, garbage, a prefix too long, a non-string: skipped, not fatal; the good
    // entry still decides.
    let odd = on_network(
        "odd",
        json!({}),
        json!([
            "10.9.9.9",
            "not-an-ip/24",
            "10.1.0.1/33",
            7,
            "",
            "10.2.0.1/16"
        ]),
    );
    assert_eq!(
        address_fit("10.2.3.4", [&odd]),
        AddressFit::Inside("10.2.0.1/16".into())
    );
    assert_eq!(
        address_fit("10.9.9.9", [&odd]),
        AddressFit::Outside(vec!["10.2.0.0/16".into()])
    );
    // Nothing usable reported, or nothing at all: no verdict.
    let bad = on_network("bad", json!({}), json!(["10.9.9.9", "x"]));
    let none = json!({"metadata": {"name": "none"}});
    let wrong_shape = json!({"metadata": {"name": "w"}, "status": {"network": "eth0"}});
    assert_eq!(
        address_fit("10.9.9.9", [&bad, &none, &wrong_shape]),
        AddressFit::Unknown
    );
    assert_eq!(address_fit("10.9.9.9", []), AddressFit::Unknown);
    // An address that is not an IP (a name) is not judged.
    assert_eq!(address_fit("api.example.com", [&odd]), AddressFit::Unknown);
}

#[test]
fn a_refusal_names_eight_networks_and_counts_the_rest() {
    let nets: Vec<String> = (0..11).map(|i| format!("10.{i}.0.0/16")).collect();
    assert_eq!(named_networks(&nets[..2]), "10.0.0.0/16, 10.1.0.0/16");
    assert_eq!(
        named_networks(&nets),
        "10.0.0.0/16, 10.1.0.0/16, 10.2.0.0/16, 10.3.0.0/16, 10.4.0.0/16, 10.5.0.0/16, 10.6.0.0/16, 10.7.0.0/16 and 3 more"
    );
}

#[test]
fn the_pool_of_a_cluster_is_its_hosts_and_the_free_ones_selected() {
    let nets = |n: &str| json!([format!("{n}/24")]);
    let mut serving = on_network("serving", json!({"site": "fra"}), nets("10.3.0.1"));
    serving["metadata"]["labels"][CLUSTER_NAME_LABEL] = json!("c1");
    serving["status"]["machineRef"] =
        json!({"kind": "ByoMachine", "name": "c1-x", "namespace": "team-a"});
    let mut other = on_network("other", json!({"site": "ams"}), nets("10.4.0.1"));
    other["metadata"]["labels"][CLUSTER_NAME_LABEL] = json!("c2");
    other["status"]["machineRef"] =
        json!({"kind": "ByoMachine", "name": "c2-x", "namespace": "team-a"});
    let hosts = vec![
        on_network("ams", json!({"site": "ams"}), nets("10.1.0.1")),
        on_network("fra", json!({"site": "fra"}), nets("10.2.0.1")),
        serving,
        other,
    ];
    fn names(v: Vec<&Value>) -> Vec<&str> {
        v.into_iter().map(json::name).collect()
    }
    let ams = |h: &Value| json::label(h, "site") == Some("ams");
    assert_eq!(
        names(pool_hosts(&hosts, "team-a", "c1", ams)),
        ["ams", "serving"]
    );
    assert_eq!(
        address_fit("10.4.0.9", pool_hosts(&hosts, "team-a", "c1", ams)),
        AddressFit::Outside(vec!["10.1.0.0/24".into(), "10.3.0.0/24".into()])
    );

    // A rendered template: its ByoMachineTemplates' selectors pick; one without picks any.
    let template = |sel: Value| {
        json!({"apiVersion": "infrastructure.cluster.x-k8s.io/v1beta1", "kind": "ByoMachineTemplate",
               "metadata": {"name": "t"}, "spec": {"template": {"spec": {"selector": sel}}}})
    };
    let cluster = json!({"apiVersion": "cluster.x-k8s.io/v1beta2", "kind": "Cluster", "metadata": {"name": "c1"}});
    let pool = |objects: &[Value]| template_pool(objects, &hosts, "team-a", "c1").map(names);
    assert_eq!(pool(std::slice::from_ref(&cluster)), None);
    assert_eq!(
        pool(&[
            cluster.clone(),
            template(json!({"matchLabels": {"site": "fra"}}))
        ]),
        Some(vec!["fra", "serving"])
    );
    assert_eq!(
        pool(&[
            template(
                json!({"matchExpressions": [{"key": "site", "operator": "In", "values": ["ams"]}]})
            ),
            template(json!({"matchLabels": {"site": "fra"}}))
        ]),
        Some(vec!["ams", "fra", "serving"])
    );
    assert_eq!(
        pool(&[template(Value::Null)]),
        Some(vec!["ams", "fra", "serving"])
    );
    // A selector BYOH cannot parse picks nothing: only the hosts already serving it.
    assert_eq!(
        pool(&[template(
            json!({"matchExpressions": [{"key": "site", "operator": "Near"}]})
        )]),
        Some(vec!["serving"])
    );
    // Another provider's kind of the same name is not BYOH's.
    let mut foreign = template(Value::Null);
    foreign["apiVersion"] = json!("infrastructure.example.com/v1");
    assert_eq!(pool(&[foreign]), None);
}

/// The `hosts` list's join over links ([`RowJoin`]) makes the rows the inventory makes of
/// whole objects: every way a host finds its Machine (owner, infrastructureRef, providerID),
/// a ByoMachine gone, a Node that stopped reporting, a host claimed by label only, free hosts.
#[test]
fn rows_from_links_are_the_inventorys_rows() {
    let mut hosts = vec![
        host("free"),
        running(attach(host("owned"), "team-a", "bm-1", "c1")),
        running(attach(host("by-infra"), "team-a", "bm-m2", "c1")),
        running(attach(host("gone"), "team-a", "bm-gone", "c1")),
        running(attach(host("silent"), "team-a", "bm-3", "c1")),
        attach(host("reserved"), "team-b", "bm-4", "c2"),
    ];
    let mut by_label = running(host("by-label"));
    by_label["metadata"]["labels"][CLUSTER_NAME_LABEL] = json!("c1");
    hosts.push(by_label);
    let mut no_owner = byomachine("team-a", "bm-m2", "m2");
    no_owner["metadata"]
        .as_object_mut()
        .unwrap()
        .remove("ownerReferences");
    let bms = vec![
        byomachine("team-a", "bm-1", "m1"),
        no_owner,
        byomachine("team-a", "bm-3", "m3"),
        byomachine("team-b", "bm-4", "m4"),
    ];
    let mut m3 = machine("team-a", "m3", "c1", "silent");
    m3["status"]["conditions"] = json!([{"type": "NodeReady", "status": "Unknown",
        "reason": "NodeReadyUnknown", "message": "* Node.Ready: Kubelet stopped posting node status.",
        "lastTransitionTime": "2026-11-29T08:00:00Z"}]);
    let mut m5 = machine("team-a", "m5", "c1", "by-label");
    m5["spec"]["infrastructureRef"]["name"] = json!("bm-other");
    let ms = vec![
        machine("team-a", "m1", "c1", "owned"),
        machine("team-a", "m2", "c1", "elsewhere"),
        m3,
        machine("team-b", "m4", "c2", "reserved"),
        m5,
    ];
    let inv = Inventory::build(&hosts, &bms, &ms, &[], Some(now()));
    let bm_links: Vec<ByoMachineLink> = bms.iter().map(ByoMachineLink::of).collect();
    let m_links: Vec<MachineLink> = ms.iter().map(MachineLink::of).collect();
    let join = RowJoin::build(&bm_links, &m_links, Some(now()));
    let rows: Vec<HostRow> = hosts.iter().map(|h| join.row(HostPart::of(h))).collect();
    assert_eq!(rows, inv.rows());
    let states: Vec<(&str, HostState, Option<&str>)> = rows
        .iter()
        .map(|r| (r.name.as_str(), r.state, r.machine.as_deref()))
        .collect();
    assert_eq!(
        states,
        [
            ("free", HostState::Available, None),
            ("owned", HostState::Running, Some("m1")),
            ("by-infra", HostState::Running, Some("m2")),
            ("gone", HostState::Releasing, None),
            ("silent", HostState::Unreachable, Some("m3")),
            ("reserved", HostState::Reserved, Some("m4")),
            ("by-label", HostState::Running, Some("m5")),
        ]
    );
    assert_eq!(rows[1].provider_id.as_deref(), Some("byoh://owned/abc123"));
    assert_eq!(rows[1].age_seconds, Some(2 * 86_400));
}
