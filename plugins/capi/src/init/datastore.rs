//! `init --datastore`: what Kamaji's tenants are stored in. `none`; `etcd`, the etcd
//! `kcore::init::etcd` builds (with `--datastore-storage-class` and `--datastore-size`); or a
//! FILE of DataStore objects. The objects go in with Kamaji's, before its webhook
//! configurations, or after every component when Kamaji is not installed by this run; a
//! DataStore among them waits for the Secrets cert-manager issues for it; with
//! `--wait-providers`, the etcd's members are waited to be ready.

use std::path::Path;
use std::time::Duration;

use cli::Conn;
use kclient::error::{Error, Op};
use kclient::render::{self, Poll};
use kcore::init::etcd::{self, EtcdOptions, NAME, NAMESPACE, REPLICAS};
use kcore::init::manifests::{self, for_each_image, mirrored};
use serde_json::Value;

use super::apply::{self, Applied, Resolver};

/// Most bytes of a `--datastore FILE`.
const MAX_DATASTORE_BYTES: usize = 1 << 20;

/// What `--datastore` asks for.
#[derive(Debug)]
pub enum Choice {
    None,
    Etcd(EtcdOptions),
    /// The DataStore objects of a file.
    File(Vec<Value>),
}

/// `--datastore`, `--datastore-storage-class` and `--datastore-size` as typed. The last two
/// belong to `etcd` alone; `etcd` is the etcd, whatever file the directory holds (`./etcd`
/// names that file).
pub fn choose(
    flag: &str,
    storage_class: Option<&str>,
    size: Option<&str>,
) -> Result<Choice, Error> {
    if flag != "etcd" {
        let given = [
            ("--datastore-storage-class", storage_class.is_some()),
            ("--datastore-size", size.is_some()),
        ];
        if let Some((name, _)) = given.iter().find(|(_, g)| *g) {
            return Err(Error::Usage {
                message: format!("{name} is for --datastore etcd only (--datastore is {flag})"),
                hint: Some(format!("kubectl capi init --datastore etcd {name} ...")),
            });
        }
    }
    match flag {
        "none" => Ok(Choice::None),
        "etcd" => Ok(Choice::Etcd(EtcdOptions::new(storage_class, size)?)),
        file => Ok(Choice::File(datastores(file)?)),
    }
}

impl Choice {
    pub fn is_none(&self) -> bool {
        matches!(self, Choice::None)
    }

    /// The objects to apply, each image moved to `registry` as the components' are.
    pub fn objects(&self, registry: Option<&str>) -> Vec<Value> {
        let mut objects = match self {
            Choice::None => Vec::new(),
            Choice::Etcd(opts) => etcd::objects(opts),
            Choice::File(docs) => docs.clone(),
        };
        if let Some(r) = registry {
            for o in &mut objects {
                for_each_image(o, |image| *image = mirrored(image, r));
            }
        }
        objects
    }
}

/// Puts `objects` among Kamaji's `kamaji`, the DataStore among them (a file's first) its
/// default: right after Kamaji's namespace and CRDs, so before its Deployment and its webhook
/// configurations. Before the webhook configurations because Kamaji's manager does not start
/// without its default DataStore and its DataStore webhook cannot answer before it starts
/// (`manifests::insert_before_webhooks` says more); before the Deployment too because the
/// DataStore of an etcd waits for its Secrets (`apply_staged`), and a manager started in the
/// meantime would exit on the missing DataStore (`CheckExists`,
/// `internal/datastore/utils/check.go`, Kamaji v1.0.0) and restart.
pub fn carry(kamaji: &mut Vec<Value>, objects: &[Value]) {
    if let Some(name) = objects
        .iter()
        .find(|o| o["kind"] == "DataStore")
        .and_then(|d| d["metadata"]["name"].as_str())
    {
        manifests::set_default_datastore(kamaji, name);
    }
    // `manifests::prepare` orders the namespace and the CRDs first.
    let at = kamaji
        .iter()
        .position(|o| o["kind"] != "Namespace" && o["kind"] != "CustomResourceDefinition")
        .unwrap_or(kamaji.len());
    kamaji.splice(at..at, objects.iter().cloned());
}

