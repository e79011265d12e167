//! Small helpers over dynamic objects and API times, for the testbed's controllers and
//! fixtures.

use kube::api::{ApiResource, DynamicObject};

/// An `ApiResource` from its parts (the core group is "").
pub fn ar(group: &str, version: &str, kind: &str, plural: &str) -> ApiResource {
    ApiResource {
        group: group.into(),
        version: version.into(),
        api_version: if group.is_empty() {
            version.into()
        } else {
            format!("{group}/{version}")
        },
        kind: kind.into(),
        plural: plural.into(),
    }
}

pub fn label<'a>(o: &'a DynamicObject, key: &str) -> Option<&'a str> {
    entry(&o.metadata.labels, key)
}

pub fn annotation<'a>(o: &'a DynamicObject, key: &str) -> Option<&'a str> {
    entry(&o.metadata.annotations, key)
}

fn entry<'a>(
    map: &'a Option<std::collections::BTreeMap<String, String>>,
    key: &str,
) -> Option<&'a str> {
    map.as_ref().and_then(|m| m.get(key)).map(String::as_str)
}

pub fn now() -> String {
    // RFC 3339 without sub-second digits, as metav1.Time serialises.
    let secs = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0);
    let t = k8s_openapi::jiff::Timestamp::from_second(secs as i64)
        .unwrap_or(k8s_openapi::jiff::Timestamp::UNIX_EPOCH);
    t.strftime("%Y-%m-%dT%H:%M:%SZ").to_string()
}

/// Now as a metav1.MicroTime (RFC 3339 with microseconds), as Lease renew times serialise.
pub fn now_micro() -> String {
    k8s_openapi::jiff::Timestamp::now()
        .strftime("%Y-%m-%dT%H:%M:%S%.6fZ")
        .to_string()
}

/// Applies `obj` server-side as `manager` (forcing conflicts), its resource from `apiVersion`
/// and `kind`: for the testbed's own add-ons, whose kinds all pluralise by adding `s`.
pub async fn apply_value(
    client: &kube::Client,
    obj: &serde_json::Value,
    manager: &str,
) -> Result<(), crate::Error> {
    let (Some(api_version), Some(kind), Some(name)) = (
        obj["apiVersion"].as_str(),
        obj["kind"].as_str(),
        obj["metadata"]["name"].as_str(),
    ) else {
        return Err(crate::Error::Start(format!(
            "not an object to apply: {obj}"
        )));
    };
    let (group, version) = api_version.rsplit_once('/').unwrap_or(("", api_version));
    let plural = format!("{}s", kind.to_ascii_lowercase());
    let resource = ar(group, version, kind, &plural);
    let api: kube::Api<DynamicObject> = match obj["metadata"]["namespace"].as_str() {
        Some(ns) => kube::Api::namespaced_with(client.clone(), ns, &resource),
        None => kube::Api::all_with(client.clone(), &resource),
    };
    api.patch(
        name,
        &kube::api::PatchParams::apply(manager).force(),
        &kube::api::Patch::Apply(obj),
    )
    .await?;
    Ok(())
}
