//! Seed 004's own path on the real controllers: a KubeadmControlPlane on BYOH hosts, as NVIDIA
//! Base Command Manager runs its clusters. CAPI v1.14's real KubeadmControlPlane manager
//! (`testbed::start_kcp`, for this test's namespace) drives control-plane hosts whose SIMULATED
//! `kubeadm init` and `kubeadm join --control-plane` start a real etcd member, kube-apiserver,
//! kube-controller-manager and kube-scheduler per host (`testbed::agent`), behind a SIMULATED
//! VIP (kube-vip's role) on 127.0.0.0/8; its etcd and API checks reach them through the
//! API server's `pods/portforward` and the hosts' SIMULATED kubelet API. Workers join that
//! workload cluster for real (discovery, TLS bootstrap, Node). Nothing is played.
//!
//! Then `kubectl capi upgrade` to a release two minors on: the real controller rolls every
//! control-plane machine through the spare host, one minor at a time. Each released host keeps
//! its control plane (BYOH v0.5.0 does not reset a host whose agent runs with
//! `--skip-installation`) until its next join fails kubeadm's preflight and the agent resets it.
//! Then a control-plane host loses power (its agent, kubelet and control plane stopped): a
//! MachineHealthCheck and the real controller's remediation replace its machine.

use crate::common::*;

/// Kubernetes releases whose binaries the testbed has (`testbed/build-bins.sh`).
const FROM: &str = "v1.35.4";
const TO: &str = "v1.37.2";

fn kct_ar() -> ApiResource {
    ar(
        "bootstrap.cluster.x-k8s.io",
        "v1beta2",
        "KubeadmConfigTemplate",
        "kubeadmconfigtemplates",
    )
}

/// A control-plane endpoint of this test's own on the loopback network (the SIMULATED VIP
/// listens there once the first control plane is up).
fn vip(ns: &str) -> String {
    let h = ns
        .bytes()
        .fold(7u32, |a, b| a.wrapping_mul(31).wrapping_add(b.into()));
    format!(
        "127.{}.{}.{}",
        100 + h % 100,
        (h >> 8) % 250 + 1,
        (h >> 16) % 250 + 2
    )
}

