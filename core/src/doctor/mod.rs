//! `doctor`: what is wrong across the management cluster and the fleet, or about to break, and
//! what to type to fix it. A pure function of one read of each kind ([`Fleet`]): every finding
//! names its object, its cause in one line, and the command that fixes it.
//!
//! The checks (`checks/`, a file per section) are grouped in [`Section`]s; each has a stable
//! [`Check`] code, so that automation can key on it (`-o json`, schema in the README). What
//! they read, and what a refused read leaves unchecked, is read once for the CLI and the
//! reconciler by [`read`].

mod checks;
mod facts;
pub mod read;
#[cfg(test)]
mod tests;

use crate::plan::hosts::HostFacts;
pub use facts::{HostEvent, MachineFacts};
pub(crate) use facts::{object_key, secret_cluster};

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
    /// A component of `kubectl capi init`'s set has no controller Deployment.
    ComponentMissing,
    /// A component's controller Deployment is not available.
    ComponentUnavailable,
    /// kamaji-reconciler's Lease is not renewed: the reconciler stopped.
    ReconcilerStopped,
    /// A provider whose CRDs implement only Cluster API's v1beta1 contract: a Cluster API
    /// release that stops serving v1beta1 will not work with it.
    ProviderContractV1beta1Only,
    /// A CRD of Cluster API, a provider, Kamaji or ours still lists an old version among the
    /// versions its objects are stored at.
    CrdStoredVersions,
    /// Reading a CRD's objects at a served version other than the stored one fails in its
    /// conversion webhook: clients of that version (BYOH v0.5.0 reads CAPI v1beta1) fail.
    ConversionFailing,
    /// Two KamajiControlPlane providers hold their Leases (ours and CACPPK): they fight over
    /// the same objects.
    SecondControlPlaneProvider,
    /// A certificate of a TenantControlPlane expired.
    CertificateExpired,
    /// A certificate of a TenantControlPlane expires within `--cert-warn`.
    CertificateExpiring,
    /// A TenantControlPlane is not Ready after `--stuck-after`.
    ControlPlaneNotReady,
    /// A DataStore names a Secret key that does not exist: Kamaji cannot reach it.
    DataStoreUnusable,
    /// A DataStore with a `tlsConfig` but no `clientCertificate`: Kamaji v1.0.0's whole manager
    /// stops on it (a nil dereference in `api/v1alpha1/indexer_datastore_usedsecret.go`).
    DataStoreStopsKamaji,
    /// A TenantControlPlane runs a Kubernetes version the installed Kamaji refuses: every
    /// change to it, an upgrade included, is refused.
    VersionOutsideKamajiRange,
    /// A Machine sits Pending, Provisioning or Deleting beyond `--stuck-after`.
    MachineStuck,
    /// Workers newer than their control plane, or more minors behind than Kubernetes allows.
    VersionSkew,
    /// A BYOH host's agent reported a failure.
    HostFailed,
    /// A BYOH host whose install or bootstrap fails again and again: BYOH v0.5.0's agent
    /// resets the host and retries forever.
    HostBootstrapLoop,
    /// A BYOH host lost its machine and its agent has not cleaned up.
    HostReleasing,
    /// A Machine's Node stopped reporting (its kubelet stopped posting status): the host is
    /// down, or its kubelet and, on a BYOH host, its agent stopped.
    HostUnreachable,
    /// A TenantControlPlane that no KamajiControlPlane owns.
    OrphanTenantControlPlane,
    /// Secrets of a cluster that no longer exists.
    OrphanSecrets,
    /// A BYOH BootstrapKubeconfig no host needs: its host registered, or its token expired.
    UnusedBootstrapKubeconfig,
    /// A BYOH K8sInstallerConfigTemplate that no ByoMachineTemplate names.
    UnusedInstallerTemplate,
    /// A cluster paused (spec.paused or the paused annotation).
    ClusterPaused,
    /// A ClusterUpgrade or FleetUpgrade that failed.
    UpgradeFailed,
    /// A ClusterUpgrade or FleetUpgrade paused.
    UpgradePaused,
    /// A ClusterUpgrade whose running step started longer than `--stuck-after` ago.
    UpgradeStalled,
}

