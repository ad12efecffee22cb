//! A borrowed, partial view of a Pod taken straight from the admission request.
//!
//! The webhook sees every DaemonSet pod creation, so the request path must not
//! build a full `Pod` (managedFields alone is most of the payload). Only the
//! fields the mutation reads are kept; everything else is skipped by serde.
//! Strings borrow from the request bytes and fall back to owned copies only
//! when JSON escapes force it.

use serde::Deserialize;

pub use crate::json::borrowed::{JsonMap, QuantityText, Str};

/// Resource name to quantity text, as in `resources.requests`.
pub type ResourceTexts<'a> = JsonMap<Str<'a>, QuantityText<'a>>;

// Objects only, so a wrong shape is worded as JSON (`metadata: invalid type:
// null, expected an object`), never after these Rust types.
crate::object_only! {
    PodView<'a>, PodMeta<'a>, OwnerReference<'a>, PodSpecView<'a>, Affinity<'a>,
    NodeAffinity<'a>, NodeSelector<'a>, NodeSelectorTerm<'a>, NodeSelectorRequirement<'a>,
    ContainerView<'a>, ResourcesView<'a>,
}

/// The pod fields nodescope reads; see the module docs for why it is partial.
#[derive(Debug, Default, Deserialize)]
#[serde(remote = "Self", default)]
pub struct PodView<'a> {
    /// `metadata`.
    #[serde(borrow)]
    pub metadata: PodMeta<'a>,
    /// `spec`.
    #[serde(borrow)]
    pub spec: PodSpecView<'a>,
}

/// `metadata`: identity and the maps the webhook reads or patches.
#[derive(Debug, Default, Deserialize)]
#[serde(remote = "Self", default, rename_all = "camelCase")]
pub struct PodMeta<'a> {
    /// Absent at the mutating phase for DaemonSet pods; used only in messages.
    #[serde(borrow)]
    pub name: Option<Str<'a>>,
    /// Used in messages when `name` is absent.
    #[serde(borrow)]
    pub generate_name: Option<Str<'a>>,
    /// May be absent in the object; the request carries it too.
    #[serde(borrow)]
    pub namespace: Option<Str<'a>>,
    /// `None` when the object has no labels map.
    #[serde(borrow)]
    pub labels: Option<JsonMap<Str<'a>, Str<'a>>>,
    /// `None` means the patch must create the map before adding keys.
    #[serde(borrow)]
    pub annotations: Option<JsonMap<Str<'a>, Str<'a>>>,
    /// Used to find the controlling DaemonSet.
    #[serde(borrow)]
    pub owner_references: Option<Vec<OwnerReference<'a>>>,
}

/// One `metadata.ownerReferences[]` entry.
#[derive(Debug, Default, Deserialize)]
#[serde(remote = "Self", default, rename_all = "camelCase")]
pub struct OwnerReference<'a> {
    /// e.g. `apps/v1`.
    #[serde(borrow)]
    pub api_version: Str<'a>,
    /// e.g. `DaemonSet`.
    #[serde(borrow)]
    pub kind: Str<'a>,
    /// The owner's name.
    #[serde(borrow)]
    pub name: Str<'a>,
    /// Only the controller reference identifies the managing DaemonSet.
    pub controller: Option<bool>,
}

/// `spec`: node placement and the regular containers.
#[derive(Debug, Default, Deserialize)]
#[serde(remote = "Self", default, rename_all = "camelCase")]
pub struct PodSpecView<'a> {
    /// Set only when the pod is bound; DaemonSet pods usually lack it here.
    #[serde(borrow)]
    pub node_name: Option<Str<'a>>,
    /// Where the DaemonSet controller pins the pod to its node.
    #[serde(borrow)]
    pub affinity: Option<Affinity<'a>>,
    /// Regular containers only: VPA does not resize init containers here.
    #[serde(borrow)]
    pub containers: Vec<ContainerView<'a>>,
}

/// `spec.affinity`.
#[derive(Debug, Default, Deserialize)]
#[serde(remote = "Self", default, rename_all = "camelCase")]
pub struct Affinity<'a> {
    /// Only node affinity matters for node resolution.
    #[serde(borrow)]
    pub node_affinity: Option<NodeAffinity<'a>>,
}

/// `spec.affinity.nodeAffinity`.
#[derive(Debug, Default, Deserialize)]
#[serde(remote = "Self", default)]
pub struct NodeAffinity<'a> {
    /// The hard requirement the DaemonSet controller writes.
    #[serde(borrow, rename = "requiredDuringSchedulingIgnoredDuringExecution")]
    pub required: Option<NodeSelector<'a>>,
}

/// A `NodeSelector`.
#[derive(Debug, Default, Deserialize)]
#[serde(remote = "Self", default, rename_all = "camelCase")]
pub struct NodeSelector<'a> {
    /// ORed terms.
    #[serde(borrow)]
    pub node_selector_terms: Vec<NodeSelectorTerm<'a>>,
}

