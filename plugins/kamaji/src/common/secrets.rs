//! A control plane's Secrets in the management cluster: reading one's data, and deleting some so
//! that Kamaji re-issues them (how `kubeconfig rotate` and `certificates rotate` rotate).

use std::collections::BTreeMap;

use cli::{Conn, KubeFlags};
use k8s_openapi::api::core::v1::Secret;
use kclient::discovery::ServerApis;
use kclient::error::{Error, Op};
use kclient::render;
use kube::api::Api;

use super::control_plane::{ControlPlane, resolve};

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

/// What `rotate` asks for: `every` with `--all` (a missing Secret is then skipped), the `named`
/// ones, deduplicated, with `flag` (a missing one is an error), else `neither`; `--all` with
/// `flag` is a usage error.
pub fn rotation<T: Clone + PartialEq>(
    all: bool,
    every: &[T],
    flag: &str,
    named: &[T],
    neither: Result<Vec<T>, Error>,
) -> Result<(Vec<T>, bool), Error> {
    match (all, named.is_empty()) {
        (true, false) => Err(Error::Usage {
            message: format!("--all and {flag} both say what to rotate"),
            hint: Some("pass one of them".into()),
        }),
        (true, true) => Ok((every.to_vec(), false)),
        (false, true) => neither.map(|v| (v, true)),
        (false, false) => {
            let mut named = named.to_vec();
            named.dedup();
            Ok((named, true))
        }
    }
}

/// Rotates the Secrets `<tcp>-<suffix>` of the control plane `name` ([`rotate_secrets`]).
pub async fn rotate_named(
    kube: &KubeFlags,
    name: &str,
    suffixes: &[&str],
    strict: bool,
) -> Result<Vec<String>, Error> {
    let conn = kube.connect().await?;
    let apis = ServerApis::discover(&conn).await?;
    let t = resolve(&conn, &apis, name).await?;
    let names: Vec<String> = suffixes
        .iter()
        .map(|s| format!("{}-{s}", t.tcp_name()))
        .collect();
    rotate_secrets(&conn, &t, &names, strict).await
}

/// Deletes Secrets so that Kamaji re-issues them (what clastix's plugin does,
/// `pkg/commands/rotate_{cert,kubeconfig}.go`, v1.0.0). Missing ones fail when `strict` (and
/// nothing is deleted), else are reported and skipped. Returns the names deleted.
pub async fn rotate_secrets(
    conn: &Conn,
    cp: &ControlPlane,
    names: &[String],
    strict: bool,
) -> Result<Vec<String>, Error> {
    let ar = kube::api::ApiResource::erase::<Secret>(&());
    // Check every Secret first, so a strict run changes nothing when one is missing.
    let mut present = Vec::new();
    for name in names {
        if secret_data(conn, &cp.namespace, name).await?.is_none() {
            if strict {
                return Err(Error::Other {
                    message: format!(
                        "Secret \"{name}\" not found in namespace \"{}\"",
                        cp.namespace
                    ),
                    hint: Some(format!(
                        "Kamaji has not created it; check kubectl kamaji status {}",
                        cp.name
                    )),
                });
            }
            render::info(&format!("secret/{name} not found, skipped"));
            continue;
        }
        present.push(name);
    }
    if present.is_empty() {
        return Err(Error::other("nothing to rotate: none of the Secrets exist"));
    }
    for name in &present {
        // Deleting is the trigger every Kamaji release honours: Kamaji re-issues a missing
        // certificate or kubeconfig Secret on its next reconcile (the Secrets are owned by the
        // TenantControlPlane, so the deletion itself triggers it) and rolls the control plane
        // onto it. The `certs.kamaji.clastix.io/rotate` annotation only exists in newer Kamaji
        // releases; v1.0.0 ignores it (see its `internal/resources/*_certificate.go`).
        kclient::api::delete(conn, &ar, &cp.namespace, name).await?;
        render::line(&format!(
            "secret/{name} deleted: Kamaji re-issues it and rolls the control plane"
        ));
    }
    Ok(present.into_iter().cloned().collect())
}
