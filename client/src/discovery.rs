//! What the management cluster serves, found with two requests: aggregated discovery of the
//! API groups we care about (falling back to classic discovery on old servers) and one
//! metadata-only list of CustomResourceDefinitions for the contract labels.
//!
//! ```no_run
//! # async fn f(conn: &kclient::conn::Conn) -> Result<(), kclient::error::Error> {
//! let apis = kclient::discovery::ServerApis::discover(conn).await?;
//! let clusters = apis.cluster()?;          // ApiResource of Cluster, v1beta2 or v1beta1
//! # Ok(()) }
//! ```
//!
//! The version-agnostic field accessors live in [`fields`].

use kcore::fields;
use kcore::groups::*;

use std::collections::BTreeMap;

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{Api, ListParams};
use kube::discovery::{ApiResource, Discovery};
use serde::Serialize;

use crate::conn::Conn;
use crate::error::{ApiServer, Error, Op};

/// One served kind: its group, kind, plural and served versions, best first.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct KindInfo {
    pub group: String,
    pub kind: String,
    pub plural: String,
    pub versions: Vec<String>,
    pub namespaced: bool,
}

impl KindInfo {
    /// The preferred served version.
    pub fn version(&self) -> &str {
        self.versions.first().map(String::as_str).unwrap_or("")
    }
    /// The ApiResource of a version of this kind.
    pub fn resource(&self, version: &str) -> ApiResource {
        ApiResource {
            group: self.group.clone(),
            version: version.to_string(),
            api_version: format!("{}/{version}", self.group),
            kind: self.kind.clone(),
            plural: self.plural.clone(),
        }
    }
    /// The CRD name: `plural.group`.
    pub fn crd_name(&self) -> String {
        format!("{}.{}", self.plural, self.group)
    }
}

/// A provider as `version` reports it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ProviderInfo {
    pub group: String,
    pub kind: String,
    /// The served version we use.
    pub version: String,
    /// All served versions, best first.
    pub served: Vec<String>,
    /// The newest CAPI contract from the CRD labels, if readable.
    pub contract: Option<String>,
}

/// What the management cluster serves. Cheap to clone.
#[derive(Clone, Debug, Default)]
pub struct ServerApis {
    /// Served kinds of the [`GROUPS`].
    pub kinds: Vec<KindInfo>,
    /// CRD name → contract labels; `None` when CRDs could not be read.
    pub contracts: Option<BTreeMap<String, ContractLabels>>,
    /// Who was refused reading CRDs (`user "jane"`), when that happened.
    pub crd_forbidden: Option<String>,
    /// The connection, for messages.
    pub target: ApiServer,
}

/// Aggregated discovery of the [`GROUPS`], or classic discovery on servers without it.
async fn run_discovery(conn: &Conn) -> Result<Discovery, Error> {
    let discovery = Discovery::new(conn.client.clone()).filter(&GROUPS);
    match discovery.run_aggregated().await {
        Ok(d) => Ok(d),
        Err(kube::Error::Api(s)) if matches!(s.code, 404 | 406 | 415) => {
            tracing::debug!(
                "no aggregated discovery ({}), using classic discovery",
                s.code
            );
            Discovery::new(conn.client.clone())
                .filter(&GROUPS)
                .run()
                .await
                .map_err(|e| conn.error(e, &Op::discovery()))
        }
        Err(e) => Err(conn.error(e, &Op::discovery())),
    }
}

/// The discovered kinds (subresources left out), each with its served versions best first,
/// sorted by group and kind.
fn kinds_of(discovery: &Discovery) -> Vec<KindInfo> {
    let mut kinds: Vec<KindInfo> = Vec::new();
    for group in discovery.groups() {
        for version in group.versions() {
            for (ar, caps) in group.versioned_resources(version) {
                if ar.plural.contains('/') {
                    continue;
                }
                match kinds
                    .iter_mut()
                    .find(|k| k.group == ar.group && k.kind == ar.kind)
                {
                    Some(k) => k.versions.push(ar.version.clone()),
                    None => kinds.push(KindInfo {
                        group: ar.group.clone(),
                        kind: ar.kind.clone(),
                        plural: ar.plural.clone(),
                        versions: vec![ar.version.clone()],
                        namespaced: caps.scope == kube::discovery::Scope::Namespaced,
                    }),
                }
            }
        }
    }
    for k in &mut kinds {
        sort_versions(&mut k.versions);
        k.versions.dedup();
    }
    kinds.sort_by(|a, b| (&a.group, &a.kind).cmp(&(&b.group, &b.kind)));
    kinds
}

