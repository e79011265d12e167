use super::validate::MAX_FAILURE_DOMAIN_CHARS;
use super::*;
use crate::groups::CapiVersion;

fn spec(infra: Infrastructure) -> CreateSpec {
    CreateSpec {
        name: "prod".into(),
        namespace: "team".into(),
        infrastructure: Some(infra),
        kubernetes_version: Some("1.35.0".into()),
        ..Default::default()
    }
}

/// The shapes of a CAPI 1.10 management cluster: v1beta1 everywhere, KamajiControlPlane
/// v1alpha1.
pub(super) fn v1beta1() -> Versions {
    Versions {
        capi: CapiVersion::V1Beta1,
        kcp: "v1alpha1".into(),
        infra_cluster: "v1beta1".into(),
        infra_template: "v1beta1".into(),
        bootstrap: "v1beta1".into(),
        installer: "v1beta1".into(),
        addons: "v1beta1".into(),
    }
}

/// What `create` builds for BYOH with workers, in apply order.
const BYOH_WORKERS: [&str; 7] = [
    "KamajiControlPlane",
    "ByoCluster",
    "Cluster",
    "KubeadmConfigTemplate",
    "K8sInstallerConfigTemplate",
    "ByoMachineTemplate",
    "MachineDeployment",
];

fn kinds(b: &Built) -> Vec<String> {
    b.all()
        .iter()
        .map(|o| o["kind"].as_str().unwrap().to_string())
        .collect()
}

#[test]
fn none_is_a_control_plane_and_a_cluster() {
    let b = build(
        &spec(Infrastructure::named("none")),
        &Versions::latest(Infrastructure::named("none")),
    )
    .unwrap();
    assert_eq!(kinds(&b), ["KamajiControlPlane", "Cluster"]);
    let kcp = &b.objects[0];
    assert_eq!(kcp["apiVersion"], "controlplane.cluster.x-k8s.io/v1alpha2");
    assert_eq!(kcp["spec"]["version"], "v1.35.0");
    assert_eq!(kcp["spec"]["replicas"], 2);
    assert_eq!(kcp["spec"]["network"]["serviceType"], "LoadBalancer");
    assert_eq!(
        kcp["spec"]["addons"],
        json!({"coreDNS": {}, "kubeProxy": {}, "konnectivity": {}})
    );
    let c = &b.objects[1];
    assert_eq!(
        c["spec"]["controlPlaneRef"],
        json!({"apiGroup": "controlplane.cluster.x-k8s.io", "kind": "KamajiControlPlane", "name": "prod"})
    );
    assert!(c["spec"].get("infrastructureRef").is_none());
    assert_eq!(
        c["spec"]["clusterNetwork"]["pods"]["cidrBlocks"],
        json!(["10.244.0.0/16"])
    );
    assert_eq!(c["metadata"]["labels"][CLUSTER_NAME_LABEL], "prod");
}

#[test]
fn byoh_on_v1beta1_writes_versioned_refs_and_a_host_selector() {
    let mut s = spec(Infrastructure::named("byoh"));
    s.workers = Some(3);
    s.provider_flags.set("--host-selector", "site=ams");
    let v = v1beta1();
    let b = build(&s, &v).unwrap();
    assert_eq!(kinds(&b), BYOH_WORKERS);
    let c = &b.objects[2];
    assert_eq!(c["apiVersion"], "cluster.x-k8s.io/v1beta1");
    assert_eq!(
        c["spec"]["controlPlaneRef"],
        json!({"apiVersion": "controlplane.cluster.x-k8s.io/v1alpha1", "kind": "KamajiControlPlane", "name": "prod", "namespace": "team"})
    );
    let md = &b.objects[6];
    assert_eq!(md["spec"]["replicas"], 3);
    assert_eq!(md["spec"]["template"]["spec"]["version"], "v1.35.0");
    assert_eq!(
        md["spec"]["template"]["spec"]["infrastructureRef"],
        json!({"apiVersion": "infrastructure.cluster.x-k8s.io/v1beta1", "kind": "ByoMachineTemplate", "name": "prod-md-0"})
    );
    assert_eq!(
        b.objects[5]["spec"]["template"]["spec"]["selector"]["matchLabels"]["site"],
        "ams"
    );
}

