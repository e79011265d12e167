//! Acceptance on a v1beta2 (CAPI v1.14) management cluster: `hosts`, `hosts describe`,
//! `machines` (with `--watch`), `list`, `describe` and `kubeconfig` (print, `--output`,
//! `--merge`), every output format, against fixtures that write what the controllers write.

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use crate::fleet_common::*;
use crate::objects::{self, CAPI, ar, b64, create};
use k8s_openapi::api::core::v1::Secret;
use kube::api::{Api, DynamicObject, Patch, PatchParams, PostParams};
use kube::discovery::ApiResource;
use serde_json::{Value, json};
use testbed::fixtures::run::{assert_contains, assert_lacks, assert_ok};

fn tb() -> &'static testbed::Testbed {
    testbed::shared()
}

fleet_tests! { tb(), "v1beta2";
    hosts_table_wide_json_yaml_name("hosts"): hosts_in_every_format;
    hosts_filters_and_scope("hosts-filters"): hosts_filters;
    hosts_describe_diagnoses("hosts-describe"): hosts_describe;
    machines_table_wide_json_yaml_name("machines"): machines_in_every_format;
    list_table_wide_json_yaml_name("list"): list_in_every_format;
    kubeconfig_prints_and_writes_0600("kubeconfig"): kubeconfig_print_and_output;
    describe_tree_table_json_yaml_name("describe"): describe_in_every_format;
}

/// `machines --watch` prints the table, then one line per change, as it happens.
#[tokio::test]
async fn machines_watch_streams_a_change() {
    let fleet = seed(tb(), "watch").await;
    let ns = fleet.namespace.clone();
    let mut child = Command::new(BIN)
        .args(["machines", "cluster-1", "-n", &ns, "--watch"])
        .arg("--kubeconfig")
        .arg(&tb().kubeconfig)
        .env("NO_COLOR", "1")
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("spawn kubectl-capi machines --watch");
    let stdout = child.stdout.take().unwrap();
    let (tx, rx) = std::sync::mpsc::channel::<String>();
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines().map_while(Result::ok) {
            if tx.send(line).is_err() {
                break;
            }
        }
    });
    let next = |deadline: Instant| -> Option<String> {
        let left = deadline.saturating_duration_since(Instant::now());
        rx.recv_timeout(left).ok()
    };
    // The initial table: header plus one row per machine of cluster-1.
    let want = fleet.machines_of("cluster-1").len();
    let deadline = Instant::now() + Duration::from_secs(30);
    let mut initial = Vec::new();
    while initial.len() < want + 1 {
        match next(deadline) {
            Some(l) => initial.push(l),
            None => {
                let _ = child.kill();
                panic!("initial table incomplete: {initial:?}");
            }
        }
    }
    assert!(initial[0].starts_with("NAME"), "{initial:?}");
    // Change one machine the way CAPI would: it starts deleting.
    let client = tb().client().await;
    let api = objects::api(&client, &ns, &ar(CAPI, "v1beta2", "Machine", "machines"));
    api.patch_status(
        "cluster-1-cp-0",
        &PatchParams::default(),
        &Patch::Merge(json!({"status": {"phase": "Deleting"}})),
    )
    .await
    .unwrap();
    let deadline = Instant::now() + Duration::from_secs(30);
    let mut seen = Vec::new();
    let line = loop {
        match next(deadline) {
            Some(l) if l.starts_with("cluster-1-cp-0 ") => break l,
            Some(l) => seen.push(l),
            None => {
                let _ = child.kill();
                panic!("no line for the changed machine; saw {seen:?}");
            }
        }
    };
    assert_contains(&line, "Deleting");
    assert!(!line.starts_with("NAME"), "{line}");
    // A machine of another cluster does not show up.
    // And a deletion is streamed too.
    api.delete("cluster-1-md-0-0000", &Default::default())
        .await
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(30);
    let line = loop {
        match next(deadline) {
            Some(l) if l.starts_with("cluster-1-md-0-0000 ") => break l,
            Some(_) => {}
            None => {
                let _ = child.kill();
                panic!("no line for the deleted machine");
            }
        }
    };
    assert_contains(&line, "Deleted");
    child.kill().unwrap();
    let _ = child.wait();
}

