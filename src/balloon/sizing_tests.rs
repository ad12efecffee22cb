//! The sizing arithmetic and the fit check, with exact quantities.

use super::node::{BalloonNode, DesiredSize, Fraction};
use super::sizing::{plan_nodes, BalloonConfig, ContainerResize, State};
use super::CpuMemory;
use crate::pods::RunningPod;
use crate::quantity::Quantity;
use serde_json::{json, Value};

fn q(text: &str) -> Quantity {
    Quantity::parse(text).unwrap_or_else(|e| panic!("{text}: {e}"))
}

fn pair(cpu: &str, memory: &str) -> CpuMemory {
    CpuMemory {
        cpu: q(cpu),
        memory: q(memory),
    }
}

/// A Node of 8 cpu and 32Gi with `annotations` (shared with the watch's
/// tests, which read the same objects as the controller does).
pub(super) fn node_json(name: &str, annotations: Value) -> Value {
    json!({
        "apiVersion": "v1", "kind": "Node",
        "metadata": {"name": name, "uid": format!("uid-{name}"), "annotations": annotations},
        "status": {"allocatable": {"cpu": "8", "memory": "32Gi", "pods": "110"}},
    })
}

fn node(name: &str, annotations: Value) -> BalloonNode {
    BalloonNode::from_value(&node_json(name, annotations)).expect("node")
}

/// A running pod of one container with `resources`; a balloon is in
/// kube-system, any other pod in default.
pub(super) fn pod_json(
    name: &str,
    node: &str,
    balloon: bool,
    resources: Value,
    start: &str,
) -> Value {
    let labels = if balloon {
        json!({"node.kubernetes.io/balloon": "true"})
    } else {
        json!({})
    };
    json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": name, "namespace": if balloon {"kube-system"} else {"default"},
                     "uid": name, "resourceVersion": "11", "labels": labels},
        "spec": {"nodeName": node, "containers": [{"name": "c", "resources": resources}]},
        "status": {"phase": "Running", "startTime": start},
    })
}

fn pod(name: &str, node: &str, balloon: bool, resources: Value, start: &str) -> RunningPod {
    RunningPod::from_value(&pod_json(name, node, balloon, resources, start)).expect("pod")
}

fn balloon(node: &str, cpu: &str, memory: &str) -> RunningPod {
    pod(
        &format!("balloon-{node}"),
        node,
        true,
        json!({"requests": {"cpu": cpu, "memory": memory}}),
        "2026-11-25T08:00:00Z",
    )
}

fn workload(name: &str, node: &str, cpu: &str, memory: &str, start: &str) -> RunningPod {
    pod(
        name,
        node,
        false,
        json!({"requests": {"cpu": cpu, "memory": memory}}),
        start,
    )
}

fn usable(cpu: &str, memory: &str) -> Value {
    json!({"nodescope.dev/usable-cpu": cpu, "nodescope.dev/usable-memory": memory})
}

#[test]
fn a_node_with_no_balloon_and_no_size_is_not_listed() {
    let plans = plan_nodes(
        &[node("n1", json!({}))],
        &[workload("web", "n1", "1", "1Gi", "2026-11-25T09:00:00Z")],
        &BalloonConfig::default(),
    );
    assert_eq!(plans, vec![]);
}

#[test]
fn a_node_with_a_size_but_no_balloon_says_so() {
    let plans = plan_nodes(
        &[node("n1", usable("6", "24Gi"))],
        &[workload("web", "n1", "1", "1Gi", "2026-11-25T09:00:00Z")],
        &BalloonConfig::default(),
    );
    assert_eq!(plans.len(), 1);
    assert_eq!(plans[0].state, State::NoBalloon);
    assert_eq!(plans[0].balloon, pair("0", "0"));
    assert_eq!(plans[0].usable, pair("8", "32Gi"));
    assert_eq!(plans[0].requested, pair("1", "1Gi"));
    assert_eq!(plans[0].free, pair("7", "31Gi"));
    assert_eq!(plans[0].resize, None);
}

