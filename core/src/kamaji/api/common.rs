//! The spec fields shared by both API versions and by the template (upstream's
//! `KamajiControlPlaneFields` and the Kamaji types it embeds), field for field.

use std::collections::BTreeMap;

use k8s_openapi::api::apps::v1::DeploymentStrategy;
use k8s_openapi::api::core::v1::{
    Affinity, Container, ResourceRequirements, Toleration, TopologySpreadConstraint, Volume,
    VolumeMount,
};
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::plan::MAX_CONTROL_PLANE_REPLICAS;

pub(crate) fn preserve_unknown(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
    schemars::json_schema!({ "x-kubernetes-preserve-unknown-fields": true })
}

fn is_false(b: &bool) -> bool {
    !*b
}

/// `additionalMetadata`: extra labels and annotations.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct AdditionalMetadata {
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub labels: BTreeMap<String, String>,
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub annotations: BTreeMap<String, String>,
}

impl AdditionalMetadata {
    pub fn is_empty(&self) -> bool {
        self.labels.is_empty() && self.annotations.is_empty()
    }
}

/// Kamaji's `ProbeSpec`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ProbeSpec {
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 0))]
    pub initial_delay_seconds: Option<i32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1))]
    pub timeout_seconds: Option<i32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1))]
    pub period_seconds: Option<i32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1))]
    pub success_threshold: Option<i32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1))]
    pub failure_threshold: Option<i32>,
}

/// Kamaji's `ProbeSet`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct ProbeSet {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub liveness: Option<ProbeSpec>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub readiness: Option<ProbeSpec>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub startup: Option<ProbeSpec>,
}

/// Customisation of one control-plane component (API server, controller manager, scheduler).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ControlPlaneComponent {
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub extra_volume_mounts: Vec<VolumeMount>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub extra_args: Vec<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub resources: Option<ResourceRequirements>,
    /// In combination with the container registry, it can override the component container image.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    #[schemars(length(min = 1, max = IMAGE_NAME))]
    pub container_image_name: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub probes: Option<ProbeSet>,
}

/// The kine component (MySQL, PostgreSQL and NATS DataStores only).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct KineComponent {
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub extra_args: Vec<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub resources: Option<ResourceRequirements>,
}

/// Exposure through a Gateway API Gateway.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct GatewayComponent {
    #[schemars(length(min = 1, max = DNS_SUBDOMAIN))]
    pub name: String,
    #[schemars(length(min = 1, max = DNS_LABEL))]
    pub namespace: String,
    #[schemars(length(min = 1, max = DNS_SUBDOMAIN))]
    pub hostname: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    #[schemars(length(min = 1, max = DNS_SUBDOMAIN))]
    pub section_name: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1, max = MAX_PORT))]
    pub port: Option<i32>,
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub extra_labels: BTreeMap<String, String>,
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub extra_annotations: BTreeMap<String, String>,
}

/// Exposure through an Ingress.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct IngressComponent {
    #[serde(default, skip_serializing_if = "String::is_empty")]
    #[schemars(length(max = DNS_SUBDOMAIN))]
    pub class_name: String,
    #[schemars(length(min = 1, max = DNS_SUBDOMAIN))]
    pub hostname: String,
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub extra_labels: BTreeMap<String, String>,
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub extra_annotations: BTreeMap<String, String>,
}

/// Settings of the LoadBalancer Service.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(extend("x-kubernetes-validations" = [{
    "rule": "has(self.loadBalancerClass) == has(oldSelf.loadBalancerClass)",
    "message": "LoadBalancerClass cannot be set or unset at runtime"
}]))]
pub struct LoadBalancerConfig {
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub load_balancer_source_ranges: Vec<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1))]
    #[schemars(extend("x-kubernetes-validations" = [{
        "rule": "self == oldSelf", "message": "LoadBalancerClass is immutable"
    }]))]
    pub load_balancer_class: Option<String>,
}

/// Kamaji's `AdditionalPort`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct AdditionalPort {
    // A Service port's name: a DNS label.
    #[schemars(length(max = DNS_LABEL))]
    pub name: String,
    #[serde(default = "default_tcp", skip_serializing_if = "String::is_empty")]
    #[schemars(extend("enum" = ["TCP", "UDP", "SCTP"], "default" = "TCP"))]
    pub protocol: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub app_protocol: Option<String>,
    #[schemars(range(min = 1, max = MAX_PORT))]
    pub port: i32,
    pub target_port: IntOrString,
}

