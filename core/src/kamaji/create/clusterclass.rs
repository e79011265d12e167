//! ClusterClass: the class `kubectl kamaji generate clusterclass` writes ([`build_class`]) and
//! the topology Cluster `kubectl kamaji create --class` writes against a class
//! ([`build_topology`]).
//!
//! The class holds a KamajiControlPlaneTemplate (the KamajiControlPlane fields `create` takes,
//! without `version`, `replicas` and `controlPlaneEndpoint`, which the Cluster's topology and
//! the reconciler supply: CACPPK's `api/v1alpha2/kamajicontrolplanetemplate_types.go`, v0.20.0),
//! the infrastructure's cluster template, and one worker class (a KubeadmConfigTemplate and the
//! machine template, with BYOH's installer template). Its control plane is named after the
//! Cluster (`naming.template: {{ .cluster.name }}`), so every `kubectl kamaji` verb that takes a
//! control-plane name takes the cluster's. One variable, [`ADDRESS_VARIABLE`], carries the
//! per-cluster pre-assigned API server address into the KamajiControlPlane (and OpenStack's
//! `apiServerFixedIP`); the port is the Cluster's `clusterNetwork.apiServerPort`, which the
//! reconciler already reads.
//!
//! Both CAPI contracts: v1beta2 (`templateRef{apiVersion, kind, name}`, `naming`,
//! `topology.classRef`) and v1beta1 (`ref{apiVersion, kind, name, namespace}`,
//! `namingStrategy`, `template.{bootstrap,infrastructure}.ref`, `topology.class`).

use std::net::IpAddr;

use serde_json::{Map, Value, json};

use super::cluster::network_plugin;
use super::control_plane::kamaji_control_plane;
use super::endpoints::{check_network, cluster_network, pod_cidrs};
use super::validate::{
    check_cluster_dns, check_control_plane, check_counts, check_failure_domain,
    check_host_selector, check_scoped_flags, required_infrastructure, validate_name,
};
use super::values::values_spec;
use super::versions::api_version;
use super::{
    Built, CLUSTER_NAME_LABEL, CreateSpec, Ctx, DEFAULT_PORT, Infrastructure, MANAGED_BY, Versions,
    workers,
};
use crate::Error;
use crate::build::cni;
use crate::error::usage;
use crate::groups::{CAPI_GROUP, CapiVersion};
use crate::json::{at, str_at};
use crate::kamaji::api::SERVICE_TYPES;
use crate::kamaji::endpoint::EndpointPatch;
use crate::version::parse_version;

/// The worker class of a generated ClusterClass.
pub(crate) const WORKER_CLASS: &str = "default-worker";
/// The name of the topology's one MachineDeployment (`create --class`).
pub(crate) const TOPOLOGY_WORKERS: &str = "md-0";
/// The ClusterClass variable holding a cluster's pre-assigned API server address.
pub(crate) const ADDRESS_VARIABLE: &str = "controlPlaneAddress";
/// Label on the objects of a generated ClusterClass, naming the class.
pub(crate) const CLASS_LABEL: &str = "capi-kamaji.io/cluster-class";
/// The control plane of a class cluster is named after the Cluster (CAPI's naming template).
pub(crate) const CONTROL_PLANE_NAMING: &str = "{{ .cluster.name }}";

/// The kind of the template `kind`'s class references (`ByoCluster` -> `ByoClusterTemplate`).
pub(crate) fn template_kind(kind: &str) -> String {
    format!("{kind}Template")
}

/// The infrastructures a class can be generated for: those whose provider does not refuse it
/// ([`InfraProvider::class_support`](super::InfraProvider::class_support)).
fn class_infrastructure(spec: &CreateSpec) -> Result<Infrastructure, Error> {
    let infra = required_infrastructure(spec)?;
    infra.class_support()?;
    Ok(infra)
}

