//! Connecting the way kubectl does: the kubeconfig by kubectl's loading rules, the context,
//! cluster and user overrides, impersonation, TLS and timeouts ([`ConnectOptions`]), and the
//! connected client with what it resolved, for messages ([`Conn`]).

use std::path::{Path, PathBuf};
use std::time::Duration;

use kube::config::{KubeConfigOptions, Kubeconfig, NamedAuthInfo, NamedCluster};
use kube::{Client, Config};

use crate::error::{ApiServer, Error};

/// How to connect, as kubectl's connection flags say (`--kubeconfig`, `--context`, `-n`, `--as`, ...).
#[derive(Clone, Debug, Default)]
pub struct ConnectOptions {
    /// Path to the kubeconfig file (default: $KUBECONFIG, merged by kubectl's rules, then ~/.kube/config, then in-cluster)
    pub kubeconfig: Option<PathBuf>,
    /// The kubeconfig context to use
    pub context: Option<String>,
    /// The kubeconfig cluster to use
    pub cluster: Option<String>,
    /// The kubeconfig user to use
    pub user: Option<String>,
    /// The namespace (default: the context's namespace)
    pub namespace: Option<String>,
    /// Act on all namespaces
    pub all_namespaces: bool,
    /// The API server URL (overrides the kubeconfig)
    pub server: Option<String>,
    /// Bearer token for authentication to the API server
    pub token: Option<String>,
    /// User to impersonate
    pub as_user: Option<String>,
    /// Group to impersonate (repeatable)
    pub as_group: Vec<String>,
    /// UID to impersonate
    pub as_uid: Option<String>,
    /// Time to wait for one server request (e.g. 1s, 2m, 1h; 0 = no limit)
    pub request_timeout: Option<Duration>,
    /// Do not check the server's certificate (insecure)
    pub insecure_skip_tls_verify: bool,
    /// Server name for certificate validation
    pub tls_server_name: Option<String>,
    /// A CA bundle file that replaces the cluster's (`--certificate-authority`)
    pub certificate_authority: Option<PathBuf>,
    /// A client certificate file that replaces the user's (`--client-certificate`)
    pub client_certificate: Option<PathBuf>,
    /// A client key file that replaces the user's (`--client-key`)
    pub client_key: Option<PathBuf>,
}

/// A client connected the way kubectl would, plus what it resolved (for messages).
#[derive(Clone)]
pub struct Conn {
    pub client: Client,
    /// The context name (`in-cluster` for in-cluster configuration).
    pub context: String,
    /// The API server URL.
    pub server: String,
    /// `-n`, else the context's namespace, else `default`.
    pub namespace: String,
    /// True when `-n` was given.
    pub namespace_explicit: bool,
    /// `-A`.
    pub all_namespaces: bool,
    /// `--request-timeout`, for timeout messages.
    pub request_timeout: Option<Duration>,
}

impl Conn {
    /// The connection, for error messages.
    pub fn target(&self) -> ApiServer {
        ApiServer {
            context: self.context.clone(),
            server: self.server.clone(),
        }
    }
    /// The namespace to list in: `None` with `-A`.
    pub fn list_namespace(&self) -> Option<&str> {
        if self.all_namespaces {
            None
        } else {
            Some(&self.namespace)
        }
    }
    /// Maps a kube error of `op` on this connection.
    pub fn error(&self, err: kube::Error, op: &crate::error::Op) -> Error {
        match crate::error::from_kube(err, &self.target(), op) {
            Error::Timeout { what, after } if after.is_zero() => Error::Timeout {
                what,
                after: self.request_timeout.unwrap_or_default(),
            },
            other => other,
        }
    }
}

fn kubeconfig_error(e: impl std::fmt::Display, path: Option<&Path>) -> Error {
    crate::kubeconfig::load_error(e, path)
}

fn default_kubeconfig_path() -> Option<PathBuf> {
    std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".kube").join("config"))
}

/// The kubeconfig's cluster entry named `name`.
fn named_cluster<'a>(
    kc: &'a mut Kubeconfig,
    name: Option<&String>,
) -> Option<&'a mut NamedCluster> {
    kc.clusters.iter_mut().find(|c| Some(&c.name) == name)
}

