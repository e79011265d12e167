//! Pure parts of `kubectl capi delete CLUSTER`: what will go (preview), what is left while
//! CAPI cascades (progress: objects stuck on finalizers, hosts still Releasing), and which
//! BootstrapKubeconfigs no host needs any more.
//!
//! The verb deletes only the `Cluster` and lets CAPI cascade (the BCM guide's six manual steps
//! become one); BYOH hosts are released by their agents, so a host whose agent is down stays
//! Releasing and is reported by name.

use serde::Serialize;
use serde_json::Value;

use super::hosts::{CLUSTER_NAME_LABEL, HostState, Inventory};
use crate::json::{self, at, str_at};
use crate::text;

/// Lifetime of the bootstrap token in a BootstrapKubeconfig (generated once, at creation).
pub(crate) const BOOTSTRAP_TOKEN_TTL_SECONDS: i64 = 30 * 60;

/// One Machine that will be deleted.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct MachineToDelete {
    pub name: String,
    /// `control-plane` or `worker`.
    pub role: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub node: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub host: Option<String>,
}

/// What `delete` shows before asking.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct DeletePreview {
    pub cluster: String,
    pub namespace: String,
    /// `Kind/name`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub infrastructure: Option<String>,
    /// `Kind/name`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub control_plane: Option<String>,
    pub machine_deployments: Vec<String>,
    pub machines: Vec<MachineToDelete>,
    /// ByoHosts serving the cluster; their agents release them back to the pool.
    pub hosts_to_release: Vec<String>,
    /// Already being deleted (`metadata.deletionTimestamp` on the Cluster).
    pub already_deleting: bool,
}

fn ref_name(v: &Value, path: &[&str]) -> Option<String> {
    let r = at(v, path)?;
    Some(format!(
        "{}/{}",
        str_at(r, &["kind"])?,
        str_at(r, &["name"])?
    ))
}

/// Build the preview. `machines` are the cluster's Machines; `inventory` joins its hosts.
pub fn preview(
    cluster: &Value,
    machine_deployments: &[Value],
    machines: &[Value],
    inventory: Option<&Inventory<'_>>,
) -> DeletePreview {
    let name = json::name(cluster).to_string();
    let ns = json::namespace(cluster).to_string();
    let mut mds: Vec<String> = machine_deployments
        .iter()
        .map(|m| json::name(m).to_string())
        .collect();
    mds.sort();
    let mut ms: Vec<MachineToDelete> = machines
        .iter()
        .map(|m| MachineToDelete {
            name: json::name(m).to_string(),
            role: if json::label(m, crate::labels::CONTROL_PLANE_LABEL).is_some() {
                "control-plane"
            } else {
                "worker"
            }
            .into(),
            node: str_at(m, &["status", "nodeRef", "name"]).map(str::to_string),
            host: str_at(m, &["spec", "providerID"])
                .and_then(super::hosts::host_from_provider_id)
                .map(str::to_string),
        })
        .collect();
    ms.sort_by(|a, b| {
        (a.role != "control-plane", &a.name).cmp(&(b.role != "control-plane", &b.name))
    });
    let mut hosts: Vec<String> = inventory
        .map(|inv| {
            inv.hosts_of(&ns, &name)
                .into_iter()
                .map(|h| json::name(h).to_string())
                .collect()
        })
        .unwrap_or_default();
    hosts.sort();
    DeletePreview {
        infrastructure: ref_name(cluster, &["spec", "infrastructureRef"]),
        control_plane: ref_name(cluster, &["spec", "controlPlaneRef"]),
        machine_deployments: mds,
        machines: ms,
        hosts_to_release: hosts,
        already_deleting: at(cluster, &["metadata", "deletionTimestamp"])
            .is_some_and(|d| !d.is_null()),
        cluster: name,
        namespace: ns,
    }
}

/// An object still present while the cluster is deleted.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct StuckObject {
    pub kind: String,
    pub namespace: String,
    pub name: String,
    pub finalizers: Vec<String>,
    /// Seconds since `deletionTimestamp` (None: not marked for deletion yet).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub deleting_for_seconds: Option<i64>,
}

/// A host its agent has not cleaned up.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ReleasingHost {
    pub name: String,
    pub namespace: String,
    pub diagnosis: String,
}

