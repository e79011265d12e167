//! One Cluster on the management cluster, found by name at the versions the server serves, and
//! what the verbs that act on a cluster (scale, upgrade, delete, pause, resume, restart, host
//! drain) need of it: its control plane, MachineDeployments and Machines, any object by
//! apiVersion and kind, and writes to them (server-side apply and planned patches, honouring
//! `--dry-run`).

use cli::{Conn, DryRun, KubeFlags};
use kclient::discovery::ServerApis;
use kclient::error::Error;
use kcore::fields;
use kcore::groups::CapiVersion;
use kcore::json::{deep_merge, name as name_of};
use kcore::labels::CLUSTER_NAME_LABEL;
use kube::discovery::ApiResource;
use serde_json::{Value, json};

use super::names::check_name;
use super::writes::taking_over;

/// A Cluster found on the management cluster, with the connection and the served APIs to reach
/// its parts.
pub struct ClusterHandle {
    pub conn: Conn,
    pub apis: ServerApis,
    /// The CAPI core version in use.
    pub level: CapiVersion,
    pub cluster_ar: ApiResource,
    /// The Cluster as JSON.
    pub cluster: Value,
    pub name: String,
    pub namespace: String,
}

impl ClusterHandle {
    /// Connects, discovers and gets the Cluster `name` (not found: the closest names).
    pub async fn load(kube: &KubeFlags, name: &str) -> Result<ClusterHandle, Error> {
        check_name(name)?;
        let conn = kube.connect().await?;
        let apis = ServerApis::discover(&conn).await?;
        let level = apis.require_capi()?;
        let cluster_ar = apis.cluster()?;
        let namespace = conn.namespace.clone();
        let obj = kclient::api::get_or_suggest(&conn, &cluster_ar, &namespace, name).await?;
        Ok(ClusterHandle {
            cluster: fields::object_json(&obj),
            conn,
            apis,
            level,
            cluster_ar,
            name: name.to_string(),
            namespace,
        })
    }

    /// The ApiResource of a CAPI core kind.
    pub fn core(&self, kind: &str) -> Result<ApiResource, Error> {
        self.apis.capi_kind(kind)
    }

    /// Gets one object of the cluster's namespace as JSON, `None` when it does not exist.
    pub async fn get_opt(&self, ar: &ApiResource, name: &str) -> Result<Option<Value>, Error> {
        let o = kclient::api::get_opt(&self.conn, ar, Some(&self.namespace), name).await?;
        Ok(o.map(|o| fields::object_json(&o)))
    }

    /// Lists objects of `ar` in the cluster's namespace with the cluster-name label.
    pub async fn list_of_cluster(&self, ar: &ApiResource) -> Result<Vec<Value>, Error> {
        let selector = format!("{CLUSTER_NAME_LABEL}={}", self.name);
        let namespace = Some(self.namespace.as_str());
        let mut items =
            kclient::api::list_values(&self.conn, ar, namespace, Some(&selector)).await?;
        items.sort_by(|a, b| name_of(a).cmp(name_of(b)));
        Ok(items)
    }

    /// Lists objects of `ar` in all namespaces (`None`) or one.
    pub async fn list_all(
        &self,
        ar: &ApiResource,
        namespace: Option<&str>,
    ) -> Result<Vec<Value>, Error> {
        kclient::api::list_values(&self.conn, ar, namespace, None).await
    }

    /// The control-plane object and its ApiResource, when the cluster has one.
    pub async fn control_plane(&self) -> Result<Option<(ApiResource, Value)>, Error> {
        let Some(r) = fields::cluster_control_plane_ref(&self.cluster) else {
            return Ok(None);
        };
        let ar = self.apis.resolve_ref(&r)?;
        Ok(self.get_opt(&ar, &r.name).await?.map(|v| (ar, v)))
    }

    /// The cluster's MachineDeployments, sorted by name.
    pub async fn machine_deployments(&self) -> Result<Vec<Value>, Error> {
        let ar = self.core("MachineDeployment")?;
        self.list_of_cluster(&ar).await
    }

    /// The cluster's Machines, sorted by name.
    pub async fn machines(&self) -> Result<Vec<Value>, Error> {
        let ar = self.core("Machine")?;
        self.list_of_cluster(&ar).await
    }

    /// The ApiResource of a served object given its apiVersion and kind.
    pub fn resource_of(&self, api_version: &str, kind: &str) -> Result<ApiResource, Error> {
        let (group, version) = kcore::groups::split_api_version(api_version);
        let k = self.apis.kind(group, kind).ok_or_else(|| {
            self.apis.not_installed(
                &format!("The kind {kind}"),
                group,
                "install its provider with clusterctl init",
            )
        })?;
        let version = if k.versions.iter().any(|v| v == version) {
            version
        } else {
            k.version()
        };
        Ok(k.resource(version))
    }

    /// Server-side apply of `fields` (a partial object body under the top level) to one object.
    pub async fn apply(
        &self,
        ar: &ApiResource,
        name: &str,
        body: Value,
        dry: DryRun,
    ) -> Result<Value, Error> {
        let mut obj = json!({
            "apiVersion": ar.api_version, "kind": ar.kind,
            "metadata": {"name": name, "namespace": self.namespace},
        });
        deep_merge(&mut obj, body);
        if dry == DryRun::Client {
            return Ok(obj);
        }
        let out = kclient::api::apply(&self.conn, ar, &obj, taking_over(dry)).await?;
        Ok(fields::object_json(&out))
    }

    /// A planned change to an object of the cluster's namespace.
    pub async fn patch(
        &self,
        ar: &ApiResource,
        p: &kcore::plan::ObjectPatch,
        dry: DryRun,
    ) -> Result<(), Error> {
        if dry == DryRun::Client {
            return Ok(());
        }
        kclient::api::patch(&self.conn, ar, &self.namespace, p, taking_over(dry)).await
    }
}
