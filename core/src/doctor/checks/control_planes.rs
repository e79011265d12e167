//! TenantControlPlanes: certificates, readiness, Kamaji's range, DataStores.

use serde_json::Value;

use super::{Ctx, Entry, entry, finding, ns_flag};
use crate::doctor::{Check, Problem, Subject};
use crate::json::{self, str_at};
use crate::plan::Severity;

pub(super) const CHECKS: &[Entry] = &[
    entry!(certificates: [CertificateExpired, CertificateExpiring] needs [Certificates] uses []),
    entry!(control_planes_ready: [ControlPlaneNotReady] needs [TenantControlPlanes] uses []),
    entry!(kamaji_range: [VersionOutsideKamajiRange] needs [TenantControlPlanes] uses [KamajiRefusals]),
    entry!(datastores_tls: [DataStoreStopsKamaji] needs [DataStores] uses []),
    entry!(datastores_secrets: [DataStoreUnusable] needs [DataStores] uses [DataStoreSecrets]),
];

fn certificates(c: &Ctx, out: &mut Vec<Problem>) {
    // Per tenant, the certificate that expires first.
    let tenants = crate::doctor::tenant_expiries(
        &c.fleet.certificates,
        c.thresholds.cert_warn_seconds,
        c.now,
    );
    for t in tenants
        .iter()
        .filter(|t| t.expired.saturating_add(t.expiring) > 0)
    {
        let (cert, expired, soon) = (&t.first, t.expired, t.expiring);
        let (ns, tenant) = (cert.namespace.as_str(), cert.tenant.as_str());
        let subject = Subject {
            kind: "TenantControlPlane".into(),
            namespace: ns.into(),
            name: tenant.into(),
        };
        let left = cert.not_after_unix.saturating_sub(c.now);
        let which = format!("{} of Secret {}", cert.key, cert.secret);
        let (severity, check, cause) = if expired > 0 {
            (
                Severity::Error,
                Check::CertificateExpired,
                format!(
                    "{expired} certificate(s) expired, {which} on {} ({} ago)",
                    cert.not_after,
                    crate::text::age(left.saturating_neg())
                ),
            )
        } else {
            (
                Severity::Warning,
                Check::CertificateExpiring,
                format!(
                    "{soon} certificate(s) expire within {}, {which} first, in {} days",
                    crate::text::age(c.thresholds.cert_warn_seconds),
                    left.div_euclid(86_400)
                ),
            )
        };
        let fix = format!(
            "kubectl kamaji certificates rotate {tenant}{} --all=true",
            ns_flag(ns)
        );
        out.push(finding(severity, check, subject, cause, fix));
    }
}

fn control_planes_ready(c: &Ctx, out: &mut Vec<Problem>) {
    for tcp in &c.fleet.tenant_control_planes {
        let status = str_at(tcp, &["status", "kubernetesResources", "version", "status"]);
        if status == Some("Ready") || json::at(tcp, &["metadata", "deletionTimestamp"]).is_some() {
            continue;
        }
        let Some(age) = c.since(tcp, &["metadata", "creationTimestamp"]) else {
            continue;
        };
        if !c.stuck(age) {
            continue;
        }
        let name = json::name(tcp);
        let ns = ns_flag(json::namespace(tcp));
        // Migrating: the tenant is frozen until Kamaji's migration ends; Kamaji v1.0.0 never
        // ends one on Kubernetes v1.31+ by itself (see `kamaji::migrate::complete_first`).
        let (cause, fix) = match (status, str_at(tcp, &["spec", "dataStore"])) {
            (Some("Migrating"), Some(to)) => (
                format!(
                    "Migrating to DataStore {to} (writes to the tenant are refused until it ends); created {} ago",
                    crate::text::age(age)
                ),
                format!("kubectl kamaji migrate {name} --to {to} --wait{ns}"),
            ),
            _ => (
                format!(
                    "{} {} after its creation",
                    status.unwrap_or("no status"),
                    crate::text::age(age)
                ),
                format!("kubectl kamaji status {name}{ns}"),
            ),
        };
        out.push(finding(
            Severity::Error,
            Check::ControlPlaneNotReady,
            Subject::of("TenantControlPlane", tcp),
            cause,
            fix,
        ));
    }
}

/// TenantControlPlanes at a version Kamaji refused a change to (the CLI asks Kamaji once per
/// version): stuck, since Kamaji has no rollback (clastix/kamaji#979).
fn kamaji_range(c: &Ctx, out: &mut Vec<Problem>) {
    for tcp in &c.fleet.tenant_control_planes {
        let Some(version) = str_at(tcp, &["spec", "kubernetes", "version"]) else {
            continue;
        };
        let Some(refusal) = c.fleet.kamaji_refusals.get(version) else {
            continue;
        };
        out.push(finding(
            Severity::Error,
            Check::VersionOutsideKamajiRange,
            Subject::of("TenantControlPlane", tcp),
            format!("runs Kubernetes {version}, and Kamaji refuses every change to it: \"{refusal}\""),
            format!(
                "install a Kamaji release that supports {version}: Kamaji cannot downgrade a control plane, so this one waits for it"
            ),
        ));
    }
}

fn datastores_tls(c: &Ctx, out: &mut Vec<Problem>) {
    for ds in &c.fleet.datastores {
        let name = json::name(ds);
        let tls = json::at(ds, &["spec", "tlsConfig"]).filter(|t| t.is_object());
        if tls.is_some_and(|t| t.get("clientCertificate").is_none_or(Value::is_null)) {
            out.push(finding(
                Severity::Error,
                Check::DataStoreStopsKamaji,
                Subject {
                    kind: "DataStore".into(),
                    namespace: String::new(),
                    name: name.into(),
                },
                "has a tlsConfig without a clientCertificate: Kamaji v1.0.0's manager stops on such a DataStore (its DataStore Secret indexer dereferences it), and with it every control plane's reconciliation".into(),
                format!("kubectl edit datastore {name} (add spec.tlsConfig.clientCertificate, or remove tlsConfig)"),
            ));
        }
    }
}

fn datastores_secrets(c: &Ctx, out: &mut Vec<Problem>) {
    for ds in &c.fleet.datastores {
        let name = json::name(ds);
        let missing = crate::kamaji::plan::datastore_secret_keys(ds)
            .into_iter()
            .filter(|k| !k.namespace.is_empty())
            .find_map(|k| {
                let id = format!("{}/{}", k.namespace, k.name);
                match c.fleet.datastore_secrets.get(&id) {
                    Some(Some(keys)) if keys.contains(&k.key) => None,
                    Some(Some(_)) => Some(format!("Secret {id} has no key {}", k.key)),
                    Some(None) => Some(format!("Secret {id} does not exist")),
                    // Not read: nothing to say.
                    None => None,
                }
            });
        if let Some(missing) = missing {
            out.push(finding(
                Severity::Error,
                Check::DataStoreUnusable,
                Subject {
                    kind: "DataStore".into(),
                    namespace: String::new(),
                    name: name.into(),
                },
                format!("{missing}, which Kamaji needs to reach it: control planes on it are not provisioned"),
                format!("kubectl get datastore {name} -o yaml (create the Secret and key it names)"),
            ));
        }
    }
}
