//! `kubectl capi init`: sets up a management cluster in one command, clusterctl's `init` with
//! its flags, for the pinned set of [`kcore::init::set`]: cert-manager, Cluster API's core and
//! kubeadm providers, BYOH, Kamaji and our KamajiControlPlane provider. `init bundle DIR`
//! writes an air-gapped bundle (with `--images`, the images too); `init --from DIR --registry
//! HOST[/PREFIX]` installs from it, pushing the bundle's images to that registry first.
//!
//! parse → plan (`kcore::init::plan`, every preflight before the first write) → push the
//! bundle's images (`images`) → apply (`apply`; `--datastore`'s objects, `datastore`) → one
//! line per component and a summary.

mod apply;
mod datastore;
mod images;
mod source;
mod upgrade_plan;

use std::collections::BTreeSet;
use std::path::PathBuf;
use std::time::Duration;

use clap::{Args as ClapArgs, Subcommand};
use cli::{DryRun, DryRunFlag, KubeFlags, OutputFlags, OutputFormat, parse_duration};
use kclient::error::{Error, Op};
use kclient::render;
use kcore::init::images::{Platform, human_bytes};
use kcore::init::manifests::{self, registry_problem};
use kcore::init::plan::{self, Action, InitStep};
use kcore::init::set::{self, COMPONENTS, Component, ComponentRole};
use kcore::plan::template::Variables;
use serde_json::Value;

use crate::common::clusterctl_config;

#[derive(ClapArgs, Debug)]
#[command(
    args_conflicts_with_subcommands = true,
    after_help = "Without provider flags, init installs the whole set (--list shows it). With any of
--core, --bootstrap, --control-plane or --infrastructure, only cert-manager, the core provider
and the providers named (and Kamaji, for --control-plane kamaji). A component already installed
at its pinned version by clusterctl or by hand is adopted: said so and left alone. A component
at another version is refused before anything is written. Re-running init finishes an
interrupted one and otherwise changes nothing."
)]
pub struct Args {
    #[command(subcommand)]
    pub cmd: Option<InitCmd>,
    /// The core provider (only cluster-api), NAME[:VERSION]
    #[arg(long, value_name = "NAME[:VERSION]")]
    pub core: Option<String>,
    /// Bootstrap providers, comma-separated NAME[:VERSION] (kubeadm)
    #[arg(long, value_name = "NAME[:VERSION],...", value_delimiter = ',')]
    pub bootstrap: Vec<String>,
    /// Control-plane providers, comma-separated NAME[:VERSION] (kubeadm, kamaji)
    #[arg(long, value_name = "NAME[:VERSION],...", value_delimiter = ',')]
    pub control_plane: Vec<String>,
    /// Infrastructure providers, comma-separated NAME[:VERSION] (byoh)
    #[arg(long, value_name = "NAME[:VERSION],...", value_delimiter = ',')]
    pub infrastructure: Vec<String>,
    /// clusterctl's config file: its variables, its providers: and cert-manager: URLs
    #[arg(long, value_name = "FILE")]
    pub config: Option<PathBuf>,
    /// Install from a bundle written by `init bundle DIR` (no internet access needed)
    #[arg(long, value_name = "DIR")]
    pub from: Option<PathBuf>,
    /// Pull every image from this mirror: HOST[:PORT][/PREFIX] (each image keeps its name and
    /// tag); with --from, the bundle's image archives are pushed there first
    #[arg(long, value_name = "HOST[/PREFIX]")]
    pub registry: Option<String>,
    /// A DataStore for Kamaji's tenants: none; etcd, a 3-member etcd in kamaji-system with
    /// certificates from cert-manager and the DataStore `default`; or a FILE of DataStore objects
    /// to apply (a file named etcd: ./etcd)
    #[arg(long, value_name = "none|etcd|FILE", default_value = "none")]
    pub datastore: String,
    /// With --datastore etcd: the StorageClass of the members' volumes [default: the cluster's
    /// default StorageClass]
    #[arg(long, value_name = "NAME")]
    pub datastore_storage_class: Option<String>,
    /// With --datastore etcd: each member's volume, a quantity from 4Gi to 1Ti [default: 10Gi]
    #[arg(long, value_name = "QUANTITY")]
    pub datastore_size: Option<String>,
    /// Wait until every component's controllers are available
    #[arg(long)]
    pub wait_providers: bool,
    /// How long each component's wait may take
    #[arg(long, value_name = "DURATION", value_parser = parse_duration, default_value = "5m")]
    pub wait_provider_timeout: Duration,
    /// Print the pinned set (component, version, namespace, source) and exit
    #[arg(long)]
    pub list: bool,
    /// Take components init installed at an older version to this set's versions
    #[arg(long)]
    pub upgrade: bool,
    /// With --upgrade: show each component from → to, CRD storage-version changes and the
    /// tenant control planes that will roll; change nothing
    #[arg(long, requires = "upgrade")]
    pub plan: bool,
    #[command(flatten)]
    pub dry_run: DryRunFlag,
    #[command(flatten)]
    pub kube: KubeFlags,
    #[command(flatten)]
    pub output: OutputFlags,
}

