//! A real node for the management cluster: the kubelet and kube-proxy built from the same
//! Kubernetes module as the API server (`build-bins.sh k8s`), Debian's containerd 1.6 and runc,
//! and the CNI `bridge`, `host-local` and `portmap` plugins (`build-bins.sh node-packages`), as a
//! kind node has them. Pods run as containers, from the testbed's registry, with an address of
//! their own on the node's bridge; `kubectl logs` goes through the API server to this kubelet.
//!
//! The node is a machine of its own as far as its programs can tell: network, mount and PID
//! namespaces ([`NetSandbox::start_node`]). Several testbeds run at once on one machine, and
//! each node's kube-proxy rewrites iptables and its bridge takes a subnet, so each stays inside
//! its namespace. The PID namespace also means that when the testbed goes, the kernel kills
//! every process of the node, containerd's shims and the containers included (they leave
//! containerd's process group on purpose).
//!
//! What differs from a node of a real cluster, and why:
//! - containerd's CRI plugin runs with `restrict_oom_score_adj`: root here lacks
//!   CAP_SYS_RESOURCE, and without it every sandbox fails in runc ("can't get final child's PID
//!   from pipe"). The kubelet runs with `failCgroupV1: false` and the `cgroupfs` driver (these
//!   machines have cgroup v1 and no systemd) and without per-QoS cgroups.
//! - The sandbox image is the testbed's own `pause` (`testbed/pause`), from the testbed's
//!   registry: `registry.k8s.io` cannot be reached.
//! - The kubelet and kube-proxy use the testbed's admin credentials, not a bootstrapped
//!   `system:node:` identity (what is tested here is the workload, not node authorization), and
//!   the kubelet serves its API with its own self-signed certificate, as the API server does not
//!   verify kubelets unless told to.
//! - The API server listens on the machine's loopback only, and its own endpoint reconciler is
//!   off (it would publish 127.0.0.1, which an EndpointSlice cannot hold). The testbed forwards
//!   the API server's port from the node's address and publishes that as the `kubernetes`
//!   Service's endpoint, so pods reach the API server as in a cluster: the Service's ClusterIP
//!   (10.0.0.1, in the serving certificate), kube-proxy's rule, the endpoint.

use std::net::Ipv4Addr;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::core::v1::Node as NodeObject;
use k8s_openapi::api::discovery::v1::EndpointSlice;
use kube::Api;

use crate::netns::NetSandbox;
use crate::{Error, Proc, Testbed};

/// The node's name, as `kubectl get nodes` shows it.
pub const NAME: &str = "testbed-node";

/// Pod subnets are /24s of 10.245.0.0/16, one per node; the host's route to it claims it.
const POD_NET: [u8; 2] = [10, 245];

/// The images a node needs, built here and pushed to the testbed's registry.
/// kubeadm v1.36.3's (constants.PauseVersion).
pub const PAUSE_IMAGE: &str = "registry.k8s.io/pause:3.10.2";
/// kubeadm v1.36.3's (constants.CoreDNSVersion); `testbed/versions.env` pins the build.
pub const COREDNS_IMAGE: &str = "registry.k8s.io/coredns/coredns:v1.14.2";
/// The cluster DNS Service's address, as kubeadm picks it (the tenth of the Service range).
pub const CLUSTER_DNS: &str = "10.0.0.10";
/// A small image with a shell, for tests of the node itself (Debian's busybox-static).
pub const BUSYBOX_IMAGE: &str = "docker.io/library/busybox:1.35.0";

/// A running node.
#[derive(Clone, Debug)]
pub struct NodeInfo {
    pub name: String,
    /// The node's InternalIP (its `eth0`), which the host reaches.
    pub address: Ipv4Addr,
    /// The pods' subnet (`10.245.N.0/24`), routed from the host through the node.
    pub pod_cidr: String,
    /// The pause and busybox images as the registry serves them.
    pub pause_image: String,
    pub busybox_image: String,
    pub coredns_image: String,
}

