//! The Secrets CAPI reads: `<cluster>-kubeconfig` and `<cluster>-ca`, copied from Kamaji's.

use std::collections::BTreeMap;

use k8s_openapi::ByteString;
use k8s_openapi::api::core::v1::Secret;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference;
use kube::ResourceExt;
use kube::api::{Api, Patch, PatchParams};
use serde_json::{Value, json};

use super::cache::{Cached, version};
use super::{CLUSTER_NAME_LABEL, Copied, KcpCtx, MANAGER, TcpPlace, kcp_ns};
use crate::Error;
use crate::api::v1alpha2::KamajiControlPlane;
use crate::tcp::KUBECONFIG_KEY_ANNOTATION;

fn secret_labels(cluster: &str, tcp: &str, which: &str) -> BTreeMap<String, String> {
    BTreeMap::from([
        (CLUSTER_NAME_LABEL.to_string(), cluster.to_string()),
        (
            "kamaji.clastix.io/component".to_string(),
            "capi".to_string(),
        ),
        ("kamaji.clastix.io/secret".to_string(), which.to_string()),
        ("kamaji.clastix.io/cluster".to_string(), cluster.to_string()),
        ("kamaji.clastix.io/tcp".to_string(), tcp.to_string()),
    ])
}

/// Which of the two copies (its slot in `Written::copies`).
#[derive(Clone, Copy)]
enum Which {
    Kubeconfig = 0,
    Ca = 1,
}

/// Where the copies go: the KCP's namespace, owned by the KCP, labelled for the cluster.
struct Copies<'a> {
    api: Api<Secret>,
    ns: String,
    cluster: &'a str,
    tcp_name: &'a str,
    owner: Option<OwnerReference>,
    kcp: &'a KamajiControlPlane,
    ctx: &'a KcpCtx,
    place: &'a TcpPlace,
}

impl Copies<'_> {
    /// A hash of what a copy named `target` is made of besides its source's data.
    fn hash(&self, target: &str, which: &str, key: &str) -> u64 {
        let owner = self
            .owner
            .as_ref()
            .map(|o| (o.uid.clone(), o.block_owner_deletion));
        let made = (
            target,
            key,
            secret_labels(self.cluster, self.tcp_name, which),
            owner,
        );
        super::json_hash(&serde_json::to_value(made).unwrap_or(Value::Null))
    }

    /// Whether the copy `target`, made from `src` as `hash`, is still what this process made:
    /// the Secret watch shows both at the resourceVersions recorded then. A source in another
    /// cluster is not watched.
    fn unchanged(&self, which: Which, src: &str, target: &str, hash: u64) -> bool {
        if self.place.remote {
            return false;
        }
        let Some(c) = self.ctx.written(self.kcp).copies[which as usize] else {
            return false;
        };
        let seen = &self.ctx.seen.secrets;
        c.hash == hash
            && c.src == super::hash_of(src)
            && seen.get(&self.place.ns, src) == Cached::Present(c.src_rv)
            && seen.get(&self.ns, target) == Cached::Present(c.dst_rv)
    }

    /// Remembers the copy made from `src` (at `src_rv`), which left it at `dst_rv`.
    fn record(&self, which: Which, src: &Secret, hash: u64, dst_rv: &str) {
        let c = Copied {
            src: super::hash_of(src.name_any()),
            src_rv: version(src.resource_version().as_deref().unwrap_or_default()),
            hash,
            dst_rv: version(dst_rv),
        };
        self.ctx
            .set_written(self.kcp, |w| w.copies[which as usize] = Some(c));
    }

    /// A `cluster.x-k8s.io/secret` named `name` holding `data`.
    fn secret(
        &self,
        name: &str,
        labels: BTreeMap<String, String>,
        data: BTreeMap<String, ByteString>,
    ) -> Secret {
        let mut s = Secret::default();
        s.metadata.name = Some(name.to_string());
        s.metadata.namespace = Some(self.ns.clone());
        s.metadata.labels = Some(labels);
        s.metadata.owner_references = self.owner.clone().map(|o| vec![o]);
        s.type_ = Some("cluster.x-k8s.io/secret".into());
        s.data = Some(data);
        s
    }
}

/// Copies Kamaji's admin kubeconfig and CA into `<cluster>-kubeconfig` and `<cluster>-ca`.
pub(super) async fn publish_secrets(
    kcp: &KamajiControlPlane,
    ctx: &KcpCtx,
    cluster: &str,
    tcp: &Value,
    place: &TcpPlace,
) -> Result<(), Error> {
    let ns = kcp_ns(kcp);
    let tcp_name = tcp["metadata"]["name"].as_str().unwrap_or_default();
    let kc_name = tcp["status"]["kubeconfig"]["admin"]["secretName"]
        .as_str()
        .unwrap_or_default();
    let ca_name = tcp["status"]["certificates"]["ca"]["secretName"]
        .as_str()
        .unwrap_or_default();
    if kc_name.is_empty() || ca_name.is_empty() {
        return Err(Error::Waiting(
            "waiting for Kamaji to publish the admin kubeconfig and CA Secret names in the TenantControlPlane status".into(),
        ));
    }
    let src: Api<Secret> = Api::namespaced(place.client.clone(), &place.ns);
    let to = Copies {
        api: Api::namespaced(ctx.base.client.clone(), &ns),
        ns,
        cluster,
        tcp_name,
        owner: kcore::kamaji::reconcile::owner_ref(kcp),
        kcp,
        ctx,
        place,
    };
    copy_kubeconfig(kcp, &src, &place.ns, kc_name, &to).await?;
    copy_ca(&src, &place.ns, ca_name, &to, place.remote).await
}

