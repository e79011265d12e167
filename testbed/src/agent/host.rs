//! SIMULATED operating-system work of a BYOH host: the commands the real agent runs that would
//! change a real machine (install packages, load kernel modules, start services, `kubeadm`).
//! Each is a small shell script on the agent's `PATH` (`<host dir>/bin`, first), the narrowest
//! seam there is: the agent's own Go code, its bootstrap executor and the installer and
//! bootstrap scripts it receives run for real under `/bin/bash`, and only these programs are
//! stood in for. Every call is appended to `<host dir>/commands.log`.
//!
//! What they stand in for (cluster-api-provider-bringyourownhost v0.5.0):
//! - `kubeadm init --config F`, `kubeadm join --config F` / `kubeadm reset --force`: the runcmd
//!   of CAPI's kubeadm bootstrap data, and `HostReconciler.resetNode`
//!   (`agent/reconciler/host_reconciler.go`). They hand the request to the testbed through
//!   `<host dir>/spool` and wait for its answer: the testbed starts the host's control plane
//!   (init, or a join with `controlPlane`: [`super::controlplane`]), joins the workload cluster
//!   as the kubelet would and keeps its Node's heartbeat ([`super::kubelet`]), or stops them.
//! - `imgpkg pull`, `swapoff`, `swapon`, `modprobe`, `sysctl`, `dpkg`, `apt-mark`,
//!   `systemctl`: what the Ubuntu 20.04 install and uninstall scripts of BYOH's installer run
//!   (`installer/internal/algo/ubuntu20_4k8s.go`). `imgpkg pull` writes a bundle of the
//!   upstream layout (`conf.tar`, `containerd.tar`, one `.deb` per package) whose archives only
//!   hold files under `/etc` and `/opt`, which are private to the host, so the scripts' own
//!   `tar -C / -x` and `rm` run for real and touch nothing outside it.
//!
//! The host's `/etc/os-release` says Ubuntu 20.04: BYOH v0.5.0's installer supports that
//! distribution only (`installer/registry.go`), so a host of any other reports an OS the
//! controller refuses to write an installation secret for.

use std::path::Path;

use crate::Error;

/// What the host's `/etc/os-release` says (SIMULATED, see the module's documentation).
pub const OS_RELEASE: &str = "NAME=\"Ubuntu\"\nVERSION=\"20.04.6 LTS (Focal Fossa)\"\nID=ubuntu\nID_LIKE=debian\nPRETTY_NAME=\"Ubuntu 20.04.6 LTS\"\nVERSION_ID=\"20.04\"\nVERSION_CODENAME=focal\nUBUNTU_CODENAME=focal\n";

/// The programs [`write`] stands in for.
pub const SIMULATED_COMMANDS: &[&str] = &[
    "kubeadm",
    "imgpkg",
    "swapoff",
    "swapon",
    "modprobe",
    "sysctl",
    "dpkg",
    "apt-mark",
    "systemctl",
];

/// How long `kubeadm` waits for the testbed's answer (a join waits for the workload cluster's
/// kube-controller-manager to sign the kubelet's certificate).
const ANSWER_WAIT_TENTHS: u32 = 1800;

/// Writes the host's SIMULATED programs into `bin` and its `os-release` into `etc` (the upper
/// directory of its `/etc`); `dir` is the host's directory (the log and the spool).
pub fn write(dir: &Path, bin: &Path, etc: &Path) -> Result<(), Error> {
    let spool = dir.join("spool");
    for d in [bin, &spool, etc] {
        std::fs::create_dir_all(d).map_err(|e| Error::io(d, e))?;
    }
    let os_release = etc.join("os-release");
    std::fs::write(&os_release, OS_RELEASE).map_err(|e| Error::io(&os_release, e))?;
    let log = dir.join("commands.log");
    for name in SIMULATED_COMMANDS {
        let body = match *name {
            "kubeadm" => kubeadm(&spool),
            "imgpkg" => IMGPKG.to_string(),
            _ => "exit 0\n".to_string(),
        };
        // `kubeadm version` (the preflight's question) changes nothing: not a command to log.
        let quiet = if *name == "kubeadm" {
            "[ \"$1\" = version ] || "
        } else {
            ""
        };
        let text = format!(
            "#!/bin/sh\n# SIMULATED {name} of a BYOH host (capi-testbed; see testbed/src/agent/host.rs).\n{quiet}printf '%s\\n' \"{name} $*\" >> '{}'\n{body}",
            log.display()
        );
        let path = bin.join(name);
        std::fs::write(&path, text).map_err(|e| Error::io(&path, e))?;
        set_executable(&path)?;
    }
    Ok(())
}

