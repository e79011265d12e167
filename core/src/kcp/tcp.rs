//! Pure construction of the Kamaji `TenantControlPlane` from a KamajiControlPlane and its
//! Cluster, and its adaptation to the TenantControlPlane CRD actually installed.

use std::collections::BTreeMap;

use serde_json::{Map, Value, json};

use crate::kcp::api::v1alpha2::KamajiControlPlaneSpec;
use crate::kcp::api::{ControlPlaneComponent, NetworkComponent};

/// Annotation selecting the admin-kubeconfig key copied to `<cluster>-kubeconfig`.
pub const KUBECONFIG_KEY_ANNOTATION: &str = "kamaji.clastix.io/kubeconfig-secret-key";
const LAST_APPLIED: &str = "kubectl.kubernetes.io/last-applied-configuration";

/// The parts of `Cluster.spec.clusterNetwork` the TenantControlPlane uses.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct ClusterNetwork {
    pub api_server_port: Option<i64>,
    pub service_cidrs: Vec<String>,
    pub pod_cidrs: Vec<String>,
    pub service_domain: String,
}

impl ClusterNetwork {
    /// Reads `spec.clusterNetwork` of a Cluster (same shape in v1beta1 and v1beta2).
    pub fn from_cluster(cluster: &Value) -> ClusterNetwork {
        let net = &cluster["spec"]["clusterNetwork"];
        let list = |v: &Value| -> Vec<String> {
            v["cidrBlocks"]
                .as_array()
                .map(|a| {
                    a.iter()
                        .filter_map(|s| s.as_str().map(str::to_string))
                        .collect()
                })
                .unwrap_or_default()
        };
        ClusterNetwork {
            api_server_port: net["apiServerPort"].as_i64().filter(|p| *p != 0),
            service_cidrs: list(&net["services"]),
            pod_cidrs: list(&net["pods"]),
            service_domain: net["serviceDomain"]
                .as_str()
                .unwrap_or_default()
                .to_string(),
        }
    }
}

/// Why a TenantControlPlane cannot be built.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum BuildError {
    #[error(
        "network.certSANs entry {0:?} has a port; a certificate SAN is a host name or IP only (remove \":port\")"
    )]
    CertSanWithPort(String),
    #[error(
        "network.ingress and network.gateway are both set; Kamaji exposes a control plane through one of them only"
    )]
    IngressAndGateway,
}

/// `v`-prefixes a version (`1.33.0` → `v1.33.0`).
pub fn v_prefixed(version: &str) -> String {
    let v = version.trim();
    if v.starts_with('v') {
        v.to_string()
    } else {
        format!("v{v}")
    }
}

fn host_of(hostname: &str) -> String {
    // `host:port` (not an IPv6 literal): keep the host.
    match hostname.rsplit_once(':') {
        Some((h, p)) if !h.contains(':') && p.chars().all(|c| c.is_ascii_digit()) => h.to_string(),
        _ => hostname.to_string(),
    }
}

fn has_port(san: &str) -> bool {
    if let Some(rest) = san.strip_prefix('[') {
        return rest.contains("]:");
    }
    matches!(san.rsplit_once(':'), Some((h, p)) if !h.contains(':') && !p.is_empty() && p.chars().all(|c| c.is_ascii_digit()))
}

fn set(obj: &mut Map<String, Value>, key: &str, v: Value) {
    let empty = match &v {
        Value::Null => true,
        Value::String(s) => s.is_empty(),
        Value::Array(a) => a.is_empty(),
        Value::Object(o) => o.is_empty(),
        _ => false,
    };
    if !empty {
        obj.insert(key.to_string(), v);
    }
}

fn to_value<T: serde::Serialize>(t: &T) -> Value {
    serde_json::to_value(t).unwrap_or(Value::Null)
}

fn child<'a>(obj: &'a mut Map<String, Value>, key: &str) -> &'a mut Map<String, Value> {
    let entry = obj
        .entry(key.to_string())
        .or_insert_with(|| Value::Object(Map::new()));
    if !entry.is_object() {
        *entry = Value::Object(Map::new());
    }
    match entry {
        Value::Object(m) => m,
        // Just replaced by an object above.
        _ => unreachable!("child() always holds an object"),
    }
}

/// Drops empty objects recursively so that nothing is sent empty.
fn prune_empty(v: &mut Value) {
    if let Value::Object(m) = v {
        for c in m.values_mut() {
            prune_empty(c);
        }
        m.retain(|_, c| !matches!(c, Value::Object(o) if o.is_empty()) && !c.is_null());
    }
}

