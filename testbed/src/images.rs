//! Container images of the upstream controllers `kubectl capi init` installs, put into a
//! testbed's local registry under the names init's `--registry` gives them, so the SIMULATED
//! kubelet ([`crate::pods::image`]) runs those Deployments from images as a cluster would.
//!
//! One row of [`UPSTREAM`] per image the release manifests name (the init-sources cache,
//! [`crate::Assets::init_sources`]): the release reference, the `build-bins.sh` set and file of
//! the statically built upstream binary, and what upstream's image says about it (the path of the
//! binary, which is the manifest's `command[0]` where the manifest has a command and the image's
//! `ENTRYPOINT` otherwise; its user; its ports). Each image is written with the workspace's
//! `oci-image` crate: one layer holding the binary and the files distroless `static:nonroot`
//! gives (`/etc/passwd` and `/etc/group` naming 65532, `/home/nonroot`, a sticky 1777 `/tmp`),
//! run as `65532:65532` with `PATH=/usr/local/bin:/usr/bin:/bin`. Every upstream image here is
//! built `FROM gcr.io/distroless/static:nonroot` (or cert-manager's `static-debian13:nonroot`)
//! with `USER 65532[:65532]`, so that user is theirs too.
//!
//! What the image has not that upstream's has: distroless's CA bundle (`SSL_CERT_FILE`;
//! these controllers talk only to the API server, with the ServiceAccount's CA) and tzdata.
//! Like upstream's, no image here sets `HOME`: a real runtime (runc) sets it from `/etc/passwd`
//! when the environment lacks it (`/home/nonroot`); none of these controllers reads it. They
//! write under `/tmp` only (webhook certificates in `/tmp/k8s-webhook-server/serving-certs`,
//! Kamaji's `--tmp-directory` `/tmp/kamaji`); cert-manager's run with a read-only root and write
//! nothing.
//!
//! Packing a 40-110 MB binary (gzip at the best level) takes seconds, so the layouts are kept
//! across testbeds in `<cache>/images/<name>-<key>/`, the key a hash of the binary's bytes and
//! the image spec: a warm testbed only pushes, and a push of bytes the registry already has
//! sends only the manifest (crane checks each blob with a HEAD first).

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Instant;

use crate::{Error, Testbed};

/// One upstream controller image.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Upstream {
    /// The image as the release manifest names it.
    pub release: &'static str,
    /// The init-sources file (init bundle component) whose Deployment runs it; empty for an
    /// image no release manifest names (init writes the workload itself).
    pub component: &'static str,
    /// The `testbed/build-bins.sh` set that builds the binary, and its file in that set's folder.
    pub set: &'static str,
    pub file: &'static str,
    /// Where the binary lives in the image: the image's entrypoint.
    pub entrypoint: &'static str,
    /// The user (and group) the image runs as.
    pub user: u32,
    /// The ports the image's config declares (`EXPOSE`).
    pub ports: &'static [&'static str],
    /// The upstream repository.
    pub source: &'static str,
}

/// The user distroless `static:nonroot` images run as, and the only one `oci-image` writes.
const NONROOT: u32 = oci_image::NONROOT;

const CAPI: &str = "https://github.com/kubernetes-sigs/cluster-api";
const CERT_MANAGER: &str = "https://github.com/cert-manager/cert-manager";

