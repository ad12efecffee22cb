//! Upstream's estimators and pod recommender:
//! `vertical-pod-autoscaler/pkg/recommender/logic/estimator.go`,
//! `logic/recommender.go` (`CreatePodResourceRecommender`,
//! `GetRecommendedPodResources`), `pkg/recommender/config/config.go` (flag
//! defaults) and `pkg/recommender/model/types.go` (`ResourceAmount`).
//!
//! Upstream rounds INSIDE the estimator chain: every stage yields a
//! `ResourceAmount`, an int64 of millicores or bytes, truncated toward zero
//! and clamped to `[0, 1e14]` (`resourceAmountFromFloat`). The chain per
//! resource and bound is percentile → `CPUAmountFromCores` /
//! `MemoryAmountFromBytes` → margin (`base + ScaleResource(base, margin)`)
//! → confidence multiplier (bounds only) → `max(·, pod minimum / number of
//! containers)`. The functions below keep those integer steps, so
//! [`Resources`] hold exact upstream amounts.

use super::aggregate::AggregateContainerState;
use super::gomath;
use super::scheme::BucketScheme;
use std::collections::BTreeMap;
use std::time::Duration;

/// Upstream `MaxResourceAmount` (`model/types.go`).
pub const MAX_RESOURCE_AMOUNT: i64 = 100_000_000_000_000;

/// Upper bound confidence multiplier and exponent: `(1 + 1/confidence)^1`
/// (`CreatePodResourceRecommender`).
pub const UPPER_BOUND_CONFIDENCE: (f64, f64) = (1.0, 1.0);
/// Lower bound confidence multiplier and exponent:
/// `(1 + 0.001/confidence)^-2` (`CreatePodResourceRecommender`).
pub const LOWER_BOUND_CONFIDENCE: (f64, f64) = (0.001, -2.0);

/// The recommender flags that feed the numbers; `Default` is upstream's
/// defaults (`config/config.go`).
#[derive(Debug, Clone, PartialEq)]
pub struct RecommenderConfig {
    /// `--target-cpu-percentile` (0.9).
    pub target_cpu_percentile: f64,
    /// `--recommendation-lower-bound-cpu-percentile` (0.5).
    pub lower_bound_cpu_percentile: f64,
    /// `--recommendation-upper-bound-cpu-percentile` (0.95).
    pub upper_bound_cpu_percentile: f64,
    /// `--confidence-interval-cpu` (24h).
    pub confidence_interval_cpu: Duration,
    /// `--target-memory-percentile` (0.9).
    pub target_memory_percentile: f64,
    /// `--recommendation-lower-bound-memory-percentile` (0.5).
    pub lower_bound_memory_percentile: f64,
    /// `--recommendation-upper-bound-memory-percentile` (0.95).
    pub upper_bound_memory_percentile: f64,
    /// `--confidence-interval-memory` (24h).
    pub confidence_interval_memory: Duration,
    /// `--recommendation-margin-fraction` (0.15).
    pub margin_fraction: f64,
    /// `--pod-recommendation-min-cpu-millicores` (25).
    pub pod_min_cpu_millicores: f64,
    /// `--pod-recommendation-min-memory-mb` (250, in MiB: `* 1024 * 1024`).
    pub pod_min_memory_mb: f64,
}

impl Default for RecommenderConfig {
    fn default() -> Self {
        RecommenderConfig {
            target_cpu_percentile: 0.9,
            lower_bound_cpu_percentile: 0.5,
            upper_bound_cpu_percentile: 0.95,
            confidence_interval_cpu: Duration::from_secs(24 * 3600),
            target_memory_percentile: 0.9,
            lower_bound_memory_percentile: 0.5,
            upper_bound_memory_percentile: 0.95,
            confidence_interval_memory: Duration::from_secs(24 * 3600),
            margin_fraction: 0.15,
            pod_min_cpu_millicores: 25.0,
            pod_min_memory_mb: 250.0,
        }
    }
}

/// One recommended amount of each resource, exactly upstream's
/// `ResourceAmount`s: `cpu_cores` is `millicores as f64 / 1000.0`
/// (`CoresFromCPUAmount`) and `memory_bytes` a whole number of bytes. Use
/// [`Resources::cpu_millicores`] / [`Resources::memory_amount`] for the
/// integers.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Resources {
    /// CPU in cores.
    pub cpu_cores: f64,
    /// Memory in bytes.
    pub memory_bytes: f64,
}

