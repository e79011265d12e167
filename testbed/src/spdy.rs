//! SIMULATED kubelet plumbing: SPDY/3.1 framing and a session, the transport of the kubelet's
//! port-forward endpoint ([`crate::portforward`]), so a client of the API server's
//! `pods/portforward` (client-go's `portforward` package) reaches a port "inside a pod".
//!
//! Written after the behaviour of the upstream implementation the API server and the kubelet
//! use, read for the protocol only: `github.com/moby/spdystream` v0.5.1 (`connection.go`,
//! `spdy/types.go`, `spdy/read.go`, `spdy/write.go`, `spdy/dictionary.go`) and
//! `k8s.io/apimachinery` v0.36.3 `pkg/util/httpstream/spdy`. What it takes from them:
//! - frames as SPDY/3 defines them: a control bit, version 3, a type, 8 bits of flags and 24
//!   of length; data frames carry a 31-bit stream id instead;
//! - name/value header blocks compressed with zlib, one stream per direction for the whole
//!   connection, primed with the SPDY/3 dictionary (the first block's zlib header names it),
//!   each block ending at a sync flush; header names lowercase; several values of one name
//!   joined by NUL;
//! - flow control as spdystream does it, which is none: it never sends WINDOW_UPDATE nor
//!   honours one, nor SETTINGS. A sender that waited for the peer's window would stall after
//!   the first 64 KiB of SPDY/3.1's initial window, so this one does not wait either, and the
//!   receive side pushes back the only way spdystream does: by not reading the connection while
//!   a stream's consumer is behind (a bounded queue per stream);
//! - PING echoed when the peer started it (its id's parity), GOAWAY stopping new streams, a
//!   stream id out of order or of the wrong parity reset with PROTOCOL_ERROR.
//!
//! Bounds, so a bad peer ends its connection instead of the process: frames up to the 24-bit
//! maximum, header blocks up to [`MAX_HEADER_BLOCK`] once inflated, [`MAX_STREAMS`] streams
//! open per connection (more are refused with REFUSED_STREAM).

use std::collections::HashMap;
use std::io;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, OnceLock};

use flate2::{Compress, Compression, Decompress, FlushCompress, FlushDecompress, Status};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::sync::{OwnedSemaphorePermit, Semaphore, mpsc};

pub const FLAG_FIN: u8 = 0x01;
/// The largest frame payload SPDY's 24-bit length can say.
pub const MAX_FRAME: usize = (1 << 24) - 1;
/// The largest header block accepted once inflated (spdystream's limits allow far more; a
/// port-forward stream has three short headers).
pub const MAX_HEADER_BLOCK: usize = 256 * 1024;
/// Streams open at once on one connection.
pub const MAX_STREAMS: usize = 1024;
/// The most bytes one data frame carries when this side writes.
const MAX_CHUNK: usize = 32 * 1024;
/// Frames queued per stream before the connection's reader waits for its consumer.
const STREAM_QUEUE: usize = 16;

/// RST_STREAM statuses (SPDY/3 section 2.6.3).
pub const PROTOCOL_ERROR: u32 = 1;
pub const REFUSED_STREAM: u32 = 3;
pub const CANCEL: u32 = 5;

const SYN_STREAM: u16 = 1;
const SYN_REPLY: u16 = 2;
const RST_STREAM: u16 = 3;
const SETTINGS: u16 = 4;
const PING: u16 = 6;
const GOAWAY: u16 = 7;
const HEADERS: u16 = 8;
const WINDOW_UPDATE: u16 = 9;

/// A header block: lowercase names, one entry per value.
pub type Headers = Vec<(String, String)>;

/// The first value of `name` in `h`.
pub fn header<'a>(h: &'a Headers, name: &str) -> Option<&'a str> {
    h.iter().find(|(n, _)| n == name).map(|(_, v)| v.as_str())
}

