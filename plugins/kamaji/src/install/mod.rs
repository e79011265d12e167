//! `kubectl kamaji install|uninstall`: the KamajiControlPlane provider (kamaji-reconciler):
//! its CRDs, RBAC and Deployment, from the reconciler's own manifests.

use clap::Args as ClapArgs;
use std::time::Duration;

use cli::{Conn, DryRun, DryRunFlag, KubeFlags, OutputFlags, OutputFormat, parse_duration};
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kclient::discovery::ServerApis;
use kclient::error::{Error, Op};
use kclient::render::display_name;
use kclient::render::{self, Poll};
use kcore::kamaji::create::FIELD_MANAGER;
use kube::ResourceExt;
use kube::api::{Api, ListParams, Patch, PatchParams};
use kube::core::GroupVersionKind;
use kube::discovery::Scope;
use serde_json::Value;

use kcore::install as manifests;
use kcore::install::rollout::{self, DeploymentRollout};
use kcore::labels;

mod image_ref;

/// Most replicas `--replicas` takes: one leads, the rest stand by.
const MAX_REPLICAS: i64 = 5;

#[derive(ClapArgs, Clone, Debug)]
#[command(
    after_help = "The provider goes to namespace kamaji-reconciler-system unless -n names another.
Applied with server-side apply (field manager kubectl-kamaji), taking over conflicting fields,
so re-running upgrades it in place. The image defaults to this plugin's own version.
Another KamajiControlPlane provider (CACPPK) is refused unless --take-over: both would
reconcile the same KamajiControlPlanes. --dry-run=client needs no cluster at all.
By default the reconciler watches every namespace through a ClusterRole. With --namespaces it
watches only those (they must exist), and what it reads and writes there, Secrets among it, is
granted by a Role in each; re-running install with another list (or none) removes the Roles of
namespaces no longer listed."
)]
#[command(mut_arg("dry-run", |a| a.help("Print (client) or validate on the server (server) without changing anything")))]
pub struct InstallArgs {
    /// The reconciler image
    #[arg(long, default_value = manifests::DEFAULT_IMAGE, value_name = "IMAGE")]
    pub image: String,
    /// Replicas of the reconciler: one leads, the others stand by to take over (re-running
    /// install sets it again)
    #[arg(long, default_value_t = 1, value_name = "N",
          value_parser = clap::value_parser!(u8).range(1..=MAX_REPLICAS))]
    pub replicas: u8,
    #[command(flatten)]
    pub dry_run: DryRunFlag,
    /// Install over another provider's KamajiControlPlane CRDs (CACPPK's), taking them over
    #[arg(long)]
    pub take_over: bool,
    /// Watch only these namespaces (comma-separated, at most 32), with Roles there instead of
    /// cluster-wide grants on Secrets and the other objects it reconciles
    #[arg(long, value_name = "NS,NS")]
    pub namespaces: Option<String>,
    /// Mount this PersistentVolumeClaim of the reconciler's namespace for TenantBackups'
    /// persistentVolumeClaim targets (repeatable or comma-separated, at most 16; re-running
    /// install without it unmounts it)
    #[arg(long = "backup-claim", value_name = "CLAIM", value_delimiter = ',')]
    pub backup_claims: Vec<String>,
    /// Wait until the reconciler's Deployment has rolled out (every replica updated and
    /// available), as kubectl rollout status does
    #[arg(long)]
    pub wait: bool,
    /// How long --wait may take
    #[arg(long, value_name = "DURATION", value_parser = parse_duration, default_value = "5m")]
    pub timeout: Duration,
    #[command(flatten)]
    pub kube: KubeFlags,
    #[command(flatten)]
    pub output: OutputFlags,
}

#[derive(ClapArgs, Clone, Debug)]
pub struct UninstallArgs {
    /// Uninstall even though KamajiControlPlanes exist (deleting the CRD deletes them all)
    #[arg(long)]
    pub force: bool,
    /// Do not ask (needed without a terminal)
    #[arg(short = 'y', long)]
    pub yes: bool,
    /// Also tear down the BYOH host pool, as BCM's teardown does: every BootstrapKubeconfig and
    /// every ByoHost that serves no machine. Refused while any Cluster remains
    #[arg(long)]
    pub purge: bool,
    #[command(flatten)]
    pub kube: KubeFlags,
}