#[test]
fn the_balloon_requests_allocatable_minus_usable() {
    let plans = plan_nodes(
        &[node("n1", usable("6", "24Gi"))],
        &[balloon("n1", "500m", "512Mi")],
        &BalloonConfig::default(),
    );
    let plan = &plans[0];
    assert_eq!(plan.state, State::Resize);
    assert_eq!(plan.target, Some(pair("2", "8Gi")));
    assert_eq!(
        plan.reason,
        "upsize the balloon from cpu 500m, memory 512Mi to cpu 2, memory 8Gi"
    );
    let resize = plan.resize.as_ref().expect("a resize");
    assert_eq!(
        (
            resize.namespace.as_str(),
            resize.name.as_str(),
            resize.resource_version.as_str()
        ),
        ("kube-system", "balloon-n1", "11")
    );
    assert_eq!(
        resize.containers,
        vec![ContainerResize {
            index: 0,
            requests: vec![("cpu".into(), "2".into()), ("memory".into(), "8Gi".into())],
            limits: vec![],
        }]
    );
}

#[test]
fn a_usable_size_the_node_cannot_have_is_invalid_and_its_balloon_left_alone() {
    for (annotations, reason) in [
        (
            usable("12", "24Gi"),
            "annotation nodescope.dev/usable-cpu: usable cpu 12 is more than the node's allocatable cpu 8",
        ),
        (
            usable("6", "64Gi"),
            "annotation nodescope.dev/usable-memory: usable memory 64Gi is more than the node's \
             allocatable memory 32Gi",
        ),
        (
            usable("0", "24Gi"),
            "annotation nodescope.dev/usable-cpu: usable cpu 0 leaves workloads nothing: \
             a usable size is above 0",
        ),
        (
            usable("-1", "24Gi"),
            "annotation nodescope.dev/usable-cpu: usable cpu -1 is negative",
        ),
        (
            usable("6", "99999999999999999999999"),
            "annotation nodescope.dev/usable-memory: usable memory 99999999999999999999999 is \
             too large: at most 9223372036854775807 can be held",
        ),
        (
            json!({"nodescope.dev/usable-fraction": "0.000000001"}),
            "annotation nodescope.dev/usable-fraction: usable fraction 0.000000001 of \
             allocatable cpu 8 rounds to 0: workloads would have nothing",
        ),
    ] {
        let plans = plan_nodes(
            &[node("n1", annotations.clone())],
            &[balloon("n1", "2", "8Gi")],
            &BalloonConfig::default(),
        );
        assert_eq!(
            (plans[0].state, plans[0].reason.as_str(), plans[0].resize.is_none()),
            (State::Invalid, reason, true),
            "{annotations}"
        );
    }
    // Exactly allocatable is a size: the balloon empties.
    let plans = plan_nodes(
        &[node("n1", usable("8", "32Gi"))],
        &[balloon("n1", "2", "8Gi")],
        &BalloonConfig::default(),
    );
    assert_eq!(plans[0].state, State::Resize);
    assert_eq!(plans[0].target, Some(pair("0", "0")));
}

#[test]
fn a_fraction_leaves_that_share_of_allocatable_usable() {
    let plans = plan_nodes(
        &[node("n1", json!({"nodescope.dev/usable-fraction": "0.25"}))],
        &[balloon("n1", "0", "0")],
        &BalloonConfig::default(),
    );
    assert_eq!(plans[0].target, Some(pair("6", "24Gi")));
    // An absolute size wins over the fraction for its resource.
    let plans = plan_nodes(
        &[node(
            "n1",
            json!({"nodescope.dev/usable-fraction": "0.333", "nodescope.dev/usable-memory": "30Gi"}),
        )],
        &[balloon("n1", "0", "0")],
        &BalloonConfig::default(),
    );
    assert_eq!(plans[0].target, Some(pair("5336m", "2Gi")));
}

