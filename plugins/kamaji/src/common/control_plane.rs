//! Which control plane a NAME means, and its objects: the KamajiControlPlane (at its served
//! version), its TenantControlPlane, the Cluster that owns it; and the refusal verbs give when
//! the provider or Kamaji is not installed, or a standalone TenantControlPlane cannot do.

use cli::Conn;
use kclient::api::{get_opt, list};
use kclient::discovery::ServerApis;
use kclient::error::Error;
use kcore::fields::object_json;
use kcore::groups::{CONTROLPLANE_GROUP, KAMAJI_GROUP};
use kcore::labels::CLUSTER_NAME_LABEL;
use kube::api::{ApiResource, DynamicObject};
use serde_json::Value;

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

/// The Cluster that owns the control plane, when it has one and it still exists.
pub async fn owning_cluster(
    conn: &Conn,
    apis: &ServerApis,
    cp: &ControlPlane,
) -> Result<Option<Value>, Error> {
    let Some(name) = cp.cluster_name() else {
        return Ok(None);
    };
    let ar = apis.cluster()?;
    Ok(get_opt(conn, &ar, Some(&cp.namespace), &name)
        .await?
        .map(|c| object_json(&c)))
}

/// Each control plane's namespace and name, in `ns` (every namespace with `None`), whose labels
/// match `selector`: the KamajiControlPlanes and the standalone TenantControlPlanes, sorted.
pub async fn list_names(
    conn: &Conn,
    apis: &ServerApis,
    ns: Option<&str>,
    selector: Option<&str>,
) -> Result<Vec<(String, String)>, Error> {
    let mut out = Vec::new();
    if let Some(kcp_ar) = apis.kamaji_control_plane() {
        for k in list(conn, &kcp_ar, ns, selector).await? {
            out.push((
                k.metadata.namespace.clone().unwrap_or_default(),
                k.metadata.name.clone().unwrap_or_default(),
            ));
        }
    }
    for t in list(conn, &tcp_resource(apis)?, ns, selector).await? {
        if !owned_by_kcp(&t) {
            out.push((
                t.metadata.namespace.clone().unwrap_or_default(),
                t.metadata.name.clone().unwrap_or_default(),
            ));
        }
    }
    out.sort();
    Ok(out)
}

/// A control plane: the KamajiControlPlane (absent for a standalone TenantControlPlane) and its
/// TenantControlPlane (absent until the reconciler creates it).
#[derive(Clone, Debug)]
pub struct ControlPlane {
    pub namespace: String,
    pub name: String,
    pub kcp: Option<Value>,
    pub tcp: Option<Value>,
}

impl ControlPlane {
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
                        .is_some_and(|a| kcore::groups::in_group(a, kcore::groups::CAPI_GROUP))
            })
            .and_then(|o| o["name"].as_str())
            .map(str::to_string)
    }
    /// The cluster's name: the owning Cluster's, else the control plane's own.
    pub fn cluster_or_own_name(&self) -> String {
        self.cluster_name().unwrap_or_else(|| self.name.clone())
    }
    /// The objects of `ar` labelled with the cluster's name, in the control plane's namespace.
    pub async fn cluster_objects(
        &self,
        conn: &Conn,
        ar: &ApiResource,
    ) -> Result<Vec<Value>, Error> {
        let selector = format!("{CLUSTER_NAME_LABEL}={}", self.cluster_or_own_name());
        kclient::api::list_values(conn, ar, Some(&self.namespace), Some(&selector)).await
    }
    /// The KamajiControlPlane, or the refusal a standalone TenantControlPlane gets from the
    /// verbs that change one (scale, upgrade).
    pub fn require_kcp(&self) -> Result<Value, Error> {
        self.kcp.clone().ok_or_else(|| Error::Other {
            message: format!("{} is a standalone TenantControlPlane, not a KamajiControlPlane", self.name),
            hint: Some("scale, upgrade and delete act on KamajiControlPlanes; use kubectl edit tcp for a standalone one".into()),
        })
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
pub async fn resolve(conn: &Conn, apis: &ServerApis, name: &str) -> Result<ControlPlane, Error> {
    kcore::names::check_object_name("KamajiControlPlane", name)?;
    let ns = conn.namespace.clone();
    let tcp_ar = tcp_resource(apis)?;
    let tcps = list(conn, &tcp_ar, Some(&ns), None).await?;
    if let Some(kcp_ar) = apis.kamaji_control_plane()
        && let Some(kcp) = get_opt(conn, &kcp_ar, Some(&ns), name).await?
    {
        let kcp = object_json(&kcp);
        let tcp = tcp_of(&kcp, &tcps).map(object_json);
        return Ok(ControlPlane {
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
        return Ok(ControlPlane {
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
            kclient::api::list_names(conn, &kcp_ar, Some(&ns))
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
        suggestions: kcore::text::closest_names(name, names.iter().map(String::as_str)),
    })
}