/// The admin-kubeconfig key copied: the annotation's, else `admin.svc` when the KCP sets an
/// advertise address, else `admin.conf`.
fn kubeconfig_key(kcp: &KamajiControlPlane) -> String {
    kcp.annotations()
        .get(KUBECONFIG_KEY_ANNOTATION)
        .cloned()
        .unwrap_or_else(|| {
            let adv = kcp
                .spec
                .fields
                .network
                .as_ref()
                .is_some_and(|n| !n.advertise_address.is_empty());
            if adv { "admin.svc" } else { "admin.conf" }.to_string()
        })
}

/// `<cluster>-kubeconfig` from one key of Kamaji's admin-kubeconfig Secret.
async fn copy_kubeconfig(
    kcp: &KamajiControlPlane,
    src: &Api<Secret>,
    tcp_ns: &str,
    kc_name: &str,
    to: &Copies<'_>,
) -> Result<(), Error> {
    let key = kubeconfig_key(kcp);
    let target = format!("{}-kubeconfig", to.cluster);
    let hash = to.hash(&target, "kubeconfig", &key);
    if to.unchanged(Which::Kubeconfig, kc_name, &target, hash) {
        return Ok(());
    }
    let Some(kc) = src.get_opt(kc_name).await? else {
        return Err(Error::Waiting(format!(
            "waiting for Kamaji's Secret {tcp_ns}/{kc_name}"
        )));
    };
    let Some(value) = kc.data.as_ref().and_then(|d| d.get(&key)).cloned() else {
        return Err(Error::Other(format!(
            "Secret {tcp_ns}/{kc_name} has no key {key:?} (chosen by the {KUBECONFIG_KEY_ANNOTATION} annotation or the default); set the annotation to one of its keys"
        )));
    };
    let labels = secret_labels(to.cluster, to.tcp_name, "kubeconfig");
    let data = BTreeMap::from([("value".to_string(), value)]);
    // A copy the Secret watch has listed no copy of is not read: applying it is what would follow.
    let cur = match to.ctx.seen.secrets.get(&to.ns, &target) {
        Cached::Absent => None,
        Cached::Present(_) | Cached::Unknown => to.api.get_opt(&target).await?,
    };
    let dst = apply_secret(&to.api, &target, to.secret(&target, labels, data), cur).await?;
    to.record(Which::Kubeconfig, &kc, hash, &dst);
    Ok(())
}

/// `<cluster>-ca` (`tls.crt`, `tls.key`) from Kamaji's CA Secret, unless that Secret already is
/// `<cluster>-ca` or a TenantControlPlane owns the one there.
async fn copy_ca(
    src: &Api<Secret>,
    tcp_ns: &str,
    ca_name: &str,
    to: &Copies<'_>,
    remote: bool,
) -> Result<(), Error> {
    let target = format!("{}-ca", to.cluster);
    if !remote && target == ca_name {
        return Ok(()); // Kamaji's own `<tcp>-ca` already is `<cluster>-ca`.
    }
    let hash = to.hash(&target, "ca", "");
    if to.unchanged(Which::Ca, ca_name, &target, hash) {
        return Ok(());
    }
    let existing = to.api.get_opt(&target).await?;
    if existing.as_ref().is_some_and(|e| {
        e.owner_references()
            .first()
            .is_some_and(|o| o.kind == "TenantControlPlane")
    }) {
        return Ok(());
    }
    let Some(ca) = src.get_opt(ca_name).await? else {
        return Err(Error::Waiting(format!(
            "waiting for Kamaji's Secret {tcp_ns}/{ca_name}"
        )));
    };
    let data = ca.data.clone().unwrap_or_default();
    let (Some(crt), Some(key)) = (data.get("ca.crt"), data.get("ca.key")) else {
        return Err(Error::Waiting(format!(
            "Kamaji's Secret {tcp_ns}/{ca_name} has no ca.crt/ca.key yet"
        )));
    };
    let mut labels = ca.labels().clone();
    labels.extend(secret_labels(to.cluster, to.tcp_name, "ca"));
    let data = BTreeMap::from([
        ("tls.crt".to_string(), ByteString(crt.0.clone())),
        ("tls.key".to_string(), ByteString(key.0.clone())),
    ]);
    let dst = apply_secret(&to.api, &target, to.secret(&target, labels, data), existing).await?;
    to.record(Which::Ca, &ca, hash, &dst);
    Ok(())
}

/// Applies `s` server-side over `cur` (the Secret as read), skipping the request when nothing
/// would change; returns the Secret's resourceVersion after.
async fn apply_secret(
    api: &Api<Secret>,
    name: &str,
    s: Secret,
    cur: Option<Secret>,
) -> Result<String, Error> {
    if let Some(cur) = cur {
        let same_data = cur.data == s.data && cur.type_ == s.type_;
        let labels_ok = s
            .metadata
            .labels
            .iter()
            .flatten()
            .all(|(k, v)| cur.labels().get(k) == Some(v));
        let owner_ok = s.metadata.owner_references.iter().flatten().all(|o| {
            cur.owner_references().iter().any(|c| {
                c.uid == o.uid
                    && c.controller == Some(true)
                    && c.block_owner_deletion == o.block_owner_deletion
            })
        });
        if same_data && labels_ok && owner_ok {
            return Ok(cur.resource_version().unwrap_or_default());
        }
    }
    let mut v = serde_json::to_value(&s).map_err(|e| Error::Other(e.to_string()))?;
    v["apiVersion"] = json!("v1");
    v["kind"] = json!("Secret");
    let pp = PatchParams::apply(MANAGER).force();
    let applied = api.patch(name, &pp, &Patch::Apply(&v)).await?;
    Ok(applied.resource_version().unwrap_or_default())
}
