//! The whole life of a Kamaji-hosted cluster through the real binary: create --wait, list,
//! status, kubeconfig get --merge, token join, certificate and kubeconfig rotation, scale to sleep
//! and back, upgrade v1.35 -> v1.36, delete --wait. `byoh` goes through all of it; `none` through
//! create, create --merge-kubeconfig, upgrade (no workers) and delete; `openstack` through create and delete.
//!
//! Real: the API server, the CAPI v1.14 core and kubeadm bootstrap managers, the Kamaji v1.0.0
//! operator (each tenant runs real kube-apiserver, kube-controller-manager and kube-scheduler
//! processes under the testbed's SIMULATED kubelet), the BYOH v0.5.0 controller manager, and the
//! kamaji-reconciler process. SIMULATED: only the BYOH host agents' OS work (their kubelets
//! join the live tenant for real).
//!
//! Each test runs one tenant (about three processes); the tests take turns, so that a 2-core
//! machine runs one tenant of this file at a time.

use std::path::Path;
use std::time::Duration;

use crate::common::*;
use kube::Client;
use kube::api::ApiResource;
use serde_json::Value;
use testbed::Testbed;
use testbed::fixtures::reconciler::assert_ran;
use testbed::fixtures::run::words;
use testbed::fixtures::run::{assert_contains, assert_lacks};

/// One real tenant at a time (see the module comment).
static TURN: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

async fn lifecycle(infra: &str, extra: &[&str]) {
    let _turn = TURN.lock().await;
    let (tb, client, ns, rec) = live_namespace(&format!("life-{infra}")).await;
    let name = format!("c-{infra}");
    let name = name.as_str();
    let (kcp_ar, tcp_ar) = (kcp_ar(), tcp_ar());
    let port = free_port();

    // create --wait
    let extra = [&["--datastore", "default"], extra].concat();
    let out = create_tenant(tb, &ns, name, infra, &port.to_string(), &extra);
    assert_ran(&out, "create", &rec);
    let err = stderr(&out);
    assert_contains(
        &err,
        &format!("cluster {name} is ready: control plane v1.35.4"),
    );
    // Kamaji announces the tenant's own endpoint: the Service address and port it was given.
    let endpoint = format!("127.0.0.1:{port}");
    // Kamaji v1.0.0 reports a tenant Ready before its kubeadm phases ran: they run in the
    // tenant's "soot" manager, started once the TenantControlPlane is Ready
    // (controllers/soot/manager.go), among them the bootstrap-token phase and the one that binds
    // admin.conf's kubeadm:cluster-admins group to cluster-admin
    // (internal/resources/kubeadm_phases.go, PhaseClusterAdminRBAC). `create --wait` waits for
    // both, so right after it the admin kubeconfig works and a join token can be made.
    let tenant_kc = tenant_kubeconfig(tb, &ns, name);
    let tcp = get(&client, &ns, &tcp_ar, name).await.unwrap();
    assert!(
        tcp["status"]["kubeadmPhase"]["bootstrapToken"]["checksum"]
            .as_str()
            .is_some_and(|c| !c.is_empty()),
        "create --wait returned before Kamaji's bootstrap-token phase: {}",
        tcp["status"]
    );
    let admin = kubectl(
        &tenant_kc,
        &["get", "namespace", "kube-system", "-o", "name"],
    );
    assert!(
        admin.status.success(),
        "create --wait returned before admin.conf may read the tenant: {}",
        String::from_utf8_lossy(&admin.stderr)
    );
    if infra == "none" {
        let port = port.to_string();
        merge_on_rerun(tb, &ns, name, &port, &extra);
        certificates_listed(tb, &client, &ns, name).await;
    }
    let (host, port_str) = endpoint.rsplit_once(':').unwrap();
    if infra == "openstack" {
        // Pre-filled with the endpoint. The tenants here have a pre-assigned address (the
        // testbed has no load balancer), so create applies the OpenStackCluster with it at once,
        // in order with the rest; the path that waits for Kamaji to announce an endpoint is
        // covered by kcore::kamaji::create's unit tests.
        let osc = object(
            &client,
            &ns,
            "infrastructure.cluster.x-k8s.io/v1beta1",
            "OpenStackCluster",
            name,
        )
        .await;
        assert_eq!(osc["spec"]["apiServerFixedIP"], host);
        assert_eq!(
            osc["spec"]["apiServerPort"].as_i64().unwrap().to_string(),
            port_str
        );
        let text = stdout(&out);
        let lines: Vec<&str> = text.lines().collect();
        let osc_line = lines.iter().position(|l| {
            *l == "openstackcluster.infrastructure.cluster.x-k8s.io/c-openstack serverside-applied"
        });
        let cluster_line = lines
            .iter()
            .position(|l| *l == "cluster.cluster.x-k8s.io/c-openstack serverside-applied");
        assert!(
            osc_line.is_some() && osc_line < cluster_line,
            "the OpenStackCluster is applied before the Cluster that references it: {text}"
        );
    }

    // Every infrastructure creates and deletes its own way; what happens in between does not
    // depend on it, so one tenant (byoh) goes through all of it, `none` (no workers) through the
    // upgrade, whose steps differ without a MachineDeployment, and openstack through neither:
    // each tenant here is a real control plane on a 2-core machine.
    if infra == "byoh" {
        read_rotate_and_sleep(tb, &client, &ns, name, &endpoint, &tenant_kc).await;
    }
    if infra != "openstack" {
        upgrade(tb, &client, &ns, name, &tenant_kc, &kcp_ar, &rec, infra).await;
    }
    if infra == "byoh" {
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
    }

    // delete: refuses without a terminal, then --yes --wait
    let line = fails(&kamaji(tb, &ns, &["delete", name]), 2);
    assert_contains(&line, "stdin is not a terminal");
    let out = delete_wait(tb, &ns, name, "300s");
    ok(&out);
    assert_contains(&stderr(&out), "This deletes");
    assert_contains(&stdout(&out), "no longer holds its data");
    assert!(get(&client, &ns, &kcp_ar, name).await.is_none());
    assert!(get(&client, &ns, &tcp_ar, name).await.is_none());
    assert!(get(&client, &ns, &cluster_ar(), name).await.is_none());
    drop(rec);
}

