//! One LIST in one response, parsed as it streams in.
//!
//! The API server answers a consistent LIST without `limit` from its watch cache. The
//! `continue` pages of a paginated one may come from etcd instead: kube-apiserver v1.36 on an
//! idle cluster took 0.25 s per 500 Machines for each `continue` page against 0.06 s for the
//! first, so a cluster of 5,000 Machines read 3x faster whole. Read whole, the response is
//! parsed while it arrives, one item at a time, each passed through `keep` at once: memory
//! holds what `keep` returns, not the response text nor the full objects.

use std::io::Read;
use std::marker::PhantomData;

use futures::{AsyncBufRead, AsyncBufReadExt};
use kube::api::ListParams;
use kube::discovery::ApiResource;

use serde::Deserialize;
use serde::de::{DeserializeSeed, IgnoredAny, MapAccess, SeqAccess, Visitor};
use serde_json::Value;
use tokio::sync::mpsc;

use super::Item;
use crate::conn::Conn;
use crate::error::{Error, Op};

/// Response chunks in flight between the reader and the parser.
const CHUNKS_IN_FLIGHT: usize = 8;

/// Sends the LIST without `limit` and returns its body as it streams in.
async fn open(
    conn: &Conn,
    ar: &ApiResource,
    namespace: Option<&str>,
    lp: &ListParams,
    metadata_only: bool,
) -> Result<impl AsyncBufRead + use<>, Error> {
    let op = Op::on("list", ar).in_namespace(namespace);
    let mut lp = lp.clone();
    lp.limit = None;
    lp.continue_token = None;
    let req = super::list_request(ar, namespace, &lp, metadata_only)?;
    conn.client
        .request_stream(req)
        .await
        .map_err(|e| conn.error(e, &op))
}

/// Like [`super::list_json_each`], in one response rather than pages: each item, as plain JSON
/// without `managedFields`, is turned into what the caller keeps by `keep` as it is parsed
/// (`metadata_only`: the `PartialObjectMetadataList`).
pub async fn list_json_whole<U, F>(
    conn: &Conn,
    ar: &ApiResource,
    namespace: Option<&str>,
    lp: &ListParams,
    metadata_only: bool,
    keep: F,
) -> Result<Vec<U>, Error>
where
    U: Send + 'static,
    F: Fn(Value) -> U + Send + 'static,
{
    list_whole(conn, ar, namespace, lp, metadata_only, move |Item(v)| {
        keep(v)
    })
    .await
}

/// Like [`super::list_as`], in one response rather than pages, each item parsed as `T` and
/// turned into what the caller keeps by `keep` as it arrives (`metadata_only`: the
/// `PartialObjectMetadataList`).
pub async fn list_whole<T, U, F>(
    conn: &Conn,
    ar: &ApiResource,
    namespace: Option<&str>,
    lp: &ListParams,
    metadata_only: bool,
    keep: F,
) -> Result<Vec<U>, Error>
where
    T: serde::de::DeserializeOwned,
    U: Send + 'static,
    F: Fn(T) -> U + Send + 'static,
{
    let body = open(conn, ar, namespace, lp, metadata_only).await?;
    let (tx, rx) = mpsc::channel::<std::io::Result<Vec<u8>>>(CHUNKS_IN_FLIGHT);
    let kind = ar.kind.clone();
    let parser = tokio::task::spawn_blocking(move || {
        let reader = std::io::BufReader::new(Chunks::new(rx));
        let mut de = serde_json::Deserializer::from_reader(reader);
        let items = ListSeed::new(keep).deserialize(&mut de)?;
        de.end()?;
        Ok::<_, serde_json::Error>(items)
    });
    let pump = async move {
        let mut body = std::pin::pin!(body);
        loop {
            let chunk = match body.as_mut().fill_buf().await {
                Ok([]) => return,
                Ok(b) => Ok(b.to_vec()),
                Err(e) => Err(e),
            };
            let n = chunk.as_ref().map_or(0, Vec::len);
            let failed = chunk.is_err();
            // The parser stopped (it failed, or it is done): nothing more to hand it.
            if tx.send(chunk).await.is_err() || failed {
                return;
            }
            body.as_mut().consume(n);
        }
    };
    let ((), parsed) = tokio::join!(pump, parser);
    parsed
        .map_err(|e| Error::other(format!("{kind}: the list reader stopped: {e}")))?
        .map_err(|e| Error::other(format!("{kind}: cannot read the list: {e}")))
}

