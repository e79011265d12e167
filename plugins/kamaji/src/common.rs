//! What the verbs share: finding KamajiControlPlanes, TenantControlPlanes and their Secrets,
//! server-side apply, and a few flags.

use std::collections::BTreeMap;

use cli::Conn;
use k8s_openapi::api::core::v1::Secret;
use kube::api::{Api, ApiResource, DynamicObject};
use serde_json::Value;
use shared::build::kamaji::FIELD_MANAGER;
use shared::discovery::fields::{self, object_json};
use shared::discovery::{CONTROLPLANE_GROUP, KAMAJI_GROUP, ServerApis};
use shared::error::{Error, Op};

/// `--dry-run` (the CLI layer's one definition).
pub use cli::DryRun;
/// Reads and deletes as every verb does them.
pub use shared::api::{delete, get_opt, list};

/// KamajiControlPlane at its served version, or "not installed".
pub fn kcp_resource(apis: &ServerApis) -> Result<ApiResource, Error> {
    apis.kamaji_control_plane().ok_or_else(|| {
        apis.not_installed(
            "The KamajiControlPlane provider",
            CONTROLPLANE_GROUP,
            "install it with kubectl kamaji install",
        )
    })
}

/// TenantControlPlane, or "not installed".
pub fn tcp_resource(apis: &ServerApis) -> Result<ApiResource, Error> {
    apis.tenant_control_plane().ok_or_else(|| {
        apis.not_installed(
            "Kamaji",
            KAMAJI_GROUP,
            "install Kamaji (helm install kamaji clastix/kamaji)",
        )
    })
}

/// The ApiResource of an object to apply (from its apiVersion and kind); the kind must be
/// served.
pub fn resource_of(apis: &ServerApis, obj: &Value) -> Result<ApiResource, Error> {
    let av = obj["apiVersion"].as_str().unwrap_or_default();
    let kind = obj["kind"].as_str().unwrap_or_default();
    let (group, version) = av.rsplit_once('/').unwrap_or(("", av));
    // Core kinds are always served (discovery only looks at the Cluster API groups).
    match (av, kind) {
        ("v1", "ConfigMap") => {
            return Ok(ApiResource::erase::<k8s_openapi::api::core::v1::ConfigMap>(
                &(),
            ));
        }
        ("v1", "Secret") => {
            return Ok(ApiResource::erase::<k8s_openapi::api::core::v1::Secret>(&()));
        }
        _ => {}
    }
    let k = apis.kind(group, kind).ok_or_else(|| {
        apis.not_installed(
            &format!("The provider of {kind}"),
            group,
            "install it with clusterctl init (e.g. --infrastructure openstack)",
        )
    })?;
    Ok(k.resource(version))
}

/// Server-side applies one object with field manager `kubectl-kamaji`.
pub async fn apply(
    conn: &Conn,
    apis: &ServerApis,
    obj: &Value,
    dry_run: bool,
    force: bool,
) -> Result<DynamicObject, Error> {
    let ar = resource_of(apis, obj)?;
    shared::api::apply(conn, &ar, obj, write(dry_run, force)).await
}

/// A merge patch with field manager `kubectl-kamaji`.
pub async fn merge_patch(
    conn: &Conn,
    ar: &ApiResource,
    ns: &str,
    name: &str,
    patch: &Value,
) -> Result<DynamicObject, Error> {
    shared::api::merge_patch(conn, ar, ns, name, patch, write(false, false)).await
}

/// A planned JSON patch ([`kcore::plan::ObjectPatch`]) with field manager `kubectl-kamaji`.
pub async fn json_patch(
    conn: &Conn,
    ar: &ApiResource,
    patch: &kcore::plan::ObjectPatch,
) -> Result<(), Error> {
    shared::api::patch(conn, ar, &patch.namespace, patch, write(false, false)).await
}

