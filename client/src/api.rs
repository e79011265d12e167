//! Thin API helpers that turn failures into typed errors: reads (get, list, paginated JSON
//! lists) and writes (server-side apply, merge and JSON patches, delete) with a field manager
//! and server-side dry run. Both plugins write only through here.

use kube::api::{Api, DeleteParams, DynamicObject, ListParams, Patch, PatchParams};
use kube::discovery::ApiResource;
use serde::Deserialize;
use serde_json::Value;

use crate::conn::Conn;
use crate::error::{Error, Op};
use kcore::text::closest_names;

mod whole;
pub use whole::{list_json_whole, list_whole};

/// A dynamic API for `ar` in `namespace` (all namespaces when `None`).
pub fn dynamic(conn: &Conn, ar: &ApiResource, namespace: Option<&str>) -> Api<DynamicObject> {
    match namespace {
        Some(ns) => Api::namespaced_with(conn.client.clone(), ns, ar),
        None => Api::all_with(conn.client.clone(), ar),
    }
}

/// Names of the objects of `ar` in `namespace` (all namespaces when `None`), sorted and
/// de-duplicated, from a metadata-only list.
pub async fn list_names(
    conn: &Conn,
    ar: &ApiResource,
    namespace: Option<&str>,
) -> Result<Vec<String>, Error> {
    let api = dynamic(conn, ar, namespace);
    let list = api
        .list_metadata(&ListParams::default())
        .await
        .map_err(|e| conn.error(e, &Op::on("list", ar).in_namespace(namespace)))?;
    let mut names: Vec<String> = list
        .items
        .into_iter()
        .filter_map(|o| o.metadata.name)
        .collect();
    names.sort();
    names.dedup();
    Ok(names)
}

/// A name goes into the request path unescaped: refuse one the server could not hold before it
/// bends the URL (`c2?` would get `c2`).
fn check_name(ar: &ApiResource, name: &str) -> Result<(), Error> {
    Ok(kcore::names::check_object_name(&ar.kind, name)?)
}

/// Gets one object; when it does not exist, the error offers the closest existing names.
pub async fn get_or_suggest(
    conn: &Conn,
    ar: &ApiResource,
    namespace: &str,
    name: &str,
) -> Result<DynamicObject, Error> {
    check_name(ar, name)?;
    let api = dynamic(conn, ar, Some(namespace));
    let op = Op::on("get", ar).in_namespace(Some(namespace)).named(name);
    match api.get_opt(name).await {
        Ok(Some(obj)) => Ok(obj),
        Ok(None) => {
            // Listing may be forbidden where getting is not: then just say "not found".
            let names = list_names(conn, ar, Some(namespace))
                .await
                .unwrap_or_default();
            Err(Error::NotFound {
                kind: ar.kind.clone(),
                name: name.to_string(),
                namespace: Some(namespace.to_string()),
                suggestions: closest_names(name, names.iter().map(String::as_str)),
            })
        }
        Err(e) => Err(conn.error(e, &op)),
    }
}

/// Gets an object, `None` when it does not exist.
pub async fn get_opt(
    conn: &Conn,
    ar: &ApiResource,
    namespace: Option<&str>,
    name: &str,
) -> Result<Option<DynamicObject>, Error> {
    check_name(ar, name)?;
    dynamic(conn, ar, namespace)
        .get_opt(name)
        .await
        .map_err(|e| conn.error(e, &Op::on("get", ar).in_namespace(namespace).named(name)))
}

/// The CustomResourceDefinition `name`, `None` when it does not exist.
pub async fn crd(
    conn: &Conn,
    name: &str,
) -> Result<
    Option<k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition>,
    Error,
>{
    use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
    let api: Api<CustomResourceDefinition> = Api::all(conn.client.clone());
    let op = Op::new(
        "get",
        "apiextensions.k8s.io",
        "customresourcedefinitions",
        "CustomResourceDefinition",
    )
    .named(name);
    api.get_opt(name).await.map_err(|e| conn.error(e, &op))
}

