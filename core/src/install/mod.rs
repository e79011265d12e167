//! What `kubectl kamaji install` applies: the CRDs (the KamajiControlPlane API's, `kamaji::crd`,
//! and our own `ops` API's), RBAC and a hardened Deployment; and, in [`provider`], the same
//! objects as clusterctl's release assets. It sits above both `kamaji` and `ops`, whose CRDs it
//! puts together.

pub mod monitoring;
pub mod provider;
pub mod rollout;

use serde_json::{Value, json};

use crate::groups::{CAPI_GROUP, CONTROLPLANE_GROUP, INFRASTRUCTURE_GROUP, KAMAJI_GROUP};
use crate::kamaji::endpoint::EndpointPatch;
use crate::kamaji::infra::TABLE;
use crate::labels::{OWNER_LABEL, RECONCILER as NAME, provider_labels as labels};

/// The image of this very version (the crates share the workspace version), never `:latest`:
/// an install is reproducible and `kubectl kamaji install` of a newer plugin upgrades it.
pub const DEFAULT_IMAGE: &str = concat!(
    "ghcr.io/capi-kamaji/kamaji-reconciler:v",
    env!("CARGO_PKG_VERSION")
);
/// The default namespace. Not `kamaji-system`: that is where Kamaji itself and CACPPK
/// (`config/default/kustomization.yaml`, CACPPK v0.20.0) live, and two providers of the same
/// kind in one namespace would share names and a Lease.
pub const DEFAULT_NAMESPACE: &str = "kamaji-reconciler-system";
/// CAPI's kubeadm bootstrap controller, which reads KamajiControlPlanes (CAPI v1.14).
pub(crate) const KUBEADM_BOOTSTRAP_SA: (&str, &str) = (
    "capi-kubeadm-bootstrap-system",
    "capi-kubeadm-bootstrap-manager",
);

fn plural(kind: &str) -> String {
    format!("{}s", kind.to_lowercase())
}

fn capi_aggregated_labels() -> Value {
    let mut l = labels();
    l["cluster.x-k8s.io/aggregate-to-manager"] = json!("true");
    l
}

/// The user name of CAPI's kubeadm bootstrap controller's service account.
pub(crate) fn kubeadm_bootstrap_user() -> String {
    format!(
        "system:serviceaccount:{}:{}",
        KUBEADM_BOOTSTRAP_SA.0, KUBEADM_BOOTSTRAP_SA.1
    )
}

/// Where a rule of the reconciler's role is granted when `kubectl kamaji install --namespaces`
/// names the namespaces it watches: cluster-wide still, or only in those namespaces.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Reach {
    /// Cluster-scoped objects, or objects it reads in namespaces it does not watch.
    Cluster,
    /// What lives in the namespaces it watches.
    Watched,
}

