//! The CNI `kubectl kamaji create --cni calico|none` / `--cni-manifest FILE` installs in the
//! workload cluster.
//!
//! Kamaji runs the control plane but no network plugin, so without one the kubelets report
//! `NetworkPluginNotReady` and the nodes stay NotReady. `create` hands the manifest to Cluster
//! API: ConfigMaps holding it (Secrets when it holds Secrets), and a ClusterResourceSet whose
//! `clusterSelector` matches labels `create` puts on the Cluster. CAPI's ClusterResourceSet
//! controller applies it in the workload cluster once its API server answers (ApplyOnce: later
//! changes are the cluster admin's).
//!
//! The repository vendors no third-party manifest: `--cni calico` downloads Calico's pinned
//! release manifest ([`calico_manifest_url`]) at create time, bounded in size and time; offline,
//! `--cni-manifest FILE` takes a copy. This module is pure: it checks, splits and wraps a
//! manifest already read.

use base64::Engine;
use serde_json::{Value, json};

use crate::Error;
use crate::error::usage;

pub use crate::groups::ADDONS_GROUP;
/// The Calico release `--cni calico` installs.
pub(crate) const CALICO_VERSION: &str = "v3.31.4";
/// Environment variable naming another URL for Calico's manifest (a mirror).
pub const CALICO_URL_ENV: &str = "KUBECTL_KAMAJI_CALICO_URL";
/// The Cluster label the ClusterResourceSet selects on (with the cluster-name label); the
/// key is the one Cluster API's and BYOH's own templates use for their CNI ClusterResourceSets.
pub(crate) const CNI_LABEL: &str = "cni";
/// The API server refuses ConfigMaps and Secrets above 1 MiB (1,048,576 bytes of data); a
/// part keeps room for its key.
pub(crate) const MAX_PART_BYTES: usize = 1_000_000;
/// The largest manifest accepted (and downloaded).
pub const MAX_MANIFEST_BYTES: usize = 8 * 1024 * 1024;
/// The Secret type Cluster API's ClusterResourceSet controller reads.
pub(crate) const RESOURCE_SET_SECRET_TYPE: &str = "addons.cluster.x-k8s.io/resource-set";

/// Calico's release manifest (the projectcalico/calico repository's `manifests/calico.yaml`
/// at the release tag), or the mirror in [`CALICO_URL_ENV`].
pub fn calico_manifest_url() -> String {
    match std::env::var(CALICO_URL_ENV) {
        Ok(u) if !u.trim().is_empty() => u.trim().to_string(),
        _ => format!(
            "https://raw.githubusercontent.com/projectcalico/calico/{CALICO_VERSION}/manifests/calico.yaml"
        ),
    }
}

/// Which CNI, as the label value on the Cluster says it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CniKind {
    /// Calico's release manifest.
    Calico,
    /// The user's `--cni-manifest FILE`.
    Custom,
}

impl CniKind {
    /// The value of the Cluster's [`CNI_LABEL`].
    pub fn label(self) -> &'static str {
        match self {
            CniKind::Calico => "calico",
            CniKind::Custom => "custom",
        }
    }
}

/// Parses `--cni`: `calico`, or `none` (`None`).
pub fn parse_cni(s: &str) -> Result<Option<CniKind>, Error> {
    match s.trim().to_ascii_lowercase().as_str() {
        "none" => Ok(None),
        "calico" => Ok(Some(CniKind::Calico)),
        _ => Err(Error::Usage {
            message: format!("unknown --cni {s:?}"),
            hint: Some(
                "use calico or none, or --cni-manifest FILE for another network plugin".into(),
            ),
        }),
    }
}

/// A CNI manifest to install, as read (file) or downloaded (Calico).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CniManifest {
    pub kind: CniKind,
    /// Where it came from (a path or a URL), for messages.
    pub source: String,
    pub text: String,
}