/// Every upstream controller image `kubectl capi init` installs.
///
/// Entrypoints and users, from the manifests and upstream's image builds:
/// - CAPI v1.14.2 (`Dockerfile`: `FROM gcr.io/distroless/static:nonroot`, `COPY … manager .`,
///   `USER 65532`, `ENTRYPOINT ["/manager"]`); each manifest runs `command: [/manager]` with
///   `runAsNonRoot` and `runAsUser`/`runAsGroup` 65532.
/// - BYOH v0.5.0 (`Dockerfile`: `static:nonroot`, `USER 65532:65532`, `ENTRYPOINT
///   ["/manager"]`); the manifest runs `command: [/manager]`, no securityContext.
/// - kube-rbac-proxy v0.8.0, BYOH's sidecar (`gcr.io/kubebuilder/kube-rbac-proxy` republishes
///   brancz/kube-rbac-proxy's image; its `Dockerfile` at tag v0.8.0: `FROM
///   gcr.io/distroless/static:nonroot`, `COPY … /usr/local/bin/kube-rbac-proxy`, `EXPOSE 8080`,
///   `USER 65532:65532`, `ENTRYPOINT ["/usr/local/bin/kube-rbac-proxy"]`); the manifest gives
///   `args` only, so the entrypoint runs.
/// - Kamaji v1.0.0 (`Dockerfile`: `static:nonroot`, `COPY … kamaji .`, `USER 65532:65532`,
///   `ENTRYPOINT ["/kamaji"]`); the manifest runs `command: [/kamaji]` with `runAsNonRoot` and
///   no `runAsUser`, so the image's user must not be root.
/// - cert-manager v1.21.1 (`hack/containers/Containerfile.{controller,cainjector,webhook}`:
///   `COPY <bin> /app/cmd/<bin>/<bin>`, `ENTRYPOINT ["/app/cmd/<bin>/<bin>"]`, on
///   `make/base_images.mk`'s `gcr.io/distroless/static-debian13` pinned from its `nonroot` tag
///   by `hack/latest-base-images.sh`, whose user is 65532); the Helm chart gives `args` only
///   and `runAsNonRoot`. Its static manifest (`make/manifests.mk`) renders with
///   `startupapicheck.enabled=false`, so no startupapicheck image; the acmesolver image is an
///   argument (`--acme-http01-solver-image`), not a container, and runs only for ACME HTTP-01.
/// - etcd 3.6.8-0, the members of `kubectl capi init --datastore etcd` (a StatefulSet init writes
///   itself, `kcore::init::etcd`, so no init-sources file names it): Kubernetes'
///   `cluster/images/etcd` (`Dockerfile`: `COPY etcd* etcdctl* /usr/local/bin/`, `EXPOSE 2379
///   2380 4001 7001`, no `USER` nor `ENTRYPOINT`, on the Makefile's `RUNNERIMAGE`
///   `gcr.io/distroless/static:latest`). The binary is the testbed's own etcd (`build-bins.sh
///   k8s`, `go.etcd.io/etcd/server/v3` v3.6.8 as `testbed/k8s/go.mod` pins it), at
///   `/usr/local/bin/etcd`, the StatefulSet's `command`. Two differences: upstream's image runs
///   as root (distroless `static:latest`), this one as 65532, the only user `oci-image` writes
///   (the StatefulSet sets no user, so its members run as 65532 here, and the testbed's volumes
///   are world-writable, [`crate::storage`], so they write their data); and upstream's also holds
///   `etcdctl`, the `migrate` tool and a static shell, which nothing init runs uses.
pub const UPSTREAM: &[Upstream] = &[
    Upstream {
        release: "registry.k8s.io/cluster-api/cluster-api-controller:v1.14.2",
        component: "cluster-api.yaml",
        set: "capi",
        file: "capi-manager",
        entrypoint: "/manager",
        user: NONROOT,
        ports: &[],
        source: CAPI,
    },
    Upstream {
        release: "registry.k8s.io/cluster-api/kubeadm-bootstrap-controller:v1.14.2",
        component: "bootstrap-kubeadm.yaml",
        set: "capi",
        file: "kubeadm-bootstrap-manager",
        entrypoint: "/manager",
        user: NONROOT,
        ports: &[],
        source: CAPI,
    },
    Upstream {
        release: "registry.k8s.io/cluster-api/kubeadm-control-plane-controller:v1.14.2",
        component: "control-plane-kubeadm.yaml",
        set: "capi",
        file: "kubeadm-control-plane-manager",
        entrypoint: "/manager",
        user: NONROOT,
        ports: &[],
        source: CAPI,
    },
    Upstream {
        release: "projects.registry.vmware.com/cluster_api_provider_bringyourownhost/cluster-api-byoh-controller:v0.5.0",
        component: "infrastructure-byoh.yaml",
        set: "byoh",
        file: "byoh-manager",
        entrypoint: "/manager",
        user: NONROOT,
        ports: &[],
        source: "https://github.com/vmware-tanzu/cluster-api-provider-bringyourownhost",
    },
    Upstream {
        release: "gcr.io/kubebuilder/kube-rbac-proxy:v0.8.0",
        component: "infrastructure-byoh.yaml",
        set: "kube-rbac-proxy",
        file: "kube-rbac-proxy",
        entrypoint: "/usr/local/bin/kube-rbac-proxy",
        user: NONROOT,
        ports: &["8080/tcp"],
        source: "https://github.com/brancz/kube-rbac-proxy",
    },
    Upstream {
        release: "clastix/kamaji:v1.0.0",
        component: "kamaji.yaml",
        set: "kamaji",
        file: "kamaji",
        entrypoint: "/kamaji",
        user: NONROOT,
        ports: &[],
        source: "https://github.com/clastix/kamaji",
    },
    Upstream {
        release: "quay.io/jetstack/cert-manager-controller:v1.21.1",
        component: "cert-manager.yaml",
        set: "cert-manager",
        file: "controller",
        entrypoint: "/app/cmd/controller/controller",
        user: NONROOT,
        ports: &[],
        source: CERT_MANAGER,
    },
    Upstream {
        release: "quay.io/jetstack/cert-manager-cainjector:v1.21.1",
        component: "cert-manager.yaml",
        set: "cert-manager",
        file: "cainjector",
        entrypoint: "/app/cmd/cainjector/cainjector",
        user: NONROOT,
        ports: &[],
        source: CERT_MANAGER,
    },
    Upstream {
        release: "quay.io/jetstack/cert-manager-webhook:v1.21.1",
        component: "cert-manager.yaml",
        set: "cert-manager",
        file: "webhook",
        entrypoint: "/app/cmd/webhook/webhook",
        user: NONROOT,
        ports: &[],
        source: CERT_MANAGER,
    },
    Upstream {
        release: ETCD_IMAGE,
        component: "",
        set: "k8s",
        file: "etcd",
        entrypoint: "/usr/local/bin/etcd",
        user: NONROOT,
        ports: &["2379/tcp", "2380/tcp", "4001/tcp", "7001/tcp"],
        source: "https://github.com/etcd-io/etcd",
    },
];

