//! The APIs a cluster's clients still call that an upgrade's target removes. kube-apiserver
//! marks every deprecated API a client requested in the gauge
//! `apiserver_requested_deprecated_apis` (1 per group, version, resource and subresource,
//! labelled with `removed_release`; k8s.io/apiserver, pkg/endpoints/deprecation and
//! pkg/endpoints/metrics): an upgrade that crosses the removal breaks those clients.

use serde::Serialize;

use crate::plan::Finding;
use crate::version::KubeVersion;

/// The gauge's name in the API server's `/metrics`.
pub(crate) const METRIC: &str = "apiserver_requested_deprecated_apis";

/// The most deprecated APIs one report keeps (a metric text that lists more is not a real
/// API server's).
pub const MAX_APIS: usize = 512;

/// One deprecated API a client requested.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct DeprecatedApi {
    group: String,
    version: String,
    resource: String,
    #[serde(skip_serializing_if = "String::is_empty")]
    subresource: String,
    /// `1.38`: the release that no longer serves it.
    removed_release: String,
}

impl DeprecatedApi {
    /// `resource.k8s.io/v1beta1 deviceclasses` (`v1 …` for the core group).
    pub(crate) fn describe(&self) -> String {
        let gv = if self.group.is_empty() {
            self.version.clone()
        } else {
            format!("{}/{}", self.group, self.version)
        };
        let sub = if self.subresource.is_empty() {
            String::new()
        } else {
            format!("/{}", self.subresource)
        };
        format!("{gv} {}{sub}", self.resource)
    }

    /// The removal's minor, when `removed_release` is `MAJOR.MINOR`.
    fn removed_in(&self) -> Option<(u64, u64)> {
        let (ma, mi) = self.removed_release.split_once('.')?;
        Some((ma.parse().ok()?, mi.parse().ok()?))
    }
}

/// Reads one line of the metric text: `Some` for a sample of [`METRIC`] whose value is 1.
pub fn parse_line(line: &str) -> Option<DeprecatedApi> {
    let rest = line.strip_prefix(METRIC)?.strip_prefix('{')?;
    let (labels, value) = rest.rsplit_once('}')?;
    if value.split_whitespace().next()?.parse::<f64>().ok()? != 1.0 {
        return None;
    }
    let mut api = DeprecatedApi {
        group: String::new(),
        version: String::new(),
        resource: String::new(),
        subresource: String::new(),
        removed_release: String::new(),
    };
    for (k, v) in labels_of(labels)? {
        match k.as_str() {
            "group" => api.group = v,
            "version" => api.version = v,
            "resource" => api.resource = v,
            "subresource" => api.subresource = v,
            "removed_release" => api.removed_release = v,
            _ => {}
        }
    }
    (!api.version.is_empty() && !api.resource.is_empty()).then_some(api)
}

/// `a="x",b="y\"z"` as pairs; `None` when malformed.
fn labels_of(text: &str) -> Option<Vec<(String, String)>> {
    let mut out = Vec::new();
    let mut chars = text.chars().peekable();
    loop {
        while chars.peek().is_some_and(|c| *c == ',' || c.is_whitespace()) {
            chars.next();
        }
        if chars.peek().is_none() {
            return Some(out);
        }
        let key: String = chars.by_ref().take_while(|c| *c != '=').collect();
        if chars.next()? != '"' {
            return None;
        }
        let mut value = String::new();
        loop {
            match chars.next()? {
                '\\' => match chars.next()? {
                    'n' => value.push('\n'),
                    c => value.push(c),
                },
                '"' => break,
                c => value.push(c),
            }
        }
        out.push((key.trim().to_string(), value));
    }
}

/// The APIs that a release after `from` up to `to` removes, in order, once each.
pub fn removed_by<'a>(
    apis: &'a [DeprecatedApi],
    from: &KubeVersion,
    to: &KubeVersion,
) -> Vec<&'a DeprecatedApi> {
    let mut out: Vec<&DeprecatedApi> = apis
        .iter()
        .filter(|a| {
            a.removed_in().is_some_and(|(ma, mi)| {
                ma == to.major && mi > from.minor && mi <= to.minor && from.major == to.major
            })
        })
        .collect();
    out.sort();
    out.dedup();
    out
}

/// The blocking finding for `apis` (those [`removed_by`] gives) on the way to `to`.
pub fn finding(apis: &[&DeprecatedApi], to: &KubeVersion) -> Option<Finding> {
    if apis.is_empty() {
        return None;
    }
    let listed: Vec<String> = apis
        .iter()
        .map(|a| format!("{} (removed in {})", a.describe(), a.removed_release))
        .collect();
    Some(Finding::error(format!(
        "clients of the cluster still call {} deprecated API(s) that {to} no longer serves: {}; move them to a served version first ({METRIC} on its API server), or pass --force",
        apis.len(),
        listed.join(", ")
    )))
}

#[cfg(test)]
mod tests {
    use super::*;

    const TEXT: &str = r#"# HELP apiserver_requested_deprecated_apis [STABLE] Gauge of deprecated APIs that have been requested, broken out by API group, version, resource, subresource, and removed_release.
# TYPE apiserver_requested_deprecated_apis gauge
apiserver_requested_deprecated_apis{group="resource.k8s.io",removed_release="1.38",resource="deviceclasses",subresource="",version="v1beta1"} 1
apiserver_requested_deprecated_apis{group="",removed_release="1.99",resource="widgets",subresource="status",version="v1"} 1
apiserver_requested_deprecated_apis{group="old.io",removed_release="1.37",resource="things",subresource="",version="v1beta1"} 0
apiserver_requested_deprecated_apis_total 3
apiserver_request_total{code="200"} 10
"#;

    fn v(s: &str) -> KubeVersion {
        KubeVersion::parse(s).unwrap()
    }

    #[test]
    fn only_requested_samples_of_the_gauge_are_read() {
        let apis: Vec<DeprecatedApi> = TEXT.lines().filter_map(parse_line).collect();
        assert_eq!(apis.len(), 2, "{apis:?}");
        assert_eq!(apis[0].describe(), "resource.k8s.io/v1beta1 deviceclasses");
        assert_eq!(apis[1].describe(), "v1 widgets/status");
        assert!(parse_line(r#"apiserver_requested_deprecated_apis{group="x} 1"#).is_none());
    }

    #[test]
    fn an_upgrade_crossing_the_removal_is_blocked_one_that_stops_before_is_not() {
        let apis: Vec<DeprecatedApi> = TEXT.lines().filter_map(parse_line).collect();
        assert!(removed_by(&apis, &v("v1.36.3"), &v("v1.37.0")).is_empty());
        assert!(removed_by(&apis, &v("v1.38.0"), &v("v1.38.2")).is_empty());
        let hit = removed_by(&apis, &v("v1.36.3"), &v("v1.38.0"));
        assert_eq!(hit.len(), 1);
        let f = finding(&hit, &v("v1.38.0")).unwrap();
        assert_eq!(f.severity, crate::plan::Severity::Error);
        assert!(
            f.message.contains(
                "that v1.38.0 no longer serves: resource.k8s.io/v1beta1 deviceclasses (removed in 1.38)"
            ),
            "{}",
            f.message
        );
        assert!(finding(&[], &v("v1.38.0")).is_none());
    }
}
