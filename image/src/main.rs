//! `oci-image`: writes the reconciler's OCI image from static binaries (`make image`, and the
//! release workflow with one binary per architecture). Prints the digest a registry will give it.

use std::path::PathBuf;
use std::process::ExitCode;

use clap::Parser;
use oci_image::{Platform, Spec};

#[derive(Parser)]
#[command(about)]
struct Args {
    /// A static binary for one platform: linux/amd64=PATH (repeat for more platforms).
    #[arg(long = "binary", required = true, value_name = "OS/ARCH=PATH")]
    binaries: Vec<String>,
    /// Where the layout folder, the tarball and the digest file go.
    #[arg(long, value_name = "DIR")]
    out: PathBuf,
    /// The image's name.
    #[arg(long, default_value = "kamaji-reconciler")]
    name: String,
    /// The path of the binary in the image (the entrypoint).
    #[arg(long, default_value = "/usr/local/bin/kamaji-reconciler")]
    entrypoint: String,
    /// The version label; also the tag in the layout unless --tag is given.
    #[arg(long = "image-version", value_name = "VERSION")]
    image_version: String,
    #[arg(long)]
    tag: Option<String>,
    /// The source revision label (a git commit).
    #[arg(long)]
    revision: Option<String>,
    /// Every timestamp in the image, in seconds since the epoch.
    #[arg(long, env = "SOURCE_DATE_EPOCH", default_value_t = 0)]
    created: i64,
    #[arg(long, default_value = "https://github.com/capi-kamaji/kubectl-plugins")]
    source: String,
    #[arg(long, default_value = "Apache-2.0")]
    licenses: String,
}

fn main() -> ExitCode {
    let args = Args::parse();
    match run(args) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::FAILURE
        }
    }
}

fn run(args: Args) -> anyhow::Result<()> {
    let mut binaries = Vec::new();
    for b in &args.binaries {
        let Some((platform, path)) = b.split_once('=') else {
            anyhow::bail!(
                "--binary {b:?} is not OS/ARCH=PATH; e.g. --binary linux/amd64=target/kamaji-reconciler"
            );
        };
        binaries.push((Platform::parse(platform)?, PathBuf::from(path)));
    }
    let spec = Spec {
        tag: args
            .tag
            .clone()
            .unwrap_or_else(|| args.image_version.clone()),
        name: args.name,
        entrypoint: args.entrypoint,
        version: args.image_version,
        revision: args.revision,
        description: "The KamajiControlPlane provider of kubectl-capi/kubectl-kamaji".into(),
        source: args.source,
        licenses: args.licenses,
        created: args.created,
        ports: vec!["8080/tcp".into()],
    };
    let w = oci_image::write(&spec, &binaries, &args.out)?;
    eprintln!(
        "wrote {} and {} (compressed layers: {} bytes)",
        w.layout.display(),
        w.tarball.display(),
        w.layer_sizes.iter().sum::<u64>()
    );
    println!("{}", w.digest);
    Ok(())
}