fn default_tcp() -> String {
    "TCP".into()
}

/// How the TenantControlPlane is exposed.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(extend("x-kubernetes-validations" = [
    {
        "rule": "!has(self.loadBalancerConfig) || !has(self.loadBalancerConfig.loadBalancerSourceRanges) || (size(self.loadBalancerConfig.loadBalancerSourceRanges) == 0 || self.serviceType == 'LoadBalancer')",
        "message": "LoadBalancerSourceRanges are supported only with LoadBalancer service type"
    },
    {
        "rule": "!has(self.loadBalancerConfig) || !has(self.loadBalancerConfig.loadBalancerClass) || self.serviceType == 'LoadBalancer'",
        "message": "LoadBalancerClass is supported only with LoadBalancer service type"
    }
]))]
pub struct NetworkComponent {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub load_balancer_config: Option<LoadBalancerConfig>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub gateway: Option<GatewayComponent>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ingress: Option<IngressComponent>,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    #[schemars(extend("enum" = SERVICE_TYPES, "default" = DEFAULT_SERVICE_TYPE))]
    pub service_type: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    #[schemars(length(max = DNS_SUBDOMAIN))]
    pub service_address: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    #[schemars(length(max = DNS_SUBDOMAIN))]
    pub advertise_address: String,
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub service_labels: BTreeMap<String, String>,
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub service_annotations: BTreeMap<String, String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub additional_service_ports: Vec<AdditionalPort>,
    #[serde(default, rename = "certSANs", skip_serializing_if = "Vec::is_empty")]
    #[schemars(inner(length(max = DNS_SUBDOMAIN)))]
    pub cert_sans: Vec<String>,
    #[serde(
        default,
        rename = "dnsServiceIPs",
        skip_serializing_if = "Vec::is_empty"
    )]
    #[schemars(inner(length(max = DNS_SUBDOMAIN)))]
    pub dns_service_ips: Vec<String>,
}

/// Kamaji's `AddonSpec` (image overrides).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct AddonSpec {
    #[serde(default, skip_serializing_if = "String::is_empty")]
    #[schemars(length(max = IMAGE_NAME))]
    pub image_repository: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    #[schemars(length(max = IMAGE_TAG))]
    pub image_tag: String,
}

/// The CoreDNS addon, with its DNS Service IPs. No default for `dnsServiceIPs`: CACPPK v0.11.0
/// defaulted `["10.96.0.10"]`, v0.20.0 has none (the IP then follows the tenant's service CIDR);
/// we follow v0.20.0.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct CoreDnsAddonSpec {
    #[serde(default, skip_serializing_if = "String::is_empty")]
    #[schemars(length(max = IMAGE_NAME))]
    pub image_repository: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    #[schemars(length(max = IMAGE_TAG))]
    pub image_tag: String,
    #[serde(
        default,
        rename = "dnsServiceIPs",
        skip_serializing_if = "Vec::is_empty"
    )]
    #[schemars(inner(length(max = DNS_SUBDOMAIN)))]
    pub dns_service_ips: Vec<String>,
}

/// Kamaji's konnectivity server settings.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct KonnectivityServerSpec {
    #[schemars(range(min = 1, max = MAX_PORT))]
    pub port: i32,
    // No default version, as in CACPPK v0.20.0 (the Kamaji API it vendors picks the proxy's
    // version for the tenant's Kubernetes version); v0.11.0's Kamaji defaulted v0.0.32.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    #[schemars(length(max = IMAGE_TAG))]
    pub version: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    #[schemars(length(max = IMAGE_NAME))]
    #[schemars(extend("default" = "registry.k8s.io/kas-network-proxy/proxy-server"))]
    pub image: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub resources: Option<ResourceRequirements>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub extra_args: Vec<String>,
}