/// Cluster `name`: a ByoCluster at `endpoint`, a KubeadmControlPlane of one replica and a
/// MachineDeployment of `workers`, each on this test's hosts by role, as BYOH's templates do.
async fn make(s: &Story, name: &str, endpoint: &str, workers: i64) {
    let infra = "infrastructure.cluster.x-k8s.io";
    let ns = &s.ns;
    let template = |tname: String, role: &str| {
        json!({"apiVersion": format!("{infra}/v1beta1"), "kind": "ByoMachineTemplate",
               "metadata": {"name": tname},
               "spec": {"template": {"spec": {"selector": {"matchLabels": {"pool": ns, "role": role}}}}}})
    };
    let registration = json!({"nodeRegistration": {
        "criSocket": "/var/run/containerd/containerd.sock",
        "ignorePreflightErrors": ["Swap", "DirAvailable--etc-kubernetes-manifests", "FileAvailable--etc-kubernetes-kubelet.conf"]}});
    let objects = [
        (
            ar(infra, "v1beta1", "ByoCluster", "byoclusters"),
            json!({"apiVersion": format!("{infra}/v1beta1"), "kind": "ByoCluster",
                   "metadata": {"name": name},
                   "spec": {"controlPlaneEndpoint": {"host": endpoint, "port": 6443}}}),
        ),
        (
            bmt_ar(),
            template(format!("{name}-control-plane"), "control-plane"),
        ),
        (bmt_ar(), template(format!("{name}-md-0"), "worker")),
        (
            kcp_ar(),
            json!({"apiVersion": "controlplane.cluster.x-k8s.io/v1beta2", "kind": "KubeadmControlPlane",
                   "metadata": {"name": format!("{name}-control-plane")},
                   "spec": {"replicas": 1, "version": FROM,
                     // Its Machines carry the watch filter too, or their changes would not
                     // reach the controller (its watches filter by it).
                     "machineTemplate": {"metadata": {"labels": {"cluster.x-k8s.io/watch-filter": ns}},
                                         "spec": {"infrastructureRef": {"apiGroup": infra, "kind": "ByoMachineTemplate", "name": format!("{name}-control-plane")}}},
                     "kubeadmConfigSpec": {
                       "clusterConfiguration": {"apiServer": {"certSANs": ["localhost", "127.0.0.1"]},
                         // A Node that stops reporting is Unknown after 30 s, not 50 s.
                         "controllerManager": {"extraArgs": [{"name": "node-monitor-grace-period", "value": "30s"}]}},
                       "initConfiguration": registration, "joinConfiguration": registration}}}),
        ),
        (
            kct_ar(),
            json!({"apiVersion": "bootstrap.cluster.x-k8s.io/v1beta2", "kind": "KubeadmConfigTemplate",
                   "metadata": {"name": format!("{name}-md-0")},
                   "spec": {"template": {"spec": {"joinConfiguration": registration}}}}),
        ),
        (
            cluster_ar(),
            json!({"apiVersion": "cluster.x-k8s.io/v1beta2", "kind": "Cluster",
                   "metadata": {"name": name},
                   "spec": {"clusterNetwork": {"pods": {"cidrBlocks": ["192.168.0.0/16"]},
                                               "services": {"cidrBlocks": ["10.96.0.0/12"]}},
                     "controlPlaneRef": {"apiGroup": "controlplane.cluster.x-k8s.io", "kind": "KubeadmControlPlane", "name": format!("{name}-control-plane")},
                     "infrastructureRef": {"apiGroup": infra, "kind": "ByoCluster", "name": name}}}),
        ),
        (
            md_ar(),
            json!({"apiVersion": "cluster.x-k8s.io/v1beta2", "kind": "MachineDeployment",
                   "metadata": {"name": format!("{name}-md-0")},
                   "spec": {"clusterName": name, "replicas": workers,
                     "template": {"spec": {"clusterName": name, "version": FROM,
                       "bootstrap": {"configRef": {"apiGroup": "bootstrap.cluster.x-k8s.io", "kind": "KubeadmConfigTemplate", "name": format!("{name}-md-0")}},
                       "infrastructureRef": {"apiGroup": infra, "kind": "ByoMachineTemplate", "name": format!("{name}-md-0")}}}}}),
        ),
    ];
    for (r, mut obj) in objects {
        // The KubeadmControlPlane manager of this test reconciles what carries it.
        obj["metadata"]["labels"] = json!({"cluster.x-k8s.io/watch-filter": ns});
        apply(&s.client, ns, r, obj).await;
    }
}

/// The workload cluster's admin client, from the kubeconfig Secret the real controller wrote.
async fn workload(s: &Story, name: &str) -> Client {
    use base64::Engine;
    let secret = api(&s.client, &s.ns, &ar("", "v1", "Secret", "secrets"))
        .get(&format!("{name}-kubeconfig"))
        .await
        .unwrap();
    let b64 = secret.data["data"]["value"].as_str().unwrap();
    let text = base64::engine::general_purpose::STANDARD
        .decode(b64)
        .unwrap();
    let kc = kube::config::Kubeconfig::from_yaml(std::str::from_utf8(&text).unwrap()).unwrap();
    let config = kube::Config::from_custom_kubeconfig(kc, &Default::default())
        .await
        .unwrap();
    Client::try_from(config).unwrap()
}

/// A network add-on's DaemonSet (what makes a kubelet report its network ready; its pods do
/// not run here).
async fn install_cni(c: &Client) {
    let ds = json!({"apiVersion": "apps/v1", "kind": "DaemonSet",
        "metadata": {"name": "cni", "namespace": "kube-system"},
        "spec": {"selector": {"matchLabels": {"app": "cni"}},
          "template": {"metadata": {"labels": {"app": "cni"}},
            "spec": {"tolerations": [{"operator": "Exists"}],
              "containers": [{"name": "cni", "image": "registry.k8s.io/pause:3.10"}],
              "volumes": [{"name": "net", "hostPath": {"path": "/etc/cni/net.d"}}]}}}});
    Api::<k8s_openapi::api::apps::v1::DaemonSet>::namespaced(c.clone(), "kube-system")
        .patch("cni", &PatchParams::apply("day2-test"), &Patch::Apply(&ds))
        .await
        .unwrap();
}

