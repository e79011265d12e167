//! `kubectl capi hosts cordon|uncordon|drain|retire HOST`: host maintenance in a BYOH pool.
//!
//! parse (the host name) → find the host (one field-selected LIST over every namespace: BYOH
//! picks hosts anywhere) → plan (`kcore::plan::hosts::maintenance`, pure) → apply → one line.
//!
//! BYOH's webhook admits ByoHost writes only from the host's own agent, so the label and
//! annotation are written as that user (`byoh:host:<name>` in group `byoh:hosts`, the identity
//! BYOH's RBAC lets edit ByoHosts), which needs the right to impersonate it, as cluster-admin
//! has. Drain deletes the machine on the host after checking that a spare host can take its
//! replacement, waits until the host is released, cordons it at once (before another machine
//! can claim it), and waits until the MachineDeployment is back to its replicas. Before the
//! delete it marks the host as draining (`kcore::plan::hosts::maintenance::DRAIN_ANNOTATION`),
//! so a drain that times out or is interrupted is finished by a re-run: it resumes the wait
//! and cordons the host once released.
//!
//! Retire is drain for a host that stopped (`Unreachable`: its Node stopped reporting): the same
//! mark, Machine delete and wait, but nobody is there to clean up, so once BYOH's controller let
//! go of the host (its ByoMachine is gone) retire writes what the agent would have
//! (`maintenance::plan_agent_release`), cordoned, and says what is left to do on the hardware.

use std::time::Duration;

use clap::Args as ClapArgs;
use cli::KubeFlags;
use kclient::conn::Conn;
use kclient::discovery::ServerApis;
use kclient::error::Error;
use kclient::render::Poll;
use kcore::json;
use kcore::plan::hosts::maintenance::{self, HostChange};
use serde_json::Value;

use crate::common::cluster::ClusterHandle;
use crate::common::cluster_parts::fetch;
use crate::common::host_pool::{find_host, machine_on_host};
use crate::common::writes::FIELD_MANAGER;

use super::confirm;

#[derive(ClapArgs, Clone, Debug)]
pub struct CordonArgs {
    /// The ByoHost
    #[arg(value_name = "HOST")]
    pub host: String,
    #[command(flatten)]
    pub kube: KubeFlags,
}

/// What drain and retire both take: the host, how long to wait, and `--yes` (each verb says
/// what it does without asking: `mut_arg("yes", ...)`).
#[derive(ClapArgs, Clone, Debug)]
pub struct JobFlags {
    /// The ByoHost
    #[arg(value_name = "HOST")]
    pub host: String,
    /// How long to wait for the host's release and the replacement
    #[arg(long, value_name = "DURATION", default_value = "10m", value_parser = cli::parse_duration)]
    pub timeout: Duration,
    #[arg(long, short = 'y')]
    pub yes: bool,
}

#[derive(ClapArgs, Clone, Debug)]
#[command(
    mut_arg("yes", |a| a.help("Drain without asking (needed without a terminal)")),
    after_help = "Drain moves the worker machine on HOST to a spare host: it checks that a free host
matches the machine's ByoMachineTemplate, deletes the Machine (its MachineSet creates a
replacement, which BYOH places on a free host), waits until HOST is released, cordons it, and
waits until the MachineDeployment is back to its replicas. Afterwards: kubectl capi hosts uncordon HOST.
A drain that times out or is interrupted leaves HOST marked as draining: run it again to finish
(it waits for the release and cordons HOST); uncordon calls it off."
)]
pub struct DrainArgs {
    #[command(flatten)]
    pub job: JobFlags,
    #[command(flatten)]
    pub kube: KubeFlags,
}

#[derive(ClapArgs, Clone, Debug)]
#[command(
    mut_arg("yes", |a| a.help("Retire without asking (needed without a terminal)")),
    after_help = "Retire is for a host that stopped (kubectl capi hosts shows it Unreachable: its
