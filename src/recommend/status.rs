//! From the model to the VPA `status` the recommender writes, in AEP-10031's
//! shape: `recommendation` is the DaemonSet-wide aggregate with its bounds,
//! as upstream's recommender writes it; `recommendationGroups` carry only the
//! `target` of each container per scope value.
//!
//! Upstream's steps, in order (vertical-pod-autoscaler/pkg/recommender/
//! routines/vpa.go `processVPAUpdate`): containers whose policy mode is `Off`
//! are left out; the estimators give target and bounds
//! (`logic.GetRecommendedPodResources`); only controlled resources are kept
//! (`FilterControlledResources`); amounts become quantities, rounded up to
//! `--round-cpu-millicores`/`--round-memory-bytes`
//! (`model.ResourcesAsResourceList`); `minAllowed`/`maxAllowed` (and the
//! global `--container-recommendation-max-allowed-*`) cap target and bounds
//! but not `uncappedTarget` (`routines.cappingPostProcessor`); then the
//! conditions (`model.Vpa.UpdateConditions`).

use super::aggregate::{AggregateContainerState, HistoryConfig};
use super::estimate::{
    cpu_percentile, memory_percentile, pod_minimums, recommend_pod, with_margin, RecommenderConfig,
    Resources,
};
use super::fit::{fit, Fit, TOO_LARGE};
use super::input::ScopedVpa;
use super::model::ContainerHistory;
use super::model::FastMap;
use crate::quantity::{Format, Quantity};
use crate::vpa::ContainerPolicy;
use k8s_openapi::jiff::Timestamp;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};
use std::collections::BTreeMap;
use std::sync::Arc;

/// How amounts become the status.
#[derive(Clone, Debug, PartialEq)]
pub struct StatusConfig {
    pub recommender: RecommenderConfig,
    /// `--round-cpu-millicores` (1: no rounding).
    pub round_cpu_millicores: i64,
    /// `--round-memory-bytes` (1: no rounding).
    pub round_memory_bytes: i64,
    /// `--container-recommendation-max-allowed-cpu`.
    pub max_allowed_cpu: Option<Quantity>,
    /// `--container-recommendation-max-allowed-memory`.
    pub max_allowed_memory: Option<Quantity>,
    /// A scope value gets a group once each of its containers' aggregates
    /// holds this many CPU samples (upstream's notion of an aggregate with
    /// history is one that is not empty: 1).
    pub group_min_samples: u64,
    /// The bytes the status may take ([`super::fit`]).
    pub status_limit: usize,
}

/// upstream `RoundUpToScale`.
fn round_up(value: i64, scale: i64) -> i64 {
    if scale <= 1 || value == 0 {
        return value;
    }
    value.div_euclid(scale) * scale + if value % scale == 0 { 0 } else { scale }
}

/// What one container's recommendations are shaped by, looked up once per
/// VPA and container rather than once per group.
struct Shape<'a> {
    /// Whether cpu and memory are controlled, in the policy's order.
    controlled: Vec<&'static str>,
    policy: Option<&'a ContainerPolicy>,
}

impl<'a> Shape<'a> {
    fn of(vpa: &'a ScopedVpa, container: &str) -> Self {
        let policy = vpa.policy(container);
        let controlled = match policy {
            None => vec!["cpu", "memory"],
            Some(p) => p
                .controlled_resources
                .iter()
                .filter_map(|r| match r.as_str() {
                    "cpu" => Some("cpu"),
                    "memory" => Some("memory"),
                    _ => None,
                })
                .collect(),
        };
        Shape { controlled, policy }
    }

