//! `create`'s preflights on the server: the DataStore, the ClusterClass (`--class`) and the
//! control-plane endpoint exist or are free, and the host pool has a host for every worker,
//! before anything is written.

use std::collections::BTreeMap;

use kclient::discovery::ServerApis;
use kclient::error::Error;
use kcore::fields::object_json;
use kcore::groups::KAMAJI_GROUP;
use kcore::kamaji::create::{self as kamaji, Built, CreateSpec};
use serde_json::Value;

use crate::common::{secrets, writes};

pub(super) async fn check_datastore(
    conn: &cli::Conn,
    apis: &ServerApis,
    name: &str,
) -> Result<(), Error> {
    let Some(k) = apis.kind(KAMAJI_GROUP, "DataStore") else {
        return Err(apis.not_installed(
            "Kamaji",
            KAMAJI_GROUP,
            "install Kamaji (helm install kamaji clastix/kamaji)",
        ));
    };
    let ar = k.resource(k.version());
    if let Some(ds) = kclient::api::get_opt(conn, &ar, None, name).await? {
        return check_datastore_secrets(conn, name, &object_json(&ds)).await;
    }
    let names = kclient::api::list_names(conn, &ar, None)
        .await
        .unwrap_or_default();
    let close = kcore::text::closest_names(name, names.iter().map(String::as_str));
    Err(Error::Other {
        message: format!("DataStore \"{name}\" not found"),
        hint: Some(if close.is_empty() {
            if names.is_empty() {
                "there is no DataStore; create one (see kubectl kamaji datastores) or omit --datastore to use Kamaji's default".into()
            } else {
                format!(
                    "existing DataStores: {} (kubectl kamaji datastores)",
                    names.join(", ")
                )
            }
        } else {
            format!("did you mean \"{}\"? (kubectl kamaji datastores)", close[0])
        }),
    })
}

/// Kamaji reaches a DataStore with the Secret keys its spec names (TLS certificates and keys,
/// basic auth); one that is missing leaves the new control plane unprovisioned for good, so it
/// is refused here, before anything is written.
async fn check_datastore_secrets(conn: &cli::Conn, name: &str, ds: &Value) -> Result<(), Error> {
    // A reference without a namespace is resolved by Kamaji in a namespace of its own choosing:
    // not checked here.
    let keys = kcore::kamaji::plan::datastore_secret_keys(ds);
    for k in keys.into_iter().filter(|k| !k.namespace.is_empty()) {
        let secret = secrets::secret_data(conn, &k.namespace, &k.name).await?;
        let missing = match &secret {
            None => Some(format!("Secret {}/{} does not exist", k.namespace, k.name)),
            Some((_, data)) if !data.contains_key(&k.key) => Some(format!(
                "Secret {}/{} has no key {}",
                k.namespace, k.name, k.key
            )),
            Some(_) => None,
        };
        if let Some(missing) = missing {
            return Err(Error::Other {
                message: format!(
                    "DataStore \"{name}\" cannot be used: {missing}, which Kamaji needs to reach it; nothing was created"
                ),
                hint: Some(format!(
                    "create the Secret (kubectl get datastore {name} -o yaml names what it needs), or pick another --datastore (kubectl kamaji datastores)"
                )),
            });
        }
    }
    Ok(())
}

/// `create --class`'s preflight: the ClusterClass exists in the namespace (one line otherwise,
/// naming the classes there); what `build_topology` needs of it.
pub(super) async fn cluster_class(
    conn: &cli::Conn,
    apis: &ServerApis,
    ns: &str,
    class: &str,
) -> Result<kamaji::ClassInfo, Error> {
    let ar = apis.capi_kind("ClusterClass")?;
    if let Some(c) = kclient::api::get_opt(conn, &ar, Some(ns), class).await? {
        return Ok(kamaji::ClassInfo::read(&object_json(&c)));
    }
    let names = kclient::api::list_names(conn, &ar, Some(ns))
        .await
        .unwrap_or_default();
    let close = kcore::text::closest_names(class, names.iter().map(String::as_str));
    Err(Error::Other {
        message: format!(
            "ClusterClass \"{class}\" not found in namespace {ns}; nothing was created"
        ),
        hint: Some(match (close.first(), names.is_empty()) {
            (Some(c), _) => format!("did you mean \"{c}\"?"),
            (None, true) => format!(
                "create one first: kubectl kamaji generate clusterclass {class} --infrastructure byoh --apply -n {ns}"
            ),
            (None, false) => format!("ClusterClasses in {ns}: {}", names.join(", ")),
        }),
    })
}

/// The control plane's pre-assigned address (`--service-address`, or `serviceAddress` from
/// `--from-file`), if it has one.
fn control_plane_address<'a>(spec: &'a CreateSpec, built: &'a Built) -> Option<&'a str> {
    // A topology Cluster carries the address in its class's variable.
    built
        .objects
        .iter()
        .find(|o| o["kind"] == "KamajiControlPlane")
        .and_then(|k| k.pointer("/spec/network/serviceAddress"))
        .and_then(Value::as_str)
        .or(spec.class.as_ref().and(spec.service_address.as_deref()))
}

