//! Synthetic DaemonSets and their running pods for the updater's benchmark
//! (benches/update.rs): the scoped VPAs of [`crate::store::synthetic`] with
//! `updateMode: InPlaceOrRecreate`, the DaemonSet of each, the Nodes, and
//! one pod of every DaemonSet on every node, as the apiserver lists them
//! (bound, Running and Ready, started long ago, two containers whose
//! actuated resources are in `containerStatuses[].resources`).
//!
//! Most pods are not at their group's recommendation, so a pass has work
//! to do. By node number `n`:
//! - `n % 10 == 0`: created through nodescope's webhook (marked with the
//!   template's resources) and at the group's target now;
//! - `n % 10` of 1 or 2: created without nodescope (no mark), still with
//!   the template's resources;
//! - otherwise: marked, with the resources of an older recommendation.

use crate::mutate::mark::ORIGINAL_RESOURCES_ANNOTATION;
use crate::store::synthetic::{
    daemonset_name, group_targets, node_scoped_vpas, zone_group, zone_scoped_cluster, CONTAINERS,
    ZONES,
};
use serde_json::{json, Value};

/// How the VPAs group their pods.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Scope {
    /// `scope: node`: a group per node.
    Node,
    /// `scope: topology.kubernetes.io/zone`: a group per zone.
    Zone,
}

/// The namespace of every synthetic object.
pub const NAMESPACE: &str = "monitoring";

/// Start time of every pod: weeks before any `now` a bench passes.
pub const START_TIME: &str = "2026-11-01T00:00:00Z";

/// The template's (requests, limits) per container of [`CONTAINERS`], as
/// (millicores, MiB) each; limits are twice the requests.
const TEMPLATE: [(usize, usize); 2] = [(100, 128), (10, 20)];

/// `vpas` scoped VPAs (`InPlaceOrRecreate`) with their DaemonSets
/// (`desiredNumberScheduled` = `nodes`) and `nodes` labelled Nodes: every
/// object a pass reads except the pods ([`pods`]).
#[must_use]
pub fn cluster(vpas: usize, nodes: usize, scope: Scope) -> Vec<Value> {
    let mut objects = match scope {
        // The Nodes of the zone-scoped cluster, with no VPA of their own.
        Scope::Node => {
            let mut objects = node_scoped_vpas(vpas, nodes);
            objects.extend(zone_scoped_cluster(0, nodes));
            objects
        }
        Scope::Zone => zone_scoped_cluster(vpas, nodes),
    };
    for vpa in objects
        .iter_mut()
        .filter(|o| o["kind"] == "VerticalPodAutoscaler")
    {
        vpa["spec"]["updatePolicy"]["updateMode"] = json!("InPlaceOrRecreate");
    }
    objects.extend((0..vpas).map(|i| daemonset(i, nodes)));
    objects
}

/// Pods of DaemonSet `i` on nodes `0..nodes`, for every `i < vpas`.
pub fn pods(vpas: usize, nodes: usize, scope: Scope) -> impl Iterator<Item = Value> {
    (0..vpas).flat_map(move |i| (0..nodes).map(move |n| pod(i, n, scope)))
}

/// Resources as a pod spec lists them: (millicores, MiB) requests, and
/// twice that as limits.
fn resources((cpu, memory): (usize, usize)) -> Value {
    json!({
        "requests": {"cpu": format!("{cpu}m"), "memory": format!("{memory}Mi")},
        "limits": {"cpu": format!("{}m", 2 * cpu), "memory": format!("{}Mi", 2 * memory)},
    })
}

