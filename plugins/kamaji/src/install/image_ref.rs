//! Container image references, by the grammar of distribution's reference package
//! (`reference/regexp.go` and `reference/reference.go`, distribution v3.0, which the kubelet's
//! image pull and `docker pull` share):
//!
//! ```text
//! reference  := name [ ":" tag ] [ "@" digest ]
//! name       := [domain "/"] path-component ["/" path-component]*   (at most 255 characters)
//! domain     := host [":" port]        host: DNS components or [IPv6]
//! path-component := [a-z0-9]+ ( ( "." | "_" | "__" | "-"+ ) [a-z0-9]+ )*
//! tag        := [A-Za-z0-9_][A-Za-z0-9_.-]{0,127}
//! digest     := algorithm ":" hex      algorithm: [A-Za-z][A-Za-z0-9]* joined by + . _ -
//! ```
//!
//! The first component is a domain when it could not be a path component or the name has
//! more, as the pattern's optional domain group matches.

/// The longest name (`NameTotalLengthMax`).
const MAX_NAME: usize = 255;
/// The longest tag after its first character.
const MAX_TAG_TAIL: usize = 127;

/// What is wrong with `image` as a reference, or `None` when it is one.
pub(super) fn problem(image: &str) -> Option<String> {
    if image.is_empty() {
        return Some("it is empty".into());
    }
    if let Some(c) = image.chars().find(|c| c.is_whitespace() || c.is_control()) {
        return Some(format!("it holds {c:?}"));
    }
    let (rest, digest) = match image.split_once('@') {
        Some((r, d)) => (r, Some(d)),
        None => (image, None),
    };
    if let Some(d) = digest
        && let Some(why) = digest_problem(d)
    {
        return Some(why);
    }
    // A tag follows the last ':' after the last '/' (a ':' before it is a registry port).
    let last_slash = rest.rfind('/').map_or(0, |i| i + 1);
    let (name, tag) = match rest[last_slash..].rfind(':') {
        Some(i) => (&rest[..last_slash + i], Some(&rest[last_slash + i + 1..])),
        None => (rest, None),
    };
    if let Some(t) = tag
        && !is_tag(t)
    {
        return Some(format!(
            "tag {t:?} must be letters, digits, '_', '.' and '-' (at most 128, not starting with '.' or '-')"
        ));
    }
    name_problem(name)
}

fn name_problem(name: &str) -> Option<String> {
    if name.is_empty() {
        return Some("the repository name is empty".into());
    }
    if name.len() > MAX_NAME {
        return Some(format!(
            "the repository name is longer than {MAX_NAME} characters"
        ));
    }
    let parts: Vec<&str> = name.split('/').collect();
    let path = match parts.as_slice() {
        [first, rest @ ..] if !rest.is_empty() && is_domain(first) => rest,
        all => all,
    };
    path.iter().find(|p| !is_path_component(p)).map(|p| {
        format!(
            "path component {p:?} must be lower-case letters and digits, separated by '.', '_', '__' or '-'"
        )
    })
}

fn is_alnum_lower(c: char) -> bool {
    c.is_ascii_lowercase() || c.is_ascii_digit()
}

fn is_path_component(p: &str) -> bool {
    let b = p.as_bytes();
    let mut i = 0;
    loop {
        let start = i;
        while i < b.len() && is_alnum_lower(b[i] as char) {
            i += 1;
        }
        if i == start {
            return false;
        }
        if i == b.len() {
            return true;
        }
        // One separator: '.', '_', '__', or a run of '-'.
        match b[i] {
            b'.' => i += 1,
            b'_' if b.get(i + 1) == Some(&b'_') => i += 2,
            b'_' => i += 1,
            b'-' => {
                while b.get(i) == Some(&b'-') {
                    i += 1;
                }
            }
            _ => return false,
        }
    }
}

