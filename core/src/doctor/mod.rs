//! `doctor`: what is wrong across the management cluster and the fleet, or about to break, and
//! what to type to fix it. A pure function of one read of each kind ([`Fleet`]): every finding
//! names its object, its cause in one line, and the command that fixes it.
//!
//! The checks (`checks.rs`) are grouped in [`Section`]s; each has a stable [`Check`] code, so
//! that automation can key on it (`-o json`, schema in the README).

mod checks;
#[cfg(test)]
mod tests;

use serde::Serialize;
use serde_json::Value;

use crate::plan::Severity;

/// Where a finding belongs, in report order.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Section {
    /// The providers and controllers of the management cluster.
    Management,
    /// TenantControlPlanes: certificates, readiness.
    ControlPlanes,
    /// Machines and BYOH hosts.
    Workers,
    /// Objects nothing uses any more.
    Leftovers,
    /// Paused clusters, failed or paused upgrades.
    Operations,
}

impl Section {
    /// Every section, in report order.
    pub const ALL: [Section; 5] = [
        Section::Management,
        Section::ControlPlanes,
        Section::Workers,
        Section::Leftovers,
        Section::Operations,
    ];

    /// The name `--only` takes and `-o json` prints.
    pub fn as_str(self) -> &'static str {
        match self {
            Section::Management => "management",
            Section::ControlPlanes => "control-planes",
            Section::Workers => "workers",
            Section::Leftovers => "leftovers",
            Section::Operations => "operations",
        }
    }

    /// A `--only` value, case-insensitively.
    pub fn parse(s: &str) -> Option<Section> {
        Section::ALL
            .into_iter()
            .find(|x| x.as_str().eq_ignore_ascii_case(s.trim()))
    }
}

/// What a finding is about: a stable code per kind of problem.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
pub enum Check {
    /// The Cluster API core is not served.
    ClusterApiMissing,
    /// kamaji-reconciler's Lease is not renewed: the reconciler stopped.
    ReconcilerStopped,
    /// Two KamajiControlPlane providers hold their Leases (ours and CACPPK): they fight over
    /// the same objects.
    SecondControlPlaneProvider,
    /// A certificate of a TenantControlPlane expired.
    CertificateExpired,
    /// A certificate of a TenantControlPlane expires within `--cert-warn`.
    CertificateExpiring,
    /// A TenantControlPlane is not Ready after `--stuck-after`.
    ControlPlaneNotReady,
    /// A Machine sits Pending, Provisioning or Deleting beyond `--stuck-after`.
    MachineStuck,
    /// Workers newer than their control plane, or more minors behind than Kubernetes allows.
    VersionSkew,
    /// A BYOH host's agent reported a failure.
    HostFailed,
    /// A BYOH host lost its machine and its agent has not cleaned up.
    HostReleasing,
    /// A TenantControlPlane that no KamajiControlPlane owns.
    OrphanTenantControlPlane,
    /// Secrets of a cluster that no longer exists.
    OrphanSecrets,
    /// A cluster paused (spec.paused or the paused annotation).
    ClusterPaused,
    /// A ClusterUpgrade or FleetUpgrade that failed.
    UpgradeFailed,
    /// A ClusterUpgrade or FleetUpgrade paused.
    UpgradePaused,
}

/// The object of a finding.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Subject {
    pub kind: String,
    #[serde(skip_serializing_if = "String::is_empty")]
    pub namespace: String,
    pub name: String,
}

impl Subject {
    /// The kind and `namespace/name` of an object as the server sent it.
    pub(crate) fn of(kind: &str, obj: &Value) -> Subject {
        Subject {
            kind: kind.to_string(),
            namespace: crate::json::namespace(obj).to_string(),
            name: crate::json::name(obj).to_string(),
        }
    }
}

/// One finding: how bad, where, why, and what to type.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Problem {
    pub section: Section,
    pub severity: Severity,
    pub check: Check,
    pub object: Subject,
    /// The cause, in one line.
    pub cause: String,
    /// The command that fixes it (one of ours where there is one), or what to look at.
    pub fix: String,
}

/// One certificate of a tenant, read from Kamaji's Secrets.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TenantCertificate {
    pub namespace: String,
    /// The TenantControlPlane (Kamaji's `kamaji.clastix.io/name` label on the Secret).
    pub tenant: String,
    pub secret: String,
    /// The Secret's key (`apiserver.crt`, `admin.conf`, ...).
    pub key: String,
    /// RFC 3339.
    pub not_after: String,
    /// Unix seconds.
    pub not_after_unix: i64,
}

/// A Lease as the checks read it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LeaseInfo {
    pub namespace: String,
    pub name: String,
    /// Unix seconds of `renewTime` (else `acquireTime`); `None` when never set.
    pub renewed_unix: Option<i64>,
    pub duration_seconds: i64,
}

/// Everything the checks read: one list per kind (objects as the server sent them, either CAPI
/// contract), already narrowed to the namespaces asked for.
#[derive(Debug, Clone, Default)]
pub struct Fleet {
    /// Whether the server serves Cluster API's core (`cluster.x-k8s.io` Clusters).
    pub capi_served: bool,
    pub clusters: Vec<Value>,
    pub machines: Vec<Value>,
    pub byo_hosts: Vec<Value>,
    pub byo_machines: Vec<Value>,
    pub tenant_control_planes: Vec<Value>,
    pub kamaji_control_planes: Vec<Value>,
    pub cluster_upgrades: Vec<Value>,
    pub fleet_upgrades: Vec<Value>,
    /// Secrets carrying the `cluster.x-k8s.io/cluster-name` label (metadata is enough).
    pub cluster_secrets: Vec<Value>,
    pub certificates: Vec<TenantCertificate>,
    pub leases: Vec<LeaseInfo>,
}

/// The thresholds a user can set.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Thresholds {
    /// Certificates expiring within this many seconds are a warning (`--cert-warn`).
    pub cert_warn_seconds: i64,
    /// Machines and control planes in a transient state longer than this are stuck
    /// (`--stuck-after`).
    pub stuck_after_seconds: i64,
}

impl Default for Thresholds {
    fn default() -> Self {
        Thresholds {
            cert_warn_seconds: 30 * 86_400,
            stuck_after_seconds: 15 * 60,
        }
    }
}

/// Every finding of the sections asked for (all when `only` is empty), worst first, then by
/// section, check and object.
pub fn examine(
    fleet: &Fleet,
    thresholds: &Thresholds,
    only: &[Section],
    now: jiff::Timestamp,
) -> Vec<Problem> {
    let ctx = checks::Ctx {
        fleet,
        thresholds,
        now: now.as_second(),
    };
    let mut out = Vec::new();
    for section in Section::ALL {
        if only.is_empty() || only.contains(&section) {
            out.extend(checks::run(section, &ctx));
        }
    }
    out.sort_by(|a, b| {
        b.severity
            .cmp(&a.severity)
            .then(a.section.cmp(&b.section))
            .then(a.check.cmp(&b.check))
            .then(a.object.cmp(&b.object))
    });
    out
}

/// How many findings of each severity.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct Counts {
    pub error: usize,
    pub warning: usize,
    pub info: usize,
}

impl Counts {
    pub fn of(findings: &[Problem]) -> Counts {
        let n = |s: Severity| findings.iter().filter(|f| f.severity == s).count();
        Counts {
            error: n(Severity::Error),
            warning: n(Severity::Warning),
            info: n(Severity::Info),
        }
    }
}
