//! Onboarding a bare-metal host into the BYOH pool (`kubectl capi hosts add`).
//!
//! BYOH's bootstrap-token flow (cluster-api-provider-bringyourownhost v0.5.0,
//! `controllers/infrastructure/bootstrapkubeconfig_controller.go`): an admin creates a
//! `BootstrapKubeconfig` naming the API server the host reaches and its CA; BYOH's controller
//! creates a bootstrap token (valid 30 minutes) and writes a kubeconfig holding it into
//! `status.bootstrapKubeconfigData`. The host agent (`agent/main.go`) starts with
//! `--bootstrap-kubeconfig FILE --namespace NS [--label k=v ...]`, uses the token once to have its
//! own client certificate signed, and registers the ByoHost named after its hostname.

use base64::Engine;
use serde_json::{Value, json};

/// BYOH's API group and version for BootstrapKubeconfig.
pub(crate) const BOOTSTRAP_KUBECONFIG_API_VERSION: &str = "infrastructure.cluster.x-k8s.io/v1beta1";
/// How long BYOH's bootstrap token lives (`ttl` in BYOH v0.5.0's controller).
pub const BOOTSTRAP_TOKEN_TTL_MINUTES: u32 = 30;

/// Checks the API server URL the way BYOH's webhook does (`isURLValid`): `https://host:port`.
pub fn check_apiserver(url: &str) -> Result<(), String> {
    let rest = url
        .strip_prefix("https://")
        .ok_or_else(|| format!("API server {url:?} is not of the form https://host:port"))?;
    let hostport = rest.split('/').next().unwrap_or("");
    let port = hostport
        .rsplit_once(':')
        .filter(|(h, p)| !h.is_empty() && !p.is_empty() && p.bytes().all(|b| b.is_ascii_digit()));
    match port {
        Some(_) => Ok(()),
        None => Err(format!(
            "API server {url:?} needs a host and an explicit port (https://host:port), as BYOH's webhook requires"
        )),
    }
}

/// PEM text of DER certificates (the CA bundle a kube client trusts).
pub fn pem_of_ders(ders: &[Vec<u8>]) -> String {
    let b64 = base64::engine::general_purpose::STANDARD;
    let mut out = String::new();
    for der in ders {
        out.push_str("-----BEGIN CERTIFICATE-----\n");
        let text = b64.encode(der);
        for chunk in text.as_bytes().chunks(64) {
            out.push_str(&String::from_utf8_lossy(chunk));
            out.push('\n');
        }
        out.push_str("-----END CERTIFICATE-----\n");
    }
    out
}

/// The BootstrapKubeconfig for `name` (one per host: each token is the host's own).
pub fn bootstrap_kubeconfig(name: &str, namespace: &str, apiserver: &str, ca_pem: &str) -> Value {
    let b64 = base64::engine::general_purpose::STANDARD;
    json!({
        "apiVersion": BOOTSTRAP_KUBECONFIG_API_VERSION,
        "kind": "BootstrapKubeconfig",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {
            "apiserver": apiserver,
            "certificate-authority-data": b64.encode(ca_pem.as_bytes()),
        }
    })
}

/// Quotes a word for a POSIX shell when it needs it.
fn sh_quote(s: &str) -> String {
    if !s.is_empty()
        && s.bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"-_./=:,@+".contains(&b))
    {
        s.to_string()
    } else {
        format!("'{}'", s.replace('\'', r"'\''"))
    }
}

/// The agent's command line on the host. `preinstalled`: the host already has kubeadm, the
/// kubelet and a container runtime, so the agent runs with `--skip-installation`; without it,
/// BYOH v0.5.0's agent waits for an installation secret (a K8sInstallerConfig) before it
/// bootstraps (`agent/reconciler/host_reconciler.go`), which a cluster made for pre-installed
/// hosts never gives it.
pub fn agent_command(
    kubeconfig_file: &str,
    namespace: &str,
    labels: &[(String, String)],
    preinstalled: bool,
) -> String {
    let mut words = vec![
        "byoh-hostagent".to_string(),
        "--bootstrap-kubeconfig".into(),
        sh_quote(kubeconfig_file),
        "--namespace".into(),
        sh_quote(namespace),
    ];
    for (k, v) in labels {
        words.push("--label".into());
        words.push(sh_quote(&format!("{k}={v}")));
    }
    if preinstalled {
        words.push("--skip-installation".into());
    }
    words.join(" ")
}

/// The host's preflight (`preflight.sh`, next to `agent.sh`, which runs it first): what BYOH's
/// agent and kubeadm need, checked on the host before the agent starts, one line per failure
/// with its fix (kernel modules and sysctls, swap, a running containerd, the kubelet's port, the
/// hostname the agent registers under, the clock against `issued_unix`, when the bootstrap
/// kubeconfig was made, and its token's life; `--ipvs` adds kube-proxy's IPVS modules). `host`
/// and `namespace` are valid object names (checked by the caller), so they need no quoting.
pub fn preflight_script(host: &str, namespace: &str, issued_unix: i64) -> String {
    include_str!("byoh_preflight.sh")
        .replace("@HOST@", host)
        .replace("@NAMESPACE@", namespace)
        .replace("@ISSUED@", &issued_unix.to_string())
        .replace(
            "@TOKEN_TTL@",
            &(i64::from(BOOTSTRAP_TOKEN_TTL_MINUTES) * 60).to_string(),
        )
}

#[cfg(test)]
mod preflight_tests;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn apiserver_urls_as_byoh_checks_them() {
        assert!(check_apiserver("https://10.0.0.1:6443").is_ok());
        assert!(check_apiserver("https://api.example.com:443/").is_ok());
        assert!(check_apiserver("http://10.0.0.1:6443").is_err());
        assert!(check_apiserver("https://10.0.0.1").is_err());
        assert!(check_apiserver("https://:6443").is_err());
    }

    #[test]
    fn object_and_command() {
        let pem = pem_of_ders(&[vec![1, 2, 3]]);
        assert_eq!(
            pem,
            "-----BEGIN CERTIFICATE-----\nAQID\n-----END CERTIFICATE-----\n"
        );
        let o = bootstrap_kubeconfig("h1", "pool", "https://1.2.3.4:6443", &pem);
        assert_eq!(o["kind"], "BootstrapKubeconfig");
        assert_eq!(o["spec"]["apiserver"], "https://1.2.3.4:6443");
        let back = base64::engine::general_purpose::STANDARD
            .decode(o["spec"]["certificate-authority-data"].as_str().unwrap())
            .unwrap();
        assert_eq!(back, pem.as_bytes());
        let labels = [
            ("site".to_string(), "apac".to_string()),
            ("note".into(), "a b".into()),
        ];
        let cmd = agent_command(
            "/etc/byoh/bootstrap-kubeconfig.conf",
            "pool",
            &labels,
            false,
        );
        assert_eq!(
            cmd,
            "byoh-hostagent --bootstrap-kubeconfig /etc/byoh/bootstrap-kubeconfig.conf --namespace pool --label site=apac --label 'note=a b'"
        );
        let cmd = agent_command("/b.conf", "pool", &[], true);
        assert_eq!(
            cmd,
            "byoh-hostagent --bootstrap-kubeconfig /b.conf --namespace pool --skip-installation"
        );
    }
}