/// Kamaji's konnectivity agent settings.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct KonnectivityAgentSpec {
    #[serde(default, skip_serializing_if = "String::is_empty")]
    #[schemars(length(max = IMAGE_NAME))]
    #[schemars(extend("default" = "registry.k8s.io/kas-network-proxy/proxy-agent"))]
    pub image: String,
    // No default version: CACPPK v0.20.0, not v0.11.0 (v0.0.32); see the server's.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    #[schemars(length(max = IMAGE_TAG))]
    pub version: String,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(extend("default" = [{"key": "CriticalAddonsOnly", "operator": "Exists"}]))]
    pub tolerations: Vec<Toleration>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub extra_args: Vec<String>,
    #[serde(default, skip_serializing_if = "is_false")]
    #[schemars(extend("default" = false))]
    pub host_network: bool,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    #[schemars(extend("enum" = ["DaemonSet", "Deployment"], "default" = "DaemonSet"))]
    pub mode: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 0))]
    pub replicas: Option<i32>,
}

/// Kamaji's konnectivity addon.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct KonnectivitySpec {
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schemars(extend("default" = {"image": "registry.k8s.io/kas-network-proxy/proxy-server", "port": 8132}))]
    pub server: Option<KonnectivityServerSpec>,
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schemars(extend(
        "default" = {"image": "registry.k8s.io/kas-network-proxy/proxy-agent", "mode": "DaemonSet"},
        "x-kubernetes-validations" = [{
            "rule": "!(self.mode == 'DaemonSet' && has(self.replicas) && self.replicas != 0) && !(self.mode == 'Deployment' && has(self.replicas) && self.replicas == 0)",
            "message": "replicas must be 0 (or unset) when mode is DaemonSet, and greater than 0 (or unset) when mode is Deployment"
        }]
    ))]
    pub agent: Option<KonnectivityAgentSpec>,
}

/// The addons Kamaji manages.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct AddonsSpec {
    #[serde(rename = "coreDNS", skip_serializing_if = "Option::is_none")]
    pub core_dns: Option<CoreDnsAddonSpec>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub konnectivity: Option<KonnectivitySpec>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub kube_proxy: Option<AddonSpec>,
}

/// Kamaji's `DataStoreOverride`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct DataStoreOverride {
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub resource: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    #[schemars(length(max = DNS_SUBDOMAIN))]
    pub data_store: String,
}

/// One JSON patch operation on the kubelet configuration.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct JsonPatch {
    #[schemars(extend("enum" = ["add", "remove", "replace", "move", "copy", "test"]))]
    pub op: String,
    pub path: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "preserve_unknown")]
    pub value: Option<serde_json::Value>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub from: Option<String>,
}

/// Kamaji's `KubeletSpec`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct KubeletSpec {
    #[serde(
        default,
        rename = "configurationJSONPatches",
        skip_serializing_if = "Vec::is_empty"
    )]
    pub configuration_json_patches: Vec<JsonPatch>,
    // CACPPK v0.11.0 defaulted [Hostname, InternalIP, ExternalIP]; v0.20.0
    // (`api/v1alpha2/kamajicontrolplane_types.go`) defaults [InternalIP, ExternalIP, Hostname].
    // Both our versions follow v0.20.0, the newest release (the reconciler's schema test).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(min = 1, max = 5))]
    #[schemars(extend(
        "default" = ["InternalIP", "ExternalIP", "Hostname"],
        "x-kubernetes-list-type" = "set",
        "items" = {"type": "string", "enum": ["Hostname", "InternalIP", "ExternalIP", "InternalDNS", "ExternalDNS"]}
    ))]
    pub preferred_address_types: Vec<String>,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    #[schemars(extend("enum" = ["systemd", "cgroupfs"]))]
    pub cgroupfs: String,
}

/// Where the TenantControlPlane lives when it is hosted in another cluster.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ExternalClusterReference {
    #[schemars(length(min = 1, max = DNS_SUBDOMAIN))]
    pub kubeconfig_secret_name: String,
    // A key of the Secret's data: at most 253 characters, as the API server takes them.
    #[schemars(length(min = 1, max = DNS_SUBDOMAIN))]
    pub kubeconfig_secret_key: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    #[schemars(length(max = DNS_LABEL))]
    pub kubeconfig_secret_namespace: String,
    #[schemars(length(max = DNS_LABEL))]
    pub deployment_namespace: String,
}