/// Secret errors: a cluster whose control plane is not initialized (no secret yet), a
/// malformed secret, a cluster that does not exist.
#[tokio::test]
async fn kubeconfig_missing_and_malformed_secrets() {
    let (client, ns) = tb().namespace("kubeconfig-errors").await;
    let clusters = objects::api(&client, &ns, &ar(CAPI, "v1beta2", "Cluster", "clusters"));
    for name in ["young", "broken", "nokey"] {
        create(&clusters, json!({
            "apiVersion": "cluster.x-k8s.io/v1beta2", "kind": "Cluster",
            "metadata": {"name": name}, "spec": {"clusterNetwork": {"services": {"cidrBlocks": ["10.96.0.0/12"]}}}
        }))
        .await;
    }
    let e = assert_fails(&run(tb(), &["kubeconfig", "young", "-n", &ns]), 1, "");
    assert!(
        e.starts_with(
            "error: cluster \"young\" has no kubeconfig yet: its control plane is not initialized"
        ),
        "{e}"
    );
    assert_contains(&e, "hint: wait for the control plane");
    assert_eq!(e.lines().count(), 2, "{e}");

    let secrets: Api<Secret> = Api::namespaced(client.clone(), &ns);
    for (name, data) in [
        (
            "broken-kubeconfig",
            json!({"value": b64("clusters: [unclosed")}),
        ),
        ("nokey-kubeconfig", json!({"other": b64("x")})),
    ] {
        create(&secrets, json!({"metadata": {"name": name}, "data": data})).await;
    }
    let o = run(tb(), &["kubeconfig", "broken", "-n", &ns]);
    let e = assert_fails(&o, 1, "");
    assert!(
        e.starts_with(&format!(
            "error: Secret {ns}/broken-kubeconfig is malformed: \"value\" is not a kubeconfig"
        )),
        "{e}"
    );
    let o = run(tb(), &["kubeconfig", "nokey", "-n", &ns]);
    assert_contains(&err(&o), "is malformed: it has no key \"value\"");
    assert!(out(&o).is_empty());
    let o = run(tb(), &["kubeconfig", "yuong", "-n", &ns]);
    let e = assert_fails(&o, 1, "Cluster \"yuong\" not found");
    assert_contains(&e, "\"young\"");
}

fn entries(v: &Value, key: &str) -> BTreeMap<String, Value> {
    v[key]
        .as_array()
        .map(|a| {
            a.iter()
                .map(|e| (e["name"].as_str().unwrap().to_string(), e.clone()))
                .collect()
        })
        .unwrap_or_default()
}

fn generated_kubeconfig(i: usize) -> String {
    format!(
        "apiVersion: v1\nkind: Config\nclusters:\n- name: gen-{i:02}\n  cluster:\n    server: https://gen-{i:02}.example:{port}\n    certificate-authority-data: {ca}\ncontexts:\n- name: gen-{i:02}-admin@gen-{i:02}\n  context:\n    cluster: gen-{i:02}\n    user: gen-{i:02}-admin\n    namespace: ns-{i}\ncurrent-context: gen-{i:02}-admin@gen-{i:02}\nusers:\n- name: gen-{i:02}-admin\n  user:\n    client-certificate-data: Y2VydC17aX0=\n    client-key-data: a2V5LXtpfQ==\n",
        port = 6443 + i,
        ca = "Q0EtZGF0YQ==",
    )
}

/// The user's kubeconfig: entries of their own, preferences and extensions.
const USER_KUBECONFIG: &str = "apiVersion: v1\nkind: Config\npreferences:\n  colors: true\ncurrent-context: home\nclusters:\n- name: home\n  cluster:\n    server: https://home.example:6443\n    extensions:\n    - name: client.authentication.k8s.io/exec\n      extension:\n        audience: home\n- name: cluster-1\n  cluster:\n    server: https://somewhere-else.example:6443\ncontexts:\n- name: home\n  context:\n    cluster: home\n    user: me\n    namespace: work\nusers:\n- name: me\n  user:\n    exec:\n      apiVersion: client.authentication.k8s.io/v1\n      command: my-login\n      args: [--tenant, acme]\n      interactiveMode: IfAvailable\n";