/// One read of the doctor, which the API server may refuse to a user: what each check needs
/// is said in terms of these (`checks/`), so that a refused read skips or narrows only the
/// checks that read it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
pub enum FleetRead {
    Clusters,
    Machines,
    ByoHosts,
    /// The Warning Events about ByoHosts (their agents' failures).
    HostEvents,
    ByoMachines,
    TenantControlPlanes,
    KamajiControlPlanes,
    ByoMachineTemplates,
    BootstrapKubeconfigs,
    InstallerTemplates,
    ClusterUpgrades,
    FleetUpgrades,
    /// Cluster API's Secrets (by the cluster-name label), for the orphan check.
    ClusterSecrets,
    /// Kamaji's certificate Secrets.
    Certificates,
    Leases,
    DataStores,
    /// The Secrets DataStores name.
    DataStoreSecrets,
    /// The CRDs and their conversion probes.
    Crds,
    /// Kamaji's answers to a server dry run of a change to a TenantControlPlane.
    KamajiRefusals,
    /// The controller Deployments of the management cluster's components.
    Components,
}

/// A read the API server refused: what was not read, and the permission that was missing.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Unread {
    pub input: FleetRead,
    /// The permission lacking, as `kubectl auth can-i` takes it: `list secrets -A`,
    /// `patch tenantcontrolplanes.kamaji.clastix.io -n team-a`.
    pub missing: String,
    /// Only part of the input was refused (some namespaces or objects): the checks that read
    /// it run on the rest, and may miss what was not read. Otherwise nothing of it was read
    /// and the checks that need it do not run (an empty list would read as "nothing wrong",
    /// or, for the leftovers, as everything orphaned).
    pub partial: bool,
}

/// The checks of one section that did not run, or ran on part of what they read, and the
/// permissions that were missing: `-o json`'s `notCheckedSections` (schema in the README).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct NotChecked {
    pub section: Section,
    /// In report order.
    pub checks: Vec<Check>,
    /// Sorted, each once.
    pub missing: Vec<String>,
}

impl std::fmt::Display for NotChecked {
    /// `control-planes: CertificateExpired, CertificateExpiring (lacks list secrets -A)`.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let checks: Vec<String> = self.checks.iter().map(|c| format!("{c:?}")).collect();
        write!(
            f,
            "{}: {} (lacks {})",
            self.section.as_str(),
            checks.join(", "),
            self.missing.join(", ")
        )
    }
}

/// Per section asked for (all when `only` is empty), in report order, the checks a refused
/// read ([`Fleet::unread`]) kept from running or narrowed; sections it did not touch are
/// absent.
pub fn not_checked(fleet: &Fleet, only: &[Section]) -> Vec<NotChecked> {
    let mut out: Vec<NotChecked> = Vec::new();
    for (section, check, missing) in checks::affected(fleet) {
        if !(only.is_empty() || only.contains(&section)) {
            continue;
        }
        match out.iter_mut().find(|n| n.section == section) {
            Some(n) => {
                if !n.checks.contains(&check) {
                    n.checks.push(check);
                }
                n.missing.extend(missing);
            }
            None => out.push(NotChecked {
                section,
                checks: vec![check],
                missing,
            }),
        }
    }
    for n in &mut out {
        n.missing.sort();
        n.missing.dedup();
    }
    out
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

/// One certificate of a tenant (defined with the rest of what is known of Kamaji's
/// certificates).
pub use crate::kamaji::certificates::TenantCertificate;

/// One tenant's certificates at a glance: the one that expires first, and how many have expired
/// or expire within the threshold.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TenantExpiry {
    /// The certificate that expires first (its namespace and tenant are the tenant's).
    pub first: TenantCertificate,
    /// Certificates whose `notAfter` has passed.
    pub expired: usize,
    /// Certificates not expired that expire within the threshold.
    pub expiring: usize,
}

