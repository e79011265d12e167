//! `kubectl capi uninstall`: removes what `kubectl capi init` installed (found by its labels,
//! `kcore::init::uninstall`), in the reverse of install order, after showing it and asking (on a
//! terminal; `--yes` otherwise). Refused while any Cluster or TenantControlPlane exists: their
//! CRDs would take them, and the tenants' data, with them. Components init adopted (installed by
//! clusterctl or by hand) are left, and said so, as is what lives outside the cluster: the hosts'
//! agents and the DataStores' data. When BYOH goes, its hosts go first with what BYOH issued for
//! them outside its namespace (bootstrap token Secrets, agent CSRs), as the seed's teardown
//! orders it, and the commands that stop each host's agent are printed. `kubectl kamaji uninstall --purge` removes the reconciler
//! alone.

use clap::Args as ClapArgs;
use cli::{Conn, DryRun, DryRunFlag, KubeFlags};
use kclient::discovery::ServerApis;
use kclient::error::Error;
use kclient::render;
use kcore::build::byoh::DEFAULT_HOST_PATH;
use kcore::init::set::COMPONENTS;
use kcore::init::uninstall::{KINDS, UninstallStep, removals, selector};
use kcore::json;
use kcore::plan::hosts::removal::on_host;
use kube::api::ApiResource;
use kube::core::GroupVersionKind;

use crate::common::host_removal::HostRemoval;

/// BYOH's component: its hosts go before it does.
const BYOH: &str = "infrastructure-byoh";

#[derive(ClapArgs, Clone, Debug)]
#[command(mut_arg("dry-run", |a| a.help("Only print (client) or validate on the server (server) what would be deleted")))]
pub struct Args {
    /// Do not ask (required when stdin is not a terminal)
    #[arg(short = 'y', long)]
    pub yes: bool,
    #[command(flatten)]
    pub dry_run: DryRunFlag,
    #[command(flatten)]
    pub kube: KubeFlags,
}

fn resource(kind: usize) -> ApiResource {
    let (group, version, kind, plural, _) = KINDS[kind];
    ApiResource::from_gvk_with_plural(&GroupVersionKind::gvk(group, version, kind), plural)
}

pub async fn run(a: &Args) -> Result<(), Error> {
    let conn = a.kube.connect().await?;
    let apis = ServerApis::discover(&conn).await?;
    refuse_while_in_use(&conn, &apis).await?;
    let mut found = Vec::new();
    // Objects already being deleted (a namespace terminating, a CRD waiting for its objects to
    // go) are not deleted again: a re-run says they are still going.
    let mut going: Vec<String> = Vec::new();
    let mut terminating_namespaces: Vec<String> = Vec::new();
    for (i, kind) in KINDS.iter().enumerate() {
        let objs = kclient::api::list(&conn, &resource(i), None, Some(&selector())).await?;
        let objs = objs
            .into_iter()
            .map(|o| serde_json::to_value(o).map_err(|e| Error::other(e.to_string())))
            .collect::<Result<Vec<serde_json::Value>, _>>()?;
        let (terminating, live): (Vec<_>, Vec<_>) = objs
            .into_iter()
            .partition(|o| o["metadata"]["deletionTimestamp"].is_string());
        if kind.2 == "Namespace" {
            terminating_namespaces.extend(
                terminating
                    .iter()
                    .filter_map(|o| o["metadata"]["name"].as_str().map(str::to_string)),
            );
        }
        going.extend(terminating.iter().map(|o| {
            format!(
                "{} {}",
                kind.2.to_lowercase(),
                o["metadata"]["name"].as_str().unwrap_or_default()
            )
        }));
        found.push((i, live));
    }
    let plan = removals(&found, &terminating_namespaces);
    let hosts = if plan.iter().any(|r| r.component == BYOH) {
        host_removals(&conn, &apis).await?
    } else {
        Vec::new()
    };
    if plan.is_empty() {
        if going.is_empty() {
            render::line("nothing kubectl capi init installed is on this cluster");
        } else {
            render::line(&format!(
                "nothing left to delete; {} still being deleted: {}",
                going.len(),
                going.join(", ")
            ));
        }
        return Ok(());
    }
    preview(&plan, &apis, &hosts);
    if a.dry_run.mode == DryRun::Client {
        return Ok(());
    }
    if !a.yes {
        render::require_terminal(
            "uninstall",
            "pass --yes to uninstall without a question".into(),
        )?;
        if !render::confirm("Uninstall these components?")? {
            return Err(Error::other("aborted: nothing was deleted"));
        }
    }
    let dry = a.dry_run.mode == DryRun::Server;
    let suffix = if dry { " (server dry run)" } else { "" };
    // The seed's teardown order (BCM: stop the agents, delete the bootstrap kubeconfigs, then
    // the provider): what BYOH issued outside its namespace and CRDs goes before BYOH does.
    for r in &hosts {
        r.delete(&conn, dry).await?;
    }
    if !hosts.is_empty() {
        render::line(&format!(
            "{} host(s): {} objects deleted{suffix}",
            hosts.len(),
            hosts.iter().map(|r| r.objects.len()).sum::<usize>()
        ));
    }
    for c in COMPONENTS.iter().rev() {
        let mine: Vec<&UninstallStep> = plan.iter().filter(|r| r.component == c.id).collect();
        if mine.is_empty() {
            continue;
        }
        let mut deleted = 0;
        for r in &mine {
            let ar = resource(r.kind);
            if kclient::api::delete_if_present(&conn, &ar, r.namespace.as_deref(), &r.name, dry)
                .await?
            {
                deleted += 1;
            }
        }
        render::line(&format!(
            "{} {}: {deleted} objects deleted{suffix}",
            c.id, c.version
        ));
    }
    if !dry {
        for r in hosts
            .iter()
            .filter(|r| r.objects.iter().any(|o| o.0.kind == "ByoHost"))
        {
            render::line(&on_host(&r.host, DEFAULT_HOST_PATH));
        }
    }
    Ok(())
}

