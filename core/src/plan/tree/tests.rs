use super::builder::is_cp_machine;
use super::*;
use serde_json::json;

const NOW: &str = "2026-11-30T08:00:00Z";

fn now() -> jiff::Timestamp {
    NOW.parse().unwrap()
}

fn cond(t: &str, status: &str, reason: &str) -> Value {
    json!({"type": t, "status": status, "reason": reason, "lastTransitionTime": "2026-11-30T07:00:00Z", "observedGeneration": 1})
}

fn good() -> Value {
    json!([
        cond("Available", "True", "Available"),
        cond("Ready", "True", "Ready"),
        cond("UpToDate", "True", "UpToDate"),
        cond("Deleting", "False", "NotDeleting"),
        cond("Paused", "False", "NotPaused")
    ])
}

fn cluster() -> Value {
    json!({"apiVersion": "cluster.x-k8s.io/v1beta2", "kind": "Cluster", "metadata": {"name": "c1", "namespace": "team-a"},
        "spec": {"controlPlaneRef": {"apiGroup": "controlplane.cluster.x-k8s.io", "kind": "KubeadmControlPlane", "name": "c1-cp"},
                 "infrastructureRef": {"apiGroup": "infrastructure.cluster.x-k8s.io", "kind": "ByoCluster", "name": "c1"}},
        "status": {"conditions": [cond("Available", "True", "Available"), cond("RollingOut", "True", "RollingOut"), cond("Paused", "False", "NotPaused")],
            "controlPlane": {"desiredReplicas": 3, "replicas": 3, "readyReplicas": 3, "availableReplicas": 3, "upToDateReplicas": 3},
            "workers": {"desiredReplicas": 3, "replicas": 3, "readyReplicas": 2, "availableReplicas": 2, "upToDateReplicas": 3}}})
}

fn byo_cluster() -> Value {
    json!({"apiVersion": "infrastructure.cluster.x-k8s.io/v1beta1", "kind": "ByoCluster", "metadata": {"name": "c1", "namespace": "team-a"},
        "status": {"ready": true, "conditions": [{"type": "Ready", "status": "True", "lastTransitionTime": "2026-11-30T06:00:00Z"}]}})
}

fn kcp() -> Value {
    json!({"apiVersion": "controlplane.cluster.x-k8s.io/v1beta2", "kind": "KubeadmControlPlane", "metadata": {"name": "c1-cp", "namespace": "team-a"},
        "spec": {"replicas": 3, "version": "v1.33.1"},
        "status": {"replicas": 3, "readyReplicas": 3, "availableReplicas": 3, "upToDateReplicas": 3, "version": "v1.33.1",
            "conditions": [cond("Available", "True", "Available")]}})
}

fn machine(name: &str, cp: bool, owner: Option<(&str, &str)>, conds: Value, host: &str) -> Value {
    let mut labels = json!({"cluster.x-k8s.io/cluster-name": "c1"});
    if cp {
        labels["cluster.x-k8s.io/control-plane"] = json!("");
        labels["cluster.x-k8s.io/control-plane-name"] = json!("c1-cp");
    }
    let mut m = json!({"apiVersion": "cluster.x-k8s.io/v1beta2", "kind": "Machine",
        "metadata": {"name": name, "namespace": "team-a", "labels": labels},
        "spec": {"clusterName": "c1", "version": "v1.33.1", "providerID": format!("byoh://{host}/x1y2z3"),
            "bootstrap": {"configRef": {"apiGroup": "bootstrap.cluster.x-k8s.io", "kind": "KubeadmConfig", "name": name}},
            "infrastructureRef": {"apiGroup": "infrastructure.cluster.x-k8s.io", "kind": "ByoMachine", "name": name}},
        "status": {"phase": "Running", "conditions": conds, "nodeRef": {"name": host}}});
    if let Some((k, n)) = owner {
        m["metadata"]["ownerReferences"] = json!([{"apiVersion": "cluster.x-k8s.io/v1beta2", "kind": k, "name": n, "uid": "u", "controller": true}]);
    }
    m
}

fn md(name: &str) -> Value {
    json!({"apiVersion": "cluster.x-k8s.io/v1beta2", "kind": "MachineDeployment", "metadata": {"name": name, "namespace": "team-a"},
        "spec": {"replicas": 3, "template": {"spec": {"version": "v1.33.1"}}},
        "status": {"replicas": 3, "readyReplicas": 2, "availableReplicas": 2, "upToDateReplicas": 3,
            "conditions": [cond("Available", "True", "Available")]}})
}