/// Merging many generated kubeconfigs: nothing existing is lost or altered, mode 0600, a
/// backup of the previous file each time, conflicts refused unless --force, --switch, and an
/// interrupted write leaves the old file intact.
#[tokio::test]
async fn kubeconfig_merge_many() {
    let (client, ns) = tb().namespace("kubeconfig-merge").await;
    let secrets: Api<Secret> = Api::namespaced(client.clone(), &ns);
    const N: usize = 24;
    for i in 0..N {
        create(&secrets, json!({
            "metadata": {"name": format!("gen-{i:02}-kubeconfig"), "labels": {"cluster.x-k8s.io/cluster-name": format!("gen-{i:02}")}},
            "type": "cluster.x-k8s.io/secret",
            "data": {"value": b64(&generated_kubeconfig(i))}
        }))
        .await;
    }
    let dir = tempfile::tempdir().unwrap();
    let target = dir.path().join("config");
    std::fs::write(&target, USER_KUBECONFIG).unwrap();
    // A stale temporary file from an earlier crash must not matter.
    let stale = dir.path().join(".config.stale1.tmp");
    std::fs::write(&stale, "garbage from a crash").unwrap();
    let t = target.to_str().unwrap().to_string();
    // `kubeconfig CLUSTER -n NS --merge --merge-into TARGET EXTRA…` with `env`.
    let merge = |cluster: &str, ns: &str, extra: &[&str], env: &[(&str, &str)]| {
        let base = [
            "kubeconfig",
            cluster,
            "-n",
            ns,
            "--merge",
            "--merge-into",
            &t,
        ];
        run_env(tb(), &[&base[..], extra].concat(), env)
    };

    let mut previous_text = std::fs::read_to_string(&target).unwrap();
    let mut expected: Value = serde_saphyr::from_str(USER_KUBECONFIG).unwrap();
    for i in 0..N {
        let cluster = format!("gen-{i:02}");
        let switch = i % 5 == 0;
        let o = merge(&cluster, &ns, if switch { &["--switch"] } else { &[] }, &[]);
        assert_ok(&o, &format!("merge {cluster}"));
        assert_contains(
            &err(&o),
            &format!("merged context \"{cluster}-admin@{cluster}\""),
        );
        assert!(out(&o).is_empty(), "a merge prints nothing on stdout");
        let text = std::fs::read_to_string(&target).unwrap();
        let now: Value = serde_saphyr::from_str(&text).unwrap();
        // Everything that was there is still there, unchanged.
        for key in ["clusters", "users", "contexts"] {
            let before = entries(&expected, key);
            let after = entries(&now, key);
            for (name, e) in &before {
                assert_eq!(
                    after.get(name),
                    Some(e),
                    "{key} {name} altered by merge {i}"
                );
            }
            assert_eq!(after.len(), before.len() + 1, "{key} after merge {i}");
        }
        assert_eq!(now["preferences"], json!({"colors": true}));
        let generated: Value = serde_saphyr::from_str(&generated_kubeconfig(i)).unwrap();
        assert_eq!(
            entries(&now, "clusters")[&cluster],
            generated["clusters"][0],
            "the new cluster entry is the secret's"
        );
        let want_current = if switch {
            format!("{cluster}-admin@{cluster}")
        } else {
            expected["current-context"].as_str().unwrap().to_string()
        };
        assert_eq!(now["current-context"], want_current.as_str());
        assert_eq!(mode(&target), 0o600);
        // The previous file is kept, byte for byte.
        let bak = dir.path().join("config.bak");
        assert_eq!(std::fs::read_to_string(&bak).unwrap(), previous_text);
        assert_eq!(mode(&bak), 0o600);
        previous_text = text;
        expected = now;
    }
    // Only the target, its backup and the stale file: no temporary files left behind.
    let mut files: Vec<String> = std::fs::read_dir(dir.path())
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().to_string())
        .collect();
    files.sort();
    assert_eq!(files, [".config.stale1.tmp", "config", "config.bak"]);

    // Re-running a merge is a no-op (idempotent), the file is untouched.
    let o = merge("gen-03", &ns, &[], &[]);
    assert_ok(&o, "merge gen-03 again");
    assert_contains(&err(&o), "already up to date");
    assert_eq!(std::fs::read_to_string(&target).unwrap(), previous_text);

    // A name that exists with other settings is refused, nothing changes; --force replaces.
    let fleet_ns = seed(tb(), "kubeconfig-merge-fleet").await.namespace;
    let o = merge("cluster-1", &fleet_ns, &[], &[]);
    let e = assert_fails(
        &o,
        1,
        "already has cluster \"cluster-1\" with other settings; nothing was changed",
    );
    assert_contains(&e, "--force");
    assert_eq!(std::fs::read_to_string(&target).unwrap(), previous_text);

    // An interrupted write (failure after the temporary file, before the rename) leaves the
    // old file intact and no temporary file behind.
    let fail = [("KUBECTL_CAPI_TEST_FAIL_BEFORE_RENAME", "1")];
    let o = merge("cluster-1", &fleet_ns, &["--force"], &fail);
    assert_fails(&o, 1, "simulated failure");
    let now = std::fs::read_to_string(&target).unwrap();
    assert_eq!(now, previous_text, "the old file is intact");
    assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 3);

    let o = merge("cluster-1", &fleet_ns, &["--force", "--switch"], &[]);
    assert_ok(&o, "merge --force --switch");
    assert_contains(&err(&o), "replaced cluster \"cluster-1\"");
    let now: Value = serde_saphyr::from_str(&std::fs::read_to_string(&target).unwrap()).unwrap();
    assert_eq!(
        entries(&now, "clusters")["cluster-1"]["cluster"]["server"],
        "https://10.10.1.100:6443"
    );
    assert_eq!(now["current-context"], "cluster-1-admin@cluster-1");
    assert_eq!(
        entries(&now, "users")["me"],
        entries(&expected, "users")["me"]
    );

    // Without --merge-into: the first file of KUBECONFIG.
    let first = dir.path().join("first");
    let second = dir.path().join("second");
    std::fs::write(&second, USER_KUBECONFIG).unwrap();
    let joined = std::env::join_paths([&first, &second]).unwrap();
    let o = run_env(
        tb(),
        &["kubeconfig", "cluster-2", "-n", &fleet_ns, "--merge"],
        &[("KUBECONFIG", joined.to_str().unwrap())],
    );
    assert_ok(&o, "merge into the first file of KUBECONFIG");
    let v: Value = serde_saphyr::from_str(&std::fs::read_to_string(&first).unwrap()).unwrap();
    assert_eq!(entries(&v, "contexts").len(), 1);
    assert!(entries(&v, "contexts").contains_key("cluster-2-admin@cluster-2"));
    assert_eq!(mode(&first), 0o600);
    assert_eq!(std::fs::read_to_string(&second).unwrap(), USER_KUBECONFIG);
}

