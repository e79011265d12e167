//! What the day-2 verbs (scale, upgrade, delete, pause, resume, restart) share: finding a
//! cluster and its parts at the versions the server serves, `--dry-run`, and writes through the
//! API with the `kubectl-capi` field manager.

use cli::{Conn, KubeFlags};
use kube::api::{Api, DynamicObject, ListParams, Patch, PatchParams};
use kube::discovery::ApiResource;
use serde_json::{Value, json};
use shared::discovery::{CapiVersion, ServerApis, fields};
use shared::error::{Error, Op};

/// The field manager of every write.
pub const FIELD_MANAGER: &str = "kubectl-capi";
/// The label CAPI puts on every object of a cluster.
pub use shared::labels::CLUSTER_NAME_LABEL;

/// `--dry-run`, as kubectl spells it.
#[derive(clap::ValueEnum, Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum DryRun {
    /// make the change
    #[default]
    None,
    /// print what would change, send nothing
    Client,
    /// send the change with dryRun=All: the server validates it and stores nothing
    Server,
}

impl DryRun {
    /// The suffix kubectl prints after an action: ` (dry run)`, ` (server dry run)`.
    pub fn suffix(self) -> &'static str {
        match self {
            DryRun::None => "",
            DryRun::Client => " (dry run)",
            DryRun::Server => " (server dry run)",
        }
    }
    pub fn is_dry(self) -> bool {
        self != DryRun::None
    }
    fn params(self) -> PatchParams {
        let mut p = PatchParams::apply(FIELD_MANAGER).force();
        p.dry_run = self == DryRun::Server;
        p
    }
    fn patch_params(self) -> PatchParams {
        PatchParams {
            field_manager: Some(FIELD_MANAGER.into()),
            dry_run: self == DryRun::Server,
            ..Default::default()
        }
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
    let ok = !name.is_empty()
        && name.len() <= 253
        && name
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-' || c == '.')
        && name.starts_with(|c: char| c.is_ascii_alphanumeric())
        && name.ends_with(|c: char| c.is_ascii_alphanumeric());
    if ok {
        Ok(())
    } else {
        Err(Error::Usage {
            message: format!(
                "{name:?} is not a valid cluster name (lower-case letters, digits, '-' and '.', starting and ending with a letter or digit)"
            ),
            hint: None,
        })
    }
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

    /// A namespaced dynamic API in the cluster's namespace.
    pub fn api(&self, ar: &ApiResource) -> Api<DynamicObject> {
        Api::namespaced_with(self.conn.client.clone(), &self.namespace, ar)
    }

    /// The ApiResource of a CAPI core kind.
    pub fn core(&self, kind: &str) -> Result<ApiResource, Error> {
        self.apis.capi_kind(kind)
    }

    /// Reads the Cluster again.
    pub async fn refresh(&mut self) -> Result<bool, Error> {
        match self
            .get_opt(&self.cluster_ar.clone(), &self.name.clone())
            .await?
        {
            Some(v) => {
                self.cluster = v;
                Ok(true)
            }
            None => Ok(false),
        }
    }

    /// Gets one object of the cluster's namespace as JSON, `None` when it does not exist.
    pub async fn get_opt(&self, ar: &ApiResource, name: &str) -> Result<Option<Value>, Error> {
        let op = Op::on("get", ar)
            .in_namespace(Some(&self.namespace))
            .named(name);
        self.api(ar)
            .get_opt(name)
            .await
            .map(|o| o.map(|o| fields::object_json(&o)))
            .map_err(|e| self.conn.error(e, &op))
    }

    /// Lists objects of `ar` in the cluster's namespace with the cluster-name label.
    pub async fn list_of_cluster(&self, ar: &ApiResource) -> Result<Vec<Value>, Error> {
        let lp = ListParams::default().labels(&format!("{CLUSTER_NAME_LABEL}={}", self.name));
        let op = Op::on("list", ar).in_namespace(Some(&self.namespace));
        let list = self
            .api(ar)
            .list(&lp)
            .await
            .map_err(|e| self.conn.error(e, &op))?;
        let mut items: Vec<Value> = list.items.iter().map(fields::object_json).collect();
        items.sort_by(|a, b| name_of(a).cmp(name_of(b)));
        Ok(items)
    }

    /// Lists objects of `ar` in all namespaces (`None`) or one.
    pub async fn list_all(
        &self,
        ar: &ApiResource,
        namespace: Option<&str>,
    ) -> Result<Vec<Value>, Error> {
        let api = shared::api::dynamic(&self.conn, ar, namespace);
        let op = Op::on("list", ar).in_namespace(namespace);
        let list = api
            .list(&ListParams::default())
            .await
            .map_err(|e| self.conn.error(e, &op))?;
        Ok(list.items.iter().map(fields::object_json).collect())
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
        let op = Op::on("patch", ar)
            .in_namespace(Some(&self.namespace))
            .named(name);
        let out = self
            .api(ar)
            .patch(name, &dry.params(), &Patch::Apply(&obj))
            .await
            .map_err(|e| self.conn.error(e, &op))?;
        Ok(fields::object_json(&out))
    }

    /// An RFC 6902 JSON patch (or, with `scale`, a merge patch of the scale subresource).
    pub async fn patch(
        &self,
        ar: &ApiResource,
        name: &str,
        p: &shared::plan::ObjectPatch,
        dry: DryRun,
    ) -> Result<(), Error> {
        if dry == DryRun::Client {
            return Ok(());
        }
        let op = Op::on("patch", ar)
            .in_namespace(Some(&self.namespace))
            .named(name);
        let api = self.api(ar);
        let res = if p.subresource.as_deref() == Some("scale") {
            let mp = p.merge_patch.clone().unwrap_or_else(|| json!({}));
            api.patch_scale(name, &dry.patch_params(), &Patch::Merge(mp))
                .await
                .map(|_| ())
        } else {
            // The JSON patch type is kube's own (json-patch crate), inferred from the variant.
            let jp = serde_json::from_value(p.json_patch.clone())
                .map_err(|e| Error::other(format!("internal: bad JSON patch: {e}")))?;
            api.patch(name, &dry.patch_params(), &Patch::<()>::Json(jp))
                .await
                .map(|_| ())
        };
        res.map_err(|e| self.conn.error(e, &op))
    }
}

/// `metadata.name`.
pub fn name_of(v: &Value) -> &str {
    v.pointer("/metadata/name")
        .and_then(Value::as_str)
        .unwrap_or("")
}

/// `kind.group/name`, as kubectl prints objects.
pub fn display_name(kind: &str, api_version: &str, name: &str) -> String {
    let group = api_version.rsplit_once('/').map(|(g, _)| g).unwrap_or("");
    shared::render::object_name(kind, group, name)
}

/// The nested object `{a: {b: {c: value}}}` for a path.
pub fn nest(path: &[&str], value: Value) -> Value {
    path.iter()
        .rev()
        .fold(value, |acc, key| json!({ (*key): acc }))
}

/// Deep-merges `from` into `into` (objects merge, everything else replaces).
pub fn merge(into: &mut Value, from: Value) {
    match (into, from) {
        (Value::Object(a), Value::Object(b)) => {
            for (k, v) in b {
                merge(a.entry(k).or_insert(Value::Null), v);
            }
        }
        (slot, v) => *slot = v,
    }
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
