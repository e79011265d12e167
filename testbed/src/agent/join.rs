//! SIMULATED `kubeadm join` and kubelet of a BYOH host, against a live tenant API server.
//!
//! The host's OS work (installing packages, running kubeadm, a container runtime) cannot run
//! here, but everything a joining kubelet says to the API server is done for real, in the order
//! kubeadm and the kubelet do it:
//! 1. read the JoinConfiguration that CAPI's kubeadm bootstrap provider wrote into the
//!    bootstrap secret's cloud-config (`/run/kubeadm/kubeadm-join-config.yaml`);
//! 2. fetch the cluster CA from `kube-public/cluster-info` (kubeadm's token discovery; the
//!    `caCertHashes` pin is not checked here: no X.509 parser in the testbed);
//! 3. TLS bootstrap: post a CertificateSigningRequest for `system:node:<host>` with the bootstrap
//!    token, and wait for the tenant's kube-controller-manager to approve and sign it;
//! 4. as `system:node:<host>`, create the Node, report its status and renew its Lease every
//!    10 s, as a kubelet's heartbeat does.
//!
//! The Node is Ready only once a network add-on would have written a CNI configuration, that is
//! when a DaemonSet that mounts `/etc/cni/net.d` exists in the tenant (its pods cannot run here);
//! until then it reports the kubelet's own NotReady message for a missing network plugin.

use std::time::Duration;

use base64::Engine;
use k8s_openapi::api::apps::v1::DaemonSet;
use k8s_openapi::api::certificates::v1::CertificateSigningRequest;
use k8s_openapi::api::core::v1::{ConfigMap, Node};
use kube::api::{Api, ListParams, Patch, PatchParams, PostParams};
use kube::config::{KubeConfigOptions, Kubeconfig};
use kube::{Client, Config};
use serde_json::{Value, json};

/// What `kubeadm join` reads from the bootstrap data.
#[derive(Clone, Debug, PartialEq)]
pub struct JoinConfig {
    pub endpoint: String,
    pub token: String,
}

/// A joined node's credentials.
#[derive(Clone)]
pub struct Joined {
    pub endpoint: String,
    pub ca_pem: String,
    pub cert_pem: String,
    pub key_pem: String,
}

/// The message a kubelet reports while no CNI configuration exists (kubelet's runtime network
/// check, as printed by `kubectl describe node`).
pub const NO_CNI_MESSAGE: &str = "container runtime network not ready: NetworkReady=false reason:NetworkPluginNotReady message:Network plugin returns error: cni plugin not initialized";

/// Reads the JoinConfiguration from a cloud-config bootstrap script.
pub fn parse_bootstrap(cloud_config: &str) -> Option<JoinConfig> {
    let doc: Value = serde_saphyr::from_str(cloud_config).ok()?;
    let files = doc["write_files"].as_array()?;
    let file = files.iter().find(|f| {
        f["path"]
            .as_str()
            .is_some_and(|p| p.ends_with("kubeadm-join-config.yaml"))
    })?;
    let mut content = file["content"].as_str()?.to_string();
    if file["encoding"]
        .as_str()
        .is_some_and(|e| e.contains("b64") || e.contains("base64"))
    {
        let bytes = base64::engine::general_purpose::STANDARD
            .decode(content.trim())
            .ok()?;
        content = String::from_utf8(bytes).ok()?;
    }
    parse_join_configuration(&content)
}

/// Reads a kubeadm JoinConfiguration (the file `kubeadm join --config` is given).
pub fn parse_join_configuration(yaml: &str) -> Option<JoinConfig> {
    let join: Value = serde_saphyr::from_str(yaml).ok()?;
    let bt = &join["discovery"]["bootstrapToken"];
    Some(JoinConfig {
        endpoint: bt["apiServerEndpoint"].as_str()?.to_string(),
        token: bt["token"].as_str()?.to_string(),
    })
}

fn base_config(endpoint: &str) -> Result<Config, String> {
    let url = format!("https://{endpoint}")
        .parse::<http::Uri>()
        .map_err(|e| format!("endpoint {endpoint}: {e}"))?;
    let mut c = Config::new(url);
    c.connect_timeout = Some(Duration::from_secs(3));
    c.read_timeout = Some(Duration::from_secs(10));
    Ok(c)
}

fn client(c: Config) -> Result<Client, String> {
    Client::try_from(c).map_err(|e| e.to_string())
}

