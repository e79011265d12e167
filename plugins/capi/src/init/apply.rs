//! `init`'s writes and waits: each component's objects server-side applied in order (CRDs
//! waited to be Established before the objects that need them), and its controllers'
//! Deployments waited to be Available where a later component needs them (cert-manager's
//! webhook) or `--wait-providers` asks.

use std::collections::HashMap;
use std::time::Duration;

use cli::Conn;
use kclient::error::{Error, Op};
use kclient::render::{self, Poll};
use kube::api::{Api, ApiResource, Patch, PatchParams};
use kube::core::GroupVersionKind;
use kube::discovery::Scope;
use serde_json::Value;

use crate::common::writes::FIELD_MANAGER;

/// What applying one component changed.
#[derive(Clone, Copy, Debug, Default)]
pub struct Applied {
    pub objects: usize,
    /// Created, or changed by the apply (what our field manager owns or set moved).
    pub changed: usize,
    /// Left out: an optional API the cluster does not serve ([`OPTIONAL_GROUP`]).
    pub skipped: usize,
}

/// The API of objects a release asset may hold for an optional integration: Kamaji's
/// `install.yaml` has a ServiceMonitor for the Prometheus operator, which many clusters lack,
/// and our reconciler's component its PodMonitor, alerts and dashboard.
use kcore::install::monitoring::MONITORING_GROUP as OPTIONAL_GROUP;

fn optional(o: &Value) -> bool {
    o["apiVersion"]
        .as_str()
        .is_some_and(|av| av.starts_with(&format!("{OPTIONAL_GROUP}/")))
}

/// Kinds resolved once per run (a component holds dozens of objects of a few kinds), and the
/// [`Written`] mark of the objects already there, one metadata LIST per kind and namespace
/// (instead of a GET per object), so that an apply that changed nothing is told apart.
#[derive(Default)]
pub struct Resolver {
    known: HashMap<(String, String), (ApiResource, bool)>,
    versions: HashMap<(String, String, Option<String>), HashMap<String, Written>>,
}

/// What tells whether an apply changed an object. Not its resourceVersion: the controllers
/// write their objects' status between the LIST and the apply. The `generation` where the
/// kind keeps one (it moves with the spec only); else our field manager's `managedFields`
/// entry (its fields and time), which an apply that changes nothing leaves as it was. Not
/// the entry alone: on an object another applier shares (cert-manager's CA injector applies
/// the `caBundle` of webhook configurations) the API server moves our entry's time on every
/// apply, changed or not.
#[derive(Clone, Debug, PartialEq, Eq)]
enum Written {
    Generation(i64),
    Entry(String),
}

impl Written {
    fn of(meta: &kube::api::ObjectMeta) -> Written {
        match meta.generation {
            Some(g) if g > 0 => Written::Generation(g),
            _ => Written::Entry(
                meta.managed_fields
                    .iter()
                    .flatten()
                    .find(|m| {
                        m.manager.as_deref() == Some(FIELD_MANAGER)
                            && m.operation.as_deref() == Some("Apply")
                    })
                    .map(|m| serde_json::to_string(m).unwrap_or_default())
                    .unwrap_or_default(),
            ),
        }
    }
}

impl Resolver {
    /// The resource and whether it is namespaced, by discovery of the object's kind.
    pub async fn resolve(&mut self, conn: &Conn, o: &Value) -> Result<(ApiResource, bool), Error> {
        let av = o["apiVersion"].as_str().unwrap_or_default().to_string();
        let kind = o["kind"].as_str().unwrap_or_default().to_string();
        if let Some(r) = self.known.get(&(av.clone(), kind.clone())) {
            return Ok(r.clone());
        }
        let (group, version) = kcore::groups::split_api_version(&av);
        let gvk = GroupVersionKind::gvk(group, version, &kind);
        let (ar, caps) = kube::discovery::pinned_kind(&conn.client, &gvk)
            .await
            .map_err(|e| conn.error(e, &Op::discovery()))?;
        let r = (ar, caps.scope == Scope::Namespaced);
        self.known.insert((av, kind), r.clone());
        Ok(r)
    }

    /// The [`Written`] mark of object `name` of `ar` in `ns` before this run wrote it, if the
    /// object exists (a namespace that does not exist yet lists nothing).
    async fn version_before(
        &mut self,
        conn: &Conn,
        ar: &ApiResource,
        ns: Option<&str>,
        name: &str,
    ) -> Result<Option<Written>, Error> {
        let key = (
            ar.api_version.clone(),
            ar.kind.clone(),
            ns.map(str::to_string),
        );
        if !self.versions.contains_key(&key) {
            let api = kclient::api::dynamic(conn, ar, ns);
            let list = api
                .list_metadata(&Default::default())
                .await
                .map_err(|e| conn.error(e, &Op::on("list", ar).in_namespace(ns)))?;
            let names = list
                .items
                .into_iter()
                .filter_map(|m| {
                    let mark = Written::of(&m.metadata);
                    Some((m.metadata.name?, mark))
                })
                .collect();
            self.versions.insert(key.clone(), names);
        }
        Ok(self.versions.get(&key).and_then(|m| m.get(name)).cloned())
    }
}