/// `--datastore FILE`: the DataStore objects of a file.
fn datastores(flag: &str) -> Result<Vec<Value>, Error> {
    let input = kclient::input::Input {
        limit: MAX_DATASTORE_BYTES,
        ..kclient::input::Input::new("--datastore", false)
    };
    let text = input.read_text(Path::new(flag)).map_err(|e| e.usage())?;
    let docs: Vec<Value> = serde_saphyr::from_multiple(&text).map_err(|e| Error::Usage {
        message: format!(
            "--datastore {flag} is not valid YAML: {}",
            kcore::yaml::error_line(&e)
        ),
        hint: Some("pass a file of kamaji.clastix.io DataStore objects, etcd, or none".into()),
    })?;
    let docs: Vec<Value> = docs.into_iter().filter(|d| !d.is_null()).collect();
    let bad = docs
        .iter()
        .position(|d| d["kind"] != "DataStore" || !d["metadata"]["name"].is_string());
    if docs.is_empty() || bad.is_some() {
        return Err(Error::Usage {
            message: format!(
                "--datastore {flag} must hold DataStore objects only (document {} is not one)",
                bad.map_or(1, |i| i + 1)
            ),
            hint: Some("see Kamaji's DataStore reference; or pass --datastore etcd or none".into()),
        });
    }
    Ok(docs)
}

/// Every check before the first write. Without Kamaji among this run's components, its
/// DataStore API must be served already. For the etcd: a StatefulSet an earlier init made keeps
/// its volumes (what was not given is taken from it, `EtcdOptions::fit_to`); a new one needs a
/// StorageClass to bind them, the one given or the cluster's default.
pub async fn preflight(conn: &Conn, choice: &mut Choice, kamaji_chosen: bool) -> Result<(), Error> {
    if choice.is_none() {
        return Ok(());
    }
    if !kamaji_chosen {
        require_datastore_api(conn).await?;
    }
    let Choice::Etcd(opts) = choice else {
        return Ok(());
    };
    if let Some(sts) = statefulset(conn).await? {
        *opts = opts.fit_to(&sts)?;
        return Ok(());
    }
    use k8s_openapi::api::storage::v1::StorageClass;
    let api: kube::Api<StorageClass> = kube::Api::all(conn.client.clone());
    let op = |verb| Op::new(verb, "storage.k8s.io", "storageclasses", "StorageClass");
    match opts.storage_class() {
        Some(class) => {
            let found = api
                .get_metadata_opt(class)
                .await
                .map_err(|e| conn.error(e, &op("get").named(class)))?;
            if found.is_none() {
                return Err(Error::Other {
                    message: format!(
                        "StorageClass {class} does not exist: the etcd DataStore's volumes would never bind; nothing was applied"
                    ),
                    hint: Some(
                        "--datastore-storage-class NAME (kubectl get storageclass lists them)"
                            .into(),
                    ),
                });
            }
        }
        None => {
            let classes = api
                .list_metadata(&Default::default())
                .await
                .map_err(|e| conn.error(e, &op("list")))?;
            let has_default = classes.items.iter().any(|sc| {
                let meta = serde_json::json!({ "metadata": sc.metadata });
                etcd::is_default_class(&meta)
            });
            if !has_default {
                return Err(Error::Other {
                    message: "no default StorageClass: the etcd DataStore's volumes would never bind; nothing was applied".into(),
                    hint: Some("--datastore-storage-class NAME (kubectl get storageclass lists them)".into()),
                });
            }
        }
    }
    Ok(())
}

/// Refuses when Kamaji's DataStore kind is not served: Kamaji is neither installed nor among
/// the components this run installs.
async fn require_datastore_api(conn: &Conn) -> Result<(), Error> {
    use kube::core::GroupVersionKind;
    let gvk = GroupVersionKind::gvk(kcore::groups::KAMAJI_GROUP, "v1alpha1", "DataStore");
    match kube::discovery::pinned_kind(&conn.client, &gvk).await {
        Ok(_) => Ok(()),
        Err(kube::Error::Api(s)) if s.code == 404 => Err(no_kamaji()),
        Err(kube::Error::Discovery(_)) => Err(no_kamaji()),
        Err(e) => Err(conn.error(e, &Op::discovery())),
    }
}

fn no_kamaji() -> Error {
    Error::Other {
        message: "--datastore needs Kamaji's DataStore API: Kamaji is not installed and not among the components chosen; nothing was applied".into(),
        hint: Some("add --control-plane kamaji, or run kubectl capi init without provider flags".into()),
    }
}

