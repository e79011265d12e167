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
    entry!(contracts: [ProviderContractV1beta1Only] needs [Crds] uses []),
    entry!(components: [ComponentMissing, ComponentUnavailable] needs [Components] uses []),
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
            "kubectl capi init".into(),
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

/// Each component of `kubectl capi init`'s set that is missing, or whose controller is not
/// available, with the `init` line that installs it (a re-run of init applies what is missing).
/// Missing: its API is not served and something needs it: nothing of the set is there at all
/// (a bare cluster), or a component that is there needs it (our provider needs Kamaji; a
/// management cluster without Kamaji, or without our provider, is a choice). cert-manager is
/// needed for the webhook certificates of the upstream providers that run from their
/// Deployments. A component whose API is served without its Deployment in its namespace is not
/// judged (its controller may run elsewhere: another namespace, outside the cluster).
fn components(c: &Ctx, out: &mut Vec<Problem>) {
    use crate::install::rollout::{DeploymentRollout, deployment_rollout};
    let all = c.fleet.components.as_deref().unwrap_or_default();
    let bare = all.iter().all(|s| !s.served && s.deployment.is_none());
    let providers_deployed = all.iter().any(|s| {
        s.deployment.is_some()
            && s.component.role.provider_type().is_some()
            && s.component.id != crate::labels::PROVIDER
    });
    for s in all {
        let comp = s.component;
        let subject = Subject {
            kind: "Deployment".into(),
            namespace: comp.namespace.into(),
            name: comp.deployment.into(),
        };
        let Some(d) = &s.deployment else {
            let wanted_by_another = all.iter().any(|o| {
                (o.served || o.deployment.is_some()) && o.component.needs.contains(&comp.id)
            });
            let needed = if comp.id == "cert-manager" {
                !s.served && (bare || providers_deployed)
            } else {
                !s.served && (bare || wanted_by_another)
            };
            if !needed {
                continue;
            }
            out.push(finding(
                Severity::Error,
                Check::ComponentMissing,
                subject,
                format!(
                    "{} is not installed (no deployment {} in namespace {})",
                    comp.id, comp.deployment, comp.namespace
                ),
                comp.init_line(),
            ));
            continue;
        };
        let why = match deployment_rollout(d) {
            DeploymentRollout::Done => continue,
            DeploymentRollout::Waiting(w) | DeploymentRollout::Stalled(w) => w,
        };
        out.push(finding(
            Severity::Error,
            Check::ComponentUnavailable,
            subject,
            format!("{}'s controller is not available: {why}", comp.id),
            format!(
                "kubectl -n {} describe deployment/{}; then {} --wait-providers",
                comp.namespace,
                comp.deployment,
                comp.init_line()
            ),
        ));
    }
}

/// Each provider (by its CRDs' `cluster.x-k8s.io/provider` label, else their group) whose CRDs
/// implement only Cluster API's v1beta1 contract, once. Info: nothing is wrong today, but a
/// Cluster API release that stops serving v1beta1 (upstream plans v1.16) will not work with it
/// (BYOH v0.5.0 is such a provider), so the upgrade waits for the provider's.
fn contracts(c: &Ctx, out: &mut Vec<Problem>) {
    let mut providers: std::collections::BTreeMap<&str, (bool, bool)> = Default::default();
    for crd in &c.fleet.crds {
        let provider_group = crd.group != crate::groups::CAPI_GROUP
            && crd
                .group
                .ends_with(&format!(".{}", crate::groups::CAPI_GROUP));
        if !provider_group || crd.contracts.is_empty() {
            continue;
        }
        let key = if crd.provider.is_empty() {
            crd.group.as_str()
        } else {
            crd.provider.as_str()
        };
        let e = providers.entry(key).or_default();
        e.0 |= crd.contracts.iter().any(|v| v == "v1beta1");
        e.1 |= crd.contracts.iter().any(|v| v != "v1beta1");
    }
    for (provider, (v1beta1, newer)) in providers {
        if !v1beta1 || newer {
            continue;
        }
        out.push(finding(
            Severity::Info,
            Check::ProviderContractV1beta1Only,
            Subject {
                kind: "Provider".into(),
                namespace: String::new(),
                name: provider.to_string(),
            },
            format!(
                "{provider} implements only Cluster API's v1beta1 contract: a Cluster API release that stops serving v1beta1 (upstream plans v1.16) will not work with it"
            ),
            format!(
                "keep Cluster API below that release until {provider} has one for the v1beta2 contract (kubectl capi version shows each provider's contract)"
            ),
        ));
    }
}
