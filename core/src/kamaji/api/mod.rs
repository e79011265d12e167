//! The KamajiControlPlane API, field for field compatible with CACPPK:
//! `v1alpha2` (CAPI v1beta2 contract, storage) and `v1alpha1` (CAPI v1beta1 contract).

/// The KamajiControlPlane and KamajiControlPlaneTemplate kinds of one API version, stated once
/// for both: the same spec (the shared fields, the endpoint, replicas and version) and template,
/// and the status fields both contracts have (the external management, the failure, the
/// version and the conditions, of the contract's `$condition` type); what differs is the rest
/// of the status (`$lead` before those fields, `$tail` after them), the endpoint
/// (`ApiEndpoint`) of the invoking module, and the path of the `Initialized` printer column.
macro_rules! kinds {
    (
        $version:tt,
        $initialized:tt,
        $(#[doc = $status_doc:literal])*
        status { $($lead:tt)* }
        conditions: $condition:ty,
        then { $($tail:tt)* }
    ) => {
        /// The desired state of a KamajiControlPlane.
        #[derive(kube::CustomResource, Clone, Debug, Default, PartialEq, serde::Serialize, serde::Deserialize, schemars::JsonSchema)]
        #[kube(
            group = "controlplane.cluster.x-k8s.io",
            version = $version,
            kind = "KamajiControlPlane",
            namespaced,
            status = "KamajiControlPlaneStatus",
            shortname = "ktcp",
            category = "cluster-api",
            category = "kamaji",
            derive = "Default",
            derive = "PartialEq",
            doc = "KamajiControlPlane is the Schema for the kamajicontrolplanes API.",
            scale(
                spec_replicas_path = ".spec.replicas",
                status_replicas_path = ".status.replicas",
                label_selector_path = ".status.selector"
            ),
            printcolumn(
                name = "Version",
                type_ = "string",
                json_path = ".spec.version",
                description = "The desired Kubernetes version"
            ),
            printcolumn(
                name = "Initialized",
                type_ = "boolean",
                json_path = $initialized,
                description = "Check if the Kamaji Control Plane has been initialized"
            ),
            printcolumn(
                name = "Ready",
                type_ = "boolean",
                json_path = ".status.ready",
                description = "Check if the Kamaji Control Plane is up and running"
            ),
            printcolumn(
                name = "Age",
                type_ = "date",
                json_path = ".metadata.creationTimestamp",
                description = "Age"
            )
        )]
        #[serde(rename_all = "camelCase")]
        pub struct KamajiControlPlaneSpec {
            #[serde(flatten)]
            pub fields: KamajiControlPlaneFields,
            /// The endpoint of the Kubernetes API server managed by Kamaji; written by the controller.
            #[serde(skip_serializing_if = "Option::is_none")]
            #[schemars(extend("minProperties" = 1))]
            pub control_plane_endpoint: Option<ApiEndpoint>,
            /// Number of desired replicas for the TenantControlPlane Deployment. Defaults to 2.
            // Bounded by the count the CLI's verbs take (`plan::MAX_CONTROL_PLANE_REPLICAS`),
            // so that the API server refuses what `kubectl kamaji scale` would, however it is
            // written (apply, merge patch, the scale subresource). Why 16: a hosted control
            // plane's replicas are API server pods over one DataStore, which other tenants
            // share; each keeps a watch cache of its own and a watch per resource on that
            // DataStore, so more replicas add load on it as much as capacity. The largest
            // clusters Kubernetes tests (5,000 nodes, by its scalability SIG) run one to five
            // API servers; 16 is three times that, and a count above it is a typo or hostile,
            // one Kamaji would start pods for at once. 0 puts the tenant to sleep.
            #[serde(skip_serializing_if = "Option::is_none")]
            #[schemars(range(min = 0, max = $crate::plan::MAX_CONTROL_PLANE_REPLICAS))]
            #[schemars(extend("default" = DEFAULT_REPLICAS))]
            pub replicas: Option<i32>,
            /// The desired Kubernetes version.
            #[schemars(
                length(max = $crate::kamaji::api::common::VERSION_MAX_LENGTH),
                regex(pattern = $crate::kamaji::api::common::VERSION_PATTERN)
            )]
            pub version: String,
        }

        impl KamajiControlPlaneSpec {
            /// What the CRD refuses now but may have stored before it did (the count or the
            /// version out of bounds), in one line saying what to set; `None` when within
            /// bounds. The reconciler copies neither into the TenantControlPlane then.
            pub fn out_of_bounds(&self) -> Option<String> {
                $crate::kamaji::api::common::out_of_bounds(self.replicas, &self.version)
            }
        }

        /// The desired state of a KamajiControlPlaneTemplate.
        #[derive(kube::CustomResource, Clone, Debug, Default, PartialEq, serde::Serialize, serde::Deserialize, schemars::JsonSchema)]
        #[kube(
            group = "controlplane.cluster.x-k8s.io",
            version = $version,
            kind = "KamajiControlPlaneTemplate",
            namespaced,
            shortname = "ktcpt",
            category = "cluster-api",
            category = "kamaji",
            derive = "Default",
            derive = "PartialEq",
            doc = "KamajiControlPlaneTemplate is the Schema for the kamajicontrolplanetemplates API."
        )]
        pub struct KamajiControlPlaneTemplateSpec {
            pub template: KamajiControlPlaneTemplateResource,
        }

        /// The data needed to create a KamajiControlPlane from a template.
        #[derive(Clone, Debug, Default, PartialEq, serde::Serialize, serde::Deserialize, schemars::JsonSchema)]
        pub struct KamajiControlPlaneTemplateResource {
            #[serde(default, skip_serializing_if = "Option::is_none")]
            #[schemars(extend("minProperties" = 1))]
            pub metadata: Option<TemplateMeta>,
            pub spec: KamajiControlPlaneFields,
        }

        $(#[doc = $status_doc])*
        #[derive(Clone, Debug, Default, PartialEq, serde::Serialize, serde::Deserialize, schemars::JsonSchema)]
        #[serde(rename_all = "camelCase")]
        pub struct KamajiControlPlaneStatus {
            $($lead)*
            /// Always `true`: the control plane is managed by Kamaji, without Machines.
            #[schemars(required, extend("default" = true))]
            pub external_managed_control_plane: Option<bool>,
            #[serde(default, skip_serializing_if = "String::is_empty")]
            pub failure_reason: String,
            #[serde(default, skip_serializing_if = "String::is_empty")]
            pub failure_message: String,
            pub version: String,
            #[serde(default, skip_serializing_if = "Vec::is_empty")]
            pub conditions: Vec<$condition>,
            $($tail)*
        }
    };
}

pub mod common;
pub mod v1alpha1;
pub mod v1alpha2;

pub use common::*;

/// API group of KamajiControlPlane and KamajiControlPlaneTemplate.
pub const GROUP: &str = crate::groups::CONTROLPLANE_GROUP;
