//! The krew manifests (`krew/plugins/*.yaml`) pass krew's own validation rules
//! (`internal/index/validation/validate.go`, krew v0.5.0) and the index's review practice, and
//! `krew/fill-manifests.sh` fills them from release archives.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use serde::Deserialize;
use testbed::fixtures::run::{assert_contains, assert_ok, stderr, stdout};

#[derive(Deserialize, Debug)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct Plugin {
    api_version: String,
    kind: String,
    metadata: Metadata,
    spec: Spec,
}

#[derive(Deserialize, Debug)]
#[serde(deny_unknown_fields)]
struct Metadata {
    name: String,
}

#[derive(Deserialize, Debug)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct Spec {
    version: String,
    homepage: Option<String>,
    short_description: String,
    description: Option<String>,
    caveats: Option<String>,
    platforms: Vec<Platform>,
}

#[derive(Deserialize, Debug)]
#[serde(deny_unknown_fields)]
struct Platform {
    selector: Selector,
    uri: String,
    sha256: String,
    bin: String,
    files: Option<Vec<FileOp>>,
}

#[derive(Deserialize, Debug)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct Selector {
    match_labels: std::collections::BTreeMap<String, String>,
}

#[derive(Deserialize, Debug)]
#[serde(deny_unknown_fields)]
struct FileOp {
    from: String,
    to: String,
}

fn manifests_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../krew/plugins")
}

const WINDOWS_DEVICES: [&str; 22] = [
    "con", "prn", "aux", "nul", "com1", "com2", "com3", "com4", "com5", "com6", "com7", "com8",
    "com9", "lpt1", "lpt2", "lpt3", "lpt4", "lpt5", "lpt6", "lpt7", "lpt8", "lpt9",
];

fn is_sha256(s: &str) -> bool {
    s.len() == 64
        && s.bytes()
            .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
}

