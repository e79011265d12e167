//! The one reader of files the user names on the command line (`--cni-manifest`,
//! `--from-file`, `generate --from`, `--kubeconfig`, clusterctl's `--config`): bounded in bytes
//! whatever the file is, and in time when it is not a regular file.
//!
//! - A regular file is read with `take(limit + 1)`: one byte more than allowed tells "at the
//!   limit" from "too large", and a file that grows while read cannot make us read more.
//! - `-` is stdin where the flag accepts it (`kubectl apply -f -` does). Anything that is not a
//!   regular file (stdin, a pipe such as `<(curl ...)`, a FIFO, `/dev/zero`) is read by a helper
//!   thread under the same byte bound, and given up when nothing arrives for [`IDLE_TIMEOUT`] or
//!   it has not ended after [`TOTAL_TIMEOUT`]: a FIFO nobody writes or a stdin nobody closes
//!   fails in one line instead of blocking forever. A terminal on stdin has a person at it, who
//!   ends the input with Ctrl-D; it gets no time limit.
//! - Stdin and non-regular files are read once per process and remembered, so a verb that reads
//!   its flags twice (offline checks, then with the connection's namespace) sees the same text;
//!   stdin feeds one flag only.

use std::io::{IsTerminal, Read};
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::sync::mpsc::{RecvTimeoutError, sync_channel};
use std::time::{Duration, Instant};

use crate::error::Error;

/// The bound of a kubeconfig, a clusterctl config or a values file: far above any real one
/// (the same as a template or a CNI manifest), far below what hurts.
pub const MAX_INPUT_BYTES: usize = 8 << 20;

/// How long a stream (stdin, a pipe, a FIFO) may send nothing before it is given up.
pub const IDLE_TIMEOUT: Duration = Duration::from_secs(10);

/// How long a stream may take in all.
pub const TOTAL_TIMEOUT: Duration = Duration::from_secs(120);

/// How a flag's file is read.
#[derive(Clone, Copy, Debug)]
pub struct Input<'a> {
    /// The flag, for messages (`--cni-manifest`).
    pub flag: &'a str,
    /// The most bytes accepted.
    pub limit: usize,
    /// Whether `-` means stdin.
    pub stdin: bool,
}

/// Why a user's file could not be read; one line each, naming the flag and the file.
#[derive(Debug, thiserror::Error)]
pub enum InputError {
    #[error("cannot read {flag} {path}: {source}")]
    Io {
        flag: String,
        path: String,
        source: std::io::Error,
    },
    #[error("{flag} {path} is a directory")]
    Directory { flag: String, path: String },
    #[error("{flag} {path} is larger than the {} limit", kcore::build::cni::human_bytes(*.limit))]
    TooLarge {
        flag: String,
        path: String,
        limit: usize,
    },
    #[error("{flag} {path}: nothing arrived for {}", kcore::text::human_duration(*.after))]
    Idle {
        flag: String,
        path: String,
        after: Duration,
    },
    #[error("{flag} {path} did not end within {}", kcore::text::human_duration(*.after))]
    Unending {
        flag: String,
        path: String,
        after: Duration,
    },
    #[error("{flag} {path} is not UTF-8 text")]
    NotText { flag: String, path: String },
    #[error("{flag} - cannot read stdin: {other} - already reads it")]
    StdinTaken { flag: String, other: String },
}

impl InputError {
    /// What to do about it.
    pub fn hint(&self) -> String {
        match self {
            InputError::Io { .. } | InputError::Directory { .. } => "check the path".into(),
            InputError::TooLarge { .. } => {
                "pass the file it should be; a file this large is not one".into()
            }
            InputError::Idle { .. } | InputError::Unending { .. } => {
                "write it to a regular file first and pass that (a pipe or FIFO must send its content and end)".into()
            }
            InputError::NotText { .. } => "pass a YAML or JSON text file".into(),
            InputError::StdinTaken { .. } => {
                "save one of them to a file: stdin can feed one flag only".into()
            }
        }
    }

    /// As a usage error (exit 2): the flag's value is wrong.
    pub fn usage(self) -> Error {
        Error::Usage {
            hint: Some(self.hint()),
            message: self.to_string(),
        }
    }