/// Steps 2 to 4 up to the Node's creation. Takes a few seconds on a live tenant.
pub async fn join(cfg: &JoinConfig, host: &str) -> Result<Joined, String> {
    let ca_pem = cluster_ca(cfg).await?;
    let (cert_pem, key_pem) = tls_bootstrap(cfg, &ca_pem, host).await?;
    let joined = Joined {
        endpoint: cfg.endpoint.clone(),
        ca_pem,
        cert_pem,
        key_pem,
    };
    register_node(&joined, host).await?;
    Ok(joined)
}

/// Step 2: the cluster CA from `kube-public/cluster-info`, read anonymously (kubeadm's
/// discovery reads it before trusting the server).
async fn cluster_ca(cfg: &JoinConfig) -> Result<String, String> {
    let mut anon = base_config(&cfg.endpoint)?;
    anon.accept_invalid_certs = true;
    let info = Api::<ConfigMap>::namespaced(client(anon)?, "kube-public")
        .get("cluster-info")
        .await
        .map_err(|e| format!("kube-public/cluster-info: {e}"))?;
    let kc = info
        .data
        .as_ref()
        .and_then(|d| d.get("kubeconfig"))
        .ok_or("cluster-info has no kubeconfig")?;
    let kc: Value = serde_saphyr::from_str(kc).map_err(|e| format!("cluster-info: {e}"))?;
    let ca_b64 = kc["clusters"][0]["cluster"]["certificate-authority-data"]
        .as_str()
        .ok_or("cluster-info has no CA")?;
    String::from_utf8(
        base64::engine::general_purpose::STANDARD
            .decode(ca_b64)
            .map_err(|e| format!("cluster-info CA: {e}"))?,
    )
    .map_err(|e| format!("cluster-info CA: {e}"))
}

/// Step 3: the TLS bootstrap with the bootstrap token: posts a kubelet client CSR and waits
/// for it to be signed. Returns the certificate and the private key, as PEM.
async fn tls_bootstrap(
    cfg: &JoinConfig,
    ca_pem: &str,
    host: &str,
) -> Result<(String, String), String> {
    let mut boot = base_config(&cfg.endpoint)?;
    boot.root_cert = Some(vec![pem_der(ca_pem)?]);
    boot.auth_info.token = Some(cfg.token.clone().into());
    let boot = client(boot)?;
    let (key, csr_pem) = node_csr(host)?;
    let csrs: Api<CertificateSigningRequest> = Api::all(boot);
    let csr: CertificateSigningRequest = serde_json::from_value(json!({
        "metadata": {"generateName": "node-csr-"},
        "spec": {"request": base64::engine::general_purpose::STANDARD.encode(csr_pem.as_bytes()),
                 "signerName": "kubernetes.io/kube-apiserver-client-kubelet",
                 "usages": ["digital signature", "client auth"]}}))
    .map_err(|e| e.to_string())?;
    let created = csrs
        .create(&PostParams::default(), &csr)
        .await
        .map_err(|e| format!("posting the kubelet CSR: {e}"))?;
    let csr_name = created.metadata.name.unwrap_or_default();
    let cert_pem = signed_certificate(&csrs, &csr_name).await?;
    Ok((cert_pem, key.serialize_pem()))
}

/// A fresh key and a certificate request for `system:node:<host>` in group `system:nodes`.
fn node_csr(host: &str) -> Result<(rcgen::KeyPair, String), String> {
    let key = rcgen::KeyPair::generate().map_err(|e| e.to_string())?;
    let mut params =
        rcgen::CertificateParams::new(Vec::<String>::new()).map_err(|e| e.to_string())?;
    params.distinguished_name = rcgen::DistinguishedName::new();
    params
        .distinguished_name
        .push(rcgen::DnType::CommonName, format!("system:node:{host}"));
    params
        .distinguished_name
        .push(rcgen::DnType::OrganizationName, "system:nodes");
    let csr_pem = params
        .serialize_request(&key)
        .map_err(|e| e.to_string())?
        .pem()
        .map_err(|e| e.to_string())?;
    Ok((key, csr_pem))
}

