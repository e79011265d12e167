//! What an infrastructure provider contributes ([`InfraObjects`]: the infrastructure cluster the
//! Cluster references, the machine template of the workers and what they need) and the helpers
//! the providers (`providers/`) build it with.

use serde_json::{Value, json};

use super::versions::api_version;
use super::{Ctx, INFRA_GROUP};
use crate::Error;
use crate::error::usage;

/// What the infrastructure contributes ([`InfraProvider::objects`](super::InfraProvider::objects)).
#[derive(Default)]
pub struct InfraObjects {
    /// The infrastructure cluster, applied before the Cluster.
    pub(super) cluster: Option<Value>,
    /// An infrastructure cluster that needs the address Kamaji announces (OpenStack's, without
    /// `--service-address`), created once it is known ([`Built::deferred`](super::Built::deferred)).
    pub(super) deferred: Option<Value>,
    pub(super) workers: WorkerInfra,
}

impl InfraObjects {
    /// An infrastructure cluster and the workers' machine template, and nothing else.
    pub(super) fn new(cluster: Value, template: Value) -> InfraObjects {
        InfraObjects {
            cluster: Some(cluster),
            deferred: None,
            workers: WorkerInfra {
                template: Some(template),
                ..WorkerInfra::default()
            },
        }
    }
}

/// What the infrastructure contributes to the workers.
#[derive(Default)]
pub(super) struct WorkerInfra {
    /// The machine template the MachineDeployment references.
    pub template: Option<Value>,
    /// BYOH's K8sInstallerConfigTemplate.
    pub installer_template: Option<Value>,
    /// Kubelet arguments the provider needs in the kubeadm join configuration.
    pub kubelet_args: Vec<(&'static str, &'static str)>,
    /// Files the kubeadm bootstrap writes on every worker (`KubeadmConfigSpec.files`).
    pub files: Vec<Value>,
}

/// A flag the infrastructure needs, non-empty.
pub(super) fn need(ctx: &Ctx, flag: &str) -> Result<String, Error> {
    let v = ctx.spec.provider_flags.value(flag);
    v.filter(|s| !s.is_empty())
        .map(str::to_string)
        .ok_or_else(|| {
            usage(
                format!("--infrastructure {} needs {flag}", ctx.infra.name()),
                format!("pass {flag} for the worker machines"),
            )
        })
}

/// The API server endpoint, when its address is known.
pub(super) fn endpoint(ctx: &Ctx) -> Option<Value> {
    ctx.address
        .as_ref()
        .map(|a| json!({"host": a, "port": ctx.port}))
}

/// An infrastructure object of `kind`, at the served version `version`.
pub(super) fn object(version: &str, kind: &str, metadata: Value, spec: Value) -> Value {
    json!({
        "apiVersion": api_version(INFRA_GROUP, version), "kind": kind,
        "metadata": metadata, "spec": spec,
    })
}

/// The provider's infrastructure cluster (its kind, named after the cluster) with `spec`.
pub(super) fn infra_cluster(ctx: &Ctx, spec: Value) -> Value {
    object(
        &ctx.infra_cluster_version(),
        ctx.infra.cluster_kind().unwrap_or_default(),
        ctx.meta(ctx.name()),
        spec,
    )
}

/// The provider's machine template of the workers, whose machines have `machine_spec`.
pub(super) fn machine_template(ctx: &Ctx, machine_spec: Value) -> Value {
    object(
        &ctx.infra_template_version(),
        ctx.infra.template_kind().unwrap_or_default(),
        ctx.meta(&ctx.md_name),
        json!({"template": {"spec": machine_spec}}),
    )
}

/// A bootstrap file from `secret`'s `key`, root-only.
pub(super) fn secret_file(secret: &str, key: &str, path: &str) -> Value {
    json!({
        "path": path,
        "owner": "root:root",
        "permissions": "0600",
        "contentFrom": {"secret": {"name": secret, "key": key}},
    })
}
