//! The flags of a SIMULATED control-plane host's four processes: kubeadm's static pod commands
//! (kubeadm v1.36: `getEtcdCommand` in `cmd/kubeadm/app/phases/etcd/local.go`,
//! `getAPIServerCommand`, `getControllerManagerCommand` and `getSchedulerCommand` in
//! `phases/controlplane/manifests.go`), the ClusterConfiguration's `extraArgs` over them as
//! kubeadm merges them (same name: replaced; others: appended), with the paths of this host's
//! PKI.
//!
//! What differs, all SIMULATED and all for the same reason (every host's processes share the
//! testbed machine's root network namespace, since the hosts' own namespaces are not routable
//! from the management side): each process listens on 127.0.0.1 on a free port of its own
//! instead of 2379/2380/2381, 6443, 10257 and 10259 on the host's address, and advertises
//! 127.0.0.1; kube-apiserver reaches kubelets by their Nodes' `Hostname` address first (its
//! hosts file maps every host to 127.0.0.1, where the hosts' SIMULATED kubelet APIs listen)
//! and runs with `--bind-address=127.0.0.1` and
//! `--endpoint-reconciler-type=none` (v1.37 refuses a loopback advertise address with the
//! endpoint reconciler on, and no Endpoints may hold one); etcd runs with `--unsafe-no-fsync`
//! (test speed; the testbed's own etcd does too). `extraArgs` naming one of those flags, or a
//! certificate path, are ignored with a warning: they would take the process off its port.

use std::path::Path;

use super::config::Cluster;

/// The ports one host's processes really listen on (all on 127.0.0.1).
#[derive(Clone, Copy, Debug)]
pub(super) struct Ports {
    pub etcd_client: u16,
    pub etcd_peer: u16,
    pub etcd_metrics: u16,
    pub apiserver: u16,
    pub controller_manager: u16,
    pub scheduler: u16,
}

impl Ports {
    pub(super) fn pick() -> Result<Ports, String> {
        let p = || crate::free_port().map_err(|e| e.to_string());
        Ok(Ports {
            etcd_client: p()?,
            etcd_peer: p()?,
            etcd_metrics: p()?,
            apiserver: p()?,
            controller_manager: p()?,
            scheduler: p()?,
        })
    }
}

/// `--name=value` for each default, `extra` replacing or appending, except the `owned` flags.
fn merge(
    component: &str,
    defaults: Vec<(&str, String)>,
    extra: &[(String, String)],
    owned: &[&str],
) -> Vec<String> {
    let mut out: Vec<(String, String)> = defaults
        .into_iter()
        .map(|(k, v)| (k.to_string(), v))
        .collect();
    for (k, v) in extra {
        if owned.contains(&k.as_str()) {
            tracing::warn!(
                "SIMULATED {component}: extraArgs {k}={v} ignored (the testbed owns that flag)"
            );
            continue;
        }
        match out.iter_mut().find(|(name, _)| name == k) {
            Some(slot) => slot.1 = v.clone(),
            None => out.push((k.clone(), v.clone())),
        }
    }
    out.into_iter().map(|(k, v)| format!("--{k}={v}")).collect()
}

fn path(dir: &Path, name: &str) -> String {
    dir.join(name).display().to_string()
}