/// The Cluster that owns the control plane, when it has one and it still exists.
pub async fn owning_cluster(
    conn: &Conn,
    apis: &ServerApis,
    t: &Target,
) -> Result<Option<Value>, Error> {
    let Some(name) = t.cluster_name() else {
        return Ok(None);
    };
    let ar = apis.cluster()?;
    Ok(get_opt(conn, &ar, Some(&t.namespace), &name)
        .await?
        .map(|c| object_json(&c)))
}

fn write(dry_run: bool, force: bool) -> shared::api::Write<'static> {
    shared::api::Write {
        manager: FIELD_MANAGER,
        dry_run,
        force,
    }
}

/// A control plane: the KamajiControlPlane (absent for a standalone TenantControlPlane) and its
/// TenantControlPlane (absent until the reconciler creates it).
#[derive(Clone, Debug)]
pub struct Target {
    pub namespace: String,
    pub name: String,
    pub kcp: Option<Value>,
    pub tcp: Option<Value>,
}

impl Target {
    /// The TenantControlPlane's name: its own, else the KamajiControlPlane's.
    pub fn tcp_name(&self) -> String {
        self.tcp
            .as_ref()
            .and_then(|t| t["metadata"]["name"].as_str())
            .unwrap_or(&self.name)
            .to_string()
    }
    /// The owning Cluster's name, from the ownerReferences (kind Cluster, group cluster.x-k8s.io).
    pub fn cluster_name(&self) -> Option<String> {
        let kcp = self.kcp.as_ref()?;
        kcp["metadata"]["ownerReferences"]
            .as_array()?
            .iter()
            .find(|o| {
                o["kind"] == "Cluster"
                    && o["apiVersion"]
                        .as_str()
                        .is_some_and(|a| a.starts_with("cluster.x-k8s.io/"))
            })
            .and_then(|o| o["name"].as_str())
            .map(str::to_string)
    }
}

/// Finds the TenantControlPlane of a KamajiControlPlane: owned by it (by UID), else same name.
pub fn tcp_of<'a>(kcp: &Value, tcps: &'a [DynamicObject]) -> Option<&'a DynamicObject> {
    let uid = kcp["metadata"]["uid"].as_str().unwrap_or_default();
    let name = kcp["metadata"]["name"].as_str().unwrap_or_default();
    tcps.iter()
        .find(|t| {
            t.metadata
                .owner_references
                .as_ref()
                .is_some_and(|o| o.iter().any(|r| r.uid == uid && !uid.is_empty()))
        })
        .or_else(|| {
            tcps.iter()
                .find(|t| t.metadata.name.as_deref() == Some(name))
        })
}

/// True when a TenantControlPlane is owned by a KamajiControlPlane.
pub fn owned_by_kcp(tcp: &DynamicObject) -> bool {
    tcp.metadata
        .owner_references
        .as_ref()
        .is_some_and(|o| o.iter().any(|r| r.kind == "KamajiControlPlane"))
}

/// Resolves NAME: a KamajiControlPlane, else a standalone TenantControlPlane. Not found
/// offers close names of both.
pub async fn resolve(conn: &Conn, apis: &ServerApis, name: &str) -> Result<Target, Error> {
    kcore::names::check_object_name("KamajiControlPlane", name)?;
    let ns = conn.namespace.clone();
    let tcp_ar = tcp_resource(apis)?;
    let tcps = list(conn, &tcp_ar, Some(&ns), None).await?;
    if let Some(kcp_ar) = apis.kamaji_control_plane()
        && let Some(kcp) = get_opt(conn, &kcp_ar, Some(&ns), name).await?
    {
        let kcp = object_json(&kcp);
        let tcp = tcp_of(&kcp, &tcps).map(object_json);
        return Ok(Target {
            namespace: ns,
            name: name.into(),
            kcp: Some(kcp),
            tcp,
        });
    }
    if let Some(t) = tcps
        .iter()
        .find(|t| t.metadata.name.as_deref() == Some(name))
    {
        return Ok(Target {
            namespace: ns,
            name: name.into(),
            kcp: None,
            tcp: Some(object_json(t)),
        });
    }
    let mut names: Vec<String> = tcps
        .iter()
        .filter_map(|t| t.metadata.name.clone())
        .collect();
    if let Some(kcp_ar) = apis.kamaji_control_plane() {
        names.extend(
            shared::api::list_names(conn, &kcp_ar, Some(&ns))
                .await
                .unwrap_or_default(),
        );
    }
    names.sort();
    names.dedup();
    Err(Error::NotFound {
        kind: "KamajiControlPlane".into(),
        name: name.into(),
        namespace: Some(ns),
        suggestions: shared::error::closest_names(name, names.iter().map(String::as_str)),
    })
}

