//! Plans of the `kubectl kamaji` verbs that change a KamajiControlPlane: `scale` (control-plane
//! replicas, 0 = asleep, and the workers of the cluster's one MachineDeployment) and `upgrade`
//! (one minor at a time, then the workers). Teardown (`delete`) is the shared teardown of
//! `kubectl capi delete`. On a ClusterClass cluster both go through the Cluster's topology
//! ([`topology`]).

use serde::Serialize;
use serde_json::{Value, json};

pub mod topology;

use super::api::DEFAULT_REPLICAS;
use super::endpoint::DEFAULT_PORT;
use super::version::upgrade_steps;
use crate::Error;
use crate::error::usage;
use crate::json::{self, at, str_at};
use crate::plan::MAX_CONTROL_PLANE_REPLICAS;
use crate::version::releases::Releases;
use crate::version::{KubeVersion, parse_version};

/// `scale`'s flags, checked.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct KamajiScaleRequest {
    pub replicas: Option<i64>,
    pub workers: Option<i64>,
}

impl KamajiScaleRequest {
    /// Refuses an empty request and out-of-range counts before anything is read or written.
    pub fn new(replicas: Option<i64>, workers: Option<i64>) -> Result<KamajiScaleRequest, Error> {
        if replicas.is_none() && workers.is_none() {
            return Err(usage(
                "nothing to scale",
                "pass --replicas N and/or --workers N",
            ));
        }
        if let Some(r) = replicas
            && !(0..=MAX_CONTROL_PLANE_REPLICAS).contains(&r)
        {
            return Err(usage(
                format!("invalid --replicas {r}"),
                format!("use 0 (asleep) to {MAX_CONTROL_PLANE_REPLICAS}"),
            ));
        }
        if let Some(w) = workers
            && w < 0
        {
            return Err(usage(format!("invalid --workers {w}"), "use 0 or more"));
        }
        Ok(KamajiScaleRequest { replicas, workers })
    }
}

/// One merge patch of a scale or upgrade.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Change {
    pub kind: String,
    pub name: String,
    pub merge_patch: Value,
    /// What the verb prints once it is applied.
    pub done: String,
}

/// The control-plane patch of `scale --replicas`, with kubectl's `scaled from A to B` line.
pub fn scale_control_plane(kcp: &Value, replicas: i64) -> Change {
    let name = json::name(kcp);
    let from = at(kcp, &["spec", "replicas"])
        .and_then(Value::as_i64)
        .unwrap_or(DEFAULT_REPLICAS.into());
    let note = if replicas == 0 {
        " (asleep)"
    } else if from == 0 {
        " (waking up)"
    } else {
        ""
    };
    Change {
        kind: "KamajiControlPlane".into(),
        name: name.to_string(),
        merge_patch: json!({"spec": {"replicas": replicas}}),
        done: format!(
            "kamajicontrolplane.controlplane.cluster.x-k8s.io/{name} scaled from {from} to {replicas}{note}"
        ),
    }
}

/// The worker patch of `scale --workers`: the cluster must have exactly one MachineDeployment.
pub fn scale_workers(cluster: &str, mds: &[Value], workers: i64) -> Result<Change, Error> {
    match mds {
        [md] => {
            let n = json::name(md);
            Ok(Change {
                kind: "MachineDeployment".into(),
                name: n.to_string(),
                merge_patch: json!({"spec": {"replicas": workers}}),
                done: format!("machinedeployment.cluster.x-k8s.io/{n} scaled to {workers}"),
            })
        }
        [] => Err(Error::Other {
            message: format!("cluster {cluster} has no MachineDeployment"),
            hint: Some(
                "workers of --infrastructure none are joined by hand (kubectl kamaji token join)"
                    .into(),
            ),
        }),
        _ => Err(Error::Other {
            message: format!("cluster {cluster} has several MachineDeployments"),
            hint: Some(
                "scale one with kubectl capi scale or kubectl scale machinedeployment".into(),
            ),
        }),
    }
}

/// What `scale --wait` sees of the control plane.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ScaleObserved {
    /// The TenantControlPlane's `status.kubernetesResources.version.status`.
    pub phase: String,
    pub ready_replicas: i64,
    /// The replicas of the Deployment Kamaji inlines in the TenantControlPlane's status; `None`
    /// before it reports one.
    pub deployment_replicas: Option<i64>,
}