/// A manifest checked and split for ConfigMaps (or Secrets).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Parts {
    /// Each at most [`MAX_PART_BYTES`], documents never cut.
    pub parts: Vec<String>,
    /// It holds Secrets: store it in Secrets, not ConfigMaps.
    pub has_secrets: bool,
    /// Objects in it.
    pub objects: usize,
}

/// Sizes as people read them: bytes, KiB or MiB.
pub fn human_bytes(n: usize) -> String {
    if n < 1024 {
        format!("{n} B")
    } else if n < 1024 * 1024 {
        format!("{:.0} KiB", n as f64 / 1024.0)
    } else {
        format!("{:.1} MiB", n as f64 / (1024.0 * 1024.0))
    }
}

/// The YAML documents of a stream, as text (separators dropped, comment-only documents kept
/// out). A separator is a line starting with `---` followed by nothing or a space.
fn documents(text: &str) -> Vec<String> {
    let mut docs = Vec::new();
    let mut cur = String::new();
    let flush = |cur: &mut String, docs: &mut Vec<String>| {
        let has_content = cur.lines().any(|l| {
            let t = l.trim();
            !t.is_empty() && !t.starts_with('#') && t != "..."
        });
        if has_content {
            if !cur.ends_with('\n') {
                cur.push('\n');
            }
            docs.push(std::mem::take(cur));
        } else {
            cur.clear();
        }
    };
    for line in text.split_inclusive('\n') {
        let bare = line.trim_end_matches(['\n', '\r']);
        let is_sep = bare == "---"
            || bare
                .strip_prefix("---")
                .is_some_and(|r| r.starts_with([' ', '\t']));
        if is_sep {
            flush(&mut cur, &mut docs);
        } else {
            cur.push_str(line);
        }
    }
    flush(&mut cur, &mut docs);
    docs
}

/// Checks a manifest (YAML or JSON documents, each a Kubernetes object with `apiVersion` and
/// `kind`; at most [`MAX_MANIFEST_BYTES`]) and packs its documents into parts of at most
/// [`MAX_PART_BYTES`]. `what` names it in errors (`--cni-manifest calico.yaml`).
pub fn split(what: &str, text: &str) -> Result<Parts, Error> {
    if text.len() > MAX_MANIFEST_BYTES {
        return Err(usage(
            format!(
                "{what} is {}; at most {} is accepted",
                human_bytes(text.len()),
                human_bytes(MAX_MANIFEST_BYTES)
            ),
            "install a network plugin this large by hand in the workload cluster (kubectl capi kubeconfig NAME)",
        ));
    }
    let docs = documents(text);
    if docs.is_empty() {
        return Err(usage(
            format!("{what} holds no Kubernetes object"),
            "pass the network plugin's manifest (YAML documents with apiVersion and kind)",
        ));
    }
    let mut has_secrets = false;
    let mut parts: Vec<String> = Vec::new();
    let mut cur = String::new();
    for (i, doc) in docs.iter().enumerate() {
        let n = i + 1;
        let v: Value = serde_saphyr::from_str(doc).map_err(|e| {
            usage(
                format!(
                    "{what}: document {n} is not valid YAML: {}",
                    crate::yaml::error_line(&e)
                ),
                "fix the manifest and run again",
            )
        })?;
        let kind = v.get("kind").and_then(Value::as_str).unwrap_or_default();
        let api_version = v
            .get("apiVersion")
            .and_then(Value::as_str)
            .unwrap_or_default();
        if !v.is_object() || kind.is_empty() || api_version.is_empty() {
            return Err(usage(
                format!("{what}: document {n} is not a Kubernetes object (no apiVersion or kind)"),
                "pass the network plugin's manifest (YAML documents with apiVersion and kind)",
            ));
        }
        has_secrets |= kind == "Secret" && api_version == "v1";
        if doc.len() > MAX_PART_BYTES {
            let name = v
                .pointer("/metadata/name")
                .and_then(Value::as_str)
                .unwrap_or_default();
            return Err(usage(
                format!(
                    "{what}: document {n} ({kind} {name}) is {}; a ConfigMap holds at most 1 MiB",
                    human_bytes(doc.len())
                ),
                "split that object, or install this network plugin by hand in the workload cluster (kubectl capi kubeconfig NAME)",
            ));
        }
        let sep = if cur.is_empty() { 0 } else { 4 };
        if cur.len() + sep + doc.len() > MAX_PART_BYTES {
            parts.push(std::mem::take(&mut cur));
        }
        if !cur.is_empty() {
            cur.push_str("---\n");
        }
        cur.push_str(doc);
    }
    parts.push(cur);
    Ok(Parts {
        parts,
        has_secrets,
        objects: docs.len(),
    })
}

