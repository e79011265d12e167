//! `kubectl capi hosts describe`: a host's state in plain words with what to check
//! ([`Inventory::diagnose`]), and why ByoMachines wait for a host
//! ([`Inventory::pending_machines`]).

use serde::Serialize;
use serde_json::Value;

use super::{
    BOOTSTRAP_CONDITION, HostRow, HostState, INSTALL_CONDITION, Inventory,
    UNREGISTERING_ANNOTATION, failure,
};
use crate::condition::{self, Condition};
use crate::json::{self, str_at};
use crate::plan::selector::LabelSelector;

impl Inventory<'_> {
    /// Plain-words diagnosis of one host for `hosts describe`.
    pub fn diagnose(&self, host: &Value) -> Diagnosis {
        let row = self.row(host);
        let cluster = row.cluster.clone().unwrap_or_default();
        let mut hints = Vec::new();
        let summary = self.summary(host, &row, &cluster, &mut hints);
        self.link_hints(host, &row, &cluster, &mut hints);
        Diagnosis {
            host: row.name.clone(),
            state: row.state,
            summary,
            hints,
        }
    }

    /// The one-line summary of the host's state; some states add hints.
    fn summary(
        &self,
        host: &Value,
        row: &HostRow,
        cluster: &str,
        hints: &mut Vec<String>,
    ) -> String {
        let conds = condition::conditions_at(host, &["status", "conditions"]);
        match row.state {
            HostState::Releasing if json::has_annotation(host, UNREGISTERING_ANNOTATION) => {
                hints.push(
                    "the agent resets the node, runs the uninstall script and clears machineRef; until then the host cannot be deleted or reused"
                        .to_string(),
                );
                "released but the agent has not cleaned up: is the host agent running?".to_string()
            }
            HostState::Releasing => format!(
                "its ByoMachine {} is gone but the host still references it: the agent has not cleaned up; is the host agent running?",
                row.byo_machine.clone().unwrap_or_default()
            ),
            HostState::Failed => failed_summary(&conds, hints),
            HostState::Paused => {
                if cluster.is_empty() {
                    "paused: the agent skips this host until its ByoMachine is resumed".to_string()
                } else {
                    format!(
                        "paused: cluster {cluster} (or its ByoMachine) is paused; the agent skips this host until it is resumed"
                    )
                }
            }
            HostState::Available
                if json::has_annotation(host, super::maintenance::DRAIN_ANNOTATION) =>
            {
                format!(
                    "available, but a drain of it did not finish: BYOH may pick it; kubectl capi hosts drain {} cordons it",
                    json::name(host)
                )
            }
            HostState::Available => "available: in the pool, no machine has claimed it".to_string(),
            HostState::Cordoned => format!(
                "cordoned ({}): out of BYOH's selection; kubectl capi hosts uncordon {} returns it to the pool",
                json::annotation(host, super::maintenance::CORDON_ANNOTATION).unwrap_or(""),
                json::name(host)
            ),
            HostState::Reserved => reserved_summary(host, row, cluster),
            HostState::Provisioning => self.provisioning_summary(host, &conds, hints),
            HostState::Unreachable => {
                let name = json::name(host);
                hints.push(format!(
                    "if the host is gone for good: kubectl capi hosts retire {name} replaces its machine on a spare host, releases and cordons it"
                ));
                format!(
                    "unreachable: node {} of cluster {cluster} stopped reporting (its kubelet, and the agent with it, or the host is down)",
                    row.node.as_deref().unwrap_or(name)
                )
            }
            HostState::Running => match (&row.node, &row.machine) {
                (Some(n), Some(m)) => {
                    format!("running: node {n} of cluster {cluster} (machine {m})")
                }
                _ => format!("running: bootstrapped into cluster {cluster}"),
            },
        }
    }

    /// A Provisioning host: which stage the agent is at.
    fn provisioning_summary(
        &self,
        host: &Value,
        conds: &[Condition],
        hints: &mut Vec<String>,
    ) -> String {
        let install = condition::find(conds, INSTALL_CONDITION);
        let boot = condition::find(conds, BOOTSTRAP_CONDITION);
        match (install, boot.and_then(|b| b.reason.as_deref())) {
            (Some(i), _) if i.reason.as_deref() == Some("K8sInstallationSecretUnavailable") => {
                let bm = self.byomachine_of(host);
                let (summary, hint) = installation_secret_wait(bm);
                hints.extend(hint);
                summary
            }
            (_, Some("BootstrapDataSecretUnavailable")) => {
                "provisioning: waiting for the bootstrap data secret".to_string()
            }
            (Some(i), _) if i.is_true() => {
                "provisioning: Kubernetes installed, bootstrapping the node (kubeadm)".to_string()
            }
            _ => "provisioning: the agent is installing Kubernetes and bootstrapping the node"
                .to_string(),
        }
    }

    /// Broken links of a claimed host: its Cluster gone, its ByoMachine without a Machine, an
    /// agent that never reported.
    fn link_hints(&self, host: &Value, row: &HostRow, cluster: &str, hints: &mut Vec<String>) {
        if row.state != HostState::Available
            && !cluster.is_empty()
            && self.cluster_of(host).is_none()
        {
            hints.push(format!("cluster {cluster} no longer exists"));
        }
        if matches!(
            row.state,
            HostState::Reserved | HostState::Provisioning | HostState::Running
        ) && row.byo_machine.is_some()
            && self.machine_of(host).is_none()
        {
            hints.push("no CAPI Machine owns its ByoMachine".to_string());
        }
        if str_at(host, &["status", "hostinfo", "osname"]).is_none()
            && str_at(host, &["status", "network"]).is_none()
        {
            hints.push(
                "the agent never reported host facts (hostinfo, network): has it ever run?"
                    .to_string(),
            );
        }
    }

    /// Why ByoMachines wait for a host: one finding per ByoMachine whose `BYOHostReady` is False
    /// with reason `BYOHostsUnavailable`, with the free hosts matching its selector.
    pub fn pending_machines(&self, byomachines: &[Value]) -> Vec<PendingMachine> {
        let free: Vec<&Value> = self
            .hosts
            .iter()
            .filter(|h| self.state(h) == HostState::Available)
            .collect();
        let mut out = Vec::new();
        for bm in byomachines {
            let conds = condition::legacy_conditions(bm);
            let waiting = condition::find(&conds, "BYOHostReady").is_some_and(|c| {
                !c.is_true() && c.reason.as_deref() == Some("BYOHostsUnavailable")
            });
            if !waiting {
                continue;
            }
            let sel = match LabelSelector::from_json(
                json::at(bm, &["spec", "selector"]).unwrap_or(&Value::Null),
            ) {
                Ok(s) => s,
                Err(e) => {
                    out.push(PendingMachine {
                        byo_machine: format!("{}/{}", json::namespace(bm), json::name(bm)),
                        selector: String::new(),
                        matching_free_hosts: 0,
                        message: format!("its host selector is invalid: {e}"),
                    });
                    continue;
                }
            };
            let n = free.iter().filter(|h| sel.matches_object(h)).count();
            let message = if n == 0 {
                format!(
                    "no host matches selector {}: {} free hosts in total; add hosts or relabel the template",
                    sel.braced(),
                    free.len()
                )
            } else {
                format!(
                    "{n} free hosts match selector {} but none was picked yet: the controller retries with backoff",
                    sel.braced()
                )
            };
            out.push(PendingMachine {
                byo_machine: format!("{}/{}", json::namespace(bm), json::name(bm)),
                selector: sel.to_string(),
                matching_free_hosts: n,
                message,
            });
        }
        out
    }
}

