//! The reconciler under the grants `kubectl kamaji install` gives it, cluster-wide and
//! with `--namespaces`: it runs as its service account (impersonated: the testbed's admin may
//! impersonate), through a KamajiControlPlane's create, ready, upgrade and delete, the
//! certificate and findings scans, ClusterUpgrades and a FleetUpgrade, and the API server
//! refuses nothing; the role holds exactly the audited set of verbs.

use std::collections::BTreeMap;

use crate::common::*;
use k8s_openapi::api::core::v1::Secret;
use kube::api::{DeleteParams, Patch, PatchParams};
use serde_json::{Value, json};

const V: &str = "v1alpha2";

/// The ClusterRole's rules as `group/resource` → sorted verbs.
fn rules(role: &Value) -> BTreeMap<String, Vec<String>> {
    let mut out = BTreeMap::new();
    for r in role["rules"].as_array().unwrap() {
        for g in r["apiGroups"].as_array().unwrap() {
            for res in r["resources"].as_array().unwrap() {
                // Two rules may name one resource: their verbs add up.
                let verbs: &mut Vec<String> = out
                    .entry(format!("{}/{}", g.as_str().unwrap(), res.as_str().unwrap()))
                    .or_default();
                verbs.extend(
                    r["verbs"]
                        .as_array()
                        .unwrap()
                        .iter()
                        .map(|v| v.as_str().unwrap().to_string()),
                );
                verbs.sort();
                verbs.dedup();
            }
        }
    }
    out
}

#[test]
fn the_role_is_the_audited_set() {
    let role = kamaji_reconciler::install::cluster_role();
    let r = rules(&role);
    let v = |s: &[&str]| s.iter().map(|x| x.to_string()).collect::<Vec<_>>();
    // What the reconciler calls (plugins/reconciler/src/controller): the KamajiControlPlane
    // controller lists and watches, patches finalizers and status; the TenantControlPlane is
    // read and server-side applied (apply may create); Secrets are read, watched (metadata) and
    // applied; Clusters are read and watched; infrastructure clusters are patched.
    let audited: &[(&str, &[&str])] = &[
        (
            "controlplane.cluster.x-k8s.io/kamajicontrolplanes",
            &["get", "list", "patch", "watch"],
        ),
        (
            "controlplane.cluster.x-k8s.io/kamajicontrolplanes/status",
            &["patch"],
        ),
        (
            "controlplane.cluster.x-k8s.io/kamajicontrolplanes/finalizers",
            &["update"],
        ),
        (
            "kamaji.clastix.io/tenantcontrolplanes",
            &["create", "get", "list", "patch", "watch"],
        ),
        (
            "cluster.x-k8s.io/clusters",
            &["get", "list", "patch", "watch"],
        ),
        // The ClusterUpgrade controller (plugins/reconciler/src/upgrades): its objects are listed,
        // watched and their status patched; a step reads the cluster's control plane (a
        // KamajiControlPlane too: hence get above), MachineDeployments and Machines, patches a
        // version (a topology's: hence patch on clusters), applies template clones, and lists the
        // free BYOH hosts for its preflight.
        (
            "ops.capi-kamaji.io/clusterupgrades",
            &["create", "get", "list", "patch", "watch"],
        ),
        (
            "ops.capi-kamaji.io/fleetupgrades",
            &["get", "list", "watch"],
        ),
        ("ops.capi-kamaji.io/fleetupgrades/status", &["patch"]),
        ("ops.capi-kamaji.io/clusterupgrades/status", &["patch"]),
        (
            "cluster.x-k8s.io/machinedeployments",
            &["list", "patch", "watch"],
        ),
        ("cluster.x-k8s.io/machines", &["list"]),
        (
            "controlplane.cluster.x-k8s.io/kubeadmcontrolplanes",
            &["get", "list", "patch", "watch"],
        ),
        (
            "infrastructure.cluster.x-k8s.io/byomachinetemplates",
            &["create", "get", "list", "patch"],
        ),
        ("infrastructure.cluster.x-k8s.io/byohosts", &["list"]),
        // The findings scan (plugins/reconciler/src/findings.rs): what `kubectl capi doctor`
        // reads, and the providers' Leases by name.
        ("infrastructure.cluster.x-k8s.io/byomachines", &["list"]),
        (
            "infrastructure.cluster.x-k8s.io/k8sinstallerconfigtemplates",
            &["list"],
        ),
        ("coordination.k8s.io/leases", &["list"]),
        // Applied server-side: patch always, create when the apply makes the object (the
        // `<cluster>-kubeconfig` and `<cluster>-ca` copies, the TenantControlPlane, a
        // template's clone); `plain rbac::` fails with any of them dropped.
        ("/secrets", &["create", "get", "list", "patch", "watch"]),
        (
            "infrastructure.cluster.x-k8s.io/byoclusters",
            &["get", "list", "patch", "watch"],
        ),
        ("events.k8s.io/events", &["create", "patch"]),
    ];
    for (resource, verbs) in audited {
        assert_eq!(r[*resource], v(verbs), "{resource}");
    }
    assert!(r.keys().all(|k| !k.contains('*')), "{r:?}");
    assert!(
        r.values()
            .flatten()
            .all(|verb| verb != "*" && verb != "delete" && verb != "update"
                || r.iter()
                    .any(|(k, vs)| k.ends_with("/finalizers") && vs.contains(verb))),
        "{r:?}"
    );
}

