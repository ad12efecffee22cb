//! The VPA model shared by every part that reads a VerticalPodAutoscaler:
//! the store that indexes it, the webhook that applies it to new pods, the
//! recommender that writes its groups and the updater that brings running
//! pods to them.
//!
//! The types are built once, when the store loads Kubernetes objects, with
//! every quantity already parsed, so deciding about a pod never parses VPA
//! data and never fails on it. They mirror the upstream API fields they come
//! from, minus the parts no consumer reads.

pub mod boost;
pub mod crd;
pub mod limit_range;
pub mod namespaces;
pub mod policy;
pub mod recommendations;
pub mod resources;
pub mod scope;

pub use self::boost::{BoostKind, CpuBoost, StartupBoost};
pub use self::limit_range::{effective_limit_range, LimitKind, LimitRangeItem};
pub use self::policy::{
    default_controlled_resources, ContainerMode, ContainerPolicy, ControlledValues, UpdateMode,
    VpaPolicy, DEFAULT_CONTAINER_POLICY,
};
pub use self::recommendations::{
    ContainerRecommendation, RecommendationRow, RecommendationTable, TableBuilder,
};
pub use self::resources::{resource_name, ResourceList, ResourceName};
pub use self::scope::{NodeLabel, NodeLabels, Placement, ScopeKey, SCOPE_FEATURE};
