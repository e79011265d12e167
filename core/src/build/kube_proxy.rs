//! The kube-proxy `kubectl kamaji create --kube-proxy-mode ipvs|nftables` installs in the
//! workload cluster.
//!
//! Kamaji v1.0.0's TenantControlPlane has no proxy mode: `spec.addons.kubeProxy` holds only
//! `imageRepository` and `imageTag` (the CRD in clastix/kamaji v1.0.0), and its addon runs
//! kubeadm's proxy phase, whose KubeProxyConfiguration leaves `mode` empty, which kube-proxy
//! takes as `iptables` on Linux. So `iptables` is Kamaji's addon as it is, and another mode
//! turns that addon off and hands Cluster API a kube-proxy of our own: a ConfigMap in the
//! management cluster holding the tenant objects, and a ClusterResourceSet (ApplyOnce, as for
//! the network plugin) selecting the Cluster by its cluster-name and [`MODE_LABEL`] labels.
//!
//! The tenant objects follow kubeadm's proxy addon (kubernetes, `cmd/kubeadm/app/phases/addons/
//! proxy/manifests.go`, v1.35): a ServiceAccount bound to the `system:node-proxier`
//! ClusterRole, a ConfigMap with `config.conf` (the KubeProxyConfiguration) and
//! `kubeconfig.conf` (the control-plane endpoint itself: the `kubernetes` Service is what
//! kube-proxy implements, so it cannot be reached through it), and the DaemonSet running
//! `registry.k8s.io/kube-proxy` at the cluster's version. They are named [`TENANT_NAME`], not
//! `kube-proxy`: while its addon is off, Kamaji's kube-proxy controller deletes the
//! ServiceAccount, Role, RoleBinding, ConfigMap and DaemonSet named `kube-proxy` and the
//! ClusterRoleBinding `kubeadm:node-proxier` in the tenant on every reconciliation
//! (clastix/kamaji v1.0.0, `internal/resources/addons/kube_proxy.go`, `CleanUp`).
//!
//! This module is pure: it builds the objects; `kamaji::build` decides when.

use serde_json::{Value, json};

use crate::Error;
use crate::version::KubeVersion;

/// The Cluster label the ClusterResourceSet selects on (with the cluster-name label).
pub(crate) const MODE_LABEL: &str = "kube-proxy-mode";
/// The name of the ServiceAccount, ClusterRoleBinding, ConfigMap and DaemonSet in the tenant's
/// `kube-system`.
pub(crate) const TENANT_NAME: &str = "capi-kube-proxy";
/// The namespace of the tenant objects.
pub(crate) const TENANT_NAMESPACE: &str = "kube-system";
/// Kubernetes' bootstrap ClusterRole for kube-proxy (kubeadm binds it the same way).
pub(crate) const NODE_PROXIER_ROLE: &str = "system:node-proxier";
/// The image registry of kube-proxy when the values file names none (Kamaji's and kubeadm's).
pub(crate) const DEFAULT_REGISTRY: &str = "registry.k8s.io";
/// The key of the management-cluster ConfigMap holding the tenant objects.
pub(crate) const DATA_KEY: &str = "kube-proxy.yaml";
/// The first Kubernetes minor whose kube-proxy runs `nftables` without a feature gate (beta,
/// on by default, in v1.31; GA in v1.33).
pub(crate) const NFTABLES_SINCE_MINOR: u64 = 31;
/// The first Kubernetes minor whose kube-proxy deprecates `ipvs` (it logs and records a
/// warning at start: kubernetes, `cmd/kube-proxy/app/server_linux.go`, v1.35).
pub(crate) const IPVS_DEPRECATED_SINCE_MINOR: u64 = 35;

/// Whether kube-proxy at `version` (`v1.35.0`) deprecates `ipvs`.
pub(crate) fn ipvs_deprecated(version: &str) -> bool {
    KubeVersion::parse(version).is_ok_and(|v| v.minor >= IPVS_DEPRECATED_SINCE_MINOR)
}

/// kube-proxy's proxy mode.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum KubeProxyMode {
    Iptables,
    Ipvs,
    Nftables,
}

impl KubeProxyMode {
    pub const ALL: [KubeProxyMode; 3] = [
        KubeProxyMode::Iptables,
        KubeProxyMode::Ipvs,
        KubeProxyMode::Nftables,
    ];

