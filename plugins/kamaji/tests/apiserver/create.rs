//! `kubectl kamaji create`: every `--dry-run=client` output is accepted by
//! `kubectl apply --dry-run=server`, `--dry-run=server` validates, re-running converges, and
//! bad input gives one clear line with exit code 2 (usage) or 1 (the cluster says no).

use std::process::Output;

use kube::api::{Api, DynamicObject};
use serde_json::{Value, json};

use crate::common::*;
use testbed::fixtures::run::{assert_contains, assert_lacks, words};

const V: &str = "v1.35.0";
const BIN: &str = env!("CARGO_BIN_EXE_kubectl-kamaji");

fn infra_flags(infra: &str) -> Vec<&'static str> {
    match infra {
        "byoh" => vec!["--workers", "2", "--host-selector", "site=ams,rack=r1"],
        "openstack" => vec![
            "--flavor",
            "m1.large",
            "--image",
            "ubuntu-2404-kube-v1.35.0",
            "--network",
            "tenant-net",
            "--ssh-key",
            "ops",
            "--cloud-conf-secret",
            "edge-cloud-conf",
            "--cloud-ca-key",
            "cacert",
        ],
        "kubevirt" => vec![
            "--image",
            "quay.io/capk/ubuntu-2404-container-disk:v1.35.0",
            "--flavor",
            "2x4Gi",
        ],
        "metal3" => vec![
            "--service-address",
            "192.0.2.20",
            "--image",
            "http://images/ubuntu.img",
            "--image-checksum",
            "http://images/ubuntu.img.sha256sum",
        ],
        "aws" => vec![
            "--region",
            "eu-west-1",
            "--flavor",
            "t3.large",
            "--ssh-key",
            "ops",
        ],
        _ => vec![],
    }
}

#[tokio::test]
async fn every_client_dry_run_is_accepted_by_kubectl_apply_server_dry_run() {
    let tb = testbed().await;
    let (c, ns) = tb.namespace("kamaji-dry").await;
    for infra in ["byoh", "openstack", "kubevirt", "metal3", "aws", "none"] {
        let name = format!("dry-{infra}");
        let mut args = create_args(
            &name,
            infra,
            V,
            &words(
                "--datastore default --cert-san api.example.com \
                 --admission-controllers NodeRestriction,PodSecurity \
                 --apiserver-arg audit-log-maxage=30 --pod-cidr 10.200.0.0/16 --port 6443 \
                 --dry-run=client -o yaml",
            ),
        );
        args.extend(infra_flags(infra));
        let yaml = ok(&kamaji(tb, &ns, &args));
        let kinds = yaml.matches("\nkind: ").count() + usize::from(yaml.starts_with("kind: "));
        // BYOH adds the K8sInstallerConfigTemplate its ByoMachineTemplate's installerRef names.
        let want = match infra {
            "none" => 2,
            "byoh" => 7,
            _ => 6,
        };
        assert_eq!(yaml.matches("---\n").count(), want, "{infra}:\n{yaml}");
        assert!(kinds >= 1);
        let out = kubectl_apply_server_dry_run(tb, &ns, &yaml);
        assert!(
            out.status.success(),
            "kubectl rejected the {infra} stream:\n{}\n{}\n{yaml}",
            stdout(&out),
            stderr(&out)
        );
        let text = stdout(&out);
        let kcp = format!("kamajicontrolplane.controlplane.cluster.x-k8s.io/{name}");
        assert_contains(&text, &kcp);
        assert_contains(&text, "(server dry run)");
        // JSON output is a v1 List kubectl accepts too.
        let mut jargs = args.clone();
        let pos = jargs.iter().position(|a| *a == "yaml").unwrap();
        jargs[pos] = "json";
        let json = ok(&kamaji(tb, &ns, &jargs));
        let v: serde_json::Value = serde_json::from_str(&json).unwrap();
        assert_eq!(v["kind"], "List");
        let out = kubectl_apply_server_dry_run(tb, &ns, &json);
        assert!(out.status.success(), "{infra} json: {}", stderr(&out));
    }
    // Nothing was created.
    assert!(get(&c, &ns, &cluster_ar(), "dry-byoh").await.is_none());
}

#[tokio::test]
async fn server_dry_run_validates_and_rerunning_converges() {
    let tb = testbed().await;
    let (c, ns) = tb.namespace("kamaji-conv").await;
    // `create conv` of BYOH without workers, with `extra` flags; its output.
    let create = |extra: &[&str]| {
        let extra = [&["--workers", "0"], extra].concat();
        ok(&kamaji(tb, &ns, &create_args("conv", "byoh", V, &extra)))
    };
    let out = create(&["--dry-run=server"]);
    assert_contains(
        &out,
        "cluster.cluster.x-k8s.io/conv serverside-applied (server dry run)",
    );
    let cluster = cluster_ar();
    assert!(
        get(&c, &ns, &cluster, "conv").await.is_none(),
        "server dry run created objects"
    );

    let out = create(&[]);
    for line in [
        "kamajicontrolplane.controlplane.cluster.x-k8s.io/conv serverside-applied",
        "bycluster.infrastructure.cluster.x-k8s.io/conv serverside-applied",
        "cluster.cluster.x-k8s.io/conv serverside-applied",
        "kubeadmconfigtemplate.bootstrap.cluster.x-k8s.io/conv-md-0 serverside-applied",
        "k8sinstallerconfigtemplate.infrastructure.cluster.x-k8s.io/conv-md-0 serverside-applied",
        "byomachinetemplate.infrastructure.cluster.x-k8s.io/conv-md-0 serverside-applied",
        "machinedeployment.cluster.x-k8s.io/conv-md-0 serverside-applied",
    ] {
        let line = line.replace("bycluster", "byocluster");
        assert!(out.contains(&line), "missing {line:?} in\n{out}");
    }
    let kcp = kcp_ar();
    let k = get(&c, &ns, &kcp, "conv").await.unwrap();
    assert_eq!(k["spec"]["version"], V);
    assert_eq!(k["spec"]["replicas"], 2);
    let cl = get(&c, &ns, &cluster, "conv").await.unwrap();
    assert_eq!(cl["spec"]["controlPlaneRef"]["kind"], "KamajiControlPlane");
    assert_eq!(cl["spec"]["infrastructureRef"]["kind"], "ByoCluster");
    // BYOH v0.5.0's CRDs: the installer template, the installerRef to it (with the namespace
    // BYOH reads it from), and the Cluster owns the template (CAPI does not adopt it).
    let ict = get(&c, &ns, &byoh_ar("K8sInstallerConfigTemplate"), "conv-md-0")
        .await
        .unwrap();
    assert_eq!(
        ict["spec"]["template"]["spec"],
        serde_json::json!({"bundleRepo": "projects.registry.vmware.com/cluster_api_provider_bringyourownhost", "bundleType": "k8s"})
    );
    assert_eq!(ict["metadata"]["ownerReferences"][0]["kind"], "Cluster");
    assert_eq!(
        ict["metadata"]["ownerReferences"][0]["uid"],
        cl["metadata"]["uid"]
    );
    let bmt = get(&c, &ns, &byoh_ar("ByoMachineTemplate"), "conv-md-0")
        .await
        .unwrap();
    assert_eq!(
        bmt["spec"]["template"]["spec"]["installerRef"],
        serde_json::json!({"apiVersion": "infrastructure.cluster.x-k8s.io/v1beta1",
            "kind": "K8sInstallerConfigTemplate", "name": "conv-md-0", "namespace": ns})
    );
    let gen1 = k["metadata"]["generation"].as_i64().unwrap();

    // Same flags again: nothing changes. New flags: the objects follow.
    create(&[]);
    let k = get(&c, &ns, &kcp, "conv").await.unwrap();
    assert_eq!(k["metadata"]["generation"].as_i64().unwrap(), gen1);
    create(&words("--replicas 3 --cert-san conv.example.com"));
    let k = get(&c, &ns, &kcp, "conv").await.unwrap();
    assert_eq!(k["spec"]["replicas"], 3);
    assert_eq!(
        k["spec"]["network"]["certSANs"],
        serde_json::json!(["conv.example.com"])
    );

    // --from-file sets any KamajiControlPlane field; flags still win.
    let dir = tempfile::tempdir().unwrap();
    let values = dir.path().join("values.yaml");
    std::fs::write(&values, "deployment:\n  nodeSelector:\n    kubernetes.io/os: linux\nreplicas: 1\nkubelet:\n  cgroupfs: systemd\n").unwrap();
    create(&["--replicas", "3", "--from-file", values.to_str().unwrap()]);
    let k = get(&c, &ns, &kcp, "conv").await.unwrap();
    assert_eq!(k["spec"]["replicas"], 3);
    assert_eq!(
        k["spec"]["deployment"]["nodeSelector"]["kubernetes.io/os"],
        "linux"
    );
    assert_eq!(k["spec"]["kubelet"]["cgroupfs"], "systemd");
}