    /// The amounts as a resource list of the controlled resources, rounded
    /// up as configured (upstream `ResourcesAsResourceList`) and, when
    /// `capped`, raised to `minAllowed` and lowered to `maxAllowed` (the
    /// container's, completed by the global one; a zero bound is no bound:
    /// upstream `applyVPAPolicyForContainer`).
    fn list(&self, config: &StatusConfig, r: &Resources, capped: bool) -> Targets {
        let mut out = Targets::default();
        for name in &self.controlled {
            let (mut q, global) = match *name {
                "cpu" => (
                    Quantity::from_milli(
                        round_up(r.cpu_millicores(), config.round_cpu_millicores),
                        Format::DecimalSI,
                    ),
                    config.max_allowed_cpu.as_ref(),
                ),
                _ => (
                    Quantity::from_i64(
                        round_up(r.memory_amount(), config.round_memory_bytes),
                        Format::BinarySI,
                    ),
                    config.max_allowed_memory.as_ref(),
                ),
            };
            if capped {
                if let Some(min) = self.policy.and_then(|p| p.min_allowed.get(name)) {
                    if !min.is_zero() && q < *min {
                        q = min.clone();
                    }
                }
                let max = self.policy.and_then(|p| p.max_allowed.get(name)).or(global);
                if let Some(max) = max {
                    if !max.is_zero() && q > *max {
                        q = max.clone();
                    }
                }
            }
            let text = Some(q.to_string());
            match *name {
                "cpu" => out.cpu = text,
                _ => out.memory = text,
            }
        }
        out
    }
}

/// The DaemonSet-wide `containerRecommendations`, with bounds, from the
/// merge of every group of each container (in scope value order, so the
/// sums are the same on every run).
fn wide_recommendations(
    config: &StatusConfig,
    history_config: &HistoryConfig,
    vpa: &ScopedVpa,
    history: &BTreeMap<Arc<str>, ContainerHistory>,
) -> Vec<ContainerStatus> {
    let merged: BTreeMap<String, AggregateContainerState> = history
        .iter()
        .filter(|(name, _)| vpa.scales(name))
        .map(|(name, h)| {
            let mut values: Vec<_> = h.groups.iter().collect();
            values.sort_unstable_by(|a, b| a.0.cmp(b.0));
            let mut all = AggregateContainerState::default();
            for (_, state) in values {
                all.merge(history_config, state);
            }
            (name.to_string(), all)
        })
        .collect();
    let states: BTreeMap<String, &AggregateContainerState> =
        merged.iter().map(|(n, s)| (n.clone(), s)).collect();
    recommend_pod(&config.recommender, &states)
        .into_iter()
        .map(|(name, r)| {
            let shape = Shape::of(vpa, &name);
            ContainerStatus {
                target: shape.list(config, &r.target, true),
                lower_bound: Some(shape.list(config, &r.lower_bound, true)),
                upper_bound: Some(shape.list(config, &r.upper_bound, true)),
                uncapped_target: Some(shape.list(config, &r.target, false)),
                container_name: name,
            }
        })
        .collect()
}

/// upstream's target estimator alone (percentile, margin, the pod minimum):
/// groups carry no bounds, so none are computed.
fn target(config: &RecommenderConfig, s: &AggregateContainerState, min: (i64, i64)) -> Resources {
    let margin = config.margin_fraction;
    Resources::from_amounts(
        with_margin(cpu_percentile(s, config.target_cpu_percentile), margin).max(min.0),
        with_margin(
            memory_percentile(s, config.target_memory_percentile),
            margin,
        )
        .max(min.1),
    )
}