/// A frame. Fields in wire order; a SYN_STREAM's associated stream and priority are read and
/// dropped (written as 0): port-forward uses neither.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Frame {
    /// Stream, flags, headers.
    SynStream(u32, u8, Headers),
    /// Stream, flags, headers.
    SynReply(u32, u8, Headers),
    /// Stream, status.
    RstStream(u32, u32),
    /// Flags and (flags, id, value) entries; read and ignored, as spdystream does.
    Settings(u8, Vec<(u8, u32, u32)>),
    /// Id.
    Ping(u32),
    /// Last good stream, status.
    GoAway(u32, u32),
    /// Stream, flags, headers.
    Headers(u32, u8, Headers),
    /// Stream, delta; read and ignored, as spdystream does.
    WindowUpdate(u32, u32),
    /// Stream, flags, payload.
    Data(u32, u8, Vec<u8>),
}

fn closed() -> io::Error {
    io::Error::new(io::ErrorKind::BrokenPipe, "SPDY connection closed")
}

fn invalid(msg: impl std::fmt::Display) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, format!("SPDY: {msg}"))
}

/// The words SPDY/3's zlib dictionary starts with, `|`-separated here, each preceded there by
/// its length (section 2.6.10.1).
const DICTIONARY_WORDS: &str = concat!(
    "options|head|post|put|delete|trace|accept|accept-charset|accept-encoding|accept-language|",
    "accept-ranges|age|allow|authorization|cache-control|connection|content-base|",
    "content-encoding|content-language|content-length|content-location|content-md5|",
    "content-range|content-type|date|etag|expect|expires|from|host|if-match|if-modified-since|",
    "if-none-match|if-range|if-unmodified-since|last-modified|location|max-forwards|pragma|",
    "proxy-authenticate|proxy-authorization|range|referer|retry-after|server|te|trailer|",
    "transfer-encoding|upgrade|user-agent|vary|via|warning|www-authenticate|method|get|status|",
    "200 OK|version|HTTP/1.1|url|public|set-cookie|keep-alive|origin"
);

/// And the common values it ends with, unprefixed.
const DICTIONARY_TAIL: &str = concat!(
    "100101201202205206300302303304305306307402405406407408409410411412413414415416417502504505",
    "203 Non-Authoritative Information204 No Content301 Moved Permanently400 Bad Request",
    "401 Unauthorized403 Forbidden404 Not Found500 Internal Server Error501 Not Implemented",
    "503 Service UnavailableJan Feb Mar Apr May Jun Jul Aug Sept Oct Nov Dec 00:00:00 ",
    "Mon, Tue, Wed, Thu, Fri, Sat, Sun, GMTchunked,text/html,image/png,image/jpg,image/gif,",
    "application/xml,application/xhtml+xml,text/plain,text/javascript,publicprivatemax-age=",
    "gzip,deflate,sdchcharset=utf-8charset=iso-8859-1,utf-,*,enq=0."
);

/// SPDY/3's header compression dictionary.
pub(crate) fn dictionary() -> &'static [u8] {
    static DICT: OnceLock<Vec<u8>> = OnceLock::new();
    DICT.get_or_init(|| {
        let mut d = Vec::with_capacity(1423);
        for w in DICTIONARY_WORDS.split('|') {
            d.extend_from_slice(&(w.len() as u32).to_be_bytes());
            d.extend_from_slice(w.as_bytes());
        }
        d.extend_from_slice(DICTIONARY_TAIL.as_bytes());
        d
    })
}

/// The compressing side of one direction's header blocks.
pub(crate) struct Deflater(Compress);

impl Deflater {
    pub(crate) fn new() -> io::Result<Deflater> {
        // Best compression, as spdystream's writer; the dictionary set before the first byte
        // makes the zlib header name it (FDICT), which the peer's reader expects.
        let mut c = Compress::new(Compression::best(), true);
        c.set_dictionary(dictionary()).map_err(invalid)?;
        Ok(Deflater(c))
    }

    /// Appends `raw` compressed, up to a sync flush, to `out`.
    fn block(&mut self, raw: &[u8], out: &mut Vec<u8>) -> io::Result<()> {
        let start = self.0.total_in();
        loop {
            let consumed = usize::try_from(self.0.total_in() - start).map_err(invalid)?;
            out.reserve(raw.len() / 2 + 64);
            self.0
                .compress_vec(&raw[consumed..], out, FlushCompress::Sync)
                .map_err(invalid)?;
            let consumed = usize::try_from(self.0.total_in() - start).map_err(invalid)?;
            // Room left over means the flush is complete (zlib's avail_out != 0).
            if consumed == raw.len() && out.len() < out.capacity() {
                return Ok(());
            }
        }
    }
}

