//! `controlplane.cluster.x-k8s.io/v1alpha1`: the CAPI v1beta1 contract (CACPPK v0.19 and earlier).

// The CustomResource derive takes one `printcolumn(...)` per column; clippy reads two columns
// of the same type as a duplicated attribute.
#![allow(clippy::duplicated_attributes)]

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::common::{DEFAULT_REPLICAS, KamajiControlPlaneFields, TemplateMeta};

/// CAPI v1beta1 `APIEndpoint`. Never sent empty: the whole field is an `Option`. Bounded as
/// v1alpha2's, the same stored field.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct ApiEndpoint {
    #[schemars(length(max = 512))]
    pub host: String,
    #[schemars(range(min = 0, max = 65535))]
    pub port: i32,
}

/// A CAPI v1beta1 condition, which the reconciler writes on the v1beta1 contract, with
/// `observedGeneration` from `metav1.Condition`: CACPPK's v1alpha1 conditions are
/// `metav1.Condition`s (`api/v1alpha1/kamajicontrolplane_types.go`, CACPPK v0.11.0) and it
/// always sets the generation, so a KamajiControlPlane that CACPPK wrote keeps it here.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct V1Beta1Condition {
    #[serde(rename = "type")]
    pub type_: String,
    pub status: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub severity: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observed_generation: Option<i64>,
    pub last_transition_time: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub reason: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub message: String,
}

/// CACPPK's v1alpha1 status counters have no schema default (CACPPK v0.11.0's CRD); serde's
/// `default`, which lets a partial status be read, must not become one.
fn no_schema_default(schema: &mut schemars::Schema) {
    schema.remove("default");
}

kinds!(
    "v1alpha1",
    ".status.initialized",
    /// The observed state (CAPI v1beta1 contract).
    status {
        #[serde(default)]
        #[schemars(transform = no_schema_default)]
        pub initialized: bool,
        pub ready: bool,
        #[serde(default)]
        #[schemars(transform = no_schema_default)]
        pub replicas: i32,
        #[serde(default)]
        #[schemars(transform = no_schema_default)]
        pub ready_replicas: i32,
        #[serde(default)]
        #[schemars(transform = no_schema_default)]
        pub unavailable_replicas: i32,
        #[serde(default)]
        #[schemars(transform = no_schema_default)]
        pub updated_replicas: i32,
        #[serde(default, skip_serializing_if = "String::is_empty")]
        pub selector: String,
    }
    conditions: V1Beta1Condition,
    then {}
);