/// One `nodeSelectorTerms[]` entry; label expressions are not needed.
#[derive(Debug, Default, Deserialize)]
#[serde(remote = "Self", default, rename_all = "camelCase")]
pub struct NodeSelectorTerm<'a> {
    /// Field requirements, e.g. `metadata.name In [node-a-1]`.
    #[serde(borrow)]
    pub match_fields: Vec<NodeSelectorRequirement<'a>>,
}

/// One `matchFields[]` requirement.
#[derive(Debug, Default, Deserialize)]
#[serde(remote = "Self", default)]
pub struct NodeSelectorRequirement<'a> {
    /// Field path, e.g. `metadata.name`.
    #[serde(borrow)]
    pub key: Str<'a>,
    /// e.g. `In`.
    #[serde(borrow)]
    pub operator: Str<'a>,
    /// Candidate values.
    #[serde(borrow)]
    pub values: Vec<Str<'a>>,
}

/// One `spec.containers[]` entry: its name and resources only.
#[derive(Debug, Default, Deserialize)]
#[serde(remote = "Self", default)]
pub struct ContainerView<'a> {
    /// Matches VPA container policies and recommendations.
    #[serde(borrow)]
    pub name: Str<'a>,
    /// `None` means the patch must create `resources` first.
    #[serde(borrow)]
    pub resources: Option<ResourcesView<'a>>,
}

/// `resources`: requests and limits as unparsed text.
#[derive(Debug, Default, Deserialize)]
#[serde(remote = "Self", default)]
pub struct ResourcesView<'a> {
    /// `None` means the patch must create the map first.
    #[serde(borrow)]
    pub requests: Option<ResourceTexts<'a>>,
    /// `None` means the patch must create the map first.
    #[serde(borrow)]
    pub limits: Option<ResourceTexts<'a>>,
}

impl ContainerView<'_> {
    /// Existing requests, if the map is present.
    pub fn requests(&self) -> Option<&ResourceTexts<'_>> {
        self.resources.as_ref().and_then(|r| r.requests.as_ref())
    }

    /// Existing limits, if the map is present.
    pub fn limits(&self) -> Option<&ResourceTexts<'_>> {
        self.resources.as_ref().and_then(|r| r.limits.as_ref())
    }
}

/// Why the request could not be read as a pod; the webhook then admits the
/// pod unchanged and logs this.
#[derive(Debug, thiserror::Error)]
pub enum PodViewError {
    /// The JSON is malformed or a field has an unexpected type; the message
    /// names the field.
    #[error("admission request object is not a readable Pod: {0}")]
    Json(String),
}

#[derive(Deserialize)]
struct ReviewEnvelope<'a> {
    #[serde(borrow)]
    request: RequestEnvelope<'a>,
}

#[derive(Deserialize)]
struct RequestEnvelope<'a> {
    #[serde(borrow)]
    object: PodView<'a>,
}

impl<'a> PodView<'a> {
    /// Parses a pod object (e.g. the bytes of `request.object`).
    pub fn from_json(bytes: &'a [u8]) -> Result<Self, PodViewError> {
        serde_json::from_slice(bytes).map_err(|error| {
            PodViewError::Json(match std::str::from_utf8(bytes) {
                Ok(text) => crate::json::object::with_path::<PodView<'_>>(text, &error),
                Err(_) => error.to_string(),
            })
        })
    }

    /// Parses `request.object` out of a whole AdmissionReview body in one pass,
    /// so the caller never materializes the object separately.
    pub fn from_admission_review(body: &'a [u8]) -> Result<Self, PodViewError> {
        serde_json::from_slice::<ReviewEnvelope<'a>>(body)
            .map(|review| review.request.object)
            .map_err(|error| PodViewError::Json(error.to_string()))
    }

    /// The name of the DaemonSet that controls this pod, if any: only the
    /// controller reference counts, because VPA targets the controller.
    pub fn daemonset_controller(&self) -> Option<&str> {
        self.metadata
            .owner_references
            .as_deref()?
            .iter()
            .find(|r| {
                r.controller == Some(true)
                    && &*r.api_version == "apps/v1"
                    && &*r.kind == "DaemonSet"
            })
            .map(|r| &*r.name)
    }

    /// The node this pod will run on. At admission DaemonSet pods are not yet
    /// bound, so the node comes from the `metadata.name In [node]` field
    /// affinity the DaemonSet controller writes; ambiguous pins yield `None`.
    pub fn target_node(&self) -> Option<&str> {
        if let Some(n) = self.spec.node_name.as_deref().filter(|n| !n.is_empty()) {
            return Some(n);
        }
        let terms = &self
            .spec
            .affinity
            .as_ref()?
            .node_affinity
            .as_ref()?
            .required
            .as_ref()?;
        let mut found: Option<&str> = None;
        for term in &terms.node_selector_terms {
            for req in &term.match_fields {
                if &*req.key != "metadata.name" || &*req.operator != "In" {
                    continue;
                }
                let [only] = req.values.as_slice() else {
                    return None;
                };
                match found {
                    Some(prev) if prev != &**only => return None,
                    _ => found = Some(only),
                }
            }
        }
        found
    }

