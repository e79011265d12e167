//! `doctor`, shared by `kubectl capi doctor` and `kubectl kamaji doctor`: one read-only report of
//! what is wrong across the management cluster and the fleet, and the command that fixes each
//! finding. It reads each kind once (one LIST response each, no per-object GETs) and decides in
//! `kcore::doctor`.

use std::cell::RefCell;
use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use clap::Args as ClapArgs;
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::{Namespace, Secret};
use kclient::discovery::ServerApis;
use kclient::error::Error;
use kclient::render::{Cell, Human, Printer, Render, Table, Tone};
use kcore::doctor::{
    self, Counts, CrdInfo, Fleet, FleetRead, LeaseInfo, NotChecked, Problem, Section,
    TenantCertificate, Thresholds, Unread,
};
use kcore::groups::{CONTROLPLANE_GROUP, INFRASTRUCTURE_GROUP, KAMAJI_GROUP, OPS_GROUP};
use kcore::json;
use kcore::labels::{CACPPK_LEASE, CLUSTER_NAME_LABEL, RECONCILER_LEASE};
use kcore::plan::Severity;
use kcore::plan::teardown::KAMAJI_PROJECT_SELECTOR;
use kube::api::ListParams;
use kube::discovery::ApiResource;
use serde::Serialize;
use serde_json::Value;

use crate::flags::{KubeFlags, OutputFlags};

#[derive(ClapArgs, Clone, Debug)]
#[command(
    after_help = "Findings are errors (exit 1), warnings or info (exit 0). Each names its \
object, the cause and the command that fixes it. Every namespace is read unless -n is given.\n\n\
Sections (--only): management, control-planes, workers, leftovers, operations.\n\n\
Read-only users: what the API server refuses to show is reported as \"Not checked\", one line \
per section with the permission lacking, and the rest is checked. --print-role prints the \
least-privilege ClusterRole capi-kamaji-doctor (no Secrets, no writes) for kubectl apply -f -.\n\n\
Examples:\n  kubectl capi doctor\n  kubectl capi doctor --only control-planes --cert-warn 60d\n  \
kubectl capi doctor -n team-a -o json\n  kubectl capi doctor --print-role | kubectl apply -f -"
)]
pub struct Args {
    /// Only these sections (comma-separated or repeated)
    #[arg(long, value_name = "SECTION", value_delimiter = ',', value_parser = section)]
    pub only: Vec<Section>,
    /// Warn about certificates expiring within this long: days (30d) or hours (720h), a unit
    /// required (at most 3650d; 0 warns of none)
    #[arg(long, value_name = "DURATION", default_value = "30d", value_parser = kcore::text::parse_cert_warn)]
    pub cert_warn: Duration,
    /// A machine or control plane in a passing state longer than this is stuck (e.g. 15m)
    #[arg(long, value_name = "DURATION", default_value = "15m", value_parser = crate::flags::parse_duration)]
    pub stuck_after: Duration,
    /// Label selector over Cluster labels: only these clusters' objects (leftovers are then not checked)
    #[arg(short = 'l', long, value_name = "SELECTOR", value_parser = crate::flags::label_selector)]
    pub selector: Option<String>,
    /// Print the least-privilege ClusterRole the doctor runs under (YAML, for kubectl apply -f -) and exit
    #[arg(long)]
    pub print_role: bool,
    #[command(flatten)]
    pub kube: KubeFlags,
    #[command(flatten)]
    pub output: OutputFlags,
}

/// `--print-role`: the least the doctor reads with, as `kubectl apply -f -` takes it. Read-only
/// (`list`, and `get` on namespaces for `-n`'s check); no Secrets and no `patch`, whose
/// checks then say "not checked" (README, "The fleet doctor").
const ROLE: &str = "\
# capi-kamaji-doctor: what `kubectl capi doctor` (and `kubectl kamaji doctor`) reads, and no more.
# Read-only: list, and get on namespaces (to tell a namespace that does not exist from an empty one).
# Bind it:  kubectl create clusterrolebinding capi-kamaji-doctor --clusterrole=capi-kamaji-doctor --user=NAME
# Not granted, and reported by the doctor as \"Not checked\" with the permission lacking:
#   - Secrets: Kamaji's certificates (CertificateExpired, CertificateExpiring), Secrets of deleted
#     clusters (OrphanSecrets), the Secrets DataStores name (DataStoreUnusable). To check those,
#     bind capi-kamaji-doctor-secrets (below) in the namespaces of your clusters and of the
#     DataStores' Secrets:  kubectl create rolebinding capi-kamaji-doctor-secrets -n NS
#     --clusterrole=capi-kamaji-doctor-secrets --user=NAME  (the doctor then lists Secrets in those
#     namespaces only; a ClusterRoleBinding grants every Secret of the cluster).
#   - patch tenantcontrolplanes: Kamaji's webhook is asked which versions it refuses by a server dry
#     run of a patch (VersionOutsideKamajiRange); nothing is stored, but RBAC cannot grant a dry run
#     alone, and patch would allow real changes.
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata:
  name: capi-kamaji-doctor
  labels:
    app.kubernetes.io/name: capi-kamaji-doctor