fn ms(name: &str, md: &str) -> Value {
    json!({"apiVersion": "cluster.x-k8s.io/v1beta2", "kind": "MachineSet",
        "metadata": {"name": name, "namespace": "team-a", "ownerReferences": [{"kind": "MachineDeployment", "name": md, "controller": true, "uid": "u"}]},
        "spec": {"replicas": 3, "template": {"spec": {"version": "v1.33.1"}}}, "status": {"replicas": 3, "readyReplicas": 2}})
}

fn byo_machine(name: &str, ready: bool) -> Value {
    let c = if ready {
        json!([{"type": "Ready", "status": "True"}, {"type": "BYOHostReady", "status": "True"}])
    } else {
        json!([{"type": "Ready", "status": "False", "reason": "BYOHostsUnavailable", "severity": "Info"},
               {"type": "BYOHostReady", "status": "False", "reason": "BYOHostsUnavailable", "severity": "Info"}])
    };
    json!({"apiVersion": "infrastructure.cluster.x-k8s.io/v1beta1", "kind": "ByoMachine", "metadata": {"name": name, "namespace": "team-a"},
        "spec": {}, "status": {"conditions": c}})
}

struct Fixture {
    cluster: Value,
    infra: Value,
    cp: Value,
    machines: Vec<Value>,
    /// `machines` as the tree reads them, made at the first `input` (after a test's edits).
    rows: std::cell::OnceCell<Vec<TreeMachine>>,
    mds: Vec<Value>,
    sets: Vec<Value>,
    infra_machines: Vec<Value>,
}

fn fixture() -> Fixture {
    let not_ready = json!([
        cond("Available", "False", "NotAvailable"),
        cond("Ready", "False", "NotReady"),
        cond("UpToDate", "True", "UpToDate")
    ]);
    let machines = vec![
        machine(
            "c1-cp-a",
            true,
            Some(("KubeadmControlPlane", "c1-cp")),
            good(),
            "node001",
        ),
        machine(
            "c1-cp-b",
            true,
            Some(("KubeadmControlPlane", "c1-cp")),
            good(),
            "node002",
        ),
        machine(
            "c1-cp-c",
            true,
            Some(("KubeadmControlPlane", "c1-cp")),
            good(),
            "node003",
        ),
        machine(
            "c1-md-0-x-1",
            false,
            Some(("MachineSet", "c1-md-0-x")),
            good(),
            "node004",
        ),
        machine(
            "c1-md-0-x-2",
            false,
            Some(("MachineSet", "c1-md-0-x")),
            good(),
            "node005",
        ),
        machine(
            "c1-md-0-x-3",
            false,
            Some(("MachineSet", "c1-md-0-x")),
            not_ready,
            "node006",
        ),
        machine("stray", false, None, good(), "node007"),
    ];
    let infra_machines = vec![
        byo_machine("c1-md-0-x-3", false),
        byo_machine("c1-cp-a", true),
    ];
    Fixture {
        cluster: cluster(),
        infra: byo_cluster(),
        cp: kcp(),
        machines,
        rows: Default::default(),
        mds: vec![md("c1-md-0")],
        sets: vec![ms("c1-md-0-x", "c1-md-0")],
        infra_machines,
    }
}

/// Machines as the tree reads them, whole.
fn rows(machines: &[Value]) -> Vec<TreeMachine> {
    machines.iter().map(TreeMachine::of).collect()
}

fn input(f: &Fixture) -> TreeInput<'_> {
    TreeInput {
        cluster: &f.cluster,
        infrastructure_cluster: Some(&f.infra),
        control_plane: Some(&f.cp),
        machines: f.rows.get_or_init(|| rows(&f.machines)),
        machine_deployments: &f.mds,
        machine_sets: &f.sets,
        machine_pools: &[],
        infrastructure_machines: &f.infra_machines,
        bootstrap_configs: &[],
        byo_hosts: &[],
        templates: &[],
        resource_sets: &[],
        now: Some(now()),
    }
}

fn names(t: &ObjectTree) -> Vec<String> {
    t.walk()
        .iter()
        .map(|(d, n)| format!("{}{}", "  ".repeat(*d), n.display_name))
        .collect()
}