#[derive(Subcommand, Debug)]
pub enum InitCmd {
    /// Write every component's manifests, the list of images (with --images, the images too)
    /// and a checksum file into DIR, for `init --from DIR` on a site without internet access
    Bundle(BundleArgs),
}

#[derive(ClapArgs, Debug)]
pub struct BundleArgs {
    /// A directory that does not exist yet
    pub dir: PathBuf,
    /// clusterctl's config file: its providers: and cert-manager: URLs
    #[arg(long, value_name = "FILE")]
    pub config: Option<PathBuf>,
    /// Pull every image into DIR too, an OCI image-layout tar each (image-NAME-TAG.oci.tar),
    /// which `init --from DIR --registry R` pushes to R
    #[arg(long)]
    pub images: bool,
    /// With --images: pull from this mirror (each image under its name and tag there, as
    /// --registry names them) instead of each image's own registry: HOST[:PORT][/PREFIX]
    #[arg(long, value_name = "HOST[/PREFIX]", requires = "images")]
    pub images_from: Option<String>,
    /// With --images: the platform kept of a multi-platform image [default: linux/ and this
    /// machine's architecture]
    #[arg(long, value_name = "OS/ARCH[/VARIANT]", requires = "images")]
    pub platform: Option<String>,
}

pub async fn run(a: &Args) -> Result<(), Error> {
    if let Some(InitCmd::Bundle(b)) = &a.cmd {
        return bundle(b).await;
    }
    if a.list {
        list();
        return Ok(());
    }
    let chosen = chosen(a)?;
    if let Some(r) = &a.registry
        && let Some(why) = registry_problem(r)
    {
        return Err(Error::Usage {
            message: format!("--registry {r:?}: {why}"),
            hint: Some("e.g. --registry mirror.example.com:5000/capi".into()),
        });
    }
    if a.dry_run.mode != DryRun::Client && !matches!(a.output.output, OutputFormat::Table) {
        return Err(Error::Usage {
            message: "-o prints the manifests, with --dry-run=client only".into(),
            hint: Some("kubectl capi init --dry-run=client -o yaml".into()),
        });
    }
    let mut store = datastore::choose(
        &a.datastore,
        a.datastore_storage_class.as_deref(),
        a.datastore_size.as_deref(),
    )?;
    let (texts, archives) = match &a.from {
        Some(dir) => {
            let b = source::from_bundle(dir, &chosen)?;
            (b.texts, b.archives)
        }
        None => (fetch_all(&chosen, a.config.as_ref()).await?, Vec::new()),
    };
    let push_to = match (&a.registry, archives.is_empty()) {
        (Some(r), false) => Some(r.as_str()),
        (None, false) => {
            render::info(&format!(
                "the bundle's {} image archives are not pushed: no --registry (the manifests keep their upstream images)",
                archives.len()
            ));
            None
        }
        (_, true) => None,
    };
    let vars = variables(a.config.as_ref())?;
    let mut prepared = Vec::new();
    for (c, text) in chosen.iter().zip(&texts) {
        prepared.push((
            *c,
            manifests::prepare(c, text, &vars, a.registry.as_deref())?,
        ));
    }
    let with_kamaji = prepared.iter().any(|(c, _)| c.id == "kamaji");
    if a.dry_run.mode == DryRun::Client {
        let extra = store.objects(a.registry.as_deref());
        let carried = carry(&mut prepared, with_kamaji, &extra);
        let used = images_used(&prepared, &extra);
        let mut all: Vec<Value> = prepared.iter().flat_map(|(_, o)| o.clone()).collect();
        if !carried {
            all.extend(extra);
        }
        if let Some(r) = push_to {
            images::push_all(&archives, r, &used, true).await?;
        }
        return render::print_objects(&a.output.output, &all, "serverside-applied (dry run)");
    }
    let conn = a.kube.connect().await?;
    preflight_admin(&conn).await?;
    let mut steps = Vec::new();
    for (c, objects) in &mut prepared {
        check_namespace(&conn, c).await?;
        let d = deployment(&conn, c).await?;
        // A re-run without --datastore keeps the default DataStore Kamaji was given.
        if c.id == "kamaji"
            && store.is_none()
            && let Some(name) = d.as_ref().and_then(manifests::default_datastore)
        {
            manifests::set_default_datastore(objects, &name);
        }
        let inventory = if d.is_some() {
            inventory(&conn, c).await?
        } else {
            None
        };
        steps.push(plan::step(
            c,
            &plan::installed(c, d.as_ref(), inventory.as_ref()),
            a.upgrade,
        )?);
    }
    if a.plan {
        return upgrade_plan::show(&conn, &steps, &prepared).await;
    }
    datastore::preflight(&conn, &mut store, with_kamaji).await?;
    let extra = store.objects(a.registry.as_deref());
    // Kamaji carries them unless this run leaves it out, or adopts it and so applies none of
    // its objects.
    let kamaji_applied = steps
        .iter()
        .any(|s| s.component.id == "kamaji" && !matches!(s.action, Action::Adopt { .. }));
    let carried = carry(&mut prepared, kamaji_applied, &extra);
    let used = images_used(&prepared, &extra);
    let server_dry = a.dry_run.mode == DryRun::Server;
    // The images first: a controller applied before its image is in the mirror would wait on
    // it.
    if let Some(r) = push_to {
        images::push_all(&archives, r, &used, server_dry).await?;
    }
    let mut resolver = apply::Resolver::default();
    let mut tally = Tally::default();
    for (step, (c, objects)) in steps.iter().zip(&prepared) {
        install_one(
            &conn,
            &mut resolver,
            step,
            objects,
            a,
            server_dry,
            &mut tally,
        )
        .await?;
        // cert-manager's webhook must answer before the Certificates of the next component.
        if !server_dry && (a.wait_providers || c.role == ComponentRole::CertManager) {
            apply::wait_available(&conn, c.id, objects, a.wait_provider_timeout).await?;
        }
        if carried && c.id == "kamaji" {
            datastore::settle(
                &conn,
                &store,
                a.wait_providers,
                server_dry,
                a.wait_provider_timeout,
            )
            .await?;
        }
    }
    // With Kamaji, its objects carried them (before its webhook configurations).
    if !extra.is_empty() && !carried {
        apply_datastore_objects(&conn, &mut resolver, &extra, a, server_dry).await?;
        datastore::settle(
            &conn,
            &store,
            a.wait_providers,
            server_dry,
            a.wait_provider_timeout,
        )
        .await?;
    }
    render::line(&tally.summary(steps.len(), server_dry));
    if store.is_none() && steps.iter().any(|s| s.component.id == "kamaji") {
        render::info(
            "no DataStore was applied: kubectl kamaji create needs one (--datastore etcd, or --datastore FILE)",
        );
    }
    Ok(())
}

