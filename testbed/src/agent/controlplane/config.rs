//! The kubeadm configuration a SIMULATED `kubeadm init` or `kubeadm join --control-plane` is
//! given (kubeadm's `cmd/kubeadm/app/apis/kubeadm/v1beta3` and `v1beta4`, v1.36): the
//! multi-document `/run/kubeadm/kubeadm.yaml` CAPI writes for init (a ClusterConfiguration and
//! an InitConfiguration, `bootstrap/kubeadm/pkg/cloudinit/controlplane_init.go`), the
//! JoinConfiguration with `controlPlane` for a join, and the ClusterConfiguration kubeadm reads
//! back from `kube-system/kubeadm-config` on a join. Only what the SIMULATED control plane
//! uses is read; defaults are kubeadm's (`v1beta4/defaults.go`).

use serde_json::{Map, Value, json};

/// The ClusterConfiguration's group.
const GROUP: &str = "kubeadm.k8s.io";

/// kubeadm's defaults.
const SERVICE_SUBNET: &str = "10.96.0.0/12";
const DNS_DOMAIN: &str = "cluster.local";
const IMAGE_REPOSITORY: &str = "registry.k8s.io";
/// The etcd kubeadm v1.36 runs (`constants.SupportedEtcdVersion`), the testbed's etcd binary.
pub(super) const ETCD_IMAGE_TAG: &str = "3.6.8-0";

/// Extra flags of the four components (`extraArgs`: a map in v1beta3, a list of
/// `{name, value}` in v1beta4).
#[derive(Clone, Debug, Default, PartialEq)]
pub(super) struct Extra {
    pub apiserver: Vec<(String, String)>,
    pub controller_manager: Vec<(String, String)>,
    pub scheduler: Vec<(String, String)>,
    pub etcd: Vec<(String, String)>,
}

/// What the control plane takes from the ClusterConfiguration.
#[derive(Clone, Debug)]
pub(super) struct Cluster {
    /// The document as given (for `kubeadm-config`).
    pub raw: Value,
    /// `controlPlaneEndpoint`: the SIMULATED VIP.
    pub endpoint: String,
    pub version: Option<String>,
    pub service_subnet: String,
    pub pod_subnet: Option<String>,
    pub dns_domain: String,
    pub cluster_name: Option<String>,
    pub cert_sans: Vec<String>,
    pub etcd_server_sans: Vec<String>,
    pub etcd_peer_sans: Vec<String>,
    pub image_repository: String,
    pub etcd_image_tag: String,
    pub extra: Extra,
}

/// What the control plane takes from the InitConfiguration or JoinConfiguration.
#[derive(Clone, Debug, Default)]
pub(super) struct Local {
    /// `nodeRegistration.taints` when set (an empty list: no taint at all).
    pub taints: Option<Value>,
    /// `localAPIEndpoint.bindPort`: the port the apiserver's mirror pod says it listens on.
    pub bind_port: u16,
    /// The InitConfiguration's `bootstrapTokens`.
    pub bootstrap_tokens: Vec<Value>,
    /// A KubeletConfiguration document given beside them.
    pub kubelet: Option<Value>,
}

fn documents(text: &str) -> Result<Vec<Value>, String> {
    let docs: Vec<Value> =
        serde_saphyr::from_multiple(text).map_err(|e| format!("the kubeadm configuration: {e}"))?;
    Ok(docs.into_iter().filter(|d| d.is_object()).collect())
}

fn kind<'a>(docs: &'a [Value], kind: &str) -> Option<&'a Value> {
    docs.iter().find(|d| {
        d["kind"] == kind
            && d["apiVersion"]
                .as_str()
                .is_some_and(|v| v.starts_with(GROUP) || kind == "KubeletConfiguration")
    })
}

fn strings(v: &Value) -> Vec<String> {
    v.as_array()
        .map(|a| {
            a.iter()
                .filter_map(|s| s.as_str().map(String::from))
                .collect()
        })
        .unwrap_or_default()
}

/// `extraArgs` in either form, in order.
pub(super) fn extra_args(v: &Value) -> Vec<(String, String)> {
    match v {
        Value::Object(m) => m.iter().map(|(k, v)| (k.clone(), scalar(v))).collect(),
        Value::Array(a) => a
            .iter()
            .filter_map(|e| Some((e["name"].as_str()?.to_string(), scalar(&e["value"]))))
            .collect(),
        _ => Vec::new(),
    }
}