/// etcd: a new cluster of this member (`initial_cluster` its own entry) or a member joining
/// `initial_cluster` (every member, this one included) with `--initial-cluster-state=existing`.
pub(super) fn etcd(
    c: &Cluster,
    host: &str,
    pki: &Path,
    data_dir: &Path,
    ports: &Ports,
    initial_cluster: &str,
    existing: bool,
) -> Vec<String> {
    let client = format!("https://127.0.0.1:{}", ports.etcd_client);
    let peer = format!("https://127.0.0.1:{}", ports.etcd_peer);
    let mut d = vec![
        ("name", host.to_string()),
        ("listen-client-urls", client.clone()),
        ("advertise-client-urls", client),
        ("listen-peer-urls", peer.clone()),
        ("initial-advertise-peer-urls", peer),
        ("data-dir", data_dir.display().to_string()),
        ("cert-file", path(pki, "etcd/server.crt")),
        ("key-file", path(pki, "etcd/server.key")),
        ("trusted-ca-file", path(pki, "etcd/ca.crt")),
        ("client-cert-auth", "true".into()),
        ("peer-cert-file", path(pki, "etcd/peer.crt")),
        ("peer-key-file", path(pki, "etcd/peer.key")),
        ("peer-trusted-ca-file", path(pki, "etcd/ca.crt")),
        ("peer-client-cert-auth", "true".into()),
        ("snapshot-count", "10000".into()),
        (
            "listen-metrics-urls",
            format!("http://127.0.0.1:{}", ports.etcd_metrics),
        ),
        ("feature-gates", "InitialCorruptCheck=true".into()),
        ("watch-progress-notify-interval", "5s".into()),
        ("initial-cluster", initial_cluster.to_string()),
        ("unsafe-no-fsync", "true".into()),
    ];
    if existing {
        d.push(("initial-cluster-state", "existing".into()));
    }
    let owned = [
        "name",
        "listen-client-urls",
        "advertise-client-urls",
        "listen-peer-urls",
        "initial-advertise-peer-urls",
        "data-dir",
        "cert-file",
        "key-file",
        "trusted-ca-file",
        "peer-cert-file",
        "peer-key-file",
        "peer-trusted-ca-file",
        "listen-metrics-urls",
        "initial-cluster",
        "initial-cluster-state",
    ];
    merge("etcd", d, &c.extra.etcd, &owned)
}

/// kube-apiserver, on its local etcd member.
pub(super) fn apiserver(c: &Cluster, pki: &Path, ports: &Ports) -> Vec<String> {
    let d = vec![
        ("advertise-address", "127.0.0.1".to_string()),
        ("enable-admission-plugins", "NodeRestriction".into()),
        ("service-cluster-ip-range", c.service_subnet.clone()),
        ("service-account-key-file", path(pki, "sa.pub")),
        ("service-account-signing-key-file", path(pki, "sa.key")),
        (
            "service-account-issuer",
            format!("https://kubernetes.default.svc.{}", c.dns_domain),
        ),
        ("client-ca-file", path(pki, "ca.crt")),
        ("tls-cert-file", path(pki, "apiserver.crt")),
        ("tls-private-key-file", path(pki, "apiserver.key")),
        (
            "kubelet-client-certificate",
            path(pki, "apiserver-kubelet-client.crt"),
        ),
        (
            "kubelet-client-key",
            path(pki, "apiserver-kubelet-client.key"),
        ),
        ("enable-bootstrap-token-auth", "true".into()),
        ("secure-port", ports.apiserver.to_string()),
        ("allow-privileged", "true".into()),
        (
            "kubelet-preferred-address-types",
            // kubeadm's is InternalIP,ExternalIP,Hostname; Hostname first here, which the
            // hosts file the process runs with maps to 127.0.0.1, where each host's SIMULATED
            // kubelet API listens (the Nodes' InternalIPs are the hosts' own, unroutable here).
            "Hostname,InternalIP,ExternalIP".into(),
        ),
        ("requestheader-username-headers", "X-Remote-User".into()),
        ("requestheader-group-headers", "X-Remote-Group".into()),
        (
            "requestheader-extra-headers-prefix",
            "X-Remote-Extra-".into(),
        ),
        (
            "requestheader-client-ca-file",
            path(pki, "front-proxy-ca.crt"),
        ),
        ("requestheader-allowed-names", "front-proxy-client".into()),
        (
            "proxy-client-cert-file",
            path(pki, "front-proxy-client.crt"),
        ),
        ("proxy-client-key-file", path(pki, "front-proxy-client.key")),
        (
            "etcd-servers",
            format!("https://127.0.0.1:{}", ports.etcd_client),
        ),
        ("etcd-cafile", path(pki, "etcd/ca.crt")),
        ("etcd-certfile", path(pki, "apiserver-etcd-client.crt")),
        ("etcd-keyfile", path(pki, "apiserver-etcd-client.key")),
        ("authorization-mode", "Node,RBAC".into()),
        // SIMULATED: see the module's documentation.
        ("bind-address", "127.0.0.1".into()),
        ("endpoint-reconciler-type", "none".into()),
    ];
    let owned = [
        "advertise-address",
        "secure-port",
        "bind-address",
        "endpoint-reconciler-type",
        "etcd-servers",
        "etcd-cafile",
        "etcd-certfile",
        "etcd-keyfile",
        "client-ca-file",
        "tls-cert-file",
        "tls-private-key-file",
        "service-account-key-file",
        "service-account-signing-key-file",
        "kubelet-client-certificate",
        "kubelet-client-key",
        "requestheader-client-ca-file",
        "proxy-client-cert-file",
        "proxy-client-key-file",
    ];
    merge("kube-apiserver", d, &c.extra.apiserver, &owned)
}