/// One LIST response (no `limit`) as the chunks it arrived in, for a caller that parses it
/// later with [`whole_items`]: the text is a fraction of the size of its parsed objects, and
/// kept in its chunks it is never copied into a growing buffer (twice its size at peak).
pub struct WholeText(Vec<Vec<u8>>);

/// Reads a LIST into a [`WholeText`].
pub async fn list_whole_text(
    conn: &Conn,
    ar: &ApiResource,
    namespace: Option<&str>,
    lp: &ListParams,
) -> Result<WholeText, Error> {
    let body = open(conn, ar, namespace, lp, false).await?;
    let mut body = std::pin::pin!(body);
    let mut chunks = Vec::new();
    loop {
        let chunk = match body.as_mut().fill_buf().await {
            Ok([]) => return Ok(WholeText(chunks)),
            Ok(c) => c.to_vec(),
            Err(e) => {
                return Err(Error::other(format!(
                    "{}: the list was cut off: {e}",
                    ar.kind
                )));
            }
        };
        let n = chunk.len();
        chunks.push(chunk);
        body.as_mut().consume(n);
    }
}

/// The items of a [`WholeText`], each parsed as `T` and turned into what the caller keeps by
/// `keep` before the next is parsed.
pub fn whole_items<T, U>(
    ar: &ApiResource,
    text: WholeText,
    keep: impl Fn(T) -> U,
) -> Result<Vec<U>, Error>
where
    T: serde::de::DeserializeOwned,
{
    // One contiguous copy, made as each chunk is dropped (peak: the text and one chunk), so
    // that serde_json parses a slice: several times faster than through `Read`.
    let len = text.0.iter().map(Vec::len).sum();
    let mut bytes = Vec::with_capacity(len);
    for c in text.0 {
        bytes.extend_from_slice(&c);
    }
    let mut de = serde_json::Deserializer::from_slice(&bytes);
    ListSeed::new(keep)
        .deserialize(&mut de)
        .and_then(|items| de.end().map(|()| items))
        .map_err(|e| Error::other(format!("{}: cannot read the list: {e}", ar.kind)))
}

/// Like [`whole_items`], each item plain JSON without `metadata.managedFields` (skipped while
/// parsing, as [`super::list_json`] skips them).
pub fn whole_json_items<U>(
    ar: &ApiResource,
    text: WholeText,
    keep: impl Fn(Value) -> U,
) -> Result<Vec<U>, Error> {
    whole_items(ar, text, |Item(v)| keep(v))
}

/// A blocking `Read` over the chunks the async side of [`list_whole`] sends, one at a time;
/// the end of input when it stops sending.
struct Chunks {
    rx: mpsc::Receiver<std::io::Result<Vec<u8>>>,
    chunk: Vec<u8>,
    at: usize,
}

impl Chunks {
    fn new(rx: mpsc::Receiver<std::io::Result<Vec<u8>>>) -> Self {
        Chunks {
            rx,
            chunk: Vec::new(),
            at: 0,
        }
    }
}

impl Read for Chunks {
    fn read(&mut self, out: &mut [u8]) -> std::io::Result<usize> {
        while self.at >= self.chunk.len() {
            match self.rx.blocking_recv() {
                Some(Ok(c)) => (self.chunk, self.at) = (c, 0),
                Some(Err(e)) => return Err(e),
                None => return Ok(0),
            }
        }
        let n = out.len().min(self.chunk.len() - self.at);
        out[..n].copy_from_slice(&self.chunk[self.at..self.at + n]);
        self.at += n;
        Ok(n)
    }
}

/// The list object: `items` parsed as `T` and through `keep`, every other key skipped.
struct ListSeed<T, F> {
    keep: F,
    item: PhantomData<fn() -> T>,
}

impl<T, F> ListSeed<T, F> {
    fn new(keep: F) -> Self {
        ListSeed {
            keep,
            item: PhantomData,
        }
    }
}

