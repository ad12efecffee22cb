//! What the hollow apiserver holds: Pods and Nodes pre-serialized (whole
//! and as PartialObjectMetadata), read-only, so serving 150,000 pods costs
//! a copy of bytes, not a serialization; every other kind as JSON values
//! that writes change (Leases, Features, VPAs, ...), small.

use super::selector::{matches_fields, matches_labels, Field, Label};
use bytes::Bytes;
use serde_json::{json, Value};
use std::collections::{BTreeMap, HashMap};

/// A kind the server serves.
#[derive(Clone, Debug)]
pub struct Resource {
    pub group: &'static str,
    pub version: &'static str,
    pub plural: &'static str,
    pub kind: &'static str,
    pub namespaced: bool,
}

impl Resource {
    pub fn api_version(&self) -> String {
        if self.group.is_empty() {
            self.version.to_owned()
        } else {
            format!("{}/{}", self.group, self.version)
        }
    }
    /// The store key: `group/version/plural`.
    pub fn key(&self) -> String {
        format!("{}/{}/{}", self.group, self.version, self.plural)
    }
}

macro_rules! r {
    ($g:expr, $v:expr, $p:expr, $k:expr, $n:expr) => {
        Resource {
            group: $g,
            version: $v,
            plural: $p,
            kind: $k,
            namespaced: $n,
        }
    };
}

pub const RESOURCES: &[Resource] = &[
    r!("", "v1", "pods", "Pod", true),
    r!("", "v1", "nodes", "Node", false),
    r!("", "v1", "namespaces", "Namespace", false),
    r!("", "v1", "events", "Event", true),
    r!("", "v1", "configmaps", "ConfigMap", true),
    r!("", "v1", "limitranges", "LimitRange", true),
    r!("apps", "v1", "daemonsets", "DaemonSet", true),
    r!("apps", "v1", "deployments", "Deployment", true),
    r!("apps", "v1", "replicasets", "ReplicaSet", true),
    r!("apps", "v1", "statefulsets", "StatefulSet", true),
    r!(
        "autoscaling.k8s.io",
        "v1",
        "verticalpodautoscalers",
        "VerticalPodAutoscaler",
        true
    ),
    r!(
        "autoscaling.k8s.io",
        "v1",
        "verticalpodautoscalercheckpoints",
        "VerticalPodAutoscalerCheckpoint",
        true
    ),
    r!(
        "nodescope.dev",
        "v1alpha1",
        "recommendationcheckpoints",
        "RecommendationCheckpoint",
        true
    ),
    r!("coordination.k8s.io", "v1", "leases", "Lease", true),
    r!("events.k8s.io", "v1", "events", "Event", true),
    r!(
        "policy",
        "v1",
        "poddisruptionbudgets",
        "PodDisruptionBudget",
        true
    ),
    r!(
        "scheduling.k8s.io",
        "v1",
        "priorityclasses",
        "PriorityClass",
        false
    ),
    r!(
        "featureflags.nodescope.dev",
        "v1alpha1",
        "features",
        "Feature",
        true
    ),
    r!(
        "admissionregistration.k8s.io",
        "v1",
        "validatingadmissionpolicies",
        "ValidatingAdmissionPolicy",
        false
    ),
    r!(
        "admissionregistration.k8s.io",
        "v1",
        "validatingadmissionpolicybindings",
        "ValidatingAdmissionPolicyBinding",
        false
    ),
    r!(
        "admissionregistration.k8s.io",
        "v1",
        "validatingwebhookconfigurations",
        "ValidatingWebhookConfiguration",
        false
    ),
    r!(
        "admissionregistration.k8s.io",
        "v1",
        "mutatingwebhookconfigurations",
        "MutatingWebhookConfiguration",
        false
    ),
    r!(
        "apiextensions.k8s.io",
        "v1",
        "customresourcedefinitions",
        "CustomResourceDefinition",
        false
    ),
    r!("metrics.k8s.io", "v1beta1", "pods", "PodMetrics", true),
];

pub fn resource(group: &str, version: &str, plural: &str) -> Option<&'static Resource> {
    RESOURCES
        .iter()
        .find(|r| r.group == group && r.version == version && r.plural == plural)
}

/// One pre-serialized object.
pub struct Hollow {
    pub namespace: String,
    pub name: String,
    pub labels: Vec<(String, String)>,
    pub node: String,
    pub phase: String,
    /// `spec.containers[*].name`, for its PodMetrics.
    pub containers: Vec<String>,
    pub full: Bytes,
    pub meta: Bytes,
}

/// The `metadata` of `object` as a PartialObjectMetadata.
pub fn partial(object: &Value) -> Value {
    json!({"kind": "PartialObjectMetadata", "apiVersion": "meta.k8s.io/v1", "metadata": object["metadata"]})
}

fn labels_of(object: &Value) -> Vec<(String, String)> {
    object["metadata"]["labels"]
        .as_object()
        .into_iter()
        .flatten()
        .map(|(k, v)| (k.clone(), v.as_str().unwrap_or_default().to_owned()))
        .collect()
}

impl Hollow {
    pub fn of(object: &Value) -> Hollow {
        let s = |v: &Value| v.as_str().unwrap_or_default().to_owned();
        Hollow {
            namespace: s(&object["metadata"]["namespace"]),
            name: s(&object["metadata"]["name"]),
            labels: labels_of(object),
            node: s(&object["spec"]["nodeName"]),
            phase: s(&object["status"]["phase"]),
            containers: object["spec"]["containers"]
                .as_array()
                .into_iter()
                .flatten()
                .map(|c| s(&c["name"]))
                .collect(),
            full: Bytes::from(serde_json::to_vec(object).unwrap_or_default()),
            meta: Bytes::from(serde_json::to_vec(&partial(object)).unwrap_or_default()),
        }
    }