/// krew's checks plus ours; returns the parsed manifest.
fn validate(path: &Path) -> Plugin {
    let text = std::fs::read_to_string(path).unwrap();
    let p: Plugin = serde_saphyr::from_str(&text)
        .unwrap_or_else(|e| panic!("{}: not a krew manifest: {e}", path.display()));
    // krew reads YAML untyped first (sigs.k8s.io/yaml): an unquoted all-digit sum such as the
    // all-zero placeholder becomes the number 0 there, and krew rejects it.
    let untyped: serde_json::Value = serde_saphyr::from_str(&text).unwrap();
    for pl in untyped["spec"]["platforms"].as_array().expect("platforms") {
        assert!(
            pl["sha256"].is_string(),
            "{}: sha256 {} is not a string to a YAML reader (quote it)",
            path.display(),
            pl["sha256"]
        );
    }
    let file_stem = path.file_stem().unwrap().to_str().unwrap();
    assert_eq!(
        p.api_version,
        "krew.googlecontainertools.github.com/v1alpha2"
    );
    assert_eq!(p.kind, "Plugin");
    let name = &p.metadata.name;
    assert!(
        !name.is_empty()
            && name
                .chars()
                .all(|c| c.is_alphanumeric() || c == '_' || c == '-'),
        "name {name:?} must match ^[\\w-]+$"
    );
    assert!(!WINDOWS_DEVICES.contains(&name.to_lowercase().as_str()));
    assert_eq!(name, file_stem, "metadata.name must equal the file name");
    let short = &p.spec.short_description;
    assert!(
        !short.trim().is_empty() && !short.contains('\n'),
        "shortDescription: one line"
    );
    assert!(
        short.len() <= 50,
        "reviewers ask for a shortDescription of at most 50 characters"
    );
    let v = p
        .spec
        .version
        .strip_prefix('v')
        .unwrap_or_else(|| panic!("version {:?} needs a leading v", p.spec.version));
    semver::Version::parse(v).expect("semver version");
    assert!(
        p.spec
            .homepage
            .as_deref()
            .unwrap_or("")
            .starts_with("https://")
    );
    let description = p.spec.description.as_deref().unwrap_or("");
    assert!(!description.is_empty());
    assert!(
        description.lines().all(|l| l.len() <= 80),
        "description wrapped at 80 columns"
    );
    // The completion set-up that survives `krew upgrade` (a link into the versioned store
    // would dangle after it).
    assert!(
        p.spec.caveats.as_deref().is_some_and(|c| c
            .contains(&format!("kubectl {name} completion install"))
            && !c.contains("store/")),
        "caveats name `completion install` and no store path"
    );
    assert!(!p.spec.platforms.is_empty(), "at least one platform");
    let mut seen = BTreeSet::new();
    for pl in &p.spec.platforms {
        let os = pl
            .selector
            .match_labels
            .get("os")
            .expect("os label")
            .clone();
        let arch = pl
            .selector
            .match_labels
            .get("arch")
            .expect("arch label")
            .clone();
        assert!(
            seen.insert((os.clone(), arch.clone())),
            "duplicate platform {os}/{arch}"
        );
        assert!(
            pl.uri.starts_with("https://") || pl.uri.starts_with("http://127.0.0.1:"),
            "uri {}",
            pl.uri
        );
        assert!(pl.uri.ends_with(".tar.gz") || pl.uri.ends_with(".zip"));
        assert!(
            pl.uri.contains(&p.spec.version),
            "uri names the version: {}",
            pl.uri
        );
        assert!(
            pl.uri.contains(&format!("_{os}_{arch}.")),
            "uri names the platform: {}",
            pl.uri
        );
        assert!(
            is_sha256(&pl.sha256),
            "sha256 must match ^[a-f0-9]{{64}}$: {:?}",
            pl.sha256
        );
        // krew links the bin as kubectl-<name with - as _>; Windows binaries end in .exe.
        let exe = if os == "windows" { ".exe" } else { "" };
        assert_eq!(pl.bin, format!("kubectl-{}{exe}", name.replace('-', "_")));
        let files = pl.files.as_ref().expect("files");
        assert!(!files.is_empty());
        for f in files {
            assert!(!f.from.is_empty() && !f.to.is_empty());
        }
        assert!(
            files.iter().any(|f| f.from == pl.bin),
            "the bin is extracted"
        );
        assert!(
            files.iter().any(|f| f.from == "LICENSE"),
            "the licence is extracted"
        );
        assert_eq!(
            files
                .iter()
                .any(|f| f.from == format!("kubectl_complete-{name}")),
            os != "windows",
            "the completion shim is extracted, except on Windows"
        );
    }
    p
}

/// The platforms a release covers: what the release workflow builds.
fn all_platforms() -> BTreeSet<(String, String)> {
    [
        ("darwin", "amd64"),
        ("darwin", "arm64"),
        ("linux", "amd64"),
        ("linux", "arm64"),
        ("windows", "amd64"),
    ]
    .iter()
    .map(|(o, a)| (o.to_string(), a.to_string()))
    .collect()
}

fn platforms_of(p: &Plugin) -> BTreeSet<(String, String)> {
    p.spec
        .platforms
        .iter()
        .map(|pl| {
            (
                pl.selector.match_labels["os"].clone(),
                pl.selector.match_labels["arch"].clone(),
            )
        })
        .collect()
}

#[test]
fn manifests_pass_krews_validation() {
    let mut names = Vec::new();
    for e in std::fs::read_dir(manifests_dir()).unwrap() {
        let path = e.unwrap().path();
        if path.extension().is_some_and(|x| x == "yaml") {
            let p = validate(&path);
            assert_eq!(platforms_of(&p), all_platforms(), "{}", path.display());
            names.push(p.metadata.name);
        }
    }
    names.sort();
    assert_eq!(names, vec!["capi", "kamaji"]);
}

