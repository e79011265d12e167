//! What the doctor asks the API server beyond reads (`kcore::doctor::read` makes those): one
//! object of each kind converted by a webhook, read at another served version, and Kamaji's
//! answer to a server dry run of a change to a TenantControlPlane. kamaji-reconciler's findings
//! scan makes neither (it writes nothing to find a finding), so they stay here.

use std::collections::BTreeMap;

use futures::StreamExt;
use kclient::discovery::ServerApis;
use kclient::error::Error;
use kcore::doctor::read::Refusal;
use kcore::doctor::{Fleet, FleetRead, Unread};
use kcore::json;
use kube::api::{DynamicObject, ListParams};
use kube::discovery::ApiResource;
use serde_json::Value;

/// How many probes (Kamaji's answers, conversions) `doctor` waits for at once.
const PROBES_AT_ONCE: usize = 4;

/// A probe the API server refused: `input` was read only in part (`across`: in every
/// namespace).
fn note(fleet: &mut Fleet, input: FleetRead, refusal: &Refusal, across: bool) {
    fleet.unread.push(Unread {
        input,
        missing: refusal.permission(across),
        partial: true,
    });
}

/// For each CRD of `fleet` converted by a webhook, whether reading one of its objects at
/// another served version works: a LIST of one object at that version makes the API server
/// call the webhook (no object, no call, nothing to say). A probe that fails for another
/// reason is said in `not_checked`; one the API server refuses is noted in `fleet.unread`.
pub(super) async fn conversions(
    conn: &crate::Conn,
    fleet: &mut Fleet,
    not_checked: &mut Vec<String>,
) {
    let probes: Vec<ApiResource> = fleet
        .crds
        .iter()
        .filter(|c| c.webhook_conversion)
        .filter_map(|c| {
            let v = c.other_served.first()?;
            Some(ApiResource {
                group: c.group.clone(),
                version: v.clone(),
                api_version: format!("{}/{v}", c.group),
                kind: c.kind.clone(),
                plural: c.plural.clone(),
            })
        })
        .collect();
    let answers: Vec<(ApiResource, Result<_, kube::Error>)> =
        futures::stream::iter(probes.into_iter().map(|ar| async move {
            let api: kube::Api<DynamicObject> = kube::Api::all_with(conn.client.clone(), &ar);
            let r = api.list(&ListParams::default().limit(1)).await;
            (ar, r)
        }))
        .buffer_unordered(PROBES_AT_ONCE)
        .collect()
        .await;
    for (ar, answer) in answers {
        match answer {
            Ok(_) => {}
            Err(kube::Error::Api(s)) if s.message.contains("conversion webhook") => {
                let name = format!("{}.{}", ar.plural, ar.group);
                if let Some(i) = fleet.crds.iter_mut().find(|i| i.name == name) {
                    i.conversion_failure = Some((ar.version.clone(), s.message));
                }
            }
            // A kind the user may not list: its conversion is not probed.
            Err(kube::Error::Api(s)) if s.code == 403 => {
                let refusal = Refusal {
                    verb: "list".into(),
                    resource: format!("{}.{}", ar.plural, ar.group),
                    namespace: None,
                };
                note(fleet, FleetRead::Crds, &refusal, true);
            }
            Err(e) => not_checked.push(format!(
                "the conversion of {}.{} to {}: {}",
                ar.plural,
                ar.group,
                ar.version,
                kclient::error::chain_text(&e)
            )),
        }
    }
}

/// Kamaji's refusals, per Kubernetes version the TenantControlPlanes run: a server dry run of
/// a change to one TenantControlPlane per version (an annotation; nothing is stored), judged by
/// Kamaji's validating webhook, which refuses every change to a control plane above the
/// version it was built with (Kamaji v1.0.0 `internal/webhook/handlers/tcp_version.go`). One
/// request per version, not per object; a webhook that does not answer is said in
/// `not_checked`. A user without `patch` on TenantControlPlanes (RBAC has no dry-run-only
/// grant, and a read-only role should not hold patch) gets the API server's 403 before any
/// webhook is asked: that version is noted as not checked, with the permission lacking.
pub(super) async fn kamaji_refusals(
    conn: &crate::Conn,
    apis: &ServerApis,
    fleet: &mut Fleet,
    not_checked: &mut Vec<String>,
) -> Result<BTreeMap<String, String>, Error> {
    let Some(ar) = apis.tenant_control_plane() else {
        return Ok(BTreeMap::new());
    };
    let mut one_per_version: BTreeMap<&str, &Value> = BTreeMap::new();
    for t in &fleet.tenant_control_planes {
        if let Some(v) = json::str_at(t, &["spec", "kubernetes", "version"])
            && json::at(t, &["metadata", "deletionTimestamp"]).is_none()
        {
            one_per_version.entry(v).or_insert(t);
        }
    }
    let probe =
        serde_json::json!({"metadata": {"annotations": {"kubectl-capi.doctor/probe": "dry-run"}}});
    let write = || kclient::api::Write {
        manager: "kubectl-capi",
        dry_run: true,
        force: false,
    };
    let answers: Vec<(String, Result<_, Error>)> =
        futures::stream::iter(one_per_version.into_iter().map(|(version, t)| {
            let (ar, probe) = (&ar, &probe);
            async move {
                let r = kclient::api::merge_patch(
                    conn,
                    ar,
                    json::namespace(t),
                    json::name(t),
                    probe,
                    write(),
                )
                .await;
                (version.to_string(), r)
            }
        }))
        .buffer_unordered(PROBES_AT_ONCE)
        .collect()
        .await;
    let mut refusals = BTreeMap::new();
    for (version, answer) in answers {
        match answer {
            Ok(_) | Err(Error::NotFound { .. }) => {}
            Err(Error::Denied { message, .. }) => {
                refusals.insert(version, message);
            }
            Err(e @ (Error::Api { .. } | Error::Timeout { .. } | Error::Unreachable { .. })) => {
                not_checked.push(format!(
                    "whether Kamaji accepts Kubernetes {version}: it did not answer ({e})"
                ));
            }
            Err(Error::Forbidden {
                verb,
                resource,
                namespace,
                ..
            }) => {
                let refusal = Refusal {
                    verb,
                    resource,
                    namespace,
                };
                note(fleet, FleetRead::KamajiRefusals, &refusal, false);
            }
            Err(e) => return Err(e),
        }
    }
    Ok(refusals)
}
