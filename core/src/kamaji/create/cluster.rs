//! The Cluster, the network plugin and kube-proxy (`--kube-proxy-mode ipvs|nftables`) Cluster
//! API applies in it (a ClusterResourceSet each and what it holds), and the kinds the Cluster
//! owns so that they go with it.

use serde_json::{Value, json};

use super::endpoints::{cluster_network, pod_cidrs};
use super::versions::{api_version, reference};
use super::{CONTROLPLANE_GROUP, Ctx, INFRA_GROUP, INSTALLER_TEMPLATE_KIND};
use crate::Error;
use crate::build::cni::{self, CniKind, CniManifest};
use crate::build::kube_proxy::{self, KubeProxy};

/// The Cluster, and the network plugin's and kube-proxy's objects to apply after it.
pub(super) fn cluster(ctx: &Ctx, notes: &mut Vec<String>) -> Result<(Value, Vec<Value>), Error> {
    let (name, ns) = (ctx.name(), ctx.ns());
    let level = ctx.versions.capi;
    let pods = pod_cidrs(ctx.spec);
    let mut cluster_spec = json!({
        "clusterNetwork": cluster_network(ctx.spec, &pods),
        "controlPlaneRef": reference(level, CONTROLPLANE_GROUP, &ctx.versions.kcp, "KamajiControlPlane", name, Some(ns)),
    });
    if let Some(kind) = ctx.infra.cluster_kind() {
        cluster_spec["infrastructureRef"] = reference(
            level,
            INFRA_GROUP,
            &ctx.infra_cluster_version(),
            kind,
            name,
            Some(ns),
        );
    }
    let mut cluster_meta = ctx.meta(name);
    let mut cni_objects = Vec::new();
    match &ctx.spec.cni {
        Some(m) => {
            cluster_meta["labels"][cni::CNI_LABEL] = json!(m.kind.label());
            cni_objects = network_plugin(ctx, m, &pods, notes)?;
        }
        None if ctx.workers > 0 && !ctx.spec.cni_none_explicit => notes.push(
            "no network plugin (--cni none): the workers stay NotReady until one runs; pass --cni calico or --cni-manifest FILE, or install one by hand".to_string(),
        ),
        None => {}
    }
    if let Some(mode) = ctx.spec.kube_proxy_mode
        && !mode.is_kamaji_default()
    {
        cluster_meta["labels"][kube_proxy::MODE_LABEL] = json!(mode.as_str());
        cni_objects.extend(kube_proxy_objects(ctx, &pods, notes)?);
    }
    let cluster = json!({
        "apiVersion": api_version(crate::groups::CAPI_GROUP, level.as_str()),
        "kind": "Cluster",
        "metadata": cluster_meta,
        "spec": cluster_spec,
    });
    Ok((cluster, cni_objects))
}

/// The network plugin's objects (Calico gets the first IPv4 pod CIDR as its pool), and a note
/// saying where they are.
pub(super) fn network_plugin(
    ctx: &Ctx,
    manifest: &CniManifest,
    pods: &[String],
    notes: &mut Vec<String>,
) -> Result<Vec<Value>, Error> {
    let name = ctx.name();
    let mut m = manifest.clone();
    if m.kind == CniKind::Calico
        && let Some(v4) = pods.iter().find(|c| c.contains('.'))
    {
        m.text = cni::calico_with_pod_cidr(&m.text, v4);
    }
    let av = if ctx.versions.addons.is_empty() {
        "v1beta2"
    } else {
        ctx.versions.addons.as_str()
    };
    let objects = cni::objects(name, ctx.ns(), &ctx.labels, av, &m)?;
    let holders: Vec<String> = objects
        .iter()
        .filter(|o| o["kind"] != "ClusterResourceSet")
        .map(|o| {
            format!(
                "{} {}",
                o["kind"].as_str().unwrap_or_default(),
                o["metadata"]["name"].as_str().unwrap_or_default()
            )
        })
        .collect();
    let what = match m.kind {
        CniKind::Calico => format!("Calico {} ({})", cni::CALICO_VERSION, m.source),
        CniKind::Custom => m.source.clone(),
    };
    notes.push(format!(
        "network plugin {what}: in {} and ClusterResourceSet {}, which Cluster API applies in the workload cluster once its API server answers",
        holders.join(", "),
        cni::resource_set_name(name)
    ));
    Ok(objects)
}