fn scalar(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        Value::Null => String::new(),
        other => other.to_string(),
    }
}

fn str_or(v: &Value, default: &str) -> String {
    v.as_str()
        .filter(|s| !s.is_empty())
        .unwrap_or(default)
        .to_string()
}

/// Reads a ClusterConfiguration document.
pub(super) fn cluster(doc: &Value) -> Result<Cluster, String> {
    let endpoint = doc["controlPlaneEndpoint"]
        .as_str()
        .filter(|s| !s.is_empty())
        .ok_or("the ClusterConfiguration has no controlPlaneEndpoint (CAPI sets it from the Cluster's)")?
        .to_string();
    let etcd = &doc["etcd"]["local"];
    Ok(Cluster {
        raw: doc.clone(),
        endpoint,
        version: doc["kubernetesVersion"].as_str().map(normal_version),
        service_subnet: str_or(&doc["networking"]["serviceSubnet"], SERVICE_SUBNET),
        pod_subnet: doc["networking"]["podSubnet"]
            .as_str()
            .filter(|s| !s.is_empty())
            .map(String::from),
        dns_domain: str_or(&doc["networking"]["dnsDomain"], DNS_DOMAIN),
        cluster_name: doc["clusterName"].as_str().map(String::from),
        cert_sans: strings(&doc["apiServer"]["certSANs"]),
        etcd_server_sans: strings(&etcd["serverCertSANs"]),
        etcd_peer_sans: strings(&etcd["peerCertSANs"]),
        image_repository: str_or(&doc["imageRepository"], IMAGE_REPOSITORY),
        etcd_image_tag: str_or(&etcd["imageTag"], ETCD_IMAGE_TAG),
        extra: Extra {
            apiserver: extra_args(&doc["apiServer"]["extraArgs"]),
            controller_manager: extra_args(&doc["controllerManager"]["extraArgs"]),
            scheduler: extra_args(&doc["scheduler"]["extraArgs"]),
            etcd: extra_args(&etcd["extraArgs"]),
        },
    })
}

/// `v1.36.3` from `1.36.3` or `v1.36.3`.
pub(super) fn normal_version(v: &str) -> String {
    format!("v{}", v.trim().trim_start_matches('v'))
}

fn local(node_doc: &Value, endpoint: &Value, docs: &[Value]) -> Local {
    let reg = &node_doc["nodeRegistration"];
    Local {
        taints: reg.get("taints").filter(|t| !t.is_null()).cloned(),
        bind_port: endpoint["bindPort"]
            .as_u64()
            .and_then(|p| u16::try_from(p).ok())
            .filter(|p| *p != 0)
            .unwrap_or(6443),
        bootstrap_tokens: node_doc["bootstrapTokens"]
            .as_array()
            .cloned()
            .unwrap_or_default(),
        kubelet: kind(docs, "KubeletConfiguration").cloned(),
    }
}

/// The init file: its ClusterConfiguration and InitConfiguration.
pub(super) fn parse_init(text: &str) -> Result<(Cluster, Local), String> {
    let docs = documents(text)?;
    let cc = kind(&docs, "ClusterConfiguration")
        .ok_or("the kubeadm init configuration has no ClusterConfiguration")?;
    let empty = json!({});
    let init = kind(&docs, "InitConfiguration").unwrap_or(&empty);
    Ok((cluster(cc)?, local(init, &init["localAPIEndpoint"], &docs)))
}

/// The JoinConfiguration of a control-plane join.
pub(super) fn parse_join(text: &str) -> Result<Local, String> {
    let docs = documents(text)?;
    let join = kind(&docs, "JoinConfiguration").ok_or("no JoinConfiguration")?;
    if join["controlPlane"].is_null() {
        return Err("the JoinConfiguration has no controlPlane: a worker join".into());
    }
    Ok(local(
        join,
        &join["controlPlane"]["localAPIEndpoint"],
        &docs,
    ))
}

/// Whether `config` is a JoinConfiguration with `controlPlane` set (`kubeadm join
/// --control-plane`, as CAPI's bootstrap data for a control-plane Machine other than the
/// first one has it).
pub(crate) fn is_control_plane_join(config: &str) -> bool {
    documents(config).is_ok_and(|docs| {
        kind(&docs, "JoinConfiguration").is_some_and(|j| !j["controlPlane"].is_null())
    })
}