/// The etcd image of `kubectl capi init --datastore etcd` (kubeadm's for Kubernetes v1.36).
pub const ETCD_IMAGE: &str = "registry.k8s.io/etcd:3.6.8-0";

/// The images a real node needs ([`crate::node`]), besides the controllers': its pod sandbox
/// (`testbed/pause`, standing in for registry.k8s.io/pause, which cannot be reached here), its
/// cluster DNS (CoreDNS; upstream's image runs it as 65532 too) and a shell for tests of the
/// node itself (Debian's static busybox).
pub static NODE_IMAGES: [Upstream; 3] = [
    Upstream {
        release: crate::node::PAUSE_IMAGE,
        component: "",
        set: "pause",
        file: "pause",
        entrypoint: "/pause",
        user: NONROOT,
        ports: &[],
        source: "https://github.com/kubernetes/kubernetes",
    },
    Upstream {
        release: crate::node::COREDNS_IMAGE,
        component: "",
        set: "coredns",
        file: "coredns",
        entrypoint: "/coredns",
        user: NONROOT,
        ports: &[],
        source: "https://github.com/coredns/coredns",
    },
    Upstream {
        release: crate::node::BUSYBOX_IMAGE,
        component: "",
        set: "node-packages",
        file: "busybox",
        entrypoint: "/bin/busybox",
        user: NONROOT,
        ports: &[],
        source: "https://busybox.net",
    },
];

/// Bumped when what this module writes for the same binary and spec changes.
const FORMAT: &str = "1";

