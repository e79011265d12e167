//! What Kamaji reports about a control plane: the TenantControlPlane's phase, whether its
//! bootstrap-token phase ran in the tenant, and the endpoint it announced.

use kcore::fields;
use serde_json::Value;

use super::control_plane::ControlPlane;

/// Whether Kamaji ran its bootstrap-token kubeadm phase in the tenant (the only phase with a
/// status in Kamaji v1.0.0, `status.kubeadmPhase.bootstrapToken`). Kamaji reports a tenant Ready
/// before these phases run (they run in its per-tenant "soot" manager).
pub fn bootstrap_token_phase_done(tcp: &Value) -> bool {
    fields::at(
        tcp,
        &["status", "kubeadmPhase", "bootstrapToken", "checksum"],
    )
    .and_then(|v| v.as_str())
    .is_some_and(|s| !s.is_empty())
}

/// A TenantControlPlane's `status.kubernetesResources.version.status`.
pub fn tcp_phase(tcp: &Value) -> Option<String> {
    fields::at(tcp, &["status", "kubernetesResources", "version", "status"])
        .and_then(Value::as_str)
        .map(str::to_string)
}

/// The endpoint Kamaji announced: the KamajiControlPlane's `spec.controlPlaneEndpoint`, else
/// the TenantControlPlane's `status.controlPlaneEndpoint`.
pub fn endpoint(cp: &ControlPlane) -> Option<(String, u16)> {
    if let Some(kcp) = &cp.kcp {
        let host = kcp["spec"]["controlPlaneEndpoint"]["host"]
            .as_str()
            .unwrap_or_default();
        if !host.is_empty() {
            let port = kcp["spec"]["controlPlaneEndpoint"]["port"]
                .as_u64()
                .and_then(|p| u16::try_from(p).ok())
                .unwrap_or(kcore::kamaji::endpoint::DEFAULT_PORT);
            return Some((host.to_string(), port));
        }
    }
    let tcp = cp.tcp.as_ref()?;
    tcp["status"]["controlPlaneEndpoint"]
        .as_str()
        .and_then(kcore::kamaji::endpoint::split_endpoint)
}
