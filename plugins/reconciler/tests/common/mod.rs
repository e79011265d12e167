//! Test fixture: runs the reconciler as a real process against the testbed and plays the
//! controllers the testbed cannot run (Kamaji, Cluster API core, infrastructure providers) by
//! writing the objects and status they would write.
#![allow(dead_code, clippy::too_many_arguments)]

use std::future::Future;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use k8s_openapi::ByteString;
use k8s_openapi::api::core::v1::Secret;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{
    Api, ApiResource, DeleteParams, DynamicObject, GroupVersionKind, Patch, PatchParams, PostParams,
};
use kube::{Client, ResourceExt};
use serde_json::{Value, json};
use testbed::fixtures::poll;

pub const FIXTURE: &str = "test-fixture";

pub mod image;

pub use testbed::fixtures::reconciler::Reconciler;

/// The reconciler under test with debug logs (`KR_TEST_LOG` overrides them), its log a new file
/// in the temporary directory.
pub fn start_reconciler(kubeconfig: &Path, ns: &str, extra: &[&str]) -> Reconciler {
    // One log per process started: two reconcilers of one namespace (leader election) each
    // read their own address from theirs.
    static STARTED: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
    let n = STARTED.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let pid = std::process::id();
    let log = std::env::temp_dir().join(format!("kamaji-reconciler-{ns}-{pid}-{n}.log"));
    let rust_log =
        std::env::var("KR_TEST_LOG").unwrap_or_else(|_| "kamaji_reconciler=debug".into());
    let args: Vec<&str> = std::iter::once("-vv")
        .chain(extra.iter().copied())
        .collect();
    Reconciler::start(
        Path::new(env!("CARGO_BIN_EXE_kamaji-reconciler")),
        kubeconfig,
        ns,
        log,
        &args,
        &[("RUST_LOG", rust_log)],
    )
}

/// Polls `f` every 200 ms until it yields `Some`, or panics after `secs` with `what` and the
/// reconciler's log.
pub async fn wait_for<T, F, Fut>(secs: u64, what: &str, r: Option<&Reconciler>, f: F) -> T
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Option<T>>,
{
    let why = || r.map(|r| format!("--- reconciler log ---\n{}", r.log_tail()));
    poll::wait_for(
        what,
        Duration::from_secs(secs),
        || why().unwrap_or_default(),
        f,
    )
    .await
}

pub fn ar(group: &str, version: &str, kind: &str) -> ApiResource {
    ApiResource::from_gvk(&GroupVersionKind::gvk(group, version, kind))
}
pub fn kcp_ar(version: &str) -> ApiResource {
    ar(
        "controlplane.cluster.x-k8s.io",
        version,
        "KamajiControlPlane",
    )
}
pub fn tcp_ar() -> ApiResource {
    ar("kamaji.clastix.io", "v1alpha1", "TenantControlPlane")
}
pub fn cluster_ar(version: &str) -> ApiResource {
    ar("cluster.x-k8s.io", version, "Cluster")
}

pub fn dyn_api(c: &Client, ns: &str, r: &ApiResource) -> Api<DynamicObject> {
    Api::namespaced_with(c.clone(), ns, r)
}

pub async fn get(c: &Client, ns: &str, r: &ApiResource, name: &str) -> Option<Value> {
    dyn_api(c, ns, r)
        .get_opt(name)
        .await
        .ok()
        .flatten()
        .map(|o| serde_json::to_value(o).unwrap())
}

pub async fn apply(c: &Client, ns: &str, r: &ApiResource, body: Value) -> Value {
    let name = body["metadata"]["name"].as_str().unwrap().to_string();
    let o = dyn_api(c, ns, r)
        .patch(
            &name,
            &PatchParams::apply(FIXTURE).force(),
            &Patch::Apply(&body),
        )
        .await
        .unwrap_or_else(|e| panic!("applying {} {name}: {e}", r.kind));
    serde_json::to_value(o).unwrap()
}