impl Upstream {
    /// The row of a release image.
    pub fn of(release: &str) -> Option<&'static Upstream> {
        UPSTREAM.iter().find(|u| u.release == release)
    }

    /// The image's name: the release's last path component without its tag.
    pub fn name(&self) -> &'static str {
        let last = self.release.rsplit('/').next().unwrap_or(self.release);
        last.split([':', '@']).next().unwrap_or(last)
    }

    /// The release's tag (`v1.14.2`).
    pub fn tag(&self) -> &'static str {
        let last = self.release.rsplit('/').next().unwrap_or(self.release);
        last.split_once(':').map_or("latest", |(_, t)| t)
    }

    /// Where this image goes in `registry` (`HOST[:PORT][/PREFIX]`).
    pub fn mirrored(&self, registry: &str) -> String {
        mirrored(self.release, registry)
    }

    /// Why there is no binary for this image without building anything, if so: its set is not
    /// one `testbed/build-bins.sh` offers.
    pub fn missing(&self) -> Option<String> {
        let script = script_text();
        if has_set(&script, self.set) {
            return None;
        }
        Some(format!(
            "{}: no binary: testbed/build-bins.sh has no set `{}` (for {}) yet",
            self.release, self.set, self.file
        ))
    }

    /// The binary (`build-bins.sh <set>`, building it on first use as the testbed's other
    /// assets are).
    pub fn binary(&self) -> Result<PathBuf, Error> {
        let dir = set_dir(self.set).map_err(|e| self.no_binary(&e.to_string()))?;
        self.in_dir(&dir)
    }

    /// The binary in its set's folder `dir`.
    fn in_dir(&self, dir: &Path) -> Result<PathBuf, Error> {
        let path = dir.join(self.file);
        if !path.is_file() {
            return Err(self.no_binary(&format!(
                "{} has no {}; run testbed/build-bins.sh {}",
                dir.display(),
                self.file,
                self.set
            )));
        }
        Ok(path)
    }

    fn no_binary(&self, why: &str) -> Error {
        if let Some(m) = self.missing() {
            return Error::Assets(m);
        }
        Error::Assets(format!(
            "{}: no binary (testbed/build-bins.sh {}, file {}): {why}",
            self.release, self.set, self.file
        ))
    }

    /// What `oci-image` writes for this row.
    pub fn spec(&self) -> Result<oci_image::Spec, Error> {
        if self.user != NONROOT {
            return Err(Error::Assets(format!(
                "{}: user {} is not one oci-image writes (only {NONROOT})",
                self.release, self.user
            )));
        }
        Ok(oci_image::Spec {
            name: self.name().to_string(),
            entrypoint: self.entrypoint.to_string(),
            tag: self.tag().to_string(),
            version: self.tag().to_string(),
            revision: None,
            description: format!(
                "testbed image of {}: the static binary testbed/build-bins.sh {} builds, on a nonroot base",
                self.release, self.set
            ),
            source: self.source.to_string(),
            licenses: "Apache-2.0".to_string(),
            created: 0,
            ports: self.ports.iter().map(|p| p.to_string()).collect(),
        })
    }
}

/// `image` in `registry` (`HOST[:PORT][/PREFIX]`) by clusterctl's `images: all: repository:`
/// rule, as `kcore::init::manifests::mirrored` applies it for `kubectl capi init --registry`:
/// the last path component with its tag or digest, after the registry.
pub fn mirrored(image: &str, registry: &str) -> String {
    let last = image.rsplit('/').next().unwrap_or(image);
    format!("{}/{last}", registry.trim_end_matches('/'))
}

/// The rows that have no binary, and why, without building anything.
pub fn missing() -> Vec<(&'static Upstream, String)> {
    UPSTREAM
        .iter()
        .filter_map(|u| u.missing().map(|m| (u, m)))
        .collect()
}

/// An image layout ready to push.
#[derive(Clone, Debug)]
pub struct Built {
    pub release: &'static str,
    /// The OCI image layout folder.
    pub layout: PathBuf,
    /// The image's manifest digest (what the registry gives it).
    pub digest: String,
    /// Whether it came from the cache (else it was written now).
    pub cached: bool,
}

/// An image pushed to a registry.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Pushed {
    /// As the release manifest names it.
    pub release: String,
    /// Where it is now, as init's `--registry` rewrites the manifest to name it.
    pub image: String,
    pub digest: String,
}

/// Pushes every image of [`UPSTREAM`] into `tb`'s registry under its mirrored name, building
/// the binaries (on first use) and the layouts (cached) first. Fails naming every image without
/// a binary, before pushing any.
pub async fn push_upstream(tb: &Testbed) -> Result<Vec<Pushed>, Error> {
    let registry = tb.registry.clone().ok_or_else(|| {
        Error::Start("the testbed has no registry; start it with Options::images".into())
    })?;
    let all: Vec<&'static Upstream> = UPSTREAM.iter().collect();
    push(&registry, &all).await
}

