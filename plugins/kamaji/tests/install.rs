//! `kubectl kamaji install|uninstall` on a testbed of its own (uninstall removes the CRDs).

mod common;

use common::*;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::Api;
use testbed::fixtures::run::{assert_contains, assert_lacks, words};

#[tokio::test]
async fn install_dry_runs_install_converges_and_uninstall_refuses_while_in_use() {
    let tb = testbed::shared();
    let (client, ns) = tb.namespace("kamaji-install").await;

    // The client dry run is a stream kubectl accepts.
    let yaml = ok(&kamaji(
        tb,
        &ns,
        &words("install --image example.com/kamaji-reconciler:v1 --dry-run=client -o yaml"),
    ));
    assert!(
        yaml.contains("kind: CustomResourceDefinition")
            && yaml.contains("image: example.com/kamaji-reconciler:v1"),
        "{yaml}"
    );
    // Server-side: the generated CRDs are too large for client-side apply's annotation.
    let out = kubectl_apply(tb, &ns, &yaml, &["--server-side", "--dry-run=server"]);
    assert!(out.status.success(), "{}\n{}", stdout(&out), stderr(&out));
    let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
    assert!(
        crds.get_opt("kamajicontrolplanes.controlplane.cluster.x-k8s.io")
            .await
            .unwrap()
            .is_none(),
        "a dry run installed the CRD"
    );

    // A server dry run into a namespace that does not exist yet stopped at the
    // ServiceAccount with `ServiceAccount "<namespace>" not found` (the API server's 404 is
    // for the namespace, which a dry run does not create). The objects in it are now named as
    // not checkable, and the rest is checked.
    let fresh = format!("{ns}-new");
    let out = kamaji(
        tb,
        &fresh,
        &words("install --image example.com/kamaji-reconciler:v1 --dry-run=server"),
    );
    let (o, e) = (ok(&out), stderr(&out));
    assert!(
        o.contains(&format!(
            "namespace/{fresh} serverside-applied (server dry run)"
        )) && o.contains(
            "clusterrolebinding.rbac.authorization.k8s.io/kamaji-reconciler serverside-applied (server dry run)"
        ),
        "{o}\n{e}"
    );
    assert!(
        e.contains(&format!(
            "serviceaccount/kamaji-reconciler: not checked by the server dry run: namespace {fresh} does not exist yet (the install creates it)"
        )),
        "{o}\n{e}"
    );
    assert_lacks(&e, "not found");

    // A claim for scheduled backups that does not exist is refused before anything is applied.
    let line = fails(
        &kamaji(
            tb,
            &ns,
            &words("install --image example.com/kamaji-reconciler:v1 --backup-claim nightly"),
        ),
        1,
    );
    assert_contains(
        &line,
        &format!(
            "PersistentVolumeClaim {ns}/nightly of --backup-claim does not exist; nothing was applied"
        ),
    );
    assert!(
        crds.get_opt("tenantbackups.ops.capi-kamaji.io")
            .await
            .unwrap()
            .is_none(),
        "a refused install applied the CRDs"
    );

    // Install, twice (converges). Without the Prometheus operator's CRDs, no alerts.
    let installed = kamaji(
        tb,
        &ns,
        &words("install --image example.com/kamaji-reconciler:v1"),
    );
    let out = ok(&installed);
    assert_contains(
        &stderr(&installed),
        "the Prometheus operator's CRDs (PodMonitor, PrometheusRule) are not served: no alerts or dashboard installed",
    );
    assert_contains(
        &out,
        "customresourcedefinition.apiextensions.k8s.io/kamajicontrolplanes.controlplane.cluster.x-k8s.io serverside-applied",
    );
    assert_contains(&out, "deployment.apps/kamaji-reconciler serverside-applied");
    // The admission policy on the reconciler's Secret writes, and its binding.
    for kind in [
        "validatingadmissionpolicy",
        "validatingadmissionpolicybinding",
    ] {
        assert_contains(
            &out,
            &format!(
                "{kind}.admissionregistration.k8s.io/kamaji-reconciler-secrets serverside-applied"
            ),
        );
    }
    // With them (the operator's own CRDs, generated from its API types by
    // testbed/build-bins.sh monitoring), the PodMonitor, the rules and the dashboard go along.
    let monitoring = testbed::build_bins("monitoring").expect("build-bins.sh monitoring");
    testbed::install_crds(&client, &monitoring.join("crds"))
        .await
        .unwrap();
    let upgraded = ok(&kamaji(
        tb,
        &ns,
        &words("install --image example.com/kamaji-reconciler:v2"),
    ));
    for applied in [
        "podmonitor.monitoring.coreos.com/kamaji-reconciler serverside-applied",
        "prometheusrule.monitoring.coreos.com/kamaji-reconciler serverside-applied",
        "configmap/kamaji-reconciler-dashboard serverside-applied",
    ] {
        assert_contains(&upgraded, applied);
    }
    let rule = object(
        &client,
        &ns,
        "monitoring.coreos.com/v1",
        "PrometheusRule",
        "kamaji-reconciler",
    )
    .await;
    assert_eq!(
        rule["spec"]["groups"][0]["rules"].as_array().map(Vec::len),
        Some(7),
        "{rule}"
    );
    let dep = object(&client, &ns, "apps/v1", "Deployment", "kamaji-reconciler").await;
    assert_eq!(
        dep["spec"]["template"]["spec"]["containers"][0]["image"],
        "example.com/kamaji-reconciler:v2"
    );

    // With the claim made, it is mounted for the reconciler; an install without it unmounts it.
    let pvc = "apiVersion: v1\nkind: PersistentVolumeClaim\nmetadata:\n  name: nightly\nspec:\n  accessModes: [ReadWriteOnce]\n  resources: {requests: {storage: 1Gi}}\n";
    let made = kubectl_apply(tb, &ns, pvc, &[]);
    assert!(made.status.success(), "{}", stderr(&made));
    let mounted = |dep: &serde_json::Value| {
        dep["spec"]["template"]["spec"]["containers"][0]["args"]
            .to_string()
            .contains("--backup-volume=nightly=/var/lib/kamaji-backups/nightly")
            && dep["spec"]["template"]["spec"]["volumes"][0]["persistentVolumeClaim"]["claimName"]
                == "nightly"
    };
    ok(&kamaji(
        tb,
        &ns,
        &words("install --image example.com/kamaji-reconciler:v2 --backup-claim nightly"),
    ));
    let dep = object(&client, &ns, "apps/v1", "Deployment", "kamaji-reconciler").await;
    assert!(mounted(&dep), "{dep}");
    ok(&kamaji(
        tb,
        &ns,
        &words("install --image example.com/kamaji-reconciler:v2"),
    ));
    let dep = object(&client, &ns, "apps/v1", "Deployment", "kamaji-reconciler").await;
    assert!(!mounted(&dep), "{dep}");

    // `--wait` waits for the rollout, as kubectl rollout status does. No kubelet runs this
    // testbed's pods, so it never finishes: exit 1 at the deadline, with where it stood.
    let out = kamaji(
        tb,
        &ns,
        &words("install --image example.com/kamaji-reconciler:v2 --wait --timeout 2s"),
    );
    let err = stderr(&out);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert_contains(
        &err,
        "error: timed out after 2s while waiting for deployment/kamaji-reconciler to roll out (last seen: ",
    );
    assert_lacks(&err, "kamaji-reconciler rolled out");

    // A second install in another namespace was applied: two reconcilers, and the
    // ClusterRoleBinding moved to the second. It is refused, dry runs too, and nothing is
    // written.
    let other = format!("{ns}-other");
    for extra in [None, Some("--dry-run=server")] {
        let mut args = vec!["install", "--image", "example.com/kamaji-reconciler:v3"];
        args.extend(extra);
        let line = fails(&kamaji(tb, &other, &args), 1);
        assert_eq!(
            line,
            format!(
                "error: the KamajiControlPlane provider is already installed in namespace {ns} (deployment kamaji-reconciler); a second one in {other} would reconcile the same objects"
            )
        );
    }
    let namespaces: Api<k8s_openapi::api::core::v1::Namespace> = Api::all(client.clone());
    assert!(namespaces.get_opt(&other).await.unwrap().is_none());
    let dep = object(&client, &ns, "apps/v1", "Deployment", "kamaji-reconciler").await;
    assert_eq!(
        dep["spec"]["template"]["spec"]["containers"][0]["image"],
        "example.com/kamaji-reconciler:v2"
    );

    namespaced_install(tb, &client, &ns).await;

    // A control plane exists: uninstall refuses (and without a terminal it wants --yes).
    let mut served = false;
    for _ in 0..50 {
        if kamaji(
            tb,
            &ns,
            &words("create inuse --infrastructure none --kubernetes-version v1.35.0"),
        )
        .status
        .success()
        {
            served = true;
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(200)).await;
    }
    assert!(served, "create after install failed");
    let line = fails(&kamaji(tb, &ns, &["uninstall"]), 2);
    assert_contains(&line, "stdin is not a terminal");
    let line = fails(&kamaji(tb, &ns, &["uninstall", "--yes"]), 1);
    assert_contains(&line, "1 KamajiControlPlane(s) exist");
    assert!(
        crds.get_opt("kamajicontrolplanes.controlplane.cluster.x-k8s.io")
            .await
            .unwrap()
            .is_some()
    );

    ok(&delete_wait(tb, &ns, "inuse", "60s"));
    let out = ok(&kamaji(tb, &ns, &["uninstall", "--yes"]));
    assert_contains(&out, "deployment.apps/kamaji-reconciler deleted");
    assert_contains(
        &out,
        "prometheusrule.monitoring.coreos.com/kamaji-reconciler deleted",
    );
    assert_contains(&out, "configmap/kamaji-reconciler-dashboard deleted");
    for kind in [
        "validatingadmissionpolicy",
        "validatingadmissionpolicybinding",
    ] {
        assert_contains(
            &out,
            &format!("{kind}.admissionregistration.k8s.io/kamaji-reconciler-secrets deleted"),
        );
    }
    // The Role and RoleBinding `--namespaces` left in the watched namespace go too.
    assert_contains(
        &out,
        &format!("role.rbac.authorization.k8s.io/kamaji-reconciler deleted (namespace {ns}-a)"),
    );
    assert_eq!(can_i(tb, &ns, "get", &format!("{ns}-a")), "no");
    let crd = crds
        .get_opt("kamajicontrolplanes.controlplane.cluster.x-k8s.io")
        .await
        .unwrap();
    assert!(crd.is_none() || crd.unwrap().metadata.deletion_timestamp.is_some());
}

