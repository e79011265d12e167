use serde_json::json;

use super::*;

fn ts(s: &str) -> Timestamp {
    s.parse().unwrap()
}

fn names(r: &Related) -> Vec<&str> {
    r.names().into_iter().collect()
}

fn keys(r: &Related) -> Vec<String> {
    r.objects
        .iter()
        .map(|o| format!("{} {}/{}", o.kind, o.namespace, o.name))
        .collect()
}

/// A v1beta2 Machine of `demo` with its ByoMachine and KubeadmConfig, on `host` when given.
fn machine(name: &str, host: Option<&str>) -> Value {
    let mut m = json!({
        "kind": "Machine",
        "metadata": {"name": name, "namespace": "ns",
                     "labels": {"cluster.x-k8s.io/cluster-name": "demo"}},
        "spec": {"clusterName": "demo",
                 "infrastructureRef": {"apiGroup": "infrastructure.cluster.x-k8s.io",
                                       "kind": "ByoMachine", "name": name},
                 "bootstrap": {"configRef": {"apiGroup": "bootstrap.cluster.x-k8s.io",
                                             "kind": "KubeadmConfig", "name": name}}}
    });
    if let Some(h) = host {
        m["spec"]["providerID"] = json!(format!("byoh://{h}/x1"));
        m["status"] = json!({"nodeRef": {"name": h}});
    }
    m
}

fn host(name: &str, claimed_by: Option<(&str, &str)>) -> Value {
    let mut h = json!({"metadata": {"name": name, "namespace": "hosts"}});
    if let Some((ns, bm)) = claimed_by {
        h["status"] = json!({"machineRef": {"kind": "ByoMachine", "namespace": ns, "name": bm}});
    }
    h
}

#[test]
fn a_typed_argument_is_read_as_kubectl_reads_one() {
    for (arg, kind) in [
        ("cluster/demo", Some(TargetKind::Cluster)),
        ("clusters.cluster.x-k8s.io/demo", Some(TargetKind::Cluster)),
        ("Machine/demo", Some(TargetKind::Machine)),
        ("machines/demo", Some(TargetKind::Machine)),
        ("host/demo", Some(TargetKind::Host)),
        (
            "byohosts.infrastructure.cluster.x-k8s.io/demo",
            Some(TargetKind::Host),
        ),
        ("demo", None),
    ] {
        assert_eq!(
            parse_target(arg).unwrap(),
            Target {
                kind,
                name: "demo".into()
            },
            "{arg}"
        );
    }
    for (arg, says) in [
        ("pod/demo", "\"pod\" is not a kind logs reads"),
        (
            "machines.infrastructure.cluster.x-k8s.io/demo",
            "is not a kind",
        ),
        ("cluster/", "is not a valid Cluster name"),
        ("Demo", "is not a valid Cluster, Machine or ByoHost name"),
        ("host/a/b", "is not a valid ByoHost name"),
    ] {
        let e = parse_target(arg).unwrap_err();
        assert_eq!(e.exit_code(), 2, "{arg}");
        assert!(e.to_string().contains(says), "{arg}: {e}");
    }
}

#[test]
fn a_bare_name_is_the_one_kind_found_and_ambiguous_when_several_are() {
    assert_eq!(
        pick_kind("demo", "ns", &[TargetKind::Machine]).unwrap(),
        TargetKind::Machine
    );
    let e = pick_kind("demo", "ns", &[TargetKind::Host, TargetKind::Cluster]).unwrap_err();
    assert_eq!(e.exit_code(), 2);
    assert_eq!(
        e.to_string(),
        "\"demo\" is a Cluster and a ByoHost in namespace ns"
    );
    assert_eq!(e.hint(), Some("say which: cluster/demo or host/demo"));
    let e = pick_kind("demo", "ns", &[]).unwrap_err();
    assert_eq!(e.exit_code(), 1);
    assert_eq!(
        e.to_string(),
        "no Cluster, Machine or ByoHost \"demo\" in namespace ns"
    );
}