/// The reconciler's rules, each with its [`Reach`]. Exactly what the controllers call:
/// `plugins/reconciler/tests/apiserver/rbac.rs` runs the reconciler as its service account under
/// these rules (cluster-wide, and as `--namespaces` installs them) through a KamajiControlPlane's
/// create, ready, upgrade and delete on a ByoCluster, a ClusterUpgrade of a KubeadmControlPlane
/// cluster on BYOH whose machine templates name its version, a FleetUpgrade, a ClusterClass
/// cluster's upgrade, a missing Cluster's repeated warning, the certificate scan and the
/// findings scan, and fails on any refusal. A rule left out fails it. Kept without a test of
/// their own kind: the machine templates and infrastructure clusters of providers other than
/// BYOH (the testbed serves only BYOH's; each follows the same code path, from the provider
/// table).
fn rules() -> Vec<(Reach, Value)> {
    use Reach::{Cluster, Watched};
    let infra: Vec<String> = TABLE.iter().map(|(k, _)| plural(k)).collect();
    // Machine templates of the same providers: a ClusterUpgrade step clones one whose spec
    // names the version it leaves (an image `...-v1.33.1`; templates are immutable) with a
    // server-side apply, which creates the clone (hence create) or, re-run, patches it.
    let machine_templates: Vec<String> = TABLE
        .iter()
        .filter_map(|(k, _)| k.strip_suffix("Cluster"))
        .map(|p| plural(&format!("{p}MachineTemplate")))
        .collect();
    let infra_status: Vec<String> = TABLE
        .iter()
        .filter(|(_, a)| *a == EndpointPatch::EndpointAndReady)
        .map(|(k, _)| format!("{}/status", plural(k)))
        .collect();
    vec![
        // The KamajiControlPlane controller lists, watches and patches (finalizers, endpoint,
        // status); a ClusterUpgrade reads a cluster's control plane by name (get).
        (
            Watched,
            json!({"apiGroups": [CONTROLPLANE_GROUP], "resources": ["kamajicontrolplanes"], "verbs": ["get", "list", "watch", "patch"]}),
        ),
        (
            Watched,
            json!({"apiGroups": [CONTROLPLANE_GROUP], "resources": ["kamajicontrolplanes/status"], "verbs": ["patch"]}),
        ),
        // The TenantControlPlane and both CAPI Secrets carry an ownerReference to the
        // KamajiControlPlane with blockOwnerDeletion, which the OwnerReferencesPermissionEnforcement
        // admission plugin allows only to who may update its finalizers.
        (
            Watched,
            json!({"apiGroups": [CONTROLPLANE_GROUP], "resources": ["kamajicontrolplanes/finalizers"], "verbs": ["update"]}),
        ),
        // The TenantControlPlane is server-side applied, and an apply that creates is authorized
        // as `create` (`createAuthorizerAttributes` in apiserver's endpoints/handlers/patch.go,
        // Kubernetes v1.36.3): without create, no TenantControlPlane is ever made.
        (
            Watched,
            json!({"apiGroups": [KAMAJI_GROUP], "resources": ["tenantcontrolplanes"], "verbs": ["get", "list", "watch", "create", "patch"]}),
        ),
        // Patched: its spec.controlPlaneEndpoint put back when Cluster API copied BYOH's default
        // port into it, and a ClusterClass cluster's spec.topology.version by an upgrade step.
        (
            Watched,
            json!({"apiGroups": [CAPI_GROUP], "resources": ["clusters"], "verbs": ["get", "list", "watch", "patch"]}),
        ),
        // The ClusterUpgrade controller: its own objects, and what a step reads and patches (a
        // control plane's or MachineDeployment's version). A FleetUpgrade creates its
        // clusters' ClusterUpgrades (renewing a finished one).
        (
            Watched,
            json!({"apiGroups": ["ops.capi-kamaji.io"], "resources": ["clusterupgrades"], "verbs": ["get", "list", "watch", "create", "patch"]}),
        ),
        (
            Watched,
            json!({"apiGroups": ["ops.capi-kamaji.io"], "resources": ["clusterupgrades/status"], "verbs": ["patch"]}),
        ),
        (
            Watched,
            json!({"apiGroups": ["ops.capi-kamaji.io"], "resources": ["fleetupgrades"], "verbs": ["get", "list", "watch"]}),
        ),
        (
            Watched,
            json!({"apiGroups": ["ops.capi-kamaji.io"], "resources": ["fleetupgrades/status"], "verbs": ["patch"]}),
        ),
        // The TenantBackup controller: its own objects; a run reads the tenant's objects (above),
        // the Secret of an S3 target's credentials (secrets, below) and the tenant's DataStore
        // with the Secrets its tlsConfig names (in Kamaji's namespace: a namespaced install
        // grants them there too, or the run fails saying so).
        (
            Watched,
            json!({"apiGroups": ["ops.capi-kamaji.io"], "resources": ["tenantbackups"], "verbs": ["get", "list", "watch"]}),
        ),
        (
            Watched,
            json!({"apiGroups": ["ops.capi-kamaji.io"], "resources": ["tenantbackups/status"], "verbs": ["patch"]}),
        ),
        (
            Cluster,
            json!({"apiGroups": [KAMAJI_GROUP], "resources": ["datastores"], "verbs": ["get"]}),
        ),
        (
            Watched,
            json!({"apiGroups": [CAPI_GROUP], "resources": ["machinedeployments"], "verbs": ["list", "watch", "patch"]}),
        ),
        (
            Watched,
            json!({"apiGroups": [CAPI_GROUP], "resources": ["machines"], "verbs": ["list"]}),
        ),
        // A KubeadmControlPlane cluster's upgrade reads its control plane (get) and patches its
        // spec.version; its rollout is watched.
        (
            Watched,
            json!({"apiGroups": [CONTROLPLANE_GROUP], "resources": ["kubeadmcontrolplanes"], "verbs": ["get", "list", "watch", "patch"]}),
        ),
        (
            Watched,
            json!({"apiGroups": [INFRASTRUCTURE_GROUP], "resources": machine_templates, "verbs": ["get", "create", "patch"]}),
        ),
        // An upgrade's preflight counts the free BYOH hosts, in every namespace: BYOH takes a
        // host for a machine from any namespace (`attachByoHost` lists ByoHosts with no
        // namespace, controllers/infrastructure/byomachine_controller.go, BYOH v0.5.0).
        (
            Cluster,
            json!({"apiGroups": [INFRASTRUCTURE_GROUP], "resources": ["byohosts"], "verbs": ["list"]}),
        ),
        // The findings scan (plugins/reconciler/src/findings.rs) lists what `kubectl capi
        // doctor` reads (the kinds above, and BYOH's machines and templates).
        (
            Watched,
            json!({"apiGroups": [INFRASTRUCTURE_GROUP], "resources": ["byomachines", "byomachinetemplates", "k8sinstallerconfigtemplates"], "verbs": ["list"]}),
        ),
        // Secrets: Kamaji's admin kubeconfig and CA read (get) and copied into
        // `<cluster>-kubeconfig` and `<cluster>-ca` by server-side apply, which creates them
        // (create: nobody else makes them, Cluster API leaves a control plane's kubeconfig to
        // its provider, `reconcileKubeconfig` in internal/controllers/cluster, CAPI v1.14) and
        // keeps them current (patch); watched as metadata to tell when a copy is stale, and
        // listed by the certificate scan (Kamaji's by label) and the findings scan (CAPI's by
        // label). RBAC cannot scope list, watch or create by label or by a name not known in
        // advance: `--namespaces` is how a site keeps this out of other namespaces, and the
        // admission policy of [`secrets_policy`] refuses a write of any other Secret.
        (
            Watched,
            json!({"apiGroups": [""], "resources": ["secrets"], "verbs": ["get", "list", "watch", "create", "patch"]}),
        ),
        // The infrastructure cluster's endpoint: read, watched, patched (and its status where
        // the provider leaves readiness to the control plane's).
        (
            Watched,
            json!({"apiGroups": [INFRASTRUCTURE_GROUP], "resources": infra, "verbs": ["get", "list", "watch", "patch"]}),
        ),
        (
            Watched,
            json!({"apiGroups": [INFRASTRUCTURE_GROUP], "resources": infra_status, "verbs": ["patch"]}),
        ),
        // Events: kube-runtime 5.0.0's Recorder creates an event and patches its series when the
        // same one repeats.
        (
            Watched,
            json!({"apiGroups": ["events.k8s.io"], "resources": ["events"], "verbs": ["create", "patch"]}),
        ),
        // Cluster-scoped: the TenantControlPlane CRD's schema, read at start-up.
        (
            Cluster,
            json!({"apiGroups": ["apiextensions.k8s.io"], "resources": ["customresourcedefinitions"], "resourceNames": ["tenantcontrolplanes.kamaji.clastix.io"], "verbs": ["get"]}),
        ),
        // The findings scan's check that two providers run: the two providers' Leases by name,
        // in every namespace, since they live in the providers' namespaces, not the clusters'
        // (RBAC authorizes a LIST with the field selector metadata.name=X as a request for X:
        // `requestinfo.go` of k8s.io/apiserver, Kubernetes v1.36.3). No other Lease is readable.
        (
            Cluster,
            json!({"apiGroups": ["coordination.k8s.io"], "resources": ["leases"], "resourceNames": [crate::labels::RECONCILER_LEASE, crate::labels::CACPPK_LEASE], "verbs": ["list"]}),
        ),
    ]
}