/// Without Cluster API or BYOH: one clear line, exit 1, for every fleet verb.
#[tokio::test]
async fn fleet_verbs_without_capi_or_byoh() {
    let bare = testbed::shared_bare();
    for (args, want) in [
        (
            vec!["hosts"],
            "BYOH (Cluster API Provider Bring Your Own Host) is not installed",
        ),
        (
            vec!["hosts", "describe", "h1"],
            "BYOH (Cluster API Provider Bring Your Own Host) is not installed",
        ),
        (vec!["machines"], "Cluster API is not installed"),
        (vec!["list"], "Cluster API is not installed"),
        (vec!["describe", "c1"], "Cluster API is not installed"),
        // kubeconfig reads only the secret: a missing secret and no Cluster API is still clear.
        (vec!["kubeconfig", "c1"], "Cluster API is not installed"),
    ] {
        let o = run(bare, &args);
        assert_eq!(o.status.code(), Some(1), "{args:?}: {}", err(&o));
        let e = err(&o);
        assert!(e.starts_with(&format!("error: {want}")), "{args:?}: {e}");
        assert!(out(&o).is_empty(), "{args:?}");
    }
}

/// Our ClusterUpgrade API, as `kubectl kamaji install` applies it: once per test binary, and
/// only `describe` tests here look at it (no test of this binary hands an upgrade over).
async fn serve_cluster_upgrades() {
    static READY: tokio::sync::OnceCell<()> = tokio::sync::OnceCell::const_new();
    READY
        .get_or_init(|| async {
            let client = tb().client().await;
            let crds = kcore::ops::crds();
            testbed::fixtures::crds::apply_and_wait(&client, &crds, "fleet-test").await;
        })
        .await;
}

fn cluster_upgrade_ar() -> ApiResource {
    testbed::api_resource(
        "ops.capi-kamaji.io",
        "v1alpha1",
        "ClusterUpgrade",
        "clusterupgrades",
    )
}

async fn cluster_upgrades(ns: &str) -> Api<DynamicObject> {
    objects::api(&tb().client().await, ns, &cluster_upgrade_ar())
}

/// A fleet (in a namespace named after `prefix`) whose cluster-1 has a ClusterUpgrade to
/// v1.35.2 under way: step 2/4, saying `message`. The status is written through the status
/// subresource, as the reconciler would (no reconciler runs here).
async fn fleet_upgrading(prefix: &str, message: &str) -> testbed::fixtures::Fleet {
    serve_cluster_upgrades().await;
    let fleet = seed(tb(), prefix).await;
    let ns = fleet.namespace.as_str();
    let cu = json!({
        "apiVersion": "ops.capi-kamaji.io/v1alpha1", "kind": "ClusterUpgrade",
        "metadata": {"name": "cluster-1", "namespace": ns},
        "spec": {"clusterName": "cluster-1", "version": "v1.35.2"},
    });
    create(&cluster_upgrades(ns).await, cu).await;
    let status = json!({"observedGeneration": 1, "phase": "Running", "progress": "1/4",
        "currentSteps": [2], "message": message});
    set_upgrade_status(ns, "cluster-1", status).await;
    fleet
}

async fn set_upgrade_status(ns: &str, cluster: &str, status: Value) {
    cluster_upgrades(ns)
        .await
        .patch_status(
            cluster,
            &PatchParams::default(),
            &Patch::Merge(json!({"status": status})),
        )
        .await
        .unwrap();
}

/// `describe` shows the cluster's ClusterUpgrade under way in one line under the
/// tree and as `upgrade` in `-o json|yaml`; a cluster without one, or with a succeeded one,
/// shows none.
#[tokio::test]
async fn describe_shows_an_upgrade_under_way() {
    let fleet = fleet_upgrading(
        "describe-upgrade",
        "KubeadmControlPlane/cluster-1: 1/3 machines at v1.35.2",
    )
    .await;
    let ns = fleet.namespace.as_str();
    let want = "Upgrade: to v1.35.2, Running, step 2/4: KubeadmControlPlane/cluster-1: 1/3 machines at v1.35.2 (kubectl capi upgrade status cluster-1)";
    let t = ok(tb(), &["describe", "cluster-1", "-n", ns]);
    assert_eq!(t.lines().last(), Some(want), "{t}");
    assert_eq!(t.matches("Upgrade:").count(), 1, "{t}");
    let v: Value = serde_json::from_str(&ok(
        tb(),
        &["describe", "cluster-1", "-n", ns, "-o", "json"],
    ))
    .unwrap();
    let u = &v["upgrade"];
    assert_eq!(u["name"], "cluster-1", "{u}");
    assert_eq!(u["version"], "v1.35.2", "{u}");
    assert_eq!(u["phase"], "Running", "{u}");
    assert_eq!(u["progress"], "1/4", "{u}");
    assert_eq!(u["currentSteps"], json!([2]), "{u}");
    assert_eq!(u["inFlight"], true, "{u}");
    assert_eq!(
        Some(u["summary"].as_str().unwrap()),
        want.strip_prefix("Upgrade: ")
    );
    assert_eq!(v["root"]["kind"], "Cluster", "the tree stays: {v}");
    let y: Value = serde_saphyr::from_str(&ok(
        tb(),
        &["describe", "cluster-1", "-n", ns, "-o", "yaml"],
    ))
    .unwrap();
    assert_eq!(y["upgrade"], *u);

    // Another cluster has none: no line, no field.
    let t = ok(tb(), &["describe", "cluster-2", "-n", ns]);
    assert_lacks(&t, "Upgrade:");
    let v: Value = serde_json::from_str(&ok(
        tb(),
        &["describe", "cluster-2", "-n", ns, "-o", "json"],
    ))
    .unwrap();
    assert!(v.get("upgrade").is_none(), "{v}");

    // Succeeded: nothing left to show.
    set_upgrade_status(
        ns,
        "cluster-1",
        json!({"phase": "Succeeded", "progress": "4/4", "currentSteps": null,
            "message": "upgraded to v1.35.2"}),
    )
    .await;
    let t = ok(tb(), &["describe", "cluster-1", "-n", ns]);
    assert_lacks(&t, "Upgrade:");
}

