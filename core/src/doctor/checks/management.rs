//! The providers and controllers of the management cluster.

use super::{Ctx, Entry, entry, finding, ns_flag};
use crate::doctor::Check;
use crate::doctor::{LeaseInfo, Problem, Subject};
use crate::labels::{CACPPK_LEASE, RECONCILER_LEASE};
use crate::plan::Severity;

pub(super) const CHECKS: &[Entry] = &[
    entry!(cluster_api: [ClusterApiMissing] needs [] uses []),
    entry!(leases: [ReconcilerStopped, SecondControlPlaneProvider] needs [Leases] uses []),
    entry!(crds: [ConversionFailing, CrdStoredVersions] needs [Crds] uses []),
];

fn cluster_api(c: &Ctx, out: &mut Vec<Problem>) {
    if !c.fleet.capi_served {
        out.push(finding(
            Severity::Error,
            Check::ClusterApiMissing,
            Subject {
                kind: "APIGroup".into(),
                namespace: String::new(),
                name: crate::groups::CAPI_GROUP.into(),
            },
            "Cluster API's core (cluster.x-k8s.io Clusters) is not served".into(),
            "clusterctl init --control-plane kamaji --infrastructure byoh, then kubectl kamaji install".into(),
        ));
    }
}

fn crds(c: &Ctx, out: &mut Vec<Problem>) {
    for crd in &c.fleet.crds {
        let subject = || Subject {
            kind: "CustomResourceDefinition".into(),
            namespace: String::new(),
            name: crd.name.clone(),
        };
        if let Some((version, message)) = &crd.conversion_failure {
            out.push(finding(
                Severity::Error,
                Check::ConversionFailing,
                subject(),
                format!(
                    "reading it at {version} fails in its conversion webhook: {}",
                    message.replace('\n', " ")
                ),
                format!(
                    "check the provider that serves its conversion webhook (kubectl get crd {} -o jsonpath='{{.spec.conversion.webhook.clientConfig}}')",
                    crd.name
                ),
            ));
        }
        let old: Vec<&str> = crd
            .stored_versions
            .iter()
            .filter(|v| **v != crd.storage_version)
            .map(String::as_str)
            .collect();
        if !old.is_empty() && !crd.storage_version.is_empty() {
            out.push(finding(
                Severity::Warning,
                Check::CrdStoredVersions,
                subject(),
                format!(
                    "objects may still be stored at {} (it stores {} now): a release that stops serving {} cannot read them",
                    old.join(", "),
                    crd.storage_version,
                    if old.len() == 1 { "it" } else { "them" }
                ),
                format!(
                    "re-write every object at {} (clusterctl upgrade apply does for its providers), then: kubectl patch crd {} --subresource=status --type=merge -p '{{\"status\":{{\"storedVersions\":[\"{}\"]}}}}'",
                    crd.storage_version, crd.name, crd.storage_version
                ),
            ));
        }
    }
}

/// A Lease is held while it was renewed within twice its duration (one missed renewal is
/// allowed for, as client-go's leader election does with its retry period).
fn lease_alive(l: &LeaseInfo, now: i64) -> Option<bool> {
    let renewed = l.renewed_unix?;
    Some(now.saturating_sub(renewed) <= l.duration_seconds.saturating_mul(2).max(1))
}

fn leases(c: &Ctx, out: &mut Vec<Problem>) {
    let ours = c.fleet.leases.iter().find(|l| l.name == RECONCILER_LEASE);
    let theirs = c.fleet.leases.iter().find(|l| l.name == CACPPK_LEASE);
    let lease_subject = |l: &LeaseInfo| Subject {
        kind: "Lease".into(),
        namespace: l.namespace.clone(),
        name: l.name.clone(),
    };
    if let Some(l) = ours
        && lease_alive(l, c.now) == Some(false)
    {
        let ago = l.renewed_unix.map(|r| c.now.saturating_sub(r)).unwrap_or(0);
        out.push(finding(
            Severity::Error,
            Check::ReconcilerStopped,
            lease_subject(l),
            format!(
                "kamaji-reconciler last renewed its Lease {} ago: no KamajiControlPlane, ClusterUpgrade or FleetUpgrade moves",
                crate::text::age(ago)
            ),
            format!(
                "kubectl{} rollout restart deployment/kamaji-reconciler (kubectl kamaji install puts it back if it is gone)",
                ns_flag(&l.namespace)
            ),
        ));
    }
    if let (Some(a), Some(b)) = (ours, theirs)
        && lease_alive(a, c.now) == Some(true)
        && lease_alive(b, c.now) == Some(true)
    {
        out.push(finding(
            Severity::Error,
            Check::SecondControlPlaneProvider,
            lease_subject(b),
            "two KamajiControlPlane providers run (kamaji-reconciler and CACPPK): they write the same TenantControlPlanes".into(),
            "keep one: clusterctl delete --control-plane kamaji, or kubectl kamaji uninstall".into(),
        ));
    }
}