/// The flags a class takes, checked (one usage error each, the first found).
fn check_class(spec: &CreateSpec) -> Result<(Infrastructure, Map<String, Value>), Error> {
    validate_name(&spec.name)?;
    let infra = class_infrastructure(spec)?;
    let file = match &spec.values {
        Some(v) => values_spec(v)?,
        None => Map::new(),
    };
    check_counts(spec)?;
    check_scoped_flags(spec, infra)?;
    infra.check(spec)?;
    check_failure_domain(spec)?;
    check_cluster_dns(spec)?;
    if let Some(t) = &spec.service_type
        && !SERVICE_TYPES.contains(&t.as_str())
    {
        return Err(usage(
            format!("invalid --service-type {t:?}"),
            "use ClusterIP, NodePort or LoadBalancer",
        ));
    }
    check_network(spec)?;
    check_control_plane(spec)?;
    check_host_selector(spec)?;
    Ok((infra, file))
}

/// The objects of ClusterClass `spec.name`, in apply order: the KamajiControlPlaneTemplate,
/// the infrastructure cluster template, the worker templates, the ClusterClass.
pub fn build_class(spec: &CreateSpec, versions: &Versions) -> Result<Built, Error> {
    let (infra_kind, file) = check_class(spec)?;
    let name = spec.name.as_str();
    let ctx = Ctx {
        spec,
        versions,
        infra: infra_kind,
        file,
        version: String::new(),
        address: None,
        workers: 0,
        port: spec.port.unwrap_or(DEFAULT_PORT),
        md_name: format!("{name}-worker"),
        labels: json!({MANAGED_BY.0: MANAGED_BY.1, CLASS_LABEL: name}),
    };
    let mut notes = Vec::new();
    let kcp_template = control_plane_template(&ctx)?;
    let infra = infra_kind.objects(&ctx, &mut notes)?;
    let cluster = infra
        .cluster
        .or(infra.deferred)
        .ok_or_else(|| Error::other("internal: the infrastructure has no cluster object"))?;
    let infra_template = infrastructure_template(&ctx, cluster);
    // The MachineDeployment (last) is the topology controller's to create.
    let mut worker_objects = workers::objects(&ctx, infra.workers);
    worker_objects.pop();
    let bootstrap = worker_objects
        .first()
        .cloned()
        .ok_or_else(|| Error::other("internal: the infrastructure has no worker templates"))?;
    let machine = worker_objects
        .last()
        .cloned()
        .ok_or_else(|| Error::other("internal: the infrastructure has no machine template"))?;
    let class = cluster_class(&ctx, &kcp_template, &infra_template, &bootstrap, &machine);
    notes.extend(infra_kind.class_notes(spec));
    notes.push(format!(
        "clusters of this class: kubectl kamaji create NAME --class {name} --kubernetes-version VERSION [--service-address IP --port PORT] [--workers N]"
    ));
    let mut objects = vec![kcp_template, infra_template];
    objects.extend(worker_objects);
    objects.push(class);
    Ok(Built {
        objects,
        deferred: None,
        version: String::new(),
        notes,
    })
}

/// The KamajiControlPlaneTemplate: `create`'s KamajiControlPlane spec without what the topology
/// (`version`, `replicas`) and the reconciler (`controlPlaneEndpoint`) set.
fn control_plane_template(ctx: &Ctx) -> Result<Value, Error> {
    let kcp = kamaji_control_plane(ctx)?;
    let mut spec = kcp["spec"].clone();
    if let Some(m) = spec.as_object_mut() {
        for k in ["version", "replicas", "controlPlaneEndpoint"] {
            m.remove(k);
        }
    }
    Ok(json!({
        "apiVersion": kcp["apiVersion"],
        "kind": template_kind("KamajiControlPlane"),
        "metadata": ctx.meta(ctx.name()),
        "spec": {"template": {"spec": spec}},
    }))
}

/// The template of an infrastructure cluster object, without the endpoint fields the
/// reconciler writes on the cluster made from it (CAPI's topology controller would otherwise
/// own them and put them back).
fn infrastructure_template(ctx: &Ctx, cluster: Value) -> Value {
    let mut spec = cluster["spec"].clone();
    let fields = ctx.infra.endpoint_patch().map(EndpointPatch::fields);
    if let Some(m) = spec.as_object_mut() {
        for k in fields.unwrap_or_default() {
            m.remove(*k);
        }
    }
    let mut template = json!({"spec": spec});
    if let Some(a) = at(&cluster, &["metadata", "annotations"]) {
        template["metadata"] = json!({"annotations": a});
    }
    let kind = cluster["kind"].as_str().unwrap_or_default();
    json!({
        "apiVersion": cluster["apiVersion"],
        "kind": template_kind(kind),
        "metadata": ctx.meta(ctx.name()),
        "spec": {"template": template},
    })
}

