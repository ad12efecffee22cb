//! The kube-apiserver's defaulting, for the fields the policy rules read, so
//! that a raw manifest gets the verdict the object the apiserver admits gets.
//!
//! Applied to manifests only: a replayed AdmissionReview is already
//! defaulted. What is covered (and nothing else):
//!
//! 1. `metadata.namespace` of a namespaced object without one: `default`
//!    (kubectl's namespace when none is given).
//! 2. Pods (not pod templates): a container's (and init container's)
//!    missing `resources.requests[r]` is its `resources.limits[r]`
//!    (`SetDefaults_Pod`).
//! 3. PriorityClasses: a missing `preemptionPolicy` is
//!    `PreemptLowerPriority` (`SetDefaults_PriorityClass`).
//! 4. Namespaces: the label `kubernetes.io/metadata.name: <name>`
//!    (namespace selectors match on it).
//! 5. Pods on CREATE (the `Priority` admission plugin, which runs before
//!    webhooks): `spec.priority` and `spec.preemptionPolicy` come from the
//!    pod's PriorityClass when that class is known (among the params or the
//!    built-in `system-node-critical`/`system-cluster-critical`); a pod
//!    without `priorityClassName` gets the known `globalDefault` class, if
//!    any. An unknown class leaves the pod as written.

use crate::json::str_at;
use serde_json::{Map, Value};
use std::collections::HashMap;

const PREEMPT_LOWER_PRIORITY: &str = "PreemptLowerPriority";

/// The PriorityClasses the Priority plugin can resolve: the params' and the
/// two every cluster has.
#[derive(Debug, Default)]
pub struct PriorityClasses {
    by_name: HashMap<String, (i64, String, bool)>,
}

impl PriorityClasses {
    /// The built-in classes plus every PriorityClass among `objects` (later
    /// ones replace earlier ones of the same name).
    #[must_use]
    pub fn from_objects<'a>(objects: impl IntoIterator<Item = &'a Value>) -> Self {
        let mut by_name = HashMap::new();
        for (name, value) in [
            ("system-node-critical", 2_000_001_000),
            ("system-cluster-critical", 2_000_000_000),
        ] {
            by_name.insert(
                name.to_owned(),
                (value, PREEMPT_LOWER_PRIORITY.to_owned(), false),
            );
        }
        for object in objects {
            if object.get("kind").and_then(Value::as_str) != Some("PriorityClass") {
                continue;
            }
            let Some(value) = object.get("value").and_then(Value::as_i64) else {
                continue;
            };
            let policy = match str_at(object, "/preemptionPolicy") {
                "" => PREEMPT_LOWER_PRIORITY,
                policy => policy,
            };
            let global = object.get("globalDefault").and_then(Value::as_bool) == Some(true);
            by_name.insert(
                str_at(object, "/metadata/name").to_owned(),
                (value, policy.to_owned(), global),
            );
        }
        Self { by_name }
    }

    /// The known global default class, by name (the lowest name if several).
    fn global_default(&self) -> Option<&str> {
        self.by_name
            .iter()
            .filter(|(_, (_, _, global))| *global)
            .map(|(name, _)| name.as_str())
            .min()
    }
}

/// Applies the defaulting in the module docs to `object` (a manifest about
/// to be sent with `operation`), whose kind lives in a namespace when
/// `namespaced` ([`super::kinds`] knows).
pub fn apply(object: &mut Value, operation: &str, classes: &PriorityClasses, namespaced: bool) {
    let kind = str_at(object, "/kind").to_owned();
    let api_version = str_at(object, "/apiVersion").to_owned();
    if namespaced && str_at(object, "/metadata/namespace").is_empty() {
        if let Some(Value::Object(meta)) = object.get_mut("metadata") {
            meta.insert("namespace".to_owned(), Value::from("default"));
        }
    }
    match (api_version.as_str(), kind.as_str()) {
        ("v1", "Pod") => {
            default_requests_from_limits(object);
            if operation == "CREATE" {
                resolve_priority(object, classes);
            }
        }
        ("v1", "Namespace") => {
            let name = str_at(object, "/metadata/name").to_owned();
            if let Some(Value::Object(meta)) = object.get_mut("metadata") {
                let labels = meta
                    .entry("labels")
                    .or_insert_with(|| Value::Object(Map::new()));
                if let Value::Object(labels) = labels {
                    labels.insert("kubernetes.io/metadata.name".to_owned(), Value::from(name));
                }
            }
        }
        (v, "PriorityClass") if v.starts_with("scheduling.k8s.io/") => {
            if let Value::Object(map) = object {
                map.entry("preemptionPolicy")
                    .or_insert_with(|| Value::from(PREEMPT_LOWER_PRIORITY));
            }
        }
        _ => {}
    }
}