/// CRD name → contract labels, for the CRDs of the [`GROUPS`]; `(None, Some(user))` when
/// `user` may not list CRDs.
type Contracts = (Option<BTreeMap<String, ContractLabels>>, Option<String>);

/// Lists the CRDs' metadata for their contract labels.
async fn crd_contracts(conn: &Conn) -> Result<Contracts, Error> {
    let crds: Api<CustomResourceDefinition> = Api::all(conn.client.clone());
    match crds.list_metadata(&ListParams::default()).await {
        Ok(list) => {
            let mut m = BTreeMap::new();
            for crd in list.items {
                let name = crd.metadata.name.clone().unwrap_or_default();
                if !GROUPS.iter().any(|g| name.ends_with(&format!(".{g}"))) {
                    continue;
                }
                let labels = crd.metadata.labels.clone().unwrap_or_default();
                m.insert(name, contract_labels(&labels));
            }
            Ok((Some(m), None))
        }
        Err(e) => {
            let op = Op::new(
                "list",
                "apiextensions.k8s.io",
                "customresourcedefinitions",
                "CustomResourceDefinition",
            );
            match conn.error(e, &op) {
                Error::Forbidden { user, .. } => Ok((None, Some(user))),
                other => Err(other),
            }
        }
    }
}

impl ServerApis {
    /// Runs discovery. Fails when the server cannot be reached or refuses discovery; a
    /// refusal to read CRDs is recorded in `crd_forbidden` (see [`ServerApis::require_contracts`]).
    pub async fn discover(conn: &Conn) -> Result<ServerApis, Error> {
        let target = conn.target();
        let kinds = kinds_of(&run_discovery(conn).await?);
        let (contracts, crd_forbidden) = crd_contracts(conn).await?;
        Ok(ServerApis {
            kinds,
            contracts,
            crd_forbidden,
            target,
        })
    }

    /// The served kind `kind` of `group`.
    pub fn kind(&self, group: &str, kind: &str) -> Option<&KindInfo> {
        self.kinds
            .iter()
            .find(|k| k.group == group && k.kind == kind)
    }

    /// True when any kind of `group` is served.
    pub fn has_group(&self, group: &str) -> bool {
        self.kinds.iter().any(|k| k.group == group)
    }

    /// The CAPI core version, if Cluster API is installed.
    pub fn capi_version(&self) -> Option<CapiVersion> {
        let k = self.kind(CAPI_GROUP, "Cluster")?;
        CapiVersion::choose(k.versions.iter().map(String::as_str))
    }

    /// The CAPI core version, or the "not installed" error.
    pub fn require_capi(&self) -> Result<CapiVersion, Error> {
        if let Some(v) = self.capi_version() {
            return Ok(v);
        }
        if let Some(k) = self.kind(CAPI_GROUP, "Cluster") {
            return Err(Error::Other {
                message: format!(
                    "Cluster API on this cluster serves only {} of cluster.x-k8s.io; this plugin needs v1beta1 (CAPI 1.x) or v1beta2 (CAPI 1.11 and later)",
                    k.versions.join(", ")
                ),
                hint: Some("upgrade Cluster API with clusterctl upgrade apply".into()),
            });
        }
        Err(self.not_installed("Cluster API", CAPI_GROUP, "install it with clusterctl init"))
    }

    /// The "not installed" error for `product` (no `group` API).
    pub fn not_installed(&self, product: &str, group: &str, install: &str) -> Error {
        Error::NotInstalled {
            product: product.into(),
            group: group.into(),
            install: install.into(),
            context: self.target.context.clone(),
        }
    }

    /// The ApiResource of a CAPI core kind (Cluster, Machine, MachineDeployment, MachineSet,
    /// MachineHealthCheck, ClusterClass...) at the chosen core version.
    pub fn capi_kind(&self, kind: &str) -> Result<ApiResource, Error> {
        let v = self.require_capi()?;
        let k = self.kind(CAPI_GROUP, kind).ok_or_else(|| {
            self.not_installed(
                &format!("The Cluster API kind {kind}"),
                CAPI_GROUP,
                "upgrade Cluster API with clusterctl upgrade apply",
            )
        })?;
        let version = if k.versions.iter().any(|x| x == v.as_str()) {
            v.as_str()
        } else {
            k.version()
        };
        Ok(k.resource(version))
    }

    /// Cluster at the chosen CAPI version.
    pub fn cluster(&self) -> Result<ApiResource, Error> {
        self.capi_kind("Cluster")
    }

