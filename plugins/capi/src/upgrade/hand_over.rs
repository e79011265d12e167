//! Handing one cluster's upgrade to the reconciler: `kubectl capi upgrade CLUSTER --to V`
//! creates a ClusterUpgrade (`ops.capi-kamaji.io`) where that API is served and gets out of the
//! way; `--wait` follows it. The reconciler plans from the same objects with the same code, so
//! its plan is the one `--plan` prints.

use std::time::{Duration, Instant};

use kclient::error::{Error, Op};
use kclient::render::{Poll, Progress, Wait};
use kcore::ops::api::ClusterUpgradeStatus;
use kcore::ops::phase;
use kcore::plan::upgrade::{StepLine, StepRole, step_progress};
use kcore::version::{KubeVersion, parse_version};
use kube::discovery::ApiResource;
use serde_json::{Value, json};

use super::request::ClusterRequest;
use super::snapshot::{Snapshot, cluster_runs, role_object};
use crate::common::cluster::ClusterHandle;
use crate::common::cluster_upgrade::{current, in_words, is_finished, spec_of, status_of};
use crate::common::writes::FIELD_MANAGER;

/// Refuses when the cluster has an upgrade under way to another version (or one cancelled
/// but not yet stopped).
pub async fn refuse_busy(
    t: &ClusterHandle,
    ar: &ApiResource,
    to: &KubeVersion,
) -> Result<(), Error> {
    match t.get_opt(ar, &t.name).await? {
        Some(cu) if !is_finished(&cu) => {
            let s = spec_of(&cu);
            if !same_version(&s.version, to) || s.cancelled {
                return Err(busy(t, &cu));
            }
            Ok(())
        }
        _ => Ok(()),
    }
}

/// Whether a ClusterUpgrade's `spec.version` is the version asked for.
fn same_version(spec_version: &str, to: &KubeVersion) -> bool {
    parse_version(spec_version).is_ok_and(|v| v == *to)
}

/// Creates the cluster's ClusterUpgrade (or replaces a finished one), then follows it with
/// `--wait`. A ClusterUpgrade under way for another target is refused in one line.
/// `steps` is the number of steps of the plan shown; `patch_releases` its intermediate
/// versions, which the reconciler steps through (`spec.patchReleases`).
pub async fn hand_over(
    t: &ClusterHandle,
    ar: &ApiResource,
    req: &ClusterRequest,
    steps: usize,
    patch_releases: &[String],
) -> Result<(), Error> {
    let existing = t.get_opt(ar, &t.name).await?;
    let spec = json!({
        "clusterName": t.name,
        "version": req.to,
        "controlPlaneOnly": req.control_plane_only,
        "workersOnly": req.workers_only,
        "force": req.force,
        "maxParallelMachineDeployments": req.max_parallel_deployments,
        "patchReleases": patch_releases,
        "paused": false,
        "cancelled": false,
    });
    match existing {
        Some(cu) if !is_finished(&cu) => {
            let s = spec_of(&cu);
            if !same_version(&s.version, &req.to) || s.cancelled {
                return Err(busy(t, &cu));
            }
            kclient::render::line(&format!(
                "an upgrade of cluster {} {} is already under way",
                t.name,
                in_words(&cu)
            ));
        }
        Some(cu) => {
            // Replaces a finished one, only if nobody changed it meanwhile.
            let rv = cu["metadata"]["resourceVersion"].clone();
            let body = json!({"metadata": {"resourceVersion": rv}, "spec": spec});
            kclient::api::merge_patch(
                &t.conn,
                ar,
                &t.namespace,
                &t.name,
                &body,
                kclient::api::Write {
                manager: FIELD_MANAGER,
                dry_run: false,
                force: false,
            },
            )
            .await
            .map_err(|e| match e {
                Error::Conflict { .. } => Error::Other {
                    message: format!(
                        "cluster {}'s ClusterUpgrade changed while it was being replaced; nothing was changed",
                        t.name
                    ),
                    hint: Some("run the command again".into()),
                },
                e => e,
            })?;
            created_line(
                t,
                req,
                steps,
                "replaced (the finished upgrade stays in its history)",
            );
        }
        None => {
            create(t, ar, spec).await?;
            created_line(t, req, steps, "created");
        }
    }
    if req.wait {
        follow(t, ar, req.timeout).await
    } else {
        Ok(())
    }
}

fn created_line(t: &ClusterHandle, req: &ClusterRequest, steps: usize, what: &str) {
    kclient::render::line(&format!(
        "ClusterUpgrade {}/{} {what}: kamaji-reconciler upgrades cluster {} to {} in {} step(s), control plane first; follow it with kubectl capi upgrade status {}",
        t.namespace, t.name, t.name, req.to, steps, t.name
    ));
}

fn busy(t: &ClusterHandle, cu: &Value) -> Error {
    Error::Other {
        message: format!(
            "cluster {} already has an upgrade under way: {}; nothing was changed",
            t.name,
            in_words(cu)
        ),
        hint: Some(format!(
            "follow it with kubectl capi upgrade status {0}, or stop it with kubectl capi upgrade cancel {0}",
            t.name
        )),
    }
}