Node stopped reporting). It deletes the Machine on HOST (its MachineSet creates a replacement,
which BYOH places on a free matching host), waits until BYOH's controller lets go of HOST,
then does what HOST's agent would have done on release (clears its machine reference, the
labels and annotations BYOH set) and cordons it, so BYOH never picks it again; it waits until
the MachineDeployment is back to its replicas. The host itself is not reset: do that on the
hardware before kubectl capi hosts uncordon HOST. A host whose Node still reports is refused
(drain it) unless --force. Interrupted, a re-run finishes."
)]
pub struct RetireArgs {
    #[command(flatten)]
    pub job: JobFlags,
    /// Retire a host that does not read Unreachable (its Node reports, or it is stuck releasing)
    #[arg(long)]
    pub force: bool,
    #[command(flatten)]
    pub kube: KubeFlags,
}

/// A drain or a retire: what both take from their flags.
struct Job<'a> {
    host: &'a str,
    timeout: Duration,
    yes: bool,
    kube: &'a KubeFlags,
    /// Retire: the host's agent is gone, so its release is written here.
    retire: bool,
    /// Retire `--force`: a host that does not read Unreachable too.
    force: bool,
}

impl<'a> Job<'a> {
    fn drain(a: &'a DrainArgs) -> Self {
        Job::new(&a.job, &a.kube, false, false)
    }
    fn retire(a: &'a RetireArgs) -> Self {
        Job::new(&a.job, &a.kube, true, a.force)
    }
    fn new(flags: &'a JobFlags, kube: &'a KubeFlags, retire: bool, force: bool) -> Self {
        Job {
            host: &flags.host,
            timeout: flags.timeout,
            yes: flags.yes,
            kube,
            retire,
            force,
        }
    }
    fn verb(&self) -> &'static str {
        if self.retire { "retire" } else { "drain" }
    }
}

struct Found {
    conn: Conn,
    host_ar: kube::discovery::ApiResource,
    /// BYOH's ByoMachines (served with ByoHosts).
    byo_machine_ar: Option<kube::discovery::ApiResource>,
    host: Value,
}

async fn find(kube: &KubeFlags, name: &str) -> Result<Found, Error> {
    kcore::names::check_object_name("host", name)?;
    let conn = kube.connect().await?;
    let apis = ServerApis::discover(&conn).await?;
    let host_ar = super::byo_host_resource(&apis, &conn)?;
    let ns = conn.namespace_explicit.then(|| conn.namespace.clone());
    let host = find_host(&conn, &host_ar, name, ns.as_deref()).await?;
    let byo_machine_ar = apis.provider_kind(kcore::groups::INFRASTRUCTURE_GROUP, "ByoMachine");
    Ok(Found {
        conn,
        host_ar,
        byo_machine_ar,
        host,
    })
}

/// A connection as host `name`'s own agent (the only writer BYOH's webhook admits).
async fn agent_conn(kube: &KubeFlags, name: &str) -> Result<Conn, Error> {
    let (user, groups) = maintenance::agent_identity(name);
    let mut opts = kube.options();
    opts.as_user = Some(user);
    opts.as_group = groups;
    opts.connect().await
}

/// Writes a merge patch to the host as its own agent (the only writer BYOH's webhook admits).
async fn patch_as_agent(
    kube: &KubeFlags,
    host_ar: &kube::discovery::ApiResource,
    host: &Value,
    patch: &Value,
) -> Result<(), Error> {
    let name = json::name(host);
    let agent = agent_conn(kube, name).await?;
    let w = kclient::api::Write {
        manager: FIELD_MANAGER,
        dry_run: false,
        force: false,
    };
    kclient::api::merge_patch(&agent, host_ar, json::namespace(host), name, patch, w).await?;
    Ok(())
}

fn now() -> String {
    jiff::Timestamp::now()
        .strftime("%Y-%m-%dT%H:%M:%SZ")
        .to_string()
}