#[test]
fn invalid_manifests_are_caught() {
    let dir = tempfile::tempdir().unwrap();
    let good = std::fs::read_to_string(manifests_dir().join("capi.yaml")).unwrap();
    let upper = good.replacen("sha256: \"0", "sha256: \"A", 1);
    let p = dir.path().join("capi.yaml");
    std::fs::write(&p, upper).unwrap();
    assert!(
        std::panic::catch_unwind(|| validate(&p)).is_err(),
        "upper-case sha256"
    );
    let unquoted = good.replacen(
        "sha256: \"0000000000000000000000000000000000000000000000000000000000000000\"",
        "sha256: 0000000000000000000000000000000000000000000000000000000000000000",
        1,
    );
    assert_ne!(unquoted, good);
    std::fs::write(&p, unquoted).unwrap();
    assert!(
        std::panic::catch_unwind(|| validate(&p)).is_err(),
        "an all-digit sha256 that YAML reads as a number"
    );
    std::fs::write(&p, good.replace("version: v0.1.0", "version: 0.1.0")).unwrap();
    assert!(
        std::panic::catch_unwind(|| validate(&p)).is_err(),
        "version without v"
    );
    let other = dir.path().join("other.yaml");
    std::fs::write(&other, &good).unwrap();
    assert!(
        std::panic::catch_unwind(|| validate(&other)).is_err(),
        "name != file name"
    );
}

fn sha256sum(path: &Path) -> String {
    let o = Command::new("sha256sum")
        .arg(path)
        .output()
        .expect("sha256sum");
    String::from_utf8_lossy(&o.stdout)
        .split_whitespace()
        .next()
        .unwrap()
        .to_string()
}

/// A scratch directory with copies of the manifests (`plugins/`) and an empty `dist/`, for
/// the fill script; the directory lives as long as this.
struct FillWorkspace {
    _work: tempfile::TempDir,
    manifests: PathBuf,
    dist: PathBuf,
}

impl FillWorkspace {
    fn new() -> FillWorkspace {
        let work = tempfile::tempdir().unwrap();
        let manifests = work.path().join("plugins");
        std::fs::create_dir(&manifests).unwrap();
        for m in ["capi.yaml", "kamaji.yaml"] {
            std::fs::copy(manifests_dir().join(m), manifests.join(m)).unwrap();
        }
        let dist = work.path().join("dist");
        std::fs::create_dir(&dist).unwrap();
        FillWorkspace {
            _work: work,
            manifests,
            dist,
        }
    }

    /// `krew/fill-manifests.sh <args> DIST MANIFESTS` with `env`.
    fn fill(&self, args: &[&str], env: &[(&str, &str)]) -> Output {
        let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../krew/fill-manifests.sh");
        Command::new("sh")
            .arg(script)
            .args(args)
            .args([&self.dist, &self.manifests])
            .envs(env.iter().copied())
            .output()
            .unwrap()
    }

    /// The manifest of `plugin` as it stands.
    fn manifest(&self, plugin: &str) -> String {
        std::fs::read_to_string(self.manifests.join(format!("{plugin}.yaml"))).unwrap()
    }

    /// Writes an archive of `plugin` for `os`/`arch` at `version` into `dist/`.
    fn archive(&self, plugin: &str, version: &str, os: &str, arch: &str) {
        let f = self
            .dist
            .join(format!("kubectl-{plugin}_{version}_{os}_{arch}.tar.gz"));
        std::fs::write(&f, format!("archive of {plugin} for {os}/{arch}")).unwrap();
    }
}

