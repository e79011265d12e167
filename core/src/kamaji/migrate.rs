//! Moving a control plane's data to another DataStore with Kamaji's own migration: the pure part
//! of `kubectl kamaji migrate` (what a DataStore names, the preflight, what to write, where a
//! migration stands).
//!
//! How Kamaji v1.0.0 migrates (read in its sources, by public name):
//! - `internal/resources/datastore/datastore_migrate.go`: when a TenantControlPlane's
//!   `spec.dataStore` differs from `status.storage.dataStoreName`, Kamaji creates the Job
//!   `migrate-<TenantControlPlane uid>` in its own namespace, running `kamaji migrate
//!   --tenant-control-plane=NS/NAME --target-datastore=TARGET`, and sets the version status to
//!   `Migrating` until the Job completes; then it rolls the tenant's API server onto the target
//!   and deletes the Job.
//! - `controllers/soot/controllers/migrate.go`: while `Migrating`, a validating webhook in the
//!   tenant refuses every write (the tenant is frozen); it goes when the tenant is `Ready`.
//! - `internal/datastore/etcd.go`, `Migrate`: the etcd driver copies the keys from
//!   `/<namespace>_<name>/` to `"\\0"` (a range that holds the tenant's prefix, see
//!   [`etcd_prefix`], and every key sorting after it) to the target, and leaves the origin's copy
//!   where it was; `kubectl kamaji migrate` removes the tenant's prefix from the origin once the
//!   tenant runs on the target.
//! - `cmd/migrate/cmd.go`: only DataStores of the same driver.

use serde_json::{Value, json};

use crate::Error;
use crate::fields;

/// Names the DataStore a migration started from, on the TenantControlPlane, so that a re-run
/// after an interruption knows which DataStore's copy to remove once the tenant runs on the
/// target. Removed when the migration is finished.
pub(crate) const MIGRATING_FROM_ANNOTATION: &str = "capi-kamaji.io/migrating-from";

/// The ValidatingWebhookConfiguration Kamaji puts in the tenant to freeze it while it migrates
/// (`controllers/soot/controllers/migrate.go`), and removes once the tenant is Ready.
pub const FREEZE_WEBHOOK: &str = "kamaji-freeze";

/// The version status Kamaji reports while it migrates (`VersionMigrating`).
const MIGRATING: &str = "Migrating";
const READY: &str = "Ready";

/// Where a value of a DataStore's `tlsConfig` comes from: inline (`content`, base64 in the
/// object, decoded here by the caller) or a key of a Secret (Kamaji's `ContentRef`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Content {
    Inline(String),
    Secret {
        namespace: String,
        name: String,
        key: String,
    },
}

impl Content {
    fn of(v: &Value) -> Option<Content> {
        if let Some(c) = v["content"].as_str().filter(|c| !c.is_empty()) {
            return Some(Content::Inline(c.to_string()));
        }
        let r = &v["secretReference"];
        Some(Content::Secret {
            namespace: r["namespace"].as_str()?.to_string(),
            name: r["name"].as_str()?.to_string(),
            key: r["keyPath"].as_str()?.to_string(),
        })
    }
}

/// What the CLI needs to talk to an etcd DataStore as Kamaji does: its CA certificate and the
/// client certificate and key (`spec.tlsConfig`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct EtcdTls {
    pub ca: Content,
    pub cert: Content,
    pub key: Content,
}

/// A Kamaji DataStore, as far as a migration reads it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DataStore {
    pub name: String,
    /// `etcd`, `MySQL`, `PostgreSQL` or `NATS`.
    pub driver: String,
    /// `host:port`, as Kamaji dials them.
    pub endpoints: Vec<String>,
    /// For etcd: the certificates; `None` when the object does not name all three.
    pub tls: Option<EtcdTls>,
}

impl DataStore {
    pub fn of(v: &Value) -> DataStore {
        let tls = &v["spec"]["tlsConfig"];
        let etcd_tls = (|| {
            Some(EtcdTls {
                ca: Content::of(&tls["certificateAuthority"]["certificate"])?,
                cert: Content::of(&tls["clientCertificate"]["certificate"])?,
                key: Content::of(&tls["clientCertificate"]["privateKey"])?,
            })
        })();
        DataStore {
            name: v["metadata"]["name"].as_str().unwrap_or_default().into(),
            driver: v["spec"]["driver"].as_str().unwrap_or_default().into(),
            endpoints: v["spec"]["endpoints"]
                .as_array()
                .into_iter()
                .flatten()
                .filter_map(|e| e.as_str().map(str::to_string))
                .collect(),
            tls: etcd_tls,
        }
    }

