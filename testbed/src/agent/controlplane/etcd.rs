//! The stacked etcd of SIMULATED control-plane hosts, as kubeadm manages its members (kubeadm
//! v1.36, `cmd/kubeadm/app/util/etcd/etcd.go` and `phases/etcd/local.go`): a joining host finds
//! the members from the etcd mirror Pods' `kubeadm.kubernetes.io/etcd.advertise-client-urls`
//! annotation (`NewFromCluster`), adds itself as a learner (`AddMemberAsLearner`), starts its
//! member with the full `--initial-cluster` and `--initial-cluster-state=existing`, and
//! promotes it once it runs (`MemberPromote`); `kubeadm reset` removes the host's member
//! (`RemoveStackedEtcdMemberFromCluster`) through another member.
//!
//! kubeadm speaks etcd's gRPC API with `apiserver-etcd-client`'s certificate; this speaks the
//! same calls through etcd's JSON gateway (`/v3/cluster/member/{list,add,promote,remove}`,
//! served on every client URL) with the same certificate, over kube's HTTPS stack. A member's
//! health is read from its metrics URL's `/health`, as kubeadm's etcd probes do.

use std::time::Duration;

use serde_json::{Value, json};

use super::certs::{self, Pair};

/// One call to a member may take this long.
const CALL_TIMEOUT: Duration = Duration::from_secs(5);

/// An etcd member as `member/list` reports it.
#[derive(Clone, Debug, PartialEq)]
pub(super) struct Member {
    /// The member ID (a uint64, as the gateway writes it: a decimal string).
    pub id: String,
    /// Empty for a member added but not started yet.
    pub name: String,
    pub peer_urls: Vec<String>,
    pub client_urls: Vec<String>,
    pub learner: bool,
}

/// The JSON gateway of one member.
pub(super) struct Gateway {
    client: kube::Client,
    pub url: String,
}

fn urls(v: &Value) -> Vec<String> {
    v.as_array()
        .map(|a| {
            a.iter()
                .filter_map(|u| u.as_str().map(String::from))
                .collect()
        })
        .unwrap_or_default()
}

fn id_of(v: &Value) -> Option<String> {
    match v {
        Value::String(s) => Some(s.clone()),
        Value::Number(n) => Some(n.to_string()),
        _ => None,
    }
}

pub(super) fn members_of(v: &Value) -> Vec<Member> {
    v["members"]
        .as_array()
        .map(|a| {
            a.iter()
                .filter_map(|m| {
                    Some(Member {
                        id: id_of(&m["ID"])?,
                        name: m["name"].as_str().unwrap_or_default().to_string(),
                        peer_urls: urls(&m["peerURLs"]),
                        client_urls: urls(&m["clientURLs"]),
                        learner: m["isLearner"].as_bool().unwrap_or(false),
                    })
                })
                .collect()
        })
        .unwrap_or_default()
}

impl Gateway {
    /// The gateway at `url` (`https://127.0.0.1:PORT`), as the holder of `pair` (signed by the
    /// etcd CA `ca_pem`). Dials nothing yet.
    pub(super) async fn new(url: &str, ca_pem: &str, pair: &Pair) -> Result<Gateway, String> {
        let server = url.trim_start_matches("https://").trim_end_matches('/');
        Ok(Gateway {
            client: certs::client(server, ca_pem, pair).await?,
            url: url.to_string(),
        })
    }

    async fn post(&self, path: &str, body: Value) -> Result<Value, String> {
        let req = http::Request::post(path)
            .header(http::header::CONTENT_TYPE, "application/json")
            .body(body.to_string().into_bytes())
            .map_err(|e| e.to_string())?;
        let text = tokio::time::timeout(CALL_TIMEOUT, self.client.request_text(req))
            .await
            .map_err(|_| format!("etcd {}{path}: no answer within {CALL_TIMEOUT:?}", self.url))?
            .map_err(|e| format!("etcd {}{path}: {e}", self.url))?;
        serde_json::from_str(&text).map_err(|e| format!("etcd {}{path}: {e}: {text}", self.url))
    }

