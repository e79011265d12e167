//! `kubectl kamaji install|uninstall` on a testbed of its own (uninstall removes the CRDs).

mod common;

use common::*;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::Api;

#[tokio::test]
async fn install_dry_runs_install_converges_and_uninstall_refuses_while_in_use() {
    let tb = testbed::shared();
    let (client, ns) = tb.namespace("kamaji-install").await;

    // The client dry run is a stream kubectl accepts.
    let yaml = ok(&kamaji(
        tb,
        &ns,
        &[
            "install",
            "--image",
            "example.com/kamaji-reconciler:v1",
            "--dry-run=client",
            "-o",
            "yaml",
        ],
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

    // Install, twice (converges).
    let out = ok(&kamaji(
        tb,
        &ns,
        &["install", "--image", "example.com/kamaji-reconciler:v1"],
    ));
    assert!(out.contains("customresourcedefinition.apiextensions.k8s.io/kamajicontrolplanes.controlplane.cluster.x-k8s.io serverside-applied"), "{out}");
    assert!(
        out.contains("deployment.apps/kamaji-reconciler serverside-applied"),
        "{out}"
    );
    ok(&kamaji(
        tb,
        &ns,
        &["install", "--image", "example.com/kamaji-reconciler:v2"],
    ));
    let dep = get(
        &client,
        &ns,
        &ar("apps", "v1", "Deployment"),
        "kamaji-reconciler",
    )
    .await
    .unwrap();
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
            &[
                "create",
                "inuse",
                "--infrastructure",
                "none",
                "--kubernetes-version",
                "v1.35.0",
            ],
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
    assert!(line.contains("stdin is not a terminal"), "{line}");
    let line = fails(&kamaji(tb, &ns, &["uninstall", "--yes"]), 1);
    assert!(line.contains("1 KamajiControlPlane(s) exist"), "{line}");
    assert!(
        crds.get_opt("kamajicontrolplanes.controlplane.cluster.x-k8s.io")
            .await
            .unwrap()
            .is_some()
    );

    ok(&kamaji(
        tb,
        &ns,
        &["delete", "inuse", "--yes", "--wait", "--timeout", "60s"],
    ));
    let out = ok(&kamaji(tb, &ns, &["uninstall", "--yes"]));
    assert!(
        out.contains("deployment.apps/kamaji-reconciler deleted"),
        "{out}"
    );
    let crd = crds
        .get_opt("kamajicontrolplanes.controlplane.cluster.x-k8s.io")
        .await
        .unwrap();
    assert!(crd.is_none() || crd.unwrap().metadata.deletion_timestamp.is_some());
}
