//! The KamajiControlPlane status: the TenantControlPlane's state and the conditions of a
//! reconcile, written once at its end in the shape of the served CAPI contract, and only when
//! something changed; and the Events a reconcile publishes.

use kube::api::{Api, DynamicObject, Patch, PatchParams};
use kube::runtime::events::{Event, EventType};
use kube::{Resource, ResourceExt};
use serde_json::{Value, json};

use super::discover::ar;
use super::{Cond, KcpCtx, kcp_ns};
use crate::Error;
use crate::api::v1alpha2::{Condition, KamajiControlPlane};
use kcore::condition::{CERTIFICATES_EXPIRING, NEGATIVE_POLARITY};
use kcore::groups::CapiVersion;
use kcore::kamaji::reconcile::TcpState;

/// Whether the status already says the control plane was initialized (it stays so), in the
/// served contract's field.
pub(super) fn initialized_before(kcp: &KamajiControlPlane, contract: CapiVersion) -> bool {
    kcp.status.as_ref().is_some_and(|s| match contract {
        CapiVersion::V1Beta2 => s
            .initialization
            .as_ref()
            .and_then(|i| i.control_plane_initialized)
            .unwrap_or(false),
        CapiVersion::V1Beta1 => s.initialized.unwrap_or(false),
    })
}

/// Publishes an Event on the KamajiControlPlane (a failure is only logged).
pub(super) async fn event(
    ctx: &KcpCtx,
    kcp: &KamajiControlPlane,
    t: EventType,
    reason: &str,
    note: &str,
) {
    let ev = Event {
        type_: t,
        reason: reason.into(),
        note: Some(note.chars().take(1000).collect()),
        action: "Reconcile".into(),
        secondary: None,
    };
    if let Err(e) = ctx.base.recorder.publish(&ev, &kcp.object_ref(&())).await {
        tracing::warn!("publishing an event failed: {e}");
    }
}

fn now() -> String {
    k8s_openapi::jiff::Timestamp::now()
        .strftime("%Y-%m-%dT%H:%M:%SZ")
        .to_string()
}

/// The one status write of a reconcile: merges `conds` into the existing conditions (keeping
/// transition times of unchanged ones) and writes the status with the TenantControlPlane's
/// `state` in the shape of the served contract, only when it changed.
pub(super) async fn write_status(
    kcp: &KamajiControlPlane,
    ctx: &KcpCtx,
    state: &TcpState,
    conds: &[Cond],
) -> Result<(), Error> {
    let existing = kcp.status.clone().unwrap_or_default();
    let contract = ctx.disc.contract;
    let mut conds = conds.to_vec();
    conds.extend(certificates_condition(kcp, ctx));
    if contract == CapiVersion::V1Beta1 {
        let ready = v1beta1_ready(state, &conds);
        conds.push(ready);
    }
    let merged = merge_conditions(
        &existing.conditions,
        &conds,
        contract,
        kcp.meta().generation,
    );
    let status = status_body(contract, state, merged);
    // Compare with what is there, ignoring transition times of unchanged conditions (kept).
    let current = serde_json::to_value(&existing).unwrap_or(Value::Null);
    if status_subset(&status, &current) {
        return Ok(());
    }
    // The KCP read may predate this process's last status write (its watch event not in yet):
    // the same status again is then no change.
    let uid = kcp.uid().unwrap_or_default();
    let hash = status_hash(&status);
    if ctx.written(kcp).status == Some((hash, uid.clone())) {
        return Ok(());
    }
    patch_status(kcp, ctx, status).await?;
    ctx.set_written(kcp, |w| w.status = Some((hash, uid)));
    Ok(())
}

/// `CertificatesExpiring` from the last certificate scan (`crate::certificates`), for a
/// KamajiControlPlane whose TenantControlPlane is local (named like it, in its namespace; a
/// remote one is not scanned). None before the first scan: the condition written before stays.
fn certificates_condition(kcp: &KamajiControlPlane, ctx: &KcpCtx) -> Option<Cond> {
    let remote = kcp
        .spec
        .fields
        .deployment
        .as_ref()
        .is_some_and(|d| d.external_cluster_reference.is_some());
    if remote {
        return None;
    }
    let c = ctx
        .base
        .metrics
        .certificates
        .condition(&kcp_ns(kcp), &kcp.name_any())?;
    Some(Cond {
        type_: CERTIFICATES_EXPIRING,
        ok: c.status,
        reason: c.reason.into(),
        message: c.message,
    })
}

