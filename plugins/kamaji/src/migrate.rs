//! `kubectl kamaji migrate CONTROL_PLANE --to DATASTORE [--wait] [--timeout] [--yes]
//! [--dry-run=client|server]`: moves a control plane's data to another DataStore with Kamaji's
//! own migration. Plan, preflight and progress: `kcore::kamaji::migrate`.
//!
//! parse → read (the control plane, the DataStores, Kamaji's Job, the two DataStores dialled
//! from here) → plan (the preflight) → ask → write (the origin recorded on the
//! TenantControlPlane, then the DataStore name on the KamajiControlPlane, or on a standalone
//! TenantControlPlane) → follow Kamaji's status and Job → the tenant serves writes again → the
//! copy Kamaji leaves on the origin is removed. A re-run with the same `--to` resumes from
//! where the last one stopped.

use std::cell::Cell;
use std::time::{Duration, Instant};

/// How long a tenant Ready on the target may refuse writes before Kamaji is nudged (and again).
const NUDGE_AFTER: Duration = Duration::from_secs(5);

use clap::Args as ClapArgs;
use cli::{DryRun, DryRunFlag, KubeFlags, parse_duration};
use k8s_openapi::api::batch::v1::Job;
use kclient::discovery::ServerApis;
use kclient::error::Error;
use kclient::etcd;
use kclient::render::{self, Poll};
use kcore::kamaji::migrate::{
    self as plan, DataStore, MigratePlan, MigrationProgress, Preflight, Reach, Stage, Writes,
};
use kube::api::{Api, ListParams, PostParams};
use serde_json::Value;

use crate::common::control_plane::{self, ControlPlane};
use crate::common::datastores::{credentials, datastores, reach};
use crate::common::tenant_kubeconfig::tenant_admin;
use crate::common::writes;

#[derive(ClapArgs, Clone, Debug)]
#[command(
    after_help = "Kamaji copies the data with its migration Job and freezes the tenant (writes are refused) until its API server runs on the target. Re-run the same command to follow a migration an interrupted --wait left under way."
)]
#[command(mut_arg("dry-run", |a| a.help("client: show the plan after the preflight, change nothing; server: also send the write with dryRun=All")))]
pub struct Args {
    /// The KamajiControlPlane, or a standalone TenantControlPlane
    #[arg(value_name = "CONTROL_PLANE")]
    pub name: String,
    /// The DataStore to move the data to (same driver; kubectl kamaji datastores lists them)
    #[arg(long, value_name = "DATASTORE")]
    pub to: String,
    /// Follow the migration until the tenant serves writes from the target and the origin's copy is removed
    #[arg(long)]
    pub wait: bool,
    #[arg(long, value_parser = parse_duration, default_value = "10m", value_name = "DURATION")]
    pub timeout: Duration,
    /// Do not ask (needed without a terminal)
    #[arg(short = 'y', long)]
    pub yes: bool,
    #[command(flatten)]
    pub dry_run: DryRunFlag,
    #[command(flatten)]
    pub kube: KubeFlags,
}