/// The TenantControlPlane Deployment settings.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct DeploymentComponent {
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub node_selector: BTreeMap<String, String>,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    #[schemars(length(max = DNS_SUBDOMAIN))]
    pub runtime_class_name: String,
    #[serde(default, skip_serializing_if = "AdditionalMetadata::is_empty")]
    pub additional_metadata: AdditionalMetadata,
    #[serde(default, skip_serializing_if = "AdditionalMetadata::is_empty")]
    pub pod_additional_metadata: AdditionalMetadata,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    #[schemars(length(max = DNS_SUBDOMAIN))]
    pub service_account_name: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub strategy: Option<DeploymentStrategy>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub affinity: Option<Affinity>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub tolerations: Vec<Toleration>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub topology_spread_constraints: Vec<TopologySpreadConstraint>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub extra_init_containers: Vec<Container>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub extra_containers: Vec<Container>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub extra_volumes: Vec<Volume>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub external_cluster_reference: Option<ExternalClusterReference>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub probes: Option<ProbeSet>,
}

/// Upstream's `KamajiControlPlaneFields`: the body of a KamajiControlPlane and of its template.
/// The optional components are boxed: most KamajiControlPlanes set few of them, and inline they
/// made each object 3.4 KB before any field was set, held once per KamajiControlPlane in the
/// reconciler's store (10,000 of them).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct KamajiControlPlaneFields {
    #[serde(default, skip_serializing_if = "String::is_empty")]
    #[schemars(length(max = DNS_SUBDOMAIN))]
    pub data_store_name: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub data_store_schema: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    #[schemars(extend("x-kubernetes-validations" = [{
        "rule": "self == oldSelf", "message": "changing the dataStoreUsername is not supported"
    }]))]
    pub data_store_username: String,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub data_store_overrides: Vec<DataStoreOverride>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub addons: Option<Box<AddonsSpec>>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(extend("items" = {"type": "string", "enum": ADMISSION_CONTROLLERS}))]
    pub admission_controllers: Vec<String>,
    #[serde(default, rename = "registry", skip_serializing_if = "String::is_empty")]
    #[schemars(length(max = IMAGE_NAME))]
    #[schemars(extend("default" = "registry.k8s.io"))]
    pub container_registry: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub controller_manager: Option<Box<ControlPlaneComponent>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub api_server: Option<Box<ControlPlaneComponent>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub scheduler: Option<Box<ControlPlaneComponent>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub kine: Option<Box<KineComponent>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schemars(extend("default" = {"preferredAddressTypes": ["InternalIP", "ExternalIP", "Hostname"], "cgroupfs": "systemd"}))]
    pub kubelet: Option<Box<KubeletSpec>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schemars(extend("default" = {"serviceType": DEFAULT_SERVICE_TYPE}))]
    pub network: Option<Box<NetworkComponent>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub deployment: Option<Box<DeploymentComponent>>,
}

/// The control-plane replicas of a KamajiControlPlane that states none (the CRD's default).
pub(crate) const DEFAULT_REPLICAS: i32 = 2;
/// The Service types Kamaji exposes a tenant API server through.
pub(crate) const SERVICE_TYPES: [&str; 3] = ["ClusterIP", "NodePort", "LoadBalancer"];
/// The Service type of a KamajiControlPlane that states none (the CRD's default).
pub(crate) const DEFAULT_SERVICE_TYPE: &str = "LoadBalancer";

/// `vMAJOR.MINOR.PATCH`, and optionally semver's pre-release and build (`-rc.1`, `+build.5`) of
/// letters, digits, dots, dashes and pluses, semver's own characters; `$v` comes first. Nothing
/// else: the version ends up in image tags, file names and commands. A `macro_rules!` so that
/// both patterns below are literals from one definition.
macro_rules! version_pattern {
    ($v:literal) => {
        concat!("^", $v, r"[0-9]+\.[0-9]+\.[0-9]+([-+][0-9A-Za-z.+-]+)?$")
    };
}

/// A KamajiControlPlane's `spec.version` (the CRD's `pattern`): the leading `v` optional, as
/// CACPPK adds it when it is missing (`controllers/kamajicontrolplane_controller_tcp.go`,
/// CACPPK v0.20.0) and Kamaji drops it to parse (`internal/webhook/handlers/tcp_version.go`,
/// Kamaji v1.0.0).
pub(crate) const VERSION_PATTERN: &str = version_pattern!("v?");

