use super::*;
use serde_json::Value;

/// One container of a workload in a release manifest.
#[derive(Debug)]
struct Named {
    component: String,
    workload: String,
    image: String,
    command0: Option<String>,
    run_as_user: Option<i64>,
    run_as_non_root: bool,
}

/// Every container image the workloads of `text` (a multi-document manifest) name.
fn named(component: &str, text: &str) -> Vec<Named> {
    let docs: Vec<Value> =
        serde_saphyr::from_multiple(text).unwrap_or_else(|e| panic!("{component}: not YAML: {e}"));
    let mut out = Vec::new();
    for d in docs.iter().filter(|d| d.is_object()) {
        let kind = d["kind"].as_str().unwrap_or_default();
        let pod = match kind {
            "Deployment" | "DaemonSet" | "StatefulSet" | "ReplicaSet" | "Job" => {
                &d["spec"]["template"]["spec"]
            }
            "CronJob" => &d["spec"]["jobTemplate"]["spec"]["template"]["spec"],
            "Pod" => &d["spec"],
            _ => continue,
        };
        let psc = &pod["securityContext"];
        for list in ["initContainers", "containers"] {
            for c in pod[list].as_array().into_iter().flatten() {
                let csc = &c["securityContext"];
                out.push(Named {
                    component: component.to_string(),
                    workload: format!("{kind}/{}", d["metadata"]["name"].as_str().unwrap_or("")),
                    image: c["image"].as_str().unwrap_or_default().to_string(),
                    command0: c["command"][0].as_str().map(String::from),
                    run_as_user: csc["runAsUser"].as_i64().or(psc["runAsUser"].as_i64()),
                    run_as_non_root: csc["runAsNonRoot"]
                        .as_bool()
                        .or(psc["runAsNonRoot"].as_bool())
                        .unwrap_or(false),
                });
            }
        }
    }
    out
}

/// Checks one container of a manifest against its row: the entrypoint is the command the
/// manifest runs (when it has one), the user is the one it asks for, not root if it must not.
fn check(n: &Named) -> Result<&'static Upstream, String> {
    let u = Upstream::of(&n.image).ok_or_else(|| {
        format!(
            "{} {} names {}, which testbed::images::UPSTREAM has no row for",
            n.component, n.workload, n.image
        )
    })?;
    if u.component != n.component {
        return Err(format!(
            "{}: named by {}, the row says {}",
            u.release, n.component, u.component
        ));
    }
    if let Some(c) = &n.command0
        && c != u.entrypoint
    {
        return Err(format!(
            "{}: the manifest runs {c}, the image has {}",
            u.release, u.entrypoint
        ));
    }
    if let Some(uid) = n.run_as_user
        && uid != i64::from(u.user)
    {
        return Err(format!(
            "{}: the manifest runs as {uid}, the image as {}",
            u.release, u.user
        ));
    }
    if n.run_as_non_root && u.user == 0 {
        return Err(format!(
            "{}: runAsNonRoot with a root image user",
            u.release
        ));
    }
    Ok(u)
}

#[test]
fn every_image_of_the_init_sources_has_a_row_that_matches_its_manifest() {
    let dir = crate::Assets::init_sources().expect("the init sources (build-bins.sh init-sources)");
    let mut seen = Vec::new();
    let mut problems = Vec::new();
    let components: Vec<&str> = {
        let mut c: Vec<&str> = UPSTREAM
            .iter()
            .map(|u| u.component)
            .filter(|c| !c.is_empty())
            .collect();
        c.sort();
        c.dedup();
        c
    };
    for component in &components {
        let path = dir.join(component);
        let text =
            std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        for n in named(component, &text) {
            match check(&n) {
                Ok(u) => seen.push(u.release),
                Err(e) => problems.push(e),
            }
        }
    }
    // Files of the cache no row names a component of.
    for f in std::fs::read_dir(&dir).unwrap().flatten() {
        let name = f.file_name().to_string_lossy().to_string();
        if name.ends_with(".yaml") && !components.contains(&name.as_str()) {
            let text = std::fs::read_to_string(f.path()).unwrap();
            for n in named(&name, &text) {
                problems.push(format!("{name} {} names {}: no row", n.workload, n.image));
            }
        }
    }
    assert!(problems.is_empty(), "{}", problems.join("\n"));
    // etcd's row has no component: init writes its StatefulSet, and core's tests check the
    // image that names.
    let unnamed: Vec<&str> = UPSTREAM
        .iter()
        .filter(|u| !u.component.is_empty())
        .map(|u| u.release)
        .filter(|r| !seen.contains(r))
        .collect();
    assert!(unnamed.is_empty(), "rows no manifest names: {unnamed:?}");
    for (u, why) in missing() {
        eprintln!("no binary: {} ({why})", u.release);
    }
}