pub async fn merge(c: &Client, ns: &str, r: &ApiResource, name: &str, body: Value) {
    dyn_api(c, ns, r)
        .patch(name, &PatchParams::default(), &Patch::Merge(&body))
        .await
        .unwrap_or_else(|e| panic!("patching {} {name}: {e}", r.kind));
}

pub async fn merge_status(c: &Client, ns: &str, r: &ApiResource, name: &str, body: Value) {
    dyn_api(c, ns, r)
        .patch_status(name, &PatchParams::default(), &Patch::Merge(&body))
        .await
        .unwrap_or_else(|e| panic!("patching status of {} {name}: {e}", r.kind));
}

/// Applies CRDs (server-side) and waits until discovery serves every version.
pub async fn install_crds(c: &Client, crds: &[Value]) {
    let api: Api<CustomResourceDefinition> = Api::all(c.clone());
    for crd in crds {
        let name = crd["metadata"]["name"].as_str().unwrap();
        let mut body = crd.clone();
        body["apiVersion"] = json!("apiextensions.k8s.io/v1");
        body["kind"] = json!("CustomResourceDefinition");
        if let Some(o) = body.as_object_mut() {
            o.remove("status");
        }
        api.patch(
            name,
            &PatchParams::apply(FIXTURE).force(),
            &Patch::Apply(&body),
        )
        .await
        .unwrap_or_else(|e| panic!("installing CRD {name}: {e}"));
    }
    for crd in crds {
        let group = crd["spec"]["group"].as_str().unwrap().to_string();
        let plural = crd["spec"]["names"]["plural"].as_str().unwrap().to_string();
        for v in crd["spec"]["versions"].as_array().unwrap() {
            if v["served"] != json!(true) {
                continue;
            }
            let gv = format!("{group}/{}", v["name"].as_str().unwrap());
            let (c2, plural) = (c.clone(), plural.clone());
            wait_for(60, &format!("{plural}.{gv} served"), None, || {
                let (c2, gv, plural) = (c2.clone(), gv.clone(), plural.clone());
                async move {
                    c2.list_api_group_resources(&gv)
                        .await
                        .ok()
                        .filter(|l| l.resources.iter().any(|r| r.name == plural))
                        .map(|_| ())
                }
            })
            .await;
        }
    }
}

/// Our own CRDs, generated from the Rust types.
pub async fn install_our_crds(c: &Client) {
    install_crds(c, &as_values(&kamaji_reconciler::crds())).await;
}

/// Typed objects (CRDs generated from the Rust types) as JSON.
pub fn as_values<T: serde::Serialize>(objects: &[T]) -> Vec<Value> {
    objects
        .iter()
        .map(|o| serde_json::to_value(o).unwrap())
        .collect()
}

/// The Cluster in the shape of the served contract.
pub fn cluster_body(
    contract: &str,
    name: &str,
    kcp: &str,
    infra: Option<(&str, &str, &str)>,
    net: Value,
) -> Value {
    let mut spec = json!({"clusterNetwork": net});
    match contract {
        "v1beta2" => {
            spec["controlPlaneRef"] = json!({"apiGroup": "controlplane.cluster.x-k8s.io", "kind": "KamajiControlPlane", "name": kcp});
            if let Some((g, v, k)) = infra {
                let _ = v;
                spec["infrastructureRef"] = json!({"apiGroup": g, "kind": k, "name": name});
            }
        }
        _ => {
            spec["controlPlaneRef"] = json!({"apiVersion": "controlplane.cluster.x-k8s.io/v1alpha1", "kind": "KamajiControlPlane", "name": kcp});
            if let Some((g, v, k)) = infra {
                spec["infrastructureRef"] =
                    json!({"apiVersion": format!("{g}/{v}"), "kind": k, "name": name});
            }
        }
    }
    json!({"apiVersion": format!("cluster.x-k8s.io/{contract}"), "kind": "Cluster", "metadata": {"name": name}, "spec": spec})
}