/// Builds the TenantControlPlane `spec` (the newest Kamaji shape, with plural CIDR fields)
/// for `version` (already stepped, `v`-prefixed).
pub fn build_spec(
    kcp: &KamajiControlPlaneSpec,
    net: &ClusterNetwork,
    version: &str,
) -> Result<Value, BuildError> {
    let f = &kcp.fields;
    let network: NetworkComponent = f.network.clone().unwrap_or_else(|| NetworkComponent {
        service_type: "LoadBalancer".into(),
        ..Default::default()
    });
    if network.ingress.is_some() && network.gateway.is_some() {
        return Err(BuildError::IngressAndGateway);
    }
    for san in &network.cert_sans {
        if has_port(san) {
            return Err(BuildError::CertSanWithPort(san.clone()));
        }
    }
    let mut spec = Map::new();
    if !f.data_store_name.is_empty() {
        spec.insert("dataStore".into(), json!(f.data_store_name));
    }
    set(&mut spec, "dataStoreSchema", json!(f.data_store_schema));
    set(&mut spec, "dataStoreUsername", json!(f.data_store_username));
    set(
        &mut spec,
        "dataStoreOverrides",
        to_value(&f.data_store_overrides),
    );

    // networkProfile
    let mut np = Map::new();
    if let Some(p) = net.api_server_port {
        np.insert("port".into(), json!(p));
    }
    set(&mut np, "serviceCidrs", json!(net.service_cidrs));
    set(&mut np, "podCidrs", json!(net.pod_cidrs));
    set(&mut np, "clusterDomain", json!(net.service_domain));
    set(&mut np, "address", json!(network.service_address));
    set(
        &mut np,
        "advertiseAddress",
        json!(network.advertise_address),
    );
    let mut sans = network.cert_sans.clone();
    if let Some(gw) = &network.gateway {
        sans.push(host_of(&gw.hostname));
    }
    if let Some(ing) = &network.ingress {
        sans.push(host_of(&ing.hostname));
    }
    set(&mut np, "certSANs", json!(sans));
    let dns = match f.addons.as_ref().and_then(|a| a.core_dns.as_ref()) {
        Some(c) => c.dns_service_ips.clone(),
        None => network.dns_service_ips.clone(),
    };
    set(&mut np, "dnsServiceIPs", json!(dns));
    if let Some(lb) = &network.load_balancer_config {
        set(
            &mut np,
            "loadBalancerSourceRanges",
            json!(lb.load_balancer_source_ranges),
        );
        if let Some(c) = &lb.load_balancer_class {
            set(&mut np, "loadBalancerClass", json!(c));
        }
    }
    spec.insert("networkProfile".into(), Value::Object(np));

    // kubernetes
    let mut k8s = Map::new();
    k8s.insert("version".into(), json!(v_prefixed(version)));
    let kubelet = f.kubelet.clone().unwrap_or_default();
    let mut kl = Map::new();
    set(
        &mut kl,
        "configurationJSONPatches",
        to_value(&kubelet.configuration_json_patches),
    );
    set(
        &mut kl,
        "preferredAddressTypes",
        json!(kubelet.preferred_address_types),
    );
    set(&mut kl, "cgroupfs", json!(kubelet.cgroupfs));
    // `kubernetes.kubelet` is required by every Kamaji version.
    k8s.insert("kubelet".into(), Value::Object(kl));
    set(
        &mut k8s,
        "admissionControllers",
        json!(f.admission_controllers),
    );
    spec.insert("kubernetes".into(), Value::Object(k8s));

    // addons
    if let Some(a) = &f.addons {
        let mut addons = Map::new();
        if let Some(c) = &a.core_dns {
            let mut m = Map::new();
            set(&mut m, "imageRepository", json!(c.image_repository));
            set(&mut m, "imageTag", json!(c.image_tag));
            addons.insert("coreDNS".into(), Value::Object(m));
        }
        if let Some(k) = &a.kube_proxy {
            addons.insert("kubeProxy".into(), to_value(k));
        }
        if let Some(k) = &a.konnectivity {
            addons.insert("konnectivity".into(), to_value(k));
        }
        spec.insert("addons".into(), Value::Object(addons));
    }

    // controlPlane
    let mut cp = Map::new();
    {
        let dep = child(&mut cp, "deployment");
        if let Some(r) = kcp.replicas {
            dep.insert("replicas".into(), json!(r));
        }
        let comps: [(&str, &Option<ControlPlaneComponent>, &str); 3] = [
            ("apiServer", &f.api_server, "apiServerImage"),
            (
                "controllerManager",
                &f.controller_manager,
                "controllerManagerImage",
            ),
            ("scheduler", &f.scheduler, "schedulerImage"),
        ];
        {
            let reg = child(dep, "registrySettings");
            set(reg, "registry", json!(f.container_registry));
            for (_, c, img) in &comps {
                if let Some(c) = c {
                    set(reg, img, json!(c.container_image_name));
                }
            }
        }
        for (name, c, _) in &comps {
            let Some(c) = c else { continue };
            set(
                child(dep, "additionalVolumeMounts"),
                name,
                to_value(&c.extra_volume_mounts),
            );
            set(child(dep, "extraArgs"), name, json!(c.extra_args));
            if let Some(r) = &c.resources {
                set(child(dep, "resources"), name, to_value(r));
            }
        }
        if let Some(k) = &f.kine {
            set(child(dep, "extraArgs"), "kine", json!(k.extra_args));
            if let Some(r) = &k.resources {
                set(child(dep, "resources"), "kine", to_value(r));
            }
        }
        // Probes: each block independently (upstream required all four).
        let mut probes = Map::new();
        if let Some(p) = f.deployment.as_ref().and_then(|d| d.probes.as_ref()) {
            set(&mut probes, "liveness", to_value(&p.liveness));
            set(&mut probes, "readiness", to_value(&p.readiness));
            set(&mut probes, "startup", to_value(&p.startup));
        }
        for (name, c, _) in &comps {
            if let Some(p) = c.as_ref().and_then(|c| c.probes.as_ref()) {
                set(&mut probes, name, to_value(p));
            }
        }
        set(dep, "probes", Value::Object(probes));
        if let Some(d) = &f.deployment {
            set(dep, "nodeSelector", json!(d.node_selector));
            set(dep, "runtimeClassName", json!(d.runtime_class_name));
            set(dep, "serviceAccountName", json!(d.service_account_name));
            set(dep, "additionalMetadata", to_value(&d.additional_metadata));
            set(
                dep,
                "podAdditionalMetadata",
                to_value(&d.pod_additional_metadata),
            );
            set(dep, "strategy", to_value(&d.strategy));
            set(dep, "affinity", to_value(&d.affinity));
            set(dep, "tolerations", to_value(&d.tolerations));
            set(
                dep,
                "topologySpreadConstraints",
                to_value(&d.topology_spread_constraints),
            );
            set(
                dep,
                "additionalInitContainers",
                to_value(&d.extra_init_containers),
            );
            set(dep, "additionalContainers", to_value(&d.extra_containers));
            set(dep, "additionalVolumes", to_value(&d.extra_volumes));
        }
    }
    {
        let svc = child(&mut cp, "service");
        let st = if network.service_type.is_empty() {
            "LoadBalancer".to_string()
        } else {
            network.service_type.clone()
        };
        svc.insert("serviceType".into(), json!(st));
        let mut md = Map::new();
        set(&mut md, "labels", json!(network.service_labels));
        set(&mut md, "annotations", json!(network.service_annotations));
        set(svc, "additionalMetadata", Value::Object(md));
        set(
            svc,
            "additionalPorts",
            to_value(&network.additional_service_ports),
        );
    }
    if let Some(ing) = &network.ingress {
        let mut m = Map::new();
        set(&mut m, "hostname", json!(ing.hostname));
        set(&mut m, "ingressClassName", json!(ing.class_name));
        let mut md = Map::new();
        set(&mut md, "labels", json!(ing.extra_labels));
        set(&mut md, "annotations", json!(ing.extra_annotations));
        set(&mut m, "additionalMetadata", Value::Object(md));
        cp.insert("ingress".into(), Value::Object(m));
    }
    if let Some(gw) = &network.gateway {
        let mut parent = Map::new();
        parent.insert("name".into(), json!(gw.name));
        parent.insert("namespace".into(), json!(gw.namespace));
        set(&mut parent, "sectionName", json!(gw.section_name));
        if let Some(p) = gw.port {
            parent.insert("port".into(), json!(p));
        }
        let mut m = Map::new();
        m.insert("hostname".into(), json!(host_of(&gw.hostname)));
        m.insert("parentRefs".into(), json!([Value::Object(parent)]));
        let mut md = Map::new();
        set(&mut md, "labels", json!(gw.extra_labels));
        set(&mut md, "annotations", json!(gw.extra_annotations));
        set(&mut m, "additionalMetadata", Value::Object(md));
        cp.insert("gateway".into(), Value::Object(m));
    }
    spec.insert("controlPlane".into(), Value::Object(cp));
    let mut v = Value::Object(spec);
    // For Kamaji an empty addon block means "enabled, with defaults": keep the blocks the
    // KamajiControlPlane has, even when empty, while pruning empty fields inside them.
    let addons: Vec<String> = v["addons"]
        .as_object()
        .map(|m| {
            m.iter()
                .filter(|(_, a)| a.is_object())
                .map(|(k, _)| k.clone())
                .collect()
        })
        .unwrap_or_default();
    prune_empty(&mut v);
    for addon in addons {
        if v["addons"].get(&addon).is_none() {
            v["addons"][&addon] = json!({});
        }
    }
    // `controlPlane.service` and `kubernetes.kubelet` are required; keep them even if empty.
    if v["kubernetes"].get("kubelet").is_none() {
        v["kubernetes"]["kubelet"] = json!({});
    }
    Ok(v)
}