/// Gets an object as the server sent it (plain JSON, no round trip through `DynamicObject`),
/// `None` when it does not exist.
pub async fn get_json_opt(
    conn: &Conn,
    ar: &ApiResource,
    namespace: Option<&str>,
    name: &str,
) -> Result<Option<Value>, Error> {
    use kube::Resource;
    check_name(ar, name)?;
    let op = Op::on("get", ar).in_namespace(namespace).named(name);
    let url = DynamicObject::url_path(ar, namespace);
    let req = kube::core::Request::new(url.as_str())
        .get(name, &Default::default())
        .map_err(|e| Error::other(format!("cannot build the get request: {e}")))?;
    match conn.client.request::<Value>(req).await {
        Ok(mut v) => {
            if let Some(m) = v.get_mut("metadata").and_then(Value::as_object_mut) {
                m.remove("managedFields");
            }
            Ok(Some(v))
        }
        Err(kube::Error::Api(s)) if s.code == 404 => Ok(None),
        Err(e) => Err(conn.error(e, &op)),
    }
}

/// Lists objects (`namespace` None = all namespaces), optionally by label selector. One
/// request: for fleet-sized lists use [`list_json`], which pages.
pub async fn list(
    conn: &Conn,
    ar: &ApiResource,
    namespace: Option<&str>,
    selector: Option<&str>,
) -> Result<Vec<DynamicObject>, Error> {
    let mut lp = ListParams::default();
    if let Some(s) = selector {
        lp = lp.labels(s);
    }
    dynamic(conn, ar, namespace)
        .list(&lp)
        .await
        .map(|l| l.items)
        .map_err(|e| conn.error(e, &Op::on("list", ar).in_namespace(namespace)))
}

/// [`list`], each object as JSON ([`kcore::fields::object_json`]).
pub async fn list_values(
    conn: &Conn,
    ar: &ApiResource,
    namespace: Option<&str>,
    selector: Option<&str>,
) -> Result<Vec<Value>, Error> {
    let objects = list(conn, ar, namespace, selector).await?;
    Ok(objects.iter().map(kcore::fields::object_json).collect())
}

/// How a write is sent: the field manager (`kubectl-capi`, `kubectl-kamaji`), server-side dry
/// run (`dryRun=All`: validated, not stored), and whether server-side apply takes over fields
/// another manager owns.
#[derive(Clone, Copy, Debug)]
pub struct Write<'a> {
    pub manager: &'a str,
    pub dry_run: bool,
    pub force: bool,
}

impl Write<'_> {
    fn params(&self) -> PatchParams {
        PatchParams {
            field_manager: Some(self.manager.to_string()),
            dry_run: self.dry_run,
            ..Default::default()
        }
    }
}

/// The namespace and name of `obj`, from its metadata, the name checked ([`check_name`]).
fn object_target<'o>(
    ar: &ApiResource,
    obj: &'o Value,
) -> Result<(Option<&'o str>, &'o str), Error> {
    let ns = obj["metadata"]["namespace"].as_str();
    let name = obj["metadata"]["name"].as_str().unwrap_or_default();
    check_name(ar, name)?;
    Ok((ns, name))
}

/// Server-side applies `obj` (namespace and name from its metadata) as `ar`.
pub async fn apply(
    conn: &Conn,
    ar: &ApiResource,
    obj: &Value,
    w: Write<'_>,
) -> Result<DynamicObject, Error> {
    let (ns, name) = object_target(ar, obj)?;
    let mut pp = PatchParams::apply(w.manager);
    pp.dry_run = w.dry_run;
    pp.force = w.force;
    dynamic(conn, ar, ns)
        .patch(name, &pp, &Patch::Apply(obj))
        .await
        .map_err(|e| match e {
            // Server-side apply conflicts: another field manager owns a field we set.
            kube::Error::Api(s) if s.code == 409 && s.message.contains("Apply failed") => {
                Error::Other {
                    message: format!("{} {name}: {}", ar.kind, s.message),
                    hint: Some(
                        "another field manager owns these fields; pass --force-conflicts to take them over"
                            .into(),
                    ),
                }
            }
            e => conn.error(e, &Op::on("patch", ar).in_namespace(ns).named(name)),
        })
}