/// Starts the node for `tb` (which must have its registry) and waits until it is Ready.
/// Returns what the testbed keeps: the node, its namespaces and its processes.
pub(crate) async fn start(
    tb: &Testbed,
    registry: &str,
) -> Result<(NodeInfo, Arc<NetSandbox>, Vec<Proc>), Error> {
    let dir = tb.dir.join("node");
    for d in [
        "containerd-root",
        "containerd-state",
        "kubelet",
        "manifests",
        "certs.d",
        "cni",
    ] {
        let p = dir.join(d);
        std::fs::create_dir_all(&p).map_err(|e| Error::io(&p, e))?;
    }
    let pushed = crate::images::push(
        registry,
        &crate::images::NODE_IMAGES.iter().collect::<Vec<_>>(),
    )
    .await?;
    let image_of = |release: &str| {
        pushed
            .iter()
            .find(|p| p.release == release)
            .map(|p| p.image.clone())
            .ok_or_else(|| Error::Start(format!("{release} was not pushed")))
    };
    let (pause_image, busybox_image) = (image_of(PAUSE_IMAGE)?, image_of(BUSYBOX_IMAGE)?);
    let coredns_image = image_of(COREDNS_IMAGE)?;

    let sandbox = Arc::new(NetSandbox::start_node(&tb.dir, "node")?);
    let link = sandbox.attach_link()?;
    let api_port = tb.api_port()?;
    sandbox.forward(api_port)?;
    sandbox.forward_on(link.pod_ip, api_port)?;
    publish_api_endpoint(tb, link.pod_ip, api_port).await?;
    let registry_port: u16 = registry
        .rsplit_once(':')
        .and_then(|(_, p)| p.parse().ok())
        .ok_or_else(|| Error::Start(format!("registry {registry}: no port")))?;
    sandbox.forward(registry_port)?;
    let pod_cidr = claim_pod_subnet(link.pod_ip)?;

    write_containerd_config(&dir, registry, &pause_image, &pod_cidr)?;
    let enter = sandbox.enter_node_args()?;
    let mut procs = Vec::new();
    let containerd = spawn_inside(
        &enter,
        "node-containerd",
        Path::new("containerd"),
        &[
            "--config".into(),
            dir.join("containerd.toml").display().to_string(),
        ],
        &dir.join("containerd.log"),
    )?;
    procs.push(containerd);
    wait_for_socket(&dir.join("containerd.sock"), &dir.join("containerd.log")).await?;

    let kubelet_config = dir.join("kubelet.yaml");
    std::fs::write(&kubelet_config, kubelet_config_text(&dir))
        .map_err(|e| Error::io(&kubelet_config, e))?;
    let kubelet = spawn_inside(
        &enter,
        "node-kubelet",
        &tb.assets.kubelet(),
        &[
            format!("--config={}", kubelet_config.display()),
            format!("--kubeconfig={}", tb.kubeconfig.display()),
            format!("--root-dir={}", dir.join("kubelet").display()),
            format!("--cert-dir={}", dir.join("kubelet").join("pki").display()),
            format!("--hostname-override={NAME}"),
            format!("--node-ip={}", link.pod_ip),
            "--v=1".into(),
        ],
        &dir.join("kubelet.log"),
    )?;
    procs.push(kubelet);
    let proxy = spawn_inside(
        &enter,
        "node-kube-proxy",
        &tb.assets.kube_proxy(),
        &[
            format!("--kubeconfig={}", tb.kubeconfig.display()),
            format!("--hostname-override={NAME}"),
            format!("--cluster-cidr={pod_cidr}"),
            "--proxy-mode=iptables".into(),
            // Leaves the machine-wide nf_conntrack_max alone (a namespace cannot set it).
            "--conntrack-max-per-core=0".into(),
            "--metrics-bind-address=127.0.0.1:10249".into(),
            "--healthz-bind-address=127.0.0.1:10256".into(),
        ],
        &dir.join("kube-proxy.log"),
    )?;
    procs.push(proxy);
    let scheduler_port = crate::free_port()?;
    let scheduler = Proc::spawn(
        "kube-scheduler",
        &tb.assets.kube_scheduler(),
        &[
            format!("--kubeconfig={}", tb.kubeconfig.display()),
            format!("--authentication-kubeconfig={}", tb.kubeconfig.display()),
            format!("--authorization-kubeconfig={}", tb.kubeconfig.display()),
            "--leader-elect=false".into(),
            "--bind-address=127.0.0.1".into(),
            format!("--secure-port={scheduler_port}"),
        ],
        &tb.dir.join("kube-scheduler.log"),
    )?;
    procs.push(scheduler);

    let info = NodeInfo {
        name: NAME.into(),
        address: link.pod_ip,
        pod_cidr,
        pause_image,
        busybox_image,
        coredns_image,
    };
    wait_ready(tb, &dir, &mut procs).await?;
    cluster_dns(tb, &info).await?;
    tracing::info!(
        "node {} Ready at {} (pods {})",
        info.name,
        info.address,
        info.pod_cidr
    );
    Ok((info, sandbox, procs))
}