#[test]
fn a_cni_is_a_labelled_cluster_a_configmap_and_a_resource_set() {
    use crate::build::cni::{CniKind, CniManifest};
    let calico = "apiVersion: apps/v1\nkind: DaemonSet\nmetadata:\n  name: calico-node\nspec:\n  template:\n    spec:\n      containers:\n        - env:\n            # - name: CALICO_IPV4POOL_CIDR\n            #   value: \"192.168.0.0/16\"\n";
    let mut s = spec(Infrastructure::named("byoh"));
    s.pod_cidrs = vec!["10.200.0.0/16".into()];
    s.cni = Some(CniManifest {
        kind: CniKind::Calico,
        source: "https://example.com/calico.yaml".into(),
        text: calico.into(),
    });
    let b = build(&s, &Versions::latest(Infrastructure::named("byoh"))).unwrap();
    assert_eq!(
        kinds(&b)[..5],
        [
            "KamajiControlPlane",
            "ByoCluster",
            "Cluster",
            "ConfigMap",
            "ClusterResourceSet"
        ]
    );
    assert_eq!(b.objects[2]["metadata"]["labels"]["cni"], "calico");
    let data = b.objects[3]["data"]["calico.yaml"].as_str().unwrap();
    assert!(
        data.contains("- name: CALICO_IPV4POOL_CIDR\n              value: \"10.200.0.0/16\""),
        "{data}"
    );
    let crs = &b.objects[4];
    assert_eq!(crs["apiVersion"], "addons.cluster.x-k8s.io/v1beta2");
    // It selects this Cluster: every label it matches is on the Cluster.
    for (k, v) in crs["spec"]["clusterSelector"]["matchLabels"]
        .as_object()
        .unwrap()
    {
        assert_eq!(&b.objects[2]["metadata"]["labels"][k], v, "{k}");
    }
    assert!(
        b.notes.iter().any(|n| n
            == "network plugin Calico v3.31.4 (https://example.com/calico.yaml): in ConfigMap prod-cni and ClusterResourceSet prod-cni, which Cluster API applies in the workload cluster once its API server answers"),
        "{:?}",
        b.notes
    );
    // The Cluster owns them, as it owns the installer template.
    let mut cm = b.objects[3].clone();
    assert!(own_by_cluster(
        &mut cm,
        "cluster.x-k8s.io/v1beta2",
        "prod",
        "u"
    ));

    // None: the Cluster carries no cni label and the preview warns about NotReady nodes.
    let b = build(
        &spec(Infrastructure::named("byoh")),
        &Versions::latest(Infrastructure::named("byoh")),
    )
    .unwrap();
    assert!(b.objects[2]["metadata"]["labels"].get("cni").is_none());
    assert!(
        b.notes
            .iter()
            .any(|n| n.starts_with("no network plugin (--cni none)")),
        "{:?}",
        b.notes
    );
    let mut s = spec(Infrastructure::named("byoh"));
    s.cni_none_explicit = true;
    let b = build(&s, &Versions::latest(Infrastructure::named("byoh"))).unwrap();
    assert!(!b.notes.iter().any(|n| n.contains("network plugin")));

    // A bad manifest fails the build with its one line.
    let mut s = spec(Infrastructure::named("none"));
    s.cni = Some(CniManifest {
        kind: CniKind::Custom,
        source: "cni.yaml".into(),
        text: "hello: world\n".into(),
    });
    let e = build(&s, &Versions::latest(Infrastructure::named("none"))).unwrap_err();
    assert_eq!(
        e.to_string(),
        "--cni-manifest cni.yaml: document 1 is not a Kubernetes object (no apiVersion or kind)"
    );
}

