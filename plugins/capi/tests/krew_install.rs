//! Acceptance with the real krew (sigs.k8s.io/krew, built from the Go module proxy by
//! `testbed/build-bins.sh krew`) and the kubectl on PATH: `make dist`'s packaging
//! (`scripts/dist.sh package` and `manifests`, over the debug build) makes the archives and
//! manifests; krew's own validator (`validate-krew-manifest`, which installs every platform)
//! accepts them; `kubectl krew install --manifest --archive` installs one; a local git repository
//! laid out as our index (`plugins/<name>.yaml`) is added with `kubectl krew index add`, a plugin
//! installed from it and upgraded with `kubectl krew upgrade`; and kubectl's plugin completion,
//! set up by `kubectl <plugin> completion install`, keeps working across the upgrade.
//!
//! Everything runs in a throwaway KREW_ROOT and HOME; the archives are served by a small HTTP
//! server on 127.0.0.1 (krew downloads index plugins over HTTP only).

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use testbed::fixtures::run::{assert_contains, assert_ok, stderr};

fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../..")
        .canonicalize()
        .unwrap()
}

fn workspace_version() -> String {
    format!("v{}", env!("CARGO_PKG_VERSION"))
}

/// Serves the files under `root` (GET only, no directory listings) until the process ends.
fn serve(root: PathBuf) -> u16 {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    std::thread::spawn(move || {
        for conn in listener.incoming().flatten() {
            let root = root.clone();
            std::thread::spawn(move || answer(conn, &root));
        }
    });
    port
}

fn answer(mut conn: TcpStream, root: &Path) {
    let mut reader = BufReader::new(conn.try_clone().unwrap());
    let mut request = String::new();
    if reader.read_line(&mut request).is_err() {
        return;
    }
    // Skip the headers.
    let mut line = String::new();
    while reader.read_line(&mut line).is_ok_and(|n| n > 2) {
        line.clear();
    }
    let path = request.split_whitespace().nth(1).unwrap_or("/");
    let file = (!path.contains(".."))
        .then(|| root.join(path.trim_start_matches('/')))
        .filter(|f| f.is_file());
    let _ = match file {
        Some(f) => {
            let mut body = Vec::new();
            std::fs::File::open(&f)
                .unwrap()
                .read_to_end(&mut body)
                .unwrap();
            conn.write_all(
                format!(
                    "HTTP/1.1 200 OK\r\nContent-Length: {}\r\nContent-Type: application/gzip\r\nConnection: close\r\n\r\n",
                    body.len()
                )
                .as_bytes(),
            )
            .and_then(|_| conn.write_all(&body))
        }
        None => conn
            .write_all(b"HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"),
    };
}

fn which(name: &str) -> Option<PathBuf> {
    std::env::split_paths(&std::env::var_os("PATH")?)
        .map(|d| d.join(name))
        .find(|p| p.is_file())
}

/// The world krew runs in: its own KREW_ROOT and HOME, and a PATH of krew's bin/, krew itself,
/// kubectl, git and the basic tools, but not our build output.
struct Krew {
    root: PathBuf,
    home: PathBuf,
    path: String,
}

impl Krew {
    fn new(work: &Path, krew_dir: &Path, kubectl: &Path) -> Krew {
        let root = work.join("krew-root");
        let home = work.join("home");
        std::fs::create_dir_all(&home).unwrap();
        let kubectl_dir = kubectl.parent().unwrap();
        let path = std::env::join_paths([
            root.join("bin").as_path(),
            krew_dir,
            kubectl_dir,
            Path::new("/usr/local/bin"),
            Path::new("/usr/bin"),
            Path::new("/bin"),
        ])
        .unwrap()
        .into_string()
        .unwrap();
        Krew { root, home, path }
    }

    fn cmd(&self, program: &str) -> Command {
        let mut c = Command::new(program);
        c.env_clear()
            .env("PATH", &self.path)
            .env("HOME", &self.home)
            .env("KREW_ROOT", &self.root)
            .env("KREW_NO_UPGRADE_CHECK", "1")
            // git commits in the index repository need an identity; nothing else reads these.
            .env("GIT_AUTHOR_NAME", "test")
            .env("GIT_AUTHOR_EMAIL", "test@example.com")
            .env("GIT_COMMITTER_NAME", "test")
            .env("GIT_COMMITTER_EMAIL", "test@example.com");
        c
    }

    fn run(&self, program: &str, args: &[&str]) -> Output {
        self.cmd(program).args(args).output().unwrap()
    }

    /// Runs and insists on success; returns stdout and stderr.
    fn ok(&self, program: &str, args: &[&str]) -> String {
        let o = self.run(program, args);
        let out = assert_ok(&o, &format!("{program} {args:?}"));
        out + &stderr(&o)
    }
}

