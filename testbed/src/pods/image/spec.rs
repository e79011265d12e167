//! A container's spec as a kubelet reads it: its user and root file system, the downward
//! API's fields, `$(VAR)` references, the command and arguments, and its volume mounts.

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use k8s_openapi::api::core::v1::{Container as PodContainer, Pod};

use super::NODE;
use crate::netns::PodLink;

/// The container's user and group (its own, else the pod's), whether it must not run as
/// root, and whether its root file system is read-only.
pub(super) fn security<'a>(
    pod: &'a Pod,
    c: &'a PodContainer,
) -> (Option<i64>, Option<i64>, bool, bool) {
    let ps = pod.spec.as_ref().and_then(|s| s.security_context.as_ref());
    let cs = c.security_context.as_ref();
    let user = cs
        .and_then(|s| s.run_as_user)
        .or_else(|| ps.and_then(|s| s.run_as_user));
    let group = cs
        .and_then(|s| s.run_as_group)
        .or_else(|| ps.and_then(|s| s.run_as_group));
    let non_root = cs
        .and_then(|s| s.run_as_non_root)
        .or_else(|| ps.and_then(|s| s.run_as_non_root))
        .unwrap_or(false);
    let read_only = cs
        .and_then(|s| s.read_only_root_filesystem)
        .unwrap_or(false);
    (user, group, non_root, read_only)
}

/// A `fieldRef` of the downward API.
pub(super) fn field(pod: &Pod, link: &PodLink, path: &str) -> Option<String> {
    match path {
        "metadata.name" => pod.metadata.name.clone(),
        "metadata.namespace" => pod.metadata.namespace.clone(),
        "metadata.uid" => pod.metadata.uid.clone(),
        "spec.nodeName" => Some(NODE.into()),
        "spec.serviceAccountName" => pod.spec.as_ref()?.service_account_name.clone(),
        "status.podIP" => Some(link.pod_ip.to_string()),
        "status.hostIP" => Some("127.0.0.1".into()),
        _ => None,
    }
}

/// The program and its arguments, as a kubelet puts them together: the container's `command`,
/// else the image's `Entrypoint`; the container's `args`, else (only without a `command`) the
/// image's `Cmd`.
pub(super) fn words(
    command: Option<&[String]>,
    args: Option<&[String]>,
    entrypoint: &[String],
    cmd: &[String],
) -> Vec<String> {
    let mut out = command.unwrap_or(entrypoint).to_vec();
    match (command, args) {
        (_, Some(a)) => out.extend_from_slice(a),
        (None, None) => out.extend_from_slice(cmd),
        (Some(_), None) => {}
    }
    out
}

/// `$(NAME)` replaced by `vars[NAME]` where it is defined (left as written where not), `$$`
/// by `$`, as a kubelet expands a container's command and arguments.
pub(super) fn expand(s: &str, vars: &HashMap<&str, &str>) -> String {
    let mut out = String::with_capacity(s.len());
    let mut rest = s;
    while let Some(i) = rest.find('$') {
        out.push_str(&rest[..i]);
        let after = &rest[i + 1..];
        if let Some(tail) = after.strip_prefix('$') {
            out.push('$');
            rest = tail;
        } else if let Some(inner) = after.strip_prefix('(')
            && let Some(end) = inner.find(')')
        {
            let name = &inner[..end];
            match vars.get(name) {
                Some(v) => out.push_str(v),
                None => out.push_str(&rest[i..i + end + 3]),
            }
            rest = &inner[end + 1..];
        } else {
            out.push('$');
            rest = after;
        }
    }
    out.push_str(rest);
    out
}

/// The container's `volumeMounts` as bind mounts: the volume's folder under `vol_root` (a
/// `subPath` in it), the path in the image, read-only or not.
pub(super) fn mounts(
    vol_root: &Path,
    c: &PodContainer,
) -> Result<Vec<(PathBuf, String, bool)>, String> {
    let mut out = Vec::new();
    for m in c.volume_mounts.clone().unwrap_or_default() {
        if !m.mount_path.starts_with('/') || m.mount_path.split('/').any(|p| p == "..") {
            return Err(format!(
                "mountPath {:?} is not an absolute path",
                m.mount_path
            ));
        }
        let mut src = vol_root.join(&m.name);
        if let Some(sub) = m.sub_path.as_deref().filter(|s| !s.is_empty()) {
            if sub.starts_with('/') || sub.split('/').any(|p| p == "..") {
                return Err(format!("subPath {sub:?} leaves the volume"));
            }
            src = src.join(sub);
        }
        out.push((src, m.mount_path.clone(), m.read_only.unwrap_or(false)));
    }
    Ok(out)
}

/// `name` as found on the testbed's `PATH` (the container's environment has none).
pub(super) fn program_path(name: &str) -> String {
    std::env::var_os("PATH")
        .into_iter()
        .flat_map(|p| std::env::split_paths(&p).collect::<Vec<_>>())
        .map(|d| d.join(name))
        .find(|p| p.is_file())
        .map(|p| p.display().to_string())
        .unwrap_or_else(|| name.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn v(words: &[&str]) -> Vec<String> {
        words.iter().map(|w| w.to_string()).collect()
    }

    #[test]
    fn variable_references_expand_as_a_kubelet_expands_them() {
        let vars: HashMap<&str, &str> = [("POD_NAMESPACE", "cert-manager")].into();
        assert_eq!(
            expand("--ns=$(POD_NAMESPACE)/x", &vars),
            "--ns=cert-manager/x"
        );
        assert_eq!(
            expand("$(UNSET) $$(POD_NAMESPACE) $", &vars),
            "$(UNSET) $(POD_NAMESPACE) $"
        );
    }

    #[test]
    fn command_and_args_combine_as_a_kubelet_does() {
        let (ep, cmd) = (v(&["/bin/ep"]), v(&["--cmd"]));
        let (c, a) = (v(&["/bin/c"]), v(&["--a"]));
        assert_eq!(words(None, None, &ep, &cmd), v(&["/bin/ep", "--cmd"]));
        assert_eq!(words(None, Some(&a), &ep, &cmd), v(&["/bin/ep", "--a"]));
        assert_eq!(words(Some(&c), None, &ep, &cmd), v(&["/bin/c"]));
        assert_eq!(words(Some(&c), Some(&a), &ep, &cmd), v(&["/bin/c", "--a"]));
    }
}