/// The least-privilege ClusterRole of the reconciler, watching every namespace ([`rules`]).
pub fn cluster_role() -> Value {
    role_of(Reach::Cluster, None, &[])
}

/// A role with the rules that reach `reach` or less: every rule for a ClusterRole bound
/// cluster-wide (`watched` empty); with `watched` namespaces, a ClusterRole of the
/// [`Reach::Cluster`] rules and, in each watched namespace (`in_ns`), a Role of the
/// [`Reach::Watched`] ones.
fn role_of(reach: Reach, in_ns: Option<&str>, watched: &[String]) -> Value {
    let rules: Vec<Value> = rules()
        .into_iter()
        .filter(|(r, _)| watched.is_empty() || *r == reach)
        .map(|(_, rule)| rule)
        .collect();
    let mut meta = json!({"name": NAME, "labels": labels()});
    let kind = match in_ns {
        Some(ns) => {
            meta["namespace"] = json!(ns);
            "Role"
        }
        None => "ClusterRole",
    };
    json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": kind, "metadata": meta, "rules": rules})
}

/// The most namespaces `--namespaces` takes: each adds a dozen watches to the reconciler (its
/// KamajiControlPlanes, TenantControlPlanes, Secrets, Clusters, infrastructure clusters,
/// ClusterUpgrades and what they follow) and a Role and RoleBinding; past a few dozen the
/// cluster-wide install serves better.
pub(crate) const MAX_WATCHED_NAMESPACES: usize = 32;

