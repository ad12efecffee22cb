//! Upstream's own (lossy) checkpoint format, for reading and writing
//! `VerticalPodAutoscalerCheckpoint` status: `histogram.go`
//! `SaveToChekpoint` / `LoadFromCheckpoint`, `decaying_histogram.go` (the
//! reference timestamp) and `aggregate_container_state.go`
//! `SaveToCheckpoint` / `LoadFromCheckpoint` (version "v3").
//!
//! Saving scales the heaviest bucket between the min and max bucket to
//! [`MAX_CHECKPOINT_WEIGHT`], rounds every bucket to an integer
//! (`floor(x + 0.5)`) and drops the zeros; the total weight is kept as is.
//! Loading ADDS `weight * total / sum(weights)` to each bucket and the total
//! to the total, then sets the reference timestamp (without rescaling what
//! was there). This loses precision; [`super::HistogramCheckpoint`] does not.

use super::aggregate::{AggregateContainerState, HistoryConfig};
use super::gomath;
use super::histogram::DecayingHistogram;
use super::scheme::BucketScheme;
use super::HistogramError;
use k8s_openapi::jiff::Timestamp;
use std::collections::BTreeMap;

/// Upstream `MaxCheckpointWeight`.
pub const MAX_CHECKPOINT_WEIGHT: u32 = 10_000;
/// Upstream `SupportedCheckpointVersion`.
pub const SUPPORTED_CHECKPOINT_VERSION: &str = "v3";

/// Upstream `vpa_types.HistogramCheckpoint`.
#[derive(Debug, Clone, PartialEq)]
pub struct VpaHistogramCheckpoint {
    /// `referenceTimestamp`.
    pub reference_timestamp: Timestamp,
    /// `bucketWeights`: bucket index to weight out of 10000.
    pub bucket_weights: BTreeMap<i64, u32>,
    /// `totalWeight`.
    pub total_weight: f64,
}

/// The histogram part of upstream `VerticalPodAutoscalerCheckpointStatus`
/// (`lastUpdateTime` is the writer's business).
#[derive(Debug, Clone, PartialEq)]
pub struct VpaCheckpointStatus {
    /// `version`.
    pub version: String,
    /// `firstSampleStart` (Go's zero time when unset).
    pub first_sample_start: Timestamp,
    /// `lastSampleStart`.
    pub last_sample_start: Timestamp,
    /// `totalSamplesCount`.
    pub total_samples_count: u64,
    /// `memoryHistogram`.
    pub memory_histogram: VpaHistogramCheckpoint,
    /// `cpuHistogram`.
    pub cpu_histogram: VpaHistogramCheckpoint,
}

impl DecayingHistogram {
    /// Upstream `SaveToChekpoint`.
    #[must_use]
    pub fn to_vpa_checkpoint(&self, scheme: &BucketScheme) -> VpaHistogramCheckpoint {
        let (min, max) = self.min_max(scheme);
        let mut max_weight = 0.0;
        for bucket in min..=max {
            if self.weight(bucket) > max_weight {
                max_weight = self.weight(bucket);
            }
        }
        let ratio = f64::from(MAX_CHECKPOINT_WEIGHT) / max_weight;
        let mut bucket_weights = BTreeMap::new();
        for bucket in min..=max {
            // `uint32(round(w * ratio))`; the product is at most 10000.
            let weight = gomath::round_half_up(self.weight(bucket) * ratio) as u32;
            if weight > 0 {
                bucket_weights.insert(bucket as i64, weight);
            }
        }
        VpaHistogramCheckpoint {
            reference_timestamp: self.reference_timestamp(),
            bucket_weights,
            total_weight: self.total_weight(),
        }
    }

    /// Upstream `LoadFromCheckpoint` (decaying): adds the checkpoint's
    /// samples, then takes its reference timestamp.
    ///
    /// # Errors
    /// A negative or non-finite total weight, or a bucket outside the
    /// scheme; nothing is changed then.
    pub fn load_vpa_checkpoint(
        &mut self,
        scheme: &BucketScheme,
        checkpoint: &VpaHistogramCheckpoint,
    ) -> Result<(), HistogramError> {
        let total = checkpoint.total_weight;
        if !(total.is_finite() && total >= 0.0) {
            return Err(HistogramError::InvalidCheckpoint {
                field: "totalWeight".into(),
                reason: format!("cannot load checkpoint with weight {total}"),
            });
        }
        let mut sum: i64 = 0;
        for (&bucket, &weight) in &checkpoint.bucket_weights {
            sum += i64::from(weight);
            if bucket < 0 || bucket >= scheme.num_buckets() as i64 {
                return Err(HistogramError::InvalidCheckpoint {
                    field: format!("bucketWeights[{bucket}]"),
                    reason: format!(
                        "bucket {bucket} is outside the histogram's {} buckets",
                        scheme.num_buckets()
                    ),
                });
            }
        }
        if sum != 0 {
            let ratio = total / sum as f64;
            for (&bucket, &weight) in &checkpoint.bucket_weights {
                self.add_to_bucket(bucket as usize, f64::from(weight) * ratio);
            }
            self.add_to_total(total);
        }
        self.set_reference(gomath::timestamp_nanos(checkpoint.reference_timestamp));
        Ok(())
    }
}

impl AggregateContainerState {
    /// Upstream `SaveToCheckpoint` (without `lastUpdateTime`).
    #[must_use]
    pub fn to_vpa_checkpoint(&self) -> VpaCheckpointStatus {
        let zero = gomath::nanos_timestamp(gomath::GO_ZERO_NANOS);
        VpaCheckpointStatus {
            version: SUPPORTED_CHECKPOINT_VERSION.into(),
            first_sample_start: self.first_sample_start().unwrap_or(zero),
            last_sample_start: self.last_sample_start().unwrap_or(zero),
            total_samples_count: self.total_samples(),
            memory_histogram: self
                .memory_peaks()
                .to_vpa_checkpoint(BucketScheme::memory()),
            cpu_histogram: self.cpu_usage().to_vpa_checkpoint(BucketScheme::cpu()),
        }
    }

    /// Upstream `LoadFromCheckpoint`: the sample count and times are
    /// replaced, the histograms' samples added.
    ///
    /// # Errors
    /// A version other than "v3", or an invalid histogram.
    pub fn load_vpa_checkpoint(
        &mut self,
        _config: &HistoryConfig,
        checkpoint: &VpaCheckpointStatus,
    ) -> Result<(), HistogramError> {
        if checkpoint.version != SUPPORTED_CHECKPOINT_VERSION {
            return Err(HistogramError::InvalidCheckpoint {
                field: "version".into(),
                reason: format!("unsupported checkpoint version {}", checkpoint.version),
            });
        }
        let mut next = self.clone();
        next.set_samples(
            checkpoint.total_samples_count,
            gomath::timestamp_nanos(checkpoint.first_sample_start),
            gomath::timestamp_nanos(checkpoint.last_sample_start),
        );
        next.memory_peaks_mut()
            .load_vpa_checkpoint(BucketScheme::memory(), &checkpoint.memory_histogram)?;
        next.cpu_usage_mut()
            .load_vpa_checkpoint(BucketScheme::cpu(), &checkpoint.cpu_histogram)?;
        *self = next;
        Ok(())
    }
}
