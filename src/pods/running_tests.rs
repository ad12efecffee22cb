//! Tests of [`RunningPod`]: what is kept and how bad fields are named.
use super::*;
use serde_json::json;

fn pod(status: Value) -> Value {
    json!({
        "metadata": {
            "name": "agent-x", "namespace": "monitoring", "uid": "u1", "resourceVersion": "7",
            "labels": {"app": "agent"},
            "annotations": {"vpaObservedContainers": "agent", "other": "dropped"},
            "ownerReferences": [{"apiVersion": "apps/v1", "kind": "DaemonSet", "name": "agent", "controller": true, "uid": "d1"}],
        },
        "spec": {
            "nodeName": "node-a",
            "containers": [{"name": "agent", "image": "x", "resources": {"requests": {"cpu": "100m"}, "limits": {"cpu": "200m"}}}],
        },
        "status": status,
    })
}

#[test]
fn keeps_what_decisions_read() {
    let p = RunningPod::from_value(&pod(json!({
        "phase": "Running",
        "startTime": "2026-11-25T10:00:00Z",
        "conditions": [
            {"type": "Ready", "status": "True"},
            {"type": "PodResizePending", "status": "True", "reason": "Infeasible", "message": "too big"},
        ],
        "containerStatuses": [{
            "name": "agent",
            "resources": {"requests": {"cpu": "100m"}, "limits": {"cpu": "200m"}},
            "lastState": {"terminated": {"reason": "OOMKilled", "startedAt": "2026-11-25T10:00:00Z", "finishedAt": "2026-11-25T10:01:40Z"}},
        }],
    })))
    .expect("pod");
    assert_eq!(&*p.name, "agent-x");
    assert_eq!(p.node.as_deref(), Some("node-a"));
    assert_eq!(p.daemonset.as_deref(), Some("agent"));
    assert_eq!(p.phase, PodPhase::Running);
    assert!(p.ready);
    assert_eq!(p.start_time, Some(1_795_600_800));
    assert_eq!(p.resize, ResizeStatus::Infeasible("too big".into()));
    assert_eq!(p.containers[0].last_oom_after, Some(100));
    let view = p.view();
    assert_eq!(view.annotation("vpaObservedContainers"), Some("agent"));
    assert_eq!(view.annotation("other"), None);
    assert_eq!(view.daemonset_controller(), Some("agent"));
    assert_eq!(
        view.spec.containers[0]
            .requests()
            .and_then(|r| r.get("cpu"))
            .map(|q| &*q.0),
        Some("100m")
    );
}

#[test]
fn bad_fields_are_named() {
    let mut bad = pod(json!({"startTime": "yesterday"}));
    let e = RunningPod::from_value(&bad).expect_err("bad time");
    assert_eq!(
        e.to_string(),
        "Pod monitoring/agent-x: status.startTime: \"yesterday\" is not an RFC 3339 time: \
         failed to parse four digit integer as year: invalid digit, expected 0-9 but got y"
    );
    bad["status"] = json!({});
    bad["spec"]["containers"][0]["resources"]["requests"] = json!(["1"]);
    let e = RunningPod::from_value(&bad).expect_err("bad resources");
    assert_eq!(
        e.to_string(),
        "Pod monitoring/agent-x: spec.containers[0].resources.requests: invalid type: array, expected an object"
    );
    let e = RunningPod::from_value(&json!({"metadata": {"name": "x"}})).expect_err("no ns");
    assert_eq!(
        e.to_string(),
        "Pod <no namespace>/x: metadata.name and metadata.namespace are required"
    );
}
