//! Typed errors of every verb.
//!
//! Each error renders as one line (its `Display`) plus an optional hint line ([`Error::hint`]),
//! and maps to an exit code ([`Error::exit_code`]): 1 for failures, 2 for usage errors.
//! [`from_kube`] turns a `kube::Error` into one of these, given what was being done ([`Op`])
//! and against which server ([`ApiServer`]).

use std::time::Duration;

/// Exit code of a successful run.
pub const EXIT_OK: u8 = 0;
/// Exit code of a failure (the API server refused or could not do what was asked).
pub const EXIT_FAILURE: u8 = 1;
/// Exit code of a usage error (bad flags or arguments); clap uses it too.
pub const EXIT_USAGE: u8 = 2;

/// The connection an error happened on, kept so every message can name it.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ApiServer {
    /// The kubeconfig context name (`in-cluster` for in-cluster configuration).
    pub context: String,
    /// The API server URL.
    pub server: String,
}

/// What was being done when an error happened: `kubectl auth can-i` terms.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Op {
    /// The API verb: get, list, watch, create, update, patch, delete.
    pub verb: String,
    /// The resource as `plural.group` (`plural` for the core group).
    pub resource: String,
    /// The kind, for not-found and conflict messages.
    pub kind: String,
    pub namespace: Option<String>,
    pub name: Option<String>,
}

impl Op {
    /// An operation on `plural` in API group `group` (empty for the core group).
    pub fn new(verb: &str, group: &str, plural: &str, kind: &str) -> Op {
        let resource = if group.is_empty() {
            plural.to_string()
        } else {
            format!("{plural}.{group}")
        };
        Op {
            verb: verb.to_string(),
            resource,
            kind: kind.to_string(),
            namespace: None,
            name: None,
        }
    }
    /// The same operation on a kube `ApiResource`.
    pub fn on(verb: &str, ar: &kube::discovery::ApiResource) -> Op {
        Op::new(verb, &ar.group, &ar.plural, &ar.kind)
    }
    pub fn in_namespace(mut self, ns: Option<&str>) -> Op {
        self.namespace = ns.map(str::to_string);
        self
    }
    pub fn named(mut self, name: &str) -> Op {
        self.name = Some(name.to_string());
        self
    }
    /// API discovery (`GET /apis`), allowed to every authenticated user.
    pub fn discovery() -> Op {
        Op {
            verb: "get".into(),
            resource: "API discovery".into(),
            ..Op::default()
        }
    }
}

use kcore::text::human_duration;

/// Every way a verb can fail, each with one line and a hint.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("cannot reach the API server {server} of context \"{context}\": {reason}")]
    Unreachable {
        context: String,
        server: String,
        reason: String,
    },
    #[error(
        "the API server {server} rejected the credentials of context \"{context}\" (401 Unauthorized)"
    )]
    Unauthorized { context: String, server: String },
    #[error("getting credentials for context \"{context}\" failed: {reason}")]
    Credentials { context: String, reason: String },
    #[error("TLS with the API server {server} of context \"{context}\" failed: {reason}")]
    Tls {
        context: String,
        server: String,
        reason: String,
    },
    #[error("{user} cannot {verb} {resource}{}", scope(namespace.as_deref()))]
    Forbidden {
        user: String,
        verb: String,
        resource: String,
        namespace: Option<String>,
    },
    #[error("{product} is not installed on this cluster (no {group} API); {install}")]
    NotInstalled {
        product: String,
        group: String,
        install: String,
        context: String,
    },
    #[error("{} \"{name}\" not found{}{}", kind_or(kind), scope_in(namespace.as_deref()), did_you_mean(suggestions))]
    NotFound {
        kind: String,
        name: String,
        namespace: Option<String>,
        suggestions: Vec<String>,
    },
    #[error("{source_name} denied the request: \"{message}\"")]
    Denied {
        /// `admission webhook "name"` or `ValidatingAdmissionPolicy 'name'`.
        source_name: String,
        message: String,
    },
    #[error("the API server rejected {}: {message}", what_or(kind, name))]
    Invalid {
        kind: String,
        name: String,
        message: String,
    },
    #[error("{} \"{name}\" already exists{}", kind_or(kind), scope_in(namespace.as_deref()))]
    AlreadyExists {
        kind: String,
        name: String,
        namespace: Option<String>,
    },
    #[error(
        "{} \"{name}\" was changed by someone else while we updated it",
        kind_or(kind)
    )]
    Conflict { kind: String, name: String },
    #[error("timed out{} {what}", after_text(*after))]
    Timeout { what: String, after: Duration },
    #[error("{message}")]
    Kubeconfig { message: String, hint: String },
    #[error("{message}")]
    Usage {
        message: String,
        hint: Option<String>,
    },
    #[error("the API server answered {code} {reason}: {message}")]
    Api {
        code: u16,
        reason: String,
        message: String,
    },
    #[error("{message}")]
    Other {
        message: String,
        hint: Option<String>,
    },
}