impl Resources {
    /// From upstream amounts (millicores, bytes).
    #[must_use]
    pub fn from_amounts(cpu_millicores: i64, memory_bytes: i64) -> Self {
        Resources {
            cpu_cores: cores_from_cpu_amount(cpu_millicores),
            memory_bytes: bytes_from_memory_amount(memory_bytes),
        }
    }

    /// The CPU amount in whole millicores (exact for values made by
    /// [`Resources::from_amounts`]).
    #[must_use]
    pub fn cpu_millicores(&self) -> i64 {
        (self.cpu_cores * 1000.0).round() as i64
    }

    /// The memory amount in whole bytes.
    #[must_use]
    pub fn memory_amount(&self) -> i64 {
        self.memory_bytes.round() as i64
    }
}

/// Upstream `RecommendedContainerResources`, plus the uncapped target
/// (equal to `target` here: capping is the caller's).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ContainerRecommendation {
    /// `Target`.
    pub target: Resources,
    /// `LowerBound`.
    pub lower_bound: Resources,
    /// `UpperBound`.
    pub upper_bound: Resources,
    /// `UncappedTarget` before the caller's minAllowed/maxAllowed capping.
    pub uncapped_target: Resources,
}

/// Upstream `resourceAmountFromFloat`: clamps to `[0, 1e14]` and truncates;
/// NaN gives what Go on amd64 gives (`i64::MIN`), which the pod minimum
/// then replaces.
#[must_use]
pub fn resource_amount_from_float(amount: f64) -> i64 {
    if amount > MAX_RESOURCE_AMOUNT as f64 {
        return MAX_RESOURCE_AMOUNT;
    }
    let amount = if amount < 0.0 { 0.0 } else { amount };
    gomath::f64_to_i64_amd64(amount)
}

/// Upstream `CPUAmountFromCores`: millicores.
#[must_use]
pub fn cpu_amount_from_cores(cores: f64) -> i64 {
    resource_amount_from_float(cores * 1000.0)
}

/// Upstream `CoresFromCPUAmount`.
#[must_use]
pub fn cores_from_cpu_amount(millicores: i64) -> f64 {
    millicores as f64 / 1000.0
}

/// Upstream `MemoryAmountFromBytes`.
#[must_use]
pub fn memory_amount_from_bytes(bytes: f64) -> i64 {
    resource_amount_from_float(bytes)
}

/// Upstream `BytesFromMemoryAmount`.
#[must_use]
pub fn bytes_from_memory_amount(bytes: i64) -> f64 {
    bytes as f64
}

/// Upstream `ScaleResource`.
#[must_use]
pub fn scale_resource(amount: i64, factor: f64) -> i64 {
    resource_amount_from_float(amount as f64 * factor)
}

/// Upstream `cpuMarginEstimator` / `memoryMarginEstimator`:
/// `base + ScaleResource(base, fraction)` (int64 addition).
#[must_use]
pub fn with_margin(base: i64, margin_fraction: f64) -> i64 {
    base.wrapping_add(scale_resource(base, margin_fraction))
}

/// Upstream `getConfidence`: `min(lifespan / interval, samples /
/// interval-in-minutes)`, i.e. days of history at one sample a minute for a
/// 24h interval. Uses the CPU sample count and first/last CPU sample start
/// for both resources, as upstream.
#[must_use]
pub fn confidence(state: &AggregateContainerState, interval: Duration) -> f64 {
    let interval = gomath::duration_nanos(interval);
    let lifespan = gomath::time_sub(state.last(), state.first()) as f64 / interval as f64;
    let samples = state.total_samples() as f64 / gomath::duration_minutes(interval);
    gomath::min(lifespan, samples)
}

/// Upstream `cpuConfidenceMultiplier` / `memoryConfidenceMultiplier`:
/// `ScaleResource(base, (1 + multiplier/confidence)^exponent)` with Go's
/// `math.Pow`. No history (confidence 0) gives `1e14` for a positive
/// exponent and 0 for a negative one.
#[must_use]
pub fn with_confidence_multiplier(
    base: i64,
    multiplier: f64,
    exponent: f64,
    confidence: f64,
) -> i64 {
    scale_resource(base, gomath::pow(1.0 + multiplier / confidence, exponent))
}

