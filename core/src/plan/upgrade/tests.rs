use super::*;
use crate::version::releases::ReleaseSource;
use serde_json::json;

fn cluster() -> Value {
    json!({"apiVersion": "cluster.x-k8s.io/v1beta2", "kind": "Cluster",
        "metadata": {"name": "c1", "namespace": "team-a"},
        "spec": {"controlPlaneRef": {"apiGroup": "controlplane.cluster.x-k8s.io", "kind": "KubeadmControlPlane", "name": "c1-cp"}}})
}

fn kcp(version: &str, infra_kind: &str, infra_name: &str) -> Value {
    json!({"apiVersion": "controlplane.cluster.x-k8s.io/v1beta2", "kind": "KubeadmControlPlane",
        "metadata": {"name": "c1-cp", "namespace": "team-a"},
        "spec": {"replicas": 3, "version": version,
            "machineTemplate": {"spec": {"infrastructureRef": {"apiGroup": "infrastructure.cluster.x-k8s.io", "kind": infra_kind, "name": infra_name}}},
            "kubeadmConfigSpec": {}},
        "status": {"version": version, "replicas": 3, "readyReplicas": 3, "upToDateReplicas": 3}})
}

fn kcp_v1beta1(version: &str) -> Value {
    json!({"apiVersion": "controlplane.cluster.x-k8s.io/v1beta1", "kind": "KubeadmControlPlane",
        "metadata": {"name": "c1-cp", "namespace": "team-a"},
        "spec": {"replicas": 1, "version": version,
            "machineTemplate": {"infrastructureRef": {"apiVersion": "infrastructure.cluster.x-k8s.io/v1beta1", "kind": "OpenStackMachineTemplate", "name": "c1-cp-v1-30-4"}}},
        "status": {"version": version}})
}

fn kamaji(version: &str) -> Value {
    json!({"apiVersion": "controlplane.cluster.x-k8s.io/v1alpha2", "kind": "KamajiControlPlane",
        "metadata": {"name": "c1", "namespace": "team-a"},
        "spec": {"replicas": 2, "version": version, "dataStoreName": "default"},
        "status": {"version": version, "replicas": 2, "readyReplicas": 2}})
}

fn md(name: &str, version: &str, replicas: i64, infra_kind: &str, infra_name: &str) -> Value {
    json!({"apiVersion": "cluster.x-k8s.io/v1beta2", "kind": "MachineDeployment",
        "metadata": {"name": name, "namespace": "team-a", "labels": {"cluster.x-k8s.io/cluster-name": "c1"}},
        "spec": {"clusterName": "c1", "replicas": replicas,
            "template": {"spec": {"clusterName": "c1", "version": version,
                "bootstrap": {"configRef": {"apiGroup": "bootstrap.cluster.x-k8s.io", "kind": "KubeadmConfigTemplate", "name": name}},
                "infrastructureRef": {"apiGroup": "infrastructure.cluster.x-k8s.io", "kind": infra_kind, "name": infra_name}}}},
        "status": {"versions": [{"version": version, "replicas": replicas}]}})
}

fn byo_template(name: &str, role: &str) -> Value {
    json!({"apiVersion": "infrastructure.cluster.x-k8s.io/v1beta1", "kind": "ByoMachineTemplate",
        "metadata": {"name": name, "namespace": "team-a"},
        "spec": {"template": {"spec": {"selector": {"matchLabels": {"role": role}}}}}})
}

fn image_template(name: &str, image: &str) -> Value {
    json!({"apiVersion": "infrastructure.cluster.x-k8s.io/v1beta1", "kind": "OpenStackMachineTemplate",
        "metadata": {"name": name, "namespace": "team-a", "uid": "x", "resourceVersion": "12",
            "labels": {"cluster.x-k8s.io/cluster-name": "c1"},
            "annotations": {"kubectl.kubernetes.io/last-applied-configuration": "{}", "team": "a"}},
        "spec": {"template": {"spec": {"flavor": "m1.large", "image": {"filter": {"name": image}}}}}})
}

fn host(name: &str, role: &str) -> Value {
    json!({"kind": "ByoHost", "metadata": {"name": name, "namespace": "default", "labels": {"role": role}}})
}

/// A request to `to` that knows no patch release: intermediate minors at `.0`.
fn req(to: &str) -> UpgradeRequest {
    UpgradeRequest {
        releases: Releases::none(),
        ..UpgradeRequest::new(parse_version(to).unwrap())
    }
}

