//! A three-member etcd StatefulSet on the SIMULATED image kubelet, shaped as `kubectl capi init
//! --datastore etcd` writes it but without TLS (a bare testbed has no cert-manager): the
//! StatefulSet controller makes the pods and their claims, the PersistentVolume binder binds the
//! claims to the testbed's volumes, the kubelet mounts them, and the members find each other by
//! their names under the headless Service (the SIMULATED cluster DNS) and reach each other at
//! their own addresses (the SIMULATED pod network). Checked from inside a member's namespaces,
//! from the host's network as the tenant-pod runner runs its processes, and by a kube-apiserver
//! the tenant-pod runner runs on that etcd, as Kamaji's tenants would; then a member is deleted
//! and comes back on its volume as the same member. On the day-0 testbed, where `kubectl capi
//! init --datastore etcd` runs the same.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use k8s_openapi::api::apps::v1::StatefulSet;
use k8s_openapi::api::core::v1::{
    Namespace, PersistentVolume, PersistentVolumeClaim, Pod, Secret, Service,
};
use kube::api::{Api, DeleteParams, ListParams, Patch, PatchParams, PostParams};
use serde_json::{Value, json};
use testbed::images::{ETCD_IMAGE, Upstream};

const NS: &str = "kamaji-system";
const NAME: &str = "kamaji-etcd";
const MANAGER: &str = "statefulset-test";

/// Member `i`'s name under the headless Service.
fn member(i: usize) -> String {
    format!("{NAME}-{i}.{NAME}.{NS}.svc.cluster.local")
}

/// What the namespace's pods and claims say, for a failure message.
async fn diagnose(client: &kube::Client) -> String {
    let mut out = String::new();
    if let Ok(pods) = Api::<Pod>::namespaced(client.clone(), NS)
        .list(&ListParams::default())
        .await
    {
        for p in pods.items {
            out.push_str(&format!(
                "pod {}: {}\n",
                p.metadata.name.unwrap_or_default(),
                serde_json::to_string(&p.status).unwrap_or_default()
            ));
        }
    }
    if let Ok(claims) = Api::<PersistentVolumeClaim>::namespaced(client.clone(), NS)
        .list(&ListParams::default())
        .await
    {
        for c in claims.items {
            out.push_str(&format!(
                "claim {}: {}\n",
                c.metadata.name.unwrap_or_default(),
                serde_json::to_string(&c.status).unwrap_or_default()
            ));
        }
    }
    out
}

