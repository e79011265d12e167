//! One LIST in one response, parsed as it streams in.
//!
//! The API server answers a consistent LIST without `limit` from its watch cache. The
//! `continue` pages of a paginated one may come from etcd instead: kube-apiserver v1.36 on an
//! idle cluster took 0.25 s per 500 Machines for each `continue` page against 0.06 s for the
//! first, so a cluster of 5,000 Machines read 3x faster whole. Read whole, the response is
//! parsed while it arrives, one item at a time, each passed through `keep` at once: memory
//! holds what `keep` returns, not the response text nor the full objects.

use futures::{AsyncBufRead, AsyncBufReadExt};
use kube::api::ListParams;
use kube::discovery::ApiResource;

use serde_json::Value;

use super::Item;
use crate::conn::Conn;
use crate::error::{Error, Op};

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
    let mut body = std::pin::pin!(body);
    let mut splitter = Splitter::default();
    let mut items = Vec::new();
    // Each item's text is cut out ([`Splitter`]) and parsed as a slice as soon as its last byte
    // arrives, here rather than on a thread of its own: serde_json parses a slice several
    // times faster than through `Read`, and handing each chunk to another thread cost a
    // wake-up per chunk. `make bench` (`hosts` over 16,000 Machines, 10,000 hosts and their
    // ByoMachines: 125 MB of JSON) saw the parse through `Read` and those wake-ups take CPU
    // the API server needed to send the LISTs on two cores. Memory holds one item's text.
    loop {
        let chunk = match body.fill_buf().await {
            Ok([]) => break,
            Ok(c) => c,
            Err(e) => {
                return Err(Error::other(format!(
                    "{}: the list was cut off: {e}",
                    ar.kind
                )));
            }
        };
        let n = chunk.len();
        splitter
            .feed(chunk, |text| {
                items.push(keep(serde_json::from_slice(text)?));
                Ok(())
            })
            .map_err(|e| Error::other(format!("{}: cannot read the list: {e}", ar.kind)))?;
        body.consume_unpin(n);
    }
    splitter
        .finish()
        .map_err(|e| Error::other(format!("{}: cannot read the list: {e}", ar.kind)))?;
    Ok(items)
}