    fn field(&self, path: &str) -> String {
        match path {
            "metadata.name" => self.name.clone(),
            "metadata.namespace" => self.namespace.clone(),
            "spec.nodeName" => self.node.clone(),
            "status.phase" => self.phase.clone(),
            _ => String::new(),
        }
    }
}

/// What a LIST or WATCH selects.
#[derive(Default, Debug)]
pub struct Query {
    pub namespace: Option<String>,
    pub labels: Vec<Label>,
    pub fields: Vec<Field>,
}

impl Query {
    pub fn hollow(&self, o: &Hollow) -> bool {
        self.namespace.as_ref().is_none_or(|n| *n == o.namespace)
            && matches_labels(&self.labels, &o.labels)
            && matches_fields(&self.fields, |p| o.field(p))
    }

    pub fn value(&self, o: &Value) -> bool {
        let m = &o["metadata"];
        let s = |v: &Value| v.as_str().unwrap_or_default().to_owned();
        self.namespace
            .as_ref()
            .is_none_or(|n| *n == s(&m["namespace"]))
            && matches_labels(&self.labels, &labels_of(o))
            && matches_fields(&self.fields, |p| match p {
                "metadata.name" => s(&m["name"]),
                "metadata.namespace" => s(&m["namespace"]),
                "spec.nodeName" => s(&o["spec"]["nodeName"]),
                _ => s(&o["status"]["phase"]),
            })
    }

    /// The one node a `spec.nodeName=` selector names.
    fn node(&self) -> Option<&str> {
        self.fields
            .iter()
            .find(|f| f.equal && f.path == "spec.nodeName")
            .map(|f| f.value.as_str())
    }
}

/// A read-only kind: its objects sorted by (namespace, name), indexed by node.
#[derive(Default)]
pub struct Collection {
    pub items: Vec<Hollow>,
    by_node: HashMap<String, Vec<u32>>,
}

impl Collection {
    pub fn new(mut items: Vec<Hollow>) -> Collection {
        items.sort_by(|a, b| (&a.namespace, &a.name).cmp(&(&b.namespace, &b.name)));
        let mut by_node: HashMap<String, Vec<u32>> = HashMap::new();
        for (i, o) in items.iter().enumerate() {
            if !o.node.is_empty() {
                by_node.entry(o.node.clone()).or_default().push(i as u32);
            }
        }
        Collection { items, by_node }
    }

    pub fn index(&self, namespace: &str, name: &str) -> Option<usize> {
        self.items
            .binary_search_by(|o| (o.namespace.as_str(), o.name.as_str()).cmp(&(namespace, name)))
            .ok()
    }

    /// Replaces object `i` (its node does not change).
    pub fn replace(&mut self, i: usize, object: Hollow) {
        self.items[i] = object;
    }

    /// One page: the indexes of up to `limit` (0: all) matches from
    /// `from`, and where the next page starts when more match.
    pub fn page(&self, query: &Query, from: usize, limit: usize) -> (Vec<usize>, Option<usize>) {
        let candidates: Box<dyn Iterator<Item = usize>> = match query.node() {
            Some(node) => Box::new(
                self.by_node
                    .get(node)
                    .into_iter()
                    .flatten()
                    .map(|&i| i as usize)
                    .filter(move |&i| i >= from),
            ),
            None => Box::new(from..self.items.len()),
        };
        let mut out = Vec::new();
        for i in candidates.filter(|&i| query.hollow(&self.items[i])) {
            if limit > 0 && out.len() == limit {
                return (out, Some(i));
            }
            out.push(i);
        }
        (out, None)
    }
}

/// The writable kinds: key → (namespace, name) → object.
#[derive(Default)]
pub struct Objects {
    pub by_kind: BTreeMap<String, BTreeMap<(String, String), Value>>,
    pub revision: u64,
}

impl Objects {
    /// Stores `object` under `resource` with a new resourceVersion.
    pub fn put(&mut self, resource: &Resource, mut object: Value) -> Value {
        self.revision += 1;
        let m = &mut object["metadata"];
        m["resourceVersion"] = json!(self.revision.to_string());
        if m["uid"].is_null() {
            m["uid"] = json!(format!("66666666-0000-0000-0000-{:012}", self.revision));
        }
        if m["creationTimestamp"].is_null() {
            m["creationTimestamp"] = json!("2026-11-29T00:00:00Z");
        }
        object["apiVersion"] = json!(resource.api_version());
        object["kind"] = json!(resource.kind);
        let key = (
            object["metadata"]["namespace"]
                .as_str()
                .unwrap_or_default()
                .to_owned(),
            object["metadata"]["name"]
                .as_str()
                .unwrap_or_default()
                .to_owned(),
        );
        self.by_kind
            .entry(resource.key())
            .or_default()
            .insert(key, object.clone());
        object
    }

    pub fn get(&self, resource: &Resource, namespace: &str, name: &str) -> Option<&Value> {
        self.by_kind
            .get(&resource.key())?
            .get(&(namespace.to_owned(), name.to_owned()))
    }

    pub fn remove(&mut self, resource: &Resource, namespace: &str, name: &str) -> Option<Value> {
        self.by_kind
            .get_mut(&resource.key())?
            .remove(&(namespace.to_owned(), name.to_owned()))
    }

    pub fn list(&self, resource: &Resource, query: &Query) -> Vec<Value> {
        self.by_kind
            .get(&resource.key())
            .into_iter()
            .flat_map(|m| m.values())
            .filter(|o| query.value(o))
            .cloned()
            .collect()
    }
}