/// The `spec.version` of a ClusterUpgrade and a FleetUpgrade (the CRDs' `pattern`): the
/// leading `v` required, as CAPI's version fields take it.
pub(crate) const V_VERSION_PATTERN: &str = version_pattern!("v");

/// The longest Kubernetes version a spec takes (KamajiControlPlane, ClusterUpgrade,
/// FleetUpgrade): releases are 7 to 9 characters, a pre-release or build suffix a few more.
pub(crate) const VERSION_MAX_LENGTH: u32 = 64;

/// A DNS subdomain (RFC 1123): the longest name of most Kubernetes objects (a DataStore, a
/// Secret, a Gateway, an IngressClass, a RuntimeClass, a ServiceAccount) and of a host name,
/// which an IP address is shorter than.
const DNS_SUBDOMAIN: u32 = 253;
/// A DNS label (RFC 1123): the longest namespace and Service port name.
const DNS_LABEL: u32 = 63;
/// The longest image name, registry and path included: `NameTotalLengthMax` of the
/// distribution project's reference grammar (`github.com/distribution/reference`).
const IMAGE_NAME: u32 = 255;
/// The longest image tag, by the same grammar (`[\w][\w.-]{0,127}`).
const IMAGE_TAG: u32 = 128;
/// The highest TCP/UDP port.
const MAX_PORT: i32 = 65535;

/// What the CRD now refuses in a spec it may have stored before it did (`spec.replicas` above
/// [`MAX_CONTROL_PLANE_REPLICAS`] or below 0, a `spec.version` too long or not a version), in
/// one line saying what to set instead; `None` when the spec is within bounds. The API server
/// checks a stored object against the schema only when it is written, and then lets a field the
/// write leaves alone keep its value (CRD validation ratcheting), so an object stored before the
/// bound (under CACPPK's CRDs, which bound neither) keeps its count or text until someone
/// changes that field; the reconciler asks this before it copies either into the
/// TenantControlPlane.
pub(crate) fn out_of_bounds(replicas: Option<i32>, version: &str) -> Option<String> {
    if let Some(r) = replicas
        && !(0..=MAX_CONTROL_PLANE_REPLICAS).contains(&i64::from(r))
    {
        return Some(format!(
            "spec.replicas {r} is out of bounds: set it between 0 and {MAX_CONTROL_PLANE_REPLICAS}"
        ));
    }
    if !is_version(version) {
        // Not quoted whole: it may be longer than a condition's message may be.
        let shown: String = version.chars().take(80).collect();
        let more = if shown.len() < version.len() {
            "…"
        } else {
            ""
        };
        return Some(format!(
            "spec.version {shown:?}{more} ({} characters) is not a Kubernetes version: set it to vMAJOR.MINOR.PATCH, e.g. v1.33.0, at most {VERSION_MAX_LENGTH} characters",
            version.chars().count()
        ));
    }
    None
}

/// Whether `s` matches [`VERSION_PATTERN`] within [`VERSION_MAX_LENGTH`].
fn is_version(s: &str) -> bool {
    if s.len() > VERSION_MAX_LENGTH as usize {
        return false;
    }
    let s = s.strip_prefix('v').unwrap_or(s);
    let (core, suffix) = match s.find(['-', '+']) {
        Some(i) => (&s[..i], Some(&s[i + 1..])),
        None => (s, None),
    };
    let numbers: Vec<&str> = core.split('.').collect();
    numbers.len() == 3
        && numbers
            .iter()
            .all(|n| !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()))
        && suffix.is_none_or(|x| {
            !x.is_empty()
                && x.bytes()
                    .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'+' | b'-'))
        })
}