/// Creates a Cluster and plays Cluster API: a KamajiControlPlane owned by it.
pub async fn cluster_with_kcp(
    c: &Client,
    ns: &str,
    contract: &str,
    cluster: &str,
    kcp: &str,
    infra: Option<(&str, &str, &str)>,
    net: Value,
    kcp_spec: Value,
) -> (Value, Value) {
    let cl = apply(
        c,
        ns,
        &cluster_ar(contract),
        cluster_body(contract, cluster, kcp, infra, net),
    )
    .await;
    let kcp_version = if contract == "v1beta2" {
        "v1alpha2"
    } else {
        "v1alpha1"
    };
    let owner = json!({"apiVersion": format!("cluster.x-k8s.io/{contract}"), "kind": "Cluster", "name": cluster, "uid": cl["metadata"]["uid"]});
    let k = apply(
        c,
        ns,
        &kcp_ar(kcp_version),
        json!({
            "apiVersion": format!("controlplane.cluster.x-k8s.io/{kcp_version}"), "kind": "KamajiControlPlane",
            "metadata": {"name": kcp, "ownerReferences": [owner]},
            "spec": kcp_spec
        }),
    )
    .await;
    (cl, k)
}

/// Plays Kamaji: the admin kubeconfig and CA Secrets (owned by the TCP) and the TCP status.
pub async fn kamaji_publish(
    c: &Client,
    ns: &str,
    tcp: &str,
    endpoint: &str,
    version: &str,
    version_status: &str,
    available: i64,
) {
    let t = get(c, ns, &tcp_ar(), tcp).await.expect("the TCP exists");
    let owner = json!({"apiVersion": "kamaji.clastix.io/v1alpha1", "kind": "TenantControlPlane", "name": tcp, "uid": t["metadata"]["uid"], "controller": true});
    let secrets: Api<Secret> = Api::namespaced(c.clone(), ns);
    let kc = |server: &str| {
        format!(
            "apiVersion: v1\nkind: Config\nclusters:\n- name: {tcp}\n  cluster:\n    server: https://{server}\ncontexts:\n- name: admin\n  context: {{cluster: {tcp}, user: admin}}\ncurrent-context: admin\nusers:\n- name: admin\n  user: {{token: x}}\n"
        )
    };
    let sec = |name: String, data: Vec<(&str, String)>| {
        json!({
            "apiVersion": "v1", "kind": "Secret",
            "metadata": {"name": name, "labels": {"kamaji.clastix.io/name": tcp}, "ownerReferences": [owner.clone()]},
            "data": data.into_iter().map(|(k, v)| (k.to_string(), json!(base64(&v)))).collect::<serde_json::Map<_, _>>()
        })
    };
    for s in [
        sec(
            format!("{tcp}-admin-kubeconfig"),
            vec![
                ("admin.conf", kc(endpoint)),
                ("admin.svc", kc(&format!("{tcp}.{ns}.svc:6443"))),
                ("super-admin.conf", kc(endpoint) + "# super\n"),
                (
                    "super-admin.svc",
                    kc(&format!("{tcp}.{ns}.svc:6443")) + "# super\n",
                ),
            ],
        ),
        sec(
            format!("{tcp}-ca"),
            vec![
                ("ca.crt", "CERT".into()),
                ("ca.key", "KEY".into()),
                ("tls.crt", "CERT".into()),
                ("tls.key", "KEY".into()),
            ],
        ),
    ] {
        let name = s["metadata"]["name"].as_str().unwrap().to_string();
        secrets
            .patch(
                &name,
                &PatchParams::apply(FIXTURE).force(),
                &Patch::Apply(&s),
            )
            .await
            .unwrap();
    }
    merge_status(
        c,
        ns,
        &tcp_ar(),
        tcp,
        json!({"status": {
            "controlPlaneEndpoint": endpoint,
            "kubernetesResources": {
                "version": {"version": version, "status": version_status},
                "deployment": {"replicas": 2, "readyReplicas": available, "availableReplicas": available, "updatedReplicas": 2,
                    "selector": format!("kamaji.clastix.io/name={tcp}"), "name": tcp, "namespace": ns}
            },
            "kubeconfig": {"admin": {"secretName": format!("{tcp}-admin-kubeconfig")}},
            "certificates": {"ca": {"secretName": format!("{tcp}-ca")}}
        }}),
    )
    .await;
}

