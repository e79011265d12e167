//! SIMULATED cluster DNS: the names a headless Service gives the pods it selects.
//!
//! On a cluster, CoreDNS answers `<hostname>.<subdomain>.<namespace>.svc.cluster.local` with the
//! address of the pod whose `spec.hostname` and `spec.subdomain` those are, when a headless
//! Service named `<subdomain>` selects it: CoreDNS's `kubernetes` plugin reads the Service's
//! EndpointSlices, where the EndpointSlice controller puts each such pod's `hostname` beside its
//! address, and serves an endpoint while it is ready (every endpoint of a Service with
//! `publishNotReadyAddresses` is). A StatefulSet's pods are named so (`spec.serviceName`), which
//! is how the members of an etcd StatefulSet find each other. There is no cluster DNS here, so
//! the same EndpointSlices are read each tick of the image kubelet and their names written where
//! resolvers look, `/etc/hosts`:
//! - in each image pod, into its hosts file (the one [`NetSandbox`] bind-mounts at the
//!   container's `/etc/hosts`), rewritten in place when the names change (Go's resolver rereads
//!   it when its mtime changes, glibc's on each lookup). The pod's own names are there from its
//!   start, as a kubelet writes them into a pod's managed hosts file (`<podIP>
//!   <hostname>.<subdomain>.<namespace>.svc.cluster.local <hostname>`), so an etcd member checking
//!   its own advertised name at start finds it before its EndpointSlice does;
//! - for the processes of the host's network (the tenant-pod runner's kube-apiserver, Kamaji's
//!   migration Job), into one file, [`host_file`], which [`host_command`] bind-mounts at
//!   `/etc/hosts` in a private mount namespace of each process; the machine's own file stays as
//!   it is.
//!
//! Both the full name and its `….svc` form (what a pod's DNS search path completes) are
//! written. A name resolves to the pod's own address, which other pods reach through the
//! SIMULATED pod network ([`super::network`]) and the host directly: nothing rewrites a name
//! into another address, so TLS against the names (an etcd serving certificate whose SANs are
//! those names) works as on a cluster. The same lines answer the reverse lookup etcd makes of a
//! peer presenting a certificate (its address must resolve to one of the certificate's names,
//! `checkCertSAN` in etcd's `client/pkg/transport`), which CoreDNS answers from the same
//! EndpointSlices.
//!
//! What differs from CoreDNS: only these names (no Service or pod A records, no SRV records);
//! an address whose pod this kubelet no longer runs is left out at once (CoreDNS serves it until
//! the EndpointSlice controller catches up); and a new name shows within a tick (500 ms) of its
//! EndpointSlice, plus the resolver's own caching (Go's, up to 5 s).

use std::collections::{BTreeMap, HashSet};
use std::net::Ipv4Addr;
use std::path::{Path, PathBuf};

use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::api::discovery::v1::EndpointSlice;
use kube::Client;
use kube::api::{Api, ListParams};

use crate::Error;
use crate::netns::{NetSandbox, render_mapped};

/// The cluster's DNS domain (a kubelet's `clusterDomain` as kubeadm sets it).
pub const CLUSTER_DOMAIN: &str = "cluster.local";

/// The label of an EndpointSlice naming its Service.
const SERVICE_NAME_LABEL: &str = "kubernetes.io/service-name";

/// Addresses and their names, sorted by address.
pub(crate) type Table = Vec<(Ipv4Addr, Vec<String>)>;

/// `<hostname>.<service>.<namespace>.svc.cluster.local` and its `….svc` form.
fn names_of(hostname: &str, service: &str, namespace: &str) -> Vec<String> {
    let svc = format!("{hostname}.{service}.{namespace}.svc");
    vec![format!("{svc}.{CLUSTER_DOMAIN}"), svc]
}

/// The names a kubelet writes for a pod into the pod's own hosts file: its hostname
/// (`spec.hostname`, else its name) and, with a `spec.subdomain`, its full names.
pub(super) fn own_names(pod: &Pod) -> Vec<String> {
    let spec = pod.spec.as_ref();
    let Some(hostname) = spec
        .and_then(|s| s.hostname.clone())
        .or_else(|| pod.metadata.name.clone())
    else {
        return Vec::new();
    };
    let mut out = Vec::new();
    if let Some(sub) = spec.and_then(|s| s.subdomain.as_deref())
        && let Some(ns) = pod.metadata.namespace.as_deref()
    {
        out = names_of(&hostname, sub, ns);
    }
    out.push(hostname);
    out
}

