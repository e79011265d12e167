//! What the watches delivered, kept so that a reconcile reads it instead of asking the API server
//! again (at 1,000 KamajiControlPlanes, 8,374 of the 20,520 requests to settle were GETs
//! of Clusters and TenantControlPlanes the watches had just brought).
//!
//! Each object is kept as the few fields the reconcile reads, serialized: a few hundred bytes,
//! where a `serde_json` tree of the same costs a B-tree leaf of 632 bytes per map, so that 10,000
//! control planes fit in the reconciler's memory budget. Secrets and infrastructure clusters are
//! watched as metadata, and of them only a hash of the resourceVersion is kept: enough to tell
//! that what a reconcile copied or checked has not changed since.
//!
//! A cache is fed by its watch's events before they trigger a reconcile, so an object is never
//! older in the cache than the event that caused the reconcile. After a watch error the old
//! contents stay until the relist is complete and then are replaced at once, as kube-runtime's
//! reflector does (`reflector::store`, kube-runtime 5.0.0).

use std::collections::HashMap;
use std::sync::{Arc, RwLock};

use kube::Resource;
use kube::runtime::watcher::Event;
use serde_json::{Map, Value};

/// `namespace/name`: one allocation per object.
type Key = String;

fn key_of(ns: &str, name: &str) -> Key {
    format!("{ns}/{name}")
}

/// A cache's answer for one object.
#[derive(Clone, Debug, PartialEq)]
pub(super) enum Cached<V> {
    /// The watch has not listed its objects yet (start-up): ask the API server.
    Unknown,
    /// Listed, and not there.
    Absent,
    Present(V),
}

/// The objects of one watch, each as `V` (what `keep` made of it).
pub(super) struct Cache<V> {
    state: RwLock<State<V>>,
}

struct State<V> {
    ready: bool,
    objs: HashMap<Key, V>,
    /// The objects of a relist in progress, which replace `objs` once it is complete.
    relist: Option<HashMap<Key, V>>,
}

impl<V: Clone> Default for Cache<V> {
    fn default() -> Self {
        Cache {
            state: RwLock::new(State {
                ready: false,
                objs: HashMap::new(),
                relist: None,
            }),
        }
    }
}

fn key<K: Resource>(o: &K) -> Key {
    let m = o.meta();
    key_of(
        m.namespace.as_deref().unwrap_or_default(),
        m.name.as_deref().unwrap_or_default(),
    )
}

impl<V: Clone> Cache<V> {
    /// Takes in one watch event; `keep` is what to keep of an object (`None`: nothing, the object
    /// is of no interest).
    pub(super) fn observe<K: Resource>(&self, ev: &Event<K>, keep: impl Fn(&K) -> Option<V>) {
        // A poisoned lock means a panic while it was held; the map is still whole (every change
        // is one insert or remove), so it is used as it is.
        let mut st = self.state.write().unwrap_or_else(|p| p.into_inner());
        match ev {
            Event::Apply(o) => match keep(o) {
                Some(v) => {
                    st.objs.insert(key(o), v);
                }
                None => {
                    st.objs.remove(&key(o));
                }
            },
            Event::Delete(o) => {
                st.objs.remove(&key(o));
            }
            Event::Init => st.relist = Some(HashMap::new()),
            Event::InitApply(o) => {
                if let Some(v) = keep(o) {
                    let st = &mut *st;
                    st.relist.as_mut().unwrap_or(&mut st.objs).insert(key(o), v);
                }
            }
            Event::InitDone => {
                if let Some(all) = st.relist.take() {
                    st.objs = all;
                }
                st.ready = true;
            }
        }
    }

    pub(super) fn get(&self, ns: &str, name: &str) -> Cached<V> {
        let st = self.state.read().unwrap_or_else(|p| p.into_inner());
        if !st.ready {
            return Cached::Unknown;
        }
        match st.objs.get(&key_of(ns, name)) {
            Some(v) => Cached::Present(v.clone()),
            None => Cached::Absent,
        }
    }
}

/// An object kept as JSON text.
pub(super) type Kept = Arc<str>;

/// Parses what [`keep_cluster`] or [`keep_tcp`] kept.
pub(super) fn parse<T: serde::de::DeserializeOwned>(k: &Kept) -> Option<T> {
    serde_json::from_str(k).ok()
}

/// Copies `from[path]` into `to[path]`, creating the maps on the way, when it is there.
fn pick(to: &mut Map<String, Value>, from: &Value, path: &[&str]) {
    let mut src = from;
    for p in path {
        match src.get(p) {
            Some(v) => src = v,
            None => return,
        }
    }
    let Some((last, parents)) = path.split_last() else {
        return;
    };
    let mut dst = to;
    for p in parents {
        let next = dst
            .entry(p.to_string())
            .or_insert_with(|| Value::Object(Map::new()));
        let Value::Object(m) = next else {
            return;
        };
        dst = m;
    }
    dst.insert(last.to_string(), src.clone());
}

