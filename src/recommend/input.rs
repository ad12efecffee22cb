//! What the recommender reads, reduced once to what it needs: scoped
//! DaemonSet VPAs, the pods of their DaemonSets and node labels (usage is
//! [`super::usage`]'s, re-exported here with the other inputs).
//! The same conversions serve `--store file:`/`--metrics file:` and the
//! cluster, which return the same JSON.

use super::status::VpaStatus;
use crate::quantity::Quantity;
use crate::vpa::crd::{ContainerResourcePolicy, VpaSpec};
use crate::vpa::{ContainerMode, ContainerPolicy, ResourceList};
use crate::vpa::{NodeLabel, NodeLabels, ScopeKey};
use serde::Deserialize;
use serde_json::Value;
use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

pub use super::tracked::TrackedPod;
pub use super::usage::{PodMetricsList, PodUsage};

/// An object from a kube list or watch as the JSON a file would hold: with
/// its `kind`, which lists and watches leave out of their items.
#[must_use]
pub fn object_value(object: &kube::api::DynamicObject, kind: &str) -> Value {
    let mut value = serde_json::to_value(object).unwrap_or(Value::Null);
    if let Some(map) = value.as_object_mut() {
        map.insert("kind".into(), kind.into());
    }
    value
}

/// Why an object was not taken: the object, the field, and why.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{object}: {field}: {reason}")]
pub struct InputError {
    pub object: String,
    pub field: String,
    pub reason: String,
}

pub(super) fn input_error(object: &str, field: &str, reason: impl Into<String>) -> InputError {
    InputError {
        object: object.to_owned(),
        field: field.to_owned(),
        reason: reason.into(),
    }
}

#[derive(Debug, Default, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub(super) struct Meta {
    pub(super) name: String,
    pub(super) namespace: String,
    pub(super) generation: i64,
    owner_references: Vec<OwnerRef>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub(super) struct OwnerRef {
    pub(super) api_version: String,
    pub(super) kind: String,
    pub(super) name: String,
    pub(super) controller: Option<bool>,
}

/// A VPA whose recommendations this recommender writes: `spec.scope` set and
/// `spec.targetRef` an apps/v1 DaemonSet.
#[derive(Debug, Clone, PartialEq)]
pub struct ScopedVpa {
    pub namespace: String,
    pub name: String,
    pub generation: i64,
    /// The DaemonSet `spec.targetRef` names.
    pub daemonset: String,
    pub scope: ScopeKey,
    /// `spec.recommenders[].name`; empty means the default recommender.
    pub recommenders: Vec<String>,
    /// `spec.resourcePolicy.containerPolicies`, quantities parsed.
    pub policies: Vec<ContainerPolicy>,
    /// The policies' per-VPA overrides (AEP-8026), by container name (or
    /// `*`); only policies that override something.
    pub per_vpa: Vec<(String, super::per_vpa::PerVpaConfig)>,
    /// The status as read, to compare with before writing; `None` when it
    /// is absent or cannot be read, and then it is written.
    pub status: Option<VpaStatus>,
}

#[derive(Deserialize)]
struct VpaObject {
    #[serde(default)]
    metadata: Meta,
    spec: VpaSpec,
    #[serde(default, deserialize_with = "readable")]
    status: Option<VpaStatus>,
}

/// The status, or `None` when it is not one: an unreadable status is
/// rewritten, not a reason to leave the VPA out.
fn readable<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Option<VpaStatus>, D::Error> {
    let value = Value::deserialize(d)?;
    Ok(VpaStatus::deserialize(value).ok())
}

/// A VPA from a list page's text, where items carry no `kind`: the object
/// but its status as a tree (for [`ScopedVpa::from_value`] and
/// [`super::replay::Replay::owns`]), and the status read typed straight
/// from the text. With a group per node the status is nearly all of a VPA,
/// and the recommender only compares it with what it would write.
///
/// # Errors
/// Text that is not a JSON object.
pub fn vpa_text(text: &str) -> Result<(Value, Option<VpaStatus>), serde_json::Error> {
    let fields: BTreeMap<String, &serde_json::value::RawValue> = serde_json::from_str(text)?;
    let mut object = serde_json::Map::new();
    let mut status = None;
    for (key, raw) in fields {
        if key == "status" {
            status = serde_json::from_str::<VpaStatus>(raw.get()).ok();
        } else {
            object.insert(key, serde_json::from_str(raw.get())?);
        }
    }
    object.insert("kind".into(), "VerticalPodAutoscaler".into());
    Ok((Value::Object(object), status))
}