/// Kamaji's admission controller enum (clastix/kamaji v1.0.0, `api/v1alpha1/types.go`,
/// `AdmissionController`); `kubectl kamaji create --admission-controllers` validates against it too.
pub const ADMISSION_CONTROLLERS: &[&str] = &[
    "AlwaysAdmit",
    "AlwaysDeny",
    "AlwaysPullImages",
    "CertificateApproval",
    "CertificateSigning",
    "CertificateSubjectRestriction",
    "DefaultIngressClass",
    "DefaultStorageClass",
    "DefaultTolerationSeconds",
    "DenyEscalatingExec",
    "DenyExecOnPrivileged",
    "DenyServiceExternalIPs",
    "EventRateLimit",
    "ExtendedResourceToleration",
    "ImagePolicyWebhook",
    "LimitPodHardAntiAffinityTopology",
    "LimitRanger",
    "MutatingAdmissionWebhook",
    "NamespaceAutoProvision",
    "NamespaceExists",
    "NamespaceLifecycle",
    "NodeRestriction",
    "OwnerReferencesPermissionEnforcement",
    "PersistentVolumeClaimResize",
    "PersistentVolumeLabel",
    "PodNodeSelector",
    "PodSecurity",
    "PodSecurityPolicy",
    "PodTolerationRestriction",
    "Priority",
    "ResourceQuota",
    "RuntimeClass",
    "SecurityContextDeny",
    "ServiceAccount",
    "StorageObjectInUseProtection",
    "TaintNodesByCondition",
    "ValidatingAdmissionWebhook",
];

/// Template metadata (CAPI `ObjectMeta`: labels and annotations only).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct TemplateMeta {
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub labels: BTreeMap<String, String>,
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub annotations: BTreeMap<String, String>,
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The reconciler's check refuses what the CRD's bounds refuse (the reconciler's
    /// `bounds::the_api_server_refuses_a_count_or_a_version_out_of_bounds` sends such cases to
    /// the API server and compares), and says what to set.
    #[test]
    fn out_of_bounds_is_what_the_crd_refuses() {
        for ok in [
            "v1.33.0",
            "1.33.0",
            "v1.34.0-rc.1",
            "v1.33.0+build.5",
            "v1.33.0-alpha.1+x",
            "v1.100.200",
        ] {
            assert_eq!(out_of_bounds(Some(2), ok), None, "{ok}");
        }
        for bad in [
            "",
            "v",
            "latest",
            "v1.33",
            "v1.33.0.1",
            "vv1.33.0",
            "V1.33.0",
            " v1.33.0",
            "v1.33.0-",
            "v1.33.0-rc 1",
            "v1.33.0\ntouch x",
            "v1.33.0-é",
            "v1..0",
        ] {
            let why = out_of_bounds(None, bad).unwrap_or_default();
            assert!(
                why.contains("set it to vMAJOR.MINOR.PATCH"),
                "{bad:?}: {why}"
            );
        }
        let long = format!("v1.33.0-{}", "a".repeat(100_000));
        let why = out_of_bounds(None, &long).unwrap();
        assert!(
            why.len() < 300 && why.contains("100008 characters"),
            "{why}"
        );
        assert_eq!(
            out_of_bounds(None, &format!("v1.33.0-{}", "a".repeat(56))),
            None
        );
        assert!(out_of_bounds(None, &format!("v1.33.0-{}", "a".repeat(57))).is_some());
        assert_eq!(out_of_bounds(Some(0), "v1.33.0"), None);
        assert_eq!(out_of_bounds(Some(16), "v1.33.0"), None);
        for r in [17, i32::MAX, -1] {
            let why = out_of_bounds(Some(r), "v1.33.0").unwrap();
            assert_eq!(
                why,
                format!("spec.replicas {r} is out of bounds: set it between 0 and 16")
            );
        }
    }

    #[test]
    fn one_version_shape_with_and_without_its_v() {
        assert_eq!(
            VERSION_PATTERN,
            r"^v?[0-9]+\.[0-9]+\.[0-9]+([-+][0-9A-Za-z.+-]+)?$"
        );
        assert_eq!(V_VERSION_PATTERN, VERSION_PATTERN.replacen("v?", "v", 1));
    }
}

/// A `metav1.Condition`, with its upstream validation: the wire type of our ops API's
/// conditions (ClusterUpgrade, FleetUpgrade). The KamajiControlPlane's own
/// (`v1alpha2::Condition`) also keeps the v1beta1 contract's `severity`, which these never had.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Condition {
    #[schemars(length(max = 316))]
    #[serde(rename = "type")]
    pub type_: String,
    #[schemars(extend("enum" = ["True", "False", "Unknown"]))]
    pub status: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 0))]
    pub observed_generation: Option<i64>,
    #[schemars(extend("format" = "date-time"))]
    pub last_transition_time: String,
    #[schemars(length(min = 1, max = 1024))]
    pub reason: String,
    #[schemars(length(max = 32768))]
    pub message: String,
}