fn default_requests_from_limits(pod: &mut Value) {
    for list in ["containers", "initContainers"] {
        let Some(Value::Array(containers)) = pod.pointer_mut(&format!("/spec/{list}")) else {
            continue;
        };
        for container in containers.iter_mut() {
            let Some(Value::Object(resources)) = container.get_mut("resources") else {
                continue;
            };
            let Some(Value::Object(limits)) = resources.get("limits").cloned() else {
                continue;
            };
            if limits.is_empty() {
                continue;
            }
            let requests = resources
                .entry("requests")
                .or_insert_with(|| Value::Object(Map::new()));
            if requests.is_null() {
                *requests = Value::Object(Map::new());
            }
            if let Value::Object(requests) = requests {
                for (name, quantity) in limits {
                    requests.entry(name).or_insert(quantity);
                }
            }
        }
    }
}

fn resolve_priority(pod: &mut Value, classes: &PriorityClasses) {
    let Some(Value::Object(spec)) = pod.get_mut("spec") else {
        return;
    };
    let named = spec
        .get("priorityClassName")
        .and_then(Value::as_str)
        .unwrap_or("")
        .to_owned();
    let name = if named.is_empty() {
        match classes.global_default() {
            Some(name) => name.to_owned(),
            None => return,
        }
    } else {
        named.clone()
    };
    let Some((value, policy, _)) = classes.by_name.get(&name) else {
        return;
    };
    if named.is_empty() {
        spec.insert("priorityClassName".to_owned(), Value::from(name));
    }
    spec.entry("priority")
        .or_insert_with(|| Value::from(*value));
    spec.entry("preemptionPolicy")
        .or_insert_with(|| Value::from(policy.clone()));
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_pod_containers_missing_requests_default_to_its_limits() {
        let mut pod = json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"},
            "spec": {"containers": [
                {"name": "a", "resources": {"limits": {"cpu": "1", "memory": "1Gi"}, "requests": {"cpu": "100m"}}},
                {"name": "b", "resources": {"limits": {"memory": "2Gi"}}},
                {"name": "c"}]}});
        apply(&mut pod, "CREATE", &PriorityClasses::default(), true);
        assert_eq!(
            pod["spec"]["containers"][0]["resources"]["requests"],
            json!({"cpu": "100m", "memory": "1Gi"})
        );
        assert_eq!(
            pod["spec"]["containers"][1]["resources"]["requests"],
            json!({"memory": "2Gi"})
        );
        assert!(pod["spec"]["containers"][2].get("resources").is_none());
        assert_eq!(pod["metadata"]["namespace"], "default");
    }

    #[test]
    fn a_daemonset_template_is_not_defaulted() {
        let mut ds = json!({"apiVersion": "apps/v1", "kind": "DaemonSet", "metadata": {"name": "d", "namespace": "x"},
            "spec": {"template": {"spec": {"containers": [{"name": "a", "resources": {"limits": {"cpu": "1"}}}]}}}});
        let before = ds.clone();
        apply(&mut ds, "CREATE", &PriorityClasses::default(), true);
        assert_eq!(ds, before);
    }

    #[test]
    fn a_priorityclass_without_preemption_policy_preempts_lower_priority() {
        let mut pc = json!({"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass", "metadata": {"name": "x"}, "value": 1});
        apply(&mut pc, "CREATE", &PriorityClasses::default(), false);
        assert_eq!(pc["preemptionPolicy"], "PreemptLowerPriority");
        assert!(pc["metadata"].get("namespace").is_none());
    }

    #[test]
    fn a_pod_gets_priority_and_preemption_policy_from_a_known_class() {
        let class = json!({"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass",
            "metadata": {"name": "node-balloon"}, "value": 1_000_000_000, "preemptionPolicy": "Never"});
        let classes = PriorityClasses::from_objects([&class]);
        let mut pod = json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "namespace": "kube-system"},
            "spec": {"priorityClassName": "node-balloon", "containers": []}});
        apply(&mut pod, "CREATE", &classes, true);
        assert_eq!(pod["spec"]["priority"], 1_000_000_000);
        assert_eq!(pod["spec"]["preemptionPolicy"], "Never");
        let mut unknown = json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"},
            "spec": {"priorityClassName": "elsewhere"}});
        apply(&mut unknown, "CREATE", &classes, true);
        assert!(unknown["spec"].get("priority").is_none());
    }

    #[test]
    fn a_pod_without_class_gets_the_known_global_default() {
        let class = json!({"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass",
            "metadata": {"name": "everyone"}, "value": 7, "globalDefault": true});
        let classes = PriorityClasses::from_objects([&class]);
        let mut pod =
            json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"}, "spec": {}});
        apply(&mut pod, "CREATE", &classes, true);
        assert_eq!(
            pod["spec"],
            json!({"priorityClassName": "everyone", "priority": 7, "preemptionPolicy": "PreemptLowerPriority"})
        );
    }
}
