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

    // Issue 24: a server dry run into a namespace that does not exist yet stopped at the
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

    // Install, twice (converges).
    let out = ok(&kamaji(
        tb,
        &ns,
        &words("install --image example.com/kamaji-reconciler:v1"),
    ));
    assert_contains(
        &out,
        "customresourcedefinition.apiextensions.k8s.io/kamajicontrolplanes.controlplane.cluster.x-k8s.io serverside-applied",
    );
    assert_contains(&out, "deployment.apps/kamaji-reconciler serverside-applied");
    ok(&kamaji(
        tb,
        &ns,
        &words("install --image example.com/kamaji-reconciler:v2"),
    ));
    let dep = object(&client, &ns, "apps/v1", "Deployment", "kamaji-reconciler").await;
    assert_eq!(
        dep["spec"]["template"]["spec"]["containers"][0]["image"],
        "example.com/kamaji-reconciler:v2"
    );

    // Issue 24: a second install in another namespace was applied: two reconcilers, and the
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
    let crd = crds
        .get_opt("kamajicontrolplanes.controlplane.cluster.x-k8s.io")
        .await
        .unwrap();
    assert!(crd.is_none() || crd.unwrap().metadata.deletion_timestamp.is_some());
}
