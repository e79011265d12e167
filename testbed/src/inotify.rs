//! The testbed's inotify budget.
//!
//! Every kube-apiserver, kube-controller-manager and controller-runtime manager opens inotify
//! instances (file watchers for certificates and kubeconfigs), and the kernel caps them per user
//! with `fs.inotify.max_user_instances` (128 by default) and `fs.inotify.max_user_watches`. Two
//! real testbeds on one machine (a sandbox running tenants and `make demo`, or a test binary
//! starting several) ran out, and a manager then died at start with `too many open files`. kind
//! documents the same wall and its fix on its known-issues page ("Pod errors due to too many
//! open files": `fs.inotify.max_user_watches = 524288`, `fs.inotify.max_user_instances = 512`).
//!
//! So before a testbed starts any process it compares what it will open with the limits and
//! what this user already uses: as root it raises the limits (once, with one info line);
//! otherwise it refuses in one line naming the limit, the use and the command that raises it.

use std::path::Path;
use std::sync::Mutex;

use crate::{Error, Options};

/// The sysctl files of the two limits.
const INSTANCES_FILE: &str = "/proc/sys/fs/inotify/max_user_instances";
const WATCHES_FILE: &str = "/proc/sys/fs/inotify/max_user_watches";

/// What kind's known-issues page recommends; the least a root testbed raises the limits to.
pub(crate) const RECOMMENDED: Budget = Budget {
    instances: 512,
    watches: 524_288,
};

/// A count of inotify instances and watches: a need, a use or a pair of limits.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct Budget {
    pub instances: u64,
    pub watches: u64,
}

impl Budget {
    fn plus(self, o: Budget) -> Budget {
        Budget {
            instances: self.instances.saturating_add(o.instances),
            watches: self.watches.saturating_add(o.watches),
        }
    }

    fn minus(self, o: Budget) -> Budget {
        Budget {
            instances: self.instances.saturating_sub(o.instances),
            watches: self.watches.saturating_sub(o.watches),
        }
    }

    fn fits_under(self, limit: Budget) -> bool {
        self.instances <= limit.instances && self.watches <= limit.watches
    }
}

/// What a testbed with `opts` opens, from a count of `/proc/*/fdinfo` on a started real testbed
/// (kube-apiserver 3 instances and 4 watches; etcd and kube-controller-manager none; each CAPI
/// manager, Kamaji and the BYOH manager 1 and 2) with room to spare. Kamaji's tenant control
/// planes count too, 13 instances and 19 watches each (kube-apiserver 6, kube-controller-manager
/// 7, kube-scheduler none), so a Kamaji testbed leaves room for [`TENANTS`] of them.
pub(crate) fn need(opts: &Options) -> Budget {
    let b = |instances, watches| Budget { instances, watches };
    let mut n = b(5, 8);
    if opts.controller_manager {
        n = n.plus(b(1, 4));
    }
    if opts.capi_manager {
        n = n.plus(b(3, 6));
    }
    if opts.kamaji {
        n = n.plus(b(2 + 14 * TENANTS, 4 + 24 * TENANTS));
    }
    if opts.byoh {
        n = n.plus(b(2, 4));
    }
    n
}

/// How many tenant control planes running at once a Kamaji testbed leaves room for.
const TENANTS: u64 = 4;

/// What to do about the budget.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Decision {
    /// The limits leave room; nothing to do.
    Fits,
    /// Raise the limits to `to`. `required`: the testbed does not fit under the current ones
    /// (otherwise the raise only brings them up to [`RECOMMENDED`]).
    Raise { to: Budget, required: bool },
    /// It does not fit and cannot be raised: one line saying so.
    Refuse(String),
}

/// Decides from the testbed's `need`, the current `limits`, what the user already `used`, and
/// whether it may write the limits (`root`).
pub(crate) fn decide(need: Budget, limits: Budget, used: Budget, root: bool) -> Decision {
    let total = used.plus(need);
    let fits = total.fits_under(limits);
    let recommended = RECOMMENDED.fits_under(limits);
    if fits && (recommended || !root) {
        return Decision::Fits;
    }
    // Twice the total leaves room for a second testbed started next to this one.
    let to = Budget {
        instances: limits
            .instances
            .max(RECOMMENDED.instances)
            .max(total.instances.saturating_mul(2)),
        watches: limits
            .watches
            .max(RECOMMENDED.watches)
            .max(total.watches.saturating_mul(2)),
    };
    if root {
        return Decision::Raise {
            to,
            required: !fits,
        };
    }
    Decision::Refuse(refusal(need, limits, used, to))
}

