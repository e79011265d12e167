//! Locates (building on first use) the pinned upstream binaries and CRDs.

use std::path::{Path, PathBuf};
use std::process::Command;

use crate::Error;

/// Where the cached upstream artefacts live.
#[derive(Clone, Debug)]
pub struct Assets {
    /// kube-apiserver, kube-controller-manager and etcd.
    pub k8s: PathBuf,
    /// `full/`, `v1beta1/` and `extra/` CRD folders, plus the CAPI webhook manifests.
    pub crds: PathBuf,
    /// capi-manager, kubeadm-bootstrap-manager, kubeadm-control-plane-manager and clusterctl,
    /// when they were asked for; with the v1beta1 profile, CAPI v1.10's capi-manager and its
    /// `capi-webhooks.yaml`.
    pub capi: Option<PathBuf>,
    /// The Kamaji operator, and the older Kubernetes release for tenants, when asked for.
    pub kamaji: Option<PathBuf>,
    /// The BYOH controller manager, when asked for.
    pub byoh: Option<PathBuf>,
    /// Directories holding kube-apiserver, kube-controller-manager and kube-scheduler, by the
    /// Kubernetes version they report (`v1.36.3`): what a tenant control plane can run here.
    pub tenant_releases: Vec<(String, PathBuf)>,
}

/// The directory of an optional set of binaries, or `missing` as the error that stops a testbed
/// needing them.
pub(crate) fn built<'a>(dir: &'a Option<PathBuf>, missing: &str) -> Result<&'a Path, Error> {
    dir.as_deref()
        .ok_or_else(|| Error::Start(missing.to_string()))
}

fn script() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("build-bins.sh")
}

/// Runs `build-bins.sh <what>` and returns the directory it prints last.
pub fn build(what: &str) -> Result<PathBuf, Error> {
    let out = Command::new("bash")
        .arg(script())
        .arg(what)
        .stderr(std::process::Stdio::inherit())
        .output()
        .map_err(|e| Error::Assets(format!("cannot run {}: {e}", script().display())))?;
    if !out.status.success() {
        return Err(Error::Assets(format!(
            "{} {what} failed ({}); a Go toolchain (1.26) and the Go module proxy are needed",
            script().display(),
            out.status
        )));
    }
    let text = String::from_utf8_lossy(&out.stdout);
    let dir = text
        .lines()
        .last()
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .ok_or_else(|| Error::Assets(format!("{} {what} printed nothing", script().display())))?;
    Ok(PathBuf::from(dir))
}

impl Assets {
    /// Builds what is missing (minutes the first time, milliseconds afterwards).
    pub fn ensure(with_capi: bool) -> Result<Assets, Error> {
        Assets::ensure_for(with_capi, false, false)
    }

    /// What a day-0 testbed ([`crate::Options::tenants`]) needs besides the images: the BYOH
    /// host agent (its hosts), and the tenant releases for a Kamaji that `kubectl capi init`
    /// installs. Kamaji v1.0.0's TenantControlPlane webhook admits Kubernetes up to its
    /// kubeadm's v1.30.2, so that release is built too (`build-bins.sh k8s-kamaji`), besides the
    /// two the process-run Kamaji's tenants use.
    pub(crate) fn for_day0(&mut self) -> Result<(), Error> {
        if self.byoh.is_none() {
            self.byoh = Some(build("byoh")?);
        }
        for dir in [build("k8s-kamaji")?, build("k8s-prev")?, self.k8s.clone()] {
            if let Some(v) = release_of(&dir)
                && !self.tenant_releases.iter().any(|(have, _)| *have == v)
            {
                self.tenant_releases.push((v, dir));
            }
        }
        Ok(())
    }

    /// The CAPI v1.10 core manager and its release's webhook configuration (`build-bins.sh
    /// capi-v1beta1`) as [`Assets::capi`]: the v1beta1 profile's real CAPI.
    pub(crate) fn for_capi_v1beta1(&mut self) -> Result<(), Error> {
        self.capi = Some(build("capi-v1beta1")?);
        Ok(())
    }

    /// Like [`Assets::ensure`], with the Kamaji operator (and the tenant releases) and the BYOH
    /// controller manager when asked for.
    pub fn ensure_for(
        with_capi: bool,
        with_kamaji: bool,
        with_byoh: bool,
    ) -> Result<Assets, Error> {
        let k8s = build("k8s")?;
        let mut tenant_releases = Vec::new();
        let kamaji = if with_kamaji {
            // The older and newer minors around the pinned one: a tenant upgrade steps
            // v1.35 -> v1.36 -> v1.37 on real binaries of each.
            let (prev, next) = (build("k8s-prev")?, build("k8s-next")?);
            for dir in [&prev, &k8s, &next] {
                if let Some(v) = release_of(dir) {
                    tenant_releases.push((v, dir.clone()));
                }
            }
            Some(build("kamaji")?)
        } else {
            None
        };
        Ok(Assets {
            crds: build("crds")?,
            capi: if with_capi {
                Some(build("capi")?)
            } else {
                None
            },
            byoh: if with_byoh {
                Some(build("byoh")?)
            } else {
                None
            },
            kamaji,
            tenant_releases,
            k8s,
        })
    }

    /// The clusterctl binary (CAPI's pinned version), built on first use.
    pub fn clusterctl() -> Result<PathBuf, Error> {
        Ok(build("capi")?.join("clusterctl"))
    }