/// Creates `obj` (namespace and name from its metadata) as `ar`; with `w.dry_run`, a server
/// dry run that runs admission (webhooks included) and persists nothing.
pub async fn create(
    conn: &Conn,
    ar: &ApiResource,
    obj: &Value,
    w: Write<'_>,
) -> Result<DynamicObject, Error> {
    let (ns, name) = object_target(ar, obj)?;
    let pp = kube::api::PostParams {
        dry_run: w.dry_run,
        field_manager: Some(w.manager.to_string()),
    };
    let body: DynamicObject = serde_json::from_value(obj.clone()).map_err(|e| {
        Error::other(format!(
            "internal: {} {name} is not an object: {e}",
            ar.kind
        ))
    })?;
    dynamic(conn, ar, ns)
        .create(&pp, &body)
        .await
        .map_err(|e| conn.error(e, &Op::on("create", ar).in_namespace(ns).named(name)))
}

/// A JSON merge patch.
pub async fn merge_patch(
    conn: &Conn,
    ar: &ApiResource,
    namespace: &str,
    name: &str,
    patch: &Value,
    w: Write<'_>,
) -> Result<DynamicObject, Error> {
    merge_patch_at(conn, ar, namespace, name, patch, w, false).await
}

/// Like [`merge_patch`], to the object's status subresource.
pub async fn merge_patch_status(
    conn: &Conn,
    ar: &ApiResource,
    namespace: &str,
    name: &str,
    patch: &Value,
    w: Write<'_>,
) -> Result<DynamicObject, Error> {
    merge_patch_at(conn, ar, namespace, name, patch, w, true).await
}

async fn merge_patch_at(
    conn: &Conn,
    ar: &ApiResource,
    namespace: &str,
    name: &str,
    patch: &Value,
    w: Write<'_>,
    status: bool,
) -> Result<DynamicObject, Error> {
    check_name(ar, name)?;
    let api = dynamic(conn, ar, Some(namespace));
    let (params, patch) = (w.params(), Patch::Merge(patch));
    let res = match status {
        true => api.patch_status(name, &params, &patch).await,
        false => api.patch(name, &params, &patch).await,
    };
    res.map_err(|e| {
        let shown = match status {
            true => format!("{name}/status"),
            false => name.to_string(),
        };
        let op = Op::on("patch", ar)
            .in_namespace(Some(namespace))
            .named(&shown);
        conn.error(e, &op)
    })
}

/// A planned change ([`kcore::plan::ObjectPatch`]): its RFC 6902 JSON patch, or for the scale
/// subresource its merge patch.
pub async fn patch(
    conn: &Conn,
    ar: &ApiResource,
    namespace: &str,
    p: &kcore::plan::ObjectPatch,
    w: Write<'_>,
) -> Result<(), Error> {
    let op = Op::on("patch", ar)
        .in_namespace(Some(namespace))
        .named(&p.name);
    let api = dynamic(conn, ar, Some(namespace));
    let res = if p.subresource.as_deref() == Some("scale") {
        let mp = p
            .merge_patch
            .clone()
            .unwrap_or_else(|| serde_json::json!({}));
        api.patch_scale(&p.name, &w.params(), &Patch::Merge(mp))
            .await
            .map(|_| ())
    } else {
        // The JSON patch type is kube's own (json-patch crate), inferred from the variant.
        let jp = serde_json::from_value(p.json_patch.clone())
            .map_err(|e| Error::other(format!("internal: bad JSON patch: {e}")))?;
        api.patch(&p.name, &w.params(), &Patch::<()>::Json(jp))
            .await
            .map(|_| ())
    };
    res.map_err(|e| conn.error(e, &op))
}