#[test]
fn the_manifest_check_catches_a_wrong_entrypoint_user_or_image() {
    let yaml = r#"
apiVersion: apps/v1
kind: Deployment
metadata: {name: m}
spec:
  template:
    spec:
      securityContext: {runAsNonRoot: true}
      containers:
      - name: manager
        image: clastix/kamaji:v1.0.0
        command: [/kamaji]
      - name: other
        image: clastix/kamaji:v1.0.0
        command: [/manager]
      - name: root
        image: clastix/kamaji:v1.0.0
        securityContext: {runAsUser: 0}
      - name: unknown
        image: example.com/unknown:v1
---
apiVersion: v1
kind: Service
metadata: {name: s}
"#;
    let n = named("kamaji.yaml", yaml);
    assert_eq!(n.len(), 4);
    assert!(n[0].run_as_non_root);
    assert_eq!(check(&n[0]).map(|u| u.name()), Ok("kamaji"));
    assert!(check(&n[1]).unwrap_err().contains("runs /manager"));
    assert!(check(&n[2]).unwrap_err().contains("runs as 0"));
    assert!(check(&n[3]).unwrap_err().contains("no row"));
}

#[test]
fn mirrored_names_keep_the_last_component_and_tag() {
    let want = [
        "127.0.0.1:5000/cluster-api-controller:v1.14.2",
        "127.0.0.1:5000/kubeadm-bootstrap-controller:v1.14.2",
        "127.0.0.1:5000/kubeadm-control-plane-controller:v1.14.2",
        "127.0.0.1:5000/cluster-api-byoh-controller:v0.5.0",
        "127.0.0.1:5000/kube-rbac-proxy:v0.8.0",
        "127.0.0.1:5000/kamaji:v1.0.0",
        "127.0.0.1:5000/cert-manager-controller:v1.21.1",
        "127.0.0.1:5000/cert-manager-cainjector:v1.21.1",
        "127.0.0.1:5000/cert-manager-webhook:v1.21.1",
        "127.0.0.1:5000/etcd:3.6.8-0",
    ];
    let got: Vec<String> = UPSTREAM
        .iter()
        .map(|u| u.mirrored("127.0.0.1:5000"))
        .collect();
    assert_eq!(got, want);
    assert_eq!(
        mirrored("clastix/kamaji:v1.0.0", "mirror.local/capi/"),
        "mirror.local/capi/kamaji:v1.0.0"
    );
    assert_eq!(mirrored("r.io/a/b@sha256:00", "m:1"), "m:1/b@sha256:00");
    // No two rows land on one name.
    let mut names: Vec<&str> = UPSTREAM.iter().map(|u| u.name()).collect();
    names.sort();
    names.dedup();
    assert_eq!(names.len(), UPSTREAM.len());
}

