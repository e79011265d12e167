//! `upgrade`: planned and applied by the CLI and resumed after an interruption; handed to the
//! reconciler; a fleet in waves that stops at a failure.

use crate::common::*;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn upgrade_plans_applies_and_resumes_after_an_interruption() {
    let s = Story::start("upgrade").await;
    let ns = &s.ns;
    let _players = upgradable_cluster(&s).await;

    // The plan: minor by minor, control plane first, then the deployment.
    let plan = out(&s.ok(&words("upgrade up --to v1.35.2 --plan")));
    for line in [
        "Upgrade plan for cluster NS/up: v1.33.5 -> v1.35.2 (path: v1.34.3, v1.35.2)",
        "Step 1/4 [to do]: KubeadmControlPlane/up-control-plane v1.33.5 -> v1.34.3",
        "Step 2/4 [to do]: MachineDeployment/up-md-0 v1.33.5 -> v1.34.3",
        "Step 3/4 [to do]: KubeadmControlPlane/up-control-plane v1.34.3 -> v1.35.2",
        "Step 4/4 [to do]: MachineDeployment/up-md-0 v1.34.3 -> v1.35.2",
    ] {
        let line = line.replace("NS", ns);
        assert!(plan.contains(&line), "missing {line:?} in:\n{plan}");
    }
    assert_contains(&plan, "/spec/version: \"v1.33.5\" -> \"v1.34.3\"");
    assert_contains(&plan, "spare hosts: needs 1 matching");
    // Crossing two minors, the preflight read the workload cluster's (the testbed's) count of
    // deprecated APIs its clients call, through the cluster's kubeconfig Secret: none it could
    // not read, and none v1.35 removes.
    assert_lacks(&plan, "were not checked");
    assert_lacks(&plan, "deprecated API");
    let o = s.run(&words("upgrade up --to v1.35.2 --plan -o json"));
    let v: Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(v["steps"].as_array().unwrap().len(), 4);
    assert_eq!(v["doneSteps"], json!([]));

    // Bad input: one clear line each.
    let o = s.fails(2, &words("upgrade up --to v2.0.0 --plan"));
    assert_eq!(
        first_line(&o),
        "error: invalid Kubernetes version \"v2.0.0\": only Kubernetes 1.x is released"
    );
    let o = s.fails(2, &words("upgrade up --to v1.35 --plan"));
    assert!(
        err(&o).starts_with("error: invalid Kubernetes version \"v1.35\": not semver"),
        "{}",
        err(&o)
    );
    let o = s.fails(1, &words("upgrade up --to v1.32.9 --plan"));
    assert_eq!(
        first_line(&o),
        "error: KubeadmControlPlane/up-control-plane is at v1.33.5; v1.32.9 would be a downgrade, which Kubernetes does not support"
    );
    let o = s.fails(1, &words("upgrade upp --to v1.34.3"));
    assert_contains(&err(&o), "did you mean \"up\"?");
    // No terminal, no --yes.
    let o = s.fails(2, &words("upgrade up --to v1.34.3"));
    assert_contains(&err(&o), "pass --yes");

    // Apply, and kill the command once the second step (the workers to v1.34.3) has started.
    let apply = "upgrade up --to v1.35.2 --yes --client-side --timeout 150s";
    let mut first = Background::plugin_in(BIN, &s.tb.kubeconfig, ns, &words(apply));
    eventually(
        "the workers' upgrade to v1.34.3 to start",
        Duration::from_secs(120),
        async || md_version(&s).await == "v1.34.3",
    )
    .await;
    first.child.kill().unwrap();
    let status = first.child.wait().unwrap();
    assert!(!status.success(), "the first run was interrupted");
    assert_contains(
        &first.stdout(),
        "step 1/4: KubeadmControlPlane up-control-plane to v1.34.3: done",
    );
    assert_lacks(&first.stdout(), "upgraded to");
    assert_eq!(kcp_version(&s, "up").await, "v1.34.3");

    // Run it again: it resumes (step 1 is not redone) and finishes.
    let o = s.ok(&words(apply));
    let second = out(&o);
    assert_lacks(&second, "KubeadmControlPlane up-control-plane to v1.34.3");
    for done in [
        "resuming: ",
        "KubeadmControlPlane up-control-plane to v1.35.2: done",
        "MachineDeployment up-md-0 to v1.35.2: done",
        "cluster up upgraded to v1.35.2 in ",
    ] {
        assert_contains(&second, done);
    }
    // The progress (stderr, not a terminal) is a line per change naming the step
    // under way, what is left of it and what the cluster runs; no step counted from 0, no
    // line twice in a row, and one closing line.
    let progress = err(&o);
    assert!(
        progress.contains("MachineDeployment up-md-0 to v1.35.2: ")
            && progress.contains("; the cluster runs v1.35.2"),
        "{progress}"
    );
    assert_lacks(&progress, "step 0/");
    let lines: Vec<&str> = progress.lines().collect();
    for w in lines.windows(2) {
        assert_ne!(w[0], w[1], "a line repeated:\n{progress}");
    }
    let closing = second
        .lines()
        .chain(progress.lines())
        .filter(|l| l.contains("upgraded"))
        .count();
    assert_eq!(closing, 1, "{second}\n{progress}");
    assert_eq!(kcp_version(&s, "up").await, "v1.35.2");
    let machines = s.of_cluster(&machine_ar(), "up").await;
    assert_eq!(machines.len(), 1);
    assert_eq!(machines[0].data["spec"]["version"], "v1.35.2");
    // A third run has nothing to do.
    let o = s.ok(&words("upgrade up --to v1.35.2 --yes"));
    assert_contains(&out(&o), "already runs v1.35.2; nothing to do");
}

