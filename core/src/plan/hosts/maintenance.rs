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
pub const CORDON_ANNOTATION: &str = "capi-kamaji.io/cordoned";

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
            "annotations": {CORDON_ANNOTATION: null},
        }})));
    }
    match json::label(host, CLUSTER_NAME_LABEL) {
        Some(c) if !c.is_empty() => Err(MaintenanceError(format!(
            "ByoHost {name} is not cordoned: it serves cluster {c:?}"
        ))),
        Some(_) => Err(MaintenanceError(format!(
            "ByoHost {name} has an empty {CLUSTER_NAME_LABEL} label that kubectl capi did not set; remove it by hand if it should be free"
        ))),
        None => Ok(HostChange::Unchanged),
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
