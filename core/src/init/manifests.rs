//! A component's manifests as `init` applies them: the release asset's YAML stream with
//! clusterctl's variable defaults substituted, each object checked, labelled as ours, images
//! moved to a mirror, and ordered so that what an object needs exists before it.

use serde_json::Value;

use super::set::Component;
use crate::error::{Error, usage};
use crate::plan::template::{Variables, substitute};

/// The largest manifest file read: the biggest release asset of the set (CAPI's core
/// components) is about 1 MiB.
pub const MAX_FILE_BYTES: usize = 32 << 20;
/// The most objects one component may hold (Kamaji's install has about 30, CAPI's core 60).
pub const MAX_OBJECTS: usize = 2_000;

/// On every object `init` applies: the component it belongs to (`uninstall` and `doctor` find
/// a component's objects by it).
pub const COMPONENT_LABEL: &str = "capi-kamaji.io/init-component";
/// On every object `init` applies: the component's version it was applied at.
pub const VERSION_LABEL: &str = "capi-kamaji.io/init-version";

/// Kinds applied first, in this order; the rest keep the release asset's order, and webhook
/// configurations go last so that nothing of the component is judged by a webhook of its own
/// that cannot answer yet.
const FIRST: &[&str] = &["Namespace", "CustomResourceDefinition"];
const LAST: &[&str] = &[
    "MutatingWebhookConfiguration",
    "ValidatingWebhookConfiguration",
];

/// Parses, substitutes and prepares `text`, the manifests of `component`. `registry`
/// (`HOST[:PORT][/PREFIX]`) moves every image there, as clusterctl's `images:` override does.
pub fn prepare(
    component: &Component,
    text: &str,
    vars: &Variables,
    registry: Option<&str>,
) -> Result<Vec<Value>, Error> {
    let what = component.file();
    if text.len() > MAX_FILE_BYTES {
        return Err(usage(
            format!("{what} is larger than {MAX_FILE_BYTES} bytes"),
            "check that the file is the component's release asset",
        ));
    }
    let text = substitute(text, vars).map_err(|e| {
        usage(
            format!("{what}: {e}"),
            "set the variable in the environment or in --config",
        )
    })?;
    let docs: Vec<Value> = serde_saphyr::from_multiple(&text).map_err(|e| {
        usage(
            format!("{what} is not valid YAML: {}", crate::yaml::error_line(&e)),
            "check that the file is the component's release asset",
        )
    })?;
    let mut objects = Vec::new();
    for (i, mut o) in docs.into_iter().enumerate() {
        if o.is_null() {
            continue;
        }
        let ok = o["apiVersion"].is_string()
            && o["kind"].is_string()
            && o["metadata"]["name"]
                .as_str()
                .is_some_and(|n| !n.is_empty());
        if !ok {
            return Err(usage(
                format!(
                    "{what}: document {} is not a Kubernetes object with apiVersion, kind and metadata.name",
                    i + 1
                ),
                "check that the file is the component's release asset",
            ));
        }
        if skipped(component, &o) {
            continue;
        }
        label(&mut o, component);
        if let Some(r) = registry {
            for_each_image(&mut o, |image| *image = mirrored(image, r));
        }
        objects.push(o);
        if objects.len() > MAX_OBJECTS {
            return Err(usage(
                format!("{what} holds more than {MAX_OBJECTS} objects"),
                "check that the file is the component's release asset",
            ));
        }
    }
    if objects.is_empty() {
        return Err(usage(
            format!("{what} holds no Kubernetes object"),
            "check that the file is the component's release asset",
        ));
    }
    Ok(order(objects))
}

/// Objects of a release asset `init` leaves out. Kamaji's `install.yaml` ends with a DataStore
/// for an etcd its Helm chart would install (`kamaji-etcd`, endpoints `etcd-N.etcd.kamaji-system`);
/// without that etcd it names nothing, so the DataStore is `--datastore`'s to choose.
fn skipped(component: &Component, o: &Value) -> bool {
    component.id == "kamaji" && o["kind"] == "DataStore"
}

