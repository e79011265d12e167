use super::*;
use crate::groups::CapiVersion;
use crate::kamaji::create::{self as kamaji, Addon, CreateSpec, Infrastructure, Versions};

fn kp(mode: KubeProxyMode, host: &str) -> KubeProxy<'_> {
    KubeProxy {
        mode,
        version: "v1.35.0",
        host,
        port: 6443,
        pod_cidrs: &[],
        image_repository: None,
        image_tag: None,
    }
}

fn spec(mode: Option<KubeProxyMode>) -> CreateSpec {
    CreateSpec {
        name: "prod".into(),
        namespace: "team".into(),
        infrastructure: Some(Infrastructure::named("byoh")),
        kubernetes_version: Some("v1.35.0".into()),
        service_address: Some("192.0.2.10".into()),
        port: Some(7443),
        kube_proxy_mode: mode,
        ..Default::default()
    }
}

/// The tenant objects parsed back from the ClusterResourceSet's ConfigMap, as CAPI reads them.
fn tenant_objects_of(configmap: &Value) -> Vec<Value> {
    let stream = configmap["data"][DATA_KEY].as_str().unwrap();
    stream
        .split("---\n")
        .filter(|d| !d.trim().is_empty())
        .map(|d| serde_saphyr::from_str::<Value>(d).unwrap())
        .collect()
}

#[test]
fn modes_parse_and_bad_ones_are_one_usage_error() {
    assert_eq!(KubeProxyMode::parse("IPVS").unwrap(), KubeProxyMode::Ipvs);
    assert_eq!(
        KubeProxyMode::parse(" nftables ").unwrap(),
        KubeProxyMode::Nftables
    );
    assert!(
        KubeProxyMode::parse("iptables")
            .unwrap()
            .is_kamaji_default()
    );
    let e = KubeProxyMode::parse("userspace").unwrap_err();
    assert!(matches!(e, Error::Usage { .. }), "{e:?}");
    assert_eq!(e.to_string(), "unknown --kube-proxy-mode \"userspace\"");
    assert!(!e.to_string().contains('\n'));
    let old = KubeVersion::parse("v1.30.4").unwrap();
    assert!(KubeProxyMode::Nftables.check_version(&old).is_err());
    assert!(KubeProxyMode::Ipvs.check_version(&old).is_ok());
    let new = KubeVersion::parse("v1.31.0").unwrap();
    assert!(KubeProxyMode::Nftables.check_version(&new).is_ok());
    assert!(ipvs_deprecated("v1.35.0") && !ipvs_deprecated("v1.34.2"));
}

#[test]
fn the_tenant_objects_follow_kubeadms_addon_under_names_kamaji_leaves_alone() {
    let pods = ["10.244.0.0/16".to_string(), "fd00:10:244::/56".to_string()];
    let mut k = kp(KubeProxyMode::Ipvs, "fd00::10");
    k.pod_cidrs = &pods;
    let o = k.tenant_objects().unwrap();
    let kinds: Vec<&str> = o.iter().map(|o| o["kind"].as_str().unwrap()).collect();
    assert_eq!(
        kinds,
        [
            "ServiceAccount",
            "ClusterRoleBinding",
            "ConfigMap",
            "DaemonSet"
        ]
    );
    for x in &o {
        // Kamaji deletes these names in the tenant while its kube-proxy addon is off.
        assert_eq!(x["metadata"]["name"], TENANT_NAME, "{x}");
        assert_ne!(x["metadata"]["name"], "kube-proxy");
        assert_ne!(x["metadata"]["name"], "kubeadm:node-proxier");
    }
    assert_eq!(o[1]["roleRef"]["name"], "system:node-proxier");
    assert_eq!(
        o[1]["subjects"][0],
        json!({"kind": "ServiceAccount", "name": TENANT_NAME, "namespace": "kube-system"})
    );
    let config: Value =
        serde_saphyr::from_str(o[2]["data"]["config.conf"].as_str().unwrap()).unwrap();
    assert_eq!(config["kind"], "KubeProxyConfiguration");
    assert_eq!(config["apiVersion"], "kubeproxy.config.k8s.io/v1alpha1");
    assert_eq!(config["mode"], "ipvs");
    assert_eq!(config["clusterCIDR"], "10.244.0.0/16,fd00:10:244::/56");
    assert_eq!(
        config["clientConnection"]["kubeconfig"],
        "/var/lib/kube-proxy/kubeconfig.conf"
    );
    let kc: Value =
        serde_saphyr::from_str(o[2]["data"]["kubeconfig.conf"].as_str().unwrap()).unwrap();
    assert_eq!(
        kc["clusters"][0]["cluster"]["server"],
        "https://[fd00::10]:6443"
    );
    let pod = &o[3]["spec"]["template"]["spec"];
    assert_eq!(pod["serviceAccountName"], TENANT_NAME);
    assert_eq!(pod["hostNetwork"], true);
    assert_eq!(pod["volumes"][0]["configMap"]["name"], TENANT_NAME);
    assert_eq!(
        pod["containers"][0]["image"],
        "registry.k8s.io/kube-proxy:v1.35.0"
    );
    assert_eq!(
        pod["containers"][0]["command"][1],
        "--config=/var/lib/kube-proxy/config.conf"
    );
    assert_eq!(
        o[3]["spec"]["selector"]["matchLabels"],
        o[3]["spec"]["template"]["metadata"]["labels"]
    );
}