/// One-replica MachineDeployments on Docker, each named after its template, at `version`.
fn docker_mds(version: &str, names: &[&str]) -> Vec<Value> {
    names
        .iter()
        .map(|n| md(n, version, 1, "DockerMachineTemplate", n))
        .collect()
}

/// A KubeadmControlPlane cluster on Docker at one version, with one-replica MachineDeployments
/// at the same version.
struct Docker {
    cluster: Value,
    control_plane: Value,
    mds: Vec<Value>,
}

impl Docker {
    fn at(version: &str, names: &[&str]) -> Docker {
        Docker {
            cluster: cluster(),
            control_plane: kcp(version, "DockerMachineTemplate", "t"),
            mds: docker_mds(version, names),
        }
    }

    fn objs(&self) -> ClusterObjects<'_> {
        ClusterObjects::of(&self.cluster, &self.control_plane, &self.mds, &[])
    }
}

/// The plan of `r`, with nothing observed yet and no hosts.
fn plan(objs: &ClusterObjects, r: &UpgradeRequest) -> Result<UpgradePlan, UpgradeError> {
    plan_upgrade(objs, r, &Observed::default(), None)
}

fn summary(p: &UpgradePlan) -> Vec<String> {
    p.steps
        .iter()
        .map(|s| format!("{} {}->{}", s.target, s.from_version, s.to_version))
        .collect()
}

/// The plan reads versions by the one rule set (`crate::version::parse_version`): a
/// KamajiControlPlane's `spec.version` may lack its `v` (its CRD allows it).
#[test]
fn versions_read_from_objects_may_lack_the_v() {
    let c = cluster();
    let cp = kamaji("1.32.0");
    let objs = ClusterObjects::of(&c, &cp, &[], &[]);
    let p = plan(&objs, &req("1.33.0")).unwrap();
    assert_eq!(
        (p.from_version.to_string(), p.to_version.to_string()),
        ("v1.32.0".into(), "v1.33.0".into())
    );
}

/// The matrix: v1.30.4 → v1.33.1 across a KCP and two MachineDeployments.
#[test]
fn kcp_two_mds_lockstep_each_minor() {
    let c = cluster();
    let cp = kcp("v1.30.4", "DockerMachineTemplate", "c1-cp");
    let mds = vec![
        md("c1-md-0", "v1.30.4", 3, "DockerMachineTemplate", "c1-md-0"),
        md("c1-md-1", "v1.30.4", 2, "DockerMachineTemplate", "c1-md-1"),
    ];
    let objs = ClusterObjects::of(&c, &cp, &mds, &[]);
    let p = plan(&objs, &req("v1.33.1")).unwrap();
    assert_eq!(p.path, ["v1.31.0", "v1.32.0", "v1.33.1"]);
    assert_eq!(
        summary(&p),
        [
            "KubeadmControlPlane/c1-cp v1.30.4->v1.31.0",
            "MachineDeployment/c1-md-0 v1.30.4->v1.31.0",
            "MachineDeployment/c1-md-1 v1.30.4->v1.31.0",
            "KubeadmControlPlane/c1-cp v1.31.0->v1.32.0",
            "MachineDeployment/c1-md-0 v1.31.0->v1.32.0",
            "MachineDeployment/c1-md-1 v1.31.0->v1.32.0",
            "KubeadmControlPlane/c1-cp v1.32.0->v1.33.1",
            "MachineDeployment/c1-md-0 v1.32.0->v1.33.1",
            "MachineDeployment/c1-md-1 v1.32.0->v1.33.1",
        ]
    );
    assert_eq!(
        p.steps.iter().map(|s| s.number).collect::<Vec<_>>(),
        (1..=9).collect::<Vec<_>>()
    );
    assert_eq!(
        p.steps[0].patch.merge_patch,
        Some(json!({"spec": {"version": "v1.31.0"}}))
    );
    assert_eq!(
        p.steps[1].patch.json_patch,
        json!([{"op": "add", "path": "/spec/template/spec/version", "value": "v1.31.0"}])
    );
    assert_eq!(p.steps[1].role, StepRole::Workers);
    assert!(
        p.findings
            .iter()
            .any(|f| f.message.contains("v1.31.0, v1.32.0 stepped at .0"))
    );
    assert!(!p.blocked);
}

