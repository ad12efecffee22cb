//! AEP-10031 scope resolution, row by row, through the whole mutating path
//! (review bytes in, patch and warnings out): node-name and label scopes,
//! `__absent__`, a node the store does not know, a never-seen value, a pod
//! without a node, and both fallbacks.

use super::*;
use crate::mutate::MissingNodeRecommendation;
use crate::policy::PolicySet;
use crate::store::Snapshot;
use base64::Engine as _;
use serde_json::{json, Value};
use std::path::Path;

const ZONE: &str = "topology.kubernetes.io/zone";

fn node(name: &str, labels: Value) -> Value {
    json!({"apiVersion": "v1", "kind": "Node", "metadata": {"name": name, "labels": labels}})
}

fn target(cpu: &str, memory: &str) -> Value {
    json!([
        {"containerName": "node-exporter", "target": {"cpu": cpu, "memory": memory}},
        {"containerName": "kube-rbac-proxy", "target": {"cpu": "5m", "memory": "10Mi"}},
    ])
}

fn vpa(scope: &str, groups: Value, aggregate: Option<Value>) -> Value {
    let mut vpa = json!({
        "apiVersion": "autoscaling.k8s.io/v1", "kind": "VerticalPodAutoscaler",
        "metadata": {"name": "node-exporter", "namespace": "monitoring"},
        "spec": {"scope": scope,
                 "targetRef": {"apiVersion": "apps/v1", "kind": "DaemonSet", "name": "node-exporter"}},
        "status": {"recommendationGroups": groups},
    });
    if let Some(aggregate) = aggregate {
        vpa["status"]["recommendation"] = json!({ "containerRecommendations": aggregate });
    }
    vpa
}

fn decider(vpa: Value, missing: MissingNodeRecommendation) -> Decider {
    decider_with(vpa, missing, None)
}

/// Feature `kube-system/vpa-node-scope` in `state`.
fn scope_feature(state: &str) -> Value {
    json!({"apiVersion": "featureflags.nodescope.dev/v1alpha1", "kind": "Feature",
           "metadata": {"name": "vpa-node-scope", "namespace": "kube-system"},
           "spec": {"desired": "Disabled"}, "status": {"state": state}})
}

fn decider_with(vpa: Value, missing: MissingNodeRecommendation, feature: Option<Value>) -> Decider {
    let store = Snapshot::build(feature.into_iter().chain([
        vpa,
        node(
            "n-zone-a",
            json!({ZONE: "zone-a", "kubernetes.io/hostname": "n-zone-a"}),
        ),
        node("n-zone-b", json!({ZONE: "zone-b"})),
        node("n-bare", json!({"kubernetes.io/os": "linux"})),
    ]));
    assert!(store.problems.is_empty(), "{:?}", store.problems);
    let mut decider = Decider::new(
        Arc::new(store),
        Arc::new(PolicySet::from_documents(Vec::new()).unwrap_or_else(|e| panic!("{e}"))),
    );
    decider.missing_node = missing;
    decider
}

