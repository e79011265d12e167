//! Writing and reading the objects the tests seed through the API (no controllers run here),
//! and judging a run of the binary that must fail.

#![allow(dead_code)]

use std::fmt::Debug;
use std::process::Output;

use kube::api::{Api, DynamicObject, Patch, PatchParams, PostParams};
use kube::discovery::ApiResource;
use kube::{Client, Resource};
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::Value;
use testbed::fixtures::run::{assert_contains, stderr, stdout};

pub use testbed::api_resource as ar;

pub const CAPI: &str = "cluster.x-k8s.io";
pub const CP: &str = "controlplane.cluster.x-k8s.io";
pub const INFRA: &str = "infrastructure.cluster.x-k8s.io";

/// `s` in base64, as a Secret's `data` holds it.
pub fn b64(s: &str) -> String {
    use base64::Engine;
    base64::engine::general_purpose::STANDARD.encode(s)
}

/// `r` in namespace `ns`.
pub fn api(client: &Client, ns: &str, r: &ApiResource) -> Api<DynamicObject> {
    Api::namespaced_with(client.clone(), ns, r)
}

/// Server-side applies `obj` (named in its metadata) in `ns`.
pub async fn apply(client: &Client, ns: &str, r: &ApiResource, obj: Value) {
    let name = obj["metadata"]["name"].as_str().unwrap().to_string();
    api(client, ns, r)
        .patch(
            &name,
            &PatchParams::apply("verbs-test"),
            &Patch::Apply(&obj),
        )
        .await
        .unwrap_or_else(|e| panic!("applying {} {name}: {e}", r.kind));
}

/// The object `name` as stored (metadata and all).
pub async fn get(client: &Client, ns: &str, r: &ApiResource, name: &str) -> Value {
    let obj = api(client, ns, r)
        .get(name)
        .await
        .unwrap_or_else(|e| panic!("getting {} {name}: {e}", r.kind));
    serde_json::to_value(obj).unwrap()
}

/// Creates `obj` through `api`; returns what the server stored.
pub async fn create<K>(api: &Api<K>, obj: Value) -> K
where
    K: Resource + Clone + DeserializeOwned + Serialize + Debug,
{
    let name = obj["metadata"]["name"].to_string();
    let obj: K = serde_json::from_value(obj).unwrap_or_else(|e| panic!("{name}: {e}"));
    api.create(&PostParams::default(), &obj)
        .await
        .unwrap_or_else(|e| panic!("creating {name}: {e}"))
}

/// Asserts the run exited with `code` and said `want` on stderr (both outputs shown on
/// failure; an empty `want` checks the code only); returns stderr.
#[track_caller]
pub fn assert_fails(o: &Output, code: i32, want: &str) -> String {
    let (out, err) = (stdout(o), stderr(o));
    let exit = o.status.code();
    assert!(
        exit == Some(code),
        "exit {exit:?}, want {code}\nstdout:\n{out}\nstderr:\n{err}"
    );
    assert_contains(&err, want);
    err
}