#[test]
fn version_matrix() {
    // (from, to, available, expected path)
    let cases: &[(&str, &str, &[&str], &[&str])] = &[
        ("v1.30.4", "v1.30.9", &[], &["v1.30.9"]),
        ("v1.30.4", "v1.31.2", &[], &["v1.31.2"]),
        (
            "v1.30.4",
            "v1.33.1",
            &[
                "v1.31.3",
                "v1.31.14",
                "v1.32.9",
                "v1.32.10-rc.1",
                "v1.30.14",
            ],
            &["v1.30.14", "v1.31.14", "v1.32.9", "v1.33.1"],
        ),
        (
            "v1.28.0",
            "v1.33.0",
            &[],
            &["v1.29.0", "v1.30.0", "v1.31.0", "v1.32.0", "v1.33.0"],
        ),
        ("v1.33.1", "v1.33.1", &[], &[]),
    ];
    for (from, to, avail, want) in cases {
        let docker = Docker::at(from, &["a", "b"]);
        let objs = docker.objs();
        let r = UpgradeRequest {
            releases: Releases::none().with(*avail, ReleaseSource::ClusterClass),
            ..req(to)
        };
        let p = plan(&objs, &r).unwrap();
        assert_eq!(p.path, *want, "{from} -> {to}");
        assert_eq!(p.steps.len(), want.len() * 3, "{from} -> {to}");
        if want.len() > 1 && !avail.is_empty() {
            let from_class = "intermediate versions from the versions the ClusterClass lists";
            assert!(
                p.findings.iter().any(|f| f.message.starts_with(from_class)),
                "{:?}",
                p.findings
            );
        }
        if want.is_empty() {
            assert!(
                p.findings
                    .iter()
                    .any(|f| f.message.starts_with("nothing to do"))
            );
        }
    }
    // the newest patch of the current minor comes first, and the plan says where it came from
    let c = cluster();
    let cp = kcp("v1.30.4", "DockerMachineTemplate", "t");
    let objs = ClusterObjects::of(&c, &cp, &[], &[]);
    let r = UpgradeRequest {
        releases: Releases::none().with(["v1.30.14"], ReleaseSource::Markers),
        ..req("v1.31.0")
    };
    let p = plan(&objs, &r).unwrap();
    assert_eq!(p.path, ["v1.30.14", "v1.31.0"]);
    assert!(
        p.findings
            .iter()
            .any(|f| f.message == "intermediate versions from Kubernetes' stable-release markers"),
        "{:?}",
        p.findings
    );
}

#[test]
fn refuses_downgrade() {
    let docker = Docker::at("v1.31.2", &["a"]);
    let objs = docker.objs();
    let e = plan(&objs, &req("v1.30.9")).unwrap_err();
    assert_eq!(
        e.to_string(),
        "KubeadmControlPlane/c1-cp is at v1.31.2; v1.30.9 would be a downgrade, which Kubernetes does not support"
    );
    assert!(matches!(
        plan(&objs, &req("v1.31.1")),
        Err(UpgradeError::Downgrade { .. })
    ));
    let both = UpgradeRequest {
        control_plane_only: true,
        workers_only: true,
        ..req("v1.32.0")
    };
    assert_eq!(plan(&objs, &both), Err(UpgradeError::ConflictingScope));
    let no_cp = ClusterObjects {
        control_plane: None,
        ..objs
    };
    assert!(matches!(
        plan(&no_cp, &req("v1.32.0")),
        Err(UpgradeError::NoControlPlane(_))
    ));
}

#[test]
fn within_skew_moves_workers_only_when_needed() {
    let docker = Docker::at("v1.30.4", &["a", "b"]);
    let objs = docker.objs();
    let r = UpgradeRequest {
        worker_strategy: WorkerStrategy::WithinSkew,
        ..req("v1.33.1")
    };
    let p = plan(&objs, &r).unwrap();
    assert_eq!(
        summary(&p),
        [
            "KubeadmControlPlane/c1-cp v1.30.4->v1.31.0",
            "KubeadmControlPlane/c1-cp v1.31.0->v1.32.0",
            "KubeadmControlPlane/c1-cp v1.32.0->v1.33.1",
            "MachineDeployment/a v1.30.4->v1.33.1",
            "MachineDeployment/b v1.30.4->v1.33.1",
        ]
    );
    // five minors: workers must catch up once on the way
    let docker = Docker::at("v1.29.1", &["a"]);
    let objs = docker.objs();
    let p = plan(
        &objs,
        &UpgradeRequest {
            to: parse_version("v1.34.0").unwrap(),
            ..r
        },
    )
    .unwrap();
    assert_eq!(
        summary(&p),
        [
            "KubeadmControlPlane/c1-cp v1.29.1->v1.30.0",
            "KubeadmControlPlane/c1-cp v1.30.0->v1.31.0",
            "KubeadmControlPlane/c1-cp v1.31.0->v1.32.0",
            "MachineDeployment/a v1.29.1->v1.32.0",
            "KubeadmControlPlane/c1-cp v1.32.0->v1.33.0",
            "KubeadmControlPlane/c1-cp v1.33.0->v1.34.0",
            "MachineDeployment/a v1.32.0->v1.34.0",
        ]
    );
}

