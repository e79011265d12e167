//! Fault injection shared by the plugins' restart tests: an API server restart that a command
//! under test is certain to see, however its polls fall.

use std::time::{Duration, Instant};

use crate::{Error, Testbed};

/// How long the stopped server waits for a request it has not read before it takes one it had
/// read for granted. A `--wait` polls at least every [`Backoff::MAX`] (5 s) while the server
/// answers (`kclient::render::Backoff` in this workspace), so after this long a command still
/// running has a request out: either one sent after the stop (seen as unread bytes), or one
/// the server read just before the stop and never answered (invisible from outside, and reset
/// by the kill all the same).
const NO_UNREAD_REQUEST_AFTER: Duration = Duration::from_secs(10);

/// A process stopped with SIGSTOP, continued on drop: a test that fails while the API server
/// is stopped must not leave it stopped for the next test of its binary (each such test then
/// failed with "client error (Connect)" in CI).
struct Stopped(u32);

impl Stopped {
    fn new(pid: u32) -> Result<Stopped, Error> {
        signal(pid, libc::SIGSTOP)?;
        Ok(Stopped(pid))
    }
}

impl Drop for Stopped {
    fn drop(&mut self) {
        let _ = signal(self.0, libc::SIGCONT);
    }
}

fn signal(pid: u32, sig: libc::c_int) -> Result<(), Error> {
    let pid =
        libc::pid_t::try_from(pid).map_err(|_| Error::Start(format!("pid {pid} out of range")))?;
    // SAFETY: kill(2) takes plain integers and touches no memory of ours.
    if unsafe { libc::kill(pid, sig) } != 0 {
        return Err(Error::Start(format!(
            "cannot signal process {pid}: {}",
            std::io::Error::last_os_error()
        )));
    }
    Ok(())
}

/// The connections of process `pid` to local `port`, from `/proc/net/tcp*` (hex `addr:port`
/// columns, `tx_queue:rx_queue`, the socket inode) and the inodes of `/proc/<pid>/fd`: for
/// each, whether the server's end holds bytes it has not read (a request sent, not answered).
fn connections(pid: u32, port: u16) -> Vec<bool> {
    let inodes: Vec<String> = std::fs::read_dir(format!("/proc/{pid}/fd"))
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|e| std::fs::read_link(e.path()).ok())
        .filter_map(|l| {
            let l = l.to_string_lossy().to_string();
            Some(l.strip_prefix("socket:[")?.strip_suffix(']')?.to_string())
        })
        .collect();
    let rows: Vec<Vec<String>> = ["/proc/net/tcp", "/proc/net/tcp6"]
        .iter()
        .flat_map(|f| {
            std::fs::read_to_string(f)
                .unwrap_or_default()
                .lines()
                .skip(1)
                .map(|l| l.split_whitespace().map(str::to_string).collect())
                .collect::<Vec<Vec<String>>>()
        })
        .filter(|cols: &Vec<String>| cols.len() > 9)
        .collect();
    let port_of = |addr: &str| u16::from_str_radix(addr.rsplit(':').next().unwrap_or(""), 16).ok();
    let mine: Vec<u16> = rows
        .iter()
        .filter(|c| inodes.contains(&c[9]) && port_of(&c[2]) == Some(port))
        .filter_map(|c| port_of(&c[1]))
        .collect();
    rows.iter()
        .filter(|c| {
            port_of(&c[1]) == Some(port) && port_of(&c[2]).is_some_and(|p| mine.contains(&p))
        })
        .map(|c| {
            c[4].split(':')
                .nth(1)
                .and_then(|q| u64::from_str_radix(q, 16).ok())
                .unwrap_or(0)
                > 0
        })
        .collect()
}

impl Testbed {
    /// Restarts the API server so that the command `cli` (a pid) sees it go: the server is
    /// stopped (SIGSTOP) until one of the command's requests waits on it, then killed (which
    /// resets that request) and started again. A plain restart can fall between two polls and
    /// test nothing. `output` says what the command printed, for the error.
    ///
    /// A request the server read just before the stop shows no unread bytes; after
    /// [`NO_UNREAD_REQUEST_AFTER`] with the command connected, such a request is taken as the
    /// one that waits (CI stopped the server in that window and waited for bytes in vain).
    pub async fn restart_apiserver_under(
        &self,
        cli: u32,
        output: impl Fn() -> String,
    ) -> Result<(), Error> {
        let (_, api) = self
            .pids()
            .into_iter()
            .find(|(n, _)| n == "kube-apiserver")
            .ok_or_else(|| Error::Start("no kube-apiserver process".into()))?;
        let port = self.api_port()?;
        let stopped = Stopped::new(api)?;
        let since = Instant::now();
        loop {
            let conns = connections(cli, port);
            if conns.iter().any(|unread| *unread) {
                break;
            }
            let waited = since.elapsed();
            if waited >= NO_UNREAD_REQUEST_AFTER && !conns.is_empty() {
                break;
            }
            if waited >= Duration::from_secs(30)
                || !std::path::Path::new(&format!("/proc/{cli}")).exists()
            {
                return Err(Error::Start(format!(
                    "no request of process {cli} waits on the stopped API server after {waited:?}: {}",
                    output()
                )));
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        // The kill ends the stopped server; the guard's SIGCONT then finds nothing to continue.
        let restarted = self.restart_process("kube-apiserver").await;
        drop(stopped);
        restarted
    }
}
