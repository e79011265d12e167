use crate::kamaji::create::tests::v1beta1;

use super::*;

fn class_spec(infra: Infrastructure) -> CreateSpec {
    CreateSpec {
        name: "kamaji-byoh".into(),
        namespace: "team".into(),
        infrastructure: Some(infra),
        ..Default::default()
    }
}

fn kinds(b: &Built) -> Vec<&str> {
    b.objects
        .iter()
        .map(|o| o["kind"].as_str().unwrap())
        .collect()
}

fn topo_spec() -> CreateSpec {
    CreateSpec {
        name: "c1".into(),
        namespace: "team".into(),
        class: Some("kamaji-byoh".into()),
        kubernetes_version: Some("1.35.4".into()),
        ..Default::default()
    }
}

fn generated_class_info() -> ClassInfo {
    let b = build_class(
        &class_spec(Infrastructure::named("byoh")),
        &Versions::latest(Infrastructure::named("byoh")),
    )
    .unwrap();
    ClassInfo::read(b.objects.last().unwrap())
}

#[test]
fn a_byoh_class_on_v1beta2_references_its_templates_and_names_the_control_plane_after_the_cluster()
{
    let mut s = class_spec(Infrastructure::named("byoh"));
    s.provider_flags.set("--host-selector", "site=ams");
    s.datastore = Some("etcd-a".into());
    let b = build_class(&s, &Versions::latest(Infrastructure::named("byoh"))).unwrap();
    assert_eq!(
        kinds(&b),
        [
            "KamajiControlPlaneTemplate",
            "ByoClusterTemplate",
            "KubeadmConfigTemplate",
            "K8sInstallerConfigTemplate",
            "ByoMachineTemplate",
            "ClusterClass"
        ]
    );
    let kcpt = &b.objects[0];
    assert_eq!(kcpt["apiVersion"], "controlplane.cluster.x-k8s.io/v1alpha2");
    let t = &kcpt["spec"]["template"]["spec"];
    for k in ["version", "replicas", "controlPlaneEndpoint"] {
        assert!(t.get(k).is_none(), "{k} in {t}");
    }
    assert_eq!(t["dataStoreName"], "etcd-a");
    assert_eq!(t["network"]["serviceType"], "LoadBalancer");
    let byoct = &b.objects[1];
    assert_eq!(byoct["spec"]["template"]["spec"], json!({}));
    assert_eq!(
        b.objects[4]["spec"]["template"]["spec"]["selector"],
        json!({"matchLabels": {"site": "ams"}})
    );
    // Class objects carry the class's name, not a cluster's.
    for o in &b.objects {
        let labels = &o["metadata"]["labels"];
        assert_eq!(labels[CLASS_LABEL], "kamaji-byoh", "{o}");
        assert!(labels.get(CLUSTER_NAME_LABEL).is_none(), "{o}");
        assert_eq!(o["metadata"]["namespace"], "team");
    }
    let cc = &b.objects[5];
    assert_eq!(cc["apiVersion"], "cluster.x-k8s.io/v1beta2");
    assert_eq!(
        cc["spec"]["controlPlane"],
        json!({
            "templateRef": {"apiVersion": "controlplane.cluster.x-k8s.io/v1alpha2", "kind": "KamajiControlPlaneTemplate", "name": "kamaji-byoh"},
            "naming": {"template": "{{ .cluster.name }}"},
        })
    );
    assert_eq!(
        cc["spec"]["infrastructure"]["templateRef"]["kind"],
        "ByoClusterTemplate"
    );
    let md = &cc["spec"]["workers"]["machineDeployments"][0];
    assert_eq!(md["class"], WORKER_CLASS);
    assert_eq!(
        md["bootstrap"]["templateRef"],
        json!({"apiVersion": "bootstrap.cluster.x-k8s.io/v1beta2", "kind": "KubeadmConfigTemplate", "name": "kamaji-byoh-worker"})
    );
    assert_eq!(
        md["infrastructure"]["templateRef"]["kind"],
        "ByoMachineTemplate"
    );
    assert_eq!(cc["spec"]["variables"][0]["name"], ADDRESS_VARIABLE);
    let patch = &cc["spec"]["patches"][0];
    assert_eq!(
        patch["enabledIf"],
        "{{ if .controlPlaneAddress }}true{{ end }}"
    );
    assert_eq!(patch["definitions"].as_array().unwrap().len(), 1);
    assert_eq!(
        patch["definitions"][0]["jsonPatches"][0]["path"],
        "/spec/template/spec/network/serviceAddress"
    );
    assert_eq!(ClassInfo::read(cc), generated_class_info());
}

