//! Objects nothing uses any more.

use std::collections::BTreeSet;

use serde_json::Value;

use super::{Ctx, Entry, entry, finding, ns_flag};
use crate::doctor::{Check, Problem, Subject};
use crate::json::{self, str_at};
use crate::labels::CLUSTER_NAME_LABEL;
use crate::plan::Severity;

pub(super) const CHECKS: &[Entry] = &[
    entry!(orphan_tenants: [OrphanTenantControlPlane] needs [TenantControlPlanes, KamajiControlPlanes] uses []),
    entry!(orphan_secrets: [OrphanSecrets] needs [ClusterSecrets, Clusters] uses []),
    entry!(unused_installer_templates: [UnusedInstallerTemplate] needs [InstallerTemplates, ByoMachineTemplates] uses []),
    entry!(unused_bootstrap_kubeconfigs: [UnusedBootstrapKubeconfig] needs [BootstrapKubeconfigs, ByoHosts] uses []),
];

/// The `(namespace, name)` of each object.
fn keys(objects: &[Value]) -> BTreeSet<(&str, &str)> {
    objects
        .iter()
        .map(|o| (json::namespace(o), json::name(o)))
        .collect()
}

fn orphan_tenants(c: &Ctx, out: &mut Vec<Problem>) {
    let kcps = keys(&c.fleet.kamaji_control_planes);
    for tcp in &c.fleet.tenant_control_planes {
        let ns = json::namespace(tcp);
        match json::owner_of_kind(tcp, "KamajiControlPlane") {
            Some(owner) if kcps.contains(&(ns, owner)) => continue,
            _ => {}
        }
        if json::at(tcp, &["metadata", "deletionTimestamp"]).is_some() {
            continue;
        }
        out.push(finding(
            Severity::Warning,
            Check::OrphanTenantControlPlane,
            Subject::of("TenantControlPlane", tcp),
            "no KamajiControlPlane owns it: no Cluster API cluster uses this control plane".into(),
            format!(
                "kubectl kamaji delete {}{} (if nothing outside Cluster API uses it)",
                json::name(tcp),
                ns_flag(ns)
            ),
        ));
    }
}

fn orphan_secrets(c: &Ctx, out: &mut Vec<Problem>) {
    let clusters = keys(&c.fleet.clusters);
    for ((ns, cluster), n) in &c.fleet.cluster_secrets {
        let (ns, cluster) = (ns.as_str(), cluster.as_str());
        if clusters.contains(&(ns, cluster)) {
            continue;
        }
        out.push(finding(
            Severity::Warning,
            Check::OrphanSecrets,
            Subject {
                kind: "Cluster".into(),
                namespace: ns.into(),
                name: cluster.into(),
            },
            format!("{n} Secret(s) labelled for cluster {cluster}, which does not exist"),
            format!(
                "kubectl delete secret{} -l {CLUSTER_NAME_LABEL}={cluster}",
                ns_flag(ns)
            ),
        ));
    }
}

/// BootstrapKubeconfigs no host needs (the rules `kubectl capi delete` cleans up by): one whose
/// token expired before a host registered with it is a warning (a host still waiting cannot
/// register with it); one whose host registered is clutter.
fn unused_bootstrap_kubeconfigs(c: &Ctx, out: &mut Vec<Problem>) {
    let now = jiff::Timestamp::from_second(c.now).ok();
    let hosts = c.fleet.byo_hosts.iter().map(|h| h.name.as_str()).collect();
    let unused = crate::plan::teardown::unused_bootstrap_kubeconfigs(
        &c.fleet.bootstrap_kubeconfigs,
        &hosts,
        now,
    );
    for u in unused {
        let (severity, cause) = if u.expired {
            (
                Severity::Warning,
                format!(
                    "{}: a host that has not registered yet cannot register with it",
                    u.reason
                ),
            )
        } else {
            (
                Severity::Info,
                format!("{}: it is not needed any more", u.reason),
            )
        };
        let fix = format!(
            "kubectl delete bootstrapkubeconfig {}{}{}",
            u.name,
            ns_flag(&u.namespace),
            if u.expired {
                " (kubectl capi hosts add issues a new one for a host still to register)"
            } else {
                ""
            }
        );
        out.push(finding(
            severity,
            Check::UnusedBootstrapKubeconfig,
            Subject {
                kind: "BootstrapKubeconfig".into(),
                namespace: u.namespace,
                name: u.name,
            },
            cause,
            fix,
        ));
    }
}

/// K8sInstallerConfigTemplates no ByoMachineTemplate names (in `spec.template.spec.installerRef`,
/// its namespace defaulting to the template's): left behind by a cluster deleted by hand. One
/// younger than `--stuck-after` may be a create under way, and is not reported.
fn unused_installer_templates(c: &Ctx, out: &mut Vec<Problem>) {
    let used: BTreeSet<(&str, &str)> = c
        .fleet
        .byo_machine_templates
        .iter()
        .filter_map(|t| {
            let r = json::at(t, &["spec", "template", "spec", "installerRef"])?;
            let name = str_at(r, &["name"])?;
            let ns = str_at(r, &["namespace"])
                .filter(|n| !n.is_empty())
                .unwrap_or(json::namespace(t));
            Some((ns, name))
        })
        .collect();
    for t in &c.fleet.installer_templates {
        let (ns, name) = (json::namespace(t), json::name(t));
        if used.contains(&(ns, name))
            || json::at(t, &["metadata", "deletionTimestamp"]).is_some()
            || !c
                .since(t, &["metadata", "creationTimestamp"])
                .is_some_and(|age| c.stuck(age))
        {
            continue;
        }
        out.push(finding(
            Severity::Info,
            Check::UnusedInstallerTemplate,
            Subject::of("K8sInstallerConfigTemplate", t),
            "no ByoMachineTemplate names it as its installer: no host installs Kubernetes from it"
                .into(),
            format!(
                "kubectl delete k8sinstallerconfigtemplate {name}{}",
                ns_flag(ns)
            ),
        ));
    }
}