/// kube-proxy in a mode Kamaji's addon cannot run (which `control_plane` turned off): its
/// objects for a ClusterResourceSet, at the cluster's version, talking to the control plane's
/// address (`validate` made sure there is one), and a note saying where they are.
fn kube_proxy_objects(
    ctx: &Ctx,
    pods: &[String],
    notes: &mut Vec<String>,
) -> Result<Vec<Value>, Error> {
    let (Some(mode), Some(host)) = (ctx.spec.kube_proxy_mode, ctx.address.as_deref()) else {
        return Ok(Vec::new());
    };
    // The values file's Kamaji addon image fields, if any, still choose the image.
    let image = |k: &str| {
        ctx.file
            .get("addons")
            .and_then(|a| a.pointer(&format!("/kubeProxy/{k}")))
            .and_then(Value::as_str)
    };
    let kp = KubeProxy {
        mode,
        version: &ctx.version,
        host,
        port: ctx.port,
        pod_cidrs: pods,
        image_repository: image("imageRepository"),
        image_tag: image("imageTag"),
    };
    let av = if ctx.versions.addons.is_empty() {
        "v1beta2"
    } else {
        ctx.versions.addons.as_str()
    };
    let objects = kube_proxy::objects(ctx.name(), ctx.ns(), &ctx.labels, av, &kp)?;
    let rs = kube_proxy::resource_set_name(ctx.name());
    notes.push(format!(
        "kube-proxy in {} mode ({}), instead of Kamaji's addon: in ConfigMap {rs} and ClusterResourceSet {rs}, which Cluster API applies in the workload cluster (kube-system/{}) once its API server answers",
        mode.as_str(),
        kp.image(),
        kube_proxy::TENANT_NAME
    ));
    if mode == kube_proxy::KubeProxyMode::Ipvs {
        notes.push(format!(
            "ipvs mode needs the ip_vs, ip_vs_rr, ip_vs_wrr, ip_vs_sh and nf_conntrack kernel modules and ipset on every worker host; loading them is the host's job (kube-proxy does not){}",
            if kube_proxy::ipvs_deprecated(&ctx.version) {
                format!("; kube-proxy {} deprecates ipvs in favour of nftables", ctx.version)
            } else {
                String::new()
            }
        ));
    }
    Ok(objects)
}

/// Kinds `create` writes that no Cluster API controller adopts (CAPI gives the Cluster's
/// ownership to the machine templates it uses, not to these): `create` makes the Cluster their
/// owner so that the garbage collector removes them with it, whoever deletes the Cluster.
pub const OWNED_BY_CLUSTER: [&str; 4] = [
    INSTALLER_TEMPLATE_KIND,
    "ClusterResourceSet",
    "ConfigMap",
    "Secret",
];

/// Makes the Cluster (`apiVersion`, `name`, `uid`) a non-controller owner of `obj`, when its
/// kind is one of [`OWNED_BY_CLUSTER`]. Returns whether it did.
pub fn own_by_cluster(obj: &mut Value, cluster_api_version: &str, name: &str, uid: &str) -> bool {
    let kind = obj["kind"].as_str().unwrap_or_default();
    if !OWNED_BY_CLUSTER.contains(&kind) || uid.is_empty() {
        return false;
    }
    obj["metadata"]["ownerReferences"] = json!([{
        "apiVersion": cluster_api_version, "kind": "Cluster", "name": name, "uid": uid,
    }]);
    true
}

/// The ownerReferences of `obj` without Cluster `cluster`, when it had that owner: what an
/// object kept past its Cluster's deletion must carry so the garbage collector leaves it.
pub fn disowned_by_cluster(obj: &Value, cluster: &str) -> Option<Value> {
    let refs = obj["metadata"]["ownerReferences"].as_array()?;
    let is_it = |r: &Value| r["kind"] == "Cluster" && r["name"] == cluster;
    if !refs.iter().any(is_it) {
        return None;
    }
    Some(Value::Array(
        refs.iter().filter(|r| !is_it(r)).cloned().collect(),
    ))
}