    /// A provider kind at the version its contract labels name for the core's contract,
    /// else its preferred served version.
    pub fn provider_kind(&self, group: &str, kind: &str) -> Option<ApiResource> {
        let k = self.kind(group, kind)?;
        let contract = self.capi_version().map(|v| v.as_str()).unwrap_or("v1beta2");
        let by_label = self
            .contracts
            .as_ref()
            .and_then(|m| m.get(&k.crd_name()))
            .and_then(|labels| api_version_for_contract(labels, contract))
            .filter(|v| k.versions.contains(v));
        let version = by_label.unwrap_or_else(|| k.version().to_string());
        Some(k.resource(&version))
    }

    /// Like [`ServerApis::provider_kind`], with the "not installed" error.
    pub fn require_provider_kind(
        &self,
        group: &str,
        kind: &str,
        product: &str,
        install: &str,
    ) -> Result<ApiResource, Error> {
        self.provider_kind(group, kind)
            .ok_or_else(|| self.not_installed(product, group, install))
    }

    /// Kamaji's TenantControlPlane, or the "not installed" error.
    pub fn require_kamaji(&self) -> Result<ApiResource, Error> {
        self.tenant_control_plane().ok_or_else(|| {
            self.not_installed(
                "Kamaji",
                KAMAJI_GROUP,
                "install it with helm install kamaji clastix/kamaji -n kamaji-system --create-namespace",
            )
        })
    }
    /// KamajiControlPlane, or the "not installed" error.
    pub fn require_kamaji_control_plane(&self) -> Result<ApiResource, Error> {
        self.kamaji_control_plane().ok_or_else(|| {
            self.not_installed(
                "The KamajiControlPlane provider",
                &format!("{CONTROLPLANE_GROUP} KamajiControlPlane"),
                "install it with clusterctl init --control-plane kamaji",
            )
        })
    }
    /// ByoHost, or the "not installed" error.
    pub fn require_byoh(&self) -> Result<ApiResource, Error> {
        self.byo_host().ok_or_else(|| {
            self.not_installed(
                "BYOH (Bring Your Own Host)",
                &format!("{INFRASTRUCTURE_GROUP} ByoHost"),
                "install it with clusterctl init --infrastructure byoh",
            )
        })
    }

    /// KamajiControlPlane (controlplane.cluster.x-k8s.io), if installed.
    pub fn kamaji_control_plane(&self) -> Option<ApiResource> {
        self.provider_kind(CONTROLPLANE_GROUP, "KamajiControlPlane")
    }
    /// TenantControlPlane (kamaji.clastix.io), if Kamaji is installed.
    pub fn tenant_control_plane(&self) -> Option<ApiResource> {
        let k = self.kind(KAMAJI_GROUP, "TenantControlPlane")?;
        Some(k.resource(k.version()))
    }
    /// ByoHost (infrastructure.cluster.x-k8s.io), if BYOH is installed.
    pub fn byo_host(&self) -> Option<ApiResource> {
        self.provider_kind(INFRASTRUCTURE_GROUP, "ByoHost")
    }

    /// The ApiResource a reference points at: its apiVersion when it has one (v1beta1),
    /// else the version the target CRD's contract labels name (v1beta2 refs).
    pub fn resolve_ref(&self, r: &fields::ObjectRef) -> Result<ApiResource, Error> {
        let k = self.kind(&r.api_group, &r.kind).ok_or_else(|| {
            self.not_installed(
                &format!("The kind {} referenced by {}", r.kind, r.name),
                &r.api_group,
                "install its provider with clusterctl init",
            )
        })?;
        if let Some(av) = &r.api_version {
            let (_, v) = kcore::groups::split_api_version(av);
            if k.versions.iter().any(|x| x == v) {
                return Ok(k.resource(v));
            }
        }
        match self.provider_kind(&r.api_group, &r.kind) {
            Some(ar) => Ok(ar),
            None => Ok(k.resource(k.version())),
        }
    }

    /// The newest contract of a kind's CRD, if the CRDs were readable.
    pub fn contract(&self, group: &str, kind: &str) -> Option<String> {
        let k = self.kind(group, kind)?;
        let labels = self.contracts.as_ref()?.get(&k.crd_name())?;
        latest_contract(labels).map(|(c, _)| c)
    }

    /// Fails with the recorded Forbidden error when CRDs could not be read (the plugins
    /// read CRD labels to learn provider contracts).
    pub fn require_contracts(&self) -> Result<(), Error> {
        match (&self.contracts, &self.crd_forbidden) {
            (Some(_), _) => Ok(()),
            (None, user) => Err(Error::Forbidden {
                user: user.clone().unwrap_or_else(|| "you".into()),
                verb: "list".into(),
                resource: "customresourcedefinitions.apiextensions.k8s.io".into(),
                namespace: None,
            }),
        }
    }

