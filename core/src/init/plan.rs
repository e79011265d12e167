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
        /// The version it runs (the pinned one, or an earlier patch release of its series).
        version: String,
    },
    /// Ours at an older version, with `--upgrade`: applied at the pinned one.
    Upgrade {
        from: String,
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
        .filter(|t| release(t).is_some())
        .map(str::to_string);
    Installed::Theirs { by, version }
}

/// A release version (`v1.14.2`, `v0.5.0`) as semver, without its `v`.
fn release(v: &str) -> Option<semver::Version> {
    semver::Version::parse(v.strip_prefix('v').unwrap_or(v)).ok()
}

/// Whether two release versions share major and minor: a compatible install to adopt (a patch
/// release of the same series changes no API or contract).
fn same_minor(a: &str, b: &str) -> bool {
    match (release(a), release(b)) {
        (Some(a), Some(b)) => (a.major, a.minor) == (b.major, b.minor),
        _ => false,
    }
}

/// The step for `component`, installed as `now`. `upgrade` (`init --upgrade`) takes what `init`
/// installed at an older version to the pinned one. Someone else's install of the same series,
/// at the pinned patch release or an earlier one, is adopted. `Err` (nothing written yet): another
/// version without `--upgrade`, a newer one (a downgrade), someone else's install at another
/// version (clusterctl's inventory would be left wrong), or a version the image does not tell.
pub fn step(
    component: &'static Component,
    now: &Installed,
    upgrade: bool,
) -> Result<InitStep, Error> {
    let pinned = component.version;
    let refuse = |message: String, hint: String| Error::Other {
        message: format!("{message}; nothing was applied"),
        hint: Some(hint),
    };
    let action = match now {
        Installed::Absent => Action::Install,
        Installed::Ours { version } if version == pinned => Action::Reapply,
        Installed::Theirs {
            by,
            version: Some(v),
        } if same_minor(v, pinned) && release(v) <= release(pinned) => Action::Adopt {
            by,
            version: v.clone(),
        },
        Installed::Ours { version }
        | Installed::Theirs {
            version: Some(version),
            ..
        } if release(version) > release(pinned) => {
            return Err(refuse(
                format!(
                    "{} {version} in namespace {} is newer than the {pinned} this kubectl-capi installs",
                    component.id, component.namespace
                ),
                "use the kubectl-capi that installed it (kubectl capi version shows this one's set)".into(),
            ));
        }
        Installed::Ours { version } if upgrade => Action::Upgrade {
            from: version.clone(),
        },
        Installed::Ours { version } => {
            return Err(refuse(
                format!(
                    "{} {version} is installed in namespace {}; this kubectl-capi installs {pinned}",
                    component.id, component.namespace
                ),
                "kubectl capi init --upgrade --plan shows what an upgrade changes; --upgrade carries it out".into(),
            ));
        }
        Installed::Theirs {
            by,
            version: Some(version),
        } => {
            return Err(refuse(
                format!(
                    "{} {version} is installed in namespace {} (by {by}); this kubectl-capi installs {pinned}",
                    component.id, component.namespace
                ),
                format!(
                    "bring it to {pinned} the way it was installed (clusterctl upgrade apply), or leave it out of this init (choose the others with --core, --bootstrap, --control-plane, --infrastructure)"
                ),
            ));
        }
        Installed::Theirs { by, version: None } => {
            return Err(refuse(
                format!(
                    "{} is installed in namespace {} (by {by}) at a version its image does not tell",
                    component.id, component.namespace
                ),
                format!(
                    "check kubectl -n {} get deployment {} -o wide; leave it out of this init if it is not {pinned}",
                    component.namespace, component.deployment
                ),
            ));
        }
    };
    Ok(InitStep { component, action })
}

/// A CRD whose storage version an upgrade changes: its objects are stored at the old one until
/// re-written (`doctor` reports `CrdStoredVersions` until then).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct StorageChange {
    pub crd: String,
    pub from: String,
    pub to: String,
}

/// The storage version of a CRD object, if it has one.
fn storage_version(crd: &Value) -> Option<&str> {
    crd.pointer("/spec/versions")?
        .as_array()?
        .iter()
        .find(|v| v["storage"] == true)?["name"]
        .as_str()
}

