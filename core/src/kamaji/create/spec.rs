//! What `kubectl kamaji create` takes: the flags ([`CreateSpec`]) and the control-plane addons
//! ([`Addon`]). Where the workers run is an [`Infrastructure`], a provider of the registry
//! (`providers/`).

use serde_json::Value;

use super::Infrastructure;
use super::{ProviderFlags, all_flags};
use crate::Error;

/// The control-plane addons Kamaji installs in the tenant.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Addon {
    CoreDns,
    KubeProxy,
    Konnectivity,
}

impl Addon {
    pub const ALL: [Addon; 3] = [Addon::CoreDns, Addon::KubeProxy, Addon::Konnectivity];
    /// The flag spelling.
    pub fn as_str(self) -> &'static str {
        match self {
            Addon::CoreDns => "coredns",
            Addon::KubeProxy => "kube-proxy",
            Addon::Konnectivity => "konnectivity",
        }
    }
    /// The key under `spec.addons`.
    pub fn key(self) -> &'static str {
        match self {
            Addon::CoreDns => "coreDNS",
            Addon::KubeProxy => "kubeProxy",
            Addon::Konnectivity => "konnectivity",
        }
    }
    /// Parses `--addons`: a comma list, or `none`.
    pub fn parse_list(s: &str) -> Result<Vec<Addon>, Error> {
        let mut out = Vec::new();
        for part in s.split(',').map(str::trim).filter(|p| !p.is_empty()) {
            if part == "none" {
                continue;
            }
            let a = Addon::ALL
                .into_iter()
                .find(|a| a.as_str() == part.to_ascii_lowercase() || a.key() == part)
                .ok_or_else(|| Error::Usage {
                    message: format!("unknown addon {part:?} in --addons"),
                    hint: Some(
                        "use coredns, kube-proxy, konnectivity (comma separated), or none".into(),
                    ),
                })?;
            if !out.contains(&a) {
                out.push(a);
            }
        }
        out.sort();
        Ok(out)
    }
}

/// Everything `create` takes. `None`/empty means "not given": the values file, then the
/// defaults, decide.
#[derive(Clone, Debug, Default)]
pub struct CreateSpec {
    pub name: String,
    pub namespace: String,
    pub infrastructure: Option<Infrastructure>,
    pub kubernetes_version: Option<String>,
    pub replicas: Option<i64>,
    pub workers: Option<i64>,
    pub datastore: Option<String>,
    pub service_type: Option<String>,
    pub service_address: Option<String>,
    pub cert_sans: Vec<String>,
    pub pod_cidrs: Vec<String>,
    pub service_cidrs: Vec<String>,
    pub port: Option<u16>,
    /// `--failure-domain`: where the workers' machines go (the MachineDeployment's
    /// `spec.template.spec.failureDomain`; with `--class`, the topology's machineDeployment).
    pub failure_domain: Option<String>,
    /// `--cluster-dns`: the DNS server address the workers' kubelets give pods (their
    /// `--cluster-dns`, e.g. NodeLocal DNSCache's link-local address), in the kubeadm join
    /// configuration of the workers' KubeadmConfigTemplate.
    pub cluster_dns: Option<String>,
    pub addons: Option<Vec<Addon>>,
    pub admission_controllers: Vec<String>,
    pub apiserver_args: Vec<String>,
    pub controller_manager_args: Vec<String>,
    pub scheduler_args: Vec<String>,
    /// The values of the infrastructure providers' flags (`--flavor`, `--network`, ...), each
    /// read by the providers that take it (`providers/`).
    pub provider_flags: ProviderFlags,
    /// The network plugin to install through a ClusterResourceSet (`--cni calico`, already
    /// downloaded, or `--cni-manifest FILE`, already read); `None`: none.
    pub cni: Option<crate::build::cni::CniManifest>,
    /// `--kube-proxy-mode`: `None` or `iptables` keep Kamaji's kube-proxy addon; `ipvs` and
    /// `nftables` turn it off and install kube-proxy through a ClusterResourceSet
    /// ([`kube_proxy`](crate::build::kube_proxy)).
    pub kube_proxy_mode: Option<crate::build::kube_proxy::KubeProxyMode>,
    /// `--cni none` was given explicitly (no note about the missing network plugin).
    pub cni_none_explicit: bool,
    /// `--from-file`: KamajiControlPlane spec fields (a `spec:` map or the fields themselves).
    pub values: Option<Value>,
    /// `--class`: a topology Cluster of this ClusterClass instead of the objects themselves
    /// ([`build_topology`](super::build_topology)).
    pub class: Option<String>,
}

impl CreateSpec {
    /// The flags only some infrastructure providers take, each with whether it was given, in the
    /// order `create` checks and names them.
    pub(super) fn infrastructure_flags(&self) -> Vec<(&'static str, bool)> {
        all_flags(false)
            .into_iter()
            .map(|f| (f.name(), self.provider_flags.is_given(f.name())))
            .collect()
    }
}