/// The captured DaemonSet pod review, headed for `node` (or for no node).
fn review(node: Option<&str>) -> Vec<u8> {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/admission-reviews/pod-node-exporter-node-a-1-create.mutate.json");
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{e}"));
    let mut review: Value = serde_json::from_str(&text).unwrap_or_else(|e| panic!("{e}"));
    let spec = &mut review["request"]["object"]["spec"];
    match node {
        Some(node) => {
            spec["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]
                ["nodeSelectorTerms"][0]["matchFields"][0]["values"] = json!([node]);
        }
        None => {
            if let Some(spec) = spec.as_object_mut() {
                spec.remove("affinity");
            }
        }
    }
    serde_json::to_vec(&review).unwrap_or_default()
}

/// (the first container's new cpu request, or None without a patch; the
/// warnings).
fn mutate(decider: &Decider, node: Option<&str>) -> (Option<String>, Vec<String>) {
    let answer = answer(Webhook::Mutate, &review(node), decider);
    assert_eq!(answer.http_status, 200);
    let v: Value = serde_json::from_slice(&answer.body).unwrap_or_default();
    let patch: Option<Value> = v["response"]["patch"].as_str().map(|p| {
        let bytes = base64::engine::general_purpose::STANDARD
            .decode(p)
            .unwrap_or_default();
        serde_json::from_slice(&bytes).unwrap_or_default()
    });
    let cpu = patch.and_then(|ops| {
        ops.as_array()?
            .iter()
            .find(|op| op["path"] == "/spec/containers/0/resources/requests/cpu")
            .and_then(|op| op["value"].as_str().map(str::to_owned))
    });
    let warnings = v["response"]["warnings"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|w| w.as_str().map(str::to_owned))
        .collect();
    (cpu, warnings)
}

fn zone_vpa(aggregate: bool) -> Value {
    vpa(
        ZONE,
        json!([
            {"scopeValue": "zone-a", "containerRecommendations": target("150m", "256Mi")},
            {"scopeValue": "__absent__", "containerRecommendations": target("60m", "64Mi")},
        ]),
        aggregate.then(|| target("120m", "200Mi")),
    )
}

const VPA_WIDE: &str = "; using the VerticalPodAutoscaler-wide recommendation";
const UNCHANGED: &str = "; resources left unchanged";

#[test]
fn a_label_scope_gives_each_node_its_label_values_group() {
    let decider = decider(zone_vpa(true), MissingNodeRecommendation::Aggregate);
    assert_eq!(
        mutate(&decider, Some("n-zone-a")),
        (Some("150m".into()), vec![])
    );
}

#[test]
fn a_node_without_the_label_gets_the_absent_group() {
    let decider = decider(zone_vpa(true), MissingNodeRecommendation::Aggregate);
    assert_eq!(
        mutate(&decider, Some("n-bare")),
        (Some("60m".into()), vec![])
    );
}

#[test]
fn a_never_seen_value_falls_back_to_the_vpa_wide_recommendation() {
    let decider = decider(zone_vpa(true), MissingNodeRecommendation::Aggregate);
    assert_eq!(
        mutate(&decider, Some("n-zone-b")),
        (
            Some("120m".into()),
            vec![format!("no recommendation for {ZONE} \"zone-b\" (node \"n-zone-b\") in VerticalPodAutoscaler monitoring/node-exporter{VPA_WIDE}")]
        )
    );
}

#[test]
fn a_node_the_store_does_not_know_falls_back_and_says_so() {
    let decider = decider(zone_vpa(true), MissingNodeRecommendation::Aggregate);
    assert_eq!(
        mutate(&decider, Some("n-new")),
        (
            Some("120m".into()),
            vec![format!("node \"n-new\" is not in nodescope's Node store, so its {ZONE} label is unknown (VerticalPodAutoscaler monitoring/node-exporter){VPA_WIDE}")]
        )
    );
}

#[test]
fn a_pod_without_a_node_falls_back_and_says_so() {
    let decider = decider(zone_vpa(true), MissingNodeRecommendation::Aggregate);
    assert_eq!(
        mutate(&decider, None),
        (
            Some("120m".into()),
            vec![format!("the pod names no node (no spec.nodeName and no matchFields metadata.name node affinity), so it has no recommendation group in VerticalPodAutoscaler monitoring/node-exporter{VPA_WIDE}")]
        )
    );
}

#[test]
fn without_a_vpa_wide_recommendation_a_miss_changes_no_resources() {
    let decider = decider(zone_vpa(false), MissingNodeRecommendation::Aggregate);
    assert_eq!(
        mutate(&decider, Some("n-zone-b")),
        (
            None,
            vec![format!("no recommendation for {ZONE} \"zone-b\" (node \"n-zone-b\") in VerticalPodAutoscaler monitoring/node-exporter{UNCHANGED}")]
        )
    );
}

#[test]
fn the_strict_option_leaves_a_miss_unchanged_even_with_a_vpa_wide_recommendation() {
    let decider = decider(zone_vpa(true), MissingNodeRecommendation::LeaveUnchanged);
    assert_eq!(
        mutate(&decider, Some("n-zone-b")),
        (
            None,
            vec![format!("no recommendation for {ZONE} \"zone-b\" (node \"n-zone-b\") in VerticalPodAutoscaler monitoring/node-exporter{UNCHANGED}")]
        )
    );
}

#[test]
fn a_node_without_the_label_and_no_absent_group_says_which_label_it_lacks() {
    let vpa = vpa(
        ZONE,
        json!([{"scopeValue": "zone-a", "containerRecommendations": target("150m", "256Mi")}]),
        Some(target("120m", "200Mi")),
    );
    let decider = decider(vpa, MissingNodeRecommendation::Aggregate);
    assert_eq!(
        mutate(&decider, Some("n-bare")),
        (
            Some("120m".into()),
            vec![format!("no recommendation for {ZONE} \"__absent__\" (node \"n-bare\" has no {ZONE} label) in VerticalPodAutoscaler monitoring/node-exporter{VPA_WIDE}")]
        )
    );
}

#[test]
fn hostname_and_node_scopes_use_the_node_name_even_for_nodes_the_store_lacks() {
    for scope in ["node", "kubernetes.io/hostname"] {
        let vpa = vpa(
            scope,
            json!([{"scopeValue": "n-new", "containerRecommendations": target("90m", "100Mi")}]),
            Some(target("120m", "200Mi")),
        );
        let decider = decider(vpa, MissingNodeRecommendation::Aggregate);
        assert_eq!(
            mutate(&decider, Some("n-new")),
            (Some("90m".into()), vec![]),
            "{scope}"
        );
        assert_eq!(
            mutate(&decider, Some("n-zone-a")),
            (
                Some("120m".into()),
                vec![format!("no recommendation for node \"n-zone-a\" in VerticalPodAutoscaler monitoring/node-exporter{VPA_WIDE}")]
            ),
            "{scope}"
        );
    }
}

#[test]
fn the_node_store_keeps_only_the_labels_a_scoped_vpa_names() {
    let decider = decider(zone_vpa(true), MissingNodeRecommendation::Aggregate);
    let keys: Vec<String> = decider
        .store
        .scope_label_keys()
        .iter()
        .map(|k| k.to_string())
        .collect();
    assert_eq!(keys, [ZONE]);
    assert_eq!(decider.store.node_count(), 3);
    use crate::vpa::{NodeLabel, NodeLabels};
    assert_eq!(
        decider
            .store
            .node_label("n-zone-a", "kubernetes.io/hostname"),
        NodeLabel::Absent,
        "a label no VPA names is not kept"
    );
    assert_eq!(
        decider.store.node_label("n-zone-a", ZONE),
        NodeLabel::Value("zone-a")
    );
}

const GATED: &str = "Feature kube-system/vpa-node-scope is";

#[test]
fn with_the_scope_feature_turning_off_or_off_a_grandfathered_vpa_gives_the_vpa_wide_recommendation()
{
    for state in ["TurningOff", "Off"] {
        let decider = decider_with(
            zone_vpa(true),
            MissingNodeRecommendation::LeaveUnchanged,
            Some(scope_feature(state)),
        );
        assert_eq!(
            mutate(&decider, Some("n-zone-a")),
            (
                Some("120m".into()),
                vec![format!("{GATED} {state}, so VerticalPodAutoscaler monitoring/node-exporter acts as an unscoped VPA (KEP-3920): using the VerticalPodAutoscaler-wide recommendation, not the pod's group")]
            ),
            "{state}"
        );
    }
}

#[test]
fn with_the_scope_feature_off_and_no_vpa_wide_recommendation_resources_stay() {
    let decider = decider_with(
        zone_vpa(false),
        MissingNodeRecommendation::Aggregate,
        Some(scope_feature("Off")),
    );
    assert_eq!(
        mutate(&decider, Some("n-zone-a")),
        (
            None,
            vec![format!("{GATED} Off, so VerticalPodAutoscaler monitoring/node-exporter acts as an unscoped VPA (KEP-3920), and it has no VerticalPodAutoscaler-wide recommendation: resources left unchanged")]
        )
    );
}

#[test]
fn with_the_scope_feature_on_or_turning_on_groups_apply_as_without_a_feature() {
    for state in ["On", "TurningOn"] {
        let decider = decider_with(
            zone_vpa(true),
            MissingNodeRecommendation::Aggregate,
            Some(scope_feature(state)),
        );
        assert_eq!(
            mutate(&decider, Some("n-zone-a")),
            (Some("150m".into()), vec![]),
            "{state}"
        );
    }
}