/// How the reconciler's grants are installed: cluster-wide (the default install), or as
/// `kubectl kamaji install --namespaces` makes them, Roles in the namespaces it watches.
#[derive(Clone, Copy, PartialEq)]
enum Grants {
    ClusterWide,
    Namespaced,
}

/// Applies the RBAC `kubectl kamaji install` applies (ServiceAccount, ClusterRole, bindings,
/// and with [`Grants::Namespaced`] a Role and RoleBinding in `ns`, the namespace watched) for a
/// reconciler living in `ns`, and returns a kubeconfig that acts as that service account. The
/// ClusterRole and ClusterRoleBinding are named after the namespace, so the tests of this
/// binary, each with its own service account, do not take them from each other.
async fn as_its_service_account(
    tb: &testbed::Testbed,
    c: &kube::Client,
    ns: &str,
    grants: Grants,
) -> std::path::PathBuf {
    let watched = match grants {
        Grants::ClusterWide => vec![],
        Grants::Namespaced => vec![ns.to_string()],
    };
    let pp = PatchParams::apply("test").force();
    let objects = kamaji_reconciler::install::install_manifests_watching(
        "example.com/kamaji-reconciler:test",
        ns,
        1,
        &watched,
    );
    for mut o in objects {
        let kind = o["kind"].as_str().unwrap_or_default().to_string();
        if ![
            "ServiceAccount",
            "ClusterRole",
            "ClusterRoleBinding",
            "Role",
            "RoleBinding",
            // The admission policy on its Secret writes, shared by the tests of this binary:
            // it names the service account in any namespace, so it is the same for each.
            "ValidatingAdmissionPolicy",
            "ValidatingAdmissionPolicyBinding",
        ]
        .contains(&kind.as_str())
            || o["metadata"]["name"]
                .as_str()
                .is_some_and(|n| n.ends_with("-capi") || n.contains("kubeadm-bootstrap"))
        {
            continue;
        }
        if kind == "ClusterRoleBinding" {
            o["metadata"]["name"] = json!(format!("kamaji-reconciler-{ns}"));
            o["roleRef"]["name"] = json!(format!("kamaji-reconciler-{ns}"));
        }
        if kind == "ClusterRole" {
            o["metadata"]["name"] = json!(format!("kamaji-reconciler-{ns}"));
        }
        let av = o["apiVersion"].as_str().unwrap();
        let (group, version) = av.rsplit_once('/').unwrap_or(("", av));
        let r = ar(group, version, &kind);
        let api: kube::Api<kube::api::DynamicObject> = match o["metadata"]["namespace"].as_str() {
            Some(n) => kube::Api::namespaced_with(c.clone(), n, &r),
            None => kube::Api::all_with(c.clone(), &r),
        };
        api.patch(
            o["metadata"]["name"].as_str().unwrap(),
            &pp,
            &Patch::Apply(&o),
        )
        .await
        .unwrap();
    }
    // A kubeconfig that acts as the service account.
    let admin = std::fs::read_to_string(&tb.kubeconfig).unwrap();
    let mut kc: Value = serde_saphyr::from_str(&admin).unwrap();
    for u in kc["users"].as_array_mut().unwrap() {
        u["user"]["as"] = json!(sa_user(ns));
        u["user"]["as-groups"] = json!([
            "system:serviceaccounts",
            format!("system:serviceaccounts:{ns}"),
            "system:authenticated"
        ]);
    }
    let sa_kubeconfig = std::env::temp_dir().join(format!("kr-rbac-{ns}.kubeconfig"));
    std::fs::write(&sa_kubeconfig, serde_json::to_string(&kc).unwrap()).unwrap();
    sa_kubeconfig
}

