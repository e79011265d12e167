//! The whole life of a Kamaji-hosted cluster through the real binary, for `byoh`, `openstack`
//! and `none`: create --wait, list, status, kubeconfig get --merge, token join, certificate and
//! kubeconfig rotation, scale to sleep and back, upgrade v1.33 -> v1.35 one minor at a time,
//! delete --wait.
//!
//! Real: the API server, the CAPI v1.14 core manager, the kamaji-reconciler process.
//! SIMULATED: Kamaji (testbed::sim::kamaji makes TenantControlPlanes Ready and writes its
//! Secrets with the admin kubeconfig pointing at the testbed's own API server, so
//! `kubeconfig get` and `token join` talk to a real server).

mod common;

use common::*;
use serde_json::Value;

async fn lifecycle(infra: &str, extra: &[&str]) {
    let tb = testbed_with_capi().await;
    let (client, ns) = tb.namespace(&format!("life-{infra}")).await;
    let rec = Reconciler::start(tb, &ns);
    simulate_kamaji(tb, client.clone());
    let name = format!("c-{infra}");
    let name = name.as_str();
    let kcp_ar = ar(
        "controlplane.cluster.x-k8s.io",
        "v1alpha2",
        "KamajiControlPlane",
    );
    let tcp_ar = ar("kamaji.clastix.io", "v1alpha1", "TenantControlPlane");

    // create --wait
    let mut args = vec![
        "create",
        name,
        "--infrastructure",
        infra,
        "--kubernetes-version",
        "v1.33.0",
        "--datastore",
        "default",
        "--wait",
        "--timeout",
        "120s",
    ];
    args.extend_from_slice(extra);
    let out = kamaji(tb, &ns, &args);
    assert!(
        out.status.success(),
        "create failed:\n{}\n{}\n--- reconciler ---\n{}",
        stdout(&out),
        stderr(&out),
        rec.log_tail()
    );
    let err = stderr(&out);
    assert!(
        err.contains(&format!("cluster {name} is ready: control plane v1.33.0")),
        "{err}"
    );
    let endpoint = tb.server.trim_start_matches("https://").to_string();
    let (host, port) = endpoint.rsplit_once(':').unwrap();
    if infra == "openstack" {
        // Created only once Kamaji announced the endpoint, pre-filled.
        let osc = get(
            &client,
            &ns,
            &ar(
                "infrastructure.cluster.x-k8s.io",
                "v1beta1",
                "OpenStackCluster",
            ),
            name,
        )
        .await
        .unwrap();
        assert_eq!(osc["spec"]["apiServerFixedIP"], host);
        assert_eq!(
            osc["spec"]["apiServerPort"].as_i64().unwrap().to_string(),
            port
        );
        assert!(stdout(&out).contains("openstackcluster.infrastructure.cluster.x-k8s.io/c-openstack serverside-applied (apiServerFixedIP"), "{}", stdout(&out));
    }

    // list
    let list = ok(&kamaji(tb, &ns, &["list"]));
    let line = list
        .lines()
        .find(|l| l.starts_with(name))
        .unwrap_or_else(|| panic!("{list}"));
    assert!(
        line.contains("Ready")
            && line.contains("v1.33.0")
            && line.contains(&endpoint)
            && line.contains("default"),
        "{list}"
    );
    let header = list.lines().next().unwrap();
    for col in [
        "NAME",
        "CLUSTER",
        "VERSION",
        "STATUS",
        "READY/DESIRED",
        "ENDPOINT",
        "DATASTORE",
        "AGE",
    ] {
        assert!(header.contains(col), "{header}");
    }

    // status, human and JSON
    let text = ok(&kamaji(tb, &ns, &["status", name]));
    for section in [
        "Control plane",
        "Control-plane pods",
        "Conditions",
        "Addons",
        "Certificates",
        "Workers",
    ] {
        assert!(text.contains(section), "missing section {section}:\n{text}");
    }
    let status: Value =
        serde_json::from_str(&ok(&kamaji(tb, &ns, &["status", name, "-o", "json"]))).unwrap();
    assert_eq!(status["summary"]["cluster"], name);
    assert_eq!(status["summary"]["ready"], true);
    assert_eq!(status["summary"]["version"], "v1.33.0");
    assert_eq!(status["summary"]["endpoint"], endpoint);
    // The control-plane pods (SIMULATED Kamaji runs them with Kamaji's labels).
    let pods = status["pods"].as_array().unwrap();
    assert_eq!(pods.len(), 2, "{pods:?}");
    assert!(pods.iter().all(|p| p["ready"] == "3/3"), "{pods:?}");
    assert!(!status["conditions"].as_array().unwrap().is_empty());
    let certs = status["certificates"].as_array().unwrap();
    assert!(
        certs
            .iter()
            .any(|c| c["secret"] == format!("{name}-ca") && c["daysLeft"].as_i64().unwrap() > 0),
        "{certs:?}"
    );
    assert_eq!(
        status["addons"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|a| a["enabled"] == true)
            .count(),
        3
    );
    let yaml = ok(&kamaji(tb, &ns, &["status", name, "-o", "yaml"]));
    let mut back: Value = serde_saphyr::from_str(&yaml).unwrap();
    // The same data in both formats; only the age may have ticked between the two calls.
    let mut summary = status["summary"].clone();
    for s in [&mut back["summary"], &mut summary] {
        s.as_object_mut().unwrap().remove("age");
    }
    assert_eq!(back["summary"], summary);

    // kubeconfig get, --merge (atomic, 0600, backup, no overwrite), and it works against a real server
    let kc = ok(&kamaji(tb, &ns, &["kubeconfig", "get", name]));
    assert!(kc.contains(&tb.server), "{kc}");
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("config");
    std::fs::write(&file, "apiVersion: v1\nkind: Config\ncurrent-context: mine\ncontexts:\n- name: mine\n  context: {cluster: mine, user: me}\nclusters:\n- name: mine\n  cluster: {server: 'https://example.invalid'}\nusers:\n- name: me\n  user: {token: x}\n").unwrap();
    let f = file.to_str().unwrap();
    let out = ok(&kamaji(
        tb,
        &ns,
        &["kubeconfig", "get", name, "--merge", "--merge-file", f],
    ));
    let ctx = format!("{name}-admin@{name}");
    assert!(
        out.contains(&format!("context \"{ctx}\" merged in {f}")),
        "{out}"
    );
    use std::os::unix::fs::PermissionsExt;
    assert_eq!(
        std::fs::metadata(&file).unwrap().permissions().mode() & 0o777,
        0o600
    );
    assert!(dir.path().join("config.bak").exists());
    let again = ok(&kamaji(
        tb,
        &ns,
        &["kubeconfig", "get", name, "--merge", "--merge-file", f],
    ));
    assert!(again.contains("already present"), "{again}");
    let k = std::process::Command::new(KUBECTL)
        .args([
            "--kubeconfig",
            f,
            "--context",
            &ctx,
            "get",
            "namespace",
            &ns,
            "-o",
            "name",
        ])
        .output()
        .unwrap();
    assert!(k.status.success(), "{}", String::from_utf8_lossy(&k.stderr));
    // A different entry under the same name is refused, not overwritten.
    let mut text = std::fs::read_to_string(&file).unwrap();
    text = text.replace(&tb.server, "https://10.255.255.1:6443");
    std::fs::write(&file, &text).unwrap();
    let line = fails(
        &kamaji(
            tb,
            &ns,
            &["kubeconfig", "get", name, "--merge", "--merge-file", f],
        ),
        1,
    );
    assert!(
        line.contains("already has different entries named cluster/"),
        "{line}"
    );

    // token join: a real bootstrap token in the tenant (the testbed itself) and the CA hash.
    let join = ok(&kamaji(tb, &ns, &["token", "join", name]));
    let words: Vec<&str> = join.split_whitespace().collect();
    assert_eq!(
        &words[..3],
        ["kubeadm", "join", endpoint.as_str()],
        "{join}"
    );
    let token = words[4];
    let (id, _) = token.split_once('.').unwrap();
    let ca = std::fs::read(tb.dir.join("pki/serving-ca.crt")).unwrap();
    assert_eq!(words[6], shared::build::pki::ca_cert_hash(&ca).unwrap());
    let secret = get(
        &client,
        "kube-system",
        &ar("", "v1", "Secret"),
        &format!("bootstrap-token-{id}"),
    )
    .await;
    assert!(secret.is_some(), "bootstrap-token-{id} not created");
    let yaki = ok(&kamaji(
        tb,
        &ns,
        &["token", "join", name, "--flavour", "yaki"],
    ));
    assert!(
        yaki.contains(&format!("JOIN_TOKEN={token}"))
            && yaki.contains("KUBERNETES_VERSION=v1.33.0"),
        "{yaki}"
    );

    // rotation deletes Kamaji's Secrets, which Kamaji re-issues
    let before = get(
        &client,
        &ns,
        &ar("", "v1", "Secret"),
        &format!("{name}-api-server-certificate"),
    )
    .await
    .unwrap();
    let out = ok(&kamaji(tb, &ns, &["certificates", "rotate", name, "--all"]));
    assert!(
        out.contains(&format!(
            "secret/{name}-api-server-certificate deleted: Kamaji re-issues it"
        )),
        "{out}"
    );
    let after = get(
        &client,
        &ns,
        &ar("", "v1", "Secret"),
        &format!("{name}-api-server-certificate"),
    )
    .await;
    assert!(
        after.is_none_or(|a| a["metadata"]["uid"] != before["metadata"]["uid"]),
        "the Secret was not deleted"
    );
    let line = fails(
        &kamaji(
            tb,
            &ns,
            &[
                "certificates",
                "rotate",
                name,
                "--certificates",
                "front-proxy-client",
            ],
        ),
        1,
    );
    assert!(
        line.contains("front-proxy-client-certificate\" not found"),
        "{line}"
    );
    ok(&kamaji(tb, &ns, &["kubeconfig", "rotate", name]));

    // scale to sleep and back
    // (Not --wait: the testbed's Kamaji v1.0.0 CRD has no "Sleeping" status, so the simulator
    // cannot report a sleeping control plane; the reconciler must still pass 0 replicas on.)
    let out = ok(&kamaji(tb, &ns, &["scale", name, "--replicas", "0"]));
    assert!(out.contains("scaled from 2 to 0 (asleep)"), "{out}");
    let mut slept = false;
    for _ in 0..100 {
        let tcp = get(&client, &ns, &tcp_ar, name).await.unwrap();
        if tcp["spec"]["controlPlane"]["deployment"]["replicas"] == 0 {
            slept = true;
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(200)).await;
    }
    assert!(
        slept,
        "the TenantControlPlane did not get 0 replicas\n{}",
        rec.log_tail()
    );
    let text = ok(&kamaji(tb, &ns, &["status", name]));
    assert!(text.contains("asleep"), "{text}");
    ok(&kamaji(
        tb,
        &ns,
        &[
            "scale",
            name,
            "--replicas",
            "2",
            "--wait",
            "--timeout",
            "60s",
        ],
    ));

    // upgrade v1.33 -> v1.35: the plan, then one minor at a time
    let plan = ok(&kamaji(
        tb,
        &ns,
        &["upgrade", name, "--to", "v1.35.0", "--plan", "-o", "json"],
    ));
    let plan: Value = serde_json::from_str(&plan).unwrap();
    assert_eq!(
        plan["controlPlaneSteps"],
        serde_json::json!(["v1.34.0", "v1.35.0"])
    );
    let k = get(&client, &ns, &kcp_ar, name).await.unwrap();
    assert_eq!(k["spec"]["version"], "v1.33.0", "--plan changed something");
    let out = kamaji(
        tb,
        &ns,
        &["upgrade", name, "--to", "v1.35.0", "--timeout", "90s"],
    );
    assert!(
        out.status.success(),
        "upgrade failed:\n{}\n{}\n--- reconciler ---\n{}",
        stdout(&out),
        stderr(&out),
        rec.log_tail()
    );
    let err = stderr(&out);
    assert!(
        err.contains("step 1/2") && err.contains("runs v1.34.0") && err.contains("step 2/2"),
        "{err}"
    );
    let k = get(&client, &ns, &kcp_ar, name).await.unwrap();
    assert_eq!(k["status"]["version"], "v1.35.0");
    if infra != "none" {
        let md = get(
            &client,
            &ns,
            &ar("cluster.x-k8s.io", "v1beta2", "MachineDeployment"),
            &format!("{name}-md-0"),
        )
        .await
        .unwrap();
        assert_eq!(md["spec"]["template"]["spec"]["version"], "v1.35.0");
    }
    let line = fails(&kamaji(tb, &ns, &["upgrade", name, "--to", "v1.34.0"]), 2);
    assert!(line.contains("cannot downgrade"), "{line}");

    // datastores
    let ds = ok(&kamaji(tb, &ns, &["datastores", "-o", "json"]));
    let ds: Value = serde_json::from_str(&ds).unwrap();
    let d = ds["items"]
        .as_array()
        .unwrap()
        .iter()
        .find(|d| d["name"] == "default")
        .unwrap();
    assert!(
        d["usedBy"]
            .as_array()
            .unwrap()
            .iter()
            .any(|u| u == &Value::from(format!("{ns}/{name}"))),
        "{d}"
    );

    // delete: refuses without a terminal, then --yes --wait
    let line = fails(&kamaji(tb, &ns, &["delete", name]), 2);
    assert!(line.contains("stdin is not a terminal"), "{line}");
    let out = kamaji(
        tb,
        &ns,
        &["delete", name, "--yes", "--wait", "--timeout", "120s"],
    );
    assert!(
        out.status.success(),
        "delete failed:\n{}\n{}",
        stdout(&out),
        stderr(&out)
    );
    assert!(stderr(&out).contains("This deletes"), "{}", stderr(&out));
    assert!(
        stdout(&out).contains("no longer holds its data"),
        "{}",
        stdout(&out)
    );
    assert!(get(&client, &ns, &kcp_ar, name).await.is_none());
    assert!(get(&client, &ns, &tcp_ar, name).await.is_none());
    assert!(
        get(
            &client,
            &ns,
            &ar("cluster.x-k8s.io", "v1beta2", "Cluster"),
            name
        )
        .await
        .is_none()
    );
    drop(rec);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn lifecycle_byoh() {
    lifecycle("byoh", &["--workers", "0", "--host-selector", "site=ams"]).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn lifecycle_openstack() {
    lifecycle(
        "openstack",
        &[
            "--workers",
            "0",
            "--flavor",
            "m1.large",
            "--image",
            "ubuntu-2404-kube-v1.33.0",
        ],
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn lifecycle_none() {
    lifecycle("none", &[]).await;
}

/// The KamajiControlPlane of the seed discussion, translated to v1alpha2, applied with a
/// Cluster that points at it: the reconciler's TenantControlPlane, checked field by field.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn seed_kamaji_control_plane_becomes_this_tenant_control_plane() {
    use kube::api::{Api, DynamicObject, Patch, PatchParams};
    let tb = testbed_with_capi().await;
    let (client, ns) = tb.namespace("seed").await;
    let rec = Reconciler::start(tb, &ns);
    let name = "kamajicontrolplane-sample";
    let kcp: Value = serde_saphyr::from_str(include_str!("data/seed-kcp-v1alpha2.yaml")).unwrap();
    let kcp_ar = ar(
        "controlplane.cluster.x-k8s.io",
        "v1alpha2",
        "KamajiControlPlane",
    );
    let cluster_ar = ar("cluster.x-k8s.io", "v1beta2", "Cluster");
    let pp = PatchParams::apply("seed-test").force();
    Api::<DynamicObject>::namespaced_with(client.clone(), &ns, &kcp_ar)
        .patch(name, &pp, &Patch::Apply(&kcp))
        .await
        .unwrap();
    let cluster = serde_json::json!({
        "apiVersion": "cluster.x-k8s.io/v1beta2", "kind": "Cluster",
        "metadata": {"name": "capi-quickstart", "namespace": ns},
        "spec": {
            "clusterNetwork": {"pods": {"cidrBlocks": ["192.168.0.0/16"]}, "services": {"cidrBlocks": ["10.128.0.0/12"]}, "apiServerPort": 6443, "serviceDomain": "cluster.local"},
            "controlPlaneRef": {"apiGroup": "controlplane.cluster.x-k8s.io", "kind": "KamajiControlPlane", "name": name},
        },
    });
    Api::<DynamicObject>::namespaced_with(client.clone(), &ns, &cluster_ar)
        .patch("capi-quickstart", &pp, &Patch::Apply(&cluster))
        .await
        .unwrap();
    let tcp_ar = ar("kamaji.clastix.io", "v1alpha1", "TenantControlPlane");
    let mut tcp = None;
    for _ in 0..300 {
        tcp = get(&client, &ns, &tcp_ar, name).await;
        if tcp.is_some() {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(200)).await;
    }
    let tcp = tcp.unwrap_or_else(|| panic!("no TenantControlPlane\n{}", rec.log_tail()));
    let s = &tcp["spec"];
    let d = &s["controlPlane"]["deployment"];
    let k = &kcp["spec"];
    // Owned by the KamajiControlPlane (garbage collection deletes it with it).
    assert_eq!(
        tcp["metadata"]["ownerReferences"][0]["kind"],
        "KamajiControlPlane"
    );
    assert_eq!(s["dataStore"], "default");
    assert_eq!(s["kubernetes"]["version"], "v1.33.0");
    assert_eq!(
        s["kubernetes"]["admissionControllers"],
        k["admissionControllers"]
    );
    assert_eq!(
        s["kubernetes"]["kubelet"]["preferredAddressTypes"],
        k["kubelet"]["preferredAddressTypes"]
    );
    assert_eq!(s["kubernetes"]["kubelet"]["cgroupfs"], "systemd");
    assert_eq!(d["replicas"], 2);
    assert_eq!(d["registrySettings"]["registry"], "registry.k8s.io");
    assert_eq!(d["registrySettings"]["apiServerImage"], "kube-apiserver");
    assert_eq!(
        d["registrySettings"]["controllerManagerImage"],
        "kube-controller-manager"
    );
    assert_eq!(d["registrySettings"]["schedulerImage"], "kube-scheduler");
    assert_eq!(d["extraArgs"]["apiServer"], k["apiServer"]["extraArgs"]);
    assert_eq!(
        d["extraArgs"]["controllerManager"],
        k["controllerManager"]["extraArgs"]
    );
    assert_eq!(
        d["additionalVolumeMounts"]["apiServer"],
        k["apiServer"]["extraVolumeMounts"]
    );
    assert_eq!(
        d["additionalVolumeMounts"]["controllerManager"],
        k["controllerManager"]["extraVolumeMounts"]
    );
    assert_eq!(d["resources"]["apiServer"]["requests"]["cpu"], "750m");
    assert_eq!(d["resources"]["apiServer"]["requests"]["memory"], "256Mi");
    assert_eq!(d["resources"]["controllerManager"]["limits"]["cpu"], "500m");
    assert_eq!(d["resources"]["scheduler"]["limits"]["memory"], "128Mi");
    assert_eq!(d["nodeSelector"], k["deployment"]["nodeSelector"]);
    assert_eq!(d["runtimeClassName"], "runc");
    assert_eq!(d["strategy"]["rollingUpdate"]["maxSurge"], "100%");
    assert_eq!(d["strategy"]["rollingUpdate"]["maxUnavailable"], 0);
    assert_eq!(d["affinity"], k["deployment"]["affinity"]);
    assert_eq!(d["tolerations"], k["deployment"]["tolerations"]);
    assert_eq!(
        d["topologySpreadConstraints"],
        k["deployment"]["topologySpreadConstraints"]
    );
    assert_eq!(d["additionalVolumes"], k["deployment"]["extraVolumes"]);
    assert_eq!(s["controlPlane"]["service"]["serviceType"], "LoadBalancer");
    assert_eq!(
        s["controlPlane"]["service"]["additionalMetadata"]["labels"],
        k["network"]["serviceLabels"]
    );
    assert_eq!(
        s["controlPlane"]["service"]["additionalMetadata"]["annotations"],
        k["network"]["serviceAnnotations"]
    );
    let sans = s["networkProfile"]["certSANs"].as_array().unwrap();
    assert!(
        sans.contains(&Value::from(
            "kamajicontrolplane-sample.eu-west-01.cloudapp.azure.com"
        )),
        "{sans:?}"
    );
    // From the Cluster's clusterNetwork.
    assert_eq!(s["networkProfile"]["port"], 6443);
    let pods = s["networkProfile"]
        .get("podCidrs")
        .cloned()
        .unwrap_or_else(|| serde_json::json!([s["networkProfile"]["podCidr"]]));
    let services = s["networkProfile"]
        .get("serviceCidrs")
        .cloned()
        .unwrap_or_else(|| serde_json::json!([s["networkProfile"]["serviceCidr"]]));
    assert_eq!(pods, serde_json::json!(["192.168.0.0/16"]));
    assert_eq!(services, serde_json::json!(["10.128.0.0/12"]));
    for addon in ["coreDNS", "kubeProxy", "konnectivity"] {
        assert!(
            s["addons"].get(addon).is_some(),
            "addon {addon} missing: {}",
            s["addons"]
        );
    }
    // And kubectl kamaji sees it.
    let status: Value =
        serde_json::from_str(&ok(&kamaji(tb, &ns, &["status", name, "-o", "json"]))).unwrap();
    assert_eq!(status["summary"]["cluster"], "capi-quickstart");
    assert_eq!(status["summary"]["tenantControlPlane"], name);
}

/// BYOH workers: `create --workers 1 --host-selector ... --wait` passes the fourth phase once a
/// matching host joined (SIMULATED BYOH agents and controller; real CAPI core and kubeadm
/// bootstrap managers; the reconciler; SIMULATED Kamaji).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn byoh_workers_join() {
    use testbed::sim::{SimOptions, byoh};
    let tb = testbed_with_capi().await;
    let (client, ns) = tb.namespace("life-byoh-workers").await;
    let _rec = Reconciler::start(tb, &ns);
    simulate_kamaji(tb, client.clone());
    let opts = SimOptions {
        delay: std::time::Duration::from_millis(300),
        failure_rate: 0.0,
        tick: std::time::Duration::from_millis(200),
        ..SimOptions::default()
    };
    let pool = byoh::Pool {
        namespace: ns.clone(),
        count: 2,
        labels: vec![("site".into(), "ams".into())],
        name_prefix: format!("{ns}-h"),
    };
    tokio::spawn(byoh::run_agents(client.clone(), pool, opts.clone()));
    tokio::spawn(byoh::run_controller(client.clone(), opts));
    let out = kamaji(
        tb,
        &ns,
        &[
            "create",
            "w",
            "--infrastructure",
            "byoh",
            "--kubernetes-version",
            "v1.33.0",
            "--workers",
            "1",
            "--host-selector",
            "site=ams",
            "--wait",
            "--timeout",
            "150s",
        ],
    );
    assert!(
        out.status.success(),
        "{}\n{}\n--- reconciler ---\n{}",
        stdout(&out),
        stderr(&out),
        _rec.log_tail()
    );
    let err = stderr(&out);
    assert!(
        err.contains("cluster w is ready") && err.contains("1/1 workers"),
        "{err}"
    );
    let status: Value =
        serde_json::from_str(&ok(&kamaji(tb, &ns, &["status", "w", "-o", "json"]))).unwrap();
    assert_eq!(status["workers"][0]["ready"], 1, "{status}");
}
