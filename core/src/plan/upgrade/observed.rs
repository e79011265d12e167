//! What runs: per object, the lowest Kubernetes version among its machines and its status.
//! Plans start from these observed versions, so a plan made after an interrupted apply resumes
//! where it stopped.

use std::collections::BTreeMap;

use serde::Serialize;
use serde_json::Value;

use super::{key, version_at};
use crate::json::{self, at, str_at};
use crate::labels::DEPLOYMENT_NAME_LABEL;
use crate::plan::ClusterObjects;
use crate::version::{KubeVersion, parse_version};

/// Versions observed on the cluster: per `Kind/name`, the lowest version running.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct Observed {
    pub versions: BTreeMap<String, KubeVersion>,
}

fn min_version<'a>(it: impl Iterator<Item = &'a str>) -> Option<KubeVersion> {
    it.filter_map(|s| parse_version(s).ok()).min()
}

impl Observed {
    /// Read what runs: control-plane `status.version`, MachineDeployment `status.versions`, and
    /// the Machines' `spec.version` (labels `cluster.x-k8s.io/control-plane-name`,
    /// `cluster.x-k8s.io/deployment-name`), keeping the lowest per object.
    pub fn from_objects(objs: &ClusterObjects<'_>, machines: &[Value]) -> Self {
        let mut versions = BTreeMap::new();
        fn put(versions: &mut BTreeMap<String, KubeVersion>, k: String, v: Option<KubeVersion>) {
            if let Some(v) = v {
                versions.insert(k, v);
            }
        }
        if let Some(cp) = objs.control_plane {
            let cp_name = json::name(cp);
            let from_machines = min_version(
                machines
                    .iter()
                    .filter(|m| {
                        json::label(m, "cluster.x-k8s.io/control-plane-name") == Some(cp_name)
                    })
                    .filter_map(|m| str_at(m, &["spec", "version"])),
            );
            let status = version_at(cp, &["status", "version"]);
            put(
                &mut versions,
                key(cp),
                [from_machines, status].into_iter().flatten().min(),
            );
        }
        for md in objs.machine_deployments {
            let name = json::name(md);
            let from_machines = min_version(
                machines
                    .iter()
                    .filter(|m| json::label(m, DEPLOYMENT_NAME_LABEL) == Some(name))
                    .filter_map(|m| str_at(m, &["spec", "version"])),
            );
            let from_status = min_version(
                at(md, &["status", "versions"])
                    .and_then(Value::as_array)
                    .into_iter()
                    .flatten()
                    .filter_map(|v| str_at(v, &["version"])),
            );
            put(
                &mut versions,
                key(md),
                [from_machines, from_status].into_iter().flatten().min(),
            );
        }
        if at(objs.cluster, &["spec", "topology"]).is_some() {
            let all: Vec<KubeVersion> = versions.values().cloned().collect();
            let from_status = min_version(
                ["controlPlane", "workers"]
                    .iter()
                    .filter_map(|p| {
                        at(objs.cluster, &["status", p, "versions"]).and_then(Value::as_array)
                    })
                    .flatten()
                    .filter_map(|v| str_at(v, &["version"])),
            );
            put(
                &mut versions,
                key(objs.cluster),
                all.into_iter().chain(from_status).min(),
            );
        }
        Observed { versions }
    }

    /// The observed version of `Kind/name`.
    pub fn get(&self, k: &str) -> Option<KubeVersion> {
        self.versions.get(k).cloned()
    }
}