#[test]
fn since_is_bounded() {
    assert_eq!(check_since(DEFAULT_SINCE).unwrap(), DEFAULT_SINCE);
    assert_eq!(check_since(MAX_SINCE).unwrap(), MAX_SINCE);
    for d in [
        Duration::from_millis(500),
        MAX_SINCE + Duration::from_secs(1),
    ] {
        assert_eq!(check_since(d).unwrap_err().exit_code(), 2, "{d:?}");
    }
}

#[test]
fn a_cluster_relates_to_its_parts_machines_hosts_and_control_plane() {
    let cluster = json!({
        "metadata": {"name": "demo", "namespace": "ns"},
        "spec": {"controlPlaneRef": {"apiGroup": "controlplane.cluster.x-k8s.io",
                                     "kind": "KamajiControlPlane", "name": "demo-cp"},
                 "infrastructureRef": {"apiGroup": "infrastructure.cluster.x-k8s.io",
                                       "kind": "ByoCluster", "name": "demo"}}
    });
    let machines = [
        machine("demo-md-0-a", Some("host-1")),
        machine("demo-md-0-b", None),
    ];
    let byomachines = [
        json!({"metadata": {"name": "demo-md-0-a", "namespace": "ns"}}),
        json!({"metadata": {"name": "demo-md-0-b", "namespace": "ns"}}),
    ];
    let mds = [json!({"metadata": {"name": "demo-md-0", "namespace": "ns"}})];
    let hosts = [
        host("host-1", Some(("ns", "demo-md-0-a"))),
        // Claimed by a ByoMachine of the cluster whose Machine is not listed (yet).
        json!({"metadata": {"name": "host-2", "namespace": "hosts", "labels":
            {"byoh.infrastructure.cluster.x-k8s.io/byomachine-name": "ns.demo-md-0-b"}}}),
        host("host-3", Some(("other", "demo-md-0-a"))),
        host("host-4", None),
    ];
    let labelled: [(&str, &[Value]); 3] = [
        ("Machine", &machines),
        ("ByoMachine", &byomachines),
        ("MachineDeployment", &mds),
    ];
    let r = related_to_cluster(
        &cluster,
        ClusterLists {
            labelled: &labelled,
            hosts: &hosts,
        },
    );
    assert_eq!(
        keys(&r),
        [
            "ByoCluster ns/demo",
            "ByoHost hosts/host-1",
            "ByoHost hosts/host-2",
            "ByoMachine ns/demo-md-0-a",
            "ByoMachine ns/demo-md-0-b",
            "Cluster ns/demo",
            "KamajiControlPlane ns/demo-cp",
            "KubeadmConfig ns/demo-md-0-a",
            "KubeadmConfig ns/demo-md-0-b",
            "Machine ns/demo-md-0-a",
            "Machine ns/demo-md-0-b",
            "MachineDeployment ns/demo-md-0",
            "TenantControlPlane ns/demo-cp",
        ]
    );
    assert_eq!(r.nodes.iter().collect::<Vec<_>>(), ["host-1"]);
    assert_eq!(
        r.namespaces().into_iter().collect::<Vec<_>>(),
        ["hosts", "ns"]
    );
}

#[test]
fn a_machine_relates_to_its_byomachine_bootstrap_config_node_and_host() {
    let hosts = [
        host("host-1", None),
        host("host-9", Some(("ns", "demo-md-0-a"))),
    ];
    let r = related_to_machine(&machine("demo-md-0-a", Some("host-1")), &hosts);
    assert_eq!(
        keys(&r),
        [
            "ByoHost hosts/host-1",
            "ByoHost hosts/host-9",
            "ByoMachine ns/demo-md-0-a",
            "KubeadmConfig ns/demo-md-0-a",
            "Machine ns/demo-md-0-a",
        ]
    );
    assert_eq!(
        names(&r),
        ["demo-md-0-a", "host-1", "host-9"],
        "the node host-1 is named once"
    );
    // A Pending machine: no host, no node.
    let r = related_to_machine(&machine("demo-md-0-b", None), &hosts);
    assert_eq!(names(&r), ["demo-md-0-b"]);
    assert_eq!(r.objects.len(), 3);
}