/// `--failure-domain` and `--cluster-dns` (seed: NodeLocal DNSCache on workers in one failure
/// domain): the real API server, with Cluster API v1.14's CRDs, keeps the MachineDeployment's
/// `spec.template.spec.failureDomain` and the workers' kubelet argument (nothing pruned), on a
/// server dry run and for real; a ClusterClass generated with `--cluster-dns` holds it, and a
/// topology Cluster of it takes `--failure-domain` for its machineDeployment.
#[tokio::test]
async fn failure_domain_and_cluster_dns_are_kept_by_the_api_server() {
    let tb = testbed().await;
    let (c, ns) = tb.namespace("kamaji-fd").await;
    let flags =
        words("--workers 1 --allow-pending --failure-domain fd-a --cluster-dns 169.254.20.10");
    let args = create_args("fd", "byoh", V, &flags);
    let check = |md: &Value, kct: &Value| {
        assert_eq!(md["apiVersion"], "cluster.x-k8s.io/v1beta2", "{md}");
        assert_eq!(
            md["spec"]["template"]["spec"]["failureDomain"], "fd-a",
            "{md}"
        );
        assert_eq!(
            kct["spec"]["template"]["spec"]["joinConfiguration"]["nodeRegistration"]["kubeletExtraArgs"],
            json!([{"name": "cluster-dns", "value": "169.254.20.10"}]),
            "{kct}"
        );
    };
    // What the server would store (a server dry run answers with the objects as admitted).
    let out = ok(&kamaji(
        tb,
        &ns,
        &[&args[..], &["--dry-run=server", "-o", "json"]].concat(),
    ));
    let list: Value = serde_json::from_str(&out).unwrap();
    let item = |kind: &str| {
        list["items"]
            .as_array()
            .unwrap()
            .iter()
            .find(|o| o["kind"] == kind)
            .cloned()
            .unwrap_or_else(|| panic!("no {kind} in {list}"))
    };
    check(&item("MachineDeployment"), &item("KubeadmConfigTemplate"));
    assert!(get(&c, &ns, &cluster_ar(), "fd").await.is_none());
    // For real, read back.
    ok(&kamaji(tb, &ns, &args));
    let md = object(
        &c,
        &ns,
        "cluster.x-k8s.io/v1beta2",
        "MachineDeployment",
        "fd-md-0",
    )
    .await;
    let bootstrap = "bootstrap.cluster.x-k8s.io/v1beta2";
    let kct = object(&c, &ns, bootstrap, "KubeadmConfigTemplate", "fd-md-0").await;
    check(&md, &kct);

    // A class with --cluster-dns, and a cluster of it in failure domain fd-b.
    ok(&kamaji(
        tb,
        &ns,
        &words(
            "generate clusterclass fd-class --infrastructure byoh --cluster-dns fd00::a --apply",
        ),
    ));
    let kct = object(
        &c,
        &ns,
        bootstrap,
        "KubeadmConfigTemplate",
        "fd-class-worker",
    )
    .await;
    assert_eq!(
        kct["spec"]["template"]["spec"]["joinConfiguration"]["nodeRegistration"]["kubeletExtraArgs"],
        json!([{"name": "cluster-dns", "value": "fd00::a"}]),
        "{kct}"
    );
    let out = ok(&kamaji(
        tb,
        &ns,
        &words(&format!(
            "create fd2 --class fd-class --kubernetes-version {V} --workers 1 --failure-domain fd-b --dry-run=server -o json"
        )),
    ));
    let list: Value = serde_json::from_str(&out).unwrap();
    let md = &list["items"][0]["spec"]["topology"]["workers"]["machineDeployments"][0];
    assert_eq!(md["failureDomain"], "fd-b", "{list}");
    assert_eq!(md["replicas"], 1);
}

#[tokio::test]
async fn rerun_after_scale_reports_the_conflict_and_force_takes_over() {
    let tb = testbed().await;
    let (c, ns) = tb.namespace("kamaji-conflict").await;
    let base = create_args("cf", "none", V, &[]);
    ok(&kamaji(tb, &ns, &base));
    ok(&kamaji(tb, &ns, &["scale", "cf", "--replicas", "3"]));
    // create's default (2 replicas) would undo the scale: server-side apply says so.
    let line = fails(&kamaji(tb, &ns, &base), 1);
    assert!(
        line.contains("KamajiControlPlane cf: Apply failed") && line.contains(".spec.replicas"),
        "{line}"
    );
    let o = kamaji(tb, &ns, &base);
    assert_contains(&stderr(&o), "--force-conflicts");
    ok(&kamaji(
        tb,
        &ns,
        &[&base[..], &["--force-conflicts"]].concat(),
    ));
    assert_eq!(
        get(&c, &ns, &kcp_ar(), "cf").await.unwrap()["spec"]["replicas"],
        2
    );
}

