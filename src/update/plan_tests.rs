//! What a pass leaves alone, and why it says so.

use super::*;
use crate::store::Snapshot;
use crate::update::{Action, UpdateConfig, Workloads};
use serde_json::{json, Value};

const NOW: i64 = 1_795_000_000;

/// The reason of a pod at 100m whose group asks 500m.
const BELOW_BY_4: &str = "below its recommendation: the summed relative difference of its \
    requests from the recommendation (upstream's resource diff) is 4.00, at least \
    --pod-update-threshold 0.10";

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
    pass_with(
        objects,
        &UpdateConfig {
            min_replicas: 1,
            eviction_tolerance: 1.0,
            ..UpdateConfig::default()
        },
    )
}

fn pass_with(objects: Vec<Value>, config: &UpdateConfig) -> Vec<(String, Action, String)> {
    let (workloads, rest) = Workloads::split(objects).unwrap_or_else(|e| panic!("{e:?}"));
    let snapshot = Snapshot::build(rest);
    let mut plans: Vec<_> = plan_pass(
        &snapshot,
        &workloads,
        config,
        &mut Memory::default(),
        true,
        NOW,
    )
    .into_iter()
    .map(|p| (p.pod.to_string(), p.action, p.message.into_owned()))
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
            ("a-ok".into(), Action::Resize, BELOW_BY_4.into()),
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
    assert_eq!(plans[0].action, Action::Deferred);
    assert_eq!(
        plans[0].message,
        format!(
            "{BELOW_BY_4}, but nodescope's webhook has not renewed its status Lease: \
             no eviction, since the pod would come back without its group"
        )
    );
}

fn zone_vpa() -> Value {
    let mut v = vpa(
        "InPlaceOrRecreate",
        json!([{"scopeValue": "za", "containerRecommendations": [{"containerName": "c", "target": {"cpu": "100m"}}]}]),
    );
    v["spec"]["scope"] = "topology.kubernetes.io/zone".into();
    v["status"]["recommendation"] =
        json!({"containerRecommendations": [{"containerName": "c", "target": {"cpu": "500m"}}]});
    v
}

fn node(name: &str, zone: &str) -> Value {
    json!({"apiVersion": "v1", "kind": "Node",
        "metadata": {"name": name, "labels": {"topology.kubernetes.io/zone": zone}}})
}

#[test]
fn a_pod_whose_node_the_store_does_not_know_waits_instead_of_taking_the_vpa_wide_value() {
    let plans = pass(vec![
        zone_vpa(),
        node("n1", "za"),
        pod("a-known", "n1", json!({})),
        pod("b-unknown", "n9", json!({})),
    ]);
    assert_eq!(
        plans,
        vec![
            (
                "a-known".into(),
                Action::None,
                "at its recommendation".into()
            ),
            (
                "b-unknown".into(),
                Action::Deferred,
                "node \"n9\" is not known (no such Node in the store), so its \
                 topology.kubernetes.io/zone label is unknown: waiting until it is rather than \
                 moving the pod to the VerticalPodAutoscaler-wide recommendation"
                    .into()
            ),
        ]
    );
}

#[test]
fn pods_held_back_are_deferred_and_pods_with_nothing_to_do_are_none() {
    let objects = |extra: Value| {
        vec![
            vpa("Recreate", json!([group("n1"), group("n2")])),
            pod("a", "n1", extra.clone()),
            pod("b", "n2", extra),
        ]
    };
    // Two pods, one may be disrupted at once: the second waits its turn.
    let tolerance = UpdateConfig {
        min_replicas: 1,
        eviction_tolerance: 0.5,
        ..UpdateConfig::default()
    };
    let plans = pass_with(objects(json!({})), &tolerance);
    assert_eq!(plans[0].1, Action::Evict);
    assert_eq!(
        plans[1],
        (
            "b".into(),
            Action::Deferred,
            format!(
                "{BELOW_BY_4}; held back: 1 of 2 pods may be disrupted at once \
                 (--eviction-tolerance) and that many already are"
            )
        )
    );
    let few = UpdateConfig {
        min_replicas: 3,
        ..UpdateConfig::default()
    };
    let plans = pass_with(objects(json!({})), &few);
    assert_eq!(
        plans[0],
        (
            "a".into(),
            Action::Deferred,
            "2 live pods, fewer than --min-replicas 3".into()
        )
    );
    // Within its recommended range and too young: deferred until older;
    // a change below the threshold: nothing to do.
    let mut young = objects(json!({}));
    young[0]["status"]["recommendationGroups"] = json!([
        {"scopeValue": "n1", "containerRecommendations": [{"containerName": "c", "target": {"cpu": "500m"}}]},
        {"scopeValue": "n2", "containerRecommendations": [{"containerName": "c", "target": {"cpu": "105m"}}]},
    ]);
    young[1]["status"]["startTime"] = "2026-11-18T00:00:00Z".into();
    young[2]["status"]["startTime"] = "2026-11-01T00:00:00Z".into();
    let plans = pass(young);
    assert_eq!(
        plans,
        vec![
            (
                "a".into(),
                Action::Deferred,
                "within its recommendation and younger than \
                 --in-recommendation-bounds-eviction-lifetime-threshold"
                    .into()
            ),
            (
                "b".into(),
                Action::None,
                "the summed relative difference of its requests from the recommendation \
                 (upstream's resource diff) is 0.05, below --pod-update-threshold 0.10"
                    .into()
            ),
        ]
    );
}