#[test]
fn clusterctl_shape_with_grouping() {
    let f = fixture();
    let t = build_tree(input(&f), &TreeOptions::default()).unwrap();
    assert_eq!(
        names(&t),
        [
            "Cluster team-a/c1",
            "  ByoCluster team-a/c1",
            "  KubeadmControlPlane team-a/c1-cp, v1.33.1",
            "    3 Machines...",
            "  Workers",
            "    MachineDeployment team-a/c1-md-0, v1.33.1",
            "      2 Machines...",
            "      Machine team-a/c1-md-0-x-3, v1.33.1",
            "        ByoMachine team-a/c1-md-0-x-3",
            "    Other",
            "      Machine team-a/stray, v1.33.1",
        ]
    );
    let root = &t.root;
    assert_eq!(root.counters.as_ref().unwrap().replicas_cell(), "6/6");
    assert_eq!(root.counters.as_ref().unwrap().ready, Some(5));
    assert_eq!(root.status.as_ref().unwrap().condition.type_, "Available");
    assert_eq!(
        root.children[0].meta_name.as_deref(),
        Some("ClusterInfrastructure")
    );
    let cp = &root.children[1];
    assert_eq!(cp.meta_name.as_deref(), Some("ControlPlane"));
    assert_eq!(cp.counters.as_ref().unwrap().replicas_cell(), "3/3");
    let g = &cp.children[0];
    assert!(g.virtual_node);
    assert_eq!(g.kind, "MachineGroup");
    assert_eq!(g.message.as_deref(), Some("See c1-cp-a, c1-cp-b, ..."));
    let gi = g.group.as_ref().unwrap();
    assert_eq!(gi.items, ["c1-cp-a", "c1-cp-b", "c1-cp-c"]);
    assert_eq!(gi.hosts, ["node001", "node002", "node003"]);
    assert_eq!(g.counters.as_ref().unwrap().ready, Some(3));
    assert_eq!(g.status.as_ref().unwrap().condition.type_, "Ready");
    assert_eq!(g.status.as_ref().unwrap().condition.message, None);
    assert_eq!(g.status.as_ref().unwrap().since_seconds, Some(3600));
    // the lone not-ready worker shows its ByoMachine (its Ready differs); the host comes from the providerID
    let w = &root.children[2].children[0].children[1];
    assert_eq!(w.host.as_deref(), Some("node006"));
    assert_eq!(
        w.counters.as_ref().unwrap(),
        &Counters {
            current: Some(1),
            desired: None,
            available: Some(0),
            ready: Some(0),
            up_to_date: Some(1)
        }
    );
    assert_eq!(
        w.children[0].meta_name.as_deref(),
        Some("MachineInfrastructure")
    );
    assert_eq!(
        w.children[0]
            .status
            .as_ref()
            .unwrap()
            .condition
            .reason
            .as_deref(),
        Some("BYOHostsUnavailable")
    );
    // the Other node sits inside Workers, and is not grouped
    assert_eq!(root.children[2].children[1].kind, "OtherGroup");
}

#[test]
fn grouping_off_and_echo() {
    let f = fixture();
    let opts = TreeOptions {
        grouping: false,
        echo: true,
        ..Default::default()
    };
    let t = build_tree(input(&f), &opts).unwrap();
    let cp = &t.root.children[1];
    assert_eq!(cp.children.len(), 3);
    assert!(cp.children.iter().all(|c| c.kind == "Machine"));
    // echo shows the Ready ByoMachine of c1-cp-a too
    assert_eq!(cp.children[0].children.len(), 1);
    assert_eq!(cp.children[0].children[0].kind, "ByoMachine");
    assert_eq!(cp.children[0].host.as_deref(), Some("node001"));
    // without echo it is hidden
    let t = build_tree(
        input(&f),
        &TreeOptions {
            grouping: false,
            ..Default::default()
        },
    )
    .unwrap();
    assert!(t.root.children[1].children[0].children.is_empty());
}

#[test]
fn show_machinesets() {
    let f = fixture();
    let t = build_tree(
        input(&f),
        &TreeOptions {
            show_machinesets: true,
            ..Default::default()
        },
    )
    .unwrap();
    let md = &t.root.children[2].children[0];
    assert_eq!(md.children.len(), 1);
    let set = &md.children[0];
    assert_eq!(set.display_name, "MachineSet team-a/c1-md-0-x, v1.33.1");
    assert!(set.status.is_none());
    assert_eq!(set.children.len(), 2); // a group of 2 and the odd one
}

