//! TenantBackup on the real Kamaji v1.0.0: the reconciler backs a live tenant up on a schedule to
//! a local S3-compatible server (s3s-fs, from crates.io) and to a directory standing for a
//! mounted claim, keeps the newest `retention`, reports a failing run as a condition and on
//! /metrics, and the file it wrote is one `kubectl kamaji restore` takes. In the live suite, so
//! it shares its testbed.

use std::io::Read;
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use crate::common::*;
use testbed::fixtures::run::assert_contains;

/// s3s-fs on a free port over `root`, killed on drop.
struct S3Server {
    child: Child,
    endpoint: String,
}

impl Drop for S3Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

async fn s3_server(root: &Path, access: &str, secret: &str) -> S3Server {
    let bins = testbed::build_bins("s3").expect("testbed/build-bins.sh s3");
    let port = free_port();
    let child = Command::new(bins.join("bin/s3s-fs"))
        .args(["--host", "127.0.0.1", "--port", &port.to_string()])
        .args(["--access-key", access, "--secret-key", secret])
        .arg(root)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("s3s-fs");
    let server = S3Server {
        child,
        endpoint: format!("http://127.0.0.1:{port}"),
    };
    wait_until("s3s-fs to listen", Duration::from_secs(20), || async {
        TcpStream::connect(("127.0.0.1", port))
            .map(|_| ())
            .map_err(|e| e.to_string())
    })
    .await;
    server
}

/// The backups of `tenant` under `dir` (`<dir>/<ns>/<tenant>/`), sorted.
fn files(dir: &Path, ns: &str, tenant: &str) -> Vec<String> {
    let mut v: Vec<String> = std::fs::read_dir(dir.join(ns).join(tenant))
        .map(|r| {
            r.filter_map(|e| e.ok())
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .filter(|n| n.ends_with(".kamaji-backup"))
                .collect()
        })
        .unwrap_or_default();
    v.sort();
    v
}

fn tenant_backup(name: &str, tenant: &str, schedule: &str, target: &str) -> String {
    format!(
        "apiVersion: ops.capi-kamaji.io/v1alpha1\nkind: TenantBackup\nmetadata:\n  name: {name}\nspec:\n  tenant: {tenant}\n  schedule: {schedule:?}\n  retention: 2\n  target:\n{target}"
    )
}

fn jsonpath(tb: &testbed::Testbed, ns: &str, name: &str, path: &str) -> String {
    let o = Command::new(KUBECTL)
        .args(["get", "tenantbackup", name, "-n", ns, "-o"])
        .arg(format!("jsonpath={path}"))
        .env("KUBECONFIG", &tb.kubeconfig)
        .output()
        .unwrap();
    String::from_utf8_lossy(&o.stdout).into_owned()
}

/// Waits until the TenantBackup's condition has `status`; returns its message.
async fn condition(tb: &testbed::Testbed, ns: &str, name: &str, status: &str) -> String {
    let path = "{.status.conditions[?(@.type==\"LastBackupSucceeded\")].status}/{.status.conditions[?(@.type==\"LastBackupSucceeded\")].reason}/{.status.conditions[?(@.type==\"LastBackupSucceeded\")].message}";
    wait_until(
        &format!("TenantBackup {name}'s LastBackupSucceeded to be {status}"),
        Duration::from_secs(90),
        || async {
            let got = jsonpath(tb, ns, name, path);
            match got.split_once('/') {
                Some((s, rest)) if s == status => Ok(rest.to_string()),
                _ => Err(got),
            }
        },
    )
    .await
}

fn metrics(rec: &Reconciler) -> String {
    rec.http_get("/metrics").unwrap_or_default()
}