fn scope(ns: Option<&str>) -> String {
    match ns {
        Some(ns) => format!(" in namespace \"{ns}\""),
        None => String::new(),
    }
}

fn scope_in(ns: Option<&str>) -> String {
    scope(ns)
}

fn kind_or(kind: &str) -> &str {
    if kind.is_empty() { "object" } else { kind }
}

fn what_or(kind: &str, name: &str) -> String {
    match (kind.is_empty(), name.is_empty()) {
        (true, true) => "the request".into(),
        (false, true) => format!("the {kind}"),
        (true, false) => format!("\"{name}\""),
        (false, false) => format!("{kind} \"{name}\""),
    }
}

fn after_text(d: Duration) -> String {
    if d.is_zero() {
        String::new()
    } else {
        format!(" after {}", human_duration(d))
    }
}

fn did_you_mean(s: &[String]) -> String {
    match s {
        [] => String::new(),
        [one] => format!("; did you mean \"{one}\"?"),
        many => {
            let quoted: Vec<String> = many.iter().map(|n| format!("\"{n}\"")).collect();
            format!("; did you mean one of {}?", quoted.join(", "))
        }
    }
}

impl From<kcore::Error> for Error {
    /// A refusal of the pure layer keeps its line, hint and exit code (usage stays usage).
    fn from(e: kcore::Error) -> Error {
        match e {
            kcore::Error::Usage { message, hint } => Error::Usage { message, hint },
            kcore::Error::Other { message, hint } => Error::Other { message, hint },
        }
    }
}

impl Error {
    /// The second line: what to do about it.
    pub fn hint(&self) -> Option<String> {
        match self {
            Error::Unreachable { context, .. } => Some(format!(
                "check that the cluster is running and that context \"{context}\" points at it (kubectl config view --minify), or pick another with --context"
            )),
            Error::Unauthorized { context, .. } => Some(format!(
                "the token or client certificate of context \"{context}\" is wrong or expired; log in again or fix the user in your kubeconfig"
            )),
            Error::Credentials { .. } => Some(
                "run the credential plugin of your kubeconfig by hand (kubectl get --raw /version -v=6) to see why it fails"
                    .into(),
            ),
            Error::Tls { .. } => Some(
                "check certificate-authority-data in your kubeconfig; --insecure-skip-tls-verify skips the check (unsafe)"
                    .into(),
            ),
            Error::Forbidden {
                verb,
                resource,
                namespace,
                ..
            } => {
                let ns = match namespace {
                    Some(ns) => format!(" -n {ns}"),
                    None => String::new(),
                };
                Some(format!(
                    "check with `kubectl auth can-i {verb} {resource}{ns}` and ask a cluster admin for that permission"
                ))
            }
            Error::NotInstalled { context, .. } => Some(format!(
                "context \"{context}\" may not point at your management cluster; pick another with --context"
            )),
            Error::NotFound {
                namespace,
                suggestions,
                ..
            } => {
                if suggestions.is_empty() {
                    Some(match namespace {
                        Some(ns) => format!(
                            "check the name and the namespace (looked in \"{ns}\"; use -n or -A)"
                        ),
                        None => "check the name".into(),
                    })
                } else {
                    None
                }
            }
            Error::Denied { .. } => Some(
                "the cluster's admission policy refused the change; fix what the message says and run again"
                    .into(),
            ),
            Error::Invalid { .. } => {
                Some("fix the field named in the message and run again".into())
            }
            Error::AlreadyExists { .. } => Some(
                "pick another name, or delete the existing object first".into(),
            ),
            Error::Conflict { .. } => {
                Some("run the command again; it reads the latest version first".into())
            }
            Error::Timeout { .. } => Some(
                "the server or the controllers are slow or down; raise --timeout/--request-timeout or check the controllers' logs"
                    .into(),
            ),
            Error::Kubeconfig { hint, .. } => Some(hint.clone()),
            Error::Usage { hint, .. } | Error::Other { hint, .. } => hint.clone(),
            Error::Api { .. } => None,
        }
    }

