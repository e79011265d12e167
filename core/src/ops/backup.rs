//! `ops.capi-kamaji.io/v1alpha1` TenantBackup: one tenant's backup taken on a schedule by the
//! reconciler, in the file format of `kubectl kamaji backup` (`kcore::kamaji::backup`), written
//! to an S3-compatible bucket or to a directory on a PersistentVolumeClaim, the oldest pruned
//! past `retention`. Here: the API, and the pure decisions (when a run is due, what its object
//! is named, which objects go).

// The CustomResource derive takes one `printcolumn(...)` per column; clippy reads two columns
// with the same `type_` as a duplicated attribute.
#![allow(clippy::duplicated_attributes)]

use jiff::Timestamp;
use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::kamaji::api::common::Condition;

/// The condition every run sets: True once a backup was written, False (with the reason and
/// what went wrong) when the last run failed or the spec cannot be acted on.
pub const CONDITION: &str = "LastBackupSucceeded";

/// The reasons of [`CONDITION`].
pub mod reason {
    /// The last run wrote its backup (and pruned past the retention).
    pub const WRITTEN: &str = "BackupWritten";
    /// `spec.schedule` is no cron schedule; nothing runs until it is fixed.
    pub const INVALID_SCHEDULE: &str = "InvalidSchedule";
    /// The last run failed: the message says at which step and why.
    pub const FAILED: &str = "BackupFailed";
}

/// How many backups are kept when `spec.retention` is not set.
pub const DEFAULT_RETENTION: u32 = 7;

/// The suffix of every backup object, as `kubectl kamaji backup` names its files.
pub const SUFFIX: &str = ".kamaji-backup";

/// The region signed for when `spec.target.s3.region` is not set (what S3-compatible servers
/// such as MinIO expect).
pub const DEFAULT_REGION: &str = "us-east-1";

/// A tenant's backups on a schedule.
#[derive(CustomResource, Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[kube(
    group = "ops.capi-kamaji.io",
    version = "v1alpha1",
    kind = "TenantBackup",
    namespaced,
    status = "TenantBackupStatus",
    shortname = "tbk",
    category = "capi-kamaji",
    derive = "Default",
    derive = "PartialEq",
    doc = "TenantBackup takes a Kamaji tenant's backup (its DataStore keys and the objects that bring it back, as kubectl kamaji backup writes it) on a schedule; kamaji-reconciler carries it out.",
    printcolumn(name = "Tenant", type_ = "string", json_path = ".spec.tenant"),
    printcolumn(name = "Schedule", type_ = "string", json_path = ".spec.schedule"),
    printcolumn(
        name = "Succeeded",
        type_ = "string",
        json_path = ".status.conditions[?(@.type==\"LastBackupSucceeded\")].status"
    ),
    printcolumn(
        name = "Last-Success",
        type_ = "date",
        json_path = ".status.lastSuccessfulTime"
    ),
    printcolumn(
        name = "Age",
        type_ = "date",
        json_path = ".metadata.creationTimestamp"
    )
)]
#[serde(rename_all = "camelCase")]
pub struct TenantBackupSpec {
    /// The KamajiControlPlane to back up, in this namespace; a TenantControlPlane of that name
    /// when no KamajiControlPlane has it.
    #[schemars(
        length(min = 1, max = 253),
        regex(pattern = "^[a-z0-9]([-a-z0-9.]*[a-z0-9])?$")
    )]
    pub tenant: String,
    /// When, in UTC: cron's five fields (minute hour day-of-month month day-of-week, e.g.
    /// "0 3 * * *"), or six with the seconds first.
    #[schemars(length(min = 1, max = 128))]
    pub schedule: String,
    /// How many of the newest backups to keep (default 7); older ones are removed after each
    /// backup written.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1, max = 1000))]
    pub retention: Option<u32>,
    /// Where the backups go.
    pub target: BackupTarget,
    /// Take no backup while true.
    #[serde(default, skip_serializing_if = "is_false")]
    pub suspend: bool,
}

fn is_false(b: &bool) -> bool {
    !*b
}

/// Exactly one of `s3` and `persistentVolumeClaim`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(extend("x-kubernetes-validations" = [{
    "rule": "has(self.s3) != has(self.persistentVolumeClaim)",
    "message": "set exactly one of s3 and persistentVolumeClaim"
}]))]
pub struct BackupTarget {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub s3: Option<S3Target>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub persistent_volume_claim: Option<ClaimTarget>,
}

