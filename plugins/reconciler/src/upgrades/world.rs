//! What one reconcile of a ClusterUpgrade reads: the Cluster, its control plane, its
//! MachineDeployments and Machines, the machine templates they reference and, on BYOH, the free
//! host pool. Read only while an upgrade is active, and only this cluster's objects.

use std::collections::BTreeMap;

use kcore::fields::{self, ObjectRef};
use kcore::ops::ClusterUpgrade;
use kcore::ops::run::{self, Observation};
use kcore::plan::ClusterObjects;
use kcore::plan::hosts::{HostState, Inventory};
use kcore::plan::upgrade::{Observed, UpgradePlan, plan_upgrade};
use kcore::version::releases::{ReleaseSource, Releases};
use kube::api::{Api, ApiResource, DynamicObject, GroupVersionKind, ListParams};
use kube::{Client, ResourceExt};
use serde_json::Value;

use super::{CLUSTER_NAME_LABEL, UpgradeCtx};
use crate::Error;

pub(super) fn ar(group: &str, version: &str, kind: &str, plural: &str) -> ApiResource {
    ApiResource::from_gvk_with_plural(&GroupVersionKind::gvk(group, version, kind), plural)
}

/// The resource of `group`'s `kind` (at `version` when the reference names one), resolved
/// through discovery once per process.
pub(super) async fn resource(
    ctx: &UpgradeCtx,
    group: &str,
    version: Option<&str>,
    kind: &str,
) -> Result<ApiResource, Error> {
    let key = (
        format!("{group}/{}", version.unwrap_or("")),
        kind.to_string(),
    );
    if let Some(r) = ctx.resources.lock().ok().and_then(|m| m.get(&key).cloned()) {
        return Ok(r);
    }
    let g = kube::discovery::group(&ctx.base.client, group).await?;
    let found = match version {
        Some(v) => g
            .versioned_resources(v)
            .into_iter()
            .find(|(r, _)| r.kind == kind)
            .map(|(r, _)| r),
        // The kind at its most stable served version: the group's preferred version is
        // decided across all its kinds (KubeadmControlPlane's v1beta2 in
        // controlplane.cluster.x-k8s.io), which may not serve this one (KamajiControlPlane).
        None => g
            .resources_by_stability()
            .into_iter()
            .find(|(r, _)| r.kind == kind)
            .map(|(r, _)| r),
    }
    .ok_or_else(|| Error::Other(format!("{kind}.{group} is not served")))?;
    if let Ok(mut m) = ctx.resources.lock() {
        m.insert(key, found.clone());
    }
    Ok(found)
}

fn to_value(o: DynamicObject) -> Result<Value, Error> {
    serde_json::to_value(o).map_err(|e| Error::Other(format!("reading an object: {e}")))
}

async fn get_ref(ctx: &UpgradeCtx, ns: &str, r: &ObjectRef) -> Result<Option<Value>, Error> {
    let version = r
        .api_version
        .as_deref()
        .map(|av| kcore::groups::split_api_version(av).1);
    let res = resource(ctx, &r.api_group, version, &r.kind).await?;
    let api: Api<DynamicObject> = Api::namespaced_with(ctx.base.client.clone(), ns, &res);
    api.get_opt(&r.name).await?.map(to_value).transpose()
}

async fn list(
    client: &Client,
    ns: Option<&str>,
    res: &ApiResource,
    lp: &ListParams,
) -> Result<Vec<Value>, Error> {
    let api: Api<DynamicObject> = match ns {
        Some(n) => Api::namespaced_with(client.clone(), n, res),
        None => Api::all_with(client.clone(), res),
    };
    // List items come without apiVersion and kind; the planner reads both.
    api.list(lp)
        .await?
        .items
        .into_iter()
        .map(|o| {
            let mut v = to_value(o)?;
            v["apiVersion"] = Value::from(res.api_version.clone());
            v["kind"] = Value::from(res.kind.clone());
            Ok(v)
        })
        .collect()
}

/// One reconcile's view of the cluster.
pub(super) struct World {
    cluster: Value,
    control_plane: Option<Value>,
    machine_deployments: Vec<Value>,
    templates: Vec<Value>,
    machines: Vec<Value>,
    free_hosts: Option<Vec<Value>>,
    observed: Observed,
}

