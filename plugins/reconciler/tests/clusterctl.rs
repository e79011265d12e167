//! The reconciler as a clusterctl provider: the real clusterctl (CAPI v1.14.2, from the testbed
//! cache) installs it with `clusterctl init --control-plane kamaji` from a local repository,
//! and `clusterctl move --dry-run` of a Kamaji cluster lists its KamajiControlPlane and the
//! Secrets the reconciler published. A testbed of its own (no CRDs at the start): clusterctl
//! installs CAPI's and our CRDs itself.

mod common;

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use common::*;
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::Client;
use kube::api::{Api, Patch, PatchParams};
use serde_json::{Value, json};
use testbed::fixtures::reconciler::{image_pod_logs, push_image};

use kamaji_reconciler::install::{DEFAULT_IMAGE, DEFAULT_NAMESPACE};
use kamaji_reconciler::provider;
use kcore::labels::CLUSTERCTL_LABEL;

/// clusterctl with a config file of our own, a private home (no user config, no version check
/// over the network), the testbed's kubeconfig, and `image` as the reconciler's image variable.
fn clusterctl(home: &Path, config: &Path, kubeconfig: &Path, image: &str, args: &[&str]) -> Output {
    let bin = testbed::Assets::clusterctl().expect("clusterctl from the testbed cache");
    Command::new(bin)
        .args(args)
        .arg("--config")
        .arg(config)
        .arg("--kubeconfig")
        .arg(kubeconfig)
        .env("HOME", home)
        .env("XDG_CONFIG_HOME", home.join(".config"))
        .env("CLUSTERCTL_DISABLE_VERSIONCHECK", "true")
        .env("KAMAJI_RECONCILER_IMAGE", image)
        .env_remove("KUBECONFIG")
        .output()
        .expect("running clusterctl")
}

fn text(o: &Output) -> String {
    format!(
        "exit {:?}\nstdout:\n{}\nstderr:\n{}",
        o.status.code(),
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    )
}

/// Our release assets, written by the real binary as a clusterctl local repository.
fn our_repository(dir: &Path) -> PathBuf {
    let o = Command::new(env!("CARGO_BIN_EXE_kamaji-reconciler"))
        .args(["manifests", "--output-dir"])
        .arg(dir)
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", text(&o));
    let components = dir.join(provider::repository_path(provider::COMPONENTS_FILE));
    assert!(components.is_file(), "{}", text(&o));
    assert!(
        dir.join(provider::repository_path(provider::METADATA_FILE))
            .is_file()
    );
    components
}

/// The clusterctl config: `providers:` entries that replace the built-in URLs (GitHub releases)
/// by file:// URLs of local repositories, and cert-manager as provisioned outside clusterctl.
fn config(path: &Path, capi_repo: &Path, ours: &Path) {
    // The one CAPI version the testbed's repository holds.
    let capi = std::fs::read_dir(capi_repo.join("cluster-api"))
        .unwrap()
        .flatten()
        .map(|e| e.file_name().to_string_lossy().to_string())
        .next()
        .expect("a CAPI version in the local repository");
    let yaml = format!(
        "providers:\n\
         - name: cluster-api\n  type: CoreProvider\n  url: file://{core}\n\
         - name: kubeadm\n  type: BootstrapProvider\n  url: file://{bootstrap}\n\
         - name: {name}\n  type: {ty}\n  url: file://{ours}\n\
         cert-manager:\n  externallyProvisioned: \"true\"\n",
        core = capi_repo
            .join(format!("cluster-api/{capi}/core-components.yaml"))
            .display(),
        bootstrap = capi_repo
            .join(format!(
                "bootstrap-kubeadm/{capi}/bootstrap-components.yaml"
            ))
            .display(),
        name = provider::NAME,
        ty = provider::TYPE,
        ours = ours.display(),
    );
    std::fs::write(path, yaml).unwrap();
}