/// The v1beta1 contract's `Ready` condition, a summary of this reconcile's conditions. CAPI
/// v1.10 mirrors it into the Cluster's `ControlPlaneReady` (and so its `Ready`) with its reason,
/// severity and message (`reconcileControlPlane` in
/// `internal/controllers/cluster/cluster_controller_phases.go`, CAPI v1.10.10), and `clusterctl
/// describe` shows it on the control plane's row; without one, the Cluster only gets CAPI's
/// fallback from `status.ready`, which says nothing of why, and the row stays blank. True while
/// the control plane serves (`status.ready`) and nothing of this reconcile is amiss; otherwise
/// False with the first problem's reason: a False condition, or the pause. The other conditions
/// whose True is the abnormal state (an upgrade stepping, certificates expiring) leave it True,
/// as the control plane still serves. The v1beta2 contract has `Available` instead.
fn v1beta1_ready(state: &TcpState, conds: &[Cond]) -> Cond {
    let problem = conds.iter().find(|c| match c.type_ {
        "Paused" => c.ok,
        t if NEGATIVE_POLARITY.contains(&t) => false,
        _ => !c.ok,
    });
    match problem {
        Some(p) => Cond {
            type_: "Ready",
            ok: false,
            reason: p.reason.clone(),
            message: if p.message.is_empty() {
                p.type_.to_string()
            } else {
                format!("{}: {}", p.type_, p.message)
            },
        },
        None if state.ready => Cond::yes("Ready", "Succeeded"),
        None => Cond::no(
            "Ready",
            "WaitingForTenantControlPlane",
            "waiting for the TenantControlPlane to serve",
        ),
    }
}

/// A hash of a status body without the conditions' transition times (kept from the KCP read,
/// which may be older than the last write).
fn status_hash(status: &Value) -> u64 {
    let mut s = status.clone();
    if let Some(cs) = s["conditions"].as_array_mut() {
        for c in cs {
            if let Some(o) = c.as_object_mut() {
                o.remove("lastTransitionTime");
            }
        }
    }
    super::json_hash(&s)
}

/// The conditions of this reconcile (the first of each type), then the existing ones of other
/// types. A condition keeps its transition time while its status stays the same.
fn merge_conditions(
    existing: &[Condition],
    conds: &[Cond],
    contract: CapiVersion,
    generation: Option<i64>,
) -> Vec<Value> {
    let mut merged: Vec<Value> = Vec::new();
    let mut seen: Vec<&str> = Vec::new();
    let ts = now();
    for c in conds {
        if seen.contains(&c.type_) {
            continue;
        }
        seen.push(c.type_);
        let status = if c.ok { "True" } else { "False" };
        let prev = existing.iter().find(|x| x.type_ == c.type_);
        let ltt = match prev {
            Some(p) if p.status == status => p.last_transition_time.clone(),
            _ => ts.clone(),
        };
        let mut v = json!({
            "type": c.type_, "status": status, "reason": c.reason,
            "message": c.message, "lastTransitionTime": ltt,
        });
        match contract {
            CapiVersion::V1Beta2 => v["observedGeneration"] = json!(generation),
            CapiVersion::V1Beta1 => {
                if !c.ok {
                    v["severity"] = json!(if c.reason == "Failed" {
                        "Error"
                    } else {
                        "Info"
                    });
                }
            }
        }
        merged.push(v);
    }
    for x in existing {
        if !seen.contains(&x.type_.as_str()) {
            merged.push(serde_json::to_value(x).unwrap_or(Value::Null));
        }
    }
    merged
}

/// The status in the contract's shape: v1alpha2 (`initialization`, optional counters) or
/// v1alpha1 (`initialized`, plain counters).
fn status_body(contract: CapiVersion, obs: &TcpState, conditions: Vec<Value>) -> Value {
    let mut s = match contract {
        CapiVersion::V1Beta2 => {
            let mut s = json!({
                "ready": obs.ready,
                "version": obs.version,
                "externalManagedControlPlane": true,
                "conditions": conditions,
            });
            if obs.initialized {
                s["initialization"] = json!({"controlPlaneInitialized": true});
            }
            for (k, v) in [
                ("replicas", obs.replicas),
                ("readyReplicas", obs.ready_replicas),
                ("availableReplicas", obs.available_replicas),
                ("upToDateReplicas", obs.updated_replicas),
            ] {
                if let Some(v) = v {
                    s[k] = json!(v);
                }
            }
            s
        }
        CapiVersion::V1Beta1 => json!({
            "initialized": obs.initialized,
            "ready": obs.ready,
            "version": obs.version,
            "externalManagedControlPlane": true,
            "replicas": obs.replicas.unwrap_or(0),
            "readyReplicas": obs.ready_replicas.unwrap_or(0),
            "unavailableReplicas": obs.unavailable_replicas.unwrap_or(0),
            "updatedReplicas": obs.updated_replicas.unwrap_or(0),
            "conditions": conditions,
        }),
    };
    if let Some(sel) = &obs.selector {
        s["selector"] = json!(sel);
    }
    s
}

/// Merge-patches the status subresource at the API version of the served contract (a KCP deleted
/// meanwhile is no error).
async fn patch_status(kcp: &KamajiControlPlane, ctx: &KcpCtx, status: Value) -> Result<(), Error> {
    let ver = match ctx.disc.contract {
        CapiVersion::V1Beta2 => "v1alpha2",
        CapiVersion::V1Beta1 => "v1alpha1",
    };
    let r = ar(
        kcore::groups::CONTROLPLANE_GROUP,
        ver,
        "KamajiControlPlane",
        "kamajicontrolplanes",
    );
    let api: Api<DynamicObject> = Api::namespaced_with(ctx.base.client.clone(), &kcp_ns(kcp), &r);
    let body = json!({"apiVersion": r.api_version, "kind": "KamajiControlPlane", "status": status});
    match api
        .patch_status(
            &kcp.name_any(),
            &PatchParams::default(),
            &Patch::Merge(&body),
        )
        .await
    {
        Ok(_) => Ok(()),
        Err(kube::Error::Api(e)) if e.code == 404 => Ok(()),
        Err(e) => Err(e.into()),
    }
}