/// Points Kamaji's manager at `name` as its default DataStore: the `--datastore=` argument of
/// the Kamaji Deployment's containers, which its `install.yaml` sets to the `kamaji-etcd` that
/// [`skipped`] leaves out (Kamaji v1.0.0 does not start while its default DataStore is
/// missing). Returns whether an argument was rewritten.
pub fn set_default_datastore(objects: &mut [Value], name: &str) -> bool {
    let mut done = false;
    for o in objects.iter_mut().filter(|o| o["kind"] == "Deployment") {
        let Some(containers) = o["spec"]["template"]["spec"]["containers"].as_array_mut() else {
            continue;
        };
        for c in containers {
            let Some(args) = c["args"].as_array_mut() else {
                continue;
            };
            for a in args.iter_mut() {
                if a.as_str().is_some_and(|s| s.starts_with("--datastore=")) {
                    *a = Value::String(format!("--datastore={name}"));
                    done = true;
                }
            }
        }
    }
    done
}

/// The default DataStore a Kamaji Deployment was given (its containers' `--datastore=`).
pub fn default_datastore(deployment: &Value) -> Option<String> {
    deployment["spec"]["template"]["spec"]["containers"]
        .as_array()?
        .iter()
        .flat_map(|c| c["args"].as_array().into_iter().flatten())
        .find_map(|a| a.as_str()?.strip_prefix("--datastore=").map(str::to_string))
}

/// Puts `extra` (the site's DataStores) among a component's ordered objects, right before its
/// webhook configurations. Kamaji's manager does not start without its default DataStore, and
/// its DataStore webhook cannot answer before the manager starts: applied before the webhook
/// configurations, the DataStores never wait on a webhook that cannot answer, wherever a run
/// is interrupted.
pub fn insert_before_webhooks(objects: &mut Vec<Value>, extra: &[Value]) {
    let at = objects
        .iter()
        .position(|o| LAST.contains(&o["kind"].as_str().unwrap_or_default()))
        .unwrap_or(objects.len());
    objects.splice(at..at, extra.iter().cloned());
}

fn label(o: &mut Value, component: &Component) {
    let labels = &mut o["metadata"]["labels"];
    if !labels.is_object() {
        *labels = Value::Object(Default::default());
    }
    labels[COMPONENT_LABEL] = component.id.into();
    labels[VERSION_LABEL] = component.version.into();
}

/// Namespaces and CRDs first, webhook configurations last, the rest in the asset's order.
fn order(objects: Vec<Value>) -> Vec<Value> {
    let rank = |o: &Value| {
        let kind = o["kind"].as_str().unwrap_or_default();
        match (FIRST.iter().position(|k| *k == kind), LAST.contains(&kind)) {
            (Some(i), _) => i,
            (None, false) => FIRST.len(),
            (None, true) => FIRST.len() + 1,
        }
    };
    let mut ranked: Vec<(usize, Value)> = objects.into_iter().map(|o| (rank(&o), o)).collect();
    // Stable: equal ranks keep the asset's order.
    ranked.sort_by_key(|(r, _)| *r);
    ranked.into_iter().map(|(_, o)| o).collect()
}

/// Calls `f` on every container image of a workload's pod template (or a Pod's spec).
pub fn for_each_image(o: &mut Value, mut f: impl FnMut(&mut String)) {
    let spec = if o["kind"] == "Pod" {
        o.get_mut("spec")
    } else if o["kind"] == "CronJob" {
        o.pointer_mut("/spec/jobTemplate/spec/template/spec")
    } else {
        o.pointer_mut("/spec/template/spec")
    };
    let Some(spec) = spec else { return };
    for list in ["initContainers", "containers", "ephemeralContainers"] {
        let Some(cs) = spec.get_mut(list).and_then(Value::as_array_mut) else {
            continue;
        };
        for c in cs {
            if let Some(Value::String(image)) = c.get_mut("image") {
                f(image);
            }
        }
    }
}

