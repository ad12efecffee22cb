//! Step 3: Mutation for real: nodescope serving `/mutate` with `--store kube`,
//! the shipped MutatingWebhookConfiguration pointed at it, and DaemonSet
//! pods created through the apiserver in the DaemonSet controller's shape.
//! What the apiserver stores is what a kubelet would run.

use crate::support::cluster::{self, FIELD_MANAGER};
use crate::support::nodescope as ns;
use crate::support::ControlPlane;
use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, DeleteParams, PostParams};
use serde_json::{json, Value};

/// The objects of the demo store: Namespace monitoring, Features On, and
/// the node-scoped VPA for monitoring/node-exporter with its groups.
pub const STORE: [&str; 3] = [
    "examples/store/monitoring-namespace.yaml",
    "examples/store/features.yaml",
    "examples/store/node-exporter-vpa.yaml",
];

pub async fn create_pod(client: &kube::Client, pod: &Value) -> Pod {
    let pods: Api<Pod> = Api::namespaced(client.clone(), "monitoring");
    let pod: Pod = serde_json::from_value(pod.clone()).unwrap_or_else(|e| panic!("{e}"));
    pods.create(
        &PostParams {
            field_manager: Some(FIELD_MANAGER.to_owned()),
            ..PostParams::default()
        },
        &pod,
    )
    .await
    .unwrap_or_else(|e| panic!("creating a node-exporter pod: {e}"))
}

/// Container name -> its stored resources, as JSON.
pub fn resources(pod: &Pod) -> Vec<(String, Value)> {
    pod.spec
        .iter()
        .flat_map(|s| &s.containers)
        .map(|c| {
            (
                c.name.clone(),
                serde_json::to_value(&c.resources).unwrap_or_default(),
            )
        })
        .collect()
}

pub async fn run(plane: &ControlPlane) {
    let client = plane.client().await;
    cluster::apply_files(&client, &STORE).await;
    let server = ns::start(plane, &[]).await;
    let config = ns::webhook_configuration("mutating.yaml", "e2e-nodescope", &server);
    cluster::apply(&client, &config).await;

    // Webhook configurations reach the apiserver's admission chain through
    // an informer; wait until a pod comes back mutated.
    let pod = crate::support::eventually(
        "a DaemonSet pod mutated by nodescope",
        std::time::Duration::from_secs(30),
        || {
            let client = client.clone();
            async move {
                let pod = create_pod(&client, &cluster::daemonset_pod("node-a-1")).await;
                let mutated = pod
                    .metadata
                    .annotations
                    .as_ref()
                    .is_some_and(|a| a.contains_key("vpaUpdates"));
                if !mutated {
                    delete_pod(&client, &pod).await;
                }
                mutated.then_some(pod)
            }
        },
    )
    .await;
    assert_eq!(
        resources(&pod),
        [
            (
                "node-exporter".to_owned(),
                json!({"requests": {"cpu": "150m", "memory": "256Mi"},
                       "limits": {"cpu": "367m", "memory": "256Mi"}})
            ),
            (
                "kube-rbac-proxy".to_owned(),
                json!({"requests": {"cpu": "15m", "memory": "30Mi"},
                       "limits": {"cpu": "20m", "memory": "40Mi"}})
            ),
        ]
    );
    let annotations = pod.metadata.annotations.clone().unwrap_or_default();
    assert_eq!(
        annotations.get("vpaUpdates").map(String::as_str),
        Some("Pod resources updated by node-exporter: container 0: cpu request, memory request, cpu limit, memory limit; container 1: cpu request, memory request")
    );
    assert_eq!(
        annotations.get("vpaObservedContainers").map(String::as_str),
        Some("node-exporter, kube-rbac-proxy")
    );
    println!("  node-a-1: stored with its group's resources and the vpaUpdates annotations");

    // Another node's group gives other numbers.
    let pod = create_pod(&client, &cluster::daemonset_pod("node-a-2")).await;
    assert_eq!(
        resources(&pod)[0].1["requests"],
        json!({"cpu": "80m", "memory": "128Mi"})
    );
    println!("  node-a-2: stored with node-a-2's group (80m, 128Mi)");

    // A node without a group: the documented fallback (AEP-10031) is the
    // DaemonSet-wide status.recommendation.
    let pod = create_pod(&client, &cluster::daemonset_pod("node-z-9")).await;
    assert_eq!(
        resources(&pod),
        [
            (
                "node-exporter".to_owned(),
                json!({"requests": {"cpu": "120m", "memory": "200Mi"},
                       "limits": {"cpu": "294m", "memory": "200Mi"}})
            ),
            (
                "kube-rbac-proxy".to_owned(),
                json!({"requests": {"cpu": "12m", "memory": "24Mi"},
                       "limits": {"cpu": "20m", "memory": "40Mi"}})
            ),
        ]
    );
    println!("  node-z-9 (no group): stored with the VPA-wide recommendation (120m, 200Mi)");

    cluster::delete(&client, &config).await;
}

pub async fn delete_pod(client: &kube::Client, pod: &Pod) {
    let pods: Api<Pod> = Api::namespaced(client.clone(), "monitoring");
    if let Some(name) = &pod.metadata.name {
        let _ = pods.delete(name, &DeleteParams::default()).await;
    }
}