/// Annotations copied from the KCP to the TCP (all but kubectl's last-applied).
pub fn tcp_annotations(kcp_annotations: &BTreeMap<String, String>) -> BTreeMap<String, String> {
    kcp_annotations
        .iter()
        .filter(|(k, _)| k.as_str() != LAST_APPLIED)
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect()
}

/// The outcome of fitting a spec to the installed TenantControlPlane CRD.
#[derive(Debug, Clone, PartialEq)]
pub enum Fit {
    /// The spec fits (after benign renames and drops).
    Ok(Value),
    /// The installed CRD cannot hold what the KamajiControlPlane asks for.
    Unsupported(Vec<String>),
}

/// Values whose loss changes nothing: empty or false values, and Kamaji's own defaults.
fn benign_drop(path: &str, v: &Value) -> bool {
    match v {
        Value::Null | Value::Bool(false) => true,
        Value::String(s) if s.is_empty() => true,
        Value::Array(a) if a.is_empty() => true,
        Value::Object(o) if o.is_empty() => true,
        Value::Number(n) if n.as_i64() == Some(0) && path.ends_with(".replicas") => true,
        Value::String(s) => {
            (path == "spec.networkProfile.clusterDomain" && s == "cluster.local")
                || (path.ends_with("konnectivity.agent.mode") && s == "DaemonSet")
        }
        _ => false,
    }
}

