//! Where the tenant's API server is reached and what its networks are: the Service type and
//! address, the certificate SANs, the port, and the pod and service CIDRs the Cluster states.

use std::net::IpAddr;

use serde_json::{Map, Value, json};

use super::{CreateSpec, DEFAULT_POD_CIDR, DEFAULT_SERVICE_CIDR, Infrastructure};
use crate::Error;
use crate::error::usage;
use crate::kamaji::api::{DEFAULT_SERVICE_TYPE, SERVICE_TYPES};

/// Checks the Service type and address (flags, else the values file's `network`); returns the
/// address.
pub(super) fn check_service(
    spec: &CreateSpec,
    infra: Infrastructure,
    file: &Map<String, Value>,
) -> Result<Option<String>, Error> {
    let from_file = |key: &str| {
        file.get("network")
            .and_then(|n| n.get(key))
            .and_then(Value::as_str)
            .map(str::to_string)
    };
    let service_type = spec
        .service_type
        .clone()
        .or_else(|| from_file("serviceType"))
        .unwrap_or_else(|| DEFAULT_SERVICE_TYPE.into());
    if !SERVICE_TYPES.contains(&service_type.as_str()) {
        return Err(usage(
            format!("invalid --service-type {service_type:?}"),
            "use ClusterIP, NodePort or LoadBalancer",
        ));
    }
    let address = spec
        .service_address
        .clone()
        .or_else(|| from_file("serviceAddress"));
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
    if infra.needs_address() && address.is_none() {
        return Err(usage(
            format!("--infrastructure {} needs --service-address", infra.name()),
            format!(
                "{}'s endpoint must be known up front: pass --service-address (the control plane's VIP)",
                infra.cluster_kind().unwrap_or("its infrastructure cluster")
            ),
        ));
    }
    Ok(address)
}

/// Checks `--cert-san`, `--pod-cidr`, `--service-cidr` and `--port`.
pub(super) fn check_network(spec: &CreateSpec) -> Result<(), Error> {
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
    Ok(())
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

/// `--pod-cidr`, else Kamaji's default.
pub(super) fn pod_cidrs(spec: &CreateSpec) -> Vec<String> {
    if spec.pod_cidrs.is_empty() {
        vec![DEFAULT_POD_CIDR.to_string()]
    } else {
        spec.pod_cidrs.clone()
    }
}

/// The Cluster's `clusterNetwork`: pod and service CIDRs, and `--port` when given.
pub(super) fn cluster_network(spec: &CreateSpec, pods: &[String]) -> Value {
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
    cluster_network
}
