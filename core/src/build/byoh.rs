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

use crate::labels::KUBERNETES_VERSION_LABEL;

/// BYOH's API group and version for BootstrapKubeconfig.
pub(crate) const BOOTSTRAP_KUBECONFIG_API_VERSION: &str = "infrastructure.cluster.x-k8s.io/v1beta1";
/// How long BYOH's bootstrap token lives (`ttl` in BYOH v0.5.0's controller).
pub const BOOTSTRAP_TOKEN_TTL_MINUTES: u32 = 30;

/// Where `hosts add` tells the admin to put a host's bootstrap kubeconfig, unless told
/// otherwise (`--host-path`); `hosts remove` names it in the clean-up it prints.
pub const DEFAULT_HOST_PATH: &str = "/etc/byoh/bootstrap-kubeconfig.conf";

/// Checks the API server URL the way BYOH's webhook does (`isURLValid`): `https://host:port`,
/// with a port the host can dial (1 to 65535) and nothing a shell or a kubeconfig would read as
/// something else (control characters, spaces).
pub fn check_apiserver(url: &str) -> Result<(), String> {
    if url.chars().any(|c| c.is_control() || c.is_whitespace()) {
        return Err(format!(
            "API server {url:?} holds a space or a control character"
        ));
    }
    let rest = url
        .strip_prefix("https://")
        .ok_or_else(|| format!("API server {url:?} is not of the form https://host:port"))?;
    let hostport = rest.split('/').next().unwrap_or("");
    let port = hostport
        .rsplit_once(':')
        .filter(|(h, p)| !h.is_empty() && !p.is_empty() && p.bytes().all(|b| b.is_ascii_digit()))
        .map(|(_, p)| p);
    match port {
        Some(p) if p.parse::<u16>().is_ok_and(|n| n != 0) => Ok(()),
        Some(p) => Err(format!(
            "API server {url:?} names port {p}; a port is 1 to 65535"
        )),
        None => Err(format!(
            "API server {url:?} needs a host and an explicit port (https://host:port), as BYOH's webhook requires"
        )),
    }
}

/// The longest path `--host-path` may name (Linux's `PATH_MAX`).
const MAX_HOST_PATH: usize = 4096;

/// Checks where the bootstrap kubeconfig lives on the host (`--host-path`): an absolute path,
/// so the agent finds it whatever directory root runs it from, of at most 4096 bytes, without
/// control characters (see [`sh_word`]).
pub fn check_host_path(path: &str) -> Result<(), String> {
    if path.is_empty() {
        return Err(
            "--host-path is empty; it names the bootstrap kubeconfig's file on the host".into(),
        );
    }
    if path.len() > MAX_HOST_PATH {
        return Err(format!(
            "--host-path is {} bytes long; a path is at most {MAX_HOST_PATH}",
            path.len()
        ));
    }
    if path.chars().any(char::is_control) {
        return Err(format!(
            "--host-path {path:?} holds a control character (a newline would start a command of its own in agent.sh)"
        ));
    }
    if !path.starts_with('/') || path.ends_with('/') {
        return Err(format!(
            "--host-path {path:?} is not an absolute file path (e.g. /etc/byoh/bootstrap-kubeconfig.conf)"
        ));
    }
    Ok(())
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

/// A value that cannot go into a script for the host: it holds a control character (`what` is
/// the value's name), which no quoting keeps on its line.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "{what} {shown:?} holds a control character, which cannot be written into a script for the host"
)]
pub struct ControlCharacter {
    pub what: &'static str,
    pub shown: String,
}

/// The one way a value enters `agent.sh` or `preflight.sh`: as a single POSIX `sh` word,
/// quoted when it needs it (`'...'`, each `'` as `'\''`), refused when it holds a control
/// character. Inside single quotes the shell reads every byte as itself, but a newline would
/// still end a comment line (the scripts name the host path in one), and a terminal would act
/// on an escape when the script is shown.
pub fn sh_word(what: &'static str, s: &str) -> Result<String, ControlCharacter> {
    if s.chars().any(char::is_control) {
        return Err(ControlCharacter {
            what,
            shown: s.chars().take(80).collect(),
        });
    }
    Ok(
        if !s.is_empty()
            && s.bytes()
                .all(|b| b.is_ascii_alphanumeric() || b"-_./=:,@+".contains(&b))
        {
            s.to_string()
        } else {
            format!("'{}'", s.replace('\'', r"'\''"))
        },
    )
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
) -> Result<String, ControlCharacter> {
    let mut words = vec![
        "byoh-hostagent".to_string(),
        "--bootstrap-kubeconfig".into(),
        sh_word("the host path", kubeconfig_file)?,
        "--namespace".into(),
        sh_word("the namespace", namespace)?,
    ];
    for (k, v) in labels {
        words.push("--label".into());
        words.push(sh_word("a label", &format!("{k}={v}"))?);
    }
    if preinstalled {
        words.push("--skip-installation".into());
    }
    Ok(words.join(" "))
}

