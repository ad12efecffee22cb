//! Beside upstream's VPA admission controller, which also matches
//! DaemonSet pods and (without AEP-10031's `DaemonSetScope` gate) applies
//! the DaemonSet-wide recommendation: a pod of a scoped VPA must end with
//! exactly the per-node result, whichever of the two runs first.
//!
//! Upstream's pass is simulated with the same arithmetic (requests set to
//! the target, limits scaled in proportion, `vpaUpdates` rewritten), run on
//! the pod as upstream sees it: it does not read nodescope's mark and
//! leaves other annotations alone.

use serde_json::Value;

use super::super::mark::ORIGINAL_RESOURCES_ANNOTATION;
use super::super::*;
use super::{list, rec};
use crate::vpa::RecommendationTable;

const FIXTURE: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/tests/fixtures/admission-reviews/pod-node-exporter-node-a-1-create.mutate.json"
);

fn captured_pod() -> Value {
    let body = std::fs::read(FIXTURE).unwrap_or_else(|e| panic!("read {FIXTURE}: {e}"));
    let review: Value = serde_json::from_slice(&body).unwrap_or_default();
    review["request"]["object"].clone()
}

/// The node-scoped VPA of examples/store: node-a-1's group, and the
/// DaemonSet-wide recommendation upstream applies.
fn scoped_vpa() -> VpaPolicy {
    let group = [
        rec("node-exporter", &[("cpu", "150m"), ("memory", "256Mi")]),
        rec("kube-rbac-proxy", &[("cpu", "15m"), ("memory", "30Mi")]),
    ];
    let aggregate = [
        rec("node-exporter", &[("cpu", "120m"), ("memory", "200Mi")]),
        rec("kube-rbac-proxy", &[("cpu", "12m"), ("memory", "24Mi")]),
    ];
    VpaPolicy {
        namespace: "monitoring".to_owned(),
        name: "node-exporter".to_owned(),
        recommendations: RecommendationTable::new([("node-a-1", &group[..])], Some(&aggregate)),
        ..Default::default()
    }
}

fn apply(pod: &Value, m: &Mutation) -> Value {
    let mut pod = pod.clone();
    json_patch::patch(&mut pod, &m.patch.operations()).unwrap_or_else(|e| panic!("{e}"));
    pod
}

fn view_and<T>(pod: &Value, f: impl FnOnce(&pod::PodView<'_>) -> T) -> T {
    let bytes = serde_json::to_vec(pod).unwrap_or_default();
    let view = pod::PodView::from_json(&bytes).unwrap_or_else(|e| panic!("{e}"));
    f(&view)
}

fn nodescope(pod: &Value) -> Value {
    let vpa = scoped_vpa();
    let m = view_and(pod, |view| {
        mutate_pod(
            view,
            &vpa,
            Placement::on_node("node-a-1"),
            &[],
            MissingNodeRecommendation::Aggregate,
        )
    });
    assert!(m.warnings.is_empty(), "{:?}", m.warnings);
    apply(pod, &m)
}

/// Upstream's pass: the DaemonSet-wide target on the pod's current values.
fn upstream(pod: &Value) -> Value {
    let annotations = |pod: &Value| pod["metadata"]["annotations"].clone();
    let mark = annotations(pod)[ORIGINAL_RESOURCES_ANNOTATION].clone();
    let mut seen = pod.clone();
    if let Some(map) = seen["metadata"]["annotations"].as_object_mut() {
        map.remove(ORIGINAL_RESOURCES_ANNOTATION);
    }
    let mut vpa = scoped_vpa();
    let aggregate: Vec<_> = ["node-exporter", "kube-rbac-proxy"]
        .iter()
        .map(|c| {
            let row = vpa.recommendations.aggregate();
            let target: Vec<(String, String)> = row
                .into_iter()
                .flat_map(|r| r.target(c))
                .map(|(r, q)| (r.to_owned(), q.to_string()))
                .collect();
            let pairs: Vec<(&str, &str)> = target
                .iter()
                .map(|(r, q)| (r.as_str(), q.as_str()))
                .collect();
            crate::vpa::ContainerRecommendation {
                container_name: (*c).to_owned(),
                target: list(&pairs),
            }
        })
        .collect();
    vpa.recommendations = RecommendationTable::new([("node-a-1", &aggregate[..])], None);
    let m = view_and(&seen, |view| {
        mutate_pod(
            view,
            &vpa,
            Placement::on_node("node-a-1"),
            &[],
            MissingNodeRecommendation::LeaveUnchanged,
        )
    });
    let mut after = apply(&seen, &m);
    // Upstream writes no mark of its own and keeps the annotations it found.
    if let Some(map) = after["metadata"]["annotations"].as_object_mut() {
        map.remove(ORIGINAL_RESOURCES_ANNOTATION);
        if !mark.is_null() {
            map.insert(ORIGINAL_RESOURCES_ANNOTATION.to_owned(), mark);
        }
    }
    after
}

fn resources(pod: &Value, i: usize) -> &Value {
    &pod["spec"]["containers"][i]["resources"]
}

/// The per-node result, field by field.
fn assert_per_node(pod: &Value, expected: &Value) {
    for i in 0..2 {
        assert_eq!(resources(pod, i), resources(expected, i), "container {i}");
    }
    for key in ["vpaUpdates", "vpaObservedContainers"] {
        assert_eq!(
            pod["metadata"]["annotations"][key], expected["metadata"]["annotations"][key],
            "{key}"
        );
    }
}

#[test]
fn nodescope_then_upstream_then_nodescope_reinvoked_ends_with_the_per_node_result() {
    let per_node = nodescope(&captured_pod());
    assert_eq!(
        resources(&per_node, 0),
        &serde_json::json!({"requests": {"cpu": "150m", "memory": "256Mi"},
                            "limits": {"cpu": "367m", "memory": "256Mi"}})
    );
    let overwritten = upstream(&per_node);
    assert_eq!(
        resources(&overwritten, 0)["requests"],
        serde_json::json!({"cpu": "120m", "memory": "200Mi"}),
        "upstream applied the DaemonSet-wide target"
    );
    let reinvoked = nodescope(&overwritten);
    assert_per_node(&reinvoked, &per_node);
    assert_eq!(reinvoked, per_node, "the whole pod, mark included");
    // A further reinvocation changes nothing.
    assert_eq!(nodescope(&reinvoked), reinvoked);
}

#[test]
fn upstream_first_then_nodescope_ends_with_the_per_node_result() {
    let per_node = nodescope(&captured_pod());
    let after = nodescope(&upstream(&captured_pod()));
    assert_per_node(&after, &per_node);
    assert_eq!(nodescope(&after), after, "a reinvocation changes nothing");
}
