//! `kubectl capi delete CLUSTER`: tear a cluster down the way the BCM runbook does by hand, in one
//! command. It shows what goes (the cluster, its control plane, infrastructure, deployments,
//! machines and the BYOH hosts that will be released), asks on a terminal (`--yes` otherwise),
//! deletes the Cluster object only and lets Cluster API cascade. `--wait` follows the teardown
//! until every machine is gone and every host is back in the pool, and otherwise names what is
//! stuck: hosts still Releasing (their agent has not cleaned up) and objects held by finalizers.
//! It removes the context `kubeconfig --merge` added (`<cluster>-admin@<cluster>`, clusterctl's
//! convention) and, with `--cleanup-bootstrap-kubeconfigs`, the BootstrapKubeconfigs of hosts
//! that registered and no longer serve another cluster.

use std::io::IsTerminal;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use clap::Args as ClapArgs;
use kube::api::DeleteParams;
use kube::discovery::ApiResource;
use serde_json::Value;
use shared::cli::KubeFlags;
use shared::discovery::{INFRASTRUCTURE_GROUP, fields};
use shared::error::{Error, Op};
use shared::plan::hosts::{HostState, Inventory};

use crate::day2::{CLUSTER_NAME_LABEL, DryRun, Target, display_name, name_of};

#[derive(ClapArgs, Clone, Debug)]
#[command(after_help = "Examples:
  kubectl capi delete prod                 # shows what goes, asks
  kubectl capi delete prod --yes --wait    # for scripts: no question, wait until the hosts are free")]
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
    #[arg(long, value_name = "DURATION", default_value = "10m", value_parser = shared::cli::parse_duration)]
    pub timeout: Duration,
    /// Also delete the BootstrapKubeconfigs of registered hosts no other cluster uses
    #[arg(long)]
    pub cleanup_bootstrap_kubeconfigs: bool,
    /// Only print (client) or validate on the server (server) what would be deleted
    #[arg(long, value_enum, value_name = "MODE", num_args = 0..=1, default_value = "none", default_missing_value = "client")]
    pub dry_run: DryRun,
    #[command(flatten)]
    pub kube: KubeFlags,
}

/// The kubeconfig context `kubeconfig --merge` adds for a cluster (clusterctl's convention).
pub fn context_name(cluster: &str) -> String {
    format!("{cluster}-admin@{cluster}")
}

/// A host of the cluster: name, namespace, state.
struct HostOf {
    name: String,
    namespace: String,
    state: HostState,
}

/// Hosts claimed by machines of `t` (by the cluster-name label, in the cluster's namespace).
async fn hosts_of(t: &Target) -> Result<Option<Vec<HostOf>>, Error> {
    let Some(host_ar) = t.apis.byo_host() else {
        return Ok(None);
    };
    let [hosts, bms, machines, clusters] = crate::scale::inventory_lists(t, &host_ar).await?;
    let inv = Inventory::build(&hosts, &bms, &machines, &clusters, None);
    let prefix = format!("{}/", t.namespace);
    let mut out: Vec<HostOf> = inv
        .rows()
        .into_iter()
        .filter(|r| r.cluster.as_deref() == Some(t.name.as_str()))
        .filter(|r| {
            r.byo_machine
                .as_deref()
                .is_none_or(|b| b.starts_with(&prefix))
        })
        .map(|r| HostOf {
            name: r.name,
            namespace: r.namespace,
            state: r.state,
        })
        .collect();
    out.sort_by(|a, b| a.name.cmp(&b.name));
    Ok(Some(out))
}

fn names(v: &[Value]) -> String {
    v.iter().map(name_of).collect::<Vec<_>>().join(", ")
}

/// The kubeconfig files to look for the merged context in.
fn kubeconfig_files(kube: &KubeFlags) -> Vec<PathBuf> {
    if let Some(p) = &kube.kubeconfig {
        return vec![p.clone()];
    }
    if let Some(v) = std::env::var_os("KUBECONFIG")
        && std::env::split_paths(&v).any(|p| !p.as_os_str().is_empty())
    {
        return std::env::split_paths(&v)
            .filter(|p| !p.as_os_str().is_empty() && p.exists())
            .collect();
    }
    std::env::var_os("HOME")
        .map(|h| vec![PathBuf::from(h).join(".kube").join("config")])
        .unwrap_or_default()
}