impl ScaleObserved {
    /// Reads a TenantControlPlane. Kamaji inlines the Deployment's status, whose counts are
    /// `omitempty` (k8s.io/api apps/v1 DeploymentStatus): a scaled-down Deployment has no
    /// `replicas` field at all.
    pub fn deployment_replicas(tcp: &Value) -> Option<i64> {
        let d = at(tcp, &["status", "kubernetesResources", "deployment"])?;
        d.is_object().then(|| d["replicas"].as_i64().unwrap_or(0))
    }

    /// Whether the control plane runs `replicas` (0: asleep; Kamaji before the `Sleeping`
    /// phase existed shows a scaled-down Deployment only).
    pub fn done(&self, replicas: i64) -> bool {
        if replicas == 0 {
            self.phase == "Sleeping"
                || (self.deployment_replicas == Some(0) && self.ready_replicas == 0)
        } else {
            self.ready_replicas >= replicas
                && self.deployment_replicas == Some(replicas)
                && self.phase == "Ready"
        }
    }
}

/// `upgrade`'s plan: the control plane's minor steps, then the workers.
#[derive(Serialize, Clone, Debug, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct KamajiUpgradePlan {
    pub name: String,
    pub namespace: String,
    pub from: KubeVersion,
    pub to: KubeVersion,
    pub control_plane_steps: Vec<KubeVersion>,
    pub machine_deployments: Vec<String>,
    /// Where the intermediate versions came from, and the minors stepped at `.0`; none for a
    /// single step.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub patch_releases_from: Option<String>,
    /// The newest patch of each minor the walk passes, as recorded on the KamajiControlPlane
    /// ([`crate::version::releases::PATCH_RELEASES_ANNOTATION`]) with each step.
    #[serde(skip)]
    pub recorded: String,
    /// What the preflight found (the deprecated APIs clients still call, or that it could not
    /// tell); an error blocks the upgrade unless forced.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub findings: Vec<crate::plan::Finding>,
}

/// The version a KamajiControlPlane runs: its status, else its TenantControlPlane's, else its
/// spec.
pub fn current_version(kcp: &Value, tcp: Option<&Value>) -> Option<String> {
    str_at(kcp, &["status", "version"])
        .or_else(|| {
            tcp.and_then(|x| str_at(x, &["status", "kubernetesResources", "version", "version"]))
        })
        .or_else(|| str_at(kcp, &["spec", "version"]))
        .map(str::to_string)
}

/// Plans `upgrade` of the KamajiControlPlane `kcp` to `to`. `mds` are the cluster's
/// MachineDeployments (empty with `--control-plane-only`): those not at `to` follow the control
/// plane.
pub fn plan_upgrade(
    kcp: &Value,
    tcp: Option<&Value>,
    mds: &[Value],
    to: &KubeVersion,
    releases: &Releases,
) -> Result<KamajiUpgradePlan, Error> {
    let name = json::name(kcp).to_string();
    let from = current_version(kcp, tcp)
        .ok_or_else(|| Error::other(format!("{name} reports no version yet")))?;
    let from = parse_version(&from)?;
    let walk = upgrade_steps(&from, to, releases)?;
    let machine_deployments = mds
        .iter()
        .filter(|md| {
            let runs = str_at(md, &["spec", "template", "spec", "version"]);
            runs.and_then(|v| parse_version(v).ok()).as_ref() != Some(to)
        })
        .map(|md| json::name(md).to_string())
        .collect();
    Ok(KamajiUpgradePlan {
        name,
        namespace: json::namespace(kcp).to_string(),
        recorded: releases.recorded(&from, to).join(","),
        from,
        to: to.clone(),
        patch_releases_from: walk.provenance(),
        control_plane_steps: walk.steps,
        machine_deployments,
        findings: Vec::new(),
    })
}

