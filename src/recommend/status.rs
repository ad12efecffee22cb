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

use super::aggregate::AggregateContainerState;
use super::container::amount;
use super::estimate::{recommend_pod, RecommenderConfig, Resources};
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

/// One container's amounts as a resource list: only the controlled
/// resources, rounded as configured.
fn resource_list(
    config: &StatusConfig,
    controlled: &[String],
    r: &Resources,
) -> Map<String, Value> {
    let mut out = Map::new();
    for name in controlled {
        let q = match name.as_str() {
            "cpu" => Quantity::from_milli(
                round_up(amount(r.cpu_cores * 1000.0), config.round_cpu_millicores),
                Format::DecimalSI,
            ),
            "memory" => Quantity::from_i64(
                round_up(amount(r.memory_bytes), config.round_memory_bytes),
                Format::BinarySI,
            ),
            _ => continue,
        };
        out.insert(name.clone(), Value::String(q.to_string()));
    }
    out
}

/// `applyVPAPolicyForContainer`'s `process`: raise to `minAllowed`, lower
/// to `maxAllowed` (the container's, completed by the global one); a zero
/// bound is no bound.
fn cap(config: &StatusConfig, policy: Option<&ContainerPolicy>, list: &mut Map<String, Value>) {
    for (name, value) in list.iter_mut() {
        let Some(mut q) = value.as_str().and_then(|s| s.parse::<Quantity>().ok()) else {
            continue;
        };
        if let Some(min) = policy.and_then(|p| p.min_allowed.get(name)) {
            if !min.is_zero() && q < *min {
                q = min.clone();
            }
        }
        let global = match name.as_str() {
            "cpu" => config.max_allowed_cpu.as_ref(),
            "memory" => config.max_allowed_memory.as_ref(),
            _ => None,
        };
        let max = policy.and_then(|p| p.max_allowed.get(name)).or(global);
        if let Some(max) = max {
            if !max.is_zero() && q > *max {
                q = max.clone();
            }
        }
        *value = Value::String(q.to_string());
    }
}

fn controlled(vpa: &ScopedVpa, container: &str) -> Vec<String> {
    vpa.policy(container).map_or_else(
        crate::mutate::recommendation::default_controlled_resources,
        |p| p.controlled_resources.clone(),
    )
}

/// The DaemonSet-wide `containerRecommendations`, with bounds.
fn wide_recommendations(
    config: &StatusConfig,
    vpa: &ScopedVpa,
    history: &BTreeMap<Arc<str>, ContainerHistory>,
) -> Vec<Value> {
    let states: BTreeMap<String, &AggregateContainerState> = history
        .iter()
        .filter(|(name, _)| vpa.scales(name))
        .map(|(name, h)| (name.to_string(), &h.wide))
        .collect();
    recommend_pod(&config.recommender, &states)
        .into_iter()
        .map(|(name, r)| {
            let controlled = controlled(vpa, &name);
            let policy = vpa.policy(&name);
            let list = |res: &Resources, capped: bool| {
                let mut l = resource_list(config, &controlled, res);
                if capped {
                    cap(config, policy, &mut l);
                }
                Value::Object(l)
            };
            json!({
                "containerName": name,
                "target": list(&r.target, true),
                "lowerBound": list(&r.lower_bound, true),
                "upperBound": list(&r.upper_bound, true),
                "uncappedTarget": list(&r.target, false),
            })
        })
        .collect()
}

/// `recommendationGroups`, sorted by scope value: each value whose
/// containers all have enough history, with their capped targets.
fn groups(
    config: &StatusConfig,
    vpa: &ScopedVpa,
    history: &BTreeMap<Arc<str>, ContainerHistory>,
) -> Vec<Value> {
    let mut by_value: HashMap<&Arc<str>, BTreeMap<String, &AggregateContainerState>> =
        HashMap::new();
    for (name, h) in history.iter().filter(|(name, _)| vpa.scales(name)) {
        for (value, state) in &h.groups {
            by_value
                .entry(value)
                .or_default()
                .insert(name.to_string(), state);
        }
    }
    let mut values: Vec<_> = by_value
        .into_iter()
        .filter(|(_, states)| {
            states
                .values()
                .all(|s| s.total_samples() >= config.group_min_samples.max(1))
        })
        .collect();
    values.sort_unstable_by(|a, b| a.0.cmp(b.0));
    values
        .into_iter()
        .map(|(value, states)| {
            let containers: Vec<Value> = recommend_pod(&config.recommender, &states)
                .into_iter()
                .map(|(name, r)| {
                    let mut target = resource_list(config, &controlled(vpa, &name), &r.target);
                    cap(config, vpa.policy(&name), &mut target);
                    json!({"containerName": name, "target": target})
                })
                .collect();
            json!({"scopeValue": **value, "containerRecommendations": containers})
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
    vpa: &ScopedVpa,
    history: Option<&BTreeMap<Arc<str>, ContainerHistory>>,
    pod_count: usize,
    now: Timestamp,
) -> Value {
    let empty = BTreeMap::new();
    let history = history.unwrap_or(&empty);
    let recommendations = wide_recommendations(config, vpa, history);
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