/// Reads a Secret's data as bytes by key; `None` when the Secret does not exist.
pub async fn secret_data(
    conn: &Conn,
    ns: &str,
    name: &str,
) -> Result<Option<(Secret, BTreeMap<String, Vec<u8>>)>, Error> {
    let api: Api<Secret> = Api::namespaced(conn.client.clone(), ns);
    let s = api.get_opt(name).await.map_err(|e| {
        conn.error(
            e,
            &Op::new("get", "", "secrets", "Secret")
                .in_namespace(Some(ns))
                .named(name),
        )
    })?;
    Ok(s.map(|s| {
        let data = s
            .data
            .clone()
            .unwrap_or_default()
            .into_iter()
            .map(|(k, v)| (k, v.0))
            .collect();
        (s, data)
    }))
}

/// The admin kubeconfig Secret of a TenantControlPlane: from its status, else `<tcp>-admin-kubeconfig`.
pub fn admin_secret_name(t: &Target) -> String {
    t.tcp
        .as_ref()
        .and_then(|tcp| fields::at(tcp, &["status", "kubeconfig", "admin", "secretName"]))
        .and_then(Value::as_str)
        .map(str::to_string)
        .unwrap_or_else(|| format!("{}-admin-kubeconfig", t.tcp_name()))
}

/// A TenantControlPlane's `status.kubernetesResources.version.status`.
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

pub fn tcp_phase(tcp: &Value) -> Option<String> {
    fields::at(tcp, &["status", "kubernetesResources", "version", "status"])
        .and_then(Value::as_str)
        .map(str::to_string)
}

/// The endpoint Kamaji announced: the KamajiControlPlane's `spec.controlPlaneEndpoint`, else
/// the TenantControlPlane's `status.controlPlaneEndpoint`.
pub fn endpoint(t: &Target) -> Option<(String, u16)> {
    if let Some(kcp) = &t.kcp {
        let host = kcp["spec"]["controlPlaneEndpoint"]["host"]
            .as_str()
            .unwrap_or_default();
        if !host.is_empty() {
            let port = kcp["spec"]["controlPlaneEndpoint"]["port"]
                .as_u64()
                .and_then(|p| u16::try_from(p).ok())
                .unwrap_or(shared::build::kamaji::DEFAULT_PORT);
            return Some((host.to_string(), port));
        }
    }
    let tcp = t.tcp.as_ref()?;
    tcp["status"]["controlPlaneEndpoint"]
        .as_str()
        .and_then(shared::build::kamaji::split_endpoint)
}

/// Whether stdin is a terminal (to ask before destroying).
pub fn stdin_is_tty() -> bool {
    std::io::IsTerminal::is_terminal(&std::io::stdin())
}

/// kubectl's AGE of an object.
pub fn age(obj: &Value) -> String {
    obj["metadata"]["creationTimestamp"]
        .as_str()
        .and_then(|t| kcore::text::seconds_since(t, jiff::Timestamp::now()))
        .map(kcore::text::age)
        .unwrap_or_else(|| "<unknown>".into())
}
