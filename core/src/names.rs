//! Object names as the API server accepts them, checked before a name reaches a URL: a name
//! goes into the request path unescaped, so `c2?` would ask for `c2` with a query string, and
//! `a/b` for a subresource.

use crate::Error;

/// The longest object name (RFC 1123 subdomain, k8s.io/apimachinery `validation.DNS1123SubdomainMaxLength`).
pub(crate) const MAX_NAME_LEN: usize = 253;

/// Whether `name` is an RFC 1123 subdomain: lower-case letters, digits, `-` and `.`, starting
/// and ending with a letter or digit, at most 253 characters (k8s.io/apimachinery
/// `IsDNS1123Subdomain`, which every kind this suite reads or writes by name uses).
pub(crate) fn is_object_name(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= MAX_NAME_LEN
        && name
            .bytes()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == b'-' || c == b'.')
        && name.starts_with(|c: char| c.is_ascii_alphanumeric())
        && name.ends_with(|c: char| c.is_ascii_alphanumeric())
}

/// What was typed, quoted, cut at 80 characters: a refusal names it without filling the screen.
fn shown(typed: &str) -> String {
    let cut: String = typed.chars().take(80).collect();
    let more = if typed.chars().count() > 80 {
        "…"
    } else {
        ""
    };
    format!("{cut:?}{more}")
}

/// Refuses a name the API server could not hold (exit code 2), naming what was typed.
pub fn check_object_name(what: &str, name: &str) -> Result<(), Error> {
    if is_object_name(name) {
        return Ok(());
    }
    Err(Error::Usage {
        message: format!("{} is not a valid {what} name", shown(name)),
        hint: Some(
            "use lower-case letters, digits, '-' and '.', starting and ending with a letter or digit (at most 253)"
                .into(),
        ),
    })
}

/// The longest namespace name (an RFC 1123 label, k8s.io/apimachinery `DNS1123LabelMaxLength`).
const MAX_NAMESPACE_LEN: usize = 63;

/// Whether `ns` is an RFC 1123 label: an object name without dots, of at most 63 characters.
pub(crate) fn is_namespace_name(ns: &str) -> bool {
    ns.len() <= MAX_NAMESPACE_LEN && !ns.contains('.') && is_object_name(ns)
}

/// Refuses a namespace the API server could not hold (exit code 2): an RFC 1123 label, as
/// k8s.io/apimachinery's `ValidateNamespaceName` requires. `from` says where it came from
/// (`-n`, or the kubeconfig context).
pub fn check_namespace(from: &str, ns: &str) -> Result<(), Error> {
    if is_namespace_name(ns) {
        return Ok(());
    }
    Err(Error::Usage {
        message: format!("{} ({from}) is not a valid namespace name", shown(ns)),
        hint: Some(
            "a namespace is lower-case letters, digits and '-', starting and ending with a letter or digit (at most 63)"
                .into(),
        ),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn namespaces_are_labels() {
        for ok in ["default", "pool-a", "a", &"x".repeat(63)] {
            assert!(check_namespace("-n", ok).is_ok(), "{ok}");
        }
        for bad in ["", "a$(x)", "a.b", "A", "-a", "a/b", &"x".repeat(64)] {
            let e = check_namespace("-n", bad).unwrap_err().to_string();
            assert!(e.contains("not a valid namespace name"), "{bad}: {e}");
        }
    }

    #[test]
    fn names_that_would_bend_a_url_are_refused() {
        for ok in ["c1", "prod-eu-1", "a.b", "0"] {
            assert!(is_object_name(ok), "{ok}");
        }
        for bad in [
            "",
            "c2?",
            "a/b",
            "A",
            "-a",
            "a-",
            "a b",
            "a%2f",
            &"x".repeat(254),
        ] {
            assert!(!is_object_name(bad), "{bad}");
        }
        let e = check_object_name("cluster", "c1-kubeconfig?").unwrap_err();
        assert_eq!(e.exit_code(), 2);
        assert_eq!(
            e.to_string(),
            "\"c1-kubeconfig?\" is not a valid cluster name"
        );
    }
}
