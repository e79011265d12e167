//! Child processes that can never outlive the test binary.
//!
//! A shared testbed lives in a `static`, and statics are never dropped, so `Drop` alone cannot
//! promise that etcd and kube-apiserver stop when a test binary exits or panics. Every child is
//! therefore spawned with `PR_SET_PDEATHSIG(SIGKILL)`. The kernel sends that signal when the
//! *thread* that forked the child exits, so all spawning happens on one dedicated thread that
//! lives as long as the process. When the process ends, for any reason, the kernel kills the
//! children. `Drop` of a [`Proc`] still kills eagerly for non-static owners (the sandbox).

use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::sync::{Mutex, OnceLock};
use std::time::Duration;

use crate::Error;

/// Process groups still running, and directories to remove, at process exit. The test harness
/// ends with `exit()`, which runs `atexit` handlers before the kernel's death signals would.
static LIVE: Mutex<Vec<i32>> = Mutex::new(Vec::new());
static CLEANUP_DIRS: Mutex<Vec<std::path::PathBuf>> = Mutex::new(Vec::new());

extern "C" fn at_exit() {
    if let Ok(pids) = LIVE.lock() {
        for pid in pids.iter() {
            // SAFETY: plain syscall on a process group we created.
            unsafe {
                libc::kill(-pid, libc::SIGKILL);
            }
        }
    }
    if let Ok(dirs) = CLEANUP_DIRS.lock() {
        for d in dirs.iter() {
            let _ = std::fs::remove_dir_all(d);
        }
    }
}

fn register_at_exit() {
    static ONCE: std::sync::Once = std::sync::Once::new();
    // SAFETY: registers a plain extern "C" function that only touches statics.
    ONCE.call_once(|| unsafe {
        libc::atexit(at_exit);
    });
}

/// Removes `dir` when the process exits (used for testbeds that live in statics).
pub fn remove_at_exit(dir: &Path) {
    register_at_exit();
    if let Ok(mut v) = CLEANUP_DIRS.lock() {
        v.push(dir.to_path_buf());
    }
}

type SpawnRequest = (Command, mpsc::Sender<std::io::Result<Child>>);

fn spawner() -> &'static Mutex<mpsc::Sender<SpawnRequest>> {
    static SPAWNER: OnceLock<Mutex<mpsc::Sender<SpawnRequest>>> = OnceLock::new();
    SPAWNER.get_or_init(|| {
        let (tx, rx) = mpsc::channel::<SpawnRequest>();
        std::thread::Builder::new()
            .name("testbed-spawner".into())
            .spawn(move || {
                for (mut cmd, reply) in rx {
                    let _ = reply.send(cmd.spawn());
                }
                // The sender lives in a static, so this loop only ends when the process does.
                loop {
                    std::thread::park();
                }
            })
            .map(|_| ())
            .unwrap_or_else(|e| panic!("cannot start the testbed spawner thread: {e}"));
        Mutex::new(tx)
    })
}

/// A running child process, killed (with its process group) when dropped.
pub struct Proc {
    pub name: String,
    child: Child,
    /// How it was started, to start it again ([`Proc::respawn`]).
    spec: Spec,
}

#[derive(Clone)]
struct Spec {
    program: std::path::PathBuf,
    args: Vec<String>,
    log: std::path::PathBuf,
    env: Vec<(String, String)>,
    /// Output written as a container runtime writes a container's: one CRI log line each.
    cri: bool,
}

impl Proc {
    /// Spawns `program args` with stdout and stderr appended to `log`.
    pub fn spawn(name: &str, program: &Path, args: &[String], log: &Path) -> Result<Proc, Error> {
        Proc::spawn_with_env(name, program, args, log, &[])
    }

    /// Like [`Proc::spawn`], with extra environment variables.
    pub fn spawn_with_env(
        name: &str,
        program: &Path,
        args: &[String],
        log: &Path,
        env: &[(&str, String)],
    ) -> Result<Proc, Error> {
        let spec = Spec {
            program: program.to_path_buf(),
            args: args.to_vec(),
            log: log.to_path_buf(),
            env: env
                .iter()
                .map(|(k, v)| (k.to_string(), v.clone()))
                .collect(),
            cri: false,
        };
        Proc::start(name, spec, false)
    }