/// The etcd's StatefulSet, if an earlier init made it.
async fn statefulset(conn: &Conn) -> Result<Option<Value>, Error> {
    use k8s_openapi::api::apps::v1::StatefulSet;
    let api: kube::Api<StatefulSet> = kube::Api::namespaced(conn.client.clone(), NAMESPACE);
    let op = Op::new("get", "apps", "statefulsets", "StatefulSet")
        .in_namespace(Some(NAMESPACE))
        .named(NAME);
    let sts = api.get_opt(NAME).await.map_err(|e| conn.error(e, &op))?;
    sts.map(serde_json::to_value)
        .transpose()
        .map_err(|e| Error::other(format!("internal: StatefulSet {NAME}: {e}")))
}

/// Server-side applies `objects` in order, as `apply::apply_objects` does, but each DataStore
/// only once the Secrets that Certificates before it write exist (`etcd::awaited_secrets`):
/// Kamaji's DataStore webhook, when it runs already, refuses a DataStore whose Secrets are
/// missing. A server dry run stores no Certificate, so such a DataStore is left out of it, with
/// a line.
pub async fn apply_staged(
    conn: &Conn,
    resolver: &mut Resolver,
    objects: &[Value],
    server_dry: bool,
    timeout: Duration,
) -> Result<Applied, Error> {
    let mut total = Applied::default();
    let mut start = 0;
    for (i, o) in objects.iter().enumerate() {
        if o["kind"] != "DataStore" {
            continue;
        }
        let awaited = etcd::awaited_secrets(o, &objects[..i]);
        if awaited.is_empty() {
            continue;
        }
        add(
            &mut total,
            apply::apply_objects(conn, resolver, &objects[start..i], server_dry, timeout).await?,
        );
        start = i;
        let name = o["metadata"]["name"].as_str().unwrap_or_default();
        if server_dry {
            if !missing_secrets(conn, &awaited).await?.is_empty() {
                total.skipped += 1;
                start = i + 1;
                render::info(&format!(
                    "DataStore {name} not sent (server dry run): cert-manager has not issued its Secrets yet"
                ));
            }
        } else {
            wait_for_secrets(conn, name, &awaited, timeout).await?;
        }
    }
    add(
        &mut total,
        apply::apply_objects(conn, resolver, &objects[start..], server_dry, timeout).await?,
    );
    Ok(total)
}

fn add(total: &mut Applied, part: Applied) {
    total.objects += part.objects;
    total.changed += part.changed;
    total.skipped += part.skipped;
}

/// Those of `secrets` (namespace, name) that do not exist.
async fn missing_secrets(
    conn: &Conn,
    secrets: &[(String, String)],
) -> Result<Vec<(String, String)>, Error> {
    use k8s_openapi::api::core::v1::Secret;
    let mut missing = Vec::new();
    for (ns, name) in secrets {
        let api: kube::Api<Secret> = kube::Api::namespaced(conn.client.clone(), ns);
        let op = Op::new("get", "", "secrets", "Secret")
            .in_namespace(Some(ns))
            .named(name);
        // Metadata only: whether it exists is all the webhook asks.
        if api
            .get_metadata_opt(name)
            .await
            .map_err(|e| conn.error(e, &op))?
            .is_none()
        {
            missing.push((ns.clone(), name.clone()));
        }
    }
    Ok(missing)
}

async fn wait_for_secrets(
    conn: &Conn,
    datastore: &str,
    secrets: &[(String, String)],
    timeout: Duration,
) -> Result<(), Error> {
    render::wait_until(
        &format!("waiting for cert-manager to issue DataStore {datastore}'s Secrets"),
        timeout,
        Duration::from_millis(500),
        || async move {
            Ok(match missing_secrets(conn, secrets).await?.first() {
                Some((ns, name)) => Poll::Pending(format!("Secret {ns}/{name} not issued yet")),
                None => Poll::Ready(()),
            })
        },
    )
    .await
    .map_err(|e| with_hint(e, "kubectl -n kamaji-system get certificates,issuers (cert-manager's Ready condition says why)"))
}

