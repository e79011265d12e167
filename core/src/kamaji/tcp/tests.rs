//! Tests of [`build_spec`](super::build_spec).

use super::*;

fn kcp(version: &str) -> KamajiControlPlaneSpec {
    KamajiControlPlaneSpec {
        version: version.into(),
        replicas: Some(2),
        ..Default::default()
    }
}

#[test]
fn version_gets_v_prefix_and_cidrs_are_all_copied() {
    let net = ClusterNetwork {
        api_server_port: Some(7443),
        service_cidrs: vec!["10.96.0.0/16".into(), "fd00::/108".into()],
        pod_cidrs: vec!["10.244.0.0/16".into(), "fd01::/48".into()],
        service_domain: "corp.local".into(),
    };
    let s = build_spec(&kcp("1.33.2"), &net, "1.33.2").unwrap();
    assert_eq!(s["kubernetes"]["version"], "v1.33.2");
    assert_eq!(s["networkProfile"]["port"], 7443);
    assert_eq!(
        s["networkProfile"]["serviceCidrs"],
        json!(["10.96.0.0/16", "fd00::/108"])
    );
    assert_eq!(
        s["networkProfile"]["podCidrs"],
        json!(["10.244.0.0/16", "fd01::/48"])
    );
    assert_eq!(s["networkProfile"]["clusterDomain"], "corp.local");
    assert_eq!(s["controlPlane"]["deployment"]["replicas"], 2);
    assert_eq!(s["controlPlane"]["service"]["serviceType"], "LoadBalancer");
    assert!(s["kubernetes"]["kubelet"].is_object());
}

#[test]
fn ingress_host_goes_to_sans_and_sans_with_port_are_refused() {
    let mut k = kcp("v1.33.0");
    k.fields = KamajiControlPlaneFields {
        network: Some(Box::new(NetworkComponent {
            service_type: "ClusterIP".into(),
            cert_sans: vec!["a.example".into()],
            ingress: Some(IngressComponent {
                hostname: "cp.example:443".into(),
                class_name: "nginx".into(),
                ..Default::default()
            }),
            ..Default::default()
        })),
        ..Default::default()
    };
    let s = build_spec(&k, &ClusterNetwork::default(), "v1.33.0").unwrap();
    assert_eq!(
        s["networkProfile"]["certSANs"],
        json!(["a.example", "cp.example"])
    );
    assert_eq!(s["controlPlane"]["ingress"]["hostname"], "cp.example:443");
    assert_eq!(s["controlPlane"]["ingress"]["ingressClassName"], "nginx");
    assert!(s["networkProfile"].get("clusterDomain").is_none());

    k.fields.network.as_mut().unwrap().cert_sans = vec!["x.example:6443".into()];
    assert_eq!(
        build_spec(&k, &ClusterNetwork::default(), "v1.33.0"),
        Err(BuildError::CertSanWithPort("x.example:6443".into()))
    );
    k.fields.network.as_mut().unwrap().cert_sans = vec![];
    k.fields.network.as_mut().unwrap().gateway = Some(GatewayComponent {
        name: "gw".into(),
        namespace: "ns".into(),
        hostname: "g.example".into(),
        ..Default::default()
    });
    assert_eq!(
        build_spec(&k, &ClusterNetwork::default(), "v1.33.0"),
        Err(BuildError::IngressAndGateway)
    );
}

#[test]
fn empty_addon_blocks_mean_enabled_and_are_kept() {
    let k: KamajiControlPlaneSpec = serde_json::from_value(json!({
        "version": "1.34.1",
        "addons": {"coreDNS": {}, "kubeProxy": {}, "konnectivity": {"server": {"port": 8132}}}
    }))
    .unwrap();
    let s = build_spec(&k, &ClusterNetwork::default(), "v1.34.1").unwrap();
    assert_eq!(s["addons"]["coreDNS"], json!({}));
    assert_eq!(s["addons"]["kubeProxy"], json!({}));
    assert!(s["addons"]["konnectivity"].is_object());
    // Without addon blocks, none is sent.
    let k: KamajiControlPlaneSpec = serde_json::from_value(json!({"version": "1.34.1"})).unwrap();
    let s = build_spec(&k, &ClusterNetwork::default(), "v1.34.1").unwrap();
    assert!(s.get("addons").is_none());
}

#[test]
fn coredns_ips_win_and_probes_are_copied_per_block() {
    let k: KamajiControlPlaneSpec = serde_json::from_value(json!({
        "version": "1.34.1",
        "network": {"dnsServiceIPs": ["10.96.0.10"]},
        "addons": {"coreDNS": {"dnsServiceIPs": ["10.96.0.53"]}},
        "apiServer": {"probes": {"liveness": {"failureThreshold": 5}}, "extraArgs": ["--v=2"]},
        "deployment": {"probes": {"startup": {"periodSeconds": 3}}}
    }))
    .unwrap();
    let s = build_spec(&k, &ClusterNetwork::default(), "v1.34.1").unwrap();
    assert_eq!(s["networkProfile"]["dnsServiceIPs"], json!(["10.96.0.53"]));
    let p = &s["controlPlane"]["deployment"]["probes"];
    assert_eq!(p["apiServer"]["liveness"]["failureThreshold"], 5);
    assert_eq!(p["startup"]["periodSeconds"], 3);
    assert!(p.get("scheduler").is_none());
    assert_eq!(
        s["controlPlane"]["deployment"]["extraArgs"]["apiServer"],
        json!(["--v=2"])
    );
}

/// `create`'s dry run asks Kamaji about the TenantControlPlane the reconciler would create:
/// named and placed as the KamajiControlPlane, at its version, with the Cluster's network.
#[test]
fn the_tenant_control_plane_for_a_kamaji_control_plane_object() {
    let kcp = json!({
        "apiVersion": "controlplane.cluster.x-k8s.io/v1alpha2", "kind": "KamajiControlPlane",
        "metadata": {"name": "lab", "namespace": "team-a"},
        "spec": {"version": "1.35.0", "dataStoreName": "etcd-a", "replicas": 1}
    });
    let cluster =
        json!({"spec": {"clusterNetwork": {"services": {"cidrBlocks": ["10.96.0.0/16"]}}}});
    let t = tcp_for(&kcp, &cluster).unwrap();
    assert_eq!(t["kind"], "TenantControlPlane");
    assert_eq!(t["metadata"], json!({"name": "lab", "namespace": "team-a"}));
    assert_eq!(t["spec"]["kubernetes"]["version"], "v1.35.0");
    assert_eq!(t["spec"]["dataStore"], "etcd-a");
    assert_eq!(
        t["spec"]["networkProfile"]["serviceCidrs"],
        json!(["10.96.0.0/16"])
    );
    // A spec that is not a KamajiControlPlane's is an error, not a guess.
    let bad = json!({"metadata": {"name": "x"}, "spec": {"version": 7}});
    assert!(matches!(
        tcp_for(&bad, &cluster),
        Err(BuildError::UnreadableSpec(_))
    ));
}