fn set_executable(path: &Path) -> Result<(), Error> {
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o755))
        .map_err(|e| Error::io(path, e))
}

/// `kubeadm join --config F` and `kubeadm reset`: a request file in the spool (the join's
/// configuration, written whole then renamed), then the testbed's answer: its first line the
/// exit code, the rest printed. A reset the testbed carried out then deletes what kubeadm
/// v1.36's `cleanup-node` phase deletes under `/etc/kubernetes` (`cmd/kubeadm/app/cmd/phases/
/// reset/cleanupnode.go`: the contents of `manifests` and `pki`, and the kubeconfig files) here,
/// on the host: its `/etc` is an overlay, and a file deleted from the overlay's upper layer
/// behind its back stays in its cache, so the bootstrap data's next `write_files` would go to
/// an unlinked inode the testbed never sees.
fn kubeadm(spool: &Path) -> String {
    format!(
        r#"spool='{spool}'
case "$1" in
join|init)
  what="$1"; shift; cfg=""
  while [ $# -gt 0 ]; do
    case "$1" in
      --config) cfg="$2"; shift 2 ;;
      --config=*) cfg="${{1#--config=}}"; shift ;;
      *) shift ;;
    esac
  done
  if [ -z "$cfg" ]; then echo "kubeadm $what (SIMULATED): only --config is simulated" >&2; exit 1; fi
  req="$spool/$what-$$"
  cp "$cfg" "$req.tmp" && mv "$req.tmp" "$req.req" || exit 1 ;;
reset)
  what=reset
  req="$spool/reset-$$"
  : > "$req.tmp" && mv "$req.tmp" "$req.req" || exit 1 ;;
version)
  echo 'kubeadm version: SIMULATED'; exit 0 ;;
*)
  echo "kubeadm $1 (SIMULATED): not simulated" >&2; exit 1 ;;
esac
i=0
while [ ! -e "$req.done" ]; do
  i=$((i+1))
  if [ "$i" -gt {ANSWER_WAIT_TENTHS} ]; then echo "kubeadm (SIMULATED): the testbed did not answer" >&2; exit 1; fi
  sleep 0.1
