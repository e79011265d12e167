//! Faults: `kubectl capi upgrade --wait` rides out a restart of the API server and
//! follows the upgrade to its end. This binary has a testbed of its own: restarting its API
//! server would disturb every other test sharing one (the day2 tests share the real
//! controllers' testbed, the fleet tests another).
//!
//! No reconciler runs: the test writes the ClusterUpgrade's status and the control plane's as
//! kamaji-reconciler and the KubeadmControlPlane provider would (SIMULATED), so the CLI's wait
//! is the only thing under test.

use std::time::Duration;

use kube::Client;
use kube::api::{Api, DynamicObject, Patch, PatchParams};
use kube::discovery::ApiResource;
use serde_json::{Value, json};

const BIN: &str = env!("CARGO_BIN_EXE_kubectl-capi");

fn cu_ar() -> ApiResource {
    testbed::api_resource(
        "ops.capi-kamaji.io",
        "v1alpha1",
        "ClusterUpgrade",
        "clusterupgrades",
    )
}

fn kcp_ar() -> ApiResource {
    testbed::api_resource(
        "controlplane.cluster.x-k8s.io",
        "v1beta2",
        "KubeadmControlPlane",
        "kubeadmcontrolplanes",
    )
}

fn cluster_ar() -> ApiResource {
    testbed::api_resource("cluster.x-k8s.io", "v1beta2", "Cluster", "clusters")
}

fn api(c: &Client, ns: &str, r: &ApiResource) -> Api<DynamicObject> {
    Api::namespaced_with(c.clone(), ns, r)
}

use testbed::fixtures::poll::eventually_or as eventually;
use testbed::fixtures::run::assert_lacks;
use testbed::fixtures::run::{self, Background};

/// Our CRDs (`kubectl kamaji install` applies them), served before the test goes on.
async fn install_ops_crds(c: &Client) {
    testbed::fixtures::crds::apply_and_wait(c, &kcore::ops::crds(), "restart-test").await;
}

/// Cluster `rs` with a KubeadmControlPlane at v1.33.4, one replica ready. Its machine template
/// is not there, so no BYOH spare-host preflight applies.
async fn cluster(c: &Client, ns: &str) {
    let apply = |r: ApiResource, body: Value| async move {
        let name = body["metadata"]["name"].as_str().unwrap().to_string();
        api(c, ns, &r)
            .patch(
                &name,
                &PatchParams::apply("restart-test").force(),
                &Patch::Apply(&body),
            )
            .await
            .unwrap();
    };
    let infra = "infrastructure.cluster.x-k8s.io";
    apply(
        kcp_ar(),
        json!({"apiVersion": "controlplane.cluster.x-k8s.io/v1beta2", "kind": "KubeadmControlPlane",
               "metadata": {"name": "rs-cp"},
               "spec": {"replicas": 1, "version": "v1.33.4",
                 "machineTemplate": {"spec": {"infrastructureRef": {"apiGroup": infra, "kind": "ByoMachineTemplate", "name": "rs-cp"}}},
                 "kubeadmConfigSpec": {"clusterConfiguration": {"etcd": {"local": {"dataDir": "/var/lib/etcd"}}}}}}),
    )
    .await;
    apply(
        cluster_ar(),
        json!({"apiVersion": "cluster.x-k8s.io/v1beta2", "kind": "Cluster",
               "metadata": {"name": "rs"},
               "spec": {"controlPlaneRef": {"apiGroup": "controlplane.cluster.x-k8s.io", "kind": "KubeadmControlPlane", "name": "rs-cp"}}}),
    )
    .await;
    control_plane_status(c, ns, "v1.33.4", 1).await;
}

/// Writes the control plane's status as its provider would: the version it runs and how many
/// of its one replica are on the new spec.
async fn control_plane_status(c: &Client, ns: &str, version: &str, up_to_date: i64) {
    api(c, ns, &kcp_ar())
        .patch_status(
            "rs-cp",
            &PatchParams::default(),
            &Patch::Merge(json!({"status": {"version": version, "replicas": 1,
                "readyReplicas": 1, "availableReplicas": 1, "upToDateReplicas": up_to_date,
                "initialization": {"controlPlaneInitialized": true}}})),
        )
        .await
        .unwrap();
}