#[test]
fn build_turns_kamajis_addon_off_and_adds_a_labelled_resource_set() {
    let b = kamaji::build(
        &spec(Some(KubeProxyMode::Ipvs)),
        &Versions::latest(Infrastructure::named("byoh")),
    )
    .unwrap();
    let kcp = &b.objects[0];
    assert_eq!(
        kcp["spec"]["addons"],
        json!({"coreDNS": {}, "konnectivity": {}}),
        "Kamaji's kube-proxy addon is off"
    );
    let i = b
        .objects
        .iter()
        .position(|o| o["kind"] == "Cluster")
        .unwrap();
    let cluster = &b.objects[i];
    assert_eq!(cluster["metadata"]["labels"][MODE_LABEL], "ipvs");
    let (cm, crs) = (&b.objects[i + 1], &b.objects[i + 2]);
    assert_eq!(
        (cm["kind"].as_str(), crs["kind"].as_str()),
        (Some("ConfigMap"), Some("ClusterResourceSet"))
    );
    assert_eq!(cm["metadata"]["name"], "prod-kube-proxy");
    // delete finds what create added by these two labels.
    for o in [cm, crs] {
        assert_eq!(o["metadata"]["namespace"], "team");
        let labels = &o["metadata"]["labels"];
        for (k, v) in [
            ("cluster.x-k8s.io/cluster-name", "prod"),
            ("app.kubernetes.io/managed-by", "kubectl-kamaji"),
        ] {
            assert_eq!(labels[k], v, "{k}");
        }
    }
    assert_eq!(
        crs["spec"],
        json!({"strategy": "ApplyOnce",
            "clusterSelector": {"matchLabels": {"cluster.x-k8s.io/cluster-name": "prod", "kube-proxy-mode": "ipvs"}},
            "resources": [{"kind": "ConfigMap", "name": "prod-kube-proxy"}]})
    );
    assert_eq!(crs["apiVersion"], "addons.cluster.x-k8s.io/v1beta2");
    let tenant = tenant_objects_of(cm);
    assert_eq!(tenant.len(), 4);
    let config: Value =
        serde_saphyr::from_str(tenant[2]["data"]["config.conf"].as_str().unwrap()).unwrap();
    assert_eq!(config["mode"], "ipvs");
    assert_eq!(config["clusterCIDR"], "10.244.0.0/16");
    let kc: Value =
        serde_saphyr::from_str(tenant[2]["data"]["kubeconfig.conf"].as_str().unwrap()).unwrap();
    assert_eq!(
        kc["clusters"][0]["cluster"]["server"],
        "https://192.0.2.10:7443"
    );
    // The workers come after, unchanged.
    assert!(
        b.objects[i + 3..]
            .iter()
            .any(|o| o["kind"] == "MachineDeployment")
    );
    assert!(
        b.notes
            .iter()
            .any(|n| n.contains("ClusterResourceSet prod-kube-proxy"))
    );
    assert!(
        b.notes
            .iter()
            .any(|n| n.contains("ip_vs") && n.contains("deprecates ipvs"))
    );
    // The Cluster owns them once it exists, so they go with it.
    assert!(kamaji::OWNED_BY_CLUSTER.contains(&"ConfigMap"));
    assert!(kamaji::OWNED_BY_CLUSTER.contains(&"ClusterResourceSet"));
}