/// A ClusterClass reference to `obj` in the shape of `level`.
fn template_ref(level: CapiVersion, obj: &Value) -> Value {
    let r = json!({
        "apiVersion": obj["apiVersion"], "kind": obj["kind"], "name": obj["metadata"]["name"],
    });
    match level {
        CapiVersion::V1Beta2 => json!({"templateRef": r}),
        CapiVersion::V1Beta1 => {
            let mut r = r;
            r["namespace"] = obj["metadata"]["namespace"].clone();
            json!({"ref": r})
        }
    }
}

fn cluster_class(
    ctx: &Ctx,
    kcp_template: &Value,
    infra_template: &Value,
    bootstrap: &Value,
    machine: &Value,
) -> Value {
    let level = ctx.versions.capi;
    let mut control_plane = template_ref(level, kcp_template);
    let naming = json!({"template": CONTROL_PLANE_NAMING});
    let worker = match level {
        CapiVersion::V1Beta2 => {
            control_plane["naming"] = naming;
            json!({
                "class": WORKER_CLASS,
                "bootstrap": template_ref(level, bootstrap),
                "infrastructure": template_ref(level, machine),
            })
        }
        CapiVersion::V1Beta1 => {
            control_plane["namingStrategy"] = naming;
            json!({
                "class": WORKER_CLASS,
                "template": {
                    "bootstrap": template_ref(level, bootstrap),
                    "infrastructure": template_ref(level, machine),
                },
            })
        }
    };
    json!({
        "apiVersion": api_version(CAPI_GROUP, level.as_str()),
        "kind": "ClusterClass",
        "metadata": ctx.meta(ctx.name()),
        "spec": {
            "controlPlane": control_plane,
            "infrastructure": template_ref(level, infra_template),
            "workers": {"machineDeployments": [worker]},
            "variables": [{
                "name": ADDRESS_VARIABLE,
                "required": false,
                "schema": {"openAPIV3Schema": {
                    "type": "string",
                    "description": "The pre-assigned IP (VIP) of the cluster's API server (KamajiControlPlane spec.network.serviceAddress); its port is the Cluster's clusterNetwork.apiServerPort",
                }},
            }],
            "patches": [address_patch(ctx, kcp_template, infra_template)],
        },
    })
}

/// The patch writing [`ADDRESS_VARIABLE`], when set, into the KamajiControlPlane (and where the
/// provider adds one, its cluster template: OpenStack's `apiServerFixedIP`, which CAPO may not
/// let change later).
fn address_patch(ctx: &Ctx, kcp_template: &Value, infra_template: &Value) -> Value {
    let from = json!({"variable": ADDRESS_VARIABLE});
    let mut definitions = vec![json!({
        "selector": {
            "apiVersion": kcp_template["apiVersion"], "kind": kcp_template["kind"],
            "matchResources": {"controlPlane": true},
        },
        "jsonPatches": [{"op": "add", "path": "/spec/template/spec/network/serviceAddress", "valueFrom": from}],
    })];
    definitions.extend(ctx.infra.class_patches(infra_template));
    json!({
        "name": ADDRESS_VARIABLE,
        "description": "The cluster's pre-assigned API server address, when it has one",
        "enabledIf": format!("{{{{ if .{ADDRESS_VARIABLE} }}}}true{{{{ end }}}}"),
        "definitions": definitions,
    })
}

/// What `create --class` needs to know of an existing ClusterClass (read in either contract's
/// shape).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ClassInfo {
    pub name: String,
    /// The kind of the control-plane template.
    pub control_plane_kind: String,
    /// The worker (MachineDeployment) classes, in order.
    pub worker_classes: Vec<String>,
    /// The variables it declares.
    pub variables: Vec<String>,
}