/// The user name of the reconciler's service account in `ns`.
fn sa_user(ns: &str) -> String {
    format!("system:serviceaccount:{ns}:kamaji-reconciler")
}

/// Whether the API server's authorizer lets the reconciler's service account of `sa_ns` do
/// `verb` on `resource` (core group) in `ns` (every namespace when `None`): what `kubectl auth
/// can-i VERB RESOURCE --as USER` asks, a SubjectAccessReview.
async fn can(c: &kube::Client, sa_ns: &str, verb: &str, resource: &str, ns: Option<&str>) -> bool {
    use k8s_openapi::api::authorization::v1::{
        ResourceAttributes, SubjectAccessReview, SubjectAccessReviewSpec,
    };
    let review = SubjectAccessReview {
        spec: SubjectAccessReviewSpec {
            user: Some(sa_user(sa_ns)),
            groups: Some(vec![
                "system:serviceaccounts".into(),
                format!("system:serviceaccounts:{sa_ns}"),
                "system:authenticated".into(),
            ]),
            resource_attributes: Some(ResourceAttributes {
                verb: Some(verb.into()),
                resource: Some(resource.into()),
                namespace: ns.map(str::to_string),
                ..Default::default()
            }),
            ..Default::default()
        },
        ..Default::default()
    };
    let api: kube::Api<SubjectAccessReview> = kube::Api::all(c.clone());
    let r = api.create(&Default::default(), &review).await.unwrap();
    r.status.is_some_and(|s| s.allowed)
}

