//! The startup boost in a pass (upstream's `TestRunOnce_AutoUnboostThen*`
//! in pkg/updater/logic/updater_test.go, 55c37cd5eb55, as plans): a
//! boosted pod waits for its boost to expire, is then resized in place to
//! its group's value whatever the updateMode, within the tolerance, and
//! loses its annotation; without the gate it is updated like any other.

use super::plan_pass;
use crate::store::Snapshot;
use crate::update::{Action, Memory, UpdateConfig, Workloads};
use serde_json::{json, Value};

const NOW: i64 = 1_795_000_000;

fn vpa(mode: &str) -> Value {
    json!({"apiVersion": "autoscaling.k8s.io/v1", "kind": "VerticalPodAutoscaler",
        "metadata": {"name": "agent", "namespace": "ns", "creationTimestamp": "2026-11-01T00:00:00Z"},
        "spec": {"scope": "node", "targetRef": {"apiVersion": "apps/v1", "kind": "DaemonSet", "name": "agent"},
            "updatePolicy": {"updateMode": mode},
            "startupBoost": {"cpu": {"type": "Factor", "factor": 2, "durationSeconds": 60}}},
        "status": {"recommendationGroups": [
            {"scopeValue": "n1", "containerRecommendations": [{"containerName": "c", "target": {"cpu": "500m"}}]},
            {"scopeValue": "n2", "containerRecommendations": [{"containerName": "c", "target": {"cpu": "500m"}}]}]}})
}

/// A pod boosted to 1 cpu from 100m, Ready `ready_ago` seconds.
fn boosted(name: &str, node: &str, ready_ago: i64) -> Value {
    let ready = k8s_openapi::jiff::Timestamp::from_second(NOW - ready_ago)
        .map(|t| t.to_string())
        .unwrap_or_default();
    json!({"apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": name, "namespace": "ns", "uid": name,
            "annotations": {"vpaCpuStartupBoost/c": r#"{"requests":{"cpu":"100m"},"limits":{}}"#,
                "nodescope.dev/original-resources": r#"{"c":{"requests":{"cpu":"100m"}}}"#},
            "ownerReferences": [{"apiVersion": "apps/v1", "kind": "DaemonSet", "name": "agent", "controller": true}]},
        "spec": {"nodeName": node, "containers": [{"name": "c", "resources": {"requests": {"cpu": "1"}}}]},
        "status": {"phase": "Running", "startTime": "2026-11-01T00:00:00Z",
            "conditions": [{"type": "Ready", "status": "True", "lastTransitionTime": ready}]}})
}

fn pass(objects: Vec<Value>, gate: bool) -> Vec<(String, Action, String, String, Vec<String>)> {
    let (workloads, rest) = Workloads::split(objects).unwrap_or_else(|e| panic!("{e:?}"));
    let snapshot = Snapshot::build(rest);
    let config = UpdateConfig {
        min_replicas: 1,
        startup_boost: gate,
        ..UpdateConfig::default()
    };
    let mut plans: Vec<_> = plan_pass(
        &snapshot,
        &workloads,
        &config,
        &mut Memory::default(),
        true,
        NOW,
    )
    .into_iter()
    .map(|p| {
        let ops = serde_json::to_string(&p.ops).unwrap_or_default();
        (
            p.pod.to_string(),
            p.action,
            p.message.into_owned(),
            ops,
            p.unboost,
        )
    })
    .collect();
    plans.sort_by(|a, b| a.0.cmp(&b.0));
    plans
}

#[test]
fn an_expired_boost_is_taken_back_in_place_in_every_mode() {
    for mode in ["Off", "Initial", "Recreate", "InPlaceOrRecreate"] {
        let plans = pass(
            vec![vpa(mode), boosted("a", "n1", 120), boosted("b", "n2", 10)],
            true,
        );
        let (_, action, reason, ops, unboost) = &plans[0];
        assert_eq!(*action, Action::Resize, "{mode}: {reason}");
        assert!(
            reason.starts_with("unboost: the CPU startup boost of c expired"),
            "{reason}"
        );
        // Off applied no recommendation: back to the recorded original.
        let want = if mode == "Off" { "100m" } else { "500m" };
        assert_eq!(
            ops,
            &format!(
                r#"[{{"op":"add","path":"/spec/containers/0/resources/requests/cpu","value":"{want}"}}]"#
            ),
            "{mode}"
        );
        assert_eq!(unboost, &["vpaCpuStartupBoost/c".to_owned()]);
        let (_, action, reason, _, _) = &plans[1];
        assert_eq!(*action, Action::Deferred, "{mode}");
        assert_eq!(
            reason,
            "CPU startup boost in progress: unboosted 60s after the pod became Ready (Ready 10s ago)"
        );
    }
}

#[test]
fn unboosts_keep_to_the_tolerance_and_the_gate_is_needed() {
    // Two expired pods, --eviction-tolerance 0.5 of 2: one at a time.
    let plans = pass(
        vec![
            vpa("Recreate"),
            boosted("a", "n1", 120),
            boosted("b", "n2", 120),
        ],
        true,
    );
    let actions: Vec<Action> = plans.iter().map(|p| p.1).collect();
    assert_eq!(actions, [Action::Resize, Action::Deferred]);
    assert!(plans[1].2.contains("held back"), "{}", plans[1].2);
    // Without the gate a boosted pod is a pod above its group: Recreate
    // evicts it (the lifetime threshold is long past), no unboost.
    let plans = pass(vec![vpa("Recreate"), boosted("a", "n1", 120)], false);
    assert_eq!(plans[0].1, Action::Evict, "{}", plans[0].2);
    assert!(plans[0].4.is_empty());
}