/// The plugins' binaries this test packages: the debug build, next to ours (built if `make test`
/// did not build them, [`testbed::workspace_binary`]). `make dist` is `cargo build --release`
/// and then the two steps [`make_dist`] runs; a release build of the workspace costs a CI run 15
/// minutes and proves nothing krew sees.
fn plugin_binaries() -> PathBuf {
    let capi = env!("CARGO_BIN_EXE_kubectl-capi");
    let kamaji = testbed::workspace_binary(capi, "kubectl-kamaji", "kubectl-kamaji");
    kamaji.parent().unwrap().to_path_buf()
}

/// `make dist`'s packaging for `version` into `dir`, with the manifests pointing at `base_url`:
/// `scripts/dist.sh package` (the step the release workflow runs for every platform) over
/// `bins`, then `scripts/dist.sh manifests --only-available`, as `make dist` runs them.
fn make_dist(bins: &Path, dir: &Path, version: &str, base_url: &str) {
    let (os, arch) = host_platform();
    let bins = bins.to_str().unwrap();
    for step in [
        &["package", &os, &arch, bins][..],
        &["manifests", "--only-available"],
    ] {
        dist_sh(step, dir, version, &[("BASE_URL", base_url)]);
    }
}

/// `scripts/dist.sh <args>` with `DIST_DIR=dir`, `VERSION=version` and `env`, insisting on
/// success.
fn dist_sh(args: &[&str], dir: &Path, version: &str, env: &[(&str, &str)]) {
    let o = Command::new("bash")
        .arg(repo_root().join("scripts/dist.sh"))
        .args(args)
        .current_dir(repo_root())
        .env("DIST_DIR", dir)
        .env("VERSION", version)
        .envs(env.iter().copied())
        .output()
        .unwrap();
    assert_ok(&o, &format!("dist.sh {args:?}"));
}

/// krew's os/arch names for the machine the test runs on (what `make dist` builds).
fn host_platform() -> (String, String) {
    let os = std::env::consts::OS.to_string();
    let arch = match std::env::consts::ARCH {
        "x86_64" => "amd64",
        "aarch64" => "arm64",
        other => other,
    };
    (os, arch.to_string())
}

fn archive_entries(archive: &Path) -> Vec<String> {
    let o = Command::new("tar")
        .arg("-tzf")
        .arg(archive)
        .output()
        .unwrap();
    assert!(o.status.success());
    let mut v: Vec<String> = String::from_utf8_lossy(&o.stdout)
        .lines()
        .map(|l| l.trim_start_matches("./").to_string())
        .filter(|l| !l.is_empty())
        .collect();
    v.sort();
    v
}

