//! The API versions the server serves ([`Versions`]), which decide the shape of references.

use serde_json::{Value, json};

use super::Infrastructure;
use crate::groups::CapiVersion;

/// The API versions to write, as discovered on the server.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Versions {
    /// CAPI core (Cluster, MachineDeployment) and kubeadm bootstrap.
    pub capi: CapiVersion,
    /// KamajiControlPlane: `v1alpha2` (v1beta2 contract) or `v1alpha1`.
    pub kcp: String,
    /// Version of the infrastructure cluster kind (`v1beta1`...); the provider default if empty.
    pub infra_cluster: String,
    /// Version of the machine template kind.
    pub infra_template: String,
    /// Version of the kubeadm bootstrap kinds (KubeadmConfigTemplate).
    pub bootstrap: String,
    /// Version of BYOH's K8sInstallerConfigTemplate; `v1beta1` if empty.
    pub installer: String,
    /// Version of CAPI's ClusterResourceSet (`v1beta2` or `v1beta1`); `v1beta2` if empty.
    pub addons: String,
}

impl Versions {
    /// The newest shapes: CAPI v1beta2, KCP v1alpha2, provider defaults.
    pub fn latest(infra: Infrastructure) -> Versions {
        Versions {
            capi: CapiVersion::V1Beta2,
            kcp: "v1alpha2".into(),
            infra_cluster: infra.default_version().into(),
            infra_template: infra.default_version().into(),
            bootstrap: "v1beta2".into(),
            installer: "v1beta1".into(),
            addons: "v1beta2".into(),
        }
    }
}

pub(super) fn api_version(group: &str, version: &str) -> String {
    format!("{group}/{version}")
}

/// A reference in the shape of `level`: `{apiGroup, kind, name}` (v1beta2) or
/// `{apiVersion, kind, name[, namespace]}` (v1beta1).
pub(super) fn reference(
    level: CapiVersion,
    group: &str,
    version: &str,
    kind: &str,
    name: &str,
    namespace: Option<&str>,
) -> Value {
    match level {
        CapiVersion::V1Beta2 => json!({"apiGroup": group, "kind": kind, "name": name}),
        CapiVersion::V1Beta1 => {
            let mut v =
                json!({"apiVersion": api_version(group, version), "kind": kind, "name": name});
            if let Some(ns) = namespace {
                v["namespace"] = json!(ns);
            }
            v
        }
    }
}