/// A list of namespaces to watch (`--namespaces ns1,ns2`): at most [`MAX_WATCHED_NAMESPACES`]
/// DNS-1123 labels, none twice. The error is one line saying what is wrong and what to do; it
/// does not name the flag, which the caller's message does.
pub fn parse_namespaces(list: &str) -> Result<Vec<String>, String> {
    let names: Vec<String> = list.split(',').map(|n| n.trim().to_string()).collect();
    if names.len() > MAX_WATCHED_NAMESPACES {
        return Err(format!(
            "{} namespaces named, at most {MAX_WATCHED_NAMESPACES} are allowed (leave the list out to watch every namespace)",
            names.len()
        ));
    }
    for (i, n) in names.iter().enumerate() {
        if n.is_empty() {
            return Err(
                "an empty namespace name: separate namespaces by single commas, e.g. team-a,team-b"
                    .into(),
            );
        }
        if !crate::names::is_namespace_name(n) {
            let shown: String = n.chars().take(80).collect();
            return Err(format!(
                "{shown:?} is not a namespace name: at most 63 lower-case letters, digits and '-', starting and ending with a letter or digit"
            ));
        }
        if names[..i].contains(n) {
            return Err(format!("namespace {n:?} is named twice: name each once"));
        }
    }
    Ok(names)
}

/// Every object `kubectl kamaji install` applies, in apply order: the reconciler watching every
/// namespace.
pub fn install_manifests(image: &str, namespace: &str, replicas: u8) -> Vec<Value> {
    install_manifests_watching(image, namespace, replicas, &[])
}

