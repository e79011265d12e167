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
        let err = out.try_clone().map_err(|e| Error::io(log, e))?;
        let mut cmd = Command::new(program);
        cmd.args(args)
            .stdin(Stdio::null())
            .stdout(Stdio::from(out))
            .stderr(Stdio::from(err));
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
        let child = rx
            .recv()
            .map_err(|_| Error::Start(format!("{name}: spawner thread is gone")))?
            .map_err(|e| Error::Start(format!("cannot run {}: {e}", program.display())))?;
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