/// BCM's preflight: the control plane's pre-assigned address (`--service-address`, or
/// `serviceAddress` from `--from-file`) and port must not be another cluster's endpoint.
pub(super) async fn check_endpoint_unused(
    conn: &cli::Conn,
    apis: &ServerApis,
    spec: &CreateSpec,
    built: &Built,
) -> Result<(), Error> {
    let Some(address) = control_plane_address(spec, built) else {
        return Ok(());
    };
    let lp = kube::api::ListParams::default();
    let list = |ar: Option<kube::discovery::ApiResource>| {
        let lp = lp.clone();
        async move {
            match ar {
                Some(ar) => kclient::api::list_json(conn, &ar, None, &lp).await,
                None => Ok(Vec::new()),
            }
        }
    };
    let (clusters, kcps, tcps) = tokio::try_join!(
        list(apis.cluster().ok()),
        list(apis.kamaji_control_plane()),
        list(apis.tenant_control_plane())
    )?;
    let port = spec.port.unwrap_or(kcore::kamaji::endpoint::DEFAULT_PORT);
    let users = kcore::kamaji::plan::endpoint_users(
        address,
        &spec.namespace,
        &spec.name,
        port,
        &clusters,
        &kcps,
        &tcps,
    );
    if users.is_empty() {
        return Ok(());
    }
    Err(Error::Other {
        message: format!(
            "the control-plane endpoint {address}:{port} is already used by {}; nothing was created",
            users.join(", ")
        ),
        hint: Some("pick a free address for --service-address, or another --port".into()),
    })
}

/// BYOH's pool of hosts for `create`: the workers' selector and the ByoHosts of every
/// namespace (BYOH picks from all of them).
pub(super) struct HostPool {
    selector: BTreeMap<String, String>,
    hosts: Vec<Value>,
}

impl HostPool {
    /// `None`: `spec`'s workers do not take hosts from a pool, or ByoHosts are not served.
    pub(super) async fn read(
        conn: &cli::Conn,
        apis: &ServerApis,
        spec: &CreateSpec,
    ) -> Result<Option<HostPool>, Error> {
        let Some(selector) = spec.infrastructure.and_then(|i| i.host_pool(spec)) else {
            return Ok(None);
        };
        let Some(ar) = apis.byo_host() else {
            return Ok(None);
        };
        let hosts =
            kclient::api::list_json(conn, &ar, None, &kube::api::ListParams::default()).await?;
        Ok(Some(HostPool { selector, hosts }))
    }

    /// `site=ams,rack=r1`; empty without a selector.
    fn selector_text(&self) -> String {
        let sel: Vec<String> = self
            .selector
            .iter()
            .map(|(k, v)| format!("{k}={v}"))
            .collect();
        sel.join(",")
    }
}

/// BYOH's preflight: a free host matching the workers' selector for every worker the cluster
/// does not have yet (a re-run counts the hosts already serving it), unless `--allow-pending`.
/// BYOH picks the first free matching host of any namespace and otherwise leaves the Machine
/// Pending without a word (vmware-tanzu/cluster-api-provider-bringyourownhost v0.5.0,
/// `byomachine_controller.go`), so a short pool is refused here, before anything is written.
/// Workers on hosts with Kubernetes pre-installed (a ByoMachineTemplate without an installer)
/// count only the hosts that carry the workers' minor (`kcore::plan::hosts::version`).
pub(super) fn check_host_pool(
    spec: &CreateSpec,
    built: &Built,
    pool: &HostPool,
) -> Result<(), Error> {
    let wanted = usize::try_from(spec.workers.unwrap_or(1)).unwrap_or(0);
    if wanted == 0 {
        return Ok(());
    }
    let version = workers_version_on_own_kubernetes(built);
    let check = kcore::plan::hosts::PoolCheck::of(
        &pool.hosts,
        &spec.namespace,
        &spec.name,
        &pool.selector,
        version.as_ref(),
        wanted,
    );
    if check.missing() == 0 {
        return Ok(());
    }
    let sel = pool.selector_text();
    let (matching, list) = if sel.is_empty() {
        (String::new(), String::new())
    } else {
        (format!(" matching {sel}"), format!(" -l {sel}"))
    };
    let serving = match check.serving {
        0 => String::new(),
        n => format!(" ({n} already serve it)"),
    };
    let (carrying, misfits) = match (&version, check.misfits.as_str()) {
        (Some(v), m) if !m.is_empty() => (
            kcore::plan::hosts::version::carrying(v),
            format!(" (another Kubernetes on {m})"),
        ),
        _ => (String::new(), String::new()),
    };
    Err(Error::Other {
        message: format!(
            "{wanted} worker(s) need hosts but only {} free ByoHost(s){matching}{carrying} are left{serving}{misfits}: {} machine(s) would wait in Pending; nothing was created",
            check.free,
            check.missing()
        ),
        hint: Some(format!(
            "register more hosts (kubectl capi hosts add), see the free ones (kubectl capi hosts --available{list}), or pass --allow-pending to create it anyway"
        )),
    })
}