/// [`install_manifests`] for a reconciler that watches only the namespaces `watched`
/// (`kubectl kamaji install --namespaces`; all when empty): what it touches there is granted by
/// a Role and RoleBinding in each, the ClusterRole keeps only what is cluster-scoped or read
/// elsewhere, and the Deployment passes `--namespaces`.
pub fn install_manifests_watching(
    image: &str,
    namespace: &str,
    replicas: u8,
    watched: &[String],
) -> Vec<Value> {
    let mut out: Vec<Value> = crate::kamaji::crd::crds()
        .into_iter()
        .chain(crate::ops::crds())
        .map(|c| {
            let mut v = serde_json::to_value(&c).unwrap_or(Value::Null);
            v["apiVersion"] = json!("apiextensions.k8s.io/v1");
            v["kind"] = json!("CustomResourceDefinition");
            v
        })
        .collect();
    let sa_ref = json!({"kind": "ServiceAccount", "name": NAME, "namespace": namespace});
    out.push(json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": namespace, "labels": labels()}}));
    out.push(json!({"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": NAME, "namespace": namespace, "labels": labels()}}));
    out.push(role_of(Reach::Cluster, None, watched));
    out.push(json!({
        "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding",
        "metadata": {"name": NAME, "labels": labels()},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": NAME},
        "subjects": [sa_ref.clone()]
    }));
    for ns in watched {
        out.push(role_of(Reach::Watched, Some(ns), watched));
        out.push(json!({
            "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding",
            "metadata": {"name": NAME, "namespace": ns, "labels": labels()},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": NAME},
            "subjects": [sa_ref.clone()]
        }));
    }
    // Leader election, in the reconciler's own namespace only.
    out.push(json!({
        "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role",
        "metadata": {"name": format!("{NAME}-leader-election"), "namespace": namespace, "labels": labels()},
        "rules": [{"apiGroups": ["coordination.k8s.io"], "resources": ["leases"], "verbs": ["get", "create", "update"]}]
    }));
    out.push(json!({
        "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding",
        "metadata": {"name": format!("{NAME}-leader-election"), "namespace": namespace, "labels": labels()},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": format!("{NAME}-leader-election")},
        "subjects": [sa_ref]
    }));
    // CAPI core aggregates roles with this label into its manager role; the kubeadm bootstrap
    // controller of CAPI v1.14 reads KamajiControlPlanes too and gets an explicit binding.
    out.push(json!({
        "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
        "metadata": {"name": format!("{NAME}-capi"), "labels": capi_aggregated_labels()},
        "rules": [
            {"apiGroups": [CONTROLPLANE_GROUP], "resources": ["kamajicontrolplanes", "kamajicontrolplanetemplates"], "verbs": ["get", "list", "watch", "patch", "update"]},
            {"apiGroups": [CONTROLPLANE_GROUP], "resources": ["kamajicontrolplanes/status"], "verbs": ["get", "patch", "update"]}
        ]
    }));
    out.push(json!({
        "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
        "metadata": {"name": format!("{NAME}-kubeadm-bootstrap-reader"), "labels": labels()},
        "rules": [{"apiGroups": [CONTROLPLANE_GROUP], "resources": ["kamajicontrolplanes"], "verbs": ["get", "list", "watch"]}]
    }));
    out.push(json!({
        "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding",
        "metadata": {"name": format!("{NAME}-kubeadm-bootstrap-reader"), "labels": labels()},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": format!("{NAME}-kubeadm-bootstrap-reader")},
        // The service account as its user name, not a ServiceAccount subject: clusterctl moves
        // every namespaced subject of a binding into the provider's target namespace
        // (`fixTargetNamespace`, `cmd/clusterctl/client/repository/components.go`, CAPI
        // v1.14.2), which would bind a ServiceAccount of ours instead of CAPI's.
        "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": kubeadm_bootstrap_user()}]
    }));
    // Before the Deployment: the reconciler never runs without it; uninstall, which deletes in
    // reverse, removes it after the reconciler.
    out.extend(secrets_policy());
    let mut dep = deployment(image, namespace, replicas);
    if !watched.is_empty()
        && let Some(args) = dep["spec"]["template"]["spec"]["containers"][0]["args"].as_array_mut()
    {
        args.push(json!(format!("--namespaces={}", watched.join(","))));
    }
    out.push(dep);
    out
}

/// The name of the admission policy on the reconciler's Secret writes, and of its binding.
fn secrets_policy_name() -> String {
    format!("{NAME}-secrets")
}

/// The group of the KamajiControlPlane, as an ownerReference's `apiVersion` starts.
const KCP_OWNER_API: &str = "controlplane.cluster.x-k8s.io/";