/// The CRDs of `objects` (what an upgrade applies) whose storage version differs from the one
/// the cluster's CRD of that name (`on_cluster`) has.
pub fn storage_changes(objects: &[Value], on_cluster: &[Value]) -> Vec<StorageChange> {
    let mut out = Vec::new();
    for new in objects
        .iter()
        .filter(|o| o["kind"] == "CustomResourceDefinition")
    {
        let name = new["metadata"]["name"].as_str().unwrap_or_default();
        let old = on_cluster
            .iter()
            .find(|c| c["metadata"]["name"] == name)
            .and_then(storage_version);
        if let (Some(from), Some(to)) = (old, storage_version(new))
            && from != to
        {
            out.push(StorageChange {
                crd: name.to_string(),
                from: from.to_string(),
                to: to.to_string(),
            });
        }
    }
    out
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
                Ok(Action::Adopt {
                    by: "clusterctl",
                    version: "v1.14.2".into(),
                }),
            ),
            (
                Some(deployment(
                    json!({}),
                    "mirror/cluster-api-controller:v1.14.2@sha256:ab",
                )),
                Ok(Action::Adopt {
                    by: "hand",
                    version: "v1.14.2".into(),
                }),
            ),
            (
                Some(deployment(
                    json!({CLUSTERCTL_LABEL: ""}),
                    "r/cluster-api-controller:v1.13.0",
                )),
                Err(
                    "cluster-api v1.13.0 is installed in namespace capi-system (by clusterctl); this kubectl-capi installs v1.14.2",
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
            let got = step(c, &installed(c, d.as_ref(), None), false);
            match (got, want) {
                (Ok(s), Ok(a)) => assert_eq!(s.action, a),
                (Err(e), Err(says)) => assert!(e.to_string().contains(says), "{e}"),
                (got, want) => panic!("{d:?}: got {got:?}, want {want:?}"),
            }
        }
    }
}

#[cfg(test)]
mod upgrade_tests {
    use super::*;
    use crate::init::set::by_id;
    use serde_json::json;

    #[test]
    fn an_older_install_of_ours_upgrades_only_when_asked_and_never_down() {
        let c = by_id("infrastructure-byoh").unwrap();
        let older = Installed::Ours {
            version: "v0.4.0".into(),
        };
        let e = step(c, &older, false).unwrap_err().to_string();
        assert!(e.contains("infrastructure-byoh v0.4.0 is installed"), "{e}");
        assert_eq!(
            step(c, &older, true).unwrap().action,
            Action::Upgrade {
                from: "v0.4.0".into()
            }
        );
        let newer = Installed::Ours {
            version: "v0.6.0".into(),
        };
        let e = step(c, &newer, true).unwrap_err().to_string();
        assert!(e.contains("is newer than the v0.5.0"), "{e}");
        // clusterctl's install of an earlier patch release of the series is adopted.
        let capi = by_id("cluster-api").unwrap();
        let patch = Installed::Theirs {
            by: "clusterctl",
            version: Some("v1.14.1".into()),
        };
        assert_eq!(
            step(capi, &patch, false).unwrap().action,
            Action::Adopt {
                by: "clusterctl",
                version: "v1.14.1".into()
            }
        );
        let later = Installed::Theirs {
            by: "clusterctl",
            version: Some("v1.14.3".into()),
        };
        assert!(step(capi, &later, false).is_err());
        // BYOH's own install at v0.5.0 (not a Kubernetes-1 version) is adopted.
        let theirs = Installed::Theirs {
            by: "clusterctl",
            version: Some("v0.5.0".into()),
        };
        assert_eq!(
            step(c, &theirs, false).unwrap().action,
            Action::Adopt {
                by: "clusterctl",
                version: "v0.5.0".into()
            }
        );
    }

    #[test]
    fn storage_version_changes_are_found_by_crd_name() {
        let crd = |name: &str, storage: &str| {
            json!({"kind": "CustomResourceDefinition", "metadata": {"name": name},
                "spec": {"versions": [{"name": "v1beta1", "storage": storage == "v1beta1"},
                                      {"name": "v1beta2", "storage": storage == "v1beta2"}]}})
        };
        let new = [
            crd("a.x", "v1beta2"),
            crd("b.x", "v1beta2"),
            crd("c.x", "v1beta2"),
        ];
        let old = [crd("a.x", "v1beta1"), crd("b.x", "v1beta2")];
        assert_eq!(
            storage_changes(&new, &old),
            vec![StorageChange {
                crd: "a.x".into(),
                from: "v1beta1".into(),
                to: "v1beta2".into()
            }]
        );
    }
}