    pub(super) async fn members(&self) -> Result<Vec<Member>, String> {
        let v = self
            .post("/v3/cluster/member/list", json!({"linearizable": true}))
            .await?;
        Ok(members_of(&v))
    }

    /// Adds a learner at `peer_url`: its ID and the members then (itself included, unnamed).
    pub(super) async fn add_learner(
        &self,
        peer_url: &str,
    ) -> Result<(String, Vec<Member>), String> {
        let v = self
            .post(
                "/v3/cluster/member/add",
                json!({"peerURLs": [peer_url], "isLearner": true}),
            )
            .await?;
        let id = id_of(&v["member"]["ID"]).ok_or_else(|| format!("member/add answered {v}"))?;
        Ok((id, members_of(&v)))
    }

    pub(super) async fn promote(&self, id: &str) -> Result<(), String> {
        self.post("/v3/cluster/member/promote", json!({"ID": id}))
            .await
            .map(|_| ())
    }

    pub(super) async fn remove(&self, id: &str) -> Result<(), String> {
        self.post("/v3/cluster/member/remove", json!({"ID": id}))
            .await
            .map(|_| ())
    }
}

/// The `--initial-cluster` of a joining member named `host` at `peer_url`, from the members
/// `member/add` returned (the new one unnamed), as kubeadm's `AddMember` builds it.
pub(super) fn initial_cluster(members: &[Member], host: &str, peer_url: &str) -> String {
    let mut out: Vec<String> = Vec::new();
    for m in members {
        let Some(url) = m.peer_urls.first() else {
            continue;
        };
        let name = if m.name.is_empty() && url == peer_url {
            host
        } else if m.name.is_empty() {
            continue;
        } else {
            m.name.as_str()
        };
        out.push(format!("{name}={url}"));
    }
    if !out.iter().any(|e| e.starts_with(&format!("{host}="))) {
        out.push(format!("{host}={peer_url}"));
    }
    out.join(",")
}

/// Whether the member whose metrics listen on `port` reports itself healthy (`GET /health`,
/// serializable, as kubeadm's etcd probe asks).
pub(super) async fn healthy(port: u16) -> bool {
    tokio::task::spawn_blocking(move || {
        crate::http_get_ok(port, "/health?exclude=NOSPACE&serializable=true")
    })
    .await
    .unwrap_or(false)
}

/// Promotes learner `id` through `gw` once it runs and has caught up (etcd refuses a learner
/// not in sync with the leader); up to `wait`.
pub(super) async fn promote_when_ready(
    gw: &Gateway,
    id: &str,
    wait: Duration,
) -> Result<(), String> {
    let deadline = std::time::Instant::now() + wait;
    loop {
        let err = match gw.members().await {
            Ok(ms) => match ms.iter().find(|m| m.id == id) {
                Some(m) if !m.learner => return Ok(()),
                Some(m) if m.name.is_empty() => format!("learner {id} has not started"),
                Some(_) => match gw.promote(id).await {
                    Ok(()) => return Ok(()),
                    Err(e) => e,
                },
                None => format!("member {id} is not in the cluster"),
            },
            Err(e) => e,
        };
        if std::time::Instant::now() > deadline {
            return Err(format!("promoting etcd learner {id}: {err}"));
        }
        tokio::time::sleep(Duration::from_millis(300)).await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_initial_cluster_names_the_new_member_after_its_host() {
        let added = json!({"member": {"ID": "22", "peerURLs": ["https://127.0.0.1:2"]},
            "members": [
                {"ID": "11", "name": "a", "peerURLs": ["https://127.0.0.1:1"], "clientURLs": ["https://127.0.0.1:3"]},
                {"ID": "22", "peerURLs": ["https://127.0.0.1:2"], "isLearner": true}]});
        let ms = members_of(&added);
        assert_eq!(ms.len(), 2);
        assert!(ms[1].learner && ms[1].name.is_empty());
        assert_eq!(
            initial_cluster(&ms, "b", "https://127.0.0.1:2"),
            "a=https://127.0.0.1:1,b=https://127.0.0.1:2"
        );
    }
}