fn daemonset(i: usize, nodes: usize) -> Value {
    let name = daemonset_name(i);
    json!({
        "apiVersion": "apps/v1",
        "kind": "DaemonSet",
        "metadata": {"name": name, "namespace": NAMESPACE, "uid": uid(i, usize::MAX >> 16),
                     "generation": 3, "labels": {"app.kubernetes.io/name": name}},
        "spec": {
            "selector": {"matchLabels": {"app.kubernetes.io/name": name}},
            "updateStrategy": {"type": "RollingUpdate", "rollingUpdate": {"maxUnavailable": 1}},
            "template": {
                "metadata": {"labels": {"app.kubernetes.io/name": name}},
                "spec": {"containers": containers(&name, TEMPLATE)}
            }
        },
        "status": {"desiredNumberScheduled": nodes, "currentNumberScheduled": nodes,
                   "numberReady": nodes, "observedGeneration": 3}
    })
}

fn containers(daemonset: &str, sizes: [(usize, usize); 2]) -> Vec<Value> {
    CONTAINERS
        .iter()
        .zip(sizes)
        .map(|(name, size)| {
            json!({
                "name": name,
                "image": format!("registry.example/{daemonset}/{name}:v1.9.1"),
                "args": ["--web.listen-address=127.0.0.1:9100"],
                "ports": [{"name": "metrics", "containerPort": 9100, "protocol": "TCP"}],
                "resources": resources(size),
                "resizePolicy": [{"resourceName": "cpu", "restartPolicy": "NotRequired"},
                                 {"resourceName": "memory", "restartPolicy": "NotRequired"}],
            })
        })
        .collect()
}

fn uid(i: usize, n: usize) -> String {
    format!("{:08x}-0000-4000-8000-{:012x}", i, n & 0xffff_ffff_ffff)
}

/// The five characters a DaemonSet controller appends: deterministic here,
/// in no order of `n`, and distinct for every `n` below 27^5.
fn suffix(i: usize, n: usize) -> String {
    const CHARS: &[u8] = b"bcdfghjklmnpqrstvwxz2456789";
    const SPACE: usize = 27usize.pow(5);
    // A multiplier prime to 27^5 makes a permutation of 0..27^5.
    let mut x = (n % SPACE * 7_368_787 + i * 1_000_003) % SPACE;
    (0..5)
        .map(|_| {
            let c = char::from(CHARS[x % 27]);
            x /= 27;
            c
        })
        .collect()
}