/// The kubeconfig's user entry named `name`.
fn named_user<'a>(kc: &'a mut Kubeconfig, name: Option<&String>) -> Option<&'a mut NamedAuthInfo> {
    kc.auth_infos.iter_mut().find(|a| Some(&a.name) == name)
}

impl ConnectOptions {
    /// Loads the kubeconfig like kubectl: `--kubeconfig`, else `KUBECONFIG` (several paths
    /// merged, first wins), else `~/.kube/config`. `None` when none exists (then in-cluster).
    pub fn load_kubeconfig(&self) -> Result<Option<Kubeconfig>, Error> {
        if let Some(p) = &self.kubeconfig {
            return crate::kubeconfig::load_file(p, "--kubeconfig").map(Some);
        }
        if let Some(v) = std::env::var_os("KUBECONFIG")
            && std::env::split_paths(&v).any(|p| !p.as_os_str().is_empty())
        {
            // kubectl ignores KUBECONFIG entries that do not exist.
            let existing: Vec<PathBuf> = std::env::split_paths(&v)
                .filter(|p| !p.as_os_str().is_empty() && p.exists())
                .collect();
            if existing.is_empty() {
                return Err(Error::Kubeconfig {
                    message: format!(
                        "none of the files in KUBECONFIG exist ({})",
                        v.to_string_lossy()
                    ),
                    hint: "fix KUBECONFIG or pass --kubeconfig".into(),
                });
            }
            let mut merged = Kubeconfig::default();
            for p in &existing {
                let kc = crate::kubeconfig::load_file(p, "KUBECONFIG")?;
                merged = merged.merge(kc).map_err(|e| kubeconfig_error(e, Some(p)))?;
            }
            return Ok(Some(merged));
        }
        match default_kubeconfig_path() {
            Some(p) if p.exists() => crate::kubeconfig::load_file(&p, "the kubeconfig").map(Some),
            _ => Ok(None),
        }
    }

    /// The context to use: `--context`, else the kubeconfig's current context; it must exist.
    fn context_name(&self, kc: &Kubeconfig) -> Result<String, Error> {
        // kubectl treats an empty `current-context: ""` (what `kubectl config unset
        // current-context` leaves) and `--context ""` as not set.
        let Some(context) = self
            .context
            .clone()
            .filter(|c| !c.is_empty())
            .or_else(|| kc.current_context.clone().filter(|c| !c.is_empty()))
        else {
            return Err(Error::Kubeconfig {
                message: "no current context is set in the kubeconfig (current-context is empty)"
                    .into(),
                hint: "set one with kubectl config use-context NAME, or pass --context NAME".into(),
            });
        };
        if kc.contexts.iter().any(|c| c.name == context) {
            return Ok(context);
        }
        let names: Vec<&str> = kc.contexts.iter().map(|c| c.name.as_str()).collect();
        let close = kcore::text::closest_names(&context, names.iter().copied());
        let hint = if close.is_empty() {
            format!("known contexts: {}", names.join(", "))
        } else {
            format!(
                "did you mean \"{}\"? (kubectl config get-contexts)",
                close[0]
            )
        };
        Err(Error::Kubeconfig {
            message: format!("context \"{context}\" not found in the kubeconfig"),
            hint,
        })
    }

    /// The user and cluster the context (or `--user`, `--cluster`) names must be defined: a
    /// missing user would silently connect as `system:anonymous`, as kubectl would not.
    fn check_references(&self, kc: &Kubeconfig, context: &str) -> Result<(), Error> {
        let (cluster, user) = self.cluster_and_user(kc, context);
        if let Some(u) = user.filter(|u| !u.is_empty())
            && self.token.is_none()
            && !kc.auth_infos.iter().any(|a| a.name == u)
        {
            return Err(Error::Kubeconfig {
                message: format!("context \"{context}\" uses user \"{u}\", which the kubeconfig does not define"),
                hint: "add the user (kubectl config set-credentials), fix the context, or pass --user or --token".into(),
            });
        }
        if let Some(c) = cluster.filter(|c| !c.is_empty())
            && self.server.is_none()
            && !kc.clusters.iter().any(|x| x.name == c)
        {
            return Err(Error::Kubeconfig {
                message: format!("context \"{context}\" uses cluster \"{c}\", which the kubeconfig does not define"),
                hint: "add the cluster (kubectl config set-cluster), fix the context, or pass --cluster or --server".into(),
            });
        }
        Ok(())
    }