/// The ClusterConfiguration as the `upload-config` phase stores it in
/// `kube-system/kubeadm-config`: in kubeadm v1.36's API version (v1beta4; a v1beta3 document's
/// `extraArgs` maps become lists and `apiServer.timeoutForControlPlane` moves out, as kubeadm's
/// conversion does), with kubeadm's defaults filled in and the version it runs.
pub(super) fn upload_text(c: &Cluster, version: &str) -> Result<String, String> {
    let mut doc = c.raw.as_object().cloned().unwrap_or_default();
    doc.insert("apiVersion".into(), json!(format!("{GROUP}/v1beta4")));
    doc.insert("kind".into(), json!("ClusterConfiguration"));
    doc.insert("kubernetesVersion".into(), json!(version));
    doc.insert("controlPlaneEndpoint".into(), json!(c.endpoint));
    for (k, v) in [
        ("certificatesDir", "/etc/kubernetes/pki"),
        ("clusterName", "kubernetes"),
        ("imageRepository", IMAGE_REPOSITORY),
        ("encryptionAlgorithm", "RSA-2048"),
        ("certificateValidityPeriod", "8760h0m0s"),
        ("caCertificateValidityPeriod", "87600h0m0s"),
    ] {
        if doc.get(k).and_then(Value::as_str).is_none_or(str::is_empty) {
            doc.insert(k.into(), json!(v));
        }
    }
    for k in [
        "apiServer",
        "controllerManager",
        "scheduler",
        "dns",
        "proxy",
    ] {
        let part = doc.entry(k).or_insert_with(|| json!({}));
        if !part.is_object() {
            *part = json!({});
        }
        as_list(part);
    }
    if let Some(api) = doc.get_mut("apiServer").and_then(Value::as_object_mut) {
        api.remove("timeoutForControlPlane");
    }
    let net = doc.entry("networking").or_insert_with(|| json!({}));
    if !net.is_object() {
        *net = json!({});
    }
    net["serviceSubnet"] = json!(c.service_subnet);
    net["dnsDomain"] = json!(c.dns_domain);
    let etcd = doc.entry("etcd").or_insert_with(|| json!({}));
    if etcd.get("external").is_none_or(Value::is_null) {
        let local = etcd
            .as_object_mut()
            .map(|e| e.entry("local").or_insert_with(|| json!({})));
        if let Some(local) = local {
            if local["dataDir"].as_str().is_none_or(str::is_empty) {
                local["dataDir"] = json!("/var/lib/etcd");
            }
            as_list(local);
        }
    }
    serde_saphyr::to_string(&Value::Object(doc)).map_err(|e| format!("kubeadm-config: {e}"))
}

/// A component's `extraArgs` as v1beta4's list, sorted by name (as kubeadm converts a map).
fn as_list(part: &mut Value) {
    if let Some(Value::Object(m)) = part.get("extraArgs") {
        let mut list: Vec<(String, String)> =
            m.iter().map(|(k, v)| (k.clone(), scalar(v))).collect();
        list.sort();
        part["extraArgs"] = Value::Array(
            list.into_iter()
                .map(|(name, value)| json!({"name": name, "value": value}))
                .collect(),
        );
    }
}

/// kubeadm's default KubeletConfiguration (`componentconfigs/kubelet.go`, v1.36), as the
/// `kubelet-config` ConfigMap holds it, with a given document's fields over it.
pub(super) fn kubelet_configuration(c: &Cluster, given: Option<&Value>) -> Result<String, String> {
    let mut doc = json!({
        "apiVersion": "kubelet.config.k8s.io/v1beta1",
        "kind": "KubeletConfiguration",
        "authentication": {"anonymous": {"enabled": false},
                           "webhook": {"cacheTTL": "0s", "enabled": true},
                           "x509": {"clientCAFile": "/etc/kubernetes/pki/ca.crt"}},
        "authorization": {"mode": "Webhook",
                          "webhook": {"cacheAuthorizedTTL": "0s", "cacheUnauthorizedTTL": "0s"}},
        "cgroupDriver": "systemd",
        "clusterDNS": [nth_ip(&c.service_subnet, 10).unwrap_or_else(|| "10.96.0.10".into())],
        "clusterDomain": c.dns_domain,
        "containerRuntimeEndpoint": "",
        "healthzBindAddress": "127.0.0.1",
        "healthzPort": 10248,
        "rotateCertificates": true,
        "staticPodPath": "/etc/kubernetes/manifests",
    });
    if let (Some(Value::Object(given)), Some(out)) = (given, doc.as_object_mut()) {
        let given: &Map<String, Value> = given;
        for (k, v) in given {
            out.insert(k.clone(), v.clone());
        }
    }
    serde_saphyr::to_string(&doc).map_err(|e| format!("kubelet-config: {e}"))
}