/// A Failed host: which stage of the agent failed, with its message.
fn failed_summary(conds: &[Condition], hints: &mut Vec<String>) -> String {
    let c = failure(conds);
    let what = match c.and_then(|c| c.reason.as_deref()) {
        Some("K8sComponentsInstallationFailed") => "install script error",
        Some("CloudInitExecutionFailed") => "bootstrap (cloud-init / kubeadm) error",
        Some("CleanK8sDirectoriesFailed") => "could not clean the Kubernetes directories",
        _ => "error",
    };
    hints.push(
        "see the agent's log on the host and `kubectl get events` for the ByoHost".to_string(),
    );
    match c.and_then(|c| c.message.as_deref()) {
        Some(m) => format!("failed: {what}: {m}"),
        None => format!("failed: {what}"),
    }
}

/// A Reserved host: what the claim still waits for.
fn reserved_summary(host: &Value, row: &HostRow, cluster: &str) -> String {
    let bm = row.byo_machine.clone().unwrap_or_default();
    if str_at(host, &["status", "machineRef", "name"]).is_none() {
        format!("reserved for cluster {cluster}, but no ByoMachine is attached yet")
    } else if str_at(host, &["spec", "bootstrapSecret", "name"]).is_none() {
        format!(
            "reserved by ByoMachine {bm}: waiting for the machine's bootstrap data (is the control plane initialized?)"
        )
    } else {
        format!(
            "reserved by ByoMachine {bm}, but the agent has not started on it: is the host agent running?"
        )
    }
}