#[tokio::test]
async fn tenant_backups_run_on_schedule_prune_by_retention_and_report_failures() {
    let tb = testbed_real().await;
    let (client, ns) = tb.namespace("tbk").await;
    // The TenantBackup CRD only (kubectl kamaji install applies it with the others): the live
    // suite's other reconcilers run no ops controllers.
    let crd: Vec<_> = kcore::ops::crds()
        .into_iter()
        .filter(|c| c.spec.names.kind == "TenantBackup")
        .collect();
    testbed::fixtures::crds::apply_and_wait(&client, &crd, "kubectl-kamaji-tests").await;
    let claim_dir = tb.dir.join(format!("{ns}-claim"));
    std::fs::create_dir_all(&claim_dir).unwrap();
    let bin = testbed::fixtures::reconciler::binary_next_to(env!("CARGO_BIN_EXE_kubectl-kamaji"));
    let volume = format!("backups={}", claim_dir.display());
    let rec = Reconciler::start(
        &bin,
        &tb.kubeconfig,
        &ns,
        tb.dir.join(format!("reconciler-{ns}.log")),
        &["-v", "--backup-volume", &volume],
        &[],
    );
    let name = "sb";
    let tenant_kc = live_tenant(tb, &ns, name);
    admin_may_write(&tenant_kc).await;
    write_configmap(&tenant_kc, "before-backup", "kept");

    let s3_root = tempfile::tempdir().unwrap();
    std::fs::create_dir(s3_root.path().join("tenants")).unwrap();
    let s3 = s3_server(s3_root.path(), "AKIDTEST", "secret-key-1").await;
    ok_kubectl(&kubectl_apply(
        tb,
        &ns,
        "apiVersion: v1\nkind: Secret\nmetadata:\n  name: s3-creds\nstringData:\n  accessKeyID: AKIDTEST\n  secretAccessKey: secret-key-1\n",
        &[],
    ));

    // The API server refuses a target with both destinations, or neither.
    let both = tenant_backup(
        "both",
        name,
        "* * * * *",
        &format!(
            "    s3: {{endpoint: {}, bucket: tenants, credentialsSecret: s3-creds}}\n    persistentVolumeClaim: {{claimName: backups}}\n",
            s3.endpoint
        ),
    );
    let o = kubectl_apply(tb, &ns, &both, &[]);
    assert!(!o.status.success());
    assert_contains(
        &String::from_utf8_lossy(&o.stderr),
        "set exactly one of s3 and persistentVolumeClaim",
    );

    // Every 3 seconds, to S3 and to the claim, keeping 2.
    let to_s3 = tenant_backup(
        "to-s3",
        name,
        "*/3 * * * * *",
        &format!(
            "    s3: {{endpoint: {}, bucket: tenants, prefix: site-a, credentialsSecret: s3-creds}}\n",
            s3.endpoint
        ),
    );
    let to_claim = tenant_backup(
        "to-claim",
        name,
        "*/3 * * * * *",
        "    persistentVolumeClaim: {claimName: backups}\n",
    );
    let unmounted = tenant_backup(
        "unmounted",
        name,
        "*/3 * * * * *",
        "    persistentVolumeClaim: {claimName: elsewhere}\n",
    );
    let bad_schedule = tenant_backup(
        "bad-schedule",
        name,
        "every day",
        "    persistentVolumeClaim: {claimName: backups}\n",
    );
    for y in [&to_s3, &to_claim, &unmounted, &bad_schedule] {
        ok_kubectl(&kubectl_apply(tb, &ns, y, &[]));
    }

    let s3_dir = s3_root.path().join("tenants/site-a");
    // Two runs, then a third: still two files, the oldest gone (the retention pruned it).
    let first_two = wait_until(
        "two scheduled runs to S3",
        Duration::from_secs(120),
        || async {
            let f = files(&s3_dir, &ns, name);
            if f.len() == 2 {
                Ok(f)
            } else {
                Err(format!("{f:?}\n{}", rec.log_tail()))
            }
        },
    )
    .await;
    wait_until(
        "a later run to replace the oldest",
        Duration::from_secs(60),
        || async {
            let now = files(&s3_dir, &ns, name);
            if now.len() == 2 && now[0] != first_two[0] {
                Ok(())
            } else {
                Err(format!("{now:?}"))
            }
        },
    )
    .await;
    let message = condition(tb, &ns, "to-s3", "True").await;
    assert_contains(&message, "BackupWritten/");
    assert_contains(
        &message,
        &format!("s3://tenants/site-a/{ns}/{name}/{name}-"),
    );
    let claim_files = wait_until(
        "two backups on the claim",
        Duration::from_secs(60),
        || async {
            let f = files(&claim_dir, &ns, name);
            if f.len() == 2 {
                Ok(f)
            } else {
                Err(format!("{f:?}"))
            }
        },
    )
    .await;
    {
        use std::os::unix::fs::PermissionsExt;
        let p = claim_dir.join(&ns).join(name).join(&claim_files[0]);
        let mode = std::fs::metadata(&p).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o600, "a backup holds the tenant's keys");
    }

    // The claim not mounted and the schedule that is no cron say so, and nothing runs.
    assert_contains(
        &condition(tb, &ns, "unmounted", "False").await,
        "PersistentVolumeClaim elsewhere is not mounted into the reconciler",
    );
    let bad = condition(tb, &ns, "bad-schedule", "False").await;
    assert_contains(&bad, "InvalidSchedule/");
    assert_contains(&bad, "\"every day\" has 2 fields");

    // A file the reconciler wrote is whole and restorable: restore reads it end to end (the
    // checksum, every line) and plans it under another name.
    let newest = s3_dir
        .join(&ns)
        .join(name)
        .join(files(&s3_dir, &ns, name).last().unwrap());
    let copy: PathBuf = tb.dir.join(format!("{ns}-scheduled.kamaji-backup"));
    std::fs::copy(&newest, &copy).unwrap();
    let mut text = String::new();
    flate2::read::GzDecoder::new(std::fs::File::open(&copy).unwrap())
        .read_to_string(&mut text)
        .unwrap();
    let manifest: serde_json::Value = serde_json::from_str(text.lines().last().unwrap()).unwrap();
    assert!(
        manifest["manifest"]["keys"].as_u64().unwrap() > 50,
        "{}",
        manifest
    );
    assert_eq!(
        manifest["manifest"]["createdBy"]
            .as_str()
            .map(|s| s.starts_with("kamaji-reconciler")),
        Some(true),
        "{manifest}"
    );
    let plan = ok(&kamaji(
        tb,
        &ns,
        &[
            "restore",
            copy.to_str().unwrap(),
            "--new-name",
            "sb-copy",
            "--dry-run=client",
        ],
    ));
    assert_contains(&plan, "sb-copy");

    // /metrics: a success time for each working TenantBackup, 1 for the failing ones.
    let m = metrics(&rec);
    let success = format!(
        "kamaji_reconciler_tenant_backup_last_success_timestamp_seconds{{namespace=\"{ns}\",tenantbackup=\"to-s3\"}} "
    );
    let line = m
        .lines()
        .find(|l| l.starts_with(&success))
        .unwrap_or_else(|| panic!("{m}"));
    assert!(
        line.rsplit(' ').next().unwrap().parse::<i64>().unwrap() > 0,
        "{line}"
    );
    assert_contains(
        &m,
        &format!(
            "kamaji_reconciler_tenant_backup_failing{{namespace=\"{ns}\",tenantbackup=\"unmounted\"}} 1"
        ),
    );
    assert_contains(
        &m,
        &format!(
            "kamaji_reconciler_tenant_backup_interval_seconds{{namespace=\"{ns}\",tenantbackup=\"to-s3\"}} 3"
        ),
    );

    // Wrong credentials: the next run fails, said as a condition and on /metrics; the files
    // written before stay.
    ok_kubectl(&kubectl_apply(
        tb,
        &ns,
        "apiVersion: v1\nkind: Secret\nmetadata:\n  name: s3-creds\nstringData:\n  accessKeyID: AKIDTEST\n  secretAccessKey: wrong\n",
        &[],
    ));
    let failed = condition(tb, &ns, "to-s3", "False").await;
    assert_contains(&failed, "BackupFailed/");
    assert_contains(&failed, "403");
    wait_until("/metrics to show the failure", Duration::from_secs(30), || async {
        let m = metrics(&rec);
        let want = format!("kamaji_reconciler_tenant_backup_failing{{namespace=\"{ns}\",tenantbackup=\"to-s3\"}} 1");
        if m.contains(&want) { Ok(()) } else { Err(m) }
    })
    .await;
    assert_eq!(files(&s3_dir, &ns, name).len(), 2);

    // A TenantBackup deleted leaves /metrics.
    let o = Command::new(KUBECTL)
        .args(["delete", "tenantbackup", "unmounted", "-n", &ns, "--wait"])
        .env("KUBECONFIG", &tb.kubeconfig)
        .output()
        .unwrap();
    ok_kubectl(&o);
    wait_until(
        "the deleted TenantBackup's series to go",
        Duration::from_secs(60),
        || async {
            let m = metrics(&rec);
            if m.contains("tenantbackup=\"unmounted\"") {
                Err(m)
            } else {
                Ok(())
            }
        },
    )
    .await;
}

fn ok_kubectl(o: &std::process::Output) {
    assert!(
        o.status.success(),
        "kubectl: {}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    );
}