/// A bucket of S3 or of an S3-compatible server. Objects are named
/// `<prefix>/<namespace>/<tenant>/<tenant>-<UTC time>.kamaji-backup`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct S3Target {
    /// The service's URL, http or https: https://s3.eu-west-1.amazonaws.com,
    /// http://minio.backup.svc:9000.
    #[schemars(length(min = 8, max = 2048), regex(pattern = "^https?://[^/?#]+/?$"))]
    pub endpoint: String,
    #[schemars(
        length(min = 3, max = 63),
        regex(pattern = "^[a-z0-9][a-z0-9.-]*[a-z0-9]$")
    )]
    pub bucket: String,
    /// Prepended to every object's name (no leading or trailing `/`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1, max = 512), regex(pattern = "^[^/].*[^/]$|^[^/]$"))]
    pub prefix: Option<String>,
    /// The region requests are signed for (default us-east-1).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1, max = 64))]
    pub region: Option<String>,
    /// A Secret in this namespace holding `accessKeyID` and `secretAccessKey`.
    #[schemars(length(min = 1, max = 253))]
    pub credentials_secret: String,
    /// Address the bucket as a host name (bucket.endpoint), as AWS prefers, instead of in the
    /// path (the default, which every S3-compatible server takes).
    #[serde(default, skip_serializing_if = "is_false")]
    pub virtual_hosted_style: bool,
}

/// A PersistentVolumeClaim the reconciler has mounted (`kubectl kamaji install
/// --backup-claim NAME`). Files are `<namespace>/<tenant>/<tenant>-<UTC time>.kamaji-backup` on it.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ClaimTarget {
    #[schemars(length(min = 1, max = 253))]
    pub claim_name: String,
}

/// Where a TenantBackup stands. Times are RFC 3339.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct TenantBackupStatus {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observed_generation: Option<i64>,
    /// The scheduled time of the last run, whether it succeeded or not.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_schedule_time: Option<String>,
    /// When the last backup was written.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_successful_time: Option<String>,
    /// When the next run is due.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub next_schedule_time: Option<String>,
    /// The last backup written.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_backup: Option<BackupRecord>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub conditions: Vec<Condition>,
}

/// One backup written.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct BackupRecord {
    /// `s3://bucket/key` or `pvc://claim/path`.
    pub location: String,
    // Signed: an API server refuses a CRD's uint64 bound (it must fit an int64).
    /// The DataStore keys it holds.
    #[schemars(range(min = 0))]
    pub keys: i64,
    /// The objects it carries besides the keys.
    #[schemars(range(min = 0))]
    pub objects: i64,
    /// Its size, compressed.
    #[schemars(range(min = 0))]
    pub bytes: i64,
    /// The DataStore revision the keys were read at.
    pub revision: i64,
}

/// What one run ended with.
#[derive(Clone, Debug, PartialEq)]
pub enum Outcome {
    Written(BackupRecord),
    /// Why, in one line.
    Failed(String),
}

impl TenantBackupStatus {
    /// After the run scheduled at `scheduled`, ended at `now`: the times, the last backup and
    /// [`CONDITION`].
    pub fn ran(
        &mut self,
        generation: Option<i64>,
        scheduled: Timestamp,
        next: Option<Timestamp>,
        outcome: &Outcome,
        now: Timestamp,
    ) {
        self.observed_generation = generation;
        self.last_schedule_time = Some(scheduled.to_string());
        self.next_schedule_time = next.map(|t| t.to_string());
        let (ok, reason, message) = match outcome {
            Outcome::Written(r) => {
                self.last_successful_time = Some(now.to_string());
                self.last_backup = Some(r.clone());
                (
                    true,
                    reason::WRITTEN,
                    format!(
                        "{} keys and {} objects written to {} ({} bytes)",
                        r.keys, r.objects, r.location, r.bytes
                    ),
                )
            }
            Outcome::Failed(why) => (false, reason::FAILED, why.clone()),
        };
        super::run::set_condition(
            &mut self.conditions,
            generation,
            CONDITION,
            ok,
            (reason, &message),
            &now.to_string(),
        );
    }

    /// `spec.schedule` cannot be read: nothing is scheduled until it changes.
    pub fn invalid_schedule(&mut self, generation: Option<i64>, why: &str, now: Timestamp) {
        self.observed_generation = generation;
        self.next_schedule_time = None;
        super::run::set_condition(
            &mut self.conditions,
            generation,
            CONDITION,
            false,
            (reason::INVALID_SCHEDULE, why),
            &now.to_string(),
        );
    }

    /// The last successful backup's time, if any.
    pub fn last_success(&self) -> Option<Timestamp> {
        self.last_successful_time.as_deref()?.parse().ok()
    }

    /// Whether the last run failed (or the spec could not be acted on).
    pub fn failing(&self) -> bool {
        self.conditions
            .iter()
            .any(|c| c.type_ == CONDITION && c.status == "False")
    }
}

