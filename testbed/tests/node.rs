//! The testbed's real node (`Options::node`): the kubelet and kube-proxy v1.36.3 with Debian's
//! containerd, runc and CNI plugins. A Deployment scheduled by the real kube-scheduler runs from
//! the testbed's registry, its pod has its ServiceAccount token and reaches the API server
//! through the `kubernetes` Service, the host reaches the pod's own address (as the API server calls a
//! webhook), another pod finds its Service by name (CoreDNS) and reaches it there (kube-proxy),
//! and `pods/log` is served by the kubelet.

use std::io::Read;
use std::time::{Duration, Instant};

use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::{Namespace, Node, Pod, Service};
use kube::api::{Api, ListParams, LogParams, PostParams};
use serde_json::json;
use testbed::{Options, Profile, Testbed};

/// What the namespace's pods and events say, for a failure message.
async fn diagnose(client: &kube::Client, ns: &str) -> String {
    let mut out = String::new();
    if let Ok(pods) = Api::<Pod>::namespaced(client.clone(), ns)
        .list(&ListParams::default())
        .await
    {
        for p in pods.items {
            out.push_str(&format!(
                "pod {}: {}\n",
                p.metadata.name.unwrap_or_default(),
                serde_json::to_string(&p.status).unwrap_or_default()
            ));
        }
    }
    if let Ok(events) = Api::<k8s_openapi::api::core::v1::Event>::namespaced(client.clone(), ns)
        .list(&ListParams::default())
        .await
    {
        for e in events.items {
            out.push_str(&format!(
                "event {} {}: {}\n",
                e.reason.unwrap_or_default(),
                e.involved_object.name.unwrap_or_default(),
                e.message.unwrap_or_default()
            ));
        }
    }
    out
}