    /// The flag spelling, which is also KubeProxyConfiguration's `mode`.
    pub fn as_str(self) -> &'static str {
        match self {
            KubeProxyMode::Iptables => "iptables",
            KubeProxyMode::Ipvs => "ipvs",
            KubeProxyMode::Nftables => "nftables",
        }
    }

    /// Kamaji's kube-proxy addon runs this mode; the others come through a ClusterResourceSet.
    pub(crate) fn is_kamaji_default(self) -> bool {
        self == KubeProxyMode::Iptables
    }

    /// Parses `--kube-proxy-mode`; the error names the accepted values.
    pub fn parse(s: &str) -> Result<KubeProxyMode, Error> {
        let want = s.trim().to_ascii_lowercase();
        KubeProxyMode::ALL
            .into_iter()
            .find(|m| m.as_str() == want)
            .ok_or_else(|| Error::Usage {
                message: format!("unknown --kube-proxy-mode {s:?}"),
                hint: Some("use iptables (Kamaji's kube-proxy addon), ipvs or nftables".into()),
            })
    }

    /// Refuses a mode the cluster's Kubernetes version cannot run without a feature gate.
    pub fn check_version(self, version: &KubeVersion) -> Result<(), Error> {
        if self == KubeProxyMode::Nftables && version.minor < NFTABLES_SINCE_MINOR {
            return Err(Error::Usage {
                message: format!(
                    "--kube-proxy-mode nftables needs Kubernetes v1.{NFTABLES_SINCE_MINOR} or later, not {version}"
                ),
                hint: Some("use ipvs or iptables, or a newer --kubernetes-version".into()),
            });
        }
        Ok(())
    }
}

/// What the tenant's kube-proxy is built from.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct KubeProxy<'a> {
    pub mode: KubeProxyMode,
    /// The cluster's Kubernetes version (`v1.35.0`): the image tag unless `image_tag` is set.
    pub version: &'a str,
    /// The control-plane endpoint kube-proxy talks to.
    pub host: &'a str,
    pub port: u16,
    /// The pod CIDRs (KubeProxyConfiguration's `clusterCIDR`, comma separated).
    pub pod_cidrs: &'a [String],
    /// The image registry (default [`DEFAULT_REGISTRY`]).
    pub image_repository: Option<&'a str>,
    pub image_tag: Option<&'a str>,
}

