//! What the scale and upgrade plans read of a cluster, fetched once and concurrently: the
//! control plane, the MachineDeployments, their infrastructure machine templates and, when one
//! is a ByoMachineTemplate, the free BYOH hosts.

use kclient::error::Error;
use kcore::fields::{self, ObjectRef};
use kcore::plan::ClusterObjects;
use serde_json::Value;

use super::cluster::ClusterHandle;
use super::host_pool::{HostLists, free_host_lists};

/// What the scale and upgrade plans read of a cluster, fetched once.
pub struct ClusterParts {
    pub control_plane: Option<Value>,
    pub machine_deployments: Vec<Value>,
    pub infra_templates: Vec<Value>,
    /// The free BYOH hosts of every namespace, when a template is a ByoMachineTemplate.
    pub free_hosts: Option<HostLists>,
}

impl ClusterParts {
    /// The plans' view of these parts and the Cluster `t` holds.
    pub fn cluster_objects<'a>(&'a self, t: &'a ClusterHandle) -> ClusterObjects<'a> {
        ClusterObjects {
            cluster: &t.cluster,
            control_plane: self.control_plane.as_ref(),
            machine_deployments: &self.machine_deployments,
            infra_templates: &self.infra_templates,
        }
    }
}

/// Reads the control plane, deployments, their infrastructure templates and, when any template
/// is a ByoMachineTemplate, the free hosts.
pub async fn fetch(t: &ClusterHandle) -> Result<ClusterParts, Error> {
    let mut parts = fetch_without_hosts(t).await?;
    parts.free_hosts = free_hosts_of(t, &parts.infra_templates).await?;
    Ok(parts)
}

/// The free hosts of every namespace when a template is a ByoMachineTemplate (a plan that adds
/// Machines needs them; one that only removes some does not).
pub async fn free_hosts_of(
    t: &ClusterHandle,
    infra_templates: &[Value],
) -> Result<Option<HostLists>, Error> {
    let byoh = infra_templates
        .iter()
        .any(|v| v.get("kind").and_then(Value::as_str) == Some("ByoMachineTemplate"));
    Ok(match (byoh, t.apis.byo_host()) {
        (true, Some(host_ar)) => Some(free_host_lists(t, &host_ar).await?),
        _ => None,
    })
}

/// [`fetch`] without the free hosts (`free_hosts` is `None`).
pub async fn fetch_without_hosts(t: &ClusterHandle) -> Result<ClusterParts, Error> {
    let (control_plane, machine_deployments) =
        tokio::try_join!(t.control_plane(), t.machine_deployments())?;
    let control_plane = control_plane.map(|(_, v)| v);
    let mut refs: Vec<ObjectRef> = Vec::new();
    if let Some(cp) = &control_plane
        && let Some(r) = fields::control_plane_machine_template_ref(cp)
    {
        refs.push(r);
    }
    for md in &machine_deployments {
        if let Some(r) = fields::template_infrastructure_ref(md) {
            refs.push(r);
        }
    }
    refs.sort_by(|a, b| (&a.kind, &a.name).cmp(&(&b.kind, &b.name)));
    refs.dedup_by(|a, b| a.kind == b.kind && a.name == b.name);
    // One GET per template, all at once (a cluster has a handful).
    let gets = refs.iter().map(|r| async move {
        let ar = t.apis.resolve_ref(r)?;
        t.get_opt(&ar, &r.name).await
    });
    let infra_templates: Vec<Value> = futures::future::try_join_all(gets)
        .await?
        .into_iter()
        .flatten()
        .collect();
    Ok(ClusterParts {
        control_plane,
        machine_deployments,
        infra_templates,
        free_hosts: None,
    })
}
