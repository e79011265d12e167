//! ClusterClass clusters end to end: `generate clusterclass --apply` writes a class
//! whose control plane is a KamajiControlPlaneTemplate, `create --class` a topology Cluster of
//! it, and the real CAPI v1.14 core manager's topology controller (ClusterTopology=true) makes
//! the KamajiControlPlane and the MachineDeployment; our reconciler and the real Kamaji v1.0.0
//! run the tenant (real kube-apiserver, controller-manager and scheduler processes under the
//! testbed's SIMULATED kubelet). `upgrade` (one minor) and `scale` go through `spec.topology`
//! and the change shows on the objects the topology controller manages. Plus the bad-input
//! lines of `create --class`.

use std::time::{Duration, Instant};

use crate::common::*;
use kube::Client;
use serde_json::Value;
use testbed::fixtures::reconciler::assert_ran;
use testbed::fixtures::run::{assert_contains, words};

const CLASS: &str = "kamaji-byoh";

/// The MachineDeployments the topology controller made for `cluster`.
async fn deployments(client: &Client, ns: &str, cluster: &str) -> Vec<Value> {
    let mds = api(
        client,
        ns,
        &ar("cluster.x-k8s.io", "v1beta2", "MachineDeployment"),
    );
    let lp = kube::api::ListParams::default()
        .labels(&format!("cluster.x-k8s.io/cluster-name={cluster}"));
    list(&mds, &lp).await
}

