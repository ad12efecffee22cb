//! Step 4: State from watches: a Feature's `status.state` and a VPA's
//! recommendation, changed through the apiserver, change nodescope's next
//! decision with no restart.

use crate::mutation::{resources, STORE};
use crate::support::cluster::{self, dry_run_create, dry_run_pod};
use crate::support::nodescope as ns;
use crate::support::{eventually, ControlPlane};
use serde_json::{json, Value};
use std::time::Duration;

/// Watches deliver within seconds; this only bounds a hang.
const LIMIT: Duration = Duration::from_secs(30);

pub fn node_scoped_vpa(name: &str) -> Value {
    json!({
        "apiVersion": "autoscaling.k8s.io/v1",
        "kind": "VerticalPodAutoscaler",
        "metadata": {"name": name, "namespace": "monitoring"},
        "spec": {"scope": "node",
                 "targetRef": {"apiVersion": "apps/v1", "kind": "DaemonSet", "name": name}},
    })
}

fn feature(state: &str) -> Value {
    json!({"apiVersion": "featureflags.nodescope.dev/v1alpha1", "kind": "Feature",
           "metadata": {"name": "vpa-node-scope", "namespace": "kube-system"},
           "status": {"state": state}})
}

pub async fn run(plane: &ControlPlane) {
    let client = plane.client().await;
    let store = cluster::apply_files(&client, &STORE).await;
    let server = ns::start(plane, &[]).await;
    let mutating = ns::webhook_configuration("mutating.yaml", "e2e-watches", &server);
    let validating = ns::webhook_configuration("validating.yaml", "e2e-watches", &server);
    cluster::apply(&client, &mutating).await;
    cluster::apply(&client, &validating).await;

    let vpa = node_scoped_vpa("watched");
    eventually(
        "a node-scoped VPA admitted while the Feature is On",
        LIMIT,
        || {
            let (client, vpa) = (client.clone(), vpa.clone());
            async move { dry_run_create(&client, &vpa).await.ok() }
        },
    )
    .await;

    cluster::apply_status(&client, &feature("TurningOff")).await;
    let denied = eventually(
        "the same VPA denied once the Feature is TurningOff",
        LIMIT,
        || {
            let (client, vpa) = (client.clone(), vpa.clone());
            async move { dry_run_create(&client, &vpa).await.err() }
        },
    )
    .await;
    assert_eq!(
        denied,
        "403 admission webhook \"feature-gates.nodescope.dev\" denied the request: ValidatingAdmissionPolicy 'nodescope-feature-vpa-node-scope' with binding 'nodescope-feature-vpa-node-scope' denied request: feature \"vpa-node-scope\" is TurningOff: no new uses allowed (a VerticalPodAutoscaler with spec.scope \"node\")"
    );
    println!("  Feature vpa-node-scope On -> TurningOff: the next VPA is denied: {denied}");
    cluster::apply_status(&client, &feature("On")).await;
    eventually("admitted again once the Feature is back On", LIMIT, || {
        let (client, vpa) = (client.clone(), vpa.clone());
        async move { dry_run_create(&client, &vpa).await.ok() }
    })
    .await;

    let mut recommended = store
        .iter()
        .find(|o| o["kind"] == "VerticalPodAutoscaler")
        .cloned()
        .unwrap_or_else(|| panic!("the store has the node-exporter VPA"));
    recommended["status"]["recommendationGroups"][0]["containerRecommendations"][0]["target"]
        ["cpu"] = json!("200m");
    cluster::apply_status(&client, &recommended).await;
    eventually(
        "node-a-1's new recommendation on the next pod",
        LIMIT,
        || {
            let client = client.clone();
            async move {
                let pod = dry_run_pod(&client, "node-a-1").await;
                (resources(&pod)[0].1["requests"]["cpu"] == "200m").then_some(())
            }
        },
    )
    .await;
    println!("  VPA node-a-1 cpu target 150m -> 200m: the next pod gets 200m");

    // Leave the store as the other steps expect it.
    cluster::apply_files(&client, &STORE[2..]).await;
    cluster::delete(&client, &mutating).await;
    cluster::delete(&client, &validating).await;
    drop(server);
}
