//! A Kamaji etcd DataStore, dialled from outside etcd (where the CLI runs, or the reconciler's
//! pod): how many keys lie under a tenant's prefix, a consistent paged read of them, writing and
//! removing them. It speaks etcd's JSON gateway (`/v3/kv/range`, `/v3/kv/put`,
//! `/v3/kv/deleterange`, served on every etcd client port since v3.3) over kube's HTTPS stack,
//! with the client certificate the DataStore names, as Kamaji's own etcd driver authenticates
//! (`internal/datastore/etcd.go`). Errors are `kcore::Error`s: one line and a hint; nothing here
//! prints.

use std::time::Duration;

use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use k8s_openapi::api::core::v1::Secret;
use kcore::Error;
use kcore::kamaji::migrate::{Content, DataStore, Reach, prefix_range_end};
use kube::api::Api;
use kube::config::{KubeConfigOptions, Kubeconfig};
use serde_json::{Value, json};

/// A DataStore that does not answer within this is reported as not answering.
const DIAL_TIMEOUT: Duration = Duration::from_secs(5);

/// The PEM texts Kamaji's etcd driver uses: the DataStore's CA and its client pair.
pub struct EtcdCredentials {
    pub ca: Vec<u8>,
    pub cert: Vec<u8>,
    pub key: Vec<u8>,
}

/// One page of a range read: keys and values, the revision it was read at, and whether more
/// keys follow.
pub struct Page {
    pub kvs: Vec<(Vec<u8>, Vec<u8>)>,
    pub revision: i64,
    pub more: bool,
}

/// One etcd endpoint, ready to ask.
pub struct Etcd {
    client: kube::Client,
    endpoint: String,
}

impl Etcd {
    /// A client of `endpoint` (`host:port`, as a DataStore lists it). Building it dials nothing.
    pub async fn new(endpoint: &str, creds: &EtcdCredentials) -> Result<Etcd, Error> {
        let text = json!({
            "apiVersion": "v1", "kind": "Config", "current-context": "etcd",
            "clusters": [{"name": "etcd", "cluster": {
                "server": format!("https://{endpoint}"),
                "certificate-authority-data": STANDARD.encode(&creds.ca)}}],
            "users": [{"name": "etcd", "user": {
                "client-certificate-data": STANDARD.encode(&creds.cert),
                "client-key-data": STANDARD.encode(&creds.key)}}],
            "contexts": [{"name": "etcd", "context": {"cluster": "etcd", "user": "etcd"}}]
        })
        .to_string();
        let bad = |e: String| Error::Other {
            message: format!("DataStore endpoint {endpoint}: {e}"),
            hint: Some("check the DataStore's endpoints and tlsConfig".into()),
        };
        let kc = Kubeconfig::from_yaml(&text).map_err(|e| bad(e.to_string()))?;
        let mut config = kube::Config::from_custom_kubeconfig(kc, &KubeConfigOptions::default())
            .await
            .map_err(|e| bad(e.to_string()))?;
        config.connect_timeout = Some(DIAL_TIMEOUT);
        let client = kube::Client::try_from(config).map_err(|e| bad(e.to_string()))?;
        Ok(Etcd {
            client,
            endpoint: endpoint.to_string(),
        })
    }

    async fn call(&self, path: &str, body: Value) -> Result<Value, Error> {
        let req = http::Request::post(path)
            .header(http::header::CONTENT_TYPE, "application/json")
            .body(body.to_string().into_bytes())
            .map_err(|e| Error::other(format!("etcd request {path}: {e}")))?;
        let text = tokio::time::timeout(DIAL_TIMEOUT, self.client.request_text(req))
            .await
            .map_err(|_| {
                Error::other(format!(
                    "{} did not answer within {}s",
                    self.endpoint,
                    DIAL_TIMEOUT.as_secs()
                ))
            })?
            .map_err(|e| self.refused(e))?;
        serde_json::from_str(&text).map_err(|e| {
            Error::other(format!(
                "{} answered {path} with no JSON: {e}",
                self.endpoint
            ))
        })
    }

