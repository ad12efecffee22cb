//! Tests of [`PodText`]: whenever the typed read answers, it answers what
//! [`RunningPod::from_value`] reads from the same text; it answers for the
//! pods a dump holds, and leaves the odd ones to the Value read.
use super::*;
use serde_json::{json, Value};

/// Both reads of `text`: the typed one, checked against the Value one.
fn both(text: &str) -> (Option<RunningPod>, Result<RunningPod, String>) {
    let value: Value = serde_json::from_str(text).expect("test JSON");
    let read = RunningPod::from_value(&value).map_err(|e| e.to_string());
    let typed = PodText::parse(text).and_then(|p| p.running());
    if let Some(typed) = &typed {
        assert_eq!(Ok(typed), read.as_ref(), "{text}");
    }
    (typed, read)
}

/// The typed read answers, and as the Value read does.
fn typed(value: &Value) -> RunningPod {
    let (typed, read) = both(&value.to_string());
    let typed = typed.unwrap_or_else(|| panic!("declined: {value} ({read:?})"));
    assert_eq!(Ok(&typed), read.as_ref());
    typed
}

/// The typed read leaves the pod to the Value read.
fn declined(text: &str) -> Result<RunningPod, String> {
    let (typed, read) = both(text);
    assert_eq!(typed, None, "{text}");
    read
}

/// A pod as `kubectl get pods -o json` writes it (as bench/offline-memory.sh does).
fn dumped() -> Value {
    json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {
            "name": "agent-3-0000013", "namespace": "monitoring", "generateName": "agent-3-",
            "uid": "u-13", "resourceVersion": "1013", "creationTimestamp": "2026-11-01T00:00:00Z",
            "labels": {"app": "agent-3", "controller-revision-hash": "5d8f7c9b4"},
            "annotations": {"kubectl.kubernetes.io/default-container": "agent"},
            "ownerReferences": [
                {"apiVersion": "v1", "kind": "Node", "name": "n", "uid": "x"},
                {"apiVersion": "apps/v1", "kind": "DaemonSet", "name": "agent-3", "uid": "d3",
                 "controller": true, "blockOwnerDeletion": true},
            ],
        },
        "spec": {
            "nodeName": "node-000001", "serviceAccountName": "agent",
            "affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
                "nodeSelectorTerms": [{"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["node-000001"]}]}]}}},
            "containers": [{
                "name": "agent", "image": "registry.example/agent:1.2.3",
                "args": ["--path.procfs=/host/proc"],
                "env": [{"name": "NODE_NAME", "valueFrom": {"fieldRef": {"fieldPath": "spec.nodeName"}}}],
                "resources": {"requests": {"cpu": "100m", "memory": "128Mi"}, "limits": {"cpu": "200m", "memory": "256Mi"}},
                "resizePolicy": [{"resourceName": "cpu", "restartPolicy": "NotRequired"}],
            }],
            "tolerations": [{"effect": "NoExecute", "key": "node.kubernetes.io/not-ready", "operator": "Exists"}],
            "volumes": [{"name": "proc", "hostPath": {"path": "/proc", "type": ""}}],
        },
        "status": {
            "phase": "Running", "qosClass": "Burstable", "startTime": "2026-11-01T00:00:10Z",
            "conditions": [
                {"type": "Initialized", "status": "True", "lastTransitionTime": "2026-11-01T00:00:11Z"},
                {"type": "Ready", "status": "True", "lastTransitionTime": "2026-11-01T00:00:12Z"},
            ],
            "containerStatuses": [{
                "name": "agent", "ready": true, "restartCount": 0, "image": "registry.example/agent:1.2.3",
                "resources": {"requests": {"cpu": "100m", "memory": "128Mi"}, "limits": {"cpu": "200m", "memory": "256Mi"}},
                "state": {"running": {"startedAt": "2026-11-01T00:00:11Z"}},
            }],
        },
    })
}

#[test]
fn a_dumped_pod_is_read_as_the_value_read_reads_it() {
    let pod = typed(&dumped());
    assert_eq!(
        (&*pod.namespace, &*pod.name, pod.daemonset.as_deref()),
        ("monitoring", "agent-3-0000013", Some("agent-3"))
    );
    assert_eq!(pod.node.as_deref(), Some("node-000001"));
    assert_eq!(
        (pod.phase, pod.ready, pod.ready_since, pod.start_time),
        (
            PodPhase::Running,
            true,
            Some(1_793_491_212),
            Some(1_793_491_210)
        )
    );
    assert!(!pod.awaiting_actuation && pod.non_disruptive_resize && !pod.balloon);
    let text = dumped().to_string();
    let read = PodText::parse(&text).expect("parsed");
    assert_eq!(
        (read.kind(), read.api_version()),
        (Some(Some("Pod")), Some(Some("v1")))
    );
    assert_eq!(read.label("app"), Some("agent-3"));
    assert_eq!(
        (read.namespace(), read.name()),
        ("monitoring", "agent-3-0000013")
    );
}

