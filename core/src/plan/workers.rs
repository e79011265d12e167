//! Where a cluster's workers stand while `kubectl kamaji create --wait` waits for them: joined
//! (the Machine has a `nodeRef`: kubeadm join ran and the Node exists) versus Ready (the Node's
//! Ready condition, which Cluster API mirrors on the Machine as `NodeReady`, kubelet message
//! included). A joined node that stays NotReady because no network plugin runs is the common
//! case on a fresh Kamaji cluster: the kubelet reports `KubeletNotReady` with "container runtime
//! network not ready: ... NetworkPluginNotReady ... cni plugin not initialized", and the wait
//! says so and how to fix it.

use std::time::Duration;

use serde_json::Value;

use crate::Error;
use crate::fields;

/// Whether a NotReady message is the kubelet's "no network plugin" one.
pub(crate) fn is_network_plugin_message(message: &str) -> bool {
    let m = message.to_ascii_lowercase();
    [
        "networkpluginnotready",
        "network plugin",
        "cni plugin not initialized",
        "networkready=false",
    ]
    .iter()
    .any(|p| m.contains(p))
}

/// The workers of one cluster, counted from its worker Machines.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct WorkerProgress {
    /// Replicas the MachineDeployments want.
    pub desired: i64,
    /// Machines with a `nodeRef`.
    pub joined: i64,
    /// Joined Machines whose Node is Ready.
    pub ready: i64,
    /// Joined Machines whose Node is NotReady because no network plugin runs.
    pub no_network: i64,
    /// The first other reason a joined Node is NotReady (the kubelet's message).
    pub other: Option<String>,
    /// Ready replicas the MachineDeployments report (they follow the Machines' Ready, which
    /// lags the Node's).
    pub md_ready: i64,
}

impl WorkerProgress {
    /// Counts `machines` (the cluster's worker Machines, any CAPI version) against `desired`.
    /// When no Machine reports `NodeReady` (a Cluster API that does not mirror Node conditions),
    /// `md_ready` (the MachineDeployments' ready replicas) stands for the Ready count.
    pub fn of(desired: i64, machines: &[Value], md_ready: i64) -> WorkerProgress {
        let mut p = WorkerProgress {
            desired,
            md_ready,
            ..Default::default()
        };
        let mut mirrored = false;
        for m in machines {
            let joined = fields::at(m, &["status", "nodeRef"]).is_some_and(|r| !r.is_null());
            if !joined {
                continue;
            }
            p.joined += 1;
            let Some(c) = fields::condition(m, "NodeReady") else {
                continue;
            };
            mirrored = true;
            if c.is_true() {
                p.ready += 1;
                continue;
            }
            // CAPI writes the kubelet's message as "* Node.Ready: <message>".
            let msg = c.message.clone().unwrap_or_default();
            let msg = msg
                .trim()
                .trim_start_matches("* Node.Ready:")
                .trim()
                .to_string();
            if is_network_plugin_message(&msg) {
                p.no_network += 1;
            } else if p.other.is_none() && !msg.is_empty() {
                p.other = Some(msg);
            }
        }
        if !mirrored {
            p.ready = md_ready;
        }
        p
    }

    /// Every wanted worker's Node is Ready and the MachineDeployments say so too.
    pub fn done(&self) -> bool {
        self.ready >= self.desired && self.md_ready >= self.desired
    }

    fn network_text(&self) -> String {
        format!(
            "{} NotReady: no network plugin runs (the kubelet reports NetworkPluginNotReady); install one with kubectl kamaji create --cni calico or --cni-manifest FILE, or by hand",
            plural(self.no_network, "joined node")
        )
    }

    /// Where the workers stand, for the wait's progress line (without the phase number).
    pub fn pending(&self) -> String {
        let mut s = if self.joined < self.desired {
            format!(
                "workers joining: {}/{} joined, {} Ready",
                self.joined, self.desired, self.ready
            )
        } else if self.ready < self.desired {
            format!(
                "workers joined: {}/{} Ready",
                self.ready.min(self.desired),
                self.desired
            )
        } else {
            format!(
                "workers Ready: the MachineDeployments report {}/{} ready",
                self.md_ready, self.desired
            )
        };
        if self.no_network > 0 {
            s.push_str(&format!("; {}", self.network_text()));
        } else if let Some(o) = &self.other {
            s.push_str(&format!("; NotReady: {o}"));
        }
        s
    }

    /// The error when the wait times out with nodes NotReady for want of a network plugin;
    /// `None` otherwise (the generic timeout applies).
    pub fn timeout_error(&self, cluster: &str, after: Duration) -> Option<Error> {
        if self.no_network == 0 {
            return None;
        }
        Some(Error::Other {
            message: format!(
                "cluster {cluster} is not ready after {}: {}/{} workers joined, {} Ready, {} NotReady because no network plugin runs",
                crate::text::human_duration(after),
                self.joined,
                self.desired,
                self.ready,
                self.no_network
            ),
            hint: Some(format!(
                "re-run kubectl kamaji create {cluster} with the same flags and --cni calico or --cni-manifest FILE (Cluster API then installs it), or install a network plugin by hand (kubectl capi kubeconfig {cluster})"
            )),
        })
    }
}

