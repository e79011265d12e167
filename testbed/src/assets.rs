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
    /// capi-manager and clusterctl, when they were asked for.
    pub capi: Option<PathBuf>,
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
        Ok(Assets {
            k8s: build("k8s")?,
            crds: build("crds")?,
            capi: if with_capi {
                Some(build("capi")?)
            } else {
                None
            },
        })
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