done
code=$(head -n 1 "$req.done")
tail -n +2 "$req.done"
rm -f "$req.done"
if [ "$what" = reset ] && [ "$code" = 0 ]; then
  rm -rf /etc/kubernetes/manifests/* /etc/kubernetes/pki/*
  for f in admin super-admin kubelet bootstrap-kubelet controller-manager scheduler; do
    rm -f "/etc/kubernetes/$f.conf"
  done
fi
exit "$code"
"#,
        spool = spool.display()
    )
}

/// `imgpkg pull -i ADDR -o DIR`: the bundle's layout with archives of files under `/etc` and
/// `/opt` only (both private to the host).
const IMGPKG: &str = r#"out=""
while [ $# -gt 0 ]; do
  case "$1" in
    -o) out="$2"; shift 2 ;;
    *) shift ;;
  esac
done
if [ -z "$out" ]; then echo "imgpkg (SIMULATED): only pull -o DIR is simulated" >&2; exit 1; fi
mkdir -p "$out" && cd "$out" || exit 1
stage=$(mktemp -d) || exit 1
mkdir -p "$stage/etc/sysctl.d" "$stage/etc/modules-load.d" "$stage/etc/containerd" "$stage/opt/containerd"
echo '# SIMULATED bundle file' > "$stage/etc/sysctl.d/99-kubernetes-cri.conf"
echo '# SIMULATED bundle file' > "$stage/etc/modules-load.d/containerd.conf"
echo '# SIMULATED bundle file' > "$stage/etc/containerd/config.toml"
echo '# SIMULATED bundle file' > "$stage/opt/containerd/README"
tar -C "$stage" -cf conf.tar etc/sysctl.d etc/modules-load.d || exit 1
tar -C "$stage" -cf containerd.tar etc/containerd opt/containerd || exit 1
rm -rf "$stage"
for pkg in cri-tools kubernetes-cni kubectl kubelet kubeadm; do : > "$pkg.deb"; done
"#;

/// The image of a host started from the script `hosts add` printed ([`super::HostImage`]):
/// SIMULATED kernel state under `<host dir>/root` for its preflight (`PREFLIGHT_ROOT`: the
/// modules kubeadm's preflight wants loaded, its sysctls on, no swap, nothing on the kubelet's
/// port, the hostname), a bound containerd socket there (the listener, held while the host
/// runs), the real agent on its `PATH` as `byoh-hostagent`, and with a kubelet version a
/// `kubelet` that answers `--version` as an installed one does (nothing else: joining is
/// `kubeadm`'s, above). Returns the root and the listener.
pub(super) fn image(
    dir: &Path,
    host: &str,
    image: &super::HostImage,
    agent: &Path,
) -> Result<(std::path::PathBuf, std::os::unix::net::UnixListener), Error> {
    let root = dir.join("root");
    let bin = dir.join("bin");
    let put = |rel: &str, text: &str| -> Result<(), Error> {
        let p = root.join(rel);
        if let Some(parent) = p.parent() {
            std::fs::create_dir_all(parent).map_err(|e| Error::io(parent, e))?;
        }
        std::fs::write(&p, text).map_err(|e| Error::io(&p, e))
    };
    for m in ["overlay", "br_netfilter"] {
        if image.missing_module.as_deref() != Some(m) {
            let d = root.join("sys/module").join(m);
            std::fs::create_dir_all(&d).map_err(|e| Error::io(&d, e))?;
        }
    }
    put("proc/sys/net/ipv4/ip_forward", "1\n")?;
    put("proc/sys/net/bridge/bridge-nf-call-iptables", "1\n")?;
    put("proc/swaps", "Filename\tType\tSize\tUsed\tPriority\n")?;
    put(
        "proc/net/tcp",
        "  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode\n",
    )?;
    put("proc/sys/kernel/hostname", &format!("{host}\n"))?;
    let sock = root.join("run/containerd/containerd.sock");
    if let Some(parent) = sock.parent() {
        std::fs::create_dir_all(parent).map_err(|e| Error::io(parent, e))?;
    }
    let _ = std::fs::remove_file(&sock);
    let listener =
        std::os::unix::net::UnixListener::bind(&sock).map_err(|e| Error::io(&sock, e))?;
    std::fs::create_dir_all(&bin).map_err(|e| Error::io(&bin, e))?;
    let link = bin.join("byoh-hostagent");
    let _ = std::fs::remove_file(&link);
    std::os::unix::fs::symlink(agent, &link).map_err(|e| Error::io(&link, e))?;
    if let Some(v) = &image.kubelet_version {
        let k = bin.join("kubelet");
        std::fs::write(
            &k,
            format!(
                "#!/bin/sh\n# SIMULATED kubelet of a host image (capi-testbed): its version only.\n[ \"$1\" = --version ] && echo 'Kubernetes {v}'\n"
            ),
        )
        .map_err(|e| Error::io(&k, e))?;
        set_executable(&k)?;
    }
    Ok((root, listener))
}