    pub fn is_etcd(&self) -> bool {
        self.driver == "etcd"
    }
}

/// The etcd key prefix the tenant's API server writes under: `/<schema>/`, its `--etcd-prefix`
/// (Kamaji's `internal/builders/controlplane/deployment.go`), where the schema is
/// `status.storage.setup.schema`, by default `<namespace>_<name>` with every `-` turned into `_`
/// (`internal/resources/datastore/datastore_storage_config.go`).
pub fn etcd_prefix(tcp: &Value) -> String {
    let schema = fields::at(tcp, &["status", "storage", "setup", "schema"])
        .and_then(Value::as_str)
        .filter(|s| !s.is_empty())
        .map(str::to_string)
        .unwrap_or_else(|| {
            format!(
                "{}_{}",
                tcp["metadata"]["namespace"].as_str().unwrap_or_default(),
                tcp["metadata"]["name"].as_str().unwrap_or_default()
            )
            .replace('-', "_")
        });
    format!("/{schema}/")
}

/// The end of etcd's range that holds exactly the keys starting with `prefix` (etcd's
/// `clientv3.GetPrefixRangeEnd`): the prefix with its last byte below 0xff incremented.
pub fn prefix_range_end(prefix: &[u8]) -> Vec<u8> {
    let mut end = prefix.to_vec();
    while let Some(last) = end.pop() {
        if last < 0xff {
            end.push(last + 1);
            return end;
        }
    }
    // Every byte was 0xff: etcd's "to the end of the keyspace".
    vec![0]
}

/// What the CLI saw of a DataStore from where it runs.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Reach {
    /// It answered; this many keys lie under the tenant's prefix.
    Answered { tenant_keys: u64 },
    /// Its endpoints' names do not resolve here (an in-cluster name, as Kamaji's Helm chart
    /// gives them): Kamaji's Job, in the cluster, is the first to dial it.
    NotFromHere(String),
    /// It was dialled and did not answer (refused, timed out, TLS refused).
    Failed(String),
    /// Not an etcd DataStore: the CLI does not speak its driver.
    NotChecked,
}

/// Where a control plane stands relative to `target`, from its TenantControlPlane alone.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Stage {
    /// It runs on another DataStore and nothing is under way: preflight, then start.
    Fresh { source: String },
    /// Its `spec.dataStore` (or the KamajiControlPlane's) names the target already and Kamaji
    /// has not finished: follow it.
    UnderWay { source: Option<String> },
    /// It runs on the target and is Ready: only the origin's copy may be left to remove.
    Done { source: Option<String> },
}

/// The TenantControlPlane's version status (`Ready`, `Migrating`, …).
fn version_status(tcp: &Value) -> Option<&str> {
    fields::at(tcp, &["status", "kubernetesResources", "version", "status"]).and_then(Value::as_str)
}

/// The DataStore the tenant's data is in now (`status.storage.dataStoreName`).
fn current_datastore(tcp: &Value) -> Option<&str> {
    tcp["status"]["storage"]["dataStoreName"]
        .as_str()
        .filter(|s| !s.is_empty())
}

/// The DataStore the tenant's data is on: where Kamaji put it, else the one asked for, else
/// Kamaji's default (`default`).
pub fn data_store_of(tcp: &Value) -> String {
    current_datastore(tcp)
        .or_else(|| tcp["spec"]["dataStore"].as_str().filter(|s| !s.is_empty()))
        .unwrap_or("default")
        .to_string()
}

/// The DataStore asked for: the KamajiControlPlane's `spec.dataStoreName` when it sets one (the
/// reconciler writes it into the TenantControlPlane), else the TenantControlPlane's.
fn desired_datastore<'a>(kcp: Option<&'a Value>, tcp: &'a Value) -> Option<&'a str> {
    kcp.and_then(|k| k["spec"]["dataStoreName"].as_str())
        .filter(|s| !s.is_empty())
        .or_else(|| tcp["spec"]["dataStore"].as_str().filter(|s| !s.is_empty()))
}

/// The DataStore a migration recorded as its origin.
fn recorded_source(tcp: &Value) -> Option<String> {
    tcp["metadata"]["annotations"][MIGRATING_FROM_ANNOTATION]
        .as_str()
        .filter(|s| !s.is_empty())
        .map(str::to_string)
}

