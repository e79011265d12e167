//! `kubectl capi delete CLUSTER`: tear a cluster down the way the BCM runbook does by hand, in one
//! command. It shows what goes (the cluster, its control plane, infrastructure, deployments,
//! machines and the BYOH hosts that will be released), asks on a terminal (`--yes` otherwise),
//! and runs the teardown `kubectl kamaji delete` runs too (`kclient::teardown`): the Cluster
//! goes and Cluster API cascades; the templates (and `kamaji create`'s addons) only this
//! cluster used are deleted after it; templates another cluster uses are released from the
//! Cluster's ownership and kept. `--wait` follows the teardown
//! until every machine is gone and every host is back in the pool, and otherwise names what is
//! stuck: hosts still Releasing (their agent has not cleaned up) and objects held by finalizers.
//! It removes the context `kubeconfig --merge` added (`<cluster>-admin@<cluster>`, the name CAPI
//! gives it in `<cluster>-kubeconfig`) and, with `--cleanup-bootstrap-kubeconfigs`, the
//! BootstrapKubeconfigs no host needs any more. The preview, the progress report and the
//! BootstrapKubeconfig rule are `kcore::plan::teardown`.

use std::path::PathBuf;
use std::time::Duration;

use clap::Args as ClapArgs;
use cli::{DryRun, DryRunFlag, KubeFlags};
use kclient::error::Error;
use kclient::render::Poll;
use kclient::teardown;
use kcore::fields;
use kcore::groups::INFRASTRUCTURE_GROUP;
use kcore::plan::teardown as plan;
use kube::discovery::ApiResource;
use serde_json::Value;

use crate::common::cluster::ClusterHandle;
use crate::common::host_pool::{HostLists, inventory_lists};
use crate::common::names::{display_name, name_of};
use crate::common::writes::FIELD_MANAGER;

#[derive(ClapArgs, Clone, Debug)]
#[command(after_help = "Examples:
  kubectl capi delete prod                 # shows what goes, asks
  kubectl capi delete prod --yes --wait    # for scripts: no question, wait until the hosts are free")]
#[command(mut_arg("dry-run", |a| a.help("Only print (client) or validate on the server (server) what would be deleted")))]
pub struct Args {
    /// The cluster
    #[arg(value_name = "CLUSTER")]
    pub cluster: String,
    /// Do not ask (required when stdin is not a terminal)
    #[arg(short = 'y', long)]
    pub yes: bool,
    /// Wait until every machine is gone and every host released; report what is stuck
    #[arg(long)]
    pub wait: bool,
    /// How long --wait waits
    #[arg(long, value_name = "DURATION", default_value = "10m", value_parser = cli::parse_duration)]
    pub timeout: Duration,
    /// Also delete the BootstrapKubeconfigs of registered hosts no other cluster uses
    #[arg(long)]
    pub cleanup_bootstrap_kubeconfigs: bool,
    #[command(flatten)]
    pub dry_run: DryRunFlag,
    #[command(flatten)]
    pub kube: KubeFlags,
}

/// The kubeconfig context `kubeconfig --merge` adds for a cluster (clusterctl's convention).
pub fn context_name(cluster: &str) -> String {
    format!("{cluster}-admin@{cluster}")
}

/// The BYOH lists (hosts, ByoMachines, Machines, Clusters), when BYOH is installed.
async fn byoh_lists(t: &ClusterHandle) -> Result<Option<HostLists>, Error> {
    match t.apis.byo_host() {
        Some(host_ar) => Ok(Some(inventory_lists(t, &host_ar).await?)),
        None => Ok(None),
    }
}

/// The kubeconfig files to look for the merged context in.
/// `--kubeconfig`, and where `kubeconfig --merge` writes by default (the files of KUBECONFIG,
/// else `~/.kube/config`).
fn kubeconfig_files(kube: &KubeFlags) -> Vec<PathBuf> {
    let mut out: Vec<PathBuf> = kube.kubeconfig.iter().cloned().collect();
    match std::env::var_os("KUBECONFIG") {
        Some(v) if std::env::split_paths(&v).any(|p| !p.as_os_str().is_empty()) => out
            .extend(std::env::split_paths(&v).filter(|p| !p.as_os_str().is_empty() && p.exists())),
        _ => out.extend(
            std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".kube").join("config")),
        ),
    }
    out.dedup();
    out
}

