//! `kubectl capi upgrade --selector S --to V [--canary N] [--max-parallel N]`: a FleetUpgrade
//! the reconciler carries out, canaries alone first, then waves, stopping at the first failure.
//! `--plan` prints the waves; `--wait` follows it and names the cluster that failed.

use std::cell::RefCell;
use std::time::{Duration, Instant};

use cli::{DryRun, KubeFlags, OutputFlags};
use kclient::discovery::ServerApis;
use kclient::error::{Error, Op};
use kclient::render::{Human, Poll, Printer, Progress, Render, Table, Wait};
use kcore::groups::OPS_GROUP;
use kcore::ops::api::{FleetMember, FleetUpgradeStatus};
use kcore::ops::{fleet, phase};
use kcore::version::KubeVersion;
use kube::api::ListParams;
use kube::discovery::ApiResource;
use serde::Serialize;
use serde_json::{Value, json};

use crate::common::writes::FIELD_MANAGER;

/// `kubectl capi upgrade -l SELECTOR --to VERSION`, checked: a non-empty selector, a
/// well-formed version and FleetUpgrade name, no cluster.
pub struct FleetRequest {
    pub selector: String,
    /// The Kubernetes version to reach, e.g. v1.34.2.
    pub to: KubeVersion,
    /// The FleetUpgrade's name: `--name`, or one derived from the version.
    pub name: String,
    pub canary: u32,
    /// `--max-parallel`: left out of the spec when not given (the waves then hold one cluster).
    pub max_parallel: Option<u32>,
    pub max_parallel_deployments: Option<u32>,
    pub force: bool,
    /// `--plan`: print the waves and create nothing.
    pub plan: bool,
    pub dry_run: DryRun,
    pub yes: bool,
    pub wait: bool,
    pub timeout: Duration,
    pub output: OutputFlags,
    pub kube: KubeFlags,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct WavesView {
    name: String,
    namespace: String,
    selector: String,
    version: String,
    /// The newest patch of each minor below the target, recorded for the reconciler.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    patch_releases: Vec<String>,
    clusters: Vec<FleetMember>,
}

impl Render for WavesView {
    fn human(&self) -> Human {
        let mut t = Table::new(["WAVE", "CLUSTER", "PHASE", "MESSAGE"]);
        for m in &self.clusters {
            t.row([
                m.wave.to_string(),
                m.name.clone(),
                m.phase.clone(),
                m.message.clone(),
            ]);
        }
        Human::Table(t)
    }
}

fn fleet_resource(apis: &ServerApis) -> Result<ApiResource, Error> {
    apis.kind(OPS_GROUP, "FleetUpgrade")
        .map(|k| k.resource(k.version()))
        .ok_or_else(|| {
            apis.not_installed(
                "The FleetUpgrade API (fleet upgrades run in the reconciler)",
                OPS_GROUP,
                "install the reconciler with kubectl kamaji install, or upgrade each cluster with kubectl capi upgrade CLUSTER --to VERSION --client-side",
            )
        })
}

/// Plans the waves, asks, creates the FleetUpgrade and, with `--wait`, follows it.
pub async fn run(req: &FleetRequest) -> Result<(), Error> {
    let (selector, to) = (req.selector.as_str(), &req.to);
    let conn = req.kube.connect().await?;
    let apis = ServerApis::discover(&conn).await?;
    let ar = fleet_resource(&apis)?;
    let cluster_ar = apis.cluster()?;
    let lp = ListParams::default().labels(selector);
    let names: Vec<String> = kclient::api::dynamic(&conn, &cluster_ar, Some(&conn.namespace))
        .list_metadata(&lp)
        .await
        .map_err(|e| {
            conn.error(
                e,
                &Op::on("list", &cluster_ar).in_namespace(Some(&conn.namespace)),
            )
        })?
        .items
        .into_iter()
        .filter_map(|c| c.metadata.name)
        .collect();
    if names.is_empty() {
        return Err(Error::Other {
            message: format!(
                "the selector {selector:?} picks no Cluster in namespace {}; nothing was created",
                conn.namespace
            ),
            hint: Some("check the labels with kubectl capi list --show-labels".into()),
        });
    }
    refuse_whole_fleet_canary(req.canary, names.len(), selector)?;
    let view = WavesView {
        name: req.name.clone(),
        namespace: conn.namespace.clone(),
        selector: selector.to_string(),
        version: to.to_string(),
        patch_releases: fleet_releases(to).await,
        clusters: fleet::waves(names, req.canary, req.max_parallel.unwrap_or(1)),
    };
    if req.plan || req.dry_run.is_dry() {
        return Printer::new(&req.output).print(&view);
    }
    if !req.yes {
        kclient::render::require_terminal(
            &format!("upgrade {} cluster(s)", view.clusters.len()),
            "review the waves with --plan, then pass --yes".into(),
        )?;
        Printer::new(&req.output).print(&view)?;
        if !kclient::render::confirm(&format!(
            "Upgrade these {} cluster(s) to {to}?",
            view.clusters.len()
        ))? {
            kclient::render::line("cancelled; nothing was changed");
            return Ok(());
        }
    }
    create(&conn, &ar, req, &view).await?;
    kclient::render::line(&format!(
        "FleetUpgrade {}/{} created: {} cluster(s) to {to} in {} wave(s); follow it with kubectl get fleetupgrade {} -o yaml or kubectl capi upgrade status",
        view.namespace,
        view.name,
        view.clusters.len(),
        view.clusters.iter().map(|m| m.wave).max().unwrap_or(0),
        view.name
    ));
    if req.wait {
        follow(&conn, &ar, &view.name, req.timeout).await
    } else {
        Ok(())
    }
}

/// How many minors below the target a fleet's patch releases are resolved for: the members'
/// versions are not read here, and a member further behind walks the rest from the
/// reconciler's shipped table.
const FLEET_MINORS: u64 = 8;

/// The newest patch of each of the [`FLEET_MINORS`] minors below `to` (stable-release markers
/// over the shipped table), for every member's ClusterUpgrade to walk through.
async fn fleet_releases(to: &KubeVersion) -> Vec<String> {
    let from = KubeVersion::new(to.major, to.minor.saturating_sub(FLEET_MINORS), 0);
    let r = kclient::releases::resolve(&from, to).await;
    if let Some(note) = &r.note {
        kclient::render::warn(note);
    }
    r.releases.recorded(&from, to)
}

/// A canary wave is the few clusters that go first so a bad upgrade stops there; one that
/// holds every selected cluster is no canary, so it is refused before anything is written.
fn refuse_whole_fleet_canary(canary: u32, clusters: usize, selector: &str) -> Result<(), Error> {
    let canary_n = usize::try_from(canary).unwrap_or(usize::MAX);
    if canary == 0 || canary_n < clusters {
        return Ok(());
    }
    Err(Error::Usage {
        message: format!(
            "--canary {canary} would put all {clusters} cluster(s) the selector {selector:?} picks in the canary wave, which is no canary; nothing was created"
        ),
        hint: Some(if clusters > 1 {
            format!(
                "pass --canary between 1 and {} (e.g. --canary 1), or --canary 0 for no canary wave",
                clusters - 1
            )
        } else {
            "pass --canary 0: one cluster cannot have a canary wave before it".into()
        }),
    })
}

async fn create(
    conn: &kclient::conn::Conn,
    ar: &ApiResource,
    req: &FleetRequest,
    view: &WavesView,
) -> Result<(), Error> {
    let obj: kube::core::DynamicObject = serde_json::from_value(json!({
        "apiVersion": ar.api_version, "kind": ar.kind,
        "metadata": {"name": view.name, "namespace": view.namespace},
        "spec": {
            "selector": view.selector,
            "version": view.version,
            "canary": req.canary,
            "maxParallel": req.max_parallel,
            "maxParallelMachineDeployments": req.max_parallel_deployments,
            "force": req.force,
            "patchReleases": view.patch_releases,
        },
    }))
    .map_err(|e| Error::other(format!("internal: a FleetUpgrade body: {e}")))?;
    let api = kclient::api::dynamic(conn, ar, Some(&view.namespace));
    let pp = kube::api::PostParams {
        field_manager: Some(FIELD_MANAGER.into()),
        ..Default::default()
    };
    api.create(&pp, &obj)
        .await
        .map(|_| ())
        .map_err(|e| match e {
            kube::Error::Api(s) if s.code == 409 => Error::Other {
                message: format!(
                    "FleetUpgrade {}/{} already exists; nothing was changed",
                    view.namespace, view.name
                ),
                hint: Some(format!(
                    "see it with kubectl get fleetupgrade {} -o yaml; pass --name for a new one",
                    view.name
                )),
            },
            e => conn.error(
                e,
                &Op::on("create", ar)
                    .in_namespace(Some(&view.namespace))
                    .named(&view.name),
            ),
        })
}

fn status_of(obj: &Value) -> FleetUpgradeStatus {
    serde_json::from_value(obj["status"].clone()).unwrap_or_default()
}

/// Follows the FleetUpgrade until it ends, one line per member change; a failure names the
/// cluster. The shared wait rides out an API server that goes away meanwhile.
async fn follow(
    conn: &kclient::conn::Conn,
    ar: &ApiResource,
    name: &str,
    timeout: Duration,
) -> Result<(), Error> {
    let started = Instant::now();
    let seen: RefCell<Vec<(String, String)>> = RefCell::new(Vec::new());
    let mut progress = Progress::line();
    let outcome = Wait::new(
        format!("following fleet upgrade {name} (it goes on in the cluster)"),
        timeout,
    )
    .on(&mut progress)
    .until(|| async {
        let obj = kclient::api::get_json_opt(conn, ar, Some(&conn.namespace), name)
            .await?
            .ok_or_else(|| Error::other(format!("FleetUpgrade {name} was deleted")))?;
        let st = status_of(&obj);
        for m in &st.clusters {
            let key = (m.name.clone(), m.phase.clone());
            let mut seen = seen.borrow_mut();
            if m.phase != "Pending" && !seen.contains(&key) {
                kclient::render::line(&format!("wave {}: cluster {}: {}", m.wave, m.name, m.phase));
                seen.push(key);
            }
        }
        let upgraded = st
            .clusters
            .iter()
            .filter(|m| m.phase == phase::SUCCEEDED)
            .count();
        Ok(match st.phase.as_deref() {
            Some(phase::SUCCEEDED) => Poll::Ready(Ok(st.message.unwrap_or_default())),
            Some(phase::FAILED) => Poll::Ready(Err(Error::Other {
                message: format!(
                    "fleet upgrade {name} stopped: {}",
                    st.message.unwrap_or_default()
                ),
                hint: Some(format!(
                    "see kubectl capi upgrade status {}",
                    st.failed_cluster.unwrap_or_default()
                )),
            })),
            // Before the reconciler has picked the clusters, "0 of 0 upgraded" would read as done.
            _ if st.clusters.is_empty() => Poll::Pending(format!(
                "fleet upgrade {name}: waiting for the reconciler to pick the clusters"
            )),
            _ => Poll::Pending(format!(
                "fleet upgrade {name}: {upgraded} of {} clusters upgraded",
                st.clusters.len()
            )),
        })
    })
    .await;
    progress.clear();
    let message = outcome??;
    kclient::render::line(&format!(
        "fleet upgrade {name} done in {}: {message}",
        kcore::text::human_duration(started.elapsed())
    ));
    Ok(())
}