/// CAPI's providers do not run here (the testbed's kubelet runs only images of its own registry,
/// ours), so no webhook server answers behind the Services clusterctl installed for them: CAPI's
/// admission webhooks are set to fail open, and the test plays CAPI (and Kamaji) by writing what
/// they would write.
async fn fail_open(c: &Client) {
    for kind in [
        "MutatingWebhookConfiguration",
        "ValidatingWebhookConfiguration",
    ] {
        let r = ar("admissionregistration.k8s.io", "v1", kind);
        let api: Api<kube::api::DynamicObject> = Api::all_with(c.clone(), &r);
        for o in api.list(&Default::default()).await.unwrap() {
            let mut v = serde_json::to_value(&o).unwrap();
            for w in v["webhooks"].as_array_mut().into_iter().flatten() {
                w["failurePolicy"] = json!("Ignore");
            }
            let name = o.metadata.name.clone().unwrap();
            api.patch(
                &name,
                &PatchParams::default(),
                &Patch::Merge(json!({"webhooks": v["webhooks"]})),
            )
            .await
            .unwrap_or_else(|e| panic!("{kind} {name}: {e}"));
        }
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn clusterctl_inits_the_reconciler_and_moves_kamaji_clusters() {
    let tb = testbed::shared_bare_images();
    let c = tb.client().await;
    let (image, digest) = push_image(tb, "clusterctl");
    let tmp = tempfile::tempdir().unwrap();
    let home = tmp.path().join("home");
    std::fs::create_dir_all(&home).unwrap();
    let capi_repo = testbed::Assets::clusterctl_repo().expect("the CAPI local repository");

    // cert-manager's API (its CRDs, v1.21.1 as clusterctl v1.14.2 installs it): clusterctl init
    // checks it by creating an Issuer and a Certificate.
    testbed::install_crds(&c, &capi_repo.join("cert-manager-crds"))
        .await
        .unwrap();
    // Kamaji's CRDs, as on a cluster where Kamaji runs before its CAPI provider is installed.
    let kamaji_crds: Vec<Value> = testbed_crds(&tb.assets.crds.join("full"), "kamaji.clastix.io");
    install_crds(&c, &kamaji_crds).await;

    let ours = our_repository(&tmp.path().join("repo"));
    let cfg = tmp.path().join("clusterctl.yaml");
    config(&cfg, &capi_repo, &ours);

    let out = clusterctl(
        &home,
        &cfg,
        &tb.kubeconfig,
        &image,
        &["init", "--control-plane", provider::NAME],
    );
    assert!(
        out.status.success(),
        "clusterctl init failed\n{}",
        text(&out)
    );
    let log = text(&out);
    assert!(
        log.contains(&format!(
            "Installing provider=\"control-plane-kamaji\" version=\"{}\" targetNamespace=\"{DEFAULT_NAMESPACE}\"",
            provider::version()
        )),
        "{log}"
    );

    // Installed as clusterctl's inventory records it, with our Deployment and image.
    let providers = ar("clusterctl.cluster.x-k8s.io", "v1alpha3", "Provider");
    let p = get(&c, DEFAULT_NAMESPACE, &providers, "control-plane-kamaji")
        .await
        .expect("clusterctl's inventory lists control-plane-kamaji");
    assert_eq!(
        (
            p["providerName"].as_str(),
            p["type"].as_str(),
            p["version"].as_str()
        ),
        (
            Some("kamaji"),
            Some(provider::TYPE),
            Some(provider::version().as_str())
        )
    );
    let dep = get(
        &c,
        DEFAULT_NAMESPACE,
        &ar("apps", "v1", "Deployment"),
        "kamaji-reconciler",
    )
    .await
    .expect("the reconciler's Deployment");
    assert_eq!(
        dep["spec"]["template"]["spec"]["containers"][0]["image"],
        json!(image),
        "clusterctl substituted {} (default {DEFAULT_IMAGE})",
        "KAMAJI_RECONCILER_IMAGE"
    );
    // The provider runs: its pod, pulled from the registry, Ready.
    let pods: Api<Pod> = Api::namespaced(c.clone(), DEFAULT_NAMESPACE);
    wait_pods(tb, "the provider's pod Ready", || async {
        let list = pods.list(&Default::default()).await.ok()?;
        let p = list.items.into_iter().find(|p| {
            p.metadata
                .name
                .as_deref()
                .is_some_and(|n| n.starts_with("kamaji-reconciler-"))
        })?;
        let st = p.status?;
        let ready = st
            .conditions?
            .iter()
            .any(|c| c.type_ == "Ready" && c.status == "True");
        let id = st.container_statuses?.first()?.image_id.clone();
        (ready && id.ends_with(&digest)).then_some(())
    })
    .await;
    // clusterctl applied our CRDs unaltered (its envsubst pass included), with its labels.
    let crds: Api<CustomResourceDefinition> = Api::all(c.clone());
    for ours in kamaji_reconciler::crds() {
        let name = ours.metadata.name.clone().unwrap();
        let got = crds.get(&name).await.unwrap();
        let l = got.metadata.labels.clone().unwrap_or_default();
        assert_eq!(
            l.get(CLUSTERCTL_LABEL).map(String::as_str),
            Some(""),
            "{name}"
        );
        assert_eq!(
            l.get("cluster.x-k8s.io/provider").map(String::as_str),
            Some("control-plane-kamaji")
        );
        for v in &ours.spec.versions {
            let g = got.spec.versions.iter().find(|x| x.name == v.name).unwrap();
            assert!(
                serde_json::to_value(&g.schema).unwrap()
                    == serde_json::to_value(&v.schema).unwrap(),
                "{name} {}: the installed schema differs from ours",
                v.name
            );
        }
    }

    // A Kamaji cluster: CAPI's Cluster and the KamajiControlPlane it owns (played), a
    // TenantControlPlane made by the real reconciler and published by a played Kamaji, and the
    // CAPI Secrets the reconciler copies from it.
    fail_open(&c).await;
    let (_, ns) = tb.namespace("kr-clusterctl").await;
    plain_cluster(
        &c,
        &ns,
        "moved",
        json!({"services": {"cidrBlocks": ["10.96.0.0/16"]}}),
        json!({"version": "1.33.0", "dataStoreName": "default"}),
    )
    .await;
    // Reconciled by the provider clusterctl installed, in its pod, as its ServiceAccount.
    wait_pods(tb, "the TenantControlPlane", || {
        get_tcp(&c, &ns, "moved-cp")
    })
    .await;
    kamaji_publish(&c, &ns, "moved-cp", "10.9.0.1:6443", "v1.33.0", "Ready", 1).await;
    wait_pods(tb, "the CAPI Secrets", || async {
        secret(&c, &ns, "moved-kubeconfig").await?;
        secret(&c, &ns, "moved-ca").await
    })
    .await;

    let mv = |c_args: &[&str]| {
        let mut a = vec!["move", "--dry-run", "-n", ns.as_str(), "-v", "1"];
        a.extend_from_slice(c_args);
        clusterctl(&home, &cfg, &tb.kubeconfig, &image, &a)
    };
    let out = mv(&[]);
    assert!(
        out.status.success(),
        "clusterctl move --dry-run failed\n{}",
        text(&out)
    );
    let log = text(&out);
    for (kind, name) in [
        ("Cluster", "moved"),
        ("KamajiControlPlane", "moved-cp"),
        ("Secret", "moved-kubeconfig"),
        ("Secret", "moved-ca"),
    ] {
        assert!(
            log.contains(&format!("Creating {kind}=\"{name}\" Namespace=\"{ns}\"")),
            "move does not list {kind} {name}\n{log}"
        );
    }

    // It is the clusterctl label on our CRD that makes move take KamajiControlPlanes along:
    // without it (as before), the dry run leaves the control plane behind.
    let kcp_crd = "kamajicontrolplanes.controlplane.cluster.x-k8s.io";
    crds.patch(
        kcp_crd,
        &PatchParams::default(),
        &Patch::Json::<()>(
            serde_json::from_value(
                json!([{"op": "remove", "path": "/metadata/labels/clusterctl.cluster.x-k8s.io"}]),
            )
            .unwrap(),
        ),
    )
    .await
    .unwrap();
    let out = mv(&[]);
    let unlabelled = text(&out);
    crds.patch(
        kcp_crd,
        &PatchParams::default(),
        &Patch::Merge(json!({"metadata": {"labels": {CLUSTERCTL_LABEL: ""}}})),
    )
    .await
    .unwrap();
    assert!(out.status.success(), "{unlabelled}");
    assert!(
        unlabelled.contains(&format!("Creating Cluster=\"moved\" Namespace=\"{ns}\""))
            && !unlabelled.contains("Creating KamajiControlPlane="),
        "{unlabelled}"
    );
}

/// Polls `f` for 60 s, failing with the image pods' logs.
async fn wait_pods<T, F, Fut>(tb: &testbed::Testbed, what: &str, f: F) -> T
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Option<T>>,
{
    testbed::fixtures::poll::wait_for(
        what,
        std::time::Duration::from_secs(60),
        || image_pod_logs(tb),
        f,
    )
    .await
}

/// The upstream CRDs of one group from a testbed CRD folder.
fn testbed_crds(dir: &Path, group: &str) -> Vec<Value> {
    let mut out = Vec::new();
    for e in std::fs::read_dir(dir).unwrap().flatten() {
        let p = e.path();
        if p.extension().is_some_and(|x| x == "yaml")
            && p.file_name()
                .and_then(|f| f.to_str())
                .is_some_and(|f| f.starts_with(group))
        {
            out.extend(read_yaml_docs(&p));
        }
    }
    assert!(!out.is_empty(), "no {group} CRDs in {}", dir.display());
    out
}