/// Upstream `percentileCPUEstimator`: millicores.
#[must_use]
pub fn cpu_percentile(state: &AggregateContainerState, percentile: f64) -> i64 {
    cpu_amount_from_cores(
        state
            .cpu_usage()
            .percentile(BucketScheme::cpu(), percentile),
    )
}

/// Upstream `percentileMemoryEstimator`: bytes.
#[must_use]
pub fn memory_percentile(state: &AggregateContainerState, percentile: f64) -> i64 {
    memory_amount_from_bytes(
        state
            .memory_peaks()
            .percentile(BucketScheme::memory(), percentile),
    )
}

/// Upstream `GetRecommendedPodResources`'s per-container minimums for a pod
/// of `containers` containers: `ScaleResource(CPUAmountFromCores(min_cpu *
/// 0.001), 1/n)` millicores and `ScaleResource(MemoryAmountFromBytes(min_mb
/// * 1024 * 1024), 1/n)` bytes.
#[must_use]
pub fn pod_minimums(config: &RecommenderConfig, containers: usize) -> (i64, i64) {
    let fraction = 1.0 / containers as f64;
    let cpu = scale_resource(
        cpu_amount_from_cores(config.pod_min_cpu_millicores * 0.001),
        fraction,
    );
    let memory = scale_resource(
        memory_amount_from_bytes(config.pod_min_memory_mb * 1024.0 * 1024.0),
        fraction,
    );
    (cpu, memory)
}

/// Upstream `podResourceRecommender.GetRecommendedPodResources` with the
/// estimators of `CreatePodResourceRecommender`, for the containers of one
/// pod by name. The pod minimums are split evenly over ALL the given
/// containers (upstream divides by the number of container names it
/// recommends for, i.e. after dropping containers whose policy mode is
/// `Off`; pass exactly those). An empty state gets the minimums.
#[must_use]
pub fn recommend_pod(
    config: &RecommenderConfig,
    containers: &BTreeMap<String, &AggregateContainerState>,
) -> BTreeMap<String, ContainerRecommendation> {
    if containers.is_empty() {
        return BTreeMap::new();
    }
    let (min_cpu, min_memory) = pod_minimums(config, containers.len());
    containers
        .iter()
        .map(|(name, state)| {
            let rec = estimate_container(config, state, min_cpu, min_memory);
            (name.clone(), rec)
        })
        .collect()
}

fn estimate_container(
    config: &RecommenderConfig,
    s: &AggregateContainerState,
    min_cpu: i64,
    min_memory: i64,
) -> ContainerRecommendation {
    let margin = config.margin_fraction;
    let cpu_confidence = confidence(s, config.confidence_interval_cpu);
    let memory_confidence = confidence(s, config.confidence_interval_memory);
    let (lower_m, lower_e) = LOWER_BOUND_CONFIDENCE;
    let (upper_m, upper_e) = UPPER_BOUND_CONFIDENCE;

    let cpu = |p: f64| with_margin(cpu_percentile(s, p), margin);
    let memory = |p: f64| with_margin(memory_percentile(s, p), margin);

    let target = Resources::from_amounts(
        cpu(config.target_cpu_percentile).max(min_cpu),
        memory(config.target_memory_percentile).max(min_memory),
    );
    let lower_bound = Resources::from_amounts(
        with_confidence_multiplier(
            cpu(config.lower_bound_cpu_percentile),
            lower_m,
            lower_e,
            cpu_confidence,
        )
        .max(min_cpu),
        with_confidence_multiplier(
            memory(config.lower_bound_memory_percentile),
            lower_m,
            lower_e,
            memory_confidence,
        )
        .max(min_memory),
    );
    let upper_bound = Resources::from_amounts(
        with_confidence_multiplier(
            cpu(config.upper_bound_cpu_percentile),
            upper_m,
            upper_e,
            cpu_confidence,
        )
        .max(min_cpu),
        with_confidence_multiplier(
            memory(config.upper_bound_memory_percentile),
            upper_m,
            upper_e,
            memory_confidence,
        )
        .max(min_memory),
    );
    ContainerRecommendation {
        target,
        lower_bound,
        upper_bound,
        uncapped_target: target,
    }
}