/// The `kubernetes` Service's EndpointSlice: the node's address, where the API server's port
/// is forwarded (see the module's notes).
async fn publish_api_endpoint(tb: &Testbed, ip: Ipv4Addr, port: u16) -> Result<(), Error> {
    let slices: Api<EndpointSlice> = Api::namespaced(tb.client().await, "default");
    let slice: EndpointSlice = serde_json::from_value(serde_json::json!({
        "apiVersion": "discovery.k8s.io/v1",
        "kind": "EndpointSlice",
        "metadata": {"name": "kubernetes", "labels": {
            "kubernetes.io/service-name": "kubernetes",
            "endpointslice.kubernetes.io/managed-by": "testbed.capi-kamaji.io"}},
        "addressType": "IPv4",
        "endpoints": [{"addresses": [ip.to_string()], "conditions": {"ready": true}}],
        "ports": [{"name": "https", "port": port, "protocol": "TCP"}],
    }))
    .map_err(|e| Error::Start(format!("the kubernetes EndpointSlice: {e}")))?;
    slices
        .patch(
            "kubernetes",
            &kube::api::PatchParams::apply("capi-testbed").force(),
            &kube::api::Patch::Apply(&slice),
        )
        .await?;
    Ok(())
}

/// Cluster DNS as kubeadm's CoreDNS add-on sets it up (`kube-dns` at [`CLUSTER_DNS`], the
/// `kubernetes` plugin for `cluster.local`, the same RBAC), and waits until it is Available:
/// its readiness needs the `kubernetes` plugin synced through the `kubernetes` Service, so this
/// also proves a pod's client reaches the API server over TLS with its token. One difference:
/// CoreDNS listens on 1053 and the Service maps 53 to it, because upstream's image grants the
/// binary the bind capability as a file capability, which an image written here cannot carry.
async fn cluster_dns(tb: &Testbed, info: &NodeInfo) -> Result<(), Error> {
    use serde_json::json;
    let client = tb.client().await;
    let ns = "kube-system";
    let labels = json!({"k8s-app": "kube-dns"});
    let corefile = ".:1053 {\n    errors\n    health :8080\n    ready :8181\n    kubernetes cluster.local in-addr.arpa ip6.arpa {\n       pods insecure\n       fallthrough in-addr.arpa ip6.arpa\n       ttl 30\n    }\n    forward . /etc/resolv.conf\n    cache 30\n    loadbalance\n}\n";
    let objects = [
        json!({"apiVersion": "v1", "kind": "ServiceAccount",
               "metadata": {"name": "coredns", "namespace": ns}}),
        json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
               "metadata": {"name": "system:coredns"},
               "rules": [
                 {"apiGroups": [""], "resources": ["endpoints", "services", "pods", "namespaces"],
                  "verbs": ["list", "watch"]},
                 {"apiGroups": ["discovery.k8s.io"], "resources": ["endpointslices"],
                  "verbs": ["list", "watch"]}]}),
        json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding",
               "metadata": {"name": "system:coredns"},
               "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole",
                           "name": "system:coredns"},
               "subjects": [{"kind": "ServiceAccount", "name": "coredns", "namespace": ns}]}),
        json!({"apiVersion": "v1", "kind": "ConfigMap",
               "metadata": {"name": "coredns", "namespace": ns},
               "data": {"Corefile": corefile}}),
        json!({"apiVersion": "apps/v1", "kind": "Deployment",
               "metadata": {"name": "coredns", "namespace": ns, "labels": labels},
               "spec": {"replicas": 1, "selector": {"matchLabels": labels},
                 "template": {"metadata": {"labels": labels}, "spec": {
                   "serviceAccountName": "coredns", "dnsPolicy": "Default",
                   "containers": [{"name": "coredns", "image": info.coredns_image,
                     "args": ["-conf", "/etc/coredns/Corefile"],
                     "ports": [{"containerPort": 1053, "name": "dns", "protocol": "UDP"},
                               {"containerPort": 1053, "name": "dns-tcp", "protocol": "TCP"}],
                     "volumeMounts": [{"name": "config", "mountPath": "/etc/coredns", "readOnly": true}],
                     "livenessProbe": {"httpGet": {"path": "/health", "port": 8080}},
                     "readinessProbe": {"httpGet": {"path": "/ready", "port": 8181}, "periodSeconds": 1}}],
                   "volumes": [{"name": "config", "configMap": {"name": "coredns"}}]}}}}),
        json!({"apiVersion": "v1", "kind": "Service",
               "metadata": {"name": "kube-dns", "namespace": ns, "labels": labels},
               "spec": {"selector": labels, "clusterIP": CLUSTER_DNS, "ports": [
                 {"name": "dns", "port": 53, "targetPort": 1053, "protocol": "UDP"},
                 {"name": "dns-tcp", "port": 53, "targetPort": 1053, "protocol": "TCP"}]}}),
    ];
    for o in &objects {
        crate::meta::apply_value(&client, o, "capi-testbed").await?;
    }
    let deployments: Api<k8s_openapi::api::apps::v1::Deployment> =
        Api::namespaced(client.clone(), ns);
    let deadline = tokio::time::Instant::now() + Duration::from_secs(120);
    loop {
        if let Ok(d) = deployments.get("coredns").await
            && d.status.and_then(|s| s.available_replicas) == Some(1)
        {
            return Ok(());
        }
        if tokio::time::Instant::now() > deadline {
            return Err(Error::Start(format!(
                "cluster DNS (CoreDNS) not Available in 120 s; see {}",
                tb.dir.join("node").join("kubelet.log").display()
            )));
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// Claims a free /24 of [`POD_NET`] for this node's pods: the host's route to it through the
/// node (`via`) is the claim, as `ip route add` refuses a subnet another testbed routes already.
/// The route goes with the node's link.
fn claim_pod_subnet(via: Ipv4Addr) -> Result<String, Error> {
    use std::hash::{BuildHasher, Hasher};
    let mut h = std::collections::hash_map::RandomState::new().build_hasher();
    h.write_u32(std::process::id());
    let start = (h.finish() % 256) as u32;
    let mut last = String::new();
    for k in 0..64u32 {
        let n = (start + k * 37) % 256;
        let cidr = format!("{}.{}.{n}.0/24", POD_NET[0], POD_NET[1]);
        let out = std::process::Command::new("ip")
            .args(["route", "add", &cidr, "via", &via.to_string()])
            .output()
            .map_err(|e| Error::Start(format!("running ip: {e}")))?;
        if out.status.success() {
            return Ok(cidr);
        }
        last = String::from_utf8_lossy(&out.stderr).trim().to_string();
    }
    Err(Error::Start(format!(
        "no free pod subnet in 10.245.0.0/16 for the node: {last}"
    )))
}

/// containerd's configuration: Debian's defaults with its root, state and socket in `dir`, the
/// CRI plugin's OOM score restricted, the testbed's pause image, the CNI plugins Debian
/// installs, and the testbed's registry spoken to over plain HTTP (a `hosts.toml`, as a site
/// configures its mirror).
fn write_containerd_config(
    dir: &Path,
    registry: &str,
    pause_image: &str,
    pod_cidr: &str,
) -> Result<(), Error> {
    let d = |p: &str| dir.join(p).display().to_string();
    let config = format!(
        r#"version = 2
root = "{root}"
state = "{state}"

[grpc]
  address = "{sock}"

[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = "{pause_image}"
  restrict_oom_score_adj = true
  stream_server_address = "127.0.0.1"
  stream_server_port = "0"
  [plugins."io.containerd.grpc.v1.cri".containerd]
    snapshotter = "overlayfs"
    default_runtime_name = "runc"
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
  [plugins."io.containerd.grpc.v1.cri".cni]
    bin_dir = "/usr/lib/cni"
    conf_dir = "{cni}"
  [plugins."io.containerd.grpc.v1.cri".registry]
    config_path = "{certs}"
"#,
        root = d("containerd-root"),
        state = d("containerd-state"),
        sock = d("containerd.sock"),
        cni = d("cni"),
        certs = d("certs.d"),
    );
    let path = dir.join("containerd.toml");
    std::fs::write(&path, config).map_err(|e| Error::io(&path, e))?;
    let hosts_dir = dir.join("certs.d").join(registry);
    std::fs::create_dir_all(&hosts_dir).map_err(|e| Error::io(&hosts_dir, e))?;
    let hosts = format!(
        "server = \"http://{registry}\"\n\n[host.\"http://{registry}\"]\n  capabilities = [\"pull\", \"resolve\"]\n"
    );
    let path = hosts_dir.join("hosts.toml");
    std::fs::write(&path, hosts).map_err(|e| Error::io(&path, e))?;
    let cni = format!(
        r#"{{"cniVersion": "1.0.0", "name": "testbed", "plugins": [
  {{"type": "bridge", "bridge": "cni0", "isGateway": true, "ipMasq": true, "hairpinMode": true,
    "ipam": {{"type": "host-local", "ranges": [[{{"subnet": "{pod_cidr}"}}]],
              "routes": [{{"dst": "0.0.0.0/0"}}], "dataDir": "{ipam}"}}}},
  {{"type": "portmap", "capabilities": {{"portMappings": true}}}}
]}}
"#,
        ipam = d("ipam"),
    );
    let path = dir.join("cni").join("10-testbed.conflist");
    std::fs::write(&path, cni).map_err(|e| Error::io(&path, e))
}

