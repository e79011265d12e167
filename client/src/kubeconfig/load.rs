//! Reading a kubeconfig file for a connection (`--kubeconfig`, `KUBECONFIG`, `~/.kube/config`)
//! through the one bounded reader ([`crate::input`]), then parsing it as kube's
//! `Kubeconfig::read_from` (kube-client 5.0, `config/file_config.rs`) does: a byte-order mark
//! says UTF-16 or UTF-8, every document is merged, and relative file references are made
//! absolute against the kubeconfig's directory, as client-go's `ResolvePaths` does.

use std::path::Path;

use kube::config::{Kubeconfig, KubeconfigError};

use crate::error::Error;
use crate::input::{Input, InputError};

/// A kubeconfig that cannot be read or parsed, with the file named.
pub fn load_error(e: impl std::fmt::Display, path: Option<&Path>) -> Error {
    let where_ = path
        .map(|p| format!("{}: ", p.display()))
        .unwrap_or_default();
    Error::Kubeconfig {
        message: format!("cannot read the kubeconfig: {where_}{e}"),
        hint: "check the file (kubectl config view), KUBECONFIG and --kubeconfig".into(),
    }
}

/// Text of a kubeconfig's bytes, honouring a UTF-16 or UTF-8 byte-order mark (Windows editors
/// and PowerShell's `>` write UTF-16).
fn decode(bytes: &[u8]) -> Option<String> {
    let utf16 = |rest: &[u8], le: bool| {
        let units: Vec<u16> = rest
            .chunks_exact(2)
            .map(|c| {
                if le {
                    u16::from_le_bytes([c[0], c[1]])
                } else {
                    u16::from_be_bytes([c[0], c[1]])
                }
            })
            .collect();
        rest.len()
            .is_multiple_of(2)
            .then(|| String::from_utf16(&units).ok())
            .flatten()
    };
    match bytes {
        [0xFF, 0xFE, rest @ ..] => utf16(rest, true),
        [0xFE, 0xFF, rest @ ..] => utf16(rest, false),
        [0xEF, 0xBB, 0xBF, rest @ ..] => String::from_utf8(rest.to_vec()).ok(),
        _ => String::from_utf8(bytes.to_vec()).ok(),
    }
}

/// `file` relative to `dir` when it is relative.
fn absolute(dir: &Path, file: &mut Option<String>) {
    if let Some(f) = file.as_deref()
        && Path::new(f).is_relative()
        && !f.is_empty()
        && let Some(abs) = dir.join(f).to_str()
    {
        *file = Some(abs.to_string());
    }
}

/// Makes the file references of `kc` absolute against `dir` (exec commands only when they hold
/// a path separator: a bare name is looked up on PATH, as client-go does).
fn resolve_paths(kc: &mut Kubeconfig, dir: &Path) {
    for c in kc.clusters.iter_mut().filter_map(|c| c.cluster.as_mut()) {
        absolute(dir, &mut c.certificate_authority);
    }
    for a in kc
        .auth_infos
        .iter_mut()
        .filter_map(|a| a.auth_info.as_mut())
    {
        absolute(dir, &mut a.client_certificate);
        absolute(dir, &mut a.client_key);
        absolute(dir, &mut a.token_file);
        if let Some(exec) = a.exec.as_mut()
            && exec
                .command
                .as_deref()
                .is_some_and(|c| c.contains(std::path::MAIN_SEPARATOR))
        {
            absolute(dir, &mut exec.command);
        }
    }
}

/// Reads and parses the kubeconfig at `path`, named `flag` in messages (`--kubeconfig`,
/// `KUBECONFIG`), bounded in bytes and time.
pub fn load_file(path: &Path, flag: &str) -> Result<Kubeconfig, Error> {
    let bytes = Input::new(flag, false)
        .read_bytes(path)
        .map_err(|e| match e {
            InputError::Io { source, .. } => load_error(source, Some(path)),
            other => Error::Kubeconfig {
                message: other.to_string(),
                hint: other.hint(),
            },
        })?;
    let text = decode(&bytes).ok_or_else(|| load_error("it is not UTF-8 text", Some(path)))?;
    let mut kc = Kubeconfig::from_yaml(&text).map_err(|e| match e {
        KubeconfigError::Parse(e) => load_error(kcore::yaml::error_line(&e), Some(path)),
        other => load_error(other, Some(path)),
    })?;
    if let Some(dir) = path.parent() {
        resolve_paths(&mut kc, dir);
    }
    Ok(kc)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn relative_references_become_absolute_and_utf16_reads() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("config");
        let yaml = "apiVersion: v1\nkind: Config\nclusters:\n- name: c\n  cluster:\n    server: https://x\n    certificate-authority: ca.crt\nusers:\n- name: u\n  user:\n    client-key: /abs/key\n    exec:\n      apiVersion: client.authentication.k8s.io/v1\n      command: aws\ncontexts:\n- name: x\n  context: {cluster: c, user: u}\ncurrent-context: x\n";
        let mut bytes = vec![0xFF, 0xFE];
        bytes.extend(yaml.encode_utf16().flat_map(u16::to_le_bytes));
        std::fs::write(&p, bytes).unwrap();
        let kc = load_file(&p, "--kubeconfig").unwrap();
        let ca = kc.clusters[0].cluster.as_ref().unwrap();
        assert_eq!(
            ca.certificate_authority.as_deref(),
            dir.path().join("ca.crt").to_str()
        );
        let u = kc.auth_infos[0].auth_info.as_ref().unwrap();
        assert_eq!(u.client_key.as_deref(), Some("/abs/key"));
        assert_eq!(u.exec.as_ref().unwrap().command.as_deref(), Some("aws"));
        assert_eq!(kc.current_context.as_deref(), Some("x"));
    }

    #[cfg(unix)]
    #[test]
    fn dev_zero_is_refused_in_one_line() {
        let e = load_file(Path::new("/dev/zero"), "--kubeconfig").unwrap_err();
        let line = e.to_string();
        assert!(
            line.contains("--kubeconfig /dev/zero is larger than"),
            "{line}"
        );
        assert!(!line.contains('\n'));
    }
}