/// The one line of a refusal: which limit, how much of it is in use, what the testbed needs,
/// and the command that raises it.
fn refusal(need: Budget, limits: Budget, used: Budget, to: Budget) -> String {
    let mut short = Vec::new();
    let mut raise = Vec::new();
    if used.instances.saturating_add(need.instances) > limits.instances {
        short.push(format!(
            "fs.inotify.max_user_instances is {}, {} of them in use, and this testbed needs {} more",
            limits.instances, used.instances, need.instances
        ));
        raise.push(format!("fs.inotify.max_user_instances={}", to.instances));
    }
    if used.watches.saturating_add(need.watches) > limits.watches {
        short.push(format!(
            "fs.inotify.max_user_watches is {}, {} of them in use, and this testbed needs {} more",
            limits.watches, used.watches, need.watches
        ));
        raise.push(format!("fs.inotify.max_user_watches={}", to.watches));
    }
    format!(
        "not enough inotify instances for another testbed: {}; raise it: sudo sysctl -w {}",
        short.join("; "),
        raise.join(" ")
    )
}

/// The current limits.
fn limits() -> Result<Budget, Error> {
    let read = |f: &str| -> Result<u64, Error> {
        let p = Path::new(f);
        let text = std::fs::read_to_string(p).map_err(|e| Error::io(p, e))?;
        text.trim()
            .parse()
            .map_err(|e| Error::Start(format!("{f}: {e}")))
    };
    Ok(Budget {
        instances: read(INSTANCES_FILE)?,
        watches: read(WATCHES_FILE)?,
    })
}

/// Inotify instances and watches held by the processes of `uid`: the `/proc/PID/fd` links to
/// `anon_inode:inotify`, and their `inotify wd:` lines in `/proc/PID/fdinfo`. Processes that
/// end while being read are skipped.
pub(crate) fn in_use(uid: u32) -> Budget {
    use std::os::unix::fs::MetadataExt;
    let mut used = Budget::default();
    let Ok(procs) = std::fs::read_dir("/proc") else {
        return used;
    };
    for p in procs.flatten() {
        let name = p.file_name();
        let is_pid = name.to_string_lossy().bytes().all(|b| b.is_ascii_digit());
        if is_pid && p.metadata().map(|m| m.uid()).ok() == Some(uid) {
            used = used.plus(held_by(&p.path()));
        }
    }
    used
}

/// The inotify instances and watches of one process (`/proc/PID`).
fn held_by(proc_dir: &Path) -> Budget {
    let mut used = Budget::default();
    let Ok(fds) = std::fs::read_dir(proc_dir.join("fd")) else {
        return used;
    };
    for fd in fds.flatten() {
        let inotify =
            std::fs::read_link(fd.path()).is_ok_and(|l| l.as_os_str() == "anon_inode:inotify");
        if !inotify {
            continue;
        }
        used.instances = used.instances.saturating_add(1);
        let info = std::fs::read_to_string(proc_dir.join("fdinfo").join(fd.file_name()));
        let watches = info.map_or(0, |t| {
            t.lines().filter(|l| l.starts_with("inotify wd:")).count()
        });
        used.watches = used.watches.saturating_add(watches as u64);
    }
    used
}

/// What testbeds of this process have reserved and not yet started (their instances are not
/// all open yet, so [`in_use`] cannot see them): concurrent starts count each other.
static PENDING: Mutex<Budget> = Mutex::new(Budget {
    instances: 0,
    watches: 0,
});

/// A testbed's reservation while it starts; released when dropped.
pub(crate) struct Reservation(Budget);

impl Drop for Reservation {
    fn drop(&mut self) {
        if let Ok(mut p) = PENDING.lock() {
            *p = p.minus(self.0);
        }
    }
}

/// Checks (and as root raises) the limits for a testbed with `opts`, before it starts anything.
pub(crate) fn reserve(opts: &Options) -> Result<Reservation, Error> {
    let need = need(opts);
    let mut pending = PENDING
        .lock()
        .map_err(|_| Error::Start("inotify budget lock poisoned".into()))?;
    // SAFETY: plain syscalls without arguments.
    let (uid, euid) = unsafe { (libc::getuid(), libc::geteuid()) };
    let limits = limits()?;
    let used = in_use(uid).plus(*pending);
    match decide(need, limits, used, euid == 0) {
        Decision::Fits => {}
        Decision::Raise { to, required } => {
            if let Err(e) = raise(to) {
                if required {
                    let line = refusal(need, limits, used, to);
                    return Err(Error::Start(format!("{line} (writing it failed: {e})")));
                }
                tracing::debug!("could not raise the inotify limits: {e}");
            } else {
                tracing::info!(
                    "raised fs.inotify.max_user_instances from {} to {} and fs.inotify.max_user_watches from {} to {} ({} instances in use; a testbed needs about {})",
                    limits.instances,
                    to.instances,
                    limits.watches,
                    to.watches,
                    used.instances,
                    need.instances
                );
            }
        }
        Decision::Refuse(line) => return Err(Error::Start(line)),
    }
    *pending = pending.plus(need);
    Ok(Reservation(need))
}