/// `generate clusterclass --apply`, then waits until CAPI's ClusterClass controller has
/// reconciled the class (the Cluster webhook refuses a class it has not seen yet).
async fn class(tb: &testbed::Testbed, client: &Client, ns: &str) {
    // Workers take only hosts labelled for this test: the BYOH controller picks hosts
    // cluster-wide, and the other tests of this binary register theirs on the same testbed.
    let selector = format!("class-test={ns}");
    let out = kamaji(
        tb,
        ns,
        &[
            "generate",
            "clusterclass",
            CLASS,
            "--infrastructure",
            "byoh",
            "--host-selector",
            &selector,
            "--preinstalled-hosts",
            "--service-type",
            "ClusterIP",
            "--addons",
            "none",
            "--datastore",
            "default",
            "--apply",
        ],
    );
    let text = ok(&out);
    assert!(
        text.contains(&format!(
            "clusterclass.cluster.x-k8s.io/{CLASS} serverside-applied"
        )) && text.contains(&format!(
            "kamajicontrolplanetemplate.controlplane.cluster.x-k8s.io/{CLASS} serverside-applied"
        )),
        "{text}"
    );
    let cc_ar = ar("cluster.x-k8s.io", "v1beta2", "ClusterClass");
    wait_until(
        "CAPI's ClusterClass controller to reconcile the class",
        Duration::from_secs(120),
        || async {
            let cc = get(client, ns, &cc_ar, CLASS).await.unwrap_or_default();
            let seen = cc["status"]["observedGeneration"] == cc["metadata"]["generation"];
            let vars = cc["status"]["variables"]
                .as_array()
                .is_some_and(|v| !v.is_empty());
            if seen && vars {
                Ok(())
            } else {
                Err(cc["status"].to_string())
            }
        },
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_class_cluster_gets_its_objects_from_the_topology_and_upgrades_and_scales_through_it() {
    let (tb, client, ns, rec) = live_namespace("cc-life").await;
    class(tb, &client, &ns).await;

    let port = free_port().to_string();
    let started = Instant::now();
    let out = kamaji(
        tb,
        &ns,
        &[
            "create",
            "c1",
            "--class",
            CLASS,
            "--kubernetes-version",
            "v1.35.4",
            "--replicas",
            "1",
            "--workers",
            "0",
            "--service-address",
            "127.0.0.1",
            "--port",
            &port,
            "--wait",
            "--timeout",
            "300s",
        ],
    );
    assert_ran(&out, "create --class", &rec);
    eprintln!("create --class --wait took {:?}", started.elapsed());
    assert_contains(
        &stdout(&out),
        "cluster.cluster.x-k8s.io/c1 serverside-applied",
    );
    assert_contains(&stderr(&out), "cluster c1 is ready: control plane v1.35.4");

    // The topology controller made the KamajiControlPlane (named after the cluster by the
    // class's naming template), with the version, replicas and address of the topology.
    let kcp = get(&client, &ns, &kcp_ar(), "c1").await.unwrap();
    assert_eq!(
        kcp["metadata"]["labels"]["topology.cluster.x-k8s.io/owned"], "",
        "{}",
        kcp["metadata"]
    );
    assert_eq!(kcp["spec"]["version"], "v1.35.4");
    assert_eq!(kcp["spec"]["replicas"], 1);
    assert_eq!(kcp["spec"]["network"]["serviceAddress"], "127.0.0.1");
    assert_eq!(kcp["spec"]["dataStoreName"], "default");
    let cluster = get(&client, &ns, &cluster_ar(), "c1").await.unwrap();
    assert_eq!(cluster["spec"]["controlPlaneRef"]["name"], "c1");
    assert_eq!(
        cluster["spec"]["controlPlaneEndpoint"]["port"]
            .as_i64()
            .unwrap()
            .to_string(),
        port
    );
    let mds = deployments(&client, &ns, "c1").await;
    assert_eq!(mds.len(), 1, "{mds:?}");
    let md = &mds[0];
    assert_eq!(
        md["metadata"]["labels"]["topology.cluster.x-k8s.io/deployment-name"],
        "md-0"
    );
    assert_eq!(md["spec"]["replicas"], 0);
    assert_eq!(md["spec"]["template"]["spec"]["version"], "v1.35.4");

    // --control-plane-only does not fit a topology: one usage line, nothing changed.
    let line = fails(
        &kamaji(
            tb,
            &ns,
            &words("upgrade c1 --to v1.36.3 --control-plane-only"),
        ),
        2,
    );
    assert_contains(&line, "uses a ClusterClass");

    // upgrade one minor: the topology's version, which the topology controller carries to the
    // KamajiControlPlane (Kamaji runs it) and then to the MachineDeployment.
    let out = kamaji(
        tb,
        &ns,
        &["upgrade", "c1", "--to", "v1.36.3", "--timeout", "300s"],
    );
    assert_ran(&out, "upgrade", &rec);
    let err = stderr(&out);
    assert!(
        err.contains("cluster.cluster.x-k8s.io/c1 topology version set to v1.36.3")
            && err.contains("runs v1.36.3"),
        "{err}"
    );
    let cluster = get(&client, &ns, &cluster_ar(), "c1").await.unwrap();
    assert_eq!(cluster["spec"]["topology"]["version"], "v1.36.3");
    let kcp = get(&client, &ns, &kcp_ar(), "c1").await.unwrap();
    assert_eq!(kcp["spec"]["version"], "v1.36.3");
    assert_eq!(kcp["status"]["version"], "v1.36.3");
    wait_until(
        "the topology controller to move the MachineDeployment to v1.36.3",
        Duration::from_secs(180),
        || async {
            let mds = deployments(&client, &ns, "c1").await;
            let v = mds
                .first()
                .map(|m| m["spec"]["template"]["spec"]["version"].clone())
                .unwrap_or_default();
            if v == "v1.36.3" {
                Ok(())
            } else {
                Err(v.to_string())
            }
        },
    )
    .await;

    // scale: the topology's replicas, carried to the managed objects. Were the objects patched
    // directly, the topology controller would put its own values back.
    let out = ok(&kamaji(
        tb,
        &ns,
        &["scale", "c1", "--replicas", "0", "--workers", "2"],
    ));
    assert!(
        out.contains(
            "cluster.cluster.x-k8s.io/c1 topology controlPlane scaled from 1 to 0 (asleep)"
        ) && out.contains("topology machineDeployment md-0 scaled from 0 to 2"),
        "{out}"
    );
    let cluster = get(&client, &ns, &cluster_ar(), "c1").await.unwrap();
    assert_eq!(cluster["spec"]["topology"]["controlPlane"]["replicas"], 0);
    assert_eq!(
        cluster["spec"]["topology"]["workers"]["machineDeployments"][0]["replicas"],
        2
    );
    wait_until(
        "the topology controller to scale the KamajiControlPlane and MachineDeployment",
        Duration::from_secs(120),
        || async {
            let kcp = get(&client, &ns, &kcp_ar(), "c1").await.unwrap_or_default();
            let mds = deployments(&client, &ns, "c1").await;
            let md = mds
                .first()
                .map(|m| m["spec"]["replicas"].clone())
                .unwrap_or_default();
            if kcp["spec"]["replicas"] == 0 && md == 2 {
                Ok(())
            } else {
                Err(format!("KCP {}, MD {md}", kcp["spec"]["replicas"]))
            }
        },
    )
    .await;
    // The tenant goes to sleep: Kamaji scaled its Deployment down.
    let tcp_ar = tcp_ar();
    wait_until(
        "Kamaji to scale the tenant down",
        Duration::from_secs(120),
        || async {
            let tcp = get(&client, &ns, &tcp_ar, "c1").await.unwrap_or_default();
            if tcp["spec"]["controlPlane"]["deployment"]["replicas"] == 0 {
                Ok(())
            } else {
                Err(tcp["spec"]["controlPlane"]["deployment"].to_string())
            }
        },
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn create_class_refuses_a_missing_class_and_flags_the_class_decides() {
    let tb = testbed_real().await;
    let (client, ns) = tb.namespace("cc-bad").await;

    // A missing class: one line naming it, nothing created.
    let create = |class, extra: &[&str]| {
        let args = [
            "create",
            "c2",
            "--class",
            class,
            "--kubernetes-version",
            "v1.35.4",
        ];
        kamaji(tb, &ns, &[&args[..], extra].concat())
    };
    let line = fails(&create("nope", &[]), 1);
    assert!(
        line.contains("ClusterClass \"nope\" not found in namespace")
            && line.contains("nothing was created"),
        "{line}"
    );
    assert!(get(&client, &ns, &cluster_ar(), "c2").await.is_none());

    // Flags the class decides: a usage error before anything is read.
    for (flag, value) in [
        ("--infrastructure", "byoh"),
        ("--host-selector", "a=b"),
        ("--datastore", "default"),
    ] {
        let line = fails(&create(CLASS, &[flag, value]), 2);
        assert_contains(&line, &format!("{flag} cannot be used with --class"));
    }
    // No version: the topology needs one.
    let line = fails(&kamaji(tb, &ns, &["create", "c2", "--class", CLASS]), 2);
    assert_contains(&line, "--kubernetes-version is required");
    assert!(get(&client, &ns, &cluster_ar(), "c2").await.is_none());

    // generate refuses an infrastructure a class cannot have.
    let line = fails(
        &kamaji(
            tb,
            &ns,
            &words("generate clusterclass x --infrastructure none"),
        ),
        2,
    );
    assert_contains(&line, "needs an infrastructure");
}