/// The `n`th address of the first IPv4 CIDR of `subnets` (`10.96.0.0/12`, 1: `10.96.0.1`, the
/// `kubernetes` Service; 10: the cluster DNS).
pub(super) fn nth_ip(subnets: &str, n: u32) -> Option<String> {
    let first = subnets.split(',').next()?.trim();
    let (addr, bits) = first.split_once('/')?;
    let addr: std::net::Ipv4Addr = addr.parse().ok()?;
    let bits: u32 = bits.parse().ok()?;
    let mask = if bits == 0 {
        0
    } else {
        u32::MAX.checked_shl(32 - bits)?
    };
    let base = u32::from(addr) & mask;
    Some(std::net::Ipv4Addr::from(base.checked_add(n)?).to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    const INIT: &str = "---\napiVersion: kubeadm.k8s.io/v1beta3\nkind: ClusterConfiguration\napiServer:\n  certSANs: [cp.example]\n  extraArgs:\n    v: \"2\"\n    audit-log-maxage: \"3\"\n  timeoutForControlPlane: 4m0s\ncontrolPlaneEndpoint: 127.0.0.1:16443\nkubernetesVersion: v1.36.3\nnetworking:\n  serviceSubnet: 10.128.0.0/16\n---\napiVersion: kubeadm.k8s.io/v1beta3\nkind: InitConfiguration\nnodeRegistration:\n  name: a\n  taints: []\n";

    #[test]
    fn the_init_file_is_read_in_either_api_version() {
        let (c, l) = parse_init(INIT).unwrap();
        assert_eq!(c.endpoint, "127.0.0.1:16443");
        assert_eq!(c.version.as_deref(), Some("v1.36.3"));
        assert_eq!(c.cert_sans, ["cp.example"]);
        let mut args = c.extra.apiserver.clone();
        args.sort();
        assert_eq!(
            args,
            [
                ("audit-log-maxage".into(), "3".into()),
                ("v".into(), "2".into())
            ]
        );
        assert_eq!(l.taints, Some(json!([])));
        assert_eq!(l.bind_port, 6443);
        assert_eq!(nth_ip(&c.service_subnet, 1).as_deref(), Some("10.128.0.1"));
        assert_eq!(nth_ip(SERVICE_SUBNET, 10).as_deref(), Some("10.96.0.10"));
        let up: Value = serde_saphyr::from_str(&upload_text(&c, "v1.36.3").unwrap()).unwrap();
        assert_eq!(up["apiVersion"], "kubeadm.k8s.io/v1beta4");
        assert_eq!(
            up["apiServer"]["extraArgs"],
            json!([{"name": "audit-log-maxage", "value": "3"}, {"name": "v", "value": "2"}])
        );
        assert!(up["apiServer"].get("timeoutForControlPlane").is_none());
        assert_eq!(up["etcd"]["local"]["dataDir"], "/var/lib/etcd");
        assert_eq!(up["networking"]["dnsDomain"], "cluster.local");
    }

    #[test]
    fn a_control_plane_join_is_told_from_a_worker_join() {
        let cp = "apiVersion: kubeadm.k8s.io/v1beta4\nkind: JoinConfiguration\ncontrolPlane:\n  localAPIEndpoint:\n    advertiseAddress: 10.0.0.2\n    bindPort: 7443\ndiscovery:\n  bootstrapToken:\n    apiServerEndpoint: 127.0.0.1:1\n    token: a.b\n";
        assert!(is_control_plane_join(cp));
        assert_eq!(parse_join(cp).unwrap().bind_port, 7443);
        let worker = "apiVersion: kubeadm.k8s.io/v1beta4\nkind: JoinConfiguration\ndiscovery:\n  bootstrapToken:\n    apiServerEndpoint: 127.0.0.1:1\n    token: a.b\n";
        assert!(!is_control_plane_join(worker));
        assert!(!is_control_plane_join(INIT));
    }
}
