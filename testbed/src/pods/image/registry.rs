//! The image kubelet's registry side: the testbed's local OCI registry, and pulling an image
//! from it as a runtime pulls one (its config, its digest, its file system unpacked).

use std::path::Path;
use std::process::Command;
use std::time::Duration;

use serde_json::Value;

use super::Config;
use crate::{Error, Proc};

/// Starts the registry (`crane registry serve` on a free loopback port, blobs on disk) and
/// waits until it answers `/v2/`. Returns `127.0.0.1:PORT`.
pub(crate) async fn start_registry(tb: &crate::Testbed, crane: &Path) -> Result<String, Error> {
    let port = crate::free_port()?;
    let addr = format!("127.0.0.1:{port}");
    let log = tb.dir.join("registry.log");
    let blobs = tb.dir.join("registry-data");
    std::fs::create_dir_all(&blobs).map_err(|e| Error::io(&blobs, e))?;
    let proc = Proc::spawn(
        "registry",
        crane,
        &[
            "registry".into(),
            "serve".into(),
            "--address".into(),
            addr.clone(),
            "--disk".into(),
            blobs.display().to_string(),
        ],
        &log,
    )?;
    tb.push(proc);
    tb.wait_until("registry", &log, Duration::from_secs(20), || async {
        crate::http_get_ok(port, "/v2/")
    })
    .await?;
    Ok(addr)
}

/// `crane` with the registry treated as plain HTTP (it is on loopback).
fn crane(cfg: &Config, args: &[&str]) -> Result<Vec<u8>, String> {
    let out = Command::new(&cfg.crane)
        .args(args)
        .arg("--insecure")
        .env("HOME", &cfg.testbed_dir)
        .output()
        .map_err(|e| format!("running crane: {e}"))?;
    if !out.status.success() {
        return Err(String::from_utf8_lossy(&out.stderr).trim().to_string());
    }
    Ok(out.stdout)
}

/// Pulls `image` into `root`: its config and digest, and its file system unpacked.
pub(super) fn pull(cfg: &Config, image: &str, root: &Path) -> Result<(Value, String), String> {
    let config: Value = serde_json::from_slice(&crane(cfg, &["config", image])?)
        .map_err(|e| format!("the image config of {image}: {e}"))?;
    let digest = String::from_utf8_lossy(&crane(cfg, &["digest", image])?)
        .trim()
        .to_string();
    let tarball = root.with_extension("tar");
    crane(cfg, &["export", image, &tarball.display().to_string()])?;
    std::fs::create_dir_all(root).map_err(|e| format!("{}: {e}", root.display()))?;
    let out = Command::new("tar")
        .args(["--extract", "--same-owner", "--same-permissions", "--file"])
        .arg(&tarball)
        .arg("--directory")
        .arg(root)
        .output()
        .map_err(|e| format!("running tar: {e}"))?;
    let _ = std::fs::remove_file(&tarball);
    if !out.status.success() {
        return Err(format!(
            "unpacking {image}: {}",
            String::from_utf8_lossy(&out.stderr).trim()
        ));
    }
    Ok((config, digest))
}

/// An image reference without its tag or digest (`host:port/name:tag` → `host:port/name`).
pub(super) fn repository(image: &str) -> &str {
    let image = image.split_once('@').map_or(image, |(r, _)| r);
    match image.rfind(':') {
        Some(i) if i > image.rfind('/').unwrap_or(0) => &image[..i],
        _ => image,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn repository_drops_the_tag_and_digest_but_not_the_port() {
        for (image, want) in [
            (
                "127.0.0.1:5000/kamaji-reconciler:test",
                "127.0.0.1:5000/kamaji-reconciler",
            ),
            (
                "127.0.0.1:5000/kamaji-reconciler",
                "127.0.0.1:5000/kamaji-reconciler",
            ),
            ("r:5000/a/b:v1@sha256:abc", "r:5000/a/b"),
        ] {
            assert_eq!(repository(image), want, "{image}");
        }
    }
}
