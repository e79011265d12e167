//! The KamajiControlPlane: Kamaji's defaults, overlaid by the values file (`--from-file`),
//! overlaid by the flags.

use crate::json::deep_merge;
use serde_json::{Map, Value, json};

use super::validate::normalise_arg;
use super::versions::api_version;
use super::{Addon, CONTROLPLANE_GROUP, CreateSpec, Ctx};
use crate::Error;
use crate::kamaji::api::{DEFAULT_REPLICAS, DEFAULT_SERVICE_TYPE};

/// The KamajiControlPlane object.
pub(super) fn kamaji_control_plane(ctx: &Ctx) -> Result<Value, Error> {
    let spec = ctx.spec;
    let all_addons: Map<String, Value> = Addon::ALL
        .iter()
        .map(|a| (a.key().to_string(), json!({})))
        .collect();
    let mut kcp_spec = json!({
        "replicas": DEFAULT_REPLICAS,
        "network": {"serviceType": DEFAULT_SERVICE_TYPE},
        "addons": all_addons,
    });
    deep_merge(&mut kcp_spec, Value::Object(ctx.file.clone()));
    deep_merge(&mut kcp_spec, flag_fields(spec, &ctx.version)?);
    if let Some(addons) = &spec.addons {
        kcp_spec["addons"] = chosen_addons(&kcp_spec, addons);
    }
    // Another kube-proxy mode comes through a ClusterResourceSet (`cluster::kube_proxy`).
    if spec.kube_proxy_mode.is_some_and(|m| !m.is_kamaji_default())
        && let Some(addons) = kcp_spec["addons"].as_object_mut()
    {
        addons.remove(Addon::KubeProxy.key());
    }
    Ok(json!({
        "apiVersion": api_version(CONTROLPLANE_GROUP, &ctx.versions.kcp),
        "kind": "KamajiControlPlane",
        "metadata": ctx.meta(ctx.name()),
        "spec": kcp_spec,
    }))
}

/// The spec fields the flags set; what they leave out stays as the values file has it.
fn flag_fields(spec: &CreateSpec, version: &str) -> Result<Value, Error> {
    let mut flags = json!({"version": version});
    if let Some(r) = spec.replicas {
        flags["replicas"] = json!(r);
    }
    if let Some(ds) = &spec.datastore {
        flags["dataStoreName"] = json!(ds);
    }
    let mut network = Map::new();
    if let Some(t) = &spec.service_type {
        network.insert("serviceType".into(), json!(t));
    }
    if let Some(a) = &spec.service_address {
        network.insert("serviceAddress".into(), json!(a));
    }
    if !spec.cert_sans.is_empty() {
        network.insert("certSANs".into(), json!(spec.cert_sans));
    }
    if !network.is_empty() {
        flags["network"] = Value::Object(network);
    }
    if !spec.admission_controllers.is_empty() {
        flags["admissionControllers"] = json!(spec.admission_controllers);
    }
    for (key, flag, args) in [
        ("apiServer", "--apiserver-arg", &spec.apiserver_args),
        (
            "controllerManager",
            "--controller-manager-arg",
            &spec.controller_manager_args,
        ),
        ("scheduler", "--scheduler-arg", &spec.scheduler_args),
    ] {
        if !args.is_empty() {
            let norm: Vec<String> = args
                .iter()
                .map(|a| normalise_arg(flag, a))
                .collect::<Result<_, _>>()?;
            flags[key] = json!({"extraArgs": norm});
        }
    }
    Ok(flags)
}

/// `spec.addons` with only the `--addons` chosen, each keeping what the spec configures for it.
fn chosen_addons(kcp_spec: &Value, addons: &[Addon]) -> Value {
    let current = kcp_spec.get("addons").cloned().unwrap_or(json!({}));
    let mut out = Map::new();
    for a in addons {
        out.insert(
            a.key().into(),
            current.get(a.key()).cloned().unwrap_or(json!({})),
        );
    }
    Value::Object(out)
}
