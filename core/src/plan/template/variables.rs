//! Where variable values come from ([`Variables`]: flags, environment, config file) and the
//! `generate cluster` flags that become variables ([`GenerateOptions`]).

use std::collections::BTreeMap;

use serde::Serialize;

use super::TemplateError;

/// Where variable values come from, in priority order: `overrides` (values set by flags such as
/// `--kubernetes-version`), `env` (the process environment), `config` (the config file).
#[derive(Debug, Clone, Default)]
pub struct Variables {
    pub overrides: BTreeMap<String, String>,
    pub env: BTreeMap<String, String>,
    pub config: BTreeMap<String, String>,
}

/// Which source a value came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Source {
    Flag,
    Env,
    Config,
}

impl Variables {
    /// The value of `name`, if set anywhere.
    pub fn lookup(&self, name: &str) -> Option<&str> {
        self.lookup_with_source(name).map(|(v, _)| v)
    }

    /// The value of `name` and where it was found.
    pub(crate) fn lookup_with_source(&self, name: &str) -> Option<(&str, Source)> {
        if let Some(v) = self.overrides.get(name) {
            return Some((v, Source::Flag));
        }
        if let Some(v) = self.env.get(name) {
            return Some((v, Source::Env));
        }
        let env_key = name.to_uppercase().replace('-', "_");
        if let Some(v) = self.env.get(&env_key) {
            return Some((v, Source::Env));
        }
        if let Some(v) = self.config.get(name) {
            return Some((v, Source::Config));
        }
        self.config
            .iter()
            .find(|(k, _)| k.eq_ignore_ascii_case(name))
            .map(|(_, v)| (v.as_str(), Source::Config))
    }
}

/// The flags of `generate cluster` that become variables, as clusterctl sets them.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct GenerateOptions {
    /// `NAME`: `CLUSTER_NAME` (a DNS-1123 subdomain).
    pub cluster_name: String,
    /// `--target-namespace` (or the current namespace): `NAMESPACE` (a DNS-1123 label).
    pub target_namespace: String,
    /// `--kubernetes-version`: `KUBERNETES_VERSION` when given (else env/config apply).
    pub kubernetes_version: Option<String>,
    /// `--control-plane-machine-count`: else env/config, else 1; at least 1.
    pub control_plane_machine_count: Option<i64>,
    /// `--worker-machine-count`: else env/config, else 0; at least 0.
    pub worker_machine_count: Option<i64>,
}

fn is_dns1123_label(s: &str) -> bool {
    !s.is_empty()
        && s.len() <= 63
        && s.chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-')
        && !s.starts_with('-')
        && !s.ends_with('-')
}

impl Variables {
    /// Set `CLUSTER_NAME`, `NAMESPACE`, `KUBERNETES_VERSION`, `CONTROL_PLANE_MACHINE_COUNT` and
    /// `WORKER_MACHINE_COUNT` from the `generate cluster` flags, validating them as clusterctl does
    /// (counts not given fall back to the environment or config, then 1 and 0).
    pub fn apply_generate_options(&mut self, o: &GenerateOptions) -> Result<(), TemplateError> {
        let bad = |m: String| Err(TemplateError::InvalidOption(m));
        if !is_dns1123_label(&o.target_namespace) {
            return bad(format!(
                "invalid target namespace {:?}: use lowercase letters, digits and '-', at most 63 characters",
                o.target_namespace
            ));
        }
        let name = &o.cluster_name;
        if name.is_empty() || name.len() > 253 || !name.split('.').all(is_dns1123_label) {
            return bad(format!(
                "invalid cluster name {name:?}: use lowercase letters, digits, '-' and '.', starting and ending with a letter or digit"
            ));
        }
        self.overrides
            .insert("NAMESPACE".into(), o.target_namespace.clone());
        self.overrides.insert("CLUSTER_NAME".into(), name.clone());
        if let Some(v) = &o.kubernetes_version {
            if crate::version::KubeVersion::parse(v).is_err() {
                return bad(format!(
                    "invalid Kubernetes version {v:?}: use a semantic version such as v1.33.1"
                ));
            }
            self.overrides
                .insert("KUBERNETES_VERSION".into(), v.clone());
        }
        let count = |flag: Option<i64>, var: &str, default: i64| -> Result<i64, TemplateError> {
            match flag {
                Some(n) => Ok(n),
                None => match self.lookup(var) {
                    None => Ok(default),
                    Some(v) => v.trim().parse::<i64>().map_err(|_| {
                        TemplateError::InvalidOption(format!(
                            "invalid value {v:?} for {var}: use a whole number"
                        ))
                    }),
                },
            }
        };
        let cp = count(
            o.control_plane_machine_count,
            "CONTROL_PLANE_MACHINE_COUNT",
            1,
        )?;
        if cp < 1 {
            return bad(format!(
                "invalid control-plane machine count {cp}: use 1 or more"
            ));
        }
        let workers = count(o.worker_machine_count, "WORKER_MACHINE_COUNT", 0)?;
        if workers < 0 {
            return bad(format!(
                "invalid worker machine count {workers}: use 0 or more"
            ));
        }
        self.overrides
            .insert("CONTROL_PLANE_MACHINE_COUNT".into(), cp.to_string());
        self.overrides
            .insert("WORKER_MACHINE_COUNT".into(), workers.to_string());
        Ok(())
    }
}