/// `kubectl auth can-i VERB secrets -n NS --as` the reconciler's service account (installed in
/// `sa_ns`): "yes" or "no".
fn can_i(tb: &testbed::Testbed, sa_ns: &str, verb: &str, ns: &str) -> String {
    let user = format!("system:serviceaccount:{sa_ns}:kamaji-reconciler");
    let out = kubectl(
        &tb.kubeconfig,
        &["auth", "can-i", verb, "secrets", "-n", ns, "--as", &user],
    );
    stdout(&out).trim().to_string()
}

/// `install --namespaces`: Roles in the namespaces named instead of cluster-wide grants, the
/// reconciler started with the installed Deployment's arguments as its service account
/// reconciling a KamajiControlPlane in one of them, and no Secret readable elsewhere; a new list
/// takes the Roles of the namespaces left out away.
async fn namespaced_install(tb: &testbed::Testbed, client: &kube::Client, ns: &str) {
    use k8s_openapi::api::core::v1::{Namespace, Secret};
    use kube::api::{Patch, PatchParams, PostParams};
    use serde_json::json;
    let (a, b) = (format!("{ns}-a"), format!("{ns}-b"));
    let list = format!("{a},{b}");
    // Bad lists: one line each, exit 2, before anything is asked of the cluster.
    for (bad, says) in [
        ("A,b", "is not a namespace name"),
        ("a,,b", "an empty namespace name"),
        ("a,a", "named twice"),
    ] {
        let line = fails(&kamaji(tb, ns, &["install", "--namespaces", bad]), 2);
        assert_contains(&line, says);
    }
    // A namespace that does not exist: refused, nothing applied.
    let namespaces: Api<Namespace> = Api::all(client.clone());
    namespaces
        .create(
            &PostParams::default(),
            &serde_json::from_value(json!({"metadata": {"name": a}})).unwrap(),
        )
        .await
        .unwrap();
    let line = fails(
        &kamaji(
            tb,
            ns,
            &[
                "install",
                "--image",
                "example.com/kamaji-reconciler:v2",
                "--namespaces",
                &list,
            ],
        ),
        1,
    );
    assert_contains(
        &line,
        &format!("namespace {b} of --namespaces does not exist"),
    );
    assert_eq!(
        can_i(tb, ns, "get", "kube-system"),
        "yes",
        "the cluster-wide install stays"
    );
    namespaces
        .create(
            &PostParams::default(),
            &serde_json::from_value(json!({"metadata": {"name": b}})).unwrap(),
        )
        .await
        .unwrap();
    let out = ok(&kamaji(
        tb,
        ns,
        &[
            "install",
            "--image",
            "example.com/kamaji-reconciler:v2",
            "--namespaces",
            &list,
        ],
    ));
    assert_contains(
        &out,
        "role.rbac.authorization.k8s.io/kamaji-reconciler serverside-applied",
    );
    // What the API server's authorizer answers for the reconciler now.
    for verb in ["get", "list", "watch", "create", "patch"] {
        assert_eq!(
            can_i(tb, ns, verb, "kube-system"),
            "no",
            "{verb} secrets in kube-system"
        );
        assert_eq!(can_i(tb, ns, verb, &a), "yes", "{verb} secrets in {a}");
    }
    assert_eq!(can_i(tb, ns, "delete", &a), "no");
    // The reconciler as the Deployment runs it, as its service account.
    let dep = object(client, ns, "apps/v1", "Deployment", "kamaji-reconciler").await;
    let mut args: Vec<String> = dep["spec"]["template"]["spec"]["containers"][0]["args"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| a.as_str().unwrap().to_string())
        .filter(|a| !a.starts_with("--metrics-bind-address"))
        .collect();
    assert!(args.contains(&format!("--namespaces={list}")), "{args:?}");
    args.push("--metrics-bind-address=127.0.0.1:0".into());
    args.push("-vv".into());
    let admin = std::fs::read_to_string(&tb.kubeconfig).unwrap();
    let mut kc: serde_json::Value = serde_saphyr::from_str(&admin).unwrap();
    for u in kc["users"].as_array_mut().unwrap() {
        u["user"]["as"] = json!(format!("system:serviceaccount:{ns}:kamaji-reconciler"));
        u["user"]["as-groups"] = json!([
            "system:serviceaccounts",
            format!("system:serviceaccounts:{ns}"),
            "system:authenticated"
        ]);
    }
    let sa_kubeconfig = tb.dir.join(format!("{ns}-reconciler.kubeconfig"));
    std::fs::write(&sa_kubeconfig, serde_json::to_string(&kc).unwrap()).unwrap();
    let log = tb.dir.join(format!("reconciler-{ns}-namespaced.log"));
    let child = std::process::Command::new(testbed::fixtures::reconciler::binary_next_to(env!(
        "CARGO_BIN_EXE_kubectl-kamaji"
    )))
    .arg("--kubeconfig")
    .arg(&sa_kubeconfig)
    .args(&args)
    .env_remove("KUBECONFIG")
    .env("POD_NAMESPACE", ns)
    .env("POD_NAME", "namespaced-0")
    .stderr(std::fs::File::create(&log).unwrap())
    .spawn()
    .unwrap();
    let r = Reconciler { child, log };
    // A KamajiControlPlane in a watched namespace, owned by its Cluster (as Cluster API does).
    ok(&kamaji(
        tb,
        &a,
        &words("create wa --infrastructure none --kubernetes-version v1.35.0"),
    ));
    let cluster = get(client, &a, &cluster_ar(), "wa").await.unwrap();
    let owner = json!({"apiVersion": cluster["apiVersion"], "kind": "Cluster", "name": "wa", "uid": cluster["metadata"]["uid"]});
    api(client, &a, &kcp_ar())
        .patch(
            "wa",
            &PatchParams::default(),
            &Patch::Merge(json!({"metadata": {"ownerReferences": [owner]}})),
        )
        .await
        .unwrap();
    let why = || format!("--- reconciler log ---\n{}", r.log_tail());
    let tcp = wait_until(
        "the TenantControlPlane in the watched namespace",
        std::time::Duration::from_secs(60),
        || async {
            get(client, &a, &tcp_ar(), "wa")
                .await
                .ok_or_else(|| format!("not yet\n{}", why()))
        },
    )
    .await;
    // Plays Kamaji: the admin kubeconfig and CA Secrets, owned by the TenantControlPlane, and
    // their names in its status; the reconciler copies them for Cluster API (creating them).
    let tcp_owner = json!({"apiVersion": tcp["apiVersion"], "kind": "TenantControlPlane", "name": "wa", "uid": tcp["metadata"]["uid"], "controller": true});
    let secrets: Api<Secret> = Api::namespaced(client.clone(), &a);
    for (name, data) in [
        ("wa-admin-kubeconfig", json!({"admin.conf": "YWRtaW4="})),
        ("wa-ca", json!({"ca.crt": "Q0VSVA==", "ca.key": "S0VZ"})),
    ] {
        let s = json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": name, "ownerReferences": [tcp_owner.clone()]}, "data": data});
        secrets
            .patch(name, &PatchParams::apply("test").force(), &Patch::Apply(&s))
            .await
            .unwrap();
    }
    api(client, &a, &tcp_ar())
        .patch_status(
            "wa",
            &PatchParams::default(),
            &Patch::Merge(json!({"status": {
            "controlPlaneEndpoint": "10.0.0.9:6443",
            "kubeconfig": {"admin": {"secretName": "wa-admin-kubeconfig"}},
            "certificates": {"ca": {"secretName": "wa-ca"}}}})),
        )
        .await
        .unwrap();
    let copied = tokio::time::timeout(std::time::Duration::from_secs(60), async {
        loop {
            if secrets.get_opt("wa-kubeconfig").await.unwrap().is_some() {
                return;
            }
            tokio::time::sleep(std::time::Duration::from_millis(200)).await;
        }
    })
    .await;
    assert!(copied.is_ok(), "wa-kubeconfig was not copied\n{}", why());
    let log_text = std::fs::read_to_string(&r.log).unwrap();
    assert!(
        !log_text.contains("forbidden") && !log_text.contains("Forbidden"),
        "{}",
        why()
    );
    drop(r);
    ok(&delete_wait(tb, &a, "wa", "60s"));
    // A shorter list: the Role and RoleBinding of the namespace left out go.
    let out = ok(&kamaji(
        tb,
        ns,
        &[
            "install",
            "--image",
            "example.com/kamaji-reconciler:v2",
            "--namespaces",
            &a,
        ],
    ));
    assert_contains(
        &out,
        &format!("role.rbac.authorization.k8s.io/kamaji-reconciler deleted (namespace {b})"),
    );
    assert_contains(
        &out,
        &format!("rolebinding.rbac.authorization.k8s.io/kamaji-reconciler deleted (namespace {b})"),
    );
    assert_eq!(can_i(tb, ns, "get", &b), "no");
    assert_eq!(can_i(tb, ns, "get", &a), "yes");
}