/// What `kubeconfig --merge` added for this cluster: the API servers and user credentials of its kubeconfig
/// Secret (what `kubeconfig --merge` copied), and its control-plane endpoint. Read before the
/// teardown deletes the Secret.
async fn cluster_servers(t: &ClusterHandle) -> kclient::kubeconfig::Added {
    let mut out = kclient::kubeconfig::Added::default();
    let ep = |k: &str| fields::at(&t.cluster, &["spec", "controlPlaneEndpoint", k]).cloned();
    if let (Some(host), Some(port)) = (ep("host"), ep("port"))
        && let Some(host) = host.as_str().filter(|h| !h.is_empty())
    {
        out.servers.push(format!("https://{host}:{port}"));
    }
    let secrets = kube::api::ApiResource::erase::<k8s_openapi::api::core::v1::Secret>(&());
    let name = format!("{}-kubeconfig", t.name);
    if let Ok(Some(secret)) = t.get_opt(&secrets, &name).await
        && let Some(text) = fields::at(&secret, &["data", "value"])
            .and_then(Value::as_str)
            .and_then(|b| {
                base64::Engine::decode(&base64::engine::general_purpose::STANDARD, b).ok()
            })
            .and_then(|b| String::from_utf8(b).ok())
        && let Ok(kc) = kclient::kubeconfig::parse(&text, "the kubeconfig Secret")
    {
        for c in kc["clusters"].as_array().into_iter().flatten() {
            if let Some(server) = c["cluster"]["server"].as_str() {
                out.servers.push(server.to_string());
            }
        }
        out.users = kc["users"]
            .as_array()
            .into_iter()
            .flatten()
            .map(|u| u["user"].clone())
            .collect();
    }
    out
}

/// Removes the cluster's merged context from the kubeconfig files that hold it, when it points
/// at one of the cluster's servers with its credentials; a context of the same name that does not is someone
/// else's and stays.
fn remove_merged_context(
    kube: &KubeFlags,
    cluster: &str,
    added: &kclient::kubeconfig::Added,
) -> Result<(), Error> {
    use kclient::kubeconfig::ContextRemoval;
    let ctx = context_name(cluster);
    for path in kubeconfig_files(kube) {
        let was_current = match kclient::kubeconfig::remove_context_from_file(&path, &ctx, added) {
            Ok(ContextRemoval::Removed { was_current }) => was_current,
            Ok(ContextRemoval::Absent) => continue,
            Ok(ContextRemoval::NotOurs) => {
                kclient::render::warn(&format!(
                    "kept context {ctx} in {}: its server or credentials are not cluster {cluster}'s",
                    path.display()
                ));
                continue;
            }
            Err(e) => {
                kclient::render::warn(&format!(
                    "context {ctx} was not removed from {}: {e}",
                    path.display()
                ));
                continue;
            }
        };
        kclient::render::line(&format!("deleted context {ctx} from {}", path.display()));
        if was_current {
            kclient::render::warn(&format!(
                "{ctx} was the current context; pick another with kubectl config use-context"
            ));
        }
    }
    Ok(())
}

/// The cluster's objects still present: the Cluster, its control plane and infrastructure, and
/// everything labelled with its name (deployments, sets, machines, infra machines, configs).
async fn remaining_objects(t: &ClusterHandle) -> Result<Vec<Value>, Error> {
    let mut kinds: Vec<ApiResource> = Vec::new();
    for k in ["Cluster", "MachineDeployment", "MachineSet", "Machine"] {
        if let Ok(ar) = t.core(k) {
            kinds.push(ar);
        }
    }
    for (group, kind) in [
        (INFRASTRUCTURE_GROUP, "ByoMachine"),
        (INFRASTRUCTURE_GROUP, "ByoCluster"),
        (kcore::groups::BOOTSTRAP_GROUP, "KubeadmConfig"),
        (kcore::groups::CONTROLPLANE_GROUP, "KubeadmControlPlane"),
        (kcore::groups::CONTROLPLANE_GROUP, "KamajiControlPlane"),
    ] {
        if let Some(ar) = t.apis.provider_kind(group, kind) {
            kinds.push(ar);
        }
    }
    let mut out = Vec::new();
    for ar in &kinds {
        if ar.kind == "Cluster" {
            out.extend(t.get_opt(ar, &t.name).await?);
            continue;
        }
        let mut v = t.list_of_cluster(ar).await?;
        // Providers do not always label their cluster-level objects.
        if let Some(r) = fields::cluster_control_plane_ref(&t.cluster)
            .into_iter()
            .chain(fields::cluster_infrastructure_ref(&t.cluster))
            .find(|r| r.kind == ar.kind)
            && !v.iter().any(|o| name_of(o) == r.name)
            && let Some(o) = t.get_opt(ar, &r.name).await?
        {
            v.push(o);
        }
        out.extend(v);
    }
    Ok(out)
}

