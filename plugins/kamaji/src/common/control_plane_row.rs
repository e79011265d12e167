//! A control plane in one row: the columns `list` prints (cluster, version, phase, replicas,
//! endpoint, DataStore, age), which `status`, `scale --wait` and `delete` read too.

use kcore::fields;
use serde::Serialize;
use serde_json::Value;

use super::age::age;
use super::control_plane::ControlPlane;
use super::tenant_status::{endpoint, tcp_phase};

/// One control plane, as `list` prints it.
#[derive(Serialize, Clone, Debug)]
#[serde(rename_all = "camelCase")]
pub struct ControlPlaneRow {
    /// kubectl's `metadata` (name, namespace, labels) of the KamajiControlPlane, else the TenantControlPlane.
    pub metadata: kcore::json::RowMeta,
    pub namespace: String,
    pub name: String,
    /// `KamajiControlPlane` or `TenantControlPlane` (standalone).
    pub kind: String,
    pub cluster: Option<String>,
    pub version: Option<String>,
    pub status: Option<String>,
    pub ready_replicas: i64,
    pub desired_replicas: i64,
    pub endpoint: Option<String>,
    pub datastore: Option<String>,
    pub age: String,
}

fn s(v: Option<&Value>) -> Option<String> {
    v.and_then(Value::as_str)
        .filter(|x| !x.is_empty())
        .map(str::to_string)
}

impl ControlPlaneRow {
    /// The row of a control plane.
    pub fn of(kcp: Option<&Value>, tcp: Option<&Value>) -> ControlPlaneRow {
        let cp = ControlPlane {
            namespace: String::new(),
            name: String::new(),
            kcp: kcp.cloned(),
            tcp: tcp.cloned(),
        };
        let main = kcp.or(tcp).cloned().unwrap_or(Value::Null);
        let tcp_v = tcp.cloned().unwrap_or(Value::Null);
        let (ready, desired) = match kcp {
            Some(k) => {
                let r = fields::replicas(k);
                (r.ready.unwrap_or(0), r.desired.unwrap_or(2))
            }
            None => (
                tcp_v["status"]["kubernetesResources"]["deployment"]["readyReplicas"]
                    .as_i64()
                    .unwrap_or(0),
                tcp_v["spec"]["controlPlane"]["deployment"]["replicas"]
                    .as_i64()
                    .unwrap_or(2),
            ),
        };
        ControlPlaneRow {
            metadata: kcore::json::RowMeta::of(&main),
            namespace: s(main["metadata"].get("namespace")).unwrap_or_default(),
            name: s(main["metadata"].get("name")).unwrap_or_default(),
            kind: if kcp.is_some() {
                "KamajiControlPlane"
            } else {
                "TenantControlPlane"
            }
            .into(),
            cluster: cp.cluster_name(),
            version: s(kcp.and_then(|k| k["status"].get("version")))
                .or_else(|| {
                    s(fields::at(
                        &tcp_v,
                        &["status", "kubernetesResources", "version", "version"],
                    ))
                })
                .or_else(|| s(kcp.and_then(|k| k["spec"].get("version"))))
                .or_else(|| s(fields::at(&tcp_v, &["spec", "kubernetes", "version"]))),
            status: tcp.and_then(tcp_phase).or_else(|| {
                kcp.map(|k| {
                    if fields::control_plane_ready(k) {
                        "Ready".into()
                    } else {
                        "Provisioning".into()
                    }
                })
            }),
            ready_replicas: ready,
            desired_replicas: desired,
            endpoint: endpoint(&cp).map(|(h, p)| format!("{h}:{p}")),
            datastore: s(fields::at(&tcp_v, &["status", "storage", "dataStoreName"]))
                .or_else(|| s(kcp.and_then(|k| k["spec"].get("dataStoreName"))))
                .or_else(|| s(tcp_v["spec"].get("dataStore"))),
            age: age(&main),
        }
    }
}