/// Says what became of the etcd, after its objects were applied: with `wait`, once its three
/// members are ready.
pub async fn settle(
    conn: &Conn,
    choice: &Choice,
    wait: bool,
    server_dry: bool,
    timeout: Duration,
) -> Result<(), Error> {
    if !matches!(choice, Choice::Etcd(_)) {
        return Ok(());
    }
    if server_dry || !wait {
        let dry = if server_dry { " (server dry run)" } else { "" };
        render::line(&format!(
            "datastore: etcd StatefulSet {NAME} applied{dry} ({REPLICAS} members)"
        ));
        return Ok(());
    }
    use k8s_openapi::api::apps::v1::StatefulSet;
    render::wait_until(
        &format!("waiting for the etcd StatefulSet {NAME}'s {REPLICAS} members to be ready"),
        timeout,
        Duration::from_millis(1000),
        || async move {
            let api: kube::Api<StatefulSet> =
                kube::Api::namespaced(conn.client.clone(), NAMESPACE);
            let op = Op::new("get", "apps", "statefulsets", "StatefulSet")
                .in_namespace(Some(NAMESPACE))
                .named(NAME);
            let sts = api.get(NAME).await.map_err(|e| conn.error(e, &op))?;
            let sts = serde_json::to_value(sts).map_err(|e| Error::other(e.to_string()))?;
            Ok(match etcd::members_waiting(&sts) {
                Some(w) => Poll::Pending(format!("{NAMESPACE}/{NAME}: {w}")),
                None => Poll::Ready(()),
            })
        },
    )
    .await
    .map_err(|e| {
        with_hint(
            e,
            &format!(
                "kubectl -n {NAMESPACE} get pods,pvc -l app.kubernetes.io/name={NAME} (a claim Pending has no volume to bind)"
            ),
        )
    })?;
    render::line(&format!(
        "datastore: etcd StatefulSet {NAME} ready ({REPLICAS} members)"
    ));
    Ok(())
}

/// A wait's timeout with what to look at.
fn with_hint(e: Error, hint: &str) -> Error {
    match e {
        Error::Timeout { .. } => Error::Other {
            message: e.to_string(),
            hint: Some(hint.to_string()),
        },
        other => other,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_etcd_flags_go_with_datastore_etcd_only() {
        for (flag, class, size) in [
            ("none", Some("fast"), None),
            ("none", None, Some("20Gi")),
            ("./datastores.yaml", Some("fast"), Some("20Gi")),
        ] {
            let e = choose(flag, class, size).unwrap_err();
            assert_eq!(e.exit_code(), 2, "{flag} {class:?} {size:?}");
            let text = e.to_string();
            assert!(text.contains("is for --datastore etcd only"), "{text}");
            assert!(!text.contains('\n'), "{text}");
        }
        assert!(matches!(choose("none", None, None), Ok(Choice::None)));
        let Ok(Choice::Etcd(opts)) = choose("etcd", Some("fast"), Some("20Gi")) else {
            panic!("etcd with its flags");
        };
        assert_eq!((opts.storage_class(), opts.size()), (Some("fast"), "20Gi"));
        let Ok(Choice::Etcd(opts)) = choose("etcd", None, None) else {
            panic!("etcd alone");
        };
        assert_eq!(opts.size(), etcd::DEFAULT_SIZE);
        // Bad values are the core's usage errors.
        let e = choose("etcd", None, Some("lots")).unwrap_err();
        assert_eq!(e.exit_code(), 2);
        // Anything else is a file, read as one.
        let e = choose("./etcd", None, None).unwrap_err();
        assert!(e.to_string().contains("./etcd"), "{e}");
    }

    #[test]
    fn a_datastore_among_the_objects_becomes_kamajis_default_before_its_webhooks() {
        let kind = |k: &str| serde_json::json!({ "kind": k });
        let mut kamaji = vec![
            kind("Namespace"),
            kind("CustomResourceDefinition"),
            serde_json::json!({"kind": "Deployment", "spec": {"template": {"spec": {"containers": [
                {"name": "manager", "args": ["--datastore=kamaji-etcd"]}]}}}}),
            kind("ValidatingWebhookConfiguration"),
        ];
        let objects = Choice::Etcd(EtcdOptions::default()).objects(Some("mirror.local/capi"));
        assert_eq!(objects[0]["kind"], "Issuer", "not a DataStore first");
        carry(&mut kamaji, &objects);
        let n = objects.len();
        let kinds: Vec<&str> = kamaji.iter().map(|o| o["kind"].as_str().unwrap()).collect();
        assert_eq!(
            kinds[..3],
            ["Namespace", "CustomResourceDefinition", "Issuer"]
        );
        assert_eq!(
            kinds[n + 1..],
            ["DataStore", "Deployment", "ValidatingWebhookConfiguration"]
        );
        assert_eq!(
            manifests::default_datastore(&kamaji[n + 2]).as_deref(),
            Some(etcd::DEFAULT_DATASTORE)
        );
        assert_eq!(
            manifests::images(&kamaji),
            ["mirror.local/capi/etcd:3.6.8-0"]
        );
    }
}