/// kube-controller-manager with its kubeconfig (`controller-manager.conf`).
pub(super) fn controller_manager(
    c: &Cluster,
    pki: &Path,
    kubeconfig: &Path,
    cert_dir: &Path,
    ports: &Ports,
) -> Vec<String> {
    let kc = kubeconfig.display().to_string();
    let mut d = vec![
        ("bind-address", "127.0.0.1".to_string()),
        ("leader-elect", "true".into()),
        ("kubeconfig", kc.clone()),
        ("authentication-kubeconfig", kc.clone()),
        ("authorization-kubeconfig", kc),
        ("client-ca-file", path(pki, "ca.crt")),
        (
            "requestheader-client-ca-file",
            path(pki, "front-proxy-ca.crt"),
        ),
        ("root-ca-file", path(pki, "ca.crt")),
        ("service-account-private-key-file", path(pki, "sa.key")),
        ("cluster-signing-cert-file", path(pki, "ca.crt")),
        ("cluster-signing-key-file", path(pki, "ca.key")),
        ("use-service-account-credentials", "true".into()),
        ("controllers", "*,bootstrapsigner,tokencleaner".into()),
    ];
    if let Some(pods) = &c.pod_subnet {
        d.push(("allocate-node-cidrs", "true".into()));
        d.push(("cluster-cidr", pods.clone()));
        d.push(("service-cluster-ip-range", c.service_subnet.clone()));
    }
    if let Some(name) = c.cluster_name.as_deref().filter(|n| !n.is_empty()) {
        d.push(("cluster-name", name.to_string()));
    }
    // SIMULATED: its own port on 127.0.0.1 instead of 10257.
    d.push(("secure-port", ports.controller_manager.to_string()));
    d.push(("cert-dir", cert_dir.display().to_string()));
    let owned = [
        "bind-address",
        "secure-port",
        "cert-dir",
        "kubeconfig",
        "authentication-kubeconfig",
        "authorization-kubeconfig",
        "client-ca-file",
        "requestheader-client-ca-file",
        "root-ca-file",
        "service-account-private-key-file",
        "cluster-signing-cert-file",
        "cluster-signing-key-file",
    ];
    merge(
        "kube-controller-manager",
        d,
        &c.extra.controller_manager,
        &owned,
    )
}

/// kube-scheduler with its kubeconfig (`scheduler.conf`).
pub(super) fn scheduler(
    c: &Cluster,
    kubeconfig: &Path,
    cert_dir: &Path,
    ports: &Ports,
) -> Vec<String> {
    let kc = kubeconfig.display().to_string();
    let d = vec![
        ("bind-address", "127.0.0.1".to_string()),
        ("leader-elect", "true".into()),
        ("kubeconfig", kc.clone()),
        ("authentication-kubeconfig", kc.clone()),
        ("authorization-kubeconfig", kc),
        // SIMULATED: its own port on 127.0.0.1 instead of 10259.
        ("secure-port", ports.scheduler.to_string()),
        ("cert-dir", cert_dir.display().to_string()),
    ];
    let owned = [
        "bind-address",
        "secure-port",
        "cert-dir",
        "kubeconfig",
        "authentication-kubeconfig",
        "authorization-kubeconfig",
    ];
    merge("kube-scheduler", d, &c.extra.scheduler, &owned)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn extra_args_replace_or_append_but_never_move_a_process_off_its_port() {
        let out = merge(
            "kube-apiserver",
            vec![("secure-port", "1".into()), ("v", "0".into())],
            &[
                ("v".into(), "4".into()),
                ("secure-port".into(), "6443".into()),
                ("audit-log-maxage".into(), "3".into()),
            ],
            &["secure-port"],
        );
        assert_eq!(out, ["--secure-port=1", "--v=4", "--audit-log-maxage=3"]);
    }
}