/// `certificates NAME` on the live tenant: each certificate Kamaji issued, read back from its
/// Secrets here, soonest expiry first, with what renews it (Kamaji's lifecycle label, or a
/// rotation to ask for the CA); `-A` finds it too.
async fn certificates_listed(tb: &Testbed, client: &Client, ns: &str, name: &str) {
    let listed: Value =
        serde_json::from_str(&ok(&kamaji(tb, ns, &["certificates", name, "-o", "json"]))).unwrap();
    let items = listed["items"].as_array().unwrap();
    let secrets: kube::Api<k8s_openapi::api::core::v1::Secret> =
        kube::Api::namespaced(client.clone(), ns);
    for (suffix, key, renewed) in [
        ("ca", "ca.crt", "no one: kubectl kamaji certificates rotate"),
        (
            "api-server-certificate",
            "apiserver.crt",
            "Kamaji, a day before it expires",
        ),
        (
            "admin-kubeconfig",
            "admin.conf",
            "Kamaji, a day before it expires",
        ),
    ] {
        let secret = format!("{name}-{suffix}");
        assert!(
            secrets.get_opt(&secret).await.unwrap().is_some(),
            "{secret}"
        );
        let row = items
            .iter()
            .find(|c| c["secret"] == secret.as_str() && c["key"] == key)
            .unwrap_or_else(|| panic!("no {secret} {key} in {listed:#}"));
        assert!(
            row["renewedBy"].as_str().unwrap().starts_with(renewed),
            "{row}"
        );
        assert!(row["daysLeft"].as_i64().unwrap() > 300, "{row}");
    }
    let expiries: Vec<&str> = items
        .iter()
        .map(|c| c["notAfter"].as_str().unwrap())
        .collect();
    assert!(expiries.windows(2).all(|w| w[0] <= w[1]), "{expiries:?}");
    let all = ok(&kamaji(tb, ns, &["certificates", "-A"]));
    assert!(
        all.lines()
            .any(|l| l.starts_with(ns) && l.contains(&format!("{name}-api-server-certificate"))),
        "{all}"
    );
}