    /// The cluster and user names in effect for `context`: `--cluster` and `--user` over the
    /// context's own.
    fn cluster_and_user(&self, kc: &Kubeconfig, context: &str) -> (Option<String>, Option<String>) {
        let ctx = kc
            .contexts
            .iter()
            .find(|c| c.name == context)
            .and_then(|c| c.context.as_ref());
        let cluster = self
            .cluster
            .clone()
            .or_else(|| ctx.map(|c| c.cluster.clone()));
        let user = self
            .user
            .clone()
            .or_else(|| ctx.and_then(|c| c.user.clone()));
        (cluster, user)
    }

    /// kubectl's `--certificate-authority`, `--client-certificate` and `--client-key`: the files
    /// replace the CA of the cluster and the credentials of the user the context (or
    /// `--cluster`, `--user`) selects, as kubectl's overrides do. A file that cannot be read is
    /// refused here, with its flag named.
    fn apply_file_overrides(&self, kc: &mut Kubeconfig, context: &str) -> Result<(), Error> {
        for (flag, path) in [
            ("--certificate-authority", &self.certificate_authority),
            ("--client-certificate", &self.client_certificate),
            ("--client-key", &self.client_key),
        ] {
            if let Some(p) = path
                && let Err(e) = std::fs::metadata(p)
            {
                return Err(Error::usage(format!("{flag} {}: {e}", p.display())));
            }
        }
        let (cluster, user) = self.cluster_and_user(kc, context);
        let text = |p: &PathBuf| p.to_string_lossy().to_string();
        if let Some(ca) = &self.certificate_authority
            && let Some(c) = named_cluster(kc, cluster.as_ref()).and_then(|c| c.cluster.as_mut())
        {
            c.certificate_authority = Some(text(ca));
            c.certificate_authority_data = None;
        }
        if self.client_certificate.is_some() || self.client_key.is_some() {
            let Some(a) = named_user(kc, user.as_ref()).and_then(|a| a.auth_info.as_mut()) else {
                return Ok(());
            };
            if let Some(cert) = &self.client_certificate {
                a.client_certificate = Some(text(cert));
                a.client_certificate_data = None;
            }
            if let Some(key) = &self.client_key {
                a.client_key = Some(text(key));
                a.client_key_data = None;
            }
        }
        Ok(())
    }

