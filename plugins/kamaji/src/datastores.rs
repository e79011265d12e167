//! `kubectl kamaji datastores`: Kamaji DataStores, their driver, endpoints, readiness and use;
//! with `--orphans`, the key prefixes of each etcd DataStore that no tenant owns
//! (`kcore::kamaji::orphans`), and with `--prune` their removal after a confirmation.
//!
//! Ready: what Kamaji reports (`status.ready`, where its version has it), else, for an etcd
//! DataStore, whether it answers when dialled from here with the client certificate it names
//! (`common::datastores`); Unknown when its endpoints do not resolve here (in-cluster names) or
//! its driver is not etcd. The endpoints are dialled concurrently, 5 s at most each.

use kclient::discovery::ServerApis;
use kclient::error::Error;
use kclient::render::{Cell, Human, Printer, Render, RowObjects, Table, Tone};
use kcore::fields::object_json;
use kcore::groups::KAMAJI_GROUP;
use serde::Serialize;

use crate::common::age::age;
use crate::common::control_plane;
use crate::common::datastores;
use kcore::kamaji::migrate::{Reach, etcd_prefix};
use kcore::kamaji::orphans::{MAX_PREFIXES, MAX_SIZED_KEYS, Prefix, unowned};

#[derive(clap::Args, Clone, Debug)]
#[command(after_help = "Examples:
  kubectl kamaji datastores
  kubectl kamaji datastores --orphans
  kubectl kamaji datastores --orphans --prune --yes")]
pub struct Args {
    /// List each etcd DataStore's key prefixes that no TenantControlPlane on it owns (a deleted tenant's keys, a migrated one's origin copy), with their key counts
    #[arg(long)]
    pub orphans: bool,
    /// Remove those prefixes, after showing them and asking (--yes without a terminal); prefixes that are not Kamaji's are never removed
    #[arg(long, requires = "orphans")]
    pub prune: bool,
    /// Do not ask before --prune (required when stdin is not a terminal)
    #[arg(short = 'y', long, requires = "prune")]
    pub yes: bool,
    #[command(flatten)]
    pub kube: cli::KubeFlags,
    #[command(flatten)]
    pub output: cli::OutputFlags,
}

/// `--orphans`' rows (`-o json`: `{"items": [{"datastore", "prefix", "keys", "bytes",
/// "bytesExact"}...]}`).
#[derive(Serialize, Clone, Debug)]
pub struct Orphans {
    pub items: Vec<Prefix>,
}

impl Render for Orphans {
    fn human(&self) -> Human {
        let mut t = Table::new(["datastore", "prefix", "keys", "size"]);
        for o in &self.items {
            let size = match (o.bytes, o.bytes_exact) {
                (Some(b), Some(false)) => format!(
                    ">= {}",
                    kcore::build::cni::human_bytes(usize::try_from(b).unwrap_or(usize::MAX))
                ),
                (Some(b), _) => {
                    kcore::build::cni::human_bytes(usize::try_from(b).unwrap_or(usize::MAX))
                }
                (None, _) => "-".into(),
            };
            t.row([
                Cell::from(o.datastore.as_str()),
                Cell::from(o.prefix.as_str()),
                Cell::from(o.keys.to_string()),
                Cell::from(size),
            ]);
        }
        Human::Table(t)
    }
}

#[derive(Serialize, Clone, Debug)]
#[serde(rename_all = "camelCase")]
pub struct DataStoreRow {
    /// kubectl's `metadata` (name, labels) of the DataStore.
    pub metadata: kcore::json::RowMeta,
    pub name: String,
    pub driver: String,
    pub endpoints: Vec<String>,
    pub ready: Option<bool>,
    /// Why it is not ready, or why readiness is unknown.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ready_reason: Option<String>,
    /// TenantControlPlanes using it (`namespace/name`).
    pub used_by: Vec<String>,
    pub age: String,
}

#[derive(Serialize, Clone, Debug)]
pub struct DataStores {
    pub items: Vec<DataStoreRow>,
}

