//! `doctor`, shared by `kubectl capi doctor` and `kubectl kamaji doctor`: one read-only report of
//! what is wrong across the management cluster and the fleet, and the command that fixes each
//! finding. It reads each kind once (one LIST response each, no per-object GETs) and decides in
//! `kcore::doctor`.

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use clap::Args as ClapArgs;
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::Secret;
use kclient::discovery::ServerApis;
use kclient::error::Error;
use kclient::render::{Cell, Human, Printer, Render, Table, Tone};
use kcore::doctor::{
    self, Counts, CrdInfo, Fleet, LeaseInfo, Problem, Section, TenantCertificate, Thresholds,
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
Examples:\n  kubectl capi doctor\n  kubectl capi doctor --only control-planes --cert-warn 60d\n  \
kubectl capi doctor -n team-a -o json"
)]
pub struct Args {
    /// Only these sections (comma-separated or repeated)
    #[arg(long, value_name = "SECTION", value_delimiter = ',', value_parser = section)]
    pub only: Vec<Section>,
    /// Warn about certificates expiring within this long (e.g. 30d, 720h; at most 3650d)
    #[arg(long, value_name = "DURATION", default_value = "30d", value_parser = kcore::text::parse_cert_warn)]
    pub cert_warn: Duration,
    /// A machine or control plane in a passing state longer than this is stuck (e.g. 15m)
    #[arg(long, value_name = "DURATION", default_value = "15m", value_parser = crate::flags::parse_duration)]
    pub stuck_after: Duration,
    /// Label selector over Cluster labels: only these clusters' objects (leftovers are then not checked)
    #[arg(short = 'l', long, value_name = "SELECTOR", value_parser = crate::flags::label_selector)]
    pub selector: Option<String>,
    #[command(flatten)]
    pub kube: KubeFlags,
    #[command(flatten)]
    pub output: OutputFlags,
}

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
    /// What could not be checked, and why.
    pub not_checked: Vec<String>,
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
            let mut text = format!("No problems found ({}).", self.read());
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
        format!("read {}", parts.join(", "))
    }
}