/// `kubectl capi upgrade --to` hands a two-minor upgrade to the reconciler. The CLI is
/// killed at once and the upgrade still completes, control plane first per minor; the reconciler
/// is killed (SIGKILL) mid-step and resumes at that step, no step applied twice; the status plan
/// is the `--plan` output; a second upgrade is refused in one line, by the CLI and by the API.
/// With the real CAPI and BYOH managers; the KubeadmControlPlane provider and the kubelets are
/// played as in the test above (SIMULATED).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn upgrade_runs_in_the_reconciler() {
    let s = Story::start("cu").await;
    let (tb, ns) = (s.tb, &s.ns);
    let _players = upgradable_cluster(&s).await;
    install_crds(&s.client).await;
    let log = tb.dir.join(format!("reconciler-{ns}.log"));
    let mut rec = Some(start_reconciler(tb, ns, &log));

    // The plan the CLI prints, to compare with the one the reconciler records.
    let o = s.ok(&words("upgrade up --to v1.35.2 --plan -o json"));
    let cli_plan: Value = serde_json::from_slice(&o.stdout).unwrap();

    // Hand it over with --wait, and kill the CLI as soon as the ClusterUpgrade exists.
    let cli = Background::plugin_in(
        BIN,
        &tb.kubeconfig,
        ns,
        &words("upgrade up --to v1.35.2 --yes --wait"),
    );
    let cus = s.api(&cu_ar());
    eventually("the ClusterUpgrade", Duration::from_secs(60), async || {
        cus.get_opt("up").await.unwrap().is_some()
    })
    .await;
    drop(cli);

    // Record the versions as they change: the control plane must lead each minor.
    let versions = {
        let (kcps, mds) = (s.api(&kcp_ar()), s.api(&md_ar()));
        record(Duration::from_millis(200), move || {
            let (kcps, mds) = (kcps.clone(), mds.clone());
            async move {
                let (k, m) = (kcps.get("up-control-plane").await, mds.get("up-md-0").await);
                let (k, m) = (k.ok()?, m.ok()?);
                Some((
                    k.data["spec"]["version"].as_str().unwrap_or("").to_string(),
                    m.data["spec"]["template"]["spec"]["version"]
                        .as_str()
                        .unwrap_or("")
                        .to_string(),
                ))
            }
        })
    };

    // A second upgrade is refused: by the CLI in one line, and by the API server itself.
    let o = s.fails(1, &words("upgrade up --to v1.34.3 --yes"));
    assert!(
        first_line(&o)
            .starts_with("error: cluster up already has an upgrade under way: to v1.35.2"),
        "{}",
        err(&o)
    );
    let second = DynamicObject::new("up-again", &cu_ar())
        .within(ns)
        .data(json!({"spec": {"clusterName": "up", "version": "v1.34.3"}}));
    let refused = cus
        .create(&Default::default(), &second)
        .await
        .expect_err("a second ClusterUpgrade of the same cluster");
    assert!(refused.to_string().contains("one per cluster"), "{refused}");

    // Kill the reconciler while the workers' first step rolls, then start it again. "Rolls":
    // its patch sent and logged, not only recorded (the status names a step before its patch
    // goes out, so a kill right after that record could fall before the log line this test
    // counts below; CI saw "step 2 applied 0 times" that way).
    eventually(
        "step 2 (the workers to v1.34.3) applied and rolling",
        Duration::from_secs(180),
        async || {
            let cu = cus.get("up").await.unwrap();
            let logged = std::fs::read_to_string(&log).is_ok_and(|t| {
                t.lines()
                    .any(|l| l.contains("applied") && l.contains("step=2 "))
            });
            cu.data["status"]["currentSteps"] == json!([2]) && logged
        },
    )
    .await;
    let before = cus.get("up").await.unwrap().data["status"].clone();
    drop(rec.take());
    assert_eq!(before["steps"][0]["phase"], "Succeeded", "{before}");
    rec = Some(start_reconciler(tb, ns, &log));
    eventually(
        "the upgrade to succeed",
        Duration::from_secs(300),
        async || cus.get("up").await.unwrap().data["status"]["phase"] == "Succeeded",
    )
    .await;
    let seen = versions.stop();
    drop(rec.take());
    let after = cus.get("up").await.unwrap().data["status"].clone();

    // The status plan is the CLI's plan.
    let pick = |steps: &Value| pluck(steps, &["number", "target", "fromVersion", "toVersion"]);
    assert_eq!(pick(&after["plan"]), pick(&cli_plan["steps"]), "{after}");
    assert_eq!(after["progress"], "4/4", "{after}");
    // Resumed at the right step: step 1 kept its times, step 2 kept its start.
    assert_eq!(after["steps"][0], before["steps"][0], "{after}");
    assert_eq!(
        after["steps"][1]["startedAt"], before["steps"][1]["startedAt"],
        "{after}"
    );
    // No step applied twice, across both reconcilers' logs.
    let text = std::fs::read_to_string(&log).unwrap();
    for n in 1..=4 {
        let applied = text
            .lines()
            .filter(|l| l.contains("applied") && l.contains(&format!("step={n} ")))
            .count();
        assert_eq!(applied, 1, "step {n} applied {applied} times:\n{text}");
    }
    // Control plane first per minor, never a worker ahead of it.
    let order: Vec<(String, String)> = vec![
        ("v1.34.3".into(), "v1.33.5".into()),
        ("v1.34.3".into(), "v1.34.3".into()),
        ("v1.35.2".into(), "v1.34.3".into()),
        ("v1.35.2".into(), "v1.35.2".into()),
    ];
    let tail: Vec<_> = seen
        .iter()
        .skip_while(|p| p.0 == "v1.33.5")
        .cloned()
        .collect();
    // The sampler polls, so under load it can miss a short-lived state (CI once missed the
    // control plane at v1.35.2 with the workers still at v1.34.3). What it saw must be the
    // expected states in order, never one outside them, ending at the target; the order of
    // the steps themselves comes from the times the reconciler recorded in status.
    let mut expected = order.iter();
    assert!(
        tail.iter().all(|p| expected.any(|o| o == p)),
        "states out of order or unexpected: {seen:?}"
    );
    assert_eq!(tail.last(), order.last(), "{seen:?}");
    let steps = after["steps"].as_array().unwrap();
    for w in steps.windows(2) {
        let (done, next) = (&w[0]["completedAt"], &w[1]["startedAt"]);
        assert!(
            done.as_str().unwrap() <= next.as_str().unwrap(),
            "a step started before the one before it completed: {after}"
        );
    }
    let machines = s.of_cluster(&machine_ar(), "up").await;
    assert!(
        machines
            .iter()
            .all(|m| m.data["spec"]["version"] == "v1.35.2")
    );

    // `upgrade status` shows it; a finished upgrade cannot be paused.
    let o = s.ok(&["upgrade", "status", "up"]);
    assert_contains(
        &out(&o),
        &format!("Upgrade of cluster {ns}/up to v1.35.2: Succeeded (step 4/4)"),
    );
    let o = s.fails(1, &["upgrade", "pause", "up"]);
    assert_contains(&err(&o), "has ended");
}

