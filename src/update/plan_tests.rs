//! What a pass leaves alone, and why it says so.

use super::*;
use crate::store::Snapshot;
use crate::update::{Action, UpdateConfig, Workloads};
use serde_json::{json, Value};

const NOW: i64 = 1_795_000_000;

fn vpa(mode: &str, groups: Value) -> Value {
    json!({"apiVersion": "autoscaling.k8s.io/v1", "kind": "VerticalPodAutoscaler",
        "metadata": {"name": "agent", "namespace": "ns", "creationTimestamp": "2026-11-01T00:00:00Z"},
        "spec": {"scope": "node", "targetRef": {"apiVersion": "apps/v1", "kind": "DaemonSet", "name": "agent"},
            "updatePolicy": {"updateMode": mode}},
        "status": {"recommendationGroups": groups}})
}

fn group(node: &str) -> Value {
    json!({"scopeValue": node, "containerRecommendations": [{"containerName": "c", "target": {"cpu": "500m"}}]})
}

fn pod(name: &str, node: &str, extra: Value) -> Value {
    let mut p = json!({"apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": name, "namespace": "ns", "uid": name,
            "ownerReferences": [{"apiVersion": "apps/v1", "kind": "DaemonSet", "name": "agent", "controller": true}]},
        "spec": {"nodeName": node, "containers": [{"name": "c", "resources": {"requests": {"cpu": "100m"}}}]},
        "status": {"phase": "Running", "startTime": "2026-11-01T00:00:00Z", "conditions": [{"type": "Ready", "status": "True"}]}});
    if let (Some(p), Some(extra)) = (p["metadata"].as_object_mut(), extra.as_object()) {
        for (k, v) in extra {
            p.insert(k.clone(), v.clone());
        }
    }
    p
}

fn pass(objects: Vec<Value>) -> Vec<(String, Action, String)> {
    let (workloads, rest) = Workloads::split(objects).unwrap_or_else(|e| panic!("{e:?}"));
    let snapshot = Snapshot::build(rest);
    let config = UpdateConfig {
        min_replicas: 1,
        eviction_tolerance: 1.0,
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
    .map(|p| (p.pod.to_string(), p.action, p.reason.into_owned()))
    .collect();
    plans.sort_by(|a, b| a.0.cmp(&b.0));
    plans
}

#[test]
fn pods_it_never_touches() {
    let plans = pass(vec![
        vpa(
            "InPlaceOrRecreate",
            json!([group("n1"), group("n2"), group("n3")]),
        ),
        pod("a-ok", "n1", json!({})),
        pod(
            "b-balloon",
            "n2",
            json!({"labels": {"node.kubernetes.io/balloon": "true"}}),
        ),
        pod(
            "c-terminating",
            "n3",
            json!({"deletionTimestamp": "2026-11-25T00:00:00Z"}),
        ),
        pod("d-no-group", "n9", json!({})),
    ]);
    assert_eq!(
        plans,
        vec![
            ("a-ok".into(), Action::Resize, "below its recommendation by 4.00".into()),
            ("b-balloon".into(), Action::None, "a balloon pod: only the balloon controller resizes it".into()),
            ("c-terminating".into(), Action::None, "terminating".into()),
            (
                "d-no-group".into(),
                Action::None,
                "no recommendation for node \"n9\" in VerticalPodAutoscaler ns/agent; resources left unchanged".into()
            ),
        ]
    );
}

#[test]
fn modes_and_the_feature_gate() {
    for (mode, reason) in [
        ("Initial", "updateMode Initial never changes a running pod"),
        ("Off", "updateMode Off never changes a running pod"),
    ] {
        let plans = pass(vec![
            vpa(mode, json!([group("n1")])),
            pod("a", "n1", json!({})),
        ]);
        assert_eq!(
            plans,
            vec![("a".into(), Action::None, reason.into())],
            "{mode}"
        );
    }
    for state in ["TurningOff", "Off"] {
        let feature = json!({"apiVersion": "featureflags.nodescope.dev/v1alpha1", "kind": "Feature",
            "metadata": {"name": "vpa-node-scope", "namespace": "kube-system"}, "spec": {"desired": "Disabled"},
            "status": {"state": state}});
        let plans = pass(vec![
            vpa("Recreate", json!([group("n1")])),
            pod("a", "n1", json!({})),
            feature,
        ]);
        assert_eq!(
            plans,
            vec![(
                "a".into(),
                Action::None,
                format!("feature kube-system/vpa-node-scope is {state}")
            )]
        );
    }
}

#[test]
fn recreate_evicts_and_a_stale_webhook_stops_it() {
    let objects = vec![
        vpa("Recreate", json!([group("n1")])),
        pod("a", "n1", json!({})),
    ];
    assert_eq!(pass(objects.clone())[0].1, Action::Evict);
    let (workloads, rest) = Workloads::split(objects).unwrap_or_else(|e| panic!("{e:?}"));
    let snapshot = Snapshot::build(rest);
    let config = UpdateConfig {
        min_replicas: 1,
        ..UpdateConfig::default()
    };
    let plans = plan_pass(
        &snapshot,
        &workloads,
        &config,
        &mut Memory::default(),
        false,
        NOW,
    );
    assert_eq!(plans[0].action, Action::None);
    assert_eq!(
        plans[0].reason,
        "below its recommendation by 4.00, but nodescope's webhook has not renewed its status Lease: \
         no eviction, since the pod would come back without its group"
    );
}