#[test]
fn the_default_fraction_applies_to_nodes_without_a_size() {
    let config = BalloonConfig {
        default: DesiredSize {
            fraction: Some(Fraction::parse("0.5").expect("fraction")),
            ..DesiredSize::default()
        },
    };
    let plans = plan_nodes(
        &[node("n1", json!({})), node("n2", usable("8", "32Gi"))],
        &[balloon("n1", "4", "16Gi"), balloon("n2", "4", "16Gi")],
        &config,
    );
    assert_eq!(plans[0].state, State::Settled);
    assert_eq!(
        plans[0].reason,
        "the balloon holds cpu 4, memory 16Gi as asked"
    );
    assert_eq!(plans[1].target, Some(pair("0", "0")));
}

#[test]
fn an_upsize_the_other_pods_do_not_fit_under_is_refused_naming_them() {
    let pods = [
        balloon("n1", "500m", "512Mi"),
        workload("old", "n1", "2", "4Gi", "2026-11-25T09:00:00Z"),
        workload("mid", "n1", "1500m", "2Gi", "2026-11-25T09:30:00Z"),
        workload("new", "n1", "1", "1Gi", "2026-11-25T10:00:00Z"),
    ];
    let plans = plan_nodes(
        &[node("n1", usable("3", "24Gi"))],
        &pods,
        &BalloonConfig::default(),
    );
    let plan = &plans[0];
    assert_eq!(plan.state, State::Refused);
    assert_eq!(plan.resize, None);
    assert_eq!(
        plan.reason,
        "upsizing the balloon to cpu 5, memory 8Gi leaves cpu 3, memory 24Gi usable, \
         but the node's other pods request cpu 4500m, memory 7Gi: default/mid, default/new do not fit"
    );
    assert_eq!(plan.requested, pair("4500m", "7Gi"));
    assert_eq!(plan.free, pair("3", "25088Mi"));
}

#[test]
fn an_upsize_that_fits_exactly_proceeds() {
    let plans = plan_nodes(
        &[node("n1", usable("4500m", "7Gi"))],
        &[
            balloon("n1", "0", "0"),
            workload("a", "n1", "2", "4Gi", "2026-11-25T09:00:00Z"),
            workload("b", "n1", "2500m", "3Gi", "2026-11-25T09:00:00Z"),
        ],
        &BalloonConfig::default(),
    );
    assert_eq!(plans[0].state, State::Resize);
    assert_eq!(plans[0].target, Some(pair("3500m", "25Gi")));
}

#[test]
fn a_downsize_always_proceeds_even_on_an_overrun_node() {
    let plans = plan_nodes(
        &[node("n1", usable("2", "30Gi"))],
        &[
            balloon("n1", "7", "2Gi"),
            workload("big", "n1", "3", "1Gi", "2026-11-25T09:00:00Z"),
        ],
        &BalloonConfig::default(),
    );
    assert_eq!(plans[0].state, State::Resize);
    assert_eq!(plans[0].target, Some(pair("6", "2Gi")));
    assert_eq!(
        plans[0]
            .resize
            .as_ref()
            .map(|r| r.containers[0].requests.clone()),
        Some(vec![("cpu".into(), "6".into())])
    );
}

#[test]
fn a_guaranteed_balloon_keeps_requests_equal_to_limits() {
    let guaranteed = pod(
        "balloon-n1",
        "n1",
        true,
        json!({"requests": {"cpu": "1", "memory": "1Gi"}, "limits": {"cpu": "1", "memory": "1Gi"}}),
        "2026-11-25T08:00:00Z",
    );
    let plans = plan_nodes(
        &[node("n1", usable("6", "24Gi"))],
        &[guaranteed],
        &BalloonConfig::default(),
    );
    let containers = &plans[0].resize.as_ref().expect("a resize").containers;
    assert_eq!(
        containers[0].limits,
        vec![("cpu".into(), "2".into()), ("memory".into(), "8Gi".into())]
    );
    assert_eq!(containers[0].requests, containers[0].limits);
}