pub async fn cordon(args: &CordonArgs) -> Result<(), Error> {
    let f = find(&args.kube, &args.host).await?;
    let reason = format!("cordoned by kubectl capi hosts cordon at {}", now());
    let change = maintenance::plan_cordon(&f.host, &reason).map_err(|e| Error::other(e.0))?;
    apply_change(&args.kube, &f, change, "cordoned").await
}

pub async fn uncordon(args: &CordonArgs) -> Result<(), Error> {
    let f = find(&args.kube, &args.host).await?;
    let change = maintenance::plan_uncordon(&f.host).map_err(|e| Error::other(e.0))?;
    apply_change(&args.kube, &f, change, "uncordoned").await
}

async fn apply_change(
    kube: &KubeFlags,
    f: &Found,
    change: HostChange,
    done: &str,
) -> Result<(), Error> {
    let shown = format!(
        "byohost.infrastructure.cluster.x-k8s.io/{}",
        json::name(&f.host)
    );
    match change {
        HostChange::Unchanged => kclient::render::line(&format!("{shown} already {done}")),
        HostChange::Patch(p) => {
            patch_as_agent(kube, &f.host_ar, &f.host, &p).await?;
            kclient::render::line(&format!("{shown} {done}"));
        }
    }
    Ok(())
}

pub async fn drain(args: &DrainArgs) -> Result<(), Error> {
    carry_out(&Job::drain(args)).await
}

pub async fn retire(args: &RetireArgs) -> Result<(), Error> {
    carry_out(&Job::retire(args)).await
}

/// A drain or a retire, from the host's read to the lines that say it is done: one under way is
/// resumed, else one is started ([`fresh`]). A host cordoned with none under way has nothing
/// left to do.
async fn carry_out(job: &Job<'_>) -> Result<(), Error> {
    let name = job.host;
    let f = find(job.kube, name).await?;
    let resumes = maintenance::drain_resumes(&f.host);
    let done = if job.retire { "released" } else { "drained" };
    if maintenance::is_cordoned(&f.host) && !resumes {
        kclient::render::line(&format!(
            "byohost.infrastructure.cluster.x-k8s.io/{name} already {done} and cordoned"
        ));
        return Ok(());
    }
    let (w, bm) = if resumes {
        resume(job, &f).await?
    } else {
        fresh(job, &f).await?
    };
    finish(job, &f, w.as_ref(), &bm).await?;
    if !job.retire {
        kclient::render::line(&format!(
            "byohost.infrastructure.cluster.x-k8s.io/{name} drained and cordoned (kubectl capi hosts uncordon {name} returns it to the pool)"
        ));
        return Ok(());
    }
    kclient::render::line(&format!(
        "byohost.infrastructure.cluster.x-k8s.io/{name} retired: released for its agent and cordoned"
    ));
    kclient::render::line(&format!(
        "On the host: it still holds the node's state; reset it (kubeadm reset, remove /etc/kubernetes and /var/lib/kubelet) or reinstall it, start byoh-hostagent, then kubectl capi hosts uncordon {name}"
    ));
    Ok(())
}

