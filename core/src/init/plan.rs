//! What `init` does with each component, from what the cluster already runs: install it, apply
//! it again (ours, at this version: a re-run finishes an interrupted one and changes nothing
//! otherwise), adopt it (installed by clusterctl or by hand at the pinned version: left as it
//! is, not installed twice), or refuse before anything is written.

use serde_json::Value;

use super::manifests::{COMPONENT_LABEL, VERSION_LABEL};
use super::set::Component;
use crate::error::Error;
use crate::labels::CLUSTERCTL_LABEL;

/// How a component is installed on the cluster, read from its controller's Deployment.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Installed {
    Absent,
    /// Applied by `init` at `version`.
    Ours {
        version: String,
    },
    /// Installed by `by` (clusterctl, or by hand); `version` from its controller's image tag.
    Theirs {
        by: &'static str,
        version: Option<String>,
    },
}

/// What `init` does with one component.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Action {
    Install,
    /// Ours at this version: applied again (server-side apply changes only what differs).
    Reapply,
    /// Theirs at the pinned version: left alone.
    Adopt {
        by: &'static str,
    },
}

/// A component and what happens to it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct InitStep {
    pub component: &'static Component,
    pub action: Action,
}

/// The version in an image reference's tag (`…/cluster-api-controller:v1.14.2` is `v1.14.2`).
fn image_tag(image: &str) -> Option<&str> {
    let last = image.rsplit('/').next()?;
    let last = last.split('@').next()?;
    last.split_once(':').map(|(_, t)| t)
}

/// How `component` is installed, from its controller's Deployment (`None`: there is none)
/// and clusterctl's inventory entry for it (its `Provider` object, named by the component's
/// manifest label in its namespace), which knows the version when the image tag does not
/// (a build from a branch, a digest).
pub fn installed(
    component: &Component,
    deployment: Option<&Value>,
    inventory: Option<&Value>,
) -> Installed {
    let Some(d) = deployment else {
        return Installed::Absent;
    };
    let labels = &d["metadata"]["labels"];
    if labels[COMPONENT_LABEL] == component.id
        && let Some(v) = labels[VERSION_LABEL].as_str()
    {
        return Installed::Ours {
            version: v.to_string(),
        };
    }
    let by = if labels.get(CLUSTERCTL_LABEL).is_some() {
        "clusterctl"
    } else {
        "hand"
    };
    let containers = d
        .pointer("/spec/template/spec/containers")
        .and_then(Value::as_array);
    let manager = containers.and_then(|cs| {
        cs.iter()
            .find(|c| c["name"] == "manager")
            .or_else(|| cs.first())
    });
    let version = inventory
        .and_then(|p| p["version"].as_str())
        .or_else(|| {
            manager
                .and_then(|c| c["image"].as_str())
                .and_then(image_tag)
        })
        .filter(|t| crate::version::parse_version(t).is_ok())
        .map(str::to_string);
    Installed::Theirs { by, version }
}

/// The step for `component`, installed as `now`; `Err` (nothing written yet) when it runs at
/// another version, or at one its controller's image does not tell.
pub fn step(component: &'static Component, now: &Installed) -> Result<InitStep, Error> {
    let action = match now {
        Installed::Absent => Action::Install,
        Installed::Ours { version } if version == component.version => Action::Reapply,
        Installed::Theirs {
            by,
            version: Some(v),
        } if v == component.version => Action::Adopt { by },
        Installed::Ours { version }
        | Installed::Theirs {
            version: Some(version),
            ..
        } => {
            return Err(Error::Other {
                message: format!(
                    "{} {version} is installed in namespace {}; this kubectl-capi installs {} {}; nothing was applied",
                    component.id, component.namespace, component.id, component.version
                ),
                hint: Some(format!(
                    "leave it out of this init (choose the other providers with --core, --bootstrap, --control-plane, --infrastructure), or bring it to {} first",
                    component.version
                )),
            });
        }
        Installed::Theirs { by, version: None } => {
            return Err(Error::Other {
                message: format!(
                    "{} is installed in namespace {} (by {by}) at a version its image does not tell; nothing was applied",
                    component.id, component.namespace
                ),
                hint: Some(format!(
                    "check kubectl -n {} get deployment {} -o wide; leave it out of this init if it is not {}",
                    component.namespace, component.deployment, component.version
                )),
            });
        }
    };
    Ok(InitStep { component, action })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::init::set::by_id;
    use serde_json::json;

    fn deployment(labels: Value, image: &str) -> Value {
        json!({"metadata": {"labels": labels}, "spec": {"template": {"spec": {"containers": [
            {"name": "kube-rbac-proxy", "image": "gcr.io/kubebuilder/kube-rbac-proxy:v0.8.0"},
            {"name": "manager", "image": image}]}}}})
    }

    #[test]
    fn each_way_of_being_installed_has_its_step() {
        let c = by_id("cluster-api").unwrap();
        let image = "registry.k8s.io/cluster-api/cluster-api-controller:v1.14.2";
        let cases = [
            (None, Ok(Action::Install)),
            (
                Some(deployment(
                    json!({COMPONENT_LABEL: "cluster-api", VERSION_LABEL: "v1.14.2"}),
                    image,
                )),
                Ok(Action::Reapply),
            ),
            (
                Some(deployment(json!({CLUSTERCTL_LABEL: ""}), image)),
                Ok(Action::Adopt { by: "clusterctl" }),
            ),
            (
                Some(deployment(
                    json!({}),
                    "mirror/cluster-api-controller:v1.14.2@sha256:ab",
                )),
                Ok(Action::Adopt { by: "hand" }),
            ),
            (
                Some(deployment(
                    json!({CLUSTERCTL_LABEL: ""}),
                    "r/cluster-api-controller:v1.13.0",
                )),
                Err(
                    "cluster-api v1.13.0 is installed in namespace capi-system; this kubectl-capi installs cluster-api v1.14.2",
                ),
            ),
            (
                Some(deployment(json!({}), "r/cluster-api-controller:main")),
                Err("at a version its image does not tell"),
            ),
        ];
        // clusterctl's inventory knows the version of a build from a branch.
        let d = deployment(
            json!({CLUSTERCTL_LABEL: ""}),
            "r/cluster-api-controller:main",
        );
        let inventory = json!({"providerName": "cluster-api", "version": "v1.14.2"});
        assert_eq!(
            installed(c, Some(&d), Some(&inventory)),
            Installed::Theirs {
                by: "clusterctl",
                version: Some("v1.14.2".into())
            }
        );
        for (d, want) in cases {
            let got = step(c, &installed(c, d.as_ref(), None));
            match (got, want) {
                (Ok(s), Ok(a)) => assert_eq!(s.action, a),
                (Err(e), Err(says)) => assert!(e.to_string().contains(says), "{e}"),
                (got, want) => panic!("{d:?}: got {got:?}, want {want:?}"),
            }
        }
    }
}