#[test]
fn the_cluster_owns_what_capi_does_not_adopt() {
    let b = build(
        &spec(Infrastructure::named("byoh")),
        &Versions::latest(Infrastructure::named("byoh")),
    )
    .unwrap();
    let mut owned = Vec::new();
    for o in b.all() {
        let mut o = o.clone();
        if own_by_cluster(&mut o, "cluster.x-k8s.io/v1beta2", "prod", "u-1") {
            assert_eq!(
                o["metadata"]["ownerReferences"],
                json!([{"apiVersion": "cluster.x-k8s.io/v1beta2", "kind": "Cluster", "name": "prod", "uid": "u-1"}])
            );
            owned.push(o["kind"].as_str().unwrap().to_string());
        }
    }
    assert_eq!(owned, ["K8sInstallerConfigTemplate"]);
    let mut cm = json!({"kind": "ConfigMap", "metadata": {"name": "x"}});
    assert!(!own_by_cluster(
        &mut cm,
        "cluster.x-k8s.io/v1beta2",
        "prod",
        ""
    ));
    // Kept past the Cluster's deletion: only that owner goes.
    let shared = json!({"metadata": {"ownerReferences": [
        {"apiVersion": "cluster.x-k8s.io/v1beta2", "kind": "Cluster", "name": "prod", "uid": "u-1"},
        {"apiVersion": "cluster.x-k8s.io/v1beta2", "kind": "Cluster", "name": "other", "uid": "u-2"}]}});
    assert_eq!(
        disowned_by_cluster(&shared, "prod"),
        Some(
            json!([{"apiVersion": "cluster.x-k8s.io/v1beta2", "kind": "Cluster", "name": "other", "uid": "u-2"}])
        )
    );
    assert_eq!(disowned_by_cluster(&shared, "gone"), None);
    assert_eq!(disowned_by_cluster(&cm, "prod"), None);
}

#[test]
fn byoh_bundle_flags_and_preinstalled_hosts() {
    let mut s = spec(Infrastructure::named("byoh"));
    s.provider_flags
        .set("--bundle-repo", "registry.example.com/byoh/bundles");
    let b = build(&s, &Versions::latest(Infrastructure::named("byoh"))).unwrap();
    let ict = b
        .objects
        .iter()
        .find(|o| o["kind"] == "K8sInstallerConfigTemplate")
        .unwrap();
    assert_eq!(
        ict["spec"]["template"]["spec"]["bundleRepo"],
        "registry.example.com/byoh/bundles"
    );
    assert_eq!(ict["spec"]["template"]["spec"]["bundleType"], "k8s");
    assert!(
        b.notes[0].contains("registry.example.com/byoh/bundles/byoh-bundle-<os>_k8s:v1.35.0"),
        "{:?}",
        b.notes
    );

    // Pre-installed hosts: no installer template, no installerRef, and the preview says so.
    let mut s = spec(Infrastructure::named("byoh"));
    s.provider_flags.switch_on("--preinstalled-hosts");
    let b = build(&s, &Versions::latest(Infrastructure::named("byoh"))).unwrap();
    assert!(!kinds(&b).contains(&"K8sInstallerConfigTemplate".to_string()));
    let bmt = b
        .objects
        .iter()
        .find(|o| o["kind"] == "ByoMachineTemplate")
        .unwrap();
    assert!(
        bmt["spec"]["template"]["spec"]
            .get("installerRef")
            .is_none()
    );
    assert_eq!(
        b.notes[0],
        "--preinstalled-hosts: no K8sInstallerConfigTemplate and no installerRef; the hosts must have Kubernetes v1.35.0 installed and their agents run with --skip-installation"
    );

    // With 0 workers the templates are still rendered (to scale later), without the note.
    let mut s = spec(Infrastructure::named("byoh"));
    s.workers = Some(0);
    let b = build(&s, &Versions::latest(Infrastructure::named("byoh"))).unwrap();
    assert!(kinds(&b).contains(&"K8sInstallerConfigTemplate".to_string()));
    assert!(b.notes.is_empty(), "{:?}", b.notes);

    let err = |s: &CreateSpec| {
        let e = build(s, &Versions::latest(Infrastructure::named("byoh"))).unwrap_err();
        assert_eq!(e.exit_code(), 2, "{e}");
        e.to_string()
    };
    let mut s = spec(Infrastructure::named("byoh"));
    s.provider_flags.switch_on("--preinstalled-hosts");
    s.provider_flags.set("--bundle-type", "k8s");
    assert_eq!(
        err(&s),
        "--preinstalled-hosts and --bundle-repo/--bundle-type cannot be used together"
    );
    for bad in [
        "https://registry.example.com/b",
        "registry.example.com",
        "r.example.com/b:v1",
        "r.example.com/b/",
    ] {
        let mut s = spec(Infrastructure::named("byoh"));
        s.provider_flags.set("--bundle-repo", bad);
        assert!(err(&s).starts_with("invalid --bundle-repo"), "{bad}");
    }
    let mut s = spec(Infrastructure::named("byoh"));
    s.provider_flags.set("--bundle-type", "rpm");
    assert_eq!(err(&s), "invalid --bundle-type \"rpm\"");
    let mut s = spec(Infrastructure::named("openstack"));
    s.provider_flags.switch_on("--preinstalled-hosts");
    assert_eq!(
        err(&s),
        "--preinstalled-hosts does not apply to --infrastructure openstack"
    );
}