/// Where a delete stands.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct DeleteProgress {
    /// Objects of the cluster still present, sorted by kind and name.
    pub remaining: Vec<StuckObject>,
    /// Hosts of the cluster still Releasing (or still claimed by it).
    pub releasing_hosts: Vec<ReleasingHost>,
    /// Nothing of the cluster is left and every host is back in the pool.
    pub done: bool,
}

impl DeleteProgress {
    /// One line per problem for the final report, e.g.
    /// `host node004 is still Releasing: released but the agent has not cleaned up: is the host agent running?`.
    pub fn report_lines(&self) -> Vec<String> {
        let mut out = Vec::new();
        for o in &self.remaining {
            if o.finalizers.is_empty() {
                out.push(format!(
                    "{} {}/{} is still present",
                    o.kind, o.namespace, o.name
                ));
            } else {
                out.push(format!(
                    "{} {}/{} is stuck on finalizers {}",
                    o.kind,
                    o.namespace,
                    o.name,
                    o.finalizers.join(", ")
                ));
            }
        }
        for h in &self.releasing_hosts {
            out.push(format!(
                "host {} is still Releasing: {}",
                h.name, h.diagnosis
            ));
        }
        out
    }
}

/// Compute the progress of a delete of cluster `namespace/cluster_name`. `remaining` are the
/// cluster's objects still listed (any kinds: Cluster, control plane, Machines, infra
/// objects...); `inventory` joins the ByoHosts. A host counts when it is the cluster's and not
/// free yet, or Releasing with no cluster left on it (BYOH took the label off) in the cluster's
/// namespace: never a host of a same-named cluster elsewhere, nor one stuck in another namespace.
pub fn progress(
    namespace: &str,
    cluster_name: &str,
    remaining: &[Value],
    hosts: &[Value],
    inventory: Option<&Inventory<'_>>,
    now: Option<jiff::Timestamp>,
) -> DeleteProgress {
    let mut rem: Vec<StuckObject> = remaining
        .iter()
        .map(|o| StuckObject {
            kind: json::kind(o).to_string(),
            namespace: json::namespace(o).to_string(),
            name: json::name(o).to_string(),
            finalizers: json::strings_at(o, &["metadata", "finalizers"]),
            deleting_for_seconds: str_at(o, &["metadata", "deletionTimestamp"])
                .and_then(|t| now.and_then(|n| text::seconds_since(t, n))),
        })
        .collect();
    rem.sort_by(|a, b| (&a.kind, &a.name).cmp(&(&b.kind, &b.name)));
    let mut releasing: Vec<ReleasingHost> = match inventory {
        Some(inv) => hosts
            .iter()
            .filter(|h| {
                let st = inv.state(h);
                match inv.cluster_key_of(h) {
                    Some(key) => key == (namespace, cluster_name) && st != HostState::Available,
                    None => st == HostState::Releasing && json::namespace(h) == namespace,
                }
            })
            .map(|h| ReleasingHost {
                name: json::name(h).to_string(),
                namespace: json::namespace(h).to_string(),
                diagnosis: inv.diagnose(h).summary,
            })
            .collect(),
        None => vec![],
    };
    releasing.sort_by(|a, b| a.name.cmp(&b.name));
    DeleteProgress {
        done: rem.is_empty() && releasing.is_empty(),
        remaining: rem,
        releasing_hosts: releasing,
    }
}

/// Why a BootstrapKubeconfig can go.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct UnusedBootstrapKubeconfig {
    pub namespace: String,
    pub name: String,
    pub reason: String,
    /// Its token expired and no host of its name has registered (rather than: its host has).
    #[serde(skip)]
    pub expired: bool,
}