/// The URLs (path and query) of the requests a `-v=6` run logged, in order.
fn request_urls(stderr: &str) -> Vec<String> {
    stderr
        .lines()
        .filter(|l| l.contains("requesting"))
        .filter_map(|l| {
            let url = l.split("http.url=").nth(1)?.split_whitespace().next()?;
            let path = url.splitn(4, '/').nth(3)?;
            Some(format!("/{path}"))
        })
        .collect()
}

/// A URL's path, without its query.
fn path(url: &str) -> &str {
    url.split('?').next().unwrap_or("")
}

/// A request that is not discovery, taken apart:
/// /apis/GROUP/VERSION[/namespaces/NAMESPACE]/PLURAL[/NAME]?QUERY.
struct Request<'a> {
    url: &'a str,
    query: &'a str,
    namespace: Option<&'a str>,
    /// PLURAL (a LIST) or PLURAL/NAME (a GET).
    tail: Vec<&'a str>,
}

impl Request<'_> {
    fn is_list(&self) -> bool {
        self.tail.len() == 1
    }
}

/// The requests of `urls` other than discovery (of the APIs and of the CRDs).
fn requests(urls: &[String]) -> Vec<Request<'_>> {
    urls.iter()
        .filter_map(|url| {
            let (path, query) = url.split_once('?').unwrap_or((url, ""));
            if matches!(path, "/api" | "/apis") || path.starts_with("/apis/apiextensions.k8s.io/") {
                return None;
            }
            let parts: Vec<&str> = path.trim_start_matches('/').split('/').collect();
            // `/api/v1/...` (the core group) or `/apis/GROUP/VERSION/...`.
            let prefix = if parts.first() == Some(&"api") { 2 } else { 3 };
            let (namespace, tail) = match &parts[prefix.min(parts.len())..] {
                ["namespaces", n, tail @ ..] => (Some(*n), tail.to_vec()),
                tail => (None, tail.to_vec()),
            };
            Some(Request {
                url,
                query,
                namespace,
                tail,
            })
        })
        .collect()
}

/// `describe` reads only the cluster's own objects, whatever else the management cluster holds:
/// every request is discovery, a GET in the cluster's namespace, a LIST there selected by the
/// cluster's name, or a LIST of the BYOH hosts (which any namespace may hold) claimed by the
/// cluster's ByoMachines. A second fleet with the same cluster names sits in another namespace.
/// With the ClusterUpgrade API served, its one request is the GET of the cluster's own.
#[tokio::test]
async fn describe_reads_only_the_clusters_objects() {
    serve_cluster_upgrades().await;
    let fleet = seed(tb(), "describe-scope").await;
    let other = seed(tb(), "describe-elsewhere").await;
    let ns = fleet.namespace.as_str();
    let (mut collections, mut host_lists) = (0, 0);
    for cluster in &fleet.clusters {
        let o = run(
            tb(),
            &["describe", cluster, "-n", ns, "--show-templates", "-v=6"],
        );
        assert!(o.status.success(), "{}", err(&o));
        let urls = request_urls(&err(&o));
        assert!(!urls.is_empty(), "-v=6 logs each request: {}", err(&o));
        let selector = format!("labelSelector=cluster.x-k8s.io%2Fcluster-name%3D{cluster}");
        // The ClusterUpgrade API is served: one GET of the one named after the cluster.
        let upgrades: Vec<&String> = urls
            .iter()
            .filter(|u| u.contains("clusterupgrades"))
            .collect();
        assert_eq!(
            upgrades,
            [&format!(
                "/apis/ops.capi-kamaji.io/v1alpha1/namespaces/{ns}/clusterupgrades/{cluster}"
            )],
            "{cluster}: {urls:#?}"
        );
        for Request {
            url,
            query,
            namespace,
            tail,
        } in requests(&urls)
        {
            assert!(
                !url.contains(&other.namespace),
                "{cluster}: read another namespace: {url}"
            );
            let is_list = tail.len() == 1;
            if is_list && namespace.is_none() {
                // The hosts, in any namespace: only those claimed by this cluster's
                // ByoMachines (byomachine-name=NS.NAME).
                assert_eq!(tail, ["byohosts"], "{cluster}: {url}");
                let values = query
                    .split("byomachine-name+in+%28")
                    .nth(1)
                    .unwrap_or_else(|| panic!("{cluster}: hosts not selected: {url}"));
                for v in values.trim_end_matches("%29").split("%2C") {
                    assert!(v.starts_with(&format!("{ns}.")), "{cluster}: {url}");
                }
                host_lists += 1;
            } else if is_list {
                collections += 1;
                assert!(
                    query.contains(&selector),
                    "{cluster}: a LIST not selected by the cluster's name: {url}"
                );
            } else {
                assert_eq!(namespace, Some(ns), "{cluster}: a GET elsewhere: {url}");
            }
            if let Some(n) = namespace {
                assert_eq!(n, ns, "{cluster}: read another namespace: {url}");
            }
        }
    }
    assert!(collections > 0, "describe lists the cluster's machines");
    assert!(host_lists > 0, "some hosts are named by their claim only");
}

