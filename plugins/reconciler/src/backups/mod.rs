//! The TenantBackup controller: takes a Kamaji tenant's backup on its schedule, in the file
//! format of `kubectl kamaji backup` (a restore reads either), to an S3-compatible bucket or a
//! directory on a mounted PersistentVolumeClaim, and removes the oldest past its retention.
//!
//! Each reconcile asks the schedule (`kcore::ops::backup::due`) whether a run is due: if so it
//! runs it ([`take`]) and writes the outcome to `status` (times, the last backup, the
//! `LastBackupSucceeded` condition), an Event and `/metrics`; then it waits until the next
//! scheduled time. All the state is in `status`, so a restarted reconciler neither repeats a run
//! nor misses one (runs missed while it was down become one run, as a CronJob's). A failed run is
//! not retried before the next scheduled time: the condition and the backup alert say it failed.

mod destination;
pub mod s3;
mod take;

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use jiff::Timestamp;
use kcore::install::MAX_BACKUP_CLAIMS;
use kcore::ops::backup::{Due, Outcome, Schedule, TenantBackup, TenantBackupStatus, due, since};
use kube::api::{Api, Patch, PatchParams};
use kube::runtime::controller::{Action, Controller};
use kube::runtime::events::{Event, EventType};
use kube::runtime::reflector::{ObjectRef, Store};
use kube::runtime::watcher;
use kube::{Client, Resource, ResourceExt};

use crate::Error;
use crate::controller::Config;
use crate::metrics::{BackupSeries, Metrics};
use crate::skeleton::{Base, MANAGER, Retries, drive};

/// The claims mounted into the reconciler's pod for TenantBackups' `persistentVolumeClaim`
/// targets (`--backup-volume CLAIM=DIR`; `kubectl kamaji install --backup-claim` mounts them).
#[derive(Clone, Debug, Default)]
pub struct Volumes(pub BTreeMap<String, PathBuf>);

impl Volumes {
    /// `CLAIM=DIR` flags, checked: a claim name, an absolute directory, each claim once.
    pub fn parse(flags: &[String]) -> Result<Volumes, String> {
        if flags.len() > MAX_BACKUP_CLAIMS {
            return Err(format!("at most {MAX_BACKUP_CLAIMS} --backup-volume flags"));
        }
        let mut out = BTreeMap::new();
        for f in flags {
            let Some((claim, dir)) = f.split_once('=') else {
                return Err(format!("--backup-volume {f:?}: expected CLAIM=DIR"));
            };
            if let Err(e) = kcore::names::check_object_name("PersistentVolumeClaim", claim) {
                return Err(format!("--backup-volume {f:?}: {e}"));
            }
            let dir = PathBuf::from(dir);
            if !dir.is_absolute() {
                return Err(format!(
                    "--backup-volume {f:?}: the directory must be an absolute path"
                ));
            }
            if out.insert(claim.to_string(), dir).is_some() {
                return Err(format!("--backup-volume: claim {claim} given twice"));
            }
        }
        Ok(Volumes(out))
    }
}

struct BackupCtx {
    base: Base,
    volumes: Volumes,
    retries: Retries<TenantBackup>,
}

/// Runs the TenantBackup controller until shutdown; returns at once when the API is not served
/// (an install from before it).
pub async fn run(
    client: Client,
    cfg: Config,
    metrics: Arc<Metrics>,
    volumes: Volumes,
) -> Result<(), Error> {
    if !crate::skeleton::served(&client, kcore::ops::GROUP, "TenantBackup").await {
        tracing::info!("the TenantBackup API is not served: no scheduled backups");
        return Ok(());
    }
    let ctx = Arc::new(BackupCtx {
        base: Base::new(client, metrics),
        volumes,
        retries: Retries::doubling(),
    });
    let mut runs = Vec::new();
    let mut stores = Vec::new();
    for scope in cfg.scopes() {
        let api: Api<TenantBackup> = match scope.as_deref() {
            Some(n) => Api::namespaced(ctx.base.client.clone(), n),
            None => Api::all(ctx.base.client.clone()),
        };
        let controller = Controller::new(api, watcher::Config::default());
        stores.push(controller.store());
        runs.push(drive(
            controller,
            reconcile,
            error_policy,
            ctx.clone(),
            "backup",
        ));
    }
    tokio::select! {
        _ = futures::future::join_all(runs) => {},
        () = forget_deleted(&ctx.base.metrics, &stores) => {},
    }
    Ok(())
}

/// Every few seconds, drops the series of TenantBackups no longer in the caches: a deleted one
/// is never reconciled again, and its alert would fire on.
async fn forget_deleted(metrics: &Metrics, stores: &[Store<TenantBackup>]) {
    loop {
        tokio::time::sleep(Duration::from_secs(15)).await;
        metrics.backups.retain(|ns, name| {
            let r = ObjectRef::<TenantBackup>::new(name).within(ns);
            stores.iter().any(|s| s.get(&r).is_some())
        });
    }
}

fn error_policy(tb: Arc<TenantBackup>, err: &Error, ctx: Arc<BackupCtx>) -> Action {
    ctx.retries.failed(&ctx.base, "TenantBackup", &tb, err)
}

/// How long until `t` (at least a second: the schedule's next time may be now).
fn until(t: Option<Timestamp>, now: Timestamp) -> Action {
    match t {
        Some(t) => {
            let secs = t.duration_since(now).as_secs().max(1);
            Action::requeue(Duration::from_secs(u64::try_from(secs).unwrap_or(1)))
        }
        None => Action::await_change(),
    }
}