/// The inflating side of one direction's header blocks.
pub(crate) struct Inflater(Decompress);

impl Inflater {
    pub(crate) fn new() -> Inflater {
        Inflater(Decompress::new(true))
    }

    /// One header block, inflated: all of `compressed`, and at most [`MAX_HEADER_BLOCK`] bytes.
    fn block(&mut self, compressed: &[u8]) -> io::Result<Vec<u8>> {
        let start = self.0.total_in();
        let mut out = Vec::with_capacity(1024);
        loop {
            let done = usize::try_from(self.0.total_in() - start).map_err(invalid)?;
            if out.len() == out.capacity() {
                out.reserve(out.capacity());
            }
            let before = (done, out.len());
            let flush = FlushDecompress::Sync;
            match self.0.decompress_vec(&compressed[done..], &mut out, flush) {
                Ok(Status::StreamEnd) => return Err(invalid("header compression stream ended")),
                Ok(_) => {}
                // The first block's zlib header asks for the dictionary (zlib checks its id).
                Err(e) if e.needs_dictionary().is_some() => {
                    self.0.set_dictionary(dictionary()).map_err(invalid)?;
                    continue;
                }
                Err(e) => return Err(invalid(format!("header block: {e}"))),
            }
            if out.len() > MAX_HEADER_BLOCK {
                return Err(invalid("header block too large"));
            }
            // Done when all was read and the output had room to spare (zlib's avail_out != 0).
            let done = usize::try_from(self.0.total_in() - start).map_err(invalid)?;
            let spare = out.len() < out.capacity();
            if spare && done == compressed.len() {
                return Ok(out);
            }
            if spare && before == (done, out.len()) {
                return Err(invalid("header block truncated"));
            }
        }
    }
}

/// A big-endian reader of a byte slice.
struct Bytes<'a>(&'a [u8]);

impl<'a> Bytes<'a> {
    fn take(&mut self, n: usize) -> io::Result<&'a [u8]> {
        if self.0.len() < n {
            return Err(invalid("short frame or header block"));
        }
        let (head, rest) = self.0.split_at(n);
        self.0 = rest;
        Ok(head)
    }
    fn u32(&mut self) -> io::Result<u32> {
        let b = self.take(4)?;
        Ok(u32::from_be_bytes([b[0], b[1], b[2], b[3]]))
    }
}

fn parse_block(raw: &[u8]) -> io::Result<Headers> {
    let mut r = Bytes(raw);
    let n = r.u32()? as usize;
    // Each entry takes at least its two lengths: a count beyond that is a lie.
    if n > raw.len() / 8 {
        return Err(invalid("header count beyond the block"));
    }
    let mut h = Headers::new();
    for _ in 0..n {
        let len = r.u32()? as usize;
        let name = String::from_utf8_lossy(r.take(len)?).to_lowercase();
        let len = r.u32()? as usize;
        let value = String::from_utf8_lossy(r.take(len)?).into_owned();
        for v in value.split('\0') {
            h.push((name.clone(), v.to_string()));
        }
    }
    Ok(h)
}

fn write_block(h: &Headers) -> Vec<u8> {
    let mut names: Vec<&str> = Vec::new();
    for (n, _) in h {
        if !names.contains(&n.as_str()) {
            names.push(n);
        }
    }
    let mut out = (names.len() as u32).to_be_bytes().to_vec();
    for name in names {
        let values: Vec<&str> = h
            .iter()
            .filter(|(n, _)| n == name)
            .map(|(_, v)| v.as_str())
            .collect();
        let value = values.join("\0");
        let name = name.to_lowercase();
        out.extend_from_slice(&(name.len() as u32).to_be_bytes());
        out.extend_from_slice(name.as_bytes());
        out.extend_from_slice(&(value.len() as u32).to_be_bytes());
        out.extend_from_slice(value.as_bytes());
    }
    out
}

