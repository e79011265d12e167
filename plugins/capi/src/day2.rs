//! What the day-2 verbs (scale, upgrade, delete, pause, resume, restart) share: finding a
//! cluster and its parts at the versions the server serves, `--dry-run`, and writes through the
//! API with the `kubectl-capi` field manager.

use cli::{Conn, KubeFlags};
use kube::discovery::ApiResource;
use serde_json::{Value, json};
use shared::discovery::{CapiVersion, ServerApis, fields};
use shared::error::Error;

/// The field manager of every write.
pub const FIELD_MANAGER: &str = "kubectl-capi";
/// The label CAPI puts on every object of a cluster.
pub use shared::labels::CLUSTER_NAME_LABEL;

/// `--dry-run` (the CLI layer's one definition).
pub use cli::DryRun;

/// How writes of a day-2 verb are sent: server-side apply takes over fields (these verbs own
/// what they set), `--dry-run=server` sends `dryRun=All`.
fn write(dry: DryRun) -> shared::api::Write<'static> {
    shared::api::Write {
        manager: FIELD_MANAGER,
        dry_run: dry.server(),
        force: true,
    }
}

/// A cluster found on the server, with what the verbs need to reach its parts.
pub struct Target {
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

/// Validates a cluster name before asking the server (one clear line for typos like `-x`).
pub fn check_name(name: &str) -> Result<(), Error> {
    Ok(kcore::names::check_object_name("cluster", name)?)
}

impl Target {
    /// Connects, discovers and gets the Cluster `name` (not found: the closest names).
    pub async fn load(kube: &KubeFlags, name: &str) -> Result<Target, Error> {
        check_name(name)?;
        let conn = kube.connect().await?;
        let apis = ServerApis::discover(&conn).await?;
        let level = apis.require_capi()?;
        let cluster_ar = apis.cluster()?;
        let namespace = conn.namespace.clone();
        let obj = shared::api::get_or_suggest(&conn, &cluster_ar, &namespace, name).await?;
        Ok(Target {
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
        let o = shared::api::get_opt(&self.conn, ar, Some(&self.namespace), name).await?;
        Ok(o.map(|o| fields::object_json(&o)))
    }

    /// Lists objects of `ar` in the cluster's namespace with the cluster-name label.
    pub async fn list_of_cluster(&self, ar: &ApiResource) -> Result<Vec<Value>, Error> {
        let selector = format!("{CLUSTER_NAME_LABEL}={}", self.name);
        let list =
            shared::api::list(&self.conn, ar, Some(&self.namespace), Some(&selector)).await?;
        let mut items: Vec<Value> = list.iter().map(fields::object_json).collect();
        items.sort_by(|a, b| name_of(a).cmp(name_of(b)));
        Ok(items)
    }

    /// Lists objects of `ar` in all namespaces (`None`) or one.
    pub async fn list_all(
        &self,
        ar: &ApiResource,
        namespace: Option<&str>,
    ) -> Result<Vec<Value>, Error> {
        let list = shared::api::list(&self.conn, ar, namespace, None).await?;
        Ok(list.iter().map(fields::object_json).collect())
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
        let (group, version) = api_version.rsplit_once('/').unwrap_or(("", api_version));
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
        merge(&mut obj, body);
        if dry == DryRun::Client {
            return Ok(obj);
        }
        let out = shared::api::apply(&self.conn, ar, &obj, write(dry)).await?;
        Ok(fields::object_json(&out))
    }

    /// A planned change to an object of the cluster's namespace.
    pub async fn patch(
        &self,
        ar: &ApiResource,
        p: &shared::plan::ObjectPatch,
        dry: DryRun,
    ) -> Result<(), Error> {
        if dry == DryRun::Client {
            return Ok(());
        }
        shared::api::patch(&self.conn, ar, &self.namespace, p, write(dry)).await
    }
}

pub use kcore::json::{deep_merge as merge, name as name_of, nest};

/// `kind.group/name`, as kubectl prints objects.
pub fn display_name(kind: &str, api_version: &str, name: &str) -> String {
    let group = api_version.rsplit_once('/').map(|(g, _)| g).unwrap_or("");
    shared::render::object_name(kind, group, name)
}

/// The rollout time for a restart: the next whole second, RFC 3339 as metav1.Time writes it.
/// metav1.Time has second precision and CAPI rolls machines created strictly before the rollout
/// time, so "now" truncated could miss a machine created in this very second; rounding up
/// cannot.
pub fn rollout_time() -> String {
    let next = jiff::Timestamp::now().as_second().saturating_add(1);
    jiff::Timestamp::from_second(next)
        .unwrap_or_else(|_| jiff::Timestamp::now())
        .strftime("%Y-%m-%dT%H:%M:%SZ")
        .to_string()
}
