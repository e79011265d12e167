//! `init --upgrade --plan`: what an upgrade of the management cluster changes, before it does:
//! each component from → to, the CRDs whose storage version moves (their objects stay stored at
//! the old one until re-written; `doctor` reports `CrdStoredVersions` until then), and the
//! tenant control planes that roll with it. Nothing is written.

use cli::Conn;
use kclient::error::Error;
use kclient::render;
use kcore::init::plan::{Action, InitStep, storage_changes};
use kcore::init::set::Component;
use serde_json::Value;

pub async fn show(
    conn: &Conn,
    steps: &[InitStep],
    prepared: &[(&'static Component, Vec<Value>)],
) -> Result<(), Error> {
    let mut upgrades = 0;
    for (step, (c, objects)) in steps.iter().zip(prepared) {
        let line = match &step.action {
            Action::Install => format!("{}: install {}", c.id, c.version),
            Action::Reapply => format!("{} {}: unchanged", c.id, c.version),
            Action::Adopt { by, version } => {
                format!("{} {version}: installed by {by}, left as it is", c.id)
            }
            Action::Upgrade { from } => {
                upgrades += 1;
                format!("{}: {from} → {}", c.id, c.version)
            }
        };
        render::line(&line);
        if !matches!(step.action, Action::Upgrade { .. }) {
            continue;
        }
        for change in storage_changes(objects, &on_cluster(conn, objects).await?) {
            render::line(&format!(
                "  CRD {}: storage version {} → {} (objects stay stored at {} until re-written; doctor reports CrdStoredVersions until then)",
                change.crd, change.from, change.to, change.from
            ));
        }
        if c.id == "kamaji" {
            let tenants = tenant_count(conn).await?;
            render::line(&format!(
                "  {tenants} TenantControlPlane(s) will roll: the new Kamaji renders every tenant's Deployment and addons again (a Kamaji upgrade can roll each tenant's CoreDNS: clastix/kamaji#1046)"
            ));
        }
        if c.id == kcore::labels::PROVIDER {
            render::line(
                "  the reconciler's Deployment rolls; KamajiControlPlanes and their tenants are not changed",
            );
        }
    }
    render::line(&format!(
        "{upgrades} component(s) to upgrade; run kubectl capi init --upgrade (with the same --from and --registry) to carry it out"
    ));
    Ok(())
}

/// The cluster's CRDs named among `objects`.
async fn on_cluster(conn: &Conn, objects: &[Value]) -> Result<Vec<Value>, Error> {
    let mut out = Vec::new();
    for o in objects
        .iter()
        .filter(|o| o["kind"] == "CustomResourceDefinition")
    {
        let name = o["metadata"]["name"].as_str().unwrap_or_default();
        if let Some(crd) = kclient::api::crd(conn, name).await? {
            out.push(serde_json::to_value(crd).map_err(|e| Error::other(e.to_string()))?);
        }
    }
    Ok(out)
}

/// How many TenantControlPlanes exist (every namespace).
async fn tenant_count(conn: &Conn) -> Result<usize, Error> {
    let apis = kclient::discovery::ServerApis::discover(conn).await?;
    match apis.tenant_control_plane() {
        Some(ar) => Ok(kclient::api::list(conn, &ar, None, None).await?.len()),
        None => Ok(0),
    }
}