pub async fn run(args: &Args) -> Result<(), Error> {
    kcore::names::check_object_name("DataStore", &args.to)?;
    let conn = args.kube.connect().await?;
    let apis = ServerApis::discover(&conn).await?;
    let cp = control_plane::resolve(&conn, &apis, &args.name).await?;
    let tcp = cp.tcp.clone().ok_or_else(|| Error::Other {
        message: format!("{} has no TenantControlPlane yet", cp.name),
        hint: Some(format!(
            "wait until the reconciler creates it (kubectl kamaji status {})",
            cp.name
        )),
    })?;
    let stores = datastores(&conn, &apis).await?;
    let stage = plan::stage(&cp.name, cp.kcp.as_ref(), &tcp, &args.to)?;
    if args.dry_run.is_dry() && !matches!(stage, Stage::Fresh { .. }) {
        // Following and cleaning up write (Kamaji's Job status, the origin's keys): not in a dry run.
        render::line(&format!(
            "{} is migrating or migrated to {}; nothing followed or removed{}",
            cp.name,
            args.to,
            args.dry_run.suffix()
        ));
        return Ok(());
    }
    // The origin, and whether Kamaji still has work to follow before the clean-up.
    let (source, under_way) = match stage {
        Stage::Fresh { source } => {
            let m = preflight(&conn, &apis, &cp, &tcp, &stores, &source, &args.to).await?;
            for l in m.lines(&cp.name) {
                render::info(&l);
            }
            for n in &m.notes {
                render::warn(n);
            }
            if args.dry_run == DryRun::Client {
                render::line(&format!(
                    "{} migration to {} planned{}",
                    cp.name,
                    m.target,
                    args.dry_run.suffix()
                ));
                return Ok(());
            }
            if !args.yes && !args.dry_run.is_dry() {
                // Only a migration that starts asks; following one under way does not.
                render::require_terminal(
                    "migrate",
                    "pass --yes (--dry-run=client shows the plan without a question)".to_string(),
                )?;
                if !render::confirm(&format!("Migrate {} to {}?", cp.name, m.target))? {
                    return Err(Error::other("aborted: nothing was changed"));
                }
            }
            start(&conn, &apis, &cp, &m, *args.dry_run).await?;
            if args.dry_run.is_dry() {
                return Ok(());
            }
            (Some(m.source), true)
        }
        Stage::UnderWay { source } => {
            render::info(&format!(
                "a migration of {} to {} is under way; following it",
                cp.name, args.to
            ));
            (source, true)
        }
        Stage::Done { source } => (source, false),
    };
    if under_way {
        if !args.wait {
            render::line(&format!(
                "{} is migrating to {}; follow it with kubectl kamaji migrate {} --to {} --wait",
                cp.name, args.to, cp.name, args.to
            ));
            return Ok(());
        }
        follow(&conn, &apis, &cp, &args.to, args.timeout).await?;
    }
    finish(
        &conn,
        &apis,
        &cp,
        &tcp,
        &stores,
        source.as_deref(),
        &args.to,
    )
    .await
}

/// Kamaji's migration Job of the tenant, in whatever namespace Kamaji runs.
async fn kamaji_job(conn: &cli::Conn, tcp: &Value) -> Result<Option<Value>, Error> {
    let uid = tcp["metadata"]["uid"].as_str().unwrap_or_default();
    let name = plan::job_name(uid);
    let jobs: Api<Job> = Api::all(conn.client.clone());
    let list = jobs
        .list(&ListParams::default().fields(&format!("metadata.name={name}")))
        .await
        .map_err(|e| conn.error(e, &kclient::error::Op::new("list", "batch", "jobs", "Job")))?;
    Ok(list
        .items
        .into_iter()
        .next()
        .and_then(|j| serde_json::to_value(j).ok()))
}

async fn preflight(
    conn: &cli::Conn,
    apis: &ServerApis,
    cp: &ControlPlane,
    tcp: &Value,
    stores: &[DataStore],
    source: &str,
    target: &str,
) -> Result<MigratePlan, Error> {
    let cluster = control_plane::owning_cluster(conn, apis, cp).await?;
    let topology_class = cluster.as_ref().and_then(|c| {
        let t = kcore::kamaji::plan::topology::topology(c)?;
        t["classRef"]["name"]
            .as_str()
            .or(t["class"].as_str())
            .map(str::to_string)
    });
    let prefix = plan::etcd_prefix(tcp);
    let find = |n: &str| stores.iter().find(|d| d.name == n);
    let job = kamaji_job(conn, tcp).await?;
    let (source_reach, target_reach) = (
        reach(conn, find(source), &prefix).await?,
        reach(conn, find(target), &prefix).await?,
    );
    Ok(plan::preflight(&Preflight {
        name: &cp.name,
        namespace: &cp.namespace,
        tcp,
        kcp: cp.kcp.as_ref(),
        topology_class: topology_class.as_deref(),
        stores,
        source,
        target,
        job: job.as_ref(),
        source_reach,
        target_reach,
    })?)
}

