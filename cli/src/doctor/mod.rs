//! `doctor`, shared by `kubectl capi doctor` and `kubectl kamaji doctor`: one read-only report of
//! what is wrong across the management cluster and the fleet, and the command that fixes each
//! finding. It reads each kind once (one LIST response each, no per-object GETs) with
//! `kcore::doctor::read` (the reads kamaji-reconciler's findings scan makes too) through
//! `kclient`'s connection (`source`), probes conversion webhooks and Kamaji's webhook
//! (`probes`), decides in `kcore::doctor` and prints the report (`render`); `--print-role`
//! prints `role`.

mod probes;
mod render;
mod role;
mod source;

use std::collections::BTreeSet;
use std::time::Duration;

use clap::Args as ClapArgs;
use k8s_openapi::api::core::v1::Namespace;
use kclient::discovery::ServerApis;
use kclient::error::Error;
use kclient::render::Printer;
use kcore::doctor::{self, Counts, Fleet, FleetRead, Section, Thresholds};
use kcore::json;
use kcore::labels::CLUSTER_NAME_LABEL;
use kube::discovery::ApiResource;
use serde_json::Value;

use crate::flags::{KubeFlags, OutputFlags};
pub use render::Report;

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

fn section(s: &str) -> Result<Section, String> {
    Section::parse(s).ok_or_else(|| {
        let names: Vec<&str> = Section::ALL.iter().map(|s| s.as_str()).collect();
        format!("unknown section {s:?} (one of: {})", names.join(", "))
    })
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
        kclient::render::raw(role::ROLE.as_bytes());
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
    let namespaces: Vec<String> = namespace.into_iter().collect();
    let wants = |s: Section| args.only.is_empty() || args.only.contains(&s);
    let ask = doctor::read::Ask {
        namespaces: &namespaces,
        selector: args.selector.as_deref().filter(|s| !s.trim().is_empty()),
        certificates: true,
        bootstrap_kubeconfigs: true,
        datastores: true,
        crds: wants(Section::Management),
        components: wants(Section::Management),
        host_events: wants(Section::Workers),
    };
    let reads = source::Reads {
        conn: &conn,
        apis: &apis,
    };
    let mut fleet = doctor::read::fleet(&reads, &ask).await?;
    let mut not_checked = vec![
        "whether the agent of a host that serves no cluster still runs: BYOH v0.5.0's agent keeps no heartbeat of its own (a serving host that stops is found by its Node)".to_string(),
    ];
    if wants(Section::Management) {
        probes::conversions(&conn, &mut fleet, &mut not_checked).await;
    }
    if wants(Section::ControlPlanes) {
        fleet.kamaji_refusals =
            probes::kamaji_refusals(&conn, &apis, &mut fleet, &mut not_checked).await?;
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
