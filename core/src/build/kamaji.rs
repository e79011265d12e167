//! `kubectl kamaji create`: the consistent object set of a Kamaji-hosted cluster, from flags.
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

use std::collections::BTreeMap;
use std::net::IpAddr;

use serde_json::{Map, Value, json};

use crate::Error;
use crate::groups::CapiVersion;
use crate::version::{KubeVersion, minor_steps};

/// Field manager of everything `kubectl kamaji` applies.
pub const FIELD_MANAGER: &str = "kubectl-kamaji";
/// Label on every object `create` writes.
pub const MANAGED_BY: (&str, &str) = ("app.kubernetes.io/managed-by", "kubectl-kamaji");
/// CAPI's cluster-name label.
pub use crate::labels::CLUSTER_NAME_LABEL;
const DEPLOYMENT_NAME_LABEL: &str = "cluster.x-k8s.io/deployment-name";
const INFRA_GROUP: &str = "infrastructure.cluster.x-k8s.io";
const BOOTSTRAP_GROUP: &str = "bootstrap.cluster.x-k8s.io";
const CONTROLPLANE_GROUP: &str = "controlplane.cluster.x-k8s.io";
/// BYOH's installer template kind: the BYOH controller makes one K8sInstallerConfig per
/// ByoMachine from it, whose installation secret the host agent runs to install Kubernetes.
pub const INSTALLER_TEMPLATE_KIND: &str = "K8sInstallerConfigTemplate";
/// The installer bundle repository of BYOH's own cluster templates and docs
/// (vmware-tanzu/cluster-api-provider-bringyourownhost).
pub const DEFAULT_BUNDLE_REPO: &str =
    "projects.registry.vmware.com/cluster_api_provider_bringyourownhost";
/// The only bundle type BYOH's installer knows.
pub const DEFAULT_BUNDLE_TYPE: &str = "k8s";
/// Kamaji's default API server port.
pub const DEFAULT_PORT: u16 = 6443;
/// Kamaji's TenantControlPlane defaults, written on the Cluster so they are visible.
pub const DEFAULT_POD_CIDR: &str = "10.244.0.0/16";
pub const DEFAULT_SERVICE_CIDR: &str = "10.96.0.0/16";

/// The admission controllers Kamaji's TenantControlPlane accepts: the KamajiControlPlane API's
/// list, which its CRD schema enumerates.
pub use crate::kcp::api::ADMISSION_CONTROLLERS;

/// Where the workers run.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Infrastructure {
    Byoh,
    Openstack,
    Kubevirt,
    Metal3,
    Aws,
    /// A control plane only; workers are joined by hand (`token join`).
    None,
}

impl Infrastructure {
    pub const ALL: [Infrastructure; 6] = [
        Infrastructure::Byoh,
        Infrastructure::Openstack,
        Infrastructure::Kubevirt,
        Infrastructure::Metal3,
        Infrastructure::Aws,
        Infrastructure::None,
    ];
    pub fn as_str(self) -> &'static str {
        match self {
            Infrastructure::Byoh => "byoh",
            Infrastructure::Openstack => "openstack",
            Infrastructure::Kubevirt => "kubevirt",
            Infrastructure::Metal3 => "metal3",
            Infrastructure::Aws => "aws",
            Infrastructure::None => "none",
        }
    }
    /// Parses a `--infrastructure` value; the error names the accepted ones.
    pub fn parse(s: &str) -> Result<Infrastructure, Error> {
        Infrastructure::ALL
            .into_iter()
            .find(|i| i.as_str() == s.to_ascii_lowercase())
            .ok_or_else(|| Error::Usage {
                message: format!("unknown infrastructure {s:?}"),
                hint: Some(format!(
                    "use one of: {}",
                    Infrastructure::ALL.map(|i| i.as_str()).join(", ")
                )),
            })
    }
    /// The infrastructure cluster kind.
    pub fn cluster_kind(self) -> Option<&'static str> {
        match self {
            Infrastructure::Byoh => Some("ByoCluster"),
            Infrastructure::Openstack => Some("OpenStackCluster"),
            Infrastructure::Kubevirt => Some("KubevirtCluster"),
            Infrastructure::Metal3 => Some("Metal3Cluster"),
            Infrastructure::Aws => Some("AWSCluster"),
            Infrastructure::None => None,
        }
    }
    /// The worker machine template kind.
    pub fn template_kind(self) -> Option<&'static str> {
        match self {
            Infrastructure::Byoh => Some("ByoMachineTemplate"),
            Infrastructure::Openstack => Some("OpenStackMachineTemplate"),
            Infrastructure::Kubevirt => Some("KubevirtMachineTemplate"),
            Infrastructure::Metal3 => Some("Metal3MachineTemplate"),
            Infrastructure::Aws => Some("AWSMachineTemplate"),
            Infrastructure::None => None,
        }
    }
    /// The provider's current API version, used when the server does not serve the kind
    /// (client dry-run against a cluster without that provider).
    pub fn default_version(self) -> &'static str {
        match self {
            Infrastructure::Byoh | Infrastructure::Openstack | Infrastructure::Metal3 => "v1beta1",
            Infrastructure::Kubevirt => "v1alpha1",
            Infrastructure::Aws => "v1beta2",
            Infrastructure::None => "",
        }
    }
    /// The `clusterctl init --infrastructure` name, for hints.
    pub fn provider_name(self) -> &'static str {
        match self {
            Infrastructure::Byoh => "byoh",
            Infrastructure::Openstack => "openstack",
            Infrastructure::Kubevirt => "kubevirt",
            Infrastructure::Metal3 => "metal3",
            Infrastructure::Aws => "aws",
            Infrastructure::None => "",
        }
    }
}

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
    pub addons: Option<Vec<Addon>>,
    pub admission_controllers: Vec<String>,
    pub apiserver_args: Vec<String>,
    pub controller_manager_args: Vec<String>,
    pub scheduler_args: Vec<String>,
    /// Machine size: OpenStack flavor, AWS instance type, KubeVirt `CORESxMEMORY`.
    pub flavor: Option<String>,
    /// OpenStack image name, AWS AMI id, KubeVirt container disk, Metal3 image URL.
    pub image: Option<String>,
    /// Metal3 image checksum (URL or hex digest).
    pub image_checksum: Option<String>,
    /// OpenStack network name.
    pub network: Option<String>,
    pub ssh_key: Option<String>,
    /// AWS region.
    pub region: Option<String>,
    /// OpenStack cloud name in the clouds.yaml Secret.
    pub cloud_name: Option<String>,
    /// OpenStack clouds.yaml Secret (default `<name>-cloud-config`).
    pub identity_secret: Option<String>,
    /// BYOH: labels a host needs to be picked for a worker.
    pub host_selector: BTreeMap<String, String>,
    /// BYOH: the OCI repository of the Kubernetes installer bundles (default
    /// [`DEFAULT_BUNDLE_REPO`]).
    pub bundle_repo: Option<String>,
    /// BYOH: the bundle type (default [`DEFAULT_BUNDLE_TYPE`]).
    pub bundle_type: Option<String>,
    /// BYOH: the hosts have Kubernetes pre-installed (agents started with
    /// `--skip-installation`): no installer template, no `installerRef`.
    pub preinstalled_hosts: bool,
    /// The network plugin to install through a ClusterResourceSet (`--cni calico`, already
    /// downloaded, or `--cni-manifest FILE`, already read); `None`: none.
    pub cni: Option<super::cni::CniManifest>,
    /// `--cni none` was given explicitly (no note about the missing network plugin).
    pub cni_none_explicit: bool,
    /// `--from-file`: KamajiControlPlane spec fields (a `spec:` map or the fields themselves).
    pub values: Option<Value>,
}

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

