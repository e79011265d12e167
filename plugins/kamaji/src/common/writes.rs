//! How the verbs write: server-side apply, merge and JSON patches with the field manager
//! `kubectl-kamaji`, and the objects of a new cluster applied in order.

use cli::Conn;
use kclient::discovery::ServerApis;
use kclient::error::Error;
use kcore::fields::object_json;
use kcore::kamaji::create::{self as kamaji, FIELD_MANAGER};
use kube::api::{ApiResource, DynamicObject};
use serde_json::Value;

/// The ApiResource of an object to apply (from its apiVersion and kind); the kind must be
/// served.
fn resource_of(apis: &ServerApis, obj: &Value) -> Result<ApiResource, Error> {
    let av = obj["apiVersion"].as_str().unwrap_or_default();
    let kind = obj["kind"].as_str().unwrap_or_default();
    let (group, version) = kcore::groups::split_api_version(av);
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

/// [`resource_of`], refusing a version the server does not serve (a backup taken where another
/// contract was served).
pub fn served(apis: &ServerApis, obj: &Value) -> Result<ApiResource, Error> {
    let ar = resource_of(apis, obj)?;
    let (group, version) = kcore::groups::split_api_version(&ar.api_version);
    match apis.kind(group, &ar.kind) {
        Some(k) if !k.versions.iter().any(|v| v == version) => Err(Error::Other {
            message: format!(
                "{} {} is not served here (served: {})",
                ar.kind,
                ar.api_version,
                k.versions.join(", ")
            ),
            hint: Some(
                "restore onto a management cluster whose providers serve that version".into(),
            ),
        }),
        _ => Ok(ar),
    }
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
    kclient::api::apply(conn, &ar, obj, write(dry_run, force)).await
}

/// Applies the objects in order; once the Cluster exists, it owns the objects after it.
pub async fn apply_objects(
    conn: &Conn,
    apis: &ServerApis,
    name: &str,
    objects: &[Value],
    server_dry: bool,
    force_conflicts: bool,
) -> Result<Vec<Value>, Error> {
    let mut applied = Vec::new();
    let mut cluster_owner: Option<(String, String)> = None;
    for o in objects {
        let mut o = o.clone();
        if let Some((api_version, uid)) = &cluster_owner {
            kamaji::own_by_cluster(&mut o, api_version, name, uid);
        }
        let r = apply(conn, apis, &o, server_dry, force_conflicts).await?;
        if o["kind"] == "Cluster" {
            cluster_owner = r.metadata.uid.clone().map(|uid| {
                (
                    o["apiVersion"].as_str().unwrap_or_default().to_string(),
                    uid,
                )
            });
        }
        applied.push(object_json(&r));
    }
    Ok(applied)
}

/// A merge patch with field manager `kubectl-kamaji`.
pub async fn merge_patch(
    conn: &Conn,
    ar: &ApiResource,
    ns: &str,
    name: &str,
    patch: &Value,
) -> Result<DynamicObject, Error> {
    kclient::api::merge_patch(conn, ar, ns, name, patch, write(false, false)).await
}

/// A planned JSON patch ([`kcore::plan::ObjectPatch`]) with field manager `kubectl-kamaji`.
pub async fn json_patch(
    conn: &Conn,
    ar: &ApiResource,
    patch: &kcore::plan::ObjectPatch,
) -> Result<(), Error> {
    kclient::api::patch(conn, ar, &patch.namespace, patch, write(false, false)).await
}

fn write(dry_run: bool, force: bool) -> kclient::api::Write<'static> {
    kclient::api::Write {
        manager: FIELD_MANAGER,
        dry_run,
        force,
    }
}

/// A server dry run of creating `obj` with field manager `kubectl-kamaji`: admission (the
/// webhooks included) answers, nothing is stored.
pub async fn create_dry_run(conn: &Conn, ar: &ApiResource, obj: &Value) -> Result<(), Error> {
    kclient::api::create(conn, ar, obj, write(true, false))
        .await
        .map(|_| ())
}