/// Lists `ar` into `slot` when served (an unserved kind reads as empty), each object pruned to
/// what the checks read as it is parsed.
async fn fill(
    slot: &mut Vec<Value>,
    conn: &crate::Conn,
    ar: Option<ApiResource>,
    namespace: Option<&str>,
    lp: &ListParams,
) -> Result<(), Error> {
    *slot = whole(conn, ar, namespace, lp, false, doctor::prune).await?;
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
async fn certificates(
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
        let keys = kclient::api::get_json_opt(conn, &ar, Some(&ns), &name)
            .await?
            .map(|s| {
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
async fn crds(conn: &crate::Conn, not_checked: &mut Vec<String>) -> Result<Vec<CrdInfo>, Error> {
    use futures::StreamExt;
    use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
    let ar = ApiResource::erase::<CustomResourceDefinition>(&());
    let lp = ListParams::default().limit(CRD_PAGE);
    let all: Vec<NarrowCrd> = match kclient::api::list_as(conn, &ar, None, &lp, false).await {
        Ok(all) => all,
        // Reading CRDs is a cluster-wide right a namespace's user may lack.
        Err(e @ Error::Forbidden { .. }) => {
            not_checked.push(format!("the CRDs: {e}"));
            return Ok(Vec::new());
        }
        Err(e) => return Err(e),
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
/// `not_checked`.
async fn kamaji_refusals(
    conn: &crate::Conn,
    apis: &ServerApis,
    tcps: &[Value],
    not_checked: &mut Vec<String>,
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

/// Runs `doctor`: prints the report, then fails (exit 1) when it holds an error finding.
pub async fn run(args: &Args) -> Result<(), Error> {
    let printer = Printer::new(&args.output);
    let conn = args.kube.connect().await?;
    let namespace =
        (conn.namespace_explicit && !conn.all_namespaces).then(|| conn.namespace.clone());
    let ns = namespace.as_deref();
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
    let mut fleet = Fleet {
        capi_served: apis.capi_version().is_some(),
        ..Fleet::default()
    };
    let f = &mut fleet;
    tokio::try_join!(
        fill(&mut f.clusters, &conn, capi("Cluster"), ns, &clusters_lp),
        async {
            f.machines = whole(&conn, capi("Machine"), ns, &all, false, |m| {
                doctor::MachineFacts::of(&m)
            })
            .await?;
            Ok(())
        },
        async {
            f.byo_hosts = whole(&conn, apis.byo_host(), ns, &all, false, |h| {
                kcore::plan::hosts::HostFacts::of(&h)
            })
            .await?;
            Ok(())
        },
        async {
            let ar = provider(INFRASTRUCTURE_GROUP, "ByoMachine");
            let keys = whole(&conn, ar, ns, &all, true, |b| doctor::object_key(&b)).await?;
            f.byo_machines = keys.into_iter().collect();
            Ok(())
        },
        fill(
            &mut f.tenant_control_planes,
            &conn,
            apis.tenant_control_plane(),
            ns,
            &all
        ),
        fill(
            &mut f.kamaji_control_planes,
            &conn,
            provider(CONTROLPLANE_GROUP, "KamajiControlPlane"),
            ns,
            &all
        ),
        fill(
            &mut f.byo_machine_templates,
            &conn,
            provider(INFRASTRUCTURE_GROUP, "ByoMachineTemplate"),
            ns,
            &all
        ),
        fill(
            &mut f.bootstrap_kubeconfigs,
            &conn,
            provider(INFRASTRUCTURE_GROUP, "BootstrapKubeconfig"),
            ns,
            &all
        ),
        fill(
            &mut f.installer_templates,
            &conn,
            provider(INFRASTRUCTURE_GROUP, "K8sInstallerConfigTemplate"),
            ns,
            &all
        ),
        fill(
            &mut f.cluster_upgrades,
            &conn,
            provider(OPS_GROUP, "ClusterUpgrade"),
            ns,
            &all
        ),
        fill(
            &mut f.fleet_upgrades,
            &conn,
            provider(OPS_GROUP, "FleetUpgrade"),
            ns,
            &all
        ),
        async {
            let keys = whole(&conn, Some(secret_ar), ns, &secrets_lp, true, |s| {
                doctor::secret_cluster(&s)
            })
            .await?;
            for key in keys.into_iter().flatten() {
                *f.cluster_secrets.entry(key).or_default() += 1;
            }
            Ok(())
        },
        async {
            f.certificates = certificates(&conn, ns).await?;
            Ok(())
        },
        async {
            f.leases = leases(&conn).await?;
            Ok::<_, Error>(())
        },
        async {
            // Whole (not pruned: the checks walk their spec); DataStores are few.
            if let Some(k) = apis.kind(KAMAJI_GROUP, "DataStore") {
                let ar = k.resource(k.version());
                f.datastores = kclient::api::list_json(&conn, &ar, None, &all).await?;
            }
            f.datastore_secrets = datastore_secrets(&conn, &f.datastores).await?;
            Ok(())
        },
    )?;
    let mut not_checked = vec![
        "whether the agent of a host that serves no cluster still runs: BYOH v0.5.0's agent keeps no heartbeat of its own (a serving host that stops is found by its Node)".to_string(),
    ];
    if args.only.is_empty() || args.only.contains(&Section::Management) {
        fleet.crds = crds(&conn, &mut not_checked).await?;
    }
    if args.only.is_empty() || args.only.contains(&Section::ControlPlanes) {
        fleet.kamaji_refusals =
            kamaji_refusals(&conn, &apis, &fleet.tenant_control_planes, &mut not_checked).await?;
    }
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
    let checked = BTreeMap::from([
        ("clusters", fleet.clusters.len()),
        ("machines", fleet.machines.len()),
        ("hosts", fleet.byo_hosts.len()),
        ("control planes", fleet.tenant_control_planes.len()),
        ("certificates", fleet.certificates.len()),
    ]);
    let report = Report {
        counts: Counts::of(&findings),
        findings,
        checked,
        not_checked,
    };
    printer.print(&report)?;
    match report.counts.error {
        0 => Ok(()),
        n => Err(Error::other(format!(
            "doctor found {n} error(s); each row says what to type"
        ))),
    }
}