#[test]
fn a_deferred_plan_carries_nothing_to_write_and_is_not_an_action() {
    let (workloads, rest) = Workloads::split(vec![
        vpa("Recreate", json!([group("n1")])),
        pod("a", "n1", json!({})),
    ])
    .unwrap_or_else(|e| panic!("{e:?}"));
    let snapshot = Snapshot::build(rest);
    let config = UpdateConfig {
        min_replicas: 1,
        ..UpdateConfig::default()
    };
    // A stale webhook Lease holds the eviction back.
    let plans = plan_pass(
        &snapshot,
        &workloads,
        &config,
        &mut Memory::default(),
        false,
        NOW,
    );
    assert_eq!(plans[0].action, Action::Deferred);
    assert!(plans[0].ops.is_empty());
    assert_eq!(plans[0].containers[0].desired, None);
    assert_eq!(
        [
            Action::None,
            Action::Deferred,
            Action::Resize,
            Action::Evict
        ]
        .map(Action::acts),
        [false, false, true, true]
    );
}

#[test]
fn a_vpas_evict_after_oom_seconds_replaces_the_flag_only_under_the_gate() {
    // A pod 5% below its group (under --pod-update-threshold) whose
    // container was OOM-killed 400 s after it started: a quick OOM under the
    // flag's 600 s, not under the VPA's 300 s.
    let objects = |seconds: i64| {
        let mut v = vpa(
            "InPlaceOrRecreate",
            json!([{"scopeValue": "n1", "containerRecommendations": [{"containerName": "c", "target": {"cpu": "105m"}}]}]),
        );
        v["spec"]["updatePolicy"]["evictAfterOOMSeconds"] = json!(seconds);
        let mut p = pod("a", "n1", json!({}));
        p["status"]["containerStatuses"] = json!([{"name": "c",
            "resources": {"requests": {"cpu": "100m"}},
            "lastState": {"terminated": {"reason": "OOMKilled",
                "startedAt": "2026-11-10T00:00:00Z", "finishedAt": "2026-11-10T00:06:40Z"}}}]);
        vec![v, p]
    };
    let config = |gate: bool| UpdateConfig {
        min_replicas: 1,
        eviction_tolerance: 1.0,
        per_vpa_config: gate,
        ..UpdateConfig::default()
    };
    let diff = "the summed relative difference of its requests from the recommendation \
        (upstream's resource diff) is 0.05";
    let one = |seconds: i64, gate: bool| {
        let plans = pass_with(objects(seconds), &config(gate));
        assert_eq!(plans.len(), 1, "{plans:?}");
        (plans[0].1, plans[0].2.clone())
    };
    assert_eq!(
        one(300, false),
        (
            Action::Resize,
            format!("a container was OOM-killed sooner than --evict-after-oom-threshold after it started; {diff}")
        )
    );
    assert_eq!(
        one(300, true),
        (
            Action::None,
            "the summed relative difference of its requests from the recommendation \
             (upstream's resource diff) is 0.05, below --pod-update-threshold 0.10"
                .to_owned()
        )
    );
    assert_eq!(
        one(500, true),
        (
            Action::Resize,
            format!("a container was OOM-killed sooner than its VPA's evictAfterOOMSeconds (500) after it started; {diff}")
        )
    );
}

#[test]
fn an_evict_after_oom_seconds_below_one_is_refused_naming_the_field() {
    let mut v = vpa("InPlaceOrRecreate", json!([group("n1")]));
    v["spec"]["updatePolicy"]["evictAfterOOMSeconds"] = json!(0);
    let (_, rest) = Workloads::split(vec![v]).unwrap_or_else(|e| panic!("{e:?}"));
    let snapshot = Snapshot::build(rest);
    let errors = format!("{:?}", snapshot.problems);
    assert!(
        errors.contains("spec.updatePolicy.evictAfterOOMSeconds")
            && errors.contains("0 is not a whole number of seconds from 1 to 2147483647"),
        "{errors}"
    );
}

#[test]
fn pods_that_are_not_ready_are_changed_without_taking_from_the_tolerance() {
    // Four pods of one DaemonSet, one of which may be disrupted at once.
    // Those not Ready (OOM-killed, say) are disrupted already: resizing or
    // evicting them disrupts nothing more, so all of them go in one pass,
    // and the Ready ones still wait for the tolerance.
    let unready = json!({"type": "Ready", "status": "False", "reason": "ContainersNotReady"});
    let objects = |mode: &str, ready: usize| {
        let mut objects = vec![vpa(
            mode,
            json!([group("n1"), group("n2"), group("n3"), group("n4")]),
        )];
        for (i, name) in ["a", "b", "c", "d"].into_iter().enumerate() {
            let mut p = pod(name, &format!("n{}", i + 1), json!({}));
            if i >= ready {
                p["status"]["conditions"] = json!([unready]);
            }
            objects.push(p);
        }
        objects
    };
    let quarter = UpdateConfig {
        min_replicas: 1,
        eviction_tolerance: 0.25,
        ..UpdateConfig::default()
    };
    let actions = |mode: &str, ready: usize| -> Vec<Action> {
        pass_with(objects(mode, ready), &quarter)
            .into_iter()
            .map(|p| p.1)
            .collect()
    };
    assert_eq!(actions("InPlaceOrRecreate", 0), vec![Action::Resize; 4]);
    assert_eq!(actions("Recreate", 0), vec![Action::Evict; 4]);
    // Two Ready, two not: the two not Ready go; of the Ready, none, since
    // two are disrupted already and one of four may be.
    assert_eq!(
        actions("InPlaceOrRecreate", 2),
        vec![
            Action::Deferred,
            Action::Deferred,
            Action::Resize,
            Action::Resize
        ]
    );
    // All Ready: one at a time, as before.
    assert_eq!(
        actions("InPlaceOrRecreate", 4),
        vec![
            Action::Resize,
            Action::Deferred,
            Action::Deferred,
            Action::Deferred
        ]
    );
}