#[test]
fn show_conditions_filters() {
    let f = fixture();
    let opts = TreeOptions {
        show_conditions: "Cluster+,KubeadmControlPlane/c1-cp".into(),
        ..Default::default()
    };
    let t = build_tree(input(&f), &opts).unwrap();
    let types: Vec<&str> = t
        .root
        .conditions
        .iter()
        .map(|c| c.condition.type_.as_str())
        .collect();
    // non-zero: Available always, RollingOut True is bad (negative polarity), Paused False is good
    assert_eq!(types, ["Available", "RollingOut"]);
    assert!(t.root.conditions[1].negative_polarity);
    assert!(
        t.root.status.is_none(),
        "row cells are blanked when conditions are shown"
    );
    assert_eq!(t.root.children[1].conditions.len(), 1);
    let all = build_tree(
        input(&f),
        &TreeOptions {
            show_conditions: "all".into(),
            ..Default::default()
        },
    )
    .unwrap();
    assert_eq!(all.root.conditions.len(), 3);
    assert_eq!(
        all.root.children[2].children[1].children[0]
            .conditions
            .len(),
        5
    );
    assert_eq!(opts.filter_for("machine", "x"), ConditionFilter::None);
    assert_eq!(
        TreeOptions {
            show_conditions: "machine".into(),
            ..Default::default()
        }
        .filter_for("Machine", "x"),
        ConditionFilter::All
    );
    for bad in ["Machine, Cluster", "a/b/c", "Bogus/", "/x", "a,,b"] {
        assert!(
            build_tree(
                input(&f),
                &TreeOptions {
                    show_conditions: bad.into(),
                    ..Default::default()
                }
            )
            .is_err(),
            "{bad}"
        );
    }
}

#[test]
fn kamaji_control_plane_carries_pods() {
    let mut f = fixture();
    f.cp = json!({"apiVersion": "controlplane.cluster.x-k8s.io/v1alpha2", "kind": "KamajiControlPlane",
        "metadata": {"name": "c1", "namespace": "team-a"}, "spec": {"replicas": 2, "version": "v1.33.1"},
        "status": {"replicas": 2, "readyReplicas": 2, "availableReplicas": 1, "upToDateReplicas": 2, "version": "v1.33.1",
            "conditions": [{"type": "Ready", "status": "True", "reason": "Ready", "lastTransitionTime": "2026-11-30T07:30:00Z"}]}});
    f.machines.retain(|m| !is_cp_machine(&TreeMachine::of(m)));
    let t = build_tree(input(&f), &TreeOptions::default()).unwrap();
    let cp = &t.root.children[1];
    assert_eq!(cp.display_name, "KamajiControlPlane team-a/c1, v1.33.1");
    assert!(cp.children.is_empty());
    let pods = cp.control_plane_pods.as_ref().unwrap();
    assert_eq!(
        (pods.current, pods.desired, pods.ready, pods.available),
        (Some(2), Some(2), Some(2), Some(1))
    );
    // no Available condition: the row falls back to Ready
    assert_eq!(cp.status.as_ref().unwrap().condition.type_, "Ready");
    assert_eq!(cp.status.as_ref().unwrap().since_seconds, Some(1800));
}

#[test]
fn host_from_byohost_machine_ref() {
    let mut f = fixture();
    for m in &mut f.machines {
        m["spec"].as_object_mut().unwrap().remove("providerID");
    }
    let hosts = vec![
        json!({"kind": "ByoHost", "metadata": {"name": "node042", "namespace": "default"},
        "status": {"machineRef": {"kind": "ByoMachine", "namespace": "team-a", "name": "c1-md-0-x-3"}}}),
    ];
    let mut i = input(&f);
    i.byo_hosts = &hosts;
    let t = build_tree(i, &TreeOptions::default()).unwrap();
    assert_eq!(
        t.root.children[2].children[0].children[1].host.as_deref(),
        Some("node042")
    );
}