fn keep_paths<K: serde::Serialize>(o: &K, paths: &[&[&str]]) -> Option<Kept> {
    let v = serde_json::to_value(o).ok()?;
    let mut out = Map::new();
    for p in paths {
        pick(&mut out, &v, p);
    }
    Some(Value::Object(out).to_string().into())
}

/// What the reconcile reads of a Cluster: whether it is paused, its network, its infrastructure
/// reference and its endpoint (`kcore::kamaji::reconcile::paused`,
/// `act::repair_cluster_endpoint`, `ClusterNetwork::from_cluster`, `infra_cluster::infra_step`).
pub(super) fn keep_cluster<K: serde::Serialize>(c: &K) -> Option<Kept> {
    keep_paths(
        c,
        &[
            &["apiVersion"],
            &["kind"],
            &["metadata", "name"],
            &["metadata", "namespace"],
            &["metadata", "resourceVersion"],
            &["metadata", "annotations", kcore::labels::PAUSED_ANNOTATION],
            &["spec", "paused"],
            &["spec", "clusterNetwork"],
            &["spec", "infrastructureRef"],
            &["spec", "controlPlaneEndpoint"],
        ],
    )
}

/// What the reconcile reads of a TenantControlPlane: its identity, generation and metadata
/// (`act::unchanged_since_applied`), its version (the version step of
/// `kcore::kamaji::reconcile::decide`), and of its status the endpoint, the version and the
/// Deployment's counts (`TcpState`) and the names of the Secrets it publishes
/// (`secrets::publish_secrets`).
pub(super) fn keep_tcp<K: serde::Serialize>(t: &K) -> Option<Kept> {
    const DEP: [&str; 3] = ["status", "kubernetesResources", "deployment"];
    let mut paths: Vec<Vec<&str>> = [
        &["apiVersion"][..],
        &["kind"],
        &["metadata", "name"],
        &["metadata", "namespace"],
        &["metadata", "uid"],
        &["metadata", "generation"],
        &["metadata", "resourceVersion"],
        &["metadata", "labels"],
        &["metadata", "ownerReferences"],
        &["spec", "kubernetes", "version"],
        &["status", "controlPlaneEndpoint"],
        &["status", "kubernetesResources", "version"],
        &["status", "kubeconfig", "admin", "secretName"],
        &["status", "certificates", "ca", "secretName"],
    ]
    .iter()
    .map(|p| p.to_vec())
    .collect();
    for k in kcore::kamaji::reconcile::DEPLOYMENT_COUNTS
        .iter()
        .chain(&["selector"])
    {
        paths.push(DEP.iter().copied().chain([*k]).collect());
    }
    let v = serde_json::to_value(t).ok()?;
    let mut out = Map::new();
    for p in &paths {
        pick(&mut out, &v, p);
    }
    // The annotations but kubectl's copy of the last applied object, which can be large.
    if let Some(a) = v["metadata"]["annotations"].as_object() {
        let mut a = a.clone();
        a.remove(crate::tcp::LAST_APPLIED);
        pick(
            &mut out,
            &serde_json::json!({"metadata": {"annotations": a}}),
            &["metadata", "annotations"],
        );
    }
    // A Deployment status without any count (scaled to zero) still reads as present.
    if v[DEP[0]][DEP[1]][DEP[2]].is_object()
        && out
            .get("status")
            .is_none_or(|s| !s[DEP[1]][DEP[2]].is_object())
    {
        pick(
            &mut out,
            &serde_json::json!({"status": {"kubernetesResources": {"deployment": {}}}}),
            &DEP,
        );
    }
    Some(Value::Object(out).to_string().into())
}

/// A hash of a resourceVersion: what the metadata-only caches keep (8 bytes, no allocation);
/// two resourceVersions of one object hash alike with a chance of 2^-64.
pub(super) fn version(rv: &str) -> u64 {
    super::hash_of(rv)
}

/// What the metadata-only caches keep of an object: its resourceVersion's [`version`].
pub(super) fn resource_version<K: Resource>(o: &K) -> Option<u64> {
    o.meta().resource_version.as_deref().map(version)
}

#[cfg(test)]
mod tests {
    use super::*;
    use kube::api::DynamicObject;
    use serde_json::json;

    fn obj(v: Value) -> DynamicObject {
        serde_json::from_value(v).unwrap()
    }