/// Plays Kamaji reporting a version rollout without touching Secrets.
pub async fn kamaji_version(c: &Client, ns: &str, tcp: &str, version: &str, status: &str) {
    merge_status(c, ns, &tcp_ar(), tcp, json!({"status": {"kubernetesResources": {"version": {"version": version, "status": status}}}})).await;
}

pub fn base64(s: &str) -> String {
    const T: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let b = s.as_bytes();
    let mut out = String::new();
    for ch in b.chunks(3) {
        let n = (u32::from(ch[0]) << 16)
            | (u32::from(*ch.get(1).unwrap_or(&0)) << 8)
            | u32::from(*ch.get(2).unwrap_or(&0));
        out.push(T[(n >> 18) as usize & 63] as char);
        out.push(T[(n >> 12) as usize & 63] as char);
        out.push(if ch.len() > 1 {
            T[(n >> 6) as usize & 63] as char
        } else {
            '='
        });
        out.push(if ch.len() > 2 {
            T[n as usize & 63] as char
        } else {
            '='
        });
    }
    out
}

pub async fn secret(c: &Client, ns: &str, name: &str) -> Option<Secret> {
    Api::<Secret>::namespaced(c.clone(), ns)
        .get_opt(name)
        .await
        .ok()
        .flatten()
}

pub fn data(s: &Secret, key: &str) -> Option<String> {
    s.data
        .as_ref()
        .and_then(|d| d.get(key))
        .map(|b: &ByteString| String::from_utf8_lossy(&b.0).to_string())
}

/// The condition `type_` of a KCP (any version) as (status, reason, message).
pub fn condition(kcp: &Value, type_: &str) -> Option<(String, String, String)> {
    kcp["status"]["conditions"]
        .as_array()?
        .iter()
        .find(|c| c["type"] == type_)
        .map(|c| {
            (
                c["status"].as_str().unwrap_or_default().to_string(),
                c["reason"].as_str().unwrap_or_default().to_string(),
                c["message"].as_str().unwrap_or_default().to_string(),
            )
        })
}

/// Waits for the condition `want`, written `Type=Status/Reason` as kubectl shows it, on the
/// KamajiControlPlane `kcp` (served at `kcp_version`), and returns its message.
pub async fn wait_condition(
    c: &Client,
    ns: &str,
    kcp_version: &str,
    kcp: &str,
    want: &str,
    r: &Reconciler,
) -> String {
    let (type_, status, reason) = want
        .split_once('=')
        .and_then(|(t, rest)| rest.split_once('/').map(|(s, re)| (t, s, re)))
        .unwrap_or_else(|| panic!("{want:?} is not Type=Status/Reason"));
    wait_for(60, &format!("{kcp} condition {want}"), Some(r), || async {
        let k = get(c, ns, &kcp_ar(kcp_version), kcp).await?;
        let (s, re, m) = condition(&k, type_)?;
        (s == status && re == reason).then_some(m)
    })
    .await
}

/// Waits (60 s) until the KamajiControlPlane `kcp` (served at `kcp_version`) passes `ok`, and
/// returns it.
pub async fn wait_kcp(
    c: &Client,
    ns: &str,
    kcp_version: &str,
    kcp: &str,
    what: &str,
    r: &Reconciler,
    ok: impl Fn(&Value) -> bool,
) -> Value {
    wait_for(60, &format!("KCP {kcp} {what}"), Some(r), || async {
        get(c, ns, &kcp_ar(kcp_version), kcp)
            .await
            .filter(|k| ok(k))
    })
    .await
}