/// Whether every field of `want` already has that value in `have` (conditions compared by
/// type, status, reason and message).
fn status_subset(want: &Value, have: &Value) -> bool {
    let Some(w) = want.as_object() else {
        return false;
    };
    for (k, v) in w {
        let h = &have[k];
        if k == "conditions" {
            let (Some(wa), Some(ha)) = (v.as_array(), h.as_array()) else {
                return false;
            };
            if wa.len() != ha.len() {
                return false;
            }
            for c in wa {
                let found = ha.iter().any(|x| {
                    x["type"] == c["type"]
                        && x["status"] == c["status"]
                        && x["reason"] == c["reason"]
                        && x["message"].as_str().unwrap_or_default()
                            == c["message"].as_str().unwrap_or_default()
                        && (c.get("observedGeneration").is_none()
                            || x["observedGeneration"] == c["observedGeneration"])
                });
                if !found {
                    return false;
                }
            }
        } else if v.is_object() {
            if !status_subset(v, h) {
                return false;
            }
        } else if h != v {
            return false;
        }
    }
    true
}

#[cfg(test)]
mod tests {
    use super::*;

    fn state(ready: bool) -> TcpState {
        TcpState {
            ready,
            initialized: ready,
            ..Default::default()
        }
    }

    fn ready_of(ready: bool, conds: &[Cond]) -> (bool, String, String) {
        let r = v1beta1_ready(&state(ready), conds);
        assert_eq!(r.type_, "Ready");
        (r.ok, r.reason, r.message)
    }

    #[test]
    fn the_v1beta1_ready_condition_sums_up_the_reconcile() {
        let fine = [
            Cond::no("Paused", "NotPaused", ""),
            Cond::no("VersionUpgrade", "UpToDate", ""),
            Cond::yes("TenantControlPlaneCreated", "Succeeded"),
            Cond::yes("KamajiControlPlaneIsReady", "Succeeded"),
            Cond::yes("Available", "Available"),
        ];
        assert_eq!(ready_of(true, &fine), (true, "Succeeded".into(), "".into()));
        // Work in progress whose True is abnormal leaves a serving control plane Ready.
        let stepping = [
            &fine[..],
            &[
                Cond::yes("VersionUpgrade", "SteppingMinor"),
                Cond::yes(CERTIFICATES_EXPIRING, "Expiring"),
            ],
        ]
        .concat();
        assert!(ready_of(true, &stepping).0);
        // The first False condition says why, with its reason (which sets the severity).
        let waiting = [
            Cond::no("Paused", "NotPaused", ""),
            Cond::yes("TenantControlPlaneCreated", "Succeeded"),
            Cond::no(
                "KubeadmResourcesCreated",
                "WaitingForKamaji",
                "no admin kubeconfig yet",
            ),
            Cond::no("KamajiControlPlaneIsReady", "Pending", "not ready"),
        ];
        assert_eq!(
            ready_of(true, &waiting),
            (
                false,
                "WaitingForKamaji".into(),
                "KubeadmResourcesCreated: no admin kubeconfig yet".into()
            )
        );
        let failed = [Cond::no("TenantControlPlaneCreated", "Failed", "")];
        assert_eq!(
            ready_of(false, &failed),
            (false, "Failed".into(), "TenantControlPlaneCreated".into())
        );
        let paused = [Cond::yes("Paused", "Paused")];
        assert_eq!(ready_of(false, &paused).1, "Paused");
        // Nothing amiss but not serving yet.
        assert_eq!(
            ready_of(false, &fine[..3]).1,
            "WaitingForTenantControlPlane"
        );
    }

    /// On the v1beta1 contract every False condition carries a severity (CAPI v1.10 sorts a
    /// False one without it below True ones when it sums up), Error for a failure.
    #[test]
    fn v1beta1_conditions_carry_a_severity_when_false() {
        let conds = [
            Cond::no("Ready", "Failed", "TenantControlPlaneCreated: refused"),
            Cond::no("KamajiControlPlaneIsReady", "Pending", "not ready"),
            Cond::yes("Available", "Available"),
        ];
        let merged = merge_conditions(&[], &conds, CapiVersion::V1Beta1, Some(3));
        assert_eq!(merged[0]["severity"], "Error");
        assert_eq!(merged[1]["severity"], "Info");
        assert!(merged[2].get("severity").is_none());
        assert!(merged.iter().all(|c| c.get("observedGeneration").is_none()));
        let v2 = merge_conditions(&[], &conds, CapiVersion::V1Beta2, Some(3));
        assert!(v2.iter().all(|c| c.get("severity").is_none()));
        assert_eq!(v2[0]["observedGeneration"], 3);
    }
}