/// Every image of `objects`, sorted, once each.
pub fn images(objects: &[Value]) -> Vec<String> {
    let mut out = Vec::new();
    for o in objects {
        let mut o = o.clone();
        for_each_image(&mut o, |i| out.push(i.clone()));
    }
    out.sort();
    out.dedup();
    out
}

/// `image` in `registry` (`HOST[:PORT][/PREFIX]`): clusterctl's `images: all: repository:`
/// rule, which keeps the image's last path component with its tag or digest and replaces what
/// is before it (`registry.k8s.io/cluster-api/cluster-api-controller:v1.14.2` in
/// `mirror.local/capi` is `mirror.local/capi/cluster-api-controller:v1.14.2`).
pub fn mirrored(image: &str, registry: &str) -> String {
    // A digest may hold no '/', a tag neither, so the last '/' ends the repository.
    let last = image.rsplit('/').next().unwrap_or(image);
    format!("{}/{last}", registry.trim_end_matches('/'))
}

/// What is wrong with `--registry`, if anything: `HOST[:PORT][/PREFIX]`, no scheme, no tag.
pub fn registry_problem(registry: &str) -> Option<String> {
    if registry.is_empty() {
        return Some("it is empty".into());
    }
    if registry.contains("://") {
        return Some("it must not have a scheme (write HOST[:PORT][/PREFIX])".into());
    }
    if registry.len() > 200 {
        return Some("it is longer than 200 characters".into());
    }
    let (host, prefix) = registry
        .split_once('/')
        .map_or((registry, ""), |(h, p)| (h, p));
    let host_ok = !host.is_empty()
        && host
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || ".-:[]".contains(c));
    if !host_ok {
        return Some(format!("host {host:?} is not a registry host[:port]"));
    }
    let prefix_ok = prefix.trim_end_matches('/').split('/').all(|p| {
        prefix.is_empty()
            || (!p.is_empty()
                && p.chars()
                    .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || "._-".contains(c)))
    });
    if !prefix_ok {
        return Some(format!(
            "prefix {prefix:?} must be lower-case path components separated by '/'"
        ));
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_default_datastore_is_the_sites() {
        let mut objects = vec![
            serde_json::json!({"kind": "Deployment", "spec": {"template": {"spec": {"containers": [
                {"name": "manager", "args": ["--leader-elect", "--datastore=kamaji-etcd"]}]}}}}),
            serde_json::json!({"kind": "Service", "spec": {}}),
        ];
        assert!(set_default_datastore(&mut objects, "site-etcd"));
        assert_eq!(
            objects[0]["spec"]["template"]["spec"]["containers"][0]["args"][1],
            "--datastore=site-etcd"
        );
        assert!(
            !set_default_datastore(&mut objects[1..], "x"),
            "nothing to rewrite"
        );
        assert_eq!(default_datastore(&objects[0]).as_deref(), Some("site-etcd"));
        assert_eq!(default_datastore(&objects[1]), None);
    }

    #[test]
    fn datastores_go_before_the_webhook_configurations() {
        let kind = |k: &str| serde_json::json!({ "kind": k });
        let mut objects = vec![
            kind("CustomResourceDefinition"),
            kind("Deployment"),
            kind("ValidatingWebhookConfiguration"),
        ];
        insert_before_webhooks(&mut objects, &[kind("DataStore")]);
        let kinds: Vec<&str> = objects
            .iter()
            .map(|o| o["kind"].as_str().unwrap())
            .collect();
        assert_eq!(
            kinds,
            [
                "CustomResourceDefinition",
                "Deployment",
                "DataStore",
                "ValidatingWebhookConfiguration"
            ]
        );
        let mut none = vec![kind("Deployment")];
        insert_before_webhooks(&mut none, &[kind("DataStore")]);
        assert_eq!(none[1]["kind"], "DataStore", "at the end without webhooks");
    }

    use crate::init::set::by_id;

    fn vars() -> Variables {
        Variables::default()
    }

    const ASSET: &str = "\
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingWebhookConfiguration
metadata: {name: capi-validating}
---
apiVersion: apps/v1
kind: Deployment
metadata:
  name: capi-controller-manager
  namespace: capi-system
spec:
  template:
    spec:
      containers:
      - name: manager
        image: registry.k8s.io/cluster-api/cluster-api-controller:v1.14.2
        args: [\"--diagnostics-address=${CAPI_DIAGNOSTICS_ADDRESS:=:8443}\"]
---
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata: {name: clusters.cluster.x-k8s.io}
---
apiVersion: v1
kind: Namespace
metadata: {name: capi-system}
";

    #[test]
    fn prepared_in_dependency_order_with_defaults_labels_and_the_mirror() {
        let c = by_id("cluster-api").unwrap();
        let objs = prepare(c, ASSET, &vars(), Some("mirror.local:5000/capi")).unwrap();
        let kinds: Vec<&str> = objs.iter().map(|o| o["kind"].as_str().unwrap()).collect();
        assert_eq!(
            kinds,
            [
                "Namespace",
                "CustomResourceDefinition",
                "Deployment",
                "ValidatingWebhookConfiguration"
            ]
        );
        let d = &objs[2];
        assert_eq!(
            d.pointer("/spec/template/spec/containers/0/image").unwrap(),
            "mirror.local:5000/capi/cluster-api-controller:v1.14.2"
        );
        assert_eq!(
            d.pointer("/spec/template/spec/containers/0/args/0")
                .unwrap(),
            "--diagnostics-address=:8443"
        );
        assert_eq!(d["metadata"]["labels"][COMPONENT_LABEL], "cluster-api");
        assert_eq!(d["metadata"]["labels"][VERSION_LABEL], "v1.14.2");
        assert_eq!(
            images(&objs),
            ["mirror.local:5000/capi/cluster-api-controller:v1.14.2"]
        );
    }

    #[test]
    fn kamajis_own_datastore_is_left_to_the_datastore_flag() {
        let c = by_id("kamaji").unwrap();
        let text = "apiVersion: v1\nkind: Namespace\nmetadata: {name: kamaji-system}\n---\napiVersion: kamaji.clastix.io/v1alpha1\nkind: DataStore\nmetadata: {name: kamaji-etcd}\n";
        let objs = prepare(c, text, &vars(), None).unwrap();
        assert_eq!(objs.len(), 1);
    }

    #[test]
    fn what_is_not_a_manifest_is_refused_in_one_line() {
        let c = by_id("cluster-api").unwrap();
        for (text, says) in [
            ("kind: Namespace\n", "document 1 is not a Kubernetes object"),
            ("a: [\n", "cluster-api.yaml is not valid YAML"),
            ("# nothing\n", "holds no Kubernetes object"),
        ] {
            let e = prepare(c, text, &vars(), None).unwrap_err().to_string();
            assert!(e.contains(says), "{text:?}: {e}");
            assert!(!e.contains('\n'), "{e}");
        }
    }

    #[test]
    fn images_keep_their_name_and_tag_or_digest_in_the_mirror() {
        for (image, want) in [
            (
                "quay.io/jetstack/cert-manager-controller:v1.21.1",
                "m/x/cert-manager-controller:v1.21.1",
            ),
            ("clastix/kamaji:v1.0.0", "m/x/kamaji:v1.0.0"),
            ("busybox", "m/x/busybox"),
            ("r:5000/a/b@sha256:abc", "m/x/b@sha256:abc"),
        ] {
            assert_eq!(mirrored(image, "m/x/"), want);
        }
        assert!(registry_problem("127.0.0.1:5000/mirror").is_none());
        assert!(registry_problem("mirror.local").is_none());
        assert!(registry_problem("https://mirror").is_some());
        assert!(registry_problem("mirror/Upper").is_some());
        assert!(registry_problem("").is_some());
    }
}
