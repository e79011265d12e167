//! A workload cluster's kubeconfig, from the Secret Cluster API keeps it in
//! (`<cluster>-kubeconfig`, key `value`): `kubeconfig` hands it to the user, `upgrade` reads the
//! cluster's API server with it.

use k8s_openapi::api::core::v1::Secret;
use kclient::conn::Conn;
use kclient::discovery::ServerApis;
use kclient::error::{Error, Op};
use kclient::kubeconfig;
use kube::api::Api;

/// Reads the kubeconfig of `cluster` in `ns` from its secret, with clear errors when it is
/// missing (control plane not initialized yet) or malformed; also returns the Secret,
/// `namespace/name`.
pub async fn read(conn: &Conn, ns: &str, cluster: &str) -> Result<(String, String), Error> {
    let secret_name = format!("{cluster}-kubeconfig");
    let api: Api<Secret> = Api::namespaced(conn.client.clone(), ns);
    let op = Op::new("get", "", "secrets", "Secret")
        .in_namespace(Some(ns))
        .named(&secret_name);
    let secret = api
        .get_opt(&secret_name)
        .await
        .map_err(|e| conn.error(e, &op))?;
    let Some(secret) = secret else {
        // Tell a missing cluster from one whose control plane is not up yet.
        let apis = ServerApis::discover(conn).await?;
        let cluster_ar = apis.cluster()?;
        let obj = kclient::api::get_or_suggest(conn, &cluster_ar, ns, cluster).await?;
        let json = kcore::fields::object_json(&obj);
        let initialized = kcore::fields::cluster_control_plane_initialized(&json);
        let message = if initialized {
            format!(
                "cluster \"{}\" has no kubeconfig: Secret {ns}/{secret_name} not found, although its control plane reports initialized",
                cluster
            )
        } else {
            format!(
                "cluster \"{}\" has no kubeconfig yet: its control plane is not initialized (Secret {ns}/{secret_name} not found)",
                cluster
            )
        };
        return Err(Error::Other {
            message,
            hint: Some(format!(
                "wait for the control plane (kubectl capi describe {} -n {ns}), then run this again",
                cluster
            )),
        });
    };
    let malformed = |why: &str| Error::Other {
        message: format!("Secret {ns}/{secret_name} is malformed: {why}"),
        hint: Some(format!(
            "the control-plane provider writes it; check it with kubectl get secret {secret_name} -n {ns} -o yaml"
        )),
    };
    let data = secret
        .data
        .as_ref()
        .and_then(|d| d.get("value"))
        .map(|b| b.0.clone())
        .ok_or_else(|| malformed("it has no key \"value\""))?;
    let text = String::from_utf8(data).map_err(|_| malformed("\"value\" is not UTF-8 text"))?;
    let parsed = kubeconfig::parse(&text, "\"value\"").map_err(|e| malformed(&e.to_string()))?;
    kubeconfig::check_entries(&parsed).map_err(|e| malformed(&e))?;
    Ok((text, format!("{ns}/{secret_name}")))
}