/// Where the teardown stands: the cluster's objects, and what else the teardown plan waits
/// for (templates, addons, what Kamaji's finalizers hold), each once.
async fn progress(
    t: &ClusterHandle,
    td: &teardown::Teardown,
) -> Result<plan::DeleteProgress, Error> {
    let mut remaining = remaining_objects(t).await?;
    for o in teardown::present(&t.conn, td).await? {
        let same =
            |r: &Value| kcore::json::kind(r) == kcore::json::kind(&o) && name_of(r) == name_of(&o);
        if !remaining.iter().any(same) {
            remaining.push(o);
        }
    }
    let lists = byoh_lists(t).await?;
    Ok(match &lists {
        Some(lists) => {
            let inv = lists.inventory(None);
            plan::progress(
                &t.namespace,
                &t.name,
                &remaining,
                &lists.hosts,
                Some(&inv),
                Some(jiff::Timestamp::now()),
            )
        }
        None => plan::progress(
            &t.namespace,
            &t.name,
            &remaining,
            &[],
            None,
            Some(jiff::Timestamp::now()),
        ),
    })
}

pub async fn run(args: &Args) -> Result<(), Error> {
    let t = ClusterHandle::load(&args.kube, &args.cluster).await?;
    let cp = t.control_plane().await?;
    let mds = t.machine_deployments().await?;
    let machines = t.machines().await?;
    let lists = byoh_lists(&t).await?;
    let preview = match &lists {
        Some(lists) => {
            let inv = lists.inventory(None);
            plan::preview(&t.cluster, &mds, &machines, Some(&inv))
        }
        None => plan::preview(&t.cluster, &mds, &machines, None),
    };
    let td = teardown::plan(&t.conn, &t.apis, &t.namespace, &t.name, Vec::new()).await?;
    let replicas = cp.as_ref().and_then(|(_, v)| fields::replicas(v).desired);
    let text = preview_text(&preview, replicas, lists.is_some(), &td);
    kclient::render::raw(text.as_bytes());
    if !args.yes && !args.dry_run.is_dry() && !confirmed(&t)? {
        kclient::render::line("cancelled; nothing was deleted");
        return Ok(());
    }
    let added = cluster_servers(&t).await;
    execute(args, &t, &td).await?;
    if args.dry_run.is_dry() {
        return Ok(());
    }
    remove_merged_context(&args.kube, &t.name, &added)?;
    let result = if args.wait {
        wait_gone(&t, &td, args.timeout).await
    } else {
        Ok(())
    };
    if args.cleanup_bootstrap_kubeconfigs {
        cleanup_bootstrap_kubeconfigs(&t).await?;
    }
    result
}

