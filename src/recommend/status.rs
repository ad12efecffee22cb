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
    cpu_percentile, memory_percentile, pod_minimums, recommend_pod, with_margin,
    RecommenderConfig, Resources,
};
use super::input::ScopedVpa;
use super::model::ContainerHistory;
use crate::mutate::recommendation::ContainerPolicy;
use crate::quantity::{Format, Quantity};
use k8s_openapi::jiff::Timestamp;
use serde_json::{json, Map, Value};
use std::collections::{BTreeMap, HashMap};
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
    fn list(&self, config: &StatusConfig, r: &Resources, capped: bool) -> Value {
        let mut out = Map::new();
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
            out.insert((*name).to_owned(), Value::String(q.to_string()));
        }
        Value::Object(out)
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
) -> Vec<Value> {
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
            json!({
                "containerName": name,
                "target": shape.list(config, &r.target, true),
                "lowerBound": shape.list(config, &r.lower_bound, true),
                "upperBound": shape.list(config, &r.upper_bound, true),
                "uncappedTarget": shape.list(config, &r.target, false),
            })
        })
        .collect()
}

/// upstream's target estimator alone (percentile, margin, the pod minimum):
/// groups carry no bounds, so none are computed.
fn target(config: &RecommenderConfig, s: &AggregateContainerState, min: (i64, i64)) -> Resources {
    let margin = config.margin_fraction;
    Resources::from_amounts(
        with_margin(cpu_percentile(s, config.target_cpu_percentile), margin).max(min.0),
        with_margin(memory_percentile(s, config.target_memory_percentile), margin).max(min.1),
    )
}

/// `recommendationGroups`, sorted by scope value: each value whose
/// containers all have enough history, with their capped targets.
fn groups(
    config: &StatusConfig,
    vpa: &ScopedVpa,
    history: &BTreeMap<Arc<str>, ContainerHistory>,
) -> Vec<Value> {
    let containers: Vec<(&Arc<str>, &ContainerHistory, Shape<'_>)> = history
        .iter()
        .filter(|(name, _)| vpa.scales(name))
        .map(|(name, h)| (name, h, Shape::of(vpa, name)))
        .collect();
    let mut by_value: HashMap<&Arc<str>, Vec<(usize, &AggregateContainerState)>> = HashMap::new();
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
            let list: Vec<Value> = states
                .into_iter()
                .map(|(i, state)| {
                    let (name, _, shape) = &containers[i];
                    let t = target(&config.recommender, state, min);
                    json!({"containerName": &***name, "target": shape.list(config, &t, true)})
                })
                .collect();
            json!({"scopeValue": **value, "containerRecommendations": list})
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

/// The status the recommender writes for `vpa`: upstream's `AsStatus`
/// (conditions sorted by type, the recommendation, `observedGeneration`)
/// plus `recommendationGroups`.
#[must_use]
pub fn vpa_status(
    config: &StatusConfig,
    history_config: &HistoryConfig,
    vpa: &ScopedVpa,
    history: Option<&BTreeMap<Arc<str>, ContainerHistory>>,
    pod_count: usize,
    now: Timestamp,
) -> Value {
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
        .get("conditions")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
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
    if recommendations.is_empty() {
        set_condition(
            &mut conditions,
            "RecommendationProvided",
            false,
            reason,
            message,
            &now,
        );
    } else {
        set_condition(
            &mut conditions,
            "RecommendationProvided",
            true,
            "",
            "",
            &now,
        );
    }
    let mut recommendation = Map::new();
    if !recommendations.is_empty() {
        recommendation.insert(
            "containerRecommendations".into(),
            Value::Array(recommendations),
        );
    }
    let mut status = Map::new();
    status.insert(
        "conditions".into(),
        Value::Array(conditions.into_values().collect()),
    );
    status.insert("recommendation".into(), Value::Object(recommendation));
    if !groups.is_empty() {
        status.insert("recommendationGroups".into(), Value::Array(groups));
    }
    status.insert("observedGeneration".into(), vpa.generation.into());
    Value::Object(status)
}

/// Whether `new` must be written over `old`: a target (DaemonSet-wide or of
/// a group), a group, a condition or the generation changed. Bounds alone
/// moving (they widen or narrow with every sample's confidence) wait for the
/// next write that has a reason: with thousands of groups a status is large,
/// and writing it every interval would load etcd for nothing.
#[must_use]
pub fn needs_write(old: &Value, new: &Value) -> bool {
    targets_only(old) != targets_only(new)
}

fn targets_only(status: &Value) -> Value {
    let mut status = status.clone();
    if let Some(list) = status
        .pointer_mut("/recommendation/containerRecommendations")
        .and_then(Value::as_array_mut)
    {
        for c in list.iter_mut().filter_map(Value::as_object_mut) {
            c.remove("lowerBound");
            c.remove("upperBound");
            c.remove("uncappedTarget");
        }
    }
    status
}

#[cfg(test)]
#[path = "status_tests.rs"]
mod tests;
