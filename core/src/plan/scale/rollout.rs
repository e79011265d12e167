//! What scale and upgrade read off the objects: the infrastructure template references, the
//! KubeadmControlPlane's rollout and etcd, a MachineDeployment's rollout strategy.

use serde::Serialize;
use serde_json::Value;

use crate::json::{self, at, i64_at, str_at};
use crate::plan::ClusterObjects;

/// The infrastructure template reference of a control plane (v1beta2
/// `spec.machineTemplate.spec.infrastructureRef`, v1beta1 `spec.machineTemplate.infrastructureRef`).
pub(crate) fn control_plane_infra_ref(cp: &Value) -> Option<(&str, &str)> {
    let r = at(
        cp,
        &["spec", "machineTemplate", "spec", "infrastructureRef"],
    )
    .or_else(|| at(cp, &["spec", "machineTemplate", "infrastructureRef"]))?;
    Some((str_at(r, &["kind"])?, str_at(r, &["name"])?))
}

/// The infrastructure template reference of a MachineDeployment.
pub fn deployment_infra_ref(md: &Value) -> Option<(&str, &str)> {
    let r = at(md, &["spec", "template", "spec", "infrastructureRef"])?;
    Some((str_at(r, &["kind"])?, str_at(r, &["name"])?))
}

/// KCP `maxSurge` (v1beta2 `spec.rollout.strategy.rollingUpdate.maxSurge`, v1beta1
/// `spec.rolloutStrategy.rollingUpdate.maxSurge`); MachineDeployments use
/// [`deployment_strategy`]. Integers only (KCP allows 0 or 1); defaults to 1.
pub(crate) fn kcp_max_surge(cp: &Value) -> i64 {
    at(
        cp,
        &["spec", "rollout", "strategy", "rollingUpdate", "maxSurge"],
    )
    .or_else(|| {
        at(
            cp,
            &["spec", "rolloutStrategy", "rollingUpdate", "maxSurge"],
        )
    })
    .and_then(|v| {
        v.as_i64()
            .or_else(|| v.as_str().and_then(|s| s.parse().ok()))
    })
    .unwrap_or(1)
}

/// Whether a KubeadmControlPlane runs stacked etcd (no `clusterConfiguration.etcd.external`).
pub(crate) fn kcp_stacked_etcd(cp: &Value) -> bool {
    at(
        cp,
        &[
            "spec",
            "kubeadmConfigSpec",
            "clusterConfiguration",
            "etcd",
            "external",
        ],
    )
    .is_none_or(Value::is_null)
}

/// A MachineDeployment's rollout strategy, v1beta2 (`spec.rollout.strategy`) or v1beta1 (`spec.strategy`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Strategy {
    /// `RollingUpdate` (default) or `OnDelete`.
    pub type_: String,
    /// maxSurge resolved against the replica count (percent rounded up), default 1.
    pub max_surge: i64,
    /// maxUnavailable resolved (percent rounded down), default 0.
    pub max_unavailable: i64,
}

fn int_or_percent(v: Option<&Value>, replicas: i64, round_up: bool, default: i64) -> i64 {
    match v {
        Some(Value::Number(n)) => n.as_i64().unwrap_or(default),
        Some(Value::String(s)) => match s
            .strip_suffix('%')
            .and_then(|p| p.trim().parse::<i64>().ok())
        {
            Some(p) => {
                let x = p * replicas;
                if round_up { (x + 99) / 100 } else { x / 100 }
            }
            None => s.parse().unwrap_or(default),
        },
        _ => default,
    }
}

/// Read a MachineDeployment's strategy.
pub(crate) fn deployment_strategy(md: &Value) -> Strategy {
    let s = at(md, &["spec", "rollout", "strategy"]).or_else(|| at(md, &["spec", "strategy"]));
    let replicas = i64_at(md, &["spec", "replicas"]).unwrap_or(1);
    let ru = s.and_then(|s| s.get("rollingUpdate"));
    Strategy {
        type_: s
            .and_then(|s| str_at(s, &["type"]))
            .unwrap_or("RollingUpdate")
            .to_string(),
        max_surge: int_or_percent(ru.and_then(|r| r.get("maxSurge")), replicas, true, 1),
        max_unavailable: int_or_percent(
            ru.and_then(|r| r.get("maxUnavailable")),
            replicas,
            false,
            0,
        ),
    }
}

/// Find the infra template by kind and name in the cluster's namespace.
pub(crate) fn find_template<'a>(
    objs: &ClusterObjects<'a>,
    kind: &str,
    name: &str,
) -> Option<&'a Value> {
    let ns = json::namespace(objs.cluster);
    objs.infra_templates.iter().find(|t| {
        json::kind(t) == kind
            && json::name(t) == name
            && (json::namespace(t) == ns || json::namespace(t).is_empty())
    })
}
