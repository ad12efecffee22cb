//! The size of a node-scoped VPA's status at 5,000 nodes on a real
//! apiserver and etcd (etcd's default `--max-request-bytes`, 1.5 MiB). The
//! statuses are the recommender's own ([`nodescope::recommend::fit`]),
//! written as the recommender writes them (the status subresource):
//! - two containers, every group distinct: written whole; the stored object,
//!   `managedFields` included, is measured: with `recommendationGroups`
//!   atomic the managed fields do not grow with the groups;
//! - the same under a list map keyed by `scopeValue` (the CRD before
//!   issue 26): the managed fields' bytes per group;
//! - four containers, every group distinct: refused by the apiserver, which
//!   is why the recommender never writes it ([`nodescope::recommend::fit`]
//!   leaves the groups out and says so);
//! - four containers with 7 nodes in 8 alike: fitted (the groups equal to
//!   `status.recommendation` left out), written, and well under the limit.

use crate::support::{cluster, ControlPlane};
use kube::api::{Api, DynamicObject, Patch, PatchParams};
use kube::discovery::ApiResource;
use nodescope::recommend::fit::{fit, Fit, STATUS_LIMIT};
use nodescope::recommend::status::{
    ContainerStatus, GroupStatus, RecommendationStatus, Targets, VpaStatus,
};
use serde_json::json;

const NAMESPACE: &str = "e2e-status-size";
const NODES: usize = 5_000;
const ETCD_LIMIT: usize = 1536 * 1024;

fn targets(cpu: String, memory: String) -> Targets {
    Targets {
        cpu: Some(cpu),
        memory: Some(memory),
        ..Targets::default()
    }
}

/// `containers` containers; node n has targets of its own when
/// `n % distinct == 0`, the fallback's otherwise.
fn status(containers: usize, distinct: usize) -> VpaStatus {
    let names: Vec<String> = (0..containers).map(|c| format!("container-{c}")).collect();
    let wide = |c: usize| targets(format!("{}m", 263 + c), format!("{}", 273_804_165 + c));
    VpaStatus {
        conditions: Vec::new(),
        recommendation: RecommendationStatus {
            container_recommendations: names
                .iter()
                .enumerate()
                .map(|(c, name)| ContainerStatus {
                    container_name: name.clone(),
                    target: wide(c),
                    ..ContainerStatus::default()
                })
                .collect(),
        },
        recommendation_groups: (0..NODES)
            .map(|n| GroupStatus {
                scope_value: format!("node-{n:05}"),
                container_recommendations: names
                    .iter()
                    .enumerate()
                    .map(|(c, name)| ContainerStatus {
                        container_name: name.clone(),
                        target: if n % distinct == 0 {
                            targets(
                                format!("{}m", 120 + (n * 7 + c) % 400),
                                format!("{}", 150_000_000 + n * 4099 + c),
                            )
                        } else {
                            wide(c)
                        },
                        ..ContainerStatus::default()
                    })
                    .collect(),
            })
            .collect(),
        observed_generation: Some(1),
    }
}

fn vpas(client: &kube::Client) -> Api<DynamicObject> {
    Api::namespaced_with(
        client.clone(),
        NAMESPACE,
        &ApiResource::from_gvk_with_plural(
            &kube::core::GroupVersionKind::gvk("autoscaling.k8s.io", "v1", "VerticalPodAutoscaler"),
            "verticalpodautoscalers",
        ),
    )
}

/// Creates VPA `name` and writes `status` to it; the stored object's bytes
/// and its managed fields' bytes, or the apiserver's refusal.
async fn write(
    client: &kube::Client,
    name: &str,
    status: &VpaStatus,
) -> Result<(usize, usize), String> {
    cluster::apply(
        client,
        &json!({"apiVersion": "autoscaling.k8s.io/v1", "kind": "VerticalPodAutoscaler",
            "metadata": {"name": name, "namespace": NAMESPACE},
            "spec": {"targetRef": {"apiVersion": "apps/v1", "kind": "DaemonSet", "name": name},
                     "scope": "kubernetes.io/hostname"}}),
    )
    .await;
    let api = vpas(client);
    api.patch_status(
        name,
        &PatchParams::default(),
        &Patch::Merge(json!({"status": status.to_value()})),
    )
    .await
    .map_err(|e| e.to_string())?;
    let stored = api.get(name).await.map_err(|e| e.to_string())?;
    let object = serde_json::to_vec(&stored).unwrap_or_default().len();
    let managed = serde_json::to_vec(&stored.metadata.managed_fields)
        .unwrap_or_default()
        .len();
    Ok((object, managed))
}

async fn set_list_type(client: &kube::Client, list_map: bool) {
    let mut crd = cluster::documents("manifests/components/vpa-crd/vpa-crd.yaml")
        .into_iter()
        .next()
        .unwrap_or_else(|| panic!("no VPA CRD"));
    let groups = &mut crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]
        ["status"]["properties"]["recommendationGroups"];
    assert!(groups.is_object(), "no recommendationGroups in the CRD");
    if list_map {
        groups["x-kubernetes-list-type"] = json!("map");
        groups["x-kubernetes-list-map-keys"] = json!(["scopeValue"]);
    }
    cluster::apply(client, &crd).await;
    // The apiserver serves a changed schema after a moment.
    tokio::time::sleep(std::time::Duration::from_secs(3)).await;
}

pub async fn run(plane: &ControlPlane) {
    let client = plane.client().await;
    cluster::namespace(&client, NAMESPACE).await;

    let two = status(2, 1);
    let (object, managed) = write(&client, "two", &two)
        .await
        .unwrap_or_else(|e| panic!("two containers: {e}"));
    assert!(object < ETCD_LIMIT, "{object}");
    assert!(
        managed < 2_000,
        "managedFields grow with the groups: {managed} bytes"
    );
    println!(
        "  2 containers x {NODES} nodes, atomic list: object {object} B, managedFields {managed} B"
    );

    set_list_type(&client, true).await;
    let (list_map_object, list_map_managed) = write(&client, "two-list-map", &two)
        .await
        .unwrap_or_else(|e| panic!("two containers, list map: {e}"));
    set_list_type(&client, false).await;
    println!(
        "  2 containers x {NODES} nodes, list map: object {list_map_object} B, managedFields {list_map_managed} B ({:.0} B per group)",
        (list_map_managed - managed) as f64 / NODES as f64
    );
    assert!(
        list_map_managed > managed + 80 * NODES,
        "{list_map_managed}"
    );

    let four = status(4, 1);
    let refused = write(&client, "four", &four).await;
    println!("  4 containers x {NODES} nodes, whole: {refused:?}");
    assert!(
        refused.is_err(),
        "a {} B status was stored",
        serde_json::to_vec(&four).map_or(0, |v| v.len())
    );
    let mut fitted = status(4, 8);
    let outcome = fit(&mut fitted, STATUS_LIMIT);
    assert!(
        matches!(outcome, Fit::Compacted { omitted: 4375, .. }),
        "{outcome:?}"
    );
    let (object, managed) = write(&client, "four-fitted", &fitted)
        .await
        .unwrap_or_else(|e| panic!("four containers, fitted: {e}"));
    assert!(object < ETCD_LIMIT / 3, "{object}");
    println!("  4 containers x {NODES} nodes, 7 in 8 alike, fitted ({outcome:?}): object {object} B, managedFields {managed} B");
    cluster::delete(
        &client,
        &json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NAMESPACE}}),
    )
    .await;
}
