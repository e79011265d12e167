//! `hosts cordon|uncordon|drain`: taking a host out of BYOH's selection and back.
//!
//! BYOH picks a host for a ByoMachine among the ByoHosts *without* the
//! `cluster.x-k8s.io/cluster-name` label that match the ByoMachine's selector (`attachByoHost`,
//! `controllers/infrastructure/byomachine_controller.go`, BYOH v0.5.0). That absence is the only
//! test every selection makes, so a cordoned host carries the label with an empty value (no
//! cluster is named `""`) and our annotation saying why; it has no `status.machineRef`, so
//! neither BYOH's controller nor its agent acts on it. Uncordon removes both, and only when the
//! annotation shows the label is ours. BYOH's webhook admits ByoHost writes only from the host's
//! own agent (user `byoh:host:<name>`), so the verb makes them as that user.

use serde_json::{Value, json};

use crate::json;
use crate::labels::CLUSTER_NAME_LABEL;

/// Marks a host cordoned by `kubectl capi hosts cordon|drain`; the value says when and why.
pub(crate) const CORDON_ANNOTATION: &str = "capi-kamaji.io/cordoned";

/// Marks a host `kubectl capi hosts drain` is draining, from before it deletes the machine on
/// it until the replacement runs: the release happens later (BYOH's agent cleans up), and a
/// drain that times out or is interrupted before it must still end with the host cordoned, so
/// a re-run of drain finds this and finishes (cordons the host, waits for the replacement). BYOH v0.5.0 leaves it in place: its agent's clean-up removes
/// only its own labels and annotations (agent/reconciler/host_reconciler.go, removeAnnotations)
/// and its controller only adds its clean-up annotation (markHostForCleanup), both by patch.
/// The value is a [`DrainIntent`] as JSON.
pub const DRAIN_ANNOTATION: &str = "capi-kamaji.io/draining";

/// What a drain started: the machine it deleted and where its replacement comes from.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct DrainIntent {
    /// The namespace of the cluster, its Machine and ByoMachine.
    pub namespace: String,
    pub cluster: String,
    pub machine: String,
    pub machine_deployment: String,
    /// The ByoMachine the host served (BYOH clears the host's machineRef once released).
    pub byo_machine: String,
    /// When the drain started (RFC 3339).
    pub at: String,
}

/// The drain `host` is marked with, when there is one. A value that does not parse (edited by
/// hand) still marks the host: the drain is resumed, with nothing known of its machine.
pub fn drain_intent(host: &Value) -> Option<Result<DrainIntent, String>> {
    let v = json::annotation(host, DRAIN_ANNOTATION)?;
    Some(serde_json::from_str(v).map_err(|_| v.to_string()))
}

/// The merge patch marking `host` with `intent`.
pub fn plan_drain_intent(intent: &DrainIntent) -> Value {
    let v = serde_json::to_string(intent).unwrap_or_default();
    json!({"metadata": {"annotations": {DRAIN_ANNOTATION: v}}})
}

/// The merge patch taking a finished drain's mark off.
pub fn plan_drain_done() -> Value {
    json!({"metadata": {"annotations": {DRAIN_ANNOTATION: null}}})
}

/// Whether a drain marked on `host` is what a re-run resumes: the host serves no machine any
/// more or still the one the drain deleted (being released). A host BYOH gave another machine
/// meanwhile is drained afresh.
pub fn drain_resumes(host: &Value) -> bool {
    let Some(intent) = drain_intent(host) else {
        return false;
    };
    match (
        json::str_at(host, &["status", "machineRef", "name"]),
        intent,
    ) {
        (None, _) => true,
        (Some(m), Ok(i)) => m == i.byo_machine,
        (Some(_), Err(_)) => false,
    }
}

/// The user BYOH's webhook admits for writes to host `name`, and its groups (the agent's
/// certificate: `byoh:host:<name>` in `byoh:hosts`, which BYOH's RBAC lets edit ByoHosts).
pub fn agent_identity(name: &str) -> (String, Vec<String>) {
    (
        format!("byoh:host:{name}"),
        vec!["byoh:hosts".into(), "system:authenticated".into()],
    )
}

/// Whether a host is cordoned by us.
pub fn is_cordoned(host: &Value) -> bool {
    json::has_annotation(host, CORDON_ANNOTATION)
        && json::label(host, CLUSTER_NAME_LABEL) == Some("")
        && json::str_at(host, &["status", "machineRef", "name"]).is_none()
}

/// What a cordon or uncordon does to one host.
#[derive(Debug, Clone, PartialEq)]
pub enum HostChange {
    /// Apply this merge patch.
    Patch(Value),
    /// Already so.
    Unchanged,
}