fn condition(o: &DynamicObject, t: &str) -> Option<String> {
    o.data["status"]["conditions"]
        .as_array()?
        .iter()
        .find(|c| c["type"] == t)
        .and_then(|c| c["status"].as_str().map(String::from))
}

/// The KubeadmControlPlane as the real controller reports it: (version, ready replicas, up to
/// date replicas, Available, EtcdClusterHealthy).
async fn kcp_status(s: &Story, name: &str) -> (String, i64, i64, String, String) {
    let k = s.get(&kcp_ar(), &format!("{name}-control-plane")).await;
    let st = &k.data["status"];
    (
        st["version"].as_str().unwrap_or_default().into(),
        st["readyReplicas"].as_i64().unwrap_or(0),
        st["upToDateReplicas"].as_i64().unwrap_or(0),
        condition(&k, "Available").unwrap_or_default(),
        condition(&k, "EtcdClusterHealthy").unwrap_or_default(),
    )
}

/// Every control-plane Node's name and kubelet version.
async fn control_plane_nodes(c: &Client) -> Vec<(String, String)> {
    let nodes: Api<k8s_openapi::api::core::v1::Node> = Api::all(c.clone());
    let list = nodes
        .list(&ListParams::default().labels("node-role.kubernetes.io/control-plane"))
        .await
        .map(|l| l.items)
        .unwrap_or_default();
    let mut out: Vec<(String, String)> = list
        .into_iter()
        .map(|n| {
            let v = n
                .status
                .and_then(|s| s.node_info)
                .map(|i| i.kubelet_version)
                .unwrap_or_default();
            (n.metadata.name.unwrap_or_default(), v)
        })
        .collect();
    out.sort();
    out
}