/// Starts a drain or a retire that is not under way: the worker on the host is replaced. A
/// retire of a host whose machine is gone already has only the release left, and one of a host
/// that still reports needs `--force`.
async fn fresh(job: &Job<'_>, f: &Found) -> Result<(Option<Worker>, String), Error> {
    let name = job.host;
    if job.retire
        && let Some(bm) = stuck_releasing(f).await?
    {
        // Its machine is gone already and nobody cleans up: only the release is left.
        if !job.force {
            return Err(Error::other(format!(
                "ByoHost {name} is releasing ByoMachine {bm}, which is gone; if its agent is gone too, retire it with --force (kubectl capi hosts describe {name} shows it)"
            )));
        }
        confirm(
            job.yes,
            &format!("retire ByoHost {name}: release it for its agent and cordon it"),
        )?;
        let mark = maintenance::plan_drain_intent(&maintenance::DrainIntent {
            namespace: json::namespace(&f.host).to_string(),
            cluster: String::new(),
            machine: String::new(),
            machine_deployment: String::new(),
            byo_machine: bm.clone(),
            at: now(),
        });
        patch_as_agent(job.kube, &f.host_ar, &f.host, &mark).await?;
        return Ok((None, bm));
    }
    let w = worker_on(job, f).await?;
    if job.retire && !w.silent && !job.force {
        return Err(Error::other(format!(
            "ByoHost {name} still reports (the Node of Machine {} is not Unknown): retire is for a host that stopped; move its machine with kubectl capi hosts drain {name} (--force retires it anyway)",
            w.machine_name
        )));
    }
    start(job, f, w).await
}

/// Waits for the release, the cordon and the replacement, then takes the mark off (read again:
/// the wait changed the host).
async fn finish(job: &Job<'_>, f: &Found, w: Option<&Worker>, bm: &str) -> Result<(), Error> {
    let name = job.host;
    wait_drained(job, f, w, bm)
        .await
        .map_err(|e| unfinished(e, job))?;
    let host = find_host(&f.conn, &f.host_ar, name, Some(json::namespace(&f.host))).await?;
    patch_as_agent(job.kube, &f.host_ar, &host, &maintenance::plan_drain_done()).await
}

/// The ByoMachine a host still names although it is gone (BYOH's controller let go; the agent
/// has not cleaned up): the host is stuck releasing.
async fn stuck_releasing(f: &Found) -> Result<Option<String>, Error> {
    let Some(bm) = json::str_at(&f.host, &["status", "machineRef", "name"]) else {
        return Ok(None);
    };
    Ok((!byo_machine_exists(f, &f.host).await?).then(|| bm.to_string()))
}

/// Whether the ByoMachine `host` names still exists.
async fn byo_machine_exists(f: &Found, host: &Value) -> Result<bool, Error> {
    let (Some(ar), Some(bm)) = (
        &f.byo_machine_ar,
        json::str_at(host, &["status", "machineRef", "name"]),
    ) else {
        return Ok(false);
    };
    let ns = json::str_at(host, &["status", "machineRef", "namespace"])
        .unwrap_or_else(|| json::namespace(host));
    Ok(kclient::api::get_json_opt(&f.conn, ar, Some(ns), bm)
        .await?
        .is_some())
}

/// What the host's agent would write on release (its claim, BYOH's labels and annotations),
/// cordoned, as the agent: the status first, so that a retire interrupted between the two
/// writes finds the host unclaimed and writes the rest on its re-run.
async fn release_for_agent(job: &Job<'_>, f: &Found, host: &Value) -> Result<(), Error> {
    let reason = format!("retired by kubectl capi hosts retire at {}", now());
    let r = maintenance::plan_agent_release(host, &reason, &now());
    let name = json::name(host);
    let agent = agent_conn(job.kube, name).await?;
    let w = || kclient::api::Write {
        manager: FIELD_MANAGER,
        dry_run: false,
        force: false,
    };
    let ns = json::namespace(host);
    kclient::api::merge_patch_status(&agent, &f.host_ar, ns, name, &r.status, w()).await?;
    kclient::api::merge_patch(&agent, &f.host_ar, ns, name, &r.object, w()).await?;
    kclient::render::line(&format!(
        "byohost.infrastructure.cluster.x-k8s.io/{name} released for its agent and cordoned"
    ));
    Ok(())
}

