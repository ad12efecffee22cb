//! Label scopes (AEP-10031) on the real apiserver: a VPA with
//! `scope: topology.kubernetes.io/zone`, Nodes labelled with zones, and
//! pods created through the apiserver for nodes in two zones are stored
//! with their zone's resources. nodescope is started before the VPA exists,
//! so the Node store must list Nodes again for the new key.

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
        "status": {"recommendationGroups": [group("zone-a", "140m"), group("zone-b", "260m")]},
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
        let pod = eventually(
            &format!("a pod on {node} stored with its zone's group"),
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
        println!("  {node}: stored with its zone's group ({cpu})");
    }
    cluster::delete(&client, &config).await;
}