#[test]
fn a_burstable_balloon_keeps_its_higher_limits_and_refuses_a_request_above_one() {
    let burstable = |limit: &str| {
        pod(
            "balloon-n1",
            "n1",
            true,
            json!({"requests": {"cpu": "1", "memory": "1Gi"}, "limits": {"cpu": limit}}),
            "2026-11-25T08:00:00Z",
        )
    };
    let plans = plan_nodes(
        &[node("n1", usable("6", "24Gi"))],
        &[burstable("4")],
        &BalloonConfig::default(),
    );
    assert_eq!(
        plans[0]
            .resize
            .as_ref()
            .map(|r| r.containers[0].limits.len()),
        Some(0)
    );
    let plans = plan_nodes(
        &[node("n1", usable("6", "24Gi"))],
        &[burstable("1500m")],
        &BalloonConfig::default(),
    );
    assert_eq!(plans[0].state, State::Invalid);
    assert_eq!(
        plans[0].reason,
        "balloon pod kube-system/balloon-n1: its cpu limit 1500m is below the 2 it should request"
    );
}

#[test]
fn a_bad_annotation_is_named() {
    let plans = plan_nodes(
        &[node("n1", json!({"nodescope.dev/usable-fraction": "1.5"}))],
        &[balloon("n1", "1", "1Gi")],
        &BalloonConfig::default(),
    );
    assert_eq!(plans[0].state, State::Invalid);
    assert_eq!(
        plans[0].reason,
        "annotation nodescope.dev/usable-fraction: \"1.5\" is not in (0, 1]: a usable fraction is above 0 and at most 1"
    );
}

#[test]
fn fractions_parse_exactly() {
    let parsed: Vec<String> = ["0.25", "1", ".5", "1.0", "0.333333333"]
        .iter()
        .map(|t| {
            Fraction::parse(t)
                .map(|f| f.to_string())
                .unwrap_or_default()
        })
        .collect();
    assert_eq!(parsed, ["0.25", "1", "0.5", "1", "0.333333333"]);
    for bad in ["0", "", ".", "-0.5", "1.01", "0.1234567891", "a"] {
        assert!(Fraction::parse(bad).is_err(), "{bad}");
    }
}

#[test]
fn a_deferred_or_infeasible_resize_is_reported_and_never_asked_again() {
    let with_condition = |reason: &str| {
        RunningPod::from_value(&json!({
            "metadata": {"name": "balloon-n1", "namespace": "kube-system", "uid": "b", "resourceVersion": "12",
                         "labels": {"node.kubernetes.io/balloon": "true"}},
            "spec": {"nodeName": "n1", "containers": [{"name": "c", "resources": {"requests": {"cpu": "2", "memory": "8Gi"}}}]},
            "status": {"phase": "Running", "conditions": [
                {"type": "PodResizePending", "status": "True", "reason": reason, "message": "not now"}]},
        }))
        .expect("pod")
    };
    let node = node("n1", usable("6", "24Gi"));
    let deferred = plan_nodes(
        std::slice::from_ref(&node),
        &[with_condition("Deferred")],
        &BalloonConfig::default(),
    );
    assert_eq!(deferred[0].state, State::Deferred);
    assert_eq!(
        deferred[0].reason,
        "the kubelet deferred the resize (not now); it is retried later"
    );
    assert_eq!(deferred[0].resize, None);
    let infeasible = plan_nodes(
        &[node],
        &[with_condition("Infeasible")],
        &BalloonConfig::default(),
    );
    assert_eq!(infeasible[0].state, State::Infeasible);
    assert_eq!(
        infeasible[0].reason,
        "the node cannot fit the resize (not now); nothing is evicted for it"
    );
    assert_eq!(infeasible[0].resize, None);
}
