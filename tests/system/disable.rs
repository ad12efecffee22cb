//! Step 6: Feature `kube-system/vpa-node-scope` set to `desired:
//! Disabled`. The features controller turns it `TurningOff`, clears
//! `spec.scope` and the groups of the scoped VPAs (its `spec.cleanup`), and
//! reaches `Off`. The VPAs are unscoped from then on, so nodescope leaves
//! them to upstream's VPA: the updater resizes nothing more, and a node
//! that joins gets pods nodescope does not touch (upstream's admission
//! controller, not run here, would give them the VPA-wide value the VPAs
//! keep).

use crate::scenario::{say, until, World};
use crate::workloads::{self, NS};
use kube::api::{Api, DynamicObject, Patch, PatchParams};
use serde_json::json;
use std::time::Duration;

fn feature() -> kube::core::ApiResource {
    crate::support::cluster::api_resource(
        &json!({"apiVersion": "featureflags.nodescope.dev/v1alpha1", "kind": "Feature"}),
    )
}

pub async fn run(world: &mut World) {
    let before = world.ledger.book();
    let began = std::time::Instant::now();
    let features: Api<DynamicObject> =
        Api::namespaced_with(world.admin.clone(), "kube-system", &feature());
    features
        .patch(
            "vpa-node-scope",
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"desired": "Disabled"}})),
        )
        .await
        .unwrap_or_else(|e| panic!("Feature vpa-node-scope: {e}"));
    until(world, "vpa-node-scope Off", world.scaled(90), |w| {
        Box::pin(async move {
            let api: Api<DynamicObject> =
                Api::namespaced_with(w.admin.clone(), "kube-system", &feature());
            let f = api.get("vpa-node-scope").await.map_err(|e| e.to_string())?;
            let state = f.data["status"]["state"]
                .as_str()
                .unwrap_or_default()
                .to_owned();
            (state == "Off").then_some(()).ok_or(state)
        })
    })
    .await;
    let off_after = began.elapsed();
    let vpas: Api<DynamicObject> = Api::namespaced_with(
        world.admin.clone(),
        NS,
        &crate::support::cluster::api_resource(&workloads::vpa("agent")),
    );
    for name in workloads::SCOPED {
        let vpa = vpas.get(name).await.unwrap_or_else(|e| panic!("{e}"));
        assert!(
            vpa.data["spec"].get("scope").is_none(),
            "{name} keeps spec.scope: {}",
            vpa.data["spec"]
        );
        assert!(
            vpa.data["status"].get("recommendationGroups").is_none(),
            "{name} keeps its groups"
        );
        assert!(
            vpa.data["status"]["recommendation"].is_object(),
            "{name} lost its VPA-wide recommendation"
        );
    }
    let joined = world.n.next_multiple_of(3) + 1;
    let shape = world.nodes.join(&world.admin, joined).await;
    let node = shape.name.clone();
    let pods = crate::steps::node_pods(world, &node, false).await;
    let template = (
        crate::kubelet::milli(workloads::TEMPLATE.0),
        crate::kubelet::bytes(workloads::TEMPLATE.1),
    );
    for pod in &pods {
        assert_eq!(
            workloads::pod_resources(pod),
            [template; 3],
            "{}: touched by nodescope",
            crate::steps::name(pod)
        );
        let annotations = pod.metadata.annotations.clone().unwrap_or_default();
        assert!(
            !annotations.keys().any(|k| k.contains("vpa")),
            "{}: {annotations:?}",
            crate::steps::name(pod)
        );
    }
    tokio::time::sleep(Duration::from_secs(7)).await;
    let after = world.ledger.book();
    for ds in workloads::ALL {
        assert_eq!(
            crate::ledger::Book::count(&after.resized, ds),
            crate::ledger::Book::count(&before.resized, ds),
            "{ds}: resized after vpa-node-scope was disabled"
        );
    }
    assert_eq!(
        after.deleted_pods, before.deleted_pods,
        "pods deleted after vpa-node-scope was disabled"
    );
    say(world.began, &format!(
        "step 6: vpa-node-scope Off {:.1} s after desired: Disabled; agent and exporter lost spec.scope and their groups, kept the VPA-wide recommendation; {node}'s new pods untouched by nodescope, no resize or eviction since",
        off_after.as_secs_f64()
    ));
}