async fn poll<T, F, Fut>(
    client: &kube::Client,
    ns: &str,
    what: &str,
    limit: Duration,
    mut f: F,
) -> T
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Option<T>>,
{
    let deadline = Instant::now() + limit;
    loop {
        if let Some(v) = f().await {
            return v;
        }
        if Instant::now() > deadline {
            panic!(
                "{what}: not within {limit:?}\n{}",
                diagnose(client, ns).await
            );
        }
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_real_kubelet_runs_registry_pods_behind_services_with_logs() {
    let tb = Testbed::start(Options {
        profile: Profile::Bare,
        images: true,
        node: true,
        dir: std::env::var_os("NODE_TEST_DIR").map(Into::into),
        ..Default::default()
    })
    .await
    .unwrap();
    let info = tb.node.clone().expect("the node");
    let client = tb.client().await;

    // The Node as the kubelet registered it.
    let node = Api::<Node>::all(client.clone())
        .get(&info.name)
        .await
        .unwrap();
    let status = node.status.unwrap();
    assert_eq!(
        status.node_info.as_ref().unwrap().kubelet_version,
        "v1.36.3",
        "the kubelet built from the API server's module"
    );
    assert!(
        status
            .node_info
            .as_ref()
            .unwrap()
            .container_runtime_version
            .starts_with("containerd://1.6"),
        "{:?}",
        status.node_info
    );
    let addresses = status.addresses.unwrap_or_default();
    assert!(
        addresses
            .iter()
            .any(|a| a.type_ == "InternalIP" && a.address == info.address.to_string()),
        "{addresses:?}"
    );

    let ns = "node-test";
    Api::<Namespace>::all(client.clone())
        .create(
            &PostParams::default(),
            &serde_json::from_value(json!({"metadata": {"name": ns}})).unwrap(),
        )
        .await
        .unwrap();
    let script = r#"
echo "hello from $(busybox hostname)"
token=/var/run/secrets/kubernetes.io/serviceaccount/token
busybox test -s "$token" && echo "token mounted"
# busybox's TLS cannot talk to Go's; plain HTTP to the TLS port gets the API server's own answer.
printf 'GET /version HTTP/1.0\r\n\r\n' | busybox nc -w 5 "$KUBERNETES_SERVICE_HOST" "$KUBERNETES_SERVICE_PORT" | busybox tail -n 1
exec busybox nc -ll -p 8080 -e busybox echo pong
"#;
    let deploy: Deployment = serde_json::from_value(json!({
        "metadata": {"name": "pong", "namespace": ns},
        "spec": {"replicas": 1, "selector": {"matchLabels": {"app": "pong"}},
          "template": {"metadata": {"labels": {"app": "pong"}}, "spec": {"containers": [{
            "name": "pong", "image": info.busybox_image,
            "command": ["/bin/busybox", "sh", "-c", script],
            "ports": [{"containerPort": 8080}],
            "readinessProbe": {"tcpSocket": {"port": 8080}, "periodSeconds": 1}}]}}}
    }))
    .unwrap();
    let deployments: Api<Deployment> = Api::namespaced(client.clone(), ns);
    deployments
        .create(&PostParams::default(), &deploy)
        .await
        .unwrap();
    poll(
        &client,
        ns,
        "the Deployment Available",
        Duration::from_secs(120),
        || {
            let d = deployments.clone();
            async move {
                let d = d.get("pong").await.ok()?;
                (d.status?.available_replicas? == 1).then_some(())
            }
        },
    )
    .await;
    let pods: Api<Pod> = Api::namespaced(client.clone(), ns);
    let pod = pods
        .list(&ListParams::default().labels("app=pong"))
        .await
        .unwrap()
        .items
        .remove(0);
    let spec = pod.spec.clone().unwrap();
    assert_eq!(
        spec.node_name.as_deref(),
        Some(info.name.as_str()),
        "scheduled by kube-scheduler"
    );
    let ip = pod.status.and_then(|s| s.pod_ip).unwrap();
    let prefix = info.pod_cidr.trim_end_matches("0/24");
    assert!(ip.starts_with(prefix), "{ip} in {}", info.pod_cidr);

    // The host reaches the pod's own address, as the API server calls a webhook's endpoint.
    let mut answer = String::new();
    let mut s = std::net::TcpStream::connect_timeout(
        &format!("{ip}:8080").parse().unwrap(),
        Duration::from_secs(5),
    )
    .unwrap();
    s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    s.read_to_string(&mut answer).unwrap();
    assert_eq!(answer.trim(), "pong");

    // pods/log: the API server asks the kubelet, which reads containerd's log.
    let name = pod.metadata.name.clone().unwrap();
    let log = poll(
        &client,
        ns,
        "the pod's log",
        Duration::from_secs(30),
        || {
            let pods = pods.clone();
            let name = name.clone();
            async move {
                let l = match pods.logs(&name, &LogParams::default()).await {
                    Ok(l) => l,
                    Err(e) => {
                        eprintln!("pods/log: {e}");
                        return None;
                    }
                };
                l.contains("HTTPS server").then_some(l)
            }
        },
    )
    .await;
    assert!(log.contains(&format!("hello from {name}")), "{log}");
    assert!(log.contains("token mounted"), "{log}");
    assert!(
        log.contains("Client sent an HTTP request to an HTTPS server"),
        "the pod reached the API server through the kubernetes Service: {log}"
    );

    // Another pod finds its Service by name (cluster DNS: CoreDNS behind kube-dns) and reaches
    // it there (kube-proxy's rules to the EndpointSlice).
    let svc: Service = serde_json::from_value(json!({
        "metadata": {"name": "pong", "namespace": ns},
        "spec": {"selector": {"app": "pong"}, "ports": [{"port": 80, "targetPort": 8080}]}
    }))
    .unwrap();
    let svc = Api::<Service>::namespaced(client.clone(), ns)
        .create(&PostParams::default(), &svc)
        .await
        .unwrap();
    let cluster_ip = svc.spec.unwrap().cluster_ip.unwrap();
    let client_pod: Pod = serde_json::from_value(json!({
        "metadata": {"name": "ping", "namespace": ns},
        "spec": {"restartPolicy": "OnFailure", "containers": [{
            "name": "ping", "image": info.busybox_image,
            "command": ["/bin/busybox", "sh", "-c",
                        format!("busybox nslookup pong.{ns}.svc.cluster.local | busybox grep -q {cluster_ip} && echo | busybox nc -w 5 pong 80 | busybox grep pong")]}]}
    }))
    .unwrap();
    pods.create(&PostParams::default(), &client_pod)
        .await
        .unwrap();
    poll(
        &client,
        ns,
        "the Service's client pod Succeeded",
        Duration::from_secs(90),
        || {
            let pods = pods.clone();
            async move {
                let p = pods.get("ping").await.ok()?;
                (p.status?.phase? == "Succeeded").then_some(())
            }
        },
    )
    .await;
    let log = pods.logs("ping", &LogParams::default()).await.unwrap();
    assert_eq!(log.trim(), "pong");
}