impl ClassInfo {
    /// Reads a ClusterClass as the API server returns it (v1beta2 or v1beta1).
    pub fn read(class: &Value) -> ClassInfo {
        let cp = at(class, &["spec", "controlPlane"]);
        let control_plane_kind = cp
            .and_then(|c| {
                str_at(c, &["templateRef", "kind"]).or_else(|| str_at(c, &["ref", "kind"]))
            })
            .unwrap_or_default()
            .to_string();
        let names = |path: &[&str], key: &str| -> Vec<String> {
            at(class, path)
                .and_then(Value::as_array)
                .map(|a| {
                    a.iter()
                        .filter_map(|e| e[key].as_str().map(str::to_string))
                        .collect()
                })
                .unwrap_or_default()
        };
        ClassInfo {
            name: crate::json::name(class).to_string(),
            control_plane_kind,
            worker_classes: names(&["spec", "workers", "machineDeployments"], "class"),
            variables: names(&["spec", "variables"], "name"),
        }
    }
}

/// The flags `create` cannot take with `--class`: the class decides them.
fn refuse_with_class(spec: &CreateSpec) -> Result<(), Error> {
    let decided_by_class = [
        ("--infrastructure", spec.infrastructure.is_some()),
        ("--datastore", spec.datastore.is_some()),
        ("--service-type", spec.service_type.is_some()),
        ("--cert-san", !spec.cert_sans.is_empty()),
        ("--addons", spec.addons.is_some()),
        (
            "--admission-controllers",
            !spec.admission_controllers.is_empty(),
        ),
        ("--apiserver-arg", !spec.apiserver_args.is_empty()),
        (
            "--controller-manager-arg",
            !spec.controller_manager_args.is_empty(),
        ),
        ("--scheduler-arg", !spec.scheduler_args.is_empty()),
        ("--from-file", spec.values.is_some()),
        // The class's KubeadmConfigTemplate holds the workers' kubelet arguments.
        ("--cluster-dns", spec.cluster_dns.is_some()),
    ];
    let mut given = decided_by_class
        .into_iter()
        .chain(spec.infrastructure_flags())
        .chain([("--kube-proxy-mode", spec.kube_proxy_mode.is_some())]);
    match given.find(|(_, g)| *g) {
        Some((flag, _)) => Err(usage(
            format!("{flag} cannot be used with --class: the ClusterClass decides it"),
            "with --class pass only --kubernetes-version, --replicas, --workers, --failure-domain, --service-address, --port, --pod-cidr, --service-cidr and --cni/--cni-manifest; change the class for the rest (kubectl kamaji generate clusterclass)",
        )),
        None => Ok(()),
    }
}

/// The flag checks of `create --class`, which need no server: the class name, the flags the
/// class decides, the version, counts, networks and address.
pub fn check_topology(spec: &CreateSpec) -> Result<String, Error> {
    validate_name(&spec.name)?;
    let class = spec.class.as_deref().unwrap_or_default();
    crate::names::check_object_name("ClusterClass", class)?;
    refuse_with_class(spec)?;
    let raw = spec.kubernetes_version.as_deref().ok_or_else(|| {
        usage(
            "--kubernetes-version is required",
            "pass e.g. --kubernetes-version v1.35.0 (the topology's version)",
        )
    })?;
    let version = parse_version(raw)?.to_string();
    check_counts(spec)?;
    check_failure_domain(spec)?;
    check_network(spec)?;
    if let Some(a) = &spec.service_address
        && a.parse::<IpAddr>().is_err()
    {
        return Err(usage(
            format!("invalid --service-address {a:?}: not an IP address"),
            "pass the IP (or VIP) the control plane is reached at, e.g. 192.0.2.10",
        ));
    }
    Ok(version)
}