/// Where `name` stands relative to `target`; a migration to another DataStore under way is a
/// refusal.
pub fn stage(name: &str, kcp: Option<&Value>, tcp: &Value, target: &str) -> Result<Stage, Error> {
    let current = current_datastore(tcp).ok_or_else(|| Error::Other {
        message: format!("{name} reports no DataStore yet"),
        hint: Some(format!(
            "wait until Kamaji has set it up (kubectl kamaji status {name})"
        )),
    })?;
    let desired = desired_datastore(kcp, tcp).unwrap_or(current);
    let tcp_desired = tcp["spec"]["dataStore"].as_str().unwrap_or(current);
    let source = recorded_source(tcp);
    if current == target && desired == target && version_status(tcp) == Some(READY) {
        return Ok(Stage::Done { source });
    }
    if desired == target {
        return Ok(Stage::UnderWay { source });
    }
    if desired != current || tcp_desired != current || version_status(tcp) == Some(MIGRATING) {
        let to = if desired != current {
            desired
        } else {
            tcp_desired
        };
        return Err(Error::Other {
            message: format!("a migration of {name} from {current} to {to} is under way"),
            hint: Some(format!(
                "follow it with kubectl kamaji migrate {name} --to {to} --wait"
            )),
        });
    }
    Ok(Stage::Fresh {
        source: current.to_string(),
    })
}

/// What the preflight read: the control plane, the DataStores, Kamaji's Job, and what the
/// target and the origin said when dialled from here.
pub struct Preflight<'a> {
    pub name: &'a str,
    pub namespace: &'a str,
    pub tcp: &'a Value,
    pub kcp: Option<&'a Value>,
    /// The ClusterClass of the owning Cluster, when its topology manages the control plane.
    pub topology_class: Option<&'a str>,
    pub stores: &'a [DataStore],
    pub source: &'a str,
    pub target: &'a str,
    /// Kamaji's migration Job for this tenant, if one exists.
    pub job: Option<&'a Value>,
    pub source_reach: Reach,
    pub target_reach: Reach,
}

/// Which object gets the new DataStore name.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Writes {
    /// The KamajiControlPlane's `spec.dataStoreName` (the reconciler writes the
    /// TenantControlPlane from it; writing the TenantControlPlane would be undone).
    KamajiControlPlane,
    /// A standalone TenantControlPlane's `spec.dataStore`.
    TenantControlPlane,
}

/// A migration that passed its preflight.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MigratePlan {
    pub source: String,
    pub target: String,
    pub driver: String,
    pub prefix: String,
    pub writes: Writes,
    /// Keys under the prefix on the origin, when the driver reports it.
    pub tenant_keys: Option<u64>,
    /// What could not be checked from here, one line each.
    pub notes: Vec<String>,
}

impl MigratePlan {
    /// The lines shown before anything changes.
    pub fn lines(&self, name: &str) -> Vec<String> {
        let size = match self.tenant_keys {
            Some(n) => format!(" ({n} keys under {})", self.prefix),
            None => String::new(),
        };
        let object = match self.writes {
            Writes::KamajiControlPlane => "KamajiControlPlane",
            Writes::TenantControlPlane => "TenantControlPlane",
        };
        vec![
            format!(
                "Migrate {name}'s data from DataStore {} to {} ({} driver){size}:",
                self.source, self.target, self.driver
            ),
            format!(
                "  1. set the {object}'s DataStore to {}; Kamaji freezes the tenant (writes are refused) and copies the data with its migration Job",
                self.target
            ),
            format!(
                "  2. Kamaji moves the tenant's API server onto {}; the tenant serves writes again",
                self.target
            ),
            format!(
                "  3. the copy left on {} ({}) is removed",
                self.source, self.prefix
            ),
        ]
    }
}