/// Kamaji cannot upgrade a sleeping control plane: the refusal, when `kcp` is asleep.
pub fn refuse_asleep(kcp: &Value) -> Result<(), Error> {
    if at(kcp, &["spec", "replicas"]).and_then(Value::as_i64) != Some(0) {
        return Ok(());
    }
    let name = json::name(kcp);
    Err(Error::Other {
        message: format!(
            "{name} is asleep (0 replicas); Kamaji cannot upgrade a sleeping control plane"
        ),
        hint: Some(format!(
            "wake it first: kubectl kamaji scale {name} --replicas {DEFAULT_REPLICAS} --wait"
        )),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::version::releases::ReleaseSource;

    fn kcp(replicas: i64, spec: &str, status: Option<&str>) -> Value {
        json!({"metadata": {"name": "c1", "namespace": "ns"},
            "spec": {"replicas": replicas, "version": spec},
            "status": status.map(|v| json!({"version": v})).unwrap_or(json!({}))})
    }

    #[test]
    fn scale_requests_are_checked_before_anything_happens() {
        assert!(
            KamajiScaleRequest::new(None, None)
                .unwrap_err()
                .to_string()
                .contains("nothing")
        );
        assert_eq!(
            KamajiScaleRequest::new(Some(17), None)
                .unwrap_err()
                .exit_code(),
            2
        );
        assert_eq!(
            KamajiScaleRequest::new(None, Some(-1))
                .unwrap_err()
                .exit_code(),
            2
        );
        assert!(KamajiScaleRequest::new(Some(0), Some(3)).is_ok());
    }

    #[test]
    fn scale_lines_say_asleep_and_waking() {
        assert!(
            scale_control_plane(&kcp(2, "v1.35.0", None), 0)
                .done
                .ends_with("from 2 to 0 (asleep)")
        );
        assert!(
            scale_control_plane(&kcp(0, "v1.35.0", None), 2)
                .done
                .ends_with("(waking up)")
        );
        let md = json!({"metadata": {"name": "c1-md-0"}});
        assert_eq!(
            scale_workers("c1", std::slice::from_ref(&md), 3)
                .unwrap()
                .merge_patch,
            json!({"spec": {"replicas": 3}})
        );
        assert!(scale_workers("c1", &[], 3).is_err());
        assert!(scale_workers("c1", &[md.clone(), md], 3).is_err());
    }

    #[test]
    fn scale_waits_for_ready_replicas_or_sleep() {
        let o = |phase: &str, ready, dep| ScaleObserved {
            phase: phase.into(),
            ready_replicas: ready,
            deployment_replicas: dep,
        };
        assert!(o("Ready", 2, Some(2)).done(2));
        assert!(!o("Ready", 1, Some(2)).done(2));
        assert!(o("Sleeping", 0, None).done(0));
        assert!(o("Ready", 0, Some(0)).done(0));
        assert_eq!(
            ScaleObserved::deployment_replicas(
                &json!({"status": {"kubernetesResources": {"deployment": {}}}})
            ),
            Some(0)
        );
    }

    #[test]
    fn upgrade_walks_minors_then_the_workers_not_yet_there() {
        let mds = [
            json!({"metadata": {"name": "a"}, "spec": {"template": {"spec": {"version": "v1.33.1"}}}}),
            json!({"metadata": {"name": "b"}, "spec": {"template": {"spec": {"version": "v1.35.0"}}}}),
        ];
        let known = Releases::none().with(["v1.33.6", "v1.34.4"], ReleaseSource::Markers);
        let p = plan_upgrade(
            &kcp(2, "v1.33.1", Some("v1.33.1")),
            None,
            &mds,
            &parse_version("v1.35.0").unwrap(),
            &known,
        )
        .unwrap();
        assert_eq!(p.control_plane_steps, ["v1.33.6", "v1.34.4", "v1.35.0"]);
        assert_eq!(p.recorded, "v1.33.6,v1.34.4");
        assert_eq!(
            p.patch_releases_from.as_deref(),
            Some("intermediate versions from Kubernetes' stable-release markers")
        );
        assert_eq!(p.machine_deployments, ["a"]);
        assert_eq!(p.from, "v1.33.1");
        assert!(refuse_asleep(&kcp(0, "v1.33.1", None)).is_err());
        assert!(refuse_asleep(&kcp(2, "v1.33.1", None)).is_ok());
        let older = parse_version("v1.34.0").unwrap();
        assert!(plan_upgrade(&kcp(2, "v1.35.0", None), None, &[], &older, &known).is_err());
    }
}

/// `kamaji create`'s endpoint preflight (BCM checks that a new cluster's control-plane address
/// is unused): who else serves on `address:port`, among Clusters
/// (`spec.controlPlaneEndpoint`), KamajiControlPlanes (`spec.network.serviceAddress`, on the port
/// of the Cluster that references them, as the Kamaji provider derives it from
/// `clusterNetwork.apiServerPort`) and TenantControlPlanes (`spec.networkProfile`), leaving out
/// the cluster being created (`namespace/name`, so a re-run passes) and what it owns. Two control
/// planes on one address and port fight over it; on different ports they do not.
pub fn endpoint_users(
    address: &str,
    namespace: &str,
    name: &str,
    port: u16,
    clusters: &[Value],
    control_planes: &[Value],
    tenant_control_planes: &[Value],
) -> Vec<String> {
    let ours = |o: &Value| {
        json::namespace(o) == namespace
            && (json::name(o) == name
                || json::label(o, crate::labels::CLUSTER_NAME_LABEL) == Some(name)
                || at(o, &["metadata", "ownerReferences"])
                    .and_then(Value::as_array)
                    .is_some_and(|refs| {
                        refs.iter().any(|r| {
                            str_at(r, &["name"]) == Some(name)
                                && matches!(
                                    str_at(r, &["kind"]),
                                    Some("Cluster" | "KamajiControlPlane")
                                )
                        })
                    }))
    };
    let port_at = |o: &Value, path: &[&str]| {
        at(o, path)
            .and_then(Value::as_u64)
            .and_then(|p| u16::try_from(p).ok())
            .filter(|p| *p != 0)
    };
    let cluster_port = |c: &Value| {
        port_at(c, &["spec", "controlPlaneEndpoint", "port"])
            .or_else(|| port_at(c, &["spec", "clusterNetwork", "apiServerPort"]))
            .unwrap_or(DEFAULT_PORT)
    };
    let control_plane_port = |kcp: &Value| {
        clusters
            .iter()
            .find(|c| {
                json::namespace(c) == json::namespace(kcp)
                    && str_at(c, &["spec", "controlPlaneRef", "kind"]) == Some(json::kind(kcp))
                    && str_at(c, &["spec", "controlPlaneRef", "name"]) == Some(json::name(kcp))
            })
            .map_or(DEFAULT_PORT, cluster_port)
    };
    let mut users = Vec::new();
    let mut note = |o: &Value, their: (Option<&str>, u16)| {
        if their == (Some(address), port) && !ours(o) {
            users.push(format!(
                "{} {}/{}",
                json::kind(o),
                json::namespace(o),
                json::name(o)
            ));
        }
    };
    for c in clusters {
        note(
            c,
            (
                str_at(c, &["spec", "controlPlaneEndpoint", "host"]),
                cluster_port(c),
            ),
        );
    }
    for k in control_planes {
        note(
            k,
            (
                str_at(k, &["spec", "network", "serviceAddress"]),
                control_plane_port(k),
            ),
        );
    }
    for t in tenant_control_planes {
        note(
            t,
            (
                str_at(t, &["spec", "networkProfile", "address"]),
                port_at(t, &["spec", "networkProfile", "port"]).unwrap_or(DEFAULT_PORT),
            ),
        );
    }
    users
}

#[cfg(test)]
mod endpoint_tests {
    use super::endpoint_users;
    use serde_json::json;

    #[test]
    fn finds_other_users_of_the_address_but_not_ourselves() {
        let clusters = [
            json!({"kind": "Cluster", "metadata": {"name": "a", "namespace": "n"},
                   "spec": {"controlPlaneEndpoint": {"host": "192.0.2.10", "port": 6443}}}),
            json!({"kind": "Cluster", "metadata": {"name": "new", "namespace": "n"},
                   "spec": {"controlPlaneEndpoint": {"host": "192.0.2.10", "port": 6443}}}),
        ];
        let tcps = [json!({"kind": "TenantControlPlane",
            "metadata": {"name": "new", "namespace": "n", "ownerReferences": [{"kind": "KamajiControlPlane", "name": "new"}]},
            "spec": {"networkProfile": {"address": "192.0.2.10"}}})];
        assert_eq!(
            endpoint_users("192.0.2.10", "n", "new", 6443, &clusters, &[], &tcps),
            vec!["Cluster n/a".to_string()]
        );
        assert!(endpoint_users("192.0.2.11", "n", "new", 6443, &clusters, &[], &tcps).is_empty());
    }

    /// Two control planes on one address but different ports do not collide (Kamaji's
    /// `networkProfile.port`, CAPI's `clusterNetwork.apiServerPort`); a KamajiControlPlane has no
    /// port of its own and takes its Cluster's.
    #[test]
    fn same_address_on_another_port_is_free() {
        let clusters = [
            json!({"kind": "Cluster", "metadata": {"name": "a", "namespace": "n"},
                   "spec": {"controlPlaneEndpoint": {"host": "127.0.0.1", "port": 30001},
                            "controlPlaneRef": {"kind": "KamajiControlPlane", "name": "a"}}}),
            json!({"kind": "Cluster", "metadata": {"name": "b", "namespace": "m"},
                   "spec": {"clusterNetwork": {"apiServerPort": 30002},
                            "controlPlaneRef": {"kind": "KamajiControlPlane", "name": "b"}}}),
        ];
        let kcps = [
            json!({"kind": "KamajiControlPlane", "metadata": {"name": "a", "namespace": "n"},
                   "spec": {"network": {"serviceAddress": "127.0.0.1"}}}),
            json!({"kind": "KamajiControlPlane", "metadata": {"name": "b", "namespace": "m"},
                   "spec": {"network": {"serviceAddress": "127.0.0.1"}}}),
            json!({"kind": "KamajiControlPlane", "metadata": {"name": "orphan", "namespace": "m"},
                   "spec": {"network": {"serviceAddress": "127.0.0.1"}}}),
        ];
        let tcps = [json!({"kind": "TenantControlPlane",
            "metadata": {"name": "t", "namespace": "o"},
            "spec": {"networkProfile": {"address": "127.0.0.1", "port": 30003}}})];
        let users = |port| endpoint_users("127.0.0.1", "x", "new", port, &clusters, &kcps, &tcps);
        assert!(users(30009).is_empty(), "{:?}", users(30009));
        assert_eq!(
            users(30001),
            [
                "Cluster n/a".to_string(),
                "KamajiControlPlane n/a".to_string()
            ]
        );
        assert_eq!(users(30002), ["KamajiControlPlane m/b".to_string()]);
        assert_eq!(users(30003), ["TenantControlPlane o/t".to_string()]);
        // No Cluster names it: Kamaji's default port.
        assert_eq!(users(6443), ["KamajiControlPlane m/orphan".to_string()]);
    }
}

/// A key of a Secret that a Kamaji DataStore reads (`secretReference`: name, namespace,
/// keyPath).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DataStoreSecretKey {
    pub namespace: String,
    pub name: String,
    pub key: String,
}

/// Every Secret key a DataStore's spec points at (its TLS certificates and keys, its basic-auth
/// user and password): Kamaji reads them to reach the datastore, so a missing one leaves every
/// control plane on it unprovisioned. Values given inline (`content`) need nothing.
pub fn datastore_secret_keys(datastore: &Value) -> Vec<DataStoreSecretKey> {
    fn walk(v: &Value, out: &mut Vec<DataStoreSecretKey>) {
        match v {
            Value::Object(o) => {
                if let Some(r) = o.get("secretReference")
                    && let (Some(name), Some(key)) = (
                        r.get("name").and_then(Value::as_str),
                        r.get("keyPath").and_then(Value::as_str),
                    )
                {
                    out.push(DataStoreSecretKey {
                        namespace: r
                            .get("namespace")
                            .and_then(Value::as_str)
                            .unwrap_or_default()
                            .to_string(),
                        name: name.to_string(),
                        key: key.to_string(),
                    });
                }
                o.values().for_each(|c| walk(c, out));
            }
            Value::Array(a) => a.iter().for_each(|c| walk(c, out)),
            _ => {}
        }
    }
    let mut out = Vec::new();
    if let Some(spec) = datastore.get("spec") {
        walk(spec, &mut out);
    }
    out
}

#[cfg(test)]
mod datastore_tests {
    use super::*;

    #[test]
    fn every_secret_reference_of_a_datastore_is_found_and_inline_content_needs_none() {
        let ds = json!({"spec": {"driver": "etcd", "endpoints": ["e:2379"], "tlsConfig": {
            "certificateAuthority": {
                "certificate": {"secretReference": {"name": "ca", "namespace": "kamaji-system", "keyPath": "ca.crt"}},
                "privateKey": {"content": "LS0t"}},
            "clientCertificate": {
                "certificate": {"secretReference": {"name": "client", "namespace": "kamaji-system", "keyPath": "tls.crt"}},
                "privateKey": {"secretReference": {"name": "client", "namespace": "kamaji-system", "keyPath": "tls.key"}}}},
            "basicAuth": {"username": {"content": "cm9vdA=="}}}});
        let keys: Vec<String> = datastore_secret_keys(&ds)
            .into_iter()
            .map(|k| format!("{}/{}:{}", k.namespace, k.name, k.key))
            .collect();
        let mut want = vec![
            "kamaji-system/ca:ca.crt",
            "kamaji-system/client:tls.crt",
            "kamaji-system/client:tls.key",
        ];
        let mut got = keys.clone();
        got.sort();
        want.sort();
        assert_eq!(got, want);
        assert!(datastore_secret_keys(&json!({"spec": {"driver": "etcd"}})).is_empty());
    }
}