async fn create(t: &ClusterHandle, ar: &ApiResource, spec: Value) -> Result<(), Error> {
    let obj: kube::core::DynamicObject = serde_json::from_value(json!({
        "apiVersion": ar.api_version, "kind": ar.kind,
        "metadata": {"name": t.name, "namespace": t.namespace},
        "spec": spec,
    }))
    .map_err(|e| Error::other(format!("internal: a ClusterUpgrade body: {e}")))?;
    let api = kclient::api::dynamic(&t.conn, ar, Some(&t.namespace));
    let pp = kube::api::PostParams {
        field_manager: Some(FIELD_MANAGER.into()),
        ..Default::default()
    };
    match api.create(&pp, &obj).await {
        Ok(_) => Ok(()),
        // Another admin was faster: the API server refuses a second one (it is named after
        // the cluster).
        Err(kube::Error::Api(s)) if s.code == 409 => match t.get_opt(ar, &t.name).await? {
            Some(cu) => Err(busy(t, &cu)),
            None => Err(Error::other(s.message)),
        },
        Err(e) => Err(t.conn.error(
            e,
            &Op::on("create", ar)
                .in_namespace(Some(&t.namespace))
                .named(&t.name),
        )),
    }
}

/// Follows a ClusterUpgrade until it ends: 0 when it succeeds, 1 when it fails or is cancelled.
/// One updating line on a terminal (a line per change otherwise) names the step under way,
/// what is left of it and the version the cluster runs, from the ClusterUpgrade's plan and the
/// cluster's own objects; one line closes it.
async fn follow(t: &ClusterHandle, ar: &ApiResource, timeout: Duration) -> Result<(), Error> {
    let started = Instant::now();
    let mut progress = Progress::line();
    let what = format!(
        "following the upgrade of cluster {} (it goes on in the cluster)",
        t.name
    );
    let outcome = Wait::new(what, timeout)
        .on(&mut progress)
        .until(|| async {
            let cu = t
                .get_opt(ar, &t.name)
                .await?
                .ok_or_else(|| Error::other(format!("ClusterUpgrade {} was deleted", t.name)))?;
            if !current(&cu) {
                return Ok(Poll::Pending(format!(
                    "waiting for kamaji-reconciler to plan the upgrade of cluster {}",
                    t.name
                )));
            }
            let st = status_of(&cu);
            match st.phase.as_deref() {
                Some(phase::SUCCEEDED) => Ok(Poll::Ready(Ok(spec_of(&cu).version))),
                Some(p @ (phase::FAILED | phase::CANCELLED)) => {
                    Ok(Poll::Ready(Err(Error::Other {
                        message: format!(
                            "the upgrade of cluster {} {}: {}",
                            t.name,
                            p.to_lowercase(),
                            st.message.clone().unwrap_or_default()
                        ),
                        hint: Some(format!("see kubectl capi upgrade status {}", t.name)),
                    })))
                }
                _ => Ok(Poll::Pending(where_it_stands(t, &st).await?)),
            }
        })
        .await;
    progress.clear();
    let version = outcome??;
    kclient::render::line(&format!(
        "cluster {} upgraded to {version} in {}",
        t.name,
        kcore::text::human_duration(started.elapsed())
    ));
    Ok(())
}

/// The progress line of an upgrade under way: its first current step, as the cluster's objects
/// show it, or its phase between steps.
async fn where_it_stands(t: &ClusterHandle, st: &ClusterUpgradeStatus) -> Result<String, Error> {
    let total = st.plan.len();
    let done = st
        .steps
        .iter()
        .filter(|s| s.phase == phase::SUCCEEDED)
        .count();
    let step = st
        .current_steps
        .first()
        .and_then(|n| st.plan.iter().find(|p| p.number == *n));
    let Some(step) = step else {
        return Ok(match st.phase.as_deref() {
            Some(phase::PAUSED) => format!("paused after {done} of {total} steps"),
            _ => format!("{done} of {total} steps done"),
        });
    };
    let role = match step.role.as_str() {
        "ControlPlane" => StepRole::ControlPlane,
        "Topology" => StepRole::Topology,
        _ => StepRole::Workers,
    };
    let snap = Snapshot::read(t).await?;
    let observed = snap.observed(t);
    let obj = role_object(t, &snap, role, &step.target);
    // The status's step versions are the plan's, written by the reconciler.
    let Ok(to) = parse_version(&step.to_version) else {
        return Ok(format!("{done} of {total} steps done"));
    };
    let p = step_progress(role, obj.as_ref(), observed.get(&step.target).as_ref(), &to);
    let runs = cluster_runs(t, &snap, &observed);
    let mut line = StepLine {
        number: step.number as usize,
        total,
        target: &step.target,
        to: &to,
        progress: &p,
        cluster_runs: runs.as_ref(),
    }
    .to_string();
    if let [_, more @ ..] = st.current_steps.as_slice()
        && !more.is_empty()
    {
        let more: Vec<String> = more.iter().map(u32::to_string).collect();
        line.push_str(&format!(" (steps {} roll too)", more.join(", ")));
    }
    Ok(line)
}
