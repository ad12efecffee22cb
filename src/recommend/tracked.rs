//! The pods of scoped DaemonSets as the recommender keeps them: owner,
//! node, memory requests and OOM kills, read from a file's JSON or straight
//! from a watch event's text.

use super::input::{input_error, InputError, OwnerRef};
use crate::quantity::Quantity;
use k8s_openapi::jiff::Timestamp;
use serde::Deserialize;
use serde_json::Value;
use std::collections::BTreeMap;

/// A pod of a scoped DaemonSet, as the recommender needs it.
#[derive(Debug, Clone, PartialEq)]
pub struct TrackedPod {
    pub namespace: String,
    pub name: String,
    /// The DaemonSet that controls it.
    pub daemonset: String,
    /// `spec.nodeName`; a pod not yet bound has no samples anyway.
    pub node: Option<String>,
    /// `spec.containers[].name` with its memory request (bytes, 0 if none),
    /// which an OOM kill is measured against.
    pub containers: Vec<(String, i64)>,
    /// OOM kills the pod's statuses show: container and `finishedAt`.
    pub oom_kills: Vec<(String, Timestamp)>,
}

#[derive(Deserialize, Default)]
#[serde(default, rename_all = "camelCase")]
struct PodObject {
    metadata: PodMeta,
    spec: PodSpec,
    status: PodStatus,
}

#[derive(Deserialize, Default)]
#[serde(default, rename_all = "camelCase")]
struct PodMeta {
    name: String,
    namespace: String,
    /// Values as the Value read saw them: only a string "true" marks a
    /// balloon, and no other label's value is an error.
    labels: Option<BTreeMap<String, Value>>,
    owner_references: Vec<OwnerRef>,
}

#[derive(Deserialize, Default)]
#[serde(default, rename_all = "camelCase")]
struct PodSpec {
    node_name: Option<String>,
    containers: Vec<PodContainer>,
}

#[derive(Deserialize, Default)]
#[serde(default)]
struct PodContainer {
    name: String,
    resources: Resources,
}

#[derive(Deserialize, Default)]
#[serde(default)]
struct Resources {
    requests: BTreeMap<String, Value>,
}

#[derive(Deserialize, Default)]
#[serde(default, rename_all = "camelCase")]
struct PodStatus {
    container_statuses: Vec<ContainerStatus>,
}

#[derive(Deserialize, Default)]
#[serde(default, rename_all = "camelCase")]
struct ContainerStatus {
    name: String,
    state: ContainerStateDoc,
    last_state: ContainerStateDoc,
}

#[derive(Deserialize, Default)]
#[serde(default)]
struct ContainerStateDoc {
    terminated: Option<Terminated>,
}

#[derive(Deserialize, Default)]
#[serde(default, rename_all = "camelCase")]
struct Terminated {
    reason: String,
    finished_at: Option<String>,
}

impl TrackedPod {
    /// `Ok(None)` for a pod no DaemonSet controls, and for a balloon pod
    /// (KEP-5620): its requests are a node's size, not a workload's usage.
    ///
    /// # Errors
    /// A pod whose fields have the wrong types, or an unreadable quantity or
    /// time.
    pub fn from_value(value: &Value) -> Result<Option<Self>, InputError> {
        let object = crate::manifest::object_ref(value);
        let pod: PodObject = serde_json::from_value(value.clone())
            .map_err(|e| input_error(&object, "spec", e.to_string()))?;
        Self::from_pod(pod, &object)
    }

    /// [`Self::from_value`] on a pod's JSON text (a watch event), read
    /// straight into the fields it takes; `object` names the pod in errors.
    ///
    /// # Errors
    /// As [`Self::from_value`].
    pub fn from_text(text: &str, object: &str) -> Result<Option<Self>, InputError> {
        let pod: PodObject =
            serde_json::from_str(text).map_err(|e| input_error(object, "spec", e.to_string()))?;
        Self::from_pod(pod, object)
    }