fn namespace(conn: &Conn) -> String {
    if conn.namespace_explicit {
        conn.namespace.clone()
    } else {
        manifests::DEFAULT_NAMESPACE.to_string()
    }
}

/// The names of our CRDs.
fn crd_names(objects: &[Value]) -> Vec<String> {
    objects
        .iter()
        .filter(|o| o["kind"] == "CustomResourceDefinition")
        .filter_map(|o| o["metadata"]["name"].as_str().map(String::from))
        .collect()
}

/// Whether a CRD on the server is ours: our owner label, or applied by this plugin before the
/// label existed.
fn crd_is_ours(crd: &CustomResourceDefinition) -> bool {
    let (k, v) = labels::OWNER_LABEL;
    crd.labels().get(k).is_some_and(|x| x == v)
        || crd
            .managed_fields()
            .iter()
            .any(|m| m.manager.as_deref() == Some(FIELD_MANAGER))
}

/// Another KamajiControlPlane provider on the cluster: CRDs that are not ours, or a controller
/// Deployment labelled as the Kamaji control-plane provider that is not ours (CACPPK's carries
/// `cluster.x-k8s.io/provider: kamaji` from its kustomization, or `control-plane-kamaji` when
/// clusterctl installed it). `None` when there is none.
async fn other_provider(conn: &Conn, crd_names: &[String]) -> Result<Option<String>, Error> {
    for name in crd_names {
        let Some(crd) = kclient::api::crd(conn, name).await? else {
            continue;
        };
        if crd_is_ours(&crd) {
            continue;
        }
        let mut whose: Vec<String> = crd
            .labels()
            .get(labels::PROVIDER_LABEL)
            .map(|p| format!("{}={p}", labels::PROVIDER_LABEL))
            .into_iter()
            .collect();
        let managers: Vec<String> = crd
            .managed_fields()
            .iter()
            .filter_map(|m| m.manager.clone())
            .collect();
        if !managers.is_empty() {
            whose.push(format!("field managers {}", managers.join(", ")));
        }
        return Ok(Some(format!(
            "CRD {name} belongs to another KamajiControlPlane provider ({})",
            whose.join(", ")
        )));
    }
    let deployments: Api<Deployment> = Api::all(conn.client.clone());
    let selector = format!(
        "{} in (kamaji,{}),{}!={}",
        labels::PROVIDER_LABEL,
        labels::PROVIDER,
        labels::OWNER_LABEL.0,
        labels::OWNER_LABEL.1
    );
    let op = Op::new("list", "apps", "deployments", "Deployment");
    let list = deployments
        .list(&ListParams::default().labels(&selector))
        .await
        .map_err(|e| conn.error(e, &op))?;
    Ok(list.items.first().map(|d| {
        format!(
            "another KamajiControlPlane provider runs (Deployment {}/{})",
            d.namespace().unwrap_or_default(),
            d.name_any()
        )
    }))
}

async fn resource(conn: &Conn, obj: &Value) -> Result<(kube::api::ApiResource, bool), Error> {
    let av = obj["apiVersion"].as_str().unwrap_or_default();
    let kind = obj["kind"].as_str().unwrap_or_default();
    let (group, version) = kcore::groups::split_api_version(av);
    let gvk = GroupVersionKind::gvk(group, version, kind);
    let (ar, caps) = kube::discovery::pinned_kind(&conn.client, &gvk)
        .await
        .map_err(|e| conn.error(e, &Op::discovery()))?;
    Ok((ar, caps.scope == Scope::Namespaced))
}