/// Per tenant (by namespace, then name): the certificate that expires first (the earlier read
/// on a tie) and the counts of expired and expiring ones, `warn_seconds` being the threshold and
/// `now` the time in Unix seconds.
pub fn tenant_expiries(
    certs: &[TenantCertificate],
    warn_seconds: i64,
    now: i64,
) -> Vec<TenantExpiry> {
    let mut by_tenant: std::collections::BTreeMap<(&str, &str), TenantExpiry> =
        std::collections::BTreeMap::new();
    for cert in certs {
        let left = cert.not_after_unix.saturating_sub(now);
        let expired = usize::from(left < 0);
        let expiring = usize::from(left >= 0 && left < warn_seconds);
        let e = by_tenant
            .entry((cert.namespace.as_str(), cert.tenant.as_str()))
            .or_insert_with(|| TenantExpiry {
                first: cert.clone(),
                expired: 0,
                expiring: 0,
            });
        if cert.not_after_unix < e.first.not_after_unix {
            e.first = cert.clone();
        }
        e.expired = e.expired.saturating_add(expired);
        e.expiring = e.expiring.saturating_add(expiring);
    }
    by_tenant.into_values().collect()
}

/// The [`crate::condition::CERTIFICATES_EXPIRING`] condition of a KamajiControlPlane.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CertificatesCondition {
    /// `True`: a certificate expired or expires within the threshold.
    pub status: bool,
    /// `Expired`, `Expiring` or `NotExpiring`.
    pub reason: &'static str,
    /// The first certificate to go (Secret and key), when, and the command that renews them.
    /// It changes only when the certificates or the verdict do, and, while `Expiring`, once a
    /// day (the days left), so that writing it costs nothing while nothing changes.
    pub message: String,
}

/// The [`crate::condition::CERTIFICATES_EXPIRING`] condition of the TenantControlPlane `tenant`
/// from its
/// [`TenantExpiry`] (none: no certificate of it was found), with the threshold `warn_seconds`
/// and `now` in Unix seconds.
pub fn certificates_condition(
    tenant: &str,
    expiry: Option<&TenantExpiry>,
    warn_seconds: i64,
    now: i64,
) -> CertificatesCondition {
    let Some(e) = expiry else {
        return CertificatesCondition {
            status: false,
            reason: "NotExpiring",
            message: format!(
                "no certificate of TenantControlPlane {tenant} found (Secrets labelled {}={tenant})",
                crate::plan::teardown::KAMAJI_NAME_LABEL
            ),
        };
    };
    let c = &e.first;
    let which = format!("{} of Secret {}", c.key, c.secret);
    let fix = format!(
        "renew them: kubectl kamaji certificates rotate {}{} --all=true",
        c.tenant,
        if c.namespace.is_empty() {
            String::new()
        } else {
            format!(" -n {}", c.namespace)
        }
    );
    let within = crate::text::age(warn_seconds);
    if e.expired > 0 {
        CertificatesCondition {
            status: true,
            reason: "Expired",
            message: format!(
                "{} certificate(s) expired, {which} on {}; {fix}",
                e.expired, c.not_after
            ),
        }
    } else if e.expiring > 0 {
        let days = c.not_after_unix.saturating_sub(now).div_euclid(86_400);
        CertificatesCondition {
            status: true,
            reason: "Expiring",
            message: format!(
                "{} certificate(s) expire within {within}, {which} first, on {} ({days} days left); {fix}",
                e.expiring, c.not_after
            ),
        }
    } else {
        CertificatesCondition {
            status: false,
            reason: "NotExpiring",
            message: format!(
                "no certificate expires within {within}; the first, {which}, on {}",
                c.not_after
            ),
        }
    }
}

