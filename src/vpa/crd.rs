//! The VerticalPodAutoscaler as the API serves it, with KEP-4943's
//! `spec.scope` and per-node `status.recommendationGroups`: the wire shape
//! the store converts into [`super::VpaPolicy`] and the recommender reads.
//!
//! Fields nodescope does not use are kept in `extra` maps rather than
//! rejected, so a newer VPA schema never breaks the store.

use kube::CustomResource;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use std::collections::BTreeMap;

/// Resource name to quantity text, exactly as the API object has it.
pub type ResourceTexts = BTreeMap<String, Value>;

/// `autoscaling.k8s.io/v1` VerticalPodAutoscaler spec.
#[derive(CustomResource, Clone, Debug, Default, Deserialize, Serialize)]
#[kube(
    group = "autoscaling.k8s.io",
    version = "v1",
    kind = "VerticalPodAutoscaler",
    plural = "verticalpodautoscalers",
    namespaced,
    status = "VpaStatus",
    schema = "disabled"
)]
#[serde(rename_all = "camelCase")]
pub struct VpaSpec {
    #[serde(default)]
    pub target_ref: Option<CrossVersionObjectReference>,
    #[serde(default)]
    pub update_policy: Option<UpdatePolicy>,
    #[serde(default)]
    pub resource_policy: Option<ResourcePolicy>,
    /// KEP-4943: `""` (the whole target) or `"node"`.
    #[serde(default)]
    pub scope: Option<String>,
    /// AEP-7862 (upstream VPA 1.7): the CPU startup boost.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub startup_boost: Option<StartupBoostSpec>,
    #[serde(flatten)]
    pub extra: BTreeMap<String, Value>,
}

/// `startupBoost`, as the API object has it.
#[derive(Clone, Debug, Default, Deserialize, Serialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct StartupBoostSpec {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cpu: Option<GenericStartupBoost>,
    #[serde(flatten)]
    pub extra: BTreeMap<String, Value>,
}

/// `startupBoost.cpu`: numbers and the quantity kept as JSON, so that a
/// wrong one is reported with its field rather than failing the whole VPA's
/// parse (store/convert.rs reads them).
#[derive(Clone, Debug, Default, Deserialize, Serialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct GenericStartupBoost {
    #[serde(default, rename = "type", skip_serializing_if = "Option::is_none")]
    pub type_: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub factor: Option<Value>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub quantity: Option<Value>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub duration_seconds: Option<Value>,
}

#[derive(Clone, Debug, Default, Deserialize, Serialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct CrossVersionObjectReference {
    #[serde(default)]
    pub api_version: String,
    #[serde(default)]
    pub kind: String,
    #[serde(default)]
    pub name: String,
}

#[derive(Clone, Debug, Default, Deserialize, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct UpdatePolicy {
    #[serde(default)]
    pub update_mode: Option<String>,
    #[serde(flatten)]
    pub extra: BTreeMap<String, Value>,
}

#[derive(Clone, Debug, Default, Deserialize, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ResourcePolicy {
    #[serde(default)]
    pub container_policies: Vec<ContainerResourcePolicy>,
}

#[derive(Clone, Debug, Default, Deserialize, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ContainerResourcePolicy {
    #[serde(default)]
    pub container_name: Option<String>,
    #[serde(default)]
    pub mode: Option<String>,
    #[serde(default)]
    pub min_allowed: Option<ResourceTexts>,
    #[serde(default)]
    pub max_allowed: Option<ResourceTexts>,
    #[serde(default)]
    pub controlled_resources: Option<Vec<String>>,
    #[serde(default)]
    pub controlled_values: Option<String>,
    /// AEP-7862: overrides `spec.startupBoost` for this container.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub startup_boost: Option<StartupBoostSpec>,
    #[serde(flatten)]
    pub extra: BTreeMap<String, Value>,
}

/// `status`: the aggregate recommendation and, for node scope, one group per node.
#[derive(Clone, Debug, Default, Deserialize, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct VpaStatus {
    #[serde(default)]
    pub recommendation: Option<Recommendation>,
    #[serde(default)]
    pub recommendation_groups: Vec<RecommendationGroup>,
    #[serde(flatten)]
    pub extra: BTreeMap<String, Value>,
}

#[derive(Clone, Debug, Default, Deserialize, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Recommendation {
    #[serde(default)]
    pub container_recommendations: Vec<RecommendedContainerResources>,
}

/// AEP-10031's shape; for nodescope `scopeValue` is the node name.
#[derive(Clone, Debug, Default, Deserialize, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct RecommendationGroup {
    #[serde(default)]
    pub scope_value: String,
    #[serde(default)]
    pub container_recommendations: Vec<RecommendedContainerResources>,
    #[serde(flatten)]
    pub extra: BTreeMap<String, Value>,
}

#[derive(Clone, Debug, Default, Deserialize, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct RecommendedContainerResources {
    #[serde(default)]
    pub container_name: String,
    #[serde(default)]
    pub target: ResourceTexts,
    #[serde(default)]
    pub lower_bound: Option<ResourceTexts>,
    #[serde(default)]
    pub upper_bound: Option<ResourceTexts>,
    #[serde(default)]
    pub uncapped_target: Option<ResourceTexts>,
}