/// Removes `context` from a kubeconfig document, with its cluster and user when no other context
/// uses them. Returns whether it was there and whether it was the current context.
pub fn remove_context(doc: &mut Value, context: &str) -> (bool, bool) {
    let Some(contexts) = doc.get_mut("contexts").and_then(Value::as_array_mut) else {
        return (false, false);
    };
    let Some(i) = contexts.iter().position(|c| c["name"] == context) else {
        return (false, false);
    };
    let removed = contexts.remove(i);
    let used = |key: &str, name: &Value, contexts: &[Value]| {
        contexts.iter().any(|c| &c["context"][key] == name)
    };
    let remaining = contexts.clone();
    for (list, key) in [("clusters", "cluster"), ("users", "user")] {
        let name = removed["context"][key].clone();
        if name.is_null() || used(key, &name, &remaining) {
            continue;
        }
        if let Some(items) = doc.get_mut(list).and_then(Value::as_array_mut) {
            items.retain(|x| x["name"] != name);
        }
    }
    let was_current = doc["current-context"] == context;
    if was_current && let Some(m) = doc.as_object_mut() {
        m.insert("current-context".into(), Value::String(String::new()));
    }
    (true, was_current)
}

/// Writes `text` next to `path` and renames it over `path` (mode 0600).
fn write_atomic(path: &Path, text: &str) -> Result<(), Error> {
    use std::io::Write;
    use std::os::unix::fs::OpenOptionsExt;
    let dir = path
        .parent()
        .filter(|p| !p.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    let tmp = dir.join(format!(
        ".{}.tmp-{}",
        path.file_name()
            .map(|f| f.to_string_lossy().to_string())
            .unwrap_or_else(|| "kubeconfig".into()),
        std::process::id()
    ));
    let res = (|| {
        let mut f = std::fs::OpenOptions::new()
            .create(true)
            .write(true)
            .truncate(true)
            .mode(0o600)
            .open(&tmp)?;
        f.write_all(text.as_bytes())?;
        f.sync_all()?;
        std::fs::rename(&tmp, path)
    })();
    res.map_err(|e| {
        let _ = std::fs::remove_file(&tmp);
        Error::Other {
            message: format!("cannot write {}: {e}", path.display()),
            hint: Some("check the path and its permissions".into()),
        }
    })
}

/// Removes the cluster's merged context from the kubeconfig files that hold it.
fn remove_merged_context(kube: &KubeFlags, cluster: &str) -> Result<(), Error> {
    let ctx = context_name(cluster);
    for path in kubeconfig_files(kube) {
        let Ok(text) = std::fs::read_to_string(&path) else {
            continue;
        };
        let Ok(mut doc) = serde_saphyr::from_str::<Value>(&text) else {
            shared::render::warn(&format!(
                "{} is not valid YAML; context {ctx} was not removed from it",
                path.display()
            ));
            continue;
        };
        let (found, was_current) = remove_context(&mut doc, &ctx);
        if !found {
            continue;
        }
        write_atomic(&path, &shared::render::to_yaml(&doc)?)?;
        shared::render::line(&format!("deleted context {ctx} from {}", path.display()));
        if was_current {
            shared::render::warn(&format!(
                "{ctx} was the current context; pick another with kubectl config use-context"
            ));
        }
    }
    Ok(())
}

/// Objects of the cluster that are being deleted but held by finalizers: `(what, finalizers)`.
async fn stuck_objects(t: &Target) -> Result<Vec<(String, Vec<String>)>, Error> {
    let mut kinds: Vec<ApiResource> = Vec::new();
    for k in ["Cluster", "MachineDeployment", "MachineSet", "Machine"] {
        if let Ok(ar) = t.core(k) {
            kinds.push(ar);
        }
    }
    for (group, kind) in [
        (INFRASTRUCTURE_GROUP, "ByoMachine"),
        (INFRASTRUCTURE_GROUP, "ByoCluster"),
        (shared::discovery::BOOTSTRAP_GROUP, "KubeadmConfig"),
        (shared::discovery::CONTROLPLANE_GROUP, "KubeadmControlPlane"),
        (shared::discovery::CONTROLPLANE_GROUP, "KamajiControlPlane"),
    ] {
        if let Some(ar) = t.apis.provider_kind(group, kind) {
            kinds.push(ar);
        }
    }
    let mut out = Vec::new();
    for ar in &kinds {
        let items = if ar.kind == "Cluster" {
            t.get_opt(ar, &t.name).await?.into_iter().collect()
        } else {
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
            v
        };
        for o in items {
            let deleting = o.pointer("/metadata/deletionTimestamp").is_some();
            let finalizers: Vec<String> = o
                .pointer("/metadata/finalizers")
                .and_then(Value::as_array)
                .map(|a| {
                    a.iter()
                        .filter_map(Value::as_str)
                        .map(str::to_string)
                        .collect()
                })
                .unwrap_or_default();
            if deleting && !finalizers.is_empty() {
                out.push((format!("{} {}", ar.kind, name_of(&o)), finalizers));
            }
        }
    }
    Ok(out)
}

/// Asks on the terminal; anything but y/yes is no.
fn confirm(question: &str) -> Result<bool, Error> {
    shared::render::info(&format!("{question} [y/N]"));
    let mut answer = String::new();
    std::io::stdin()
        .read_line(&mut answer)
        .map_err(|e| Error::other(format!("cannot read the answer: {e}")))?;
    Ok(matches!(
        answer.trim().to_ascii_lowercase().as_str(),
        "y" | "yes"
    ))
}

pub async fn run(args: &Args) -> Result<(), Error> {
    let t = Target::load(&args.kube, &args.cluster).await?;
    let cp = t.control_plane().await?;
    let mds = t.machine_deployments().await?;
    let machines = t.machines().await?;
    let hosts = hosts_of(&t).await?;

    // What goes.
    let mut s = format!(
        "Deleting cluster {}/{} deletes (Cluster API cascades from the Cluster):\n",
        t.namespace, t.name
    );
    s.push_str(&format!("  Cluster:            {}\n", t.name));
    if let Some((ar, v)) = &cp {
        let r = fields::replicas(v);
        s.push_str(&format!(
            "  Control plane:      {} {}{}\n",
            ar.kind,
            name_of(v),
            r.desired
                .map(|n| format!(" ({n} replicas)"))
                .unwrap_or_default()
        ));
    }
    if let Some(r) = fields::cluster_infrastructure_ref(&t.cluster) {
        s.push_str(&format!("  Infrastructure:     {} {}\n", r.kind, r.name));
    }
    if !mds.is_empty() {
        s.push_str(&format!(
            "  MachineDeployments: {} ({})\n",
            mds.len(),
            names(&mds)
        ));
    }
    s.push_str(&format!(
        "  Machines:           {}{}\n",
        machines.len(),
        if machines.is_empty() {
            String::new()
        } else {
            format!(" ({})", names(&machines))
        }
    ));
    if let Some(h) = &hosts {
        let list: Vec<&str> = h.iter().map(|h| h.name.as_str()).collect();
        s.push_str(&format!(
            "  Hosts released:     {}{}\n",
            list.len(),
            if list.is_empty() {
                String::new()
            } else {
                format!(" ({})", list.join(", "))
            }
        ));
    }
    s.push_str(&format!(
        "  Kubeconfig context: {} (if kubeconfig --merge added it)\n",
        context_name(&t.name)
    ));
    shared::render::raw(s.as_bytes());

    if !args.yes && !args.dry_run.is_dry() {
        if !std::io::stdin().is_terminal() {
            return Err(Error::Usage {
                message: format!(
                    "refusing to delete cluster {} without confirmation: stdin is not a terminal",
                    t.name
                ),
                hint: Some("pass --yes to delete without asking".into()),
            });
        }
        if !confirm(&format!("Delete cluster {}/{}?", t.namespace, t.name))? {
            shared::render::line("cancelled; nothing was deleted");
            return Ok(());
        }
    }

    let shown = display_name(&t.cluster_ar.kind, &t.cluster_ar.api_version, &t.name);
    if args.dry_run != DryRun::Client {
        let dp = DeleteParams {
            dry_run: args.dry_run == DryRun::Server,
            ..Default::default()
        };
        let op = Op::on("delete", &t.cluster_ar)
            .in_namespace(Some(&t.namespace))
            .named(&t.name);
        t.api(&t.cluster_ar)
            .delete(&t.name, &dp)
            .await
            .map_err(|e| t.conn.error(e, &op))?;
    }
    shared::render::line(&format!("{shown} deleted{}", args.dry_run.suffix()));
    if args.dry_run.is_dry() {
        return Ok(());
    }
    remove_merged_context(&args.kube, &t.name)?;

    let result = if args.wait {
        wait_gone(&t, args.timeout).await
    } else {
        Ok(())
    };
    if args.cleanup_bootstrap_kubeconfigs {
        cleanup_bootstrap_kubeconfigs(&t).await?;
    }
    result
}

/// Follows the teardown; on timeout names the hosts still Releasing and the stuck objects.
async fn wait_gone(t: &Target, timeout: Duration) -> Result<(), Error> {
    let what = format!("waiting for cluster {} to be torn down", t.name);
    let mut progress = shared::render::Progress::spinner(&what);
    let deadline = Instant::now() + timeout;
    let machine_ar = t.core("Machine")?;
    loop {
        let cluster_left = t.get_opt(&t.cluster_ar, &t.name).await?.is_some();
        let machines = t.list_of_cluster(&machine_ar).await?.len();
        let hosts = hosts_of(t).await?.unwrap_or_default();
        if !cluster_left && machines == 0 && hosts.is_empty() {
            progress.clear();
            shared::render::line(&format!(
                "cluster {} is gone; its machines are deleted and its hosts released",
                t.name
            ));
            return Ok(());
        }
        let releasing = hosts
            .iter()
            .filter(|h| h.state == HostState::Releasing)
            .count();
        progress.set_message(&format!(
            "{what}: {machines} machines, {} hosts claimed, {releasing} releasing{}",
            hosts.len(),
            if cluster_left { "" } else { "; Cluster gone" }
        ));
        if Instant::now() >= deadline {
            progress.clear();
            return Err(stuck_report(t, &hosts, timeout).await?);
        }
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
}

async fn stuck_report(t: &Target, hosts: &[HostOf], timeout: Duration) -> Result<Error, Error> {
    let stuck = stuck_objects(t).await?;
    let releasing: Vec<&HostOf> = hosts
        .iter()
        .filter(|h| h.state == HostState::Releasing)
        .collect();
    let mut s = String::new();
    if !releasing.is_empty() {
        s.push_str("Hosts still Releasing (the host agent has not cleaned up; a ByoHost cannot be deleted while a machine is referenced):\n");
        for h in &releasing {
            s.push_str(&format!("  {}/{}\n", h.namespace, h.name));
        }
    }
    let other: Vec<&HostOf> = hosts
        .iter()
        .filter(|h| h.state != HostState::Releasing)
        .collect();
    if !other.is_empty() {
        s.push_str("Hosts still claimed:\n");
        for h in &other {
            s.push_str(&format!("  {}/{} ({})\n", h.namespace, h.name, h.state));
        }
    }
    if !stuck.is_empty() {
        s.push_str("Objects stuck on finalizers:\n");
        for (what, f) in &stuck {
            s.push_str(&format!("  {what}: {}\n", f.join(", ")));
        }
    }
    shared::render::raw(s.as_bytes());
    let mut parts = Vec::new();
    if !releasing.is_empty() {
        parts.push(format!(
            "{} host{} still Releasing ({})",
            releasing.len(),
            if releasing.len() == 1 { "" } else { "s" },
            releasing
                .iter()
                .map(|h| h.name.as_str())
                .collect::<Vec<_>>()
                .join(", ")
        ));
    }
    if !stuck.is_empty() {
        parts.push(format!("{} objects stuck on finalizers", stuck.len()));
    }
    if parts.is_empty() {
        parts.push("still deleting".into());
    }
    Ok(Error::Other {
        message: format!(
            "cluster {} is not torn down after {}: {}",
            t.name,
            shared::error::human_duration(timeout),
            parts.join("; ")
        ),
        hint: Some(if releasing.is_empty() {
            "check the controllers' logs; run the command again with --wait to keep following"
                .into()
        } else {
            "start the BYOH host agent on those hosts so it can clean up (kubeadm reset), then run the command again with --wait".into()
        }),
    })
}

/// The host a BootstrapKubeconfig was made for: `<host>` or `...-<host>` for a registered host.
fn bootstrap_host<'a>(name: &str, hosts: &'a [Value]) -> Option<&'a Value> {
    hosts.iter().find(|h| {
        let hn = name_of(h);
        !hn.is_empty() && (name == hn || name.ends_with(&format!("-{hn}")))
    })
}

