//! A tenant backup's file (`kcore::kamaji::backup` says what its lines are): written through
//! gzip into a temporary file of mode 0600 that replaces the target only when complete (it
//! holds the tenant's keys and CA), and read back one bounded line at a time.

use std::fs::File;
use std::io::{BufRead, BufReader, Read, Write};
use std::path::{Path, PathBuf};

use flate2::Compression;
use flate2::read::GzDecoder;
use flate2::write::GzEncoder;
use kcore::kamaji::backup::MAX_LINE;

use crate::error::Error;
use crate::kubeconfig::{AtomicFile, NEW_FILE_MODE};

/// A backup being written.
pub struct BackupWriter {
    path: PathBuf,
    gz: GzEncoder<AtomicFile>,
}

impl BackupWriter {
    pub fn create(path: &Path) -> Result<BackupWriter, Error> {
        let file = AtomicFile::create(path, false, NEW_FILE_MODE)?;
        Ok(BackupWriter {
            path: path.to_path_buf(),
            gz: GzEncoder::new(file, Compression::default()),
        })
    }

    pub fn write(&mut self, line: &[u8]) -> Result<(), Error> {
        self.gz.write_all(line).map_err(|e| self.error(e))
    }

    fn error(&self, e: std::io::Error) -> Error {
        Error::Other {
            message: format!("cannot write {}: {e}", self.path.display()),
            hint: Some("check the path, its permissions and the free space".into()),
        }
    }

    /// Ends the gzip stream and puts the file in place.
    pub fn commit(self) -> Result<(), Error> {
        let path = self.path.clone();
        let file = self.gz.finish().map_err(|e| Error::Other {
            message: format!("cannot write {}: {e}", path.display()),
            hint: Some("check the free space".into()),
        })?;
        file.commit()
    }
}

/// A backup being read, line by line.
pub struct BackupReader {
    path: PathBuf,
    lines: BufReader<GzDecoder<File>>,
}

impl BackupReader {
    pub fn open(path: &Path) -> Result<BackupReader, Error> {
        let file = File::open(path).map_err(|e| Error::Usage {
            message: format!("cannot read the backup {}: {e}", path.display()),
            hint: Some("pass the file kubectl kamaji backup wrote".into()),
        })?;
        Ok(BackupReader {
            path: path.to_path_buf(),
            lines: BufReader::new(GzDecoder::new(file)),
        })
    }

    /// The next line into `buf` (cleared first), without its newline; `false` at the end.
    /// A line longer than `MAX_LINE` is refused before it is all read.
    pub fn next_line(&mut self, buf: &mut Vec<u8>) -> Result<bool, Error> {
        buf.clear();
        let limit = u64::try_from(MAX_LINE)
            .unwrap_or(u64::MAX)
            .saturating_add(1);
        let n = (&mut self.lines)
            .take(limit)
            .read_until(b'\n', buf)
            .map_err(|e| self.corrupt(&format!("it is not a whole gzip stream ({e})")))?;
        if n == 0 {
            return Ok(false);
        }
        if buf.last() == Some(&b'\n') {
            buf.pop();
        } else if buf.len() > MAX_LINE {
            return Err(self.corrupt(&format!("a line is longer than {MAX_LINE} bytes")));
        }
        Ok(true)
    }

    /// A refusal that names the file.
    pub fn corrupt(&self, why: &str) -> Error {
        Error::Other {
            message: format!("the backup {} is refused: {why}", self.path.display()),
            hint: Some("take the backup again, or use an intact copy of the file".into()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines_round_trip_through_gzip_and_the_file_is_private() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("t.backup");
        let mut w = BackupWriter::create(&path).unwrap();
        w.write(b"{\"a\":1}\n").unwrap();
        w.write(b"{\"b\":2}\n").unwrap();
        assert!(!path.exists(), "the file appears only when complete");
        w.commit().unwrap();
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            let mode = std::fs::metadata(&path).unwrap().permissions().mode();
            assert_eq!(mode & 0o777, 0o600);
        }
        let mut r = BackupReader::open(&path).unwrap();
        let mut buf = Vec::new();
        assert!(r.next_line(&mut buf).unwrap());
        assert_eq!(buf, b"{\"a\":1}");
        assert!(r.next_line(&mut buf).unwrap());
        assert_eq!(buf, b"{\"b\":2}");
        assert!(!r.next_line(&mut buf).unwrap());
    }

    #[test]
    fn a_truncated_stream_is_refused_naming_the_file() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("t.backup");
        let mut w = BackupWriter::create(&path).unwrap();
        for i in 0..2000 {
            w.write(format!("{{\"line\":{i}}}\n").as_bytes()).unwrap();
        }
        w.commit().unwrap();
        let bytes = std::fs::read(&path).unwrap();
        std::fs::write(&path, &bytes[..bytes.len() / 2]).unwrap();
        let mut r = BackupReader::open(&path).unwrap();
        let mut buf = Vec::new();
        let err = loop {
            match r.next_line(&mut buf) {
                Ok(true) => continue,
                Ok(false) => panic!("a truncated gzip stream read to its end"),
                Err(e) => break e.to_string(),
            }
        };
        assert!(
            err.contains("t.backup is refused: it is not a whole gzip stream"),
            "{err}"
        );
    }

    #[test]
    fn an_unwritable_place_leaves_nothing() {
        let err = BackupWriter::create(Path::new("/nonexistent-dir/x.backup"))
            .err()
            .unwrap()
            .to_string();
        assert!(
            err.contains("cannot write /nonexistent-dir/x.backup"),
            "{err}"
        );
    }
}