/// The time since which runs count: the last run's scheduled time, else the object's creation.
pub fn since(status: Option<&TenantBackupStatus>, created: Timestamp) -> Timestamp {
    status
        .and_then(|s| s.last_schedule_time.as_deref())
        .and_then(|t| t.parse().ok())
        .unwrap_or(created)
}

/// A parsed `spec.schedule`.
#[derive(Clone, Debug)]
pub struct Schedule(croner::Cron);

impl Schedule {
    /// Cron's five fields, or six with seconds first; no year field. The error is one line.
    pub fn parse(s: &str) -> Result<Schedule, String> {
        let fields = s.split_whitespace().count();
        if !(5..=6).contains(&fields) {
            return Err(format!(
                "schedule {s:?} has {fields} fields: cron takes 5 (minute hour day-of-month month day-of-week), or 6 with seconds first"
            ));
        }
        croner::parser::CronParser::builder()
            .seconds(croner::parser::Seconds::Optional)
            .year(croner::parser::Year::Disallowed)
            .build()
            .parse(s)
            .map(Schedule)
            .map_err(|e| format!("schedule {s:?} is not a cron schedule: {e}"))
    }

    /// The first time after `t` (not `t` itself) the schedule names.
    pub fn next_after(&self, t: Timestamp) -> Option<Timestamp> {
        let z = t.to_zoned(jiff::tz::TimeZone::UTC);
        self.0
            .find_next_occurrence(&z, false)
            .ok()
            .map(|z| z.timestamp())
    }

    /// The last time at or before `t` the schedule names.
    fn last_at_or_before(&self, t: Timestamp) -> Option<Timestamp> {
        let z = t.to_zoned(jiff::tz::TimeZone::UTC);
        self.0
            .find_previous_occurrence(&z, true)
            .ok()
            .map(|z| z.timestamp())
    }
}

/// What a TenantBackup's reconcile does now.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Due {
    /// Take the backup scheduled at `scheduled` (the latest time missed since the last run:
    /// runs missed while the reconciler was down are not all taken, as a CronJob does), then
    /// wait until `next`.
    Run {
        scheduled: Timestamp,
        next: Option<Timestamp>,
    },
    /// Nothing until `next` (`None`: the schedule names no later time).
    Wait { next: Option<Timestamp> },
}

/// Whether a run is due at `now`: the schedule's latest time at or before `now` that is after
/// `since` (the last run's scheduled time, or the TenantBackup's creation).
pub fn due(schedule: &Schedule, since: Timestamp, now: Timestamp) -> Due {
    let next = schedule.next_after(now);
    match schedule.last_at_or_before(now) {
        Some(t) if t > since => Due::Run { scheduled: t, next },
        _ => Due::Wait { next },
    }
}

/// The folder of a tenant's backups: `[prefix/]namespace/tenant/`.
pub fn folder(prefix: Option<&str>, namespace: &str, tenant: &str) -> String {
    match prefix {
        Some(p) => format!("{p}/{namespace}/{tenant}/"),
        None => format!("{namespace}/{tenant}/"),
    }
}

/// The name of the backup scheduled at `at`: `<tenant>-YYYYMMDDTHHMMSSZ.kamaji-backup`, so that
/// names sort by time.
pub fn file_name(tenant: &str, at: Timestamp) -> String {
    format!("{tenant}-{}{SUFFIX}", at.strftime("%Y%m%dT%H%M%SZ"))
}

