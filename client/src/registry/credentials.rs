//! Credentials from Docker's `config.json`, for registries that want them.

use std::collections::BTreeMap;
use std::io::Read;
use std::path::PathBuf;

use oci_client::secrets::RegistryAuth;

use super::RegistryError;

/// The most bytes of Docker's `config.json` read.
const MAX_DOCKER_CONFIG_BYTES: u64 = 1 << 20;

/// Credentials from Docker's `config.json`: `auths.<host>.auth` (base64 `user:password`), or
/// its `username` and `password`. Credential helpers (`credsStore`, `credHelpers`) and identity
/// tokens are not read; those registries are asked anonymously.
#[derive(Clone, Debug, Default)]
pub struct Credentials {
    pub(super) by_host: BTreeMap<String, (String, String)>,
}

impl Credentials {
    /// `$DOCKER_CONFIG/config.json`, else `~/.docker/config.json`; none when it does not exist.
    pub fn load() -> Result<Credentials, RegistryError> {
        let Some(path) = docker_config_path() else {
            return Ok(Credentials::default());
        };
        let shown = path.display().to_string();
        let bad = |why: String| RegistryError::DockerConfig {
            path: shown.clone(),
            why,
        };
        let f = match std::fs::File::open(&path) {
            Ok(f) => f,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                return Ok(Credentials::default());
            }
            Err(e) => return Err(bad(e.to_string())),
        };
        let mut text = String::new();
        f.take(MAX_DOCKER_CONFIG_BYTES)
            .read_to_string(&mut text)
            .map_err(|e| bad(e.to_string()))?;
        Credentials::parse(&text).map_err(bad)
    }

    /// Reads the text of a Docker `config.json`.
    pub fn parse(text: &str) -> Result<Credentials, String> {
        use base64::Engine;
        let v: serde_json::Value =
            serde_json::from_str(text).map_err(|e| format!("not JSON: {e}"))?;
        let mut by_host = BTreeMap::new();
        let Some(auths) = v["auths"].as_object() else {
            return Ok(Credentials { by_host });
        };
        for (key, entry) in auths {
            let pair = match entry["auth"].as_str().filter(|a| !a.is_empty()) {
                Some(a) => {
                    let raw = base64::engine::general_purpose::STANDARD
                        .decode(a.trim())
                        .map_err(|_| format!("auths.{key}.auth is not base64"))?;
                    let text = String::from_utf8(raw)
                        .map_err(|_| format!("auths.{key}.auth is not user:password"))?;
                    let (u, p) = text
                        .split_once(':')
                        .ok_or_else(|| format!("auths.{key}.auth is not user:password"))?;
                    (u.to_string(), p.to_string())
                }
                None => match (entry["username"].as_str(), entry["password"].as_str()) {
                    (Some(u), Some(p)) => (u.to_string(), p.to_string()),
                    _ => continue,
                },
            };
            by_host.insert(host_key(key), pair);
        }
        Ok(Credentials { by_host })
    }

    /// The authentication for `host` (as a reference resolves it: `index.docker.io` for
    /// Docker Hub).
    pub fn auth_for(&self, host: &str) -> RegistryAuth {
        match self.by_host.get(&host_key(host)) {
            Some((u, p)) => RegistryAuth::Basic(u.clone(), p.clone()),
            None => RegistryAuth::Anonymous,
        }
    }
}

fn docker_config_path() -> Option<PathBuf> {
    if let Some(dir) = std::env::var_os("DOCKER_CONFIG").filter(|d| !d.is_empty()) {
        return Some(PathBuf::from(dir).join("config.json"));
    }
    let home = std::env::var_os("HOME").filter(|h| !h.is_empty())?;
    Some(PathBuf::from(home).join(".docker").join("config.json"))
}

/// A `config.json` key or a registry host as one key: no scheme, no path, lower case; Docker
/// Hub's names as one (`https://index.docker.io/v1/`, `docker.io`, `registry-1.docker.io`).
fn host_key(key: &str) -> String {
    let rest = key
        .strip_prefix("https://")
        .or_else(|| key.strip_prefix("http://"))
        .unwrap_or(key);
    let host = rest.split('/').next().unwrap_or(rest).to_ascii_lowercase();
    match host.as_str() {
        "docker.io" | "registry-1.docker.io" | "index.docker.io" => "index.docker.io".into(),
        _ => host,
    }
}