/// Why an agent still waits for its installation secret, from its ByoMachine: BYOH makes a
/// K8sInstallerConfig (named after the ByoMachine, in its namespace; the kind is the
/// installerRef's without `Template`) only when `spec.installerRef` is set, and copies the
/// config's secret to the host once the config is ready. Returns the summary and a hint.
fn installation_secret_wait(byomachine: Option<&Value>) -> (String, Option<String>) {
    let generic = (
        "provisioning: waiting for the installation secret (the K8sInstallerConfig is not ready)"
            .to_string(),
        None,
    );
    // A metadata-only ByoMachine (or none) says nothing about installerRef.
    let Some(bm) = byomachine.filter(|b| b.get("spec").is_some()) else {
        return generic;
    };
    let (ns, name) = (json::namespace(bm), json::name(bm));
    let Some(r) = json::at(bm, &["spec", "installerRef"]).filter(|r| !r.is_null()) else {
        return (
            format!(
                "provisioning: the agent waits for an installation secret, but ByoMachine {ns}/{name} has no installerRef, so BYOH makes no K8sInstallerConfig"
            ),
            Some(
                "if the host has Kubernetes pre-installed, run its agent with --skip-installation; otherwise re-create the workers from a ByoMachineTemplate whose installerRef names a K8sInstallerConfigTemplate (kubectl kamaji create does, unless --preinstalled-hosts)"
                    .to_string(),
            ),
        );
    };
    let template_kind = str_at(r, &["kind"]).unwrap_or("K8sInstallerConfigTemplate");
    let config_kind = template_kind.replace("Template", "");
    let template = match (str_at(r, &["namespace"]), str_at(r, &["name"])) {
        (Some(tns), Some(t)) => format!(" (from {template_kind} {tns}/{t})"),
        (None, Some(t)) => format!(" (from {template_kind} {t})"),
        _ => String::new(),
    };
    (
        format!(
            "provisioning: waiting for the installation secret: {config_kind} {ns}/{name}{template} is not ready"
        ),
        Some(format!(
            "BYOH's controller fills it for operating systems its installer supports (v0.5.0: Ubuntu 20.04 amd64); see kubectl describe {} -n {ns} {name} and the BYOH controller's log",
            config_kind.to_ascii_lowercase()
        )),
    )
}

/// The plain-words diagnosis of `hosts describe`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Diagnosis {
    pub host: String,
    pub state: HostState,
    /// One line: what is going on and what to check.
    pub summary: String,
    /// Further findings.
    pub hints: Vec<String>,
}

/// A ByoMachine waiting for a host.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct PendingMachine {
    pub byo_machine: String,
    /// The selector in kubectl syntax (empty: any host).
    pub selector: String,
    pub matching_free_hosts: usize,
    pub message: String,
}