/// Writes the two limits (root only).
fn raise(to: Budget) -> Result<(), Error> {
    for (file, value) in [(INSTANCES_FILE, to.instances), (WATCHES_FILE, to.watches)] {
        let p = Path::new(file);
        std::fs::write(p, value.to_string()).map_err(|e| Error::io(p, e))?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    const DEFAULT: Budget = Budget {
        instances: 128,
        watches: 8192,
    };
    const NEED: Budget = Budget {
        instances: 30,
        watches: 200,
    };

    fn used(instances: u64) -> Budget {
        Budget {
            instances,
            watches: 100,
        }
    }

    #[test]
    fn room_under_the_recommended_limits_needs_nothing() {
        assert_eq!(decide(NEED, RECOMMENDED, used(100), true), Decision::Fits);
        assert_eq!(decide(NEED, RECOMMENDED, used(100), false), Decision::Fits);
    }

    #[test]
    fn room_under_the_default_limits_is_enough_without_root() {
        assert_eq!(decide(NEED, DEFAULT, used(90), false), Decision::Fits);
    }

    #[test]
    fn root_raises_the_default_limits_to_what_kind_recommends() {
        assert_eq!(
            decide(NEED, DEFAULT, used(10), true),
            Decision::Raise {
                to: RECOMMENDED,
                required: false
            }
        );
        // 120 of 128 in use: the testbed does not fit, so the raise is required.
        assert_eq!(
            decide(NEED, DEFAULT, used(120), true),
            Decision::Raise {
                to: RECOMMENDED,
                required: true
            }
        );
    }

    #[test]
    fn root_raises_past_the_recommendation_when_that_is_not_enough() {
        let Decision::Raise { to, required } = decide(NEED, RECOMMENDED, used(500), true) else {
            panic!("expected a raise");
        };
        assert!(required);
        assert_eq!(to.instances, 1060, "twice the 530 in use once it runs");
        assert_eq!(to.watches, RECOMMENDED.watches);
    }

    #[test]
    fn without_root_a_testbed_that_does_not_fit_is_refused_in_one_line() {
        let Decision::Refuse(line) = decide(NEED, DEFAULT, used(120), false) else {
            panic!("expected a refusal");
        };
        assert!(!line.contains('\n'), "{line}");
        assert!(
            line.contains("fs.inotify.max_user_instances is 128, 120 of them in use"),
            "{line}"
        );
        assert!(
            line.ends_with("sudo sysctl -w fs.inotify.max_user_instances=512"),
            "{line}"
        );
        assert!(!line.contains("max_user_watches"), "{line}");
    }

    #[test]
    fn the_watch_limit_is_named_when_it_is_the_short_one() {
        let used = Budget {
            instances: 10,
            watches: 8100,
        };
        let Decision::Refuse(line) = decide(NEED, DEFAULT, used, false) else {
            panic!("expected a refusal");
        };
        assert!(
            line.contains("fs.inotify.max_user_watches is 8192"),
            "{line}"
        );
        assert!(
            line.ends_with("sudo sysctl -w fs.inotify.max_user_watches=524288"),
            "{line}"
        );
    }

    #[test]
    fn a_real_testbed_needs_more_than_a_bare_one() {
        let bare = need(&Options::default());
        let real = need(&Options {
            capi_manager: true,
            kamaji: true,
            byoh: true,
            ..Options::default()
        });
        assert!(real.instances > bare.instances, "{real:?} vs {bare:?}");
        // Two real testbeds fit under kind's recommendation, not under the default.
        assert!(real.plus(real).fits_under(RECOMMENDED));
        assert!(!real.plus(real).fits_under(DEFAULT));
    }

    #[test]
    fn this_process_inotify_instances_and_watches_are_counted() {
        let me = Path::new("/proc/self");
        let before = held_by(me);
        // SAFETY: plain syscalls on a descriptor of our own; a path that is a C string.
        let fd = unsafe { libc::inotify_init1(libc::IN_CLOEXEC) };
        assert!(fd >= 0);
        // SAFETY: as above.
        let wd = unsafe { libc::inotify_add_watch(fd, c"/".as_ptr(), libc::IN_CREATE) };
        assert!(wd >= 0);
        let with = held_by(me);
        // SAFETY: closing the descriptor opened above.
        unsafe { libc::close(fd) };
        assert_eq!(
            with.minus(before),
            Budget {
                instances: 1,
                watches: 1
            }
        );
        // SAFETY: plain syscall.
        let all = in_use(unsafe { libc::getuid() });
        assert!(all.instances >= before.instances, "{all:?} vs {before:?}");
    }
}
