//! `create`'s flags read into a [`CreateSpec`]: the network plugin (read or downloaded); the
//! flags it shares with `generate clusterclass` through [`base_spec`].

use std::path::Path;
use std::time::Duration;

use kclient::error::Error;
use kcore::build::cni::{self, CniKind, CniManifest};
use kcore::build::kube_proxy::KubeProxyMode;
use kcore::kamaji::create::{CreateSpec, Infrastructure};

use super::Args;
use crate::common::spec_flags::base_spec;

/// Reads `--cni-manifest FILE` (`-` for stdin) through the one bounded reader: at most the
/// size `create` accepts, and a pipe or FIFO that sends nothing is given up.
fn read_cni_manifest(path: &Path) -> Result<CniManifest, Error> {
    let input = kclient::input::Input {
        flag: "--cni-manifest",
        limit: cni::MAX_MANIFEST_BYTES,
        stdin: true,
    };
    let text = input.read_text(path).map_err(|e| match e {
        kclient::input::InputError::TooLarge { .. } => Error::Usage {
            message: e.to_string(),
            hint: Some(
                "install a network plugin this large by hand in the workload cluster (kubectl capi kubeconfig NAME)".into(),
            ),
        },
        other => other.usage(),
    })?;
    Ok(CniManifest {
        kind: CniKind::Custom,
        // "- (stdin)" names it in messages, and is no file name: the ConfigMap key becomes
        // manifest.yaml.
        source: if path.as_os_str() == "-" {
            "- (stdin)".into()
        } else {
            path.display().to_string()
        },
        text,
    })
}

/// The `--cni` choice: `Some(Calico)` to download, `None` for none; `--cni-manifest` is read
/// by [`spec_from`].
pub(super) fn cni_choice(args: &Args) -> Result<Option<CniKind>, Error> {
    if args.cni.is_some() && args.cni_manifest.is_some() {
        return Err(Error::Usage {
            message: "--cni and --cni-manifest cannot be used together".into(),
            hint: Some(
                "--cni calico downloads Calico's manifest, --cni-manifest FILE installs that file: pick one".into(),
            ),
        });
    }
    args.cni
        .as_deref()
        .map(cni::parse_cni)
        .transpose()
        .map(Option::flatten)
        .map_err(Error::from)
}

/// How long `--cni calico` may take to download Calico's manifest.
const CALICO_DOWNLOAD_TIMEOUT: Duration = Duration::from_secs(60);

/// Downloads Calico's release manifest (bounded in size and time).
pub(super) async fn download_calico() -> Result<CniManifest, Error> {
    let url = cni::calico_manifest_url();
    let text = kclient::fetch::fetch_text(&url, cni::MAX_MANIFEST_BYTES, CALICO_DOWNLOAD_TIMEOUT)
        .await
        .map_err(|e| Error::Other {
            message: format!("cannot download Calico's manifest from {url}: {e}"),
            hint: Some(format!(
                "offline or behind a proxy? fetch that file another way and pass --cni-manifest FILE (or set {} to a mirror)",
                cni::CALICO_URL_ENV
            )),
        })?;
    Ok(CniManifest {
        kind: CniKind::Calico,
        source: url,
        text,
    })
}

/// The create spec from the flags (no I/O but the values file).
pub(super) fn spec_from(args: &Args, namespace: &str) -> Result<CreateSpec, Error> {
    let infrastructure = args
        .infrastructure
        .as_deref()
        .map(Infrastructure::parse)
        .transpose()?;
    let kube_proxy_mode = args
        .kube_proxy_mode
        .as_deref()
        .map(KubeProxyMode::parse)
        .transpose()?;
    cni_choice(args)?;
    let cni = args
        .cni_manifest
        .as_deref()
        .map(read_cni_manifest)
        .transpose()?;
    Ok(CreateSpec {
        name: args.name.clone(),
        namespace: namespace.to_string(),
        infrastructure,
        kubernetes_version: args.kubernetes_version.clone(),
        replicas: args.replicas,
        workers: args.workers,
        datastore: args.datastore.clone(),
        service_type: args.service_type.clone(),
        service_address: args.service_address.clone(),
        cert_sans: args.cert_sans.clone(),
        pod_cidrs: args.pod_cidrs.clone(),
        service_cidrs: args.service_cidrs.clone(),
        port: args.port,
        failure_domain: args.failure_domain.clone(),
        cluster_dns: args.cluster_dns.clone(),
        cni,
        kube_proxy_mode,
        cni_none_explicit: args
            .cni
            .as_deref()
            .is_some_and(|c| c.trim().eq_ignore_ascii_case("none")),
        class: args.class.clone(),
        ..base_spec(&args.control_plane, &args.infra)?
    })
}