fn usage(message: impl Into<String>, hint: impl Into<String>) -> Error {
    Error::Usage {
        message: message.into(),
        hint: Some(hint.into()),
    }
}

/// Checks a name the way Kamaji needs it: a DNS-1035 label (it names a Service), at most 63
/// characters.
pub fn validate_name(name: &str) -> Result<(), Error> {
    let ok = !name.is_empty()
        && name.len() <= 63
        && name.starts_with(|c: char| c.is_ascii_lowercase())
        && name.ends_with(|c: char| c.is_ascii_lowercase() || c.is_ascii_digit())
        && name
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-');
    if ok {
        Ok(())
    } else {
        Err(usage(
            format!("invalid name {name:?}: it must be a DNS-1035 label"),
            "use at most 63 lower-case letters, digits and '-', starting with a letter and ending with a letter or digit (e.g. prod-eu-1)",
        ))
    }
}

/// Parses a Kubernetes release for Kamaji (`v1.35.0`; a missing `v` is added): Kamaji runs
/// releases of Kubernetes 1.x, not pre-releases. The error says what is expected.
pub fn parse_version(s: &str) -> Result<KubeVersion, Error> {
    let hint = "use vMAJOR.MINOR.PATCH, e.g. v1.35.0";
    let v = KubeVersion::parse(s)
        .ok()
        .filter(KubeVersion::is_release)
        .ok_or_else(|| usage(format!("invalid Kubernetes version {s:?}"), hint))?;
    if v.major != 1 {
        return Err(usage(
            format!("invalid Kubernetes version {s:?}: Kamaji runs Kubernetes 1.x"),
            hint,
        ));
    }
    Ok(v)
}

/// The versions an upgrade walks through, one minor at a time (Kamaji refuses to skip a
/// minor): intermediate minors at `.0`, then the target. Empty when already there.
pub fn upgrade_steps(from: &str, to: &str) -> Result<Vec<String>, Error> {
    let f = parse_version(from)?;
    let t = parse_version(to)?;
    if t < f {
        return Err(usage(
            format!("cannot downgrade from {f} to {t}"),
            "Kamaji does not support downgrades; pick a version at or above the current one",
        ));
    }
    Ok(minor_steps(&f, &t)
        .iter()
        .map(ToString::to_string)
        .collect())
}

fn validate_cidr(flag: &str, s: &str) -> Result<(), Error> {
    let bad = || {
        usage(
            format!("invalid {flag} {s:?}: not a CIDR"),
            "use ADDRESS/PREFIX, e.g. 10.244.0.0/16 or fd00::/108 (two for dual-stack, comma separated)",
        )
    };
    let (ip, prefix) = s.split_once('/').ok_or_else(bad)?;
    let ip: IpAddr = ip.parse().map_err(|_| bad())?;
    let prefix: u8 = prefix.parse().map_err(|_| bad())?;
    let max = if ip.is_ipv4() { 32 } else { 128 };
    if prefix > max {
        return Err(bad());
    }
    Ok(())
}

/// Normalises an extra argument to `--key=value` (Kamaji's `extraArgs` form).
pub fn normalise_arg(flag: &str, s: &str) -> Result<String, Error> {
    let t = s.trim().trim_start_matches('-');
    if t.is_empty() || t.starts_with('=') {
        return Err(usage(
            format!("invalid {flag} {s:?}"),
            "use KEY=VALUE, e.g. --apiserver-arg audit-log-maxage=30",
        ));
    }
    Ok(format!("--{t}"))
}

fn ensure_only_for(
    spec_infra: Infrastructure,
    flag: &str,
    given: bool,
    allowed: &[Infrastructure],
) -> Result<(), Error> {
    if given && !allowed.contains(&spec_infra) {
        let names: Vec<&str> = allowed.iter().map(|i| i.as_str()).collect();
        return Err(usage(
            format!(
                "{flag} does not apply to --infrastructure {}",
                spec_infra.as_str()
            ),
            format!(
                "{flag} is for --infrastructure {}; drop it or change --infrastructure",
                names.join("|")
            ),
        ));
    }
    Ok(())
}

/// The KamajiControlPlane spec fields of a values file: its `spec:` when it is a whole object
/// (or has a `spec` key), else the map itself.
pub fn values_spec(values: &Value) -> Result<Map<String, Value>, Error> {
    let bad = || {
        usage(
            "--from-file must hold a YAML map of KamajiControlPlane spec fields",
            "for example:\n  network:\n    serviceType: NodePort\n  deployment:\n    nodeSelector: {kubernetes.io/os: linux}",
        )
    };
    let map = values.as_object().ok_or_else(bad)?;
    if let Some(kind) = map.get("kind").and_then(Value::as_str)
        && kind != "KamajiControlPlane"
    {
        return Err(usage(
            format!("--from-file holds a {kind}, not KamajiControlPlane fields"),
            "put KamajiControlPlane spec fields (or a KamajiControlPlane) in the file",
        ));
    }
    match map.get("spec") {
        Some(spec) => spec.as_object().cloned().ok_or_else(bad),
        None => Ok(map.clone()),
    }
}

/// Deep-merges `over` into `base`: maps merge key by key, anything else replaces.
pub fn merge(base: &mut Value, over: &Value) {
    match (base, over) {
        (Value::Object(b), Value::Object(o)) => {
            for (k, v) in o {
                match b.get_mut(k) {
                    Some(bv) if bv.is_object() && v.is_object() => merge(bv, v),
                    _ => {
                        b.insert(k.clone(), v.clone());
                    }
                }
            }
        }
        (b, o) => *b = o.clone(),
    }
}

fn api_version(group: &str, version: &str) -> String {
    format!("{group}/{version}")
}