#[test]
fn a_host_relates_to_its_byomachine_and_machine() {
    let h = host("host-1", Some(("ns", "demo-md-0-a")));
    let owned = json!({"metadata": {"name": "demo-md-0-a", "namespace": "ns",
        "ownerReferences": [{"kind": "Machine", "name": "demo-md-0-a-owner", "controller": true}]}});
    let r = related_to_host(&h, &[owned], &[]);
    assert_eq!(
        keys(&r),
        [
            "ByoHost hosts/host-1",
            "ByoMachine ns/demo-md-0-a",
            "Machine ns/demo-md-0-a-owner",
        ]
    );
    // Without an owner reference: the Machine whose infrastructure reference names it.
    let r = related_to_host(&h, &[], &[machine("demo-md-0-a", Some("host-1"))]);
    assert!(r.has("Machine", "ns", "demo-md-0-a"), "{r:?}");
    assert!(r.has("KubeadmConfig", "ns", "demo-md-0-a"), "{r:?}");
    // A free host: only itself.
    let r = related_to_host(&host("host-4", None), &[], &[]);
    assert_eq!(keys(&r), ["ByoHost hosts/host-4"]);
}

#[test]
fn a_name_matches_as_a_word() {
    let m = Matcher::new(["demo", "demo-md-0-a", "host-1"]);
    for line in [
        r#"I0102 10:00:00.000000 1 byomachine_controller.go:270] "msg"="Attempting host reservation" "name"="demo-md-0-a" "namespace"="ns""#,
        r#"{"level":"info","msg":"Reconciling","Cluster":{"name":"demo","namespace":"ns"}}"#,
        "machine ns/demo-md-0-a is pending",
        "attached host-1.",
        "cluster=demo",
    ] {
        assert!(m.matches(line), "{line}");
    }
    for line in [
        "machine ns/demo-md-0-b is pending",
        "demo-md-0 scaled up",
        "host-1.example.com ready",
        "ns.demo-md-0-a",
        "demonstration",
        "",
    ] {
        assert!(!m.matches(line), "{line}");
    }
    assert!(!Matcher::new([""]).matches("anything at all"));
}

#[test]
fn a_timestamped_line_splits_into_its_time_and_text() {
    assert_eq!(
        split_timestamp("2026-01-02T10:00:00.123456789Z I0102 hello world\r"),
        Some((ts("2026-01-02T10:00:00.123456789Z"), "I0102 hello world"))
    );
    assert_eq!(
        split_timestamp("2026-01-02T11:00:00+01:00 x"),
        Some((ts("2026-01-02T10:00:00Z"), "x"))
    );
    assert_eq!(
        split_timestamp("2026-01-02T10:00:00Z"),
        Some((ts("2026-01-02T10:00:00Z"), ""))
    );
    assert_eq!(split_timestamp("I0102 10:00:00 no time"), None);
    assert_eq!(split_timestamp(""), None);
}