fn plural(n: i64, what: &str) -> String {
    if n == 1 {
        format!("1 {what}")
    } else {
        format!("{n} {what}s")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    const KUBELET: &str = "container runtime network not ready: NetworkReady=false reason:NetworkPluginNotReady message:Network plugin returns error: cni plugin not initialized";

    /// A worker Machine as Cluster API v1.14 reports it (v1beta2 conditions).
    fn machine(node: bool, ready: Option<(&str, &str)>) -> Value {
        let mut m = json!({"apiVersion": "cluster.x-k8s.io/v1beta2", "kind": "Machine",
            "metadata": {"name": "w"}, "status": {"conditions": []}});
        if node {
            m["status"]["nodeRef"] = json!({"name": "host-01"});
        }
        if let Some((status, message)) = ready {
            m["status"]["conditions"] = json!([{"type": "NodeReady", "status": status,
                "reason": if status == "True" { "NodeReady" } else { "NodeNotReady" },
                "message": message}]);
        }
        m
    }

    #[test]
    fn joined_is_not_ready_and_a_missing_network_plugin_is_named() {
        let msg = format!("* Node.Ready: {KUBELET}");
        let ms = vec![
            machine(true, Some(("False", &msg))),
            machine(true, Some(("False", &msg))),
        ];
        let p = WorkerProgress::of(2, &ms, 0);
        assert_eq!((p.joined, p.ready, p.no_network), (2, 0, 2));
        assert!(!p.done());
        assert_eq!(
            p.pending(),
            "workers joined: 0/2 Ready; 2 joined nodes NotReady: no network plugin runs (the kubelet reports NetworkPluginNotReady); install one with kubectl kamaji create --cni calico or --cni-manifest FILE, or by hand"
        );
        let e = p.timeout_error("prod", Duration::from_secs(600)).unwrap();
        assert_eq!(
            e.to_string(),
            "cluster prod is not ready after 10m: 2/2 workers joined, 0 Ready, 2 NotReady because no network plugin runs"
        );
        assert!(
            e.hint()
                .unwrap()
                .contains("--cni calico or --cni-manifest FILE")
        );
    }

    #[test]
    fn joining_ready_and_other_reasons() {
        // One joined and Ready, one without a node yet.
        let ms = vec![machine(true, Some(("True", ""))), machine(false, None)];
        let p = WorkerProgress::of(2, &ms, 1);
        assert_eq!(p.pending(), "workers joining: 1/2 joined, 1 Ready");
        // Nodes Ready before the MachineDeployment counts them: not done yet.
        let p = WorkerProgress::of(1, &[machine(true, Some(("True", "")))], 0);
        assert!(!p.done());
        assert_eq!(
            p.pending(),
            "workers Ready: the MachineDeployments report 0/1 ready"
        );
        assert!(p.timeout_error("prod", Duration::from_secs(5)).is_none());
        // Another NotReady reason is passed on as the kubelet says it.
        let ms = vec![machine(
            true,
            Some(("False", "* Node.Ready: PLEG is not healthy")),
        )];
        let p = WorkerProgress::of(1, &ms, 0);
        assert_eq!(
            p.pending(),
            "workers joined: 0/1 Ready; NotReady: PLEG is not healthy"
        );
        assert!(p.timeout_error("prod", Duration::from_secs(5)).is_none());
        // All Ready.
        let p = WorkerProgress::of(1, &[machine(true, Some(("True", "")))], 1);
        assert!(p.done());
        // Nothing wanted: done at once.
        assert!(WorkerProgress::of(0, &[], 0).done());
    }

    #[test]
    fn v1beta1_machines_and_clusters_that_do_not_mirror_node_conditions() {
        // CAPI 1.10 serving v1beta1: the new conditions are under status.v1beta2.
        let m = json!({"apiVersion": "cluster.x-k8s.io/v1beta1", "kind": "Machine",
            "status": {"nodeRef": {"name": "n"}, "conditions": [{"type": "Ready", "status": "True"}],
                "v1beta2": {"conditions": [{"type": "NodeReady", "status": "False", "reason": "NodeNotReady",
                    "message": format!("* Node.Ready: {KUBELET}")}]}}});
        let p = WorkerProgress::of(1, &[m], 0);
        assert_eq!(p.no_network, 1);
        // No NodeReady anywhere: the MachineDeployments' ready count stands in.
        let old = json!({"status": {"nodeRef": {"name": "n"}}});
        let p = WorkerProgress::of(1, std::slice::from_ref(&old), 1);
        assert!(p.done());
        let p = WorkerProgress::of(1, &[old], 0);
        assert_eq!(p.pending(), "workers joined: 0/1 Ready");
    }

    #[test]
    fn network_plugin_messages() {
        assert!(is_network_plugin_message(KUBELET));
        assert!(is_network_plugin_message(
            "network plugin is not ready: cni config uninitialized"
        ));
        assert!(!is_network_plugin_message("PLEG is not healthy"));
    }
}