/// The kubelet's configuration (see the module's notes for what differs from a real node).
fn kubelet_config_text(dir: &Path) -> String {
    format!(
        r#"apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
failCgroupV1: false
cgroupDriver: cgroupfs
cgroupsPerQOS: false
enforceNodeAllocatable: []
containerRuntimeEndpoint: unix://{sock}
staticPodPath: {manifests}
authentication:
  anonymous: {{enabled: true}}
  webhook: {{enabled: false}}
authorization: {{mode: AlwaysAllow}}
readOnlyPort: 0
healthzBindAddress: 127.0.0.1
failSwapOn: false
serializeImagePulls: false
clusterDomain: cluster.local
clusterDNS: ["{dns}"]
# The machine's disk is shared by every testbed: only a nearly full one is pressure here.
evictionHard: {{"memory.available": "50Mi", "nodefs.available": "1%", "imagefs.available": "1%"}}
imageGCHighThresholdPercent: 100
imageGCLowThresholdPercent: 99
"#,
        sock = dir.join("containerd.sock").display(),
        manifests = dir.join("manifests").display(),
        dns = CLUSTER_DNS,
    )
}

/// `program args…` inside the node's namespaces (`nsenter`, which joins the PID namespace
/// for the child it forks).
fn spawn_inside(
    enter: &[String],
    name: &str,
    program: &Path,
    args: &[String],
    log: &Path,
) -> Result<Proc, Error> {
    let mut argv = enter.to_vec();
    argv.push(program.display().to_string());
    argv.extend(args.iter().cloned());
    Proc::spawn(name, Path::new("nsenter"), &argv, log)
}