/// What goes, as the question's preamble. `replicas` are the control plane's; `byoh` whether
/// BYOH is installed (then released hosts are listed).
fn preview_text(
    preview: &plan::DeletePreview,
    replicas: Option<i64>,
    byoh: bool,
    td: &teardown::Teardown,
) -> String {
    let mut s = format!(
        "Deleting cluster {}/{} deletes (Cluster API cascades from the Cluster):\n",
        preview.namespace, preview.cluster
    );
    if preview.already_deleting {
        s.push_str("  (the Cluster is already being deleted)\n");
    }
    s.push_str(&format!("  Cluster:            {}\n", preview.cluster));
    if let Some(c) = &preview.control_plane {
        let replicas = replicas
            .map(|n| format!(" ({n} replicas)"))
            .unwrap_or_default();
        s.push_str(&format!(
            "  Control plane:      {}{replicas}\n",
            c.replacen('/', " ", 1)
        ));
    }
    if let Some(i) = &preview.infrastructure {
        s.push_str(&format!(
            "  Infrastructure:     {}\n",
            i.replacen('/', " ", 1)
        ));
    }
    if !preview.machine_deployments.is_empty() {
        s.push_str(&format!(
            "  MachineDeployments: {} ({})\n",
            preview.machine_deployments.len(),
            preview.machine_deployments.join(", ")
        ));
    }
    s.push_str(&format!(
        "  Machines:           {}\n",
        preview.machines.len()
    ));
    for m in &preview.machines {
        s.push_str(&machine_line(m));
    }
    if byoh {
        s.push_str(&format!(
            "  Hosts released:     {}{}\n",
            preview.hosts_to_release.len(),
            if preview.hosts_to_release.is_empty() {
                String::new()
            } else {
                format!(" ({})", preview.hosts_to_release.join(", "))
            }
        ));
    }
    s.push_str(&teardown_text(td));
    s.push_str(&format!(
        "  Kubeconfig context: {} (if kubeconfig --merge added it)\n",
        context_name(&preview.cluster)
    ));
    s
}

/// The preview's lines on what the teardown removes after the Cluster, waits for, and keeps.
fn teardown_text(td: &teardown::Teardown) -> String {
    let mut s = String::new();
    if !td.parts.is_empty() {
        let names: Vec<String> = td
            .parts
            .iter()
            .map(|p| format!("{} {}", p.ar.kind, p.name))
            .collect();
        s.push_str(&format!(
            "  Then, not owned by the Cluster: {}\n",
            names.join(", ")
        ));
    }
    let held: Vec<String> = td
        .cascaded
        .iter()
        .filter(|p| p.ar.kind == "Secret")
        .map(|p| format!("Secret {}", p.name))
        .collect();
    if !held.is_empty() {
        s.push_str(&format!(
            "  Then, once Kamaji lets go: {}\n",
            held.join(", ")
        ));
    }
    for k in &td.kept {
        s.push_str(&format!(
            "  Kept: {} {} (still used by {})\n",
            k.ar.kind, k.name, k.user
        ));
    }
    s
}

/// `    name (role, node n, host h)`.
fn machine_line(m: &plan::MachineToDelete) -> String {
    let mut extra = vec![m.role.clone()];
    if let Some(n) = &m.node {
        extra.push(format!("node {n}"));
    }
    if let Some(h) = &m.host {
        extra.push(format!("host {h}"));
    }
    format!("    {} ({})\n", m.name, extra.join(", "))
}

/// Asks on a terminal; without one, refuses (exit 2) and points at `--yes`.
fn confirmed(t: &ClusterHandle) -> Result<bool, Error> {
    kclient::render::require_terminal(
        &format!("delete cluster {}", t.name),
        "pass --yes to delete without asking".into(),
    )?;
    kclient::render::confirm(&format!("Delete cluster {}/{}?", t.namespace, t.name))
}

/// Runs the teardown, or with `--dry-run=client` only says what it would delete.
async fn execute(args: &Args, t: &ClusterHandle, td: &teardown::Teardown) -> Result<(), Error> {
    let say = |d: &teardown::Part| {
        let shown = display_name(&d.ar.kind, &d.ar.api_version, &d.name);
        kclient::render::line(&format!("{shown} deleted{}", args.dry_run.suffix()));
    };
    if args.dry_run == DryRun::Client {
        td.deleted().for_each(say);
        return Ok(());
    }
    let write = kclient::api::Write {
        manager: FIELD_MANAGER,
        dry_run: args.dry_run.server(),
        force: false,
    };
    teardown::execute(&t.conn, td, write, say).await
}

