//! The bundle's images: `init bundle DIR --images` pulls each image of `images.txt` into an
//! archive of the bundle; `init --from DIR --registry R` pushes each archive to `R` before
//! anything is applied. One line per image; the registries are `kclient::registry`'s, what an
//! archive holds `kcore::init::images`'.

use std::collections::BTreeSet;
use std::path::PathBuf;

use kclient::error::Error;
use kclient::registry::{
    Archived, Credentials, Registries, RegistryError, host_of_image, open_archive,
};
use kclient::render;
use kcore::init::bundle::BundleFile;
use kcore::init::images::{self, Budget, MAX_BUNDLE_IMAGE_BYTES, Platform, human_bytes};
use kcore::init::manifests::mirrored;

use super::source::BundleWriter;

/// The host of `HOST[:PORT][/PREFIX]`.
fn host_of(registry: &str) -> &str {
    registry.split('/').next().unwrap_or(registry)
}

fn credentials() -> Result<Credentials, Error> {
    Credentials::load().map_err(|e| Error::Other {
        message: e.to_string(),
        hint: Some(
            "fix the file, or point DOCKER_CONFIG at a folder with a valid config.json".into(),
        ),
    })
}

/// Pulls every image of `images` (from `from`, a mirror holding them under their mirrored
/// names, else from its own registry) into an archive of the bundle `w` writes.
pub async fn pull_all(
    w: &mut BundleWriter,
    images: &[String],
    from: Option<&str>,
    platform: &Platform,
) -> Result<u64, Error> {
    let plan = images::archives(images).map_err(|e| Error::Other {
        message: format!("the set's images cannot be bundled: {e}"),
        hint: None,
    })?;
    let mut registries = Registries::new(credentials()?);
    let mut budget = Budget::new(MAX_BUNDLE_IMAGE_BYTES);
    let n = plan.len();
    for (i, (image, file)) in plan.iter().enumerate() {
        let source = from.map_or_else(|| image.clone(), |f| mirrored(image, f));
        let pulled = registries
            .pull(&source, image, platform, &w.path(file), &mut budget)
            .await
            .map_err(|e| pull_failed(image, &source, from, &e))?;
        w.listed(BundleFile {
            name: file.clone(),
            size: pulled.size,
            sha256: pulled.sha256.clone(),
        });
        let what = match &pulled.archived {
            Archived::Platform(p) => format!("{p} of its index"),
            Archived::Single(Some(p)) => p.to_string(),
            Archived::Single(None) => "one manifest, no platform stated".into(),
            Archived::Index { manifests } => {
                format!("the whole index its digest names, {manifests} manifests")
            }
        };
        let via = if from.is_some() {
            format!(" (from {source})")
        } else {
            String::new()
        };
        render::info(&format!(
            "image {}/{n} {image}{via}: {what}, {} blobs, {}",
            i + 1,
            pulled.blobs,
            human_bytes(pulled.size)
        ));
        if let Archived::Single(Some(p)) = &pulled.archived
            && !platform.accepts(p)
        {
            render::warn(&format!(
                "{image} is a {p} image only, not {platform}; it will not run on {platform} nodes"
            ));
        }
    }
    Ok(budget.used())
}

fn pull_failed(image: &str, source: &str, from: Option<&str>, e: &RegistryError) -> Error {
    let host = host_of_image(source);
    let hint = if e.is_denied() {
        format!(
            "log in to {host} (docker login {host}: init reads its credentials from ~/.docker/config.json or $DOCKER_CONFIG)"
        )
    } else if from.is_some() {
        format!("check that {host} is reachable and holds {source} (crane manifest {source})")
    } else {
        format!(
            "check that {host} is reachable from here (crane manifest {source}); or pull through a mirror that holds the set: --images-from HOST[/PREFIX]"
        )
    };
    Error::Other {
        message: format!("cannot pull image {image} from {host}: {e}; no bundle was written"),
        hint: Some(hint),
    }
}

/// Pushes each archive to `registry` under its mirrored name (`dry`: says what it would push
/// and sends nothing), a line each, then a summary. Only the images `used` (as the manifests
/// applied name them) are pushed: init with provider flags installs part of the set.
pub async fn push_all(
    archives: &[PathBuf],
    registry: &str,
    used: &BTreeSet<String>,
    dry: bool,
) -> Result<(), Error> {
    let say = |text: &str| {
        // A client dry run may print manifests on stdout (-o yaml): the images' lines go to
        // stderr then, as every dry run's.
        if dry {
            render::info(text)
        } else {
            render::line(text)
        }
    };
    let mut registries = Registries::new(if dry {
        Credentials::default()
    } else {
        credentials()?
    });
    let (mut sent, mut present, mut bytes) = (0usize, 0usize, 0u64);
    let mut pushed_images = 0usize;
    for path in archives {
        let name = path
            .file_name()
            .map(|n| n.to_string_lossy().to_string())
            .unwrap_or_default();
        let a = open_archive(path).await.map_err(|e| Error::Other {
            message: format!("image archive {name} cannot be read: {e}; nothing was applied"),
            hint: Some(
                "make the bundle again on a connected machine (kubectl capi init bundle DIR --images) and copy it whole"
                    .into(),
            ),
        })?;
        let target = mirrored(&a.reference, registry);
        if !used.contains(&target) {
            continue;
        }
        pushed_images += 1;
        if dry {
            say(&format!(
                "image {}: would push {target} ({} blobs, {})",
                a.reference,
                a.blobs.len(),
                human_bytes(a.blob_bytes())
            ));
            continue;
        }
        let pushed = registries
            .push(&a, &target)
            .await
            .map_err(|e| push_failed(&a.reference, registry, &e))?;
        sent += pushed.sent;
        present += pushed.present;
        bytes = bytes.saturating_add(pushed.bytes_sent);
        say(&format!(
            "image {target}: pushed ({} blobs sent, {}; {} already there)",
            pushed.sent,
            human_bytes(pushed.bytes_sent),
            pushed.present
        ));
    }
    let unused = match archives.len().saturating_sub(pushed_images) {
        0 => String::new(),
        n => format!("; {n} not used by the components chosen"),
    };
    if dry {
        say(&format!(
            "images: {pushed_images} would be pushed to {registry} (dry run: nothing sent){unused}"
        ));
    } else {
        say(&format!(
            "images: {pushed_images} pushed to {registry}: {sent} blobs sent ({}), {present} already there{unused}",
            human_bytes(bytes)
        ));
    }
    Ok(())
}

fn push_failed(image: &str, registry: &str, e: &RegistryError) -> Error {
    let host = host_of(registry);
    let hint = if e.is_denied() {
        format!(
            "log in to {host} with a user that may push (docker login {host}: init reads ~/.docker/config.json or $DOCKER_CONFIG)"
        )
    } else {
        format!(
            "check that {host} is reachable and accepts pushes; run init again to go on (blobs already there are not sent again)"
        )
    };
    Error::Other {
        message: format!("cannot push image {image} to {registry}: {e}; nothing was applied"),
        hint: Some(hint),
    }
}