#[tokio::test]
async fn bad_input_gives_one_clear_line() {
    let tb = testbed().await;
    let (c, ns) = tb.namespace("kamaji-bad").await;
    let run = |args: &[&str]| kamaji(tb, &ns, args);
    let none = |extra: &[&'static str]| create_args("ok", "none", V, extra);
    let cases = [
        (
            create_args("Bad_Name", "none", V, &[]),
            2,
            "error: invalid name \"Bad_Name\"",
        ),
        (
            create_args("ok", "none", "1.35", &[]),
            2,
            "error: invalid Kubernetes version \"1.35\"",
        ),
        (
            create_args("ok", "none", "latest", &[]),
            2,
            "error: invalid Kubernetes version \"latest\"",
        ),
        (
            create_args("ok", "docker", V, &[]),
            2,
            "error: unknown infrastructure \"docker\"",
        ),
        (
            none(&["--datastore", "missing"]),
            1,
            "error: DataStore \"missing\" not found",
        ),
        (
            none(&["--workers", "2"]),
            2,
            "error: --workers does not apply to --infrastructure none",
        ),
        (
            create_args("ok", "byoh", V, &["--flavor", "m1"]),
            2,
            "error: --flavor does not apply to --infrastructure byoh",
        ),
        (
            none(&["--wait", "--dry-run=client"]),
            2,
            "error: --wait and --dry-run cannot be used together",
        ),
        (
            none(&["--service-type", "NodePort"]),
            2,
            "error: --service-type NodePort needs --service-address",
        ),
        (
            create_args("ok", "openstack", V, &[]),
            2,
            "error: --infrastructure openstack needs --flavor",
        ),
        (
            vec!["create", "ok", "--kubernetes-version", V],
            2,
            "error: --infrastructure is required",
        ),
    ];
    for (args, code, want) in cases {
        let line = fails(&run(&args), code);
        assert!(
            line.starts_with(want),
            "{args:?}: got {line:?}, want {want:?}"
        );
    }
    // The datastore hint names the existing ones.
    let o = run(&none(&["--datastore", "defualt"]));
    assert_contains(&stderr(&o), "did you mean \"default\"?");
    // Nothing was half-created.
    assert!(get(&c, &ns, &kcp_ar(), "ok").await.is_none());
}

/// BYOH installer: `--preinstalled-hosts` renders neither the template nor the installerRef
/// and says so; `delete` removes the installer template it created but keeps one another
/// ByoMachineTemplate still uses; deleting the Cluster any other way leaves it to the garbage
/// collector (the Cluster owns it).
#[tokio::test]
async fn byoh_installer_template_lives_and_goes_with_the_cluster() {
    let tb = testbed().await;
    let (c, ns) = tb.namespace("kamaji-installer").await;
    let infra = "infrastructure.cluster.x-k8s.io";
    let ict_ar = byoh_ar("K8sInstallerConfigTemplate");
    let bmt_ar = byoh_ar("ByoMachineTemplate");
    // No hosts here: the workers may wait (`--allow-pending`), as this test is about templates.
    let create = |name: &str, extra: &[&str]| {
        let extra = [extra, &["--allow-pending"]].concat();
        kamaji(tb, &ns, &create_args(name, "byoh", V, &extra))
    };

    // Pre-installed hosts: the preview says so, nothing installer-related is written.
    let out = create("pre", &["--preinstalled-hosts"]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert_contains(
        &stderr(&out),
        "note: --preinstalled-hosts: no K8sInstallerConfigTemplate and no installerRef",
    );
    assert!(get(&c, &ns, &ict_ar, "pre-md-0").await.is_none());
    let bmt = get(&c, &ns, &bmt_ar, "pre-md-0").await.unwrap();
    assert!(
        bmt["spec"]["template"]["spec"]
            .get("installerRef")
            .is_none(),
        "{bmt}"
    );

    // Custom bundles: the preview names where the agents pull from.
    let out = create(
        "inst",
        &["--bundle-repo", "registry.example.com/byoh/bundles"],
    );
    assert!(out.status.success(), "{}", stderr(&out));
    assert_contains(
        &stderr(&out),
        "note: BYOH agents install Kubernetes v1.35.0 from registry.example.com/byoh/bundles/byoh-bundle-<os>_k8s:v1.35.0",
    );
    let ict = get(&c, &ns, &ict_ar, "inst-md-0").await.unwrap();
    assert_eq!(
        ict["spec"]["template"]["spec"]["bundleRepo"],
        "registry.example.com/byoh/bundles"
    );
    let line = fails(
        &create(
            "bad",
            &["--preinstalled-hosts", "--bundle-repo", "r.example.com/b"],
        ),
        2,
    );
    assert_eq!(
        line,
        "error: --preinstalled-hosts and --bundle-repo/--bundle-type cannot be used together"
    );

    // Another pool's ByoMachineTemplate reuses inst's installer template: delete keeps it.
    let shared_user = serde_json::json!({
        "apiVersion": format!("{infra}/v1beta1"), "kind": "ByoMachineTemplate",
        "metadata": {"name": "other-md-0", "namespace": ns},
        "spec": {"template": {"spec": {"installerRef": {"apiVersion": format!("{infra}/v1beta1"),
            "kind": "K8sInstallerConfigTemplate", "name": "inst-md-0", "namespace": ns}}}}});
    api(&c, &ns, &bmt_ar)
        .patch(
            "other-md-0",
            &kube::api::PatchParams::apply("test"),
            &kube::api::Patch::Apply(&shared_user),
        )
        .await
        .unwrap();
    let out = kamaji(tb, &ns, &["delete", "inst", "--yes"]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert_contains(
        &stderr(&out),
        "It keeps k8sinstallerconfigtemplate.infrastructure.cluster.x-k8s.io/inst-md-0 (still used by ByoMachineTemplate other-md-0)",
    );
    // Released from the Cluster first, so the garbage collector leaves it once the Cluster is gone.
    wait_gone(&c, &ns, &cluster_ar(), "inst").await;
    let kept = get(&c, &ns, &ict_ar, "inst-md-0").await.unwrap();
    assert!(
        kept["metadata"]["ownerReferences"]
            .as_array()
            .is_none_or(|r| r.is_empty()),
        "{kept}"
    );

    // Without another user, delete removes it.
    let out = create("solo", &[]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(get(&c, &ns, &ict_ar, "solo-md-0").await.is_some());
    let out = kamaji(tb, &ns, &["delete", "solo", "--yes"]);
    assert!(out.status.success(), "{}", stderr(&out));
    // Listed in what goes; deleted by delete or, as the Cluster owns it, by the garbage
    // collector that foreground deletion of the Cluster runs first.
    assert!(
        stderr(&out)
            .contains("  k8sinstallerconfigtemplate.infrastructure.cluster.x-k8s.io/solo-md-0\n"),
        "{}",
        stderr(&out)
    );
    // (foreground deletion: the garbage collector finishes it)
    wait_gone(&c, &ns, &ict_ar, "solo-md-0").await;

    // Deleting only the Cluster (kubectl delete, kubectl capi delete): the garbage collector
    // removes the installer template the Cluster owns.
    let out = create("gc", &[]);
    assert!(out.status.success(), "{}", stderr(&out));
    api(&c, &ns, &cluster_ar())
        .delete("gc", &Default::default())
        .await
        .unwrap();
    wait_gone(&c, &ns, &ict_ar, "gc-md-0").await;
}

/// A stand-in for Calico's release manifest, served over HTTP on 127.0.0.1 (the suite runs
/// offline and vendors no third-party manifest): what `--cni calico` reads through
/// KUBECTL_KAMAJI_CALICO_URL, the mirror setting.
const FAKE_CALICO: &str = "---\n# Source: calico/templates/calico-node.yaml\napiVersion: v1\nkind: ServiceAccount\nmetadata:\n  name: calico-node\n  namespace: kube-system\n---\napiVersion: apps/v1\nkind: DaemonSet\nmetadata:\n  name: calico-node\n  namespace: kube-system\nspec:\n  selector:\n    matchLabels: {k8s-app: calico-node}\n  template:\n    metadata:\n      labels: {k8s-app: calico-node}\n    spec:\n      containers:\n        - name: calico-node\n          image: docker.io/calico/node:v3.31.4\n          env:\n            # - name: CALICO_IPV4POOL_CIDR\n            #   value: \"192.168.0.0/16\"\n            - name: CALICO_DISABLE_FILE_LOGGING\n              value: \"true\"\n";

/// Serves `body` to every request (HTTP/1.1, one answer per connection), from a thread: the
/// test runtime is blocked while the binary runs.
fn serve_http(body: &'static str) -> String {
    use std::io::{Read, Write};
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    std::thread::spawn(move || {
        for mut sock in listener.incoming().flatten() {
            let mut buf = [0u8; 4096];
            let _ = sock.read(&mut buf);
            let _ = write!(
                sock,
                "HTTP/1.1 200 OK\r\ncontent-type: text/plain\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
                body.len()
            );
        }
    });
    format!("http://{addr}/projectcalico/calico/v3.31.4/manifests/calico.yaml")
}

/// `--cni calico` and `--cni-manifest FILE`: the manifest lands in a ConfigMap (a Secret when
/// it holds Secrets) and a ClusterResourceSet (v1beta2 here; CAPI v1.14's real CRD validates
/// it) that selects the labelled Cluster; dry runs show them; offline `--cni calico` says to
/// use `--cni-manifest`; `delete` removes them.
#[tokio::test]
async fn cni_reaches_cluster_api_through_a_cluster_resource_set() {
    let tb = testbed().await;
    let (c, ns) = tb.namespace("kamaji-cni").await;
    let dir = tempfile::tempdir().unwrap();
    let with_secret = dir.path().join("my-cni.yaml");
    std::fs::write(
        &with_secret,
        "apiVersion: v1\nkind: Secret\nmetadata:\n  name: cni-token\n  namespace: kube-system\nstringData:\n  token: abc\n---\napiVersion: apps/v1\nkind: DaemonSet\nmetadata:\n  name: my-cni\n  namespace: kube-system\n",
    )
    .unwrap();
    let plain = dir.path().join("plain.yaml");
    std::fs::write(&plain, &FAKE_CALICO[4..]).unwrap();
    let create = |name: &str, extra: &[&str]| kamaji(tb, &ns, &create_args(name, "none", V, extra));
    let calico = |name: &'static str, url: &str| {
        kamaji_env(
            tb,
            &ns,
            &create_args(name, "none", V, &["--cni", "calico"]),
            &[("KUBECTL_KAMAJI_CALICO_URL", std::path::Path::new(url))],
        )
    };
    let crs_ar = ar("addons.cluster.x-k8s.io", "v1beta2", "ClusterResourceSet");
    let cm_ar = ar("", "v1", "ConfigMap");
    let (secret_ar, cluster_ar) = (secret_ar(), cluster_ar());

    // Dry run: the stream shows the CNI objects, and the API server accepts it.
    let plain = plain.to_str().unwrap();
    let yaml = ok(&create(
        "dry",
        &["--cni-manifest", plain, "--dry-run=client", "-o", "yaml"],
    ));
    assert_contains(&yaml, "kind: ClusterResourceSet");
    assert_contains(&yaml, "kind: ConfigMap");
    let out = kubectl_apply_server_dry_run(tb, &ns, &yaml);
    assert!(out.status.success(), "{}\n{yaml}", stderr(&out));
    assert_contains(
        &stdout(&out),
        "clusterresourceset.addons.cluster.x-k8s.io/dry-cni",
    );

    // A manifest with a Secret: a resource-set Secret, the CRS, the labelled Cluster owning both.
    let out = create("sec", &["--cni-manifest", with_secret.to_str().unwrap()]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert_contains(&stdout(&out), "secret/sec-cni serverside-applied");
    let note = format!(
        "note: network plugin {}: in Secret sec-cni and ClusterResourceSet sec-cni",
        with_secret.display()
    );
    assert_contains(&stderr(&out), &note);
    let cluster = get(&c, &ns, &cluster_ar, "sec").await.unwrap();
    assert_eq!(cluster["metadata"]["labels"]["cni"], "custom");
    let secret = get(&c, &ns, &secret_ar, "sec-cni").await.unwrap();
    assert_eq!(secret["type"], "addons.cluster.x-k8s.io/resource-set");
    assert!(secret["data"]["my-cni.yaml"].is_string(), "{secret}");
    assert_eq!(
        secret["metadata"]["ownerReferences"][0]["uid"],
        cluster["metadata"]["uid"]
    );
    let crs = get(&c, &ns, &crs_ar, "sec-cni").await.unwrap();
    assert_eq!(
        crs["spec"],
        serde_json::json!({"strategy": "ApplyOnce",
            "clusterSelector": {"matchLabels": {"cluster.x-k8s.io/cluster-name": "sec", "cni": "custom"}},
            "resources": [{"kind": "Secret", "name": "sec-cni"}]})
    );

    // --cni calico: downloaded (here from the stand-in), the pod CIDR filled in.
    let out = calico("cal", &serve_http(FAKE_CALICO));
    assert!(out.status.success(), "{}", stderr(&out));
    let cm = get(&c, &ns, &cm_ar, "cal-cni").await.unwrap();
    let data = cm["data"]["calico.yaml"].as_str().unwrap();
    assert_contains(
        data,
        "- name: CALICO_IPV4POOL_CIDR\n              value: \"10.244.0.0/16\"",
    );
    assert_eq!(
        get(&c, &ns, &cluster_ar, "cal").await.unwrap()["metadata"]["labels"]["cni"],
        "calico"
    );
    assert_eq!(
        get(&c, &ns, &crs_ar, "cal-cni").await.unwrap()["spec"]["resources"],
        serde_json::json!([{"kind": "ConfigMap", "name": "cal-cni"}])
    );

    // Offline: one line, and the way out.
    let closed = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        format!(
            "http://127.0.0.1:{}/calico.yaml",
            l.local_addr().unwrap().port()
        )
    };
    let out = calico("off", &closed);
    let line = fails(&out, 1);
    assert!(
        line.starts_with(&format!(
            "error: cannot download Calico's manifest from {closed}: "
        )),
        "{line}"
    );
    assert_contains(&stderr(&out), "--cni-manifest FILE");
    assert!(get(&c, &ns, &cluster_ar, "off").await.is_none());

    // Bad flags fail before anything is written.
    let not_yaml = dir.path().join("notes.txt");
    std::fs::write(&not_yaml, "just: text\n").unwrap();
    for (extra, says) in [
        (
            &["--cni", "calico", "--cni-manifest", plain][..],
            "error: --cni and --cni-manifest cannot be used together".to_string(),
        ),
        (
            &["--cni", "flannel"],
            "error: unknown --cni \"flannel\"".to_string(),
        ),
        (
            &["--cni-manifest", not_yaml.to_str().unwrap()],
            format!(
                "error: --cni-manifest {}: document 1 is not a Kubernetes object (no apiVersion or kind)",
                not_yaml.display()
            ),
        ),
    ] {
        assert_eq!(fails(&create("bad", extra), 2), says);
    }

    // delete removes what create handed to Cluster API.
    let out = kamaji(tb, &ns, &["delete", "sec", "--yes"]);
    assert!(out.status.success(), "{}", stderr(&out));
    // Listed in what goes (the garbage collector may remove them first: the Cluster owns them).
    for line in [
        "  clusterresourceset.addons.cluster.x-k8s.io/sec-cni\n",
        "  secret/sec-cni\n",
    ] {
        assert!(stderr(&out).contains(line), "{line}: {}", stderr(&out));
    }
    wait_gone(&c, &ns, &crs_ar, "sec-cni").await;
    wait_gone(&c, &ns, &secret_ar, "sec-cni").await;
    // cal's are untouched.
    assert!(get(&c, &ns, &cm_ar, "cal-cni").await.is_some());
}

async fn wait_gone(c: &kube::Client, ns: &str, r: &kube::api::ApiResource, name: &str) {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    while get(c, ns, r, name).await.is_some() {
        assert!(
            std::time::Instant::now() < deadline,
            "{} {name} is still there after 60s",
            r.kind
        );
        tokio::time::sleep(std::time::Duration::from_millis(300)).await;
    }
}

#[tokio::test]
async fn wait_times_out_saying_where_it_is_stuck() {
    // No reconciler runs for this namespace: nothing turns the KamajiControlPlane into a
    // TenantControlPlane, so --wait stops at the first phase and says so.
    let tb = testbed().await;
    let (_c, ns) = tb.namespace("kamaji-stuck").await;
    let create = create_args("stuck", "none", V, &[]);
    let out = kamaji(
        tb,
        &ns,
        &[&create[..], &["--wait", "--timeout", "3s"]].concat(),
    );
    // Progress lines (stderr is not a terminal), then one error line and a hint.
    assert_eq!(out.status.code(), Some(1));
    let err = stderr(&out);
    let tail: Vec<&str> = err
        .lines()
        .skip_while(|l| !l.starts_with("error: "))
        .collect();
    assert_eq!(tail.len(), 2, "{err}");
    assert!(tail[1].starts_with("hint: "), "{err}");
    let line = tail[0];
    assert_contains(
        &err,
        "waiting for cluster stuck: 1/4 control plane provisioning",
    );
    assert!(
        line.starts_with("error: timed out after 3s while waiting for cluster stuck (last seen: 1/4 control plane provisioning: no TenantControlPlane yet"),
        "{line}"
    );
    // What was applied stays, and a re-run converges.
    assert!(
        stdout(&out)
            .contains("kamajicontrolplane.controlplane.cluster.x-k8s.io/stuck serverside-applied")
    );
    ok(&kamaji(tb, &ns, &create));
    // status explains it.
    let text = ok(&kamaji(tb, &ns, &["status", "stuck"]));
    assert_contains(&text, "no TenantControlPlane yet");
    assert_contains(&text, "no Cluster owns this KamajiControlPlane");
}

/// Our ClusterUpgrade API, as `kubectl kamaji install` applies it; waits until it is served.
async fn serve_cluster_upgrades(c: &kube::Client) {
    let crds = kcore::ops::crds();
    testbed::fixtures::crds::apply_and_wait(c, &crds, "kubectl-kamaji-tests").await;
}

/// `status` shows the ClusterUpgrade of the control plane's Cluster (named after
/// it) in the Control plane section and as `upgrade` in `-o json`. No controller runs here:
/// the test writes the Cluster's ownership of the KamajiControlPlane as Cluster API does, and
/// the ClusterUpgrade's status through its status subresource as the reconciler does.
#[tokio::test]
async fn status_shows_the_clusters_upgrade_under_way() {
    use kube::api::{DynamicObject, Patch, PatchParams, PostParams};
    use serde_json::{Value, json};
    let tb = testbed().await;
    let (c, ns) = tb.namespace("kamaji-upgrade").await;
    ok(&kamaji(tb, &ns, &create_args("up", "none", V, &[])));
    let cluster = get(&c, &ns, &cluster_ar(), "up").await.unwrap();
    api(&c, &ns, &kcp_ar())
        .patch(
            "up",
            &PatchParams::default(),
            &Patch::Merge(json!({"metadata": {"ownerReferences": [{
                "apiVersion": "cluster.x-k8s.io/v1beta2", "kind": "Cluster", "name": "up",
                "uid": cluster["metadata"]["uid"], "controller": true, "blockOwnerDeletion": true,
            }]}})),
        )
        .await
        .unwrap();
    serve_cluster_upgrades(&c).await;
    // No ClusterUpgrade yet: no line, no field.
    let text = ok(&kamaji(tb, &ns, &["status", "up"]));
    assert_lacks(&text, "Upgrade");
    assert_lacks(&text, "no Cluster owns");

    let cus = api(
        &c,
        &ns,
        &ar("ops.capi-kamaji.io", "v1alpha1", "ClusterUpgrade"),
    );
    let cu: DynamicObject = serde_json::from_value(json!({
        "apiVersion": "ops.capi-kamaji.io/v1alpha1", "kind": "ClusterUpgrade",
        "metadata": {"name": "up", "namespace": ns},
        "spec": {"clusterName": "up", "version": "v1.36.1"},
    }))
    .unwrap();
    cus.create(&PostParams::default(), &cu).await.unwrap();
    // Created, not yet taken up by a reconciler.
    let text = ok(&kamaji(tb, &ns, &["status", "up"]));
    assert!(
        text.lines().any(|l| l.starts_with("Upgrade:")
            && l.ends_with("to v1.36.1, Pending: waiting for the reconciler to take it up (kubectl capi upgrade status up)")),
        "{text}"
    );
    cus.patch_status(
        "up",
        &PatchParams::default(),
        &Patch::Merge(
            json!({"status": {"observedGeneration": 1, "phase": "Running",
            "progress": "0/1", "currentSteps": [1],
            "message": "KamajiControlPlane/up: stepping to v1.36.1"}}),
        ),
    )
    .await
    .unwrap();
    let want = "to v1.36.1, Running, step 1/1: KamajiControlPlane/up: stepping to v1.36.1 (kubectl capi upgrade status up)";
    let text = ok(&kamaji(tb, &ns, &["status", "up"]));
    let control_plane = text.split("\n\n").next().unwrap();
    let line = control_plane
        .lines()
        .find(|l| l.starts_with("Upgrade:"))
        .unwrap_or_else(|| panic!("no Upgrade line in the Control plane section:\n{text}"));
    assert_eq!(line.trim_start_matches("Upgrade:").trim(), want, "{text}");
    let status: Value =
        serde_json::from_str(&ok(&kamaji(tb, &ns, &["status", "up", "-o", "json"]))).unwrap();
    let u = &status["upgrade"];
    assert_eq!(u["name"], "up", "{u}");
    assert_eq!(u["version"], "v1.36.1", "{u}");
    assert_eq!(u["phase"], "Running", "{u}");
    assert_eq!(u["currentSteps"], json!([1]), "{u}");
    assert_eq!(u["inFlight"], true, "{u}");
    assert_eq!(u["summary"], want, "{u}");
    assert_eq!(status["summary"]["cluster"], "up");
}

/// `create` applied the Cluster, the KamajiControlPlane, the ByoCluster and the
/// templates before the server refused the MachineDeployment, and left them. A
/// ValidatingAdmissionPolicy of the real API server refuses MachineDeployments in this
/// namespace only (a fault the server injects, not a mock): nothing may be created.
#[tokio::test]
async fn a_refusal_of_the_last_object_creates_nothing() {
    use kube::api::{Api, DynamicObject, Patch, PatchParams};
    let tb = testbed().await;
    let (c, ns) = tb.namespace("kamaji-half").await;
    let policy_ar = ar(
        "admissionregistration.k8s.io",
        "v1",
        "ValidatingAdmissionPolicy",
    );
    let binding_ar = ar(
        "admissionregistration.k8s.io",
        "v1",
        "ValidatingAdmissionPolicyBinding",
    );
    let name = format!("deny-md-{ns}");
    let policy = serde_json::json!({
        "apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingAdmissionPolicy",
        "metadata": {"name": name},
        "spec": {"failurePolicy": "Fail",
            "matchConstraints": {"resourceRules": [{"apiGroups": ["cluster.x-k8s.io"], "apiVersions": ["*"],
                "operations": ["CREATE", "UPDATE"], "resources": ["machinedeployments"]}]},
            "validations": [{"expression": "false", "message": "MachineDeployments are not allowed here"}]}});
    let binding = serde_json::json!({
        "apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingAdmissionPolicyBinding",
        "metadata": {"name": name},
        "spec": {"policyName": name, "validationActions": ["Deny"],
            "matchResources": {"namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": ns}}}}});
    let pp = PatchParams::apply("test").force();
    let policies: Api<DynamicObject> = Api::all_with(c.clone(), &policy_ar);
    let bindings: Api<DynamicObject> = Api::all_with(c.clone(), &binding_ar);
    policies
        .patch(&name, &pp, &Patch::Apply(&policy))
        .await
        .unwrap();
    bindings
        .patch(&name, &pp, &Patch::Apply(&binding))
        .await
        .unwrap();
    // The policy takes effect once the API server has loaded it: a direct dry-run probe says when.
    let mds = api(
        &c,
        &ns,
        &ar("cluster.x-k8s.io", "v1beta2", "MachineDeployment"),
    );
    let probe = serde_json::json!({"apiVersion": "cluster.x-k8s.io/v1beta2", "kind": "MachineDeployment",
        "metadata": {"name": "probe"}, "spec": {"clusterName": "x", "selector": {"matchLabels": {"a": "b"}},
        "template": {"metadata": {"labels": {"a": "b"}}, "spec": {"clusterName": "x",
        "bootstrap": {"dataSecretName": "x"}, "infrastructureRef": {"apiGroup": "infrastructure.cluster.x-k8s.io", "kind": "ByoMachineTemplate", "name": "x"}}}}});
    let mut dry = PatchParams::apply("test").force();
    dry.dry_run = true;
    let mut last = String::new();
    for _ in 0..100 {
        match mds.patch("probe", &dry, &Patch::Apply(&probe)).await {
            Err(kube::Error::Api(s)) if s.message.contains("not allowed here") => {
                last.clear();
                break;
            }
            r => last = format!("{r:?}"),
        }
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    assert!(
        last.is_empty(),
        "the admission policy never took effect: {last}"
    );

    let o = kamaji(
        tb,
        &ns,
        &create_args("half", "byoh", V, &["--workers", "1", "--allow-pending"]),
    );
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    assert_contains(&stderr(&o), "not allowed here");
    for r in [
        cluster_ar(),
        kcp_ar(),
        byoh_ar("ByoCluster"),
        byoh_ar("ByoMachineTemplate"),
        ar(
            "bootstrap.cluster.x-k8s.io",
            "v1beta2",
            "KubeadmConfigTemplate",
        ),
    ] {
        assert!(
            list(&api(&c, &ns, &r), &Default::default())
                .await
                .is_empty(),
            "{} was created although the MachineDeployment was refused",
            r.kind
        );
    }
    let _ = bindings.delete(&name, &Default::default()).await;
    let _ = policies.delete(&name, &Default::default()).await;
}

/// An interrupted `kamaji delete --wait` could not be resumed: once the control plane
/// was gone the re-run said "not found" while the Cluster was still terminating. A finalizer
/// nobody removes holds the Cluster here, as a slow CAPI would.
#[tokio::test]
async fn an_interrupted_delete_resumes() {
    let tb = testbed().await;
    let (c, ns) = tb.namespace("kamaji-resume").await;
    let clusters = held_cluster(&c, &ns, "gone").await;
    // No KamajiControlPlane: the first delete got that far and was interrupted; the Cluster
    // is terminating. The re-run finds it and waits where the first one stopped.
    let o = delete_wait(tb, &ns, "gone", "2s");
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    assert_contains(
        &stderr(&o),
        "left: Cluster gone (finalizers test.example.com/hold)",
    );
    assert!(!stderr(&o).contains("not found"), "{}", stderr(&o));
    // Resumed again; the holder lets go while it waits, and it finishes.
    let (tb2, ns2) = (tb, ns.clone());
    let resumed = tokio::task::spawn_blocking(move || delete_wait(tb2, &ns2, "gone", "60s"));
    tokio::time::sleep(std::time::Duration::from_secs(2)).await;
    drop_finalizers(&clusters, "gone").await;
    let out = ok(&resumed.await.unwrap());
    assert_contains(&out, "gone is gone");
    // With nothing left at all, the name is simply not found.
    let line = fails(&kamaji(tb, &ns, &["delete", "gone", "--yes"]), 1);
    assert_contains(&line, "\"gone\" not found");
}

/// BCM's preflight: a control-plane address another cluster already uses is refused
/// in one line and nothing is created; re-running the first cluster's create still passes.
#[tokio::test]
async fn a_used_control_plane_address_is_refused() {
    let tb = testbed().await;
    let (c, ns) = tb.namespace("kamaji-addr").await;
    let create = |name: &'static str| {
        create_args(
            name,
            "none",
            V,
            &words("--service-type NodePort --service-address 192.0.2.77"),
        )
    };
    ok(&kamaji(tb, &ns, &create("first")));
    ok(&kamaji(tb, &ns, &create("first")));
    let o = kamaji(tb, &ns, &create("second"));
    assert_eq!(
        o.status.code(),
        Some(1),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    let err = String::from_utf8_lossy(&o.stderr).to_string();
    assert!(
        err.lines().next().unwrap().contains(&format!(
            "the control-plane endpoint 192.0.2.77:6443 is already used by KamajiControlPlane {ns}/first"
        )),
        "{err}"
    );
    let cluster = cluster_ar();
    assert!(get(&c, &ns, &cluster, "second").await.is_none());
    // The same address on another port is another endpoint.
    let mut third = create("third");
    third.extend(["--port", "30443"]);
    ok(&kamaji(tb, &ns, &third));
    assert!(get(&c, &ns, &cluster, "third").await.is_some());
}

/// CI caught `kamaji delete --wait` saying the DataStore "no longer holds its data" while the
/// TenantControlPlane was still there: the wait covered the KamajiControlPlane, not the
/// TenantControlPlane the garbage collector removes after it (through the reconciler's owner
/// reference), whose Kamaji finalizer is what cleans the DataStore. A finalizer nobody removes
/// holds the TenantControlPlane here, as Kamaji's does while it cleans up.
#[tokio::test]
async fn delete_wait_waits_for_the_tenant_control_plane() {
    use kube::api::{DynamicObject, PostParams};
    let tb = testbed().await;
    let (c, ns) = tb.namespace("kamaji-tcp-wait").await;
    ok(&kamaji(tb, &ns, &create_args("held", "none", V, &[])));
    let kcp = get(&c, &ns, &kcp_ar(), "held")
        .await
        .expect("create made the KamajiControlPlane");
    // The TenantControlPlane as the reconciler makes it: owned by the KamajiControlPlane.
    let tcps = api(&c, &ns, &tcp_ar());
    let tcp: DynamicObject = serde_json::from_value(serde_json::json!({
        "apiVersion": "kamaji.clastix.io/v1alpha1", "kind": "TenantControlPlane",
        "metadata": {"name": "held", "finalizers": ["test.example.com/hold"],
            "ownerReferences": [{"apiVersion": "controlplane.cluster.x-k8s.io/v1alpha2",
                "kind": "KamajiControlPlane", "name": "held", "uid": kcp["metadata"]["uid"],
                "controller": true, "blockOwnerDeletion": true}]},
        "spec": {"dataStore": "default",
            "controlPlane": {"deployment": {"replicas": 1}, "service": {"serviceType": "ClusterIP"}},
            "kubernetes": {"version": V, "kubelet": {"cgroupfs": "systemd"}}}}))
    .unwrap();
    tcps.create(&PostParams::default(), &tcp).await.unwrap();
    let o = delete_wait(tb, &ns, "held", "5s");
    assert_eq!(
        o.status.code(),
        Some(1),
        "--wait returned while the TenantControlPlane was held:\n{}{}",
        stdout(&o),
        stderr(&o)
    );
    assert_contains(
        &stderr(&o),
        "TenantControlPlane held (finalizers test.example.com/hold)",
    );
    assert_lacks(&stdout(&o), "no longer holds its data");
    // Resumed: the KamajiControlPlane is gone, its TenantControlPlane terminating. The holder
    // lets go while it waits, and it finishes.
    let ns2 = ns.clone();
    let resumed = tokio::task::spawn_blocking(move || delete_wait(tb, &ns2, "held", "60s"));
    tokio::time::sleep(std::time::Duration::from_secs(2)).await;
    drop_finalizers(&tcps, "held").await;
    let out = ok(&resumed.await.unwrap());
    assert_contains(&out, "no longer holds its data");
    assert!(get(&c, &ns, &tcp_ar(), "held").await.is_none());
}

/// A TenantControlPlane `tcp` in the middle of Kamaji's DataStore clean-up, with its
/// `<tcp>-datastore-config` Secret, as Kamaji v1.0.0 makes them: the TenantControlPlane owned by
/// the KamajiControlPlane `tcp` (as the reconciler makes it) and held by Kamaji's finalizer
/// (controllers/finalizers/tcp.go), the Secret controlled by the TenantControlPlane and held by
/// `finalizer.kamaji.clastix.io/datastore-secret`
/// (internal/resources/datastore/datastore_storage_config.go). No Kamaji runs here: the test
/// drops the TenantControlPlane's finalizer when the clean-up is to finish, and nothing takes
/// the Secret's off, as when Kamaji v1.0.0 loses the race it has with the garbage collector.
/// Returns the TenantControlPlanes and the Secrets.
async fn kamaji_cleaning_up(
    c: &kube::Client,
    ns: &str,
    tcp: &str,
) -> (
    kube::api::Api<kube::api::DynamicObject>,
    kube::api::Api<kube::api::DynamicObject>,
) {
    use kube::api::{DynamicObject, PostParams};
    let kcp = get(c, ns, &kcp_ar(), tcp)
        .await
        .expect("create made the KamajiControlPlane");
    let tcps = api(c, ns, &tcp_ar());
    let t: DynamicObject = serde_json::from_value(serde_json::json!({
        "apiVersion": "kamaji.clastix.io/v1alpha1", "kind": "TenantControlPlane",
        "metadata": {"name": tcp, "finalizers": ["finalizer.kamaji.clastix.io"],
            "ownerReferences": [{"apiVersion": "controlplane.cluster.x-k8s.io/v1alpha2",
                "kind": "KamajiControlPlane", "name": tcp, "uid": kcp["metadata"]["uid"],
                "controller": true, "blockOwnerDeletion": true}]},
        "spec": {"dataStore": "default",
            "controlPlane": {"deployment": {"replicas": 1}, "service": {"serviceType": "ClusterIP"}},
            "kubernetes": {"version": V, "kubelet": {"cgroupfs": "systemd"}}}}))
    .unwrap();
    let t = tcps.create(&PostParams::default(), &t).await.unwrap();
    let secrets = api(c, ns, &secret_ar());
    let s: DynamicObject = serde_json::from_value(serde_json::json!({
        "apiVersion": "v1", "kind": "Secret",
        "metadata": {"name": format!("{tcp}-datastore-config"),
            "finalizers": ["finalizer.kamaji.clastix.io/datastore-secret"],
            "labels": {"kamaji.clastix.io/project": "kamaji", "kamaji.clastix.io/name": tcp,
                "kamaji.clastix.io/component": "datastore-config"},
            "ownerReferences": [{"apiVersion": "kamaji.clastix.io/v1alpha1", "kind": "TenantControlPlane",
                "name": tcp, "uid": t.metadata.uid,
                "controller": true, "blockOwnerDeletion": true}]},
        "data": {"DB_SCHEMA": "c2NoZW1h"}}))
    .unwrap();
    secrets.create(&PostParams::default(), &s).await.unwrap();
    (tcps, secrets)
}

/// Ctrl-C during `kamaji delete NAME --wait`, then the same command, said
/// `KamajiControlPlane "s5" not found; did you mean "s6"?` while the teardown was still under
/// way. A re-run resumes: it says the control plane is gone already and what is left, waits
/// (or reports it on timeout), and finishes once the finalizers let go; only with nothing of
/// the name left is it "not found". Held here: the Cluster (a finalizer nobody removes, as a
/// slow CAPI would), and the TenantControlPlane with its DataStore Secret (Kamaji's
/// finalizers, [`kamaji_cleaning_up`]).
///
/// Then CI caught Kamaji v1.0.0 leaving its finalizer on the `<tcp>-datastore-config` Secret
/// after its TenantControlPlane went (2 of 4 real teardowns of one run): `delete --wait` timed
/// out on it after 5 minutes. Once the TenantControlPlane is gone, the wait takes it off and
/// says so.
#[tokio::test]
async fn a_rerun_resumes_the_wait_until_kamaji_lets_go() {
    use kube::api::{Patch, PatchParams};
    use std::io::BufRead;
    let tb = testbed().await;
    let (c, ns) = tb.namespace("kamaji-rerun").await;
    for n in ["s5", "s6"] {
        ok(&kamaji(tb, &ns, &create_args(n, "none", V, &[])));
    }
    let clusters = api(&c, &ns, &cluster_ar());
    clusters
        .patch(
            "s5",
            &PatchParams::default(),
            &Patch::Merge(
                serde_json::json!({"metadata": {"finalizers": ["test.example.com/hold"]}}),
            ),
        )
        .await
        .unwrap();
    let (tcps, secrets) = kamaji_cleaning_up(&c, &ns, "s5").await;
    let held_tcp = "TenantControlPlane s5 (finalizers finalizer.kamaji.clastix.io)";
    let held =
        "Secret s5-datastore-config (finalizers finalizer.kamaji.clastix.io/datastore-secret)";
    let delete = ["delete", "s5", "--yes", "--wait", "--timeout", "3s"];
    // The first run: it deletes, and its wait names what holds.
    let o = kamaji(tb, &ns, &delete);
    assert_eq!(o.status.code(), Some(1), "{}{}", stdout(&o), stderr(&o));
    let e = stderr(&o);
    assert_contains(&e, "Cluster s5 (finalizers test.example.com/hold)");
    assert_contains(&e, held_tcp);
    assert_contains(&e, held);
    // The re-run: the KamajiControlPlane is gone; it says so and waits again.
    let o = kamaji(tb, &ns, &delete);
    assert_eq!(o.status.code(), Some(1), "{}{}", stdout(&o), stderr(&o));
    let e = stderr(&o);
    assert_contains(&e, "KamajiControlPlane s5 is gone already");
    assert_contains(&e, held);
    assert_lacks(&e, "not found");
    // The Cluster goes; only Kamaji's objects are left: still resumed, not "not found".
    drop_finalizers(&clusters, "s5").await;
    let o = kamaji(tb, &ns, &delete);
    assert_eq!(o.status.code(), Some(1), "{}{}", stdout(&o), stderr(&o));
    let e = stderr(&o);
    let left = format!("is gone already; its teardown is under way, left: {held_tcp}, {held}");
    assert_contains(&e, &left);
    assert_lacks(&e, "not found");
    // While the TenantControlPlane is there, Kamaji is at work: its Secret is not touched.
    assert!(
        secrets
            .get_opt("s5-datastore-config")
            .await
            .unwrap()
            .is_some_and(|s| !s.metadata.finalizers.unwrap_or_default().is_empty())
    );
    // Resumed once more; Kamaji's clean-up ends while it waits (the TenantControlPlane goes,
    // the garbage collector deletes the Secret) but leaves the Secret's finalizer, and it
    // finishes.
    let args = [
        "delete",
        "s5",
        "--yes",
        "--wait",
        "--timeout",
        "60s",
        "-n",
        &ns,
    ];
    let mut child = testbed::fixtures::run::command(BIN, &tb.kubeconfig, &args)
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let err = child.stderr.take().unwrap();
    let (seen_tx, seen_rx) = std::sync::mpsc::channel();
    let reader = std::thread::spawn(move || {
        let mut all = String::new();
        for line in std::io::BufReader::new(err).lines().map_while(Result::ok) {
            if line.contains("is gone already") {
                let _ = seen_tx.send(());
            }
            all.push_str(&line);
            all.push('\n');
        }
        all
    });
    // It is waiting once it has said what is left.
    tokio::task::spawn_blocking(move || seen_rx.recv_timeout(std::time::Duration::from_secs(60)))
        .await
        .unwrap()
        .expect("the re-run said what is left");
    drop_finalizers(&tcps, "s5").await;
    let o = tokio::task::spawn_blocking(move || child.wait_with_output())
        .await
        .unwrap()
        .unwrap();
    let e = reader.join().unwrap();
    assert!(o.status.success(), "{}{e}", stdout(&o));
    assert_contains(&stdout(&o), "s5 is gone");
    assert_contains(
        &e,
        "took Kamaji's finalizer off Secret s5-datastore-config: its TenantControlPlane is gone",
    );
    assert!(
        secrets
            .get_opt("s5-datastore-config")
            .await
            .unwrap()
            .is_none()
    );
    // With nothing of the name left, it is not found (and s6 is offered).
    let line = fails(&kamaji(tb, &ns, &["delete", "s5", "--yes"]), 1);
    assert_contains(&line, "\"s5\" not found");
    assert!(get(&c, &ns, &cluster_ar(), "s6").await.is_some());
}

/// `create` of a BYOH cluster refuses, before anything is written, when fewer free
/// hosts match the selector than it wants workers; hosts already serving it (a re-run) count;
/// `--allow-pending` creates it anyway.
#[tokio::test]
async fn byoh_create_refuses_a_short_host_pool_and_creates_nothing() {
    let tb = testbed().await;
    let (c, ns) = tb.namespace("kamaji-pool").await;
    // A selector of this namespace's own: BYOH picks from every namespace.
    let pool = format!("pool={ns}");
    let create = |workers: &str, extra: &[&str]| {
        let flags = [&["--workers", workers, "--host-selector", &pool][..], extra].concat();
        kamaji(tb, &ns, &create_args("short", "byoh", V, &flags))
    };
    let hosts = api(&c, &ns, &byoh_ar("ByoHost"));
    let add_host = |name: String, labels: Value| {
        let hosts = hosts.clone();
        async move {
            let h: DynamicObject = serde_json::from_value(json!({
                "apiVersion": "infrastructure.cluster.x-k8s.io/v1beta1", "kind": "ByoHost",
                "metadata": {"name": name, "labels": labels}, "spec": {}}))
            .unwrap();
            hosts.create(&Default::default(), &h).await.unwrap();
        }
    };
    let nothing_created = || async {
        for r in [
            cluster_ar(),
            kcp_ar(),
            byoh_ar("ByoCluster"),
            byoh_ar("ByoMachineTemplate"),
        ] {
            let names: Vec<String> = api(&c, &ns, &r)
                .list(&Default::default())
                .await
                .unwrap()
                .items
                .into_iter()
                .filter_map(|o| o.metadata.name)
                .collect();
            assert!(names.is_empty(), "{} created: {names:?}", r.kind);
        }
    };
    let refused = |o: &Output, says: &str| {
        assert_eq!(o.status.code(), Some(1), "{}", stderr(o));
        let err = stderr(o);
        assert_contains(&err, says);
        assert_contains(&err, "nothing was created");
        assert_contains(&err, "--allow-pending");
    };

    refused(
        &create("2", &[]),
        &format!("2 worker(s) need hosts but only 0 free ByoHost(s) matching {pool} are left"),
    );
    nothing_created().await;
    // One host matches, one does not: still short, and a server dry run says so too.
    add_host(format!("{ns}-h1"), json!({"pool": ns})).await;
    add_host(format!("{ns}-other"), json!({"pool": "elsewhere"})).await;
    refused(
        &create("2", &["--dry-run=server"]),
        "only 1 free ByoHost(s)",
    );
    nothing_created().await;
    // Enough hosts: created.
    add_host(format!("{ns}-h2"), json!({"pool": ns})).await;
    ok(&create("2", &[]));
    // BYOH claims both (as its controller labels a host it picks): a re-run still converges,
    // the claimed hosts counting as the cluster's; a third worker has no host.
    for h in ["h1", "h2"] {
        let patch = json!({"metadata": {"labels": {"cluster.x-k8s.io/cluster-name": "short"}},
            "status": {"machineRef": {"kind": "ByoMachine", "namespace": ns, "name": format!("short-md-0-{h}")}}});
        let name = format!("{ns}-{h}");
        hosts
            .patch(&name, &Default::default(), &kube::api::Patch::Merge(&patch))
            .await
            .unwrap();
        hosts
            .patch_status(&name, &Default::default(), &kube::api::Patch::Merge(&patch))
            .await
            .unwrap();
    }
    ok(&create("2", &[]));
    refused(&create("3", &[]), "(2 already serve it)");
    // --allow-pending: on purpose.
    ok(&create("3", &["--allow-pending"]));
    tb.delete_namespace(&c, &ns).await;
}

/// BCM: the control plane's address must be "within the internal network of the nodes". For
/// BYOH workers, `create` refuses an address in no network the hosts its workers would use
/// report, with nothing written; `--allow-foreign-address` (a load balancer elsewhere) and an
/// address inside are accepted. The hosts are planted with `status.network` because the test is
/// about how `create` reads that field, which the real agent writes (testbed::agent's hosts
/// report theirs from their own network namespace, see controllers/hosts.rs in kubectl-capi).
#[tokio::test]
async fn byoh_create_refuses_an_address_outside_the_hosts_networks() {
    let tb = testbed().await;
    let (c, ns) = tb.namespace("kamaji-net").await;
    // A selector of this namespace's own: BYOH picks from every namespace.
    let pool = format!("pool={ns}");
    let hosts = api(&c, &ns, &byoh_ar("ByoHost"));
    for (name, pool_label, addrs) in [
        ("h1", ns.as_str(), json!(["10.77.0.11/24", "fe80::11/64"])),
        // Malformed entries are skipped, not fatal.
        (
            "h2",
            ns.as_str(),
            json!(["10.78.0.12/24", "garbage", "10.78.0.13"]),
        ),
        // Not selected: its network does not count.
        ("other", "elsewhere", json!(["203.0.113.9/24"])),
    ] {
        let name = format!("{ns}-{name}");
        let h: DynamicObject = serde_json::from_value(json!({
            "apiVersion": "infrastructure.cluster.x-k8s.io/v1beta1", "kind": "ByoHost",
            "metadata": {"name": name, "labels": {"pool": pool_label}}, "spec": {}}))
        .unwrap();
        hosts.create(&Default::default(), &h).await.unwrap();
        let status = json!({"status": {"network": [
            {"networkInterfaceName": "eth0", "macAddr": "52:54:00:12:34:56", "isDefault": true,
             "connected": true, "ipAddrs": addrs}]}});
        hosts
            .patch_status(
                &name,
                &Default::default(),
                &kube::api::Patch::Merge(&status),
            )
            .await
            .unwrap();
    }
    let create = |name: &'static str, address: &'static str, extra: &[&'static str]| {
        let flags = [
            &[
                "--workers",
                "1",
                "--host-selector",
                &pool,
                "--service-address",
                address,
            ][..],
            extra,
        ]
        .concat();
        kamaji(tb, &ns, &create_args(name, "byoh", V, &flags))
    };
    let written = || async {
        let mut names = Vec::new();
        for r in [cluster_ar(), kcp_ar(), byoh_ar("ByoCluster")] {
            let items = api(&c, &ns, &r)
                .list(&Default::default())
                .await
                .unwrap()
                .items;
            names.extend(items.into_iter().filter_map(|o| o.metadata.name));
        }
        names
    };

    // Outside: refused in one line naming the address and the networks seen (the selected
    // hosts', each network once); exit 1, nothing written, the server dry run alike.
    for extra in [&[][..], &["--dry-run=server"]] {
        let o = create("far", "203.0.113.7", extra);
        assert_eq!(o.status.code(), Some(1), "{extra:?}: {}", stderr(&o));
        let err = stderr(&o);
        let lines: Vec<&str> = err.lines().collect();
        assert_eq!(
            lines[0],
            format!(
                "error: the control-plane address 203.0.113.7 is in no network of the 2 BYOH host(s) matching {pool} its workers would use (10.77.0.0/24, 10.78.0.0/24, fe80::/64); nothing was created"
            ),
            "{err}"
        );
        assert_eq!(lines.len(), 2, "{err}");
        assert_contains(lines[1], "--allow-foreign-address");
        assert!(
            o.stdout.is_empty(),
            "{}",
            String::from_utf8_lossy(&o.stdout)
        );
        assert_eq!(written().await, Vec::<String>::new());
    }
    // A load balancer elsewhere, on purpose: created.
    ok(&create("far", "203.0.113.7", &["--allow-foreign-address"]));
    let kcp = get(&c, &ns, &kcp_ar(), "far").await.expect("created");
    assert_eq!(kcp["spec"]["network"]["serviceAddress"], "203.0.113.7");
    // An address inside a network a host reports: created, no flag needed.
    ok(&create("near", "10.78.0.50", &[]));
    assert!(get(&c, &ns, &cluster_ar(), "near").await.is_some());
    tb.delete_namespace(&c, &ns).await;
}

/// A DataStore whose Secrets Kamaji cannot read is refused at `create --datastore`,
/// before anything is written, naming the Secret and key; once they exist, it is used.
#[tokio::test]
async fn a_datastore_whose_secrets_are_missing_is_refused_and_nothing_is_created() {
    let tb = testbed().await;
    let (c, ns) = tb.namespace("kamaji-ds").await;
    let ds_name = format!("broken-{ns}");
    let stores: Api<DynamicObject> =
        Api::all_with(c.clone(), &ar("kamaji.clastix.io", "v1alpha1", "DataStore"));
    let reference =
        json!({"secretReference": {"name": "ds-certs", "namespace": ns, "keyPath": "tls.crt"}});
    let ds: DynamicObject = serde_json::from_value(json!({
        "apiVersion": "kamaji.clastix.io/v1alpha1", "kind": "DataStore",
        "metadata": {"name": ds_name},
        "spec": {"driver": "etcd", "endpoints": ["etcd.example:2379"], "tlsConfig": {
            "certificateAuthority": {"certificate": {"content": "Q0E="}},
            "clientCertificate": {"certificate": reference, "privateKey": {"content": "S0VZ"}}}}}))
    .unwrap();
    stores.create(&Default::default(), &ds).await.unwrap();
    let create = || {
        let flags = ["--datastore", ds_name.as_str()];
        kamaji(tb, &ns, &create_args("on-ds", "none", V, &flags))
    };
    let refused = |says: String| {
        let o = create();
        assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
        assert_contains(
            &stderr(&o),
            &format!("DataStore \"{ds_name}\" cannot be used: {says}"),
        );
        assert_contains(&stderr(&o), "nothing was created");
    };
    refused(format!("Secret {ns}/ds-certs does not exist"));
    assert!(get(&c, &ns, &kcp_ar(), "on-ds").await.is_none());
    assert!(get(&c, &ns, &cluster_ar(), "on-ds").await.is_none());
    let secrets = api(&c, &ns, &secret_ar());
    let secret = |data: Value| -> DynamicObject {
        serde_json::from_value(json!({"apiVersion": "v1", "kind": "Secret",
            "metadata": {"name": "ds-certs"}, "data": data}))
        .unwrap()
    };
    secrets
        .create(&Default::default(), &secret(json!({"ca.crt": "Q0E="})))
        .await
        .unwrap();
    refused(format!("Secret {ns}/ds-certs has no key tls.crt"));
    assert!(get(&c, &ns, &kcp_ar(), "on-ds").await.is_none());
    secrets
        .replace(
            "ds-certs",
            &Default::default(),
            &secret(json!({"tls.crt": "Q0VSVA=="})),
        )
        .await
        .unwrap();
    ok(&create());
    assert!(get(&c, &ns, &kcp_ar(), "on-ds").await.is_some());
    stores.delete(&ds_name, &Default::default()).await.unwrap();
    tb.delete_namespace(&c, &ns).await;
}