    /// A failed request in one line; etcd's refusal of certificate users on its gateway once
    /// its authentication is on (`embed/serve.go`, etcd v3.6.8: every `/v3/` request of a
    /// client certificate with a CommonName gets 400, as Kamaji's chart sets etcd up) named
    /// for what it is, with what to do instead.
    fn refused(&self, e: kube::Error) -> Error {
        let text = e.to_string();
        if text.contains("CommonName of client sending a request against gateway") {
            return Error::Other {
                message: format!(
                    "{}: etcd's authentication is on, and etcd refuses certificate users on its JSON gateway, which this client speaks",
                    self.endpoint
                ),
                hint: Some(
                    "use etcdctl (etcd's gRPC API, as Kamaji speaks it) for this DataStore, or turn its authentication off".into(),
                ),
            };
        }
        Error::other(format!("{}: {text}", self.endpoint))
    }

    fn range(prefix: &str) -> Value {
        json!({"key": STANDARD.encode(prefix.as_bytes()),
               "range_end": STANDARD.encode(prefix_range_end(prefix.as_bytes()))})
    }

    /// How many keys start with `prefix`.
    pub async fn count(&self, prefix: &str) -> Result<u64, Error> {
        let mut body = Etcd::range(prefix);
        body["count_only"] = json!(true);
        let v = self.call("/v3/kv/range", body).await?;
        Ok(int64(&v["count"]))
    }

    /// The first key in `[from, end)`, if any (keys only, one key read).
    async fn first_key(&self, from: &[u8], end: &[u8]) -> Result<Option<Vec<u8>>, Error> {
        let body = json!({"key": STANDARD.encode(from), "range_end": STANDARD.encode(end),
                          "limit": 1, "keys_only": true});
        let v = self.call("/v3/kv/range", body).await?;
        let Some(k) = v["kvs"][0]["key"].as_str() else {
            return Ok(None);
        };
        STANDARD.decode(k).map(Some).map_err(|e| {
            Error::other(format!(
                "{} answered a key that is not base64: {e}",
                self.endpoint
            ))
        })
    }

    /// The top-level prefixes (`/<segment>/`) of the keyspace and how many keys each holds, in
    /// key order: one keys-only read of a single key per prefix, then a count, so the cost is
    /// the number of prefixes, not of keys. At most `max`; the flag says whether more remain.
    pub async fn top_prefixes(&self, max: usize) -> Result<(Vec<(String, u64)>, bool), Error> {
        // Keys under a `/` prefix lie in ["/", "0"): '0' is the byte after '/'.
        let end = b"0".to_vec();
        let mut from = b"/".to_vec();
        let mut out = Vec::new();
        while let Some(key) = self.first_key(&from, &end).await? {
            match kcore::kamaji::orphans::top_prefix(&key) {
                Some(prefix) => {
                    if out.len() == max {
                        return Ok((out, true));
                    }
                    let keys = self.count(&prefix).await?;
                    from = prefix_range_end(prefix.as_bytes());
                    out.push((prefix, keys));
                }
                // A key with no second `/`: step past it alone.
                None => {
                    from = key;
                    from.push(0);
                }
            }
        }
        Ok((out, false))
    }