#[test]
fn kamaji_is_one_reconciler_step() {
    let mut c = cluster();
    c["spec"]["controlPlaneRef"] = json!({"apiGroup": "controlplane.cluster.x-k8s.io", "kind": "KamajiControlPlane", "name": "c1"});
    let cp = kamaji("v1.30.4");
    let mds = vec![
        md("a", "v1.30.4", 2, "KubevirtMachineTemplate", "a"),
        md("b", "v1.30.4", 2, "KubevirtMachineTemplate", "b"),
    ];
    let objs = ClusterObjects::of(&c, &cp, &mds, &[]);
    // 1.31's newest patch is known, 1.32's is not.
    let r = UpgradeRequest {
        releases: Releases::none().with(["v1.31.14"], ReleaseSource::Markers),
        ..req("v1.33.1")
    };
    let p = plan(&objs, &r).unwrap();
    assert_eq!(
        summary(&p),
        [
            "KamajiControlPlane/c1 v1.30.4->v1.33.1",
            "MachineDeployment/a v1.30.4->v1.33.1",
            "MachineDeployment/b v1.30.4->v1.33.1"
        ]
    );
    let s = &p.steps[0];
    assert!(s.stepped_by_reconciler);
    assert_eq!(s.via, ["v1.31.14", "v1.32.0", "v1.33.1"]);
    // The reconciler steps through the versions the plan shows.
    assert_eq!(
        s.patch.merge_patch,
        Some(
            json!({"metadata": {"annotations": {"capi-kamaji.io/patch-releases": "v1.31.14"}},
            "spec": {"version": "v1.33.1"}})
        )
    );
    assert_eq!(
        s.patch.json_patch[1],
        json!({"op": "add", "path": "/metadata/annotations",
            "value": {"capi-kamaji.io/patch-releases": "v1.31.14"}})
    );
    assert!(s.wait_for.contains("reconciler"));
    assert!(s.clone_templates.is_empty());

    // workers 5 minors behind the target: the control plane record is split where workers catch up
    let cp = kamaji("v1.29.0");
    let mds = vec![md("a", "v1.29.0", 2, "KubevirtMachineTemplate", "a")];
    let objs = ClusterObjects::of(&c, &cp, &mds, &[]);
    let p = plan(&objs, &req("v1.34.2")).unwrap();
    assert_eq!(
        summary(&p),
        [
            "KamajiControlPlane/c1 v1.29.0->v1.32.0",
            "MachineDeployment/a v1.29.0->v1.32.0",
            "KamajiControlPlane/c1 v1.32.0->v1.34.2",
            "MachineDeployment/a v1.32.0->v1.34.2",
        ]
    );
    assert_eq!(p.steps[2].via, ["v1.33.0", "v1.34.2"]);
}

#[test]
fn scopes_control_plane_only_and_workers_only() {
    let docker = Docker::at("v1.30.4", &["a"]);
    let objs = docker.objs();
    let r = UpgradeRequest {
        control_plane_only: true,
        ..req("v1.33.1")
    };
    let p = plan(&objs, &r).unwrap();
    assert_eq!(p.steps.len(), 3);
    assert!(p.steps.iter().all(|s| s.role == StepRole::ControlPlane));
    assert!(!p.blocked);
    // four minors ahead of the workers breaks the skew policy
    let r = UpgradeRequest {
        control_plane_only: true,
        ..req("v1.34.0")
    };
    let p = plan(&objs, &r).unwrap();
    assert!(p.blocked);
    assert!(
        p.findings.iter().any(|f| f.severity == Severity::Error
            && f.message.contains("would be 4 minors behind v1.34.0")),
        "{:?}",
        p.findings
    );

    // workers-only: the control plane is already at the target
    let cp2 = kcp("v1.33.1", "DockerMachineTemplate", "t");
    let objs2 = ClusterObjects {
        control_plane: Some(&cp2),
        ..objs
    };
    let p = plan(
        &objs2,
        &UpgradeRequest {
            workers_only: true,
            ..req("v1.33.1")
        },
    )
    .unwrap();
    assert_eq!(summary(&p), ["MachineDeployment/a v1.30.4->v1.33.1"]);
    let e = plan(
        &objs,
        &UpgradeRequest {
            workers_only: true,
            ..req("v1.31.0")
        },
    )
    .unwrap_err();
    assert!(matches!(e, UpgradeError::WorkersAheadOfControlPlane { .. }));
}