/// Deletes an object; one already gone is not an error (a re-run finishes the job).
pub async fn delete(
    conn: &Conn,
    ar: &ApiResource,
    namespace: &str,
    name: &str,
) -> Result<(), Error> {
    check_name(ar, name)?;
    delete_if_present(conn, ar, Some(namespace), name, false)
        .await
        .map(|_| ())
}

/// Deletes an object the server named (its name is not checked here; `namespace` is `None`
/// for a cluster-scoped one), validated and not stored with `dry_run`; `Ok(false)` when it was
/// already gone.
pub async fn delete_if_present(
    conn: &Conn,
    ar: &ApiResource,
    namespace: Option<&str>,
    name: &str,
    dry_run: bool,
) -> Result<bool, Error> {
    let dp = DeleteParams {
        dry_run,
        ..Default::default()
    };
    match dynamic(conn, ar, namespace).delete(name, &dp).await {
        Ok(_) => Ok(true),
        Err(kube::Error::Api(s)) if s.code == 404 => Ok(false),
        Err(e) => {
            let op = Op::on("delete", ar).in_namespace(namespace).named(name);
            Err(conn.error(e, &op))
        }
    }
}

/// Items per page of [`list_json`] (kubectl's `--chunk-size` default).
pub const PAGE_SIZE: u32 = 500;

/// An object as plain JSON without `metadata.managedFields`: they are often the bulk of an
/// object and nobody here reads them, so they are skipped while parsing, never allocated.
struct Item(Value);

/// An object's `metadata` without `managedFields`.
struct Metadata(Value);

/// Parses a JSON object, skipping the value of key `skip` and parsing that of key `nested` as
/// `N`; `what` is the "expected ..." of serde's errors.
struct ObjectWithout<N> {
    what: &'static str,
    skip: &'static str,
    nested: Option<&'static str>,
    nested_as: std::marker::PhantomData<N>,
}

impl<'de, N: Deserialize<'de> + Into<Value>> serde::de::Visitor<'de> for ObjectWithout<N> {
    type Value = Value;
    fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        f.write_str(self.what)
    }
    fn visit_map<A: serde::de::MapAccess<'de>>(self, mut map: A) -> Result<Value, A::Error> {
        let mut out = serde_json::Map::new();
        while let Some(key) = map.next_key::<String>()? {
            if key == self.skip {
                map.next_value::<serde::de::IgnoredAny>()?;
            } else if self.nested == Some(key.as_str()) {
                let v: N = map.next_value()?;
                out.insert(key, v.into());
            } else {
                let v: Value = map.next_value()?;
                out.insert(key, v);
            }
        }
        Ok(Value::Object(out))
    }
}

impl From<Metadata> for Value {
    fn from(m: Metadata) -> Value {
        m.0
    }
}

impl<'de> Deserialize<'de> for Item {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        // No top-level key is skipped; `metadata` is parsed without managedFields.
        d.deserialize_map(ObjectWithout::<Metadata> {
            what: "an object",
            skip: "",
            nested: Some("metadata"),
            nested_as: std::marker::PhantomData,
        })
        .map(Item)
    }
}

impl<'de> Deserialize<'de> for Metadata {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        d.deserialize_map(ObjectWithout::<Value> {
            what: "an object's metadata",
            skip: "managedFields",
            nested: None,
            nested_as: std::marker::PhantomData,
        })
        .map(Metadata)
    }
}

/// Lists every object of `ar` in `namespace` (all namespaces when `None`) as plain JSON, in
/// pages of [`PAGE_SIZE`] (`limit` + `continue`): one paginated LIST, whatever the fleet size.
/// `lp` carries selectors (and may lower the page size with `limit`); the continue token is
/// managed here. Items keep any
/// field the server returns (forks' extra fields included). A kind whose API is not served
/// lists as an error; callers decide whether that matters.
pub async fn list_json(
    conn: &Conn,
    ar: &ApiResource,
    namespace: Option<&str>,
    lp: &ListParams,
) -> Result<Vec<Value>, Error> {
    list_json_map(conn, ar, namespace, lp, |v| v).await
}