/// The refusal when `class` cannot serve `spec` (no Kamaji control plane, no worker class for
/// `--workers`, no address variable for `--service-address`).
fn check_class_fits(spec: &CreateSpec, class: &ClassInfo) -> Result<(), Error> {
    let kamaji = template_kind("KamajiControlPlane");
    if class.control_plane_kind != kamaji {
        return Err(Error::Other {
            message: format!(
                "ClusterClass {} has a {} control plane, not a {kamaji}",
                class.name,
                if class.control_plane_kind.is_empty() {
                    "missing"
                } else {
                    class.control_plane_kind.as_str()
                }
            ),
            hint: Some(
                "kubectl kamaji create --class needs a Kamaji class (kubectl kamaji generate clusterclass); use kubectl apply for other classes".into(),
            ),
        });
    }
    if spec.workers.is_some_and(|w| w > 0) && class.worker_classes.is_empty() {
        return Err(Error::Other {
            message: format!("ClusterClass {} has no worker class", class.name),
            hint: Some(
                "drop --workers, or add a machineDeployments class to the ClusterClass".into(),
            ),
        });
    }
    if spec.failure_domain.is_some() && class.worker_classes.is_empty() {
        return Err(Error::Other {
            message: format!(
                "ClusterClass {} has no worker class for --failure-domain",
                class.name
            ),
            hint: Some(
                "drop --failure-domain, or add a machineDeployments class to the ClusterClass"
                    .into(),
            ),
        });
    }
    if spec.service_address.is_some() && !class.variables.iter().any(|v| v == ADDRESS_VARIABLE) {
        return Err(Error::Other {
            message: format!(
                "ClusterClass {} has no {ADDRESS_VARIABLE} variable for --service-address",
                class.name
            ),
            hint: Some(
                "generate the class with kubectl kamaji generate clusterclass (it declares it), or set the address in its KamajiControlPlaneTemplate and drop --service-address".into(),
            ),
        });
    }
    Ok(())
}

/// The topology Cluster of `spec.class` (with the network plugin's objects after it).
pub fn build_topology(
    spec: &CreateSpec,
    versions: &Versions,
    class: &ClassInfo,
) -> Result<Built, Error> {
    let version = check_topology(spec)?;
    check_class_fits(spec, class)?;
    let name = spec.name.as_str();
    let worker_class = class.worker_classes.first();
    let workers = match worker_class {
        Some(_) => spec.workers.unwrap_or(1),
        None => 0,
    };
    let ctx = Ctx {
        spec,
        versions,
        infra: Infrastructure::default(),
        file: Map::new(),
        version: version.clone(),
        address: spec.service_address.clone(),
        workers,
        port: spec.port.unwrap_or(DEFAULT_PORT),
        md_name: format!("{name}-{TOPOLOGY_WORKERS}"),
        labels: json!({CLUSTER_NAME_LABEL: name, MANAGED_BY.0: MANAGED_BY.1}),
    };
    let level = versions.capi;
    let class_name = class.name.as_str();
    let mut topology = match level {
        CapiVersion::V1Beta2 => json!({"classRef": {"name": class_name}}),
        CapiVersion::V1Beta1 => json!({"class": class_name}),
    };
    topology["version"] = json!(version);
    topology["controlPlane"] = json!({"replicas": spec.replicas.unwrap_or(2)});
    if let Some(wc) = worker_class {
        let mut md = json!({"class": wc, "name": TOPOLOGY_WORKERS, "replicas": workers});
        // `MachineDeploymentTopology.failureDomain` in both contracts: it overrides the class's.
        if let Some(fd) = &spec.failure_domain {
            md["failureDomain"] = json!(fd);
        }
        topology["workers"] = json!({"machineDeployments": [md]});
    }
    if let Some(a) = &spec.service_address {
        topology["variables"] = json!([{"name": ADDRESS_VARIABLE, "value": a}]);
    }
    let pods = pod_cidrs(spec);
    let mut meta = ctx.meta(name);
    let mut notes = Vec::new();
    let mut cni_objects = Vec::new();
    match &spec.cni {
        Some(m) => {
            meta["labels"][cni::CNI_LABEL] = json!(m.kind.label());
            cni_objects = network_plugin(&ctx, m, &pods, &mut notes)?;
        }
        None if workers > 0 && !spec.cni_none_explicit => notes.push(
            "no network plugin (--cni none): the workers stay NotReady until one runs; pass --cni calico or --cni-manifest FILE, or install one by hand".to_string(),
        ),
        None => {}
    }
    let cluster = json!({
        "apiVersion": api_version(CAPI_GROUP, level.as_str()),
        "kind": "Cluster",
        "metadata": meta,
        "spec": {"clusterNetwork": cluster_network(spec, &pods), "topology": topology},
    });
    notes.push(format!(
        "Cluster API's topology controller creates the KamajiControlPlane {name} and the workers from ClusterClass {class_name}"
    ));
    let mut objects = vec![cluster];
    objects.extend(cni_objects);
    Ok(Built {
        objects,
        deferred: None,
        version,
        notes,
    })
}

#[cfg(test)]
mod tests;
