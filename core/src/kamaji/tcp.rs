//! Pure construction of the Kamaji `TenantControlPlane` from a KamajiControlPlane and its
//! Cluster, and its adaptation to the TenantControlPlane CRD actually installed.

use std::collections::BTreeMap;

use serde_json::{Map, Value, json};

use super::api::v1alpha2::KamajiControlPlaneSpec;
use super::api::{
    AddonsSpec, ControlPlaneComponent, DEFAULT_SERVICE_TYPE, DeploymentComponent, GatewayComponent,
    IngressComponent, KamajiControlPlaneFields, NetworkComponent,
};
use super::version::v_prefixed;

mod fit;
pub use fit::{Fit, fit_to_schema};

/// Annotation selecting the admin-kubeconfig key copied to `<cluster>-kubeconfig`.
pub const KUBECONFIG_KEY_ANNOTATION: &str = "kamaji.clastix.io/kubeconfig-secret-key";
/// kubectl's copy of the last applied object (client-side apply), as large as the object.
pub const LAST_APPLIED: &str = "kubectl.kubernetes.io/last-applied-configuration";

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
    #[error("the KamajiControlPlane's spec cannot be read: {0}")]
    UnreadableSpec(String),
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

/// The component blocks of `controlPlane.deployment`: (key, component, image key of
/// `registrySettings`).
type Components<'a> = [(
    &'static str,
    &'a Option<Box<ControlPlaneComponent>>,
    &'static str,
); 3];

fn components(f: &KamajiControlPlaneFields) -> Components<'_> {
    [
        ("apiServer", &f.api_server, "apiServerImage"),
        (
            "controllerManager",
            &f.controller_manager,
            "controllerManagerImage",
        ),
        ("scheduler", &f.scheduler, "schedulerImage"),
    ]
}

/// Builds the TenantControlPlane `spec` (the newest Kamaji shape, with plural CIDR fields)
/// for `version` (already stepped, `v`-prefixed).
///
/// One helper per top-level block of Kamaji's `TenantControlPlaneSpec` (dataStore*,
/// networkProfile, kubernetes, addons, controlPlane); empty values are pruned at the end.
pub fn build_spec(
    kcp: &KamajiControlPlaneSpec,
    net: &ClusterNetwork,
    version: &str,
) -> Result<Value, BuildError> {
    let f = &kcp.fields;
    let network: NetworkComponent =
        f.network
            .as_deref()
            .cloned()
            .unwrap_or_else(|| NetworkComponent {
                service_type: DEFAULT_SERVICE_TYPE.into(),
                ..Default::default()
            });
    check_network(&network)?;
    let mut spec = Map::new();
    data_store(f, &mut spec);
    spec.insert(
        "networkProfile".into(),
        Value::Object(network_profile(f, net, &network)),
    );
    spec.insert("kubernetes".into(), Value::Object(kubernetes(f, version)));
    if let Some(a) = &f.addons {
        spec.insert("addons".into(), Value::Object(addons(a)));
    }
    spec.insert(
        "controlPlane".into(),
        Value::Object(control_plane(kcp, &network)),
    );
    Ok(prune_keeping_required(Value::Object(spec)))
}

/// The TenantControlPlane the reconciler creates for a KamajiControlPlane object and its
/// Cluster, both as they are applied: named and placed as the KamajiControlPlane, at its
/// version. For a server dry run that asks the installed Kamaji's own admission webhooks
/// (its version cap, its DataStore checks) before anything is written. Not fitted to the
/// installed CRD: the server prunes, in a dry run, what its schema does not hold.
pub fn tcp_for(kcp: &Value, cluster: &Value) -> Result<Value, BuildError> {
    let spec: KamajiControlPlaneSpec = serde_json::from_value(kcp["spec"].clone())
        .map_err(|e| BuildError::UnreadableSpec(e.to_string()))?;
    let version = v_prefixed(&spec.version);
    let net = ClusterNetwork::from_cluster(cluster);
    Ok(json!({
        "apiVersion": format!("{}/v1alpha1", crate::groups::KAMAJI_GROUP),
        "kind": "TenantControlPlane",
        "metadata": {"name": kcp["metadata"]["name"], "namespace": kcp["metadata"]["namespace"]},
        "spec": build_spec(&spec, &net, &version)?,
    }))
}