/// What the controllers wrote, for a failure message: the KubeadmControlPlane's status and
/// each Machine's phase and false conditions.
fn snapshot(s: &Story, name: &str, kcp: &testbed::KcpManager) -> String {
    tokio::task::block_in_place(|| {
        tokio::runtime::Handle::current().block_on(async {
            let k = s.get(&kcp_ar(), &format!("{name}-control-plane")).await;
            let mut text = format!("KubeadmControlPlane status: {}\n", k.data["status"]);
            for m in s.api(&machine_ar()).list(&ListParams::default()).await.unwrap().items {
                let falses: Vec<String> = m.data["status"]["conditions"]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .filter(|c| c["status"] != "True")
                    .map(|c| format!("{}={} {}", c["type"], c["status"], c["message"]))
                    .collect();
                text.push_str(&format!(
                    "Machine {} {}: {}\n",
                    m.name_any(),
                    m.data["status"]["phase"],
                    falses.join("; ")
                ));
            }
            for h in s.api(&host_ar()).list(&ListParams::default()).await.unwrap().items {
                let conds: Vec<String> = h.data["status"]["conditions"]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .map(|c| format!("{}={} {}", c["type"], c["status"], c["reason"]))
                    .collect();
                text.push_str(&format!(
                    "ByoHost {} machine {}: {}\n",
                    h.name_any(),
                    h.data["status"]["machineRef"]["name"],
                    conds.join("; ")
                ));
            }
            let bootstrap =
                std::fs::read_to_string(s.tb.dir.join("kubeadm-bootstrap-manager.log"))
                    .unwrap_or_default();
            let errors: Vec<&str> = bootstrap.lines().filter(|l| l.starts_with('E')).collect();
            for h in s.api(&host_ar()).list(&ListParams::default()).await.unwrap().items {
                let dir = s.tb.dir.join("hosts").join(h.name_any()).join("control-plane");
                for c in ["etcd", "kube-apiserver"] {
                    let t = std::fs::read_to_string(dir.join(format!("{c}.log"))).unwrap_or_default();
                    let lines: Vec<&str> = t.lines().collect();
                    text.push_str(&format!(
                        "--- {} {c} ---\n{}\n",
                        h.name_any(),
                        lines[lines.len().saturating_sub(8)..].join("\n")
                    ));
                }
            }
            format!(
                "{text}--- kubeadm bootstrap manager's errors ---\n{}\n--- KubeadmControlPlane manager ---\n{}",
                errors[errors.len().saturating_sub(10)..].join("\n"),
                kcp.log_tail()
            )
        })
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubeadm_control_plane_on_byoh_hosts_initializes_scales_upgrades_and_remediates() {
    let s = Story::start("kcp").await;
    let ns = s.ns.clone();
    let kcp = testbed::start_kcp(s.tb, &s.client, &ns).await.unwrap();
    // 3 control-plane hosts; 1 worker.
    let cps = pool(&ns, "c", 4, "control-plane");
    let ws = pool(&ns, "w", 2, "worker");
    let cp_agents = onboard_as(s.tb, &cps, testbed::agent::Kubelet::Joins);
    let w_agents = onboard_as(s.tb, &ws, testbed::agent::Kubelet::Joins);
    registered(&s.client, &cps, &cp_agents).await;
    registered(&s.client, &ws, &w_agents).await;
    let logs = || snapshot(&s, "kc", &kcp);

    let endpoint = vip(&ns);
    make(&s, "kc", &endpoint, 1).await;
    testbed::fixtures::poll::wait_for(
        "the real KubeadmControlPlane controller to initialize the control plane on a host",
        Duration::from_secs(240),
        logs,
        || async {
            let (v, _, _, available, etcd) = kcp_status(&s, "kc").await;
            (v == FROM && available == "True" && etcd == "True").then_some(())
        },
    )
    .await;
    let wl = workload(&s, "kc").await;
    assert_eq!(
        wl.apiserver_version().await.unwrap().git_version,
        FROM,
        "the workload cluster answers through the VIP {endpoint}:6443"
    );
    // The Nodes are Ready once a network add-on is there; then the replica is ready.
    install_cni(&wl).await;
    testbed::fixtures::poll::wait_for(
        "the control-plane replica ready",
        Duration::from_secs(120),
        logs,
        || async { (kcp_status(&s, "kc").await.1 == 1).then_some(()) },
    )
    .await;
    s.until_ready("kc-md-0", 1).await;

    // Scale the control plane to 3: each new host joins etcd as a member (kubeadm join
    // --control-plane), and the controller's etcd check sees three healthy members.
    let o = s.ok(&words("scale kc --control-plane 3 --wait --timeout 300s"));
    assert_contains(
        &out(&o),
        "kubeadmcontrolplane.controlplane.cluster.x-k8s.io/kc-control-plane scaled from 1 to 3",
    );
    testbed::fixtures::poll::wait_for(
        "3 ready control-plane replicas with a healthy etcd",
        Duration::from_secs(240),
        logs,
        || async {
            let (_, ready, _, available, etcd) = kcp_status(&s, "kc").await;
            (ready == 3 && available == "True" && etcd == "True").then_some(())
        },
    )
    .await;
    assert_eq!(control_plane_nodes(&wl).await.len(), 3);

    // What the plugin reads back from what the real controllers wrote.
    let d = out(&s.ok(&["describe", "kc"]));
    let line = |what: &str| {
        d.lines()
            .find(|l| l.contains(what))
            .unwrap_or_else(|| panic!("no {what:?} in:\n{d}"))
            .to_string()
    };
    let kcp_line = line(&format!(
        "KubeadmControlPlane {ns}/kc-control-plane, {FROM}"
    ));
    assert!(
        kcp_line.contains("3/3") && kcp_line.contains("Available"),
        "{d}"
    );
    let machines = line("3 Machines...");
    let on_hosts = (1..=4)
        .filter(|i| machines.contains(&format!("{ns}-c0{i}")))
        .count();
    assert_eq!(on_hosts, 3, "{machines}");

    // Upgrade: the real controller rolls each control-plane machine through the spare host.
    // Two minors: CAPI's kubeadm upgrades one minor at a time, so the plugin steps through
    // v1.36 (KCP, then the workers) before v1.37.
    let o = s.run(&words(&format!(
        "upgrade kc --to {TO} --yes --client-side --timeout 600s"
    )));
    assert!(
        o.status.success(),
        "{}\n{}",
        testbed::fixtures::run::stderr(&o),
        logs()
    );
    let e = out(&o);
    for step in [
        "KubeadmControlPlane kc-control-plane to v1.36.3: done",
        "MachineDeployment kc-md-0 to v1.36.3: done",
        &format!("KubeadmControlPlane kc-control-plane to {TO}: done"),
        &format!("MachineDeployment kc-md-0 to {TO}: done"),
        &format!("cluster kc upgraded to {TO} in "),
    ] {
        assert_contains(&e, step);
    }
    testbed::fixtures::poll::wait_for(
        &format!("3 ready control-plane replicas at {TO} with a healthy etcd"),
        Duration::from_secs(120),
        logs,
        || async {
            let (v, ready, up, _, etcd) = kcp_status(&s, "kc").await;
            (v == TO && ready == 3 && up == 3 && etcd == "True").then_some(())
        },
    )
    .await;
    // Every control plane is of the new release; the old hosts' Nodes are gone.
    let wl = workload(&s, "kc").await;
    assert_eq!(wl.apiserver_version().await.unwrap().git_version, TO);
    let nodes = control_plane_nodes(&wl).await;
    assert_eq!(nodes.len(), 3, "{nodes:?}");
    assert!(nodes.iter().all(|(_, v)| v == TO), "{nodes:?}");

    // A control-plane host loses power: a MachineHealthCheck finds its Node unreachable and the
    // real controller remediates it (its etcd member removed, its machine replaced on the spare
    // host); its power back, BYOH's agent releases the host.
    let mhc = json!({"apiVersion": "cluster.x-k8s.io/v1beta2", "kind": "MachineHealthCheck",
        "metadata": {"name": "kc-control-plane", "labels": {"cluster.x-k8s.io/watch-filter": ns}},
        "spec": {"clusterName": "kc",
          "selector": {"matchLabels": {"cluster.x-k8s.io/control-plane": ""}},
          "checks": {"unhealthyNodeConditions": [
            {"type": "Ready", "status": "Unknown", "timeoutSeconds": 10},
            {"type": "Ready", "status": "False", "timeoutSeconds": 10}]}}});
    let mhc_ar = ar(
        "cluster.x-k8s.io",
        "v1beta2",
        "MachineHealthCheck",
        "machinehealthchecks",
    );
    apply(&s.client, &ns, mhc_ar, mhc).await;
    let cp_nodes = || async {
        let list = s
            .api(&machine_ar())
            .list(&ListParams::default().labels("cluster.x-k8s.io/control-plane"))
            .await
            .unwrap();
        let mut nodes: Vec<String> = list
            .items
            .iter()
            .filter_map(|m| {
                m.data["status"]["nodeRef"]["name"]
                    .as_str()
                    .map(String::from)
            })
            .collect();
        nodes.sort();
        nodes
    };
    let before = cp_nodes().await;
    let victim = before[0].clone();
    let agent = (1..=4)
        .position(|i| victim == format!("{ns}-c0{i}"))
        .map(|i| &cp_agents[i])
        .unwrap_or_else(|| panic!("{victim} is none of this test's hosts"));
    agent.power(false);
    testbed::fixtures::poll::wait_for(
        &format!("the machine of powered-off {victim} remediated and replaced"),
        Duration::from_secs(300),
        logs,
        || async {
            let nodes = cp_nodes().await;
            let (_, ready, _, _, etcd) = kcp_status(&s, "kc").await;
            (nodes.len() == 3 && !nodes.contains(&victim) && ready == 3 && etcd == "True")
                .then_some(())
        },
    )
    .await;
    agent.power(true);

    // Delete: the hosts are released and their control planes stopped (kubeadm reset).
    s.ok(&words("delete kc --yes --wait --timeout 300s"));
    eventually(
        "every host of the cluster released",
        Duration::from_secs(120),
        async || s.claimed().await.is_empty(),
    )
    .await;
    kcp.stop().await;
}