#[test]
fn v1beta1_layout_groups_by_ready_severity_reason() {
    // CAPI 1.10: objects served at v1beta1, conditions with severity in status.conditions.
    let ready =
        json!([{"type": "Ready", "status": "True", "lastTransitionTime": "2026-11-30T07:00:00Z"}]);
    let warn = |sev: &str| json!([{"type": "Ready", "status": "False", "severity": sev, "reason": "WaitingForBootstrapData", "lastTransitionTime": "2026-11-30T07:10:00Z"}]);
    let mut machines = vec![];
    for (n, c) in [
        ("a", ready.clone()),
        ("b", ready.clone()),
        ("c", warn("Info")),
        ("d", warn("Info")),
        ("e", warn("Warning")),
    ] {
        let mut m = machine(n, true, None, c, "h");
        m["apiVersion"] = json!("cluster.x-k8s.io/v1beta1");
        machines.push(m);
    }
    let c = json!({"apiVersion": "cluster.x-k8s.io/v1beta1", "kind": "Cluster", "metadata": {"name": "c1", "namespace": "team-a"},
        "status": {"conditions": [{"type": "Ready", "status": "True"}],
                   "v1beta2": {"conditions": [cond("Available", "True", "Available")]}}});
    let cp = json!({"apiVersion": "controlplane.cluster.x-k8s.io/v1beta1", "kind": "KubeadmControlPlane", "metadata": {"name": "c1-cp", "namespace": "team-a"},
        "spec": {"replicas": 5, "version": "v1.30.4"},
        "status": {"replicas": 5, "readyReplicas": 2, "updatedReplicas": 5, "v1beta2": {"readyReplicas": 2, "availableReplicas": 2, "upToDateReplicas": 5},
            "conditions": [{"type": "Ready", "status": "False", "severity": "Warning", "reason": "ScalingUp"}]}});
    let machines = rows(&machines);
    let i = TreeInput {
        control_plane: Some(&cp),
        machines: &machines,
        ..TreeInput::only(&c)
    };
    let t = build_tree(
        i,
        &TreeOptions {
            layout: Layout::V1Beta1,
            ..Default::default()
        },
    )
    .unwrap();
    assert_eq!(t.layout, Layout::V1Beta1);
    assert_eq!(t.root.status.as_ref().unwrap().condition.type_, "Ready");
    let cpn = &t.root.children[0];
    assert_eq!(
        cpn.status.as_ref().unwrap().condition.severity.as_deref(),
        Some("Warning")
    );
    assert_eq!(cpn.counters.as_ref().unwrap().up_to_date, Some(5));
    let rows: Vec<&str> = cpn
        .children
        .iter()
        .map(|n| n.display_name.as_str())
        .collect();
    assert_eq!(
        rows,
        [
            "2 Machines...",
            "2 Machines...",
            "Machine team-a/e, v1.33.1"
        ]
    );
    assert!(
        t.root.children.len() == 1,
        "no Workers without worker machines or deployments"
    );
    // the same objects in the v1beta2 layout: without status.v1beta2 the machines' status.conditions
    // are read, and Ready is compared by status and reason only (severity ignored): two groups
    let t2 = build_tree(i, &TreeOptions::default()).unwrap();
    let rows: Vec<&str> = t2.root.children[0]
        .children
        .iter()
        .map(|n| n.display_name.as_str())
        .collect();
    assert_eq!(rows, ["2 Machines...", "3 Machines..."]);
    assert_eq!(
        t2.root.status.as_ref().unwrap().condition.type_,
        "Available"
    );
}

#[test]
fn deleted_objects_and_serialization() {
    let mut f = fixture();
    f.machines[6]["metadata"]["deletionTimestamp"] = json!("2026-11-30T07:59:00Z");
    let t = build_tree(input(&f), &TreeOptions::default()).unwrap();
    let other = &t.root.children[2].children[1].children[0];
    assert!(other.deleting);
    assert!(
        other
            .display_name
            .starts_with("!! DELETED !! Machine team-a/stray")
    );
    let v = serde_json::to_value(&t).unwrap();
    assert_eq!(v["layout"], "V1Beta2");
    assert_eq!(
        v["root"]["children"][1]["children"][0]["group"]["items"][0],
        "c1-cp-a"
    );
    assert_eq!(v["root"]["children"][1]["children"][0]["virtualNode"], true);
}