/// Why a LIST response could not be read.
#[derive(Debug, thiserror::Error)]
enum SplitError {
    #[error("{0}")]
    Item(#[from] serde_json::Error),
    #[error("{0}")]
    Shape(&'static str),
}

/// Cuts a LIST response, fed in chunks, into the text of each element of its top-level
/// `items` array, skipping every other key. It follows strings (and their escapes) and
/// nesting, nothing more: each item's text is checked by the parser it is handed to, and the
/// response's own shape only as far as finding its items needs (an object, closed, with
/// objects as items).
#[derive(Default)]
struct Splitter {
    /// Open objects and arrays.
    depth: usize,
    in_string: bool,
    escaped: bool,
    /// The key being read at depth 1 (only while it can still be `items`).
    key: Vec<u8>,
    key_is_items: bool,
    /// After `"items":`, until the value starts.
    value_is_items: bool,
    /// Inside the `items` array (depth 2).
    in_items: bool,
    /// The text of the item being read, while its last byte has not come.
    item: Vec<u8>,
    capturing: bool,
    started: bool,
    closed: bool,
}

impl Splitter {
    fn feed(
        &mut self,
        chunk: &[u8],
        mut each: impl FnMut(&[u8]) -> Result<(), SplitError>,
    ) -> Result<(), SplitError> {
        // Where the item being read starts in this chunk.
        let mut start = self.capturing.then_some(0);
        let mut i = 0;
        while i < chunk.len() {
            if self.in_string {
                if self.escaped {
                    self.escaped = false;
                    // An escaped key is not `items` as the API server writes it.
                    self.key_part(b"\\");
                    i += 1;
                    continue;
                }
                // Most of a response is strings: jump to the next quote or backslash.
                let Some(k) = memchr::memchr2(b'"', b'\\', &chunk[i..]) else {
                    self.key_part(&chunk[i..]);
                    break;
                };
                self.key_part(&chunk[i..i + k]);
                i += k;
                if chunk[i] == b'"' {
                    self.in_string = false;
                    if self.depth == 1 {
                        self.key_is_items = self.key == b"items";
                    }
                } else {
                    self.escaped = true;
                }
                i += 1;
                continue;
            }
            let b = chunk[i];
            match b {
                b' ' | b'\n' | b'\r' | b'\t' => {}
                _ if self.closed => return Err(SplitError::Shape("text after the list")),
                b'"' => {
                    self.in_string = true;
                    self.key.clear();
                }
                b'{' | b'[' => {
                    match self.depth {
                        0 if b == b'[' => return Err(SplitError::Shape("not a list object")),
                        0 => self.started = true,
                        1 if b == b'[' && self.value_is_items => self.in_items = true,
                        2 if self.in_items && b == b'{' => {
                            self.capturing = true;
                            start = Some(i);
                        }
                        2 if self.in_items => {
                            return Err(SplitError::Shape("an item is not an object"));
                        }
                        _ => {}
                    }
                    self.value_is_items = false;
                    self.depth += 1;
                }
                b'}' | b']' => {
                    self.depth = self
                        .depth
                        .checked_sub(1)
                        .ok_or(SplitError::Shape("unbalanced brackets"))?;
                    match self.depth {
                        0 => self.closed = true,
                        1 => self.in_items = false,
                        2 if self.capturing => {
                            let from = start.take().unwrap_or(0);
                            self.capturing = false;
                            if self.item.is_empty() {
                                each(&chunk[from..=i])?;
                            } else {
                                self.item.extend_from_slice(&chunk[from..=i]);
                                each(&self.item)?;
                                self.item.clear();
                            }
                        }
                        _ => {}
                    }
                }
                b':' if self.depth == 1 => self.value_is_items = self.key_is_items,
                _ if self.depth == 0 => return Err(SplitError::Shape("not a list object")),
                _ if self.depth == 2 && self.in_items && b != b',' => {
                    return Err(SplitError::Shape("an item is not an object"));
                }
                _ => self.value_is_items = false,
            }
            i += 1;
        }
        if let Some(from) = start.filter(|_| self.capturing) {
            self.item.extend_from_slice(&chunk[from..]);
        }
        Ok(())
    }

    /// More of a string at depth 1, kept while the key it may be can still be `items`.
    fn key_part(&mut self, part: &[u8]) {
        if self.depth == 1 && self.key.len() <= 5 {
            let room = 6 - self.key.len();
            self.key.extend_from_slice(&part[..part.len().min(room)]);
        }
    }

    /// The response ended: it must have been one whole object.
    fn finish(&self) -> Result<(), SplitError> {
        match self.closed {
            true => Ok(()),
            false if self.started => Err(SplitError::Shape("the list was cut off")),
            false => Err(SplitError::Shape("the response was empty")),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The items a [`Splitter`] cuts from `text` fed in chunks of the given sizes (cycled), each
    /// parsed as `list_whole` parses it.
    fn split(text: &[u8], sizes: &[usize]) -> Result<Vec<Value>, SplitError> {
        let mut splitter = Splitter::default();
        let mut items = Vec::new();
        let mut rest = text;
        for &n in sizes.iter().cycle() {
            if rest.is_empty() {
                break;
            }
            let (chunk, r) = rest.split_at(n.clamp(1, rest.len()));
            splitter.feed(chunk, |t| {
                items.push(serde_json::from_slice::<Item>(t)?.0);
                Ok(())
            })?;
            rest = r;
        }
        splitter.finish()?;
        Ok(items)
    }

    /// Cut anywhere, strings with brackets, quotes and escapes, other keys of every shape,
    /// nested items: the items are what serde_json reads of the whole text.
    #[test]
    fn items_are_cut_out_whatever_the_chunks() {
        let text = br#" {"kind":"MachineList","apiVersion":"cluster.x-k8s.io/v1beta2",
            "metadata":{"resourceVersion":"9","continue":"{\"items\":[1]}"},
            "xitems":[1,{"a":"]"}], "item":[[]], "items2": [{"z":1}],
            "items" : [ {"metadata":{"name":"a\"}{[","managedFields":[{"x":"}"}]},
                          "status":{"conditions":[{"type":"Ready","message":"a\\"}],"n":[1,[2,{}]]}},
                        {"metadata":{"name":"b","labels":{"k":"v"}},"spec":{}} ,{}],
            "tail":{"items":[{"no":1}]}} "#;
        let whole: Value = serde_json::from_slice(text).unwrap();
        let mut want: Vec<Value> = whole["items"].as_array().unwrap().clone();
        // Item skips managedFields, as the rows never read them.
        want[0]["metadata"]
            .as_object_mut()
            .unwrap()
            .remove("managedFields");
        for sizes in [&[text.len()][..], &[1], &[2, 3], &[7, 1, 13], &[64]] {
            assert_eq!(split(text, sizes).unwrap(), want, "chunks {sizes:?}");
        }
        for empty in [
            &br#"{"items":null}"#[..],
            br#"{"items":[]}"#,
            br#"{"metadata":{}}"#,
        ] {
            assert!(split(empty, &[3]).unwrap().is_empty());
        }
    }

    #[test]
    fn a_cut_off_or_misshapen_response_is_an_error() {
        let text = br#"{"items":[{"a":1},{"b":"}"}]}"#;
        for end in 0..text.len() {
            let e = split(&text[..end], &[4]).unwrap_err().to_string();
            assert!(e.contains("cut off") || e.contains("empty"), "{end}: {e}");
        }
        for (bad, says) in [
            (&br#"{"items":[1]}"#[..], "not an object"),
            (br#"{"items":[{"a":1},null]}"#, "not an object"),
            (br#"[{"a":1}]"#, "not a list object"),
            (br#"{"items":[]} {}"#, "after the list"),
            (br#"{"items":[{"a":}]}"#, "expected value"),
            (br#"{"items":[]}}"#, "after the list"),
        ] {
            let e = split(bad, &[5]).unwrap_err().to_string();
            assert!(e.contains(says), "{}: {e}", String::from_utf8_lossy(bad));
        }
    }
}
