//! The tenant API server's endpoint: Kamaji's default port, `host:port` parsing, the endpoint
//! derived from a TenantControlPlane's status, and what is done to each kind of infrastructure
//! cluster to give it that endpoint ([`EndpointPatch`]).

use super::api::NetworkComponent;

/// Kamaji's default API server port.
pub const DEFAULT_PORT: u16 = 6443;

/// What is done to an infrastructure cluster of a given kind.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum EndpointPatch {
    /// Set `spec.controlPlaneEndpoint`.
    Endpoint,
    /// Set `spec.controlPlaneEndpoint` and `status.ready = true` (externally managed infra).
    EndpointAndReady,
    /// Only check that `spec.controlPlaneEndpoint` already equals the TCP's.
    CheckOnly,
    /// Check; set when the host is empty.
    CheckOrSetWhenEmpty,
    /// `spec.apiServerFixedIP` and `spec.apiServerPort` (OpenStack).
    OpenStack,
    /// Kinds added with `--dynamic-infrastructure-clusters`: generic `spec.controlPlaneEndpoint`.
    Generic,
}

impl EndpointPatch {
    /// The `spec` fields of the infrastructure cluster this action writes.
    pub(crate) fn fields(self) -> &'static [&'static str] {
        match self {
            EndpointPatch::OpenStack => &["apiServerFixedIP", "apiServerPort"],
            _ => &["controlPlaneEndpoint"],
        }
    }
}

/// A host and port pair.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Endpoint {
    pub host: String,
    pub port: i32,
}

impl std::fmt::Display for Endpoint {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if self.host.contains(':') {
            write!(f, "[{}]:{}", self.host, self.port)
        } else {
            write!(f, "{}:{}", self.host, self.port)
        }
    }
}

/// `host:port` as a host and the port's text, if there is one: `[fd00::5]:6443` (IPv6 in
/// brackets), `10.0.0.5:6443`, a host alone or a bare IPv6 address. `None` when empty or with
/// an unclosed bracket.
fn host_and_port(s: &str) -> Option<(&str, Option<&str>)> {
    if s.is_empty() {
        return None;
    }
    if let Some(rest) = s.strip_prefix('[') {
        let (h, p) = rest.split_once(']')?;
        return Some((h, p.strip_prefix(':')));
    }
    match s.rsplit_once(':') {
        Some((h, p)) if !h.contains(':') => Some((h, Some(p))),
        _ => Some((s, None)), // no port, or a bare IPv6 address
    }
}

/// Splits `host:port` (IPv6 as `[::1]:6443`). `None` when a port is given but not valid.
pub(crate) fn split_host_port(s: &str) -> Option<(String, Option<i32>)> {
    let (h, p) = host_and_port(s.trim())?;
    let port = match p {
        Some(p) => Some(p.parse().ok()?),
        None => None,
    };
    Some((h.to_string(), port))
}

/// Splits an API server address as kubeconfigs and Kamaji's status write it (`https://` is
/// dropped); the port defaults to [`DEFAULT_PORT`], also for a bracketed IPv6 host whose port
/// does not parse.
pub fn split_endpoint(s: &str) -> Option<(String, u16)> {
    let s = s.trim().trim_start_matches("https://");
    let (h, p) = host_and_port(s)?;
    let port = match p {
        None => DEFAULT_PORT,
        Some(p) if s.starts_with('[') => p.parse().unwrap_or(DEFAULT_PORT),
        Some(p) => p.parse().ok()?,
    };
    Some((h.to_string(), port))
}

/// The endpoint published to the KamajiControlPlane and the infrastructure cluster:
/// `tcp.status.controlPlaneEndpoint`, with the host replaced by the ingress hostname, else the
/// gateway hostname; such a hostname without a port gets 443.
pub fn derive(tcp_status_endpoint: &str, network: Option<&NetworkComponent>) -> Option<Endpoint> {
    let (host, port) = split_host_port(tcp_status_endpoint)?;
    let over = network.and_then(|n| {
        n.ingress
            .as_ref()
            .map(|i| i.hostname.clone())
            .or_else(|| n.gateway.as_ref().map(|g| g.hostname.clone()))
    });
    if let Some(h) = over {
        let (oh, op) = split_host_port(&h)?;
        return Some(Endpoint {
            host: oh,
            port: op.unwrap_or(443),
        });
    }
    Some(Endpoint { host, port: port? })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kamaji::api::{GatewayComponent, IngressComponent};

    fn ep(host: &str, port: i32) -> Option<Endpoint> {
        Some(Endpoint {
            host: host.into(),
            port,
        })
    }

    #[test]
    fn plain_status_endpoint() {
        assert_eq!(derive("10.0.0.5:6443", None), ep("10.0.0.5", 6443));
        assert_eq!(derive("[fd00::5]:6443", None), ep("fd00::5", 6443));
        assert_eq!(derive("", None), None);
        assert_eq!(derive("10.0.0.5", None), None);
        assert_eq!(ep("fd00::5", 1).unwrap().to_string(), "[fd00::5]:1");
    }

    #[test]
    fn ingress_then_gateway_override_with_443_default() {
        let mut n = NetworkComponent {
            gateway: Some(GatewayComponent {
                hostname: "gw.example".into(),
                ..Default::default()
            }),
            ..Default::default()
        };
        assert_eq!(derive("10.0.0.5:6443", Some(&n)), ep("gw.example", 443));
        n.ingress = Some(IngressComponent {
            hostname: "in.example:8443".into(),
            ..Default::default()
        });
        assert_eq!(derive("10.0.0.5:6443", Some(&n)), ep("in.example", 8443));
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