/// The preflight: the same driver, a target that exists and answers, nothing under way, a
/// tenant that is Ready, a target holding nothing of this tenant yet.
pub fn preflight(p: &Preflight) -> Result<MigratePlan, Error> {
    let refuse = |message: String, hint: String| Error::Other {
        message,
        hint: Some(hint),
    };
    let name = p.name;
    let target = p
        .stores
        .iter()
        .find(|d| d.name == p.target)
        .ok_or_else(|| {
            let near =
                crate::text::closest_names(p.target, p.stores.iter().map(|d| d.name.as_str()));
            let hint = if near.is_empty() {
                "kubectl kamaji datastores lists them".to_string()
            } else {
                format!(
                    "did you mean {}? (kubectl kamaji datastores lists them)",
                    near.join(", ")
                )
            };
            refuse(format!("DataStore {:?} not found", p.target), hint)
        })?;
    if let Some(class) = p.topology_class {
        return Err(refuse(
            format!("{name} is managed by its Cluster's topology (ClusterClass {class})"),
            "set dataStoreName in the ClusterClass's KamajiControlPlaneTemplate or a topology patch; the topology controller would undo a change made here".into(),
        ));
    }
    let status = version_status(p.tcp).unwrap_or("unknown");
    if status != READY {
        return Err(refuse(
            format!("{name} is {status}; Kamaji migrates a Ready control plane"),
            format!("wait until it is Ready (kubectl kamaji status {name})"),
        ));
    }
    if let Some(job) = p.job {
        let job_name = job["metadata"]["name"].as_str().unwrap_or_default();
        return Err(refuse(
            format!("Kamaji's migration Job {job_name} for {name} exists already"),
            format!(
                "wait until Kamaji removes it (kubectl -n {} get job {job_name})",
                job["metadata"]["namespace"].as_str().unwrap_or_default()
            ),
        ));
    }
    let driver = p.tcp["status"]["storage"]["driver"]
        .as_str()
        .filter(|d| !d.is_empty())
        .or_else(|| {
            p.stores
                .iter()
                .find(|d| d.name == p.source)
                .map(|d| d.driver.as_str())
        })
        .unwrap_or_default();
    if target.driver != driver {
        return Err(refuse(
            format!(
                "DataStore {} uses the {} driver and {name}'s data is in {} ({driver})",
                target.name, target.driver, p.source
            ),
            format!(
                "Kamaji migrates between DataStores of one driver; pick a {driver} DataStore (kubectl kamaji datastores)"
            ),
        ));
    }
    let prefix = etcd_prefix(p.tcp);
    let mut notes = Vec::new();
    match &p.target_reach {
        Reach::Answered { tenant_keys: 0 } => {}
        Reach::Answered { tenant_keys } => {
            return Err(refuse(
                format!(
                    "DataStore {} already holds {tenant_keys} keys under {prefix} (left by an earlier migration?); Kamaji's copy would merge them into the tenant's data",
                    target.name
                ),
                format!("remove them first (etcdctl del --prefix {prefix}) or pick another DataStore"),
            ));
        }
        Reach::Failed(why) => {
            return Err(refuse(
                format!(
                    "DataStore {} does not answer at {}: {why}",
                    target.name,
                    target.endpoints.join(",")
                ),
                "Kamaji's migration Job would fail against it; fix the DataStore first (kubectl kamaji datastores)".into(),
            ));
        }
        Reach::NotFromHere(why) => notes.push(format!(
            "DataStore {} was not checked from here ({why}); Kamaji's Job dials it from the cluster",
            target.name
        )),
        Reach::NotChecked => notes.push(format!(
            "DataStore {} ({}) was not checked: this client speaks etcd only",
            target.name, target.driver
        )),
    }
    let tenant_keys = match &p.source_reach {
        Reach::Answered { tenant_keys } => Some(*tenant_keys),
        _ => None,
    };
    let writes = match p.kcp {
        Some(_) => Writes::KamajiControlPlane,
        None => Writes::TenantControlPlane,
    };
    Ok(MigratePlan {
        source: p.source.to_string(),
        target: target.name.clone(),
        driver: driver.to_string(),
        prefix,
        writes,
        tenant_keys,
        notes,
    })
}

/// The merge patch that records the origin on the TenantControlPlane (first), and the one that
/// asks for the target (second); a standalone TenantControlPlane gets both in one patch.
pub fn source_patch(source: &str) -> Value {
    json!({"metadata": {"annotations": {MIGRATING_FROM_ANNOTATION: source}}})
}

/// The merge patch that starts the migration, for the object [`Writes`] names.
pub fn target_patch(writes: &Writes, target: &str, source: &str) -> Value {
    match writes {
        Writes::KamajiControlPlane => json!({"spec": {"dataStoreName": target}}),
        Writes::TenantControlPlane => json!({
            "metadata": {"annotations": {MIGRATING_FROM_ANNOTATION: source}},
            "spec": {"dataStore": target}
        }),
    }
}

/// Written on the TenantControlPlane when the tenant is Ready on the target but still refuses
/// writes: Kamaji v1.0.0 removes its freeze webhook from the tenant when its soot `migrate`
/// controller, triggered by a TenantControlPlane event, reads the status `Ready`
/// (`controllers/soot/controllers/migrate.go`, `controllers/soot/manager.go`); that controller
/// is level-triggered and can miss the transition (the install side of the same race is
/// clastix/kamaji#1277), and this event makes it look again. Removed with the origin.
pub(crate) const NUDGE_ANNOTATION: &str = "capi-kamaji.io/migration-nudge";

/// The merge patch of a nudge at `unix` seconds.
pub fn nudge_patch(unix: i64) -> Value {
    json!({"metadata": {"annotations": {NUDGE_ANNOTATION: unix.to_string()}}})
}