    /// Reads the files the selected cluster and user name (certificate-authority,
    /// client-certificate, client-key, tokenFile) through [`crate::input`], bounded in bytes and
    /// time whatever they are, into the fields that hold the data itself: kube-client would read
    /// them whole, and block on a FIFO. A file that cannot be read is refused in one line naming
    /// the flag, or the kubeconfig entry that names it.
    fn inline_referenced_files(&self, kc: &mut Kubeconfig, context: &str) -> Result<(), Error> {
        use base64::Engine as _;
        let (cluster, user) = self.cluster_and_user(kc, context);
        let read = |path: &str, flag: Option<&str>, what: String| -> Result<Vec<u8>, Error> {
            let named = flag.map_or(what, str::to_string);
            crate::input::Input::new(&named, false)
                .read_bytes(Path::new(path))
                .map_err(|e| match flag {
                    Some(_) => e.usage(),
                    None => Error::Kubeconfig {
                        hint: e.hint(),
                        message: e.to_string(),
                    },
                })
        };
        // The file a field names, taken out of the field: its data, base64.
        let inline = |field: &mut Option<String>, flag, what| -> Result<Option<String>, Error> {
            let Some(p) = field.take().filter(|p| !p.is_empty()) else {
                return Ok(None);
            };
            let data = read(&p, flag, what)?;
            Ok(Some(base64::engine::general_purpose::STANDARD.encode(data)))
        };
        if let Some(c) = named_cluster(kc, cluster.as_ref()) {
            let what = format!("the certificate-authority of cluster \"{}\"", c.name);
            let flag = self
                .certificate_authority
                .is_some()
                .then_some("--certificate-authority");
            if let Some(cl) = c.cluster.as_mut()
                && let Some(data) = inline(&mut cl.certificate_authority, flag, what)?
            {
                cl.certificate_authority_data = Some(data);
            }
        }
        if let Some(a) = named_user(kc, user.as_ref()) {
            let name = a.name.clone();
            if let Some(ai) = a.auth_info.as_mut() {
                let what = format!("the client-certificate of user \"{name}\"");
                let flag = self
                    .client_certificate
                    .is_some()
                    .then_some("--client-certificate");
                if let Some(data) = inline(&mut ai.client_certificate, flag, what)? {
                    ai.client_certificate_data = Some(data);
                }
                let what = format!("the client-key of user \"{name}\"");
                let flag = self.client_key.is_some().then_some("--client-key");
                if let Some(data) = inline(&mut ai.client_key, flag, what)? {
                    ai.client_key_data = Some(data.into());
                }
                if ai.token.is_none()
                    && let Some(p) = ai.token_file.take().filter(|p| !p.is_empty())
                {
                    let data = read(&p, None, format!("the tokenFile of user \"{name}\""))?;
                    let token = String::from_utf8(data).map_err(|_| Error::Kubeconfig {
                        message: format!("the tokenFile of user \"{name}\" ({p}) is not text"),
                        hint: "point tokenFile at a file holding the bearer token".into(),
                    })?;
                    ai.token = Some(token.trim().to_string().into());
                }
            }
        }
        Ok(())
    }

    /// The configuration of the context (with `--cluster` and `--user`) in `kc`.
    async fn kubeconfig_config(&self, mut kc: Kubeconfig) -> Result<(Config, String), Error> {
        let context = self.context_name(&kc)?;
        self.check_references(&kc, &context)?;
        self.apply_file_overrides(&mut kc, &context)?;
        self.inline_referenced_files(&mut kc, &context)?;
        let opts = KubeConfigOptions {
            context: Some(context.clone()),
            cluster: self.cluster.clone(),
            user: self.user.clone(),
        };
        let config = Config::from_custom_kubeconfig(kc, &opts)
            .await
            .map_err(|e| Error::Kubeconfig {
                message: format!("context \"{context}\": {e}"),
                hint: "check the context's cluster and user (kubectl config view --minify)".into(),
            })?;
        Ok((config, context))
    }

    /// Applies `--server`, `--token` (which replaces the kubeconfig's credentials), `--as*`,
    /// the TLS flags and `--request-timeout`.
    fn apply_overrides(&self, config: &mut Config) -> Result<(), Error> {
        if let Some(server) = &self.server {
            config.cluster_url = server.parse().map_err(|e| {
                Error::usage(format!("--server {server:?} is not a valid URL: {e}"))
            })?;
        }
        if let Some(token) = &self.token {
            config.auth_info.token = Some(token.clone().into());
            config.auth_info.token_file = None;
            config.auth_info.exec = None;
            config.auth_info.client_certificate = None;
            config.auth_info.client_certificate_data = None;
            config.auth_info.client_key = None;
            config.auth_info.client_key_data = None;
        }
        if let Some(u) = &self.as_user {
            config.auth_info.impersonate = Some(u.clone());
        }
        if !self.as_group.is_empty() {
            config.auth_info.impersonate_groups = Some(self.as_group.clone());
        }
        if let Some(uid) = &self.as_uid {
            config.auth_info.impersonate_uid = Some(uid.clone());
        }
        if self.insecure_skip_tls_verify {
            config.accept_invalid_certs = true;
            config.root_cert = None;
        }
        if let Some(n) = &self.tls_server_name {
            config.tls_server_name = Some(n.clone());
        }
        if let Some(t) = self.request_timeout.filter(|t| !t.is_zero()) {
            config.connect_timeout = Some(t);
            config.read_timeout = Some(t);
            config.write_timeout = Some(t);
            config.reset_reader_on_write = true;
        }
        Ok(())
    }