/// Like [`list_json`], passing every item through `keep` as each page arrives (to drop the
/// fields a caller never reads, which bounds memory on big fleets).
pub async fn list_json_map(
    conn: &Conn,
    ar: &ApiResource,
    namespace: Option<&str>,
    lp: &ListParams,
    keep: impl Fn(Value) -> Value,
) -> Result<Vec<Value>, Error> {
    list_pages(conn, ar, namespace, lp, false, keep).await
}

/// Like [`list_json`], metadata only (`PartialObjectMetadataList`): names, labels,
/// annotations, owner references. Far cheaper for the server to send when a join needs no
/// more.
pub async fn list_metadata_json(
    conn: &Conn,
    ar: &ApiResource,
    namespace: Option<&str>,
    lp: &ListParams,
) -> Result<Vec<Value>, Error> {
    list_pages(conn, ar, namespace, lp, true, |v| v).await
}

async fn list_pages(
    conn: &Conn,
    ar: &ApiResource,
    namespace: Option<&str>,
    lp: &ListParams,
    metadata_only: bool,
    keep: impl Fn(Value) -> Value,
) -> Result<Vec<Value>, Error> {
    let mut items = Vec::new();
    list_json_each(conn, ar, namespace, lp, metadata_only, |v| {
        items.push(keep(v))
    })
    .await?;
    Ok(items)
}

/// Like [`list_json`] (or [`list_metadata_json`] with `metadata_only`), each item handed to
/// `each` as its page arrives instead of collected: for a caller that keeps a few fields of
/// each object of a fleet-sized kind.
pub async fn list_json_each(
    conn: &Conn,
    ar: &ApiResource,
    namespace: Option<&str>,
    lp: &ListParams,
    metadata_only: bool,
    mut each: impl FnMut(Value),
) -> Result<(), Error> {
    each_item(conn, ar, namespace, lp, metadata_only, |Item(v)| each(v)).await
}

/// Reads a LIST page by page ([`each_page`]), handing each item, parsed as `T`, to `each` as
/// its page arrives.
async fn each_item<T: serde::de::DeserializeOwned>(
    conn: &Conn,
    ar: &ApiResource,
    namespace: Option<&str>,
    lp: &ListParams,
    metadata_only: bool,
    mut each: impl FnMut(T),
) -> Result<(), Error> {
    each_page(conn, ar, namespace, lp, metadata_only, |text| {
        let page: TypedList<T> = parse_page(ar, &text)?;
        page.items.into_iter().for_each(&mut each);
        Ok(page.metadata.continue_)
    })
    .await
}

/// Reads a LIST page by page ([`PAGE_SIZE`] items, following `continue`), handing each page's
/// text to `take`, which returns the page's continue token: the one pager behind
/// [`list_json`] and [`list_as`].
async fn each_page(
    conn: &Conn,
    ar: &ApiResource,
    namespace: Option<&str>,
    lp: &ListParams,
    metadata_only: bool,
    mut take: impl FnMut(String) -> Result<Option<String>, Error>,
) -> Result<(), Error> {
    let op = Op::on("list", ar).in_namespace(namespace);
    let mut lp = lp.clone();
    // A caller may ask for smaller pages (objects of megabytes, as CRDs with their schemas).
    lp.limit = Some(lp.limit.map_or(PAGE_SIZE, |l| l.clamp(1, PAGE_SIZE)));
    lp.continue_token = None;
    loop {
        let req = list_request(ar, namespace, &lp, metadata_only)?;
        let text = conn
            .client
            .request_text(req)
            .await
            .map_err(|e| conn.error(e, &op))?;
        match take(text)?.filter(|c| !c.is_empty()) {
            Some(c) => lp.continue_token = Some(c),
            None => return Ok(()),
        }
    }
}

/// The LIST request of `ar` in `namespace` with `lp`'s selectors, limit and continue token
/// (`metadata_only`: a `PartialObjectMetadataList`).
fn list_request(
    ar: &ApiResource,
    namespace: Option<&str>,
    lp: &ListParams,
    metadata_only: bool,
) -> Result<http::Request<Vec<u8>>, Error> {
    use kube::Resource;
    let url = DynamicObject::url_path(ar, namespace);
    let r = kube::core::Request::new(url.as_str());
    match metadata_only {
        true => r.list_metadata(lp),
        false => r.list(lp),
    }
    .map_err(|e| Error::other(format!("cannot build the list request: {e}")))
}