/// A fresh drain: preflight, ask, mark the host, delete the Machine. The mark goes on before
/// the Machine is deleted, so whatever happens after (a timeout, Ctrl-C), a re-run finds the
/// host's drain and finishes it. Returns the worker and the ByoMachine the host served.
async fn start(job: &Job<'_>, f: &Found, w: Worker) -> Result<(Option<Worker>, String), Error> {
    let name = job.host;
    let spare = spare_hosts(&w, name).await?;
    let then = if job.retire {
        "release it for its agent and cordon it"
    } else {
        "cordon it"
    };
    let what = format!(
        "{} ByoHost {name}: delete Machine {} of cluster {} (MachineDeployment {} replaces it on one of {spare} free matching hosts), then {then}",
        job.verb(),
        w.machine_name,
        w.cluster,
        w.md_name
    );
    confirm(job.yes, &what)?;
    let bm = json::str_at(&f.host, &["status", "machineRef", "name"])
        .unwrap_or_default()
        .to_string();
    let intent = maintenance::DrainIntent {
        namespace: w.t.namespace.clone(),
        cluster: w.cluster.clone(),
        machine: w.machine_name.clone(),
        machine_deployment: w.md_name.clone(),
        byo_machine: bm.clone(),
        at: now(),
    };
    let mark = maintenance::plan_drain_intent(&intent);
    patch_as_agent(job.kube, &f.host_ar, &f.host, &mark).await?;
    delete_machine(&w).await?;
    Ok((Some(w), bm))
}

async fn delete_machine(w: &Worker) -> Result<(), Error> {
    kclient::api::delete(&w.t.conn, &w.machine_ar, &w.t.namespace, &w.machine_name).await?;
    kclient::render::line(&format!(
        "machine.cluster.x-k8s.io/{} deleted (its MachineDeployment replaces it)",
        w.machine_name
    ));
    Ok(())
}

/// A re-run of a drain that did not finish (timed out or interrupted): the host carries its
/// mark. The Machine is deleted again if it is still there (the first run may have stopped
/// between the mark and the delete), then the wait goes on where it stopped: the release, the
/// cordon, the replacement. With a mark that does not parse, or a cluster that is gone, only
/// the cordon is left to do.
async fn resume(job: &Job<'_>, f: &Found) -> Result<(Option<Worker>, String), Error> {
    let name = job.host;
    let served = json::str_at(&f.host, &["status", "machineRef", "name"])
        .unwrap_or_default()
        .to_string();
    let Some(Ok(intent)) = maintenance::drain_intent(&f.host) else {
        kclient::render::info(&format!("resuming the unfinished drain of {name}"));
        return Ok((None, served));
    };
    if intent.cluster.is_empty() {
        // A retire of a host whose machine was gone already: only the release is left.
        return Ok((None, intent.byo_machine));
    }
    kclient::render::info(&format!(
        "resuming the {} of {name} started at {} (Machine {} of cluster {})",
        job.verb(),
        intent.at,
        intent.machine,
        intent.cluster
    ));
    let mut flags = job.kube.clone();
    flags.namespace = Some(intent.namespace.clone());
    let t = match ClusterHandle::load(&flags, &intent.cluster).await {
        Ok(t) => t,
        Err(Error::NotFound { .. }) => return Ok((None, intent.byo_machine)),
        Err(e) => return Err(e),
    };
    let machine_ar = t.core("Machine")?;
    let machine = t.get_opt(&machine_ar, &intent.machine).await?;
    let w = Worker {
        t,
        cluster: intent.cluster,
        machine_ar,
        machine_name: intent.machine,
        md_name: intent.machine_deployment,
        silent: false,
    };
    if machine.is_some_and(|m| json::at(&m, &["metadata", "deletionTimestamp"]).is_none()) {
        confirm(
            job.yes,
            &format!(
                "finish the {} of ByoHost {name}: delete Machine {} of cluster {}, then cordon {name}",
                job.verb(),
                w.machine_name,
                w.cluster
            ),
        )?;
        delete_machine(&w).await?;
    }
    Ok((Some(w), intent.byo_machine))
}

