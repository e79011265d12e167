//! `kubectl kamaji migrate` on the real Kamaji v1.0.0. A live tenant's data moves
//! between the testbed's two etcd DataStores (`default` and `testbed::SECOND_DATASTORE`) by
//! Kamaji's own migration Job (`kamaji migrate`, run by the SIMULATED kubelet from the Kamaji
//! binary the testbed built); objects written before are read back after, from the API server
//! Kamaji moved onto the target, and the origin's prefix is empty. Refused migrations (another
//! driver, a target that does not answer) change nothing; a `--wait` killed mid-way and run
//! again finishes. In the live suite, so it shares its testbed.

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::time::Duration;

use crate::common::*;
use kclient::etcd::Etcd;
use kube::api::{DeleteParams, PostParams};
use serde_json::{Value, json};
use testbed::fixtures::run::assert_contains;

fn datastore_ar() -> kube::discovery::ApiResource {
    ar("kamaji.clastix.io", "v1alpha1", "DataStore")
}

/// A DataStore object named `name` with the testbed's datastore Secrets.
fn datastore(name: &str, driver: &str, endpoint: &str) -> kube::api::DynamicObject {
    let sref = |n: &str, k: &str| json!({"secretReference": {"name": n, "namespace": "kamaji-system", "keyPath": k}});
    let mut spec = json!({"driver": driver, "endpoints": [endpoint],
        "tlsConfig": {"certificateAuthority": {"certificate": sref("kamaji-datastore-ca", "ca.crt"),
                                               "privateKey": sref("kamaji-datastore-ca", "ca.key")},
                      "clientCertificate": {"certificate": sref("kamaji-datastore-client", "tls.crt"),
                                            "privateKey": sref("kamaji-datastore-client", "tls.key")}}});
    if driver != "etcd" {
        // With the client certificate kept: Kamaji v1.0.0's DataStore Secret indexer
        // (`api/v1alpha1/indexer_datastore_usedsecret.go`) dereferences it whenever tlsConfig is
        // set, and the whole operator dies on a DataStore without one.
        spec["basicAuth"] =
            json!({"username": {"content": "a2FtYWpp"}, "password": {"content": "a2FtYWpp"}});
    }
    serde_json::from_value(
        json!({"apiVersion": "kamaji.clastix.io/v1alpha1", "kind": "DataStore",
        "metadata": {"name": name}, "spec": spec}),
    )
    .unwrap()
}

async fn tcp_now(c: &kube::Client, ns: &str, name: &str) -> Value {
    get(c, ns, &tcp_ar(), name).await.unwrap()
}