#[test]
fn each_row_makes_a_spec_oci_image_accepts() {
    for u in UPSTREAM {
        let s = u.spec().unwrap();
        assert!(s.entrypoint.starts_with('/'), "{}", u.release);
        assert!(
            s.name
                .chars()
                .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-'),
            "{}",
            s.name
        );
        // Releases are tagged `vX.Y.Z`, but Kubernetes' etcd image `<etcd>-<revision>`.
        let version = u.tag().strip_prefix('v').unwrap_or(u.tag());
        assert!(
            version.starts_with(|c: char| c.is_ascii_digit()),
            "{}",
            u.release
        );
        assert_eq!(u.user, oci_image::NONROOT);
    }
    let mut root = UPSTREAM[0];
    root.user = 0;
    assert!(
        root.spec()
            .unwrap_err()
            .to_string()
            .contains("not one oci-image writes")
    );
}

#[test]
fn sets_are_read_from_the_scripts_case() {
    let script = "case x in\n  capi) build_capi ;;\n  k8s-prev) build_k8s_prev ;;\n  *) echo usage ;;\nesac\n";
    assert!(has_set(script, "capi"));
    assert!(has_set(script, "k8s-prev"));
    assert!(!has_set(script, "k8s"));
    assert!(!has_set(script, "cert-manager"));
    for set in ["capi", "byoh", "kamaji", "crane", "init-sources"] {
        assert!(has_set(&script_text(), set), "{set}");
    }
    // A row whose set the script lacks says so, and which set to add, without building.
    let mut row = UPSTREAM[0];
    row.set = "no-such-set";
    let why = row.missing().unwrap();
    assert!(why.contains("no set `no-such-set`"), "{why}");
    let err = row.binary().unwrap_err().to_string();
    assert!(
        err.contains("build-bins.sh has no set `no-such-set`"),
        "{err}"
    );
}

#[tokio::test]
async fn a_push_with_a_row_without_binary_names_it_and_pushes_nothing() {
    static NO_SET: Upstream = Upstream {
        release: "example.com/x/no-binary:v1",
        set: "no-such-set",
        ..UPSTREAM[0]
    };
    // Port 9 (discard): nothing may be pushed, so nothing is listening.
    let err = push("127.0.0.1:9", &[&NO_SET])
        .await
        .unwrap_err()
        .to_string();
    assert!(
        err.contains(
            "example.com/x/no-binary:v1: no binary: testbed/build-bins.sh has no set `no-such-set`"
        ),
        "{err}"
    );
}

/// Whether a published folder of `u`'s set (`<cache>/<set>-<version…>/`) holds its binary.
fn already_built(u: &Upstream) -> bool {
    std::fs::read_dir(cache_root())
        .into_iter()
        .flatten()
        .flatten()
        .any(|d| {
            let name = d.file_name().to_string_lossy().to_string();
            name.strip_prefix(u.set)
                .is_some_and(|v| v.starts_with("-v") && !v.ends_with(".tmp"))
                && d.path().join(u.file).is_file()
        })
}

