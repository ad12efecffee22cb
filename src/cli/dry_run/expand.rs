//! `--nodes`: a DaemonSet's pods, one per node, in the shape the DaemonSet
//! controller creates them, so a user sees each node's mutation before
//! rollout.
//!
//! What the controller sets and the webhook or the rules read: the
//! template's labels and annotations, `generateName: <ds>-`, the namespace,
//! a controller ownerReference to the apps/v1 DaemonSet, the required node
//! affinity replaced by one `matchFields metadata.name In [node]` term, and
//! the DaemonSet tolerations. (`controller-revision-hash` and
//! `pod-template-generation` are left out: nothing reads them and the hash
//! cannot be computed offline.)

use crate::json::str_at;
use serde_json::{json, Map, Value};

/// The pod the DaemonSet controller would create for `node`, or `None` when
/// `daemonset` is not an apps/v1 DaemonSet with a pod template.
#[must_use]
pub fn daemonset_pod(daemonset: &Value, node: &str) -> Option<Value> {
    if str_at(daemonset, "/apiVersion") != "apps/v1" || str_at(daemonset, "/kind") != "DaemonSet" {
        return None;
    }
    let template = daemonset.pointer("/spec/template")?.as_object()?;
    let name = str_at(daemonset, "/metadata/name");
    let mut metadata = Map::new();
    metadata.insert("generateName".to_owned(), Value::from(format!("{name}-")));
    metadata.insert(
        "namespace".to_owned(),
        Value::from(str_at(daemonset, "/metadata/namespace")),
    );
    for key in ["labels", "annotations"] {
        if let Some(value) = template.get("metadata").and_then(|m| m.get(key)) {
            metadata.insert(key.to_owned(), value.clone());
        }
    }
    let mut owner = json!({"apiVersion": "apps/v1", "kind": "DaemonSet", "name": name,
        "controller": true, "blockOwnerDeletion": true});
    if let Some(uid) = daemonset.pointer("/metadata/uid") {
        owner["uid"] = uid.clone();
    }
    metadata.insert("ownerReferences".to_owned(), json!([owner]));
    let mut spec = template
        .get("spec")
        .and_then(Value::as_object)
        .cloned()
        .unwrap_or_default();
    pin_to_node(&mut spec, node);
    add_daemonset_tolerations(&mut spec);
    let mut pod = Map::new();
    pod.insert("apiVersion".to_owned(), Value::from("v1"));
    pod.insert("kind".to_owned(), Value::from("Pod"));
    pod.insert("metadata".to_owned(), Value::Object(metadata));
    pod.insert("spec".to_owned(), Value::Object(spec));
    Some(Value::Object(pod))
}

/// `ReplaceDaemonSetPodNodeNameNodeAffinity`: the required node affinity
/// becomes a single term selecting the node by name; the rest is kept.
fn pin_to_node(spec: &mut Map<String, Value>, node: &str) {
    let affinity = spec
        .entry("affinity")
        .or_insert_with(|| Value::Object(Map::new()));
    if !affinity.is_object() {
        *affinity = Value::Object(Map::new());
    }
    let node_affinity = &mut affinity["nodeAffinity"];
    if !node_affinity.is_object() {
        *node_affinity = Value::Object(Map::new());
    }
    node_affinity["requiredDuringSchedulingIgnoredDuringExecution"] = json!({
        "nodeSelectorTerms": [{"matchFields": [
            {"key": "metadata.name", "operator": "In", "values": [node]}
        ]}]
    });
}

/// `AddOrUpdateDaemonPodTolerations`.
fn add_daemonset_tolerations(spec: &mut Map<String, Value>) {
    let host_network = spec.get("hostNetwork").and_then(Value::as_bool) == Some(true);
    let mut wanted = vec![
        ("node.kubernetes.io/not-ready", "NoExecute"),
        ("node.kubernetes.io/unreachable", "NoExecute"),
        ("node.kubernetes.io/disk-pressure", "NoSchedule"),
        ("node.kubernetes.io/memory-pressure", "NoSchedule"),
        ("node.kubernetes.io/pid-pressure", "NoSchedule"),
        ("node.kubernetes.io/unschedulable", "NoSchedule"),
    ];
    if host_network {
        wanted.push(("node.kubernetes.io/network-unavailable", "NoSchedule"));
    }
    let tolerations = spec
        .entry("tolerations")
        .or_insert_with(|| Value::Array(Vec::new()));
    if !tolerations.is_array() {
        *tolerations = Value::Array(Vec::new());
    }
    let Value::Array(list) = tolerations else {
        return;
    };
    for (key, effect) in wanted {
        let present = list
            .iter()
            .any(|t| str_at(t, "/key") == key && str_at(t, "/effect") == effect);
        if !present {
            list.push(json!({"key": key, "operator": "Exists", "effect": effect}));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_daemonset_pod_is_owned_pinned_and_tolerant_like_the_controller_makes_it() {
        let ds = json!({"apiVersion": "apps/v1", "kind": "DaemonSet",
            "metadata": {"name": "agent", "namespace": "ops", "uid": "u-1"},
            "spec": {"template": {"metadata": {"labels": {"app": "agent"}},
                "spec": {"hostNetwork": true, "containers": [{"name": "a"}],
                    "affinity": {"nodeAffinity": {
                        "requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [{"matchExpressions": []}]},
                        "preferredDuringSchedulingIgnoredDuringExecution": []}}}}}});
        let pod = daemonset_pod(&ds, "node-1").expect("a pod");
        assert_eq!(pod["metadata"]["generateName"], "agent-");
        assert_eq!(pod["metadata"]["namespace"], "ops");
        assert_eq!(pod["metadata"]["labels"], json!({"app": "agent"}));
        assert_eq!(
            pod["metadata"]["ownerReferences"],
            json!([{"apiVersion": "apps/v1", "kind": "DaemonSet", "name": "agent", "uid": "u-1",
                "controller": true, "blockOwnerDeletion": true}])
        );
        let affinity = &pod["spec"]["affinity"]["nodeAffinity"];
        assert_eq!(
            affinity["requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"][0]
                ["matchFields"][0]["values"],
            json!(["node-1"])
        );
        assert!(affinity
            .get("preferredDuringSchedulingIgnoredDuringExecution")
            .is_some());
        assert_eq!(pod["spec"]["tolerations"].as_array().map(Vec::len), Some(7));
    }

    #[test]
    fn only_apps_v1_daemonsets_expand() {
        let deploy = json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "d"},
            "spec": {"template": {"spec": {}}}});
        assert!(daemonset_pod(&deploy, "n").is_none());
    }
}