/// The writes that start Kamaji's migration: the origin on the TenantControlPlane first (a
/// re-run finds it there), then the DataStore name.
async fn start(
    conn: &cli::Conn,
    apis: &ServerApis,
    cp: &ControlPlane,
    m: &MigratePlan,
    dry_run: DryRun,
) -> Result<(), Error> {
    let tcp_ar = control_plane::tcp_resource(apis)?;
    let write = kclient::api::Write {
        manager: kcore::kamaji::create::FIELD_MANAGER,
        dry_run: dry_run.server(),
        force: false,
    };
    let patch = plan::target_patch(&m.writes, &m.target, &m.source);
    match m.writes {
        Writes::KamajiControlPlane => {
            let kcp_ar = control_plane::kcp_resource(apis)?;
            kclient::api::merge_patch(
                conn,
                &tcp_ar,
                &cp.namespace,
                &cp.tcp_name(),
                &plan::source_patch(&m.source),
                write,
            )
            .await?;
            kclient::api::merge_patch(conn, &kcp_ar, &cp.namespace, &cp.name, &patch, write)
                .await?;
        }
        Writes::TenantControlPlane => {
            kclient::api::merge_patch(conn, &tcp_ar, &cp.namespace, &cp.tcp_name(), &patch, write)
                .await?;
        }
    }
    render::line(&format!(
        "{} migration to {} started{}",
        cp.name,
        m.target,
        dry_run.suffix()
    ));
    Ok(())
}

/// Follows Kamaji until the tenant runs on `target`, Ready, and takes a write again.
async fn follow(
    conn: &cli::Conn,
    apis: &ServerApis,
    cp: &ControlPlane,
    target: &str,
    timeout: Duration,
) -> Result<(), Error> {
    let started = std::time::Instant::now();
    // When the tenant, Ready on the target, still refused a write, and when it was nudged.
    let frozen_since: Cell<Option<Instant>> = Cell::new(None);
    let nudged: Cell<Option<Instant>> = Cell::new(None);
    let writable: Cell<u32> = Cell::new(0);
    let (frozen_since, nudged, writable) = (&frozen_since, &nudged, &writable);
    render::wait_until(
        &format!("waiting for {} to run on {target}", cp.name),
        timeout,
        Duration::from_millis(500),
        || async move {
            let now = control_plane::resolve(conn, apis, &cp.name).await?;
            let Some(tcp) = now.tcp.as_ref() else {
                return Err(Error::other(format!("{}'s TenantControlPlane is gone", cp.name)));
            };
            let job = kamaji_job(conn, tcp).await?;
            if let Some(j) = &job
                && let Some(patch) = plan::complete_first(j)
            {
                unstick(conn, j, &patch).await?;
            }
            let p = MigrationProgress::of(tcp, job.as_ref(), target);
            match &p {
                MigrationProgress::Failed { job, .. } => Err(Error::Other {
                    message: p.line(&cp.name, target),
                    hint: Some(format!("kubectl -n <kamaji namespace> logs job/{job} shows why; the tenant stays frozen until Kamaji's Job succeeds")),
                }),
                // Three answers in a row: a tenant API server Kamaji is replacing may still
                // answer a request for a moment.
                MigrationProgress::Ready if serves_writes(conn, &now).await => {
                    writable.set(writable.get().saturating_add(1));
                    Ok(if writable.get() >= 3 {
                        Poll::Ready(())
                    } else {
                        Poll::Pending(format!("{} runs on {target} and takes writes", cp.name))
                    })
                }
                MigrationProgress::Ready => {
                    writable.set(0);
                    let since = *frozen_since.get().get_or_insert_with(Instant::now);
                    frozen_since.set(Some(since));
                    if since.elapsed() >= NUDGE_AFTER
                        && nudged.get().is_none_or(|t| t.elapsed() >= NUDGE_AFTER)
                    {
                        if nudged.get().is_none() {
                            render::info(&format!(
                                "{} is Ready on {target} and still frozen: Kamaji's tenant controller missed the change; a TenantControlPlane event makes it look again",
                                cp.name
                            ));
                        }
                        let tcp_ar = control_plane::tcp_resource(apis)?;
                        let patch = plan::nudge_patch(jiff::Timestamp::now().as_second());
                        writes::merge_patch(conn, &tcp_ar, &cp.namespace, &cp.tcp_name(), &patch).await?;
                        nudged.set(Some(Instant::now()));
                    }
                    Ok(Poll::Pending(format!("{} runs on {target}; waiting for it to take writes again", cp.name)))
                }
                _ => Ok(Poll::Pending(p.line(&cp.name, target))),
            }
        },
    )
    .await?;
    render::line(&format!(
        "{} runs on DataStore {target} and takes writes again ({}s)",
        cp.name,
        started.elapsed().as_secs()
    ));
    Ok(())
}