/// `create --merge-kubeconfig=FILE` without `--wait`, re-run on the ready tenant with the flags
/// it was created with (which converge: nothing changes): it waits for the control plane alone,
/// then merges its admin kubeconfig into FILE through the one merge of `kubeconfig get --merge`,
/// keeping FILE's entries and its owner's mode, and kubectl reaches the tenant with the merged context. Run
/// again, the file is already up to date.
fn merge_on_rerun(tb: &Testbed, ns: &str, name: &str, port: &str, extra: &[&str]) {
    use std::os::unix::fs::PermissionsExt;
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("config");
    let other = "apiVersion: v1\nkind: Config\nclusters:\n- name: other\n  cluster:\n    server: https://192.0.2.1:6443\ncontexts:\n- name: other\n  context:\n    cluster: other\n    user: other\ncurrent-context: other\nusers:\n- name: other\n  user:\n    token: other-token\n";
    std::fs::write(&file, other).unwrap();
    std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o740)).unwrap();
    let merge = format!("--merge-kubeconfig={}", file.display());
    let mut args = create_args(name, "none", "v1.35.4", extra);
    args.extend(tenant_flags(port));
    args.extend([merge.as_str(), "--timeout", "120s"]);
    let context = format!("{name}-admin@{name}");

    let out = kamaji(tb, ns, &args);
    ok(&out);
    let err = stderr(&out);
    assert_contains(
        &err,
        &format!("the control plane of {name} answers at 127.0.0.1:{port}"),
    );
    assert_contains(
        &err,
        &format!("merged context \"{context}\" into {}", file.display()),
    );
    // Without --wait it does not wait for the workers.
    assert_lacks(&err, &format!("cluster {name} is ready"));
    let mode = std::fs::metadata(&file).unwrap().permissions().mode() & 0o777;
    // The owner's bits stay; group and others lose access to the credentials (the merge's rule).
    assert_eq!(mode, 0o700, "the merge changed the owner's mode");
    assert_eq!(
        std::fs::read_to_string(dir.path().join("config.bak")).unwrap(),
        other
    );
    let merged = std::fs::read_to_string(&file).unwrap();
    assert_contains(&merged, "name: other");
    assert_contains(&merged, "current-context: other");
    let o = kubectl(
        &file,
        &[
            "--context",
            &context,
            "get",
            "namespace",
            "kube-system",
            "-o",
            "name",
        ],
    );
    assert!(
        o.status.success() && stdout(&o).trim() == "namespace/kube-system",
        "the merged context does not reach the tenant: {}{}",
        stdout(&o),
        stderr(&o)
    );

    let out = kamaji(tb, ns, &args);
    ok(&out);
    assert_contains(&stderr(&out), "already up to date");
    assert_eq!(std::fs::read_to_string(&file).unwrap(), merged);
}