impl Render for DataStores {
    fn human(&self) -> Human {
        let mut t = Table::new([
            "name",
            "driver",
            "endpoints",
            "ready",
            "control planes",
            "age",
        ])
        .wide(["used by", "ready reason"]);
        for d in &self.items {
            let ready = match d.ready {
                Some(true) => Cell::new("True", Tone::Good),
                Some(false) => Cell::new("False", Tone::Bad),
                None => Cell::new("Unknown", Tone::Warn),
            };
            t.row([
                Cell::from(d.name.as_str()),
                Cell::from(d.driver.as_str()),
                Cell::from(d.endpoints.join(",")),
                ready,
                Cell::from(d.used_by.len().to_string()),
                Cell::from(d.age.as_str()),
                Cell::from(d.used_by.join(",")),
                Cell::from(d.ready_reason.as_deref().unwrap_or_default()),
            ]);
        }
        Human::Table(t)
    }
    fn objects(&self) -> Option<RowObjects<'_>> {
        RowObjects::of("DataStore", KAMAJI_GROUP, &self.items, |r| &r.metadata)
    }
}

pub async fn run(args: &Args) -> Result<(), Error> {
    if args.orphans {
        return orphans(args).await;
    }
    let conn = args.kube.connect().await?;
    let apis = ServerApis::discover(&conn).await?;
    let ar = datastores::resource(&apis)?;
    let tcp_ar = control_plane::tcp_resource(&apis)?;
    let stores = kclient::api::list(&conn, &ar, None, None).await?;
    let tcps = kclient::api::list_values(&conn, &tcp_ar, None, None).await?;
    let values: Vec<serde_json::Value> = stores.iter().map(object_json).collect();
    let readiness = futures::future::join_all(values.iter().map(|v| readiness(&conn, v))).await;
    let mut items = Vec::new();
    for (v, (ready, ready_reason)) in values.iter().zip(readiness) {
        let v = v.clone();
        let store = kcore::kamaji::migrate::DataStore::of(&v);
        let name = store.name.clone();
        let mut used_by: Vec<String> = tcps
            .iter()
            .filter(|t| {
                let ds = t["status"]["storage"]["dataStoreName"]
                    .as_str()
                    .or_else(|| t["spec"]["dataStore"].as_str())
                    .unwrap_or_default();
                ds == name
            })
            .map(|t| {
                format!(
                    "{}/{}",
                    t["metadata"]["namespace"].as_str().unwrap_or_default(),
                    t["metadata"]["name"].as_str().unwrap_or_default()
                )
            })
            .collect();
        for u in v["status"]["usedBy"].as_array().into_iter().flatten() {
            if let Some(s) = u.as_str()
                && !used_by.iter().any(|x| x == s)
            {
                used_by.push(s.to_string());
            }
        }
        used_by.sort();
        items.push(DataStoreRow {
            metadata: kcore::json::RowMeta::of(&v),
            name,
            driver: store.driver,
            endpoints: store.endpoints,
            ready,
            ready_reason,
            used_by,
            age: age(&v),
        });
    }
    items.sort_by(|a, b| a.name.cmp(&b.name));
    if items.is_empty()
        && matches!(
            args.output.output,
            cli::OutputFormat::Table | cli::OutputFormat::Wide
        )
    {
        kclient::render::none_found("DataStores", None);
        return Ok(());
    }
    Printer::new(&args.output).print(&DataStores { items })
}

/// Kamaji's own word when it gives one, else an etcd DataStore dialled from here.
async fn readiness(conn: &cli::Conn, v: &serde_json::Value) -> (Option<bool>, Option<String>) {
    if let Some(r) = v["status"]["ready"].as_bool() {
        return (Some(r), None);
    }
    let d = kcore::kamaji::migrate::DataStore::of(v);
    let creds = match datastores::credentials(conn, &d).await {
        Ok(Some(c)) => c,
        Ok(None) => return (None, Some(format!("not checked: the {} driver", d.driver))),
        Err(e) => return (Some(false), Some(e.to_string())),
    };
    match kclient::etcd::dial(&d.endpoints, &creds).await {
        Ok(_) => (Some(true), None),
        Err(Reach::Failed(why)) => (Some(false), Some(why)),
        Err(Reach::NotFromHere(why)) => (None, Some(format!("not checked from here: {why}"))),
        Err(_) => (None, None),
    }
}

/// The prefixes each TenantControlPlane on DataStore `store` writes under.
fn owned_on(tcps: &[serde_json::Value], store: &str) -> std::collections::BTreeSet<String> {
    tcps.iter()
        .filter(|t| {
            t["status"]["storage"]["dataStoreName"]
                .as_str()
                .or_else(|| t["spec"]["dataStore"].as_str())
                == Some(store)
        })
        .map(etcd_prefix)
        .collect()
}