/// A CustomResourceDefinition as the management checks read it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CrdInfo {
    pub name: String,
    pub group: String,
    /// Its kind and plural, for reading its objects at another version.
    pub kind: String,
    pub plural: String,
    /// The version objects are stored at now.
    pub storage_version: String,
    /// Served versions other than the storage one.
    pub other_served: Vec<String>,
    /// `status.storedVersions`: every version objects may still be stored at.
    pub stored_versions: Vec<String>,
    /// `spec.conversion.strategy` is `Webhook`.
    pub webhook_conversion: bool,
    /// Reading at this served version failed in the conversion webhook, with this message.
    pub conversion_failure: Option<(String, String)>,
    /// The Cluster API contracts its labels say it implements (`cluster.x-k8s.io/v1beta1`:
    /// `v1beta1`), sorted.
    pub contracts: Vec<String>,
    /// Its `cluster.x-k8s.io/provider` label (`infrastructure-byoh`), empty without one.
    pub provider: String,
}

impl CrdInfo {
    /// Whether the doctor looks after this CRD: Cluster API's and its providers' groups
    /// (`*.cluster.x-k8s.io`), Kamaji's and ours.
    pub(crate) fn is_fleet_api(&self) -> bool {
        let g = self.group.as_str();
        g == crate::groups::CAPI_GROUP
            || g.ends_with(&format!(".{}", crate::groups::CAPI_GROUP))
            || g == crate::groups::KAMAJI_GROUP
            || g == crate::groups::OPS_GROUP
    }
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

impl LeaseInfo {
    /// What the checks read of a Lease (a Lease without a duration is held for client-go's
    /// leader-election default, 15 s).
    pub(crate) fn of(l: k8s_openapi::api::coordination::v1::Lease) -> LeaseInfo {
        let spec = l.spec.unwrap_or_default();
        LeaseInfo {
            namespace: l.metadata.namespace.unwrap_or_default(),
            name: l.metadata.name.unwrap_or_default(),
            renewed_unix: spec
                .renew_time
                .or(spec.acquire_time)
                .map(|t| t.0.as_second()),
            duration_seconds: i64::from(spec.lease_duration_seconds.unwrap_or(15)),
        }
    }
}

/// Everything the checks read: one list per kind, already narrowed to the namespaces asked
/// for. The kinds a fleet holds thousands of (Machines, ByoHosts, ByoMachines, Secrets) as
/// the few fields the checks read ([`MachineFacts`], [`HostFacts`], keys, counts); the others
/// as objects the server sent (either CAPI contract), [`prune`]d.
#[derive(Debug, Clone, Default)]
pub struct Fleet {
    /// Whether the server serves Cluster API's core (`cluster.x-k8s.io` Clusters).
    pub capi_served: bool,
    pub clusters: Vec<Value>,
    pub machines: Vec<MachineFacts>,
    pub byo_hosts: Vec<HostFacts>,
    /// The ByoHosts' agents' failure Events ([`HostEvent`]).
    pub host_events: Vec<HostEvent>,
    /// The ByoMachines, `(namespace, name)`.
    pub byo_machines: std::collections::HashSet<(String, String)>,
    pub tenant_control_planes: Vec<Value>,
    pub kamaji_control_planes: Vec<Value>,
    pub cluster_upgrades: Vec<Value>,
    pub fleet_upgrades: Vec<Value>,
    /// How many Secrets carry the `cluster.x-k8s.io/cluster-name` label, per `(namespace,
    /// cluster)` it names.
    pub cluster_secrets: std::collections::BTreeMap<(String, String), usize>,
    pub certificates: Vec<TenantCertificate>,
    pub leases: Vec<LeaseInfo>,
    /// Kamaji's DataStores (cluster-scoped).
    pub datastores: Vec<Value>,
    /// The Secrets the DataStores reference, as `namespace/name` → their data's keys (`None`:
    /// the Secret does not exist).
    pub datastore_secrets: std::collections::BTreeMap<String, Option<Vec<String>>>,
    /// The CRDs of the fleet's APIs ([`CrdInfo::is_fleet_api`]).
    pub crds: Vec<CrdInfo>,
    /// BYOH BootstrapKubeconfigs (metadata is enough).
    pub bootstrap_kubeconfigs: Vec<Value>,
    /// BYOH ByoMachineTemplates (their `spec.template.spec.installerRef` is read).
    pub byo_machine_templates: Vec<Value>,
    /// BYOH K8sInstallerConfigTemplates.
    pub installer_templates: Vec<Value>,
    /// Kamaji's refusal, per Kubernetes version (`spec.kubernetes.version`) that
    /// TenantControlPlanes run, of a change to one of them (versions it accepts are absent).
    pub kamaji_refusals: std::collections::BTreeMap<String, String>,
    /// The controller Deployment of each component of `kubectl capi init`'s set (`None`:
    /// not read, so not judged; a component's `None` Deployment: it has none).
    pub components: Option<Vec<ComponentState>>,
    /// The reads the API server refused (none: everything was read). A check that needs an
    /// input refused whole does not run; [`not_checked`] says which and why.
    pub unread: Vec<Unread>,
}

/// A component of the management cluster and its controller's Deployment, if it has one.
#[derive(Debug, Clone)]
pub struct ComponentState {
    pub component: &'static crate::init::set::Component,
    pub deployment: Option<Value>,
    /// Whether its API ([`crate::init::set::Component::api`]) is served.
    pub served: bool,
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

/// An object of the kinds [`Fleet`] holds as objects (a cluster's, not a machine's: a fleet
/// has a few of them per cluster) cut down to the fields the checks read, as each LIST page
/// arrives. Everything else (`managedFields`, kubectl's last-applied annotation, templates,
/// status details) is dropped; [`examine`] finds the same on the pruned objects (a unit test).
pub(crate) fn prune(mut v: Value) -> Value {
    const METADATA: &[&str] = &[
        "name",
        "namespace",
        "labels",
        "annotations",
        "ownerReferences",
        "creationTimestamp",
        "deletionTimestamp",
    ];
    const SPEC: &[&str] = &[
        "clusterName",
        "version",
        "kubernetes",
        "paused",
        "cancelled",
        "infrastructureRef",
        "controlPlaneRef",
        // A ByoMachineTemplate's (its installerRef); the kinds listed have no other.
        "template",
        // A TenantControlPlane's DataStore: where a stuck migration goes.
        "dataStore",
    ];
    const STATUS: &[&str] = &[
        "phase",
        "conditions",
        "version",
        "kubernetesResources",
        "message",
        "v1beta2",
        "deprecated",
        // A ClusterUpgrade's steps (their phase, start and message).
        "steps",
    ];
    let Some(o) = v.as_object_mut() else {
        return v;
    };
    o.retain(|k, _| {
        matches!(
            k.as_str(),
            "apiVersion" | "kind" | "metadata" | "spec" | "status"
        )
    });
    for (part, keep) in [("metadata", METADATA), ("spec", SPEC), ("status", STATUS)] {
        if let Some(p) = o.get_mut(part).and_then(Value::as_object_mut) {
            p.retain(|k, _| keep.contains(&k.as_str()));
        }
    }
    if let Some(a) = o
        .get_mut("metadata")
        .and_then(|m| m.get_mut("annotations"))
        .and_then(Value::as_object_mut)
    {
        a.remove("kubectl.kubernetes.io/last-applied-configuration");
    }
    for (part, key) in [("status", "kubernetesResources"), ("spec", "kubernetes")] {
        if let Some(k) = o
            .get_mut(part)
            .and_then(|s| s.get_mut(key))
            .and_then(Value::as_object_mut)
        {
            k.retain(|key, _| key == "version");
        }
    }
    // Conditions: no check reads when they changed.
    for path in [
        "/status/conditions",
        "/status/v1beta2/conditions",
        "/status/deprecated/v1beta1/conditions",
    ] {
        if let Some(conds) = v.pointer_mut(path).and_then(Value::as_array_mut) {
            for c in conds.iter_mut().filter_map(Value::as_object_mut) {
                c.remove("lastTransitionTime");
                c.remove("observedGeneration");
            }
        }
    }
    v
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
