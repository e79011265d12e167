//! The API versions `create` and `generate clusterclass` write each object at: what the server
//! serves, with the contract labels of each provider's CRDs (clusterctl's rule), or the newest
//! known ones offline.

use kclient::discovery::ServerApis;
use kclient::error::Error;
use kcore::build::cni;
use kcore::groups::{BOOTSTRAP_GROUP, CapiVersion, INFRASTRUCTURE_GROUP};
use kcore::kamaji::create::{self as kamaji, CreateSpec, Infrastructure, Versions};

use super::control_plane::{kcp_resource, tcp_resource};

/// The KamajiControlPlane version: served, else (client dry run) the one matching Cluster API's.
fn kcp_version(apis: &ServerApis, capi: CapiVersion, client_only: bool) -> Result<String, Error> {
    Ok(match apis.kamaji_control_plane() {
        Some(ar) => ar.version,
        None if client_only => match capi {
            CapiVersion::V1Beta2 => "v1alpha2".into(),
            CapiVersion::V1Beta1 => "v1alpha1".into(),
        },
        None => kcp_resource(apis)?.version,
    })
}

/// The version of one infrastructure kind (empty when the infrastructure has none).
fn infra_version(
    apis: &ServerApis,
    infra: Infrastructure,
    kind: Option<&str>,
    client_only: bool,
) -> Result<String, Error> {
    let Some(kind) = kind else {
        return Ok(String::new());
    };
    match apis.provider_kind(INFRASTRUCTURE_GROUP, kind) {
        Some(ar) => Ok(ar.version),
        None if client_only => Ok(infra.default_version().into()),
        None => Err(apis.not_installed(
            &format!("The {} infrastructure provider ({kind})", infra.name()),
            INFRASTRUCTURE_GROUP,
            &format!(
                "install it with clusterctl init --infrastructure {}",
                infra.clusterctl_name()
            ),
        )),
    }
}

fn bootstrap_version(
    apis: &ServerApis,
    capi: CapiVersion,
    infra: Infrastructure,
    client_only: bool,
) -> Result<String, Error> {
    match apis.provider_kind(BOOTSTRAP_GROUP, "KubeadmConfigTemplate") {
        Some(ar) => Ok(ar.version),
        None if client_only || infra.template_kind().is_none() => Ok(capi.as_str().into()),
        None => Err(apis.not_installed(
            "The kubeadm bootstrap provider",
            BOOTSTRAP_GROUP,
            "install it with clusterctl init --bootstrap kubeadm",
        )),
    }
}

/// BYOH's K8sInstallerConfigTemplate version; empty when no installer template is written.
fn installer_version(
    apis: &ServerApis,
    spec: &CreateSpec,
    infra: Infrastructure,
    client_only: bool,
) -> Result<String, Error> {
    if !infra.installer_template(spec) {
        return Ok(String::new());
    }
    match apis.provider_kind(INFRASTRUCTURE_GROUP, kamaji::INSTALLER_TEMPLATE_KIND) {
        Some(ar) => Ok(ar.version),
        None if client_only => Ok("v1beta1".into()),
        None => Err(apis.not_installed(
            "BYOH's K8sInstallerConfigTemplate",
            INFRASTRUCTURE_GROUP,
            "install BYOH v0.3.0 or later (clusterctl init --infrastructure byoh), or pass --preinstalled-hosts if the hosts have Kubernetes installed",
        )),
    }
}

/// The ClusterResourceSet version; empty when no network plugin is installed.
fn addons_version(
    apis: &ServerApis,
    capi: CapiVersion,
    wants_cni: bool,
    client_only: bool,
) -> Result<String, Error> {
    match apis.kind(cni::ADDONS_GROUP, "ClusterResourceSet") {
        _ if !wants_cni => Ok(String::new()),
        Some(k) if k.versions.iter().any(|v| v == "v1beta2") => Ok("v1beta2".into()),
        Some(k) if k.versions.iter().any(|v| v == "v1beta1") => Ok("v1beta1".into()),
        _ if client_only => Ok(capi.as_str().into()),
        _ => Err(apis.not_installed(
            "Cluster API's ClusterResourceSet (v1beta1 or v1beta2)",
            cni::ADDONS_GROUP,
            "upgrade Cluster API (clusterctl upgrade), or drop --cni/--cni-manifest and install the network plugin by hand",
        )),
    }
}

/// The versions to write, from discovery. Kinds not served fall back to the newest shape
/// for `--dry-run=client` only; otherwise they are "not installed".
pub fn versions(
    apis: &ServerApis,
    spec: &CreateSpec,
    cni_choice_calico: bool,
    client_only: bool,
) -> Result<Versions, Error> {
    let infra = spec.infrastructure.unwrap_or_default();
    let capi = apis.require_capi()?;
    let kcp = kcp_version(apis, capi, client_only)?;
    if apis.tenant_control_plane().is_none() && !client_only {
        tcp_resource(apis)?;
    }
    let bootstrap = bootstrap_version(apis, capi, infra, client_only)?;
    let installer = installer_version(apis, spec, infra, client_only)?;
    let wants_cni = spec.cni.is_some() || cni_choice_calico;
    let addons = addons_version(apis, capi, wants_cni, client_only)?;
    Ok(Versions {
        capi,
        kcp,
        infra_cluster: infra_version(apis, infra, infra.cluster_kind(), client_only)?,
        infra_template: infra_version(apis, infra, infra.template_kind(), client_only)?,
        bootstrap,
        installer,
        addons,
    })
}
