//! `kubectl capi hosts remove`: what goes with a host taken out of the pool for good, or why it
//! cannot go. Pure: the plugin reads the objects and deletes what this names.
//!
//! A host brought in by `hosts add` and registered by its agent leaves, besides its ByoHost:
//! - its BootstrapKubeconfig (named after the host, in the host's namespace: `hosts add`);
//! - the bootstrap token BYOH issued for it, a `bootstrap-token-<id>` Secret in `kube-system`
//!   (BYOH v0.5.0 `controllers/infrastructure/bootstrapkubeconfig_controller.go`), whose id is
//!   the first half of the token in the BootstrapKubeconfig's `status.bootstrapKubeconfigData`;
//! - the agent's CertificateSigningRequest, `byoh-csr-<host>` (BYOH v0.5.0
//!   `agent/registration/csr.go`, `ByohCSRNameFormat`).
//!
//! BYOH's ByoHost webhook refuses to delete a host that serves a machine (`status.machineRef`
//! set; `apis/infrastructure/v1beta1/byohost_webhook.go`, `handleDelete`): such a host is refused
//! here first, with the way out.

use serde_json::Value;

use crate::json;

/// The most hosts one `hosts remove` takes.
pub const MAX_HOSTS: usize = 100;

/// The agent's CertificateSigningRequest for host `name`.
pub fn csr_name(name: &str) -> String {
    format!("byoh-csr-{name}")
}

/// Why `host` (a ByoHost) cannot be removed now, if it cannot: it serves a machine.
pub fn refusal(host: &Value) -> Option<String> {
    let name = json::name(host);
    let bm = json::str_at(host, &["status", "machineRef", "name"])?;
    Some(format!(
        "ByoHost {name} serves ByoMachine {bm}: move its machine first (kubectl capi hosts drain {name}, or hosts retire {name} if it stopped)"
    ))
}

/// The bootstrap token Secret BYOH issued with a BootstrapKubeconfig: `bootstrap-token-<id>`,
/// from the token in its `status.bootstrapKubeconfigData` (a kubeconfig whose user has
/// `token: <id>.<secret>`).
pub fn token_secret(bootstrap_kubeconfig: &Value) -> Option<String> {
    let data = json::str_at(bootstrap_kubeconfig, &["status", "bootstrapKubeconfigData"])?;
    let token = data.lines().find_map(|l| {
        l.trim()
            .strip_prefix("token:")
            .map(|t| t.trim().trim_matches(['"', '\'']))
    })?;
    let (id, secret) = token.split_once('.')?;
    // kubeadm's token format: 6 and 16 characters of [a-z0-9].
    let ok = |s: &str, n: usize| {
        s.len() == n
            && s.bytes()
                .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit())
    };
    (ok(id, 6) && ok(secret, 16)).then(|| format!("bootstrap-token-{id}"))
}

/// What to run on the host once it is out of the API: the agent stopped first (at its next
/// start it would register the host again) and its files removed.
pub fn on_host(name: &str, bootstrap_kubeconfig_path: &str) -> String {
    format!(
        "On {name}: stop the agent before anything else (started again, it registers the host anew), then remove its files: sudo systemctl disable --now byoh-hostagent 2>/dev/null; sudo pkill -f byoh-hostagent; sudo rm -f {bootstrap_kubeconfig_path}; rm -rf ~/.byoh"
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_host_that_serves_a_machine_is_refused_with_the_way_out() {
        let busy = json!({"metadata": {"name": "h1"}, "status": {"machineRef": {"name": "bm-1"}}});
        let why = refusal(&busy).unwrap();
        assert!(why.contains("ByoMachine bm-1"), "{why}");
        assert!(why.contains("kubectl capi hosts drain h1"), "{why}");
        let free = json!({"metadata": {"name": "h1"}, "status": {}});
        assert_eq!(refusal(&free), None);
    }

    #[test]
    fn the_token_secret_comes_from_the_issued_kubeconfig() {
        let bk = |data: &str| json!({"status": {"bootstrapKubeconfigData": data}});
        let kc = "apiVersion: v1\nusers:\n- name: u\n  user:\n    token: abcdef.0123456789abcdef\n";
        assert_eq!(
            token_secret(&bk(kc)).as_deref(),
            Some("bootstrap-token-abcdef")
        );
        let quoted = "users:\n- user:\n    token: \"a1b2c3.0123456789abcdef\"\n";
        assert_eq!(
            token_secret(&bk(quoted)).as_deref(),
            Some("bootstrap-token-a1b2c3")
        );
        // Not issued yet, or not a bootstrap token: nothing to delete by guess.
        assert_eq!(token_secret(&json!({"status": {}})), None);
        assert_eq!(token_secret(&bk("users:\n- user:\n    token: x.y\n")), None);
        assert_eq!(
            token_secret(&bk("users:\n- user:\n    token: ABCDEF.0123456789abcdef\n")),
            None
        );
    }

    #[test]
    fn the_agent_is_stopped_before_its_files_go() {
        let s = on_host("h1", "/etc/byoh/bootstrap-kubeconfig.conf");
        let stop = s.find("pkill -f byoh-hostagent").unwrap();
        let rm = s.find("rm -f /etc/byoh/bootstrap-kubeconfig.conf").unwrap();
        assert!(stop < rm, "{s}");
        assert_eq!(csr_name("h1"), "byoh-csr-h1");
    }
}