/// Server-side applies `objects` in order (`server_dry`: validated, not stored). The CRDs
/// among them are waited to be Established before the first object after them.
pub async fn apply_objects(
    conn: &Conn,
    resolver: &mut Resolver,
    objects: &[Value],
    server_dry: bool,
    timeout: Duration,
) -> Result<Applied, Error> {
    let mut pp = PatchParams::apply(FIELD_MANAGER).force();
    pp.dry_run = server_dry;
    let mut out = Applied::default();
    let mut pending_crds: Vec<String> = Vec::new();
    for o in objects {
        let is_crd = o["kind"] == "CustomResourceDefinition";
        if !is_crd && !pending_crds.is_empty() && !server_dry {
            wait_established(conn, &pending_crds, timeout).await?;
            pending_crds.clear();
        }
        let name = o["metadata"]["name"].as_str().unwrap_or_default();
        let (ar, namespaced) = match resolver.resolve(conn, o).await {
            Ok(r) => r,
            Err(_) if optional(o) => {
                out.skipped += 1;
                render::info(&format!(
                    "{} {name} skipped: the Prometheus operator's API ({OPTIONAL_GROUP}) is not served; install it and run init again to add it",
                    o["kind"].as_str().unwrap_or_default()
                ));
                continue;
            }
            Err(e) => return Err(e),
        };
        let ns = if namespaced {
            o["metadata"]["namespace"].as_str()
        } else {
            None
        };
        let api = kclient::api::dynamic(conn, &ar, ns);
        let op = |verb| Op::on(verb, &ar).in_namespace(ns).named(name);
        let before = resolver.version_before(conn, &ar, ns, name).await?;
        let after = api
            .patch(name, &pp, &Patch::Apply(o))
            .await
            .map_err(|e| conn.error(e, &op("patch")))?;
        out.objects += 1;
        if before.is_none_or(|b| b != Written::of(&after.metadata)) {
            tracing::debug!("{} {name}: changed", ar.kind);
            out.changed += 1;
        }
        // A CRD that was there already answers Established at once; only new ones are waited for.
        if is_crd && !established(&after.data) {
            pending_crds.push(name.to_string());
        }
    }
    if !pending_crds.is_empty() && !server_dry {
        wait_established(conn, &pending_crds, timeout).await?;
    }
    Ok(out)
}

/// Whether a CRD (as JSON) has its Established condition true.
fn established(crd: &Value) -> bool {
    crd.pointer("/status/conditions")
        .and_then(Value::as_array)
        .is_some_and(|cs| {
            cs.iter()
                .any(|c| c["type"] == "Established" && c["status"] == "True")
        })
}

/// Until every CRD of `names` is Established (its API is served). Each poll reads only those
/// not yet seen established (CRDs are large).
async fn wait_established(conn: &Conn, names: &[String], timeout: Duration) -> Result<(), Error> {
    let waiting = std::sync::Mutex::new(names.to_vec());
    render::wait_until(
        &format!("waiting for {} CRDs to be established", names.len()),
        timeout,
        Duration::from_millis(100),
        || {
            let waiting = &waiting;
            async move {
                let now: Vec<String> = waiting.lock().map(|w| w.clone()).unwrap_or_default();
                let mut left = Vec::new();
                for n in now {
                    let crd = kclient::api::crd(conn, &n).await?;
                    let json = serde_json::to_value(crd).unwrap_or_default();
                    if !established(&json) {
                        left.push(n);
                    }
                }
                let first = left.first().cloned();
                if let Ok(mut w) = waiting.lock() {
                    *w = left;
                }
                Ok(match first {
                    Some(n) => Poll::Pending(format!("CRD {n} is not established yet")),
                    None => Poll::Ready(()),
                })
            }
        },
    )
    .await
}

/// Until every Deployment of `objects` is Available (rolled out, as kubectl rollout status
/// says). A Deployment past its progress deadline fails at once with the command that shows why.
pub async fn wait_available(
    conn: &Conn,
    component: &str,
    objects: &[Value],
    timeout: Duration,
) -> Result<(), Error> {
    use k8s_openapi::api::apps::v1::Deployment;
    use kcore::install::rollout::{DeploymentRollout, deployment_rollout};
    let deployments: Vec<(String, String)> = objects
        .iter()
        .filter(|o| o["kind"] == "Deployment")
        .map(|o| {
            (
                o["metadata"]["namespace"]
                    .as_str()
                    .unwrap_or("default")
                    .to_string(),
                o["metadata"]["name"]
                    .as_str()
                    .unwrap_or_default()
                    .to_string(),
            )
        })
        .collect();
    if deployments.is_empty() {
        return Ok(());
    }
    render::wait_until(
        &format!("waiting for {component}'s controllers to be available"),
        timeout,
        Duration::from_millis(500),
        || {
            let deployments = &deployments;
            async move {
                for (ns, name) in deployments {
                    let api: Api<Deployment> = Api::namespaced(conn.client.clone(), ns);
                    let op = Op::new("get", "apps", "deployments", "Deployment")
                        .in_namespace(Some(ns))
                        .named(name);
                    let d = api.get(name).await.map_err(|e| conn.error(e, &op))?;
                    let d = serde_json::to_value(d).map_err(|e| Error::other(e.to_string()))?;
                    match deployment_rollout(&d) {
                        DeploymentRollout::Done => {}
                        DeploymentRollout::Waiting(w) => {
                            return Ok(Poll::Pending(format!("{ns}/{name}: {w}")));
                        }
                        DeploymentRollout::Stalled(why) => {
                            return Err(Error::Other {
                                message: format!("{component}: {why}"),
                                hint: Some(format!("kubectl -n {ns} describe deployment/{name}")),
                            });
                        }
                    }
                }
                Ok(Poll::Ready(()))
            }
        },
    )
    .await
}
