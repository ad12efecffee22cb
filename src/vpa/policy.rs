//! A VerticalPodAutoscaler's spec, reduced to what applying a
//! recommendation needs: update mode, container policies and scope.

use super::boost::StartupBoost;
use super::recommendations::RecommendationTable;
use super::resources::ResourceList;
use super::scope::ScopeKey;

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
    /// Applied in place where possible, else by eviction.
    InPlaceOrRecreate,
    /// Applied in place only; never by eviction.
    InPlace,
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
    /// `startupBoost`: overrides the VPA-wide one for this container.
    pub startup_boost: Option<StartupBoost>,
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
            startup_boost: None,
        }
    }
}

/// The resources VPA controls when a policy does not say.
pub fn default_controlled_resources() -> Vec<String> {
    vec!["cpu".to_owned(), "memory".to_owned()]
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
    /// `spec.scope`: which value of a pod's node picks its group.
    pub scope: ScopeKey,
    /// `status.recommendationGroups[]` by `scopeValue`, and
    /// `status.recommendation`.
    pub recommendations: RecommendationTable,
    /// `spec.updatePolicy.evictAfterOOMSeconds` (AEP-8026): this VPA's
    /// `--evict-after-oom-threshold`, honoured under `PerVPAConfig`.
    pub evict_after_oom_seconds: Option<i64>,
    /// `spec.startupBoost`: for every container without one of its own.
    pub startup_boost: Option<StartupBoost>,
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
    /// this before [`crate::mutate::mutate_pod`] because `Off` VPAs only observe.
    pub fn applies_at_admission(&self) -> bool {
        self.update_mode != UpdateMode::Off
    }
}