/// A KamajiControlPlane's create (on a ByoCluster), ready (Secrets copied, the ByoCluster's
/// endpoint patched), upgrade and delete, with the certificate and findings scans, by a
/// reconciler under `grants`; the API server refuses it nothing.
async fn create_ready_upgrade_delete(prefix: &str, grants: Grants) {
    let tb = testbed::shared();
    let (c, ns) = namespace(tb, prefix).await;
    install_ops_crds(&c).await;
    let sa_kubeconfig = as_its_service_account(tb, &c, &ns, grants).await;

    byo_cluster(&c, &ns, "rb").await;
    cluster_with_kcp(
        &c,
        &ns,
        "v1beta2",
        "rb",
        "rb-cp",
        Some(("infrastructure.cluster.x-k8s.io", "v1beta1", "ByoCluster")),
        small_net(),
        json!({"version": "1.33.0", "replicas": 1}),
    )
    .await;
    // The certificate scan runs before the controllers start; the findings scan after it.
    let r = start_reconciler(&sa_kubeconfig, &ns, &["--findings-scan"]);
    // Create.
    wait_tcp(&c, &ns, "rb-cp", &r).await;
    // Ready: Kamaji publishes; the reconciler copies the Secrets (creating them), patches the
    // ByoCluster's endpoint and reports.
    kamaji_publish(&c, &ns, "rb-cp", "10.0.0.7:6443", "v1.33.0", "Ready", 1).await;
    wait_for(60, "ready with secrets", Some(&r), || async {
        secret(&c, &ns, "rb-kubeconfig").await?;
        let k = get(&c, &ns, &kcp_ar(V), "rb-cp").await?;
        (k["status"]["ready"] == json!(true)).then_some(())
    })
    .await;
    let sa = testbed::client_for(&sa_kubeconfig).await.unwrap();
    let kcp_uid = get(&c, &ns, &kcp_ar(V), "rb-cp").await.unwrap()["metadata"]["uid"]
        .as_str()
        .unwrap()
        .to_string();
    policy_refuses_other_secrets(&c, &sa, &ns, grants, &kcp_uid).await;
    // With the policy in force: Kamaji rotates both sources (the re-copies are UPDATEs) and a
    // copy deleted by hand is made again (a CREATE).
    rotate_sources(&c, &ns, &r).await;
    let byo = ar("infrastructure.cluster.x-k8s.io", "v1beta1", "ByoCluster");
    wait_for(60, "the ByoCluster's endpoint", Some(&r), || async {
        let b = get(&c, &ns, &byo, "rb").await?;
        (b["spec"]["controlPlaneEndpoint"]["host"] == "10.0.0.7").then_some(())
    })
    .await;
    // Both scans ran: the findings scan runs only with the certificates the first scan read.
    wait_for(30, "the findings scan", Some(&r), || async {
        r.http_get("/metrics")?
            .contains("kamaji_reconciler_findings_scan_timestamp_seconds ")
            .then_some(())
    })
    .await;
    // Upgrade one minor.
    set_version(&c, &ns, V, "rb-cp", "v1.34.0").await;
    wait_for(60, "the TCP at v1.34.0", Some(&r), || async {
        let t = get_tcp(&c, &ns, "rb-cp").await?;
        (t["spec"]["kubernetes"]["version"] == "v1.34.0").then_some(())
    })
    .await;
    // Delete: the finalizer is released.
    delete_kcp(&c, &ns, V, "rb-cp", &r).await;
    // The kubeconfig really acts as the service account: what the role leaves out is refused.
    let refused = dyn_api(&sa, &ns, &tcp_ar())
        .delete("rb-cp", &DeleteParams::background())
        .await;
    assert!(
        matches!(&refused, Err(kube::Error::Api(s)) if s.code == 403),
        "deleting a TenantControlPlane as the reconciler: {refused:?}"
    );
    assert_log_lacks(
        &r,
        &["forbidden", "Forbidden", "code: 403", "scan failed"],
        "the API server refused the reconciler something",
    );
    // What `kubectl auth can-i --as system:serviceaccount:NS:kamaji-reconciler` answers.
    // Creating Secrets is what the copies need (nobody else makes `<cluster>-kubeconfig`), in
    // the watched namespaces only when the grants are namespaced.
    assert!(can(&c, &ns, "create", "secrets", Some(&ns)).await);
    assert!(can(&c, &ns, "get", "secrets", Some(&ns)).await);
    assert!(!can(&c, &ns, "delete", "secrets", Some(&ns)).await);
    assert!(!can(&c, &ns, "update", "secrets", Some(&ns)).await);
    let elsewhere = grants == Grants::ClusterWide;
    for verb in ["get", "list", "watch", "create", "patch"] {
        assert_eq!(
            can(&c, &ns, verb, "secrets", Some("kube-system")).await,
            elsewhere,
            "{verb} secrets in kube-system"
        );
    }
    assert_eq!(can(&c, &ns, "list", "secrets", None).await, elsewhere);
}

/// Plays Kamaji renewing the admin kubeconfig and the CA of `rb-cp`, and waits until the
/// reconciler has copied both again (an UPDATE of each copy it made); then deletes the
/// kubeconfig copy and waits until it is made again (a CREATE).
async fn rotate_sources(c: &kube::Client, ns: &str, r: &Reconciler) {
    let secrets: kube::Api<Secret> = kube::Api::namespaced(c.clone(), ns);
    let kc = secrets.get("rb-cp-admin-kubeconfig").await.unwrap();
    let conf = data(&kc, "admin.conf")
        .unwrap()
        .replace("token: x", "token: rotated");
    for (name, body) in [
        (
            "rb-cp-admin-kubeconfig",
            json!({"data": {"admin.conf": base64(&conf)}}),
        ),
        (
            "rb-cp-ca",
            json!({"data": {"ca.crt": base64("CERT2"), "ca.key": base64("KEY2")}}),
        ),
    ] {
        secrets
            .patch(name, &PatchParams::default(), &Patch::Merge(&body))
            .await
            .unwrap();
    }
    wait_for(60, "both copies renewed", Some(r), || async {
        let kc = secret(c, ns, "rb-kubeconfig").await?;
        let ca = secret(c, ns, "rb-ca").await?;
        (data(&kc, "value")?.contains("token: rotated")
            && data(&ca, "tls.crt")? == "CERT2"
            && data(&ca, "tls.key")? == "KEY2")
            .then_some(())
    })
    .await;
    let old = secret(c, ns, "rb-kubeconfig").await.unwrap().metadata.uid;
    secrets
        .delete("rb-kubeconfig", &Default::default())
        .await
        .unwrap();
    wait_for(60, "the deleted copy made again", Some(r), || async {
        let kc = secret(c, ns, "rb-kubeconfig").await?;
        (kc.metadata.uid != old && data(&kc, "value")?.contains("token: rotated")).then_some(())
    })
    .await;
}