#[tokio::test]
async fn a_live_tenant_moves_between_etcd_datastores_and_the_origin_is_emptied() {
    let (tb, client, ns, _rec) = live_namespace("migrate").await;
    let name = "mig";
    let tenant_kc = live_tenant(tb, &ns, name);
    write_configmap(&tenant_kc, "before-move", "written-before");
    // The tenant API server's --etcd-prefix: Kamaji's schema, dashes turned to underscores.
    let prefix = format!("/{}_{name}/", ns.replace('-', "_"));
    assert_eq!(
        tcp_now(&client, &ns, name).await["status"]["storage"]["setup"]["schema"],
        prefix.trim_matches('/')
    );
    let (origin, target) = (
        testbed_etcd(tb, "default").await,
        testbed_etcd(tb, testbed::SECOND_DATASTORE).await,
    );
    let keys_before = origin.count(&prefix).await.unwrap();
    assert!(
        keys_before > 0,
        "the tenant's data is not under {prefix} on default"
    );
    assert_eq!(target.count(&prefix).await.unwrap(), 0);

    // Refused, nothing changed: another driver, a target that does not answer, an unknown name.
    let ds = api(&client, "", &datastore_ar());
    let (pg, dead) = (format!("pg-{ns}"), format!("dead-{ns}"));
    ds.create(
        &PostParams::default(),
        &datastore(&pg, "PostgreSQL", "127.0.0.1:5432"),
    )
    .await
    .unwrap();
    ds.create(
        &PostParams::default(),
        &datastore(&dead, "etcd", &format!("127.0.0.1:{}", free_port())),
    )
    .await
    .unwrap();
    for (to, want) in [
        (
            pg.as_str(),
            "uses the PostgreSQL driver and mig's data is in default (etcd)",
        ),
        (dead.as_str(), "does not answer at 127.0.0.1:"),
        ("dedicatd", "DataStore \"dedicatd\" not found"),
    ] {
        let line = fails(&kamaji(tb, &ns, &["migrate", name, "--to", to, "--yes"]), 1);
        assert_contains(&line, want);
    }
    // datastores: readiness dialled from here (Kamaji v1.0.0 reports none), use, driver.
    let listed: Value =
        serde_json::from_str(&ok(&kamaji(tb, &ns, &["datastores", "-o", "json"]))).unwrap();
    let row = |n: &str| {
        listed["items"]
            .as_array()
            .unwrap()
            .iter()
            .find(|d| d["name"] == n)
            .cloned()
            .unwrap_or_else(|| panic!("{n} not listed: {listed}"))
    };
    assert_eq!(row("default")["ready"], true, "{}", row("default"));
    assert_eq!(
        row(testbed::SECOND_DATASTORE)["ready"],
        true,
        "{}",
        row(testbed::SECOND_DATASTORE)
    );
    assert_eq!(row(&dead)["ready"], false, "{}", row(&dead));
    assert!(
        row(&dead)["readyReason"]
            .as_str()
            .is_some_and(|r| !r.is_empty()),
        "{}",
        row(&dead)
    );
    assert_eq!(row(&pg)["ready"], Value::Null, "{}", row(&pg));
    assert_eq!(row(&pg)["driver"], "PostgreSQL");
    assert!(
        row("default")["usedBy"]
            .as_array()
            .unwrap()
            .contains(&json!(format!("{ns}/{name}")))
    );
    for d in [&pg, &dead] {
        ds.delete(d, &DeleteParams::default()).await.unwrap();
    }
    let kcp = get(&client, &ns, &kcp_ar(), name).await.unwrap();
    assert_eq!(
        kcp["spec"]["dataStoreName"], "default",
        "a refusal changed the KamajiControlPlane"
    );
    let tcp = tcp_now(&client, &ns, name).await;
    assert_eq!(tcp["spec"]["dataStore"], "default");
    assert!(
        tcp["metadata"]["annotations"]["capi-kamaji.io/migrating-from"].is_null(),
        "{}",
        tcp["metadata"]
    );

    // The plan, without a change.
    let out = kamaji(
        tb,
        &ns,
        &[
            "migrate",
            name,
            "--to",
            testbed::SECOND_DATASTORE,
            "--dry-run=client",
        ],
    );
    assert_contains(&ok(&out), "mig migration to dedicated planned (dry run)");
    // The tenant's size, read from the origin (the tenant keeps writing: at least as many).
    let err = stderr(&out);
    let shown: u64 = err
        .split_once("etcd driver) (")
        .and_then(|(_, r)| r.split_once(&format!(" keys under {prefix})")))
        .and_then(|(n, _)| n.parse().ok())
        .unwrap_or_else(|| panic!("no tenant size in the plan:\n{err}"));
    assert!(
        shown >= keys_before,
        "{shown} keys shown, {keys_before} counted before"
    );
    assert_eq!(
        get(&client, &ns, &kcp_ar(), name).await.unwrap()["spec"]["dataStoreName"],
        "default"
    );

    // --wait, killed at its first progress line: the migration is asked for, nothing follows it.
    let mut waiting = testbed::fixtures::run::command(
        env!("CARGO_BIN_EXE_kubectl-kamaji"),
        &tb.kubeconfig,
        &[
            "migrate",
            name,
            "--to",
            testbed::SECOND_DATASTORE,
            "--yes",
            "--wait",
            "-n",
            &ns,
        ],
    )
    .stdin(Stdio::null())
    .stdout(Stdio::null())
    .stderr(Stdio::piped())
    .spawn()
    .unwrap();
    let mut lines = BufReader::new(waiting.stderr.take().unwrap()).lines();
    let mut seen = String::new();
    while !seen.contains("waiting for mig to run on dedicated") {
        match lines.next() {
            Some(Ok(l)) => seen = format!("{seen}{l}\n"),
            _ => panic!("migrate --wait ended before following the migration:\n{seen}"),
        }
    }
    waiting.kill().unwrap();
    let _ = waiting.wait();
    assert_contains(
        &seen,
        "1. set the KamajiControlPlane's DataStore to dedicated",
    );

    // Kamaji migrates on its own: its Job runs `kamaji migrate`, the tenant is frozen (a write is
    // refused by the webhook Kamaji puts in it), and Kamaji v1.0.0 stays Migrating after its Job
    // completes: it reads only the Job's first condition (migrate puts Complete first).
    wait_until(
        "Kamaji's migration Job to complete",
        Duration::from_secs(120),
        async || {
            let jobs: kube::Api<k8s_openapi::api::batch::v1::Job> =
                kube::Api::namespaced(client.clone(), "kamaji-system");
            let list = jobs
                .list(&Default::default())
                .await
                .map_err(|e| e.to_string())?;
            let done = list.items.iter().any(|j| {
                j.metadata
                    .labels
                    .as_ref()
                    .and_then(|l| l.get("tcp.kamaji.clastix.io/namespace"))
                    == Some(&ns)
                    && j.status.as_ref().and_then(|s| s.succeeded) == Some(1)
            });
            if done {
                Ok(())
            } else {
                Err(format!("{} Jobs, none of {ns} succeeded", list.items.len()))
            }
        },
    )
    .await;
    wait_until(
        "the tenant to refuse writes while Kamaji migrates it",
        Duration::from_secs(60),
        async || {
            let o = kubectl(
                &tenant_kc,
                &[
                    "create",
                    "configmap",
                    "while-frozen",
                    "-n",
                    "default",
                    "--dry-run=server",
                ],
            );
            let err = String::from_utf8_lossy(&o.stderr).to_string();
            if !o.status.success() && err.contains("migrate.kamaji.clastix.io") {
                Ok(())
            } else {
                Err(err)
            }
        },
    )
    .await;
    let tcp = tcp_now(&client, &ns, name).await;
    assert_eq!(
        tcp["status"]["kubernetesResources"]["version"]["status"],
        "Migrating"
    );
    assert_eq!(
        tcp["metadata"]["annotations"]["capi-kamaji.io/migrating-from"],
        "default"
    );

    // Run again: it follows the migration under way to its end (no question asked).
    let out = kamaji(
        tb,
        &ns,
        &[
            "migrate",
            name,
            "--to",
            testbed::SECOND_DATASTORE,
            "--wait",
            "--timeout",
            "300s",
        ],
    );
    let text = ok(&out);
    assert_contains(
        &stderr(&out),
        "a migration of mig to dedicated is under way; following it",
    );
    assert_contains(
        &text,
        "mig runs on DataStore dedicated and takes writes again",
    );
    assert_contains(&text, "DataStore default no longer holds mig's data (");

    // Kamaji's status, the API server's etcd, the data read back, a write, the origin empty.
    let tcp = tcp_now(&client, &ns, name).await;
    assert_eq!(
        tcp["status"]["storage"]["dataStoreName"], "dedicated",
        "{}",
        tcp["status"]["storage"]
    );
    assert!(tcp["metadata"]["annotations"]["capi-kamaji.io/migrating-from"].is_null());
    let read = kubectl(
        &tenant_kc,
        &[
            "get",
            "configmap",
            "before-move",
            "-n",
            "default",
            "-o",
            "jsonpath={.data.k}",
        ],
    );
    assert_eq!(
        String::from_utf8_lossy(&read.stdout),
        "written-before",
        "{}",
        String::from_utf8_lossy(&read.stderr)
    );
    let after = kubectl(
        &tenant_kc,
        &["create", "configmap", "after-move", "-n", "default"],
    );
    if !after.status.success() {
        let hooks = kubectl(
            &tenant_kc,
            &["get", "validatingwebhookconfigurations", "-o", "yaml"],
        );
        let pods = kubectl(&tb.kubeconfig, &["get", "pods", "-n", &ns, "-o", "wide"]);
        panic!(
            "a write after the migration failed: {}\nwebhooks:\n{}\npods:\n{}\nTCP status: {}\nmigrate said:\n{}",
            String::from_utf8_lossy(&after.stderr),
            String::from_utf8_lossy(&hooks.stdout),
            String::from_utf8_lossy(&pods.stdout),
            tcp_now(&client, &ns, name).await["status"],
            stderr(&out)
        );
    }
    assert!(
        target.count(&prefix).await.unwrap() >= keys_before / 2,
        "the target holds little of the tenant"
    );
    assert_eq!(
        origin.count(&prefix).await.unwrap(),
        0,
        "the origin still holds the tenant's keys"
    );

    let listed: Value =
        serde_json::from_str(&ok(&kamaji(tb, &ns, &["datastores", "-o", "json"]))).unwrap();
    let dedicated = listed["items"]
        .as_array()
        .unwrap()
        .iter()
        .find(|d| d["name"] == "dedicated")
        .unwrap();
    assert!(
        dedicated["usedBy"]
            .as_array()
            .unwrap()
            .contains(&json!(format!("{ns}/{name}"))),
        "{dedicated}"
    );

    // Done: a dry run and a re-run say so and change nothing.
    let dry = ok(&kamaji(
        tb,
        &ns,
        &[
            "migrate",
            name,
            "--to",
            testbed::SECOND_DATASTORE,
            "--dry-run=server",
        ],
    ));
    assert_contains(&dry, "nothing followed or removed (server dry run)");
    let again = ok(&kamaji(
        tb,
        &ns,
        &["migrate", name, "--to", testbed::SECOND_DATASTORE],
    ));
    assert_contains(
        &again,
        "mig runs on DataStore dedicated; nothing is left to remove",
    );
    orphans_are_listed_then_pruned(tb, &ns, &target, &prefix).await;
}