/// Calico's manifest with its IPv4 pool set to the cluster's pod CIDR: the release manifest
/// ships `CALICO_IPV4POOL_CIDR` commented out (192.168.0.0/16), and Calico's install guide
/// says to uncomment it and set the pod CIDR. Unchanged when the lines are not there (Calico
/// then detects the CIDR itself) or `cidr` is not IPv4.
pub(crate) fn calico_with_pod_cidr(text: &str, cidr: &str) -> String {
    if !cidr.contains('.') {
        return text.to_string();
    }
    let lines: Vec<&str> = text.split_inclusive('\n').collect();
    let mut out = String::with_capacity(text.len() + 64);
    let mut i = 0;
    while i < lines.len() {
        let l = lines[i];
        let bare = l.trim_end_matches(['\n', '\r']);
        let indent = &bare[..bare.len() - bare.trim_start().len()];
        let next = lines.get(i + 1).map(|n| n.trim_end_matches(['\n', '\r']));
        if bare.trim_start() == "# - name: CALICO_IPV4POOL_CIDR"
            && next.is_some_and(|n| n.trim_start().starts_with("#   value:"))
        {
            out.push_str(&format!("{indent}- name: CALICO_IPV4POOL_CIDR\n"));
            out.push_str(&format!("{indent}  value: \"{cidr}\"\n"));
            i += 2;
            continue;
        }
        out.push_str(l);
        i += 1;
    }
    out
}

/// A ConfigMap data key from a file name: its base name when valid, else `manifest.yaml`.
fn data_key(kind: CniKind, source: &str) -> String {
    if kind == CniKind::Calico {
        return "calico.yaml".into();
    }
    let base = source.rsplit(['/', '\\']).next().unwrap_or_default();
    let ok = !base.is_empty()
        && base.len() <= 253
        && base != "."
        && base != ".."
        && base
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'));
    if ok {
        base.to_string()
    } else {
        "manifest.yaml".into()
    }
}

/// The name of the ClusterResourceSet of cluster `name` (and of its only ConfigMap).
pub(crate) fn resource_set_name(name: &str) -> String {
    format!("{name}-cni")
}

