//! `kubectl kamaji create` and `generate clusterclass`: the consistent object set of a Kamaji-hosted cluster, from flags.
//!
//! [`build`] turns a [`CreateSpec`] (flags plus an optional values file) into the objects to
//! server-side apply, in apply order: the KamajiControlPlane, the infrastructure cluster, the
//! Cluster, and for workers a KubeadmConfigTemplate, a machine template and a
//! MachineDeployment. Shapes follow the served versions ([`Versions`]): CAPI v1beta2 or v1beta1
//! references, KamajiControlPlane v1alpha2 or v1alpha1.
//!
//! On OpenStack without `--service-address`, the OpenStackCluster is returned apart
//! ([`Built::deferred`]): older CAPO rejects a later change of `apiServerFixedIP`, so the verb
//! waits for Kamaji's endpoint and creates it pre-filled ([`fill_openstack_endpoint`]).
//!
//! One submodule per concept, each public item re-exported here:
//! - `spec`: what `create` takes ([`CreateSpec`], [`Addon`]);
//! - `providers`: the infrastructure providers, one file each behind [`InfraProvider`], and
//!   their registry ([`all`]); [`Infrastructure`] names one of them;
//! - `versions`: the served API versions ([`Versions`]), Kubernetes releases, references;
//! - `validate`: the flag checks, one usage error each, run before anything is built;
//! - `endpoints`: the API server address, certificate SANs, pod and service CIDRs;
//! - `control_plane`: the KamajiControlPlane, from defaults, the values file and flags;
//! - `infra`: what a provider contributes (`InfraObjects`) and the helpers it builds it with;
//! - `cluster`: the Cluster, its network plugin, and what it owns;
//! - `workers`: the KubeadmConfigTemplate and the MachineDeployment;
//! - `clusterclass`: the ClusterClass of `generate clusterclass` and the topology Cluster of
//!   `create --class`.

mod cluster;
mod clusterclass;
mod control_plane;
mod endpoints;
mod infra;
mod providers;
mod spec;
mod validate;
mod values;
mod versions;
mod workers;

use serde_json::{Map, Value, json};

use crate::Error;

pub use cluster::{OWNED_BY_CLUSTER, disowned_by_cluster, own_by_cluster};
pub use clusterclass::{ClassInfo, build_class, build_topology, check_topology};
pub use providers::{FlagHelp, InfraProvider, Infrastructure, all, fill_openstack_endpoint};
pub use spec::{Addon, CreateSpec};
pub use versions::Versions;

/// Field manager of everything `kubectl kamaji` applies.
pub const FIELD_MANAGER: &str = "kubectl-kamaji";
/// Label on every object `create` writes.
pub const MANAGED_BY: (&str, &str) = ("app.kubernetes.io/managed-by", FIELD_MANAGER);
use crate::groups::{BOOTSTRAP_GROUP, CONTROLPLANE_GROUP, INFRASTRUCTURE_GROUP as INFRA_GROUP};
use crate::kamaji::api::ADMISSION_CONTROLLERS;
use crate::kamaji::endpoint::DEFAULT_PORT;
use crate::labels::{CLUSTER_NAME_LABEL, DEPLOYMENT_NAME_LABEL};
/// BYOH's installer template kind: the BYOH controller makes one K8sInstallerConfig per
/// ByoMachine from it, whose installation secret the host agent runs to install Kubernetes.
pub const INSTALLER_TEMPLATE_KIND: &str = "K8sInstallerConfigTemplate";
/// Kamaji's TenantControlPlane defaults, written on the Cluster so they are visible.
pub(crate) const DEFAULT_POD_CIDR: &str = "10.244.0.0/16";
pub(crate) const DEFAULT_SERVICE_CIDR: &str = "10.96.0.0/16";

/// The objects to apply.
#[derive(Clone, Debug, PartialEq)]
pub struct Built {
    /// In apply order.
    pub objects: Vec<Value>,
    /// The OpenStackCluster, to create once Kamaji announces the endpoint (its
    /// `apiServerFixedIP` is empty until then).
    pub deferred: Option<Value>,
    /// The normalised Kubernetes version.
    pub version: String,
    /// What the objects imply that the YAML does not say, one line each, for the preview.
    pub notes: Vec<String>,
}

impl Built {
    /// Every object, the deferred one last.
    pub fn all(&self) -> Vec<Value> {
        let mut v = self.objects.clone();
        v.extend(self.deferred.clone());
        v
    }
}

/// Checks the flags, then builds the object set.
pub fn build(spec: &CreateSpec, versions: &Versions) -> Result<Built, Error> {
    let ctx = Ctx::new(spec, versions, validate::check(spec)?);
    let kcp = control_plane::kamaji_control_plane(&ctx)?;
    let mut notes = Vec::new();
    let infra = ctx.infra.objects(&ctx, &mut notes)?;
    let (cluster, network_plugin) = cluster::cluster(&ctx, &mut notes)?;

    let mut objects = vec![kcp];
    objects.extend(infra.cluster);
    objects.push(cluster);
    objects.extend(network_plugin);
    objects.extend(workers::objects(&ctx, infra.workers));
    Ok(Built {
        objects,
        deferred: infra.deferred,
        version: ctx.version,
        notes,
    })
}

/// What every builder shares: the checked flags, the served versions, names and labels (what an
/// [`InfraProvider`] builds from; opaque outside this module).
pub struct Ctx<'a> {
    spec: &'a CreateSpec,
    versions: &'a Versions,
    infra: Infrastructure,
    /// The values file's KamajiControlPlane spec fields (empty without `--from-file`).
    file: Map<String, Value>,
    /// The normalised Kubernetes version.
    version: String,
    /// The API server address, from `--service-address` or the values file.
    address: Option<String>,
    /// MachineDeployment replicas (0 without infrastructure).
    workers: i64,
    port: u16,
    /// The name of the worker objects: `<name>-md-0`.
    md_name: String,
    /// The labels of every object.
    labels: Value,
}

impl<'a> Ctx<'a> {
    fn new(spec: &'a CreateSpec, versions: &'a Versions, checked: validate::Checked) -> Self {
        let name = spec.name.as_str();
        Ctx {
            spec,
            versions,
            infra: checked.infra,
            file: checked.file,
            version: checked.version,
            address: checked.address,
            workers: checked.workers,
            port: spec.port.unwrap_or(DEFAULT_PORT),
            md_name: format!("{name}-md-0"),
            labels: json!({CLUSTER_NAME_LABEL: name, MANAGED_BY.0: MANAGED_BY.1}),
        }
    }

    fn name(&self) -> &'a str {
        &self.spec.name
    }

    fn ns(&self) -> &'a str {
        &self.spec.namespace
    }

    /// The metadata of an object named `n`.
    fn meta(&self, n: &str) -> Value {
        json!({"name": n, "namespace": self.ns(), "labels": self.labels.clone()})
    }

    /// The version of the infrastructure cluster kind: served, else the provider's default.
    fn infra_cluster_version(&self) -> String {
        self.infra_version(&self.versions.infra_cluster)
    }

    /// The version of the machine template kind: served, else the provider's default.
    fn infra_template_version(&self) -> String {
        self.infra_version(&self.versions.infra_template)
    }

    fn infra_version(&self, v: &str) -> String {
        if v.is_empty() {
            self.infra.default_version().to_string()
        } else {
            v.to_string()
        }
    }
}

/// A `v1/List` (JSON output), which `kubectl apply -f -` accepts too.
pub fn json_list(objects: &[Value]) -> Value {
    json!({"apiVersion": "v1", "kind": "List", "items": objects})
}

#[cfg(test)]
mod tests;