/// list, status, kubeconfig get/--merge, token join, certificate and kubeconfig rotation, and
/// scale to sleep and back, on a ready tenant.
async fn read_rotate_and_sleep(
    tb: &Testbed,
    client: &Client,
    ns: &str,
    name: &str,
    endpoint: &str,
    tenant_kc: &Path,
) {
    let tcp_ar = tcp_ar();
    // Kamaji's Secret `<name>-<suffix>`.
    let kamaji_secret = |suffix: &str| {
        let secret = format!("{name}-{suffix}");
        async move { get(client, ns, &secret_ar(), &secret).await }
    };
    // list
    let list = ok(&kamaji(tb, ns, &["list"]));
    let line = list
        .lines()
        .find(|l| l.starts_with(name))
        .unwrap_or_else(|| panic!("{list}"));
    assert!(
        line.contains("Ready")
            && line.contains("v1.35.4")
            && line.contains(endpoint)
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
        assert_contains(header, col);
    }

    // status, human and JSON
    let text = ok(&kamaji(tb, ns, &["status", name]));
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
        serde_json::from_str(&ok(&kamaji(tb, ns, &["status", name, "-o", "json"]))).unwrap();
    assert_eq!(status["summary"]["cluster"], name);
    assert_eq!(status["summary"]["ready"], true);
    assert_eq!(status["summary"]["version"], "v1.35.4");
    assert_eq!(status["summary"]["endpoint"], *endpoint);
    // The control-plane pod of Kamaji's Deployment (one replica), with its three containers.
    let pods = status["pods"].as_array().unwrap();
    assert_eq!(pods.len(), 1, "{pods:?}");
    assert!(pods.iter().all(|p| p["ready"] == "3/3"), "{pods:?}");
    assert!(!status["conditions"].as_array().unwrap().is_empty());
    let certs = status["certificates"].as_array().unwrap();
    assert!(
        certs
            .iter()
            .any(|c| c["secret"] == format!("{name}-ca") && c["daysLeft"].as_i64().unwrap() > 0),
        "{certs:?}"
    );
    // --addons none: the three addons are listed, none enabled.
    let addons = status["addons"].as_array().unwrap();
    assert_eq!(addons.len(), 3, "{addons:?}");
    assert!(addons.iter().all(|a| a["enabled"] == false), "{addons:?}");
    let yaml = ok(&kamaji(tb, ns, &["status", name, "-o", "yaml"]));
    let mut back: Value = serde_saphyr::from_str(&yaml).unwrap();
    // The same data in both formats; only the age may have ticked between the two calls.
    let mut summary = status["summary"].clone();
    for s in [&mut back["summary"], &mut summary] {
        s.as_object_mut().unwrap().remove("age");
    }
    assert_eq!(back["summary"], summary);

    // kubeconfig get, --merge (atomic, 0600, backup, no overwrite), and it works against the
    // live tenant API server
    let kc = ok(&kamaji(tb, ns, &["kubeconfig", "get", name]));
    assert_contains(&kc, &format!("https://{endpoint}"));
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("config");
    std::fs::write(&file, "apiVersion: v1\nkind: Config\ncurrent-context: mine\ncontexts:\n- name: mine\n  context: {cluster: mine, user: me}\nclusters:\n- name: mine\n  cluster: {server: 'https://example.invalid'}\nusers:\n- name: me\n  user: {token: x}\n").unwrap();
    let f = file.to_str().unwrap();
    let merge = || {
        kamaji(
            tb,
            ns,
            &["kubeconfig", "get", name, "--merge", "--merge-file", f],
        )
    };
    let merged = merge();
    assert!(ok(&merged).is_empty(), "a merge prints nothing on stdout");
    let ctx = format!("{name}-admin@{name}");
    assert_contains(
        &stderr(&merged),
        &format!("merged context \"{ctx}\" into {f}: added"),
    );
    use std::os::unix::fs::PermissionsExt;
    assert_eq!(
        std::fs::metadata(&file).unwrap().permissions().mode() & 0o777,
        0o600
    );
    assert!(dir.path().join("config.bak").exists());
    let again = merge();
    ok(&again);
    assert_contains(&stderr(&again), "already up to date");
    let k = kubectl(
        &file,
        &[
            "--context",
            &ctx,
            "get",
            "namespace",
            "kube-system",
            "-o",
            "name",
        ],
    );
    assert!(k.status.success(), "{}", String::from_utf8_lossy(&k.stderr));
    assert_eq!(
        String::from_utf8_lossy(&k.stdout).trim(),
        "namespace/kube-system"
    );
    // A different entry under the same name is refused, not overwritten.
    let mut text = std::fs::read_to_string(&file).unwrap();
    text = text.replace(&format!("https://{endpoint}"), "https://10.255.255.1:6443");
    std::fs::write(&file, &text).unwrap();
    let line = fails(&merge(), 1);
    assert_contains(&line, "your kubeconfig already has cluster \"");

    // token join: a real bootstrap token in the tenant's kube-system and the hash of the
    // tenant's CA (Kamaji's `<name>-ca` Secret).
    let join = ok(&kamaji(tb, ns, &["token", "join", name]));
    let words: Vec<&str> = join.split_whitespace().collect();
    assert_eq!(&words[..3], ["kubeadm", "join", endpoint], "{join}");
    let token = words[4];
    let (id, _) = token.split_once('.').unwrap();
    let ca_secret = kamaji_secret("ca").await.unwrap();
    use base64::Engine;
    let ca = base64::engine::general_purpose::STANDARD
        .decode(ca_secret["data"]["ca.crt"].as_str().unwrap())
        .unwrap();
    assert_eq!(words[6], kcore::build::pki::ca_cert_hash(&ca).unwrap());
    let secret = bootstrap_token_secret(tenant_kc, id, "name");
    assert!(
        secret.status.success(),
        "bootstrap-token-{id} not created in the tenant: {}",
        String::from_utf8_lossy(&secret.stderr)
    );
    let yaki = ok(&kamaji(
        tb,
        ns,
        &["token", "join", name, "--flavour", "yaki"],
    ));
    assert!(
        yaki.contains(&format!("JOIN_TOKEN={token}"))
            && yaki.contains("KUBERNETES_VERSION=v1.35.4"),
        "{yaki}"
    );

    // rotation deletes Kamaji's Secrets, which Kamaji re-issues
    let before = object(
        client,
        ns,
        "v1",
        "Secret",
        &format!("{name}-api-server-certificate"),
    )
    .await;
    let out = ok(&kamaji(
        tb,
        ns,
        &[
            "certificates",
            "rotate",
            name,
            "--all",
            "--verify",
            "--timeout",
            "180s",
        ],
    ));
    let deleted = format!("secret/{name}-api-server-certificate deleted: Kamaji re-issues it");
    assert_contains(&out, &deleted);
    // --verify: each path tried after Kamaji re-issued them.
    for path in [
        "API server serving certificate: ok (127.0.0.1:",
        "admin kubeconfig: ok (Kubernetes v1.35.4)",
        "Cluster API's kubeconfig: ok (Secret ",
        "Cluster API's CA: ok (Secret ",
        "API server to kubelet: ",
    ] {
        assert_contains(&out, path);
    }
    assert_contains(&out, "every path that uses its certificates works");
    wait_until(
        &format!("Kamaji to re-issue {name}-api-server-certificate and {name}-front-proxy-client-certificate"),
        Duration::from_secs(120),
        || async {
            let after = kamaji_secret("api-server-certificate").await;
            let front_proxy = kamaji_secret("front-proxy-client-certificate").await;
            let reissued = after
                .as_ref()
                .is_some_and(|a| a["metadata"]["uid"] != before["metadata"]["uid"]);
            (reissued && front_proxy.is_some())
                .then_some(())
                .ok_or(format!("{after:?} {front_proxy:?}"))
        },
    )
    .await;
    // A Secret Kamaji has not created is refused by name, and nothing is deleted. (Kamaji
    // v1.0.0 creates the front-proxy client certificate, internal/resources/
    // front-proxy-client-certificate.go, so the missing one here is Konnectivity's: with
    // --addons none, internal/resources/konnectivity/certificate_resource.go never runs.)
    let line = fails(
        &kamaji(
            tb,
            ns,
            &[
                "certificates",
                "rotate",
                name,
                "--certificates",
                "front-proxy-client,konnectivity",
            ],
        ),
        1,
    );
    assert_contains(&line, "konnectivity-certificate\" not found");
    assert!(
        kamaji_secret("front-proxy-client-certificate")
            .await
            .is_some(),
        "a refused rotation deleted nothing"
    );
    ok(&kamaji(tb, ns, &["kubeconfig", "rotate", name]));

    // scale to sleep and back. Kamaji v1.0.0 has no "Sleeping" status: with 0 replicas its
    // Deployment resource reports the version "Ready" once the scaled-down Deployment is
    // observed (internal/resources/k8s_deployment_resource.go, UpdateTenantControlPlaneStatus),
    // so --wait waits for the Deployment's 0 replicas, as for a Kamaji before "Sleeping".
    let scale = |replicas| {
        let args = [
            "scale",
            name,
            "--replicas",
            replicas,
            "--wait",
            "--timeout",
            "180s",
        ];
        ok(&kamaji(tb, ns, &args))
    };
    assert_contains(&scale("0"), "scaled from 1 to 0 (asleep)");
    let tcp = get(client, ns, &tcp_ar, name).await.unwrap();
    assert_eq!(tcp["spec"]["controlPlane"]["deployment"]["replicas"], 0);
    assert_eq!(
        tcp["status"]["kubernetesResources"]["deployment"]["replicas"]
            .as_i64()
            .unwrap_or(0),
        0,
        "{}",
        tcp["status"]
    );
    assert_eq!(
        tcp["status"]["kubernetesResources"]["version"]["status"], "Ready",
        "Kamaji v1.0.0 reports a sleeping tenant Ready: {}",
        tcp["status"]
    );
    let text = ok(&kamaji(tb, ns, &["status", name]));
    assert_contains(&text, "asleep");
    assert_contains(&scale("1"), "scaled from 0 to 1 (waking up)");
    let v = kubectl(tenant_kc, &["get", "--raw", "/version"]);
    assert!(
        v.status.success(),
        "the woken tenant answers: {}",
        String::from_utf8_lossy(&v.stderr)
    );
}