/// `agent.sh` for `host`: runs `preflight.sh` from its own directory, then `command` (from
/// [`agent_command`]) with the script's arguments and, when `detect_version`, the host's
/// Kubernetes version as the [`KUBERNETES_VERSION_LABEL`] label (see [`version_label`]). Every
/// value in it passes [`sh_word`].
pub fn agent_script(
    host: &str,
    namespace: &str,
    kubeconfig_file: &str,
    command: &str,
    detect_version: bool,
) -> Result<String, ControlCharacter> {
    let (detect, label) = version_label(detect_version);
    Ok(format!(
        "#!/bin/sh\n# Registers this host ({host}) as a ByoHost in {ns}. Copy \
         bootstrap-kubeconfig.conf to {path} first; its token expires {ttl} minutes after \
         `kubectl capi hosts add` ran.\n# preflight.sh first (pass --ipvs for kube-proxy's \
         IPVS mode): it says what the host lacks, before the agent fails on it.\n\
         sh \"$(dirname \"$0\")/preflight.sh\" ${{PREFLIGHT_ARGS:-}} || exit 1\n\
         {detect}exec {command}{label} \"$@\"\n",
        host = sh_word("the host", host)?,
        ns = sh_word("the namespace", namespace)?,
        path = sh_word("the host path", kubeconfig_file)?,
        ttl = BOOTSTRAP_TOKEN_TTL_MINUTES,
        command = sh_command(command)?,
    ))
}

/// What `hosts add` prints for one host: a POSIX `sh` script to run on it as root (`kubectl
/// capi hosts add HOST | ssh HOST sudo sh`) that runs the preflight (refusing to go on when it
/// fails), writes `kubeconfig` to `kubeconfig_file` (mode 0600, atomically), then starts the
/// agent with `command` as [`agent_script`] does. `PREFLIGHT_ARGS` passes arguments to the
/// preflight (`--ipvs`), as in `agent.sh`.
pub fn host_script(
    host: &str,
    namespace: &str,
    kubeconfig_file: &str,
    kubeconfig: &str,
    issued_unix: i64,
    command: &str,
    detect_version: bool,
) -> Result<String, ControlCharacter> {
    // Newlines are the kubeconfig's own; inside single quotes sh keeps them.
    if kubeconfig.chars().any(|c| c.is_control() && c != '\n') {
        return Err(ControlCharacter {
            what: "the bootstrap kubeconfig",
            shown: kubeconfig.chars().take(80).collect(),
        });
    }
    let preflight = preflight_script(host, namespace, issued_unix)?;
    let (detect, label) = version_label(detect_version);
    let path = sh_word("the host path", kubeconfig_file)?;
    Ok(format!(
        "#!/bin/sh\n# Registers this host ({host}) as a ByoHost in {ns}, as `kubectl capi hosts add` \
         printed it: the\n# preflight, then the bootstrap kubeconfig at {path}, then the agent. \
         Run it as root within\n# {ttl} minutes (its token's life), e.g. kubectl capi hosts add \
         {host} -n {ns} | ssh {host} sudo sh\n\
         umask 077\n\
         preflight=$(mktemp) || exit 1\n\
         cat >\"$preflight\" <<'CAPI_KAMAJI_PREFLIGHT'\n{preflight}CAPI_KAMAJI_PREFLIGHT\n\
         sh \"$preflight\" ${{PREFLIGHT_ARGS:-}}\n\
         passed=$?\n\
         rm -f \"$preflight\"\n\
         if [ \"$passed\" != 0 ]; then\n\
         \techo \"{host} failed its preflight (above): fix it and run this again; the agent was not started\" >&2\n\
         \texit 1\n\
         fi\n\
         mkdir -p \"$(dirname {path})\" || exit 1\n\
         printf '%s' {kubeconfig} >{path}.tmp && mv -f {path}.tmp {path} || exit 1\n\
         {detect}exec {command}{label}\n",
        host = sh_word("the host", host)?,
        ns = sh_word("the namespace", namespace)?,
        ttl = BOOTSTRAP_TOKEN_TTL_MINUTES,
        kubeconfig = quote_lines(kubeconfig),
        command = sh_command(command)?,
    ))
}