#[test]
fn byoh_workers_get_an_installer_template_and_an_installer_ref() {
    let mut s = spec(Infrastructure::named("byoh"));
    s.workers = Some(2);
    let b = build(&s, &Versions::latest(Infrastructure::named("byoh"))).unwrap();
    assert_eq!(kinds(&b), BYOH_WORKERS);
    let ict = &b.objects[4];
    assert_eq!(ict["apiVersion"], "infrastructure.cluster.x-k8s.io/v1beta1");
    assert_eq!(ict["metadata"]["name"], "prod-md-0");
    assert_eq!(ict["metadata"]["namespace"], "team");
    assert_eq!(
        ict["spec"],
        json!({"template": {"spec": {
            "bundleRepo": "projects.registry.vmware.com/cluster_api_provider_bringyourownhost",
            "bundleType": "k8s"}}})
    );
    // BYOH reads the template from installerRef.namespace: it must be set.
    assert_eq!(
        b.objects[5]["spec"]["template"]["spec"]["installerRef"],
        json!({"apiVersion": "infrastructure.cluster.x-k8s.io/v1beta1",
               "kind": "K8sInstallerConfigTemplate", "name": "prod-md-0", "namespace": "team"})
    );
}

#[test]
fn openstack_without_address_defers_the_cluster_and_fills_it_later() {
    let mut s = spec(Infrastructure::named("openstack"));
    s.provider_flags.set("--flavor", "m1.large");
    s.provider_flags.set("--image", "ubuntu-2404-kube-v1.35.0");
    s.provider_flags.set("--network", "tenant-net");
    let b = build(&s, &Versions::latest(Infrastructure::named("openstack"))).unwrap();
    assert!(
        !kinds(&Built {
            deferred: None,
            ..b.clone()
        })
        .contains(&"OpenStackCluster".to_string())
    );
    let mut osc = b.deferred.clone().unwrap();
    assert_eq!(osc["spec"]["apiServerFixedIP"], "");
    assert_eq!(osc["spec"]["apiServerLoadBalancer"]["enabled"], false);
    assert_eq!(osc["spec"]["network"]["filter"]["name"], "tenant-net");
    fill_openstack_endpoint(&mut osc, "10.0.0.7", 6443);
    assert_eq!(osc["spec"]["apiServerFixedIP"], "10.0.0.7");
    let kct = b
        .objects
        .iter()
        .find(|o| o["kind"] == "KubeadmConfigTemplate")
        .unwrap();
    assert_eq!(
        kct["spec"]["template"]["spec"]["joinConfiguration"]["nodeRegistration"]["kubeletExtraArgs"],
        json!([{"name": "cloud-provider", "value": "external"}])
    );
    // With an address, it is created up front, pre-filled.
    s.service_address = Some("192.0.2.10".into());
    let b = build(&s, &Versions::latest(Infrastructure::named("openstack"))).unwrap();
    assert!(b.deferred.is_none());
    assert_eq!(b.objects[1]["spec"]["apiServerFixedIP"], "192.0.2.10");
    assert_eq!(
        b.objects[0]["spec"]["network"]["serviceAddress"],
        "192.0.2.10"
    );
}