/// BootstrapKubeconfigs no host needs any more: their bootstrap token expired (it lives 30
/// minutes and is generated once), or the host they were made for (named in the object's name,
/// as in `bootstrap-kubeconfig-<host>`) has registered, after which the agent uses its own
/// certificate. With `now` unknown only the second rule applies.
pub fn unused_bootstrap_kubeconfigs(
    bootstrap_kubeconfigs: &[Value],
    host_names: &std::collections::HashSet<&str>,
    now: Option<jiff::Timestamp>,
) -> Vec<UnusedBootstrapKubeconfig> {
    let mut out = Vec::new();
    for b in bootstrap_kubeconfigs {
        let name = json::name(b);
        let registered = host_names
            .iter()
            .find(|h| name == **h || name.ends_with(&format!("-{h}")));
        let age = now.and_then(|n| {
            str_at(b, &["metadata", "creationTimestamp"]).and_then(|t| text::seconds_since(t, n))
        });
        let reason = if let Some(h) = registered {
            Some(format!("host {h} has registered"))
        } else if age.is_some_and(|a| a > BOOTSTRAP_TOKEN_TTL_SECONDS) {
            Some("its bootstrap token has expired (30 minutes)".to_string())
        } else {
            None
        };
        if let Some(reason) = reason {
            out.push(UnusedBootstrapKubeconfig {
                namespace: json::namespace(b).to_string(),
                name: name.to_string(),
                reason,
                expired: registered.is_none(),
            });
        }
    }
    out.sort_by(|a, b| (&a.namespace, &a.name).cmp(&(&b.namespace, &b.name)));
    out
}

/// Whether `obj` has an owner reference to Cluster `cluster` (so Cluster API's cascade, through
/// the garbage collector, removes it with the Cluster).
pub fn owned_by_cluster(obj: &Value, cluster: &str) -> bool {
    at(obj, &["metadata", "ownerReferences"])
        .and_then(Value::as_array)
        .is_some_and(|refs| {
            refs.iter().any(|r| {
                str_at(r, &["kind"]) == Some("Cluster") && str_at(r, &["name"]) == Some(cluster)
            })
        })
}

/// The label Kamaji puts on what it makes for a TenantControlPlane, valued with the
/// TenantControlPlane's name (Kamaji v1.0.0, internal/utilities/utilities.go, KamajiLabels).
pub const KAMAJI_NAME_LABEL: &str = "kamaji.clastix.io/name";
/// The selector of everything Kamaji labels as its own (the same KamajiLabels).
pub const KAMAJI_PROJECT_SELECTOR: &str = "kamaji.clastix.io/project=kamaji";
/// Kamaji's finalizers: `finalizer.kamaji.clastix.io` and `finalizer.kamaji.clastix.io/...`
/// (Kamaji v1.0.0, controllers/finalizers/tcp.go).
pub(crate) const KAMAJI_FINALIZER: &str = "finalizer.kamaji.clastix.io";

/// Whether a finalizer is Kamaji's.
pub(crate) fn is_kamaji_finalizer(f: &str) -> bool {
    f == KAMAJI_FINALIZER
        || f.strip_prefix(KAMAJI_FINALIZER)
            .is_some_and(|rest| rest.starts_with('/'))
}

/// The names of `objects` (what Kamaji labelled as its own) that a Kamaji finalizer holds
/// for one of the TenantControlPlanes `tcps`: Kamaji v1.0.0 keeps the `<tcp>-datastore-config`
/// Secret with `finalizer.kamaji.clastix.io/datastore-secret` until the TenantControlPlane's
/// DataStore clean-up lets go of it (internal/resources/datastore/datastore_storage_config.go),
/// so a teardown is not done while it is there. Sorted, each once.
pub fn held_by_kamaji(objects: &[Value], tcps: &[String]) -> Vec<String> {
    let mut out: Vec<String> = objects
        .iter()
        .filter(|o| {
            json::label(o, KAMAJI_NAME_LABEL).is_some_and(|t| tcps.iter().any(|n| n == t))
                && json::strings_at(o, &["metadata", "finalizers"])
                    .iter()
                    .any(|f| is_kamaji_finalizer(f))
        })
        .map(|o| json::name(o).to_string())
        .collect();
    out.sort();
    out.dedup();
    out
}