/// Refuses what Kamaji cannot express: both an Ingress and a Gateway, a certificate SAN with a port.
fn check_network(network: &NetworkComponent) -> Result<(), BuildError> {
    if network.ingress.is_some() && network.gateway.is_some() {
        return Err(BuildError::IngressAndGateway);
    }
    for san in &network.cert_sans {
        if has_port(san) {
            return Err(BuildError::CertSanWithPort(san.clone()));
        }
    }
    Ok(())
}

/// `dataStore`, `dataStoreSchema`, `dataStoreUsername`, `dataStoreOverrides`.
fn data_store(f: &KamajiControlPlaneFields, spec: &mut Map<String, Value>) {
    if !f.data_store_name.is_empty() {
        spec.insert("dataStore".into(), json!(f.data_store_name));
    }
    set(spec, "dataStoreSchema", json!(f.data_store_schema));
    set(spec, "dataStoreUsername", json!(f.data_store_username));
    set(
        spec,
        "dataStoreOverrides",
        to_value(&f.data_store_overrides),
    );
}

/// `networkProfile`: the Cluster's network plus the KCP's addresses, SANs and load balancer.
fn network_profile(
    f: &KamajiControlPlaneFields,
    net: &ClusterNetwork,
    network: &NetworkComponent,
) -> Map<String, Value> {
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
    // The Gateway's or Ingress's host name must be in the API server certificate too.
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
    np
}

/// `kubernetes`: version, kubelet and admission controllers.
fn kubernetes(f: &KamajiControlPlaneFields, version: &str) -> Map<String, Value> {
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
    k8s
}

/// `addons`: one block per addon the KCP has.
fn addons(a: &AddonsSpec) -> Map<String, Value> {
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
    addons
}

/// `controlPlane`: deployment, service and the optional ingress or gateway.
fn control_plane(kcp: &KamajiControlPlaneSpec, network: &NetworkComponent) -> Map<String, Value> {
    let mut cp = Map::new();
    cp.insert("deployment".into(), Value::Object(deployment(kcp)));
    cp.insert("service".into(), Value::Object(service(network)));
    if let Some(ing) = &network.ingress {
        cp.insert("ingress".into(), Value::Object(ingress(ing)));
    }
    if let Some(gw) = &network.gateway {
        cp.insert("gateway".into(), Value::Object(gateway(gw)));
    }
    cp
}

/// `controlPlane.deployment`: replicas, images, per-component settings, probes and pod settings.
fn deployment(kcp: &KamajiControlPlaneSpec) -> Map<String, Value> {
    let f = &kcp.fields;
    let mut dep = Map::new();
    if let Some(r) = kcp.replicas {
        dep.insert("replicas".into(), json!(r));
    }
    let comps = components(f);
    {
        let reg = child(&mut dep, "registrySettings");
        set(reg, "registry", json!(f.container_registry));
        for (_, c, img) in &comps {
            if let Some(c) = c {
                set(reg, img, json!(c.container_image_name));
            }
        }
    }
    component_settings(f, &comps, &mut dep);
    set(&mut dep, "probes", Value::Object(probes(f, &comps)));
    if let Some(d) = &f.deployment {
        pod_settings(d, &mut dep);
    }
    dep
}