#[test]
fn a_class_on_v1beta1_uses_refs_with_namespaces_and_a_naming_strategy() {
    let mut s = class_spec(Infrastructure::named("byoh"));
    s.provider_flags.switch_on("--preinstalled-hosts");
    let b = build_class(&s, &v1beta1()).unwrap();
    assert!(!kinds(&b).contains(&"K8sInstallerConfigTemplate"));
    let cc = b.objects.last().unwrap();
    assert_eq!(cc["apiVersion"], "cluster.x-k8s.io/v1beta1");
    assert_eq!(
        cc["spec"]["controlPlane"]["ref"],
        json!({"apiVersion": "controlplane.cluster.x-k8s.io/v1alpha1", "kind": "KamajiControlPlaneTemplate", "name": "kamaji-byoh", "namespace": "team"})
    );
    assert_eq!(
        cc["spec"]["controlPlane"]["namingStrategy"]["template"],
        CONTROL_PLANE_NAMING
    );
    let md = &cc["spec"]["workers"]["machineDeployments"][0];
    assert_eq!(
        md["template"]["bootstrap"]["ref"]["apiVersion"],
        "bootstrap.cluster.x-k8s.io/v1beta1"
    );
    assert_eq!(
        md["template"]["infrastructure"]["ref"]["name"],
        "kamaji-byoh-worker"
    );
    let info = ClassInfo::read(cc);
    assert_eq!(info.control_plane_kind, "KamajiControlPlaneTemplate");
    assert_eq!(info.worker_classes, [WORKER_CLASS]);
    assert_eq!(info.variables, [ADDRESS_VARIABLE]);
}

#[test]
fn an_openstack_class_leaves_the_fixed_ip_to_the_variable_and_the_reconciler() {
    let mut s = class_spec(Infrastructure::named("openstack"));
    s.provider_flags.set("--flavor", "m1.large");
    s.provider_flags.set("--image", "ubuntu");
    let b = build_class(&s, &Versions::latest(Infrastructure::named("openstack"))).unwrap();
    let osct = &b.objects[1];
    assert_eq!(osct["kind"], "OpenStackClusterTemplate");
    let t = &osct["spec"]["template"]["spec"];
    assert!(t.get("apiServerFixedIP").is_none() && t.get("apiServerPort").is_none());
    assert_eq!(t["identityRef"]["name"], "kamaji-byoh-cloud-config");
    let defs = &b.objects.last().unwrap()["spec"]["patches"][0]["definitions"];
    assert_eq!(defs[1]["selector"]["kind"], "OpenStackClusterTemplate");
    assert_eq!(
        defs[1]["jsonPatches"][0]["path"],
        "/spec/template/spec/apiServerFixedIP"
    );
    assert!(b.notes.iter().any(|n| n.contains("cloud-config")));
}

#[test]
fn classes_without_an_infrastructure_cluster_or_with_metal3_are_refused() {
    for i in [
        Infrastructure::named("none"),
        Infrastructure::named("metal3"),
    ] {
        let e = build_class(&class_spec(i), &Versions::latest(i)).unwrap_err();
        assert_eq!(e.exit_code(), 2, "{e}");
    }
    let mut s = class_spec(Infrastructure::named("byoh"));
    s.provider_flags.set("--flavor", "x");
    let e = build_class(&s, &Versions::latest(Infrastructure::named("byoh"))).unwrap_err();
    assert!(e.to_string().contains("--flavor"), "{e}");
}