    /// 2 for usage errors, 1 for every other failure.
    pub fn exit_code(&self) -> u8 {
        match self {
            Error::Usage { .. } => EXIT_USAGE,
            _ => EXIT_FAILURE,
        }
    }

    pub fn usage(message: impl Into<String>) -> Error {
        Error::Usage {
            message: message.into(),
            hint: None,
        }
    }

    pub fn other(message: impl Into<String>) -> Error {
        Error::Other {
            message: message.into(),
            hint: None,
        }
    }

    /// True for errors a retry of the same request may cure (conflicts, timeouts).
    pub fn is_transient(&self) -> bool {
        matches!(self, Error::Conflict { .. } | Error::Timeout { .. })
    }
}

/// Maps a kube error, raised while doing `op` against `target`, to a typed error.
pub fn from_kube(err: kube::Error, target: &ApiServer, op: &Op) -> Error {
    match err {
        // A body that is not a Kubernetes Status: the URL serves something else (a web server,
        // a proxy's error page). Say so in one line instead of printing its HTML.
        kube::Error::Api(status)
            if status.message.starts_with("Failed to parse error data")
                || status.reason.starts_with("Failed to parse error data") =>
        {
            Error::Other {
                message: format!(
                    "{} of context \"{}\" is not a Kubernetes API server (it answered {} with a page, not an API status)",
                    target.server, target.context, status.code
                ),
                hint: Some(
                    "check the server URL of the context (kubectl config view --minify) or pass --server".into(),
                ),
            }
        }
        kube::Error::Api(status) => from_status(&status, target, op),
        kube::Error::Auth(e) => Error::Credentials {
            context: target.context.clone(),
            reason: chain_text(&e),
        },
        kube::Error::InferKubeconfig(e) => Error::Kubeconfig {
            message: format!("kubeconfig: {e}"),
            hint: "check your kubeconfig (kubectl config view)".into(),
        },
        kube::Error::InferConfig(e) => Error::Kubeconfig {
            message: format!("kubeconfig: {e}"),
            hint: "set KUBECONFIG or pass --kubeconfig".into(),
        },
        kube::Error::RustlsTls(e) => Error::Tls {
            context: target.context.clone(),
            server: target.server.clone(),
            reason: chain_text(&e),
        },
        kube::Error::SerdeError(e) => Error::Other {
            message: format!(
                "unexpected answer from the API server {} to {} {}: {e}",
                target.server, op.verb, op.resource
            ),
            hint: None,
        },
        other => from_transport(&other, target, op),
    }
}