pub async fn install(args: &InstallArgs) -> Result<(), Error> {
    let (ns, watched, objects) = manifests_for(args)?;
    if args.dry_run == DryRun::Client {
        if matches!(args.output.output, OutputFormat::Yaml | OutputFormat::Json) {
            render::info(
                "note: apply with kubectl apply --server-side -f - (the CRDs are too large for client-side apply)",
            );
        }
        render::print_objects(&args.output.output, &objects, "created (dry run)")?;
        render::info(
            "note: where the Prometheus operator's CRDs are served, install also applies a PodMonitor, a PrometheusRule and a Grafana dashboard ConfigMap",
        );
        return Ok(());
    }
    let conn = args.kube.connect().await?;
    check_installed_elsewhere(&conn, &ns).await?;
    check_other_provider(&conn, &objects, args.take_over).await?;
    check_watched_exist(&conn, &watched).await?;
    check_claims_exist(&conn, &ns, &args.backup_claims).await?;
    let mut objects = objects;
    objects.extend(monitoring(&conn, &ns).await);
    let server_dry = args.dry_run == DryRun::Server;
    // A server dry run does not create the namespace, and the API server answers every
    // object in a namespace that does not exist with that namespace's 404.
    let unchecked_ns = if server_dry && !namespace_exists(&conn, &ns).await? {
        Some(ns.as_str())
    } else {
        None
    };
    apply_all(&conn, &objects, server_dry, unchecked_ns).await?;
    if !server_dry {
        // After the new grants are in place: the Roles of namespaces no longer watched.
        for (ar, role_ns) in namespaced_grants(&conn).await? {
            if !watched.contains(&role_ns) {
                delete_grant(&conn, &ar, &role_ns).await?;
            }
        }
        if args.wait {
            wait_rolled_out(&conn, &ns, args.timeout).await?;
            render::info(&format!(
                "the KamajiControlPlane provider runs in namespace {ns}: deployment/{} rolled out",
                labels::RECONCILER
            ));
        } else {
            render::info(&format!(
                "the KamajiControlPlane provider runs in namespace {ns} (kubectl -n {ns} rollout status deployment/{})",
                labels::RECONCILER
            ));
        }
    }
    Ok(())
}

/// The PodMonitor, PrometheusRule and Grafana dashboard (`kcore::install::monitoring`) when the
/// Prometheus operator's CRDs are served; none, said so, when not.
async fn monitoring(conn: &Conn, ns: &str) -> Vec<Value> {
    let objects = kcore::install::monitoring::manifests(ns);
    let mut served = true;
    for o in objects.iter().filter(|o| o["apiVersion"] != "v1") {
        served &= resource(conn, o).await.is_ok();
    }
    if served {
        render::info(
            "the Prometheus operator's CRDs are served: kamaji-reconciler's PodMonitor, PrometheusRule and Grafana dashboard go with it",
        );
        objects
    } else {
        render::info(
            "the Prometheus operator's CRDs (PodMonitor, PrometheusRule) are not served: no alerts or dashboard installed (run kubectl kamaji install again once they are)",
        );
        Vec::new()
    }
}

/// `--wait`: until the reconciler's Deployment has rolled out. A Deployment past its progress
/// deadline fails at once (waiting longer changes nothing) with the command that shows why.
async fn wait_rolled_out(conn: &Conn, ns: &str, timeout: Duration) -> Result<(), Error> {
    let name = labels::RECONCILER;
    let deployments: Api<Deployment> = Api::namespaced(conn.client.clone(), ns);
    let op = Op::new("get", "apps", "deployments", "Deployment")
        .in_namespace(Some(ns))
        .named(name);
    let hint = format!("kubectl -n {ns} describe deployment/{name}");
    render::wait_until(
        &format!("waiting for deployment/{name} to roll out"),
        timeout,
        Duration::from_millis(500),
        || {
            let (deployments, op, hint) = (&deployments, &op, &hint);
            async move {
                let d = deployments.get(name).await.map_err(|e| conn.error(e, op))?;
                let d = serde_json::to_value(d).map_err(|e| Error::other(e.to_string()))?;
                match rollout::deployment_rollout(&d) {
                    DeploymentRollout::Done => Ok(Poll::Ready(())),
                    DeploymentRollout::Waiting(w) => Ok(Poll::Pending(w)),
                    DeploymentRollout::Stalled(why) => Err(Error::Other {
                        message: why,
                        hint: Some(hint.clone()),
                    }),
                }
            }
        },
    )
    .await
}