#[test]
fn flags_win_over_the_values_file_which_wins_over_defaults() {
    let mut s = spec(Infrastructure::named("none"));
    s.values = Some(json!({
        "spec": {"replicas": 3, "network": {"serviceType": "NodePort", "serviceAddress": "192.0.2.1"},
                 "deployment": {"nodeSelector": {"kubernetes.io/os": "linux"}},
                 "addons": {"konnectivity": {"server": {"port": 8132}}}}
    }));
    s.cert_sans = vec!["api.example.com".into()];
    s.addons = Some(vec![Addon::CoreDns, Addon::Konnectivity]);
    s.apiserver_args = vec!["audit-log-maxage=30".into()];
    let b = build(&s, &Versions::latest(Infrastructure::named("none"))).unwrap();
    let k = &b.objects[0]["spec"];
    assert_eq!(k["replicas"], 3);
    assert_eq!(k["network"]["serviceType"], "NodePort");
    assert_eq!(k["network"]["certSANs"], json!(["api.example.com"]));
    assert_eq!(k["deployment"]["nodeSelector"]["kubernetes.io/os"], "linux");
    assert_eq!(
        k["addons"],
        json!({"coreDNS": {}, "konnectivity": {"server": {"port": 8132}}})
    );
    assert_eq!(
        k["apiServer"]["extraArgs"],
        json!(["--audit-log-maxage=30"])
    );
    s.replicas = Some(1);
    let b = build(&s, &Versions::latest(Infrastructure::named("none"))).unwrap();
    assert_eq!(b.objects[0]["spec"]["replicas"], 1);
}

#[test]
fn bad_input_gives_usage_errors() {
    let err = |s: &CreateSpec| {
        let e = build(s, &Versions::latest(Infrastructure::named("none"))).unwrap_err();
        assert_eq!(e.exit_code(), 2, "{e}");
        e.to_string()
    };
    let mut s = spec(Infrastructure::named("none"));
    s.name = "Prod_1".into();
    assert!(err(&s).starts_with("invalid name \"Prod_1\""));
    let mut s = spec(Infrastructure::named("none"));
    s.kubernetes_version = Some("1.35".into());
    assert!(err(&s).starts_with("invalid Kubernetes version"));
    let mut s = spec(Infrastructure::named("none"));
    s.workers = Some(2);
    assert_eq!(err(&s), "--workers does not apply to --infrastructure none");
    let mut s = spec(Infrastructure::named("byoh"));
    s.provider_flags.set("--flavor", "x");
    assert_eq!(err(&s), "--flavor does not apply to --infrastructure byoh");
    let mut s = spec(Infrastructure::named("none"));
    s.service_type = Some("NodePort".into());
    assert_eq!(err(&s), "--service-type NodePort needs --service-address");
    let mut s = spec(Infrastructure::named("none"));
    s.cert_sans = vec!["api.example.com:6443".into()];
    assert!(err(&s).starts_with("invalid --cert-san"));
    let mut s = spec(Infrastructure::named("none"));
    s.pod_cidrs = vec!["10.0.0.0/33".into()];
    assert!(err(&s).starts_with("invalid --pod-cidr"));
    let mut s = spec(Infrastructure::named("none"));
    s.admission_controllers = vec!["PodSecurityy".into()];
    let e = build(&s, &Versions::latest(Infrastructure::named("none"))).unwrap_err();
    assert!(e.hint().unwrap().contains("PodSecurity"));
    let s = spec(Infrastructure::named("openstack"));
    assert_eq!(err(&s), "--infrastructure openstack needs --flavor");
    let mut s = spec(Infrastructure::named("metal3"));
    s.provider_flags.set("--image", "http://x/i.img");
    s.provider_flags
        .set("--image-checksum", "http://x/i.img.sha256sum");
    assert_eq!(err(&s), "--infrastructure metal3 needs --service-address");
    assert!(Infrastructure::parse("docker").is_err());
    let mut s = spec(Infrastructure::named("none"));
    s.kubernetes_version = None;
    assert_eq!(err(&s), "--kubernetes-version is required");
}