    /// A served provider kind as `version` reports it.
    pub fn provider_info(&self, group: &str, kind: &str) -> Option<ProviderInfo> {
        let k = self.kind(group, kind)?;
        let version = self
            .provider_kind(group, kind)
            .map(|ar| ar.version)
            .unwrap_or_else(|| k.version().to_string());
        Some(ProviderInfo {
            group: group.into(),
            kind: kind.into(),
            version,
            served: k.versions.clone(),
            contract: self.contract(group, kind),
        })
    }

    /// CAPI core as `version` reports it (the chosen core version, not the preferred one).
    pub fn capi_info(&self) -> Option<ProviderInfo> {
        let v = self.capi_version()?;
        let k = self.kind(CAPI_GROUP, "Cluster")?;
        Some(ProviderInfo {
            group: CAPI_GROUP.into(),
            kind: "Cluster".into(),
            version: v.as_str().into(),
            served: k.versions.clone(),
            contract: self.contract(CAPI_GROUP, "Cluster"),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn labels(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    fn apis() -> ServerApis {
        let k = |group: &str, kind: &str, plural: &str, versions: &[&str]| KindInfo {
            group: group.into(),
            kind: kind.into(),
            plural: plural.into(),
            versions: versions.iter().map(|s| s.to_string()).collect(),
            namespaced: true,
        };
        let mut contracts = BTreeMap::new();
        contracts.insert(
            "kamajicontrolplanes.controlplane.cluster.x-k8s.io".to_string(),
            contract_labels(&labels(&[("cluster.x-k8s.io/v1beta2", "v1alpha2")])),
        );
        contracts.insert(
            "byohosts.infrastructure.cluster.x-k8s.io".to_string(),
            contract_labels(&labels(&[("cluster.x-k8s.io/v1beta1", "v1beta1")])),
        );
        ServerApis {
            kinds: vec![
                k(CAPI_GROUP, "Cluster", "clusters", &["v1beta2", "v1beta1"]),
                k(
                    CONTROLPLANE_GROUP,
                    "KamajiControlPlane",
                    "kamajicontrolplanes",
                    &["v1alpha2"],
                ),
                k(INFRASTRUCTURE_GROUP, "ByoHost", "byohosts", &["v1beta1"]),
            ],
            contracts: Some(contracts),
            crd_forbidden: None,
            target: ApiServer {
                context: "mgmt".into(),
                server: "https://x".into(),
            },
        }
    }

    #[test]
    fn resolves_versionless_refs_through_contract_labels() {
        let a = apis();
        let r = fields::ObjectRef {
            api_group: CONTROLPLANE_GROUP.into(),
            api_version: None,
            kind: "KamajiControlPlane".into(),
            name: "cp".into(),
            namespace: None,
        };
        assert_eq!(
            a.resolve_ref(&r).unwrap().api_version,
            "controlplane.cluster.x-k8s.io/v1alpha2"
        );
        assert_eq!(a.cluster().unwrap().version, "v1beta2");
        assert_eq!(
            a.contract(INFRASTRUCTURE_GROUP, "ByoHost").as_deref(),
            Some("v1beta1")
        );
        let missing = fields::ObjectRef {
            api_group: "infrastructure.cluster.x-k8s.io".into(),
            kind: "OpenStackCluster".into(),
            ..r
        };
        assert!(matches!(
            a.resolve_ref(&missing),
            Err(Error::NotInstalled { .. })
        ));
    }

    #[test]
    fn missing_capi_is_not_installed() {
        let a = ServerApis {
            target: ApiServer {
                context: "bare".into(),
                server: "https://x".into(),
            },
            ..Default::default()
        };
        let e = a.require_capi().unwrap_err();
        assert_eq!(
            e.to_string(),
            "Cluster API is not installed on this cluster (no cluster.x-k8s.io API); install it with clusterctl init"
        );
        assert_eq!(
            a.require_byoh().unwrap_err().to_string(),
            "BYOH (Bring Your Own Host) is not installed on this cluster (no infrastructure.cluster.x-k8s.io ByoHost API); install it with clusterctl init --infrastructure byoh"
        );
        assert!(matches!(
            a.require_kamaji(),
            Err(Error::NotInstalled { .. })
        ));
        assert!(apis().require_kamaji_control_plane().is_ok());
        assert!(apis().require_kamaji().is_err());
    }
}