/// Follows the teardown; on timeout names the hosts still Releasing and the stuck objects.
async fn wait_gone(
    t: &ClusterHandle,
    td: &teardown::Teardown,
    timeout: Duration,
) -> Result<(), Error> {
    let what = format!("waiting for cluster {} to be torn down", t.name);
    // The last progress seen, for the report when the wait times out.
    let last = std::cell::RefCell::new(None);
    let released = std::cell::RefCell::new(Vec::new());
    let write = kclient::api::Write {
        manager: FIELD_MANAGER,
        dry_run: false,
        force: false,
    };
    let waited = kclient::render::wait_until(&what, timeout, Duration::from_secs(1), || async {
        let let_go = teardown::finish_kamaji_release(&t.conn, &t.apis, td, write).await?;
        released.borrow_mut().extend(let_go);
        let p = progress(t, td).await?;
        if p.done {
            return Ok(Poll::Ready(()));
        }
        let machines = p.remaining.iter().filter(|o| o.kind == "Machine").count();
        let msg = format!(
            "{} objects left ({machines} machines), {} hosts not yet released",
            p.remaining.len(),
            p.releasing_hosts.len()
        );
        last.replace(Some(p));
        Ok(Poll::Pending(msg))
    })
    .await;
    teardown::say_released(&released.take());
    match waited {
        Ok(()) => {
            kclient::render::line(&format!(
                "cluster {} is gone; its machines are deleted and its hosts released",
                t.name
            ));
            Ok(())
        }
        Err(e) => match (e, last.take()) {
            (Error::Timeout { .. }, Some(p)) => Err(stuck_report(t, &p, timeout)),
            (e, _) => Err(e),
        },
    }
}

fn stuck_report(t: &ClusterHandle, p: &plan::DeleteProgress, timeout: Duration) -> Error {
    let mut s = String::from("Still there:\n");
    for l in p.report_lines() {
        s.push_str(&format!("  {l}\n"));
    }
    kclient::render::raw(s.as_bytes());
    let stuck = p
        .remaining
        .iter()
        .filter(|o| !o.finalizers.is_empty())
        .count();
    let mut parts = Vec::new();
    if !p.releasing_hosts.is_empty() {
        parts.push(format!(
            "{} host{} still Releasing ({})",
            p.releasing_hosts.len(),
            if p.releasing_hosts.len() == 1 {
                ""
            } else {
                "s"
            },
            p.releasing_hosts
                .iter()
                .map(|h| h.name.as_str())
                .collect::<Vec<_>>()
                .join(", ")
        ));
    }
    if stuck > 0 {
        parts.push(format!("{stuck} objects stuck on finalizers"));
    }
    if parts.is_empty() {
        parts.push("still deleting".into());
    }
    Error::Other {
        message: format!(
            "cluster {} is not torn down after {}: {}",
            t.name,
            kcore::text::human_duration(timeout),
            parts.join("; ")
        ),
        hint: Some(if p.releasing_hosts.is_empty() {
            "check the controllers' logs; run the command again with --wait to keep following"
                .into()
        } else {
            "start the BYOH host agent on those hosts so it can clean up (kubeadm reset), then run the command again with --wait".into()
        }),
    }
}

async fn cleanup_bootstrap_kubeconfigs(t: &ClusterHandle) -> Result<(), Error> {
    let Some(bk_ar) = t
        .apis
        .provider_kind(INFRASTRUCTURE_GROUP, "BootstrapKubeconfig")
    else {
        kclient::render::info("no BootstrapKubeconfig API on this cluster; nothing to clean up");
        return Ok(());
    };
    let hosts = match t.apis.byo_host() {
        Some(ar) => t.list_all(&ar, None).await?,
        None => Vec::new(),
    };
    let bks = t.list_all(&bk_ar, Some(&t.namespace)).await?;
    let names = hosts.iter().map(kcore::json::name).collect();
    let unused = plan::unused_bootstrap_kubeconfigs(&bks, &names, Some(jiff::Timestamp::now()));
    for u in &unused {
        let ns = Some(u.namespace.as_str());
        if kclient::api::delete_if_present(&t.conn, &bk_ar, ns, &u.name, false).await? {
            kclient::render::line(&format!(
                "{} deleted ({})",
                display_name(&bk_ar.kind, &bk_ar.api_version, &u.name),
                u.reason
            ));
        }
    }
    kclient::render::info(&format!(
        "BootstrapKubeconfigs: {} deleted, {} kept (their host has not registered and the token is still valid)",
        unused.len(),
        bks.len() - unused.len()
    ));
    Ok(())
}