/// `hosts` and `machines` read each kind in one LIST response, never in `limit`/`continue`
/// pages: on an idle API server (kube-apiserver v1.36) the `continue` pages come from etcd, not
/// the watch cache, and a 10,000-host inventory took 5 s paged against 0.9 s whole.
#[tokio::test]
async fn fleet_verbs_read_each_kind_in_one_response() {
    let fleet = seed(tb(), "whole-lists").await;
    let ns = fleet.namespace.as_str();
    for args in [
        &["hosts", "-n", ns, "-v=6"][..],
        &["hosts", "-n", ns, "-o", "wide", "-v=6"],
        &["hosts", "-n", ns, "-o", "json", "-v=6"],
        &["machines", "-n", ns, "-v=6"],
    ] {
        let o = run(tb(), args);
        assert!(o.status.success(), "{args:?}: {}", err(&o));
        let urls = request_urls(&err(&o));
        let lists: Vec<&String> = urls
            .iter()
            .filter(|u| {
                ["/byohosts", "/byomachines", "/machines"]
                    .iter()
                    .any(|k| path(u).ends_with(k))
            })
            .collect();
        assert!(!lists.is_empty(), "{args:?}: {urls:#?}");
        for u in lists {
            assert!(
                !u.contains("limit=") && !u.contains("continue="),
                "{args:?}: a paged LIST: {u}"
            );
        }
    }
}

/// Like clusterctl, `describe` reads a Machine's infrastructure machine and bootstrap config
/// only when the tree shows that Machine on a row of its own: Machines folded into a group cost
/// nothing beyond the Machine LIST. Without
/// grouping every Machine shows, so every one's are read.
#[tokio::test]
async fn describe_reads_details_of_shown_machines_only() {
    let fleet = seed(tb(), "describe-details").await;
    let ns = fleet.namespace.as_str();
    // (GETs, LISTs) of ByoMachines and KubeadmConfigs in the fleet's namespace.
    let details = |urls: &[String]| -> (usize, usize) {
        let (lists, gets): (Vec<_>, Vec<_>) = requests(urls)
            .into_iter()
            .filter(|r| {
                r.url.starts_with("/apis/")
                    && r.namespace == Some(ns)
                    && matches!(r.tail[..], ["byomachines" | "kubeadmconfigs", ..])
                    && r.tail.len() <= 2
            })
            .partition(Request::is_list);
        (gets.len(), lists.len())
    };
    let (mut grouped_total, mut all_total) = (0, 0);
    for cluster in &fleet.clusters {
        let o = run(tb(), &["describe", cluster, "-n", ns, "-o", "json", "-v=6"]);
        assert!(o.status.success(), "{}", err(&o));
        let tree: Value = serde_json::from_slice(&o.stdout).unwrap();
        assert_eq!(tree["root"]["kind"], "Cluster", "{tree}");
        let mut shown = 0;
        let mut stack = vec![&tree["root"]];
        while let Some(n) = stack.pop() {
            if n["kind"] == "Machine" && n["virtualNode"] == false {
                shown += 1;
            }
            stack.extend(n["children"].as_array().into_iter().flatten());
        }
        let machines = fleet
            .machines
            .iter()
            .filter(|m| &m.cluster == cluster)
            .count();
        let urls = request_urls(&err(&o));
        // The Machines come as concurrent LISTs, one per MachineDeployment and one for the
        // rest (`deployment-name notin (...)`), each in one response (no limit, no continue).
        let machine_lists: Vec<&String> = urls
            .iter()
            .filter(|u| path(u).ends_with("/machines"))
            .collect();
        let deployments: std::collections::BTreeSet<&String> = fleet
            .machines
            .iter()
            .filter(|m| &m.cluster == cluster)
            .filter_map(|m| m.deployment.as_ref())
            .collect();
        assert!(
            machine_lists.len() > deployments.len(),
            "one LIST per deployment and one for the rest: {machine_lists:#?}"
        );
        assert!(
            machine_lists
                .iter()
                .all(|u| !u.contains("limit=") && !u.contains("continue=")),
            "{machine_lists:#?}"
        );
        assert_eq!(
            machine_lists
                .iter()
                .filter(|u| !u.contains("deployment-name%3D"))
                .count(),
            1,
            "{machine_lists:#?}"
        );
        let (gets, lists) = details(&urls);
        assert_eq!(
            lists, 0,
            "{cluster}: fewer than 64 details are read one GET each"
        );
        assert!(
            gets <= 2 * shown,
            "{cluster}: {gets} detail GETs for {shown} shown of {machines} machines\n{urls:#?}\n{}",
            out(&o)
        );
        grouped_total += gets;

        let o = run(
            tb(),
            &["describe", cluster, "-n", ns, "--grouping=false", "-v=6"],
        );
        assert!(o.status.success(), "{}", err(&o));
        let (gets, lists) = details(&request_urls(&err(&o)));
        assert_eq!(lists, 0, "{cluster}");
        assert!(
            gets >= machines,
            "{cluster}: {gets} detail GETs for {machines} machines"
        );
        all_total += gets;
    }
    assert!(
        grouped_total < all_total,
        "grouping must save reads: {grouped_total} with, {all_total} without"
    );
}