/// A frame on the wire; header blocks go through `deflater`, in the order frames are sent.
pub(crate) fn encode(frame: &Frame, deflater: &mut Deflater) -> io::Result<Vec<u8>> {
    let mut p = Vec::new();
    let mut be = |v: u32| p.extend_from_slice(&v.to_be_bytes());
    let (typ, flags) = match frame {
        Frame::Data(stream, flags, data) => {
            if data.len() > MAX_FRAME {
                return Err(invalid("frame too large"));
            }
            be(stream & 0x7fff_ffff);
            be((u32::from(*flags) << 24) | data.len() as u32);
            p.extend_from_slice(data);
            return Ok(p);
        }
        Frame::SynStream(stream, flags, _) => {
            // Associated stream 0, priority 0, slot 0.
            be(stream & 0x7fff_ffff);
            be(0);
            p.extend_from_slice(&[0, 0]);
            (SYN_STREAM, *flags)
        }
        Frame::SynReply(stream, flags, _) => {
            be(stream & 0x7fff_ffff);
            (SYN_REPLY, *flags)
        }
        Frame::Headers(stream, flags, _) => {
            be(stream & 0x7fff_ffff);
            (HEADERS, *flags)
        }
        Frame::RstStream(stream, status) => {
            be(stream & 0x7fff_ffff);
            be(*status);
            (RST_STREAM, 0)
        }
        Frame::Settings(flags, values) => {
            be(values.len() as u32);
            for (f, id, v) in values {
                be((u32::from(*f) << 24) | (id & 0xff_ffff));
                be(*v);
            }
            (SETTINGS, *flags)
        }
        Frame::Ping(id) => {
            be(*id);
            (PING, 0)
        }
        Frame::GoAway(last_good, status) => {
            be(last_good & 0x7fff_ffff);
            be(*status);
            (GOAWAY, 0)
        }
        Frame::WindowUpdate(stream, delta) => {
            be(stream & 0x7fff_ffff);
            be(delta & 0x7fff_ffff);
            (WINDOW_UPDATE, 0)
        }
    };
    if let Frame::SynStream(_, _, h) | Frame::SynReply(_, _, h) | Frame::Headers(_, _, h) = frame {
        deflater.block(&write_block(h), &mut p)?;
    }
    if p.len() > MAX_FRAME {
        return Err(invalid("frame too large"));
    }
    let mut out = Vec::with_capacity(8 + p.len());
    out.extend_from_slice(&0x8003u16.to_be_bytes());
    out.extend_from_slice(&typ.to_be_bytes());
    out.extend_from_slice(&((u32::from(flags) << 24) | p.len() as u32).to_be_bytes());
    out.extend_from_slice(&p);
    Ok(out)
}

/// One frame from its 8-byte head and payload; `None` for a control frame type SPDY/3 does not
/// define (skipped, as the spec asks).
pub(crate) fn decode(
    head: [u8; 8],
    payload: &[u8],
    inflater: &mut Inflater,
) -> io::Result<Option<Frame>> {
    let word = u32::from_be_bytes([head[0], head[1], head[2], head[3]]);
    let flags = head[4];
    let mut r = Bytes(payload);
    let id = |v: u32| v & 0x7fff_ffff;
    if word & 0x8000_0000 == 0 {
        if id(word) == 0 {
            return Err(invalid("data frame on stream 0"));
        }
        return Ok(Some(Frame::Data(id(word), flags, payload.to_vec())));
    }
    let version = (word >> 16) & 0x7fff;
    if version != 3 {
        return Err(invalid(format!("unsupported version {version}")));
    }
    let exact = |n: usize| match payload.len() == n {
        true => Ok(()),
        false => Err(invalid(format!("control frame of {} bytes", payload.len()))),
    };
    let frame = match (word & 0xffff) as u16 {
        SYN_STREAM => {
            let stream = id(r.u32()?);
            // The associated stream, the priority and the slot.
            r.take(6)?;
            Frame::SynStream(stream, flags, parse_block(&inflater.block(r.0)?)?)
        }
        SYN_REPLY => {
            let stream = id(r.u32()?);
            Frame::SynReply(stream, flags, parse_block(&inflater.block(r.0)?)?)
        }
        HEADERS => {
            let stream = id(r.u32()?);
            Frame::Headers(stream, flags, parse_block(&inflater.block(r.0)?)?)
        }
        RST_STREAM => {
            exact(8)?;
            Frame::RstStream(id(r.u32()?), r.u32()?)
        }
        SETTINGS => {
            let n = r.u32()? as usize;
            if n > r.0.len() / 8 {
                return Err(invalid("settings count beyond the frame"));
            }
            let mut values = Vec::with_capacity(n);
            for _ in 0..n {
                let fid = r.u32()?;
                values.push(((fid >> 24) as u8, fid & 0xff_ffff, r.u32()?));
            }
            Frame::Settings(flags, values)
        }
        PING => {
            exact(4)?;
            Frame::Ping(r.u32()?)
        }
        GOAWAY => {
            exact(8)?;
            Frame::GoAway(id(r.u32()?), r.u32()?)
        }
        WINDOW_UPDATE => {
            exact(8)?;
            Frame::WindowUpdate(id(r.u32()?), id(r.u32()?))
        }
        _ => return Ok(None),
    };
    match frame {
        Frame::SynStream(0, ..)
        | Frame::SynReply(0, ..)
        | Frame::Headers(0, ..)
        | Frame::RstStream(0, _) => Err(invalid("stream 0")),
        f => Ok(Some(f)),
    }
}