/// `recommendationGroups`, sorted by scope value: each value whose
/// containers all have enough history, with their capped targets.
fn groups(
    config: &StatusConfig,
    vpa: &ScopedVpa,
    history: &BTreeMap<Arc<str>, ContainerHistory>,
) -> Vec<GroupStatus> {
    let containers: Vec<(&Arc<str>, &ContainerHistory, Shape<'_>)> = history
        .iter()
        .filter(|(name, _)| vpa.scales(name))
        .map(|(name, h)| (name, h, Shape::of(vpa, name)))
        .collect();
    let mut by_value: FastMap<&Arc<str>, Vec<(usize, &AggregateContainerState)>> =
        FastMap::default();
    for (i, (_, h, _)) in containers.iter().enumerate() {
        for (value, state) in &h.groups {
            by_value.entry(value).or_default().push((i, state));
        }
    }
    let least = config.group_min_samples.max(1);
    let mut values: Vec<_> = by_value
        .into_iter()
        .filter(|(_, states)| states.iter().all(|(_, s)| s.total_samples() >= least))
        .collect();
    values.sort_unstable_by(|a, b| a.0.cmp(b.0));
    values
        .into_iter()
        .map(|(value, mut states)| {
            states.sort_unstable_by_key(|(i, _)| *i);
            let min = pod_minimums(&config.recommender, states.len());
            let container_recommendations = states
                .into_iter()
                .map(|(i, state)| {
                    let (name, _, shape) = &containers[i];
                    let t = target(&config.recommender, state, min);
                    ContainerStatus {
                        container_name: name.to_string(),
                        target: shape.list(config, &t, true),
                        lower_bound: None,
                        upper_bound: None,
                        uncapped_target: None,
                    }
                })
                .collect();
            GroupStatus {
                scope_value: value.to_string(),
                container_recommendations,
            }
        })
        .collect()
}

/// upstream `vpaConditionsMap.Set`: the transition time moves only when the
/// status does.
fn set_condition(
    conditions: &mut BTreeMap<String, Value>,
    kind: &str,
    status: bool,
    reason: &str,
    message: &str,
    now: &str,
) {
    let status = if status { "True" } else { "False" };
    let since = conditions
        .get(kind)
        .filter(|c| c.get("status").and_then(Value::as_str) == Some(status))
        .and_then(|c| c.get("lastTransitionTime").cloned())
        .unwrap_or_else(|| Value::String(now.to_owned()));
    let mut condition = Map::new();
    condition.insert("type".into(), kind.into());
    condition.insert("status".into(), status.into());
    condition.insert("lastTransitionTime".into(), since);
    if !reason.is_empty() {
        condition.insert("reason".into(), reason.into());
    }
    if !message.is_empty() {
        condition.insert("message".into(), message.into());
    }
    conditions.insert(kind.to_owned(), Value::Object(condition));
}

/// The status the recommender writes: upstream's `AsStatus` (conditions
/// sorted by type, the recommendation, `observedGeneration`) plus
/// `recommendationGroups`. Typed, not a `serde_json::Value`: with 5,000
/// groups a VPA's status is built (and compared) every interval, and a
/// `Value` tree of maps costs several times more to build.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct VpaStatus {
    #[serde(default)]
    pub conditions: Vec<Value>,
    #[serde(default)]
    pub recommendation: RecommendationStatus,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub recommendation_groups: Vec<GroupStatus>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observed_generation: Option<i64>,
}

/// `status.recommendation`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RecommendationStatus {
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub container_recommendations: Vec<ContainerStatus>,
}

/// One `containerRecommendations[]` entry; a group's carries the target only.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ContainerStatus {
    pub container_name: String,
    #[serde(default)]
    pub target: Targets,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lower_bound: Option<Targets>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub upper_bound: Option<Targets>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub uncapped_target: Option<Targets>,
}

/// One `recommendationGroups[]` entry.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct GroupStatus {
    pub scope_value: String,
    #[serde(default)]
    pub container_recommendations: Vec<ContainerStatus>,
}

/// A resource list as this recommender writes it (cpu, memory); resources
/// someone else wrote are kept in `other`, so that they count as a change.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Targets {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cpu: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub memory: Option<String>,
    #[serde(flatten)]
    pub other: BTreeMap<String, Value>,
}

impl VpaStatus {
    /// As JSON, for the API and the output.
    #[must_use]
    pub fn to_value(&self) -> Value {
        serde_json::to_value(self).unwrap_or(Value::Null)
    }

    /// Whether the two say the same thing, bounds aside.
    fn same_targets(&self, other: &VpaStatus) -> bool {
        fn targets(r: &RecommendationStatus) -> Vec<(&String, &Targets)> {
            r.container_recommendations
                .iter()
                .map(|c| (&c.container_name, &c.target))
                .collect()
        }
        self.conditions == other.conditions
            && self.observed_generation == other.observed_generation
            && self.recommendation_groups == other.recommendation_groups
            && targets(&self.recommendation) == targets(&other.recommendation)
    }
}

