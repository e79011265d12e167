//! `controlplane.cluster.x-k8s.io/v1alpha2`: the CAPI v1beta2 contract (CACPPK v0.20 and later).

// The CustomResource derive takes one `printcolumn(...)` per column; clippy reads two columns
// of the same type as a duplicated attribute.
#![allow(clippy::duplicated_attributes)]

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::common::{DEFAULT_REPLICAS, KamajiControlPlaneFields, TemplateMeta};

/// CAPI v1beta2 `APIEndpoint`. Never sent empty: the whole field is an `Option`.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct ApiEndpoint {
    #[serde(default, skip_serializing_if = "String::is_empty")]
    #[schemars(length(min = 1, max = 512))]
    pub host: String,
    #[serde(default, skip_serializing_if = "is_zero")]
    #[schemars(range(min = 1, max = 65535))]
    pub port: i32,
}

fn is_zero(p: &i32) -> bool {
    *p == 0
}

/// `status.initialization`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Initialization {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub control_plane_initialized: Option<bool>,
}

kinds!(
    "v1alpha2",
    ".status.initialization.controlPlaneInitialized",
    /// The observed state (CAPI v1beta2 contract).
    status {
        #[serde(skip_serializing_if = "Option::is_none")]
        pub initialization: Option<Initialization>,
        pub ready: bool,
        #[serde(skip_serializing_if = "Option::is_none")]
        pub ready_replicas: Option<i32>,
        #[serde(skip_serializing_if = "Option::is_none")]
        pub replicas: Option<i32>,
        #[serde(skip_serializing_if = "Option::is_none")]
        pub selector: Option<String>,
        #[serde(skip_serializing_if = "Option::is_none")]
        pub available_replicas: Option<i32>,
        #[serde(skip_serializing_if = "Option::is_none")]
        pub up_to_date_replicas: Option<i32>,
    }
    conditions: Condition,
    then {
        /// v1beta1-contract field (`status.initialized`), kept in the storage version so that the
        /// v1alpha1 view works without a conversion webhook. Written only on v1beta1-only clusters.
        #[serde(skip_serializing_if = "Option::is_none")]
        pub initialized: Option<bool>,
        /// v1beta1-contract field, see `initialized`.
        #[serde(skip_serializing_if = "Option::is_none")]
        pub unavailable_replicas: Option<i32>,
        /// v1beta1-contract field, see `initialized`.
        #[serde(skip_serializing_if = "Option::is_none")]
        pub updated_replicas: Option<i32>,
    }
);

/// A `metav1.Condition`, with its upstream validation, and the v1beta1 contract's `severity`.
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
    /// v1beta1-contract field (the `severity` of a False CAPI v1beta1 condition), kept in the
    /// storage version as `status.initialized` is: the API server prunes what the storage
    /// version's schema lacks from an object written through the v1alpha1 view, so without it
    /// CAPI v1.10 would read every False condition without a severity, and sorts such a
    /// condition below True ones when it sums a Cluster's `Ready` up
    /// (`util/conditions/merge.go`, `mergePriority`, CAPI v1.10.10). Written only on
    /// v1beta1-only clusters.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub severity: Option<String>,
}