fn prune(v: &mut Value, schema: &Value, path: &str, dropped: &mut Vec<String>) {
    if schema["x-kubernetes-preserve-unknown-fields"] == json!(true)
        && schema.get("properties").is_none()
    {
        return;
    }
    match v {
        Value::Object(m) => {
            if let Some(props) = schema["properties"].as_object() {
                let keys: Vec<String> = m.keys().cloned().collect();
                for k in keys {
                    let p = format!("{path}.{k}");
                    match props.get(&k) {
                        Some(s) => {
                            if let Some(c) = m.get_mut(&k) {
                                prune(c, s, &p, dropped);
                            }
                        }
                        None => {
                            if schema["x-kubernetes-preserve-unknown-fields"] == json!(true) {
                                continue;
                            }
                            if let Some(val) = m.remove(&k)
                                && !benign_drop(&p, &val)
                            {
                                dropped.push(p);
                            }
                        }
                    }
                }
            } else if schema["additionalProperties"].is_object() {
                for (k, c) in m.iter_mut() {
                    prune(
                        c,
                        &schema["additionalProperties"],
                        &format!("{path}.{k}"),
                        dropped,
                    );
                }
            }
        }
        Value::Array(a) if schema["items"].is_object() => {
            for c in a.iter_mut() {
                prune(c, &schema["items"], &format!("{path}[]"), dropped);
            }
        }
        _ => {}
    }
}