/// Of `names` (file names in the tenant's folder), those past the newest `keep` of this
/// tenant's backups: oldest last. Names not written by [`file_name`] for `tenant` are never
/// returned (a folder may hold other files).
pub fn to_prune(tenant: &str, names: &[String], keep: u32) -> Vec<String> {
    let stamp_len = "YYYYMMDDTHHMMSSZ".len();
    let mut ours: Vec<&String> = names
        .iter()
        .filter(|n| {
            n.strip_prefix(tenant)
                .and_then(|r| r.strip_prefix('-'))
                .and_then(|r| r.strip_suffix(SUFFIX))
                .is_some_and(|s| {
                    s.len() == stamp_len
                        && s.bytes().enumerate().all(|(i, b)| match i {
                            8 => b == b'T',
                            15 => b == b'Z',
                            _ => b.is_ascii_digit(),
                        })
                })
        })
        .collect();
    ours.sort_unstable_by(|a, b| b.cmp(a));
    ours.dedup();
    let keep = usize::try_from(keep).unwrap_or(usize::MAX);
    ours.into_iter().skip(keep).cloned().collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ts(s: &str) -> Timestamp {
        s.parse().unwrap()
    }

    #[test]
    fn five_and_six_field_schedules_parse_and_others_say_why() {
        assert!(Schedule::parse("0 3 * * *").is_ok());
        assert!(Schedule::parse("*/5 * * * * *").is_ok());
        let e = Schedule::parse("0 3 * *").unwrap_err();
        assert!(e.contains("has 4 fields"), "{e}");
        let e = Schedule::parse("0 3 * * * * 2026").unwrap_err();
        assert!(e.contains("has 7 fields"), "{e}");
        let e = Schedule::parse("0 25 * * *").unwrap_err();
        assert!(e.contains("is not a cron schedule"), "{e}");
    }

    #[test]
    fn a_run_is_due_once_per_scheduled_time() {
        let s = Schedule::parse("0 3 * * *").unwrap();
        let created = ts("2026-12-01T10:00:00Z");
        // Before the first 03:00 after creation: wait until it.
        assert_eq!(
            due(&s, created, ts("2026-12-01T12:00:00Z")),
            Due::Wait {
                next: Some(ts("2026-12-02T03:00:00Z"))
            }
        );
        // Three days missed: one run, for the latest.
        assert_eq!(
            due(&s, created, ts("2026-12-04T05:00:00Z")),
            Due::Run {
                scheduled: ts("2026-12-04T03:00:00Z"),
                next: Some(ts("2026-12-05T03:00:00Z"))
            }
        );
        // That run done: nothing until the next.
        assert_eq!(
            due(&s, ts("2026-12-04T03:00:00Z"), ts("2026-12-04T05:00:00Z")),
            Due::Wait {
                next: Some(ts("2026-12-05T03:00:00Z"))
            }
        );
    }

    #[test]
    fn seconds_schedules_run_every_few_seconds() {
        let s = Schedule::parse("*/5 * * * * *").unwrap();
        assert_eq!(
            due(&s, ts("2026-12-01T10:00:00Z"), ts("2026-12-01T10:00:07Z")),
            Due::Run {
                scheduled: ts("2026-12-01T10:00:05Z"),
                next: Some(ts("2026-12-01T10:00:10Z"))
            }
        );
    }

    #[test]
    fn names_sort_by_time_and_only_ours_are_pruned() {
        let a = file_name("prod", ts("2026-12-01T03:00:00Z"));
        assert_eq!(a, "prod-20261201T030000Z.kamaji-backup");
        let b = file_name("prod", ts("2026-12-02T03:00:00Z"));
        let c = file_name("prod", ts("2026-12-03T03:00:00Z"));
        let names = vec![
            b.clone(),
            "notes.txt".to_string(),
            c.clone(),
            a.clone(),
            // Another tenant whose name starts the same.
            file_name("prod-2", ts("2026-11-01T03:00:00Z")),
            "prod-latest.kamaji-backup".to_string(),
        ];
        assert_eq!(to_prune("prod", &names, 2), vec![a.clone()]);
        assert_eq!(to_prune("prod", &names, 1), vec![b, a]);
        assert!(to_prune("prod", &names, 3).is_empty());
    }

    #[test]
    fn a_run_sets_the_times_and_the_condition() {
        let mut st = TenantBackupStatus::default();
        let rec = BackupRecord {
            location: "s3://b/ns/t/x".into(),
            keys: 10,
            objects: 3,
            bytes: 99,
            revision: 7,
        };
        let t0 = ts("2026-12-01T03:00:00Z");
        let now = ts("2026-12-01T03:00:02Z");
        st.ran(Some(2), t0, None, &Outcome::Written(rec.clone()), now);
        assert_eq!(st.last_success(), Some(now));
        assert!(!st.failing());
        assert_eq!(st.conditions[0].reason, reason::WRITTEN);
        assert!(st.conditions[0].message.contains("10 keys and 3 objects"));
        let later = ts("2026-12-02T03:00:01Z");
        st.ran(
            Some(2),
            ts("2026-12-02T03:00:00Z"),
            None,
            &Outcome::Failed("DataStore default does not answer".into()),
            later,
        );
        assert!(st.failing());
        // The last success and its record stay; the transition time moved.
        assert_eq!(st.last_success(), Some(now));
        assert_eq!(st.last_backup, Some(rec));
        assert_eq!(st.conditions[0].last_transition_time, later.to_string());
        assert_eq!(since(Some(&st), t0), ts("2026-12-02T03:00:00Z"));
        assert_eq!(since(None, t0), t0);
    }

    #[test]
    fn the_folder_takes_the_prefix() {
        assert_eq!(folder(Some("site/a"), "ns", "t"), "site/a/ns/t/");
        assert_eq!(folder(None, "ns", "t"), "ns/t/");
    }
}