/// Puts `--datastore`'s `objects` among Kamaji's, when `kamaji` (this run applies Kamaji's
/// objects) and there are any. Whether it did: otherwise they are applied after every component.
fn carry(
    prepared: &mut [(&'static Component, Vec<Value>)],
    kamaji: bool,
    objects: &[Value],
) -> bool {
    if !kamaji || objects.is_empty() {
        return false;
    }
    let Some((_, kamaji_objects)) = prepared.iter_mut().find(|(c, _)| c.id == "kamaji") else {
        return false;
    };
    datastore::carry(kamaji_objects, objects);
    true
}

/// The images the chosen components' manifests and `--datastore`'s objects name, as moved to
/// --registry: those of the bundle's archives that are pushed.
fn images_used(prepared: &[(&'static Component, Vec<Value>)], extra: &[Value]) -> BTreeSet<String> {
    prepared
        .iter()
        .flat_map(|(_, o)| manifests::images(o))
        .chain(manifests::images(extra))
        .collect()
}

/// Applies `--datastore`'s objects when Kamaji did not carry them (it is not installed by this
/// run, or was adopted) and says how many changed.
async fn apply_datastore_objects(
    conn: &cli::Conn,
    resolver: &mut apply::Resolver,
    objects: &[Value],
    a: &Args,
    server_dry: bool,
) -> Result<(), Error> {
    let applied =
        datastore::apply_staged(conn, resolver, objects, server_dry, a.wait_provider_timeout)
            .await?;
    render::line(&format!(
        "datastore: {} objects applied, {} changed",
        applied.objects, applied.changed
    ));
    Ok(())
}

#[derive(Default)]
struct Tally {
    installed: usize,
    updated: usize,
    unchanged: usize,
    adopted: usize,
}

impl Tally {
    fn summary(&self, n: usize, dry: bool) -> String {
        let verdict = if self.installed + self.updated == 0 {
            "nothing changed"
        } else if dry {
            "validated by the server, nothing stored"
        } else {
            "done"
        };
        format!(
            "init: {n} components: {} installed, {} updated, {} unchanged, {} adopted; {verdict}",
            self.installed, self.updated, self.unchanged, self.adopted
        )
    }
}

async fn install_one(
    conn: &cli::Conn,
    resolver: &mut apply::Resolver,
    step: &InitStep,
    objects: &[Value],
    a: &Args,
    server_dry: bool,
    tally: &mut Tally,
) -> Result<(), Error> {
    let c = step.component;
    let head = format!("{} {}", c.id, c.version);
    if let Action::Adopt { by, version } = &step.action {
        tally.adopted += 1;
        render::line(&format!(
            "{} {version}: adopted (installed by {by} in namespace {}), left as it is",
            c.id, c.namespace
        ));
        return Ok(());
    }
    let applied =
        datastore::apply_staged(conn, resolver, objects, server_dry, a.wait_provider_timeout)
            .await?;
    let upgraded;
    let what = match (&step.action, applied.changed) {
        (Action::Upgrade { from }, _) => {
            tally.updated += 1;
            upgraded = format!("upgraded from {from}");
            upgraded.as_str()
        }
        // Nothing to tell an install from a re-run of it for a component without a controller
        // of its own (cert-manager's CRDs alone) but whether anything changed.
        (Action::Install, n) if n > 0 => {
            tally.installed += 1;
            "installed"
        }
        (_, 0) => {
            tally.unchanged += 1;
            "unchanged"
        }
        _ => {
            tally.updated += 1;
            "updated"
        }
    };
    let dry = if server_dry { " (server dry run)" } else { "" };
    render::line(&format!(
        "{head}: {what}{dry} ({} objects, {} changed)",
        applied.objects, applied.changed
    ));
    Ok(())
}

/// The components this init installs, in install order.
fn chosen(a: &Args) -> Result<Vec<&'static Component>, Error> {
    let named: Vec<(ComponentRole, &String)> = a
        .core
        .iter()
        .map(|n| (ComponentRole::Core, n))
        .chain(a.bootstrap.iter().map(|n| (ComponentRole::Bootstrap, n)))
        .chain(
            a.control_plane
                .iter()
                .map(|n| (ComponentRole::ControlPlane, n)),
        )
        .chain(
            a.infrastructure
                .iter()
                .map(|n| (ComponentRole::Infrastructure, n)),
        )
        .collect();
    if named.is_empty() {
        return Ok(COMPONENTS.iter().collect());
    }
    let mut ids: Vec<&str> = vec!["cert-manager", "cluster-api"];
    for (role, spec) in named {
        let (name, version) = match spec.split_once(':') {
            Some((n, v)) => (n, Some(v)),
            None => (spec.as_str(), None),
        };
        let flag = role.flag().unwrap_or_default();
        let Some(c) = set::find(role, name) else {
            let have: Vec<&str> = COMPONENTS
                .iter()
                .filter(|c| c.role == role)
                .map(|c| c.name)
                .collect();
            return Err(Error::Usage {
                message: format!("{flag} {name:?}: this kubectl-capi installs no such provider"),
                hint: Some(format!("choose from: {}", have.join(", "))),
            });
        };
        if let Some(v) = version
            && v != c.version
        {
            return Err(Error::Usage {
                message: format!(
                    "{flag} {spec}: this kubectl-capi installs {name} {} only",
                    c.version
                ),
                hint: Some(format!(
                    "{flag} {name} (kubectl capi init --list shows the set)"
                )),
            });
        }
        if c.id == kcore::labels::PROVIDER {
            ids.push("kamaji");
        }
        ids.push(c.id);
    }
    Ok(COMPONENTS.iter().filter(|c| ids.contains(&c.id)).collect())
}

fn variables(config: Option<&PathBuf>) -> Result<Variables, Error> {
    let mut vars = Variables {
        env: std::env::vars().collect(),
        ..Default::default()
    };
    if let Some(p) = clusterctl_config::path(config.map(PathBuf::as_path)) {
        vars.config = clusterctl_config::variables(&p, config.is_some())?;
    }
    Ok(vars)
}

async fn fetch_all(
    chosen: &[&'static Component],
    config: Option<&PathBuf>,
) -> Result<Vec<String>, Error> {
    let overrides = match clusterctl_config::path(config.map(PathBuf::as_path)) {
        Some(p) => clusterctl_config::overrides(&p, config.is_some())?,
        None => Default::default(),
    };
    let mut out = Vec::new();
    for c in chosen {
        out.push(source::fetch(c, &overrides).await?);
    }
    Ok(out)
}

/// `init bundle DIR`.
async fn bundle(b: &BundleArgs) -> Result<(), Error> {
    if b.dir.exists() {
        return Err(Error::Usage {
            message: format!(
                "{} exists; a bundle is written into a new directory",
                b.dir.display()
            ),
            hint: Some("name a directory that does not exist yet, or remove this one".into()),
        });
    }
    if let Some(r) = &b.images_from
        && let Some(why) = registry_problem(r)
    {
        return Err(Error::Usage {
            message: format!("--images-from {r:?}: {why}"),
            hint: Some("e.g. --images-from mirror.example.com:5000/capi".into()),
        });
    }
    let platform = match &b.platform {
        Some(p) => Platform::parse(p).map_err(|e| Error::Usage {
            message: format!("--platform: {e}"),
            hint: Some("e.g. --platform linux/arm64".into()),
        })?,
        None => Platform::host(),
    };
    let all: Vec<&'static Component> = COMPONENTS.iter().collect();
    let texts = fetch_all(&all, b.config.as_ref()).await?;
    let mut files = Vec::new();
    let mut refs = Vec::new();
    for (c, text) in all.iter().zip(&texts) {
        // Checked as init will read it, so a bundle that cannot install is never written.
        let objects = manifests::prepare(c, text, &Variables::default(), None)?;
        refs.extend(manifests::images(&objects));
        files.push((c.file(), text.as_bytes()));
    }
    // What init's options may install besides the set (the etcd of --datastore etcd), so that a
    // site installs it from the bundle too.
    refs.extend(
        kcore::init::bundle::EXTRA_IMAGES
            .iter()
            .map(|i| i.to_string()),
    );
    refs.sort();
    refs.dedup();
    let mut list = refs.join("\n");
    list.push('\n');
    let mut w = source::BundleWriter::create(&b.dir)?;
    for (name, bytes) in &files {
        w.add(name, bytes)?;
    }
    w.add(kcore::init::bundle::IMAGES, list.as_bytes())?;
    let carried = if b.images {
        let bytes = images::pull_all(&mut w, &refs, b.images_from.as_deref(), &platform).await?;
        format!(
            "{} images ({} archives, {platform}, {})",
            refs.len(),
            refs.len(),
            human_bytes(bytes)
        )
    } else {
        format!("{} images (images.txt)", refs.len())
    };
    w.finish()?;
    render::line(&format!(
        "bundle {} written: {} components, {carried}; copy the directory whole, then: kubectl capi init --from {} --registry HOST[/PREFIX]",
        b.dir.display(),
        all.len(),
        b.dir.display()
    ));
    Ok(())
}

/// `--list`.
fn list() {
    let mut rows = vec![["COMPONENT", "VERSION", "NAMESPACE", "SOURCE"].map(String::from)];
    for c in COMPONENTS {
        let src = match c.origin {
            set::Origin::Url(u) => u.to_string(),
            set::Origin::Ours => "generated by this binary".to_string(),
        };
        rows.push([
            c.id.to_string(),
            c.version.to_string(),
            c.namespace.to_string(),
            src,
        ]);
    }
    let width = |i: usize| rows.iter().map(|r| r[i].len()).max().unwrap_or(0);
    let (w0, w1, w2) = (width(0), width(1), width(2));
    for r in &rows {
        render::line(&format!(
            "{:w0$}   {:w1$}   {:w2$}   {}",
            r[0], r[1], r[2], r[3]
        ));
    }
}

/// Refuses a user who is not cluster-admin: init writes CRDs, ClusterRoles and webhooks.
async fn preflight_admin(conn: &cli::Conn) -> Result<(), Error> {
    use k8s_openapi::api::authorization::v1::{
        ResourceAttributes, SelfSubjectAccessReview, SelfSubjectAccessReviewSpec,
    };
    let review = SelfSubjectAccessReview {
        spec: SelfSubjectAccessReviewSpec {
            resource_attributes: Some(ResourceAttributes {
                verb: Some("*".into()),
                group: Some("*".into()),
                resource: Some("*".into()),
                ..Default::default()
            }),
            ..Default::default()
        },
        ..Default::default()
    };
    let api: kube::Api<SelfSubjectAccessReview> = kube::Api::all(conn.client.clone());
    let op = Op::new(
        "create",
        "authorization.k8s.io",
        "selfsubjectaccessreviews",
        "SelfSubjectAccessReview",
    );
    let answer = api
        .create(&Default::default(), &review)
        .await
        .map_err(|e| conn.error(e, &op))?;
    if answer.status.is_some_and(|s| s.allowed) {
        return Ok(());
    }
    Err(Error::Other {
        message: "init needs cluster-admin (it writes CRDs, ClusterRoles and webhook configurations); you are not; nothing was applied".into(),
        hint: Some("run it with an admin kubeconfig (kubectl auth can-i '*' '*' says yes)".into()),
    })
}

/// Refuses a component whose namespace is being deleted: its objects would go with it.
async fn check_namespace(conn: &cli::Conn, c: &Component) -> Result<(), Error> {
    use k8s_openapi::api::core::v1::Namespace;
    let api: kube::Api<Namespace> = kube::Api::all(conn.client.clone());
    let op = Op::new("get", "", "namespaces", "Namespace").named(c.namespace);
    let ns = api
        .get_opt(c.namespace)
        .await
        .map_err(|e| conn.error(e, &op))?;
    if ns.is_some_and(|n| n.metadata.deletion_timestamp.is_some()) {
        return Err(Error::Other {
            message: format!(
                "namespace {} of {} is being deleted; nothing was applied",
                c.namespace, c.id
            ),
            hint: Some(format!(
                "wait until it is gone (kubectl get namespace {} --watch), then run init again",
                c.namespace
            )),
        });
    }
    Ok(())
}

/// The component's controller Deployment, if there is one.
async fn deployment(conn: &cli::Conn, c: &Component) -> Result<Option<Value>, Error> {
    use k8s_openapi::api::apps::v1::Deployment;
    let api: kube::Api<Deployment> = kube::Api::namespaced(conn.client.clone(), c.namespace);
    let op = Op::new("get", "apps", "deployments", "Deployment")
        .in_namespace(Some(c.namespace))
        .named(c.deployment);
    let d = api
        .get_opt(c.deployment)
        .await
        .map_err(|e| conn.error(e, &op))?;
    d.map(serde_json::to_value)
        .transpose()
        .map_err(|e| Error::other(format!("internal: deployment {}: {e}", c.deployment)))
}

/// clusterctl's inventory entry for the component (`Provider` of
/// `clusterctl.cluster.x-k8s.io/v1alpha3`, named by its manifest label), if clusterctl
/// installed it.
async fn inventory(conn: &cli::Conn, c: &Component) -> Result<Option<Value>, Error> {
    let ar = kube::api::ApiResource::from_gvk_with_plural(
        &kube::core::GroupVersionKind::gvk("clusterctl.cluster.x-k8s.io", "v1alpha3", "Provider"),
        "providers",
    );
    let api = kclient::api::dynamic(conn, &ar, Some(c.namespace));
    match api.get_opt(c.id).await {
        Ok(p) => Ok(p.map(|p| p.data)),
        // No inventory CRD: clusterctl never ran here.
        Err(kube::Error::Api(s)) if s.code == 404 => Ok(None),
        Err(e) => Err(conn.error(
            e,
            &Op::on("get", &ar)
                .in_namespace(Some(c.namespace))
                .named(c.id),
        )),
    }
}
