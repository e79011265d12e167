//! What goes when a BYOH host leaves for good: its ByoHost, its BootstrapKubeconfig, the
//! bootstrap token Secret BYOH issued with it (kube-system) and its agent's certificate request
//! (cluster-scoped). `hosts remove` takes one host out; `uninstall` takes every host out before
//! BYOH goes, since the token Secrets and CSRs live outside BYOH's namespace and CRDs.

use kclient::conn::Conn;
use kclient::error::Error;
use kcore::plan::hosts::removal;
use kube::discovery::ApiResource;

/// What goes for one host: each object that exists, by its resource, namespace and name.
pub struct HostRemoval {
    pub host: String,
    pub objects: Vec<(ApiResource, Option<String>, String)>,
}

impl HostRemoval {
    /// Reads what exists for host `name` in namespace `ns`: the ByoHost (when `host_ar` is given:
    /// the caller found it), the BootstrapKubeconfig and the token Secret it names (when BYOH
    /// serves BootstrapKubeconfigs, `bk_ar`), and the agent's CSR.
    pub async fn read(
        conn: &Conn,
        host_ar: Option<&ApiResource>,
        bk_ar: Option<&ApiResource>,
        ns: &str,
        name: &str,
    ) -> Result<HostRemoval, Error> {
        let mut objects = Vec::new();
        if let Some(ar) = host_ar {
            objects.push((ar.clone(), Some(ns.to_string()), name.to_string()));
        }
        if let Some(bk_ar) = bk_ar
            && let Some(bk) = kclient::api::get_json_opt(conn, bk_ar, Some(ns), name).await?
        {
            if let Some(token) = removal::token_secret(&bk) {
                let secrets = secret_ar();
                if kclient::api::get_json_opt(conn, &secrets, Some("kube-system"), &token)
                    .await?
                    .is_some()
                {
                    objects.push((secrets, Some("kube-system".into()), token));
                }
            }
            objects.push((bk_ar.clone(), Some(ns.to_string()), name.to_string()));
        }
        let csr = removal::csr_name(name);
        let csr_ar = csr_ar();
        if kclient::api::get_json_opt(conn, &csr_ar, None, &csr)
            .await?
            .is_some()
        {
            objects.push((csr_ar, None, csr));
        }
        Ok(HostRemoval {
            host: name.to_string(),
            objects,
        })
    }

    /// `byohost/h1 (namespace pool), secret/bootstrap-token-abc (namespace kube-system), …`.
    pub fn shown(&self) -> String {
        self.objects
            .iter()
            .map(|(ar, ns, name)| match ns {
                Some(ns) => format!("{}/{name} (namespace {ns})", ar.kind.to_lowercase()),
                None => format!("{}/{name}", ar.kind.to_lowercase()),
            })
            .collect::<Vec<_>>()
            .join(", ")
    }

    /// Deletes each object (`dry`: a server dry run); ones already gone are fine.
    pub async fn delete(&self, conn: &Conn, dry: bool) -> Result<(), Error> {
        for (ar, ns, name) in &self.objects {
            kclient::api::delete_if_present(conn, ar, ns.as_deref(), name, dry).await?;
        }
        Ok(())
    }
}

fn secret_ar() -> ApiResource {
    ApiResource::erase::<k8s_openapi::api::core::v1::Secret>(&())
}

fn csr_ar() -> ApiResource {
    ApiResource::erase::<k8s_openapi::api::certificates::v1::CertificateSigningRequest>(&())
}