#[test]
fn a_topology_cluster_on_v1beta2_names_the_class_version_replicas_workers_and_address() {
    let mut s = topo_spec();
    s.replicas = Some(1);
    s.workers = Some(2);
    s.service_address = Some("10.0.0.5".into());
    s.port = Some(7443);
    let b = build_topology(
        &s,
        &Versions::latest(Infrastructure::named("none")),
        &generated_class_info(),
    )
    .unwrap();
    assert_eq!(kinds(&b), ["Cluster"]);
    let c = &b.objects[0];
    assert_eq!(c["apiVersion"], "cluster.x-k8s.io/v1beta2");
    assert_eq!(c["metadata"]["labels"][CLUSTER_NAME_LABEL], "c1");
    assert_eq!(
        c["spec"]["topology"],
        json!({
            "classRef": {"name": "kamaji-byoh"},
            "version": "v1.35.4",
            "controlPlane": {"replicas": 1},
            "workers": {"machineDeployments": [{"class": WORKER_CLASS, "name": TOPOLOGY_WORKERS, "replicas": 2}]},
            "variables": [{"name": ADDRESS_VARIABLE, "value": "10.0.0.5"}],
        })
    );
    assert_eq!(c["spec"]["clusterNetwork"]["apiServerPort"], 7443);
    assert!(c["spec"].get("controlPlaneRef").is_none());
    assert_eq!(b.version, "v1.35.4");
}

#[test]
fn a_topology_cluster_on_v1beta1_names_its_class_with_class() {
    let b = build_topology(&topo_spec(), &v1beta1(), &generated_class_info()).unwrap();
    let t = &b.objects[0]["spec"]["topology"];
    assert_eq!(b.objects[0]["apiVersion"], "cluster.x-k8s.io/v1beta1");
    assert_eq!(t["class"], "kamaji-byoh");
    assert!(t.get("classRef").is_none());
    assert_eq!(t["controlPlane"]["replicas"], 2);
    assert_eq!(t["workers"]["machineDeployments"][0]["replicas"], 1);
    assert!(t.get("variables").is_none());
}

#[test]
fn flags_the_class_decides_are_refused_with_class_in_one_usage_line() {
    let mut s = topo_spec();
    s.infrastructure = Some(Infrastructure::named("byoh"));
    let e = check_topology(&s).unwrap_err();
    assert_eq!(e.exit_code(), 2);
    assert!(
        e.to_string()
            .contains("--infrastructure cannot be used with --class"),
        "{e}"
    );
    let mut s = topo_spec();
    s.provider_flags.set("--host-selector", "a=b");
    assert!(
        check_topology(&s)
            .unwrap_err()
            .to_string()
            .contains("--host-selector")
    );
    let mut s = topo_spec();
    s.kubernetes_version = None;
    assert!(
        check_topology(&s)
            .unwrap_err()
            .to_string()
            .contains("--kubernetes-version is required")
    );
    let mut s = topo_spec();
    s.class = Some("Bad_Class".into());
    assert_eq!(check_topology(&s).unwrap_err().exit_code(), 2);
    let mut s = topo_spec();
    s.service_address = Some("not-an-ip".into());
    assert_eq!(check_topology(&s).unwrap_err().exit_code(), 2);
}