/// Why a host cannot be cordoned or uncordoned; the message names the way out.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct MaintenanceError(pub String);

/// Cordon `host` (`reason` goes into the annotation with the time).
pub fn plan_cordon(host: &Value, reason: &str) -> Result<HostChange, MaintenanceError> {
    let name = json::name(host);
    if is_cordoned(host) {
        return Ok(HostChange::Unchanged);
    }
    if let Some(m) = json::str_at(host, &["status", "machineRef", "name"]) {
        return Err(MaintenanceError(format!(
            "ByoHost {name} serves ByoMachine {m}: drain it instead (kubectl capi hosts drain {name}), which moves the machine to a spare host and then cordons it"
        )));
    }
    if let Some(c) = json::label(host, CLUSTER_NAME_LABEL) {
        return Err(MaintenanceError(format!(
            "ByoHost {name} is claimed by cluster {c:?}: wait until it is released, or drain it"
        )));
    }
    Ok(HostChange::Patch(json!({"metadata": {
        "labels": {CLUSTER_NAME_LABEL: ""},
        "annotations": {CORDON_ANNOTATION: reason},
    }})))
}

/// Uncordon `host`: only what cordon set is removed.
pub fn plan_uncordon(host: &Value) -> Result<HostChange, MaintenanceError> {
    let name = json::name(host);
    if is_cordoned(host) {
        return Ok(HostChange::Patch(json!({"metadata": {
            "labels": {CLUSTER_NAME_LABEL: null},
            // A drain not finished yet is called off with it.
            "annotations": {CORDON_ANNOTATION: null, DRAIN_ANNOTATION: null},
        }})));
    }
    match json::label(host, CLUSTER_NAME_LABEL) {
        // A drain that has not cordoned the host yet: uncordon calls it off.
        None if json::has_annotation(host, DRAIN_ANNOTATION) => {
            Ok(HostChange::Patch(json!({"metadata": {
                "annotations": {DRAIN_ANNOTATION: null},
            }})))
        }
        Some(c) if !c.is_empty() => Err(MaintenanceError(format!(
            "ByoHost {name} is not cordoned: it serves cluster {c:?}"
        ))),
        Some(_) => Err(MaintenanceError(format!(
            "ByoHost {name} has an empty {CLUSTER_NAME_LABEL} label that kubectl capi did not set; remove it by hand if it should be free"
        ))),
        None => Ok(HostChange::Unchanged),
    }
}

/// What BYOH v0.5.0's agent undoes when it releases a host, after its `kubeadm reset`
/// (`agent/reconciler/host_reconciler.go`, `hostCleanUp` and `removeAnnotations`): the claim
/// (`status.machineRef`), the secrets it was handed, the labels and annotations the controller
/// set, and `K8sNodeBootstrapSucceeded` False with `K8sNodeAbsent`. `kubectl capi hosts retire`
/// writes it for an agent that is gone, with the host cordoned in the same write (the
/// cluster-name label left empty, not removed), so that BYOH never picks a host nobody reset.
#[derive(Debug, Clone, PartialEq)]
pub struct AgentRelease {
    /// A merge patch of the host's metadata and spec.
    pub object: Value,
    /// A merge patch of its status subresource.
    pub status: Value,
}

/// The [`AgentRelease`] of `host`, cordoned with `reason`, at `now` (RFC 3339).
pub fn plan_agent_release(host: &Value, reason: &str, now: &str) -> AgentRelease {
    const BYOH: &str = "byoh.infrastructure.cluster.x-k8s.io";
    let object = json!({
        "metadata": {
            "labels": {CLUSTER_NAME_LABEL: "", super::BYOMACHINE_NAME_LABEL: null},
            "annotations": {
                format!("{BYOH}/endpointip"): null,
                super::UNREGISTERING_ANNOTATION: null,
                super::K8S_VERSION_ANNOTATION: null,
                format!("{BYOH}/bundle-registry"): null,
                CORDON_ANNOTATION: reason,
            },
        },
        "spec": {"bootstrapSecret": null, "installationSecret": null, "uninstallationScript": null},
    });
    // Conditions are a list: a merge patch replaces it, so the others are kept as they are.
    let mut conditions: Vec<Value> = json::at(host, &["status", "conditions"])
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    conditions.retain(|c| c["type"] != super::BOOTSTRAP_CONDITION);
    conditions.push(
        json!({"type": super::BOOTSTRAP_CONDITION, "status": "False",
        "reason": "K8sNodeAbsent", "severity": "Info", "lastTransitionTime": now}),
    );
    AgentRelease {
        object,
        status: json!({"status": {"machineRef": null, "conditions": conditions}}),
    }
}