async fn poll<T, F, Fut>(client: &kube::Client, what: &str, limit: Duration, mut f: F) -> T
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Option<T>>,
{
    let deadline = Instant::now() + limit;
    loop {
        if let Some(v) = f().await {
            return v;
        }
        if Instant::now() > deadline {
            panic!("{what}: not within {limit:?}\n{}", diagnose(client).await);
        }
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
}

/// `curl` of etcd's JSON gateway (`POST` with `{}`) or of a plain `GET`, run as `program
/// args… curl` (how the namespaces are entered); the answer as JSON, when there is one.
fn curl((program, args): &(PathBuf, Vec<String>), url: &str, post: bool) -> Option<Value> {
    let mut c = Command::new(program);
    c.args(args).args(["-sS", "--max-time", "5"]);
    if post {
        c.args(["-X", "POST", "-d", "{}"]);
    }
    let out = c.arg(url).output().expect("running curl");
    if !out.status.success() {
        eprintln!(
            "curl {url}: {}",
            String::from_utf8_lossy(&out.stderr).trim()
        );
        return None;
    }
    serde_json::from_slice(&out.stdout).ok()
}

fn apply_objects(image: &str) -> (Value, Value) {
    let labels = json!({"app.kubernetes.io/name": NAME});
    let url = |i: usize, port: u16| format!("http://{}:{port}", member(i));
    let own = format!("$(POD_NAME).{NAME}.{NS}.svc.cluster.local");
    let cluster: Vec<String> = (0..3)
        .map(|i| format!("{NAME}-{i}={}", url(i, 2380)))
        .collect();
    let probe = |path: &str, period: u32, failures: u32| {
        json!({"httpGet": {"path": path, "port": 2381, "scheme": "HTTP"},
               "periodSeconds": period, "timeoutSeconds": 15, "failureThreshold": failures})
    };
    let service = json!({
        "apiVersion": "v1", "kind": "Service",
        "metadata": {"name": NAME, "namespace": NS},
        "spec": {"clusterIP": "None", "publishNotReadyAddresses": true, "selector": labels,
            "ports": [{"name": "client", "port": 2379}, {"name": "peer", "port": 2380},
                      {"name": "metrics", "port": 2381}]},
    });
    let sts = json!({
        "apiVersion": "apps/v1", "kind": "StatefulSet",
        "metadata": {"name": NAME, "namespace": NS},
        "spec": {
            "replicas": 3, "serviceName": NAME, "podManagementPolicy": "Parallel",
            "selector": {"matchLabels": labels},
            "template": {"metadata": {"labels": labels}, "spec": {"containers": [{
                "name": "etcd", "image": image, "command": ["/usr/local/bin/etcd"],
                "args": [
                    "--name=$(POD_NAME)",
                    "--data-dir=/var/lib/etcd/data",
                    "--listen-client-urls=http://0.0.0.0:2379",
                    format!("--advertise-client-urls=http://{own}:2379"),
                    "--listen-peer-urls=http://0.0.0.0:2380",
                    format!("--initial-advertise-peer-urls=http://{own}:2380"),
                    format!("--initial-cluster={}", cluster.join(",")),
                    "--initial-cluster-state=new",
                    format!("--initial-cluster-token={NAME}"),
                    "--listen-metrics-urls=http://0.0.0.0:2381",
                ],
                "env": [{"name": "POD_NAME",
                         "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}}],
                "ports": [{"name": "client", "containerPort": 2379},
                          {"name": "peer", "containerPort": 2380},
                          {"name": "metrics", "containerPort": 2381}],
                "volumeMounts": [{"name": "data", "mountPath": "/var/lib/etcd"}],
                "readinessProbe": probe("/readyz", 5, 3),
                "livenessProbe": probe("/livez", 10, 8),
            }]}},
            "volumeClaimTemplates": [{"metadata": {"name": "data"}, "spec": {
                "accessModes": ["ReadWriteOnce"],
                "resources": {"requests": {"storage": "10Gi"}}}}],
        },
    });
    (service, sts)
}

/// The member ID etcd-`i` reports for itself (`/v3/maintenance/status`), asked from the host's
/// network under the SIMULATED cluster DNS's hosts file, as a tenant's kube-apiserver asks.
fn member_id(hosts: &Path, i: usize) -> Option<String> {
    let status = curl(
        &testbed::pods::names::host_command(hosts, Path::new("curl"), &[]),
        &format!("http://{}:2379/v3/maintenance/status", member(i)),
        true,
    )?;
    status["header"]["member_id"].as_str().map(String::from)
}

async fn ready_pod(pods: &Api<Pod>, name: &str) -> Option<Pod> {
    let p = pods.get_opt(name).await.ok()??;
    let ready = p
        .status
        .as_ref()?
        .conditions
        .as_ref()?
        .iter()
        .any(|c| c.type_ == "Ready" && c.status == "True");
    (ready && p.metadata.deletion_timestamp.is_none()).then_some(p)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn etcd_statefulset_members_find_each_other_by_name_and_keep_their_data_on_restart() {
    let t0 = Instant::now();
    let tb = testbed::shared_day0();
    let client = tb.client().await;
    let registry = tb.registry.clone().expect("the testbed's registry");
    let hosts = tb
        .cluster_hosts
        .clone()
        .expect("the cluster DNS's hosts file");
    let row = Upstream::of(ETCD_IMAGE).expect("the etcd image's row");
    let pushed = testbed::images::push(&registry, &[row]).await.unwrap();
    let image = pushed[0].image.clone();
    assert_eq!(image, format!("{registry}/etcd:3.6.8-0"));

    let _ = Api::<Namespace>::all(client.clone())
        .create(
            &PostParams::default(),
            &serde_json::from_value(json!({"metadata": {"name": NS}})).unwrap(),
        )
        .await;
    let pods: Api<Pod> = Api::namespaced(client.clone(), NS);
    let claims: Api<PersistentVolumeClaim> = Api::namespaced(client.clone(), NS);

    // A pod whose claim does not exist is not placed, and says why, as a scheduler says it.
    let waiting: Pod = serde_json::from_value(json!({
        "metadata": {"name": "waits-for-its-claim", "namespace": NS},
        "spec": {"containers": [{"name": "etcd", "image": image}],
                 "volumes": [{"name": "data",
                              "persistentVolumeClaim": {"claimName": "no-such-claim"}}]},
    }))
    .unwrap();
    pods.create(&PostParams::default(), &waiting).await.unwrap();

    let (service, sts) = apply_objects(&image);
    let ssa = PatchParams::apply(MANAGER).force();
    Api::<Service>::namespaced(client.clone(), NS)
        .patch(NAME, &ssa, &Patch::Apply(&service))
        .await
        .unwrap();
    let sets: Api<StatefulSet> = Api::namespaced(client.clone(), NS);
    sets.patch(NAME, &ssa, &Patch::Apply(&sts)).await.unwrap();

    let why = poll(
        &client,
        "the claimless pod's reason",
        Duration::from_secs(20),
        || async {
            let p = pods.get("waits-for-its-claim").await.ok()?;
            let c = p.status?.conditions?;
            c.into_iter()
                .find(|c| c.type_ == "PodScheduled" && c.status == "False")
                .and_then(|c| c.message)
        },
    )
    .await;
    assert!(
        why.contains(r#"persistentvolumeclaim "no-such-claim" not found"#),
        "{why}"
    );
    pods.delete("waits-for-its-claim", &DeleteParams::default())
        .await
        .unwrap();

    poll(
        &client,
        "3 ready members",
        Duration::from_secs(90),
        || async {
            let s = sets.get(NAME).await.ok()?;
            (s.status?.ready_replicas == Some(3)).then_some(())
        },
    )
    .await;
    eprintln!("three members ready after {:.1?}", t0.elapsed());

    // From inside member 2's namespaces (its /etc/hosts, its network): member 0 by its name
    // lists one cluster of three.
    let mut enter = tb
        .image_pod_enter_args(NS, &format!("{NAME}-2"))
        .expect("member 2's namespaces");
    enter.push("curl".into());
    let enter = (PathBuf::from("nsenter"), enter);
    let list = poll(
        &client,
        "the member list",
        Duration::from_secs(20),
        || async {
            curl(
                &enter,
                &format!("http://{}:2379/v3/cluster/member/list", member(0)),
                true,
            )
        },
    )
    .await;
    let members = list["members"].as_array().cloned().unwrap_or_default();
    assert_eq!(members.len(), 3, "{list}");
    for m in &members {
        let peer = m["peerURLs"][0].as_str().unwrap_or_default();
        assert!(
            peer.ends_with(&format!(".{NAME}.{NS}.svc.cluster.local:2380")),
            "{m}"
        );
    }
    // And the short form of the name, from inside.
    let health = curl(
        &enter,
        &format!("http://{NAME}-1.{NAME}.{NS}.svc:2379/health"),
        false,
    );
    assert_eq!(
        health.as_ref().map(|h| h["health"].clone()),
        Some(json!("true")),
        "{health:?}"
    );

    // Each claim is Bound to one of the testbed's volumes, which holds the member's data.
    let mut volumes = Vec::new();
    for i in 0..3 {
        let c = claims.get(&format!("data-{NAME}-{i}")).await.unwrap();
        assert_eq!(
            c.status.as_ref().and_then(|s| s.phase.as_deref()),
            Some("Bound")
        );
        let pv_name = c.spec.unwrap().volume_name.unwrap();
        let pv = Api::<PersistentVolume>::all(client.clone())
            .get(&pv_name)
            .await
            .unwrap();
        let spec = pv.spec.unwrap();
        assert_eq!(
            spec.storage_class_name.as_deref(),
            Some(testbed::storage::STORAGE_CLASS)
        );
        let dir = spec.host_path.unwrap().path;
        assert!(dir.starts_with(&tb.dir.display().to_string()), "{dir}");
        assert!(
            Path::new(&dir).join("data/member/wal").is_dir(),
            "member {i}'s data in {dir}"
        );
        volumes.push(pv_name);
    }
    volumes.sort();
    volumes.dedup();
    assert_eq!(volumes.len(), 3, "one volume each");

    // From the host's network, as the tenant-pod runner runs a kube-apiserver: member 1 by name.
    let id = poll(
        &client,
        "member 1's ID",
        Duration::from_secs(20),
        || async { member_id(&hosts, 1) },
    )
    .await;
    assert!(
        members
            .iter()
            .any(|m| m["ID"].as_str() == Some(id.as_str())),
        "{id} in {list}"
    );

    // A tenant's kube-apiserver, run by the tenant-pod runner in the host's network, on the
    // three members by name.
    tenant_apiserver_on_the_members(tb, &client).await;

    // A member deleted comes back (a new pod, a new address) on its claim, as the same member.
    let old = pods.get(&format!("{NAME}-1")).await.unwrap();
    let old_ip = old.status.as_ref().and_then(|s| s.pod_ip.clone());
    pods.delete(&format!("{NAME}-1"), &DeleteParams::default())
        .await
        .unwrap();
    let t1 = Instant::now();
    let new = poll(
        &client,
        "member 1 back",
        Duration::from_secs(60),
        || async {
            let p = ready_pod(&pods, &format!("{NAME}-1")).await?;
            (p.metadata.uid != old.metadata.uid).then_some(p)
        },
    )
    .await;
    eprintln!("member 1 back after {:.1?}", t1.elapsed());
    assert_ne!(
        new.status.as_ref().and_then(|s| s.pod_ip.clone()),
        old_ip,
        "a new pod, a new address"
    );
    let again = poll(
        &client,
        "member 1's ID again",
        Duration::from_secs(20),
        || async { member_id(&hosts, 1) },
    )
    .await;
    assert_eq!(again, id, "the same member, from the same data");
    let c = claims.get(&format!("data-{NAME}-1")).await.unwrap();
    assert!(volumes.contains(&c.spec.unwrap().volume_name.unwrap()));
    eprintln!("done after {:.1?}", t0.elapsed());
}

/// Runs a kube-apiserver of the newest tenant release as the tenant-pod runner runs Kamaji's
/// (a pod labelled as Kamaji labels them), with the three members as its etcd, and waits for it
/// Ready (its `/readyz` checks etcd); then deletes it.
async fn tenant_apiserver_on_the_members(tb: &testbed::Testbed, client: &kube::Client) {
    let (version, _) = tb
        .assets
        .tenant_releases
        .last()
        .expect("a tenant release")
        .clone();
    let pki = tb.dir.join("pki");
    let sa: Secret = serde_json::from_value(json!({
        "metadata": {"name": "etcd-check-sa", "namespace": NS},
        "stringData": {
            "sa.key": std::fs::read_to_string(pki.join("sa.key")).unwrap(),
            "sa.pub": std::fs::read_to_string(pki.join("sa.pub")).unwrap(),
        },
    }))
    .unwrap();
    Api::<Secret>::namespaced(client.clone(), NS)
        .create(&PostParams::default(), &sa)
        .await
        .unwrap();
    // The tenant port its SIMULATED Service serves: any free one.
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let servers: Vec<String> = (0..3)
        .map(|i| format!("http://{}:2379", member(i)))
        .collect();
    let pod: Pod = serde_json::from_value(json!({
        "metadata": {"name": "etcd-check-apiserver", "namespace": NS,
                     "labels": {"kamaji.clastix.io/name": "etcd-check"}},
        "spec": {"containers": [{
            "name": "kube-apiserver",
            "image": format!("registry.k8s.io/kube-apiserver:{version}"),
            "command": ["kube-apiserver"],
            "args": [
                format!("--etcd-servers={}", servers.join(",")),
                "--etcd-prefix=/etcd-check",
                format!("--secure-port={port}"),
                "--advertise-address=127.0.0.1",
                "--service-account-issuer=https://etcd-check.invalid",
                "--service-account-key-file=/sa/sa.pub",
                "--service-account-signing-key-file=/sa/sa.key",
                "--cert-dir=/certs",
                // Anonymous requests (the runner's /readyz probe) are refused under the
                // default AlwaysAllow authorizer; RBAC lets them read /readyz.
                "--authorization-mode=RBAC",
            ],
            "volumeMounts": [{"name": "sa", "mountPath": "/sa"},
                             {"name": "certs", "mountPath": "/certs"}],
        }],
        "volumes": [{"name": "sa", "secret": {"secretName": "etcd-check-sa"}},
                    {"name": "certs", "emptyDir": {}}]},
    }))
    .unwrap();
    let pods: Api<Pod> = Api::namespaced(client.clone(), NS);
    pods.create(&PostParams::default(), &pod).await.unwrap();
    let t = Instant::now();
    let deadline = Instant::now() + Duration::from_secs(60);
    while ready_pod(&pods, "etcd-check-apiserver").await.is_none() {
        if Instant::now() > deadline {
            panic!(
                "the tenant kube-apiserver: not Ready within 60 s; its log:\n{}",
                tenant_log(tb)
            );
        }
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
    eprintln!(
        "tenant kube-apiserver {version} ready on the members after {:.1?}",
        t.elapsed()
    );
    pods.delete("etcd-check-apiserver", &DeleteParams::default())
        .await
        .unwrap();
}

/// The last lines of the tenant kube-apiserver's log, for a failure message.
fn tenant_log(tb: &testbed::Testbed) -> String {
    let Ok(dirs) = std::fs::read_dir(tb.dir.join("tenant-pods")) else {
        return "(no tenant pod folder)".into();
    };
    let mut out = String::new();
    for d in dirs.flatten() {
        if !d
            .file_name()
            .to_string_lossy()
            .contains("etcd-check-apiserver")
        {
            continue;
        }
        let text = std::fs::read_to_string(d.path().join("kube-apiserver.log")).unwrap_or_default();
        let lines: Vec<&str> = text.lines().collect();
        out.push_str(&lines[lines.len().saturating_sub(30)..].join("\n"));
    }
    out
}