async fn cleanup_bootstrap_kubeconfigs(t: &Target) -> Result<(), Error> {
    let Some(bk_ar) = t
        .apis
        .provider_kind(INFRASTRUCTURE_GROUP, "BootstrapKubeconfig")
    else {
        shared::render::info("no BootstrapKubeconfig API on this cluster; nothing to clean up");
        return Ok(());
    };
    let Some(host_ar) = t.apis.byo_host() else {
        return Ok(());
    };
    let hosts = t.list_all(&host_ar, None).await?;
    let bks = t.list_all(&bk_ar, Some(&t.namespace)).await?;
    let (mut deleted, mut kept) = (0, Vec::new());
    for bk in &bks {
        let name = name_of(bk);
        let other_cluster = bootstrap_host(name, &hosts).and_then(|h| {
            h.pointer(&format!(
                "/metadata/labels/{}",
                CLUSTER_NAME_LABEL.replace('/', "~1")
            ))
            .and_then(Value::as_str)
            .filter(|c| *c != t.name)
        });
        match (bootstrap_host(name, &hosts), other_cluster) {
            (Some(_), None) => {
                let op = Op::on("delete", &bk_ar)
                    .in_namespace(Some(&t.namespace))
                    .named(name);
                match t.api(&bk_ar).delete(name, &DeleteParams::default()).await {
                    Ok(_) => {
                        deleted += 1;
                        shared::render::line(&format!(
                            "{} deleted",
                            display_name(&bk_ar.kind, &bk_ar.api_version, name)
                        ));
                    }
                    Err(kube::Error::Api(s)) if s.code == 404 => {}
                    Err(e) => return Err(t.conn.error(e, &op)),
                }
            }
            (Some(_), Some(c)) => kept.push(format!("{name} (its host serves cluster {c})")),
            (None, _) => kept.push(format!("{name} (no registered host by that name)")),
        }
    }
    shared::render::info(&format!(
        "BootstrapKubeconfigs: {deleted} deleted, {} kept{}",
        kept.len(),
        if kept.is_empty() {
            String::new()
        } else {
            format!(": {}", kept.join(", "))
        }
    ));
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn removes_the_merged_context_and_its_unshared_entries() {
        let mut doc = json!({
            "apiVersion": "v1", "kind": "Config", "current-context": "c1-admin@c1",
            "clusters": [{"name": "c1", "cluster": {"server": "https://a"}}, {"name": "mgmt", "cluster": {"server": "https://m"}}],
            "users": [{"name": "c1-admin", "user": {}}, {"name": "me", "user": {}}],
            "contexts": [{"name": "c1-admin@c1", "context": {"cluster": "c1", "user": "c1-admin"}},
                         {"name": "mgmt", "context": {"cluster": "mgmt", "user": "me"}}]
        });
        assert_eq!(remove_context(&mut doc, "c1-admin@c1"), (true, true));
        assert_eq!(doc["contexts"].as_array().unwrap().len(), 1);
        assert_eq!(
            doc["clusters"],
            json!([{"name": "mgmt", "cluster": {"server": "https://m"}}])
        );
        assert_eq!(doc["users"], json!([{"name": "me", "user": {}}]));
        assert_eq!(doc["current-context"], "");
        assert_eq!(remove_context(&mut doc, "c1-admin@c1"), (false, false));
        // A user shared with another context stays.
        let mut doc = json!({
            "contexts": [{"name": "c2-admin@c2", "context": {"cluster": "c2", "user": "shared"}},
                         {"name": "x", "context": {"cluster": "x", "user": "shared"}}],
            "users": [{"name": "shared"}], "clusters": [{"name": "c2"}, {"name": "x"}]
        });
        assert_eq!(remove_context(&mut doc, "c2-admin@c2"), (true, false));
        assert_eq!(doc["users"].as_array().unwrap().len(), 1);
        assert_eq!(doc["clusters"], json!([{"name": "x"}]));
    }

    #[test]
    fn bootstrap_kubeconfigs_are_matched_to_hosts_by_name() {
        let hosts = vec![
            json!({"metadata": {"name": "node001"}}),
            json!({"metadata": {"name": "node01"}}),
        ];
        assert_eq!(
            bootstrap_host("bootstrap-kubeconfig-node001", &hosts).map(name_of),
            Some("node001")
        );
        assert_eq!(
            bootstrap_host("node01", &hosts).map(name_of),
            Some("node01")
        );
        assert!(bootstrap_host("bootstrap-kubeconfig-node002", &hosts).is_none());
    }
}
