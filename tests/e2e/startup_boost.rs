//! AEP-7862's CPU startup boost for a scoped VPA on the real apiserver:
//! `nodescope serve --feature-gates=CPUStartupBoost=true` gives a new
//! DaemonSet pod its zone's group CPU times the factor (limits in
//! proportion, upstream's `vpaCpuStartupBoost/<container>` annotation with
//! the original resources); `nodescope update --feature-gates=...` leaves
//! it boosted until `durationSeconds` after the pod became Ready, then
//! resizes it in place to the group's value and removes the annotation.
//! The step plays the kubelet (Running, Ready, actuated resources), as
//! the `update` step does.

use crate::support::cluster::{apply, apply_status, FIELD_MANAGER};
use crate::support::nodescope as ns;
use crate::support::{eventually, ControlPlane};
use crate::update::{spec_of, updater_in, webhook_lease_in};
use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, PostParams};
use kube::Client;
use serde_json::{json, Value};
use std::time::Duration;

const NS: &str = "e2e-boost";
const LIMIT: Duration = Duration::from_secs(30);
const GATE: &str = "--feature-gates=CPUStartupBoost=true";
/// (node, zone)
const NODES: [(&str, &str); 2] = [("e2e-boost-n1", "zx"), ("e2e-boost-n2", "zy")];
/// How long the boost lasts after Ready.
const DURATION: u64 = 6;

fn vpa() -> Value {
    json!({"apiVersion": "autoscaling.k8s.io/v1", "kind": "VerticalPodAutoscaler",
        "metadata": {"name": "agent", "namespace": NS},
        "spec": {"targetRef": {"apiVersion": "apps/v1", "kind": "DaemonSet", "name": "agent"},
            "scope": "topology.kubernetes.io/zone", "updatePolicy": {"updateMode": "InPlaceOrRecreate"},
            "startupBoost": {"cpu": {"type": "Factor", "factor": 3, "durationSeconds": DURATION}}},
        "status": {"recommendationGroups": [
            {"scopeValue": "zx", "containerRecommendations": [{"containerName": "agent", "target": {"cpu": "200m", "memory": "128Mi"}}]},
            {"scopeValue": "zy", "containerRecommendations": [{"containerName": "agent", "target": {"cpu": "100m", "memory": "64Mi"}}]}]}})
}

fn daemonset() -> Value {
    json!({"apiVersion": "apps/v1", "kind": "DaemonSet", "metadata": {"name": "agent", "namespace": NS},
        "spec": {"selector": {"matchLabels": {"app": "agent"}},
            "template": {"metadata": {"labels": {"app": "agent"}},
                "spec": {"containers": [{"name": "agent", "image": "registry.example/agent:1",
                    "resources": {"requests": {"cpu": "100m", "memory": "100Mi"}, "limits": {"cpu": "200m", "memory": "200Mi"}}}]}}},
        "status": {"desiredNumberScheduled": 2, "currentNumberScheduled": 2, "numberMisscheduled": 0, "numberReady": 2}})
}

/// The pod as the DaemonSet controller posts it, bound to `node`.
fn pod(node: &str, uid: &str) -> Value {
    json!({"apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": format!("agent-{node}"), "namespace": NS, "labels": {"app": "agent"},
            "ownerReferences": [{"apiVersion": "apps/v1", "kind": "DaemonSet", "name": "agent", "uid": uid, "controller": true}]},
        "spec": {"nodeName": node, "containers": [{"name": "agent", "image": "registry.example/agent:1",
            "resources": {"requests": {"cpu": "100m", "memory": "100Mi"}, "limits": {"cpu": "200m", "memory": "200Mi"}}}]}})
}

/// The kubelet's status: Running, Ready since `ready`, the spec's resources
/// actuated.
async fn running(client: &Client, pods: &Api<Pod>, name: &str, ready: &str) {
    let stored = pods
        .get(name)
        .await
        .unwrap_or_else(|e| panic!("{name}: {e}"));
    let resources = stored
        .spec
        .and_then(|s| s.containers.into_iter().next())
        .and_then(|c| c.resources);
    apply_status(client, &json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": NS},
        "status": {"phase": "Running", "startTime": ready,
            "conditions": [{"type": "Ready", "status": "True", "lastTransitionTime": ready}],
            "containerStatuses": [{"name": "agent", "image": "registry.example/agent:1", "imageID": "", "ready": true,
                "restartCount": 0, "state": {"running": {"startedAt": ready}},
                "resources": serde_json::to_value(resources).unwrap_or_default()}]}})).await;
}

async fn boost_annotation(pods: &Api<Pod>, name: &str) -> Option<String> {
    pods.get(name)
        .await
        .ok()?
        .metadata
        .annotations?
        .get("vpaCpuStartupBoost/agent")
        .cloned()
}

/// The plan's (action, message) of `name`, with the gate.
fn plan_of(name: &str) -> (String, String) {
    crate::update::plan_row(NS, name, &[GATE])
}

