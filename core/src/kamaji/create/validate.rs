//! The checks `create` runs on its flags before building anything: one usage error each,
//! naming the flag and saying what to pass instead. [`check`] runs them in a fixed order, so
//! that the first problem reported does not depend on how the builders are arranged.

use std::net::IpAddr;

use serde_json::{Map, Value};

use super::endpoints;
use super::values::values_spec;
use super::{ADMISSION_CONTROLLERS, CreateSpec, InfraProvider, Infrastructure, all};
use super::{one_of, refusals};
use crate::Error;
use crate::error::usage;
use crate::plan::MAX_CONTROL_PLANE_REPLICAS;
use crate::version::parse_version;

/// What the checks resolve, for the builders.
pub(super) struct Checked {
    pub infra: Infrastructure,
    /// The values file's KamajiControlPlane spec fields.
    pub file: Map<String, Value>,
    /// The normalised Kubernetes version.
    pub version: String,
    /// MachineDeployment replicas: `--workers`, 1 by default, 0 without infrastructure.
    pub workers: i64,
    /// The API server address, from `--service-address` or the values file.
    pub address: Option<String>,
}

/// Every check, in the order `create` reports them.
pub(super) fn check(spec: &CreateSpec) -> Result<Checked, Error> {
    validate_name(&spec.name)?;
    let infra = required_infrastructure(spec)?;
    let file = match &spec.values {
        Some(v) => values_spec(v)?,
        None => Map::new(),
    };
    let version = kubernetes_version(spec, &file)?;
    check_counts(spec)?;
    check_scoped_flags(spec, infra)?;
    infra.check(spec)?;
    check_failure_domain(spec)?;
    check_cluster_dns(spec)?;
    let workers = match infra.template_kind() {
        None => 0,
        Some(_) => spec.workers.unwrap_or(1),
    };
    let address = endpoints::check_service(spec, infra, &file)?;
    endpoints::check_network(spec)?;
    check_control_plane(spec)?;
    check_host_selector(spec)?;
    check_kube_proxy(spec, &version, address.as_deref())?;
    Ok(Checked {
        infra,
        file,
        version,
        workers,
        address,
    })
}

/// `--kube-proxy-mode` against `--addons`, the version and the address: `iptables` is Kamaji's
/// addon, so `--addons` must keep it; another mode replaces the addon, so `--addons` must not
/// name it, and needs the address up front (kube-proxy reaches the API server there).
fn check_kube_proxy(spec: &CreateSpec, version: &str, address: Option<&str>) -> Result<(), Error> {
    let Some(mode) = spec.kube_proxy_mode else {
        return Ok(());
    };
    let m = mode.as_str();
    let addon = spec
        .addons
        .as_ref()
        .map(|a| a.contains(&super::Addon::KubeProxy));
    if mode.is_kamaji_default() {
        if addon == Some(false) {
            return Err(usage(
                format!(
                    "--kube-proxy-mode {m} is Kamaji's kube-proxy addon, which --addons leaves out"
                ),
                "add kube-proxy to --addons, or drop --kube-proxy-mode",
            ));
        }
        return Ok(());
    }
    if addon == Some(true) {
        return Err(usage(
            format!(
                "--kube-proxy-mode {m} replaces Kamaji's kube-proxy addon: --addons cannot name kube-proxy too"
            ),
            "drop kube-proxy from --addons (e.g. --addons coredns,konnectivity)",
        ));
    }
    if address.is_none() {
        return Err(usage(
            format!("--kube-proxy-mode {m} needs --service-address"),
            "kube-proxy reaches the API server at the control plane's address, not through the kubernetes Service it implements: pass the pre-assigned IP (--service-address)",
        ));
    }
    mode.check_version(&parse_version(version)?)
}