/// The names the EndpointSlices give: each ready endpoint with a `hostname`, at each of its
/// IPv4 addresses that a pod of `live` holds.
pub(super) fn table_of(slices: &[EndpointSlice], live: &HashSet<Ipv4Addr>) -> Table {
    let mut by_ip: BTreeMap<Ipv4Addr, Vec<String>> = BTreeMap::new();
    for slice in slices.iter().filter(|s| s.address_type == "IPv4") {
        let (Some(service), Some(ns)) = (
            slice
                .metadata
                .labels
                .as_ref()
                .and_then(|l| l.get(SERVICE_NAME_LABEL)),
            slice.metadata.namespace.as_deref(),
        ) else {
            continue;
        };
        for ep in &slice.endpoints {
            let ready = ep.conditions.as_ref().and_then(|c| c.ready) != Some(false);
            let Some(hostname) = ep.hostname.as_deref().filter(|_| ready) else {
                continue;
            };
            for ip in ep
                .addresses
                .iter()
                .filter_map(|a| a.parse::<Ipv4Addr>().ok())
            {
                if live.contains(&ip) {
                    let names = by_ip.entry(ip).or_default();
                    for n in names_of(hostname, service, ns) {
                        if !names.contains(&n) {
                            names.push(n);
                        }
                    }
                }
            }
        }
    }
    by_ip.into_iter().collect()
}

/// What one pod's hosts file maps: its own names at its own address, then `table` without
/// them.
fn for_pod(table: &Table, ip: Ipv4Addr, own: &[String]) -> Table {
    let mut out = vec![(ip, own.to_vec())];
    for (addr, names) in table {
        let names: Vec<String> = names.iter().filter(|n| !own.contains(n)).cloned().collect();
        if !names.is_empty() {
            out.push((*addr, names));
        }
    }
    out
}

/// A running image pod, as the names are written for it: its namespaces, its address and its
/// own names.
pub(super) struct PodNames<'a> {
    pub sandbox: &'a NetSandbox,
    pub ip: Ipv4Addr,
    pub own: &'a [String],
}

/// Writes a new pod's own names into its hosts file, before its containers start.
pub(super) fn write_own(sandbox: &NetSandbox, ip: Ipv4Addr, own: &[String]) -> Result<(), Error> {
    sandbox.set_mapped(&for_pod(&Vec::new(), ip, own))
}