/// The namespace, the namespaces watched (all when empty) and the manifests to apply. The
/// client dry run prints these and calls no API, so this needs no kubeconfig at all.
fn manifests_for(args: &InstallArgs) -> Result<(String, Vec<String>, Vec<Value>), Error> {
    if args.image.trim().is_empty() {
        return Err(Error::Usage {
            message: "--image is empty".into(),
            hint: Some(format!("e.g. --image {}", manifests::DEFAULT_IMAGE)),
        });
    }
    check_image(&args.image)?;
    let ns = args
        .kube
        .namespace
        .clone()
        .unwrap_or_else(|| manifests::DEFAULT_NAMESPACE.to_string());
    check_namespace(&ns)?;
    let watched = match &args.namespaces {
        None => Vec::new(),
        Some(list) => manifests::parse_namespaces(list).map_err(|why| Error::Usage {
            message: format!("--namespaces: {why}"),
            hint: Some(
                "e.g. --namespaces team-a,team-b, or leave it out to watch every namespace".into(),
            ),
        })?,
    };
    if args.backup_claims.len() > manifests::MAX_BACKUP_CLAIMS {
        return Err(Error::Usage {
            message: format!(
                "--backup-claim: at most {} claims",
                manifests::MAX_BACKUP_CLAIMS
            ),
            hint: Some("put several TenantBackups' folders on one claim".into()),
        });
    }
    for c in &args.backup_claims {
        kcore::names::check_object_name("PersistentVolumeClaim", c)?;
    }
    let mut objects =
        manifests::install_manifests_watching(&args.image, &ns, args.replicas, &watched);
    manifests::mount_backup_claims(&mut objects, &args.backup_claims);
    if objects
        .iter()
        .filter(|o| o["kind"] == "CustomResourceDefinition")
        .count()
        == 0
    {
        return Err(Error::other(
            "the reconciler's CRDs could not be generated (a build defect)",
        ));
    }
    Ok((ns, watched, objects))
}

/// Refuses `--namespaces` naming a namespace that does not exist: its Role could not be made,
/// and a namespace made later would have no grant.
async fn check_watched_exist(conn: &Conn, watched: &[String]) -> Result<(), Error> {
    for w in watched {
        if !namespace_exists(conn, w).await? {
            return Err(Error::Other {
                message: format!(
                    "namespace {w} of --namespaces does not exist; nothing was applied"
                ),
                hint: Some(format!(
                    "create it first (kubectl create namespace {w}), or leave it out"
                )),
            });
        }
    }
    Ok(())
}

/// Refuses `--backup-claim` naming a claim the reconciler's namespace does not hold: its pod
/// would never start.
async fn check_claims_exist(conn: &Conn, ns: &str, claims: &[String]) -> Result<(), Error> {
    let api: kube::Api<k8s_openapi::api::core::v1::PersistentVolumeClaim> =
        kube::Api::namespaced(conn.client.clone(), ns);
    for c in claims {
        let op = Op::new("get", "", "persistentvolumeclaims", "PersistentVolumeClaim")
            .in_namespace(Some(ns))
            .named(c);
        if api
            .get_opt(c)
            .await
            .map_err(|e| conn.error(e, &op))?
            .is_none()
        {
            return Err(Error::Other {
                message: format!(
                    "PersistentVolumeClaim {ns}/{c} of --backup-claim does not exist; nothing was applied"
                ),
                hint: Some(format!(
                    "create it in {ns} first (ReadWriteOnce is enough for one replica), or leave it out"
                )),
            });
        }
    }
    Ok(())
}

