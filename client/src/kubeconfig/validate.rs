//! Whether kubectl can load a kubeconfig, checked before a merge writes one: client-go decodes
//! `tools/clientcmd/api/v1/types.go` (Kubernetes v1.36) with encoding/json, which refuses a
//! value of the wrong type (an entry's `cluster:` that is a string, a list that is a map,
//! `certificate-authority-data` that is not base64) and ignores unknown fields; its conversion
//! to the internal config (`api/v1/conversion.go`) refuses two entries of the same name.
//! [`usable`] adds what a kubeconfig fetched for one cluster needs on top: named entries with
//! their nested object, and a current context whose cluster and user exist.

use base64::Engine;
use serde::Deserialize;
use serde_json::Value;

/// `[]byte` in Go's JSON: standard base64 with padding (Go skips `\r` and `\n`).
#[derive(Debug)]
struct Bytes;

impl<'de> Deserialize<'de> for Bytes {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Bytes, D::Error> {
        let s = String::deserialize(d)?;
        let clean: String = s.chars().filter(|c| *c != '\r' && *c != '\n').collect();
        base64::engine::general_purpose::STANDARD
            .decode(clean)
            .map(|_| Bytes)
            .map_err(|e| serde::de::Error::custom(format!("not base64: {e}")))
    }
}

/// Fields client-go reads; every one optional, as Go's zero values are.
#[derive(Deserialize)]
#[serde(rename_all = "kebab-case")]
#[allow(dead_code)] // read only to check the types
struct Cluster {
    server: Option<String>,
    tls_server_name: Option<String>,
    insecure_skip_tls_verify: Option<bool>,
    certificate_authority: Option<String>,
    certificate_authority_data: Option<Bytes>,
    proxy_url: Option<String>,
    disable_compression: Option<bool>,
    extensions: Option<Vec<Extension>>,
}

#[derive(Deserialize)]
#[allow(dead_code)]
struct Extension {
    name: Option<String>,
    extension: Option<Value>,
}

#[derive(Deserialize)]
#[allow(dead_code)]
struct AuthProvider {
    name: Option<String>,
    config: Option<std::collections::BTreeMap<String, String>>,
}