/// A reference in the shape of `level`: `{apiGroup, kind, name}` (v1beta2) or
/// `{apiVersion, kind, name[, namespace]}` (v1beta1).
fn reference(
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

/// Checks the flags, then builds the object set.
pub fn build(spec: &CreateSpec, versions: &Versions) -> Result<Built, Error> {
    validate_name(&spec.name)?;
    let infra = spec.infrastructure.ok_or_else(|| {
        usage(
            "--infrastructure is required",
            format!(
                "use one of: {} (none = a control plane only, workers joined with `token join`)",
                Infrastructure::ALL.map(|i| i.as_str()).join(", ")
            ),
        )
    })?;
    let file = match &spec.values {
        Some(v) => values_spec(v)?,
        None => Map::new(),
    };

    // ---- checks: one clear line each
    let raw_version = spec
        .kubernetes_version
        .clone()
        .or_else(|| {
            file.get("version")
                .and_then(Value::as_str)
                .map(str::to_string)
        })
        .ok_or_else(|| {
            usage(
                "--kubernetes-version is required",
                "pass e.g. --kubernetes-version v1.35.0 (or set version: in --from-file)",
            )
        })?;
    let version = parse_version(&raw_version)?.to_string();
    if let Some(r) = spec.replicas
        && !(0..=16).contains(&r)
    {
        return Err(usage(
            format!("invalid --replicas {r}"),
            "use 0 (asleep) to 16 control-plane replicas",
        ));
    }
    if let Some(w) = spec.workers
        && w < 0
    {
        return Err(usage(format!("invalid --workers {w}"), "use 0 or more"));
    }
    ensure_only_for(
        infra,
        "--workers",
        spec.workers.is_some(),
        &[
            Infrastructure::Byoh,
            Infrastructure::Openstack,
            Infrastructure::Kubevirt,
            Infrastructure::Metal3,
            Infrastructure::Aws,
        ],
    )?;
    ensure_only_for(
        infra,
        "--flavor",
        spec.flavor.is_some(),
        &[
            Infrastructure::Openstack,
            Infrastructure::Kubevirt,
            Infrastructure::Aws,
        ],
    )?;
    ensure_only_for(
        infra,
        "--image",
        spec.image.is_some(),
        &[
            Infrastructure::Openstack,
            Infrastructure::Kubevirt,
            Infrastructure::Metal3,
            Infrastructure::Aws,
        ],
    )?;
    ensure_only_for(
        infra,
        "--image-checksum",
        spec.image_checksum.is_some(),
        &[Infrastructure::Metal3],
    )?;
    ensure_only_for(
        infra,
        "--network",
        spec.network.is_some(),
        &[Infrastructure::Openstack],
    )?;
    ensure_only_for(
        infra,
        "--ssh-key",
        spec.ssh_key.is_some(),
        &[Infrastructure::Openstack, Infrastructure::Aws],
    )?;
    ensure_only_for(
        infra,
        "--region",
        spec.region.is_some(),
        &[Infrastructure::Aws],
    )?;
    ensure_only_for(
        infra,
        "--cloud-name/--identity-secret",
        spec.cloud_name.is_some() || spec.identity_secret.is_some(),
        &[Infrastructure::Openstack],
    )?;
    ensure_only_for(
        infra,
        "--host-selector",
        !spec.host_selector.is_empty(),
        &[Infrastructure::Byoh],
    )?;
    ensure_only_for(
        infra,
        "--bundle-repo/--bundle-type",
        spec.bundle_repo.is_some() || spec.bundle_type.is_some(),
        &[Infrastructure::Byoh],
    )?;
    ensure_only_for(
        infra,
        "--preinstalled-hosts",
        spec.preinstalled_hosts,
        &[Infrastructure::Byoh],
    )?;
    if spec.preinstalled_hosts && (spec.bundle_repo.is_some() || spec.bundle_type.is_some()) {
        return Err(usage(
            "--preinstalled-hosts and --bundle-repo/--bundle-type cannot be used together",
            "hosts with Kubernetes pre-installed need no installer bundle: drop one of them",
        ));
    }
    if let Some(r) = &spec.bundle_repo {
        validate_bundle_repo(r)?;
    }
    if let Some(t) = &spec.bundle_type
        && t != DEFAULT_BUNDLE_TYPE
    {
        return Err(usage(
            format!("invalid --bundle-type {t:?}"),
            format!("BYOH's installer knows one bundle type: {DEFAULT_BUNDLE_TYPE}"),
        ));
    }
    let workers = match infra {
        Infrastructure::None => 0,
        _ => spec.workers.unwrap_or(1),
    };
    let need = |flag: &str, v: &Option<String>| -> Result<String, Error> {
        v.clone().filter(|s| !s.is_empty()).ok_or_else(|| {
            usage(
                format!("--infrastructure {} needs {flag}", infra.as_str()),
                format!("pass {flag} for the worker machines"),
            )
        })
    };
    let service_type = spec
        .service_type
        .clone()
        .or_else(|| {
            file.get("network")
                .and_then(|n| n.get("serviceType"))
                .and_then(Value::as_str)
                .map(str::to_string)
        })
        .unwrap_or_else(|| "LoadBalancer".into());
    if !["ClusterIP", "NodePort", "LoadBalancer"].contains(&service_type.as_str()) {
        return Err(usage(
            format!("invalid --service-type {service_type:?}"),
            "use ClusterIP, NodePort or LoadBalancer",
        ));
    }
    let address = spec.service_address.clone().or_else(|| {
        file.get("network")
            .and_then(|n| n.get("serviceAddress"))
            .and_then(Value::as_str)
            .map(str::to_string)
    });
    if let Some(a) = &address
        && a.parse::<IpAddr>().is_err()
    {
        return Err(usage(
            format!("invalid --service-address {a:?}: not an IP address"),
            "pass the IP (or VIP) the control plane is reached at, e.g. 192.0.2.10",
        ));
    }
    if service_type == "NodePort" && address.is_none() {
        return Err(usage(
            "--service-type NodePort needs --service-address",
            "Kamaji announces NodePort control planes at a pre-assigned address: pass --service-address",
        ));
    }
    if infra == Infrastructure::Metal3 && address.is_none() {
        return Err(usage(
            "--infrastructure metal3 needs --service-address",
            "Metal3Cluster's endpoint must be known up front: pass --service-address (the control plane's VIP)",
        ));
    }
    for san in &spec.cert_sans {
        let has_port = san
            .rsplit_once(':')
            .is_some_and(|(h, p)| !h.contains(':') && p.parse::<u16>().is_ok());
        if san.is_empty() || has_port || san.contains('/') {
            return Err(usage(
                format!("invalid --cert-san {san:?}"),
                "use a DNS name or an IP without port or scheme (Kamaji refuses host:port SANs)",
            ));
        }
    }
    for (flag, list) in [
        ("--pod-cidr", &spec.pod_cidrs),
        ("--service-cidr", &spec.service_cidrs),
    ] {
        if list.len() > 2 {
            return Err(usage(
                format!("{flag} takes at most two CIDRs (one per IP family)"),
                "pass one CIDR, or two for dual-stack",
            ));
        }
        for c in list {
            validate_cidr(flag, c)?;
        }
    }
    if spec.port == Some(0) {
        return Err(usage(
            "invalid --port 0",
            "use a port from 1 to 65535 (default 6443)",
        ));
    }
    for a in &spec.admission_controllers {
        if !ADMISSION_CONTROLLERS.contains(&a.as_str()) {
            let close = crate::text::closest_names(a, ADMISSION_CONTROLLERS.iter().copied());
            let hint = match close.first() {
                Some(c) => format!("did you mean {c}? Kamaji accepts the kube-apiserver plugin names"),
                None => "Kamaji accepts the kube-apiserver plugin names, e.g. NodeRestriction,PodSecurity".into(),
            };
            return Err(usage(format!("unknown admission controller {a:?}"), hint));
        }
    }
    if let Some(ds) = &spec.datastore {
        validate_dns_subdomain("--datastore", ds)?;
    }
    for (k, v) in &spec.host_selector {
        if k.is_empty() || k.contains(char::is_whitespace) || v.contains(char::is_whitespace) {
            return Err(usage(
                format!("invalid --host-selector {k}={v}"),
                "use KEY=VALUE label pairs, e.g. --host-selector site=ams,rack=r12",
            ));
        }
    }
    let port = spec.port.unwrap_or(DEFAULT_PORT);
    let ns = spec.namespace.as_str();
    let name = spec.name.as_str();
    let md_name = format!("{name}-md-0");
    let labels = json!({CLUSTER_NAME_LABEL: name, MANAGED_BY.0: MANAGED_BY.1});
    let meta = |n: &str| json!({"name": n, "namespace": ns, "labels": labels.clone()});

    // ---- KamajiControlPlane
    let mut kcp_spec = json!({
        "replicas": 2,
        "network": {"serviceType": "LoadBalancer"},
        "addons": {"coreDNS": {}, "kubeProxy": {}, "konnectivity": {}},
    });
    merge(&mut kcp_spec, &Value::Object(file.clone()));
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
    merge(&mut kcp_spec, &flags);
    if let Some(addons) = &spec.addons {
        let current = kcp_spec.get("addons").cloned().unwrap_or(json!({}));
        let mut out = Map::new();
        for a in addons {
            out.insert(
                a.key().into(),
                current.get(a.key()).cloned().unwrap_or(json!({})),
            );
        }
        kcp_spec["addons"] = Value::Object(out);
    }
    let kcp = json!({
        "apiVersion": api_version(CONTROLPLANE_GROUP, &versions.kcp),
        "kind": "KamajiControlPlane",
        "metadata": meta(name),
        "spec": kcp_spec,
    });

    // ---- infrastructure
    let infra_version = |v: &str| {
        if v.is_empty() {
            infra.default_version().to_string()
        } else {
            v.to_string()
        }
    };
    let icv = infra_version(&versions.infra_cluster);
    let itv = infra_version(&versions.infra_template);
    let endpoint = address.as_ref().map(|a| json!({"host": a, "port": port}));
    let mut infra_cluster: Option<Value> = None;
    let mut deferred: Option<Value> = None;
    let mut template: Option<Value> = None;
    let mut kubelet_args: Vec<(&str, &str)> = Vec::new();
    let mut installer_template: Option<Value> = None;
    let mut notes: Vec<String> = Vec::new();
    match infra {
        Infrastructure::None => {}
        Infrastructure::Byoh => {
            let mut s = json!({});
            if let Some(ep) = &endpoint {
                s["controlPlaneEndpoint"] = ep.clone();
            }
            infra_cluster = Some(json!({
                "apiVersion": api_version(INFRA_GROUP, &icv), "kind": "ByoCluster",
                "metadata": meta(name), "spec": s,
            }));
            let mut ts = json!({});
            if !spec.host_selector.is_empty() {
                ts["selector"] = json!({"matchLabels": spec.host_selector});
            }
            if spec.preinstalled_hosts {
                notes.push(format!(
                    "--preinstalled-hosts: no K8sInstallerConfigTemplate and no installerRef; the hosts must have Kubernetes {version} installed and their agents run with --skip-installation"
                ));
            } else {
                let iv = if versions.installer.is_empty() {
                    "v1beta1"
                } else {
                    versions.installer.as_str()
                };
                let repo = spec
                    .bundle_repo
                    .clone()
                    .unwrap_or_else(|| DEFAULT_BUNDLE_REPO.to_string());
                let btype = spec
                    .bundle_type
                    .clone()
                    .unwrap_or_else(|| DEFAULT_BUNDLE_TYPE.to_string());
                // BYOH reads the template at installerRef.namespace: it must be set.
                ts["installerRef"] = json!({
                    "apiVersion": api_version(INFRA_GROUP, iv),
                    "kind": INSTALLER_TEMPLATE_KIND,
                    "name": md_name,
                    "namespace": ns,
                });
                installer_template = Some(json!({
                    "apiVersion": api_version(INFRA_GROUP, iv), "kind": INSTALLER_TEMPLATE_KIND,
                    "metadata": meta(&md_name),
                    "spec": {"template": {"spec": {"bundleRepo": repo, "bundleType": btype}}},
                }));
                if workers > 0 {
                    notes.push(format!(
                        "BYOH agents install Kubernetes {version} from {repo}/byoh-bundle-<os>_k8s:{version} (K8sInstallerConfigTemplate {md_name}); the bundle must exist there, or pass --preinstalled-hosts for hosts with Kubernetes pre-installed"
                    ));
                }
            }
            template = Some(json!({
                "apiVersion": api_version(INFRA_GROUP, &itv), "kind": "ByoMachineTemplate",
                "metadata": meta(&md_name), "spec": {"template": {"spec": ts}},
            }));
        }
        Infrastructure::Openstack => {
            let flavor = need("--flavor", &spec.flavor)?;
            let image = need("--image", &spec.image)?;
            let cloud = spec
                .cloud_name
                .clone()
                .unwrap_or_else(|| "openstack".into());
            let secret = spec
                .identity_secret
                .clone()
                .unwrap_or_else(|| format!("{name}-cloud-config"));
            let identity = json!({"name": secret, "cloudName": cloud});
            let mut s = json!({
                "identityRef": identity,
                "apiServerLoadBalancer": {"enabled": false},
                "disableAPIServerFloatingIP": true,
                "apiServerFixedIP": address.clone().unwrap_or_default(),
                "apiServerPort": port,
                "managedSecurityGroups": {},
            });
            if let Some(n) = &spec.network {
                s["network"] = json!({"filter": {"name": n}});
            }
            let osc = json!({
                "apiVersion": api_version(INFRA_GROUP, &icv), "kind": "OpenStackCluster",
                "metadata": meta(name), "spec": s,
            });
            if address.is_some() {
                infra_cluster = Some(osc);
            } else {
                deferred = Some(osc);
            }
            let mut ts = json!({
                "flavor": flavor,
                "image": {"filter": {"name": image}},
                "identityRef": identity,
            });
            if let Some(k) = &spec.ssh_key {
                ts["sshKeyName"] = json!(k);
            }
            template = Some(json!({
                "apiVersion": api_version(INFRA_GROUP, &itv), "kind": "OpenStackMachineTemplate",
                "metadata": meta(&md_name), "spec": {"template": {"spec": ts}},
            }));
            kubelet_args.push(("cloud-provider", "external"));
        }
        Infrastructure::Kubevirt => {
            let image = need("--image", &spec.image)?;
            let (cores, memory) = parse_kubevirt_flavor(spec.flavor.as_deref())?;
            let mut m = meta(name);
            m["annotations"] = json!({"cluster.x-k8s.io/managed-by": "kamaji"});
            infra_cluster = Some(json!({
                "apiVersion": api_version(INFRA_GROUP, &icv), "kind": "KubevirtCluster",
                "metadata": m, "spec": {},
            }));
            template = Some(json!({
                "apiVersion": api_version(INFRA_GROUP, &itv), "kind": "KubevirtMachineTemplate",
                "metadata": meta(&md_name),
                "spec": {"template": {"spec": {"virtualMachineTemplate": {"spec": {
                    "runStrategy": "Always",
                    "template": {"spec": {
                        "domain": {
                            "cpu": {"cores": cores},
                            "memory": {"guest": memory},
                            "devices": {"disks": [{"name": "containervolume", "disk": {"bus": "virtio"}}]},
                        },
                        "evictionStrategy": "External",
                        "volumes": [{"name": "containervolume", "containerDisk": {"image": image}}],
                    }},
                }}}}},
            }));
        }
        Infrastructure::Metal3 => {
            let image = need("--image", &spec.image)?;
            let checksum = need("--image-checksum", &spec.image_checksum)?;
            infra_cluster = Some(json!({
                "apiVersion": api_version(INFRA_GROUP, &icv), "kind": "Metal3Cluster",
                "metadata": meta(name),
                "spec": {"controlPlaneEndpoint": endpoint.clone(), "noCloudProvider": true},
            }));
            template = Some(json!({
                "apiVersion": api_version(INFRA_GROUP, &itv), "kind": "Metal3MachineTemplate",
                "metadata": meta(&md_name),
                "spec": {"template": {"spec": {"image": {
                    "url": image, "checksum": checksum, "checksumType": "sha256", "format": "raw",
                }}}},
            }));
        }
        Infrastructure::Aws => {
            let region = need("--region", &spec.region)?;
            let flavor = need("--flavor", &spec.flavor)?;
            let mut s = json!({
                "region": region,
                "controlPlaneLoadBalancer": {"loadBalancerType": "disabled"},
            });
            if let Some(k) = &spec.ssh_key {
                s["sshKeyName"] = json!(k);
            }
            if let Some(ep) = &endpoint {
                s["controlPlaneEndpoint"] = ep.clone();
            }
            infra_cluster = Some(json!({
                "apiVersion": api_version(INFRA_GROUP, &icv), "kind": "AWSCluster",
                "metadata": meta(name), "spec": s,
            }));
            let mut ts = json!({
                "instanceType": flavor,
                "iamInstanceProfile": "nodes.cluster-api-provider-aws.sigs.k8s.io",
            });
            if let Some(i) = &spec.image {
                ts["ami"] = json!({"id": i});
            }
            if let Some(k) = &spec.ssh_key {
                ts["sshKeyName"] = json!(k);
            }
            template = Some(json!({
                "apiVersion": api_version(INFRA_GROUP, &itv), "kind": "AWSMachineTemplate",
                "metadata": meta(&md_name), "spec": {"template": {"spec": ts}},
            }));
            kubelet_args.push(("cloud-provider", "external"));
        }
    }

    // ---- Cluster
    let level = versions.capi;
    let capi_v = level.as_str();
    let pods = if spec.pod_cidrs.is_empty() {
        vec![DEFAULT_POD_CIDR.to_string()]
    } else {
        spec.pod_cidrs.clone()
    };
    let services = if spec.service_cidrs.is_empty() {
        vec![DEFAULT_SERVICE_CIDR.to_string()]
    } else {
        spec.service_cidrs.clone()
    };
    let mut cluster_network = json!({
        "pods": {"cidrBlocks": pods},
        "services": {"cidrBlocks": services},
    });
    if let Some(p) = spec.port {
        cluster_network["apiServerPort"] = json!(p);
    }
    let mut cluster_spec = json!({
        "clusterNetwork": cluster_network,
        "controlPlaneRef": reference(level, CONTROLPLANE_GROUP, &versions.kcp, "KamajiControlPlane", name, Some(ns)),
    });
    if let Some(kind) = infra.cluster_kind() {
        cluster_spec["infrastructureRef"] =
            reference(level, INFRA_GROUP, &icv, kind, name, Some(ns));
    }
    let mut cluster_meta = meta(name);
    let mut cni_objects = Vec::new();
    match &spec.cni {
        Some(m) => {
            cluster_meta["labels"][super::cni::CNI_LABEL] = json!(m.kind.label());
            let mut m = m.clone();
            if m.kind == super::cni::CniKind::Calico
                && let Some(v4) = pods.iter().find(|c| c.contains('.'))
            {
                m.text = super::cni::calico_with_pod_cidr(&m.text, v4);
            }
            let av = if versions.addons.is_empty() {
                "v1beta2"
            } else {
                versions.addons.as_str()
            };
            cni_objects = super::cni::objects(name, ns, &labels, av, &m)?;
            let holders: Vec<String> = cni_objects
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
                super::cni::CniKind::Calico => {
                    format!("Calico {} ({})", super::cni::CALICO_VERSION, m.source)
                }
                super::cni::CniKind::Custom => m.source.clone(),
            };
            notes.push(format!(
                "network plugin {what}: in {} and ClusterResourceSet {}, which Cluster API applies in the workload cluster once its API server answers",
                holders.join(", "),
                super::cni::resource_set_name(name)
            ));
        }
        None if workers > 0 && !spec.cni_none_explicit => notes.push(
            "no network plugin (--cni none): the workers stay NotReady until one runs; pass --cni calico or --cni-manifest FILE, or install one by hand".to_string(),
        ),
        None => {}
    }
    let cluster = json!({
        "apiVersion": api_version(crate::groups::CAPI_GROUP, capi_v),
        "kind": "Cluster",
        "metadata": cluster_meta,
        "spec": cluster_spec,
    });

    let mut objects = vec![kcp];
    objects.extend(infra_cluster);
    objects.push(cluster);
    objects.extend(cni_objects);

    // ---- workers
    if let (Some(template), Some(tkind)) = (template, infra.template_kind()) {
        let node_registration = match (level, kubelet_args.is_empty()) {
            (_, true) => json!({}),
            (CapiVersion::V1Beta2, false) => json!({"kubeletExtraArgs": kubelet_args
                .iter()
                .map(|(k, v)| json!({"name": k, "value": v}))
                .collect::<Vec<_>>()}),
            (CapiVersion::V1Beta1, false) => json!({"kubeletExtraArgs": kubelet_args
                .iter()
                .map(|(k, v)| (k.to_string(), json!(v)))
                .collect::<Map<String, Value>>()}),
        };
        // `format` (the default, cloud-config) keeps the spec non-empty, as CABPK's schema needs.
        let mut kct_spec = json!({"format": "cloud-config"});
        if !node_registration.as_object().is_some_and(Map::is_empty) {
            kct_spec["joinConfiguration"] = json!({"nodeRegistration": node_registration});
        }
        let kct = json!({
            "apiVersion": api_version(BOOTSTRAP_GROUP, &versions.bootstrap),
            "kind": "KubeadmConfigTemplate",
            "metadata": meta(&md_name),
            "spec": {"template": {"spec": kct_spec}},
        });
        let sel = json!({CLUSTER_NAME_LABEL: name, DEPLOYMENT_NAME_LABEL: md_name});
        let md = json!({
            "apiVersion": api_version(crate::groups::CAPI_GROUP, capi_v),
            "kind": "MachineDeployment",
            "metadata": meta(&md_name),
            "spec": {
                "clusterName": name,
                "replicas": workers,
                "selector": {"matchLabels": sel},
                "template": {
                    "metadata": {"labels": sel},
                    "spec": {
                        "clusterName": name,
                        "version": version,
                        "bootstrap": {"configRef": reference(level, BOOTSTRAP_GROUP, &versions.bootstrap, "KubeadmConfigTemplate", &md_name, None)},
                        "infrastructureRef": reference(level, INFRA_GROUP, &itv, tkind, &md_name, None),
                    },
                },
            },
        });
        objects.push(kct);
        objects.extend(installer_template);
        objects.push(template);
        objects.push(md);
    }
    Ok(Built {
        objects,
        deferred,
        version,
        notes,
    })
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

/// An OCI repository as BYOH's installer joins it (`<repo>/byoh-bundle-<os>_k8s:<version>`):
/// `registry[/path]`, without scheme, tag or trailing `/`.
fn validate_bundle_repo(s: &str) -> Result<(), Error> {
    let last = s.rsplit('/').next().unwrap_or(s);
    let ok = s.contains('/')
        && !s.contains("://")
        && !s.contains(char::is_whitespace)
        && !s.starts_with('/')
        && !s.ends_with('/')
        && !last.contains([':', '@']);
    if ok {
        Ok(())
    } else {
        Err(usage(
            format!("invalid --bundle-repo {s:?}: not an OCI repository"),
            format!("use REGISTRY/PATH without scheme or tag, e.g. {DEFAULT_BUNDLE_REPO}"),
        ))
    }
}

fn validate_dns_subdomain(flag: &str, s: &str) -> Result<(), Error> {
    let ok = !s.is_empty()
        && s.len() <= 253
        && s.chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-' || c == '.')
        && s.starts_with(|c: char| c.is_ascii_alphanumeric())
        && s.ends_with(|c: char| c.is_ascii_alphanumeric());
    if ok {
        Ok(())
    } else {
        Err(usage(
            format!("invalid {flag} {s:?}: not a valid object name"),
            "use lower-case letters, digits, '-' and '.' (kubectl get datastores lists them)",
        ))
    }
}

/// `CORESxMEMORY` (e.g. `2x4Gi`); default 2 cores, 4Gi.
fn parse_kubevirt_flavor(s: Option<&str>) -> Result<(u32, String), Error> {
    let Some(s) = s else {
        return Ok((2, "4Gi".into()));
    };
    let bad = || {
        usage(
            format!("invalid --flavor {s:?} for kubevirt"),
            "use CORESxMEMORY, e.g. 2x4Gi",
        )
    };
    let (c, m) = s.split_once('x').ok_or_else(bad)?;
    let cores: u32 = c.parse().map_err(|_| bad())?;
    if cores == 0 || m.is_empty() || !m.starts_with(|ch: char| ch.is_ascii_digit()) {
        return Err(bad());
    }
    Ok((cores, m.to_string()))
}

/// Fills the deferred OpenStackCluster with the endpoint Kamaji announced.
pub fn fill_openstack_endpoint(osc: &mut Value, host: &str, port: u16) {
    osc["spec"]["apiServerFixedIP"] = json!(host);
    osc["spec"]["apiServerPort"] = json!(port);
}

/// Splits `host:port` (IPv6 in brackets or not); the port defaults to 6443.
pub fn split_endpoint(s: &str) -> Option<(String, u16)> {
    let s = s.trim().trim_start_matches("https://");
    if s.is_empty() {
        return None;
    }
    if let Some(rest) = s.strip_prefix('[') {
        let (h, p) = rest.split_once(']')?;
        let port = p
            .strip_prefix(':')
            .and_then(|p| p.parse().ok())
            .unwrap_or(DEFAULT_PORT);
        return Some((h.to_string(), port));
    }
    match s.rsplit_once(':') {
        Some((h, p)) if !h.contains(':') => Some((h.to_string(), p.parse().ok()?)),
        _ => Some((s.to_string(), DEFAULT_PORT)),
    }
}

/// A `v1/List` (JSON output), which `kubectl apply -f -` accepts too.
pub fn json_list(objects: &[Value]) -> Value {
    json!({"apiVersion": "v1", "kind": "List", "items": objects})
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(infra: Infrastructure) -> CreateSpec {
        CreateSpec {
            name: "prod".into(),
            namespace: "team".into(),
            infrastructure: Some(infra),
            kubernetes_version: Some("1.35.0".into()),
            ..Default::default()
        }
    }

    fn kinds(b: &Built) -> Vec<String> {
        b.all()
            .iter()
            .map(|o| o["kind"].as_str().unwrap().to_string())
            .collect()
    }

    #[test]
    fn none_is_a_control_plane_and_a_cluster() {
        let b = build(
            &spec(Infrastructure::None),
            &Versions::latest(Infrastructure::None),
        )
        .unwrap();
        assert_eq!(kinds(&b), ["KamajiControlPlane", "Cluster"]);
        let kcp = &b.objects[0];
        assert_eq!(kcp["apiVersion"], "controlplane.cluster.x-k8s.io/v1alpha2");
        assert_eq!(kcp["spec"]["version"], "v1.35.0");
        assert_eq!(kcp["spec"]["replicas"], 2);
        assert_eq!(kcp["spec"]["network"]["serviceType"], "LoadBalancer");
        assert_eq!(
            kcp["spec"]["addons"],
            json!({"coreDNS": {}, "kubeProxy": {}, "konnectivity": {}})
        );
        let c = &b.objects[1];
        assert_eq!(
            c["spec"]["controlPlaneRef"],
            json!({"apiGroup": "controlplane.cluster.x-k8s.io", "kind": "KamajiControlPlane", "name": "prod"})
        );
        assert!(c["spec"].get("infrastructureRef").is_none());
        assert_eq!(
            c["spec"]["clusterNetwork"]["pods"]["cidrBlocks"],
            json!(["10.244.0.0/16"])
        );
        assert_eq!(c["metadata"]["labels"][CLUSTER_NAME_LABEL], "prod");
    }

    #[test]
    fn byoh_on_v1beta1_writes_versioned_refs_and_a_host_selector() {
        let mut s = spec(Infrastructure::Byoh);
        s.workers = Some(3);
        s.host_selector = BTreeMap::from([("site".to_string(), "ams".to_string())]);
        let v = Versions {
            capi: CapiVersion::V1Beta1,
            kcp: "v1alpha1".into(),
            infra_cluster: "v1beta1".into(),
            infra_template: "v1beta1".into(),
            bootstrap: "v1beta1".into(),
            installer: "v1beta1".into(),
            addons: "v1beta1".into(),
        };
        let b = build(&s, &v).unwrap();
        assert_eq!(
            kinds(&b),
            [
                "KamajiControlPlane",
                "ByoCluster",
                "Cluster",
                "KubeadmConfigTemplate",
                "K8sInstallerConfigTemplate",
                "ByoMachineTemplate",
                "MachineDeployment"
            ]
        );
        let c = &b.objects[2];
        assert_eq!(c["apiVersion"], "cluster.x-k8s.io/v1beta1");
        assert_eq!(
            c["spec"]["controlPlaneRef"],
            json!({"apiVersion": "controlplane.cluster.x-k8s.io/v1alpha1", "kind": "KamajiControlPlane", "name": "prod", "namespace": "team"})
        );
        let md = &b.objects[6];
        assert_eq!(md["spec"]["replicas"], 3);
        assert_eq!(md["spec"]["template"]["spec"]["version"], "v1.35.0");
        assert_eq!(
            md["spec"]["template"]["spec"]["infrastructureRef"],
            json!({"apiVersion": "infrastructure.cluster.x-k8s.io/v1beta1", "kind": "ByoMachineTemplate", "name": "prod-md-0"})
        );
        assert_eq!(
            b.objects[5]["spec"]["template"]["spec"]["selector"]["matchLabels"]["site"],
            "ams"
        );
    }

    #[test]
    fn a_cni_is_a_labelled_cluster_a_configmap_and_a_resource_set() {
        use crate::build::cni::{CniKind, CniManifest};
        let calico = "apiVersion: apps/v1\nkind: DaemonSet\nmetadata:\n  name: calico-node\nspec:\n  template:\n    spec:\n      containers:\n        - env:\n            # - name: CALICO_IPV4POOL_CIDR\n            #   value: \"192.168.0.0/16\"\n";
        let mut s = spec(Infrastructure::Byoh);
        s.pod_cidrs = vec!["10.200.0.0/16".into()];
        s.cni = Some(CniManifest {
            kind: CniKind::Calico,
            source: "https://example.com/calico.yaml".into(),
            text: calico.into(),
        });
        let b = build(&s, &Versions::latest(Infrastructure::Byoh)).unwrap();
        assert_eq!(
            kinds(&b)[..5],
            [
                "KamajiControlPlane",
                "ByoCluster",
                "Cluster",
                "ConfigMap",
                "ClusterResourceSet"
            ]
        );
        assert_eq!(b.objects[2]["metadata"]["labels"]["cni"], "calico");
        let data = b.objects[3]["data"]["calico.yaml"].as_str().unwrap();
        assert!(
            data.contains("- name: CALICO_IPV4POOL_CIDR\n              value: \"10.200.0.0/16\""),
            "{data}"
        );
        let crs = &b.objects[4];
        assert_eq!(crs["apiVersion"], "addons.cluster.x-k8s.io/v1beta2");
        // It selects this Cluster: every label it matches is on the Cluster.
        for (k, v) in crs["spec"]["clusterSelector"]["matchLabels"]
            .as_object()
            .unwrap()
        {
            assert_eq!(&b.objects[2]["metadata"]["labels"][k], v, "{k}");
        }
        assert!(
            b.notes.iter().any(|n| n
                == "network plugin Calico v3.31.4 (https://example.com/calico.yaml): in ConfigMap prod-cni and ClusterResourceSet prod-cni, which Cluster API applies in the workload cluster once its API server answers"),
            "{:?}",
            b.notes
        );
        // The Cluster owns them, as it owns the installer template.
        let mut cm = b.objects[3].clone();
        assert!(own_by_cluster(
            &mut cm,
            "cluster.x-k8s.io/v1beta2",
            "prod",
            "u"
        ));

        // None: the Cluster carries no cni label and the preview warns about NotReady nodes.
        let b = build(
            &spec(Infrastructure::Byoh),
            &Versions::latest(Infrastructure::Byoh),
        )
        .unwrap();
        assert!(b.objects[2]["metadata"]["labels"].get("cni").is_none());
        assert!(
            b.notes
                .iter()
                .any(|n| n.starts_with("no network plugin (--cni none)")),
            "{:?}",
            b.notes
        );
        let mut s = spec(Infrastructure::Byoh);
        s.cni_none_explicit = true;
        let b = build(&s, &Versions::latest(Infrastructure::Byoh)).unwrap();
        assert!(!b.notes.iter().any(|n| n.contains("network plugin")));

        // A bad manifest fails the build with its one line.
        let mut s = spec(Infrastructure::None);
        s.cni = Some(CniManifest {
            kind: CniKind::Custom,
            source: "cni.yaml".into(),
            text: "hello: world\n".into(),
        });
        let e = build(&s, &Versions::latest(Infrastructure::None)).unwrap_err();
        assert_eq!(
            e.to_string(),
            "--cni-manifest cni.yaml: document 1 is not a Kubernetes object (no apiVersion or kind)"
        );
    }

    #[test]
    fn the_cluster_owns_what_capi_does_not_adopt() {
        let b = build(
            &spec(Infrastructure::Byoh),
            &Versions::latest(Infrastructure::Byoh),
        )
        .unwrap();
        let mut owned = Vec::new();
        for o in b.all() {
            let mut o = o.clone();
            if own_by_cluster(&mut o, "cluster.x-k8s.io/v1beta2", "prod", "u-1") {
                assert_eq!(
                    o["metadata"]["ownerReferences"],
                    json!([{"apiVersion": "cluster.x-k8s.io/v1beta2", "kind": "Cluster", "name": "prod", "uid": "u-1"}])
                );
                owned.push(o["kind"].as_str().unwrap().to_string());
            }
        }
        assert_eq!(owned, ["K8sInstallerConfigTemplate"]);
        let mut cm = json!({"kind": "ConfigMap", "metadata": {"name": "x"}});
        assert!(!own_by_cluster(
            &mut cm,
            "cluster.x-k8s.io/v1beta2",
            "prod",
            ""
        ));
        // Kept past the Cluster's deletion: only that owner goes.
        let shared = json!({"metadata": {"ownerReferences": [
            {"apiVersion": "cluster.x-k8s.io/v1beta2", "kind": "Cluster", "name": "prod", "uid": "u-1"},
            {"apiVersion": "cluster.x-k8s.io/v1beta2", "kind": "Cluster", "name": "other", "uid": "u-2"}]}});
        assert_eq!(
            disowned_by_cluster(&shared, "prod"),
            Some(
                json!([{"apiVersion": "cluster.x-k8s.io/v1beta2", "kind": "Cluster", "name": "other", "uid": "u-2"}])
            )
        );
        assert_eq!(disowned_by_cluster(&shared, "gone"), None);
        assert_eq!(disowned_by_cluster(&cm, "prod"), None);
    }

    #[test]
    fn byoh_bundle_flags_and_preinstalled_hosts() {
        let mut s = spec(Infrastructure::Byoh);
        s.bundle_repo = Some("registry.example.com/byoh/bundles".into());
        let b = build(&s, &Versions::latest(Infrastructure::Byoh)).unwrap();
        let ict = b
            .objects
            .iter()
            .find(|o| o["kind"] == "K8sInstallerConfigTemplate")
            .unwrap();
        assert_eq!(
            ict["spec"]["template"]["spec"]["bundleRepo"],
            "registry.example.com/byoh/bundles"
        );
        assert_eq!(ict["spec"]["template"]["spec"]["bundleType"], "k8s");
        assert!(
            b.notes[0].contains("registry.example.com/byoh/bundles/byoh-bundle-<os>_k8s:v1.35.0"),
            "{:?}",
            b.notes
        );

        // Pre-installed hosts: no installer template, no installerRef, and the preview says so.
        let mut s = spec(Infrastructure::Byoh);
        s.preinstalled_hosts = true;
        let b = build(&s, &Versions::latest(Infrastructure::Byoh)).unwrap();
        assert!(!kinds(&b).contains(&"K8sInstallerConfigTemplate".to_string()));
        let bmt = b
            .objects
            .iter()
            .find(|o| o["kind"] == "ByoMachineTemplate")
            .unwrap();
        assert!(
            bmt["spec"]["template"]["spec"]
                .get("installerRef")
                .is_none()
        );
        assert_eq!(
            b.notes[0],
            "--preinstalled-hosts: no K8sInstallerConfigTemplate and no installerRef; the hosts must have Kubernetes v1.35.0 installed and their agents run with --skip-installation"
        );

        // With 0 workers the templates are still rendered (to scale later), without the note.
        let mut s = spec(Infrastructure::Byoh);
        s.workers = Some(0);
        let b = build(&s, &Versions::latest(Infrastructure::Byoh)).unwrap();
        assert!(kinds(&b).contains(&"K8sInstallerConfigTemplate".to_string()));
        assert!(b.notes.is_empty(), "{:?}", b.notes);

        let err = |s: &CreateSpec| {
            let e = build(s, &Versions::latest(Infrastructure::Byoh)).unwrap_err();
            assert_eq!(e.exit_code(), 2, "{e}");
            e.to_string()
        };
        let mut s = spec(Infrastructure::Byoh);
        s.preinstalled_hosts = true;
        s.bundle_type = Some("k8s".into());
        assert_eq!(
            err(&s),
            "--preinstalled-hosts and --bundle-repo/--bundle-type cannot be used together"
        );
        for bad in [
            "https://registry.example.com/b",
            "registry.example.com",
            "r.example.com/b:v1",
            "r.example.com/b/",
        ] {
            let mut s = spec(Infrastructure::Byoh);
            s.bundle_repo = Some(bad.into());
            assert!(err(&s).starts_with("invalid --bundle-repo"), "{bad}");
        }
        let mut s = spec(Infrastructure::Byoh);
        s.bundle_type = Some("rpm".into());
        assert_eq!(err(&s), "invalid --bundle-type \"rpm\"");
        let mut s = spec(Infrastructure::Openstack);
        s.preinstalled_hosts = true;
        assert_eq!(
            err(&s),
            "--preinstalled-hosts does not apply to --infrastructure openstack"
        );
    }

    #[test]
    fn byoh_workers_get_an_installer_template_and_an_installer_ref() {
        let mut s = spec(Infrastructure::Byoh);
        s.workers = Some(2);
        let b = build(&s, &Versions::latest(Infrastructure::Byoh)).unwrap();
        assert_eq!(
            kinds(&b),
            [
                "KamajiControlPlane",
                "ByoCluster",
                "Cluster",
                "KubeadmConfigTemplate",
                "K8sInstallerConfigTemplate",
                "ByoMachineTemplate",
                "MachineDeployment"
            ]
        );
        let ict = &b.objects[4];
        assert_eq!(ict["apiVersion"], "infrastructure.cluster.x-k8s.io/v1beta1");
        assert_eq!(ict["metadata"]["name"], "prod-md-0");
        assert_eq!(ict["metadata"]["namespace"], "team");
        assert_eq!(
            ict["spec"],
            json!({"template": {"spec": {
                "bundleRepo": "projects.registry.vmware.com/cluster_api_provider_bringyourownhost",
                "bundleType": "k8s"}}})
        );
        // BYOH reads the template from installerRef.namespace: it must be set.
        assert_eq!(
            b.objects[5]["spec"]["template"]["spec"]["installerRef"],
            json!({"apiVersion": "infrastructure.cluster.x-k8s.io/v1beta1",
                   "kind": "K8sInstallerConfigTemplate", "name": "prod-md-0", "namespace": "team"})
        );
    }

    #[test]
    fn openstack_without_address_defers_the_cluster_and_fills_it_later() {
        let mut s = spec(Infrastructure::Openstack);
        s.flavor = Some("m1.large".into());
        s.image = Some("ubuntu-2404-kube-v1.35.0".into());
        s.network = Some("tenant-net".into());
        let b = build(&s, &Versions::latest(Infrastructure::Openstack)).unwrap();
        assert!(
            !kinds(&Built {
                deferred: None,
                ..b.clone()
            })
            .contains(&"OpenStackCluster".to_string())
        );
        let mut osc = b.deferred.clone().unwrap();
        assert_eq!(osc["spec"]["apiServerFixedIP"], "");
        assert_eq!(osc["spec"]["apiServerLoadBalancer"]["enabled"], false);
        assert_eq!(osc["spec"]["network"]["filter"]["name"], "tenant-net");
        fill_openstack_endpoint(&mut osc, "10.0.0.7", 6443);
        assert_eq!(osc["spec"]["apiServerFixedIP"], "10.0.0.7");
        let kct = b
            .objects
            .iter()
            .find(|o| o["kind"] == "KubeadmConfigTemplate")
            .unwrap();
        assert_eq!(
            kct["spec"]["template"]["spec"]["joinConfiguration"]["nodeRegistration"]["kubeletExtraArgs"],
            json!([{"name": "cloud-provider", "value": "external"}])
        );
        // With an address, it is created up front, pre-filled.
        s.service_address = Some("192.0.2.10".into());
        let b = build(&s, &Versions::latest(Infrastructure::Openstack)).unwrap();
        assert!(b.deferred.is_none());
        assert_eq!(b.objects[1]["spec"]["apiServerFixedIP"], "192.0.2.10");
        assert_eq!(
            b.objects[0]["spec"]["network"]["serviceAddress"],
            "192.0.2.10"
        );
    }

    #[test]
    fn flags_win_over_the_values_file_which_wins_over_defaults() {
        let mut s = spec(Infrastructure::None);
        s.values = Some(json!({
            "spec": {"replicas": 3, "network": {"serviceType": "NodePort", "serviceAddress": "192.0.2.1"},
                     "deployment": {"nodeSelector": {"kubernetes.io/os": "linux"}},
                     "addons": {"konnectivity": {"server": {"port": 8132}}}}
        }));
        s.cert_sans = vec!["api.example.com".into()];
        s.addons = Some(vec![Addon::CoreDns, Addon::Konnectivity]);
        s.apiserver_args = vec!["audit-log-maxage=30".into()];
        let b = build(&s, &Versions::latest(Infrastructure::None)).unwrap();
        let k = &b.objects[0]["spec"];
        assert_eq!(k["replicas"], 3);
        assert_eq!(k["network"]["serviceType"], "NodePort");
        assert_eq!(k["network"]["certSANs"], json!(["api.example.com"]));
        assert_eq!(k["deployment"]["nodeSelector"]["kubernetes.io/os"], "linux");
        assert_eq!(
            k["addons"],
            json!({"coreDNS": {}, "konnectivity": {"server": {"port": 8132}}})
        );
        assert_eq!(
            k["apiServer"]["extraArgs"],
            json!(["--audit-log-maxage=30"])
        );
        s.replicas = Some(1);
        let b = build(&s, &Versions::latest(Infrastructure::None)).unwrap();
        assert_eq!(b.objects[0]["spec"]["replicas"], 1);
    }

    #[test]
    fn bad_input_gives_usage_errors() {
        let err = |s: &CreateSpec| {
            let e = build(s, &Versions::latest(Infrastructure::None)).unwrap_err();
            assert_eq!(e.exit_code(), 2, "{e}");
            e.to_string()
        };
        let mut s = spec(Infrastructure::None);
        s.name = "Prod_1".into();
        assert!(err(&s).starts_with("invalid name \"Prod_1\""));
        let mut s = spec(Infrastructure::None);
        s.kubernetes_version = Some("1.35".into());
        assert!(err(&s).starts_with("invalid Kubernetes version"));
        let mut s = spec(Infrastructure::None);
        s.workers = Some(2);
        assert_eq!(err(&s), "--workers does not apply to --infrastructure none");
        let mut s = spec(Infrastructure::Byoh);
        s.flavor = Some("x".into());
        assert_eq!(err(&s), "--flavor does not apply to --infrastructure byoh");
        let mut s = spec(Infrastructure::None);
        s.service_type = Some("NodePort".into());
        assert_eq!(err(&s), "--service-type NodePort needs --service-address");
        let mut s = spec(Infrastructure::None);
        s.cert_sans = vec!["api.example.com:6443".into()];
        assert!(err(&s).starts_with("invalid --cert-san"));
        let mut s = spec(Infrastructure::None);
        s.pod_cidrs = vec!["10.0.0.0/33".into()];
        assert!(err(&s).starts_with("invalid --pod-cidr"));
        let mut s = spec(Infrastructure::None);
        s.admission_controllers = vec!["PodSecurityy".into()];
        let e = build(&s, &Versions::latest(Infrastructure::None)).unwrap_err();
        assert!(e.hint().unwrap().contains("PodSecurity"));
        let s = spec(Infrastructure::Openstack);
        assert_eq!(err(&s), "--infrastructure openstack needs --flavor");
        let mut s = spec(Infrastructure::Metal3);
        s.image = Some("http://x/i.img".into());
        s.image_checksum = Some("http://x/i.img.sha256sum".into());
        assert_eq!(err(&s), "--infrastructure metal3 needs --service-address");
        assert!(Infrastructure::parse("docker").is_err());
        let mut s = spec(Infrastructure::None);
        s.kubernetes_version = None;
        assert_eq!(err(&s), "--kubernetes-version is required");
    }

    #[test]
    fn upgrade_steps_walk_one_minor_at_a_time() {
        assert_eq!(
            upgrade_steps("v1.33.2", "v1.35.1").unwrap(),
            ["v1.34.0", "v1.35.1"]
        );
        assert_eq!(upgrade_steps("v1.33.2", "1.33.5").unwrap(), ["v1.33.5"]);
        assert!(upgrade_steps("v1.35.0", "v1.35.0").unwrap().is_empty());
        assert!(upgrade_steps("v1.35.0", "v1.34.0").is_err());
    }

    #[test]
    fn endpoints_split() {
        assert_eq!(
            split_endpoint("10.0.0.1:6443"),
            Some(("10.0.0.1".into(), 6443))
        );
        assert_eq!(
            split_endpoint("https://[fd00::1]:443"),
            Some(("fd00::1".into(), 443))
        );
        assert_eq!(
            split_endpoint("api.example.com"),
            Some(("api.example.com".into(), 6443))
        );
        assert_eq!(split_endpoint(""), None);
    }
}