/// Waits (up to 60 s) for the CSR's certificate.
async fn signed_certificate(
    csrs: &Api<CertificateSigningRequest>,
    csr_name: &str,
) -> Result<String, String> {
    let deadline = std::time::Instant::now() + Duration::from_secs(60);
    loop {
        let c = csrs
            .get(csr_name)
            .await
            .map_err(|e| format!("CSR {csr_name}: {e}"))?;
        if let Some(cert) = c.status.and_then(|s| s.certificate) {
            return String::from_utf8(cert.0).map_err(|e| e.to_string());
        }
        if std::time::Instant::now() > deadline {
            return Err(format!(
                "CSR {csr_name} was not approved and signed within 60s (the tenant's kube-controller-manager approves kubelet CSRs)"
            ));
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
}

/// Step 4: the kubelet registers its Node (one left from an earlier join is fine).
pub(crate) async fn register_node(joined: &Joined, host: &str) -> Result<(), String> {
    let nodes: Api<Node> = Api::all(node_client(joined).await?);
    let node: Node = serde_json::from_value(json!({"metadata": {"name": host, "labels": {
        "kubernetes.io/hostname": host, "kubernetes.io/os": "linux", "kubernetes.io/arch": "amd64",
        "beta.kubernetes.io/os": "linux", "beta.kubernetes.io/arch": "amd64"}}}))
    .map_err(|e| e.to_string())?;
    match nodes.create(&PostParams::default(), &node).await {
        Ok(_) => Ok(()),
        Err(kube::Error::Api(s)) if s.code == 409 => Ok(()),
        Err(e) => Err(format!("registering Node {host}: {e}")),
    }
}

/// A client as `system:node:<host>`.
pub async fn node_client(j: &Joined) -> Result<Client, String> {
    let kc = format!(
        "apiVersion: v1\nkind: Config\nclusters:\n- name: t\n  cluster:\n    server: https://{}\n    certificate-authority-data: {}\nusers:\n- name: n\n  user:\n    client-certificate-data: {}\n    client-key-data: {}\ncontexts:\n- name: c\n  context: {{cluster: t, user: n}}\ncurrent-context: c\n",
        j.endpoint,
        b64(&j.ca_pem),
        b64(&j.cert_pem),
        b64(&j.key_pem)
    );
    let kc = Kubeconfig::from_yaml(&kc).map_err(|e| e.to_string())?;
    let mut c = Config::from_custom_kubeconfig(kc, &KubeConfigOptions::default())
        .await
        .map_err(|e| e.to_string())?;
    c.connect_timeout = Some(Duration::from_secs(3));
    c.read_timeout = Some(Duration::from_secs(10));
    client(c)
}

fn b64(s: &str) -> String {
    base64::engine::general_purpose::STANDARD.encode(s.as_bytes())
}

fn pem_der(pem: &str) -> Result<Vec<u8>, String> {
    let body: String = pem.lines().filter(|l| !l.starts_with("-----")).collect();
    base64::engine::general_purpose::STANDARD
        .decode(body.trim())
        .map_err(|e| format!("CA PEM: {e}"))
}

/// A key of a Secret, as text.
pub(crate) async fn secret_value(
    admin: &Client,
    ns: &str,
    name: &str,
    key: &str,
) -> Result<String, String> {
    let s = Api::<k8s_openapi::api::core::v1::Secret>::namespaced(admin.clone(), ns)
        .get(name)
        .await
        .map_err(|e| format!("secret {ns}/{name}: {e}"))?;
    s.data
        .and_then(|d| {
            d.get(key)
                .map(|b| String::from_utf8_lossy(&b.0).to_string())
        })
        .ok_or_else(|| format!("secret {ns}/{name} has no {key}"))
}

/// An admin client of the workload cluster ByoHost `h` serves (`<cluster>-kubeconfig`), for
/// the SIMULATED check of whether a network add-on runs there.
pub(crate) async fn tenant_admin(admin: &Client, h: &kube::api::DynamicObject) -> Option<Client> {
    let cluster = crate::meta::label(h, crate::fixtures::CLUSTER_NAME)?;
    let ns = h.data["status"]["machineRef"]["namespace"].as_str()?;
    let text = secret_value(admin, ns, &format!("{cluster}-kubeconfig"), "value")
        .await
        .ok()?;
    let kc = Kubeconfig::from_yaml(&text).ok()?;
    let config = Config::from_custom_kubeconfig(kc, &KubeConfigOptions::default())
        .await
        .ok()?;
    Client::try_from(config).ok()
}

/// Whether a network add-on would have configured CNI on the node: a DaemonSet in the tenant
/// that mounts `/etc/cni/net.d` (Calico, Cilium, Flannel and the rest all do).
pub async fn cni_present(tenant_admin: &Client) -> bool {
    let Ok(list) = Api::<DaemonSet>::all(tenant_admin.clone())
        .list(&ListParams::default())
        .await
    else {
        return false;
    };
    list.items.iter().any(|ds| {
        ds.spec
            .as_ref()
            .and_then(|s| s.template.spec.as_ref())
            .and_then(|p| p.volumes.as_ref())
            .is_some_and(|vols| {
                vols.iter().any(|v| {
                    v.host_path
                        .as_ref()
                        .is_some_and(|h| h.path.trim_end_matches('/') == "/etc/cni/net.d")
                })
            })
    })
}

/// One kubelet heartbeat: the Node's status (Ready or the no-CNI NotReady, the port of its
/// SIMULATED kubelet API when it serves one) and its Lease.
pub async fn heartbeat(
    j: &Joined,
    host: &str,
    version: &str,
    ip: &str,
    cni: bool,
    kubelet_port: Option<u16>,
) -> Result<(), String> {
    let c = node_client(j).await?;
    let now = crate::meta::now();
    let ready = if cni {
        json!({"type": "Ready", "status": "True", "reason": "KubeletReady",
               "message": "kubelet is posting ready status (SIMULATED)", "lastHeartbeatTime": now, "lastTransitionTime": now})
    } else {
        json!({"type": "Ready", "status": "False", "reason": "KubeletNotReady",
               "message": NO_CNI_MESSAGE, "lastHeartbeatTime": now, "lastTransitionTime": now})
    };
    let pressure = |t: &str, r: &str| {
        json!({"type": t, "status": "False", "reason": r,
        "lastHeartbeatTime": now, "lastTransitionTime": now})
    };
    let mut status = json!({"status": {
        "conditions": [pressure("MemoryPressure", "KubeletHasSufficientMemory"),
                       pressure("DiskPressure", "KubeletHasNoDiskPressure"),
                       pressure("PIDPressure", "KubeletHasSufficientPID"), ready],
        "addresses": [{"type": "InternalIP", "address": ip}, {"type": "Hostname", "address": host}],
        "capacity": {"cpu": "4", "memory": "16Gi", "pods": "110"},
        "allocatable": {"cpu": "4", "memory": "16Gi", "pods": "110"},
        "nodeInfo": {"kubeletVersion": version, "kubeProxyVersion": "", "operatingSystem": "linux",
                     "architecture": "amd64", "osImage": "Ubuntu 22.04.4 LTS (SIMULATED)",
                     "kernelVersion": "", "containerRuntimeVersion": "containerd://1.7 (SIMULATED)",
                     "machineID": "", "systemUUID": "", "bootID": ""}}});
    if let Some(port) = kubelet_port {
        status["status"]["daemonEndpoints"] = json!({"kubeletEndpoint": {"Port": port}});
    }
    Api::<Node>::all(c.clone())
        .patch_status(host, &PatchParams::default(), &Patch::Merge(&status))
        .await
        .map_err(|e| format!("Node {host} status: {e}"))?;
    let lease = json!({"apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
        "metadata": {"name": host, "namespace": "kube-node-lease"},
        "spec": {"holderIdentity": host, "leaseDurationSeconds": 40,
                 "renewTime": crate::meta::now_micro()}});
    Api::<k8s_openapi::api::coordination::v1::Lease>::namespaced(c, "kube-node-lease")
        .patch(
            host,
            &PatchParams::apply("kubelet").force(),
            &Patch::Apply(&lease),
        )
        .await
        .map_err(|e| format!("Lease {host}: {e}"))?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_the_join_configuration_from_cloud_config() {
        let cc = "## template: jinja\n#cloud-config\nwrite_files:\n- path: /etc/kubernetes/pki/ca.crt\n  content: x\n- path: /run/kubeadm/kubeadm-join-config.yaml\n  owner: root:root\n  permissions: '0640'\n  content: |\n    apiVersion: kubeadm.k8s.io/v1beta4\n    kind: JoinConfiguration\n    discovery:\n      bootstrapToken:\n        apiServerEndpoint: 127.0.0.1:16443\n        caCertHashes:\n        - sha256:abc\n        token: abcdef.0123456789abcdef\nruncmd:\n- kubeadm join --config /run/kubeadm/kubeadm-join-config.yaml\n";
        assert_eq!(
            parse_bootstrap(cc),
            Some(JoinConfig {
                endpoint: "127.0.0.1:16443".into(),
                token: "abcdef.0123456789abcdef".into()
            })
        );
        assert_eq!(parse_bootstrap("#cloud-config\nruncmd: []\n"), None);
    }
}