    /// Balloon pods reserve node capacity and must never be resized.
    pub fn is_balloon(&self) -> bool {
        self.label("node.kubernetes.io/balloon") == Some("true")
    }

    /// A label value.
    pub fn label(&self, key: &str) -> Option<&str> {
        self.metadata.labels.as_ref()?.get(key).map(|v| &**v)
    }

    /// An annotation value.
    pub fn annotation(&self, key: &str) -> Option<&str> {
        self.metadata.annotations.as_ref()?.get(key).map(|v| &**v)
    }

    /// A name for messages: the name, else `generateName*`.
    pub fn display_name(&self) -> String {
        match (&self.metadata.name, &self.metadata.generate_name) {
            (Some(n), _) => n.to_string(),
            (None, Some(g)) => format!("{g}*"),
            (None, None) => "<unnamed>".to_owned(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::borrow::Cow;

    const FIXTURE: &str = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/fixtures/admission-reviews/pod-node-exporter-node-a-1-create.mutate.json"
    );

    fn fixture() -> Vec<u8> {
        std::fs::read(FIXTURE).unwrap_or_else(|e| panic!("read {FIXTURE}: {e}"))
    }

    #[test]
    fn reads_the_daemonset_pod_fixture_without_copying_plain_strings() {
        let body = fixture();
        let pod = PodView::from_admission_review(&body).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(pod.daemonset_controller(), Some("node-exporter"));
        assert_eq!(pod.target_node(), Some("node-a-1"));
        assert!(!pod.is_balloon());
        assert_eq!(pod.metadata.namespace.as_deref(), Some("monitoring"));
        assert_eq!(pod.display_name(), "node-exporter-*");
        let names: Vec<&str> = pod.spec.containers.iter().map(|c| &*c.name).collect();
        assert_eq!(names, ["node-exporter", "kube-rbac-proxy"]);
        let req = pod.spec.containers[0].requests().and_then(|r| r.get("cpu"));
        assert_eq!(req.map(|q| &*q.0), Some("102m"));
        assert!(matches!(pod.spec.containers[0].name.0, Cow::Borrowed(_)));
    }

    #[test]
    fn prefers_spec_node_name_over_affinity() {
        let pod = PodView::from_json(br#"{"spec":{"nodeName":"n1","affinity":{"nodeAffinity":{"requiredDuringSchedulingIgnoredDuringExecution":{"nodeSelectorTerms":[{"matchFields":[{"key":"metadata.name","operator":"In","values":["n2"]}]}]}}}}}"#);
        assert_eq!(pod.ok().as_ref().and_then(|p| p.target_node()), Some("n1"));
    }

    #[test]
    fn refuses_to_guess_the_node_when_the_pin_is_ambiguous() {
        let pod = PodView::from_json(br#"{"spec":{"affinity":{"nodeAffinity":{"requiredDuringSchedulingIgnoredDuringExecution":{"nodeSelectorTerms":[{"matchFields":[{"key":"metadata.name","operator":"In","values":["n1","n2"]}]}]}}}}}"#);
        assert_eq!(pod.ok().as_ref().and_then(|p| p.target_node()), None);
    }

    #[test]
    fn ignores_non_controller_and_non_daemonset_owners() {
        let pod = PodView::from_json(br#"{"metadata":{"ownerReferences":[{"apiVersion":"apps/v1","kind":"DaemonSet","name":"a"},{"apiVersion":"apps/v1","kind":"ReplicaSet","name":"b","controller":true}]}}"#);
        assert_eq!(
            pod.ok().as_ref().and_then(|p| p.daemonset_controller()),
            None
        );
    }

    #[test]
    fn recognises_balloon_pods_by_label() {
        let pod =
            PodView::from_json(br#"{"metadata":{"labels":{"node.kubernetes.io/balloon":"true"}}}"#);
        assert!(pod.is_ok_and(|p| p.is_balloon()));
    }

    #[test]
    fn unescapes_strings_that_contain_json_escapes() {
        let pod = PodView::from_json(br#"{"metadata":{"annotations":{"a\/b":"x\"y"}},"spec":{"containers":[{"name":"c","resources":{"requests":{"cpu":1}}}]}}"#)
            .unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(pod.annotation("a/b"), Some("x\"y"));
        let cpu = pod.spec.containers[0].requests().and_then(|r| r.get("cpu"));
        assert_eq!(cpu.map(|q| &*q.0), Some("1"));
    }

    #[test]
    fn rejects_a_wrongly_typed_pod_instead_of_panicking() {
        assert!(PodView::from_json(br#"{"spec":{"containers":{"name":"x"}}}"#).is_err());
    }
}