/// The status the recommender writes for `vpa`.
#[must_use]
pub fn vpa_status(
    config: &StatusConfig,
    history_config: &HistoryConfig,
    vpa: &ScopedVpa,
    history: Option<&BTreeMap<Arc<str>, ContainerHistory>>,
    pod_count: usize,
    now: Timestamp,
) -> VpaStatus {
    let empty = BTreeMap::new();
    let history = history.unwrap_or(&empty);
    let recommendations = wide_recommendations(config, history_config, vpa, history);
    let groups = groups(config, vpa, history);
    // Whole seconds, as metav1.Time stores them.
    let now = Timestamp::from_second(now.as_second())
        .unwrap_or(now)
        .to_string();
    let mut conditions: BTreeMap<String, Value> = vpa
        .status
        .iter()
        .flat_map(|s| &s.conditions)
        .filter_map(|c| Some((c.get("type")?.as_str()?.to_owned(), c.clone())))
        .collect();
    let (reason, message) = if pod_count > 0 {
        conditions.remove("NoPodsMatched");
        ("", "")
    } else {
        let (r, m) = ("NoPodsMatched", "No pods match this VPA object");
        set_condition(&mut conditions, "NoPodsMatched", true, r, m, &now);
        (r, m)
    };
    let provided = !recommendations.is_empty();
    let (reason, message) = if provided {
        ("", "")
    } else {
        (reason, message)
    };
    set_condition(
        &mut conditions,
        "RecommendationProvided",
        provided,
        reason,
        message,
        &now,
    );
    let mut status = VpaStatus {
        conditions: Vec::new(),
        recommendation: RecommendationStatus {
            container_recommendations: recommendations,
        },
        recommendation_groups: groups,
        observed_generation: Some(vpa.generation),
    };
    match fit(&mut status, config.status_limit) {
        Fit::Whole => {
            conditions.remove(TOO_LARGE);
        }
        Fit::Compacted {
            groups,
            omitted,
            bytes,
        } => {
            let message = format!(
                "{omitted} of {groups} recommendationGroups equal status.recommendation and are left out \
                 so that the status fits ({bytes} of {} bytes); their pods get the same values from \
                 status.recommendation",
                config.status_limit
            );
            set_condition(
                &mut conditions,
                TOO_LARGE,
                false,
                "EqualGroupsOmitted",
                &message,
                &now,
            );
        }
        Fit::TooLarge { groups, bytes } => {
            let message = format!(
                "the {groups} recommendationGroups take {bytes} bytes of status, over the {} allowed, \
                 even without those equal to status.recommendation; none are written, and pods get \
                 status.recommendation",
                config.status_limit
            );
            set_condition(
                &mut conditions,
                TOO_LARGE,
                true,
                "StatusTooLarge",
                &message,
                &now,
            );
        }
    }
    status.conditions = conditions.into_values().collect();
    status
}

/// Whether `new` must be written over `old`: a target (DaemonSet-wide or of
/// a group), a group, a condition or the generation changed. Bounds alone
/// moving (they widen or narrow with every sample's confidence) wait for the
/// next write that has a reason: with thousands of groups a status is large,
/// and writing it every interval would load etcd for nothing. A status that
/// does not read as one is rewritten.
#[must_use]
pub fn needs_write(old: Option<&VpaStatus>, new: &VpaStatus) -> bool {
    old.is_none_or(|old| !old.same_targets(new))
}

/// While Feature `vpa-node-scope` gates scopes off (AEP-10031: "no groups
/// are written"), the status keeps the groups the VPA holds, as they are:
/// neither updated nor removed. Removing them is the Feature's declared
/// cleanup, not the recommender's.
pub fn keep_groups(old: Option<&VpaStatus>, new: &mut VpaStatus) {
    new.recommendation_groups = old
        .map(|old| old.recommendation_groups.clone())
        .unwrap_or_default();
}

#[cfg(test)]
#[path = "status_tests.rs"]
mod tests;