    /// CAPI's KubeadmControlPlane manager (`sigs.k8s.io/cluster-api/controlplane/kubeadm`, the
    /// pinned version), built with the other CAPI binaries on first use.
    pub fn kubeadm_control_plane_manager() -> Result<PathBuf, Error> {
        Ok(build("capi")?.join("kubeadm-control-plane-manager"))
    }

    /// The folder of cert-manager's `controller`, `cainjector` and `webhook` binaries
    /// (`CERT_MANAGER_VERSION` in `testbed/versions.env`: cert-manager's packages, run by our
    /// mains in `testbed/cert-manager/`), built on first use and rebuilt when those mains change.
    pub fn cert_manager() -> Result<PathBuf, Error> {
        build("cert-manager")
    }

    /// cert-manager's controller (the image `quay.io/jetstack/cert-manager-controller`).
    pub fn cert_manager_controller() -> Result<PathBuf, Error> {
        Ok(Assets::cert_manager()?.join("controller"))
    }

    /// cert-manager's CA injector (`quay.io/jetstack/cert-manager-cainjector`).
    pub fn cert_manager_cainjector() -> Result<PathBuf, Error> {
        Ok(Assets::cert_manager()?.join("cainjector"))
    }

    /// cert-manager's webhook (`quay.io/jetstack/cert-manager-webhook`).
    pub fn cert_manager_webhook() -> Result<PathBuf, Error> {
        Ok(Assets::cert_manager()?.join("webhook"))
    }

    /// Helm (`HELM_VERSION`, the one cert-manager's release tooling uses), which renders
    /// cert-manager's release manifest for the init sources; built on first use.
    pub fn helm() -> Result<PathBuf, Error> {
        Ok(build("helm")?.join("helm"))
    }

    /// kube-rbac-proxy (the version `testbed/kube-rbac-proxy/go.mod` pins), the sidecar of BYOH's
    /// manager in its release manifest; built on first use.
    pub fn kube_rbac_proxy() -> Result<PathBuf, Error> {
        Ok(build("kube-rbac-proxy")?.join("kube-rbac-proxy"))
    }

    /// go-containerregistry's `crane`: the testbed's local OCI registry (`crane registry
    /// serve`), pushes, and the SIMULATED kubelet's pulls; built on first use.
    pub fn crane() -> Result<PathBuf, Error> {
        Ok(build("crane")?.join("crane"))
    }

    /// A clusterctl local repository (`{provider-label}/{version}/{file}`) with the release
    /// assets of CAPI's core (`cluster-api`) and kubeadm bootstrap (`bootstrap-kubeadm`)
    /// providers, built with kustomize from the pinned CAPI module, and cert-manager's CRDs in
    /// `cert-manager-crds/`; built on first use.
    pub fn clusterctl_repo() -> Result<PathBuf, Error> {
        build("clusterctl-repo")
    }

    /// The release assets `kubectl capi init` installs, one `<component>.yaml` each, made from
    /// the pinned upstream modules as their release tooling makes them (cert-manager's rendered
    /// from its Helm chart; `build-bins.sh init-sources` says how); built on first use.
    pub fn init_sources() -> Result<PathBuf, Error> {
        build("init-sources")
    }

    /// The directory with the tenant binaries of exactly `version` (`v1.36.3` or `1.36.3`).
    pub fn tenant_release(&self, version: &str) -> Option<&Path> {
        let want = format!("v{}", version.trim_start_matches('v'));
        self.tenant_releases
            .iter()
            .find(|(v, _)| *v == want)
            .map(|(_, d)| d.as_path())
    }

    /// The versions a tenant control plane can run here, newest last.
    pub fn tenant_versions(&self) -> Vec<String> {
        self.tenant_releases
            .iter()
            .map(|(v, _)| v.clone())
            .collect()
    }
    pub fn kube_scheduler(&self) -> PathBuf {
        self.k8s.join("kube-scheduler")
    }
    pub fn kubelet(&self) -> PathBuf {
        self.k8s.join("kubelet")
    }
    pub fn kube_proxy(&self) -> PathBuf {
        self.k8s.join("kube-proxy")
    }
    pub fn etcd(&self) -> PathBuf {
        self.k8s.join("etcd")
    }
    pub fn kube_apiserver(&self) -> PathBuf {
        self.k8s.join("kube-apiserver")
    }
    pub fn kube_controller_manager(&self) -> PathBuf {
        self.k8s.join("kube-controller-manager")
    }
}

/// The Kubernetes version of a cache directory named by build-bins.sh (`k8s-v1.36.3-etcd-…`,
/// `k8s-v1.35.4`).
fn release_of(dir: &Path) -> Option<String> {
    let name = dir.file_name()?.to_str()?;
    let v = name.strip_prefix("k8s-")?.split("-etcd-").next()?;
    v.starts_with('v').then(|| v.to_string())
}

#[cfg(test)]
mod tests {
    #[test]
    fn release_of_cache_dirs() {
        use std::path::Path;
        assert_eq!(
            super::release_of(Path::new("/c/k8s-v1.36.3-etcd-v3.6.8")).as_deref(),
            Some("v1.36.3")
        );
        assert_eq!(
            super::release_of(Path::new("/c/k8s-v1.35.4")).as_deref(),
            Some("v1.35.4")
        );
        assert_eq!(super::release_of(Path::new("/c/capi-v1.14.2")), None);
    }
}