/// The pod of DaemonSet `i` on node `node-<n>`.
#[must_use]
pub fn pod(i: usize, n: usize, scope: Scope) -> Value {
    let daemonset = daemonset_name(i);
    let group = match scope {
        Scope::Node => n,
        Scope::Zone => zone_group(i, n % ZONES),
    };
    let (marked, sizes) = match n % 10 {
        0 => (true, group_targets(group)),
        1 | 2 => (false, TEMPLATE),
        _ => (true, group_targets(group + 113)),
    };
    let mut annotations = serde_json::Map::new();
    annotations.insert("vpaObservedContainers".into(), json!(CONTAINERS.join(", ")));
    if marked {
        let original: serde_json::Map<String, Value> = CONTAINERS
            .iter()
            .zip(TEMPLATE)
            .map(|(name, size)| ((*name).to_owned(), resources(size)))
            .collect();
        annotations.insert(
            ORIGINAL_RESOURCES_ANNOTATION.into(),
            json!(Value::Object(original).to_string()),
        );
        annotations.insert(
            "vpaUpdates".into(),
            json!(format!("Pod resources updated by {daemonset}: container 0: cpu request, memory request, cpu limit, memory limit; container 1: cpu request, memory request, cpu limit, memory limit")),
        );
    }
    let name = format!("{daemonset}-{}", suffix(i, n));
    let node = format!("node-{n}");
    let statuses: Vec<Value> = CONTAINERS
        .iter()
        .zip(sizes)
        .map(|(c, size)| {
            json!({
                "name": c, "ready": true, "started": true, "restartCount": 0,
                "image": format!("registry.example/{daemonset}/{c}:v1.9.1"),
                "imageID": format!("registry.example/{daemonset}/{c}@sha256:{:064x}", i * 7 + 1),
                "containerID": format!("containerd://{:064x}", i * 1_000_003 + n),
                "state": {"running": {"startedAt": START_TIME}},
                "resources": resources(size),
            })
        })
        .collect();
    let condition = |kind: &str| {
        json!({"type": kind, "status": "True", "lastProbeTime": null,
               "lastTransitionTime": START_TIME})
    };
    let conditions = [
        "PodReadyToStartContainers",
        "Initialized",
        "Ready",
        "ContainersReady",
        "PodScheduled",
    ]
    .map(condition);
    json!({
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": name,
            "generateName": format!("{daemonset}-"),
            "namespace": NAMESPACE,
            "uid": uid(i, n),
            "resourceVersion": format!("{}", 1_000_000 + i * 100_000 + n),
            "creationTimestamp": START_TIME,
            "labels": {
                "app.kubernetes.io/name": daemonset,
                "controller-revision-hash": "5d8f7c9b6",
                "pod-template-generation": "3",
            },
            "annotations": annotations,
            "ownerReferences": [{
                "apiVersion": "apps/v1", "kind": "DaemonSet", "name": daemonset,
                "uid": uid(i, usize::MAX >> 16), "controller": true, "blockOwnerDeletion": true,
            }],
        },
        "spec": {
            "nodeName": node,
            "containers": containers(&daemonset, sizes),
            "restartPolicy": "Always",
            "serviceAccountName": daemonset,
            "tolerations": [{"operator": "Exists"}],
        },
        "status": {
            "phase": "Running",
            "hostIP": format!("10.{}.{}.{}", n >> 16, (n >> 8) & 255, n & 255),
            "podIP": format!("10.{}.{}.{}", 128 + (n >> 16), (n >> 8) & 255, n & 255),
            "startTime": START_TIME,
            "qosClass": "Burstable",
            "conditions": conditions,
            "containerStatuses": statuses,
        },
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::pods::{PodPhase, RunningPod};
    use crate::store::Snapshot;
    use crate::update::{plan_pass, Action, Memory, UpdateConfig, Workloads};

    fn pass(scope: Scope) -> Vec<crate::update::PodPlan> {
        let (mut workloads, rest) = Workloads::split(cluster(2, 30, scope)).expect("cluster");
        for pod in pods(2, 30, scope) {
            workloads.put_pod(RunningPod::from_value(&pod).expect("pod"));
        }
        let snapshot = Snapshot::build(rest);
        assert!(snapshot.problems.is_empty(), "{:?}", snapshot.problems);
        let now = 1_795_600_800;
        plan_pass(
            &snapshot,
            &workloads,
            &UpdateConfig::default(),
            &mut Memory::default(),
            true,
            now,
        )
    }

    #[test]
    fn most_pods_are_away_from_their_group() {
        for scope in [Scope::Node, Scope::Zone] {
            let plans = pass(scope);
            assert_eq!(plans.len(), 60, "{scope:?}");
            let at = plans
                .iter()
                .filter(|p| p.reason == crate::update::Reason::AtTarget)
                .count();
            let resized = plans.iter().filter(|p| p.action == Action::Resize).count();
            // A tenth at the group, half of each DaemonSet resized now
            // (--eviction-tolerance 0.5), the rest deferred or below the
            // threshold.
            // On zone-0, DaemonSet 0's group is its template: its
            // unmarked pods there (nodes 12 and 21) are at it too.
            let expected = if scope == Scope::Node { 6 } else { 8 };
            assert_eq!(at, expected, "{scope:?}");
            assert_eq!(resized, 30, "{scope:?}");
        }
        let pod = RunningPod::from_value(&pod(1, 7, Scope::Node)).expect("pod");
        assert_eq!(pod.phase, PodPhase::Running);
        assert!(pod.ready && !pod.awaiting_actuation && pod.non_disruptive_resize);
        assert_eq!(pod.daemonset.as_deref(), Some("ds-1"));
    }
}