/// The objects that install `manifest` in cluster `name`: the ConfigMaps (or Secrets) holding
/// it, then the ClusterResourceSet (`addons_version`: `v1beta2` or `v1beta1`) selecting the
/// Cluster by its cluster-name and [`CNI_LABEL`] labels. `labels` go on every object.
pub fn objects(
    name: &str,
    namespace: &str,
    labels: &Value,
    addons_version: &str,
    manifest: &CniManifest,
) -> Result<Vec<Value>, Error> {
    let what = match manifest.kind {
        CniKind::Calico => format!("Calico's manifest ({})", manifest.source),
        CniKind::Custom => format!("--cni-manifest {}", manifest.source),
    };
    let parts = split(&what, &manifest.text)?;
    let key = data_key(manifest.kind, &manifest.source);
    let base = resource_set_name(name);
    let many = parts.parts.len() > 1;
    let kind = if parts.has_secrets {
        "Secret"
    } else {
        "ConfigMap"
    };
    let mut out = Vec::new();
    let mut resources = Vec::new();
    for (i, p) in parts.parts.iter().enumerate() {
        let n = if many {
            format!("{base}-{}", i + 1)
        } else {
            base.clone()
        };
        let meta = json!({"name": n, "namespace": namespace, "labels": labels});
        let obj = if parts.has_secrets {
            json!({
                "apiVersion": "v1", "kind": "Secret", "metadata": meta,
                "type": RESOURCE_SET_SECRET_TYPE,
                "data": {key.as_str(): base64::engine::general_purpose::STANDARD.encode(p)},
            })
        } else {
            json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": meta, "data": {key.as_str(): p}})
        };
        out.push(obj);
        resources.push(json!({"kind": kind, "name": n}));
    }
    let selector = json!({
        crate::labels::CLUSTER_NAME_LABEL: name,
        CNI_LABEL: manifest.kind.label(),
    });
    out.push(super::cluster_resource_set(
        (&base, namespace),
        labels,
        addons_version,
        selector,
        json!(resources),
    ));
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    const TWO: &str = "# leading comment\n---\napiVersion: v1\nkind: ServiceAccount\nmetadata:\n  name: a\n  namespace: kube-system\n---\n# only a comment\n---\napiVersion: apps/v1\nkind: DaemonSet\nmetadata:\n  name: b\n";

    fn labels() -> Value {
        json!({"cluster.x-k8s.io/cluster-name": "prod", "app.kubernetes.io/managed-by": "kubectl-kamaji"})
    }

    #[test]
    fn a_small_manifest_is_one_configmap_and_a_resource_set() {
        let m = CniManifest {
            kind: CniKind::Custom,
            source: "/tmp/my-cni.yaml".into(),
            text: TWO.into(),
        };
        let o = objects("prod", "team", &labels(), "v1beta2", &m).unwrap();
        assert_eq!(o.len(), 2);
        assert_eq!(o[0]["kind"], "ConfigMap");
        assert_eq!(o[0]["metadata"]["name"], "prod-cni");
        let data = o[0]["data"]["my-cni.yaml"].as_str().unwrap();
        assert_eq!(data.matches("\nkind: ").count(), 2, "{data}");
        assert!(!data.contains("only a comment"), "{data}");
        assert_eq!(
            o[1],
            json!({"apiVersion": "addons.cluster.x-k8s.io/v1beta2", "kind": "ClusterResourceSet",
                "metadata": {"name": "prod-cni", "namespace": "team", "labels": labels()},
                "spec": {"strategy": "ApplyOnce",
                    "clusterSelector": {"matchLabels": {"cluster.x-k8s.io/cluster-name": "prod", "cni": "custom"}},
                    "resources": [{"kind": "ConfigMap", "name": "prod-cni"}]}})
        );
        // The parts parse back to the same objects.
        let back = split("x", data).unwrap();
        assert_eq!(back.objects, 2);
    }

    #[test]
    fn secrets_go_into_resource_set_secrets() {
        let text = format!(
            "{TWO}---\napiVersion: v1\nkind: Secret\nmetadata:\n  name: s\nstringData:\n  k: v\n"
        );
        let m = CniManifest {
            kind: CniKind::Custom,
            source: "weird name?.yaml".into(),
            text,
        };
        let o = objects("prod", "team", &labels(), "v1beta1", &m).unwrap();
        assert_eq!(o[0]["kind"], "Secret");
        assert_eq!(o[0]["type"], RESOURCE_SET_SECRET_TYPE);
        let b64 = o[0]["data"]["manifest.yaml"].as_str().unwrap();
        let plain = String::from_utf8(
            base64::engine::general_purpose::STANDARD
                .decode(b64)
                .unwrap(),
        )
        .unwrap();
        assert!(plain.contains("kind: Secret"));
        assert_eq!(o[1]["apiVersion"], "addons.cluster.x-k8s.io/v1beta1");
        assert_eq!(
            o[1]["spec"]["resources"],
            json!([{"kind": "Secret", "name": "prod-cni"}])
        );
    }

    #[test]
    fn big_manifests_are_split_at_document_boundaries() {
        // Three 400 kB ConfigMaps: two fit a part, the third starts another.
        let doc = |i: usize| {
            format!(
                "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: c{i}\ndata:\n  k: \"{}\"\n",
                "x".repeat(400_000)
            )
        };
        let text = format!("{}---\n{}---\n{}", doc(1), doc(2), doc(3));
        let m = CniManifest {
            kind: CniKind::Calico,
            source: "https://example.com/calico.yaml".into(),
            text,
        };
        let o = objects("prod", "team", &labels(), "v1beta2", &m).unwrap();
        let names: Vec<&str> = o
            .iter()
            .map(|x| x["metadata"]["name"].as_str().unwrap())
            .collect();
        assert_eq!(names, ["prod-cni-1", "prod-cni-2", "prod-cni"]);
        for cm in &o[..2] {
            let d = cm["data"]["calico.yaml"].as_str().unwrap();
            assert!(d.len() <= MAX_PART_BYTES, "{}", d.len());
            assert!(d.starts_with("apiVersion: v1\n"));
        }
        assert_eq!(
            o[0]["data"]["calico.yaml"]
                .as_str()
                .unwrap()
                .matches("kind: ConfigMap")
                .count(),
            2
        );
        assert_eq!(o[2]["spec"]["resources"].as_array().unwrap().len(), 2);
        assert_eq!(
            o[2]["spec"]["clusterSelector"]["matchLabels"]["cni"],
            "calico"
        );
    }

    #[test]
    fn bad_manifests_get_one_clear_line() {
        let e = |text: &str| {
            split("--cni-manifest f.yaml", text)
                .unwrap_err()
                .to_string()
        };
        assert_eq!(
            e("# nothing\n---\n"),
            "--cni-manifest f.yaml holds no Kubernetes object"
        );
        assert_eq!(
            e("apiVersion: v1\nkind: ConfigMap\n---\njust: a map\n"),
            "--cni-manifest f.yaml: document 2 is not a Kubernetes object (no apiVersion or kind)"
        );
        assert!(
            e("apiVersion: v1\nkind: [unclosed\n")
                .starts_with("--cni-manifest f.yaml: document 1 is not valid YAML: "),
        );
        let huge = format!(
            "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: big\ndata:\n  k: \"{}\"\n",
            "x".repeat(1_100_000)
        );
        assert_eq!(
            e(&huge),
            "--cni-manifest f.yaml: document 1 (ConfigMap big) is 1.0 MiB; a ConfigMap holds at most 1 MiB"
        );
        let too_much = "#".repeat(MAX_MANIFEST_BYTES + 1024 * 1024);
        assert_eq!(
            e(&too_much),
            "--cni-manifest f.yaml is 9.0 MiB; at most 8.0 MiB is accepted"
        );
        assert!(parse_cni("cilium").is_err());
        assert_eq!(parse_cni("None").unwrap(), None);
        assert_eq!(parse_cni("calico").unwrap(), Some(CniKind::Calico));
    }

    #[test]
    fn calico_gets_the_pod_cidr() {
        let text = "        env:\n            # - name: CALICO_IPV4POOL_CIDR\n            #   value: \"192.168.0.0/16\"\n            - name: X\n";
        assert_eq!(
            calico_with_pod_cidr(text, "10.244.0.0/16"),
            "        env:\n            - name: CALICO_IPV4POOL_CIDR\n              value: \"10.244.0.0/16\"\n            - name: X\n"
        );
        assert_eq!(calico_with_pod_cidr(text, "fd00::/48"), text);
        assert_eq!(calico_with_pod_cidr("a: b\n", "10.0.0.0/8"), "a: b\n");
    }
}
