//! A client of another cluster from a kubeconfig's text (a workload cluster's, a tenant's admin
//! one, as kept in a Secret), with timeouts so a cluster that accepts connections but does not
//! answer cannot hang a command.

use std::time::Duration;

use kube::config::{KubeConfigOptions, Kubeconfig};

use crate::error::{ApiServer, Error, Op, from_kube};

/// How long connecting to the other cluster may take.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);

/// How long one of its answers may take.
const READ_TIMEOUT: Duration = Duration::from_secs(30);

/// A client of the cluster `text`'s current context names, and that cluster as errors name it
/// (`label`, e.g. `tenant demo`).
pub async fn client_of(text: &str, label: &str) -> Result<(kube::Client, ApiServer), Error> {
    let kc = Kubeconfig::from_yaml(text).map_err(|e| Error::Other {
        message: format!("the kubeconfig of {label} is not valid: {e}"),
        hint: None,
    })?;
    let mut config = kube::Config::from_custom_kubeconfig(kc, &KubeConfigOptions::default())
        .await
        .map_err(|e| Error::Other {
            message: format!("the kubeconfig of {label}: {e}"),
            hint: None,
        })?;
    config.connect_timeout = Some(CONNECT_TIMEOUT);
    config.read_timeout = Some(READ_TIMEOUT);
    let target = ApiServer {
        context: label.to_string(),
        // As the kubeconfig writes it: the URL without the path `/` a parsed URI gains.
        server: config
            .cluster_url
            .to_string()
            .trim_end_matches('/')
            .to_string(),
    };
    let client =
        kube::Client::try_from(config).map_err(|e| from_kube(e, &target, &Op::default()))?;
    Ok((client, target))
}