/// Pushes `rows` into `registry` (`HOST[:PORT][/PREFIX]`) under their mirrored names.
pub async fn push(registry: &str, rows: &[&'static Upstream]) -> Result<Vec<Pushed>, Error> {
    let missing: Vec<String> = rows.iter().filter_map(|u| u.missing()).collect();
    if !missing.is_empty() {
        return Err(Error::Assets(missing.join("\n")));
    }
    let built = build(rows).await?;
    push_built(registry, &built).await
}

/// The image layouts of `rows`, from the cache or written now (on every core at once).
pub async fn build(rows: &[&'static Upstream]) -> Result<Vec<Built>, Error> {
    let rows = rows.to_vec();
    let cache = cache_root().join("images");
    tokio::task::spawn_blocking(move || build_in(&cache, &rows))
        .await
        .map_err(|e| Error::Assets(format!("building images: {e}")))?
}

/// Builds (or finds) the layouts of `rows` in `cache`, a few at a time.
fn build_in(cache: &Path, rows: &[&'static Upstream]) -> Result<Vec<Built>, Error> {
    // The binaries first, one build-bins.sh run per set; every row without one is named.
    let mut dirs: HashMap<&str, Result<PathBuf, String>> = HashMap::new();
    let mut binaries = Vec::new();
    let mut errors = Vec::new();
    for u in rows {
        let dir = dirs
            .entry(u.set)
            .or_insert_with(|| set_dir(u.set).map_err(|e| e.to_string()));
        match dir
            .as_ref()
            .map_err(|e| u.no_binary(e))
            .and_then(|d| u.in_dir(d))
        {
            Ok(path) => binaries.push((*u, path)),
            Err(e) => errors.push(e.to_string()),
        }
    }
    if !errors.is_empty() {
        return Err(Error::Assets(errors.join("\n")));
    }
    let workers = std::thread::available_parallelism()
        .map(|n| n.get())
        .unwrap_or(1)
        .min(binaries.len().max(1));
    let next = std::sync::atomic::AtomicUsize::new(0);
    let results: Vec<Result<Vec<(usize, Built)>, Error>> = std::thread::scope(|s| {
        let handles: Vec<_> = (0..workers)
            .map(|_| {
                s.spawn(|| {
                    let mut out = Vec::new();
                    loop {
                        let i = next.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                        let Some((u, path)) = binaries.get(i) else {
                            return Ok(out);
                        };
                        out.push((i, layout(cache, u, path)?));
                    }
                })
            })
            .collect();
        handles
            .into_iter()
            .map(|h| {
                h.join()
                    .unwrap_or_else(|_| Err(Error::Assets("an image build panicked".into())))
            })
            .collect()
    });
    let mut all = Vec::new();
    for r in results {
        all.extend(r?);
    }
    all.sort_by_key(|(i, _)| *i);
    Ok(all.into_iter().map(|(_, b)| b).collect())
}

/// The layout of `u` with the binary at `path`: from `cache` when there, else written into a
/// temporary folder and renamed into place (so a reader never sees half of one).
fn layout(cache: &Path, u: &'static Upstream, path: &Path) -> Result<Built, Error> {
    let spec = u.spec()?;
    let bytes = std::fs::read(path).map_err(|e| Error::io(path, e))?;
    let fingerprint = format!(
        "{FORMAT}\n{}\n{spec:?}\n{}",
        oci_image::sha256(&bytes),
        platform()?.arch
    );
    drop(bytes);
    let key = &oci_image::sha256(fingerprint.as_bytes())[7..23];
    let dir = cache.join(format!("{}-{key}", spec.name));
    if let Some(b) = read_built(&dir, u) {
        return Ok(b);
    }
    std::fs::create_dir_all(cache).map_err(|e| Error::io(cache, e))?;
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.subsec_nanos());
    let tmp = cache.join(format!(
        ".{}-{key}.tmp-{}-{nanos}",
        spec.name,
        std::process::id()
    ));
    let _ = std::fs::remove_dir_all(&tmp);
    let started = Instant::now();
    let written = oci_image::write(&spec, &[(platform()?, path.to_path_buf())], &tmp)
        .map_err(|e| Error::Assets(format!("writing the image of {}: {e}", u.release)))?;
    // The tarball is for `docker load`; the registry takes the layout.
    let _ = std::fs::remove_file(&written.tarball);
    let stamp = tmp.join("spec.txt");
    std::fs::write(&stamp, format!("{fingerprint}\n{}\n", path.display()))
        .map_err(|e| Error::io(&stamp, e))?;
    tracing::info!(
        "image {} written in {:.1?} ({} bytes compressed)",
        u.release,
        started.elapsed(),
        written.layer_sizes.iter().sum::<u64>()
    );
    match std::fs::rename(&tmp, &dir) {
        Ok(()) => {}
        // Another process wrote the same key first: the same bytes.
        Err(_) if read_built(&dir, u).is_some() => {
            let _ = std::fs::remove_dir_all(&tmp);
        }
        Err(e) => {
            let _ = std::fs::remove_dir_all(&tmp);
            return Err(Error::io(&dir, e));
        }
    }
    let mut b = read_built(&dir, u)
        .ok_or_else(|| Error::Assets(format!("{}: the layout is incomplete", dir.display())))?;
    b.cached = false;
    Ok(b)
}

/// A finished cache entry: the layout folder and its digest file.
fn read_built(dir: &Path, u: &'static Upstream) -> Option<Built> {
    let layout = dir.join(u.name());
    let digest = std::fs::read_to_string(dir.join(format!("{}.digest", u.name()))).ok()?;
    let digest = digest.trim().to_string();
    (layout.join("index.json").is_file() && digest.starts_with("sha256:")).then_some(Built {
        release: u.release,
        layout,
        digest,
        cached: true,
    })
}

/// Pushes each layout with `crane push --insecure` (all at once) and checks the registry gave
/// it the digest the layout has.
async fn push_built(registry: &str, built: &[Built]) -> Result<Vec<Pushed>, Error> {
    let crane = crate::Assets::crane()?;
    let pushes = built.iter().map(|b| {
        let image = mirrored(b.release, registry);
        let crane = crane.clone();
        async move {
            let out = tokio::process::Command::new(&crane)
                .arg("push")
                .arg(&b.layout)
                .arg(&image)
                .arg("--insecure")
                .stdin(Stdio::null())
                .output()
                .await
                .map_err(|e| Error::io(&crane, e))?;
            let said = String::from_utf8_lossy(&out.stdout).trim().to_string();
            if !out.status.success() {
                return Err(Error::Start(format!(
                    "crane push {} {image}: {}",
                    b.layout.display(),
                    String::from_utf8_lossy(&out.stderr).trim()
                )));
            }
            if !said.ends_with(&format!("@{}", b.digest)) {
                return Err(Error::Start(format!(
                    "crane push {image} gave {said:?}, not the layout's digest {}",
                    b.digest
                )));
            }
            Ok(Pushed {
                release: b.release.to_string(),
                image,
                digest: b.digest.clone(),
            })
        }
    });
    futures::future::join_all(pushes)
        .await
        .into_iter()
        .collect()
}

/// This machine's platform, as the binaries are built for it.
fn platform() -> Result<oci_image::Platform, Error> {
    let arch = match std::env::consts::ARCH {
        "x86_64" => "amd64",
        "aarch64" => "arm64",
        other => other,
    };
    oci_image::Platform::parse(&format!("linux/{arch}"))
        .map_err(|e| Error::Assets(format!("testbed images: {e}")))
}

/// The folder `build-bins.sh` keeps its sets in (its `cache_root`).
// TODO(assets): an `Assets::cache_root()` accessor would keep this in one place.
fn cache_root() -> PathBuf {
    if let Some(c) = std::env::var_os("CAPI_TESTBED_CACHE").filter(|c| !c.is_empty()) {
        return PathBuf::from(c);
    }
    let base = std::env::var_os("XDG_CACHE_HOME")
        .filter(|c| !c.is_empty())
        .map(PathBuf::from)
        .unwrap_or_else(|| {
            PathBuf::from(std::env::var_os("HOME").unwrap_or_default()).join(".cache")
        });
    base.join("kubectl-capi-kamaji")
}

fn script_text() -> String {
    let p = Path::new(env!("CARGO_MANIFEST_DIR")).join("build-bins.sh");
    std::fs::read_to_string(p).unwrap_or_default()
}

/// Whether `build-bins.sh`'s `case` has an arm for `set` (`  capi) build_capi ;;`).
fn has_set(script: &str, set: &str) -> bool {
    script.lines().any(|l| {
        let l = l.trim_start();
        l.strip_prefix(set)
            .is_some_and(|rest| rest.starts_with(')'))
    })
}

/// The folder of a `build-bins.sh` set (building it on first use).
fn set_dir(set: &str) -> Result<PathBuf, Error> {
    if !has_set(&script_text(), set) {
        return Err(Error::Assets(format!(
            "testbed/build-bins.sh has no set `{set}` yet"
        )));
    }
    crate::assets::build(set)
}

#[cfg(test)]
mod tests;
