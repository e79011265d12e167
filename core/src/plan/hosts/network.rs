//! A host's network, as its agent reports it in `status.network`.

use std::collections::BTreeSet;
use std::net::IpAddr;

use ipnet::IpNet;
use serde::Serialize;
use serde_json::Value;

use crate::json::{self, str_at};

/// The first IP of the default interface (else of the first interface with an address), without `/prefix`.
pub(crate) fn default_ip(host: &Value) -> Option<String> {
    let nets = json::at(host, &["status", "network"])?.as_array()?;
    let first_ip = |n: &Value| {
        n.get("ipAddrs")
            .and_then(Value::as_array)
            .and_then(|a| a.iter().filter_map(Value::as_str).find(|s| !s.is_empty()))
            .map(|ip| ip.split('/').next().unwrap_or(ip).to_string())
    };
    nets.iter()
        .filter(|n| n.get("isDefault").and_then(Value::as_bool) == Some(true))
        .find_map(first_ip)
        .or_else(|| nets.iter().find_map(first_ip))
}

/// The network interfaces of a host for `hosts describe`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Interface {
    pub name: String,
    pub mac: Option<String>,
    pub addresses: Vec<String>,
    pub is_default: bool,
    pub connected: bool,
}

/// Read `status.network`.
pub fn interfaces(host: &Value) -> Vec<Interface> {
    json::at(host, &["status", "network"])
        .and_then(Value::as_array)
        .map(|a| {
            a.iter()
                .map(|n| Interface {
                    name: str_at(n, &["networkInterfaceName"])
                        .unwrap_or("")
                        .to_string(),
                    mac: str_at(n, &["macAddr"]).map(str::to_string),
                    addresses: json::strings_at(n, &["ipAddrs"]),
                    is_default: n.get("isDefault").and_then(Value::as_bool).unwrap_or(false),
                    connected: n.get("connected").and_then(Value::as_bool).unwrap_or(false),
                })
                .collect()
        })
        .unwrap_or_default()
}

/// Where a control-plane address stands against the networks BYOH hosts report.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum AddressFit {
    /// No host reports a network, or the address is not an IP: nothing to judge it by.
    Unknown,
    /// Inside this network, as a host reports it (`10.0.0.5/24`).
    Inside(String),
    /// Outside every network the hosts report: those networks, each once, sorted (IPv4 first),
    /// as networks (`10.0.0.0/24`).
    Outside(Vec<String>),
}

/// Whether `address` lies in a network one of `hosts` reports: `status.network[].ipAddrs`,
/// which BYOH v0.5.0's agent fills with its interfaces' addresses in CIDR form (`10.0.0.5/24`,
/// `fe80::1/64`; `HostRegistrar.GetNetworkStatus`, `agent/registration/host_registrar.go`). An
/// entry that is not a CIDR is skipped: what it means is not known, and one host's odd entry
/// must not decide for the others.
pub fn address_fit<'a>(address: &str, hosts: impl IntoIterator<Item = &'a Value>) -> AddressFit {
    let Ok(ip) = address.trim().parse::<IpAddr>() else {
        return AddressFit::Unknown;
    };
    let mut seen = BTreeSet::new();
    for host in hosts {
        for net in networks(host) {
            if net.contains(&ip) {
                return AddressFit::Inside(net.to_string());
            }
            seen.insert(net.trunc());
        }
    }
    if seen.is_empty() {
        AddressFit::Unknown
    } else {
        AddressFit::Outside(seen.iter().map(ToString::to_string).collect())
    }
}

/// At most this many networks are named by [`named_networks`].
const NETWORKS_NAMED: usize = 8;

/// [`AddressFit::Outside`]'s networks for a message: `10.0.0.0/24, 192.168.1.0/24`, the first
/// eight and how many more.
pub fn named_networks(networks: &[String]) -> String {
    let shown = networks
        .iter()
        .take(NETWORKS_NAMED)
        .map(String::as_str)
        .collect::<Vec<_>>()
        .join(", ");
    match networks.len().saturating_sub(NETWORKS_NAMED) {
        0 => shown,
        more => format!("{shown} and {more} more"),
    }
}

/// The networks of a host's interfaces, from the CIDR entries of `status.network[].ipAddrs`.
fn networks(host: &Value) -> Vec<IpNet> {
    json::at(host, &["status", "network"])
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .flat_map(|n| json::strings_at(n, &["ipAddrs"]))
        .filter_map(|a| a.trim().parse::<IpNet>().ok())
        .collect()
}
