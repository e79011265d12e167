//! What the controller learns from the API server at start-up.

use std::collections::HashMap;

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::Client;
use kube::api::{Api, ApiResource, GroupVersionKind};
use serde_json::Value;

use super::Config;
use crate::Error;
use crate::infra;
use crate::skeleton::discover_contract;
use kcore::groups::CapiVersion;

/// What was discovered from the API server at start-up.
#[derive(Clone, Debug)]
pub struct Discovered {
    pub contract: CapiVersion,
    pub cluster: ApiResource,
    pub tcp: ApiResource,
    pub tcp_spec_schema: Value,
    pub infra: HashMap<String, ApiResource>,
}

pub(super) fn ar(group: &str, version: &str, kind: &str, plural: &str) -> ApiResource {
    ApiResource::from_gvk_with_plural(&GroupVersionKind::gvk(group, version, kind), plural)
}

/// Discovers the CAPI contract, the TenantControlPlane schema and the served infrastructure kinds.
pub async fn discover(client: &Client, cfg: &Config) -> Result<Discovered, Error> {
    let contract = discover_contract(client).await?;
    let cluster = ar(
        kcore::groups::CAPI_GROUP,
        contract.as_str(),
        "Cluster",
        "clusters",
    );
    let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
    let tcp_crd = crds
        .get_opt("tenantcontrolplanes.kamaji.clastix.io")
        .await?
        .ok_or_else(|| {
            Error::Other(
                "Kamaji is not installed: CRD tenantcontrolplanes.kamaji.clastix.io not found; install Kamaji first".into(),
            )
        })?;
    let ver = tcp_crd
        .spec
        .versions
        .iter()
        .find(|v| v.storage)
        .or_else(|| tcp_crd.spec.versions.first())
        .ok_or_else(|| Error::Other("the TenantControlPlane CRD has no versions".into()))?;
    let schema = ver
        .schema
        .as_ref()
        .and_then(|s| s.open_api_v3_schema.as_ref())
        .map(|s| serde_json::to_value(s).unwrap_or(Value::Null))
        .unwrap_or(Value::Null);
    let tcp_spec_schema = schema["properties"]["spec"].clone();
    let tcp = ar(
        kcore::groups::KAMAJI_GROUP,
        &ver.name,
        "TenantControlPlane",
        "tenantcontrolplanes",
    );
    let infra = discover_infra(client, cfg).await;
    Ok(Discovered {
        contract,
        cluster,
        tcp,
        tcp_spec_schema,
        infra,
    })
}

async fn discover_infra(client: &Client, cfg: &Config) -> HashMap<String, ApiResource> {
    let mut out = HashMap::new();
    let Ok(g) = kube::discovery::group(client, kcore::groups::INFRASTRUCTURE_GROUP).await else {
        return out;
    };
    // Kinds of this group come in different versions: each at its most stable served one.
    for (res, _caps) in g.resources_by_stability() {
        if infra::action_for(&res.kind, &cfg.extra_infra_kinds).is_some() {
            out.insert(res.kind.clone(), res);
        }
    }
    out
}