/// A child process killed on drop.
struct Kill(std::process::Child);
impl Drop for Kill {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Times a cold build of every layout that has a binary (into an empty cache), a warm one,
/// and pushes into a fresh `crane registry serve` (the first push sends the blobs, the
/// second finds them there); then checks one image's config as the kubelet reads it.
/// `cargo test -p testbed --lib images::tests::measure -- --ignored --nocapture`
#[tokio::test(flavor = "multi_thread")]
#[ignore = "builds every image (about 30 s cold): run by hand to measure"]
async fn measure_cold_build_and_warm_push() {
    // Only what is built already: running build-bins.sh for a set another build is making
    // would start that build over.
    let statics: Vec<&'static Upstream> = UPSTREAM
        .iter()
        .filter(|u| u.missing().is_none() && already_built(u))
        .collect();
    for u in UPSTREAM.iter().filter(|u| !statics.contains(u)) {
        eprintln!("skipped (no binary): {}", u.release);
    }
    let tmp = tempfile::tempdir().unwrap();
    let cache = tmp.path().join("images");
    let t = Instant::now();
    let cold = {
        let (c, s) = (cache.clone(), statics.clone());
        tokio::task::spawn_blocking(move || build_in(&c, &s))
            .await
            .unwrap()
            .unwrap()
    };
    let cold_t = t.elapsed();
    assert!(cold.iter().all(|b| !b.cached));
    let t = Instant::now();
    let warm = {
        let (c, s) = (cache.clone(), statics.clone());
        tokio::task::spawn_blocking(move || build_in(&c, &s))
            .await
            .unwrap()
            .unwrap()
    };
    let warm_t = t.elapsed();
    assert!(warm.iter().all(|b| b.cached));
    for (a, b) in cold.iter().zip(&warm) {
        assert_eq!(a.digest, b.digest);
    }

    let crane = crate::Assets::crane().unwrap();
    let port = crate::free_port().unwrap();
    let registry = format!("127.0.0.1:{port}");
    std::fs::create_dir_all(tmp.path().join("blobs")).unwrap();
    let _serve = Kill(
        std::process::Command::new(&crane)
            .args(["registry", "serve", "--address", &registry, "--disk"])
            .arg(tmp.path().join("blobs"))
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap(),
    );
    while !crate::http_get_ok(port, "/v2/") {
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    let t = Instant::now();
    let first = push_built(&registry, &warm).await.unwrap();
    let first_t = t.elapsed();
    let t = Instant::now();
    let again = push_built(&registry, &warm).await.unwrap();
    let again_t = t.elapsed();
    assert_eq!(first, again);

    let total: u64 = warm
        .iter()
        .map(|b| {
            std::fs::read_dir(b.layout.join("blobs/sha256"))
                .unwrap()
                .flatten()
                .map(|f| f.metadata().unwrap().len())
                .sum::<u64>()
        })
        .sum();
    eprintln!(
        "{} images, {} MB of blobs: cold build {cold_t:.1?}, warm build (hash + cache hit) {warm_t:.1?}, \
         first push {first_t:.1?}, push again {again_t:.1?}",
        warm.len(),
        total / 1_000_000
    );
    for p in &first {
        eprintln!("  {} -> {} {}", p.release, p.image, p.digest);
    }

    // The public path, with the real cache (cold the first time this runs, warm after).
    let t = Instant::now();
    let public = push(&registry, &statics).await.unwrap();
    eprintln!("push() with the testbed cache: {:.1?}", t.elapsed());
    assert_eq!(public, first);

    // The config as the kubelet reads it (`crane config`).
    for (u, p) in statics.iter().zip(&first) {
        let out = std::process::Command::new(&crane)
            .args(["config", &p.image, "--insecure"])
            .output()
            .unwrap();
        let config: Value = serde_json::from_slice(&out.stdout).unwrap();
        let c = &config["config"];
        assert_eq!(
            c["Entrypoint"],
            serde_json::json!([u.entrypoint]),
            "{}",
            u.release
        );
        assert_eq!(c["User"], "65532:65532");
        assert_eq!(
            c["Env"],
            serde_json::json!(["PATH=/usr/local/bin:/usr/bin:/bin"])
        );
    }
    // And the file system of the deepest entrypoint: its folders made, a sticky /tmp.
    let (u, p) = statics
        .iter()
        .zip(&first)
        .max_by_key(|(u, _)| u.entrypoint.matches('/').count())
        .unwrap();
    let tar = tmp.path().join("fs.tar");
    let export = std::process::Command::new(&crane)
        .args(["export", &p.image, "--insecure"])
        .arg(&tar)
        .status()
        .unwrap();
    assert!(export.success());
    let list = std::process::Command::new("tar")
        .arg("-tvf")
        .arg(&tar)
        .output()
        .unwrap();
    let list = String::from_utf8_lossy(&list.stdout);
    let has = |mode: &str, path: &str| {
        list.lines().any(|l| {
            l.starts_with(mode)
                && (l.ends_with(&format!(" {path}")) || l.ends_with(&format!(" {path}/")))
        })
    };
    assert!(has("drwxrwxrwt", "tmp"), "{list}");
    assert!(has("drwx------ 65532/65532", "home/nonroot"), "{list}");
    assert!(has("-rwxr-xr-x", &u.entrypoint[1..]), "{list}");
}