/// The merge patch that forgets the origin (and any nudge) once its copy is removed.
pub fn finished_patch() -> Value {
    json!({"metadata": {"annotations": {MIGRATING_FROM_ANNOTATION: null, NUDGE_ANNOTATION: null}}})
}

/// Where a migration to `target` stands, from the TenantControlPlane and Kamaji's Job.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum MigrationProgress {
    /// The TenantControlPlane does not name the target yet (the reconciler has not written it).
    Requested,
    /// It names the target; Kamaji has not started its Job.
    Starting,
    /// Kamaji's Job copies the data; the tenant is frozen.
    Copying { job: String, active: bool },
    /// The data is copied; Kamaji moves the tenant's API server onto the target.
    Switching,
    /// The tenant runs on the target and is Ready.
    Ready,
    /// Kamaji's Job failed.
    Failed { job: String, message: String },
}

impl MigrationProgress {
    pub fn of(tcp: &Value, job: Option<&Value>, target: &str) -> MigrationProgress {
        let status = version_status(tcp);
        if current_datastore(tcp) == Some(target) && status == Some(READY) {
            return MigrationProgress::Ready;
        }
        if tcp["spec"]["dataStore"].as_str() != Some(target) {
            return MigrationProgress::Requested;
        }
        if let Some(job) = job {
            let name = job["metadata"]["name"]
                .as_str()
                .unwrap_or_default()
                .to_string();
            if let Some(c) = job_condition(job, "Failed") {
                return MigrationProgress::Failed {
                    job: name,
                    message: c["message"].as_str().unwrap_or_default().to_string(),
                };
            }
            if job_condition(job, "Complete").is_none() {
                let active = job["status"]["active"].as_i64().unwrap_or(0) > 0;
                return MigrationProgress::Copying { job: name, active };
            }
            return MigrationProgress::Switching;
        }
        if status == Some(MIGRATING) || current_datastore(tcp) == Some(target) {
            MigrationProgress::Switching
        } else {
            MigrationProgress::Starting
        }
    }

    /// The progress line.
    pub fn line(&self, name: &str, target: &str) -> String {
        match self {
            MigrationProgress::Requested => {
                format!("waiting for the reconciler to set {name}'s DataStore to {target}")
            }
            MigrationProgress::Starting => "waiting for Kamaji to start its migration Job".into(),
            MigrationProgress::Copying { job, active: true } => {
                format!("Kamaji's Job {job} copies the data (the tenant is frozen)")
            }
            MigrationProgress::Copying { job, active: false } => {
                format!("Kamaji's Job {job} waits for its pod (the tenant is frozen)")
            }
            MigrationProgress::Switching => {
                format!("Kamaji moves {name}'s API server onto {target}")
            }
            MigrationProgress::Ready => format!("{name} runs on {target}"),
            MigrationProgress::Failed { job, message } => {
                format!("Kamaji's Job {job} failed: {message}")
            }
        }
    }
}

fn job_condition<'a>(job: &'a Value, kind: &str) -> Option<&'a Value> {
    job["status"]["conditions"]
        .as_array()?
        .iter()
        .find(|c| c["type"] == kind && c["status"] == "True")
}

/// Kamaji v1.0.0 takes its migration Job for complete only when `Complete` is the Job's *first*
/// condition (`datastore_migrate.go`: `Conditions[0].Type == JobComplete`). Since Kubernetes
/// v1.31 the Job controller writes `SuccessCriteriaMet` before `Complete`, so Kamaji v1.0.0 waits
/// for a finished Job forever and the tenant stays frozen (fixed in Kamaji after v1.0.0,
/// clastix/kamaji#706, which reads every condition). For a complete Job whose first condition is
/// another: the status merge patch that puts `Complete` first, the other conditions unchanged.
pub fn complete_first(job: &Value) -> Option<Value> {
    let conditions = job["status"]["conditions"].as_array()?;
    job_condition(job, "Complete")?;
    if conditions.first()?["type"] == "Complete" {
        return None;
    }
    let mut ordered: Vec<Value> = conditions
        .iter()
        .filter(|c| c["type"] == "Complete")
        .cloned()
        .collect();
    ordered.extend(
        conditions
            .iter()
            .filter(|c| c["type"] != "Complete")
            .cloned(),
    );
    Some(json!({"status": {"conditions": ordered}}))
}

/// Kamaji's migration Job name for a TenantControlPlane uid.
pub fn job_name(tcp_uid: &str) -> String {
    format!("migrate-{tcp_uid}")
}

#[cfg(test)]
mod tests;