impl ScopedVpa {
    /// `Ok(None)` for a VPA this recommender leaves alone (no scope, or not
    /// a DaemonSet target).
    ///
    /// # Errors
    /// A VPA whose spec or policies cannot be read.
    pub fn from_value(value: &Value) -> Result<Option<Self>, InputError> {
        let object = crate::manifest::object_ref(value);
        let vpa: VpaObject = serde_json::from_value(value.clone())
            .map_err(|e| input_error(&object, "spec", e.to_string()))?;
        let Some(scope) = ScopeKey::parse(vpa.spec.scope.as_deref().unwrap_or_default(), |s| {
            Arc::from(s)
        }) else {
            return Ok(None);
        };
        let Some(target) = vpa.spec.target_ref.as_ref() else {
            return Ok(None);
        };
        if target.kind != "DaemonSet" || target.api_version != "apps/v1" {
            return Ok(None);
        }
        let recommenders = vpa
            .spec
            .extra
            .get("recommenders")
            .and_then(Value::as_array)
            .map(|list| {
                list.iter()
                    .filter_map(|r| r.get("name").and_then(Value::as_str))
                    .map(str::to_owned)
                    .collect()
            })
            .unwrap_or_default();
        let policies = vpa
            .spec
            .resource_policy
            .iter()
            .flat_map(|r| r.container_policies.iter())
            .enumerate()
            .map(|(i, p)| container_policy(&object, i, p))
            .collect::<Result<_, _>>()?;
        let per_vpa = per_vpa_configs(&object, value)?;
        Ok(Some(ScopedVpa {
            per_vpa,
            namespace: vpa.metadata.namespace,
            name: vpa.metadata.name,
            generation: vpa.metadata.generation,
            daemonset: target.name.clone(),
            scope,
            recommenders,
            policies,
            status: vpa.status,
        }))
    }

    /// Whether a recommender named `name` computes this VPA, as upstream
    /// selects: a VPA naming no recommender belongs to `default`.
    #[must_use]
    pub fn is_for(&self, name: &str) -> bool {
        if self.recommenders.is_empty() {
            name == "default"
        } else {
            self.recommenders.iter().any(|r| r == name)
        }
    }

    /// The per-VPA overrides for `container`: its own policy's, else the
    /// `*` one's, as upstream picks the policy.
    #[must_use]
    pub fn per_vpa_config(&self, container: &str) -> Option<&super::per_vpa::PerVpaConfig> {
        let by = |name: &str| self.per_vpa.iter().find(|(n, _)| n == name).map(|(_, c)| c);
        if self.policies.iter().any(|p| p.container_name == container) {
            return by(container);
        }
        by("*")
    }

    /// upstream `GetContainerResourcePolicy`: the container's own policy,
    /// else the `*` one.
    #[must_use]
    pub fn policy(&self, container: &str) -> Option<&ContainerPolicy> {
        self.policies
            .iter()
            .find(|p| p.container_name == container)
            .or_else(|| self.policies.iter().find(|p| p.container_name == "*"))
    }

    /// Whether `container` is autoscaled (its policy's mode is not `Off`).
    #[must_use]
    pub fn scales(&self, container: &str) -> bool {
        self.policy(container)
            .is_none_or(|p| p.mode != ContainerMode::Off)
    }
}

/// The per-VPA overrides of each container policy that has any.
fn per_vpa_configs(
    object: &str,
    value: &Value,
) -> Result<Vec<(String, super::per_vpa::PerVpaConfig)>, InputError> {
    let policies = value
        .pointer("/spec/resourcePolicy/containerPolicies")
        .and_then(Value::as_array)
        .map(Vec::as_slice)
        .unwrap_or_default();
    let mut out = Vec::new();
    for (i, p) in policies.iter().enumerate() {
        let config = super::per_vpa::PerVpaConfig::from_policy(p).map_err(|(field, why)| {
            input_error(
                object,
                &format!("spec.resourcePolicy.containerPolicies[{i}].{field}"),
                why,
            )
        })?;
        if !config.is_empty() {
            let name = p
                .get("containerName")
                .and_then(Value::as_str)
                .unwrap_or("*");
            out.push((name.to_owned(), config));
        }
    }
    Ok(out)
}

