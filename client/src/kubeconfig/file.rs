//! Rewriting the user's kubeconfig file as kubectl does: under kubectl's lock, refusing a
//! read-only file, keeping the owner's mode, and keeping the previous content as `<file>.bak`
//! (the write itself is [`write_atomic_mode`]).

use std::path::{Path, PathBuf};

use super::{NEW_FILE_MODE, write_atomic_mode};
use crate::error::Error;

/// A file's permission bits. Windows has none: a read-only file reads as 0o444, any other as
/// 0o644 (modes are not applied there; see [`super::set_mode`]).
fn file_mode(meta: &std::fs::Metadata) -> u32 {
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        meta.permissions().mode() & 0o777
    }
    #[cfg(not(unix))]
    {
        if meta.permissions().readonly() {
            0o444
        } else {
            0o644
        }
    }
}

/// The content of `target` (None when it does not exist) and the mode to write it back with
/// (its owner's bits).
/// A file without the owner's write bit is refused: kubectl cannot write it either (root's
/// write would succeed, but the user said read-only).
pub(super) fn read_writable(target: &Path) -> Result<(Option<String>, u32), Error> {
    let meta = match std::fs::metadata(target) {
        Ok(m) => m,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok((None, NEW_FILE_MODE)),
        Err(e) => return Err(read_error(target, e)),
    };
    let mode = file_mode(&meta);
    if mode & 0o200 == 0 {
        return Err(Error::Other {
            message: format!(
                "{} is read-only (mode {mode:04o}); nothing was changed",
                target.display()
            ),
            hint: Some(format!(
                "make it writable (chmod u+w {}) or write to another kubeconfig file",
                target.display()
            )),
        });
    }
    let text = crate::input::Input::new("kubeconfig", false)
        .read_text(target)
        .map_err(|e| match e {
            crate::input::InputError::Io { source, .. } => read_error(target, source),
            other => other.failure(),
        })?;
    // The owner's bits stay; group and others lose access, since the file now holds
    // credentials (kubectl keeps the mode as it is; clusterctl writes 0600).
    Ok((Some(text), mode & 0o700))
}

fn read_error(path: &Path, e: std::io::Error) -> Error {
    Error::Other {
        message: format!("cannot read {}: {e}", path.display()),
        hint: Some("check the path and its permissions".into()),
    }
}

/// kubectl's lock on a kubeconfig file (client-go `tools/clientcmd/loader.go`, `lockFile`):
/// `<file>.lock` created exclusively, removed when done. Waits up to [`LOCK_WAIT`] for another
/// writer.
pub(super) struct FileLock(PathBuf);

/// How long a writer waits for another one's lock.
const LOCK_WAIT: std::time::Duration = std::time::Duration::from_secs(10);

impl FileLock {
    pub(super) fn acquire(target: &Path) -> Result<FileLock, Error> {
        let mut name = target.as_os_str().to_owned();
        name.push(".lock");
        let lock = PathBuf::from(name);
        let deadline = std::time::Instant::now() + LOCK_WAIT;
        loop {
            match std::fs::OpenOptions::new()
                .write(true)
                .create_new(true)
                .open(&lock)
            {
                Ok(_) => return Ok(FileLock(lock)),
                Err(e)
                    if e.kind() == std::io::ErrorKind::AlreadyExists
                        && std::time::Instant::now() < deadline =>
                {
                    std::thread::sleep(std::time::Duration::from_millis(20));
                }
                Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {
                    return Err(Error::Other {
                        message: format!(
                            "{} is locked by another writer ({} exists)",
                            target.display(),
                            lock.display()
                        ),
                        hint: Some(format!(
                            "wait for the other kubectl to finish; if none runs, remove {}",
                            lock.display()
                        )),
                    });
                }
                Err(e) => {
                    return Err(Error::Other {
                        message: format!("cannot lock {}: {e}", target.display()),
                        hint: Some("check the directory's permissions".into()),
                    });
                }
            }
        }
    }
}

impl Drop for FileLock {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0);
    }
}

/// Replaces `target`'s content `old` (None: no file yet) with `new`: the previous content is
/// kept as `<file>.bak`, then the new one is written atomically. Returns the backup.
pub(super) fn replace_file(
    target: &Path,
    old: Option<&str>,
    new: &str,
    mode: u32,
) -> Result<Option<PathBuf>, Error> {
    let backup = match old {
        Some(old) => {
            let b = backup_path(target);
            write_atomic_mode(&b, old.as_bytes(), true, NEW_FILE_MODE)?;
            Some(b)
        }
        None => None,
    };
    write_atomic_mode(target, new.as_bytes(), true, mode)?;
    Ok(backup)
}

/// `<file>.bak`, next to the file.
pub fn backup_path(target: &Path) -> PathBuf {
    let mut name = target
        .file_name()
        .map(|n| n.to_os_string())
        .unwrap_or_else(|| "config".into());
    name.push(".bak");
    target.with_file_name(name)
}