/// Waits until containerd's socket exists (it is up in well under a second).
async fn wait_for_socket(sock: &Path, log: &Path) -> Result<(), Error> {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
    while !sock.exists() {
        if tokio::time::Instant::now() > deadline {
            return Err(Error::Start(format!(
                "containerd did not open {} in 30 s; {}:\n{}",
                sock.display(),
                log.display(),
                crate::log_tail(log)
            )));
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    Ok(())
}

/// Waits until the Node is Ready (the kubelet registered it and the CNI configuration is
/// loaded), failing early with the log of a process that exited.
async fn wait_ready(tb: &Testbed, dir: &Path, procs: &mut [Proc]) -> Result<(), Error> {
    let nodes: Api<NodeObject> = Api::all(tb.client().await);
    let deadline = tokio::time::Instant::now() + Duration::from_secs(120);
    loop {
        for p in procs.iter_mut() {
            if let Some(status) = p.exited() {
                let log: PathBuf = match p.name.as_str() {
                    "node-containerd" => dir.join("containerd.log"),
                    "node-kubelet" => dir.join("kubelet.log"),
                    "node-kube-proxy" => dir.join("kube-proxy.log"),
                    _ => tb.dir.join("kube-scheduler.log"),
                };
                return Err(crate::process::exited_error(&p.name, status, &log));
            }
        }
        if let Ok(Some(n)) = nodes.get_opt(NAME).await
            && n.status
                .as_ref()
                .and_then(|s| s.conditions.as_ref())
                .is_some_and(|cs| cs.iter().any(|c| c.type_ == "Ready" && c.status == "True"))
        {
            return Ok(());
        }
        if tokio::time::Instant::now() > deadline {
            let log = dir.join("kubelet.log");
            return Err(Error::Start(format!(
                "node {NAME} not Ready in 120 s; {}:\n{}",
                log.display(),
                crate::log_tail(&log)
            )));
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}