/// A ValidatingAdmissionPolicy and its binding that narrow what the reconciler may write among
/// Secrets to what it writes: the copies `<cluster>-kubeconfig` and `<cluster>-ca`
/// (`plugins/reconciler/src/controller/secrets.rs`), of CAPI's Secret type, labelled
/// `cluster.x-k8s.io/cluster-name: <cluster>` and controlled by their KamajiControlPlane. RBAC
/// cannot: a server-side apply that makes a copy is authorized as `create`, and create cannot
/// be scoped by name. A patch is an UPDATE at admission, judged on the object it leaves; a
/// Secret controlled by anything but a KamajiControlPlane (a KubeadmControlPlane's own
/// `<cluster>-kubeconfig`) is not taken over. DELETE is not matched: RBAC grants none.
///
/// The user is the service account `kamaji-reconciler` of any namespace, not of the install
/// namespace only: `clusterctl init --target-namespace` moves the service account but leaves a
/// cluster-scoped policy as written (`fixTargetNamespace`,
/// `cmd/clusterctl/client/repository/components.go`, CAPI v1.14.2), and a name written here
/// would then match nobody. A service account named so elsewhere is held to the same rule.
fn secrets_policy() -> [Value; 2] {
    let name = secrets_policy_name();
    let label = crate::labels::CLUSTER_NAME_LABEL;
    // Every expression reads fields the API server bounds (names, label values, the owner
    // list of one object) and calls no loop but `exists`/`all` over ownerReferences.
    let kcp_controller = |o: &str| {
        format!(
            "has({o}.controller) && {o}.controller && {o}.kind == 'KamajiControlPlane' && {o}.apiVersion.startsWith('{KCP_OWNER_API}')"
        )
    };
    let policy = json!({
        "apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingAdmissionPolicy",
        "metadata": {"name": name, "labels": labels()},
        "spec": {
            "failurePolicy": "Fail",
            "matchConstraints": {"resourceRules": [{
                "apiGroups": [""], "apiVersions": ["v1"], "resources": ["secrets"],
                "operations": ["CREATE", "UPDATE"]
            }]},
            "matchConditions": [{
                "name": "kamaji-reconciler",
                "expression": format!(
                    "request.userInfo.username.startsWith('system:serviceaccount:') && request.userInfo.username.endsWith(':{NAME}')"
                )
            }],
            "variables": [{
                "name": "cluster",
                "expression": format!(
                    "has(object.metadata.labels) && '{label}' in object.metadata.labels ? object.metadata.labels['{label}'] : ''"
                )
            }],
            "validations": [
                {
                    "expression": "has(object.type) && object.type == 'cluster.x-k8s.io/secret' && variables.cluster != '' && has(object.metadata.name) && object.metadata.name in [variables.cluster + '-kubeconfig', variables.cluster + '-ca']",
                    "message": format!("{NAME} writes no Secret but its copies for Cluster API: <cluster>-kubeconfig and <cluster>-ca, of type cluster.x-k8s.io/secret, labelled {label}=<cluster>"),
                    "reason": "Forbidden"
                },
                {
                    "expression": format!(
                        "has(object.metadata.ownerReferences) && object.metadata.ownerReferences.exists(o, {})",
                        kcp_controller("o")
                    ),
                    "message": format!("{NAME} writes no Secret but one controlled by its KamajiControlPlane"),
                    "reason": "Forbidden"
                },
                {
                    "expression": format!(
                        "request.operation != 'UPDATE' || !has(oldObject.metadata.ownerReferences) || oldObject.metadata.ownerReferences.all(o, !(has(o.controller) && o.controller) || ({}))",
                        kcp_controller("o")
                    ),
                    "message": format!("{NAME} does not take over a Secret another controller owns"),
                    "reason": "Forbidden"
                }
            ]
        }
    });
    let binding = json!({
        "apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingAdmissionPolicyBinding",
        "metadata": {"name": name, "labels": labels()},
        "spec": {"policyName": name, "validationActions": ["Deny"]}
    });
    [policy, binding]
}

/// What `kubectl kamaji uninstall` deletes, in delete order (the Deployment first, the CRDs
/// last; deleting the CRDs deletes every KamajiControlPlane, so the verb must refuse while any
/// exists unless forced). Objects are the same as [`install_manifests`], reversed.
pub fn uninstall_manifests(namespace: &str) -> Vec<Value> {
    let mut v = install_manifests(DEFAULT_IMAGE, namespace, 1);
    v.reverse();
    v
}