#[test]
fn every_field_the_pod_keeps_reads_alike() {
    let mut pod = dumped();
    pod["metadata"]["labels"]["node.kubernetes.io/balloon"] = json!("true");
    pod["metadata"]["deletionTimestamp"] = json!("2026-11-02T00:00:00Z");
    pod["metadata"]["annotations"] = json!({
        "vpaCpuStartupBoost/zeta": "1", "vpaCpuStartupBoost/agent": "2",
        "vpaObservedContainers": "agent",
        "nodescope.dev/original-resources": r#"{"agent":{"requests":{"cpu":"50m"}}}"#,
    });
    pod["spec"]["containers"][0]["resizePolicy"] = json!([{"restartPolicy": "RestartContainer"}]);
    pod["spec"]["containers"]
        .as_array_mut()
        .expect("containers")
        .push(json!({"name": "side", "resources": null}));
    pod["status"]["conditions"] = json!([
        {"type": "Ready", "status": "False", "lastTransitionTime": "2026-11-01T00:01:00Z"},
        {"type": "PodResizePending", "status": "True", "reason": "Deferred", "message": "later"},
        {"type": "PodResizeInProgress", "status": "True"},
    ]);
    pod["status"]["containerStatuses"][0]["resources"]["requests"]["cpu"] = json!("0.1");
    pod["status"]["containerStatuses"][0]["lastState"] = json!({"terminated": {
        "reason": "OOMKilled", "startedAt": "2026-11-01T00:00:00Z", "finishedAt": "2026-11-01T00:00:30Z"}});
    pod["status"]["phase"] = json!("Failed");
    let read = typed(&pod);
    assert!(read.balloon && read.terminating && !read.non_disruptive_resize && !read.ready);
    assert_eq!(read.phase, PodPhase::Done);
    assert_eq!(read.resize, ResizeStatus::Deferred("later".into()));
    assert_eq!(read.containers[0].last_oom_after, Some(30));
    // 0.1 is 100m: the same quantity, so nothing waits to be actuated.
    assert!(!read.awaiting_actuation);
    assert_eq!(
        read.annotations().collect::<Vec<_>>(),
        [
            ("vpaObservedContainers", "agent"),
            ("vpaCpuStartupBoost/agent", "2"),
            ("vpaCpuStartupBoost/zeta", "1"),
        ]
    );
    assert!(read.originals().expect("readable").is_some());
    pod["status"]["containerStatuses"][0]["resources"]["requests"]["cpu"] = json!("150m");
    pod["metadata"]["annotations"]["nodescope.dev/original-resources"] = json!("{not json");
    pod["spec"]["nodeName"] = json!("");
    let read = typed(&pod);
    assert!(read.awaiting_actuation && read.has_mark() && read.node.is_none());
    assert!(read.originals().is_err());
    // No status, no owner, no annotations: a pod just created.
    let bare = json!({"metadata": {"name": "a", "namespace": "b"}, "spec": {"containers": []}});
    let read = typed(&bare);
    assert_eq!((read.phase, read.daemonset), (PodPhase::Pending, None));
}

#[test]
fn a_repeated_key_keeps_its_last_value_in_both_reads() {
    let text = r#"{"metadata": {"name": "a", "namespace": "b",
        "labels": {"node.kubernetes.io/balloon": "false", "node.kubernetes.io/balloon": "true"},
        "annotations": {"vpaCpuStartupBoost/a": "1", "vpaCpuStartupBoost/a": "2"}},
        "spec": {"containers": [{"name": "c", "resources": {"requests": {"cpu": "1", "cpu": "2"}}}]}}"#;
    let (typed, _) = both(text);
    let typed = typed.expect("typed");
    assert!(typed.balloon);
    assert_eq!(typed.annotation("vpaCpuStartupBoost/a"), Some("2"));
    assert_eq!(
        typed.spec[0].requests.as_ref().and_then(|r| r.get("cpu")),
        Some("2")
    );
    // A field given twice is the Value read's to settle.
    declined(
        r#"{"metadata": {"name": "a", "name": "b", "namespace": "c"}, "spec": {"containers": []}}"#,
    )
    .expect("last name wins");
}

#[test]
fn odd_shapes_and_errors_are_left_to_the_value_read() {
    // Read leniently there: a number quantity, labels that are no map.
    let read = declined(
        r#"{"metadata": {"name": "a", "namespace": "b", "labels": 3},
            "spec": {"containers": [{"name": "c", "resources": {"requests": {"cpu": 1}}}]}}"#,
    )
    .expect("read");
    assert_eq!(
        read.spec[0].requests.as_ref().and_then(|r| r.get("cpu")),
        Some("1")
    );
    // Errors, each worded by the Value read.
    for (text, error) in [
        (
            r#"{"metadata": ["a", "b"], "spec": {"containers": []}}"#,
            "Pod <no namespace>/<no name>: metadata.name and metadata.namespace are required",
        ),
        (
            r#"{"metadata": {"name": "a", "namespace": "b"}, "spec": {"containers": {}}}"#,
            "Pod b/a: spec.containers: expected an array",
        ),
        (
            r#"{"metadata": {"name": "a", "namespace": "b"}, "spec": {"containers": []},
                "status": {"startTime": "soon"}}"#,
            "Pod b/a: status.startTime: \"soon\" is not an RFC 3339 time: failed to parse four digit integer as year: invalid digit, expected 0-9 but got s",
        ),
        (
            r#"{"metadata": {"name": "a", "namespace": "b"},
                "spec": {"containers": [{"name": "c", "resources": {"limits": {"": "1"}}}]}}"#,
            "Pod b/a: spec.containers[0].resources.limits: \"1\": a resource name cannot be empty",
        ),
    ] {
        assert_eq!(declined(text).expect_err(text), error);
    }
}