/// A KamajiControlPlane's `status.ready`.
pub fn ready(kcp: &Value) -> bool {
    kcp["status"]["ready"] == json!(true)
}

/// Plays Kamaji once the reconciler made the TCP of the v1alpha2 KamajiControlPlane `kcp`: its
/// address `endpoint`, `version` Ready, 2 replicas available; then waits until the KCP is ready.
pub async fn kamaji_ready(
    c: &Client,
    ns: &str,
    kcp: &str,
    endpoint: &str,
    version: &str,
    r: &Reconciler,
) {
    wait_tcp(c, ns, kcp, r).await;
    kamaji_publish(c, ns, kcp, endpoint, version, "Ready", 2).await;
    wait_kcp(
        c,
        ns,
        "v1alpha2",
        kcp,
        &format!("ready at {version}"),
        r,
        ready,
    )
    .await;
}

/// Deletes `name` in the background, as `kubectl delete` does.
pub async fn delete(c: &Client, ns: &str, r: &ApiResource, name: &str) {
    dyn_api(c, ns, r)
        .delete(name, &DeleteParams::background())
        .await
        .unwrap_or_else(|e| panic!("deleting {} {name}: {e}", r.kind));
}

/// Deletes the KamajiControlPlane `kcp` (served at `kcp_version`) and waits until it is gone:
/// the reconciler released its finalizer.
pub async fn delete_kcp(c: &Client, ns: &str, kcp_version: &str, kcp: &str, r: &Reconciler) {
    delete(c, ns, &kcp_ar(kcp_version), kcp).await;
    wait_for(60, &format!("the KCP {kcp} gone"), Some(r), || async {
        get(c, ns, &kcp_ar(kcp_version), kcp)
            .await
            .is_none()
            .then_some(())
    })
    .await;
}

/// Asserts the reconciler's log holds none of `unwanted`; `why` says what such a line means.
pub fn assert_log_lacks(r: &Reconciler, unwanted: &[&str], why: &str) {
    let log = std::fs::read_to_string(&r.log).unwrap_or_default();
    for u in unwanted {
        assert!(!log.contains(u), "{why} ({u}):\n{}", r.log_tail());
    }
}

pub fn name_of(v: &Value) -> String {
    v["metadata"]["name"]
        .as_str()
        .unwrap_or_default()
        .to_string()
}

pub async fn create(c: &Client, ns: &str, r: &ApiResource, body: Value) -> Value {
    let obj: DynamicObject = serde_json::from_value(body).unwrap();
    let o = dyn_api(c, ns, r)
        .create(&PostParams::default(), &obj)
        .await
        .unwrap_or_else(|e| panic!("creating {} {}: {e}", r.kind, obj.name_any()));
    serde_json::to_value(o).unwrap()
}

/// The CACPPK v0.20.0 module directory (downloaded by the testbed's CRD build).
pub fn cacppk_dir() -> Option<PathBuf> {
    go_mod_dir("github.com/clastix/cluster-api-control-plane-provider-kamaji@v0.20.0")
}

/// `go mod download -json <module@version>` → its directory, if the Go proxy serves it.
pub fn go_mod_dir(module: &str) -> Option<PathBuf> {
    let out = Command::new("go")
        .args(["mod", "download", "-json", module])
        .env("GOFLAGS", "-mod=mod")
        .current_dir(std::env::temp_dir())
        .output()
        .ok()?;
    let v: Value = serde_json::from_slice(&out.stdout).ok()?;
    v["Dir"].as_str().map(PathBuf::from).filter(|p| p.is_dir())
}

pub fn read_yaml_docs(path: &Path) -> Vec<Value> {
    let text = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let docs: Vec<Value> =
        serde_saphyr::from_multiple(&text).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    docs.into_iter().filter(|d| !d.is_null()).collect()
}