fn is_domain(d: &str) -> bool {
    // `[IPv6]` or DNS components, then an optional `:port`.
    let (host_ok, port) = match d.strip_prefix('[') {
        Some(v6) => match v6.split_once(']') {
            Some((addr, rest)) => (
                !addr.is_empty() && addr.chars().all(|c| c.is_ascii_hexdigit() || c == ':'),
                match rest {
                    "" => None,
                    r => match r.strip_prefix(':') {
                        Some(p) => Some(p),
                        None => return false,
                    },
                },
            ),
            None => return false,
        },
        None => {
            let (host, port) = match d.split_once(':') {
                Some((h, p)) => (h, Some(p)),
                None => (d, None),
            };
            (
                !host.is_empty() && host.split('.').all(is_domain_component),
                port,
            )
        }
    };
    host_ok && port.is_none_or(|p| !p.is_empty() && p.chars().all(|c| c.is_ascii_digit()))
}

fn is_domain_component(c: &str) -> bool {
    !c.is_empty()
        && c.chars().all(|x| x.is_ascii_alphanumeric() || x == '-')
        && !c.starts_with('-')
        && !c.ends_with('-')
}

fn is_tag(t: &str) -> bool {
    let mut chars = t.chars();
    let word = |c: char| c.is_ascii_alphanumeric() || c == '_';
    match chars.next() {
        Some(c) if word(c) => {}
        _ => return false,
    }
    t.len() <= MAX_TAG_TAIL + 1 && chars.all(|c| word(c) || c == '.' || c == '-')
}

fn digest_problem(d: &str) -> Option<String> {
    let bad = || {
        Some(format!(
            "digest {d:?} must be ALGORITHM:HEX (sha256: and 64 hexadecimal digits)"
        ))
    };
    let Some((algo, hex)) = d.split_once(':') else {
        return bad();
    };
    let algo_ok = !algo.is_empty()
        && algo.split(['+', '.', '_', '-']).all(|c| {
            c.starts_with(|x: char| x.is_ascii_alphabetic())
                && c.chars().all(|x| x.is_ascii_alphanumeric())
        });
    // The registered algorithms fix the length (go-digest); others need at least 32 digits.
    let want = match algo {
        "sha256" => Some(64),
        "sha384" => Some(96),
        "sha512" => Some(128),
        _ => None,
    };
    let hex_ok = hex.chars().all(|c| c.is_ascii_hexdigit())
        && match want {
            Some(n) => hex.len() == n,
            None => hex.len() >= 32,
        };
    if algo_ok && hex_ok { None } else { bad() }
}

#[cfg(test)]
mod tests {
    use super::problem;

    #[test]
    fn references_docker_pulls_are_accepted() {
        let sha = "a".repeat(64);
        for ok in [
            "busybox",
            "library/busybox:1.36",
            "ghcr.io/capi-kamaji/kamaji-reconciler:v0.1.0",
            "localhost:5000/team/app_x__y.z-w:latest",
            "registry.example.com:443/a/b/c",
            "[::1]:5000/app:v1",
            "Example.com/team/app",
            &format!("app@sha256:{sha}"),
            &format!("example.com/app:v1@sha256:{sha}"),
            &format!("app:{}", "t".repeat(128)),
        ] {
            assert_eq!(problem(ok), None, "{ok}");
        }
    }

    #[test]
    fn anything_else_is_refused_with_the_reason() {
        let cases = [
            ("not an image ref", "holds ' '"),
            ("", "empty"),
            ("Example.com/Team/r:v1", "path component \"Team\""),
            ("UPPER", "path component \"UPPER\""),
            ("app:v1@sha256:xyz", "digest \"sha256:xyz\""),
            ("app:-v1", "tag \"-v1\""),
            ("app:", "tag \"\""),
            ("a..b", "path component \"a..b\""),
            ("a/_b", "path component \"_b\""),
            ("a___b", "path component \"a___b\""),
            ("/app", "path component \"\""),
            ("app/", "path component \"\""),
            ("host:port/app", "path component \"host:port\""),
        ];
        for (bad, says) in cases {
            let why = problem(bad).unwrap_or_else(|| panic!("{bad:?} was accepted"));
            assert!(why.contains(says), "{bad:?}: {why}");
        }
        assert!(problem(&format!("app:{}", "t".repeat(129))).is_some());
        assert!(problem(&"a/".repeat(128)).is_some());
    }
}