/// The reconciler's own Roles and RoleBindings (named like it, with its owner label) in every
/// namespace: what `--namespaces` installed. Each as its resource and namespace.
async fn namespaced_grants(conn: &Conn) -> Result<Vec<(kube::api::ApiResource, String)>, Error> {
    use k8s_openapi::api::rbac::v1::{Role, RoleBinding};
    let selector = format!("{}={}", labels::OWNER_LABEL.0, labels::OWNER_LABEL.1);
    let lp = ListParams::default().labels(&selector);
    let mut out = Vec::new();
    let roles: Api<Role> = Api::all(conn.client.clone());
    let op = Op::new("list", "rbac.authorization.k8s.io", "roles", "Role");
    for r in roles.list(&lp).await.map_err(|e| conn.error(e, &op))? {
        if r.name_any() == labels::RECONCILER {
            out.push((
                kube::api::ApiResource::erase::<Role>(&()),
                r.namespace().unwrap_or_default(),
            ));
        }
    }
    let bindings: Api<RoleBinding> = Api::all(conn.client.clone());
    let op = Op::new(
        "list",
        "rbac.authorization.k8s.io",
        "rolebindings",
        "RoleBinding",
    );
    for b in bindings.list(&lp).await.map_err(|e| conn.error(e, &op))? {
        if b.name_any() == labels::RECONCILER {
            out.push((
                kube::api::ApiResource::erase::<RoleBinding>(&()),
                b.namespace().unwrap_or_default(),
            ));
        }
    }
    Ok(out)
}

/// Deletes the reconciler's Role or RoleBinding `ar` of namespace `ns`, one line.
async fn delete_grant(conn: &Conn, ar: &kube::api::ApiResource, ns: &str) -> Result<(), Error> {
    let name = labels::RECONCILER;
    if kclient::api::delete_if_present(conn, ar, Some(ns), name, false).await? {
        render::line(&format!(
            "{}.{}/{name} deleted (namespace {ns})",
            ar.kind.to_lowercase(),
            ar.group
        ));
    }
    Ok(())
}

/// A namespace name the API server takes: a DNS-1123 label.
fn check_namespace(ns: &str) -> Result<(), Error> {
    let label = !ns.is_empty()
        && ns.len() <= 63
        && ns
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-')
        && !ns.starts_with('-')
        && !ns.ends_with('-');
    if label {
        return Ok(());
    }
    Err(Error::Usage {
        message: format!("invalid namespace {ns:?}: it must be a DNS-1123 label"),
        hint: Some(format!(
            "use at most 63 lower-case letters, digits and '-', starting and ending with a letter or digit (e.g. -n {})",
            manifests::DEFAULT_NAMESPACE
        )),
    })
}

/// An image reference the kubelet can pull: the grammar of distribution's reference package
/// (`reference/regexp.go`, distribution v3), checked here so that a typo fails before the
/// Deployment is applied rather than as an ImagePullBackOff nobody watches.
fn check_image(image: &str) -> Result<(), Error> {
    match image_ref::problem(image) {
        None => Ok(()),
        Some(why) => Err(Error::Usage {
            message: format!("--image {image:?} is not an image reference: {why}"),
            hint: Some(format!(
                "use [REGISTRY[:PORT]/]PATH[:TAG][@sha256:DIGEST] with a lower-case path, e.g. --image {}",
                manifests::DEFAULT_IMAGE
            )),
        }),
    }
}

/// Whether namespace `ns` exists.
async fn namespace_exists(conn: &Conn, ns: &str) -> Result<bool, Error> {
    use k8s_openapi::api::core::v1::Namespace;
    let api: Api<Namespace> = Api::all(conn.client.clone());
    let op = Op::new("get", "", "namespaces", "Namespace").named(ns);
    Ok(api
        .get_opt(ns)
        .await
        .map_err(|e| conn.error(e, &op))?
        .is_some())
}

/// Refuses a second reconciler: ours runs once per cluster (its ClusterRoleBinding is cluster
/// scoped and would follow the last install, and two would reconcile the same objects). The
/// same namespace is a re-install or upgrade and goes ahead.
async fn check_installed_elsewhere(conn: &Conn, ns: &str) -> Result<(), Error> {
    let deployments: Api<Deployment> = Api::all(conn.client.clone());
    let selector = format!("{}={}", labels::OWNER_LABEL.0, labels::OWNER_LABEL.1);
    let op = Op::new("list", "apps", "deployments", "Deployment");
    let list = deployments
        .list(&ListParams::default().labels(&selector))
        .await
        .map_err(|e| conn.error(e, &op))?;
    let elsewhere = list
        .items
        .iter()
        .find(|d| d.namespace().is_some_and(|n| n != ns));
    let Some(d) = elsewhere else {
        return Ok(());
    };
    let there = d.namespace().unwrap_or_default();
    Err(Error::Other {
        message: format!(
            "the KamajiControlPlane provider is already installed in namespace {there} (deployment {}); a second one in {ns} would reconcile the same objects",
            d.name_any()
        ),
        hint: Some(format!(
            "to upgrade it, run kubectl kamaji install -n {there}; to move it, uninstall it first (kubectl kamaji uninstall -n {there}), then install -n {ns}"
        )),
    })
}