/// Reads the EndpointSlices and writes the names into every running pod's hosts file and into
/// `host` (the host-network processes' file).
pub(super) async fn refresh(client: &Client, host: &Path, pods: &[PodNames<'_>]) {
    let slices = match Api::<EndpointSlice>::all(client.clone())
        .list(&ListParams::default())
        .await
    {
        Ok(l) => l.items,
        Err(e) => {
            tracing::warn!("SIMULATED cluster DNS: listing EndpointSlices: {e}");
            return;
        }
    };
    let live: HashSet<Ipv4Addr> = pods.iter().map(|p| p.ip).collect();
    let table = table_of(&slices, &live);
    for p in pods {
        if let Err(e) = p.sandbox.set_mapped(&for_pod(&table, p.ip, p.own)) {
            tracing::warn!("SIMULATED cluster DNS: {e}");
        }
    }
    if let Err(e) = write_host_file(host, &table) {
        tracing::warn!("SIMULATED cluster DNS: {e}");
    }
}

/// The machine's own hosts file, which the host-network processes' file starts with.
const MACHINE_HOSTS: &str = "/etc/hosts";

/// Rewrites `path` in place (the bind mounts follow its inode) as the machine's hosts file and
/// `table`, when that changes it.
fn write_host_file(path: &Path, table: &Table) -> Result<(), Error> {
    let mut text = std::fs::read_to_string(MACHINE_HOSTS).unwrap_or_default();
    if !text.is_empty() && !text.ends_with('\n') {
        text.push('\n');
    }
    text.push_str("# SIMULATED cluster DNS (capi-kamaji testbed)\n");
    text.push_str(&render_mapped(table));
    if std::fs::read_to_string(path).is_ok_and(|t| t == text) {
        return Ok(());
    }
    std::fs::write(path, text).map_err(|e| Error::io(path, e))
}

/// The hosts file of the host-network processes in the testbed folder `dir`, written (without
/// names yet) so that a process started before the image kubelet's first tick finds it.
pub fn host_file(dir: &Path) -> Result<PathBuf, Error> {
    let path = dir.join("cluster-hosts");
    write_host_file(&path, &Vec::new())?;
    Ok(path)
}

/// `program args` run in a private mount namespace whose `/etc/hosts` is `hosts` (a
/// [`host_file`]): the program and arguments to spawn instead. `unshare` execs `sh`, which
/// execs the program, so the process keeps one pid throughout (and the parent-death signal
/// the testbed sets, which `exec` keeps).
pub fn host_command(hosts: &Path, program: &Path, args: &[String]) -> (PathBuf, Vec<String>) {
    let mut out: Vec<String> = vec![
        "--mount".into(),
        "--propagation".into(),
        "private".into(),
        "sh".into(),
        "-c".into(),
        r#"set -e; h=$1; shift; mount --bind "$h" /etc/hosts; exec "$@""#.into(),
        "sh".into(),
        hosts.display().to_string(),
        program.display().to_string(),
    ];
    out.extend(args.iter().cloned());
    (PathBuf::from("unshare"), out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn slice(service: &str, endpoints: serde_json::Value) -> EndpointSlice {
        serde_json::from_value(serde_json::json!({
            "metadata": {"name": format!("{service}-x"), "namespace": "kamaji-system",
                         "labels": {SERVICE_NAME_LABEL: service}},
            "addressType": "IPv4",
            "endpoints": endpoints,
        }))
        .unwrap()
    }

    #[test]
    fn ready_endpoints_with_a_hostname_are_named_at_live_addresses_only() {
        let slices = vec![slice(
            "kamaji-etcd",
            serde_json::json!([
                {"addresses": ["10.244.0.2"], "hostname": "kamaji-etcd-0", "conditions": {"ready": true}},
                {"addresses": ["10.244.0.6"], "hostname": "kamaji-etcd-1", "conditions": {}},
                {"addresses": ["10.244.0.10"], "hostname": "kamaji-etcd-2", "conditions": {"ready": false}},
                {"addresses": ["10.244.0.14"], "conditions": {"ready": true}},
                {"addresses": ["10.244.0.18"], "hostname": "gone", "conditions": {"ready": true}},
            ]),
        )];
        let live: HashSet<Ipv4Addr> = ["10.244.0.2", "10.244.0.6", "10.244.0.10", "10.244.0.14"]
            .iter()
            .map(|a| a.parse().unwrap())
            .collect();
        let table = table_of(&slices, &live);
        assert_eq!(
            table,
            vec![
                (
                    "10.244.0.2".parse().unwrap(),
                    vec![
                        "kamaji-etcd-0.kamaji-etcd.kamaji-system.svc.cluster.local".to_string(),
                        "kamaji-etcd-0.kamaji-etcd.kamaji-system.svc".to_string(),
                    ]
                ),
                (
                    "10.244.0.6".parse().unwrap(),
                    vec![
                        "kamaji-etcd-1.kamaji-etcd.kamaji-system.svc.cluster.local".to_string(),
                        "kamaji-etcd-1.kamaji-etcd.kamaji-system.svc".to_string(),
                    ]
                ),
            ]
        );
        assert_eq!(
            render_mapped(&table[..1]),
            "10.244.0.2 kamaji-etcd-0.kamaji-etcd.kamaji-system.svc.cluster.local kamaji-etcd-0.kamaji-etcd.kamaji-system.svc\n"
        );
    }

    #[test]
    fn a_pod_has_its_own_names_first_and_once() {
        let pod: Pod = serde_json::from_value(serde_json::json!({
            "metadata": {"name": "kamaji-etcd-1", "namespace": "kamaji-system"},
            "spec": {"hostname": "kamaji-etcd-1", "subdomain": "kamaji-etcd",
                     "containers": [{"name": "etcd"}]},
        }))
        .unwrap();
        let own = own_names(&pod);
        assert_eq!(
            own,
            [
                "kamaji-etcd-1.kamaji-etcd.kamaji-system.svc.cluster.local",
                "kamaji-etcd-1.kamaji-etcd.kamaji-system.svc",
                "kamaji-etcd-1",
            ]
        );
        let me: Ipv4Addr = "10.244.0.30".parse().unwrap();
        let stale: Ipv4Addr = "10.244.0.6".parse().unwrap();
        let other: Ipv4Addr = "10.244.0.2".parse().unwrap();
        let table = vec![
            (
                other,
                names_of("kamaji-etcd-0", "kamaji-etcd", "kamaji-system"),
            ),
            (
                stale,
                names_of("kamaji-etcd-1", "kamaji-etcd", "kamaji-system"),
            ),
        ];
        assert_eq!(
            for_pod(&table, me, &own),
            vec![(me, own.clone()), table[0].clone()]
        );
        let plain: Pod = serde_json::from_value(serde_json::json!({
            "metadata": {"name": "web-0", "namespace": "x"}, "spec": {"containers": []},
        }))
        .unwrap();
        assert_eq!(own_names(&plain), ["web-0"]);
    }

    #[test]
    fn a_host_command_binds_the_hosts_file_then_execs_the_program() {
        let (program, args) = host_command(
            Path::new("/tb/cluster-hosts"),
            Path::new("/bin/kube-apiserver"),
            &["--etcd-servers=http://a:2379".into()],
        );
        assert_eq!(program, PathBuf::from("unshare"));
        assert_eq!(
            &args[args.len() - 3..],
            [
                "/tb/cluster-hosts",
                "/bin/kube-apiserver",
                "--etcd-servers=http://a:2379"
            ]
        );
    }
}