/// The finalizers to leave on `secret` when Kamaji will never take its own off it, else `None`.
///
/// Kamaji v1.0.0 lets go of the `<tcp>-datastore-config` Secret in the reconcile that ends the
/// TenantControlPlane's DataStore clean-up (controllers/tenantcontrolplane_controller.go runs
/// `GetDeletableResources`: `ds.Setup` drops the TenantControlPlane's finalizer once the data is
/// gone, then `ds.Config.Delete` in internal/resources/datastore/datastore_storage_config.go
/// clears the Secret's finalizers with a cached Get and an Update). The TenantControlPlane goes
/// with its last finalizer, so the garbage collector is deleting the Secret while that Update
/// runs; when the Update loses (a conflict) or the cache lacks the Secret, the retry finds no
/// TenantControlPlane and returns: the finalizer stays for good (our CI saw it under load).
///
/// Such a leftover: `secret` is being deleted, carries a Kamaji finalizer, and the
/// TenantControlPlane that controls it is gone (`tcp_uid` is the uid of the TenantControlPlane
/// of that name now, if there is one; another uid is a new TenantControlPlane of the same
/// name, not its owner). Its DataStore data was cleaned before that TenantControlPlane could go.
pub fn left_by_kamaji(secret: &Value, tcp_uid: Option<&str>) -> Option<Vec<String>> {
    at(secret, &["metadata", "deletionTimestamp"]).filter(|v| !v.is_null())?;
    let finalizers = json::strings_at(secret, &["metadata", "finalizers"]);
    if !finalizers.iter().any(|f| is_kamaji_finalizer(f)) {
        return None;
    }
    let owner_uid = at(secret, &["metadata", "ownerReferences"])
        .and_then(Value::as_array)
        .and_then(|refs| {
            refs.iter().find(|r| {
                str_at(r, &["kind"]) == Some("TenantControlPlane")
                    && r.get("controller").and_then(Value::as_bool) == Some(true)
            })
        })
        .and_then(|r| str_at(r, &["uid"]));
    let owner_gone = match (owner_uid, tcp_uid) {
        (_, None) => true,
        (Some(owner), Some(now)) => owner != now,
        // Without an owner reference, a TenantControlPlane of the name is taken as its owner.
        (None, Some(_)) => false,
    };
    owner_gone.then(|| {
        finalizers
            .into_iter()
            .filter(|f| !is_kamaji_finalizer(f))
            .collect()
    })
}