/// Refuses to overwrite another KamajiControlPlane provider's CRDs unless `--take-over`.
async fn check_other_provider(
    conn: &Conn,
    objects: &[Value],
    take_over: bool,
) -> Result<(), Error> {
    match other_provider(conn, &crd_names(objects)).await? {
        Some(what) if !take_over => {
            return Err(Error::Other {
                message: format!(
                    "{what}: installing would overwrite its KamajiControlPlane CRDs and two controllers would reconcile the same KamajiControlPlanes"
                ),
                hint: Some(
                    "remove that provider first (clusterctl delete --control-plane kamaji, or delete its Deployment), or pass --take-over to replace its CRDs".into(),
                ),
            });
        }
        Some(what) => render::info(&format!(
            "taking over: {what}; stop its controller (scale its Deployment to 0) so that only kamaji-reconciler reconciles"
        )),
        None => {}
    }
    Ok(())
}

/// Server-side applies every object in order, one line each. `unchecked_ns`: a server dry
/// run's namespace that does not exist yet, whose objects the API server cannot check.
async fn apply_all(
    conn: &Conn,
    objects: &[Value],
    server_dry: bool,
    unchecked_ns: Option<&str>,
) -> Result<(), Error> {
    let mut pp = PatchParams::apply(FIELD_MANAGER).force();
    pp.dry_run = server_dry;
    for o in objects {
        let name = o["metadata"]["name"].as_str().unwrap_or_default();
        if let Some(ns) = unchecked_ns
            && o["metadata"]["namespace"].as_str() == Some(ns)
        {
            render::info(&format!(
                "{}: not checked by the server dry run: namespace {ns} does not exist yet (the install creates it)",
                display_name(o)
            ));
            continue;
        }
        let (ar, namespaced) = match resource(conn, o).await {
            Ok(r) => r,
            // A CRD applied moments ago may not be discoverable in a server dry run.
            Err(e) if server_dry => {
                render::info(&format!(
                    "{}: skipped in server dry run ({e})",
                    display_name(o)
                ));
                continue;
            }
            Err(e) => return Err(e),
        };
        let ns_opt = if namespaced {
            o["metadata"]["namespace"].as_str()
        } else {
            None
        };
        let api = kclient::api::dynamic(conn, &ar, ns_opt);
        api.patch(name, &pp, &Patch::Apply(o))
            .await
            .map_err(|e| conn.error(e, &Op::on("patch", &ar).in_namespace(ns_opt).named(name)))?;
        let suffix = if server_dry {
            "serverside-applied (server dry run)"
        } else {
            "serverside-applied"
        };
        render::line(&format!("{} {suffix}", display_name(o)));
    }
    Ok(())
}