#[test]
fn iptables_and_no_flag_keep_kamajis_addon_and_add_nothing() {
    let v = Versions::latest(Infrastructure::named("byoh"));
    let plain = kamaji::build(&spec(None), &v).unwrap();
    let ipt = kamaji::build(&spec(Some(KubeProxyMode::Iptables)), &v).unwrap();
    assert_eq!(plain.objects, ipt.objects);
    assert_eq!(
        plain.objects[0]["spec"]["addons"]["kubeProxy"],
        json!({}),
        "{}",
        plain.objects[0]
    );
    assert!(
        !plain
            .objects
            .iter()
            .any(|o| o["kind"] == "ClusterResourceSet")
    );
}

#[test]
fn nftables_on_v1beta1_with_the_values_files_image() {
    let mut s = spec(Some(KubeProxyMode::Nftables));
    s.addons = Some(vec![Addon::CoreDns]);
    s.values = Some(json!({"addons": {"kubeProxy": {"imageRepository": "mirror.example/k8s/"}}}));
    let v = Versions {
        capi: CapiVersion::V1Beta1,
        kcp: "v1alpha1".into(),
        addons: "v1beta1".into(),
        ..Versions::latest(Infrastructure::named("byoh"))
    };
    let b = kamaji::build(&s, &v).unwrap();
    assert_eq!(b.objects[0]["spec"]["addons"], json!({"coreDNS": {}}));
    let crs = b
        .objects
        .iter()
        .find(|o| o["kind"] == "ClusterResourceSet")
        .unwrap();
    assert_eq!(crs["apiVersion"], "addons.cluster.x-k8s.io/v1beta1");
    let cm = b
        .objects
        .iter()
        .find(|o| o["metadata"]["name"] == "prod-kube-proxy" && o["kind"] == "ConfigMap")
        .unwrap();
    let tenant = tenant_objects_of(cm);
    assert_eq!(
        tenant[3]["spec"]["template"]["spec"]["containers"][0]["image"],
        "mirror.example/k8s/kube-proxy:v1.35.0"
    );
    assert!(!b.notes.iter().any(|n| n.contains("ip_vs")));
}

#[test]
fn contradictions_are_usage_errors_before_building() {
    let v = Versions::latest(Infrastructure::named("byoh"));
    let err = |s: CreateSpec| match kamaji::build(&s, &v) {
        Err(Error::Usage { message, .. }) => message,
        other => panic!("{other:?}"),
    };
    let mut s = spec(Some(KubeProxyMode::Ipvs));
    s.service_address = None;
    assert_eq!(err(s), "--kube-proxy-mode ipvs needs --service-address");
    let mut s = spec(Some(KubeProxyMode::Ipvs));
    s.addons = Some(Addon::ALL.to_vec());
    assert!(err(s).contains("--addons cannot name kube-proxy"));
    let mut s = spec(Some(KubeProxyMode::Iptables));
    s.addons = Some(vec![]);
    assert!(err(s).contains("which --addons leaves out"));
    let mut s = spec(Some(KubeProxyMode::Nftables));
    s.kubernetes_version = Some("v1.30.2".into());
    assert!(err(s).contains("needs Kubernetes v1.31"));
    let mut s = spec(Some(KubeProxyMode::Ipvs));
    s.class = Some("c".into());
    s.infrastructure = None;
    assert!(
        kamaji::check_topology(&s)
            .unwrap_err()
            .to_string()
            .contains("--kube-proxy-mode cannot be used with --class")
    );
}