    /// As a failure (exit 1), e.g. for a kubeconfig.
    pub fn failure(self) -> Error {
        Error::Other {
            hint: Some(self.hint()),
            message: self.to_string(),
        }
    }
}

/// Stdin and non-regular files read so far: (path, flag, content).
static STREAMS: Mutex<Vec<(PathBuf, String, Vec<u8>)>> = Mutex::new(Vec::new());

/// What a stream reader thread sends: a chunk, or the end (empty), or an error.
type Chunk = std::io::Result<Vec<u8>>;

impl Input<'_> {
    /// A flag's file with the default bound, `-` for stdin.
    pub fn new(flag: &str, stdin: bool) -> Input<'_> {
        Input {
            flag,
            limit: MAX_INPUT_BYTES,
            stdin,
        }
    }

    fn is_stdin(&self, path: &Path) -> bool {
        self.stdin && path.as_os_str() == "-"
    }

    fn shown(&self, path: &Path) -> String {
        path.display().to_string()
    }

    /// The file as UTF-8 text.
    pub fn read_text(&self, path: &Path) -> Result<String, InputError> {
        String::from_utf8(self.read_bytes(path)?).map_err(|_| InputError::NotText {
            flag: self.flag.into(),
            path: self.shown(path),
        })
    }

    /// The file's bytes, at most [`Input::limit`].
    pub fn read_bytes(&self, path: &Path) -> Result<Vec<u8>, InputError> {
        let io = |source| InputError::Io {
            flag: self.flag.into(),
            path: self.shown(path),
            source,
        };
        if !self.is_stdin(path) {
            // stat does not block on a FIFO, as open would.
            let meta = std::fs::metadata(path).map_err(io)?;
            if meta.is_dir() {
                return Err(InputError::Directory {
                    flag: self.flag.into(),
                    path: self.shown(path),
                });
            }
            if meta.is_file() {
                let file = std::fs::File::open(path).map_err(io)?;
                return self.bounded(self.shown(path), file);
            }
        }
        self.remembered(path)
    }

    /// Reads `r` to its end, refusing more than the limit.
    fn bounded(&self, shown: String, r: impl Read) -> Result<Vec<u8>, InputError> {
        let mut out = Vec::new();
        let cap = u64::try_from(self.limit)
            .unwrap_or(u64::MAX)
            .saturating_add(1);
        r.take(cap)
            .read_to_end(&mut out)
            .map_err(|source| InputError::Io {
                flag: self.flag.into(),
                path: shown.clone(),
                source,
            })?;
        if out.len() > self.limit {
            return Err(self.too_large(shown));
        }
        Ok(out)
    }

    fn too_large(&self, path: String) -> InputError {
        InputError::TooLarge {
            flag: self.flag.into(),
            path,
            limit: self.limit,
        }
    }

    /// A stream read once per process: the first read is kept for the next.
    fn remembered(&self, path: &Path) -> Result<Vec<u8>, InputError> {
        let key = if self.is_stdin(path) {
            PathBuf::from("-")
        } else {
            std::fs::canonicalize(path).unwrap_or_else(|_| path.to_path_buf())
        };
        {
            let seen = STREAMS.lock().unwrap_or_else(|p| p.into_inner());
            if let Some((_, flag, bytes)) = seen.iter().find(|(k, _, _)| *k == key) {
                if key.as_os_str() == "-" && flag != self.flag {
                    return Err(InputError::StdinTaken {
                        flag: self.flag.into(),
                        other: flag.clone(),
                    });
                }
                return Ok(bytes.clone());
            }
        }
        let bytes = self.stream(path)?;
        STREAMS.lock().unwrap_or_else(|p| p.into_inner()).push((
            key,
            self.flag.to_string(),
            bytes.clone(),
        ));
        Ok(bytes)
    }

    /// Reads stdin or a non-regular file on a helper thread, under the byte bound and the time
    /// limits (none for stdin on a terminal). On a time-out the thread is left blocked in its read; the
    /// process ends with the error soon after.
    fn stream(&self, path: &Path) -> Result<Vec<u8>, InputError> {
        let stdin = self.is_stdin(path);
        let shown = if stdin {
            "-".to_string()
        } else {
            self.shown(path)
        };
        if stdin && std::io::stdin().is_terminal() {
            crate::render::info(&format!(
                "reading {} from the terminal; end it with Ctrl-D",
                self.flag
            ));
            return self.bounded(shown, std::io::stdin());
        }
        let cap = u64::try_from(self.limit)
            .unwrap_or(u64::MAX)
            .saturating_add(1);
        let (tx, rx) = sync_channel::<Chunk>(4);
        let owned = path.to_path_buf();
        std::thread::spawn(move || {
            let reader: std::io::Result<Box<dyn Read>> = if stdin {
                Ok(Box::new(std::io::stdin()))
            } else {
                // Opening a FIFO blocks until a writer comes: on this thread, that is fine.
                std::fs::File::open(&owned).map(|f| Box::new(f) as Box<dyn Read>)
            };
            let mut reader = match reader {
                Ok(r) => r.take(cap),
                Err(e) => {
                    let _ = tx.send(Err(e));
                    return;
                }
            };
            let mut buf = vec![0u8; 64 * 1024];
            loop {
                match reader.read(&mut buf) {
                    Ok(0) => {
                        let _ = tx.send(Ok(Vec::new()));
                        return;
                    }
                    Ok(n) => {
                        if tx.send(Ok(buf[..n].to_vec())).is_err() {
                            return;
                        }
                    }
                    Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                    Err(e) => {
                        let _ = tx.send(Err(e));
                        return;
                    }
                }
            }
        });
        self.collect(shown, &rx)
    }

    /// Gathers the chunks of [`Input::stream`]'s thread until the end, the limit or a time-out.
    fn collect(
        &self,
        shown: String,
        rx: &std::sync::mpsc::Receiver<Chunk>,
    ) -> Result<Vec<u8>, InputError> {
        let deadline = Instant::now() + TOTAL_TIMEOUT;
        let mut out = Vec::new();
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            match rx.recv_timeout(IDLE_TIMEOUT.min(left)) {
                Ok(Ok(chunk)) if chunk.is_empty() => return Ok(out),
                Ok(Ok(chunk)) => {
                    out.extend_from_slice(&chunk);
                    if out.len() > self.limit {
                        return Err(self.too_large(shown));
                    }
                }
                Ok(Err(source)) => {
                    return Err(InputError::Io {
                        flag: self.flag.into(),
                        path: shown,
                        source,
                    });
                }
                Err(RecvTimeoutError::Disconnected) => return Ok(out),
                Err(RecvTimeoutError::Timeout) if left <= IDLE_TIMEOUT => {
                    return Err(InputError::Unending {
                        flag: self.flag.into(),
                        path: shown,
                        after: TOTAL_TIMEOUT,
                    });
                }
                Err(RecvTimeoutError::Timeout) => {
                    return Err(InputError::Idle {
                        flag: self.flag.into(),
                        path: shown,
                        after: IDLE_TIMEOUT,
                    });
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn input(limit: usize) -> Input<'static> {
        Input {
            flag: "--x",
            limit,
            stdin: true,
        }
    }

    #[test]
    fn a_regular_file_at_the_limit_reads_and_one_byte_more_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("f");
        std::fs::write(&p, "abcd").unwrap();
        assert_eq!(input(4).read_text(&p).unwrap(), "abcd");
        let e = input(3).read_text(&p).unwrap_err();
        assert!(matches!(e, InputError::TooLarge { .. }), "{e}");
        assert!(e.to_string().starts_with("--x "), "{e}");
    }

    #[cfg(unix)]
    #[test]
    fn dev_zero_is_bounded() {
        let e = input(1000).read_bytes(Path::new("/dev/zero")).unwrap_err();
        assert!(matches!(e, InputError::TooLarge { .. }), "{e}");
    }

    #[test]
    fn a_directory_and_a_missing_file_are_one_line() {
        let dir = tempfile::tempdir().unwrap();
        let e = input(10).read_text(dir.path()).unwrap_err();
        assert!(e.to_string().ends_with("is a directory"), "{e}");
        let e = input(10).read_text(&dir.path().join("nope")).unwrap_err();
        assert!(e.to_string().contains("cannot read --x"), "{e}");
    }

    #[test]
    fn binary_is_not_text() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("b");
        std::fs::write(&p, [0xff, 0xfe, 0x00]).unwrap();
        assert!(matches!(
            input(10).read_text(&p),
            Err(InputError::NotText { .. })
        ));
    }
}