/// Seed 000: OpenStack workers get cloud.conf and the cloud's CA from a Secret, and kubelet's
/// cloud-config points at the file.
#[test]
fn openstack_workers_get_cloud_conf_and_ca_from_a_secret() {
    let mut s = spec(Infrastructure::named("openstack"));
    s.provider_flags.set("--flavor", "m1.large");
    s.provider_flags.set("--image", "ubuntu");
    s.provider_flags
        .set("--cloud-conf-secret", "prod-cloud-conf");
    s.provider_flags.set("--cloud-ca-key", "cacert");
    let b = build(&s, &Versions::latest(Infrastructure::named("openstack"))).unwrap();
    let kct = b
        .objects
        .iter()
        .find(|o| o["kind"] == "KubeadmConfigTemplate")
        .unwrap();
    let spec = &kct["spec"]["template"]["spec"];
    assert_eq!(
        spec["files"],
        json!([
            {"path": "/etc/kubernetes/cloud.conf", "owner": "root:root", "permissions": "0600",
             "contentFrom": {"secret": {"name": "prod-cloud-conf", "key": "cloud.conf"}}},
            {"path": "/etc/certs/cacert", "owner": "root:root", "permissions": "0600",
             "contentFrom": {"secret": {"name": "prod-cloud-conf", "key": "cacert"}}},
        ])
    );
    assert_eq!(
        spec["joinConfiguration"]["nodeRegistration"]["kubeletExtraArgs"],
        json!([{"name": "cloud-provider", "value": "external"},
               {"name": "cloud-config", "value": "/etc/kubernetes/cloud.conf"}])
    );
    // Only for OpenStack, and the CA key needs the Secret.
    let err = |s: &CreateSpec| {
        let e = build(s, &Versions::latest(Infrastructure::named("openstack"))).unwrap_err();
        assert_eq!(e.exit_code(), 2, "{e}");
        e.to_string()
    };
    let mut byoh = spec_of_byoh_with_cloud_conf();
    assert!(err(&byoh).contains("--cloud-conf-secret/--cloud-ca-key does not apply"));
    byoh.infrastructure = Some(Infrastructure::named("openstack"));
    byoh.provider_flags.set("--flavor", "m1");
    byoh.provider_flags.set("--image", "u");
    byoh.provider_flags.unset("--cloud-conf-secret");
    assert!(err(&byoh).contains("--cloud-ca-key needs --cloud-conf-secret"));
}

fn spec_of_byoh_with_cloud_conf() -> CreateSpec {
    let mut s = spec(Infrastructure::named("byoh"));
    s.provider_flags.set("--cloud-conf-secret", "x");
    s.provider_flags.set("--cloud-ca-key", "cacert");
    s
}

/// The object of `kind` in `b`.
fn object_of<'a>(b: &'a Built, kind: &str) -> &'a Value {
    b.objects.iter().find(|o| o["kind"] == kind).unwrap()
}

/// `--failure-domain` and `--cluster-dns` on BYOH workers: the MachineDeployment's machine
/// template and the kubeadm join configuration, in the shape of each contract.
#[test]
fn failure_domain_and_cluster_dns_reach_the_workers_in_both_contracts() {
    let mut s = spec(Infrastructure::named("byoh"));
    s.failure_domain = Some("fd-a".into());
    s.cluster_dns = Some("169.254.20.10".into());
    let latest = Versions::latest(Infrastructure::named("byoh"));
    for (versions, args) in [
        (
            latest,
            json!([{"name": "cluster-dns", "value": "169.254.20.10"}]),
        ),
        (v1beta1(), json!({"cluster-dns": "169.254.20.10"})),
    ] {
        let b = build(&s, &versions).unwrap();
        assert_eq!(kinds(&b), BYOH_WORKERS);
        let md = object_of(&b, "MachineDeployment");
        assert_eq!(
            md["apiVersion"],
            format!("cluster.x-k8s.io/{}", versions.capi.as_str())
        );
        assert_eq!(md["spec"]["template"]["spec"]["failureDomain"], "fd-a");
        let kct = object_of(&b, "KubeadmConfigTemplate");
        assert_eq!(
            kct["spec"]["template"]["spec"]["joinConfiguration"]["nodeRegistration"]["kubeletExtraArgs"],
            args,
            "{kct}"
        );
    }
    // Without the flags: no failure domain, no join configuration (BYOH adds no kubelet args).
    let b = build(&spec(Infrastructure::named("byoh")), &v1beta1()).unwrap();
    let md = object_of(&b, "MachineDeployment");
    assert!(
        md["spec"]["template"]["spec"]
            .get("failureDomain")
            .is_none()
    );
    let kct = object_of(&b, "KubeadmConfigTemplate");
    assert!(
        kct["spec"]["template"]["spec"]
            .get("joinConfiguration")
            .is_none()
    );
}