#[test]
fn workers_newer_than_control_plane_is_flagged() {
    let c = cluster();
    let cp = kcp("v1.30.4", "DockerMachineTemplate", "t");
    let mds = docker_mds("v1.31.0", &["a"]);
    let objs = ClusterObjects::of(&c, &cp, &mds, &[]);
    let p = plan(&objs, &req("v1.32.0")).unwrap();
    assert!(p.blocked);
    assert!(p.findings[0].message.contains("must not be newer"));
}

#[test]
fn templates_naming_the_version_are_cloned_in_the_same_patch() {
    let c = cluster();
    let cp = kcp_v1beta1("v1.30.4");
    let mds = vec![md(
        "c1-md-0",
        "v1.30.4",
        2,
        "OpenStackMachineTemplate",
        "c1-md-0",
    )];
    let t = vec![
        image_template("c1-cp-v1-30-4", "ubuntu-2204-kube-v1.30.4"),
        image_template("c1-md-0", "ubuntu-2204-kube-v1.30.4"),
    ];
    let objs = ClusterObjects::of(&c, &cp, &mds, &t);
    let p = plan(&objs, &req("v1.32.1")).unwrap();
    assert_eq!(p.steps.len(), 4);
    let s0 = &p.steps[0];
    let cl = &s0.clone_templates[0];
    assert_eq!(cl.source_name, "c1-cp-v1-30-4");
    assert_eq!(cl.new_name, "c1-cp-v1-31-0");
    assert_eq!(
        cl.object["spec"]["template"]["spec"]["image"]["filter"]["name"],
        "ubuntu-2204-kube-v1.31.0"
    );
    assert_eq!(cl.object["metadata"]["namespace"], "team-a");
    assert!(
        cl.object["metadata"].get("uid").is_none()
            && cl.object["metadata"].get("resourceVersion").is_none()
    );
    assert_eq!(cl.object["metadata"]["annotations"], json!({"team": "a"}));
    assert_eq!(cl.changes[0].path, "/spec/template/spec/image/filter/name");
    // v1beta1 KCP path, version and template in one patch
    assert_eq!(
        s0.patch.merge_patch,
        Some(
            json!({"spec": {"version": "v1.31.0", "machineTemplate": {"infrastructureRef": {"name": "c1-cp-v1-31-0"}}}})
        )
    );
    assert_eq!(s0.patch.json_patch.as_array().unwrap().len(), 2);
    // the next step clones the clone
    let s2 = &p.steps[2];
    assert_eq!(s2.target, "KubeadmControlPlane/c1-cp");
    assert_eq!(s2.clone_templates[0].source_name, "c1-cp-v1-31-0");
    assert_eq!(s2.clone_templates[0].new_name, "c1-cp-v1-32-1");
    // MD template without a version in its name gets a suffix
    let s1 = &p.steps[1];
    assert_eq!(s1.clone_templates[0].new_name, "c1-md-0-v1-31-0");
    assert_eq!(
        s1.patch.changes[1].path,
        "/spec/template/spec/infrastructureRef/name"
    );
    assert_eq!(p.steps[3].clone_templates[0].source_name, "c1-md-0-v1-31-0");
    assert_eq!(p.steps[3].clone_templates[0].new_name, "c1-md-0-v1-32-1");

    // Never: no clones; Always: clone even without a version inside
    let p = plan(
        &objs,
        &UpgradeRequest {
            clone_templates: CloneTemplates::Never,
            ..req("v1.31.0")
        },
    )
    .unwrap();
    assert!(p.steps.iter().all(|s| s.clone_templates.is_empty()));
    let plain = vec![
        image_template("c1-cp-v1-30-4", "ubuntu-2204"),
        image_template("c1-md-0", "ubuntu-2204"),
    ];
    let objs = ClusterObjects {
        infra_templates: &plain,
        ..objs
    };
    let p = plan(&objs, &req("v1.31.0")).unwrap();
    assert!(p.steps.iter().all(|s| s.clone_templates.is_empty()));
    let p = plan(
        &objs,
        &UpgradeRequest {
            clone_templates: CloneTemplates::Always,
            ..req("v1.31.0")
        },
    )
    .unwrap();
    assert_eq!(p.steps[1].clone_templates[0].new_name, "c1-md-0-v1-31-0");
}