/// Fits a TenantControlPlane `spec` (newest shape) to the `spec` schema of the installed CRD:
/// plural CIDR lists become the singular fields when only those exist (a second CIDR, i.e. dual
/// stack, cannot be expressed there and is reported), and fields the CRD does not know are
/// reported unless dropping them changes nothing.
pub fn fit_to_schema(spec: &Value, spec_schema: &Value) -> Fit {
    let mut v = spec.clone();
    let mut unsupported = Vec::new();
    let np_schema = &spec_schema["properties"]["networkProfile"]["properties"];
    for (plural, singular) in [("serviceCidrs", "serviceCidr"), ("podCidrs", "podCidr")] {
        if np_schema.get(plural).is_some() {
            continue;
        }
        let Some(list) = v["networkProfile"]
            .as_object_mut()
            .and_then(|np| np.remove(plural))
        else {
            continue;
        };
        let items: Vec<Value> = list.as_array().cloned().unwrap_or_default();
        if items.len() > 1 {
            unsupported.push(format!(
                "spec.networkProfile.{plural} ({} CIDR blocks, dual stack; the installed Kamaji has only {singular})",
                items.len()
            ));
        }
        if let Some(first) = items.into_iter().next()
            && np_schema.get(singular).is_some()
        {
            v["networkProfile"][singular] = first;
        }
    }
    prune(&mut v, spec_schema, "spec", &mut unsupported);
    if unsupported.is_empty() {
        Fit::Ok(v)
    } else {
        Fit::Unsupported(unsupported)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kcp::api::{GatewayComponent, IngressComponent, KamajiControlPlaneFields};

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
            network: Some(NetworkComponent {
                service_type: "ClusterIP".into(),
                cert_sans: vec!["a.example".into()],
                ingress: Some(IngressComponent {
                    hostname: "cp.example:443".into(),
                    class_name: "nginx".into(),
                    ..Default::default()
                }),
                ..Default::default()
            }),
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
        let k: KamajiControlPlaneSpec =
            serde_json::from_value(json!({"version": "1.34.1"})).unwrap();
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

    fn old_schema() -> Value {
        json!({"properties": {
            "networkProfile": {"properties": {"serviceCidr": {"type": "string"}, "podCidr": {"type": "string"}, "port": {"type": "integer"}}},
            "kubernetes": {"properties": {"version": {"type": "string"}, "kubelet": {"properties": {"cgroupfs": {"type": "string"}}}}},
            "controlPlane": {"properties": {"service": {"properties": {"serviceType": {"type": "string"}}}}}
        }})
    }

    #[test]
    fn fit_maps_single_stack_to_singular_fields() {
        let spec = json!({"networkProfile": {"serviceCidrs": ["10.96.0.0/16"], "podCidrs": ["10.244.0.0/16"], "clusterDomain": "cluster.local"},
            "kubernetes": {"version": "v1.33.0", "kubelet": {"cgroupfs": "systemd"}},
            "controlPlane": {"service": {"serviceType": "ClusterIP"}}});
        let Fit::Ok(v) = fit_to_schema(&spec, &old_schema()) else {
            panic!("should fit")
        };
        assert_eq!(
            v["networkProfile"],
            json!({"serviceCidr": "10.96.0.0/16", "podCidr": "10.244.0.0/16"})
        );
    }

    #[test]
    fn fit_reports_dual_stack_and_unknown_fields_on_an_old_crd() {
        let spec = json!({"networkProfile": {"serviceCidrs": ["10.96.0.0/16", "fd00::/108"]},
            "kubernetes": {"version": "v1.33.0", "kubelet": {}},
            "controlPlane": {"service": {"serviceType": "ClusterIP"}, "gateway": {"hostname": "x"}}});
        let Fit::Unsupported(why) = fit_to_schema(&spec, &old_schema()) else {
            panic!("should not fit")
        };
        assert!(why[0].contains("dual stack"), "{why:?}");
        assert!(
            why.contains(&"spec.controlPlane.gateway".to_string()),
            "{why:?}"
        );
        // A CRD with the plural fields keeps both CIDRs.
        let mut new = old_schema();
        new["properties"]["networkProfile"]["properties"]["serviceCidrs"] =
            json!({"type": "array", "items": {"type": "string"}});
        new["properties"]["controlPlane"]["properties"]["gateway"] =
            json!({"type": "object", "properties": {"hostname": {"type": "string"}}});
        let Fit::Ok(v) = fit_to_schema(&spec, &new) else {
            panic!("should fit")
        };
        assert_eq!(
            v["networkProfile"]["serviceCidrs"],
            json!(["10.96.0.0/16", "fd00::/108"])
        );
    }
}