    fn from_pod(pod: PodObject, object: &str) -> Result<Option<Self>, InputError> {
        let labels = pod.metadata.labels.as_ref();
        let balloon = labels.and_then(|l| l.get(crate::pods::BALLOON_LABEL));
        if balloon.and_then(Value::as_str) == Some("true") {
            return Ok(None);
        }
        let object = object.to_owned();
        let Some(owner) = pod.metadata.owner_references.iter().find(|o| {
            o.controller == Some(true) && o.kind == "DaemonSet" && o.api_version == "apps/v1"
        }) else {
            return Ok(None);
        };
        let mut containers = Vec::with_capacity(pod.spec.containers.len());
        for (i, c) in pod.spec.containers.iter().enumerate() {
            let memory = match c.resources.requests.get("memory") {
                None => 0,
                Some(v) => v
                    .as_str()
                    .map(str::to_owned)
                    .unwrap_or_else(|| v.to_string())
                    .parse::<Quantity>()
                    .map_err(|e| {
                        input_error(
                            &object,
                            &format!("spec.containers[{i}].resources.requests.memory"),
                            e.to_string(),
                        )
                    })?
                    .value(),
            };
            containers.push((c.name.clone(), memory));
        }
        let mut oom_kills = Vec::new();
        for (i, s) in pod.status.container_statuses.iter().enumerate() {
            for (field, state) in [("state", &s.state), ("lastState", &s.last_state)] {
                let Some(t) = state
                    .terminated
                    .as_ref()
                    .filter(|t| t.reason == "OOMKilled")
                else {
                    continue;
                };
                let Some(text) = &t.finished_at else { continue };
                let at = text.parse::<Timestamp>().map_err(|e| {
                    input_error(
                        &object,
                        &format!("status.containerStatuses[{i}].{field}.terminated.finishedAt"),
                        e.to_string(),
                    )
                })?;
                oom_kills.push((s.name.clone(), at));
            }
        }
        Ok(Some(TrackedPod {
            namespace: pod.metadata.namespace,
            name: pod.metadata.name,
            daemonset: owner.name.clone(),
            node: pod.spec.node_name.filter(|n| !n.is_empty()),
            containers,
            oom_kills,
        }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn pod(labels: Value) -> Value {
        json!({"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": "p", "namespace": "kube-system", "labels": labels,
                "ownerReferences": [{"apiVersion": "apps/v1", "kind": "DaemonSet", "name": "ds", "uid": "u", "controller": true}]},
            "spec": {"nodeName": "n1", "containers": [{"name": "c", "resources": {"requests": {"memory": "1Gi"}}}]}})
    }

    #[test]
    fn balloon_pods_are_never_tracked_and_others_of_a_daemonset_are() {
        let balloon = TrackedPod::from_value(&pod(json!({"node.kubernetes.io/balloon": "true"})));
        assert!(matches!(balloon, Ok(None)));
        let agent = TrackedPod::from_value(&pod(json!({"app": "agent"})));
        assert!(
            matches!(agent, Ok(Some(p)) if p.daemonset == "ds" && p.containers == [("c".to_owned(), 1_073_741_824)])
        );
    }

    #[test]
    fn a_pod_read_from_its_text_is_the_pod_read_from_its_value() {
        let bad_time = {
            let mut p = oom_killed();
            p["status"]["containerStatuses"][0]["lastState"]["terminated"]["finishedAt"] =
                json!("soon");
            p
        };
        let bad_memory = {
            let mut p = pod(json!({}));
            p["spec"]["containers"][0]["resources"]["requests"]["memory"] = json!("lots");
            p
        };
        let orphan = {
            let mut p = pod(json!(null));
            p["metadata"]["ownerReferences"] = json!([]);
            p
        };
        let numeric_label = pod(json!({"node.kubernetes.io/balloon": 1, "tier": 2}));
        let cases = [
            pod(json!({"node.kubernetes.io/balloon": "true"})),
            oom_killed(),
            bad_time,
            bad_memory,
            orphan,
            numeric_label,
        ];
        for case in cases {
            let text = serde_json::to_string(&case).expect("json");
            let from_text = TrackedPod::from_text(&text, "Pod/kube-system/p");
            assert_eq!(from_text, TrackedPod::from_value(&case), "{text}");
        }
        let oom = TrackedPod::from_text(
            &serde_json::to_string(&oom_killed()).expect("json"),
            "Pod/kube-system/p",
        );
        assert!(
            matches!(oom, Ok(Some(p)) if p.oom_kills.len() == 1 && p.node.as_deref() == Some("n1"))
        );
        assert_eq!(
            TrackedPod::from_text(r#"{"spec":{"containers":{}}}"#, "Pod/kube-system/p")
                .map_err(|e| e.to_string()),
            Err("Pod/kube-system/p: spec: invalid type: map, expected a sequence at line 1 column 22".to_owned())
        );
    }

    fn oom_killed() -> Value {
        let mut p = pod(json!({"app": "agent"}));
        p["status"] = json!({"containerStatuses": [{"name": "c", "state": {"running": {}},
            "lastState": {"terminated": {"reason": "OOMKilled", "finishedAt": "2026-11-01T00:00:00Z"}}}]});
        p
    }
}