/// The message of the validation of the installed admission policy that says `about`.
fn policy_message(about: &str) -> String {
    let objects =
        kamaji_reconciler::install::install_manifests("example.com/kamaji-reconciler:test", "x", 1);
    let policy = objects
        .iter()
        .find(|o| o["kind"] == "ValidatingAdmissionPolicy")
        .expect("the install manifests hold the admission policy");
    policy["spec"]["validations"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|v| v["message"].as_str())
        .find(|m| m.contains(about))
        .unwrap_or_else(|| panic!("no validation message says {about:?}: {policy}"))
        .to_string()
}

/// What the API server answered a write of the reconciler's that must be refused: 403 and, with
/// a `message`, the admission policy's refusal saying it.
fn assert_refused<T: std::fmt::Debug>(
    what: &str,
    got: &Result<T, kube::Error>,
    message: Option<&str>,
) {
    let Err(kube::Error::Api(s)) = got else {
        panic!("{what}: the reconciler was let through: {got:?}");
    };
    assert_eq!(s.code, 403, "{what}: {s:?}");
    if let Some(m) = message {
        assert!(
            s.message
                .contains("ValidatingAdmissionPolicy 'kamaji-reconciler-secrets'")
                && s.message.contains(m),
            "{what}: {s:?}"
        );
    }
}

/// The reconciler, under `grants`, writes no Secret but its copies: the admission policy
/// refuses what RBAC lets through (any Secret in a namespace where it may create Secrets,
/// kube-system's too when the grants are cluster-wide), each of its rules alone, while a copy
/// of its own shape passes (a server dry run) and the real copies were made and renewed.
async fn policy_refuses_other_secrets(
    c: &kube::Client,
    sa: &kube::Client,
    ns: &str,
    grants: Grants,
    kcp_uid: &str,
) {
    use kube::api::PostParams;
    let dry = PostParams {
        dry_run: true,
        ..Default::default()
    };
    let plain = |name: &str| -> Secret {
        serde_json::from_value(json!({"metadata": {"name": name}, "stringData": {"k": "v"}}))
            .unwrap()
    };
    let mine = kube::Api::<Secret>::namespaced(sa.clone(), ns);
    // The API server loads a new policy shortly after it is applied: until a dry run is
    // refused, no real write is tried (it could be let through).
    wait_for(
        60,
        "the admission policy refusing the reconciler a Secret x (a dry run)",
        None,
        || async {
            match mine.create(&dry, &plain("x")).await {
                Err(kube::Error::Api(s)) if s.code == 403 => Some(()),
                _ => None,
            }
        },
    )
    .await;
    let shape = policy_message("<cluster>-kubeconfig");
    let owned = policy_message("controlled by");
    let taken = policy_message("another controller");
    assert_refused(
        "Secret x",
        &mine.create(&PostParams::default(), &plain("x")).await,
        Some(&shape),
    );
    assert!(secret(c, ns, "x").await.is_none());
    let system = kube::Api::<Secret>::namespaced(sa.clone(), "kube-system");
    let in_system = system.create(&PostParams::default(), &plain("x")).await;
    // Namespaced grants: RBAC refuses first; cluster-wide: the policy does.
    let by_policy = (grants == Grants::ClusterWide).then_some(shape.as_str());
    assert_refused("Secret kube-system/x", &in_system, by_policy);
    // Each rule alone. A copy of its shape: `<cluster>-kubeconfig` or `-ca`, labelled with
    // the cluster, of CAPI's Secret type, controlled by a KamajiControlPlane.
    let copy = |name: &str, cluster: &str, type_: &str, owner: bool| -> Secret {
        let mut s = json!({
            "metadata": {"name": name, "labels": {"cluster.x-k8s.io/cluster-name": cluster}},
            "type": type_, "stringData": {"value": "v"}
        });
        if owner {
            s["metadata"]["ownerReferences"] = json!([{
                "apiVersion": format!("controlplane.cluster.x-k8s.io/{V}"), "kind": "KamajiControlPlane",
                "name": "rb-cp", "uid": kcp_uid, "controller": true
            }]);
        }
        serde_json::from_value(s).unwrap()
    };
    let capi = "cluster.x-k8s.io/secret";
    mine.create(&dry, &copy("z-kubeconfig", "z", capi, true))
        .await
        .expect("a copy of its own shape passes");
    mine.create(&dry, &copy("z-ca", "z", capi, true))
        .await
        .expect("a CA copy of its own shape passes");
    for (what, s, message) in [
        (
            "another cluster's name",
            copy("y-kubeconfig", "z", capi, true),
            &shape,
        ),
        ("another suffix", copy("z-admin", "z", capi, true), &shape),
        ("no label", plain("z-ca"), &shape),
        (
            "an Opaque Secret",
            copy("z-ca", "z", "Opaque", true),
            &shape,
        ),
        ("no owner", copy("z-ca", "z", capi, false), &owned),
    ] {
        assert_refused(
            what,
            &mine.create(&PostParams::default(), &s).await,
            Some(message),
        );
    }
    // A Secret of its shape another controller owns (as Cluster API's kubeadm control plane
    // owns `<cluster>-kubeconfig` and `<cluster>-ca`) is not taken over, even by replacing
    // its owners: RBAC grants the patch, the policy refuses it.
    let cms: kube::Api<k8s_openapi::api::core::v1::ConfigMap> =
        kube::Api::namespaced(c.clone(), ns);
    let owner = cms
        .create(
            &PostParams::default(),
            &serde_json::from_value(json!({"metadata": {"name": "kc-owner"}})).unwrap(),
        )
        .await
        .unwrap();
    let mut theirs = copy("kc-kubeconfig", "kc", capi, false);
    theirs.metadata.owner_references = Some(vec![
        serde_json::from_value(json!({
            "apiVersion": "v1", "kind": "ConfigMap", "name": "kc-owner",
            "uid": owner.metadata.uid, "controller": true
        }))
        .unwrap(),
    ]);
    kube::Api::<Secret>::namespaced(c.clone(), ns)
        .create(&PostParams::default(), &theirs)
        .await
        .unwrap();
    let ours = copy("kc-kubeconfig", "kc", capi, true);
    let body = json!({"metadata": {"ownerReferences": ours.metadata.owner_references}});
    let took = mine
        .patch(
            "kc-kubeconfig",
            &PatchParams::default(),
            &Patch::Merge(&body),
        )
        .await;
    assert_refused("taking over kc-kubeconfig", &took, Some(&taken));
    let kept = secret(c, ns, "kc-kubeconfig").await.unwrap();
    assert_eq!(kept.metadata.owner_references.unwrap()[0].kind, "ConfigMap");
}