/// `datastores --orphans`: a prefix no tenant owns, planted in the DataStore the tenant runs on
/// (a deleted tenant's keys as clastix/kamaji#700 leaves them: written here because
/// `kamaji delete --wait` removes what Kamaji leaves), is listed with its keys while the
/// tenant's own prefix is not; `--prune` refuses without a terminal, removes it with `--yes`
/// and leaves the tenant's keys; a re-run finds nothing of it.
async fn orphans_are_listed_then_pruned(
    tb: &testbed::Testbed,
    ns: &str,
    store: &Etcd,
    owned: &str,
) {
    let gone = format!("/{}_gone/", ns.replace('-', "_"));
    let endpoint = api(&tb.client().await, "", &datastore_ar())
        .get(testbed::SECOND_DATASTORE)
        .await
        .unwrap()
        .data["spec"]["endpoints"][0]
        .as_str()
        .unwrap()
        .to_string();
    let pki = tb.dir.join("datastore-pki");
    for i in 0..3 {
        use base64::Engine;
        let b64 = |s: &str| base64::engine::general_purpose::STANDARD.encode(s);
        let body =
            json!({"key": b64(&format!("{gone}registry/configmaps/x{i}")), "value": b64("v")});
        let o = Command::new("curl")
            .args(["-sf", "--cacert"])
            .arg(pki.join("ca.crt"))
            .arg("--cert")
            .arg(pki.join("client.crt"))
            .arg("--key")
            .arg(pki.join("client.key"))
            .args(["-d", &body.to_string()])
            .arg(format!("https://{endpoint}/v3/kv/put"))
            .output()
            .unwrap();
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    }
    assert_eq!(store.count(&gone).await.unwrap(), 3);
    let tenant_keys = store.count(owned).await.unwrap();
    let listed: Value = serde_json::from_str(&ok(&kamaji(
        tb,
        ns,
        &["datastores", "--orphans", "-o", "json"],
    )))
    .unwrap();
    let items = listed["items"].as_array().unwrap();
    // Sized by reading them: each key and its one-byte value.
    let bytes: usize = (0..3)
        .map(|i| format!("{gone}registry/configmaps/x{i}").len() + 1)
        .sum();
    assert!(
        items.contains(
            &json!({"datastore": testbed::SECOND_DATASTORE, "prefix": gone, "keys": 3,
                               "bytes": bytes, "bytesExact": true})
        ),
        "{listed:#}"
    );
    assert!(
        !items.iter().any(|o| o["prefix"] == owned),
        "the tenant's own prefix is listed: {listed:#}"
    );
    let refused = kamaji(tb, ns, &["datastores", "--orphans", "--prune"]);
    assert_eq!(refused.status.code(), Some(2), "{}", stderr(&refused));
    assert_eq!(
        store.count(&gone).await.unwrap(),
        3,
        "nothing pruned without --yes"
    );
    let pruned = ok(&kamaji(
        tb,
        ns,
        &["datastores", "--orphans", "--prune", "--yes"],
    ));
    assert_contains(
        &pruned,
        &format!(
            "datastore/{}: {gone} removed (3 keys)",
            testbed::SECOND_DATASTORE
        ),
    );
    assert_eq!(store.count(&gone).await.unwrap(), 0);
    assert_eq!(
        store.count(owned).await.unwrap(),
        tenant_keys,
        "the tenant's keys stay"
    );
    let again = ok(&kamaji(tb, ns, &["datastores", "--orphans", "-o", "json"]));
    assert!(!again.contains(&gone), "{again}");
}
