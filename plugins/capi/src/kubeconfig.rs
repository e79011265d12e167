//! `kubectl capi kubeconfig CLUSTER [--output FILE] [--merge [--force] [--switch]]`: the
//! workload cluster's kubeconfig from Secret `<cluster>-kubeconfig` (key `value`), printed,
//! written to a file, or merged into the user's kubeconfig.

use std::path::{Path, PathBuf};

use clap::Args as ClapArgs;
use cli::KubeFlags;
use k8s_openapi::api::core::v1::Secret;
use kube::api::Api;
use serde_json::Value;
use shared::discovery::ServerApis;
use shared::error::{Error, Op};
use shared::kubeconfig::{self, MergeOptions, MergeReport};

#[derive(ClapArgs, Clone, Debug)]
#[command(
    after_help = "Without --output or --merge the kubeconfig is printed on stdout.\n\n--merge adds the cluster, user and context to your kubeconfig (--merge-into, else the first file of KUBECONFIG, else ~/.kube/config): the file is replaced atomically, the previous version is kept as <file>.bak, and existing entries with the same names are never overwritten unless --force.\n\nExamples:\n  kubectl capi kubeconfig prod > prod.kubeconfig\n  kubectl capi kubeconfig prod --output ~/prod.kubeconfig\n  kubectl capi kubeconfig prod --merge --switch"
)]
pub struct Args {
    /// The cluster
    #[arg(value_name = "CLUSTER")]
    pub cluster: String,
    /// Write the kubeconfig to FILE (mode 0600) instead of printing it
    #[arg(long, value_name = "FILE", value_hint = clap::ValueHint::FilePath, conflicts_with = "merge")]
    pub output: Option<PathBuf>,
    /// Add the cluster as a new context to your kubeconfig
    #[arg(long)]
    pub merge: bool,
    /// The kubeconfig to merge into (default: the first file of KUBECONFIG, else ~/.kube/config)
    #[arg(long, value_name = "FILE", requires = "merge", value_hint = clap::ValueHint::FilePath)]
    pub merge_into: Option<PathBuf>,
    /// With --merge: replace existing clusters, users and contexts of the same names
    #[arg(long, requires = "merge")]
    pub force: bool,
    /// With --merge: make the new context the current one
    #[arg(long, requires = "merge")]
    pub switch: bool,
    #[command(flatten)]
    pub kube: KubeFlags,
}

/// Reads the kubeconfig of `cluster` from its secret, with clear errors when it is missing
/// (control plane not initialized yet) or malformed.
async fn fetch(args: &Args) -> Result<(String, Value), Error> {
    kcore::names::check_object_name("cluster", &args.cluster)?;
    let conn = args.kube.connect().await?;
    let ns = conn.namespace.clone();
    let secret_name = format!("{}-kubeconfig", args.cluster);
    let api: Api<Secret> = Api::namespaced(conn.client.clone(), &ns);
    let op = Op::new("get", "", "secrets", "Secret")
        .in_namespace(Some(&ns))
        .named(&secret_name);
    let secret = api
        .get_opt(&secret_name)
        .await
        .map_err(|e| conn.error(e, &op))?;
    let Some(secret) = secret else {
        // Tell a missing cluster from one whose control plane is not up yet.
        let apis = ServerApis::discover(&conn).await?;
        let cluster_ar = apis.cluster()?;
        let cluster = shared::api::get_or_suggest(&conn, &cluster_ar, &ns, &args.cluster).await?;
        let json = shared::discovery::fields::object_json(&cluster);
        let initialized = shared::discovery::fields::cluster_control_plane_initialized(&json);
        let message = if initialized {
            format!(
                "cluster \"{}\" has no kubeconfig: Secret {ns}/{secret_name} not found, although its control plane reports initialized",
                args.cluster
            )
        } else {
            format!(
                "cluster \"{}\" has no kubeconfig yet: its control plane is not initialized (Secret {ns}/{secret_name} not found)",
                args.cluster
            )
        };
        return Err(Error::Other {
            message,
            hint: Some(format!(
                "wait for the control plane (kubectl capi describe {} -n {ns}), then run this again",
                args.cluster
            )),
        });
    };
    let malformed = |why: &str| Error::Other {
        message: format!("Secret {ns}/{secret_name} is malformed: {why}"),
        hint: Some(format!(
            "the control-plane provider writes it; check it with kubectl get secret {secret_name} -n {ns} -o yaml"
        )),
    };
    let data = secret
        .data
        .as_ref()
        .and_then(|d| d.get("value"))
        .map(|b| b.0.clone())
        .ok_or_else(|| malformed("it has no key \"value\""))?;
    let text = String::from_utf8(data).map_err(|_| malformed("\"value\" is not UTF-8 text"))?;
    let parsed = kubeconfig::parse(&text, "\"value\"").map_err(|e| malformed(&e.to_string()))?;
    kubeconfig::check_entries(&parsed).map_err(|e| malformed(&e))?;
    Ok((text, parsed))
}

pub async fn run(args: &Args) -> Result<(), Error> {
    let (text, parsed) = fetch(args).await?;
    if let Some(path) = &args.output {
        kubeconfig::write_atomic(path, text.as_bytes(), false)?;
        shared::render::info(&format!(
            "wrote the kubeconfig of cluster {} to {}",
            args.cluster,
            path.display()
        ));
        return Ok(());
    }
    if !args.merge {
        shared::render::raw(text.as_bytes());
        return Ok(());
    }
    let target = args
        .merge_into
        .clone()
        .or_else(kubeconfig::default_merge_file)
        .ok_or_else(|| Error::Usage {
            message: "cannot tell where your kubeconfig is: neither KUBECONFIG nor HOME is set"
                .into(),
            hint: Some("pass --merge-into FILE".into()),
        })?;
    let opts = MergeOptions {
        force: args.force,
        set_current: args.switch,
        conflict_hint: "pass --force to replace them, or --output FILE to write a separate kubeconfig",
    };
    let report = kubeconfig::merge_into_file(&target, &parsed, opts)?;
    shared::render::info(&merge_message(&report, &target));
    Ok(())
}

/// The message after a merge, like kubectl's `config` verbs.
fn merge_message(r: &MergeReport, target: &Path) -> String {
    let mut parts = Vec::new();
    if !r.added.is_empty() {
        parts.push(format!("added {}", r.added.join(", ")));
    }
    if !r.replaced.is_empty() {
        parts.push(format!("replaced {}", r.replaced.join(", ")));
    }
    if parts.is_empty() {
        parts.push("already up to date".into());
    }
    let mut s = format!(
        "merged context \"{}\" into {}: {}",
        r.context,
        target.display(),
        parts.join("; ")
    );
    if let Some(b) = &r.backup {
        s.push_str(&format!(" (previous file kept as {b})"));
    }
    if r.current_context_set {
        s.push_str(&format!("; current context is now \"{}\"", r.context));
    } else {
        s.push_str(&format!(
            "; use it with kubectl config use-context {}",
            r.context
        ));
    }
    s
}