/// A drain's (or retire's) wait that timed out: the host carries the mark, and a re-run
/// finishes.
fn unfinished(e: Error, job: &Job<'_>) -> Error {
    let (name, verb) = (job.host, job.verb());
    match e {
        Error::Timeout { what, after } => Error::Other {
            message: format!(
                "the {verb} of ByoHost {name} did not finish within {} ({what}): re-run to finish: kubectl capi hosts {verb} {name} --yes",
                kcore::text::human_duration(after)
            ),
            hint: Some(format!(
                "{name} is marked as draining; re-running {verb} waits for its release and cordons it (kubectl capi hosts shows it)"
            )),
        },
        e => e,
    }
}

/// The worker Machine a drained host serves, with its cluster and MachineDeployment.
struct Worker {
    t: ClusterHandle,
    cluster: String,
    machine_ar: kube::discovery::ApiResource,
    machine_name: String,
    md_name: String,
    /// Its Node stopped reporting ([`kcore::fields::node_silence`]).
    silent: bool,
}

/// Finds the Machine on the host and refuses what drain cannot move: no machine, a
/// control-plane machine, or one that no MachineDeployment would replace.
async fn worker_on(job: &Job<'_>, f: &Found) -> Result<Worker, Error> {
    let name = job.host;
    let Some(bm_ns) = json::str_at(&f.host, &["status", "machineRef", "namespace"]).or_else(|| {
        json::str_at(&f.host, &["status", "machineRef", "name"]).map(|_| json::namespace(&f.host))
    }) else {
        return Err(Error::other(format!(
            "ByoHost {name} serves no machine, so there is nothing to {}; take it out of selection with kubectl capi hosts cordon {name}",
            job.verb()
        )));
    };
    let cluster = json::label(&f.host, kcore::labels::CLUSTER_NAME_LABEL)
        .filter(|c| !c.is_empty())
        .ok_or_else(|| Error::other(format!("ByoHost {name} names no cluster")))?
        .to_string();
    let mut flags = job.kube.clone();
    flags.namespace = Some(bm_ns.to_string());
    let t = ClusterHandle::load(&flags, &cluster).await?;
    let machine_name = machine_on_host(&t, &f.host_ar, name).await?;
    let machine_ar = t.core("Machine")?;
    let machine = t
        .get_opt(&machine_ar, &machine_name)
        .await?
        .ok_or_else(|| Error::other(format!("Machine {machine_name} is already gone")))?;
    let labels = json::labels(&machine);
    if labels.contains_key(kcore::labels::CONTROL_PLANE_LABEL) {
        return Err(Error::other(format!(
            "ByoHost {name} runs control-plane machine {machine_name}; {} covers workers (scale or upgrade the control plane to move it)",
            job.verb()
        )));
    }
    let Some(md_name) = labels.get(kcore::labels::DEPLOYMENT_NAME_LABEL).cloned() else {
        return Err(Error::other(format!(
            "Machine {machine_name} on {name} belongs to no MachineDeployment, so nothing would replace it"
        )));
    };
    Ok(Worker {
        t,
        cluster,
        machine_ar,
        machine_name,
        md_name,
        silent: kcore::fields::node_silence(&machine).is_some(),
    })
}

/// Preflight: how many free hosts match the worker's template (BYOH's own selection test);
/// none is a refusal, since the replacement would have nowhere to go.
async fn spare_hosts(w: &Worker, name: &str) -> Result<usize, Error> {
    let md_name = &w.md_name;
    let objs = fetch(&w.t).await?;
    let md = objs
        .machine_deployments
        .iter()
        .find(|d| json::name(d) == md_name)
        .ok_or_else(|| Error::other(format!("MachineDeployment {md_name} was not found")))?;
    let template = kcore::plan::scale::deployment_infra_ref(md)
        .and_then(|(kind, tname)| {
            objs.infra_templates
                .iter()
                .find(|v| json::kind(v) == kind && json::name(v) == tname)
        })
        .ok_or_else(|| {
            Error::other(format!(
                "the infrastructure template of {md_name} was not found"
            ))
        })?;
    let free = match &objs.free_hosts {
        Some(lists) => lists.hosts.clone(),
        None => Vec::new(),
    };
    maintenance::spare_hosts(name, template, &free).map_err(|e| Error::other(e.0))
}