pub async fn uninstall(args: &UninstallArgs) -> Result<(), Error> {
    if !args.yes {
        render::require_terminal("uninstall", "pass --yes".into())?;
    }
    let conn = args.kube.connect().await?;
    let ns = namespace(&conn);
    let apis = ServerApis::discover(&conn).await?;
    if args.purge {
        refuse_while_clusters_remain(&conn, &apis).await?;
    }
    if let Some(ar) = apis.kamaji_control_plane() {
        let kcps = kclient::api::list(&conn, &ar, None, None).await?;
        if !kcps.is_empty() && !args.force {
            let names: Vec<String> = kcps
                .iter()
                .take(5)
                .map(|k| {
                    format!(
                        "{}/{}",
                        k.metadata.namespace.clone().unwrap_or_default(),
                        k.metadata.name.clone().unwrap_or_default()
                    )
                })
                .collect();
            return Err(Error::Other {
                message: format!(
                    "{} KamajiControlPlane(s) exist ({}{}); uninstalling deletes the CRD and with it all of them",
                    kcps.len(),
                    names.join(", "),
                    if kcps.len() > 5 { ", ..." } else { "" }
                ),
                hint: Some(
                    "delete them first (kubectl kamaji delete NAME), or pass --force".into(),
                ),
            });
        }
    }
    let mut objects = kcore::install::monitoring::manifests(&ns);
    objects.reverse();
    objects.extend(manifests::uninstall_manifests(&ns));
    let what = if args.purge {
        format!(
            "Uninstall the KamajiControlPlane provider from namespace {ns}, and delete every BootstrapKubeconfig and every free ByoHost?"
        )
    } else {
        format!("Uninstall the KamajiControlPlane provider from namespace {ns}?")
    };
    if !args.yes && !kclient::render::confirm(&what)? {
        return Err(Error::other("aborted: nothing was deleted"));
    }
    for o in &objects {
        let name = o["metadata"]["name"].as_str().unwrap_or_default();
        let Ok((ar, namespaced)) = resource(&conn, o).await else {
            continue;
        };
        let ns_opt = if namespaced {
            o["metadata"]["namespace"].as_str()
        } else {
            None
        };
        if kclient::api::delete_if_present(&conn, &ar, ns_opt, name, false).await? {
            render::line(&format!("{} deleted", display_name(o)));
        }
    }
    // What `--namespaces` installed: the Roles and RoleBindings in the watched namespaces.
    for (ar, role_ns) in namespaced_grants(&conn).await? {
        delete_grant(&conn, &ar, &role_ns).await?;
    }
    if args.purge {
        purge_host_pool(&conn, &apis).await?;
    }
    Ok(())
}

/// `--purge` tears down what clusters run on, so it waits until none is left.
async fn refuse_while_clusters_remain(conn: &Conn, apis: &ServerApis) -> Result<(), Error> {
    let Ok(ar) = apis.cluster() else {
        return Ok(());
    };
    let names = kclient::api::list_names(conn, &ar, None).await?;
    if names.is_empty() {
        return Ok(());
    }
    let shown: Vec<&str> = names.iter().take(5).map(String::as_str).collect();
    Err(Error::Other {
        message: format!(
            "{} Cluster(s) remain ({}{}); --purge tears down the provider and the host pool only when no cluster is left; nothing was deleted",
            names.len(),
            shown.join(", "),
            if names.len() > 5 { ", ..." } else { "" }
        ),
        hint: Some(
            "delete them first (kubectl capi delete NAME), or uninstall without --purge".into(),
        ),
    })
}

/// BCM's teardown, steps 3 and 5: the hosts' BootstrapKubeconfigs, then the ByoHosts. A host
/// that still serves a machine is left (BYOH's webhook refuses to delete it anyway) and named.
async fn purge_host_pool(conn: &Conn, apis: &ServerApis) -> Result<(), Error> {
    let infra = kcore::groups::INFRASTRUCTURE_GROUP;
    let lp = kube::api::ListParams::default();
    if let Some(ar) = apis.provider_kind(infra, "BootstrapKubeconfig") {
        for b in kclient::api::list_json(conn, &ar, None, &lp).await? {
            let (bns, name) = (kcore::json::namespace(&b), kcore::json::name(&b));
            kclient::api::delete(conn, &ar, bns, name).await?;
            render::line(&format!("bootstrapkubeconfig.{infra}/{name} deleted"));
        }
    }
    if let Some(ar) = apis.byo_host() {
        for h in kclient::api::list_json(conn, &ar, None, &lp).await? {
            let (hns, name) = (kcore::json::namespace(&h), kcore::json::name(&h));
            if let Some(m) = kcore::json::str_at(&h, &["status", "machineRef", "name"]) {
                render::warn(&format!(
                    "byohost.{infra}/{name} kept: it still serves ByoMachine {m}"
                ));
                continue;
            }
            kclient::api::delete(conn, &ar, hns, name).await?;
            render::line(&format!("byohost.{infra}/{name} deleted"));
        }
        render::info(
            "the BYOH controller itself came with its provider: clusterctl delete --infrastructure byoh removes it (stop the host agents first, or they register their hosts again)",
        );
    }
    Ok(())
}