impl<'de, T: Deserialize<'de>, U, F: Fn(T) -> U> DeserializeSeed<'de> for ListSeed<T, F> {
    type Value = Vec<U>;
    fn deserialize<D: serde::Deserializer<'de>>(self, d: D) -> Result<Vec<U>, D::Error> {
        d.deserialize_map(self)
    }
}

impl<'de, T: Deserialize<'de>, U, F: Fn(T) -> U> Visitor<'de> for ListSeed<T, F> {
    type Value = Vec<U>;
    fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        f.write_str("a list")
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Vec<U>, A::Error> {
        let mut items = Vec::new();
        while let Some(key) = map.next_key::<String>()? {
            if key == "items" {
                items = map.next_value_seed(ItemsSeed(&self))?;
            } else {
                map.next_value::<IgnoredAny>()?;
            }
        }
        Ok(items)
    }
}

/// `items`: an array (or `null`, as an empty list comes back), each through `keep`.
struct ItemsSeed<'a, T, F>(&'a ListSeed<T, F>);

impl<'de, T: Deserialize<'de>, U, F: Fn(T) -> U> DeserializeSeed<'de> for ItemsSeed<'_, T, F> {
    type Value = Vec<U>;
    fn deserialize<D: serde::Deserializer<'de>>(self, d: D) -> Result<Vec<U>, D::Error> {
        d.deserialize_any(self)
    }
}

impl<'de, T: Deserialize<'de>, U, F: Fn(T) -> U> Visitor<'de> for ItemsSeed<'_, T, F> {
    type Value = Vec<U>;
    fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        f.write_str("the list's items")
    }
    fn visit_unit<E: serde::de::Error>(self) -> Result<Vec<U>, E> {
        Ok(Vec::new())
    }
    fn visit_none<E: serde::de::Error>(self) -> Result<Vec<U>, E> {
        Ok(Vec::new())
    }
    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Vec<U>, A::Error> {
        let mut out = Vec::new();
        while let Some(item) = seq.next_element::<T>()? {
            out.push((self.0.keep)(item));
        }
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(text: &str, keep: fn(Value) -> Value) -> Result<Vec<Value>, serde_json::Error> {
        let mut de = serde_json::Deserializer::from_str(text);
        let v = ListSeed::new(move |Item(v)| keep(v)).deserialize(&mut de)?;
        de.end()?;
        Ok(v)
    }

    #[test]
    fn items_pass_through_keep_and_the_rest_is_skipped() {
        let text = r#"{"kind":"MachineList","metadata":{"resourceVersion":"9"},
            "items":[{"metadata":{"name":"a","managedFields":[{"x":1}]},"status":{"big":"x"}},
                     {"metadata":{"name":"b"}}],"extra":{"deep":[1,2,{"x":null}]}}"#;
        let drop_status = |mut v: Value| {
            v.as_object_mut().map(|m| m.remove("status"));
            v
        };
        let items = parse(text, drop_status).unwrap();
        assert_eq!(
            items,
            [
                serde_json::json!({"metadata": {"name": "a"}}),
                serde_json::json!({"metadata": {"name": "b"}})
            ]
        );
        assert!(parse(r#"{"items":null}"#, |v| v).unwrap().is_empty());
        assert!(parse(r#"{"metadata":{}}"#, |v| v).unwrap().is_empty());
        assert!(parse(r#"{"items":[{"a":1}"#, |v| v).is_err(), "truncated");
        assert!(
            parse(r#"{"items":[1]}"#, |v| v).is_err(),
            "an item is an object"
        );
    }

    #[test]
    fn the_reader_joins_chunks_and_ends_when_the_sender_stops() {
        let (tx, rx) = mpsc::channel(4);
        for c in [&b"{\"items\":[{\"a\""[..], b":1},", b"{\"b\":2}]}"] {
            tx.try_send(Ok(c.to_vec())).unwrap();
        }
        drop(tx);
        let r = Chunks::new(rx);
        let mut de = serde_json::Deserializer::from_reader(r);
        let items = ListSeed::new(|v: Value| v).deserialize(&mut de).unwrap();
        assert_eq!(items.len(), 2);
        de.end().unwrap();

        let (tx, rx) = mpsc::channel(1);
        tx.try_send(Err(std::io::Error::other("reset"))).unwrap();
        let mut r = Chunks::new(rx);
        assert!(r.read(&mut [0u8; 8]).is_err());
    }
}