/// Where `kubectl kamaji install --backup-claim NAME` mounts a claim in the reconciler's pod:
/// `<root>/<claim>`.
pub const BACKUP_MOUNT_ROOT: &str = "/var/lib/kamaji-backups";

/// The most claims mounted for TenantBackups (`--backup-claim`, the reconciler's
/// `--backup-volume`).
pub const MAX_BACKUP_CLAIMS: usize = 16;

/// Mounts each PersistentVolumeClaim of `claims` (in the reconciler's namespace) into the
/// reconciler's Deployment among `objects`, for TenantBackups' `persistentVolumeClaim` targets,
/// and tells the reconciler (`--backup-volume CLAIM=DIR`). The pod's `fsGroup` is its user's
/// group, so a fresh volume is writable by the non-root user.
pub fn mount_backup_claims(objects: &mut [Value], claims: &[String]) {
    if claims.is_empty() {
        return;
    }
    let Some(dep) = objects
        .iter_mut()
        .find(|o| o["kind"] == "Deployment" && o["metadata"]["name"] == NAME)
    else {
        return;
    };
    let pod = &mut dep["spec"]["template"]["spec"];
    pod["securityContext"]["fsGroup"] = json!(65532);
    let volume = |c: &String| format!("backup-{c}");
    pod["volumes"] = claims
        .iter()
        .map(|c| json!({"name": volume(c), "persistentVolumeClaim": {"claimName": c}}))
        .collect();
    let container = &mut pod["containers"][0];
    container["volumeMounts"] = claims
        .iter()
        .map(|c| json!({"name": volume(c), "mountPath": format!("{BACKUP_MOUNT_ROOT}/{c}")}))
        .collect();
    if let Some(args) = container["args"].as_array_mut() {
        for c in claims {
            args.push(json!(format!(
                "--backup-volume={c}={BACKUP_MOUNT_ROOT}/{c}"
            )));
        }
    }
}

/// The hardened Deployment: non-root, read-only root filesystem, no capabilities, limits.
pub fn deployment(image: &str, namespace: &str, replicas: u8) -> Value {
    json!({
        "apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": NAME, "namespace": namespace, "labels": labels()},
        "spec": {
            // More than one: one replica leads on the Lease, the others stand by, Ready.
            "replicas": replicas,
            "selector": {"matchLabels": {"app.kubernetes.io/name": NAME}},
            "template": {
                "metadata": {"labels": {OWNER_LABEL.0: OWNER_LABEL.1}},
                "spec": {
                    "serviceAccountName": NAME,
                    "automountServiceAccountToken": true,
                    "securityContext": {"runAsNonRoot": true, "runAsUser": 65532, "runAsGroup": 65532, "seccompProfile": {"type": "RuntimeDefault"}},
                    "containers": [{
                        "name": "reconciler",
                        "image": image,
                        // The Lease's namespace comes from the downward API, not from an
                        // argument: clusterctl init --target-namespace moves the Deployment
                        // but does not rewrite arguments.
                        "args": ["--leader-elect", "--metrics-bind-address=:8080"],
                        "env": [
                            {"name": "POD_NAME", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}},
                            {"name": "POD_NAMESPACE", "valueFrom": {"fieldRef": {"fieldPath": "metadata.namespace"}}}
                        ],
                        "ports": [{"name": "http", "containerPort": 8080, "protocol": "TCP"}],
                        "livenessProbe": {"httpGet": {"path": "/healthz", "port": "http"}, "initialDelaySeconds": 5, "periodSeconds": 20},
                        "readinessProbe": {"httpGet": {"path": "/readyz", "port": "http"}, "periodSeconds": 10},
                        "resources": {"requests": {"cpu": "10m", "memory": "32Mi"}, "limits": {"cpu": "500m", "memory": "128Mi"}},
                        "securityContext": {
                            "allowPrivilegeEscalation": false,
                            "readOnlyRootFilesystem": true,
                            "runAsNonRoot": true,
                            "capabilities": {"drop": ["ALL"]}
                        }
                    }]
                }
            }
        }
    })
}

#[cfg(test)]
mod tests;