/// `s` as one single-quoted `sh` word, lines and all (each `'` as `'\''`).
fn quote_lines(s: &str) -> String {
    format!("'{}'", s.replace('\'', r"'\''"))
}

/// The shell that reads the host's Kubernetes version (`kubelet --version`, its last word, kept
/// only if it looks like `v1.35.4`) into `kv`, and the agent's argument that passes it as the
/// [`KUBERNETES_VERSION_LABEL`] label; both empty when not `detect` (the admin gave the label).
/// `kv` holds only `v`, digits and dots, so the unquoted expansion is two words or none.
fn version_label(detect: bool) -> (String, String) {
    if !detect {
        return (String::new(), String::new());
    }
    (
        "# The Kubernetes this host carries, as a label on its ByoHost (kubectl capi hosts shows \
         it;\n# create, scale and upgrade pick hosts by it).\n\
         kv=\n\
         if command -v kubelet >/dev/null 2>&1; then\n\
         \tkv=$(kubelet --version 2>/dev/null) || kv=\n\
         \tkv=${kv##* }\n\
         \tkv=${kv%%[!v0-9.]*}\n\
         \tcase \"$kv\" in v[0-9]*.[0-9]*.[0-9]*) ;; *) kv= ;; esac\n\
         fi\n"
            .to_string(),
        format!(" ${{kv:+--label {KUBERNETES_VERSION_LABEL}=$kv}}"),
    )
}

/// `command` as built by [`agent_command`], checked again for control characters: it is
/// written as is, its words already quoted.
fn sh_command(command: &str) -> Result<&str, ControlCharacter> {
    if command.chars().any(char::is_control) {
        return Err(ControlCharacter {
            what: "the agent command",
            shown: command.chars().take(80).collect(),
        });
    }
    Ok(command)
}

/// The host's preflight (`preflight.sh`, next to `agent.sh`, which runs it first): what BYOH's
/// agent and kubeadm need, checked on the host before the agent starts, one line per failure
/// with its fix (kernel modules and sysctls, swap, a running containerd, the kubelet's port, the
/// hostname the agent registers under, the clock against `issued_unix`, when the bootstrap
/// kubeconfig was made, and its token's life; `--ipvs` adds kube-proxy's IPVS modules); it also
/// reports the kubelet and kubeadm the host carries. `host` and `namespace` go in through
/// [`sh_word`], as in `agent.sh`.
pub fn preflight_script(
    host: &str,
    namespace: &str,
    issued_unix: i64,
) -> Result<String, ControlCharacter> {
    script_of(
        host,
        namespace,
        issued_unix,
        i64::from(BOOTSTRAP_TOKEN_TTL_MINUTES) * 60,
    )
}

/// The preflight before any token exists (`kubectl capi hosts add HOST --check`): the same
/// checks, the clock against `now_unix`, no token's life.
pub fn check_script(
    host: &str,
    namespace: &str,
    now_unix: i64,
) -> Result<String, ControlCharacter> {
    script_of(host, namespace, now_unix, 0)
}

