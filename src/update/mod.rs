//! `nodescope update`: the third of AEP-10031's components. It brings the
//! running pods of scoped DaemonSet VPAs to their node's (or zone's)
//! recommendation group, in place where the updateMode allows it.
//!
//! What a pod should have is exactly what the webhook gives a new pod of
//! that DaemonSet on that node now: [`crate::mutate::size_pod`], the one
//! arithmetic both call. When to act follows upstream's updater
//! ([`priority`], [`restriction`]) with the pod's group in place of the
//! DaemonSet-wide recommendation. [`plan::plan_pass`] decides a whole pass
//! purely; [`cluster`] carries the decisions out against the apiserver.
//!
//! Groups carry targets only (AEP-10031's shape), so a pod on a group has no
//! recommended range: as in kubernetes/autoscaler PR #10012, it is "outside
//! the range" only when a request is missing, and otherwise waits for the
//! lifetime threshold and the minimum change. A pod on the VPA-wide
//! fallback is treated the same way: the store keeps targets only.

mod act;
pub mod cluster;
pub mod events;
pub mod metrics;
pub mod plan;
pub mod priority;
pub mod reason;
pub mod restriction;
pub mod synthetic;
pub mod told;
pub mod workloads;

use crate::mutate::{MissingNodeRecommendation, Patch};
use crate::pods::Texts;
use serde::Serialize;
use std::borrow::Cow;
use std::sync::Arc;

pub use self::plan::{plan_pass, Memory};
pub use self::reason::Reason;

/// The message of a pod already at its recommendation ([`Reason::AtTarget`]):
/// the steady state, which the running updater does not log (`told`) and
/// the bench counts.
pub const SETTLED: &str = "at its recommendation";
pub use self::workloads::{DaemonSetInfo, Workloads};

/// The numbers upstream's updater takes as flags, with its defaults.
#[derive(Clone, Debug, PartialEq)]
pub struct UpdateConfig {
    /// `--pod-update-threshold`, `--in-recommendation-bounds-eviction-lifetime-threshold`,
    /// `--evict-after-oom-threshold`.
    pub priority: priority::PriorityConfig,
    /// `--min-replicas`.
    pub min_replicas: usize,
    /// `--eviction-tolerance`.
    pub eviction_tolerance: f64,
    /// `--in-place-skip-disruption-budget`.
    pub in_place_skip_disruption_budget: bool,
    /// As the webhook's `--missing-node-recommendation`.
    pub missing: MissingNodeRecommendation,
    /// `--feature-gates PerVPAConfig=true`: a VPA's
    /// `evictAfterOOMSeconds` replaces `--evict-after-oom-threshold` for
    /// its pods.
    pub per_vpa_config: bool,
    /// `--vpa-object-namespace`, `--ignored-vpa-object-namespaces`.
    pub namespaces: crate::vpa::namespaces::VpaNamespaces,
    /// `--feature-gates CPUStartupBoost=true`: boosted pods are unboosted
    /// in place when their boost expires, and left alone until then.
    pub startup_boost: bool,
}

impl Default for UpdateConfig {
    fn default() -> Self {
        UpdateConfig {
            priority: priority::PriorityConfig::default(),
            min_replicas: 2,
            eviction_tolerance: 0.5,
            in_place_skip_disruption_budget: false,
            missing: MissingNodeRecommendation::Aggregate,
            per_vpa_config: false,
            namespaces: crate::vpa::namespaces::VpaNamespaces::All,
            startup_boost: false,
        }
    }
}

/// What one pass does to one pod. `deferred` and `none` both leave the pod
/// alone this pass; a script tells them apart without reading the reason:
/// a deferred pod is one the updater would change and holds back.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Action {
    /// Nothing to do: at its recommendation, a change too small, or a pod
    /// the updater never changes (the reason says which).
    #[default]
    None,
    /// Not at its recommendation, but held back this pass: the eviction
    /// tolerance, --min-replicas, its age, a resize still pending, a stale
    /// webhook Lease, or a node the store does not know yet.
    Deferred,
    /// PATCH `pods/resize`.
    Resize,
    /// POST `pods/eviction`.
    Evict,
}

impl Action {
    /// The word in tables and JSON.
    #[must_use]
    pub fn as_str(self) -> &'static str {
        match self {
            Action::None => "none",
            Action::Deferred => "deferred",
            Action::Resize => "resize",
            Action::Evict => "evict",
        }
    }

    /// Whether the pass writes to the pod (a resize or an eviction).
    #[must_use]
    pub fn acts(self) -> bool {
        matches!(self, Action::Resize | Action::Evict)
    }
}

/// Requests and limits as quantity texts.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct Resources {
    /// `resources.requests`.
    pub requests: Texts,
    /// `resources.limits`.
    pub limits: Texts,
}

/// One container the VPA controls.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct ContainerChange {
    /// The container (shared with the pod).
    pub name: Arc<str>,
    /// What it runs with: the actuated resources the kubelet reports, else
    /// the spec.
    pub current: Resources,
    /// What it should have; only when the action is `resize` or `evict`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub desired: Option<Resources>,
}

/// The decision for one pod. A pass makes one for every pod, so the names
/// are shared with the pod ([`crate::pods::RunningPod`]) rather than
/// copied, and a fixed reason is not allocated.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct PodPlan {
    /// The pod's namespace.
    pub namespace: Arc<str>,
    /// The pod's name.
    pub pod: Arc<str>,
    /// The VPA that controls it.
    pub vpa: Arc<str>,
    /// Its node.
    pub node: Option<Arc<str>>,
    /// The group it belongs to (`None` when its node is unknown).
    pub scope_value: Option<Arc<str>>,
    /// What to do.
    pub action: Action,
    /// Why, in a few words (the table's REASON).
    pub reason: Reason,
    /// Why, in a sentence: the numbers and the flags that decided it.
    pub message: Cow<'static, str>,
    /// The containers the VPA controls.
    pub containers: Vec<ContainerChange>,
    /// The resize body (for `resize`); empty for an unboost whose
    /// resources are right already and only loses its annotations.
    #[serde(skip)]
    pub ops: Patch,
    /// For an unboost: the `vpaCpuStartupBoost/<container>` annotations to
    /// remove once the resize is asked for (upstream removes them with a
    /// patch of the pod).
    #[serde(skip)]
    pub unboost: Vec<String>,
    /// The pod's resourceVersion when planned.
    #[serde(skip)]
    pub resource_version: Arc<str>,
    /// The pod's UID.
    #[serde(skip)]
    pub uid: Arc<str>,
    /// Containers left alone because their recommendation cannot be
    /// applied ([`crate::mutate::Sizing::unusable`]), for the metric.
    #[serde(skip)]
    pub unusable: usize,
}