#[derive(Deserialize)]
#[allow(dead_code)]
struct EnvVar {
    name: Option<String>,
    value: Option<String>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
#[allow(dead_code)]
struct Exec {
    command: Option<String>,
    args: Option<Vec<String>>,
    env: Option<Vec<EnvVar>>,
    api_version: Option<String>,
    install_hint: Option<String>,
    provide_cluster_info: Option<bool>,
    interactive_mode: Option<String>,
}

#[derive(Deserialize)]
#[serde(rename_all = "kebab-case")]
#[allow(dead_code)]
struct AuthInfo {
    client_certificate: Option<String>,
    client_certificate_data: Option<Bytes>,
    client_key: Option<String>,
    client_key_data: Option<Bytes>,
    token: Option<String>,
    #[serde(rename = "tokenFile")]
    token_file: Option<String>,
    #[serde(rename = "as")]
    impersonate: Option<String>,
    #[serde(rename = "as-uid")]
    impersonate_uid: Option<String>,
    #[serde(rename = "as-groups")]
    impersonate_groups: Option<Vec<String>>,
    #[serde(rename = "as-user-extra")]
    impersonate_user_extra: Option<std::collections::BTreeMap<String, Vec<String>>>,
    username: Option<String>,
    password: Option<String>,
    #[serde(rename = "auth-provider")]
    auth_provider: Option<AuthProvider>,
    exec: Option<Exec>,
    extensions: Option<Vec<Extension>>,
}

#[derive(Deserialize)]
#[allow(dead_code)]
struct Context {
    cluster: Option<String>,
    user: Option<String>,
    namespace: Option<String>,
    extensions: Option<Vec<Extension>>,
}

/// An entry of a kubeconfig list: its name, and whether it has its body.
trait Named {
    fn entry(&self) -> (Option<&String>, bool);
}

/// A named entry of one of a kubeconfig's lists, its body under `$key`.
macro_rules! named {
    ($name:ident, $key:ident: $body:ty) => {
        #[derive(Deserialize)]
        struct $name {
            name: Option<String>,
            $key: Option<$body>,
        }

        impl Named for $name {
            fn entry(&self) -> (Option<&String>, bool) {
                (self.name.as_ref(), self.$key.is_some())
            }
        }
    };
}

named!(NamedCluster, cluster: Cluster);
named!(NamedAuthInfo, user: AuthInfo);
named!(NamedContext, context: Context);

/// `preferences` as client-go reads it.
#[derive(Deserialize)]
#[allow(dead_code)]
struct Preferences {
    colors: Option<bool>,
    extensions: Option<Vec<Extension>>,
}

#[derive(Deserialize)]
#[serde(rename_all = "kebab-case")]
struct Config {
    clusters: Option<Vec<NamedCluster>>,
    users: Option<Vec<NamedAuthInfo>>,
    contexts: Option<Vec<NamedContext>>,
    current_context: Option<String>,
    #[allow(dead_code)]
    preferences: Option<Preferences>,
    #[allow(dead_code)]
    extensions: Option<Vec<Extension>>,
}

/// Parses `text` as client-go would. client-go turns YAML into JSON with YAML 1.1's rules
/// (sigs.k8s.io/yaml over go-yaml v2), where a plain `N`, `yes`, `on` or `0777` is a boolean or
/// a number, and then refuses it where a string belongs; serde-saphyr's `no_schema` refuses
/// the same plain scalars for string fields.
fn parse(text: &str) -> Result<Config, String> {
    if text.trim().is_empty() {
        return Ok(Config {
            clusters: None,
            users: None,
            contexts: None,
            current_context: None,
            preferences: None,
            extensions: None,
        });
    }
    // go-yaml v2 keeps the last of two equal keys, as kubectl's error for `name: u` then
    // `name: N` in one entry shows.
    let opts = serde_saphyr::options! {
        no_schema: true,
        duplicate_keys: serde_saphyr::DuplicateKeyPolicy::LastWins,
    };
    serde_saphyr::from_str_with_options::<Config>(text, opts).map_err(|e| {
        let at = e
            .location()
            .map(|l| format!(" (line {})", l.line()))
            .unwrap_or_default();
        match innermost(&e) {
            serde_saphyr::Error::QuotingRequired { value, .. } => format!(
                "the plain value {value}{at} is a boolean or a number to kubectl where a string belongs (quote it: \"{value}\")"
            ),
            _ => kcore::yaml::error_line(&e),
        }
    })
}

/// The error under serde-saphyr's wrappers.
fn innermost(mut e: &serde_saphyr::Error) -> &serde_saphyr::Error {
    while let serde_saphyr::Error::AliasError { error, .. }
    | serde_saphyr::Error::WithSnippet { error, .. } = e
    {
        e = error;
    }
    e
}

/// The names of one list, checked: unique, and (`strict`) present with their nested object
/// (`has_body`).
fn names(
    list: &str,
    key: &str,
    entries: &Option<Vec<impl Named>>,
    strict: bool,
) -> Result<Vec<String>, String> {
    let mut out: Vec<String> = Vec::new();
    for (name, has_body) in entries.iter().flatten().map(Named::entry) {
        let name = name.cloned().unwrap_or_default();
        if strict && name.is_empty() {
            return Err(format!("an entry of \"{list}\" has no name"));
        }
        if strict && !has_body {
            return Err(format!(
                "{list} entry \"{name}\" has no \"{key}\" (its fields must be nested under \"{key}:\")"
            ));
        }
        if out.contains(&name) {
            return Err(format!("\"{list}\" has two entries named \"{name}\""));
        }
        out.push(name);
    }
    Ok(out)
}

/// What kubectl refuses when it loads `text`; `strict` adds [`usable`]'s checks on names and
/// nested objects.
fn check(text: &str, strict: bool) -> Result<(Config, [Vec<String>; 3]), String> {
    let cfg = parse(text)?;
    let clusters = names("clusters", "cluster", &cfg.clusters, strict)?;
    let users = names("users", "user", &cfg.users, strict)?;
    let contexts = names("contexts", "context", &cfg.contexts, strict)?;
    Ok((cfg, [clusters, users, contexts]))
}

/// Whether kubectl can load the kubeconfig `text`: the types client-go decodes (YAML 1.1
/// scalars included) and unique names. (A current context naming no context still loads:
/// `kubectl config view` shows it.) The error says what is wrong, in one line.
pub fn loadable(text: &str) -> Result<(), String> {
    check(text, false).map(|_| ())
}

/// [`loadable`], and usable as the kubeconfig of one cluster: clusters, users and contexts,
/// each named and with its nested object, a current context (if set) that exists, and a
/// context (the current one, else the first) whose cluster and user are defined and whose
/// cluster has a server.
pub fn usable(text: &str) -> Result<(), String> {
    let (cfg, [clusters, users, contexts]) = check(text, true)?;
    for (list, names) in [
        ("clusters", &clusters),
        ("users", &users),
        ("contexts", &contexts),
    ] {
        if names.is_empty() {
            return Err(format!("it has no {list}"));
        }
    }
    if let Some(c) = cfg.current_context.as_ref().filter(|c| !c.is_empty())
        && !contexts.contains(c)
    {
        return Err(format!("current-context \"{c}\" names no context"));
    }
    let current = cfg
        .current_context
        .clone()
        .filter(|c| !c.is_empty())
        .unwrap_or_else(|| contexts[0].clone());
    let ctx = cfg
        .contexts
        .iter()
        .flatten()
        .find(|c| c.name.as_ref() == Some(&current))
        .and_then(|c| c.context.as_ref());
    let cluster = ctx.and_then(|c| c.cluster.clone()).unwrap_or_default();
    let user = ctx.and_then(|c| c.user.clone()).unwrap_or_default();
    for (key, want, names) in [("cluster", &cluster, &clusters), ("user", &user, &users)] {
        if !names.contains(want) {
            return Err(format!(
                "context \"{current}\" uses {key} \"{want}\", which it does not define"
            ));
        }
    }
    let server = cfg
        .clusters
        .iter()
        .flatten()
        .find(|c| c.name.as_ref() == Some(&cluster))
        .and_then(|c| c.cluster.as_ref())
        .and_then(|c| c.server.clone())
        .unwrap_or_default();
    if server.is_empty() {
        return Err(format!("cluster \"{cluster}\" has no server"));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    const GOOD: &str = r#"apiVersion: v1
kind: Config
clusters:
- name: c
  cluster:
    server: https://10.0.0.1:6443
    certificate-authority-data: Q0E=
    insecure-skip-tls-verify: false
users:
- name: u
  user:
    client-certificate-data: Y2VydA==
    client-key-data: a2V5
    exec:
      command: x
      args: [a]
contexts:
- name: x
  context:
    cluster: c
    user: u
current-context: x
preferences: {}
unknown-field: 1
"#;

    #[test]
    fn a_good_kubeconfig_passes() {
        assert_eq!(usable(GOOD), Ok(()));
        assert_eq!(loadable(GOOD), Ok(()));
        assert_eq!(loadable(""), Ok(()), "an empty file loads");
    }

    #[test]
    fn shapes_kubectl_rejects_are_named() {
        let cases = [
            // kubectl (YAML 1.1): N is a boolean, not a name.
            ("- name: u\n", "- name: N\n", "the plain value N (line"),
            // Two `name:` keys in one entry: the last wins, as in go-yaml v2.
            (
                "      args: [a]\n",
                "      args: [a]\n  name: N\n",
                "quote it",
            ),
            ("    exec:\n      command: x\n      args: [a]\n", "", ""),
            (
                "  user:\n    client-certificate-data",
                "  user: \"name: N\"\n  x:\n    client-certificate-data",
                "line 11 column 9: expected mapping",
            ),
            ("Q0E=", "not-base64!", "not base64"),
            (
                "insecure-skip-tls-verify: false",
                "insecure-skip-tls-verify: maybe",
                "invalid boolean",
            ),
            (
                "clusters:\n- name: c\n  cluster:",
                "clusters:\n  name: c\n  cluster:",
                "expected sequence",
            ),
        ];
        for (from, to, says) in cases {
            assert!(GOOD.contains(from), "{from}");
            let doc = GOOD.replacen(from, to, 1);
            let r = loadable(&doc);
            if says.is_empty() {
                assert_eq!(r, Ok(()), "{doc}");
                continue;
            }
            let e = r.expect_err(&doc);
            assert!(e.contains(says), "{to}: {e}");
            assert!(!e.contains('\n'), "{e}");
        }
        let doc = GOOD.replacen(
            "users:\n",
            "users:\n- name: c\n  user: {}\n- name: c\n  user: {}\n",
            1,
        );
        assert!(
            loadable(&doc)
                .unwrap_err()
                .contains("two entries named \"c\"")
        );
    }

    #[test]
    fn usable_wants_nested_bodies_and_defined_references() {
        let flat = GOOD.replacen(
            "  cluster:\n    server: https://10.0.0.1:6443\n    certificate-authority-data: Q0E=\n    insecure-skip-tls-verify: false\n",
            "  server: https://10.0.0.1:6443\n",
            1,
        );
        assert!(
            loadable(&flat).is_ok(),
            "kubectl loads it (the server is ignored)"
        );
        assert!(
            usable(&flat)
                .unwrap_err()
                .contains("clusters entry \"c\" has no \"cluster\""),
            "{:?}",
            usable(&flat)
        );
        let ghost = GOOD.replacen("    user: u\n", "    user: ghost\n", 1);
        assert!(usable(&ghost).unwrap_err().contains("user \"ghost\""));
        let unnamed = GOOD.replacen("- name: u\n", "- x: 1\n", 1);
        assert!(usable(&unnamed).unwrap_err().contains("has no name"));
        let nowhere = GOOD.replacen("current-context: x", "current-context: nope", 1);
        assert_eq!(loadable(&nowhere), Ok(()), "kubectl config view shows it");
        assert!(
            usable(&nowhere)
                .unwrap_err()
                .contains("current-context \"nope\" names no context")
        );
    }
}

#[cfg(test)]
mod render_tests {
    /// What a merge writes quotes the strings YAML 1.1 would read as booleans or numbers, so
    /// a quoted `"N"` or `"0777"` in a Secret stays loadable after the merge.
    #[test]
    fn written_kubeconfigs_stay_loadable() {
        let doc = serde_json::json!({
            "apiVersion": "v1", "kind": "Config",
            "clusters": [{"name": "N", "cluster": {"server": "https://x"}}],
            "users": [{"name": "yes", "user": {"token": "0777"}}],
            "contexts": [{"name": "on", "context": {"cluster": "N", "user": "yes", "namespace": "1e3"}}],
            "current-context": "on",
        });
        let text = crate::render::to_yaml(&doc).unwrap();
        assert_eq!(super::usable(&text), Ok(()), "{text}");
    }
}
