//! The workers: a KubeadmConfigTemplate (the kubeadm join configuration), the
//! infrastructure's machine templates, and the MachineDeployment that uses them.

use std::net::IpAddr;

use serde_json::{Map, Value, json};

use super::infra::WorkerInfra;
use super::versions::{api_version, reference};
use super::{BOOTSTRAP_GROUP, CLUSTER_NAME_LABEL, Ctx, DEPLOYMENT_NAME_LABEL, INFRA_GROUP};
use crate::groups::CapiVersion;

/// The worker objects in apply order: KubeadmConfigTemplate, BYOH's installer template, the
/// machine template, the MachineDeployment. None without a machine template.
pub(super) fn objects(ctx: &Ctx, infra: WorkerInfra) -> Vec<Value> {
    let (Some(template), Some(tkind)) = (infra.template, ctx.infra.template_kind()) else {
        return Vec::new();
    };
    // The provider's kubelet arguments, then `--cluster-dns` (written as the address parses, so
    // `::0:1` reaches the kubelet as `::1`).
    let dns = ctx.spec.cluster_dns.as_deref().map(|d| {
        d.parse::<IpAddr>()
            .map_or_else(|_| d.to_string(), |ip| ip.to_string())
    });
    let mut kubelet_args: Vec<(&str, &str)> = infra.kubelet_args.clone();
    kubelet_args.extend(dns.as_deref().map(|d| (CLUSTER_DNS_ARG, d)));
    let mut objects = vec![kubeadm_config_template(ctx, &kubelet_args, &infra.files)];
    objects.extend(infra.installer_template);
    objects.push(template);
    objects.push(machine_deployment(ctx, tkind));
    objects
}

/// The kubelet argument `--cluster-dns` sets.
const CLUSTER_DNS_ARG: &str = "cluster-dns";

/// `nodeRegistration` with `kubeletExtraArgs` in the shape of `level`: a list of
/// `{name, value}` (v1beta2) or a map (v1beta1); empty without arguments.
fn node_registration(level: CapiVersion, kubelet_args: &[(&str, &str)]) -> Value {
    match (level, kubelet_args.is_empty()) {
        (_, true) => json!({}),
        (CapiVersion::V1Beta2, false) => json!({"kubeletExtraArgs": kubelet_args
            .iter()
            .map(|(k, v)| json!({"name": k, "value": v}))
            .collect::<Vec<_>>()}),
        (CapiVersion::V1Beta1, false) => json!({"kubeletExtraArgs": kubelet_args
            .iter()
            .map(|(k, v)| (k.to_string(), json!(v)))
            .collect::<Map<String, Value>>()}),
    }
}

/// The workers' KubeadmConfigTemplate: `files`, and `kubelet_args` in the join configuration.
fn kubeadm_config_template(ctx: &Ctx, kubelet_args: &[(&str, &str)], files: &[Value]) -> Value {
    let node_registration = node_registration(ctx.versions.capi, kubelet_args);
    // `format` (the default, cloud-config) keeps the spec non-empty, as CABPK's schema needs.
    let mut kct_spec = json!({"format": "cloud-config"});
    if !files.is_empty() {
        kct_spec["files"] = json!(files);
    }
    if !node_registration.as_object().is_some_and(Map::is_empty) {
        kct_spec["joinConfiguration"] = json!({"nodeRegistration": node_registration});
    }
    json!({
        "apiVersion": api_version(BOOTSTRAP_GROUP, &ctx.versions.bootstrap),
        "kind": "KubeadmConfigTemplate",
        "metadata": ctx.meta(&ctx.md_name),
        "spec": {"template": {"spec": kct_spec}},
    })
}

/// The MachineDeployment of `--workers` machines, from the kubeadm and `tkind` templates, in
/// `--failure-domain` when given.
fn machine_deployment(ctx: &Ctx, tkind: &str) -> Value {
    let (name, md_name, level) = (ctx.name(), ctx.md_name.as_str(), ctx.versions.capi);
    let sel = json!({CLUSTER_NAME_LABEL: name, DEPLOYMENT_NAME_LABEL: md_name});
    let config_ref = reference(
        level,
        BOOTSTRAP_GROUP,
        &ctx.versions.bootstrap,
        "KubeadmConfigTemplate",
        md_name,
        None,
    );
    let infrastructure_ref = reference(
        level,
        INFRA_GROUP,
        &ctx.infra_template_version(),
        tkind,
        md_name,
        None,
    );
    let mut machine_spec = json!({
        "clusterName": name,
        "version": ctx.version,
        "bootstrap": {"configRef": config_ref},
        "infrastructureRef": infrastructure_ref,
    });
    // The same field in both contracts (`MachineSpec.failureDomain`).
    if let Some(fd) = &ctx.spec.failure_domain {
        machine_spec["failureDomain"] = json!(fd);
    }
    json!({
        "apiVersion": api_version(crate::groups::CAPI_GROUP, level.as_str()),
        "kind": "MachineDeployment",
        "metadata": ctx.meta(md_name),
        "spec": {
            "clusterName": name,
            "replicas": ctx.workers,
            "selector": {"matchLabels": sel},
            "template": {
                "metadata": {"labels": sel},
                "spec": machine_spec,
            },
        },
    })
}
