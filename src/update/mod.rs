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

pub mod cluster;
pub mod metrics;
pub mod plan;
pub mod priority;
pub mod restriction;
pub mod synthetic;
pub mod workloads;

use crate::mutate::{MissingNodeRecommendation, Patch};
use serde::Serialize;

pub use self::plan::{plan_pass, Memory};
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
}

impl Default for UpdateConfig {
    fn default() -> Self {
        UpdateConfig {
            priority: priority::PriorityConfig::default(),
            min_replicas: 2,
            eviction_tolerance: 0.5,
            in_place_skip_disruption_budget: false,
            missing: MissingNodeRecommendation::Aggregate,
        }
    }
}

/// What one pass does to one pod.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Action {
    /// Nothing (the reason says why).
    #[default]
    None,
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
            Action::Resize => "resize",
            Action::Evict => "evict",
        }
    }
}

/// Requests and limits as quantity texts.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct Resources {
    /// `resources.requests`.
    pub requests: Quantities,
    /// `resources.limits`.
    pub limits: Quantities,
}

/// Resource name to quantity text, in name order; serialized as a JSON
/// object. A pass holds four of these per container of every pod, so
/// they are one small vector each rather than a `BTreeMap` (whose every
/// node is a 500-byte allocation).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Quantities(Vec<(Box<str>, Box<str>)>);

impl Quantities {
    /// The quantity of `resource`.
    #[must_use]
    pub fn get(&self, resource: &str) -> Option<&str> {
        self.find(resource).ok().map(|i| &*self.0[i].1)
    }

    /// Sets `resource` to `quantity`.
    pub fn insert(&mut self, resource: &str, quantity: impl Into<Box<str>>) {
        match self.find(resource) {
            Ok(i) => self.0[i].1 = quantity.into(),
            Err(i) => self.0.insert(i, (resource.into(), quantity.into())),
        }
    }

    /// (resource, quantity) in resource order.
    pub fn iter(&self) -> impl Iterator<Item = (&str, &str)> {
        self.0.iter().map(|(k, v)| (&**k, &**v))
    }

    /// How many resources.
    #[must_use]
    pub fn len(&self) -> usize {
        self.0.len()
    }

    /// Whether there are none.
    #[must_use]
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    fn find(&self, resource: &str) -> Result<usize, usize> {
        self.0.binary_search_by(|(k, _)| (**k).cmp(resource))
    }
}

impl<K: AsRef<str>, V: Into<Box<str>>> FromIterator<(K, V)> for Quantities {
    /// As a map: a resource listed twice keeps its last quantity.
    fn from_iter<I: IntoIterator<Item = (K, V)>>(iter: I) -> Self {
        let iter = iter.into_iter();
        let mut out = Quantities(Vec::with_capacity(iter.size_hint().0));
        for (k, v) in iter {
            out.insert(k.as_ref(), v);
        }
        out
    }
}

impl Serialize for Quantities {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeMap;
        let mut map = serializer.serialize_map(Some(self.0.len()))?;
        for (k, v) in self.iter() {
            map.serialize_entry(k, v)?;
        }
        map.end()
    }
}

/// One container the VPA controls.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct ContainerChange {
    /// The container.
    pub name: String,
    /// What it runs with: the actuated resources the kubelet reports, else
    /// the spec.
    pub current: Resources,
    /// What it should have; only when the action is not `none`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub desired: Option<Resources>,
}

/// The decision for one pod.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct PodPlan {
    /// The pod's namespace.
    pub namespace: String,
    /// The pod's name.
    pub pod: String,
    /// The VPA that controls it.
    pub vpa: String,
    /// Its node.
    pub node: Option<String>,
    /// The group it belongs to (`None` when its node is unknown).
    pub scope_value: Option<String>,
    /// What to do.
    pub action: Action,
    /// Why.
    pub reason: String,
    /// The containers the VPA controls.
    pub containers: Vec<ContainerChange>,
    /// The resize body (for `resize`).
    #[serde(skip)]
    pub ops: Patch,
    /// The pod's resourceVersion when planned.
    #[serde(skip)]
    pub resource_version: String,
    /// The pod's UID.
    #[serde(skip)]
    pub uid: String,
}