/// `--orphans` (and `--prune`): every etcd DataStore dialled from here, its top-level prefixes
/// sorted against its tenants'. A DataStore that cannot be read is one line on stderr; the
/// others are still listed. Pruning reads the tenants again first, and skips a prefix that a
/// tenant made in the meantime owns.
async fn orphans(args: &Args) -> Result<(), Error> {
    let conn = args.kube.connect().await?;
    let apis = ServerApis::discover(&conn).await?;
    let tcp_ar = control_plane::tcp_resource(&apis)?;
    let tcps = kclient::api::list_values(&conn, &tcp_ar, None, None).await?;
    let mut items = Vec::new();
    let mut clients = Vec::new();
    for d in datastores::datastores(&conn, &apis).await? {
        let Some(creds) = datastores::credentials(&conn, &d).await? else {
            continue;
        };
        let etcd = match kclient::etcd::dial(&d.endpoints, &creds).await {
            Ok(e) => e,
            Err(Reach::Failed(why) | Reach::NotFromHere(why)) => {
                kclient::render::warn(&format!("DataStore {}: not read: {why}", d.name));
                continue;
            }
            Err(_) => continue,
        };
        let (found, more) = etcd.top_prefixes(MAX_PREFIXES).await?;
        if more {
            kclient::render::warn(&format!(
                "DataStore {}: more than {MAX_PREFIXES} prefixes; the first {MAX_PREFIXES} were read",
                d.name
            ));
        }
        let found = found
            .into_iter()
            .map(|(prefix, keys)| Prefix {
                datastore: d.name.clone(),
                prefix,
                keys,
                ..Prefix::default()
            })
            .collect();
        let mut sorted = unowned(found, &owned_on(&tcps, &d.name));
        for o in &mut sorted.orphans {
            let (bytes, exact) = etcd.prefix_bytes(&o.prefix, MAX_SIZED_KEYS).await?;
            o.bytes = Some(bytes);
            o.bytes_exact = Some(exact);
        }
        if !sorted.foreign.is_empty() {
            let shown: Vec<String> = sorted
                .foreign
                .iter()
                .map(|f| format!("{} ({} keys)", f.prefix, f.keys))
                .collect();
            kclient::render::info(&format!(
                "DataStore {}: not Kamaji's, left alone: {}",
                d.name,
                shown.join(", ")
            ));
        }
        items.extend(sorted.orphans);
        clients.push((d.name.clone(), etcd));
    }
    if !args.prune {
        if items.is_empty()
            && matches!(
                args.output.output,
                cli::OutputFormat::Table | cli::OutputFormat::Wide
            )
        {
            kclient::render::info("No orphaned prefixes found.");
            return Ok(());
        }
        return Printer::new(&args.output).print(&Orphans { items });
    }
    if items.is_empty() {
        kclient::render::line("no orphaned prefixes: nothing to prune");
        return Ok(());
    }
    let shown: Vec<String> = items
        .iter()
        .map(|o| {
            format!(
                "{} on {} ({} keys, {} bytes)",
                o.prefix,
                o.datastore,
                o.keys,
                o.bytes.unwrap_or(0)
            )
        })
        .collect();
    kclient::render::info(&format!(
        "This removes {} prefix(es) no tenant owns: {}",
        items.len(),
        shown.join(", ")
    ));
    if !args.yes {
        kclient::render::require_terminal(
            "datastores --prune",
            "pass --yes to prune without a question".into(),
        )?;
        if !kclient::render::confirm("Remove them?")? {
            return Err(Error::other("aborted: nothing was removed"));
        }
    }
    // A tenant made since the listing may own one of them now.
    let tcps = kclient::api::list_values(&conn, &tcp_ar, None, None).await?;
    for o in &items {
        if owned_on(&tcps, &o.datastore).contains(&o.prefix) {
            kclient::render::warn(&format!(
                "{} on {}: a tenant owns it now; left alone",
                o.prefix, o.datastore
            ));
            continue;
        }
        let Some((_, etcd)) = clients.iter().find(|(n, _)| *n == o.datastore) else {
            continue;
        };
        let n = etcd.delete(&o.prefix).await?;
        kclient::render::line(&format!(
            "datastore/{}: {} removed ({n} keys)",
            o.datastore, o.prefix
        ));
    }
    Ok(())
}
