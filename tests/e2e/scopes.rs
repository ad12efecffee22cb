//! Label scopes (AEP-10031) on the real apiserver: a VPA with
//! `scope: topology.kubernetes.io/zone`, Nodes labelled with zones, and
//! pods created through the apiserver for nodes in two zones are stored
//! with their zone's resources. nodescope is started before the VPA exists,
//! so the Node store must list Nodes again for the new key.
//!
//! Then the gate (KEP-3920, issue 24): with Feature `vpa-node-scope`
//! `TurningOff`, the same grandfathered scoped VPA gives a new pod its
//! VPA-wide `status.recommendation`, not its zone's group.

use crate::mutation::{create_pod, resources, STORE};
use crate::support::cluster;
use crate::support::nodescope as ns;
use crate::support::{eventually, ControlPlane};
use serde_json::{json, Value};
use std::time::Duration;

const ZONE: &str = "topology.kubernetes.io/zone";

fn zonal_vpa() -> Value {
    let group = |zone: &str, cpu: &str| {
        json!({"scopeValue": zone, "containerRecommendations": [
            {"containerName": "node-exporter", "target": {"cpu": cpu, "memory": "128Mi"}}]})
    };
    json!({
        "apiVersion": "autoscaling.k8s.io/v1", "kind": "VerticalPodAutoscaler",
        "metadata": {"name": "zonal-exporter", "namespace": "monitoring"},
        "spec": {"scope": ZONE,
                 "targetRef": {"apiVersion": "apps/v1", "kind": "DaemonSet", "name": "zonal-exporter"},
                 "resourcePolicy": {"containerPolicies": [{"containerName": "kube-rbac-proxy", "mode": "Off"}]}},
        "status": {
            "recommendation": {"containerRecommendations": [
                {"containerName": "node-exporter", "target": {"cpu": "200m", "memory": "128Mi"}}]},
            "recommendationGroups": [group("zone-a", "140m"), group("zone-b", "260m")],
        },
    })
}

fn zonal_pod(node: &str) -> Value {
    let mut pod = cluster::daemonset_pod(node);
    pod["metadata"]["ownerReferences"][0]["name"] = json!("zonal-exporter");
    pod
}

pub async fn run(plane: &ControlPlane) {
    let client = plane.client().await;
    cluster::apply_files(&client, &STORE).await;
    for (node, zone) in [("zone-node-1", "zone-a"), ("zone-node-2", "zone-b")] {
        cluster::apply(
            &client,
            &json!({"apiVersion": "v1", "kind": "Node",
                    "metadata": {"name": node, "labels": {ZONE: zone}}}),
        )
        .await;
    }
    let server = ns::start(plane, &[]).await;
    let config = ns::webhook_configuration("mutating.yaml", "e2e-scopes", &server);
    cluster::apply(&client, &config).await;
    let vpa = zonal_vpa();
    cluster::apply(&client, &vpa).await;
    cluster::apply_status(&client, &vpa).await;

    for (node, cpu) in [("zone-node-1", "140m"), ("zone-node-2", "260m")] {
        stored_with(&client, node, cpu, "its zone's group").await;
        println!("  {node}: stored with its zone's group ({cpu})");
    }
    gated(&client).await;
    cluster::delete(&client, &config).await;
}

fn scope_feature(state: &str) -> Value {
    json!({"apiVersion": "featureflags.nodescope.dev/v1alpha1", "kind": "Feature",
           "metadata": {"name": "vpa-node-scope", "namespace": "kube-system"},
           "spec": {"desired": if state == "On" { "Enabled" } else { "Disabled" }},
           "status": {"state": state}})
}

/// With the Feature TurningOff (written by the test: no features controller
/// runs in this step), a new pod of the grandfathered VPA gets the
/// VPA-wide 200m on either zone; back On, its zone's group again.
async fn gated(client: &kube::Client) {
    let turning_off = scope_feature("TurningOff");
    cluster::apply(client, &turning_off).await;
    cluster::apply_status(client, &turning_off).await;
    stored_with(
        client,
        "zone-node-2",
        "200m",
        "the VPA-wide recommendation while vpa-node-scope is TurningOff",
    )
    .await;
    println!("  vpa-node-scope TurningOff: a new pod on zone-node-2 got the VPA-wide 200m, not zone-b's 260m");
    let on = scope_feature("On");
    cluster::apply(client, &on).await;
    cluster::apply_status(client, &on).await;
    stored_with(
        client,
        "zone-node-2",
        "260m",
        "zone-b's group once vpa-node-scope is On again",
    )
    .await;
    println!("  vpa-node-scope On again: zone-b's group (260m)");
}

/// Creates pods for `node` until one is stored with `cpu` requested and
/// 128Mi (the webhook's store may lag the objects just written), and
/// deletes it.
async fn stored_with(client: &kube::Client, node: &str, cpu: &str, what: &str) {
    let pod = eventually(
        &format!("a pod on {node} stored with {what} ({cpu})"),
        Duration::from_secs(30),
        || {
            let client = client.clone();
            async move {
                let pod = create_pod(&client, &zonal_pod(node)).await;
                let stored = resources(&pod)[0].1["requests"]["cpu"] == cpu;
                if !stored {
                    crate::mutation::delete_pod(&client, &pod).await;
                }
                stored.then_some(pod)
            }
        },
    )
    .await;
    assert_eq!(
        resources(&pod)[0].1["requests"],
        json!({"cpu": cpu, "memory": "128Mi"}),
        "{node}"
    );
    crate::mutation::delete_pod(client, &pod).await;
}