/// Asks on a terminal unless `--yes`; without either, a usage error naming what would happen.
/// Released → cordoned at once → the deployment back at its replicas (when the worker is
/// known). `bm` is the ByoMachine the host served before the drain.
async fn wait_drained(job: &Job<'_>, f: &Found, w: Option<&Worker>, bm: &str) -> Result<(), Error> {
    let name = job.host;
    let reason = format!("drained by kubectl capi hosts drain at {}", now());
    let wait_what = match w {
        Some(w) => format!(
            "waiting for {name} to be released and {} to be ready",
            w.md_name
        ),
        None => format!("waiting for {name} to be released"),
    };
    kclient::render::wait_until(&wait_what, job.timeout, Duration::from_millis(500), || {
        let reason = &reason;
        async move {
            let host = find_host(&f.conn, &f.host_ar, name, Some(json::namespace(&f.host))).await?;
            if !maintenance::is_cordoned(&host) {
                // Retire: once BYOH's controller let go (the ByoMachine is gone), nobody else
                // will clean up.
                if job.retire
                    && json::str_at(&host, &["status", "machineRef", "name"])
                        .is_none_or(|m| m == bm)
                    && !byo_machine_exists(f, &host).await?
                {
                    release_for_agent(job, f, &host).await?;
                    return Ok(Poll::Pending(format!("{name} released and cordoned")));
                }
                match json::str_at(&host, &["status", "machineRef", "name"]) {
                    Some(m) if m != bm => {
                        return Err(Error::other(format!(
                            "ByoHost {name} was claimed by ByoMachine {m} before it could be cordoned; drain it again"
                        )));
                    }
                    Some(_) => return Ok(Poll::Pending(format!("{name} still serves {bm}"))),
                    None => {}
                }
                if json::label(&host, kcore::labels::CLUSTER_NAME_LABEL).is_some() {
                    return Ok(Poll::Pending(format!("{name} is being cleaned up")));
                }
                if let HostChange::Patch(p) = maintenance::plan_cordon(&host, reason)
                    .map_err(|e| Error::other(e.0))?
                {
                    patch_as_agent(job.kube, &f.host_ar, &host, &p).await?;
                }
            }
            match w {
                Some(w) => replacement_progress(w, name).await,
                None => Ok(Poll::Ready(())),
            }
        }
    })
    .await
}

/// Ready once as many of the deployment's Machines run as it wants. Its own status can lag, so
/// this counts the Machines instead: Running, not deleting, and not the deleted one.
async fn replacement_progress(w: &Worker, name: &str) -> Result<Poll<()>, Error> {
    let (t, md_name) = (&w.t, &w.md_name);
    let mds = t.machine_deployments().await?;
    let want = mds
        .iter()
        .find(|d| json::name(d) == md_name)
        .and_then(|d| kcore::fields::replicas(d).desired)
        .unwrap_or(0);
    let running = t
        .machines()
        .await?
        .iter()
        .filter(|m| {
            json::label(m, kcore::labels::DEPLOYMENT_NAME_LABEL) == Some(md_name.as_str())
                && json::name(m) != w.machine_name
                && json::at(m, &["metadata", "deletionTimestamp"]).is_none()
                && json::str_at(m, &["status", "phase"]) == Some("Running")
        })
        .count();
    Ok(if i64::try_from(running).unwrap_or(i64::MAX) >= want {
        Poll::Ready(())
    } else {
        Poll::Pending(format!(
            "{name} cordoned; {running}/{want} machines of {md_name} running"
        ))
    })
}