/// Every object of the install but the CRDs (`install::every_crd_we_ship_applies_without_a_warning`
/// has those), the admission policy and its binding among them, passes a server dry run of
/// `kubectl apply --server-side` without a `Warning:`.
#[tokio::test(flavor = "multi_thread")]
async fn the_other_install_objects_apply_without_a_warning() {
    let tb = testbed::shared();
    let (_c, ns) = tb.namespace("kr-rbac-warn").await;
    let items: Vec<Value> =
        kamaji_reconciler::install::install_manifests("example.com/kamaji-reconciler:test", &ns, 1)
            .into_iter()
            .filter(|o| o["kind"] != "CustomResourceDefinition")
            .collect();
    assert!(
        items
            .iter()
            .any(|o| o["kind"] == "ValidatingAdmissionPolicyBinding"),
        "no admission policy binding in the install"
    );
    let count = items.len();
    let file = std::env::temp_dir().join(format!("{ns}-install.json"));
    let list = json!({"apiVersion": "v1", "kind": "List", "items": items});
    std::fs::write(&file, serde_json::to_vec(&list).unwrap()).unwrap();
    let o = std::process::Command::new("kubectl")
        .args([
            "apply",
            "--server-side",
            // The other tests of this binary applied the same objects as their own manager.
            "--force-conflicts",
            "--dry-run=server",
            "--field-manager",
            "kr-warn",
            "-f",
        ])
        .arg(&file)
        .arg("--kubeconfig")
        .arg(&tb.kubeconfig)
        .env_remove("KUBECONFIG")
        .output()
        .unwrap();
    let (stdout, stderr) = (
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr),
    );
    assert!(o.status.success(), "{stderr}");
    assert_eq!(stdout.lines().count(), count, "{stdout}");
    assert!(
        !stderr.contains("Warning"),
        "the API server warned:\n{stderr}"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn create_ready_upgrade_delete_under_its_own_role() {
    create_ready_upgrade_delete("kr-rbac", Grants::ClusterWide).await;
}

/// The same under `kubectl kamaji install --namespaces`' grants: a Role in the namespace it
/// watches, and nothing of Secrets elsewhere.
#[tokio::test(flavor = "multi_thread")]
async fn create_ready_upgrade_delete_under_namespaced_roles() {
    create_ready_upgrade_delete("kr-rbac-ns", Grants::Namespaced).await;
}

/// The upgrade controllers under the same rules (as the namespaced Role of `kubectl
/// kamaji install --namespaces`, which holds the same rules as the ClusterRole): a ClusterUpgrade
/// of a KubeadmControlPlane cluster on BYOH (reads its control plane, MachineDeployments,
/// Machines, machine templates and free hosts; clones a machine template that names the version,
/// which creates it; patches the KubeadmControlPlane), a FleetUpgrade that
/// creates its member's ClusterUpgrade, a ClusterClass cluster's upgrade (patches the Cluster's
/// `spec.topology.version`), and a ClusterUpgrade of a missing Cluster whose warning repeats
/// for a second generation (kube-runtime's Recorder patches the Event's series). The API server
/// refuses nothing.
/// The clusters run v1.33.1: recorded as the newest patch of 1.33 (as `kubectl capi upgrade`
/// records what its markers name), each upgrade is one minor, no patch step before it.
const PATCH_1_33: [&str; 1] = ["v1.33.1"];

#[tokio::test(flavor = "multi_thread")]
async fn cluster_and_fleet_upgrades_under_its_own_role() {
    let tb = testbed::shared();
    let (c, ns) = namespace(tb, "kr-rbac-up").await;
    install_ops_crds(&c).await;
    let sa_kubeconfig = as_its_service_account(tb, &c, &ns, Grants::Namespaced).await;
    // Two KubeadmControlPlane clusters on BYOH, as CAPI, the KubeadmControlPlane provider and
    // BYOH leave them (cluster-0, cluster-1; each control plane is named after its cluster).
    let spec = testbed::fixtures::FleetSpec {
        clusters: 2,
        kamaji: false,
        machine_deployments: 2,
        machines: 4,
        hosts: 8,
        events: false,
        concurrency: 8,
        ..testbed::fixtures::FleetSpec::small()
    };
    testbed::fixtures::fleet(&c, &ns, &spec).await.unwrap();
    let kubeadm = ar(
        "controlplane.cluster.x-k8s.io",
        "v1beta2",
        "KubeadmControlPlane",
    );
    // cluster-0's control-plane machines come from a ByoMachineTemplate that names the version
    // (hosts pooled by version): the step clones it, which creates the clone.
    let byo_template = ar(
        "infrastructure.cluster.x-k8s.io",
        "v1beta1",
        "ByoMachineTemplate",
    );
    apply(
        &c,
        &ns,
        &byo_template,
        json!({"apiVersion": "infrastructure.cluster.x-k8s.io/v1beta1", "kind": "ByoMachineTemplate",
            "metadata": {"name": "cluster-0-control-plane"},
            "spec": {"template": {"spec": {"selector": {"matchLabels": {"kubernetes-version": "v1.33.1"}}}}}}),
    )
    .await;
    merge(
        &c,
        &ns,
        &cluster_ar("v1beta2"),
        "cluster-1",
        json!({"metadata": {"labels": {"wave": "one"}}}),
    )
    .await;
    // A ClusterClass cluster (no ClusterClass controller runs: only its spec is read).
    apply(
        &c,
        &ns,
        &cluster_ar("v1beta2"),
        json!({"apiVersion": "cluster.x-k8s.io/v1beta2", "kind": "Cluster", "metadata": {"name": "topo"},
            "spec": {"topology": {"classRef": {"name": "cc"}, "version": "v1.33.1"}}}),
    )
    .await;
    let r = start_reconciler(&sa_kubeconfig, &ns, &[]);
    let cu = |name: &str, version: &str| {
        json!({"apiVersion": "ops.capi-kamaji.io/v1alpha1", "kind": "ClusterUpgrade",
            "metadata": {"name": name},
            "spec": {"clusterName": name, "version": version, "force": true, "patchReleases": PATCH_1_33}})
    };
    let cu_ar = ops_ar("ClusterUpgrade");
    create(&c, &ns, &cu_ar, cu("cluster-0", "v1.34.0")).await;
    create(&c, &ns, &cu_ar, cu("topo", "v1.34.0")).await;
    create(&c, &ns, &cu_ar, cu("ghost", "v1.34.0")).await;
    create(
        &c,
        &ns,
        &ops_ar("FleetUpgrade"),
        json!({"apiVersion": "ops.capi-kamaji.io/v1alpha1", "kind": "FleetUpgrade",
            "metadata": {"name": "wave"},
            "spec": {"selector": "wave=one", "version": "v1.34.0", "force": true, "patchReleases": PATCH_1_33}}),
    )
    .await;
    for cp in ["cluster-0", "cluster-1"] {
        wait_for(
            90,
            &format!("KubeadmControlPlane {cp} at v1.34.0"),
            Some(&r),
            || async {
                let k = get(&c, &ns, &kubeadm, cp).await?;
                (k["spec"]["version"] == "v1.34.0").then_some(())
            },
        )
        .await;
    }
    let clone = get(&c, &ns, &byo_template, "cluster-0-control-plane-v1-34-0")
        .await
        .expect("the step cloned cluster-0's control-plane template");
    assert_eq!(
        clone["spec"]["template"]["spec"]["selector"]["matchLabels"]["kubernetes-version"],
        "v1.34.0"
    );
    let member = get(&c, &ns, &cu_ar, "cluster-1").await.unwrap();
    let owners: Vec<&str> = member["metadata"]["ownerReferences"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|o| o["kind"].as_str())
        .collect();
    assert_eq!(owners, ["FleetUpgrade", "Cluster"], "{member}");
    wait_for(
        90,
        "Cluster topo's topology at v1.34.0",
        Some(&r),
        || async {
            let k = get(&c, &ns, &cluster_ar("v1beta2"), "topo").await?;
            (k["spec"]["topology"]["version"] == "v1.34.0").then_some(())
        },
    )
    .await;
    // The same warning for a second generation: one Event, its series counted.
    warning_event(&c, &ns, "ClusterUpgrade", "ghost", "ClusterNotFound", &r).await;
    merge(
        &c,
        &ns,
        &cu_ar,
        "ghost",
        json!({"spec": {"version": "v1.35.0"}}),
    )
    .await;
    let events: kube::Api<k8s_openapi::api::events::v1::Event> =
        kube::Api::namespaced(c.clone(), &ns);
    wait_for(
        60,
        "the ClusterNotFound Event's series",
        Some(&r),
        || async {
            let l = events.list(&Default::default()).await.ok()?;
            l.items.into_iter().find(|e| {
                e.regarding.as_ref().and_then(|o| o.name.as_deref()) == Some("ghost")
                    && e.series.as_ref().is_some_and(|s| s.count >= 2)
            })
        },
    )
    .await;
    assert_log_lacks(
        &r,
        &[
            "forbidden",
            "Forbidden",
            "code: 403",
            "publishing an event failed",
        ],
        "the API server refused the reconciler something",
    );
}

/// `--namespaces` is bounded: a bad list is one line and exit 2, before any request.
#[test]
fn namespaces_are_checked_when_parsed() {
    let many: Vec<String> = (0..33).map(|i| format!("n{i}")).collect();
    let many = many.join(",");
    for (args, want) in [
        (vec!["--namespaces", "a,,b"], "an empty namespace name"),
        (
            vec!["--namespaces", "team-a,Kube"],
            "is not a namespace name",
        ),
        (vec!["--namespaces", "a,b,a"], "named twice"),
        (vec!["--namespaces", &many], "at most 32"),
        (vec!["--namespace", "a,b"], "use --namespaces for several"),
        (
            vec!["--namespace", "a", "--namespaces", "b"],
            "cannot be used with",
        ),
    ] {
        let o = std::process::Command::new(env!("CARGO_BIN_EXE_kamaji-reconciler"))
            .args(&args)
            .env_remove("KUBECONFIG")
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(2), "{args:?}: {err}");
        assert!(err.contains(want), "{args:?}: {err}");
        assert_eq!(
            err.lines().filter(|l| l.starts_with("error:")).count(),
            1,
            "{err}"
        );
    }
}