rules:
# Cluster API and its providers: the kinds the checks read (Clusters, Machines, KamajiControlPlanes,
# BYOH's hosts, machines, templates and BootstrapKubeconfigs), and one object of each kind converted
# by a webhook, read at another served version (ConversionFailing): whichever kinds the installed
# providers serve, hence every resource of their groups, list only. BYOH's BootstrapKubeconfigs
# hold a host's bootstrap token (30 minutes) in their status: listing them reads those
# (UnusedBootstrapKubeconfig).
- apiGroups:
  - cluster.x-k8s.io
  - infrastructure.cluster.x-k8s.io
  - controlplane.cluster.x-k8s.io
  - bootstrap.cluster.x-k8s.io
  - addons.cluster.x-k8s.io
  - ipam.cluster.x-k8s.io
  - runtime.cluster.x-k8s.io
  resources: [\"*\"]
  verbs: [list]
# Kamaji's control planes and DataStores.
- apiGroups: [kamaji.clastix.io]
  resources: [tenantcontrolplanes, datastores]
  verbs: [list]
# kamaji-reconciler's upgrades.
- apiGroups: [ops.capi-kamaji.io]
  resources: [clusterupgrades, fleetupgrades]
  verbs: [list]
# The providers' leader Leases (ReconcilerStopped, SecondControlPlaneProvider), selected by name.
- apiGroups: [coordination.k8s.io]
  resources: [leases]
  verbs: [list]
# The CRDs' stored versions and conversion (CrdStoredVersions, ConversionFailing).
- apiGroups: [apiextensions.k8s.io]
  resources: [customresourcedefinitions]
  verbs: [list]
- apiGroups: [\"\"]
  resources: [namespaces]
  verbs: [get]
---
# capi-kamaji-doctor-secrets: the Secret reads of the doctor, to bind per namespace (a RoleBinding).
# It lists Cluster API's Secrets by the cluster-name label (metadata only), Kamaji's certificate
# Secrets by the kamaji.clastix.io/project label, and gets each Secret a DataStore names.
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata:
  name: capi-kamaji-doctor-secrets
  labels:
    app.kubernetes.io/name: capi-kamaji-doctor
rules:
- apiGroups: [\"\"]
  resources: [secrets]
  verbs: [get, list]
";

fn section(s: &str) -> Result<Section, String> {
    Section::parse(s).ok_or_else(|| {
        let names: Vec<&str> = Section::ALL.iter().map(|s| s.as_str()).collect();
        format!("unknown section {s:?} (one of: {})", names.join(", "))
    })
}

/// The report `-o json|yaml` prints (schema in the README, "kubectl capi doctor").
#[derive(Serialize, Debug)]
#[serde(rename_all = "camelCase")]
pub struct Report {
    /// Worst first.
    pub findings: Vec<Problem>,
    pub counts: Counts,
    /// How many objects of each kind were read.
    pub checked: BTreeMap<&'static str, usize>,
    /// What could not be checked, and why, one line each (the lines of `not_checked_sections`
    /// first).
    pub not_checked: Vec<String>,
    /// Per section, the checks a read the API server refused kept from running or narrowed,
    /// and the permissions lacking (`kubectl auth can-i` form).
    pub not_checked_sections: Vec<NotChecked>,
}

fn tone(s: Severity) -> Tone {
    match s {
        Severity::Error => Tone::Bad,
        Severity::Warning => Tone::Warn,
        Severity::Info => Tone::Dim,
    }
}

impl Render for Report {
    fn human(&self) -> Human {
        if self.findings.is_empty() {
            // A report with sections not checked is no clean bill of health.
            let found = if self.not_checked_sections.is_empty() {
                "No problems found"
            } else {
                "No problems found in what could be read"
            };
            let mut text = format!("{found} ({}).", self.read());
            for n in &self.not_checked {
                text.push_str(&format!("\nNot checked: {n}"));
            }
            return Human::Text(text);
        }
        let mut t = Table::new(["SEVERITY", "SECTION", "OBJECT", "CAUSE", "FIX"]).wide(["CHECK"]);
        for f in &self.findings {
            let o = &f.object;
            let object = if o.namespace.is_empty() {
                format!("{}/{}", o.kind, o.name)
            } else {
                format!("{}/{}/{}", o.kind, o.namespace, o.name)
            };
            t.row([
                Cell::new(format!("{:?}", f.severity), tone(f.severity)),
                Cell::from(f.section.as_str()),
                Cell::from(object),
                Cell::from(f.cause.as_str()),
                Cell::from(f.fix.as_str()),
                Cell::from(format!("{:?}", f.check)),
            ]);
        }
        Human::Table(t)
    }
    fn footer(&self) -> Option<String> {
        let c = &self.counts;
        let mut s = format!(
            "{} error(s), {} warning(s), {} info ({}).",
            c.error,
            c.warning,
            c.info,
            self.read()
        );
        for n in &self.not_checked {
            s.push_str(&format!("\nNot checked: {n}"));
        }
        Some(s)
    }
}

impl Report {
    /// "read 3 clusters, 12 machines, ..."
    fn read(&self) -> String {
        let parts: Vec<String> = self
            .checked
            .iter()
            .map(|(k, n)| format!("{n} {k}"))
            .collect();
        if parts.is_empty() {
            return "nothing could be read".into();
        }
        format!("read {}", parts.join(", "))
    }
}

/// The reads the API server refused in one run: each 403 is noted as an input not read (what
/// it lacked, `kubectl auth can-i` style) and the report goes on, so that a read-only user gets
/// what they may read, and a "not checked" line for the rest (`kcore::doctor::not_checked`).
#[derive(Default)]
struct Refused(RefCell<Vec<Unread>>);

impl Refused {
    /// `r`'s value, or `None` when the API server refused it, noted as `input` not read
    /// (`partial`: one of several reads of it; `across`: a namespaced kind read in every
    /// namespace). Any other error ends the report.
    fn or_note<T>(
        &self,
        r: Result<T, Error>,
        input: FleetRead,
        across: bool,
        partial: bool,
    ) -> Result<Option<T>, Error> {
        match r {
            Ok(v) => Ok(Some(v)),
            Err(Error::Forbidden {
                verb,
                resource,
                namespace,
                ..
            }) => {
                let missing = permission(&verb, &resource, namespace.as_deref(), across);
                self.note(input, missing, partial);
                Ok(None)
            }
            Err(e) => Err(e),
        }
    }

    fn note(&self, input: FleetRead, missing: String, partial: bool) {
        self.0.borrow_mut().push(Unread {
            input,
            missing,
            partial,
        });
    }
}

/// A permission as `kubectl auth can-i` takes it: `list secrets -n team-a`, `list secrets -A`
/// (`across`: in every namespace), `list datastores.kamaji.clastix.io` (cluster-scoped).
fn permission(verb: &str, resource: &str, namespace: Option<&str>, across: bool) -> String {
    match namespace {
        Some(ns) => format!("{verb} {resource} -n {ns}"),
        None if across => format!("{verb} {resource} -A"),
        None => format!("{verb} {resource}"),
    }
}

/// Lists `ar` into `slot` when served (an unserved kind reads as empty), each object pruned to
/// what the checks read as it is parsed; a refusal is noted as `input` not read.
async fn fill(
    slot: &mut Vec<Value>,
    conn: &crate::Conn,
    ar: Option<ApiResource>,
    namespace: Option<&str>,
    lp: &ListParams,
    input: FleetRead,
    refused: &Refused,
) -> Result<(), Error> {
    let r = whole(conn, ar, namespace, lp, false, doctor::prune).await;
    if let Some(v) = refused.or_note(r, input, namespace.is_none(), false)? {
        *slot = v;
    }
    Ok(())
}

/// Lists `ar` (when served; an unserved kind reads as empty) and turns each object into what
/// the checks keep of it (`keep`) as it is parsed: the fleet-sized kinds are kept as a few
/// fields each, never as objects.
///
/// One response per LIST, not pages: the API server answers a LIST without `limit` from its
/// watch cache, while the `continue` pages of a paged one may come from etcd. Paged by 100,
/// `make bench` saw doctor take 20 s over 16,000 Machines, 16,000 ByoHosts and their
/// ByoMachines (160 pages each) where the raw LISTs of its kinds took 6 s.
async fn whole<U: Send + 'static>(
    conn: &crate::Conn,
    ar: Option<ApiResource>,
    namespace: Option<&str>,
    lp: &ListParams,
    metadata_only: bool,
    keep: impl Fn(Value) -> U + Send + 'static,
) -> Result<Vec<U>, Error> {
    match ar {
        Some(ar) => {
            kclient::api::list_json_whole(conn, &ar, namespace, lp, metadata_only, keep).await
        }
        None => Ok(Vec::new()),
    }
}

/// Kamaji's certificate Secrets (one LIST by its project label), as certificates per tenant.
async fn certificates_in(
    conn: &crate::Conn,
    namespace: Option<&str>,
) -> Result<Vec<TenantCertificate>, Error> {
    let ar = ApiResource::erase::<Secret>(&());
    // Each Secret cut to its certificates' dates as it is parsed: a fleet's certificate
    // Secrets (several per tenant, keys and all) are never held together.
    let lp = ListParams::default().labels(KAMAJI_PROJECT_SELECTOR);
    let per_secret = kclient::api::list_whole(
        conn,
        &ar,
        namespace,
        &lp,
        false,
        doctor::secret_certificates,
    )
    .await?;
    Ok(per_secret.into_iter().flatten().collect())
}

/// The data keys of each Secret the DataStores reference (`None`: it does not exist). One GET
/// per Secret: DataStores are few, and their Secrets are not labelled for a LIST.
async fn datastore_secrets(
    conn: &crate::Conn,
    datastores: &[Value],
    refused: &Refused,
) -> Result<BTreeMap<String, Option<Vec<String>>>, Error> {
    let ar = ApiResource::erase::<Secret>(&());
    let wanted: BTreeSet<(String, String)> = datastores
        .iter()
        .flat_map(kcore::kamaji::plan::datastore_secret_keys)
        .filter(|k| !k.namespace.is_empty())
        .map(|k| (k.namespace, k.name))
        .collect();
    let mut out = BTreeMap::new();
    for (ns, name) in wanted {
        // A Secret the user may not read is left out: its DataStore is then not judged on it.
        let r = kclient::api::get_json_opt(conn, &ar, Some(&ns), &name).await;
        let Some(secret) = refused.or_note(r, FleetRead::DataStoreSecrets, false, true)? else {
            continue;
        };
        let keys = secret.map(|s| {
            s.get("data")
                .and_then(Value::as_object)
                .map(|d| d.keys().cloned().collect())
                .unwrap_or_default()
        });
        out.insert(format!("{ns}/{name}"), keys);
    }
    Ok(out)
}

/// A CRD as the management checks read it: everything else (the schemas, which make CRDs
/// megabytes each) is skipped while parsing.
#[derive(serde::Deserialize, Default)]
#[serde(default)]
struct NarrowCrd {
    metadata: NarrowName,
    spec: NarrowCrdSpec,
    status: NarrowCrdStatus,
}

#[derive(serde::Deserialize, Default)]
#[serde(default)]
struct NarrowName {
    name: String,
}

#[derive(serde::Deserialize, Default)]
#[serde(default)]
struct NarrowCrdSpec {
    group: String,
    names: NarrowCrdNames,
    versions: Vec<NarrowCrdVersion>,
    conversion: Option<NarrowConversion>,
}

#[derive(serde::Deserialize, Default)]
#[serde(default)]
struct NarrowCrdNames {
    kind: String,
    plural: String,
}

#[derive(serde::Deserialize, Default)]
#[serde(default)]
struct NarrowCrdVersion {
    name: String,
    served: bool,
    storage: bool,
}

#[derive(serde::Deserialize, Default)]
#[serde(default)]
struct NarrowConversion {
    strategy: String,
}

#[derive(serde::Deserialize, Default)]
#[serde(default, rename_all = "camelCase")]
struct NarrowCrdStatus {
    stored_versions: Vec<String>,
}

/// CRDs per page: each carries its schemas (CAPI's are hundreds of KiB).
const CRD_PAGE: u32 = 20;

/// The CRDs of the fleet's APIs, and, for each converted by a webhook, whether reading one of
/// its objects at another served version works: a LIST of one object at that version makes the
/// API server call the webhook (no object, no call, nothing to say). A probe that fails for
/// another reason is said in `not_checked`.
async fn crds(
    conn: &crate::Conn,
    not_checked: &mut Vec<String>,
    refused: &Refused,
) -> Result<Vec<CrdInfo>, Error> {
    use futures::StreamExt;
    use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
    let ar = ApiResource::erase::<CustomResourceDefinition>(&());
    let lp = ListParams::default().limit(CRD_PAGE);
    // Reading CRDs is a cluster-wide right a namespace's user may lack.
    let r = kclient::api::list_as(conn, &ar, None, &lp, false).await;
    let Some(all): Option<Vec<NarrowCrd>> = refused.or_note(r, FleetRead::Crds, false, false)?
    else {
        return Ok(Vec::new());
    };
    let mut probes = Vec::new();
    let mut infos: Vec<CrdInfo> = all
        .into_iter()
        .map(|c| {
            let storage = c.spec.versions.iter().find(|v| v.storage);
            let info = CrdInfo {
                name: c.metadata.name,
                group: c.spec.group.clone(),
                storage_version: storage.map(|v| v.name.clone()).unwrap_or_default(),
                other_served: c
                    .spec
                    .versions
                    .iter()
                    .filter(|v| v.served && !v.storage)
                    .map(|v| v.name.clone())
                    .collect(),
                stored_versions: c.status.stored_versions,
                webhook_conversion: c
                    .spec
                    .conversion
                    .as_ref()
                    .is_some_and(|x| x.strategy == "Webhook"),
                conversion_failure: None,
            };
            if info.is_fleet_api()
                && info.webhook_conversion
                && let Some(v) = info.other_served.first()
            {
                probes.push(ApiResource {
                    group: c.spec.group.clone(),
                    version: v.clone(),
                    api_version: format!("{}/{v}", c.spec.group),
                    kind: c.spec.names.kind.clone(),
                    plural: c.spec.names.plural.clone(),
                });
            }
            info
        })
        .filter(CrdInfo::is_fleet_api)
        .collect();
    let answers: Vec<(ApiResource, Result<_, kube::Error>)> =
        futures::stream::iter(probes.into_iter().map(|ar| async move {
            let api: kube::Api<kube::api::DynamicObject> =
                kube::Api::all_with(conn.client.clone(), &ar);
            let r = api.list(&ListParams::default().limit(1)).await;
            (ar, r)
        }))
        .buffer_unordered(PROBES_AT_ONCE)
        .collect()
        .await;
    for (ar, answer) in answers {
        match answer {
            Ok(_) => {}
            Err(kube::Error::Api(s)) if s.message.contains("conversion webhook") => {
                let name = format!("{}.{}", ar.plural, ar.group);
                if let Some(i) = infos.iter_mut().find(|i| i.name == name) {
                    i.conversion_failure = Some((ar.version.clone(), s.message));
                }
            }
            // A kind the user may not list: its conversion is not probed.
            Err(kube::Error::Api(s)) if s.code == 403 => refused.note(
                FleetRead::Crds,
                permission("list", &format!("{}.{}", ar.plural, ar.group), None, true),
                true,
            ),
            Err(e) => not_checked.push(format!(
                "the conversion of {}.{} to {}: {}",
                ar.plural,
                ar.group,
                ar.version,
                kclient::error::chain_text(&e)
            )),
        }
    }
    Ok(infos)
}

/// How many probes (Kamaji's answers, conversions) `doctor` waits for at once.
const PROBES_AT_ONCE: usize = 4;

/// Kamaji's refusals, per Kubernetes version the TenantControlPlanes run: a server dry run of
/// a change to one TenantControlPlane per version (an annotation; nothing is stored), judged by
/// Kamaji's validating webhook, which refuses every change to a control plane above the
/// version it was built with (Kamaji v1.0.0 `internal/webhook/handlers/tcp_version.go`). One
/// request per version, not per object; a webhook that does not answer is said in
/// `not_checked`. A user without `patch` on TenantControlPlanes (RBAC has no dry-run-only
/// grant, and a read-only role should not hold patch) gets the API server's 403 before any
/// webhook is asked: that version is noted as not checked, with the permission lacking.
async fn kamaji_refusals(
    conn: &crate::Conn,
    apis: &ServerApis,
    tcps: &[Value],
    not_checked: &mut Vec<String>,
    refused: &Refused,
) -> Result<BTreeMap<String, String>, Error> {
    use futures::StreamExt;
    let Some(ar) = apis.tenant_control_plane() else {
        return Ok(BTreeMap::new());
    };
    let mut one_per_version: BTreeMap<&str, &Value> = BTreeMap::new();
    for t in tcps {
        if let Some(v) = json::str_at(t, &["spec", "kubernetes", "version"])
            && json::at(t, &["metadata", "deletionTimestamp"]).is_none()
        {
            one_per_version.entry(v).or_insert(t);
        }
    }
    let probe =
        serde_json::json!({"metadata": {"annotations": {"kubectl-capi.doctor/probe": "dry-run"}}});
    let write = || kclient::api::Write {
        manager: "kubectl-capi",
        dry_run: true,
        force: false,
    };
    let answers: Vec<(&str, Result<_, Error>)> =
        futures::stream::iter(one_per_version.into_iter().map(|(version, t)| {
            let (ar, probe) = (&ar, &probe);
            async move {
                let r = kclient::api::merge_patch(
                    conn,
                    ar,
                    json::namespace(t),
                    json::name(t),
                    probe,
                    write(),
                )
                .await;
                (version, r)
            }
        }))
        .buffer_unordered(PROBES_AT_ONCE)
        .collect()
        .await;
    let mut refusals = BTreeMap::new();
    for (version, answer) in answers {
        match answer {
            Ok(_) | Err(Error::NotFound { .. }) => {}
            Err(Error::Denied { message, .. }) => {
                refusals.insert(version.to_string(), message);
            }
            Err(e @ (Error::Api { .. } | Error::Timeout { .. } | Error::Unreachable { .. })) => {
                not_checked.push(format!(
                    "whether Kamaji accepts Kubernetes {version}: it did not answer ({e})"
                ));
            }
            Err(e @ Error::Forbidden { .. }) => {
                refused.or_note(Err::<(), _>(e), FleetRead::KamajiRefusals, false, true)?;
            }
            Err(e) => return Err(e),
        }
    }
    Ok(refusals)
}

/// The providers' Leases, ours and CACPPK's, in every namespace: one LIST per name (a field
/// selector), so that no other Lease is read.
async fn leases(conn: &crate::Conn) -> Result<Vec<LeaseInfo>, Error> {
    let ar = ApiResource::erase::<Lease>(&());
    let mut out = Vec::new();
    for name in [RECONCILER_LEASE, CACPPK_LEASE] {
        let lp = ListParams::default().fields(&format!("metadata.name={name}"));
        let found: Vec<Lease> = kclient::api::list_as(conn, &ar, None, &lp, false).await?;
        out.extend(found.into_iter().map(LeaseInfo::of));
    }
    Ok(out)
}

/// Narrows the fleet to the clusters `selected` (`namespace/name`) and their objects.
fn narrow(f: &mut Fleet, selected: &BTreeSet<(String, String)>) {
    let has = |ns: &str, c: Option<&str>| {
        c.is_some_and(|c| selected.contains(&(ns.to_string(), c.to_string())))
    };
    f.machines
        .retain(|m| has(&m.namespace, m.cluster.as_deref()));
    f.cluster_upgrades.retain(|u| {
        has(
            json::namespace(u),
            json::str_at(u, &["spec", "clusterName"])
                .or_else(|| json::label(u, CLUSTER_NAME_LABEL)),
        )
    });
    f.cluster_secrets.retain(|key, _| selected.contains(key));
    f.byo_hosts.retain(|h| {
        h.cluster_label
            .as_deref()
            .is_some_and(|c| selected.iter().any(|(_, n)| n == c))
    });
    let cps: BTreeSet<(String, String)> = f
        .clusters
        .iter()
        .filter_map(|c| {
            kcore::fields::cluster_control_plane_ref(c)
                .map(|r| (json::namespace(c).to_string(), r.name))
        })
        .collect();
    let in_cps =
        |v: &Value| cps.contains(&(json::namespace(v).to_string(), json::name(v).to_string()));
    f.kamaji_control_planes.retain(in_cps);
    f.tenant_control_planes.retain(in_cps);
    f.certificates
        .retain(|c| cps.contains(&(c.namespace.clone(), c.tenant.clone())));
    f.fleet_upgrades.clear();
}

/// Counts Cluster API's Secrets per `(namespace, cluster)` their label names.
fn count_cluster_secrets(
    into: &mut BTreeMap<(String, String), usize>,
    keys: Vec<Option<(String, String)>>,
) {
    for key in keys.into_iter().flatten() {
        let n = into.entry(key).or_default();
        *n = n.saturating_add(1);
    }
}

/// The namespaces `objects` are in.
fn namespaces_of(objects: &[Value]) -> BTreeSet<String> {
    objects
        .iter()
        .map(|o| json::namespace(o).to_string())
        .filter(|ns| !ns.is_empty())
        .collect()
}

/// How many namespaces' Secrets are listed at once when they are read namespace by namespace.
const NAMESPACES_AT_ONCE: usize = 8;

/// When the user may not list Secrets in every namespace: the Secrets the checks need, read in
/// the namespaces they live in (Cluster API's next to their Clusters, Kamaji's certificates
/// next to their TenantControlPlanes), one LIST by label each; a site can grant Secrets there
/// only (`capi-kamaji-doctor-secrets` bound by RoleBindings, `--print-role`). What is refused
/// there is noted per namespace.
async fn secrets_by_namespace(
    conn: &crate::Conn,
    fleet: &mut Fleet,
    cluster_secrets: bool,
    certificates: bool,
    refused: &Refused,
) -> Result<(), Error> {
    use futures::StreamExt;
    let whole_unread = |i: FleetRead| {
        refused
            .0
            .borrow()
            .iter()
            .any(|u| u.input == i && !u.partial)
    };
    if cluster_secrets {
        let ar = ApiResource::erase::<Secret>(&());
        let lp = ListParams::default().labels(CLUSTER_NAME_LABEL);
        let namespaces = namespaces_of(&fleet.clusters);
        let answers: Vec<(String, Result<_, Error>)> =
            futures::stream::iter(namespaces.into_iter().map(|ns| {
                let (ar, lp) = (ar.clone(), &lp);
                async move {
                    let r = whole(conn, Some(ar), Some(&ns), lp, true, |s| {
                        doctor::secret_cluster(&s)
                    })
                    .await;
                    (ns, r)
                }
            }))
            .buffer_unordered(NAMESPACES_AT_ONCE)
            .collect()
            .await;
        for (_, r) in answers {
            if let Some(keys) = refused.or_note(r, FleetRead::ClusterSecrets, false, true)? {
                count_cluster_secrets(&mut fleet.cluster_secrets, keys);
            }
        }
        // Secrets left in a namespace no Cluster is in any more are not seen.
        refused.note(FleetRead::ClusterSecrets, "list secrets -A".into(), true);
    }
    if certificates {
        if whole_unread(FleetRead::TenantControlPlanes) {
            // Where Kamaji's Secrets are is not known either.
            refused.note(FleetRead::Certificates, "list secrets -A".into(), false);
        } else {
            let namespaces = namespaces_of(&fleet.tenant_control_planes);
            let answers: Vec<Result<_, Error>> = futures::stream::iter(
                namespaces
                    .into_iter()
                    .map(|ns| async move { certificates_in(conn, Some(&ns)).await }),
            )
            .buffer_unordered(NAMESPACES_AT_ONCE)
            .collect()
            .await;
            for r in answers {
                if let Some(c) = refused.or_note(r, FleetRead::Certificates, false, true)? {
                    fleet.certificates.extend(c);
                }
            }
        }
    }
    Ok(())
}

/// Fails when the namespace `-n` names does not exist. `kubectl get pods -n nosuch` says "No
/// resources found in nosuch namespace." and exits 0: an empty list answers "what is there".
/// The doctor's answer is a verdict, and "No problems found" about a namespace that does not
/// exist would read as healthy; so it fails (exit 1), as `kubectl get namespace nosuch` does. A
/// user who may not read namespaces gets the report: the namespace they were given rights in
/// exists, and their reads say the rest.
async fn namespace_exists(conn: &crate::Conn, ns: &str) -> Result<(), Error> {
    let ar = ApiResource::erase::<Namespace>(&());
    match kclient::api::get_json_opt(conn, &ar, None, ns).await {
        Ok(Some(_)) | Err(Error::Forbidden { .. }) => Ok(()),
        Ok(None) => Err(Error::Other {
            message: format!("namespace \"{ns}\" not found"),
            hint: Some("check the name (kubectl get namespaces lists them), or leave out -n to read every namespace".into()),
        }),
        Err(e) => Err(e),
    }
}

/// Runs `doctor`: prints the report, then fails (exit 1) when it holds an error finding.
pub async fn run(args: &Args) -> Result<(), Error> {
    if args.print_role {
        kclient::render::raw(ROLE.as_bytes());
        return Ok(());
    }
    let printer = Printer::new(&args.output);
    let conn = args.kube.connect().await?;
    let namespace =
        (conn.namespace_explicit && !conn.all_namespaces).then(|| conn.namespace.clone());
    let ns = namespace.as_deref();
    if let Some(ns) = ns {
        namespace_exists(&conn, ns).await?;
    }
    let apis = ServerApis::discover(&conn).await?;
    let all = ListParams::default();
    let mut clusters_lp = ListParams::default();
    if let Some(s) = args.selector.as_deref().filter(|s| !s.trim().is_empty()) {
        clusters_lp = clusters_lp.labels(s);
    }
    let capi = |kind: &str| apis.capi_kind(kind).ok();
    let provider = |group: &str, kind: &str| apis.provider_kind(group, kind);
    let secrets_lp = ListParams::default().labels(CLUSTER_NAME_LABEL);
    let secret_ar = ApiResource::erase::<Secret>(&());
    let refused = Refused::default();
    let r = &refused;
    // Secrets refused in every namespace: read again where the fleet is, below.
    let (secrets_by_ns, certificates_by_ns) =
        (std::cell::Cell::new(false), std::cell::Cell::new(false));
    let mut fleet = Fleet {
        capi_served: apis.capi_version().is_some(),
        ..Fleet::default()
    };
    let f = &mut fleet;
    tokio::try_join!(
        fill(
            &mut f.clusters,
            &conn,
            capi("Cluster"),
            ns,
            &clusters_lp,
            FleetRead::Clusters,
            r
        ),
        async {
            let m = whole(&conn, capi("Machine"), ns, &all, false, |m| {
                doctor::MachineFacts::of(&m)
            })
            .await;
            if let Some(m) = r.or_note(m, FleetRead::Machines, ns.is_none(), false)? {
                f.machines = m;
            }
            Ok(())
        },
        async {
            let h = whole(&conn, apis.byo_host(), ns, &all, false, |h| {
                kcore::plan::hosts::HostFacts::of(&h)
            })
            .await;
            if let Some(h) = r.or_note(h, FleetRead::ByoHosts, ns.is_none(), false)? {
                f.byo_hosts = h;
            }
            Ok(())
        },
        async {
            let ar = provider(INFRASTRUCTURE_GROUP, "ByoMachine");
            let keys = whole(&conn, ar, ns, &all, true, |b| doctor::object_key(&b)).await;
            if let Some(keys) = r.or_note(keys, FleetRead::ByoMachines, ns.is_none(), false)? {
                f.byo_machines = keys.into_iter().collect();
            }
            Ok(())
        },
        fill(
            &mut f.tenant_control_planes,
            &conn,
            apis.tenant_control_plane(),
            ns,
            &all,
            FleetRead::TenantControlPlanes,
            r
        ),
        fill(
            &mut f.kamaji_control_planes,
            &conn,
            provider(CONTROLPLANE_GROUP, "KamajiControlPlane"),
            ns,
            &all,
            FleetRead::KamajiControlPlanes,
            r
        ),
        fill(
            &mut f.byo_machine_templates,
            &conn,
            provider(INFRASTRUCTURE_GROUP, "ByoMachineTemplate"),
            ns,
            &all,
            FleetRead::ByoMachineTemplates,
            r
        ),
        fill(
            &mut f.bootstrap_kubeconfigs,
            &conn,
            provider(INFRASTRUCTURE_GROUP, "BootstrapKubeconfig"),
            ns,
            &all,
            FleetRead::BootstrapKubeconfigs,
            r
        ),
        fill(
            &mut f.installer_templates,
            &conn,
            provider(INFRASTRUCTURE_GROUP, "K8sInstallerConfigTemplate"),
            ns,
            &all,
            FleetRead::InstallerTemplates,
            r
        ),
        fill(
            &mut f.cluster_upgrades,
            &conn,
            provider(OPS_GROUP, "ClusterUpgrade"),
            ns,
            &all,
            FleetRead::ClusterUpgrades,
            r
        ),
        fill(
            &mut f.fleet_upgrades,
            &conn,
            provider(OPS_GROUP, "FleetUpgrade"),
            ns,
            &all,
            FleetRead::FleetUpgrades,
            r
        ),
        async {
            // Cluster API's Secrets only (its cluster-name label), metadata only.
            let keys = whole(&conn, Some(secret_ar), ns, &secrets_lp, true, |s| {
                doctor::secret_cluster(&s)
            })
            .await;
            match keys {
                Err(Error::Forbidden { .. }) if ns.is_none() => secrets_by_ns.set(true),
                keys => {
                    if let Some(keys) = r.or_note(keys, FleetRead::ClusterSecrets, false, false)? {
                        count_cluster_secrets(&mut f.cluster_secrets, keys);
                    }
                }
            }
            Ok(())
        },
        async {
            match certificates_in(&conn, ns).await {
                Err(Error::Forbidden { .. }) if ns.is_none() => certificates_by_ns.set(true),
                c => {
                    if let Some(c) = r.or_note(c, FleetRead::Certificates, false, false)? {
                        f.certificates = c;
                    }
                }
            }
            Ok(())
        },
        async {
            if let Some(l) = r.or_note(leases(&conn).await, FleetRead::Leases, true, false)? {
                f.leases = l;
            }
            Ok::<_, Error>(())
        },
        async {
            // Whole (not pruned: the checks walk their spec); DataStores are few.
            if let Some(k) = apis.kind(KAMAJI_GROUP, "DataStore") {
                let ar = k.resource(k.version());
                let d = kclient::api::list_json(&conn, &ar, None, &all).await;
                if let Some(d) = r.or_note(d, FleetRead::DataStores, false, false)? {
                    f.datastores = d;
                }
            }
            f.datastore_secrets = datastore_secrets(&conn, &f.datastores, r).await?;
            Ok(())
        },
    )?;
    secrets_by_namespace(
        &conn,
        &mut fleet,
        secrets_by_ns.get(),
        certificates_by_ns.get(),
        r,
    )
    .await?;
    let mut not_checked = vec![
        "whether the agent of a host that serves no cluster still runs: BYOH v0.5.0's agent keeps no heartbeat of its own (a serving host that stops is found by its Node)".to_string(),
    ];
    if args.only.is_empty() || args.only.contains(&Section::Management) {
        fleet.crds = crds(&conn, &mut not_checked, r).await?;
    }
    if args.only.is_empty() || args.only.contains(&Section::ControlPlanes) {
        fleet.kamaji_refusals = kamaji_refusals(
            &conn,
            &apis,
            &fleet.tenant_control_planes,
            &mut not_checked,
            r,
        )
        .await?;
    }
    fleet.unread = refused.0.into_inner();
    let mut only = args.only.clone();
    if args.selector.is_some() {
        let selected: BTreeSet<(String, String)> = fleet
            .clusters
            .iter()
            .map(|c| (json::namespace(c).to_string(), json::name(c).to_string()))
            .collect();
        narrow(&mut fleet, &selected);
        if only.is_empty() {
            only = Section::ALL.to_vec();
        }
        only.retain(|s| *s != Section::Leftovers);
        not_checked.push("leftovers: -l picks clusters, and leftovers belong to none".into());
    }
    let thresholds = Thresholds {
        cert_warn_seconds: i64::try_from(args.cert_warn.as_secs()).unwrap_or(i64::MAX),
        stuck_after_seconds: i64::try_from(args.stuck_after.as_secs()).unwrap_or(i64::MAX),
    };
    let findings = doctor::examine(&fleet, &thresholds, &only, jiff::Timestamp::now());
    let not_checked_sections = doctor::not_checked(&fleet, &only);
    let not_checked: Vec<String> = not_checked_sections
        .iter()
        .map(ToString::to_string)
        .chain(not_checked)
        .collect();
    // A kind not read at all is not counted as read.
    let whole_unread = |i: FleetRead| fleet.unread.iter().any(|u| u.input == i && !u.partial);
    let checked = [
        ("clusters", FleetRead::Clusters, fleet.clusters.len()),
        ("machines", FleetRead::Machines, fleet.machines.len()),
        ("hosts", FleetRead::ByoHosts, fleet.byo_hosts.len()),
        (
            "control planes",
            FleetRead::TenantControlPlanes,
            fleet.tenant_control_planes.len(),
        ),
        (
            "certificates",
            FleetRead::Certificates,
            fleet.certificates.len(),
        ),
    ]
    .into_iter()
    .filter(|(_, input, _)| !whole_unread(*input))
    .map(|(name, _, n)| (name, n))
    .collect();
    let report = Report {
        counts: Counts::of(&findings),
        findings,
        checked,
        not_checked,
        not_checked_sections,
    };
    printer.print(&report)?;
    match report.counts.error {
        0 => Ok(()),
        n => Err(Error::other(format!(
            "doctor found {n} error(s); each row says what to type"
        ))),
    }
}