/// The next frame, or `None` when the peer closed the connection between frames.
pub(crate) async fn read_frame<R: AsyncRead + Unpin>(
    r: &mut R,
    inflater: &mut Inflater,
) -> io::Result<Option<Frame>> {
    loop {
        let mut head = [0u8; 8];
        if r.read(&mut head[..1]).await? == 0 {
            return Ok(None);
        }
        r.read_exact(&mut head[1..]).await?;
        // 24 bits: never more than MAX_FRAME.
        let len = (u32::from_be_bytes([head[4], head[5], head[6], head[7]]) & 0xff_ffff) as usize;
        let mut payload = vec![0u8; len];
        r.read_exact(&mut payload).await?;
        if let Some(f) = decode(head, &payload, inflater)? {
            return Ok(Some(f));
        }
    }
}

/// Which side of the connection this is: a client opens odd stream ids, a server even ones.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Role {
    Client,
    Server,
}

/// What the connection's reader hands a stream's consumer.
enum Chunk {
    Data(Vec<u8>),
    Fin,
    Reset(u32),
}

type Routes = Arc<Mutex<HashMap<u32, mpsc::Sender<Chunk>>>>;

/// One stream: the headers it was opened with, its incoming half and its outgoing half.
pub struct Stream {
    pub id: u32,
    pub headers: Headers,
    pub rx: StreamRx,
    pub tx: StreamTx,
}

pub struct StreamRx {
    id: u32,
    rx: mpsc::Receiver<Chunk>,
    finished: bool,
    _permit: Arc<OwnedSemaphorePermit>,
}

impl StreamRx {
    /// The peer's next bytes; `None` once it finished its side (FIN). A reset, or the
    /// connection ending first, is an error.
    pub async fn read(&mut self) -> io::Result<Option<Vec<u8>>> {
        if self.finished {
            return Ok(None);
        }
        match self.rx.recv().await {
            Some(Chunk::Data(d)) => Ok(Some(d)),
            Some(Chunk::Fin) => {
                // Nothing follows a FIN: stay finished.
                self.finished = true;
                Ok(None)
            }
            Some(Chunk::Reset(status)) => Err(io::Error::new(
                io::ErrorKind::ConnectionReset,
                format!("SPDY stream {} reset ({status})", self.id),
            )),
            None => Err(io::Error::new(
                io::ErrorKind::ConnectionAborted,
                format!("SPDY stream {}: connection closed", self.id),
            )),
        }
    }
}

#[derive(Clone)]
pub struct StreamTx {
    id: u32,
    out: mpsc::Sender<Frame>,
    _permit: Arc<OwnedSemaphorePermit>,
}

impl StreamTx {
    async fn send(&self, f: Frame) -> io::Result<()> {
        self.out.send(f).await.map_err(|_| closed())
    }

