//! A host's network, as its agent reports it in `status.network`.

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
