//! Derivation of the control-plane endpoint from the TenantControlPlane status.

use crate::kcp::api::NetworkComponent;

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

/// Splits `host:port` (IPv6 as `[::1]:6443`). `None` when there is no valid port.
pub(crate) fn split_host_port(s: &str) -> Option<(String, Option<i32>)> {
    let s = s.trim();
    if s.is_empty() {
        return None;
    }
    if let Some(rest) = s.strip_prefix('[') {
        let (h, p) = rest.split_once(']')?;
        let port = match p.strip_prefix(':') {
            Some(p) => Some(p.parse().ok()?),
            None => None,
        };
        return Some((h.to_string(), port));
    }
    match s.rsplit_once(':') {
        Some((h, p)) if !h.contains(':') => Some((h.to_string(), Some(p.parse().ok()?))),
        Some(_) => Some((s.to_string(), None)), // bare IPv6
        None => Some((s.to_string(), None)),
    }
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
    use crate::kcp::api::{GatewayComponent, IngressComponent};

    #[test]
    fn plain_status_endpoint() {
        assert_eq!(
            derive("10.0.0.5:6443", None),
            Some(Endpoint {
                host: "10.0.0.5".into(),
                port: 6443
            })
        );
        assert_eq!(
            derive("[fd00::5]:6443", None),
            Some(Endpoint {
                host: "fd00::5".into(),
                port: 6443
            })
        );
        assert_eq!(derive("", None), None);
        assert_eq!(derive("10.0.0.5", None), None);
        assert_eq!(
            Endpoint {
                host: "fd00::5".into(),
                port: 1
            }
            .to_string(),
            "[fd00::5]:1"
        );
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
        assert_eq!(
            derive("10.0.0.5:6443", Some(&n)),
            Some(Endpoint {
                host: "gw.example".into(),
                port: 443
            })
        );
        n.ingress = Some(IngressComponent {
            hostname: "in.example:8443".into(),
            ..Default::default()
        });
        assert_eq!(
            derive("10.0.0.5:6443", Some(&n)),
            Some(Endpoint {
                host: "in.example".into(),
                port: 8443
            })
        );
    }
}
