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

#[test]
fn the_mark_is_read_once_and_given_as_the_webhook_reads_it() {
    let mut marked = pod(json!({}));
    marked["metadata"]["annotations"]["nodescope.dev/original-resources"] =
        json!(r#"{"agent":{"requests":{"cpu":"50m"},"limits":{"cpu":"100m"}}}"#);
    let p = RunningPod::from_value(&marked).expect("pod");
    assert!(p.has_mark());
    let originals = p.originals().expect("readable").expect("marked");
    let (requests, limits) = originals.get("agent").expect("agent recorded");
    let texts = |m: Option<&crate::mutate::pod::ResourceTexts<'_>>| -> Vec<(String, String)> {
        m.into_iter()
            .flat_map(|m| m.iter())
            .map(|(k, v)| (k.to_string(), v.0.to_string()))
            .collect()
    };
    assert_eq!(texts(requests), [("cpu".to_owned(), "50m".to_owned())]);
    assert_eq!(texts(limits), [("cpu".to_owned(), "100m".to_owned())]);
    // Kept apart: the view's annotations hold only the observed containers.
    assert_eq!(
        p.view().annotation("nodescope.dev/original-resources"),
        None
    );

    marked["metadata"]["annotations"]["nodescope.dev/original-resources"] = json!("{not json");
    let p = RunningPod::from_value(&marked)
        .expect("a bad mark is the arithmetic's warning, not an error");
    assert!(p.has_mark());
    assert_eq!(
        p.originals().expect_err("unreadable"),
        "annotation nodescope.dev/original-resources: key must be a string at line 1 column 2"
    );
    assert!(!RunningPod::from_value(&pod(json!({})))
        .expect("pod")
        .has_mark());
}