    /// Builds the client configuration and the context name it came from.
    pub async fn config(&self) -> Result<(Config, String), Error> {
        let (mut config, context) = match self.load_kubeconfig()? {
            Some(kc) => self.kubeconfig_config(kc).await?,
            None => match Config::incluster() {
                Ok(c) => (c, "in-cluster".to_string()),
                Err(e) => {
                    return Err(Error::Kubeconfig {
                        message: format!("no kubeconfig found and not running in a cluster ({e})"),
                        hint: "set KUBECONFIG, pass --kubeconfig, or create ~/.kube/config".into(),
                    });
                }
            },
        };
        self.apply_overrides(&mut config)?;
        Ok((config, context))
    }

    /// Connects like kubectl: kubeconfig (or in-cluster), context, overrides, namespace.
    pub async fn connect(&self) -> Result<Conn, Error> {
        let (config, context) = self.config().await?;
        let server = config
            .cluster_url
            .to_string()
            .trim_end_matches('/')
            .to_string();
        let namespace = self
            .namespace
            .clone()
            .unwrap_or_else(|| config.default_namespace.clone());
        // Checked before it reaches a URL, where `a$(x)` reads as "invalid uri character".
        if !self.all_namespaces {
            let from = if self.namespace.is_some() {
                "-n"
            } else {
                "the context's namespace"
            };
            kcore::names::check_namespace(from, &namespace)?;
        }
        let target = ApiServer {
            context: context.clone(),
            server: server.clone(),
        };
        let client = Client::try_from(config)
            .map_err(|e| crate::error::from_kube(e, &target, &crate::error::Op::default()))?;
        tracing::debug!(%context, %server, %namespace, "connected");
        Ok(Conn {
            client,
            context,
            server,
            namespace,
            namespace_explicit: self.namespace.is_some(),
            all_namespaces: self.all_namespaces,
            request_timeout: self.request_timeout.filter(|t| !t.is_zero()),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn write(dir: &Path, name: &str, text: &str) -> PathBuf {
        let p = dir.join(name);
        std::fs::write(&p, text).unwrap();
        p
    }

    const KC_A: &str = "apiVersion: v1\nkind: Config\nclusters:\n- name: a\n  cluster:\n    server: https://a.example:6443\ncontexts:\n- name: ctx-a\n  context:\n    cluster: a\n    user: ua\n    namespace: team-a\ncurrent-context: ctx-a\nusers:\n- name: ua\n  user:\n    token: aaa\n";
    const KC_B: &str = "apiVersion: v1\nkind: Config\nclusters:\n- name: b\n  cluster:\n    server: https://b.example:6443\ncontexts:\n- name: ctx-b\n  context:\n    cluster: b\n    user: ub\ncurrent-context: ctx-b\nusers:\n- name: ub\n  user:\n    token: bbb\n";

    /// The files a kubeconfig names (certificate-authority, client cert and key, tokenFile)
    /// were once read whole by kube-client: `/dev/zero` until memory ran out. Each is read
    /// under the input bound, and a file that cannot be is refused in one line naming its entry.
    #[tokio::test]
    async fn files_the_kubeconfig_names_are_read_bounded() {
        let dir = tempfile::tempdir().unwrap();
        let token = write(dir.path(), "token", "from-the-file\n");
        let kc = |ca: &str| {
            format!(
                "apiVersion: v1\nkind: Config\nclusters:\n- name: a\n  cluster:\n    server: https://a.example:6443\n    certificate-authority: {ca}\ncontexts:\n- name: ctx-a\n  context:\n    cluster: a\n    user: ua\ncurrent-context: ctx-a\nusers:\n- name: ua\n  user:\n    tokenFile: {}\n",
                token.display()
            )
        };
        let zero = write(dir.path(), "zero", &kc("/dev/zero"));
        let err = ConnectOptions {
            kubeconfig: Some(zero.clone()),
            ..Default::default()
        }
        .config()
        .await
        .unwrap_err();
        let line = err.to_string();
        assert!(
            line.contains("the certificate-authority of cluster \"a\" /dev/zero is larger than"),
            "{line}"
        );
        assert!(!line.contains('\n'), "{line}");
        // As a flag, the flag is named and it is a usage error.
        let err = ConnectOptions {
            kubeconfig: Some(zero),
            certificate_authority: Some("/dev/zero".into()),
            ..Default::default()
        }
        .config()
        .await
        .unwrap_err();
        assert!(
            err.to_string()
                .starts_with("--certificate-authority /dev/zero is larger than"),
            "{err}"
        );
        assert_eq!(err.exit_code(), 2);
        // A directory is refused as well; a token file's text becomes the token.
        let d = write(dir.path(), "dir", &kc(&dir.path().display().to_string()));
        let err = ConnectOptions {
            kubeconfig: Some(d),
            ..Default::default()
        }
        .config()
        .await
        .unwrap_err();
        assert!(err.to_string().contains("is a directory"), "{err}");
        let no_ca = kc("x").replace("    certificate-authority: x\n", "");
        let ok = write(dir.path(), "ok", &no_ca);
        let (config, _) = ConnectOptions {
            kubeconfig: Some(ok),
            ..Default::default()
        }
        .config()
        .await
        .unwrap();
        // Read here (bounded), not left for kube-client to read.
        assert!(config.auth_info.token.is_some());
        assert!(config.auth_info.token_file.is_none());
    }

    #[tokio::test]
    async fn kubeconfig_flag_context_and_namespace() {
        let dir = tempfile::tempdir().unwrap();
        let a = write(dir.path(), "a", KC_A);
        let flags = ConnectOptions {
            kubeconfig: Some(a.clone()),
            ..Default::default()
        };
        let (config, ctx) = flags.config().await.unwrap();
        assert_eq!(ctx, "ctx-a");
        assert_eq!(config.default_namespace, "team-a");
        assert_eq!(config.cluster_url.to_string(), "https://a.example:6443/");

        let flags = ConnectOptions {
            kubeconfig: Some(a),
            context: Some("ctx-aa".into()),
            request_timeout: Some(Duration::from_secs(3)),
            as_user: Some("jane".into()),
            as_group: vec!["admins".into()],
            insecure_skip_tls_verify: true,
            ..Default::default()
        };
        let err = flags.config().await.unwrap_err();
        assert_eq!(
            err.to_string(),
            "context \"ctx-aa\" not found in the kubeconfig"
        );
        assert!(err.hint().unwrap().contains("did you mean \"ctx-a\"?"));
        let flags = ConnectOptions {
            context: Some("ctx-a".into()),
            ..flags
        };
        let (config, _) = flags.config().await.unwrap();
        assert_eq!(config.read_timeout, Some(Duration::from_secs(3)));
        assert_eq!(config.auth_info.impersonate.as_deref(), Some("jane"));
        assert_eq!(
            config.auth_info.impersonate_groups,
            Some(vec!["admins".to_string()])
        );
        assert!(config.accept_invalid_certs);
    }

    // Touches the process environment: the only test in this crate that sets KUBECONFIG.
    #[tokio::test]
    async fn kubeconfig_env_merges_several_files_first_wins() {
        let dir = tempfile::tempdir().unwrap();
        let a = write(dir.path(), "a", KC_A);
        let b = write(dir.path(), "b", KC_B);
        let joined = std::env::join_paths([b.clone(), dir.path().join("missing"), a]).unwrap();
        // SAFETY: no other test of this crate reads or writes KUBECONFIG.
        unsafe { std::env::set_var("KUBECONFIG", &joined) };
        let flags = ConnectOptions::default();
        let (config, ctx) = flags.config().await.unwrap();
        assert_eq!(ctx, "ctx-b", "current-context of the first file wins");
        assert_eq!(config.default_namespace, "default");
        let flags = ConnectOptions {
            context: Some("ctx-a".into()),
            namespace: Some("x".into()),
            ..Default::default()
        };
        let (config, ctx) = flags.config().await.unwrap();
        assert_eq!(ctx, "ctx-a", "contexts of later files are merged in");
        assert_eq!(config.cluster_url.to_string(), "https://a.example:6443/");
        unsafe { std::env::remove_var("KUBECONFIG") };
    }
}
