//! The whole pod status the simulated kubelet writes: Running and Ready,
//! each container's `allocatedResources` and `resources`, and at most one
//! resize condition. A merge patch replaces lists whole, so every write
//! carries all of it.

use super::nodes::now;
use k8s_openapi::api::core::v1::Pod;
use serde_json::{json, Value};

/// The whole status (a merge patch replaces lists whole): Running and
/// Ready, each container's (allocated, resources) from `each`, and at
/// most one resize condition.
pub fn whole(
    pod: &Pod,
    containers: &[(String, Value, Value)],
    each: impl Fn(&str, &Value, &Value) -> (Value, Value),
    resize: Option<(&str, &str, &str)>,
) -> Value {
    let now = now();
    let old = pod.status.as_ref();
    let start = old.and_then(|s| s.start_time.as_ref()).map_or_else(
        || now.clone(),
        |t| t.0.strftime("%Y-%m-%dT%H:%M:%SZ").to_string(),
    );
    let generation = pod.metadata.generation.unwrap_or(1);
    let since = |kind: &str| {
        old.and_then(|s| s.conditions.as_ref())
            .and_then(|c| c.iter().find(|c| c.type_ == kind && c.status == "True"))
            .and_then(|c| c.last_transition_time.as_ref())
            .map_or_else(
                || now.clone(),
                |t| t.0.strftime("%Y-%m-%dT%H:%M:%SZ").to_string(),
            )
    };
    let mut conditions: Vec<Value> = [
        "PodReadyToStartContainers",
        "Initialized",
        "Ready",
        "ContainersReady",
        "PodScheduled",
    ]
    .iter()
    .map(|kind| {
        json!({"type": kind, "status": "True", "lastTransitionTime": since(kind),
        "observedGeneration": generation})
    })
    .collect();
    if let Some((kind, reason, message)) = resize {
        let mut c = json!({"type": kind, "status": "True", "lastTransitionTime": since(kind),
            "observedGeneration": generation});
        if !reason.is_empty() {
            c["reason"] = json!(reason);
            c["message"] = json!(message);
        }
        conditions.push(c);
    }
    let statuses: Vec<Value> = containers
        .iter()
        .map(|(name, requests, limits)| {
            let started = old
                .and_then(|s| s.container_statuses.as_ref())
                .and_then(|c| c.iter().find(|c| &c.name == name))
                .and_then(|c| c.state.as_ref()?.running.as_ref()?.started_at.as_ref())
                .map_or_else(|| now.clone(), |t| t.0.strftime("%Y-%m-%dT%H:%M:%SZ").to_string());
            let (allocated, resources) = each(name, requests, limits);
            let image = pod
                .spec
                .iter()
                .flat_map(|s| &s.containers)
                .find(|c| &c.name == name)
                .and_then(|c| c.image.clone())
                .unwrap_or_default();
            json!({"name": name, "image": image, "imageID": format!("{image}@sha256:0"),
                "containerID": format!("containerd://{}-{name}", pod.metadata.uid.as_deref().unwrap_or_default()),
                "ready": true, "started": true, "restartCount": 0,
                "state": {"running": {"startedAt": started}},
                "allocatedResources": allocated, "resources": resources})
        })
        .collect();
    let ip = format!(
        "10.244.{}.{}",
        pod_hash(pod) % 250,
        pod_hash(pod) / 250 % 250 + 1
    );
    json!({"status": {"phase": "Running", "conditions": conditions, "containerStatuses": statuses,
        "startTime": start, "podIP": ip, "podIPs": [{"ip": ip}],
        "hostIP": "10.1.0.1", "observedGeneration": generation}})
}

fn pod_hash(pod: &Pod) -> usize {
    pod.metadata
        .name
        .as_deref()
        .unwrap_or_default()
        .bytes()
        .fold(7usize, |h, b| h.wrapping_mul(31).wrapping_add(b as usize))
}