    /// One page of the keys in `[from, end of prefix)` with their values, at `revision` (0: the
    /// latest, whose number the page reports), at most `limit` keys. Reading every page at the
    /// first page's revision gives one consistent snapshot of the prefix, whatever its size.
    pub async fn range_page(
        &self,
        prefix: &str,
        from: &[u8],
        revision: i64,
        limit: u32,
    ) -> Result<Page, Error> {
        let end = prefix_range_end(prefix.as_bytes());
        let mut body = json!({"key": STANDARD.encode(from), "range_end": STANDARD.encode(end),
                              "limit": limit});
        if revision > 0 {
            body["revision"] = json!(revision);
        }
        let v = self.call("/v3/kv/range", body).await?;
        if let Some(e) = v["error"].as_str().or(v["message"].as_str()) {
            return Err(Error::Other {
                message: format!("{}: {e}", self.endpoint),
                hint: Some("etcd compacted the revision the read started at: run it again".into()),
            });
        }
        let decode = |s: &Value| {
            STANDARD
                .decode(s.as_str().unwrap_or_default())
                .map_err(|e| {
                    Error::other(format!(
                        "{} answered a range that is not base64: {e}",
                        self.endpoint
                    ))
                })
        };
        let mut kvs = Vec::new();
        for kv in v["kvs"].as_array().map(Vec::as_slice).unwrap_or_default() {
            kvs.push((decode(&kv["key"])?, decode(&kv["value"])?));
        }
        let revision = i64::try_from(int64(&v["header"]["revision"])).unwrap_or(i64::MAX);
        Ok(Page {
            kvs,
            revision,
            more: v["more"].as_bool().unwrap_or(false),
        })
    }

    /// The bytes of the keys and values under `prefix`, read page by page at one revision, at
    /// most `max_keys` keys; whether that was all of them.
    pub async fn prefix_bytes(&self, prefix: &str, max_keys: u64) -> Result<(u64, bool), Error> {
        let mut from = prefix.as_bytes().to_vec();
        let (mut revision, mut bytes, mut keys) = (0, 0u64, 0u64);
        loop {
            let page = self
                .range_page(prefix, &from, revision, kcore::kamaji::backup::PAGE)
                .await?;
            revision = page.revision;
            for (k, v) in &page.kvs {
                let n = u64::try_from(k.len().saturating_add(v.len())).unwrap_or(u64::MAX);
                bytes = bytes.saturating_add(n);
                keys = keys.saturating_add(1);
            }
            match page.kvs.last() {
                Some((k, _)) if page.more => {
                    if keys >= max_keys {
                        return Ok((bytes, false));
                    }
                    from = k.clone();
                    from.push(0);
                }
                _ => return Ok((bytes, true)),
            }
        }
    }

    /// Writes one key.
    pub async fn put(&self, key: &[u8], value: &[u8]) -> Result<(), Error> {
        let body = json!({"key": STANDARD.encode(key), "value": STANDARD.encode(value)});
        let v = self.call("/v3/kv/put", body).await?;
        match v["error"].as_str().or(v["message"].as_str()) {
            Some(e) => Err(Error::other(format!("{}: {e}", self.endpoint))),
            None => Ok(()),
        }
    }

    /// Removes every key that starts with `prefix`; returns how many went.
    pub async fn delete(&self, prefix: &str) -> Result<u64, Error> {
        let v = self.call("/v3/kv/deleterange", Etcd::range(prefix)).await?;
        Ok(int64(&v["deleted"]))
    }
}

/// etcd's JSON gateway writes int64 as a string and leaves out zero (proto3 JSON).
fn int64(v: &Value) -> u64 {
    v.as_str()
        .and_then(|s| s.parse().ok())
        .or_else(|| v.as_u64())
        .unwrap_or(0)
}

/// The first endpoint of a DataStore that answers, as a client; or what was seen: names that do
/// not resolve here (an in-cluster name) or endpoints that do not answer.
pub async fn dial(endpoints: &[String], creds: &EtcdCredentials) -> Result<Etcd, Reach> {
    let mut unresolved = Vec::new();
    let mut failed = Vec::new();
    for ep in endpoints {
        let resolved =
            match tokio::time::timeout(DIAL_TIMEOUT, tokio::net::lookup_host(ep.as_str())).await {
                Ok(Ok(mut addrs)) => addrs.next().is_some(),
                Ok(Err(_)) | Err(_) => false,
            };
        if !resolved {
            unresolved.push(ep.clone());
            continue;
        }
        let etcd = match Etcd::new(ep, creds).await {
            Ok(e) => e,
            Err(e) => {
                failed.push(e.to_string());
                continue;
            }
        };
        // A cheap read proves the TLS handshake, the client certificate and the gateway.
        match etcd.count("/").await {
            Ok(_) => return Ok(etcd),
            Err(e) => failed.push(e.to_string()),
        }
    }
    if !failed.is_empty() {
        return Err(Reach::Failed(failed.join("; ")));
    }
    Err(Reach::NotFromHere(format!(
        "{} does not resolve here",
        unresolved.join(", ")
    )))
}

