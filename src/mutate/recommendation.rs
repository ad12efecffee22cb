//! Domain types for VPA policy, recommendations and LimitRanges.
//!
//! They are built once when the store loads Kubernetes objects, with every
//! quantity already parsed, so admitting a pod never parses VPA data and never
//! fails on it. They mirror the upstream API fields they come from, minus the
//! parts the admission path does not use.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

use crate::quantity::Quantity;

/// Resource name (`cpu`, `memory`, `example.com/gpu`) to quantity.
pub type ResourceList = BTreeMap<String, Quantity>;

/// Container name that makes a [`ContainerPolicy`] apply to every container
/// without a policy of its own.
pub const DEFAULT_CONTAINER_POLICY: &str = "*";

/// `spec.updatePolicy.updateMode`; the caller skips pods when it is `Off`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum UpdateMode {
    /// Recommendations are computed but never applied.
    Off,
    /// Applied only when pods are created.
    Initial,
    /// Applied at creation and by evicting pods.
    Recreate,
    /// Applied in place where possible.
    InPlaceOrRecreate,
    /// The upstream default.
    #[default]
    Auto,
}

/// `containerPolicies[].mode`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum ContainerMode {
    /// VPA manages the container (the upstream default).
    #[default]
    Auto,
    /// VPA must leave this container's resources alone.
    Off,
}

/// `containerPolicies[].controlledValues`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum ControlledValues {
    /// Requests follow the recommendation and limits keep their ratio to them
    /// (the upstream default).
    #[default]
    RequestsAndLimits,
    /// Only requests change; they are capped at the existing limits.
    RequestsOnly,
}

/// One `spec.resourcePolicy.containerPolicies[]` entry.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ContainerPolicy {
    /// A container name, or [`DEFAULT_CONTAINER_POLICY`].
    pub container_name: String,
    /// Whether VPA may change this container at all.
    pub mode: ContainerMode,
    /// Requests are raised to at least these.
    pub min_allowed: ResourceList,
    /// Requests are capped to at most these.
    pub max_allowed: ResourceList,
    /// Resources VPA may change; upstream defaults to cpu and memory.
    pub controlled_resources: Vec<String>,
    /// Whether limits are scaled too.
    pub controlled_values: ControlledValues,
}

impl ContainerPolicy {
    /// A policy with upstream defaults, to be adjusted field by field.
    pub fn new(container_name: impl Into<String>) -> Self {
        Self {
            container_name: container_name.into(),
            mode: ContainerMode::Auto,
            min_allowed: ResourceList::new(),
            max_allowed: ResourceList::new(),
            controlled_resources: default_controlled_resources(),
            controlled_values: ControlledValues::RequestsAndLimits,
        }
    }
}

/// The resources VPA controls when a policy does not say.
pub fn default_controlled_resources() -> Vec<String> {
    vec!["cpu".to_owned(), "memory".to_owned()]
}

/// One `containerRecommendations[]` entry, for a node group or the aggregate.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ContainerRecommendation {
    /// The container it applies to.
    pub container_name: String,
    /// What requests are set to (before capping).
    pub target: ResourceList,
    /// Kept for the updater; admission does not use it.
    pub lower_bound: ResourceList,
    /// Kept for the updater; admission does not use it.
    pub upper_bound: ResourceList,
    /// Kept for diagnostics; admission does not use it.
    pub uncapped_target: ResourceList,
}

/// A VerticalPodAutoscaler reduced to what admission needs.
#[derive(Clone, Debug, Default)]
pub struct VpaPolicy {
    /// The VPA's namespace.
    pub namespace: String,
    /// The VPA's name; it appears in the `vpaUpdates` annotation.
    pub name: String,
    /// The caller skips pods when this is `Off`.
    pub update_mode: UpdateMode,
    /// `spec.resourcePolicy.containerPolicies`.
    pub container_policies: Vec<ContainerPolicy>,
    /// `status.recommendationGroups[]` keyed by `scopeValue` (the node name).
    /// `Arc` so a store snapshot can share them without copying.
    pub node_recommendations: HashMap<String, Arc<[ContainerRecommendation]>>,
    /// `status.recommendation`: the DaemonSet-wide fallback.
    pub aggregate: Option<Arc<[ContainerRecommendation]>>,
}

impl VpaPolicy {
    /// The policy for a container: an exact name wins over `*`, as upstream.
    pub fn container_policy(&self, container: &str) -> Option<&ContainerPolicy> {
        let exact = self
            .container_policies
            .iter()
            .find(|p| p.container_name == container);
        exact.or_else(|| {
            self.container_policies
                .iter()
                .find(|p| p.container_name == DEFAULT_CONTAINER_POLICY)
        })
    }

    /// Whether admission may apply recommendations at all; the caller checks
    /// this before [`super::mutate_pod`] because `Off` VPAs only observe.
    pub fn applies_at_admission(&self) -> bool {
        self.update_mode != UpdateMode::Off
    }

    /// The recommendation group for one node.
    pub fn node_recommendation(&self, node: &str) -> Option<&[ContainerRecommendation]> {
        self.node_recommendations.get(node).map(|r| &**r)
    }
}

/// `LimitRange.spec.limits[].type`; only these two affect pod resources.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LimitKind {
    /// Bounds each container.
    Container,
    /// Bounds the sum over the pod's containers.
    Pod,
}

/// One `LimitRange.spec.limits[]` entry of the pod's namespace.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LimitRangeItem {
    /// Which object the bounds apply to.
    pub kind: LimitKind,
    /// Requests and limits must be at least these.
    pub min: ResourceList,
    /// Limits must be at most these.
    pub max: ResourceList,
    /// The limit the LimitRanger admits for containers without one; VPA
    /// treats it as the original limit.
    pub default: ResourceList,
    /// Kept for completeness; upstream VPA ignores it.
    pub default_request: ResourceList,
    /// Kept for completeness; upstream VPA ignores it.
    pub max_limit_request_ratio: ResourceList,
}

impl LimitRangeItem {
    /// An item with no bounds, to be filled field by field.
    pub fn new(kind: LimitKind) -> Self {
        Self {
            kind,
            min: ResourceList::new(),
            max: ResourceList::new(),
            default: ResourceList::new(),
            default_request: ResourceList::new(),
            max_limit_request_ratio: ResourceList::new(),
        }
    }
}

/// Folds all items of one kind into the effective bounds, like upstream's
/// limit range calculator: the lowest max and the highest min win, and a later
/// default replaces an earlier one. `None` when nothing of that kind is set.
pub fn effective_limit_range(items: &[LimitRangeItem], kind: LimitKind) -> Option<LimitRangeItem> {
    let mut result = LimitRangeItem::new(kind);
    let mut seen = false;
    for item in items.iter().filter(|i| i.kind == kind) {
        if item.min.is_empty() && item.max.is_empty() && item.default.is_empty() {
            continue;
        }
        seen = true;
        if !item.default.is_empty() {
            result.default = item.default.clone();
        }
        for (name, max) in &item.max {
            let slot = result
                .max
                .entry(name.clone())
                .or_insert_with(|| max.clone());
            if max < slot {
                *slot = max.clone();
            }
        }
        for (name, min) in &item.min {
            let slot = result
                .min
                .entry(name.clone())
                .or_insert_with(|| min.clone());
            if min > slot {
                *slot = min.clone();
            }
        }
    }
    seen.then_some(result)
}