pub async fn run(plane: &ControlPlane) {
    let client = plane.client().await;
    apply(
        &client,
        &json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NS}}),
    )
    .await;
    for (node, zone) in NODES {
        apply(
            &client,
            &json!({"apiVersion": "v1", "kind": "Node",
            "metadata": {"name": node, "labels": {"topology.kubernetes.io/zone": zone}}}),
        )
        .await;
        apply_status(
            &client,
            &json!({"apiVersion": "v1", "kind": "Node", "metadata": {"name": node},
            "status": {"capacity": {"cpu": "8", "memory": "16Gi", "pods": "110"},
                "allocatable": {"cpu": "8", "memory": "16Gi", "pods": "110"}}}),
        )
        .await;
    }
    webhook_lease_in(&client, NS, 0).await;
    let uid = apply(&client, &daemonset())
        .await
        .metadata
        .uid
        .unwrap_or_default();
    apply_status(&client, &daemonset()).await;
    apply(&client, &vpa()).await;
    apply_status(&client, &vpa()).await;

    let server = ns::start(plane, &[GATE]).await;
    let config = ns::webhook_configuration("mutating.yaml", "e2e-startup-boost", &server);
    apply(&client, &config).await;
    let pods: Api<Pod> = Api::namespaced(client.clone(), NS);
    let create = |node: &'static str| {
        let pods = pods.clone();
        let uid = uid.clone();
        async move {
            let object: Pod =
                serde_json::from_value(pod(node, &uid)).unwrap_or_else(|e| panic!("{e}"));
            let params = PostParams {
                field_manager: Some(FIELD_MANAGER.to_owned()),
                ..PostParams::default()
            };
            pods.create(&params, &object)
                .await
                .unwrap_or_else(|e| panic!("{node}: {e}"))
        }
    };
    // The webhook configuration reaches the admission chain through an
    // informer: until then a pod comes back unmutated and is made again.
    let first = eventually("a pod boosted by nodescope", LIMIT, || async {
        let p = create(NODES[0].0).await;
        let name = p.metadata.name.clone().unwrap_or_default();
        if p.metadata
            .annotations
            .as_ref()
            .is_some_and(|a| a.contains_key("vpaCpuStartupBoost/agent"))
        {
            Some(name)
        } else {
            let _ = pods.delete(&name, &Default::default()).await;
            tokio::time::sleep(Duration::from_millis(300)).await;
            None
        }
    })
    .await;
    let second = create(NODES[1].0).await.metadata.name.unwrap_or_default();
    // zx: 200m x 3, the limit keeps the pod's 2:1; zy: 100m x 3.
    let boosted = [
        ("600m", "128Mi", "1200m", "256Mi"),
        ("300m", "64Mi", "600m", "128Mi"),
    ];
    let original =
        r#"{"requests":{"cpu":"100m","memory":"100Mi"},"limits":{"cpu":"200m","memory":"200Mi"}}"#;
    for (name, want) in [(&first, boosted[0]), (&second, boosted[1])] {
        let got = spec_of(&pods, name).await;
        assert_eq!(
            (
                got.0.as_str(),
                got.1.as_str(),
                got.2.as_str(),
                got.3.as_str()
            ),
            want,
            "{name}"
        );
        assert_eq!(
            boost_annotation(&pods, name).await.as_deref(),
            Some(original),
            "{name}"
        );
        println!(
            "  {name}: stored boosted, {} cpu (its group's times 3), limit {}",
            want.0, want.2
        );
    }

    // Ready now: the boost lasts DURATION seconds from here.
    let ready = k8s_openapi::jiff::Timestamp::now().to_string();
    for name in [&first, &second] {
        running(&client, &pods, name, &ready).await;
    }
    let (action, reason) = plan_of(&first);
    assert_eq!(action, "deferred", "{reason}");
    assert!(
        reason.starts_with("CPU startup boost in progress"),
        "{reason}"
    );
    println!("  update --plan before durationSeconds: deferred ({reason})");
    // The boost ends DURATION seconds after Ready: wait for the plan to say
    // so, not for the clock.
    let first_pod = first.clone();
    let (action, reason) = eventually(
        "the plan's unboost after durationSeconds",
        Duration::from_secs(DURATION + 30),
        || {
            let first_pod = first_pod.clone();
            async move {
                let (action, reason) = plan_of(&first_pod);
                (action != "deferred").then_some((action, reason))
            }
        },
    )
    .await;
    assert_eq!(action, "resize", "{reason}");
    assert!(reason.starts_with("unboost: "), "{reason}");
    println!("  update --plan after durationSeconds: resize ({reason})");

    let port = crate::support::free_port();
    let mut updater = updater_in(NS, "e2e-boost-updater", port, &[GATE]);
    // Two pods, --eviction-tolerance 0.5: one unboost at a time; the step
    // actuates each as the kubelet would, which frees the next.
    let unboosted = [
        ("200m", "128Mi", "400m", "256Mi"),
        ("100m", "64Mi", "200m", "128Mi"),
    ];
    let mut done: Vec<String> = Vec::new();
    while done.len() < 2 {
        let name = eventually("an unboost", LIMIT, || {
            let pods = pods.clone();
            let done = done.clone();
            let (first, second) = (first.clone(), second.clone());
            async move {
                for name in [first, second] {
                    if !done.contains(&name) && boost_annotation(&pods, &name).await.is_none() {
                        return Some(name);
                    }
                }
                None
            }
        })
        .await;
        let want = if name == first {
            unboosted[0]
        } else {
            unboosted[1]
        };
        let got = spec_of(&pods, &name).await;
        assert_eq!(
            (
                got.0.as_str(),
                got.1.as_str(),
                got.2.as_str(),
                got.3.as_str()
            ),
            want,
            "{name}"
        );
        println!(
            "  {name}: unboosted in place to its group's {} cpu, annotation removed",
            want.0
        );
        running(&client, &pods, &name, &ready).await;
        done.push(name);
    }
    let (action, reason) = plan_of(&first);
    assert_eq!(
        (action.as_str(), reason.as_str()),
        ("none", "at its recommendation")
    );
    updater.stop(Duration::from_secs(5));
    crate::support::cluster::delete(&client, &config).await;
}