#[test]
fn empty_cluster_is_just_the_root() {
    let c = json!({"apiVersion": "cluster.x-k8s.io/v1beta2", "kind": "Cluster", "metadata": {"name": "lonely", "namespace": "default"}});
    let i = TreeInput::only(&c);
    let t = build_tree(i, &TreeOptions::default()).unwrap();
    assert!(t.root.children.is_empty());
    assert!(t.root.counters.is_none());
    assert!(t.root.status.is_none());
    assert_eq!(t.walk().len(), 1);
}

#[test]
fn details_are_needed_for_visible_machines_only() {
    let f = fixture();
    let opts = TreeOptions::default();
    let needed = machines_needing_details(input(&f), &opts).unwrap();
    // The three control-plane Machines and two workers fold into groups; the others show.
    assert_eq!(
        needed.iter().map(String::as_str).collect::<Vec<_>>(),
        ["c1-md-0-x-3", "stray"]
    );
    // Without grouping every Machine shows, so every one needs them.
    let all = TreeOptions {
        grouping: false,
        ..TreeOptions::default()
    };
    assert_eq!(machines_needing_details(input(&f), &all).unwrap().len(), 7);
    // Invalid options are refused as build_tree refuses them.
    let bad = TreeOptions {
        show_conditions: "a b".into(),
        ..TreeOptions::default()
    };
    assert!(machines_needing_details(input(&f), &bad).is_err());
}

/// The fixture's Machines in each shape a management cluster serves them: as they are
/// (v1beta2, current conditions only); v1beta2 with the deprecated v1beta1 conditions and
/// messages on every condition; served at v1beta1 by CAPI 1.10 (legacy conditions in
/// `status.conditions`, current ones in `status.v1beta2`); and with one deleted, one without
/// conditions and one whose references name no group.
fn fixtures_of_every_contract() -> Vec<Fixture> {
    let legacy = |ready: &str, sev: &str, t: &str| {
        json!([{"type": "Ready", "status": ready, "severity": sev, "reason": "WaitingForInfrastructure", "message": "0 of 2 completed", "lastTransitionTime": t},
               {"type": "InfrastructureReady", "status": ready, "severity": sev, "reason": "WaitingForInfrastructure", "lastTransitionTime": t},
               {"type": "BootstrapReady", "status": "True", "lastTransitionTime": t}])
    };
    let with_messages = |conds: &Value, t: &str| -> Value {
        let mut conds = conds.clone();
        for c in conds.as_array_mut().into_iter().flatten() {
            c["message"] = json!(format!("* {}: something\n  on two lines", c["type"]));
            c["lastTransitionTime"] = json!(t);
        }
        conds
    };
    let times = ["2026-11-30T06:00:00Z", "2026-11-30T07:30:00Z"];
    let mut out = vec![fixture()];
    let mut f = fixture();
    for (i, m) in f.machines.iter_mut().enumerate() {
        let t = times[i % 2];
        let current = with_messages(&m["status"]["conditions"], t);
        let ready = if i % 3 == 0 { "False" } else { "True" };
        m["status"]["conditions"] = current;
        m["status"]["deprecated"] = json!({"v1beta1": {"conditions": legacy(ready, if i % 2 == 0 { "Info" } else { "Warning" }, t)}});
    }
    out.push(f);
    let mut f = fixture();
    for (i, m) in f.machines.iter_mut().enumerate() {
        let t = times[(i + 1) % 2];
        let current = with_messages(&m["status"]["conditions"], t);
        m["apiVersion"] = json!("cluster.x-k8s.io/v1beta1");
        m["status"]["conditions"] = legacy(if i < 4 { "True" } else { "False" }, "Info", t);
        m["status"]["v1beta2"] = json!({"conditions": current});
    }
    out.push(f);
    let mut f = fixture();
    f.machines[1]["metadata"]["deletionTimestamp"] = json!("2026-11-30T07:59:00Z");
    f.machines[4]["status"]
        .as_object_mut()
        .unwrap()
        .remove("conditions");
    f.machines[5]["spec"]["infrastructureRef"] =
        json!({"kind": "ByoMachine", "name": "c1-md-0-x-3"});
    f.machines[5]["spec"]
        .as_object_mut()
        .unwrap()
        .remove("providerID");
    out.push(f);
    out
}

