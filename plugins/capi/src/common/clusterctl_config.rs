//! clusterctl's config file (`--config`, else `~/.config/cluster-api/clusterctl.yaml`, else
//! `~/.cluster-api/clusterctl.yaml`), read as clusterctl reads it: its scalar keys are
//! variables (`generate`, `init`), its `providers:` list and `cert-manager: url:` replace the
//! release assets' URLs (`init`; clusterctl's `cmd/clusterctl/client/config/providers_client.go`
//! and `cert_manager_client.go`, CAPI v1.14.2).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use kclient::error::Error;
use serde_json::Value;

/// How the file is read (bounded; no stdin).
fn input() -> kclient::input::Input<'static> {
    kclient::input::Input::new("--config", false)
}

/// The clusterctl config file to read: `--config`, else the XDG path, else the legacy one.
pub fn path(flag: Option<&Path>) -> Option<PathBuf> {
    if let Some(p) = flag {
        return Some(p.to_path_buf());
    }
    let home = std::env::var_os("HOME").map(PathBuf::from)?;
    let xdg = std::env::var_os("XDG_CONFIG_HOME")
        .map(PathBuf::from)
        .unwrap_or_else(|| home.join(".config"));
    [
        xdg.join("cluster-api").join("clusterctl.yaml"),
        home.join(".cluster-api").join("clusterctl.yaml"),
    ]
    .into_iter()
    .find(|p| p.exists())
}

/// The scalar top-level keys of a clusterctl config file (its variables; lists such as
/// `providers` are [`overrides`]').
pub fn variables(path: &Path, explicit: bool) -> Result<BTreeMap<String, String>, Error> {
    let Some(v) = read(path, explicit)? else {
        return Ok(BTreeMap::new());
    };
    let mut out = BTreeMap::new();
    if let Value::Object(m) = v {
        for (k, v) in m {
            let s = match v {
                Value::String(s) => s,
                Value::Number(n) => n.to_string(),
                Value::Bool(b) => b.to_string(),
                _ => continue,
            };
            out.insert(k, s);
        }
    }
    Ok(out)
}

/// The file parsed; `None` when it is empty, or absent and not named.
fn read(path: &Path, explicit: bool) -> Result<Option<Value>, Error> {
    let text = match input().read_text(path) {
        Ok(t) => t,
        Err(kclient::input::InputError::Io { source, .. })
            if !explicit && source.kind() == std::io::ErrorKind::NotFound =>
        {
            return Ok(None);
        }
        Err(e) => return Err(e.failure()),
    };
    if text.trim().is_empty() {
        return Ok(None);
    }
    serde_saphyr::from_str(&text).map(Some).map_err(|e| Error::Other {
        message: format!(
            "the clusterctl config {} is not valid YAML: {}",
            path.display(),
            kcore::yaml::error_line(&e)
        ),
        hint: Some("it is a map of VARIABLE: value, with providers: and cert-manager: as clusterctl reads them".into()),
    })
}

/// A release asset's URL from the file: a `providers:` entry's `url` (by clusterctl name and
/// type, `CoreProvider`, …), or `cert-manager: url:`.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Overrides {
    /// (name, type, url).
    pub providers: Vec<(String, String, String)>,
    pub cert_manager: Option<String>,
}

impl Overrides {
    /// The URL the file gives for provider `name` of clusterctl type `kind`.
    pub fn provider(&self, name: &str, kind: &str) -> Option<&str> {
        self.providers
            .iter()
            .find(|(n, t, _)| n == name && t == kind)
            .map(|(_, _, u)| u.as_str())
    }
}

/// The file's URL overrides (none when it does not exist and was not named).
pub fn overrides(path: &Path, explicit: bool) -> Result<Overrides, Error> {
    let Some(v) = read(path, explicit)? else {
        return Ok(Overrides::default());
    };
    let mut out = Overrides::default();
    if let Some(list) = v["providers"].as_array() {
        for p in list {
            let field = |k: &str| p[k].as_str().map(str::to_string);
            match (field("name"), field("type"), field("url")) {
                (Some(n), Some(t), Some(u)) => out.providers.push((n, t, u)),
                _ => {
                    return Err(Error::Usage {
                        message: format!(
                            "the clusterctl config {}: a providers entry lacks name, type or url",
                            path.display()
                        ),
                        hint: Some(
                            "each entry is {name: NAME, type: CoreProvider|BootstrapProvider|ControlPlaneProvider|InfrastructureProvider, url: URL}".into(),
                        ),
                    });
                }
            }
        }
    }
    out.cert_manager = v["cert-manager"]["url"].as_str().map(str::to_string);
    Ok(out)
}