/// upgrade --plan, then v1.35.4 -> v1.36.3 on the live tenant, and a refused downgrade.
#[allow(clippy::too_many_arguments)]
async fn upgrade(
    tb: &Testbed,
    client: &Client,
    ns: &str,
    name: &str,
    tenant_kc: &Path,
    kcp_ar: &ApiResource,
    rec: &Reconciler,
    infra: &str,
) {
    // upgrade: the plan goes one minor at a time, each at its newest patch; the apply runs v1.35.4 -> v1.36.3, the two
    // releases the testbed can run. On `none`, a client of the tenant first calls
    // networking.k8s.io/v1beta1, which v1.37 no longer serves: the tenant API server counts it
    // (apiserver_requested_deprecated_apis) and the preflight blocks an upgrade to v1.37.
    let calls_deprecated = infra == "none";
    if calls_deprecated {
        let o = kubectl(tenant_kc, &["get", "ipaddresses.v1beta1.networking.k8s.io"]);
        assert!(o.status.success(), "{}", stderr(&o));
    }
    let plan = ok(&kamaji(
        tb,
        ns,
        &["upgrade", name, "--to", "v1.37.0", "--plan", "-o", "json"],
    ));
    let plan: Value = serde_json::from_str(&plan).unwrap();
    // Through the newest patch of 1.36 the stable-release markers (the test mirror) name.
    assert_eq!(
        plan["controlPlaneSteps"],
        serde_json::json!([testbed::fixtures::releases::newest(36), "v1.37.0"])
    );
    assert_eq!(
        plan["patchReleasesFrom"],
        "intermediate versions from Kubernetes' stable-release markers"
    );
    if calls_deprecated {
        assert_eq!(plan["findings"][0]["severity"], "Error", "{plan}");
        let m = plan["findings"][0]["message"].as_str().unwrap();
        assert_contains(
            m,
            "v1.37.0 no longer serves: networking.k8s.io/v1beta1 ipaddresses (removed in 1.37)",
        );
        let refused = kamaji(tb, ns, &["upgrade", name, "--to", "v1.37.0"]);
        let line = fails(&refused, 1);
        assert_contains(
            &line,
            "the upgrade preflight failed: clients of the cluster still call",
        );
    } else {
        assert!(plan.get("findings").is_none(), "{plan}");
    }
    let k = get(client, ns, kcp_ar, name).await.unwrap();
    assert_eq!(k["spec"]["version"], "v1.35.4", "--plan changed something");
    let out = kamaji(
        tb,
        ns,
        &["upgrade", name, "--to", "v1.36.3", "--timeout", "300s"],
    );
    assert_ran(&out, "upgrade", rec);
    let err = stderr(&out);
    assert!(
        err.contains("step 1/1") && err.contains("runs v1.36.3"),
        "{err}"
    );
    let k = get(client, ns, kcp_ar, name).await.unwrap();
    assert_eq!(k["status"]["version"], "v1.36.3");
    // The live tenant API server runs the new release. The status reports the new version once
    // the new control-plane pod is ready; the old one may answer on the tenant's address for a
    // moment longer while it stops (CI once caught it), so ask until the new one answers.
    wait_until(
        "the tenant to answer as v1.36.3 after the upgrade",
        Duration::from_secs(60),
        || async {
            let raw = kubectl(tenant_kc, &["get", "--raw", "/version"]);
            let version: Value = serde_json::from_slice(&raw.stdout).unwrap_or(Value::Null);
            (version["gitVersion"] == "v1.36.3")
                .then_some(())
                .ok_or(format!("{version}: {}", stderr(&raw)))
        },
    )
    .await;
    if infra != "none" {
        let md = object(
            client,
            ns,
            "cluster.x-k8s.io/v1beta2",
            "MachineDeployment",
            &format!("{name}-md-0"),
        )
        .await;
        assert_eq!(md["spec"]["template"]["spec"]["version"], "v1.36.3");
    }
    let line = fails(&kamaji(tb, ns, &["upgrade", name, "--to", "v1.35.4"]), 2);
    assert_contains(&line, "cannot downgrade");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn lifecycle_byoh() {
    lifecycle("byoh", &["--workers", "0", "--host-selector", "site=ams"]).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn lifecycle_openstack() {
    lifecycle(
        "openstack",
        &words("--workers 0 --flavor m1.large --image ubuntu-2404-kube-v1.35.4"),
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn lifecycle_none() {
    // Its API server also serves a deprecated API, which the upgrade's preflight finds called.
    let from_file = "tests/data/values-deprecated-api.yaml";
    lifecycle("none", &["--from-file", from_file]).await;
}

/// The KamajiControlPlane of the seed discussion, translated to v1alpha2, applied with a
/// Cluster that points at it: the reconciler's TenantControlPlane, checked field by field.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn seed_kamaji_control_plane_becomes_this_tenant_control_plane() {
    use kube::api::{Patch, PatchParams};
    // On the shared real testbed (one testbed per test binary); the real Kamaji acts on this
    // TenantControlPlane too, but its defaulting webhook only fills an empty dataStore and
    // replicas (Kamaji v1.0.0 internal/webhook/handlers/tcp_defaults.go), both set here.
    let (tb, client, ns, rec) = live_namespace("seed").await;
    let name = "kamajicontrolplane-sample";
    let kcp: Value =
        serde_saphyr::from_str(include_str!("../data/seed-kcp-v1alpha2.yaml")).unwrap();
    let pp = PatchParams::apply("seed-test").force();
    api(&client, &ns, &kcp_ar())
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
    api(&client, &ns, &cluster_ar())
        .patch("capi-quickstart", &pp, &Patch::Apply(&cluster))
        .await
        .unwrap();
    let tcp_ar = tcp_ar();
    let tcp = wait_until(
        "the TenantControlPlane",
        Duration::from_secs(60),
        || async {
            get(&client, &ns, &tcp_ar, name)
                .await
                .ok_or_else(|| rec.log_tail())
        },
    )
    .await;
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
/// matching host joined the live tenant (the real BYOH host agents, their kubeadm and kubelets SIMULATED and joining for
/// real; the real BYOH controller picks the host by the selector, cluster-wide, and sets its
/// Node's provider ID; real CAPI core and kubeadm bootstrap managers; the reconciler; real
/// Kamaji).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn byoh_workers_join() {
    let _turn = TURN.lock().await;
    let (tb, client, ns, rec) = live_namespace("life-byoh-workers").await;
    // The real controller selects hosts across all namespaces: the label is this test's own.
    let site = format!("ams-{ns}");
    let _agents = host_agents(tb, &client, &ns, "h", 2, ("site", &site), false).await;
    let port = free_port().to_string();
    let out = create_byoh_tenant(tb, &ns, "w", "1", &format!("site={site}"), &port);
    assert_ran(&out, "create", &rec);
    let err = stderr(&out);
    assert!(
        err.contains("cluster w is ready") && err.contains("1/1 workers"),
        "{err}"
    );
    let status: Value =
        serde_json::from_str(&ok(&kamaji(tb, &ns, &["status", "w", "-o", "json"]))).unwrap();
    assert_eq!(status["workers"][0]["ready"], 1, "{status}");
    // Exactly one of the two hosts joined the tenant, under its own name.
    let kc = tenant_kubeconfig(tb, &ns, "w");
    let nodes = kubectl(&kc, &["get", "nodes", "-o", "name"]);
    let nodes = String::from_utf8_lossy(&nodes.stdout).to_string();
    let nodes: Vec<&str> = nodes.lines().collect();
    assert_eq!(nodes.len(), 1, "{nodes:?}");
    assert!(nodes[0].starts_with(&format!("node/{ns}-h")), "{nodes:?}");
    ok(&delete_wait(tb, &ns, "w", "300s"));
}