    pub async fn reply(&self, headers: Headers) -> io::Result<()> {
        self.send(Frame::SynReply(self.id, 0, headers)).await
    }

    /// Sends `data` in frames of at most 32 KiB.
    pub async fn write(&self, data: &[u8]) -> io::Result<()> {
        for chunk in data.chunks(MAX_CHUNK) {
            self.send(Frame::Data(self.id, 0, chunk.to_vec())).await?;
        }
        Ok(())
    }

    /// Ends this side of the stream (an empty data frame with FIN, as spdystream's `Close`).
    pub async fn finish(&self) -> io::Result<()> {
        self.send(Frame::Data(self.id, FLAG_FIN, Vec::new())).await
    }

    pub async fn reset(&self, status: u32) -> io::Result<()> {
        self.send(Frame::RstStream(self.id, status)).await
    }
}

/// What both sides of a connection share: the streams the reader routes to, the writer's queue
/// and the stream budget.
#[derive(Clone)]
struct Shared {
    routes: Routes,
    out: mpsc::Sender<Frame>,
    permits: Arc<Semaphore>,
    dead: Arc<AtomicBool>,
}

impl Shared {
    /// A stream whose incoming frames the reader routes to it (already finished with `fin`).
    fn stream(&self, id: u32, headers: Headers, fin: bool) -> Option<Stream> {
        let permit = Arc::new(self.permits.clone().try_acquire_owned().ok()?);
        let (tx, rx) = mpsc::channel(STREAM_QUEUE);
        if fin {
            let _ = tx.try_send(Chunk::Fin);
        } else {
            self.routes.lock().ok()?.insert(id, tx);
        }
        Some(Stream {
            id,
            headers,
            rx: StreamRx {
                id,
                rx,
                finished: false,
                _permit: permit.clone(),
            },
            tx: StreamTx {
                id,
                out: self.out.clone(),
                _permit: permit,
            },
        })
    }

    fn route(&self, id: u32) -> Option<mpsc::Sender<Chunk>> {
        self.routes.lock().ok()?.get(&id).cloned()
    }

    fn unroute(&self, id: u32) {
        if let Ok(mut r) = self.routes.lock() {
            r.remove(&id);
        }
    }
}

/// Opens streams of this side (the client's, here).
pub struct Opener {
    shared: Shared,
    /// The next id; held while the SYN_STREAM is queued, so ids reach the wire in order.
    next: tokio::sync::Mutex<u32>,
}

impl Opener {
    pub async fn open(&self, headers: Headers) -> io::Result<Stream> {
        let mut next = self.next.lock().await;
        if self.shared.dead.load(Ordering::SeqCst) {
            return Err(closed());
        }
        let id = *next;
        if id > 0x7fff_ffff {
            return Err(invalid("stream ids exhausted"));
        }
        let Some(s) = self.shared.stream(id, headers.clone(), false) else {
            return Err(invalid("too many streams"));
        };
        *next += 2;
        s.tx.send(Frame::SynStream(id, 0, headers)).await?;
        Ok(s)
    }
}

/// A connection's handles: the streams the peer opens, and an opener of this side's.
pub struct Session {
    pub incoming: mpsc::Receiver<Stream>,
    pub opener: Opener,
}

/// Clears the routes when the connection's driver ends or is dropped, so every stream's reader
/// learns the connection is gone.
struct Teardown(Shared);

impl Drop for Teardown {
    fn drop(&mut self) {
        self.0.dead.store(true, Ordering::SeqCst);
        if let Ok(mut r) = self.0.routes.lock() {
            r.clear();
        }
    }
}