#[test]
fn fill_script_sets_version_uris_and_sums_from_archives() {
    let ws = FillWorkspace::new();
    let version = "v1.2.3";
    for plugin in ["capi", "kamaji"] {
        for (os, arch) in all_platforms() {
            ws.archive(plugin, version, &os, &arch);
        }
    }
    // A missing archive fails and changes nothing.
    let missing = ws
        .dist
        .join(format!("kubectl-kamaji_{version}_darwin_arm64.tar.gz"));
    let saved = std::fs::read(&missing).unwrap();
    std::fs::remove_file(&missing).unwrap();
    let before = ws.manifest("capi");
    let o = ws.fill(&[version], &[]);
    assert!(!o.status.success());
    assert_contains(&stderr(&o), "missing archive");
    assert_eq!(ws.manifest("capi"), before);
    std::fs::write(&missing, saved).unwrap();

    let o = ws.fill(&["1.2.3"], &[]);
    assert_eq!(
        o.status.code(),
        Some(2),
        "a version without v is a usage error"
    );

    assert_ok(&ws.fill(&[version], &[]), "fill-manifests.sh");
    for plugin in ["capi", "kamaji"] {
        let p = validate(&ws.manifests.join(format!("{plugin}.yaml")));
        assert_eq!(p.spec.version, version);
        assert_eq!(platforms_of(&p), all_platforms());
        for pl in &p.spec.platforms {
            let os = &pl.selector.match_labels["os"];
            let arch = &pl.selector.match_labels["arch"];
            let file = format!("kubectl-{plugin}_{version}_{os}_{arch}.tar.gz");
            assert_eq!(
                pl.uri,
                format!(
                    "https://github.com/capi-kamaji/kubectl-plugins/releases/download/{version}/{file}"
                )
            );
            assert_eq!(pl.sha256, sha256sum(&ws.dist.join(&file)));
        }
    }
}

#[test]
fn fill_script_only_available_keeps_the_platforms_with_archives() {
    let ws = FillWorkspace::new();
    let version = "v0.9.0-rc.1";
    let fill = || {
        ws.fill(
            &["--only-available", version],
            &[("BASE_URL", "http://127.0.0.1:9/rel")],
        )
    };
    // No archive at all: still an error, and nothing changes.
    let before = ws.manifest("kamaji");
    let o = fill();
    assert!(!o.status.success());
    assert_contains(&stderr(&o), "no archive");
    assert_eq!(ws.manifest("kamaji"), before);
    // One platform each (what `make dist` produces on one machine).
    for plugin in ["capi", "kamaji"] {
        ws.archive(plugin, version, "darwin", "arm64");
    }
    assert_ok(&fill(), "fill-manifests.sh --only-available");
    for plugin in ["capi", "kamaji"] {
        let p = validate(&ws.manifests.join(format!("{plugin}.yaml")));
        assert_eq!(p.spec.version, version);
        assert_eq!(
            platforms_of(&p),
            BTreeSet::from([("darwin".to_string(), "arm64".to_string())])
        );
        let file = format!("kubectl-{plugin}_{version}_darwin_arm64.tar.gz");
        assert_eq!(
            p.spec.platforms[0].uri,
            format!("http://127.0.0.1:9/rel/{file}")
        );
        assert_eq!(p.spec.platforms[0].sha256, sha256sum(&ws.dist.join(&file)));
    }
}

/// The release workflow passes actionlint (built from the Go module proxy like the testbed's
/// binaries): syntax, expressions, runner labels, action inputs.
#[test]
fn release_workflow_passes_actionlint() {
    let dir = testbed::build_bins("krew").expect("building actionlint from the Go module proxy");
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let workflow = root.join(".github/workflows/release.yml");
    assert!(workflow.is_file());
    let actionlint = |workflow: &Path, cwd: &Path| {
        Command::new(dir.join("actionlint"))
            .arg("-no-color")
            .arg(workflow)
            .current_dir(cwd)
            .output()
            .unwrap()
    };
    assert_ok(&actionlint(&workflow, &root), "actionlint");
    // And it can fail: a job on a runner that does not exist.
    let bad = tempfile::tempdir().unwrap();
    let wf = bad.path().join(".github/workflows");
    std::fs::create_dir_all(&wf).unwrap();
    let text = std::fs::read_to_string(&workflow)
        .unwrap()
        .replace("runs-on: ubuntu-24.04\n", "runs-on: ubuntu-12.04\n");
    std::fs::write(wf.join("release.yml"), text).unwrap();
    let o = actionlint(&wf.join("release.yml"), bad.path());
    assert!(!o.status.success());
    assert_contains(&stdout(&o), "ubuntu-12.04");
}