/// A FleetUpgrade over 4 clusters with canary 1 and max-parallel 2 upgrades the
/// canary alone, then two at a time, then the last; over 3 other clusters, a cluster whose
/// upgrade fails (no spare host for its control plane's rolling step) stops the waves, and the
/// failure is named in status and by the CLI. The KubeadmControlPlane provider is played as
/// above (SIMULATED); the clusters have no workers, so each ClusterUpgrade is its
/// control-plane steps and an empty MachineDeployment's.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fleet_upgrade_in_waves_stops_at_a_failure() {
    let s = Story::start("fleet").await;
    let (tb, client, ns) = (s.tb, &s.client, &s.ns);
    let _kcp = tasks(vec![tokio::spawn(play_kcp(client.clone(), ns.clone()))]);
    let (staging, prod) = (["a0", "a1", "a2", "a3"], ["b0", "b1", "b2"]);
    for (name, env) in staging
        .map(|n| (n, "staging"))
        .into_iter()
        .chain(prod.map(|n| (n, "prod")))
    {
        make_cluster(client, ns, name, 0, &tb.kubeconfig).await;
        let labels = json!({"metadata": {"labels": {"env": env}}});
        s.api(&cluster_ar())
            .patch(name, &PatchParams::default(), &Patch::Merge(labels))
            .await
            .unwrap();
    }
    // Spare control-plane hosts for the rolling steps' preflight (no machine claims them: the
    // control planes are played).
    register_then_stop(tb, client, pool(ns, "c", 2, "control-plane")).await;
    // b1's control plane moves to a template whose hosts do not exist: its preflight finds no
    // spare host and its upgrade fails.
    let infra = "infrastructure.cluster.x-k8s.io";
    apply(
        client,
        ns,
        bmt_ar(),
        json!({"apiVersion": format!("{infra}/v1beta1"), "kind": "ByoMachineTemplate",
               "metadata": {"name": "b1-gpu"},
               "spec": {"template": {"spec": {"selector": {"matchLabels": {"pool": ns, "role": "gpu"}}}}}}),
    )
    .await;
    s.api(&kcp_ar())
        .patch(
            "b1-control-plane",
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"machineTemplate": {"spec": {"infrastructureRef": {"name": "b1-gpu"}}}}})),
        )
        .await
        .unwrap();
    install_crds(client).await;
    let log = tb.dir.join(format!("reconciler-{ns}.log"));
    let _rec = start_reconciler(tb, ns, &log);

    // The waves, planned by the CLI.
    let o = s.ok(&words(
        "upgrade -l env=staging --to v1.35.2 --canary 1 --max-parallel 2 --plan -o json",
    ));
    let v: Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(
        pluck(&v["clusters"], &["name", "wave"]),
        json!([["a0", 1], ["a1", 2], ["a2", 2], ["a3", 3]])
    );

    // Watch the ClusterUpgrades while the fleet runs.
    let phases = {
        let cus = s.api(&cu_ar());
        record(Duration::from_millis(100), move || {
            let cus = cus.clone();
            async move {
                let l = cus.list(&ListParams::default()).await.ok()?;
                let phases: Vec<(String, String)> = l
                    .items
                    .iter()
                    .map(|c| {
                        (
                            c.metadata.name.clone().unwrap_or_default(),
                            c.data["status"]["phase"].as_str().unwrap_or("").to_string(),
                        )
                    })
                    .collect();
                Some(phases)
            }
        })
    };
    let o = s.run(&words(
        "upgrade -l env=staging --to v1.35.2 --canary 1 --max-parallel 2 --yes --wait --timeout 240s",
    ));
    let samples = phases.stop();
    let tail = |log: &Path| {
        let t = std::fs::read_to_string(log).unwrap_or_default();
        let l: Vec<&str> = t.lines().collect();
        l[l.len().saturating_sub(40)..].join("\n")
    };
    assert!(
        o.status.success(),
        "stdout: {}\nstderr: {}\nreconciler:\n{}",
        out(&o),
        err(&o),
        tail(&log)
    );
    assert_contains(&out(&o), "wave 3: cluster a3: Succeeded");
    let phase_in =
        |s: &[(String, String)], n: &str| s.iter().find(|(x, _)| x == n).map(|(_, p)| p.clone());
    let mut saw_canary_alone = false;
    for s in &samples {
        let running = s.iter().filter(|(_, p)| p != "Succeeded").count();
        assert!(running <= 2, "more than 2 clusters at once: {s:?}");
        if s.iter().any(|(n, _)| n == "a1" || n == "a2") {
            assert_eq!(phase_in(s, "a0").as_deref(), Some("Succeeded"), "{s:?}");
        } else if s.iter().any(|(n, _)| n == "a0") {
            saw_canary_alone = true;
        }
        if s.iter().any(|(n, _)| n == "a3") {
            assert_eq!(phase_in(s, "a1").as_deref(), Some("Succeeded"), "{s:?}");
            assert_eq!(phase_in(s, "a2").as_deref(), Some("Succeeded"), "{s:?}");
        }
    }
    assert!(saw_canary_alone, "{samples:?}");
    for name in staging {
        assert_eq!(kcp_version(&s, name).await, "v1.35.2", "{name}");
    }
    let fleet_ar = ar(
        "ops.capi-kamaji.io",
        "v1alpha1",
        "FleetUpgrade",
        "fleetupgrades",
    );
    let f = s.get(&fleet_ar, "upgrade-to-v1-35-2").await;
    assert_eq!(f.data["status"]["phase"], "Succeeded");
    assert_eq!(f.data["status"]["progress"], "4/4");

    // The failing fleet: b0 (canary) upgrades, b1 fails, b2 never starts.
    let o = s.fails(
        1,
        &words(
            "upgrade -l env=prod --to v1.35.2 --canary 1 --max-parallel 1 --name prod --yes --wait --timeout 240s",
        ),
    );
    let line = error_line(&o);
    assert!(
        line.starts_with("error: fleet upgrade prod stopped: cluster b1 failed:")
            && line.contains("spare host"),
        "{line}"
    );
    let f = s.get(&fleet_ar, "prod").await;
    assert_eq!(f.data["status"]["phase"], "Failed");
    assert_eq!(f.data["status"]["failedCluster"], "b1");
    let cus = s.api(&cu_ar());
    assert_eq!(
        cus.get("b0").await.unwrap().data["status"]["phase"],
        "Succeeded"
    );
    assert!(
        cus.get_opt("b2").await.unwrap().is_none(),
        "b2 must not start"
    );
    // A second fleet of the same name is refused in one line.
    let o = s.fails(
        1,
        &words("upgrade -l env=prod --to v1.35.2 --name prod --yes"),
    );
    assert!(
        err(&o).starts_with(&format!("error: FleetUpgrade {ns}/prod already exists")),
        "{}",
        err(&o)
    );

    // Pause, resume and cancel: a finished ClusterUpgrade given a new version while paused (as
    // `kubectl patch` could) is planned again but starts nothing; `resume` lets it run to the
    // end; `cancel` ends another one.
    for name in ["a0", "a1"] {
        cus.patch(
            name,
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"version": "v1.36.0", "paused": true}})),
        )
        .await
        .unwrap();
    }
    let phases_are = async |a0: &str, a1: &str| {
        let phase = async |n| s.get(&cu_ar(), n).await.data["status"]["phase"].clone();
        phase("a0").await == a0 && phase("a1").await == a1
    };
    eventually(
        "both planned and paused",
        Duration::from_secs(60),
        async || phases_are("Paused", "Paused").await,
    )
    .await;
    tokio::time::sleep(Duration::from_secs(2)).await;
    assert_eq!(
        kcp_version(&s, "a0").await,
        "v1.35.2",
        "paused: nothing started"
    );
    s.ok(&["upgrade", "resume", "a0"]);
    let o = s.ok(&["upgrade", "cancel", "a1", "--yes"]);
    assert_contains(&out(&o), "upgrade of cluster a1 cancelled");
    eventually(
        "a0 upgraded, a1 cancelled",
        Duration::from_secs(120),
        async || phases_are("Succeeded", "Cancelled").await,
    )
    .await;
    assert_eq!(
        kcp_version(&s, "a1").await,
        "v1.35.2",
        "cancelled before any step"
    );
    let o = s.ok(&["upgrade", "status"]);
    let table = out(&o);
    assert!(
        table
            .lines()
            .any(|l| l.contains("a0") && l.contains("v1.36.0") && l.contains("Succeeded")),
        "{table}"
    );
    assert!(
        table
            .lines()
            .any(|l| l.contains("a1") && l.contains("Cancelled")),
        "{table}"
    );
}

/// The version of cluster `cluster`'s control plane.
async fn kcp_version(s: &Story, cluster: &str) -> Value {
    let kcp = s.get(&kcp_ar(), &format!("{cluster}-control-plane")).await;
    kcp.data["spec"]["version"].clone()
}

/// The version of cluster up's workers.
async fn md_version(s: &Story) -> Value {
    let md = s.get(&md_ar(), "up-md-0").await;
    md.data["spec"]["template"]["spec"]["version"].clone()
}