fn parse_page<P: serde::de::DeserializeOwned>(ar: &ApiResource, text: &str) -> Result<P, Error> {
    serde_json::from_str(text)
        .map_err(|e| Error::other(format!("{}: cannot read the list: {e}", ar.kind)))
}

/// One page of a LIST, its items as `T`.
#[derive(Deserialize)]
#[serde(bound(deserialize = "T: serde::de::DeserializeOwned"))]
struct TypedList<T> {
    #[serde(default)]
    metadata: k8s_openapi::apimachinery::pkg::apis::meta::v1::ListMeta,
    /// An empty metadata-only list (PartialObjectMetadataList) comes back as `"items": null`.
    #[serde(default = "Vec::new", deserialize_with = "null_as_empty_of")]
    items: Vec<T>,
}

/// An empty metadata-only list (PartialObjectMetadataList) comes back as `"items": null`.
fn null_as_empty_of<'de, D: serde::Deserializer<'de>, T: serde::de::DeserializeOwned>(
    d: D,
) -> Result<Vec<T>, D::Error> {
    Ok(Option::<Vec<T>>::deserialize(d)?.unwrap_or_default())
}

/// Like [`list_json`] (or [`list_metadata_json`] with `metadata_only`), each item parsed straight
/// into `T`, page by page. A narrow `T` (only the fields a caller reads) skips everything else
/// while parsing, `managedFields` above all, so a fleet-sized LIST costs little more memory
/// than the rows it becomes.
pub async fn list_as<T: serde::de::DeserializeOwned>(
    conn: &Conn,
    ar: &ApiResource,
    namespace: Option<&str>,
    lp: &ListParams,
    metadata_only: bool,
) -> Result<Vec<T>, Error> {
    let mut items = Vec::new();
    each_item(conn, ar, namespace, lp, metadata_only, |t| items.push(t)).await?;
    Ok(items)
}

/// Like [`list_as`], each item handed to `each` as its page arrives instead of collected: for a
/// caller that keeps a little of each (a Secret's certificate dates, not its keys).
pub async fn list_each<T: serde::de::DeserializeOwned>(
    conn: &Conn,
    ar: &ApiResource,
    namespace: Option<&str>,
    lp: &ListParams,
    each: impl FnMut(T),
) -> Result<(), Error> {
    each_item(conn, ar, namespace, lp, false, each).await
}

#[cfg(test)]
mod raw_list_tests {
    /// One page of a LIST as plain JSON.
    type RawList = super::TypedList<super::Item>;

    #[test]
    fn empty_metadata_lists_have_null_items() {
        let l: RawList = serde_json::from_str(
            r#"{"kind":"PartialObjectMetadataList","apiVersion":"meta.k8s.io/v1","metadata":{"resourceVersion":"1"},"items":null}"#,
        )
        .unwrap();
        assert!(l.items.is_empty());
        let l: RawList = serde_json::from_str(r#"{"metadata":{},"items":[{"a":1}]}"#).unwrap();
        assert_eq!(l.items.len(), 1);
    }

    #[test]
    fn items_parse_without_managed_fields() {
        let l: RawList = serde_json::from_str(
            r#"{"metadata":{"continue":"c"},"items":[{"kind":"K","metadata":{"name":"a","managedFields":[{"manager":"m","fieldsV1":{"f:spec":{}}}],"labels":{"x":"y"}},"spec":{"managedFields":1}}]}"#,
        )
        .unwrap();
        assert_eq!(l.metadata.continue_.as_deref(), Some("c"));
        assert_eq!(
            l.items[0].0,
            serde_json::json!({"kind":"K","metadata":{"name":"a","labels":{"x":"y"}},"spec":{"managedFields":1}})
        );
    }
}