/// Templates a teardown would delete that something outside it still uses: `(kind, name)` →
/// the user, e.g. `MachineDeployment other-md-0`. `machine_deployments` are the namespace's
/// MachineDeployments (those of `cluster` are skipped: they go too); `machine_templates` are
/// the namespace's ByoMachineTemplates (those in `doomed` are skipped), whose
/// `spec.template.spec.installerRef` names a K8sInstallerConfigTemplate. `doomed` holds
/// `(kind, name)` pairs.
pub fn templates_in_use(
    cluster: &str,
    machine_deployments: &[Value],
    machine_templates: &[Value],
    doomed: &[(String, String)],
) -> std::collections::BTreeMap<(String, String), String> {
    use crate::fields;
    let mut out = std::collections::BTreeMap::new();
    let mut used = |r: Option<fields::ObjectRef>, user: String| {
        if let Some(r) = r {
            let k = (r.kind, r.name);
            if doomed.contains(&k) {
                out.entry(k).or_insert(user);
            }
        }
    };
    for md in machine_deployments {
        let of_cluster = json::label(md, CLUSTER_NAME_LABEL) == Some(cluster)
            || str_at(md, &["spec", "clusterName"]) == Some(cluster);
        if of_cluster {
            continue;
        }
        let user = format!("MachineDeployment {}", json::name(md));
        used(fields::template_infrastructure_ref(md), user.clone());
        used(
            fields::object_ref(md, &["spec", "template", "spec", "bootstrap", "configRef"]),
            user,
        );
    }
    for t in machine_templates {
        let me = (json::kind(t).to_string(), json::name(t).to_string());
        if doomed.contains(&me) {
            continue;
        }
        used(
            fields::object_ref(t, &["spec", "template", "spec", "installerRef"]),
            format!("{} {}", me.0, me.1),
        );
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::plan::hosts::{BYOMACHINE_NAME_LABEL, UNREGISTERING_ANNOTATION};
    use serde_json::json;

    fn host(name: &str, cluster: Option<&str>, unregistering: bool) -> Value {
        let mut h = json!({"kind": "ByoHost", "metadata": {"name": name, "namespace": "default", "labels": {}}, "status": {}});
        if let Some(c) = cluster {
            h["metadata"]["labels"][CLUSTER_NAME_LABEL] = json!(c);
            h["metadata"]["labels"][BYOMACHINE_NAME_LABEL] = json!(format!("team-a.bm-{name}"));
            h["status"]["machineRef"] =
                json!({"kind": "ByoMachine", "namespace": "team-a", "name": format!("bm-{name}")});
            h["status"]["conditions"] =
                json!([{"type": "K8sNodeBootstrapSucceeded", "status": "True"}]);
        }
        if unregistering {
            h["metadata"]["annotations"] = json!({UNREGISTERING_ANNOTATION: ""});
        }
        h
    }

    #[test]
    fn kamaji_holds_the_datastore_secret_of_its_tenant() {
        let secret = |name: &str, tcp: &str, fin: &[&str]| {
            json!({"kind": "Secret", "metadata": {"name": name,
                "labels": {KAMAJI_NAME_LABEL: tcp, "kamaji.clastix.io/project": "kamaji"},
                "finalizers": fin}})
        };
        let objs = [
            secret(
                "s7-datastore-config",
                "s7",
                &["finalizer.kamaji.clastix.io/datastore-secret"],
            ),
            secret("s7-admin-kubeconfig", "s7", &[]),
            secret(
                "s6-datastore-config",
                "s6",
                &["finalizer.kamaji.clastix.io/datastore-secret"],
            ),
            secret("s7-other", "s7", &["finalizer.kamaji.clastix.io.example/x"]),
            secret("s7-plain", "s7", &["finalizer.kamaji.clastix.io"]),
        ];
        assert_eq!(
            held_by_kamaji(&objs, &["s7".to_string()]),
            ["s7-datastore-config", "s7-plain"]
        );
        assert!(held_by_kamaji(&objs, &[]).is_empty());
    }

    #[test]
    fn a_datastore_secret_whose_tenant_is_gone_is_left_by_kamaji() {
        let secret = |deleting: bool, owner: Option<&str>| {
            let mut s = json!({"kind": "Secret", "metadata": {"name": "s7-datastore-config",
                "labels": {KAMAJI_NAME_LABEL: "s7"},
                "finalizers": ["finalizer.kamaji.clastix.io/datastore-secret", "example.com/keep"]}});
            if deleting {
                s["metadata"]["deletionTimestamp"] = json!("2026-12-02T01:00:00Z");
            }
            if let Some(uid) = owner {
                s["metadata"]["ownerReferences"] = json!([{"kind": "TenantControlPlane",
                    "name": "s7", "uid": uid, "controller": true}]);
            }
            s
        };
        let keep = Some(vec!["example.com/keep".to_string()]);
        // Its TenantControlPlane gone: Kamaji will not come back to it.
        assert_eq!(left_by_kamaji(&secret(true, Some("u1")), None), keep);
        // A new TenantControlPlane of the same name is not its owner.
        assert_eq!(left_by_kamaji(&secret(true, Some("u1")), Some("u2")), keep);
        // Its owner is still there: Kamaji is still at work.
        assert_eq!(left_by_kamaji(&secret(true, Some("u1")), Some("u1")), None);
        assert_eq!(left_by_kamaji(&secret(true, None), Some("u1")), None);
        // Not being deleted, or no Kamaji finalizer: nothing to finish.
        assert_eq!(left_by_kamaji(&secret(false, Some("u1")), None), None);
        let mut plain = secret(true, Some("u1"));
        plain["metadata"]["finalizers"] = json!(["example.com/keep"]);
        assert_eq!(left_by_kamaji(&plain, None), None);
    }

    fn machine(name: &str, cp: bool, host: &str) -> Value {
        let mut labels = json!({"cluster.x-k8s.io/cluster-name": "c1"});
        if cp {
            labels["cluster.x-k8s.io/control-plane"] = json!("");
        }
        json!({"kind": "Machine", "metadata": {"name": name, "namespace": "team-a", "labels": labels,
            "finalizers": ["machine.cluster.x-k8s.io"]},
            "spec": {"providerID": format!("byoh://{host}/abc")}, "status": {"nodeRef": {"name": host}}})
    }

    #[test]
    fn preview_lists_what_goes() {
        let c = json!({"kind": "Cluster", "metadata": {"name": "c1", "namespace": "team-a"},
            "spec": {"controlPlaneRef": {"kind": "KubeadmControlPlane", "name": "c1-cp"}, "infrastructureRef": {"kind": "ByoCluster", "name": "c1"}}});
        let mds = vec![json!({"kind": "MachineDeployment", "metadata": {"name": "c1-md-0"}})];
        let ms = vec![
            machine("w1", false, "node003"),
            machine("cp1", true, "node001"),
        ];
        let hosts = vec![
            host("node001", Some("c1"), false),
            host("node003", Some("c1"), false),
            host("node009", Some("c2"), false),
            host("free", None, false),
        ];
        let bms: Vec<Value> = ["node001", "node003", "node009"]
            .iter()
            .map(|h| json!({"kind": "ByoMachine", "metadata": {"name": format!("bm-{h}"), "namespace": "team-a"}}))
            .collect();
        let inv = Inventory::build(&hosts, &bms, &[], &[], None);
        let p = preview(&c, &mds, &ms, Some(&inv));
        assert_eq!(
            p.control_plane.as_deref(),
            Some("KubeadmControlPlane/c1-cp")
        );
        assert_eq!(p.infrastructure.as_deref(), Some("ByoCluster/c1"));
        assert_eq!(p.machines[0].name, "cp1");
        assert_eq!(p.machines[0].role, "control-plane");
        assert_eq!(p.machines[1].host.as_deref(), Some("node003"));
        assert_eq!(p.hosts_to_release, ["node001", "node003"]);
        assert!(!p.already_deleting);
        assert_eq!(p.machine_deployments, ["c1-md-0"]);
    }

    #[test]
    fn progress_reports_stuck_objects_and_releasing_hosts() {
        let now: jiff::Timestamp = "2026-11-30T08:00:00Z".parse().unwrap();
        let mut m = machine("w1", false, "node003");
        m["metadata"]["deletionTimestamp"] = json!("2026-11-30T07:50:00Z");
        let remaining = vec![
            m,
            json!({"kind": "ByoCluster", "metadata": {"name": "c1", "namespace": "team-a",
            "finalizers": ["byocluster.infrastructure.cluster.x-k8s.io"], "deletionTimestamp": "2026-11-30T07:55:00Z"}}),
        ];
        // node003's ByoMachine is gone and the agent has not cleaned up; node004 is back in the pool
        let hosts = vec![
            host("node003", Some("c1"), true),
            host("node004", None, false),
            host("node009", Some("c2"), false),
        ];
        let bms = vec![
            json!({"kind": "ByoMachine", "metadata": {"name": "bm-node009", "namespace": "team-a"}}),
        ];
        let inv = Inventory::build(&hosts, &bms, &[], &[], None);
        let p = progress("team-a", "c1", &remaining, &hosts, Some(&inv), Some(now));
        assert!(!p.done);
        assert_eq!(p.remaining[0].kind, "ByoCluster");
        assert_eq!(p.remaining[1].deleting_for_seconds, Some(600));
        assert_eq!(p.releasing_hosts.len(), 1);
        assert_eq!(p.releasing_hosts[0].name, "node003");
        let lines = p.report_lines();
        assert_eq!(
            lines[0],
            "ByoCluster team-a/c1 is stuck on finalizers byocluster.infrastructure.cluster.x-k8s.io"
        );
        assert_eq!(
            lines[2],
            "host node003 is still Releasing: released but the agent has not cleaned up: is the host agent running?"
        );

        let clean = vec![host("node003", None, false)];
        let inv = Inventory::build(&clean, &[], &[], &[], None);
        let p = progress("team-a", "c1", &[], &clean, Some(&inv), Some(now));
        assert!(p.done);
        assert!(p.report_lines().is_empty());
    }

    /// Cluster names repeat across namespaces: deleting team-a's c1 neither waits for team-b's
    /// c1's host nor for a host stuck Releasing in another namespace (a shared testbed caught
    /// the wait on another test's host), and its preview does not list team-b's.
    #[test]
    fn a_same_named_cluster_elsewhere_is_not_this_ones() {
        let now: jiff::Timestamp = "2026-11-30T08:00:00Z".parse().unwrap();
        let mut theirs = host("node005", Some("c1"), true);
        theirs["metadata"]["labels"][BYOMACHINE_NAME_LABEL] = json!("team-b.bm-node005");
        theirs["status"]["machineRef"]["namespace"] = json!("team-b");
        let mut stray = host("node006", None, true);
        stray["metadata"]["namespace"] = json!("team-c");
        let ours = host("node003", Some("c1"), true);
        let hosts = vec![theirs, stray, ours];
        let inv = Inventory::build(&hosts, &[], &[], &[], None);
        let p = progress("team-a", "c1", &[], &hosts, Some(&inv), Some(now));
        let names: Vec<&str> = p.releasing_hosts.iter().map(|h| h.name.as_str()).collect();
        assert_eq!(names, ["node003"]);
        let p = progress("team-b", "c1", &[], &hosts, Some(&inv), Some(now));
        let names: Vec<&str> = p.releasing_hosts.iter().map(|h| h.name.as_str()).collect();
        assert_eq!(names, ["node005"]);
        let cluster = json!({"kind": "Cluster", "metadata": {"name": "c1", "namespace": "team-a"}});
        assert_eq!(
            preview(&cluster, &[], &[], Some(&inv)).hosts_to_release,
            ["node003"]
        );
    }

    #[test]
    fn templates_another_cluster_still_uses_are_kept() {
        let md = |name: &str, cluster: &str, infra: &str, boot: &str| {
            json!({"kind": "MachineDeployment", "metadata": {"name": name, "labels": {CLUSTER_NAME_LABEL: cluster}},
                "spec": {"clusterName": cluster, "template": {"spec": {
                    "infrastructureRef": {"apiGroup": "infrastructure.cluster.x-k8s.io", "kind": "ByoMachineTemplate", "name": infra},
                    "bootstrap": {"configRef": {"apiGroup": "bootstrap.cluster.x-k8s.io", "kind": "KubeadmConfigTemplate", "name": boot}}}}}})
        };
        let bmt = |name: &str, installer: &str| {
            json!({"kind": "ByoMachineTemplate", "metadata": {"name": name},
                "spec": {"template": {"spec": {"installerRef": {"apiVersion": "infrastructure.cluster.x-k8s.io/v1beta1",
                    "kind": "K8sInstallerConfigTemplate", "name": installer, "namespace": "team-a"}}}}})
        };
        let k = |kind: &str, name: &str| (kind.to_string(), name.to_string());
        let doomed = vec![
            k("ByoMachineTemplate", "c1-md-0"),
            k("KubeadmConfigTemplate", "c1-md-0"),
            k("K8sInstallerConfigTemplate", "c1-md-0"),
        ];
        let mds = vec![
            md("c1-md-0", "c1", "c1-md-0", "c1-md-0"),
            md("c2-md-0", "c2", "c2-md-0", "c1-md-0"),
        ];
        let bmts = vec![
            bmt("c1-md-0", "c1-md-0"),
            bmt("c2-md-0", "c1-md-0"),
            bmt("c3-md-0", "c3-md-0"),
        ];
        let used = templates_in_use("c1", &mds, &bmts, &doomed);
        assert_eq!(
            used.into_iter().collect::<Vec<_>>(),
            [
                (
                    k("K8sInstallerConfigTemplate", "c1-md-0"),
                    "ByoMachineTemplate c2-md-0".to_string()
                ),
                (
                    k("KubeadmConfigTemplate", "c1-md-0"),
                    "MachineDeployment c2-md-0".to_string()
                ),
            ]
        );
        // Nobody else: everything goes.
        assert!(templates_in_use("c1", &mds[..1], &bmts[..1], &doomed).is_empty());
    }

    #[test]
    fn bootstrap_kubeconfigs_no_host_needs() {
        let now: jiff::Timestamp = "2026-11-30T08:00:00Z".parse().unwrap();
        let bkc = |name: &str, created: &str| json!({"kind": "BootstrapKubeconfig", "metadata": {"name": name, "namespace": "default", "creationTimestamp": created}});
        let bkcs = vec![
            bkc("bootstrap-kubeconfig-node001", "2026-11-30T07:59:00Z"),
            bkc("bootstrap-kubeconfig-node002", "2026-11-30T07:59:00Z"),
            bkc("bootstrap-kubeconfig-node005", "2026-11-29T07:00:00Z"),
        ];
        let hosts = std::collections::HashSet::from(["node001"]);
        let u = unused_bootstrap_kubeconfigs(&bkcs, &hosts, Some(now));
        assert_eq!(u.len(), 2);
        assert_eq!(u[0].name, "bootstrap-kubeconfig-node001");
        assert_eq!(u[0].reason, "host node001 has registered");
        assert_eq!(u[1].name, "bootstrap-kubeconfig-node005");
        assert!(u[1].reason.contains("expired"));
        assert_eq!(unused_bootstrap_kubeconfigs(&bkcs, &hosts, None).len(), 1);
    }
}