pub async fn get_tcp(c: &Client, ns: &str, name: &str) -> Option<Value> {
    get(c, ns, &tcp_ar(), name).await
}

/// A kind of our `ops.capi-kamaji.io` group.
pub fn ops_ar(kind: &str) -> ApiResource {
    ar("ops.capi-kamaji.io", "v1alpha1", kind)
}

/// The ClusterUpgrade and FleetUpgrade CRDs, generated from the Rust types.
pub async fn install_ops_crds(c: &Client) {
    install_crds(c, &as_values(&kcore::ops::crds())).await;
}

/// Waits for the Warning Event `reason` about the object `name` and returns it.
pub async fn warning_event(
    c: &Client,
    ns: &str,
    kind: &str,
    name: &str,
    reason: &str,
    r: &Reconciler,
) -> k8s_openapi::api::events::v1::Event {
    let events: Api<k8s_openapi::api::events::v1::Event> = Api::namespaced(c.clone(), ns);
    wait_for(
        30,
        &format!("a {reason} Event on {kind} {name}"),
        Some(r),
        || async {
            let l = events.list(&Default::default()).await.ok()?;
            l.items.into_iter().find(|e| {
                let about = e.regarding.as_ref();
                about.and_then(|o| o.name.as_deref()) == Some(name)
                    && about.and_then(|o| o.kind.as_deref()) == Some(kind)
                    && e.reason.as_deref() == Some(reason)
                    && e.type_.as_deref() == Some("Warning")
            })
        },
    )
    .await
}

/// The Cluster network of the tests that do not look at it: port 6443 and the usual CIDRs.
pub fn small_net() -> Value {
    json!({"apiServerPort": 6443, "services": {"cidrBlocks": ["10.96.0.0/16"]},
        "pods": {"cidrBlocks": ["10.244.0.0/16"]}})
}

/// A v1beta2 Cluster `cluster` without infrastructure, its KamajiControlPlane `<cluster>-cp`
/// of `kcp_spec` (the shape most stories start from).
pub async fn plain_cluster(
    c: &Client,
    ns: &str,
    cluster: &str,
    net: Value,
    kcp_spec: Value,
) -> (Value, Value) {
    let kcp = format!("{cluster}-cp");
    cluster_with_kcp(c, ns, "v1beta2", cluster, &kcp, None, net, kcp_spec).await
}

/// The TenantControlPlane of `kcp`, once the reconciler made it.
pub async fn wait_tcp(c: &Client, ns: &str, kcp: &str, r: &Reconciler) -> Value {
    wait_for(60, "the TCP", Some(r), || get_tcp(c, ns, kcp)).await
}

/// Sets `spec.version` of the KamajiControlPlane `kcp` (served at `kcp_version`), as a user
/// upgrading would.
pub async fn set_version(c: &Client, ns: &str, kcp_version: &str, kcp: &str, version: &str) {
    let body = json!({"spec": {"version": version}});
    merge(c, ns, &kcp_ar(kcp_version), kcp, body).await;
}

/// A fresh namespace on `tb` with our CRDs served: where every story starts.
pub async fn namespace(tb: &testbed::Testbed, prefix: &str) -> (Client, String) {
    let (c, ns) = tb.namespace(prefix).await;
    install_our_crds(&c).await;
    (c, ns)
}

/// The ByoCluster `name`, as the BYOH provider's users write it.
pub async fn byo_cluster(c: &Client, ns: &str, name: &str) {
    let byo = ar("infrastructure.cluster.x-k8s.io", "v1beta1", "ByoCluster");
    apply(c, ns, &byo, json!({"apiVersion": "infrastructure.cluster.x-k8s.io/v1beta1", "kind": "ByoCluster",
        "metadata": {"name": name}, "spec": {"bundleLookupBaseRegistry": "projects.registry.vmware.com/cluster_api_provider_bringyourownhost"}})).await;
}