#[test]
fn events_of_related_objects_become_entries_and_merge_with_lines_in_time_order() {
    let mut r = Related::default();
    r.add("ByoMachine", "ns", "demo-md-0-b");
    let since = ts("2026-01-02T09:00:00Z");
    let ev = json!({
        "metadata": {"name": "e1", "namespace": "ns", "uid": "u1", "resourceVersion": "5"},
        "involvedObject": {"kind": "ByoMachine", "name": "demo-md-0-b", "namespace": "ns"},
        "type": "Warning", "reason": "ByoHostSelectionFailed", "message": "No available ByoHost",
        "count": 3, "firstTimestamp": "2026-01-02T09:30:00Z", "lastTimestamp": "2026-01-02T10:00:01Z"
    });
    let e = event_entry(&ev, &r, since).unwrap();
    assert_eq!(e.time, "2026-01-02T10:00:01.000000000Z");
    assert_eq!(e.object.as_deref(), Some("ByoMachine/demo-md-0-b"));
    assert_eq!(e.count, Some(3));
    let v = serde_json::to_value(&e).unwrap();
    assert_eq!(
        v,
        json!({"time": "2026-01-02T10:00:01.000000000Z", "source": "event", "kind": "Event",
               "object": "ByoMachine/demo-md-0-b", "namespace": "ns", "type": "Warning",
               "reason": "ByoHostSelectionFailed", "count": 3, "message": "No available ByoHost"})
    );
    // Not related, or too old.
    let mut other = ev.clone();
    other["involvedObject"]["name"] = json!("demo-md-0-c");
    assert!(event_entry(&other, &r, since).is_none());
    assert!(event_entry(&ev, &r, ts("2026-01-02T10:00:02Z")).is_none());

    let m = Matcher::new(["demo-md-0-b"]);
    let line = |at: &str, text: &str| {
        log_entry(
            "infrastructure-byoh",
            "byoh-system/p",
            "manager",
            ts(at),
            text,
            &m,
        )
    };
    assert!(line("2026-01-02T10:00:00Z", "something else").is_none());
    let a = line(
        "2026-01-02T10:00:00Z",
        "Attempting host reservation demo-md-0-b",
    )
    .unwrap();
    let b = line("2026-01-02T10:00:02Z", "No hosts found demo-md-0-b").unwrap();
    let c = line("2026-01-02T10:00:02Z", "again demo-md-0-b").unwrap();
    let merged = in_time_order([vec![a.clone(), b.clone(), c.clone()], vec![e.clone()]]);
    let order: Vec<&str> = merged.iter().map(|x| x.message.as_str()).collect();
    assert_eq!(
        order,
        [
            "Attempting host reservation demo-md-0-b",
            "No available ByoHost",
            "No hosts found demo-md-0-b",
            "again demo-md-0-b"
        ]
    );
    assert_eq!(
        serde_json::to_value(&a).unwrap(),
        json!({"time": "2026-01-02T10:00:00.000000000Z", "source": "infrastructure-byoh",
               "kind": "Log", "pod": "byoh-system/p", "container": "manager",
               "message": "Attempting host reservation demo-md-0-b"})
    );
}

#[test]
fn long_messages_are_cut_on_a_character_boundary() {
    let long = format!("{}é{}", "a".repeat(MAX_MESSAGE_BYTES - 1), "b".repeat(10));
    let (cut, truncated) = bounded(&long);
    assert!(truncated);
    assert_eq!(cut.len(), MAX_MESSAGE_BYTES - 1);
    assert_eq!(bounded("short"), ("short".to_string(), false));
}

#[test]
fn the_newest_entries_are_kept() {
    let m = Matcher::new(["x"]);
    let mut n = Newest::new(2);
    for i in 0..5 {
        let at = Timestamp::from_second(i).unwrap();
        n.push(log_entry("s", "p", "c", at, &format!("x {i}"), &m).unwrap());
    }
    assert_eq!(n.dropped, 3);
    let kept: Vec<String> = n.into_vec().into_iter().map(|e| e.message).collect();
    assert_eq!(kept, ["x 3", "x 4"]);
}

#[test]
fn a_followed_container_lets_each_line_through_once() {
    let mut c = Cursor::default();
    let start = ts("2026-01-02T09:00:00Z");
    assert_eq!(c.since(start), start);
    let t1 = ts("2026-01-02T10:00:00.5Z");
    let t2 = ts("2026-01-02T10:00:01.2Z");
    assert!(c.admit(t1, "a"));
    assert!(c.admit(t1, "b"));
    assert!(c.admit(t2, "c"));
    // The next read asks from a second before the last line, and sees them again.
    assert_eq!(c.since(start), ts("2026-01-02T10:00:00.2Z"));
    assert!(!c.admit(t1, "b"));
    assert!(!c.admit(t2, "c"));
    assert!(c.admit(t2, "d"));
    assert!(c.admit(ts("2026-01-02T10:00:03Z"), "c"));
}

#[test]
fn an_event_is_shown_again_when_it_changes() {
    let mut seen = SeenEvents::default();
    let ev = |rv: &str| json!({"metadata": {"uid": "u1", "resourceVersion": rv}});
    assert!(seen.admit(&ev("1")));
    assert!(!seen.admit(&ev("1")));
    assert!(seen.admit(&ev("2")));
}
