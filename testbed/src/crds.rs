//! Installs upstream CRDs and waits until the API server serves them.

use std::path::Path;
use std::time::{Duration, Instant};

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::Client;
use kube::api::{Api, Patch, PatchParams};

use crate::Error;

/// Contract labels that the providers' kustomize overlays add and their raw CRD bases lack.
/// clusterctl and our discovery read them (`cluster.x-k8s.io/<contract>: <versions>`).
fn contract_labels(crd: &CustomResourceDefinition) -> Vec<(&'static str, &'static str)> {
    let group = crd.spec.group.as_str();
    let kind = crd.spec.names.kind.as_str();
    let byoh = [
        "ByoHost",
        "ByoMachine",
        "ByoMachineTemplate",
        "ByoCluster",
        "ByoClusterTemplate",
        "BootstrapKubeconfig",
        "K8sInstallerConfig",
        "K8sInstallerConfigTemplate",
    ];
    if group == "infrastructure.cluster.x-k8s.io" && byoh.contains(&kind) {
        return vec![
            ("cluster.x-k8s.io/v1beta1", "v1beta1"),
            ("cluster.x-k8s.io/provider", "infrastructure-byoh"),
        ];
    }
    if group == "controlplane.cluster.x-k8s.io" && kind.starts_with("KamajiControlPlane") {
        return vec![
            ("cluster.x-k8s.io/v1beta2", "v1alpha2"),
            ("cluster.x-k8s.io/provider", "control-plane-kamaji"),
        ];
    }
    let served: Vec<&str> = crd
        .spec
        .versions
        .iter()
        .filter(|v| v.served)
        .map(|v| v.name.as_str())
        .collect();
    let provider = match group {
        "bootstrap.cluster.x-k8s.io" => "bootstrap-kubeadm",
        "controlplane.cluster.x-k8s.io" => "control-plane-kubeadm",
        g if g.ends_with("cluster.x-k8s.io") => "cluster-api",
        _ => return vec![],
    };
    let mut l = vec![("cluster.x-k8s.io/provider", provider)];
    if served.contains(&"v1beta2") {
        l.push(("cluster.x-k8s.io/v1beta2", "v1beta2"));
    }
    if served.contains(&"v1beta1") {
        l.push(("cluster.x-k8s.io/v1beta1", "v1beta1"));
    }
    l
}

/// Reads every `*.yaml` CRD in `dir`.
pub fn read_dir(dir: &Path) -> Result<Vec<CustomResourceDefinition>, Error> {
    let mut files: Vec<_> = std::fs::read_dir(dir)
        .map_err(|e| Error::Io {
            path: dir.to_path_buf(),
            source: e,
        })?
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|x| x == "yaml"))
        .collect();
    files.sort();
    let mut out = Vec::new();
    for f in files {
        let text = std::fs::read_to_string(&f).map_err(|e| Error::Io {
            path: f.clone(),
            source: e,
        })?;
        let docs: Vec<serde_json::Value> =
            serde_saphyr::from_multiple(&text).map_err(|e| Error::Crd {
                file: f.display().to_string(),
                msg: e.to_string(),
            })?;
        for doc in docs {
            if doc.is_null() {
                continue;
            }
            let mut crd: CustomResourceDefinition =
                serde_json::from_value(doc).map_err(|e| Error::Crd {
                    file: f.display().to_string(),
                    msg: e.to_string(),
                })?;
            let wanted = contract_labels(&crd);
            let labels = crd.metadata.labels.get_or_insert_with(Default::default);
            for (k, v) in wanted {
                labels.entry(k.to_string()).or_insert_with(|| v.to_string());
            }
            out.push(crd);
        }
    }
    Ok(out)
}

/// Applies the CRDs of `dir` (server-side) and waits until each is Established and every
/// served version is listed by discovery.
pub async fn install_dir(client: &Client, dir: &Path) -> Result<(), Error> {
    let crds = read_dir(dir)?;
    install(client, &crds).await
}

pub async fn install(client: &Client, crds: &[CustomResourceDefinition]) -> Result<(), Error> {
    use futures::{StreamExt, TryStreamExt};
    let api: Api<CustomResourceDefinition> = Api::all(client.clone());
    let pp = PatchParams::apply("capi-testbed").force();
    futures::stream::iter(crds)
        .map(|crd| {
            let (api, pp) = (api.clone(), pp.clone());
            async move {
                let name = crd.metadata.name.clone().unwrap_or_default();
                let mut body = crd.clone();
                body.status = None;
                let mut v = serde_json::to_value(&body).map_err(|e| Error::Crd {
                    file: name.clone(),
                    msg: e.to_string(),
                })?;
                v["apiVersion"] = "apiextensions.k8s.io/v1".into();
                v["kind"] = "CustomResourceDefinition".into();
                api.patch(&name, &pp, &Patch::Apply(&v)).await?;
                Ok::<_, Error>(())
            }
        })
        .buffer_unordered(16)
        .try_collect::<Vec<_>>()
        .await?;
    futures::stream::iter(crds)
        .map(|crd| wait_served(client, &api, crd))
        .buffer_unordered(16)
        .try_collect::<Vec<_>>()
        .await?;
    Ok(())
}

/// How long a CRD may take to be Established and discoverable. Seconds when the machine is
/// idle; a 2-core machine starting several testbeds at once (make test runs three binaries side
/// by side, and `two_real_testbeds_start_side_by_side` two real testbeds) took over 60 s once.
const SERVED_WITHIN: Duration = Duration::from_secs(180);

/// Waits until a CRD is Established and discovery lists every served version's plural.
async fn wait_served(
    client: &Client,
    api: &Api<CustomResourceDefinition>,
    crd: &CustomResourceDefinition,
) -> Result<(), Error> {
    let name = crd.metadata.name.clone().unwrap_or_default();
    let deadline = Instant::now() + SERVED_WITHIN;
    loop {
        let established = api
            .get_opt(&name)
            .await?
            .and_then(|c| c.status)
            .and_then(|s| s.conditions)
            .is_some_and(|cs| {
                cs.iter()
                    .any(|c| c.type_ == "Established" && c.status == "True")
            });
        let mut discovered = established;
        if established {
            for v in crd.spec.versions.iter().filter(|v| v.served) {
                let gv = format!("{}/{}", crd.spec.group, v.name);
                let listed = client
                    .list_api_group_resources(&gv)
                    .await
                    .map(|l| l.resources.iter().any(|r| r.name == crd.spec.names.plural))
                    .unwrap_or(false);
                discovered &= listed;
            }
        }
        if discovered {
            return Ok(());
        }
        if Instant::now() > deadline {
            return Err(Error::Crd {
                file: name,
                msg: format!(
                    "not established and discoverable after {}s",
                    SERVED_WITHIN.as_secs()
                ),
            });
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}