/// `scale` and `upgrade --plan` on BYOH count free hosts, which any namespace may hold, and read
/// nothing else outside the cluster: the only LIST not selected by the cluster's name is the
/// ByoHosts no cluster has claimed (BYOH's own `!cluster.x-k8s.io/cluster-name` selection), with
/// no fleet-wide LIST of Machines, ByoMachines or Clusters; and that in one response.
#[tokio::test]
async fn scale_and_upgrade_plans_read_only_the_free_pool() {
    let fleet = seed(tb(), "plans-scope").await;
    let other = seed(tb(), "plans-elsewhere").await;
    let ns = fleet.namespace.as_str();
    let cluster = "cluster-1";
    // The control plane's ByoMachineTemplate, as clusterctl generate writes it: BYOH hosts.
    let client = tb().client().await;
    let tpl_ar = testbed::api_resource(
        "infrastructure.cluster.x-k8s.io",
        "v1beta1",
        "ByoMachineTemplate",
        "byomachinetemplates",
    );
    let tpl: DynamicObject = serde_json::from_value(json!({
        "apiVersion": "infrastructure.cluster.x-k8s.io/v1beta1", "kind": "ByoMachineTemplate",
        "metadata": {"name": format!("{cluster}-control-plane"), "namespace": ns},
        "spec": {"template": {"spec": {"selector": {"matchLabels": {"site": "rack-1"}}}}},
    }))
    .unwrap();
    Api::<DynamicObject>::namespaced_with(client, ns, &tpl_ar)
        .create(&PostParams::default(), &tpl)
        .await
        .unwrap();
    let selector = format!("labelSelector=cluster.x-k8s.io%2Fcluster-name%3D{cluster}");
    let free = "labelSelector=%21cluster.x-k8s.io%2Fcluster-name";
    for args in [
        vec![
            "scale",
            cluster,
            "--control-plane",
            "9",
            "--force",
            "--dry-run=client",
        ],
        vec!["upgrade", cluster, "--to", "v1.34.0", "--plan"],
    ] {
        let mut a = args.clone();
        a.extend(["-n", ns, "-v=6"]);
        let o = run(tb(), &a);
        assert!(o.status.success(), "{args:?}: {}", err(&o));
        let urls = request_urls(&err(&o));
        let mut host_lists = 0;
        for r in requests(&urls) {
            let Request {
                url,
                query,
                namespace,
                ..
            } = r;
            if url.starts_with("/release/stable-") || url == "/metrics" {
                // Kubernetes' stable-release markers (the test mirror), and the workload
                // cluster's count of deprecated APIs (the fixture's workload cluster is the
                // testbed itself): not reads of the management cluster.
                continue;
            }
            assert!(!url.contains(&other.namespace), "{args:?}: {url}");
            if let Some(n) = namespace {
                assert_eq!(n, ns, "{args:?}: read another namespace: {url}");
            }
            if !r.is_list() {
                assert_eq!(namespace, Some(ns), "{args:?}: a GET elsewhere: {url}");
                continue;
            }
            if r.tail == ["byohosts"] && namespace.is_none() && query.contains(free) {
                // One response: paged, a selector matching few of many hosts makes `continue`
                // pages, which an idle API server reads from etcd.
                assert!(
                    !query.contains("limit=") && !query.contains("continue="),
                    "{args:?}: the free hosts are read in pages: {url}"
                );
                host_lists += 1;
                continue;
            }
            assert!(
                query.contains(&selector),
                "{args:?}: a LIST not selected by the cluster's name: {url}"
            );
        }
        assert_eq!(host_lists, 1, "{args:?} counts the free hosts: {urls:#?}");
    }
}