/// Checks a name the way Kamaji needs it: a DNS-1035 label (it names a Service), at most 63
/// characters.
pub(super) fn validate_name(name: &str) -> Result<(), Error> {
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

pub(super) fn required_infrastructure(spec: &CreateSpec) -> Result<Infrastructure, Error> {
    spec.infrastructure.ok_or_else(|| {
        usage(
            "--infrastructure is required",
            format!(
                "{} (none = a control plane only, workers joined with `token join`)",
                one_of()
            ),
        )
    })
}

/// `--kubernetes-version`, else the values file's `version`, normalised.
fn kubernetes_version(spec: &CreateSpec, file: &Map<String, Value>) -> Result<String, Error> {
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
    Ok(parse_version(&raw_version)?.to_string())
}

/// `--replicas` and `--workers`.
pub(super) fn check_counts(spec: &CreateSpec) -> Result<(), Error> {
    if let Some(r) = spec.replicas
        && !(0..=MAX_CONTROL_PLANE_REPLICAS).contains(&r)
    {
        return Err(usage(
            format!("invalid --replicas {r}"),
            format!("use 0 (asleep) to {MAX_CONTROL_PLANE_REPLICAS} control-plane replicas"),
        ));
    }
    if let Some(w) = spec.workers
        && w < 0
    {
        return Err(usage(format!("invalid --workers {w}"), "use 0 or more"));
    }
    Ok(())
}

/// The flags about the workers, which only a provider with workers takes.
const WORKER_FLAGS: [&str; 3] = ["--workers", "--failure-domain", "--cluster-dns"];

/// The [`WORKER_FLAGS`], then the providers' flags as their refusals name them ([`refusals`]):
/// each is refused unless the provider takes it ([`InfraProvider::flags`]; the worker flags: a
/// provider with workers).
pub(super) fn check_scoped_flags(spec: &CreateSpec, infra: Infrastructure) -> Result<(), Error> {
    let given = |flag: &str| match flag {
        "--workers" => spec.workers.is_some(),
        "--failure-domain" => spec.failure_domain.is_some(),
        "--cluster-dns" => spec.cluster_dns.is_some(),
        _ => spec.provider_flags.is_given(flag),
    };
    let worker_flags = WORKER_FLAGS.iter().map(|f| f.to_string());
    for scoped in worker_flags.chain(refusals()) {
        ensure_only_for(infra, &scoped, scoped.split('/').any(given))?;
    }
    Ok(())
}

/// Whether `provider` takes `flags` (`--a/--b`: both).
fn takes(provider: &dyn InfraProvider, flags: &str) -> bool {
    flags.split('/').all(|flag| {
        if WORKER_FLAGS.contains(&flag) {
            provider.template_kind().is_some()
        } else {
            provider.takes(flag)
        }
    })
}

/// The longest failure domain name Cluster API takes (`MachineSpec.failureDomain` and the
/// topology's `MachineDeploymentTopology.failureDomain`: `MinLength=1`, `MaxLength=256`, in
/// `api/core/v1beta2/machine_types.go` and `cluster_types.go`, Cluster API v1.14.2, and in
/// v1beta1 as of v1.10).
pub(super) const MAX_FAILURE_DOMAIN_CHARS: usize = 256;

/// `--failure-domain`: what Cluster API's schema takes, 1 to 256 characters. Whether the
/// infrastructure has such a failure domain is the infrastructure's to say (it lists them in the
/// Cluster's `status.failureDomains`).
pub(super) fn check_failure_domain(spec: &CreateSpec) -> Result<(), Error> {
    let Some(fd) = &spec.failure_domain else {
        return Ok(());
    };
    let hint = "pass the name of one of the infrastructure's failure domains (kubectl get cluster NAME -o jsonpath='{.status.failureDomains}' lists them), or drop --failure-domain";
    if fd.is_empty() {
        return Err(usage("invalid --failure-domain \"\": it is empty", hint));
    }
    let chars = fd.chars().count();
    if chars > MAX_FAILURE_DOMAIN_CHARS {
        return Err(usage(
            format!(
                "invalid --failure-domain: {chars} characters, Cluster API takes at most {MAX_FAILURE_DOMAIN_CHARS}"
            ),
            hint,
        ));
    }
    Ok(())
}

/// `--cluster-dns`: one IPv4 or IPv6 address a DNS server can listen on (not `0.0.0.0`, `::` or
/// a multicast address), as the kubelet's `--cluster-dns` takes it.
pub(super) fn check_cluster_dns(spec: &CreateSpec) -> Result<(), Error> {
    let Some(dns) = &spec.cluster_dns else {
        return Ok(());
    };
    let hint = "pass the one IPv4 or IPv6 address the workers' pods resolve names at, e.g. 169.254.20.10 (NodeLocal DNSCache) or the cluster DNS Service's ClusterIP";
    match dns.parse::<IpAddr>() {
        Err(_) => Err(usage(
            format!("invalid --cluster-dns {dns:?}: not an IP address"),
            hint,
        )),
        Ok(ip) if ip.is_unspecified() || ip.is_multicast() => Err(usage(
            format!("invalid --cluster-dns {dns:?}: no DNS server listens there"),
            hint,
        )),
        Ok(_) => Ok(()),
    }
}

fn ensure_only_for(spec_infra: Infrastructure, flag: &str, given: bool) -> Result<(), Error> {
    if given && !takes(&*spec_infra, flag) {
        let names: Vec<&str> = all()
            .iter()
            .filter(|p| takes(**p, flag))
            .map(|p| p.name())
            .collect();
        return Err(usage(
            format!(
                "{flag} does not apply to --infrastructure {}",
                spec_infra.name()
            ),
            format!(
                "{flag} is for --infrastructure {}; drop it or change --infrastructure",
                names.join("|")
            ),
        ));
    }
    Ok(())
}

/// `--admission-controller` and `--datastore`.
pub(super) fn check_control_plane(spec: &CreateSpec) -> Result<(), Error> {
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
    Ok(())
}

pub(super) fn validate_dns_subdomain(flag: &str, s: &str) -> Result<(), Error> {
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

/// The labels of a provider's host pool ([`InfraProvider::host_pool`], BYOH's `--host-selector`).
pub(super) fn check_host_selector(spec: &CreateSpec) -> Result<(), Error> {
    let labels = spec.infrastructure.and_then(|i| i.host_pool(spec));
    for (k, v) in labels.iter().flatten() {
        if k.is_empty() || k.contains(char::is_whitespace) || v.contains(char::is_whitespace) {
            return Err(usage(
                format!("invalid --host-selector {k}={v}"),
                "use KEY=VALUE label pairs, e.g. --host-selector site=ams,rack=r12",
            ));
        }
    }
    Ok(())
}

/// Normalises an extra argument to `--key=value` (Kamaji's `extraArgs` form).
pub(super) fn normalise_arg(flag: &str, s: &str) -> Result<String, Error> {
    let t = s.trim().trim_start_matches('-');
    if t.is_empty() || t.starts_with('=') {
        return Err(usage(
            format!("invalid {flag} {s:?}"),
            "use KEY=VALUE, e.g. --apiserver-arg audit-log-maxage=30",
        ));
    }
    Ok(format!("--{t}"))
}