/// Drain's preflight: how many free hosts could take the replacement of the machine on
/// `drained`, picked by the ByoMachineTemplate `template` (BYOH's selection: free and matching
/// the template's selector). None spare is a refusal: the replacement would wait for a host.
pub fn spare_hosts(
    drained: &str,
    template: &Value,
    free_hosts: &[Value],
) -> Result<usize, MaintenanceError> {
    let sel = crate::plan::selector::LabelSelector::from_json(
        json::at(template, &["spec", "template", "spec", "selector"]).unwrap_or(&Value::Null),
    )
    .map_err(|e| {
        MaintenanceError(format!(
            "{} {} has an invalid selector: {e}",
            json::kind(template),
            json::name(template)
        ))
    })?;
    let spare = free_hosts
        .iter()
        .filter(|h| json::name(h) != drained && json::label(h, CLUSTER_NAME_LABEL).is_none())
        .filter(|h| sel.matches_object(h))
        .count();
    if spare == 0 {
        return Err(MaintenanceError(format!(
            "no free host matches {} for the replacement of the machine on {drained}: register one (kubectl capi hosts add) or uncordon one first, or scale down with kubectl capi scale --remove-host {drained}",
            sel.braced()
        )));
    }
    Ok(spare)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn host(labels: Value, annotations: Value, machine: Option<&str>) -> Value {
        let mut h = json!({"metadata": {"name": "h1", "namespace": "p", "labels": labels, "annotations": annotations}});
        if let Some(m) = machine {
            h["status"] = json!({"machineRef": {"name": m, "namespace": "p"}});
        }
        h
    }

    #[test]
    fn cordon_and_uncordon_round_trip() {
        let free = host(json!({}), json!({}), None);
        let HostChange::Patch(p) = plan_cordon(&free, "drain").unwrap() else {
            panic!("patch expected")
        };
        assert_eq!(p["metadata"]["labels"][CLUSTER_NAME_LABEL], "");
        let cordoned = host(
            json!({CLUSTER_NAME_LABEL: ""}),
            json!({CORDON_ANNOTATION: "x"}),
            None,
        );
        assert!(is_cordoned(&cordoned));
        assert_eq!(plan_cordon(&cordoned, "again"), Ok(HostChange::Unchanged));
        let HostChange::Patch(u) = plan_uncordon(&cordoned).unwrap() else {
            panic!("patch expected")
        };
        assert!(u["metadata"]["labels"][CLUSTER_NAME_LABEL].is_null());
        assert_eq!(plan_uncordon(&free), Ok(HostChange::Unchanged));
    }

    #[test]
    fn refusals() {
        let serving = host(json!({CLUSTER_NAME_LABEL: "c1"}), json!({}), Some("bm1"));
        assert!(
            plan_cordon(&serving, "x")
                .unwrap_err()
                .0
                .contains("hosts drain h1")
        );
        let claimed = host(json!({CLUSTER_NAME_LABEL: "c1"}), json!({}), None);
        assert!(
            plan_cordon(&claimed, "x")
                .unwrap_err()
                .0
                .contains("claimed by cluster")
        );
        assert!(
            plan_uncordon(&claimed)
                .unwrap_err()
                .0
                .contains("not cordoned")
        );
        let foreign_empty = host(json!({CLUSTER_NAME_LABEL: ""}), json!({}), None);
        assert!(plan_uncordon(&foreign_empty).is_err());
    }

    #[test]
    fn a_marked_drain_resumes_until_the_host_is_cordoned() {
        let intent = DrainIntent {
            namespace: "p".into(),
            cluster: "c1".into(),
            machine: "m1".into(),
            machine_deployment: "md".into(),
            byo_machine: "bm1".into(),
            at: "2026-12-01T00:00:00Z".into(),
        };
        let mark = plan_drain_intent(&intent);
        let annotations = mark["metadata"]["annotations"].clone();
        let serving = host(
            json!({CLUSTER_NAME_LABEL: "c1"}),
            annotations.clone(),
            Some("bm1"),
        );
        assert_eq!(drain_intent(&serving), Some(Ok(intent)));
        assert!(
            drain_resumes(&serving),
            "still releasing the drained machine"
        );
        let released = host(json!({}), annotations.clone(), None);
        assert!(drain_resumes(&released));
        // Cordoned, the drain is still marked until its replacement runs.
        let cordoned = host(
            json!({CLUSTER_NAME_LABEL: ""}),
            json!({CORDON_ANNOTATION: "x", DRAIN_ANNOTATION: annotations[DRAIN_ANNOTATION]}),
            None,
        );
        assert!(is_cordoned(&cordoned) && drain_resumes(&cordoned));
        let done = plan_drain_done();
        assert!(
            done["metadata"]["annotations"]
                .as_object()
                .unwrap()
                .get(DRAIN_ANNOTATION)
                .is_some_and(Value::is_null)
        );
        let HostChange::Patch(u) = plan_uncordon(&cordoned).unwrap() else {
            panic!("patch expected")
        };
        assert!(
            u["metadata"]["annotations"]
                .as_object()
                .unwrap()
                .contains_key(DRAIN_ANNOTATION),
            "uncordon calls the drain off"
        );
        let reclaimed = host(
            json!({CLUSTER_NAME_LABEL: "c2"}),
            annotations.clone(),
            Some("bm9"),
        );
        assert!(!drain_resumes(&reclaimed), "another machine: a fresh drain");
        let edited = host(json!({}), json!({DRAIN_ANNOTATION: "by hand"}), None);
        assert_eq!(drain_intent(&edited), Some(Err("by hand".into())));
        assert!(drain_resumes(&edited));
        assert!(!drain_resumes(&host(json!({}), json!({}), None)));
        // Uncordon calls a pending drain off.
        let HostChange::Patch(u) = plan_uncordon(&released).unwrap() else {
            panic!("patch expected")
        };
        assert!(u["metadata"]["annotations"][DRAIN_ANNOTATION].is_null());
    }

    /// The release an agent would make, for a host whose agent is gone: the claim and what the
    /// controller set go, the host stays cordoned, the other conditions are kept.
    #[test]
    fn an_agent_release_clears_the_claim_and_cordons() {
        let mut h = host(
            json!({CLUSTER_NAME_LABEL: "c1", crate::plan::hosts::BYOMACHINE_NAME_LABEL: "p.bm1", "role": "w"}),
            json!({crate::plan::hosts::UNREGISTERING_ANNOTATION: ""}),
            Some("bm1"),
        );
        h["status"]["conditions"] = json!([
            {"type": "K8sNodeBootstrapSucceeded", "status": "True"},
            {"type": "K8sComponentsInstallationSucceeded", "status": "True"}]);
        let r = plan_agent_release(&h, "retired", "2026-12-03T00:00:00Z");
        let labels = &r.object["metadata"]["labels"];
        assert_eq!(labels[CLUSTER_NAME_LABEL], "");
        assert!(labels[crate::plan::hosts::BYOMACHINE_NAME_LABEL].is_null());
        assert!(labels.get("role").is_none(), "other labels untouched");
        let annotations = &r.object["metadata"]["annotations"];
        assert_eq!(annotations[CORDON_ANNOTATION], "retired");
        assert!(annotations[crate::plan::hosts::UNREGISTERING_ANNOTATION].is_null());
        assert!(r.object["spec"]["bootstrapSecret"].is_null());
        assert!(r.status["status"]["machineRef"].is_null());
        assert_eq!(
            r.status["status"]["conditions"],
            json!([{"type": "K8sComponentsInstallationSucceeded", "status": "True"},
                {"type": "K8sNodeBootstrapSucceeded", "status": "False", "reason": "K8sNodeAbsent",
                 "severity": "Info", "lastTransitionTime": "2026-12-03T00:00:00Z"}])
        );
        // Written, the host reads as cordoned.
        let mut after = h.clone();
        after["metadata"]["labels"] = json!({CLUSTER_NAME_LABEL: "", "role": "w"});
        after["metadata"]["annotations"] = json!({CORDON_ANNOTATION: "retired"});
        after["status"] = json!({"conditions": r.status["status"]["conditions"]});
        assert!(is_cordoned(&after));
    }

    #[test]
    fn drain_needs_a_matching_spare() {
        let tpl = json!({"kind": "ByoMachineTemplate", "metadata": {"name": "md"},
            "spec": {"template": {"spec": {"selector": {"matchLabels": {"role": "worker"}}}}}});
        let worker = json!({"metadata": {"name": "w2", "labels": {"role": "worker"}}});
        let cp = json!({"metadata": {"name": "c1", "labels": {"role": "control-plane"}}});
        assert_eq!(
            spare_hosts("w1", &tpl, &[worker.clone(), cp.clone()]),
            Ok(1)
        );
        let e = spare_hosts("w1", &tpl, &[cp]).unwrap_err().0;
        assert!(e.contains("no free host matches {role=worker}"), "{e}");
        assert!(
            spare_hosts("w2", &tpl, &[worker]).is_err(),
            "not the drained host itself"
        );
    }
}