/// Every BYOH host's removal (`hosts remove` for each, without its refusal: no Cluster is left
/// to use one), and the BootstrapKubeconfigs of hosts that never registered.
async fn host_removals(conn: &Conn, apis: &ServerApis) -> Result<Vec<HostRemoval>, Error> {
    let Some(host_ar) = apis.byo_host() else {
        return Ok(Vec::new());
    };
    let bk_ar = apis.provider_kind(kcore::groups::INFRASTRUCTURE_GROUP, "BootstrapKubeconfig");
    let hosts = kclient::api::list_json(conn, &host_ar, None, &Default::default()).await?;
    let mut out = Vec::new();
    for h in &hosts {
        let (ns, name) = (json::namespace(h), json::name(h));
        out.push(HostRemoval::read(conn, Some(&host_ar), bk_ar.as_ref(), ns, name).await?);
    }
    if let Some(bk_ar) = &bk_ar {
        for bk in kclient::api::list_json(conn, bk_ar, None, &Default::default()).await? {
            let (ns, name) = (json::namespace(&bk), json::name(&bk));
            if !out.iter().any(|r| r.host == name) {
                out.push(HostRemoval::read(conn, None, Some(bk_ar), ns, name).await?);
            }
        }
    }
    Ok(out)
}

/// What goes, per component, and what stays.
fn preview(plan: &[UninstallStep], apis: &ServerApis, hosts: &[HostRemoval]) {
    if !hosts.is_empty() {
        render::line(&format!(
            "hosts: {} host(s) first, with what BYOH issued for them: {}",
            hosts.len(),
            hosts
                .iter()
                .map(HostRemoval::shown)
                .collect::<Vec<_>>()
                .join("; ")
        ));
    }
    for c in COMPONENTS.iter().rev() {
        let mine: Vec<&UninstallStep> = plan.iter().filter(|r| r.component == c.id).collect();
        if mine.is_empty() {
            if apis.kind(c.api.0, c.api.1).is_some() {
                render::line(&format!(
                    "{}: left as it is (not installed by kubectl capi init)",
                    c.id
                ));
            }
            continue;
        }
        let crds = mine
            .iter()
            .filter(|r| KINDS[r.kind].2 == "CustomResourceDefinition")
            .count();
        let namespaces: Vec<&str> = mine
            .iter()
            .filter(|r| KINDS[r.kind].2 == "Namespace")
            .map(|r| r.name.as_str())
            .collect();
        render::line(&format!(
            "{} {}: {} objects, {crds} CRDs (their objects with them), namespace {} and all in it",
            c.id,
            c.version,
            mine.len(),
            if namespaces.is_empty() {
                "none".to_string()
            } else {
                namespaces.join(", ")
            }
        ));
    }
    // The etcd of `init --datastore etcd` lives in Kamaji's namespace, so it goes with it; its
    // volumes follow their StorageClass's reclaim policy.
    use kcore::init::etcd::{NAME as ETCD, NAMESPACE as ETCD_NAMESPACE};
    render::line(&format!(
        "Left behind: the BYOH agents on your hosts (stop each there before this runs: started again, one registers its host anew; the commands for each host are printed at the end) and the tenants' keys in each DataStore's etcd (kubectl kamaji datastores lists them before this runs). The etcd of init --datastore etcd goes with namespace {ETCD_NAMESPACE}, its volume claims too (kubectl -n {ETCD_NAMESPACE} get pvc -l app.kubernetes.io/name={ETCD}): their volumes, and the data on them, outlive them only where the StorageClass's reclaimPolicy is Retain."
    ));
}

/// Refuses while Clusters or TenantControlPlanes exist.
async fn refuse_while_in_use(conn: &Conn, apis: &ServerApis) -> Result<(), Error> {
    let mut in_use = Vec::new();
    if let Ok(ar) = apis.cluster() {
        let n = kclient::api::list(conn, &ar, None, None).await?.len();
        if n > 0 {
            in_use.push(format!("{n} Cluster(s)"));
        }
    }
    if let Some(ar) = apis.tenant_control_plane() {
        let n = kclient::api::list(conn, &ar, None, None).await?.len();
        if n > 0 {
            in_use.push(format!("{n} TenantControlPlane(s)"));
        }
    }
    if in_use.is_empty() {
        return Ok(());
    }
    Err(Error::Other {
        message: format!(
            "{} exist; uninstalling would delete them with their CRDs; nothing was deleted",
            in_use.join(" and ")
        ),
        hint: Some(
            "delete them first (kubectl capi list -A; kubectl capi delete NAME --wait)".into(),
        ),
    })
}