/// What a DataStore says about a tenant's prefix from here.
pub async fn reach(endpoints: &[String], creds: &EtcdCredentials, prefix: &str) -> Reach {
    match dial(endpoints, creds).await {
        Ok(etcd) => match etcd.count(prefix).await {
            Ok(n) => Reach::Answered { tenant_keys: n },
            Err(e) => Reach::Failed(e.to_string()),
        },
        Err(r) => r,
    }
}

/// The PEM texts an etcd DataStore's tlsConfig names, inline or in Secrets read with `client`
/// (`None` for other drivers, or when the DataStore does not name all three).
pub async fn credentials(
    client: &kube::Client,
    d: &DataStore,
) -> Result<Option<EtcdCredentials>, Error> {
    let Some(tls) = d.tls.as_ref().filter(|_| d.is_etcd()) else {
        return Ok(None);
    };
    Ok(Some(EtcdCredentials {
        ca: content(client, &d.name, &tls.ca).await?,
        cert: content(client, &d.name, &tls.cert).await?,
        key: content(client, &d.name, &tls.key).await?,
    }))
}

/// One value of a DataStore's tlsConfig, as PEM bytes.
async fn content(client: &kube::Client, store: &str, c: &Content) -> Result<Vec<u8>, Error> {
    let fix = || Some("fix the DataStore's tlsConfig".to_string());
    match c {
        Content::Inline(s) => STANDARD.decode(s.trim()).map_err(|e| Error::Other {
            message: format!("DataStore {store}: a tlsConfig content is not base64: {e}"),
            hint: fix(),
        }),
        Content::Secret {
            namespace,
            name,
            key,
        } => {
            let api: Api<Secret> = Api::namespaced(client.clone(), namespace);
            let secret = api.get_opt(name).await.map_err(|e| Error::Other {
                message: format!("DataStore {store}: cannot read Secret {namespace}/{name}: {e}"),
                hint: Some(format!(
                    "grant get on secrets in {namespace} to whoever reads the DataStore"
                )),
            })?;
            let Some(secret) = secret else {
                return Err(Error::Other {
                    message: format!(
                        "DataStore {store} names Secret {namespace}/{name}, which does not exist"
                    ),
                    hint: fix(),
                });
            };
            secret
                .data
                .and_then(|mut d| d.remove(key))
                .map(|b| b.0)
                .ok_or_else(|| Error::Other {
                    message: format!(
                        "DataStore {store}: Secret {namespace}/{name} has no key {key:?}"
                    ),
                    hint: fix(),
                })
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn int64_reads_the_gateways_strings_and_missing_zeroes() {
        assert_eq!(int64(&json!("12")), 12);
        assert_eq!(int64(&json!(3)), 3);
        assert_eq!(int64(&Value::Null), 0);
    }

    #[test]
    fn a_range_is_the_prefix_and_its_end_in_base64() {
        let r = Etcd::range("/ns_t/");
        assert_eq!(r["key"], STANDARD.encode("/ns_t/"));
        assert_eq!(r["range_end"], STANDARD.encode("/ns_t0"));
    }

    #[tokio::test]
    async fn a_name_that_does_not_resolve_is_not_a_failure() {
        let creds = EtcdCredentials {
            ca: vec![],
            cert: vec![],
            key: vec![],
        };
        let r = reach(
            &["etcd-0.etcd.kamaji-system.svc.cluster.local.invalid:2379".into()],
            &creds,
            "/x/",
        )
        .await;
        assert!(
            matches!(r, Reach::NotFromHere(ref m) if m.contains("does not resolve here")),
            "{r:?}"
        );
    }
}