#[test]
fn missing_template_is_reported_once() {
    let c = cluster();
    let cp = kcp("v1.30.4", "OpenStackMachineTemplate", "gone");
    let objs = ClusterObjects::of(&c, &cp, &[], &[]);
    let p = plan(&objs, &req("v1.32.0")).unwrap();
    assert_eq!(
        p.findings
            .iter()
            .filter(|f| f.message.contains("was not found"))
            .count(),
        1
    );
}

#[test]
fn byoh_spare_hosts_per_rolling_step() {
    let c = cluster();
    let cp = kcp("v1.30.4", "ByoMachineTemplate", "c1-cp");
    let mut md1 = md("c1-md-1", "v1.30.4", 3, "ByoMachineTemplate", "c1-md-1");
    md1["spec"]["rollout"] = json!({"strategy": {"type": "RollingUpdate", "rollingUpdate": {"maxSurge": 2, "maxUnavailable": 0}}});
    let mut md2 = md("c1-md-2", "v1.30.4", 3, "ByoMachineTemplate", "c1-md-2");
    md2["spec"]["rollout"] = json!({"strategy": {"type": "OnDelete"}});
    let mds = vec![
        md("c1-md-0", "v1.30.4", 3, "ByoMachineTemplate", "c1-md-0"),
        md1,
        md2,
    ];
    let t = vec![
        byo_template("c1-cp", "cp"),
        byo_template("c1-md-0", "worker"),
        byo_template("c1-md-1", "worker"),
        byo_template("c1-md-2", "worker"),
    ];
    let hosts = [host("h1", "cp"), host("h2", "worker")];
    let free: Vec<&Value> = hosts.iter().collect();
    let objs = ClusterObjects::of(&c, &cp, &mds, &t);
    let p = plan_upgrade(&objs, &req("v1.31.0"), &Observed::default(), Some(&free)).unwrap();
    let by_target =
        |t: &str| p.steps.iter().find(|s| s.target == t).unwrap().spare_hosts[0].clone();
    let cp_check = by_target("KubeadmControlPlane/c1-cp");
    assert_eq!(
        (cp_check.needed, cp_check.available, cp_check.ok),
        (1, 1, true)
    );
    let md0 = by_target("MachineDeployment/c1-md-0");
    assert_eq!((md0.needed, md0.available, md0.ok), (1, 1, true));
    let md1c = by_target("MachineDeployment/c1-md-1");
    assert_eq!((md1c.needed, md1c.available, md1c.ok), (2, 1, false));
    assert_eq!(md1c.selector, "role=worker");
    assert!(
        md1c.ways_out
            .iter()
            .any(|w| w.contains("maxSurge 0 and maxUnavailable 1"))
    );
    assert!(md1c.ways_out.iter().any(|w| w.contains("OnDelete")));
    assert!(
        md1c.ways_out.iter().any(|w| w
            == "scale down by 1 first: kubectl capi scale c1 --workers 2 --deployment c1-md-1"),
        "{:?}",
        md1c.ways_out
    );
    let md2c = by_target("MachineDeployment/c1-md-2");
    assert_eq!(md2c.needed, 0);
    assert!(p.blocked);
    assert!(p.findings.iter().any(|f| f.message == "MachineDeployment/c1-md-1: a rolling upgrade needs 2 spare host(s) matching {role=worker}; 1 available"));
    assert!(p.findings.iter().any(|f| f.message.contains("bundles")));
    let forced = plan_upgrade(
        &objs,
        &UpgradeRequest {
            force: true,
            ..req("v1.31.0")
        },
        &Observed::default(),
        Some(&free),
    )
    .unwrap();
    assert!(!forced.blocked);

    // no spare host for the control plane: the way out names maxSurge 0 (3 replicas here)
    let none: Vec<&Value> = vec![];
    let cp_only = UpgradeRequest {
        control_plane_only: true,
        ..req("v1.31.0")
    };
    let without_hosts =
        |objs: &ClusterObjects| plan_upgrade(objs, &cp_only, &Observed::default(), Some(&none));
    let p = without_hosts(&objs).unwrap();
    assert!(p.steps[0].spare_hosts[0].ways_out[0].contains("maxSurge to 0"));
    // with maxSurge 0 the control plane needs no spare
    let mut cp0 = cp.clone();
    cp0["spec"]["rollout"] = json!({"strategy": {"rollingUpdate": {"maxSurge": 0}}});
    let objs0 = ClusterObjects {
        control_plane: Some(&cp0),
        ..objs
    };
    let p = without_hosts(&objs0).unwrap();
    assert!(p.steps[0].spare_hosts[0].ok);
    assert!(!p.blocked);
}