    #[test]
    fn a_relist_replaces_the_objects_once_complete() {
        let c: Cache<u64> = Cache::default();
        let a = obj(json!({"metadata": {"name": "a", "namespace": "n", "resourceVersion": "1"}}));
        let b = obj(json!({"metadata": {"name": "b", "namespace": "n", "resourceVersion": "2"}}));
        assert_eq!(c.get("n", "a"), Cached::Unknown);
        c.observe(&Event::<DynamicObject>::Init, resource_version);
        c.observe(&Event::InitApply(a.clone()), resource_version);
        assert_eq!(c.get("n", "a"), Cached::Unknown, "not listed to the end");
        c.observe(&Event::<DynamicObject>::InitDone, resource_version);
        assert_eq!(c.get("n", "a"), Cached::Present(version("1")));
        c.observe(&Event::Apply(b.clone()), resource_version);
        // A relist that no longer has `a` (deleted while the watch was down): `a` stays until
        // the relist is complete, then it is gone.
        c.observe(&Event::<DynamicObject>::Init, resource_version);
        c.observe(&Event::InitApply(b), resource_version);
        assert_eq!(c.get("n", "a"), Cached::Present(version("1")));
        c.observe(&Event::<DynamicObject>::InitDone, resource_version);
        assert_eq!(c.get("n", "a"), Cached::Absent);
        assert_eq!(c.get("n", "b"), Cached::Present(version("2")));
        c.observe(
            &Event::Delete(obj(json!({"metadata": {"name": "b", "namespace": "n"}}))),
            resource_version,
        );
        assert_eq!(c.get("n", "b"), Cached::Absent);
    }

    #[test]
    fn a_tenant_control_plane_keeps_what_the_reconcile_reads() {
        let t = obj(json!({
            "apiVersion": "kamaji.clastix.io/v1alpha1", "kind": "TenantControlPlane",
            "metadata": {"name": "t", "namespace": "n", "uid": "u", "generation": 3,
                "resourceVersion": "9", "labels": {"a": "b"},
                "annotations": {"x": "y", "kubectl.kubernetes.io/last-applied-configuration": "{…}"},
                "ownerReferences": [{"apiVersion": "v", "kind": "K", "name": "k", "uid": "o"}],
                "managedFields": [{"manager": "m"}]},
            "spec": {"kubernetes": {"version": "v1.33.0", "kubelet": {"cgroupfs": "systemd"}},
                "controlPlane": {"deployment": {"replicas": 2}}},
            "status": {"controlPlaneEndpoint": "1.2.3.4:6443",
                "kubernetesResources": {"version": {"version": "v1.33.0", "status": "Ready"},
                    "deployment": {"availableReplicas": 2, "selector": "s",
                        "conditions": [{"type": "Available"}]}},
                "kubeconfig": {"admin": {"secretName": "t-admin-kubeconfig", "checksum": "c"}},
                "certificates": {"ca": {"secretName": "t-ca"}},
                "storage": {"driver": "etcd"}}
        }));
        let kept: Value = parse(&keep_tcp(&t).unwrap()).unwrap();
        assert_eq!(kept["metadata"]["generation"], 3);
        assert_eq!(kept["metadata"]["annotations"], json!({"x": "y"}));
        assert_eq!(kept["metadata"]["ownerReferences"][0]["uid"], "o");
        assert!(kept["metadata"].get("managedFields").is_none());
        assert_eq!(kept["spec"], json!({"kubernetes": {"version": "v1.33.0"}}));
        assert_eq!(
            kept["status"]["kubernetesResources"]["deployment"],
            json!({"availableReplicas": 2, "selector": "s"})
        );
        assert_eq!(
            kept["status"]["kubeconfig"],
            json!({"admin": {"secretName": "t-admin-kubeconfig"}})
        );
        assert!(kept["status"].get("storage").is_none());
        // A Deployment status with no count left is still there: its counts read 0, not unknown.
        let mut scaled = serde_json::to_value(&t).unwrap();
        scaled["status"]["kubernetesResources"]["deployment"] = json!({"observedGeneration": 4});
        let kept: Value = parse(&keep_tcp(&scaled).unwrap()).unwrap();
        assert_eq!(
            kept["status"]["kubernetesResources"]["deployment"],
            json!({})
        );
    }

    #[test]
    fn a_cluster_keeps_its_network_reference_endpoint_and_pause() {
        let c = obj(json!({
            "metadata": {"name": "c", "namespace": "n", "resourceVersion": "4",
                "annotations": {"cluster.x-k8s.io/paused": "", "other": "x"}},
            "spec": {"paused": true, "clusterNetwork": {"pods": {"cidrBlocks": ["10.0.0.0/8"]}},
                "infrastructureRef": {"kind": "ByoCluster", "name": "c"},
                "controlPlaneEndpoint": {"host": "h", "port": 6443},
                "topology": {"class": "big"}},
            "status": {"phase": "Provisioned"}
        }));
        let kept: Value = parse(&keep_cluster(&c).unwrap()).unwrap();
        assert_eq!(
            kept["metadata"]["annotations"],
            json!({"cluster.x-k8s.io/paused": ""})
        );
        assert_eq!(kept["spec"]["paused"], true);
        assert_eq!(
            kept["spec"]["clusterNetwork"]["pods"]["cidrBlocks"][0],
            "10.0.0.0/8"
        );
        assert_eq!(kept["spec"]["controlPlaneEndpoint"]["port"], 6443);
        assert!(kept["spec"].get("topology").is_none() && kept.get("status").is_none());
    }
}
