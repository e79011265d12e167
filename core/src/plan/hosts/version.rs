//! The Kubernetes a host carries (its [`KUBERNETES_VERSION_LABEL`], from the script `hosts add`
//! prints) and whether a machine of a given version fits it.
//!
//! A machine whose ByoMachineTemplate names no installer runs on the host's own kubelet and
//! kubeadm (BYOH v0.5.0's agent with `--skip-installation`), so the host must carry the
//! machine's minor; BYOH picks hosts by selector only and the join would fail late. A host that
//! says no version (onboarded without a kubelet, or before the label existed) is not judged.

use serde_json::Value;

use crate::json::{self, at};
use crate::labels::KUBERNETES_VERSION_LABEL;
use crate::version::KubeVersion;

/// The most hosts a message names before "and N more".
const NAMED: usize = 5;

/// The version `host` says it carries, if it says one.
pub fn carried(host: &Value) -> Option<&str> {
    json::label(host, KUBERNETES_VERSION_LABEL).filter(|v| !v.is_empty())
}

/// Whether `host` can run a machine of `version`: it says no version, or one of the same
/// minor (a kubeadm of v1.35.0 joins a v1.35.4 control plane). A label that is not a version
/// does not fit: someone wrote it by hand, and it cannot be trusted to run anything.
pub fn fits(host: &Value, version: &KubeVersion) -> bool {
    match carried(host) {
        None => true,
        Some(v) => KubeVersion::parse_v(v)
            .is_ok_and(|c| c.major == version.major && c.minor == version.minor),
    }
}

/// Whether machines of the ByoMachineTemplate `template` run on the host's own Kubernetes (no
/// `installerRef`), so hosts must carry the machines' version.
pub fn uses_host_kubernetes(template: &Value) -> bool {
    at(template, &["spec", "template", "spec", "installerRef"]).is_none_or(Value::is_null)
}

/// `node-3 (v1.35.4), node-4 (v1.35.4)` for the hosts among `hosts` that do not fit
/// `version`, at most five named; empty when all fit.
pub fn misfits<'a>(hosts: impl IntoIterator<Item = &'a Value>, version: &KubeVersion) -> String {
    let all: Vec<String> = hosts
        .into_iter()
        .filter(|h| !fits(h, version))
        .map(|h| format!("{} ({})", json::name(h), carried(h).unwrap_or_default()))
        .collect();
    match all.len() {
        0 => String::new(),
        n if n <= NAMED => all.join(", "),
        n => format!("{} and {} more", all[..NAMED].join(", "), n - NAMED),
    }
}

/// The words a host-count message adds for a version: ` carrying Kubernetes v1.36`.
pub fn carrying(version: &KubeVersion) -> String {
    format!(" carrying Kubernetes v{}.{}", version.major, version.minor)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn host(name: &str, version: Option<&str>) -> Value {
        let mut h = json!({"metadata": {"name": name, "labels": {"role": "worker"}}});
        if let Some(v) = version {
            h["metadata"]["labels"][KUBERNETES_VERSION_LABEL] = json!(v);
        }
        h
    }

    #[test]
    fn a_host_fits_its_minor_or_says_nothing() {
        let v136 = KubeVersion::parse_v("v1.36.3").unwrap();
        assert!(fits(&host("a", Some("v1.36.0")), &v136));
        assert!(fits(&host("b", None), &v136));
        assert!(!fits(&host("c", Some("v1.35.4")), &v136));
        assert!(!fits(&host("d", Some("latest")), &v136));
        assert!(!fits(&host("e", Some("v2.36.3")), &v136));
        let hosts: Vec<Value> = (0..7)
            .map(|i| host(&format!("n{i}"), Some("v1.35.4")))
            .chain([host("ok", Some("v1.36.1"))])
            .collect();
        assert_eq!(misfits(&hosts[..2], &v136), "n0 (v1.35.4), n1 (v1.35.4)");
        assert_eq!(
            misfits(&hosts, &v136),
            "n0 (v1.35.4), n1 (v1.35.4), n2 (v1.35.4), n3 (v1.35.4), n4 (v1.35.4) and 2 more"
        );
        assert_eq!(misfits(&hosts[7..], &v136), "");
        assert_eq!(carrying(&v136), " carrying Kubernetes v1.36");
    }

    #[test]
    fn only_templates_without_an_installer_use_the_hosts_kubernetes() {
        let own = json!({"spec": {"template": {"spec": {"selector": {}}}}});
        let installer = json!({"spec": {"template": {"spec": {"installerRef": {"kind": "K8sInstallerConfigTemplate", "name": "i"}}}}});
        assert!(uses_host_kubernetes(&own));
        assert!(!uses_host_kubernetes(&installer));
    }
}