#[test]
fn clusterclass_patches_topology_version_each_minor() {
    let mut c = cluster();
    c["spec"]["topology"] = json!({"classRef": {"name": "quickstart"}, "version": "v1.30.4",
        "controlPlane": {"replicas": 3}, "workers": {"machineDeployments": [{"class": "default-worker", "name": "md-0", "replicas": 2}]}});
    let cp = kcp("v1.30.4", "DockerMachineTemplate", "c1-cp-abc");
    let mds = vec![md(
        "c1-md-0-xyz",
        "v1.30.4",
        2,
        "DockerMachineTemplate",
        "c1-md-0-xyz",
    )];
    let objs = ClusterObjects::of(&c, &cp, &mds, &[]);
    let p = plan(&objs, &req("v1.32.2")).unwrap();
    assert_eq!(
        summary(&p),
        ["Cluster/c1 v1.30.4->v1.31.0", "Cluster/c1 v1.31.0->v1.32.2"]
    );
    assert!(
        p.steps
            .iter()
            .all(|s| s.role == StepRole::Topology && s.patch.kind == "Cluster")
    );
    assert_eq!(
        p.steps[1].patch.merge_patch,
        Some(json!({"spec": {"topology": {"version": "v1.32.2"}}}))
    );
    let scoped = UpgradeRequest {
        workers_only: true,
        ..req("v1.32.2")
    };
    assert!(matches!(
        plan(&objs, &scoped),
        Err(UpgradeError::ScopeWithTopology(_))
    ));
}

#[test]
fn resume_after_interruption() {
    let docker = Docker::at("v1.30.4", &["a", "b"]);
    let objs = docker.objs();
    let plan = plan(&objs, &req("v1.33.1")).unwrap();
    assert_eq!(plan.remaining(&Observed::default()).len(), 9);

    // interrupted during step 5: CP at 1.32, md a rolling (lowest machine still 1.31), b at 1.31
    let machines = vec![
        json!({"metadata": {"name": "cp-1", "labels": {"cluster.x-k8s.io/control-plane-name": "c1-cp"}}, "spec": {"version": "v1.32.0"}}),
        json!({"metadata": {"name": "a-1", "labels": {"cluster.x-k8s.io/deployment-name": "a"}}, "spec": {"version": "v1.32.0"}}),
        json!({"metadata": {"name": "a-2", "labels": {"cluster.x-k8s.io/deployment-name": "a"}}, "spec": {"version": "v1.31.0"}}),
        json!({"metadata": {"name": "b-1", "labels": {"cluster.x-k8s.io/deployment-name": "b"}}, "spec": {"version": "v1.31.0"}}),
    ];
    // the objects' specs already say v1.32.0 for the CP and md a (patched before the interruption)
    let mut cp_now = kcp("v1.32.0", "DockerMachineTemplate", "t");
    cp_now["status"]["version"] = json!("v1.32.0");
    let mut a_now = md("a", "v1.32.0", 2, "DockerMachineTemplate", "a");
    a_now["status"]["versions"] =
        json!([{"version": "v1.32.0", "replicas": 1}, {"version": "v1.31.0", "replicas": 1}]);
    let mds_now = vec![a_now, md("b", "v1.31.0", 1, "DockerMachineTemplate", "b")];
    let objs_now = ClusterObjects::of(&docker.cluster, &cp_now, &mds_now, &[]);
    let observed = Observed::from_objects(&objs_now, &machines);
    assert_eq!(observed.versions["KubeadmControlPlane/c1-cp"], "v1.32.0");
    assert_eq!(observed.versions["MachineDeployment/a"], "v1.31.0");
    let rest = plan.remaining(&observed);
    assert_eq!(
        rest.iter().map(|s| s.number).collect::<Vec<_>>(),
        [5, 6, 7, 8, 9]
    );
    assert_eq!(
        plan.resume_point(&observed).unwrap().target,
        "MachineDeployment/a"
    );

    // re-planning from the live objects gives the same remaining work
    let replanned = plan_upgrade(&objs_now, &req("v1.33.1"), &observed, None).unwrap();
    assert_eq!(
        summary(&replanned),
        [
            "MachineDeployment/a v1.31.0->v1.32.0",
            "MachineDeployment/b v1.31.0->v1.32.0",
            "KubeadmControlPlane/c1-cp v1.32.0->v1.33.1",
            "MachineDeployment/a v1.32.0->v1.33.1",
            "MachineDeployment/b v1.32.0->v1.33.1",
        ]
    );
    // interrupted after the last control-plane step: only the workers remain
    let cp_done = kcp("v1.33.1", "DockerMachineTemplate", "t");
    for strategy in [WorkerStrategy::Lockstep, WorkerStrategy::WithinSkew] {
        let objs_late = ClusterObjects {
            control_plane: Some(&cp_done),
            ..objs_now
        };
        let r = UpgradeRequest {
            worker_strategy: strategy,
            ..req("v1.33.1")
        };
        let mut machines_late = machines.clone();
        machines_late[0]["spec"]["version"] = json!("v1.33.1");
        let observed_late = Observed::from_objects(&objs_late, &machines_late);
        let late = plan_upgrade(&objs_late, &r, &observed_late, None).unwrap();
        assert_eq!(
            summary(&late),
            [
                "MachineDeployment/a v1.31.0->v1.33.1",
                "MachineDeployment/b v1.31.0->v1.33.1"
            ],
            "{strategy:?}"
        );
    }
    // all done
    let mut done = Observed::default();
    for k in [
        "KubeadmControlPlane/c1-cp",
        "MachineDeployment/a",
        "MachineDeployment/b",
    ] {
        done.versions
            .insert(k.into(), parse_version("v1.33.1").unwrap());
    }
    assert!(plan.remaining(&done).is_empty());
    assert!(plan.resume_point(&done).is_none());
}

