//! AEP-8026's per-VPA configuration (`PerVPAConfig`): a container policy may
//! override the recommender's OOM bump and memory aggregation window for its
//! own containers.
//!
//! Upstream applies these in `AggregateContainerState.UpdateFromPolicy`
//! (vertical-pod-autoscaler/pkg/recommender/model/aggregate_container_state.go,
//! kubernetes/autoscaler 55c37cd), only while the gate is on, and the
//! container's own policy wins over `*`. One difference, deliberate: upstream
//! sets a value on an aggregate and keeps it when the field is later removed
//! from the VPA; nodescope reads the VPA as it is now, so removing the field
//! returns the container to the flags' values at the next interval.

use super::container::PeakConfig;
use super::model::ModelConfig;
use serde_json::Value;

/// One container policy's overrides, as the VPA states them. `None` keeps
/// the recommender's flag.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct PerVpaConfig {
    /// `oomBumpUpRatio`, at least 1.
    pub oom_bump_up_ratio: Option<f64>,
    /// `oomMinBumpUp`, bytes, at least 0.
    pub oom_min_bump_up_bytes: Option<f64>,
    /// `memoryAggregationIntervalSeconds`, at least 1, in milliseconds.
    pub memory_aggregation_interval_ms: Option<i64>,
    /// `memoryAggregationIntervalCount`, at least 1.
    pub memory_aggregation_interval_count: Option<i64>,
}

impl PerVpaConfig {
    /// Whether the policy overrides anything.
    #[must_use]
    pub fn is_empty(&self) -> bool {
        *self == PerVpaConfig::default()
    }

    /// Reads one `containerPolicies[]` entry. An out-of-range value is an
    /// error naming the field, with upstream's bound: its admission
    /// controller refuses such a VPA, and a recommender guessing at it
    /// would compute from a number nobody chose.
    ///
    /// # Errors
    /// The field (relative to the policy) and why.
    pub fn from_policy(policy: &Value) -> Result<Self, (&'static str, String)> {
        let quantity = |field: &'static str| -> Result<Option<crate::quantity::Quantity>, _> {
            match policy.get(field) {
                None | Some(Value::Null) => Ok(None),
                Some(v) => {
                    let text = match v {
                        Value::String(s) => s.clone(),
                        other => other.to_string(),
                    };
                    text.parse::<crate::quantity::Quantity>()
                        .map(Some)
                        .map_err(|e| (field, e.to_string()))
                }
            }
        };
        let integer = |field: &'static str| -> Result<Option<i64>, _> {
            match policy.get(field) {
                None | Some(Value::Null) => Ok(None),
                Some(v) => v
                    .as_i64()
                    .map(Some)
                    .ok_or_else(|| (field, format!("{v} is not an integer"))),
            }
        };
        // Upstream's `convertQuantityToFloat64`: milli-units over 1,000.
        #[allow(clippy::cast_precision_loss)] // as upstream's float64
        let ratio = quantity("oomBumpUpRatio")?.map(|q| q.milli_value() as f64 / 1000.0);
        if let Some(r) = ratio.filter(|r| *r < 1.0) {
            return Err(("oomBumpUpRatio", format!("{r} must be at least 1.0")));
        }
        let min_bump = quantity("oomMinBumpUp")?;
        if let Some(q) = min_bump.as_ref().filter(|q| q.sign() < 0) {
            return Err(("oomMinBumpUp", format!("{q} must be at least 0")));
        }
        #[allow(clippy::cast_precision_loss)]
        let min_bump = min_bump.map(|q| q.milli_value() as f64 / 1000.0);
        let seconds = integer("memoryAggregationIntervalSeconds")?;
        if let Some(s) = seconds.filter(|s| !(1..=i64::from(i32::MAX)).contains(s)) {
            return Err((
                "memoryAggregationIntervalSeconds",
                format!("{s} must be between 1 and {}", i32::MAX),
            ));
        }
        let count = integer("memoryAggregationIntervalCount")?;
        if let Some(c) = count.filter(|c| *c < 1) {
            return Err((
                "memoryAggregationIntervalCount",
                format!("{c} must be at least 1"),
            ));
        }
        Ok(PerVpaConfig {
            oom_bump_up_ratio: ratio,
            oom_min_bump_up_bytes: min_bump,
            memory_aggregation_interval_ms: seconds.map(|s| s * 1000),
            memory_aggregation_interval_count: count,
        })
    }
}

/// What the model uses for one container: its peaks and the length of
/// history after which an aggregate without samples is dropped.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Effective {
    pub peaks: PeakConfig,
    pub window_length_ms: i64,
}

/// The recommender's flags with `overrides` applied when the gate is on.
#[must_use]
pub fn effective(config: &ModelConfig, overrides: Option<&PerVpaConfig>) -> Effective {
    let base = Effective {
        peaks: config.peaks,
        window_length_ms: config.window_length_ms,
    };
    let Some(o) = overrides.filter(|_| config.per_vpa_config) else {
        return base;
    };
    let interval_ms = o
        .memory_aggregation_interval_ms
        .unwrap_or(config.peaks.interval_ms);
    let count = o
        .memory_aggregation_interval_count
        .unwrap_or(config.interval_count);
    Effective {
        peaks: PeakConfig {
            interval_ms,
            oom_bump_up_ratio: o
                .oom_bump_up_ratio
                .unwrap_or(config.peaks.oom_bump_up_ratio),
            oom_min_bump_up_bytes: o
                .oom_min_bump_up_bytes
                .unwrap_or(config.peaks.oom_min_bump_up_bytes),
        },
        window_length_ms: interval_ms.saturating_mul(count.max(1)),
    }
}

#[cfg(test)]
#[path = "per_vpa_tests.rs"]
mod tests;