/// `hosts` reads only what its rows show: the ByoHosts, the ByoMachines and, for the fields
/// only a Machine has (its phase and node, in `-o json|yaml`), the Machines; never the
/// Clusters (a row names its cluster from the host's label or its Machine), and the tables no
/// Machines either.
#[tokio::test]
async fn hosts_read_only_what_the_rows_show() {
    let fleet = seed(tb(), "hosts-scope").await;
    // Every format reads Machines: the table and wide only for which Nodes stopped reporting
    // (an Unreachable host), the structured rows for their fields too.
    for (format, machines) in [
        ("table", true),
        ("wide", true),
        ("json", true),
        ("name", true),
    ] {
        let o = run(tb(), &["hosts", "-A", "-o", format, "-v=6"]);
        assert!(o.status.success(), "{format}: {}", err(&o));
        assert!(
            out(&o).contains(&fleet.hosts[0].name),
            "{format}: {}",
            out(&o)
        );
        let urls = request_urls(&err(&o));
        let lists = |plural: &str| urls.iter().filter(|u| path(u).ends_with(plural)).count();
        assert!(lists("/byohosts") > 0, "{format}: {urls:#?}");
        assert!(lists("/byomachines") > 0, "{format}: {urls:#?}");
        assert_eq!(
            lists("/clusters"),
            0,
            "{format} reads no Clusters: {urls:#?}"
        );
        assert_eq!(
            lists("/machines") > 0,
            machines,
            "{format}: Machines read: {urls:#?}"
        );
    }
}

/// A canary wave as large as the fleet is no canary: `--canary 5` (and 3) over the 3
/// clusters a selector picks is refused with the counts, exit 2, before anything is written;
/// `--canary 2` plans a canary wave and the rest.
#[tokio::test]
async fn a_canary_wave_that_is_the_whole_fleet_is_refused() {
    serve_cluster_upgrades().await;
    let fleet = seed(tb(), "canary").await;
    let ns = fleet.namespace.as_str();
    let sel = "fixture.capi-kamaji.io/fleet=true";
    for canary in ["5", "3"] {
        let args = [
            "upgrade", "-l", sel, "--to", "v1.35.2", "--canary", canary, "--yes", "-n", ns,
        ];
        let o = run(tb(), &args);
        if let Err(e) = testbed::expect::one_line_refusal(&o, 2, "", &args.join(" ")) {
            panic!("{e}");
        }
        let first = err(&o).lines().next().unwrap_or_default().to_string();
        assert_eq!(
            first,
            format!(
                "error: --canary {canary} would put all 3 cluster(s) the selector \"{sel}\" picks in the canary wave, which is no canary; nothing was created"
            )
        );
        assert_contains(&err(&o), "hint: pass --canary between 1 and 2");
    }
    let fleets: Api<DynamicObject> = Api::namespaced_with(
        tb().client().await,
        ns,
        &testbed::api_resource(
            "ops.capi-kamaji.io",
            "v1alpha1",
            "FleetUpgrade",
            "fleetupgrades",
        ),
    );
    assert!(
        fleets
            .list(&Default::default())
            .await
            .unwrap()
            .items
            .is_empty()
    );
    let plan = ok(
        tb(),
        &[
            "upgrade", "-l", sel, "--to", "v1.35.2", "--canary", "2", "--plan", "-n", ns,
        ],
    );
    assert_eq!(rows(&plan).len(), 3, "{plan}");
}

/// `upgrade pause|resume|cancel` take `--yes` (clap used to answer "use '-- --yes'");
/// cancel ends an upgrade for good, so without a terminal it needs `--yes`: refused in one
/// line, exit 2, the ClusterUpgrade unchanged; with it, cancelled.
#[tokio::test]
async fn upgrade_cancel_needs_yes_without_a_terminal() {
    let fleet = fleet_upgrading("cancel", "rolling").await;
    let ns = fleet.namespace.as_str();
    let cus = cluster_upgrades(ns).await;
    let args = ["upgrade", "cancel", "cluster-1", "-n", ns];
    let o = run(tb(), &args);
    if let Err(e) = testbed::expect::one_line_refusal(
        &o,
        2,
        "refusing to cancel the upgrade of cluster cluster-1 without confirmation",
        &args.join(" "),
    ) {
        panic!("{e}");
    }
    assert_contains(&err(&o), "--yes");
    let cu = cus.get("cluster-1").await.unwrap();
    assert_ne!(cu.data["spec"]["cancelled"], true, "{:?}", cu.data);
    ok(tb(), &["upgrade", "pause", "cluster-1", "--yes", "-n", ns]);
    ok(tb(), &["upgrade", "resume", "cluster-1", "--yes", "-n", ns]);
    let out = ok(tb(), &["upgrade", "cancel", "cluster-1", "--yes", "-n", ns]);
    assert_contains(&out, "upgrade of cluster cluster-1 cancelled");
    let cu = cus.get("cluster-1").await.unwrap();
    assert_eq!(cu.data["spec"]["cancelled"], true, "{:?}", cu.data);
}