/// Every combination of the options that decide which Machine conditions a tree reads.
fn every_option() -> Vec<TreeOptions> {
    let mut out = vec![];
    for layout in [Layout::V1Beta2, Layout::V1Beta1] {
        for show_conditions in [
            "",
            "all",
            "all+",
            "Machine",
            "machine+",
            "Machine/c1-md-0-x-3",
            "Machine/stray+,Cluster",
            "KubeadmControlPlane,ByoMachine",
        ] {
            for (grouping, echo, show_machinesets) in [
                (true, false, false),
                (false, false, false),
                (true, true, true),
                (false, true, false),
            ] {
                out.push(TreeOptions {
                    show_conditions: show_conditions.into(),
                    grouping,
                    echo,
                    show_machinesets,
                    layout,
                    ..Default::default()
                });
            }
        }
    }
    out
}

#[test]
fn machines_parse_as_they_read() {
    for f in fixtures_of_every_contract() {
        for m in &f.machines {
            // What the server sends besides: managed fields, addresses, node info.
            let mut sent = m.clone();
            sent["metadata"]["managedFields"] =
                json!([{"manager": "capi", "fieldsV1": {"f:status": {}}}]);
            sent["status"]["addresses"] = json!([{"type": "InternalIP", "address": "10.0.0.1"}]);
            sent["status"]["nodeInfo"] = json!({"kernelVersion": "6.8"});
            let parsed: TreeMachine = serde_json::from_value(sent).unwrap();
            assert_eq!(parsed, TreeMachine::of(m));
        }
    }
    // A key sent as null reads as the accessors read it: `status.v1beta2: null` is there.
    let m = json!({"apiVersion": "cluster.x-k8s.io/v1beta2", "kind": "Machine", "metadata": {"name": "m", "deletionTimestamp": null},
        "status": {"v1beta2": null, "conditions": [cond("Ready", "True", "Ready")]}});
    let parsed: TreeMachine = serde_json::from_value(m.clone()).unwrap();
    assert_eq!(parsed, TreeMachine::of(&m));
    assert!(!parsed.deleting);
    assert_eq!(parsed.legacy.len(), 1);
}

#[test]
fn narrowed_machines_build_the_tree_of_whole_ones() {
    for f in fixtures_of_every_contract() {
        let whole = input(&f);
        for opts in every_option() {
            let narrowed: Vec<TreeMachine> = whole
                .machines
                .iter()
                .map(|m| m.clone().narrowed(&opts))
                .collect();
            let narrow = TreeInput {
                machines: &narrowed,
                ..whole
            };
            assert_eq!(
                build_tree(narrow, &opts).unwrap(),
                build_tree(whole, &opts).unwrap(),
                "{opts:?}"
            );
            assert_eq!(
                machines_needing_details(narrow, &opts).unwrap(),
                machines_needing_details(whole, &opts).unwrap(),
                "{opts:?}"
            );
        }
    }
}

#[test]
fn narrowing_keeps_only_the_row_conditions_by_default() {
    let f = &fixtures_of_every_contract()[1];
    let m = TreeMachine::of(&f.machines[0]);
    assert_eq!((m.current.len(), m.legacy.len()), (5, 3));
    let default = m.clone().narrowed(&TreeOptions::default());
    let types: Vec<&str> = default.current.iter().map(|c| c.type_.as_str()).collect();
    assert_eq!(types, ["Available", "Ready", "UpToDate"]);
    assert!(default.legacy.is_empty());
    // Ready whole (the row's cells), the others by status and reason (grouping).
    assert!(default.current[1].message.is_some());
    assert!(default.current[0].message.is_none() && default.current[0].reason.is_some());
    let v1beta1 = m.clone().narrowed(&TreeOptions {
        layout: Layout::V1Beta1,
        ..Default::default()
    });
    assert_eq!(v1beta1.legacy.len(), 1);
    assert!(v1beta1.current.iter().all(|c| c.reason.is_none()));
    // --show-conditions naming the Machine (or all) keeps its layout's conditions whole.
    for show in ["all", "Machine+", "Machine/c1-cp-a"] {
        let opts = TreeOptions {
            show_conditions: show.into(),
            ..Default::default()
        };
        assert_eq!(m.clone().narrowed(&opts).current, m.current, "{show}");
    }
    let other = m.clone().narrowed(&TreeOptions {
        show_conditions: "Machine/c1-cp-b".into(),
        ..Default::default()
    });
    assert_eq!(other.current.len(), 3);
}