/// The workers' Kubernetes when they run on the hosts' own (their ByoMachineTemplate names no
/// installer: `--preinstalled-hosts`), which the hosts must then carry.
fn workers_version_on_own_kubernetes(built: &Built) -> Option<kcore::version::KubeVersion> {
    let own = built.objects.iter().any(|o| {
        o["kind"] == "ByoMachineTemplate" && kcore::plan::hosts::version::uses_host_kubernetes(o)
    });
    let md = built
        .objects
        .iter()
        .find(|o| o["kind"] == "MachineDeployment")?;
    let v = md.pointer("/spec/template/spec/version")?.as_str()?;
    own.then(|| kcore::version::KubeVersion::parse_v(v).ok())
        .flatten()
}

/// BCM's preflight: the control plane's pre-assigned address must be an unused address of the
/// nodes' internal network, so on BYOH it must lie in a network that one of the hosts its
/// workers would use reports (`status.network`), unless `--allow-foreign-address` (a load
/// balancer that lives elsewhere). Hosts that report no network judge nothing.
pub(super) fn check_address_in_host_networks(
    spec: &CreateSpec,
    built: &Built,
    pool: &HostPool,
) -> Result<(), Error> {
    let Some(address) = control_plane_address(spec, built) else {
        return Ok(());
    };
    let selector = pool.selector_text();
    let hosts = kcore::plan::hosts::pool_hosts(&pool.hosts, &spec.namespace, &spec.name, |h| {
        pool.selector
            .iter()
            .all(|(k, v)| kcore::json::label(h, k) == Some(v.as_str()))
    });
    let n = hosts.len();
    let kcore::plan::hosts::AddressFit::Outside(networks) =
        kcore::plan::hosts::address_fit(address, hosts)
    else {
        return Ok(());
    };
    let matching = if selector.is_empty() {
        String::new()
    } else {
        format!(" matching {selector}")
    };
    Err(Error::Other {
        message: format!(
            "the control-plane address {address} is in no network of the {n} BYOH host(s){matching} its workers would use ({}); nothing was created",
            kcore::plan::hosts::named_networks(&networks)
        ),
        hint: Some(
            "pick an unused address in one of those networks for --service-address, or pass --allow-foreign-address if a load balancer outside them serves it".into(),
        ),
    })
}

/// Kamaji's own answer about the TenantControlPlane the reconciler would create: a server dry
/// run of it, which its admission webhooks judge (Kamaji v1.0.0's
/// `internal/webhook/handlers/tcp_version.go` refuses a Kubernetes version above the one it
/// was built with; other handlers check the DataStore). A refusal stops `create` before
/// anything is written: the KamajiControlPlane would otherwise sit unprovisioned for good, and
/// Kamaji has no rollback. A re-run (the TenantControlPlane exists) and a Kamaji whose webhook
/// does not answer are not refused; the latter is said.
pub(super) async fn check_kamaji_accepts(
    conn: &cli::Conn,
    apis: &ServerApis,
    spec: &CreateSpec,
    built: &Built,
) -> Result<(), Error> {
    let Some(ar) = apis.tenant_control_plane() else {
        return Ok(());
    };
    let of_kind = |kind: &str| built.objects.iter().find(|o| o["kind"] == kind);
    let (Some(kcp), Some(cluster)) = (of_kind("KamajiControlPlane"), of_kind("Cluster")) else {
        return Ok(());
    };
    let mut tcp = kcore::kamaji::tcp::tcp_for(kcp, cluster)
        .map_err(|e| Error::usage(format!("cluster {}: {e}", spec.name)))?;
    tcp["apiVersion"] = Value::String(ar.api_version.clone());
    match writes::create_dry_run(conn, &ar, &tcp).await {
        Ok(()) | Err(Error::AlreadyExists { .. }) => Ok(()),
        Err(Error::Denied {
            source_name,
            message,
        }) => Err(Error::Other {
            message: format!(
                "Kamaji refuses the control plane of {}: {source_name} denied it: \"{message}\"; nothing was created",
                spec.name
            ),
            hint: Some(
                "pick a --kubernetes-version the installed Kamaji supports (the message names its highest), or upgrade Kamaji"
                    .into(),
            ),
        }),
        Err(e @ (Error::Api { .. } | Error::Unreachable { .. } | Error::Timeout { .. })) => {
            kclient::render::info(&format!(
                "note: could not ask Kamaji whether it accepts the control plane of {} ({e}); creating anyway",
                spec.name
            ));
            Ok(())
        }
        Err(e) => Err(e),
    }
}