#[test]
fn classes_that_cannot_serve_the_flags_are_refused() {
    let v = Versions::latest(Infrastructure::named("none"));
    let kubeadm = ClassInfo {
        name: "kubeadm".into(),
        control_plane_kind: "KubeadmControlPlaneTemplate".into(),
        worker_classes: vec!["w".into()],
        variables: Vec::new(),
    };
    let e = build_topology(&topo_spec(), &v, &kubeadm).unwrap_err();
    assert_eq!(e.exit_code(), 1);
    assert!(e.to_string().contains("KubeadmControlPlaneTemplate"), "{e}");
    let bare = ClassInfo {
        name: "bare".into(),
        control_plane_kind: "KamajiControlPlaneTemplate".into(),
        ..Default::default()
    };
    let mut s = topo_spec();
    s.service_address = Some("10.0.0.5".into());
    let e = build_topology(&s, &v, &bare).unwrap_err();
    assert!(e.to_string().contains(ADDRESS_VARIABLE), "{e}");
    s.service_address = None;
    s.workers = Some(1);
    assert!(
        build_topology(&s, &v, &bare)
            .unwrap_err()
            .to_string()
            .contains("no worker class")
    );
    // Without worker classes and without --workers: a control plane only.
    s.workers = None;
    let b = build_topology(&s, &v, &bare).unwrap();
    assert!(b.objects[0]["spec"]["topology"].get("workers").is_none());
}
/// `--failure-domain` goes on the topology's machineDeployment in both contracts (it
/// overrides the class's); `--cluster-dns` is the class's KubeadmConfigTemplate's to say.
#[test]
fn a_topology_cluster_takes_the_failure_domain_and_refuses_cluster_dns() {
    let mut s = topo_spec();
    s.failure_domain = Some("fd-a".into());
    for v in [Versions::latest(Infrastructure::named("none")), v1beta1()] {
        let b = build_topology(&s, &v, &generated_class_info()).unwrap();
        let md = &b.objects[0]["spec"]["topology"]["workers"]["machineDeployments"][0];
        assert_eq!(md["failureDomain"], "fd-a", "{md}");
        assert_eq!(md["class"], WORKER_CLASS);
    }
    let b = build_topology(&topo_spec(), &v1beta1(), &generated_class_info()).unwrap();
    let md = &b.objects[0]["spec"]["topology"]["workers"]["machineDeployments"][0];
    assert!(md.get("failureDomain").is_none(), "{md}");
    // A class without workers has nowhere to put it.
    let bare = ClassInfo {
        name: "bare".into(),
        control_plane_kind: "KamajiControlPlaneTemplate".into(),
        ..Default::default()
    };
    let e =
        build_topology(&s, &Versions::latest(Infrastructure::named("none")), &bare).unwrap_err();
    assert!(
        e.to_string()
            .contains("no worker class for --failure-domain"),
        "{e}"
    );
    s.failure_domain = Some(String::new());
    let e = check_topology(&s).unwrap_err();
    assert_eq!(e.exit_code(), 2);
    assert_eq!(e.to_string(), "invalid --failure-domain \"\": it is empty");
    let mut s = topo_spec();
    s.cluster_dns = Some("169.254.20.10".into());
    let e = check_topology(&s).unwrap_err();
    assert_eq!(e.exit_code(), 2);
    assert_eq!(
        e.to_string(),
        "--cluster-dns cannot be used with --class: the ClusterClass decides it"
    );
}
/// `generate clusterclass --cluster-dns`: the class's KubeadmConfigTemplate, so every
/// cluster of the class gets it.
#[test]
fn a_class_carries_cluster_dns_in_its_kubeadm_config_template() {
    let mut s = class_spec(Infrastructure::named("byoh"));
    s.cluster_dns = Some("169.254.20.10".into());
    for (v, args) in [
        (
            Versions::latest(Infrastructure::named("byoh")),
            json!([{"name": "cluster-dns", "value": "169.254.20.10"}]),
        ),
        (v1beta1(), json!({"cluster-dns": "169.254.20.10"})),
    ] {
        let b = build_class(&s, &v).unwrap();
        let kct = b
            .objects
            .iter()
            .find(|o| o["kind"] == "KubeadmConfigTemplate")
            .unwrap();
        assert_eq!(
            kct["spec"]["template"]["spec"]["joinConfiguration"]["nodeRegistration"]["kubeletExtraArgs"],
            args
        );
    }
    s.cluster_dns = Some("10.96.0.10/32".into());
    let e = build_class(&s, &v1beta1()).unwrap_err();
    assert_eq!(e.exit_code(), 2);
    assert!(e.to_string().contains("not an IP address"), "{e}");
}