/// Writes the ClusterUpgrade's status as kamaji-reconciler would, for its current generation.
async fn upgrade_status(c: &Client, ns: &str, status: Value) {
    let cus = api(c, ns, &cu_ar());
    let generation = cus.get("rs").await.unwrap().metadata.generation;
    let mut status = status;
    status["observedGeneration"] = json!(generation);
    cus.patch_status(
        "rs",
        &PatchParams::default(),
        &Patch::Merge(json!({ "status": status })),
    )
    .await
    .unwrap();
}

fn step_plan() -> Value {
    json!([{"number": 1, "role": "ControlPlane", "target": "KubeadmControlPlane/rs-cp",
        "fromVersion": "v1.33.4", "toVersion": "v1.34.0",
        "waitFor": "KubeadmControlPlane/rs-cp runs v1.34.0 on every machine",
        "patch": {"apiVersion": "controlplane.cluster.x-k8s.io/v1beta2",
            "kind": "KubeadmControlPlane", "name": "rs-cp", "jsonPatch": []}}])
}

/// With the API server killed and restarted, `upgrade --wait` exited 1 within a
/// second despite its timeout. Now it says once that the server is unreachable and once that
/// it is back, follows the upgrade to its end (exit 0) and closes with one line; its progress
/// (stderr is not a terminal) is a line per change, naming the step under way, what is left of
/// it and the version the cluster runs.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn upgrade_wait_survives_an_api_server_restart() {
    let tb = testbed::shared();
    let (c, ns) = tb.namespace("capi-restart").await;
    install_ops_crds(&c).await;
    cluster(&c, &ns).await;
    let upgrade = [
        "upgrade",
        "rs",
        "--to",
        "v1.34.0",
        "--yes",
        "--wait",
        "--timeout",
        "180s",
    ];
    let mut cli = Background::plugin_in(BIN, &tb.kubeconfig, &ns, &upgrade);
    let cus = api(&c, &ns, &cu_ar());
    let output = cli.output_fn();
    let made = || async { cus.get_opt("rs").await.unwrap().is_some() };
    eventually("the ClusterUpgrade", Duration::from_secs(60), &output, made).await;

    tb.restart_apiserver_under(cli.child.id(), &output)
        .await
        .unwrap();
    // The restarted server is a new connection for this client too.
    let c = tb.client().await;
    assert!(
        cli.running(),
        "the wait ended with the API server's restart:\n{}",
        output()
    );

    // The reconciler starts the step; the control plane rolls its one machine.
    control_plane_status(&c, &ns, "v1.33.4", 0).await;
    upgrade_status(
        &c,
        &ns,
        json!({"phase": "Running", "progress": "0/1", "fromVersion": "v1.33.4",
            "path": ["v1.34.0"], "plan": step_plan(), "currentSteps": [1],
            "steps": [{"number": 1, "phase": "Running"}],
            "message": "step 1 (KubeadmControlPlane/rs-cp -> v1.34.0): runs v1.33.4"}),
    )
    .await;
    let want = "step 1/1: KubeadmControlPlane rs-cp to v1.34.0: 1 of 1 machine to replace; the cluster runs v1.33.4";
    eventually(
        "the step's progress line",
        Duration::from_secs(60),
        &output,
        || async { cli.stderr().contains(want) },
    )
    .await;
    control_plane_status(&c, &ns, "v1.34.0", 1).await;
    upgrade_status(
        &c,
        &ns,
        json!({"phase": "Succeeded", "progress": "1/1", "currentSteps": null,
            "steps": [{"number": 1, "phase": "Succeeded"}], "message": "upgraded to v1.34.0"}),
    )
    .await;
    let status = cli.exit(Duration::from_secs(60)).await;
    let (out, err) = (cli.stdout(), cli.stderr());
    assert!(status.success(), "{}", output());
    run::assert_one_outage_reported(&err);
    // One line per change, no step counted from 0, one closing line.
    let lines: Vec<&str> = err.lines().collect();
    for w in lines.windows(2) {
        assert_ne!(w[0], w[1], "a line repeated:\n{err}");
    }
    assert_lacks(&err, "step 0/");
    let closing: Vec<&str> = out
        .lines()
        .chain(err.lines())
        .filter(|l| l.contains("upgraded"))
        .collect();
    assert_eq!(closing.len(), 1, "{out}\n{err}");
    assert!(
        closing[0].starts_with("cluster rs upgraded to v1.34.0 in "),
        "{out}"
    );
}