/// Reads the cluster's objects; `None` when the Cluster is missing (input the caller reports,
/// not an error to retry).
pub(super) async fn read(ctx: &UpgradeCtx, cu: &ClusterUpgrade) -> Result<Option<World>, Error> {
    let ns = cu.namespace().unwrap_or_default();
    let name = &cu.spec.cluster_name;
    let v = ctx.capi_version;
    let clusters: Api<DynamicObject> = Api::namespaced_with(
        ctx.base.client.clone(),
        &ns,
        &ar(kcore::groups::CAPI_GROUP, v, "Cluster", "clusters"),
    );
    let Some(cluster) = clusters.get_opt(name).await? else {
        return Ok(None);
    };
    let cluster = to_value(cluster)?;
    let by_cluster = ListParams::default().labels(&format!("{CLUSTER_NAME_LABEL}={name}"));
    let md_ar = ar(
        kcore::groups::CAPI_GROUP,
        v,
        "MachineDeployment",
        "machinedeployments",
    );
    let machine_ar = ar(kcore::groups::CAPI_GROUP, v, "Machine", "machines");
    let cp_ref = fields::cluster_control_plane_ref(&cluster);
    let (control_plane, machine_deployments, machines) = tokio::try_join!(
        async {
            match &cp_ref {
                Some(r) => get_ref(ctx, &ns, r).await,
                None => Ok(None),
            }
        },
        list(&ctx.base.client, Some(&ns), &md_ar, &by_cluster),
        list(&ctx.base.client, Some(&ns), &machine_ar, &by_cluster),
    )?;
    let mut refs: Vec<ObjectRef> = control_plane
        .iter()
        .filter_map(fields::control_plane_machine_template_ref)
        .chain(
            machine_deployments
                .iter()
                .filter_map(fields::template_infrastructure_ref),
        )
        .collect();
    refs.sort_by(|a, b| (&a.kind, &a.name).cmp(&(&b.kind, &b.name)));
    refs.dedup_by(|a, b| a.kind == b.kind && a.name == b.name);
    let mut templates = Vec::new();
    for r in &refs {
        if let Some(t) = get_ref(ctx, &ns, r).await? {
            templates.push(t);
        }
    }
    let byoh = templates.iter().any(|t| t["kind"] == "ByoMachineTemplate");
    let free_hosts = if byoh {
        Some(free_hosts(ctx).await?)
    } else {
        None
    };
    let mut w = World {
        cluster,
        control_plane,
        machine_deployments,
        templates,
        machines,
        free_hosts,
        observed: Observed::default(),
    };
    w.observed = Observed::from_objects(&w.objects(), &w.machines);
    Ok(Some(w))
}

/// The Available ByoHosts: unclaimed (BYOH selects only hosts without the cluster-name label,
/// `attachByoHost` in BYOH v0.5.0's byomachine_controller.go) and not cordoned.
async fn free_hosts(ctx: &UpgradeCtx) -> Result<Vec<Value>, Error> {
    let Ok(res) = resource(ctx, kcore::groups::INFRASTRUCTURE_GROUP, None, "ByoHost").await else {
        return Ok(Vec::new());
    };
    let lp = ListParams::default().labels(&format!("!{CLUSTER_NAME_LABEL}"));
    let hosts = list(&ctx.base.client, None, &res, &lp).await?;
    let inv = Inventory::build(&hosts, &[], &[], &[], None);
    let free: Vec<Value> = hosts
        .iter()
        .filter(|h| inv.state(h) == HostState::Available)
        .cloned()
        .collect();
    Ok(free)
}

impl World {
    /// The Cluster, as read.
    pub(super) fn cluster(&self) -> &Value {
        &self.cluster
    }

    fn objects(&self) -> ClusterObjects<'_> {
        ClusterObjects {
            cluster: &self.cluster,
            control_plane: self.control_plane.as_ref(),
            machine_deployments: &self.machine_deployments,
            infra_templates: &self.templates,
        }
    }

    /// The plan `kubectl capi upgrade --plan` makes from the same objects.
    pub(super) fn plan(&self, cu: &ClusterUpgrade) -> Result<UpgradePlan, String> {
        let mut req = run::request(&cu.spec).map_err(|e| e.to_string())?;
        // A ClusterClass's list is the only versions CAPI takes for it (as the CLI plans).
        let class = kcore::json::strings_at(&self.cluster, &["status", "kubernetesVersions"]);
        if !class.is_empty() {
            req.releases = Releases::none().with(class, ReleaseSource::ClusterClass);
        }
        let free: Option<Vec<&Value>> = self.free_hosts.as_ref().map(|h| h.iter().collect());
        plan_upgrade(&self.objects(), &req, &self.observed, free.as_deref())
            .map_err(|e| e.to_string())
    }

    pub(super) fn observation(&self) -> Observation<'_> {
        let mut objects: BTreeMap<String, &Value> = BTreeMap::new();
        let key = |v: &Value| format!("{}/{}", kcore::json::kind(v), kcore::json::name(v));
        objects.insert(key(&self.cluster), &self.cluster);
        if let Some(cp) = &self.control_plane {
            objects.insert(key(cp), cp);
        }
        for m in &self.machine_deployments {
            objects.insert(key(m), m);
        }
        Observation {
            observed: &self.observed,
            objects,
        }
    }
}