fn script_of(
    host: &str,
    namespace: &str,
    issued_unix: i64,
    token_ttl_seconds: i64,
) -> Result<String, ControlCharacter> {
    Ok(include_str!("byoh_preflight.sh")
        .replace("@HOST@", &sh_word("the host", host)?)
        .replace("@NAMESPACE@", &sh_word("the namespace", namespace)?)
        .replace("@ISSUED@", &issued_unix.to_string())
        .replace("@TOKEN_TTL@", &token_ttl_seconds.to_string()))
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
        // A port a host cannot dial, and text a kubeconfig or a shell would misread.
        for bad in [
            "https://127.0.0.1:99999",
            "https://127.0.0.1:0",
            "https://127.0.0.1:65536",
            "https://a b:6443",
            "https://a\n:6443",
        ] {
            assert!(check_apiserver(bad).is_err(), "{bad}");
        }
        assert!(check_apiserver("https://127.0.0.1:65535").is_ok());
    }

    #[test]
    fn host_paths_are_absolute_single_lines() {
        assert!(check_host_path("/etc/byoh/bootstrap-kubeconfig.conf").is_ok());
        assert!(check_host_path("/opt/my byoh/it's.conf").is_ok());
        for bad in [
            "",
            "bootstrap.conf",
            "./b.conf",
            "/etc/byoh/",
            "/x\ntouch /tmp/PWNED\n#",
            "/x\rb",
            "/x\u{1b}[2J",
        ] {
            assert!(check_host_path(bad).is_err(), "{bad:?}");
        }
        assert!(check_host_path(&format!("/{}", "a".repeat(4096))).is_err());
    }

    /// Every value reaches the scripts through `sh_word`: a control character is refused there,
    /// whichever path it came by (a newline in a comment line of agent.sh ran as root before).
    #[test]
    fn control_characters_never_reach_a_script() {
        for bad in ["/x\ntouch /tmp/PWNED\n#", "a\rb", "\u{7f}", "\u{85}"] {
            assert!(sh_word("v", bad).is_err(), "{bad:?}");
            assert!(agent_command(bad, "ns", &[], false).is_err(), "{bad:?}");
            assert!(agent_command("/b", bad, &[], false).is_err(), "{bad:?}");
            let label = [("k".to_string(), bad.to_string())];
            assert!(agent_command("/b", "ns", &label, false).is_err(), "{bad:?}");
            assert!(
                agent_script("h", "ns", bad, "byoh-hostagent", true).is_err(),
                "{bad:?}"
            );
            assert!(
                agent_script(bad, "ns", "/b", "byoh-hostagent", true).is_err(),
                "{bad:?}"
            );
            assert!(preflight_script(bad, "ns", 0).is_err(), "{bad:?}");
            assert!(
                host_script("h", "ns", bad, "kc", 0, "byoh-hostagent", true).is_err(),
                "{bad:?}"
            );
            assert!(preflight_script("h", bad, 0).is_err(), "{bad:?}");
        }
    }

    /// agent.sh, run by a real `sh` with a stand-in agent on PATH, hands every hostile value
    /// to the agent as one argument, as typed, and runs nothing else.
    #[test]
    fn agent_sh_runs_only_the_agent_whatever_the_values() {
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path();
        let pwned = d.join("PWNED");
        let p = pwned.display().to_string();
        let path = format!("/x'; touch {p}; echo '$(touch {p})`touch {p}` \\ \"");
        let labels = [("note".to_string(), format!("a b;touch {p}"))];
        let cmd = agent_command(&path, "pool", &labels, true).unwrap();
        // The admin's own version label: nothing detected, nothing added.
        let script = agent_script("h1", "pool", &path, &cmd, false).unwrap();
        std::fs::write(d.join("agent.sh"), &script).unwrap();
        std::fs::write(d.join("preflight.sh"), "exit 0\n").unwrap();
        let bin = d.join("bin");
        std::fs::create_dir(&bin).unwrap();
        let agent = bin.join("byoh-hostagent");
        std::fs::write(
            &agent,
            "#!/bin/sh\nfor a in \"$@\"; do printf '%s\\n' \"$a\"; done\n",
        )
        .unwrap();
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&agent, std::fs::Permissions::from_mode(0o755)).unwrap();
        let out = std::process::Command::new("/bin/sh")
            .arg(d.join("agent.sh"))
            .arg("--extra")
            .env("PATH", format!("{}:/usr/bin:/bin", bin.display()))
            .output()
            .unwrap();
        assert!(out.status.success(), "{out:?}");
        let args: Vec<String> = String::from_utf8(out.stdout)
            .unwrap()
            .lines()
            .map(str::to_string)
            .collect();
        assert_eq!(
            args,
            [
                "--bootstrap-kubeconfig",
                path.as_str(),
                "--namespace",
                "pool",
                "--label",
                labels[0].1.replace("a b", "note=a b").as_str(),
                "--skip-installation",
                "--extra",
            ]
        );
        assert!(!pwned.exists(), "a value ran as a command:\n{script}");
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
        )
        .unwrap();
        assert_eq!(
            cmd,
            "byoh-hostagent --bootstrap-kubeconfig /etc/byoh/bootstrap-kubeconfig.conf --namespace pool --label site=apac --label 'note=a b'"
        );
        let cmd = agent_command("/b.conf", "pool", &[], true).unwrap();
        assert_eq!(
            cmd,
            "byoh-hostagent --bootstrap-kubeconfig /b.conf --namespace pool --skip-installation"
        );
    }
}