/// Volume mounts, extra arguments and resources of each component (and kine's), keyed by
/// component under `additionalVolumeMounts`, `extraArgs` and `resources`.
fn component_settings(
    f: &KamajiControlPlaneFields,
    comps: &Components<'_>,
    dep: &mut Map<String, Value>,
) {
    for (name, c, _) in comps {
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
}

/// Probes: each block independently (CACPPK v0.20.0, controllers/kamajicontrolplane_controller_tcp.go,
/// sent none unless the deployment, apiServer, controllerManager and scheduler blocks were all set).
fn probes(f: &KamajiControlPlaneFields, comps: &Components<'_>) -> Map<String, Value> {
    let mut probes = Map::new();
    if let Some(p) = f.deployment.as_ref().and_then(|d| d.probes.as_ref()) {
        set(&mut probes, "liveness", to_value(&p.liveness));
        set(&mut probes, "readiness", to_value(&p.readiness));
        set(&mut probes, "startup", to_value(&p.startup));
    }
    for (name, c, _) in comps {
        if let Some(p) = c.as_ref().and_then(|c| c.probes.as_ref()) {
            set(&mut probes, name, to_value(p));
        }
    }
    probes
}

/// The pod-level settings of `deployment`, copied field by field.
fn pod_settings(d: &DeploymentComponent, dep: &mut Map<String, Value>) {
    let fields = [
        ("nodeSelector", json!(d.node_selector)),
        ("runtimeClassName", json!(d.runtime_class_name)),
        ("serviceAccountName", json!(d.service_account_name)),
        ("additionalMetadata", to_value(&d.additional_metadata)),
        (
            "podAdditionalMetadata",
            to_value(&d.pod_additional_metadata),
        ),
        ("strategy", to_value(&d.strategy)),
        ("affinity", to_value(&d.affinity)),
        ("tolerations", to_value(&d.tolerations)),
        (
            "topologySpreadConstraints",
            to_value(&d.topology_spread_constraints),
        ),
        (
            "additionalInitContainers",
            to_value(&d.extra_init_containers),
        ),
        ("additionalContainers", to_value(&d.extra_containers)),
        ("additionalVolumes", to_value(&d.extra_volumes)),
    ];
    for (key, value) in fields {
        set(dep, key, value);
    }
}

/// `additionalMetadata`: extra labels and annotations (empty ones left out).
fn additional_metadata(
    labels: &BTreeMap<String, String>,
    annotations: &BTreeMap<String, String>,
) -> Value {
    let mut md = Map::new();
    set(&mut md, "labels", json!(labels));
    set(&mut md, "annotations", json!(annotations));
    Value::Object(md)
}

/// `controlPlane.service`: type (LoadBalancer unless set), metadata and extra ports.
fn service(network: &NetworkComponent) -> Map<String, Value> {
    let mut svc = Map::new();
    let st = if network.service_type.is_empty() {
        DEFAULT_SERVICE_TYPE.to_string()
    } else {
        network.service_type.clone()
    };
    svc.insert("serviceType".into(), json!(st));
    set(
        &mut svc,
        "additionalMetadata",
        additional_metadata(&network.service_labels, &network.service_annotations),
    );
    set(
        &mut svc,
        "additionalPorts",
        to_value(&network.additional_service_ports),
    );
    svc
}

/// `controlPlane.ingress`.
fn ingress(ing: &IngressComponent) -> Map<String, Value> {
    let mut m = Map::new();
    set(&mut m, "hostname", json!(ing.hostname));
    set(&mut m, "ingressClassName", json!(ing.class_name));
    set(
        &mut m,
        "additionalMetadata",
        additional_metadata(&ing.extra_labels, &ing.extra_annotations),
    );
    m
}

/// `controlPlane.gateway`: one parent reference, the host name without a port.
fn gateway(gw: &GatewayComponent) -> Map<String, Value> {
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
    set(
        &mut m,
        "additionalMetadata",
        additional_metadata(&gw.extra_labels, &gw.extra_annotations),
    );
    m
}

/// Prunes empty values but keeps what must be there even when empty.
fn prune_keeping_required(mut v: Value) -> Value {
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
    v
}

/// Annotations copied from the KCP to the TCP (all but kubectl's last-applied).
pub fn tcp_annotations(kcp_annotations: &BTreeMap<String, String>) -> BTreeMap<String, String> {
    kcp_annotations
        .iter()
        .filter(|(k, _)| k.as_str() != LAST_APPLIED)
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect()
}

#[cfg(test)]
mod tests;