fn container_policy(
    object: &str,
    i: usize,
    p: &ContainerResourcePolicy,
) -> Result<ContainerPolicy, InputError> {
    let field = |part: &str| format!("spec.resourcePolicy.containerPolicies[{i}].{part}");
    let mut policy = ContainerPolicy::new(p.container_name.clone().unwrap_or_else(|| "*".into()));
    policy.mode = match p.mode.as_deref() {
        None | Some("" | "Auto") => ContainerMode::Auto,
        Some("Off") => ContainerMode::Off,
        Some(other) => {
            return Err(input_error(
                object,
                &field("mode"),
                format!("unknown mode {other:?} (expected Auto or Off)"),
            ))
        }
    };
    let list =
        |name: &str, texts: &Option<BTreeMap<String, Value>>| -> Result<ResourceList, InputError> {
            let mut out = ResourceList::new();
            for (resource, value) in texts.iter().flatten() {
                let text = match value {
                    Value::String(s) => s.clone(),
                    Value::Number(n) => n.to_string(),
                    other => other.to_string(),
                };
                let q = text.parse::<Quantity>().map_err(|e| {
                    input_error(
                        object,
                        &format!("{}.{resource}", field(name)),
                        e.to_string(),
                    )
                })?;
                out.insert(resource.clone(), q);
            }
            Ok(out)
        };
    policy.min_allowed = list("minAllowed", &p.min_allowed)?;
    policy.max_allowed = list("maxAllowed", &p.max_allowed)?;
    if let Some(r) = &p.controlled_resources {
        policy.controlled_resources.clone_from(r);
    }
    Ok(policy)
}

/// Node labels by node name, for scope keys that are labels.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct NodeIndex(HashMap<String, HashMap<String, String>>);

impl NodeIndex {
    /// Adds a Node object's labels.
    pub fn insert(&mut self, node: &Value) {
        let Some(name) = node.pointer("/metadata/name").and_then(Value::as_str) else {
            return;
        };
        let labels = node
            .pointer("/metadata/labels")
            .and_then(Value::as_object)
            .map(|l| {
                l.iter()
                    .filter_map(|(k, v)| Some((k.clone(), v.as_str()?.to_owned())))
                    .collect()
            })
            .unwrap_or_default();
        self.0.insert(name.to_owned(), labels);
    }

    /// Forgets a node.
    pub fn remove(&mut self, name: &str) {
        self.0.remove(name);
    }

    /// How many nodes are known.
    #[must_use]
    pub fn len(&self) -> usize {
        self.0.len()
    }

    /// Whether no node is known.
    #[must_use]
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
}

impl NodeLabels for NodeIndex {
    fn node_label(&self, node: &str, key: &str) -> NodeLabel<'_> {
        match self.0.get(node) {
            None => NodeLabel::UnknownNode,
            Some(labels) => labels
                .get(key)
                .map_or(NodeLabel::Absent, |v| NodeLabel::Value(v)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_vpa_read_from_a_list_page_is_the_vpa_read_whole() {
        let whole = json!({"apiVersion": "autoscaling.k8s.io/v1", "kind": "VerticalPodAutoscaler",
            "metadata": {"name": "agent", "namespace": "monitoring", "generation": 3},
            "spec": {"scope": "node", "targetRef": {"apiVersion": "apps/v1", "kind": "DaemonSet", "name": "agent"},
                "recommenders": [{"name": "default"}],
                "resourcePolicy": {"containerPolicies": [{"containerName": "*", "maxAllowed": {"memory": "1Gi"}}]}},
            "status": {"conditions": [{"type": "RecommendationProvided", "status": "True"}],
                "recommendationGroups": [{"scopeValue": "n1", "containerRecommendations": [
                    {"containerName": "agent", "target": {"cpu": "100m"}}]}]}});
        let read = |item: &Value| {
            let (value, status) = vpa_text(&item.to_string()).expect("an object");
            let mut vpa = ScopedVpa::from_value(&value)
                .expect("reads")
                .expect("scoped");
            vpa.status = status;
            vpa
        };
        let mut item = whole.clone();
        item.as_object_mut().map(|m| m.remove("kind"));
        let expected = ScopedVpa::from_value(&whole)
            .expect("reads")
            .expect("scoped");
        assert!(expected.status.is_some());
        assert_eq!(read(&item), expected);
        // A status that does not read as one is no reason to leave the VPA out.
        item["status"] = json!({"recommendationGroups": "many"});
        assert_eq!(read(&item).status, None);
        assert_eq!(
            vpa_text("[]").map_err(|e| e.to_string()).err().as_deref(),
            Some("invalid type: sequence, expected a map at line 1 column 0")
        );
    }
}