/// Puts `Complete` first among the conditions of Kamaji's finished migration Job, which Kamaji
/// v1.0.0 needs to see it finished ([`plan::complete_first`]); says so.
async fn unstick(conn: &cli::Conn, job: &Value, patch: &Value) -> Result<(), Error> {
    let (ns, name) = (
        job["metadata"]["namespace"].as_str().unwrap_or_default(),
        job["metadata"]["name"].as_str().unwrap_or_default(),
    );
    render::info(&format!(
        "Job {ns}/{name} is complete; its Complete condition goes first, where Kamaji v1.0.0 looks for it (fixed after v1.0.0, clastix/kamaji#706)"
    ));
    let ar = kube::api::ApiResource::erase::<Job>(&());
    let write = kclient::api::Write {
        manager: kcore::kamaji::create::FIELD_MANAGER,
        dry_run: false,
        force: false,
    };
    kclient::api::merge_patch_status(conn, &ar, ns, name, patch, write).await?;
    Ok(())
}

/// The tenant has no freeze webhook (`kamaji-freeze`) any more, and a server dry run of a
/// ConfigMap in it passes: the dry run goes through every admission webhook, so it is refused
/// while a freeze is in place, and stores nothing.
async fn serves_writes(conn: &cli::Conn, cp: &ControlPlane) -> bool {
    let Ok(admin) = tenant_admin(conn, cp).await else {
        return false;
    };
    let hooks: Api<k8s_openapi::api::admissionregistration::v1::ValidatingWebhookConfiguration> =
        Api::all(admin.client.clone());
    if !matches!(hooks.get_opt(plan::FREEZE_WEBHOOK).await, Ok(None)) {
        return false;
    }
    let cms: Api<k8s_openapi::api::core::v1::ConfigMap> = Api::namespaced(admin.client, "default");
    let probe: k8s_openapi::api::core::v1::ConfigMap =
        match serde_json::from_value(serde_json::json!({
            "metadata": {"name": "kubectl-kamaji-migrate-probe"}
        })) {
            Ok(p) => p,
            Err(_) => return false,
        };
    let pp = PostParams {
        dry_run: true,
        field_manager: Some(kcore::kamaji::create::FIELD_MANAGER.into()),
    };
    match cms.create(&pp, &probe).await {
        Ok(_) => true,
        // It exists already (someone made one): the write path answered all the same.
        Err(kube::Error::Api(s)) => s.code == 409,
        Err(_) => false,
    }
}

/// Removes the copy Kamaji left on the origin, then forgets the origin.
async fn finish(
    conn: &cli::Conn,
    apis: &ServerApis,
    cp: &ControlPlane,
    tcp: &Value,
    stores: &[DataStore],
    source: Option<&str>,
    target: &str,
) -> Result<(), Error> {
    let Some(source) = source.filter(|s| *s != target) else {
        render::line(&format!(
            "{} runs on DataStore {target}; nothing is left to remove",
            cp.name
        ));
        return Ok(());
    };
    let prefix = plan::etcd_prefix(tcp);
    let find = |n: &str| stores.iter().find(|d| d.name == n);
    // The origin's copy goes only once the target is seen holding the tenant's keys.
    let on_target = match reach(conn, find(target), &prefix).await? {
        Reach::Answered { tenant_keys } => tenant_keys,
        _ => 0,
    };
    let mut removed = None;
    if on_target > 0
        && let Some(d) = find(source)
        && let Some(creds) = credentials(conn, d).await?
        && let Ok(e) = etcd::dial(&d.endpoints, &creds).await
    {
        removed = Some(e.delete(&prefix).await?);
    }
    let Some(n) = removed else {
        // Kamaji's SQL and NATS drivers leave the origin's copy too: its schema, not a prefix.
        let how = match find(source) {
            Some(d) if !d.is_etcd() => format!(
                "drop the schema {} there ({} driver)",
                prefix.trim_matches('/'),
                d.driver
            ),
            _ => format!("where it is reachable: etcdctl del --prefix {prefix}"),
        };
        render::warn(&format!(
            "the copy of {}'s data on DataStore {source} could not be removed from here; remove it {how}",
            cp.name
        ));
        return Ok(());
    };
    let tcp_ar = control_plane::tcp_resource(apis)?;
    writes::merge_patch(
        conn,
        &tcp_ar,
        &cp.namespace,
        &cp.tcp_name(),
        &plan::finished_patch(),
    )
    .await?;
    render::line(&format!(
        "DataStore {source} no longer holds {}'s data ({n} keys under {prefix} removed)",
        cp.name
    ));
    Ok(())
}
