//! `kubectl kamaji create --kube-proxy-mode ipvs` on the real controllers (seed 000):
//! the real CAPI v1.14 ClusterResourceSet controller applies our kube-proxy into the live tenant
//! of the real Kamaji v1.0.0 operator (its kube-apiserver, controller-manager and scheduler run
//! for real under the testbed's SIMULATED kubelet), read back through the tenant's kubeconfig;
//! Kamaji's own kube-proxy addon stays off, and Kamaji's clean-up of that addon removes objects
//! named `kube-proxy` but leaves ours; `kubectl kamaji delete` removes what create added.
//!
//! No kubelet runs the DaemonSet's pods here (the tenant has no nodes): what is proven is what
//! Cluster API delivers, not kube-proxy programming IPVS on a host.

use std::time::{Duration, Instant};

use crate::common::*;
use serde_json::Value;
use testbed::fixtures::reconciler::assert_ran;

/// Polls `kubectl get` through `kc` until it answers, for up to `secs`.
async fn tenant_get(kc: &std::path::Path, args: &[&str], secs: u64) -> Result<Value, String> {
    let deadline = Instant::now() + Duration::from_secs(secs);
    loop {
        let mut a = vec!["get"];
        a.extend_from_slice(args);
        a.extend(["-o", "json"]);
        let out = kubectl(kc, &a);
        if out.status.success() {
            return serde_json::from_slice(&out.stdout).map_err(|e| e.to_string());
        }
        if Instant::now() > deadline {
            return Err(String::from_utf8_lossy(&out.stderr).to_string());
        }
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
}

/// Whether `kubectl get` through `kc` says NotFound.
fn tenant_gone(kc: &std::path::Path, args: &[&str]) -> bool {
    let mut a = vec!["get"];
    a.extend_from_slice(args);
    let out = kubectl(kc, &a);
    !out.status.success() && String::from_utf8_lossy(&out.stderr).contains("NotFound")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ipvs_kube_proxy_reaches_the_tenant_through_the_real_resource_set_controller() {
    let (tb, client, ns, rec) = live_namespace("kube-proxy-ipvs").await;
    let port = free_port();
    let ipvs = ["--kube-proxy-mode", "ipvs"];
    let out = create_tenant(tb, &ns, "kp", "none", &port.to_string(), &ipvs);
    assert_ran(&out, "create", &rec);
    let err = stderr(&out);
    assert!(
        err.contains("kube-proxy in ipvs mode") && err.contains("deprecates ipvs"),
        "{err}"
    );

    // Management side: Kamaji's addon is off, the Cluster carries the selector's label.
    let tcp = object(
        &client,
        &ns,
        "kamaji.clastix.io/v1alpha1",
        "TenantControlPlane",
        "kp",
    )
    .await;
    assert!(
        tcp["spec"]["addons"].get("kubeProxy").is_none(),
        "{}",
        tcp["spec"]
    );
    let cluster = object(&client, &ns, "cluster.x-k8s.io/v1beta2", "Cluster", "kp").await;
    assert_eq!(
        cluster["metadata"]["labels"]["kube-proxy-mode"], "ipvs",
        "{cluster}"
    );

    // Tenant side: the real ClusterResourceSet controller applied our objects.
    let kc = tenant_kubeconfig(tb, &ns, "kp");
    let crs_ar = ar("addons.cluster.x-k8s.io", "v1beta2", "ClusterResourceSet");
    let cm = match tenant_get(
        &kc,
        &["-n", "kube-system", "configmap", "capi-kube-proxy"],
        180,
    )
    .await
    {
        Ok(cm) => cm,
        Err(e) => {
            let crs = get(&client, &ns, &crs_ar, "kp-kube-proxy").await;
            panic!("the ClusterResourceSet did not deliver kube-proxy's ConfigMap: {e}\n{crs:?}")
        }
    };
    let config: Value =
        serde_saphyr::from_str(cm["data"]["config.conf"].as_str().unwrap()).unwrap();
    assert_eq!(config["kind"], "KubeProxyConfiguration", "{config}");
    assert_eq!(config["mode"], "ipvs", "{config}");
    let kubeconfig: Value =
        serde_saphyr::from_str(cm["data"]["kubeconfig.conf"].as_str().unwrap()).unwrap();
    assert_eq!(
        kubeconfig["clusters"][0]["cluster"]["server"],
        format!("https://127.0.0.1:{port}")
    );
    let ds = tenant_get(
        &kc,
        &["-n", "kube-system", "daemonset", "capi-kube-proxy"],
        30,
    )
    .await
    .unwrap();
    assert_eq!(
        ds["spec"]["template"]["spec"]["containers"][0]["image"],
        "registry.k8s.io/kube-proxy:v1.35.4"
    );
    tenant_get(
        &kc,
        &["-n", "kube-system", "serviceaccount", "capi-kube-proxy"],
        30,
    )
    .await
    .unwrap();
    let crb = tenant_get(&kc, &["clusterrolebinding", "capi-kube-proxy"], 30)
        .await
        .unwrap();
    assert_eq!(crb["roleRef"]["name"], "system:node-proxier");
    let binding = object(
        &client,
        &ns,
        "addons.cluster.x-k8s.io/v1beta2",
        "ClusterResourceSetBinding",
        "kp",
    )
    .await;
    assert_eq!(
        binding["spec"]["bindings"][0]["resources"][0]["applied"], true,
        "{binding}"
    );

    // Why the objects are not named kube-proxy: with its addon off, Kamaji deletes kubeadm's
    // kube-proxy objects in the tenant (a ClusterRoleBinding kubeadm:node-proxier wakes its
    // controller). Ours stay.
    let decoy = "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: kube-proxy\n  namespace: kube-system\n---\napiVersion: rbac.authorization.k8s.io/v1\nkind: ClusterRoleBinding\nmetadata:\n  name: kubeadm:node-proxier\nroleRef:\n  apiGroup: rbac.authorization.k8s.io\n  kind: ClusterRole\n  name: system:node-proxier\nsubjects:\n- kind: ServiceAccount\n  name: kube-proxy\n  namespace: kube-system\n";
    let decoy_file = tb.dir.join(format!("{ns}-decoy.yaml"));
    std::fs::write(&decoy_file, decoy).unwrap();
    let applied = kubectl(&kc, &["apply", "-f", decoy_file.to_str().unwrap()]);
    assert!(
        applied.status.success(),
        "{}",
        String::from_utf8_lossy(&applied.stderr)
    );
    let deadline = Instant::now() + Duration::from_secs(120);
    while !(tenant_gone(&kc, &["-n", "kube-system", "configmap", "kube-proxy"])
        && tenant_gone(&kc, &["clusterrolebinding", "kubeadm:node-proxier"]))
    {
        assert!(
            Instant::now() < deadline,
            "Kamaji did not remove the kube-proxy-named objects in 120s"
        );
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
    for what in [
        ["-n", "kube-system", "configmap", "capi-kube-proxy"].as_slice(),
        &["-n", "kube-system", "daemonset", "capi-kube-proxy"],
        &["-n", "kube-system", "serviceaccount", "capi-kube-proxy"],
        &["clusterrolebinding", "capi-kube-proxy"],
    ] {
        tenant_get(&kc, what, 5)
            .await
            .unwrap_or_else(|e| panic!("{what:?} went with Kamaji's clean-up: {e}"));
    }

    // delete removes what create added in the management cluster.
    ok(&delete_wait(tb, &ns, "kp", "300s"));
    let cm_ar = ar("", "v1", "ConfigMap");
    wait_until(
        "delete to remove what create added",
        Duration::from_secs(60),
        || async {
            let crs = get(&client, &ns, &crs_ar, "kp-kube-proxy").await;
            let cm = get(&client, &ns, &cm_ar, "kp-kube-proxy").await;
            match (&crs, &cm) {
                (None, None) => Ok(()),
                _ => Err(format!("{crs:?} {cm:?}")),
            }
        },
    )
    .await;
}