#[test]
fn plan_serializes() {
    let c = cluster();
    let cp = kamaji("v1.32.0");
    let objs = ClusterObjects::of(&c, &cp, &[], &[]);
    let p = plan(&objs, &req("v1.33.0")).unwrap();
    let v = serde_json::to_value(&p).unwrap();
    assert_eq!(v["steps"][0]["role"], "ControlPlane");
    assert_eq!(v["steps"][0]["steppedByReconciler"], true);
    assert_eq!(v["toVersion"], "v1.33.0");
}

/// A rolling upgrade onto hosts that bring their own Kubernetes needs spares carrying the
/// target minor: a free host of the old minor is not one, and the finding names it.
#[test]
fn byoh_spares_must_carry_the_target_minor() {
    let c = cluster();
    let cp = kcp("v1.30.4", "OpenStackMachineTemplate", "c1-cp");
    let mds = vec![md("c1-md-0", "v1.30.4", 3, "ByoMachineTemplate", "c1-md-0")];
    let t = vec![
        image_template("c1-cp", "img"),
        byo_template("c1-md-0", "worker"),
    ];
    let labelled = |name: &str, v: &str| {
        let mut h = host(name, "worker");
        h["metadata"]["labels"]["capi-kamaji.io/kubernetes-version"] = json!(v);
        h
    };
    let objs = ClusterObjects::of(&c, &cp, &mds, &t);
    let old = [labelled("old-1", "v1.30.4")];
    let free: Vec<&Value> = old.iter().collect();
    let p = plan_upgrade(&objs, &req("v1.31.0"), &Observed::default(), Some(&free)).unwrap();
    assert!(p.blocked);
    let want = "MachineDeployment/c1-md-0: a rolling upgrade needs 1 spare host(s) matching {role=worker} carrying Kubernetes v1.31; 0 available (another Kubernetes on old-1 (v1.30.4))";
    assert!(
        p.findings.iter().any(|f| f.message == want),
        "{:?}",
        p.findings
    );
    let new = [labelled("new-1", "v1.31.2")];
    let free: Vec<&Value> = new.iter().collect();
    let p = plan_upgrade(&objs, &req("v1.31.0"), &Observed::default(), Some(&free)).unwrap();
    let spare = &p
        .steps
        .iter()
        .find(|s| s.target == "MachineDeployment/c1-md-0")
        .unwrap()
        .spare_hosts[0];
    assert_eq!((spare.needed, spare.available, spare.ok), (1, 1, true));
}