    /// Like [`Proc::spawn`], with stdout and stderr written to `log` as a container runtime
    /// writes a container's log: each line in the CRI log format, `<RFC 3339 time> stdout|stderr
    /// F|P <text>` (`k8s.io/cri-client` `pkg/logs/logs.go`, v0.36.3, reads it back; containerd
    /// writes it). The SIMULATED kubelet ([`crate::pods::image`]) serves it as `pods/log`.
    pub fn spawn_cri(
        name: &str,
        program: &Path,
        args: &[String],
        log: &Path,
    ) -> Result<Proc, Error> {
        let spec = Spec {
            program: program.to_path_buf(),
            args: args.to_vec(),
            log: log.to_path_buf(),
            env: Vec::new(),
            cri: true,
        };
        Proc::start(name, spec, false)
    }

    /// Starts the same process again (after [`Proc::kill`]): same program, arguments and
    /// environment; its log is appended to.
    pub fn respawn(&self) -> Result<Proc, Error> {
        Proc::start(&self.name, self.spec.clone(), true)
    }

    fn start(name: &str, spec: Spec, append: bool) -> Result<Proc, Error> {
        let (program, args, log) = (&spec.program, &spec.args, &spec.log);
        let out = std::fs::OpenOptions::new()
            .create(true)
            .write(true)
            .append(append)
            .truncate(!append)
            .open(log)
            .map_err(|e| Error::io(log, e))?;
        let mut cmd = Command::new(program);
        cmd.args(args).stdin(Stdio::null());
        let cri_log = if spec.cri {
            cmd.stdout(Stdio::piped()).stderr(Stdio::piped());
            Some(std::sync::Arc::new(Mutex::new(out)))
        } else {
            let err = out.try_clone().map_err(|e| Error::io(log, e))?;
            cmd.stdout(Stdio::from(out)).stderr(Stdio::from(err));
            None
        };
        for (k, v) in &spec.env {
            cmd.env(k, v);
        }
        // SAFETY: prctl and setpgid are async-signal-safe and touch no Rust state.
        unsafe {
            use std::os::unix::process::CommandExt;
            cmd.pre_exec(|| {
                libc::setpgid(0, 0);
                if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL) != 0 {
                    return Err(std::io::Error::last_os_error());
                }
                Ok(())
            });
        }
        let (tx, rx) = mpsc::channel();
        spawner()
            .lock()
            .map_err(|_| Error::Start(format!("{name}: spawner lock poisoned")))?
            .send((cmd, tx))
            .map_err(|_| Error::Start(format!("{name}: spawner thread is gone")))?;
        let mut child = rx
            .recv()
            .map_err(|_| Error::Start(format!("{name}: spawner thread is gone")))?
            .map_err(|e| Error::Start(format!("cannot run {}: {e}", program.display())))?;
        if let Some(file) = cri_log {
            if let Some(o) = child.stdout.take() {
                let _ = cri::copy(name, "stdout", o, file.clone());
            }
            if let Some(e) = child.stderr.take() {
                let _ = cri::copy(name, "stderr", e, file);
            }
        }
        register_at_exit();
        if let Ok(mut v) = LIVE.lock() {
            v.push(child.id() as i32);
        }
        Ok(Proc {
            name: name.to_string(),
            child,
            spec,
        })
    }

    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Whether the process has exited (and with what status).
    pub fn exited(&mut self) -> Option<std::process::ExitStatus> {
        self.child.try_wait().ok().flatten()
    }

    /// SIGTERM to the process group, then SIGKILL if it still runs after `grace`, as a kubelet
    /// stops a container (on a thread of its own: the caller does not wait).
    pub fn terminate(self, grace: Duration) {
        // SAFETY: plain syscall on a process group we created.
        unsafe {
            libc::kill(-(self.child.id() as i32), libc::SIGTERM);
        }
        let mut me = self;
        std::thread::spawn(move || {
            let deadline = std::time::Instant::now() + grace;
            while std::time::Instant::now() < deadline {
                if me.exited().is_some() {
                    break;
                }
                std::thread::sleep(Duration::from_millis(100));
            }
            me.kill();
        });
    }

    /// Kills the process group and reaps the child.
    pub fn kill(&mut self) {
        let pid = self.child.id() as i32;
        if let Ok(mut v) = LIVE.lock() {
            v.retain(|p| *p != pid);
        }
        // SAFETY: plain syscall on a process group we created.
        unsafe {
            libc::kill(-pid, libc::SIGKILL);
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Drop for Proc {
    fn drop(&mut self) {
        self.kill();
    }
}

/// Container output in the CRI log format, as containerd's `cio` log writer puts it in a
/// container's log file.
pub(crate) mod cri {
    use std::io::{BufRead, BufReader, Read, Write};
    use std::sync::{Arc, Mutex};

    /// The longest piece of a line one log record holds: a longer line is split into partial
    /// records (`P`) and its last piece (`F`), as containerd does (`maxLen`, 16 KiB).
    pub(crate) const MAX_RECORD: usize = 16 * 1024;

    /// One record: `<time> <stream> <tag> <text>\n`, the time in RFC 3339 with nanoseconds (UTC).
    pub(crate) fn record(time: jiff::Timestamp, stream: &str, full: bool, text: &[u8]) -> Vec<u8> {
        let tag = if full { "F" } else { "P" };
        let mut out = format!("{time:.9} {stream} {tag} ").into_bytes();
        out.extend_from_slice(text);
        out.push(b'\n');
        out
    }

    /// Copies `from` (a child's stdout or stderr) into `log` on a thread of its own until the
    /// child and everything it started close it, one record per line (or per piece of a long
    /// line), each written whole under the lock, so the two streams never interleave within a
    /// record. The thread, when it could be started.
    pub(crate) fn copy(
        name: &str,
        stream: &'static str,
        from: impl Read + Send + 'static,
        log: Arc<Mutex<std::fs::File>>,
    ) -> Option<std::thread::JoinHandle<()>> {
        let spawned = std::thread::Builder::new()
            .name(format!("cri-log-{name}"))
            .spawn(move || {
                let mut r = BufReader::new(from);
                let mut line = Vec::new();
                loop {
                    line.clear();
                    let n = match (&mut r)
                        .take(MAX_RECORD as u64)
                        .read_until(b'\n', &mut line)
                    {
                        Ok(0) | Err(_) => return,
                        Ok(n) => n,
                    };
                    let full = line.last() == Some(&b'\n');
                    if full {
                        line.pop();
                    } else if n < MAX_RECORD {
                        // The stream ended without a newline: the last line, whole.
                        if let Ok(mut f) = log.lock() {
                            let rec = record(jiff::Timestamp::now(), stream, true, &line);
                            let _ = f.write_all(&rec);
                        }
                        return;
                    }
                    // Stamped under the lock: the file's order is the timestamps' order, so
                    // `--timestamps` and `--since` read a log in time order across both streams.
                    let Ok(mut f) = log.lock() else { return };
                    let rec = record(jiff::Timestamp::now(), stream, full, &line);
                    if f.write_all(&rec).is_err() {
                        return;
                    }
                }
            });
        spawned
            .map_err(|e| tracing::warn!("{name}: cannot copy its {stream} to its log: {e}"))
            .ok()
    }
}

/// The error of a process that exited while it was awaited: its name, its exit status and its
/// own last error line, so `too many open files` reads as that and not as a timeout.
pub(crate) fn exited_error(what: &str, status: std::process::ExitStatus, log: &Path) -> Error {
    let text = std::fs::read_to_string(log).unwrap_or_default();
    let line = last_error_line(&text).unwrap_or_else(|| "it logged nothing".into());
    Error::Start(format!(
        "{what} exited ({status}): {line} (log: {})",
        log.display()
    ))
}

/// Polls `ready` every 100 ms until it returns true. Fails as soon as `exited` reports the
/// process gone ([`exited_error`]), and after `timeout` with the log's last lines.
pub(crate) async fn wait_ready<E, F, Fut>(
    what: &str,
    log: &Path,
    timeout: std::time::Duration,
    mut exited: E,
    ready: F,
) -> Result<(), Error>
where
    E: FnMut() -> Option<std::process::ExitStatus>,
    F: Fn() -> Fut,
    Fut: std::future::Future<Output = bool>,
{
    let deadline = std::time::Instant::now() + timeout;
    loop {
        if ready().await {
            return Ok(());
        }
        if let Some(status) = exited() {
            return Err(exited_error(what, status, log));
        }
        if std::time::Instant::now() > deadline {
            return Err(Error::Start(format!(
                "{what} not ready after {timeout:?}; last lines of {}:\n{}",
                log.display(),
                crate::log_tail(log)
            )));
        }
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
}

/// The last line of a log that reports an error, in the forms the upstream binaries write: klog
/// (`E0102 12:00:00.000000 1 main.go:1] "Problem running manager" err="..."`, the header
/// dropped), zap JSON (`{"level":"error","msg":..,"error":..}`), and Go's `panic:`, `fatal
/// error:` and cobra's `Error:`. Without one, the last non-empty line.
pub(crate) fn last_error_line(text: &str) -> Option<String> {
    let lines = || text.lines().map(str::trim).filter(|l| !l.is_empty());
    lines()
        .rev()
        .find_map(error_in)
        .or_else(|| lines().next_back().map(str::to_string))
}

/// The error a log line reports, if it reports one.
fn error_in(line: &str) -> Option<String> {
    let b = line.as_bytes();
    let klog = b.len() > 6
        && matches!(b[0], b'E' | b'F')
        && b[1..5].iter().all(u8::is_ascii_digit)
        && b[5] == b' ';
    if klog {
        return Some(match line.split_once("] ") {
            Some((_, msg)) => msg.to_string(),
            None => line.to_string(),
        });
    }
    if line.starts_with('{') {
        let v: serde_json::Value = serde_json::from_str(line).ok()?;
        let level = v["level"].as_str()?;
        if !matches!(level, "error" | "dpanic" | "panic" | "fatal") {
            return None;
        }
        let msg = v["msg"].as_str().unwrap_or_default();
        return Some(match v["error"].as_str() {
            Some(err) => format!("{msg:?} err={err:?}"),
            None => format!("{msg:?}"),
        });
    }
    ["panic: ", "fatal error: ", "Error: ", "error: "]
        .iter()
        .any(|p| line.starts_with(p))
        .then(|| line.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_last_error_line_is_found_in_each_upstream_form() {
        let klog = "I0102 10:00:00.000000   42 main.go:10] \"starting manager\"\nE0102 10:00:01.000000   42 main.go:99] \"Problem running manager\" err=\"too many open files\" logger=\"setup\"\n";
        assert_eq!(
            last_error_line(klog).as_deref(),
            Some("\"Problem running manager\" err=\"too many open files\" logger=\"setup\"")
        );
        let zap = "{\"level\":\"info\",\"msg\":\"starting\"}\n{\"level\":\"error\",\"msg\":\"unable to start manager\",\"error\":\"too many open files\"}\n{\"level\":\"info\",\"msg\":\"bye\"}\n";
        assert_eq!(
            last_error_line(zap).as_deref(),
            Some("\"unable to start manager\" err=\"too many open files\"")
        );
        let panic = "starting\npanic: runtime error: index out of range\n\ngoroutine 1 [running]:\nmain.main()\n";
        assert_eq!(
            last_error_line(panic).as_deref(),
            Some("panic: runtime error: index out of range")
        );
        assert_eq!(
            last_error_line("a\nlast words\n\n").as_deref(),
            Some("last words")
        );
        assert_eq!(last_error_line("\n"), None);
    }

    /// A real process that dies at start is reported with its own last error line, at once,
    /// not as a timeout.
    #[tokio::test]
    async fn a_process_that_dies_at_start_is_reported_with_its_last_error_line() {
        let dir = std::env::temp_dir().join(format!("testbed-died-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let log = dir.join("capi-manager.log");
        let script = "echo 'I0102 10:00:00.000000 1 main.go:1] \"starting manager\"'; \
             echo 'E0102 10:00:01.000000 1 main.go:2] \"Problem running manager\" err=\"too many open files\"' >&2; \
             exit 1";
        let mut p = Proc::spawn(
            "capi-manager",
            Path::new("sh"),
            &["-c".into(), script.into()],
            &log,
        )
        .unwrap();
        let t0 = std::time::Instant::now();
        let err = wait_ready(
            "capi-manager",
            &log,
            std::time::Duration::from_secs(90),
            || p.exited(),
            || async { false },
        )
        .await
        .unwrap_err()
        .to_string();
        assert!(t0.elapsed() < std::time::Duration::from_secs(30), "{err}");
        assert_eq!(
            err,
            format!(
                "capi-manager exited (exit status: 1): \"Problem running manager\" err=\"too many open files\" (log: {})",
                log.display()
            )
        );
        let _ = std::fs::remove_dir_all(&dir);
    }
}