impl KubeProxy<'_> {
    /// `https://host:port`, an IPv6 host in brackets.
    pub fn server(&self) -> String {
        if self.host.contains(':') && !self.host.starts_with('[') {
            format!("https://[{}]:{}", self.host, self.port)
        } else {
            format!("https://{}:{}", self.host, self.port)
        }
    }

    /// The image the DaemonSet runs.
    pub fn image(&self) -> String {
        format!(
            "{}/kube-proxy:{}",
            self.image_repository
                .unwrap_or(DEFAULT_REGISTRY)
                .trim_end_matches('/'),
            self.image_tag.unwrap_or(self.version)
        )
    }

    /// The KubeProxyConfiguration (`config.conf`).
    pub fn configuration(&self) -> Value {
        let mut c = json!({
            "apiVersion": "kubeproxy.config.k8s.io/v1alpha1",
            "kind": "KubeProxyConfiguration",
            "mode": self.mode.as_str(),
            "bindAddress": "0.0.0.0",
            "clientConnection": {"kubeconfig": "/var/lib/kube-proxy/kubeconfig.conf"},
        });
        if !self.pod_cidrs.is_empty() {
            c["clusterCIDR"] = json!(self.pod_cidrs.join(","));
        }
        c
    }

    /// kube-proxy's kubeconfig (`kubeconfig.conf`): the endpoint, the ServiceAccount's token
    /// and the cluster CA as the kubelet mounts them.
    fn kubeconfig(&self) -> Value {
        json!({
            "apiVersion": "v1",
            "kind": "Config",
            "clusters": [{"name": "default", "cluster": {
                "certificate-authority": "/var/run/secrets/kubernetes.io/serviceaccount/ca.crt",
                "server": self.server(),
            }}],
            "contexts": [{"name": "default", "context": {"cluster": "default", "namespace": "default", "user": "default"}}],
            "current-context": "default",
            "users": [{"name": "default", "user": {"tokenFile": "/var/run/secrets/kubernetes.io/serviceaccount/token"}}],
        })
    }

    /// The tenant objects: ServiceAccount, ClusterRoleBinding, ConfigMap, DaemonSet.
    pub(crate) fn tenant_objects(&self) -> Result<Vec<Value>, Error> {
        let labels = json!({"k8s-app": "kube-proxy", "app.kubernetes.io/name": TENANT_NAME});
        let meta = json!({"name": TENANT_NAME, "namespace": TENANT_NAMESPACE, "labels": labels});
        let sa = json!({"apiVersion": "v1", "kind": "ServiceAccount", "metadata": meta});
        let crb = json!({
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "ClusterRoleBinding",
            "metadata": {"name": TENANT_NAME, "labels": labels},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": NODE_PROXIER_ROLE},
            "subjects": [{"kind": "ServiceAccount", "name": TENANT_NAME, "namespace": TENANT_NAMESPACE}],
        });
        let cm = json!({
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": meta,
            "data": {
                "config.conf": to_yaml(&self.configuration())?,
                "kubeconfig.conf": to_yaml(&self.kubeconfig())?,
            },
        });
        Ok(vec![sa, crb, cm, self.daemon_set(&meta)])
    }

    /// kubeadm's kube-proxy DaemonSet, with our names.
    fn daemon_set(&self, meta: &Value) -> Value {
        let sel = json!({"k8s-app": "kube-proxy", "app.kubernetes.io/name": TENANT_NAME});
        json!({
            "apiVersion": "apps/v1",
            "kind": "DaemonSet",
            "metadata": meta,
            "spec": {
                "selector": {"matchLabels": sel},
                "updateStrategy": {"type": "RollingUpdate"},
                "template": {
                    "metadata": {"labels": sel},
                    "spec": {
                        "priorityClassName": "system-node-critical",
                        "hostNetwork": true,
                        "serviceAccountName": TENANT_NAME,
                        "nodeSelector": {"kubernetes.io/os": "linux"},
                        "tolerations": [{"operator": "Exists"}],
                        "containers": [{
                            "name": "kube-proxy",
                            "image": self.image(),
                            "imagePullPolicy": "IfNotPresent",
                            "command": [
                                "/usr/local/bin/kube-proxy",
                                "--config=/var/lib/kube-proxy/config.conf",
                                "--hostname-override=$(NODE_NAME)",
                            ],
                            "env": [{"name": "NODE_NAME", "valueFrom": {"fieldRef": {"fieldPath": "spec.nodeName"}}}],
                            "securityContext": {"privileged": true},
                            "volumeMounts": [
                                {"name": "kube-proxy", "mountPath": "/var/lib/kube-proxy"},
                                {"name": "xtables-lock", "mountPath": "/run/xtables.lock", "readOnly": false},
                                {"name": "lib-modules", "mountPath": "/lib/modules", "readOnly": true},
                            ],
                        }],
                        "volumes": [
                            {"name": "kube-proxy", "configMap": {"name": TENANT_NAME}},
                            {"name": "xtables-lock", "hostPath": {"path": "/run/xtables.lock", "type": "FileOrCreate"}},
                            {"name": "lib-modules", "hostPath": {"path": "/lib/modules"}},
                        ],
                    },
                },
            },
        })
    }
}

fn to_yaml(v: &Value) -> Result<String, Error> {
    serde_saphyr::to_string(v).map_err(|e| Error::Other {
        message: format!("cannot write kube-proxy's objects as YAML: {e}"),
        hint: None,
    })
}

/// The name of the ClusterResourceSet of cluster `name` (and of its ConfigMap).
pub(crate) fn resource_set_name(name: &str) -> String {
    format!("{name}-kube-proxy")
}

/// The management-cluster objects that install `kp` in cluster `name`: the ConfigMap holding
/// the tenant objects (one YAML stream), then the ClusterResourceSet (`addons_version`:
/// `v1beta2` or `v1beta1`) selecting the Cluster by its cluster-name and [`MODE_LABEL`]
/// labels. `labels` go on both.
pub fn objects(
    name: &str,
    namespace: &str,
    labels: &Value,
    addons_version: &str,
    kp: &KubeProxy,
) -> Result<Vec<Value>, Error> {
    let mut stream = String::new();
    for o in kp.tenant_objects()? {
        stream.push_str("---\n");
        stream.push_str(&to_yaml(&o)?);
    }
    let base = resource_set_name(name);
    let selector = json!({
        crate::labels::CLUSTER_NAME_LABEL: name,
        MODE_LABEL: kp.mode.as_str(),
    });
    Ok(vec![
        json!({
            "apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": base, "namespace": namespace, "labels": labels},
            "data": {DATA_KEY: stream},
        }),
        super::cluster_resource_set(
            (&base, namespace),
            labels,
            addons_version,
            selector,
            json!([{"kind": "ConfigMap", "name": base}]),
        ),
    ])
}

#[cfg(test)]
mod tests;