async fn reconcile(tb: Arc<TenantBackup>, ctx: Arc<BackupCtx>) -> Result<Action, Error> {
    let ns = tb.namespace().unwrap_or_default();
    let name = tb.name_any();
    let now = Timestamp::now();
    let generation = tb.meta().generation;
    let old = tb.status.clone().unwrap_or_default();
    let mut status = old.clone();
    let schedule = match Schedule::parse(&tb.spec.schedule) {
        Ok(s) => s,
        Err(why) => {
            status.invalid_schedule(generation, &why, now);
            publish(&ctx, &tb, &status, &old, &schedule_series(&status, None)).await?;
            ctx.retries.succeeded(&tb);
            return Ok(Action::await_change());
        }
    };
    let created = tb.meta().creation_timestamp.as_ref().map_or(now, |t| t.0);
    let action = match due(&schedule, since(tb.status.as_ref(), created), now) {
        _ if tb.spec.suspend => {
            status.next_schedule_time = None;
            Action::await_change()
        }
        Due::Wait { next } => {
            status.next_schedule_time = next.map(|t| t.to_string());
            until(next, now)
        }
        Due::Run { scheduled, next } => {
            tracing::info!(%ns, %name, "taking the backup scheduled at {scheduled}");
            let outcome = match take::take(&ctx.base.client, &tb, &ctx.volumes, scheduled).await {
                Ok(t) => {
                    tracing::info!(%ns, %name, "backup written to {} ({} keys); {} older removed", t.record.location, t.record.keys, t.pruned);
                    Outcome::Written(t.record)
                }
                Err(e) => Outcome::Failed(e.to_string()),
            };
            status.ran(generation, scheduled, next, &outcome, Timestamp::now());
            event(&ctx, &tb, &outcome).await;
            until(next, Timestamp::now())
        }
    };
    let series = schedule_series(&status, Some(&schedule));
    publish(&ctx, &tb, &status, &old, &series).await?;
    ctx.retries.succeeded(&tb);
    Ok(action)
}

/// The series `/metrics` shows for the TenantBackup.
fn schedule_series(status: &TenantBackupStatus, schedule: Option<&Schedule>) -> BackupSeries {
    let interval = schedule
        .zip(status.last_schedule_time.as_deref())
        .and_then(|(s, t)| {
            let t: Timestamp = t.parse().ok()?;
            Some(s.next_after(t)?.duration_since(t).as_secs())
        })
        .unwrap_or(0);
    BackupSeries {
        last_success: status.last_success().map_or(0, |t| t.as_second()),
        failing: i64::from(status.failing()),
        interval,
        bytes: status.last_backup.as_ref().map_or(0, |b| b.bytes),
    }
}

/// Writes `status` when it changed (one merge patch of the status subresource) and the series.
async fn publish(
    ctx: &BackupCtx,
    tb: &TenantBackup,
    status: &TenantBackupStatus,
    old: &TenantBackupStatus,
    series: &BackupSeries,
) -> Result<(), Error> {
    let ns = tb.namespace().unwrap_or_default();
    let name = tb.name_any();
    ctx.base.metrics.backups.set(&ns, &name, series.clone());
    if status == old {
        return Ok(());
    }
    let api: Api<TenantBackup> = Api::namespaced(ctx.base.client.clone(), &ns);
    let patch = serde_json::json!({ "status": status });
    api.patch_status(
        &name,
        &PatchParams::apply(MANAGER).force(),
        &Patch::Apply(serde_json::json!({
            "apiVersion": TenantBackup::api_version(&()),
            "kind": TenantBackup::kind(&()),
            "status": patch["status"],
        })),
    )
    .await?;
    Ok(())
}

/// The run's Event on the TenantBackup (best effort: an Event lost is no reason to fail).
async fn event(ctx: &BackupCtx, tb: &TenantBackup, outcome: &Outcome) {
    let (type_, reason, note) = match outcome {
        Outcome::Written(r) => (
            EventType::Normal,
            kcore::ops::backup::reason::WRITTEN,
            format!(
                "{} keys and {} objects written to {}",
                r.keys, r.objects, r.location
            ),
        ),
        Outcome::Failed(why) => (
            EventType::Warning,
            kcore::ops::backup::reason::FAILED,
            why.clone(),
        ),
    };
    let ev = Event {
        type_,
        reason: reason.into(),
        note: Some(note),
        action: "Backup".into(),
        secondary: None,
    };
    if let Err(e) = ctx.base.recorder.publish(&ev, &tb.object_ref(&())).await {
        tracing::debug!("event on TenantBackup {}: {e}", tb.name_any());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn backup_volumes_are_claim_equals_absolute_dir_each_once() {
        let v = Volumes::parse(&["nightly=/var/lib/kamaji-backups/nightly".into()]).unwrap();
        assert_eq!(
            v.0.get("nightly"),
            Some(&PathBuf::from("/var/lib/kamaji-backups/nightly"))
        );
        for (flag, says) in [
            ("nightly", "expected CLAIM=DIR"),
            ("nightly=relative/dir", "must be an absolute path"),
            ("Not_A_Name=/x", "is not a valid PersistentVolumeClaim name"),
        ] {
            let e = Volumes::parse(&[flag.into()]).unwrap_err();
            assert!(e.contains(says), "{flag}: {e}");
        }
        let e = Volumes::parse(&["a=/x".into(), "a=/y".into()]).unwrap_err();
        assert!(e.contains("claim a given twice"), "{e}");
        let many: Vec<String> = (0..=MAX_BACKUP_CLAIMS)
            .map(|i| format!("c{i}=/d{i}"))
            .collect();
        assert!(Volumes::parse(&many).unwrap_err().contains("at most 16"));
    }
}