#[test]
fn krew_installs_upgrades_and_keeps_completion() {
    let krew_dir = testbed::build_bins("krew").expect("building krew from the Go module proxy");
    let kubectl = which("kubectl").expect("kubectl on PATH (krew runs as a kubectl plugin)");
    let work = tempfile::tempdir().unwrap();
    let served = work.path().join("releases");
    let port = serve(served.clone());
    let base = |v: &str| format!("http://127.0.0.1:{port}/{v}");

    // Two releases: an older pre-release, then the workspace's version.
    let new = workspace_version();
    let old = format!("{new}-krewtest.1");
    let (os, arch) = host_platform();
    let bins = plugin_binaries();
    for v in [&old, &new] {
        make_dist(&bins, &served.join(v), v, &base(v));
    }
    let dist = served.join(&new);
    for plugin in ["capi", "kamaji"] {
        let name = format!("kubectl-{plugin}_{new}_{os}_{arch}.tar.gz");
        let archive = dist.join(&name);
        assert_eq!(
            archive_entries(&archive),
            vec![
                "LICENSE".to_string(),
                "README.md".into(),
                format!("kubectl-{plugin}"),
                format!("kubectl_complete-{plugin}"),
            ],
            "{name}"
        );
        // The .sha256 file is sha256sum's format, and its sum is the manifest's.
        let sum = std::fs::read_to_string(dist.join(format!("{name}.sha256"))).unwrap();
        let o = Command::new("sha256sum")
            .arg("-c")
            .arg(format!("{name}.sha256"))
            .current_dir(&dist)
            .output()
            .unwrap();
        assert!(o.status.success(), "{sum}");
        let manifest = std::fs::read_to_string(dist.join(format!("{plugin}.yaml"))).unwrap();
        assert_contains(&manifest, &format!("sha256: {}", &sum[..64]));
        assert!(manifest.contains(&format!("version: {new}")));
    }
    // Reproducible: packaging the same binaries twice gives byte-identical archives (sorted
    // entries, fixed owner and time, gzip without a name or time stamp).
    let pack = |dir: &Path| {
        let args = ["package", &os, &arch, bins.to_str().unwrap()];
        dist_sh(&args, dir, &new, &[("SOURCE_DATE_EPOCH", "1700000000")]);
        std::fs::read(dir.join(format!("kubectl-capi_{new}_{os}_{arch}.tar.gz"))).unwrap()
    };
    let (one, two) = (work.path().join("repro1"), work.path().join("repro2"));
    assert!(pack(&one) == pack(&two), "packaging is reproducible");

    let krew = Krew::new(work.path(), &krew_dir, &kubectl);
    let validator = krew_dir.join("validate-krew-manifest");
    let validator = validator.to_str().unwrap();
    // krew's validator installs each platform of the filled manifests from their URIs...
    for plugin in ["capi", "kamaji"] {
        let m = dist.join(format!("{plugin}.yaml"));
        let out = krew.ok(validator, &["-manifest", m.to_str().unwrap()]);
        assert_contains(&out, "all 1 spec.platforms installed fine");
    }
    // ...and checks the templates in krew/plugins structurally (they name every platform).
    for plugin in ["capi", "kamaji"] {
        let m = repo_root().join(format!("krew/plugins/{plugin}.yaml"));
        krew.ok(
            validator,
            &["-manifest", m.to_str().unwrap(), "-skip-install"],
        );
    }

    // 1. install from the manifest and the archive, and run through krew's bin/ link.
    let archive = dist.join(format!("kubectl-capi_{new}_{os}_{arch}.tar.gz"));
    let out = krew.ok(
        "kubectl",
        &[
            "krew",
            "install",
            &format!("--manifest={}", dist.join("capi.yaml").display()),
            &format!("--archive={}", archive.display()),
        ],
    );
    assert_contains(&out, "Installed plugin: capi");
    let link = krew.root.join("bin/kubectl-capi");
    assert!(
        std::fs::read_link(&link)
            .unwrap()
            .to_string_lossy()
            .contains(&format!("store/capi/{new}/")),
        "krew's bin/ link points into its store"
    );
    let out = krew.ok("kubectl", &["capi", "version", "--client"]);
    assert_contains(&out, env!("CARGO_PKG_VERSION"));

    // 2. our index: a git repository with plugins/<name>.yaml at its root.
    let index = work.path().join("index");
    std::fs::create_dir_all(index.join("plugins")).unwrap();
    let publish = |version: &str| {
        for plugin in ["capi", "kamaji"] {
            std::fs::copy(
                served.join(version).join(format!("{plugin}.yaml")),
                index.join(format!("plugins/{plugin}.yaml")),
            )
            .unwrap();
        }
        let dir = index.to_str().unwrap();
        krew.ok("git", &["-C", dir, "add", "plugins"]);
        krew.ok("git", &["-C", dir, "commit", "-q", "-m", version]);
    };
    krew.ok("git", &["init", "-q", index.to_str().unwrap()]);
    publish(&old);
    krew.ok(
        "kubectl",
        &[
            "krew",
            "index",
            "add",
            "capi-kamaji",
            index.to_str().unwrap(),
        ],
    );
    let out = krew.ok("kubectl", &["krew", "install", "capi-kamaji/kamaji"]);
    assert_contains(&out, "Installed plugin: kamaji");
    let out = krew.ok("kubectl", &["krew", "list"]);
    assert!(
        out.contains("capi-kamaji/kamaji"),
        "installed from our index: {out}"
    );
    assert!(krew.root.join(format!("store/kamaji/{old}")).is_dir());

    // Completion through kubectl, set up once; a second run changes nothing.
    let out = krew.ok("kubectl", &["kamaji", "completion", "install"]);
    let shim = krew.root.join("bin/kubectl_complete-kamaji");
    assert_contains(&out, &format!("{} created", shim.display()));
    let out = krew.ok("kubectl", &["kamaji", "completion", "install"]);
    assert_contains(&out, "unchanged");
    let complete = |word: &str| krew.ok("kubectl", &["__complete", "kamaji", word]);
    let before = complete("vers");
    assert!(before.lines().any(|l| l == "version"), "{before}");

    // 3. a new release in the index; `kubectl krew upgrade` moves to it.
    publish(&new);
    let out = krew.ok("kubectl", &["krew", "upgrade"]);
    assert!(
        out.lines()
            .any(|l| l.starts_with("Upgraded plugin:") && l.contains("kamaji")),
        "{out}"
    );
    assert!(
        !krew.root.join(format!("store/kamaji/{old}")).exists(),
        "krew removed the old version (a link into it would now dangle)"
    );
    assert!(krew.root.join(format!("store/kamaji/{new}")).is_dir());
    let after = complete("vers");
    assert!(
        after.lines().any(|l| l == "version"),
        "completion works after the upgrade: {after}"
    );
    assert_eq!(
        std::fs::read_to_string(&shim).unwrap(),
        kcore_shim("kamaji"),
        "the shim is untouched by the upgrade"
    );
}

/// The shim `completion install` writes (the test reads it from the core, which defines it).
fn kcore_shim(plugin: &str) -> String {
    cli::completion_shim::shim_script(plugin)
}