/// `--cluster-dns` comes after the provider's own kubelet arguments, and an IPv6 address is
/// written as it parses.
#[test]
fn cluster_dns_follows_the_providers_kubelet_args() {
    let mut s = spec(Infrastructure::named("aws"));
    s.provider_flags.set("--region", "eu-west-1");
    s.provider_flags.set("--flavor", "t3.large");
    s.cluster_dns = Some("FD00:0:0::A".into());
    for (versions, args) in [
        (
            Versions::latest(Infrastructure::named("aws")),
            json!([{"name": "cloud-provider", "value": "external"},
                   {"name": "cluster-dns", "value": "fd00::a"}]),
        ),
        (
            v1beta1(),
            json!({"cloud-provider": "external", "cluster-dns": "fd00::a"}),
        ),
    ] {
        let b = build(&s, &versions).unwrap();
        let kct = object_of(&b, "KubeadmConfigTemplate");
        assert_eq!(
            kct["spec"]["template"]["spec"]["joinConfiguration"]["nodeRegistration"]["kubeletExtraArgs"],
            args
        );
    }
}

#[test]
fn bad_failure_domains_and_cluster_dns_are_usage_errors() {
    let err = |s: &CreateSpec| {
        let e = build(s, &Versions::latest(Infrastructure::named("byoh"))).unwrap_err();
        assert_eq!(e.exit_code(), 2, "{e}");
        assert!(e.hint().is_some(), "{e}");
        e.to_string()
    };
    let with = |fd: Option<&str>, dns: Option<&str>| {
        let mut s = spec(Infrastructure::named("byoh"));
        s.failure_domain = fd.map(str::to_string);
        s.cluster_dns = dns.map(str::to_string);
        s
    };
    assert_eq!(
        err(&with(Some(""), None)),
        "invalid --failure-domain \"\": it is empty"
    );
    let long = "a".repeat(MAX_FAILURE_DOMAIN_CHARS + 1);
    assert_eq!(
        err(&with(Some(&long), None)),
        "invalid --failure-domain: 257 characters, Cluster API takes at most 256"
    );
    // Characters, as the schema's maxLength counts them, not bytes.
    let wide = "é".repeat(MAX_FAILURE_DOMAIN_CHARS);
    let b = build(
        &with(Some(&wide), None),
        &Versions::latest(Infrastructure::named("byoh")),
    )
    .unwrap();
    assert_eq!(
        object_of(&b, "MachineDeployment")["spec"]["template"]["spec"]["failureDomain"],
        wide.as_str()
    );
    for bad in ["not-an-ip", "169.254.20.10/32", "1.2.3", "fe80::1%eth0", ""] {
        assert_eq!(
            err(&with(None, Some(bad))),
            format!("invalid --cluster-dns {bad:?}: not an IP address")
        );
    }
    for nowhere in ["0.0.0.0", "::", "224.0.0.1", "ff02::1"] {
        assert!(
            err(&with(None, Some(nowhere))).ends_with("no DNS server listens there"),
            "{nowhere}"
        );
    }
    // Both need workers.
    let mut s = with(Some("fd-a"), None);
    s.infrastructure = Some(Infrastructure::named("none"));
    assert_eq!(
        err(&s),
        "--failure-domain does not apply to --infrastructure none"
    );
    let mut s = with(None, Some("169.254.20.10"));
    s.infrastructure = Some(Infrastructure::named("none"));
    assert_eq!(
        err(&s),
        "--cluster-dns does not apply to --infrastructure none"
    );
}