/// The whole `source()` chain of an error, joined with ": " and without repeats.
pub fn chain_text(e: &(dyn std::error::Error + 'static)) -> String {
    let mut parts: Vec<String> = Vec::new();
    let mut cur: Option<&(dyn std::error::Error + 'static)> = Some(e);
    while let Some(err) = cur {
        let s = err.to_string();
        if !parts.iter().any(|p| p.contains(&s)) {
            parts.push(s);
        }
        cur = err.source();
    }
    parts.join(": ")
}

fn io_kinds(e: &(dyn std::error::Error + 'static)) -> Vec<std::io::ErrorKind> {
    let mut kinds = Vec::new();
    let mut cur: Option<&(dyn std::error::Error + 'static)> = Some(e);
    while let Some(err) = cur {
        if let Some(io) = err.downcast_ref::<std::io::Error>() {
            kinds.push(io.kind());
        }
        cur = err.source();
    }
    kinds
}

fn from_transport(err: &kube::Error, target: &ApiServer, op: &Op) -> Error {
    use std::io::ErrorKind as K;
    let text = chain_text(err);
    let lower = text.to_lowercase();
    let kinds = io_kinds(err);
    if kinds.contains(&K::TimedOut) || lower.contains("timed out") || lower.contains("elapsed") {
        let what = if op.resource.is_empty() {
            format!("waiting for the API server {}", target.server)
        } else {
            format!(
                "waiting for the API server {} to {} {}",
                target.server, op.verb, op.resource
            )
        };
        return Error::Timeout {
            what,
            after: Duration::ZERO,
        };
    }
    if lower.contains("certificate") || lower.contains("tls") || lower.contains("handshake") {
        return Error::Tls {
            context: target.context.clone(),
            server: target.server.clone(),
            reason: short_reason(&text),
        };
    }
    let reason = if kinds.contains(&K::ConnectionRefused) || lower.contains("connection refused") {
        "connection refused".to_string()
    } else if lower.contains("dns error") || lower.contains("failed to lookup address") {
        "the host name does not resolve".to_string()
    } else if kinds.contains(&K::ConnectionReset) || lower.contains("connection reset") {
        "the connection was reset".to_string()
    } else if lower.contains("no route to host") || lower.contains("network is unreachable") {
        "no route to host".to_string()
    } else {
        short_reason(&text)
    };
    Error::Unreachable {
        context: target.context.clone(),
        server: target.server.clone(),
        reason,
    }
}

fn short_reason(text: &str) -> String {
    // The innermost parts of the chain carry the useful words.
    let parts: Vec<&str> = text.split(": ").collect();
    parts
        .iter()
        .rev()
        .take(2)
        .rev()
        .copied()
        .collect::<Vec<_>>()
        .join(": ")
}

/// Finds `<prefix>"<value>"` in a message.
fn quoted_after(msg: &str, prefix: &str) -> Option<String> {
    let start = msg.find(prefix)? + prefix.len();
    let rest = &msg[start..];
    let end = rest.find('"')?;
    Some(rest[..end].to_string())
}

/// Recognises an admission denial (webhook or ValidatingAdmissionPolicy) in a status message.
pub fn admission_denial(message: &str) -> Option<(String, String)> {
    // The API server's wording: `admission webhook "NAME" denied the request: WHY`, and
    // `ValidatingAdmissionPolicy 'NAME' with binding 'B' denied request: WHY`.
    let split = |start: usize, marker: &str| {
        let rest = &message[start..];
        let j = rest.find(marker)?;
        let source = rest[..j].trim().to_string();
        let msg = rest[j + marker.len()..]
            .trim_start_matches(':')
            .trim()
            .to_string();
        Some((source, msg))
    };
    if let Some(i) = message.find("admission webhook \"") {
        return split(i, "denied the request");
    }
    for kind in ["ValidatingAdmissionPolicy", "MutatingAdmissionPolicy"] {
        if let Some(i) = message.find(&format!("{kind} '")) {
            return split(i, "denied request");
        }
    }
    None
}

fn from_status(s: &kube::core::Status, target: &ApiServer, op: &Op) -> Error {
    // The status names the resource (`clusters`); the caller knows the kind.
    let kind = if op.kind.is_empty() {
        s.details
            .as_ref()
            .map(|d| d.kind.clone())
            .unwrap_or_default()
    } else {
        op.kind.clone()
    };
    let name = s
        .details
        .as_ref()
        .map(|d| d.name.clone())
        .filter(|n| !n.is_empty())
        .or_else(|| op.name.clone())
        .unwrap_or_default();
    if let Some((source_name, message)) = admission_denial(&s.message) {
        return Error::Denied {
            source_name,
            message,
        };
    }
    if s.code == 401 || s.reason == "Unauthorized" {
        return Error::Unauthorized {
            context: target.context.clone(),
            server: target.server.clone(),
        };
    }
    if s.is_forbidden() {
        let user = quoted_after(&s.message, "User \"")
            .map(|u| format!("user \"{u}\""))
            .unwrap_or_else(|| "you".into());
        return Error::Forbidden {
            user,
            verb: op.verb.clone(),
            resource: op.resource.clone(),
            namespace: op.namespace.clone(),
        };
    }
    // A write into a namespace that does not exist: the server names the namespace
    // (`namespaces "x" not found`), not the object written.
    if s.is_not_found()
        && op.kind != "Namespace"
        && s.details.as_ref().is_some_and(|d| d.kind == "namespaces")
    {
        return Error::NotFound {
            kind: "Namespace".into(),
            name,
            namespace: None,
            suggestions: Vec::new(),
        };
    }
    if s.is_not_found() {
        return Error::NotFound {
            kind: op.kind.clone(),
            name,
            namespace: op.namespace.clone(),
            suggestions: Vec::new(),
        };
    }
    if s.is_already_exists() {
        return Error::AlreadyExists {
            kind,
            name,
            namespace: op.namespace.clone(),
        };
    }
    if s.is_conflict() {
        return Error::Conflict { kind, name };
    }
    if s.is_invalid() || s.code == 400 {
        return Error::Invalid {
            kind,
            name,
            message: s.message.clone(),
        };
    }
    if s.code == 504 || s.reason == "Timeout" {
        return Error::Timeout {
            what: format!("for the API server to {} {}", op.verb, op.resource),
            after: Duration::ZERO,
        };
    }
    Error::Api {
        code: s.code,
        reason: s.reason.clone(),
        message: s.message.clone(),
    }
}

/// Runs `f` again (up to `attempts` times in all) while it fails with a 409 Conflict. Only for
/// read-modify-write closures that read the latest object on every call.
pub async fn retry_on_conflict<T, F, Fut>(attempts: u32, mut f: F) -> Result<T, kube::Error>
where
    F: FnMut(u32) -> Fut,
    Fut: std::future::Future<Output = Result<T, kube::Error>>,
{
    let attempts = attempts.max(1);
    let mut attempt = 0;
    loop {
        match f(attempt).await {
            Err(kube::Error::Api(s)) if s.is_conflict() && attempt + 1 < attempts => {
                attempt += 1;
                tracing::debug!(attempt, "conflict, retrying: {}", s.message);
                tokio::time::sleep(Duration::from_millis(50 * u64::from(attempt))).await;
            }
            other => return other,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use kcore::text::closest_names;

    fn status(code: u16, reason: &str, message: &str) -> kube::Error {
        kube::Error::Api(
            kube::core::Status::failure(message, reason)
                .with_code(code)
                .boxed(),
        )
    }

    fn target() -> ApiServer {
        ApiServer {
            context: "mgmt".into(),
            server: "https://10.0.0.1:6443".into(),
        }
    }

    #[test]
    fn forbidden_names_user_verb_resource_and_hint() {
        let op =
            Op::new("list", "cluster.x-k8s.io", "clusters", "Cluster").in_namespace(Some("ns1"));
        let e = from_kube(
            status(
                403,
                "Forbidden",
                "clusters.cluster.x-k8s.io is forbidden: User \"limited\" cannot list resource \"clusters\" in API group \"cluster.x-k8s.io\" in the namespace \"ns1\"",
            ),
            &target(),
            &op,
        );
        assert_eq!(
            e.to_string(),
            "user \"limited\" cannot list clusters.cluster.x-k8s.io in namespace \"ns1\""
        );
        assert_eq!(
            e.hint().unwrap(),
            "check with `kubectl auth can-i list clusters.cluster.x-k8s.io -n ns1` and ask a cluster admin for that permission"
        );
        assert_eq!(e.exit_code(), 1);
    }

    #[test]
    fn webhook_denial_is_quoted_even_when_forbidden() {
        let msg = "admission webhook \"validation.cluster.cluster.x-k8s.io\" denied the request: Cluster.cluster.x-k8s.io \"c1\" is invalid: spec.topology.version: Invalid value";
        let e = from_kube(status(403, "Forbidden", msg), &target(), &Op::default());
        assert_eq!(
            e.to_string(),
            "admission webhook \"validation.cluster.cluster.x-k8s.io\" denied the request: \"Cluster.cluster.x-k8s.io \"c1\" is invalid: spec.topology.version: Invalid value\""
        );
        let vap = "clusters.cluster.x-k8s.io \"x\" is forbidden: ValidatingAdmissionPolicy 'no-x' with binding 'no-x' denied request: names must not be x";
        match from_kube(status(403, "Forbidden", vap), &target(), &Op::default()) {
            Error::Denied {
                source_name,
                message,
            } => {
                assert_eq!(
                    source_name,
                    "ValidatingAdmissionPolicy 'no-x' with binding 'no-x'"
                );
                assert_eq!(message, "names must not be x");
            }
            other => panic!("unexpected {other:?}"),
        }
    }

    #[test]
    fn unauthorized_names_context_and_server() {
        let e = from_kube(
            status(401, "Unauthorized", "Unauthorized"),
            &target(),
            &Op::default(),
        );
        assert_eq!(
            e.to_string(),
            "the API server https://10.0.0.1:6443 rejected the credentials of context \"mgmt\" (401 Unauthorized)"
        );
    }

    #[test]
    fn not_found_offers_suggestions() {
        let e = Error::NotFound {
            kind: "Cluster".into(),
            name: "prod-1".into(),
            namespace: Some("default".into()),
            suggestions: closest_names("prod-1", ["prod-01", "prod-2", "staging", "dev"]),
        };
        assert_eq!(
            e.to_string(),
            "Cluster \"prod-1\" not found in namespace \"default\"; did you mean one of \"prod-01\", \"prod-2\"?"
        );
        assert!(e.hint().is_none());
    }

    /// `kamaji install -n NEWNS --dry-run=server` once said the ServiceAccount was not found
    /// when the server's 404 named the namespace.
    #[test]
    fn a_missing_namespace_is_named_not_the_object_written() {
        let st = kube::core::Status::failure("namespaces \"newns\" not found", "NotFound")
            .with_code(404)
            .with_details(kube::core::response::StatusDetails {
                name: "newns".into(),
                group: String::new(),
                kind: "namespaces".into(),
                uid: String::new(),
                causes: Vec::new(),
                retry_after_seconds: 0,
            });
        let op = Op::new("patch", "", "serviceaccounts", "ServiceAccount")
            .in_namespace(Some("newns"))
            .named("kamaji");
        let e = from_kube(kube::Error::Api(st.boxed()), &target(), &op);
        assert_eq!(e.to_string(), "Namespace \"newns\" not found");
    }

    #[test]
    fn closest_names_prefers_close_and_containing_names() {
        assert_eq!(
            closest_names("web", ["web-1", "db", "cache"]),
            vec!["web-1"]
        );
        assert!(closest_names("zzz", ["alpha", "beta"]).is_empty());
        assert_eq!(
            closest_names("clster", ["cluster", "other"]),
            vec!["cluster"]
        );
    }

    #[test]
    fn conflict_and_usage_exit_codes() {
        let e = from_kube(
            status(409, "Conflict", "Operation cannot be fulfilled"),
            &target(),
            &Op::new("update", "cluster.x-k8s.io", "clusters", "Cluster").named("c1"),
        );
        assert!(matches!(e, Error::Conflict { .. }));
        assert!(e.is_transient());
        assert_eq!(Error::usage("bad").exit_code(), 2);
    }

    #[test]
    fn durations_read_like_kubectl() {
        assert_eq!(human_duration(Duration::from_millis(500)), "500ms");
        assert_eq!(human_duration(Duration::from_secs(30)), "30s");
        assert_eq!(human_duration(Duration::from_secs(90)), "1m30s");
        assert_eq!(human_duration(Duration::from_secs(3600)), "1h");
    }

    #[tokio::test]
    async fn retry_on_conflict_retries_only_conflicts() {
        let mut calls = 0;
        let r: Result<u32, kube::Error> = retry_on_conflict(5, |attempt| {
            calls += 1;
            async move {
                if attempt < 2 {
                    Err(status(409, "Conflict", "changed"))
                } else {
                    Ok(attempt)
                }
            }
        })
        .await;
        assert_eq!(r.unwrap(), 2);
        assert_eq!(calls, 3);
        let mut calls = 0;
        let r: Result<(), kube::Error> = retry_on_conflict(5, |_| {
            calls += 1;
            async { Err(status(404, "NotFound", "gone")) }
        })
        .await;
        assert!(r.is_err());
        assert_eq!(calls, 1);
    }
}