/// A SPDY/3.1 session on a connection already upgraded. The returned future drives it (reads
/// and writes frames) until the peer closes the connection or breaks the protocol; the caller
/// runs it (spawns it, or awaits it beside the session's users).
pub fn session<R, W>(
    read: R,
    write: W,
    role: Role,
) -> (Session, impl Future<Output = io::Result<()>> + Send)
where
    R: AsyncRead + Unpin + Send + 'static,
    W: AsyncWrite + Unpin + Send + 'static,
{
    let (out, queue) = mpsc::channel(64);
    let shared = Shared {
        routes: Arc::default(),
        out,
        permits: Arc::new(Semaphore::new(MAX_STREAMS)),
        dead: Arc::default(),
    };
    let (incoming_tx, incoming) = mpsc::channel(MAX_STREAMS);
    let opener = Opener {
        shared: shared.clone(),
        next: tokio::sync::Mutex::new(if role == Role::Client { 1 } else { 2 }),
    };
    let driver = async move {
        let teardown = Teardown(shared.clone());
        let r = tokio::select! {
            r = read_loop(read, &teardown.0, role, incoming_tx) => r,
            w = write_loop(write, queue) => w,
        };
        drop(teardown);
        r
    };
    (Session { incoming, opener }, driver)
}

async fn write_loop<W: AsyncWrite + Unpin>(
    mut w: W,
    mut queue: mpsc::Receiver<Frame>,
) -> io::Result<()> {
    let mut deflater = Deflater::new()?;
    while let Some(f) = queue.recv().await {
        let bytes = encode(&f, &mut deflater)?;
        w.write_all(&bytes).await?;
        // Flush only when nothing else waits, so a burst goes out in fewer TLS records.
        if queue.is_empty() {
            w.flush().await?;
        }
    }
    Ok(())
}

async fn read_loop<R: AsyncRead + Unpin>(
    mut r: R,
    shared: &Shared,
    role: Role,
    incoming: mpsc::Sender<Stream>,
) -> io::Result<()> {
    let mut inflater = Inflater::new();
    // The peer opens odd ids when it is the client.
    let peer_parity = if role == Role::Server { 1 } else { 0 };
    let mut last_peer_id = 0;
    let mut gone_away = false;
    while let Some(frame) = read_frame(&mut r, &mut inflater).await? {
        match frame {
            Frame::SynStream(stream, flags, headers) => {
                if stream % 2 != peer_parity || stream <= last_peer_id {
                    send(shared, Frame::RstStream(stream, PROTOCOL_ERROR)).await?;
                    continue;
                }
                last_peer_id = stream;
                let refused = gone_away
                    || match shared.stream(stream, headers, flags & FLAG_FIN != 0) {
                        Some(s) => incoming.try_send(s).is_err(),
                        None => true,
                    };
                if refused {
                    shared.unroute(stream);
                    send(shared, Frame::RstStream(stream, REFUSED_STREAM)).await?;
                }
            }
            Frame::Data(stream, flags, data) => {
                deliver(shared, stream, (!data.is_empty()).then_some(data), flags).await;
            }
            Frame::Headers(stream, flags, _) | Frame::SynReply(stream, flags, _) => {
                deliver(shared, stream, None, flags).await;
            }
            Frame::RstStream(stream, status) => {
                if let Some(tx) = shared.route(stream) {
                    shared.unroute(stream);
                    let _ = tx.send(Chunk::Reset(status)).await;
                }
            }
            // Echo the peer's pings; ours (none are sent) would come back with our parity.
            Frame::Ping(id) if id % 2 == peer_parity => send(shared, Frame::Ping(id)).await?,
            Frame::GoAway(..) => gone_away = true,
            Frame::Ping(_) | Frame::Settings(..) | Frame::WindowUpdate(..) => {}
        }
    }
    Ok(())
}

async fn send(shared: &Shared, f: Frame) -> io::Result<()> {
    shared.out.send(f).await.map_err(|_| invalid("writer gone"))
}

/// Hands a stream's data and FIN to its consumer (waiting while its queue is full); a stream
/// unknown or whose consumer is gone is ignored, as spdystream ignores it.
async fn deliver(shared: &Shared, stream: u32, data: Option<Vec<u8>>, flags: u8) {
    let Some(tx) = shared.route(stream) else {
        return;
    };
    if let Some(d) = data
        && tx.send(Chunk::Data(d)).await.is_err()
    {
        shared.unroute(stream);
        return;
    }
    if flags & FLAG_FIN != 0 {
        shared.unroute(stream);
        let _ = tx.send(Chunk::Fin).await;
    }
}

#[cfg(test)]
mod tests;
