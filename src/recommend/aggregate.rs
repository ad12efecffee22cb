//! Upstream `AggregateContainerState`
//! (`vertical-pod-autoscaler/pkg/recommender/model/aggregate_container_state.go`):
//! the CPU usage histogram, the memory peaks histogram, the first/last CPU
//! sample start and the CPU sample count, in 112 bytes plus the two weight
//! windows.

use super::checkpoint::{rfc3339_option, HistogramCheckpoint};
use super::gomath;
use super::histogram::DecayingHistogram;
use super::scheme::{BucketScheme, MIN_SAMPLE_WEIGHT};
use super::HistogramError;
use k8s_openapi::jiff::Timestamp;
use serde::{Deserialize, Serialize};
use std::time::Duration;

/// Upstream `DefaultCPUHistogramDecayHalfLife` / `DefaultMemoryHistogramDecayHalfLife`
/// (`model/aggregations_config.go`): the defaults of
/// `--cpu-histogram-decay-half-life` and `--memory-histogram-decay-half-life`.
pub const DEFAULT_HALF_LIFE: Duration = Duration::from_secs(24 * 3600);

/// How samples decay.
#[derive(Debug, Clone, PartialEq)]
pub struct HistoryConfig {
    /// `--cpu-histogram-decay-half-life` (default 24h).
    pub cpu_half_life: Duration,
    /// `--memory-histogram-decay-half-life` (default 24h).
    pub memory_half_life: Duration,
    /// Weigh CPU samples by `max(request, 0.1)` as upstream did before VPA
    /// 1.4.0. Off by default: since 1.4.0 (commit "Remove obsolete comment
    /// and a few lines of code from addCPUSample") every CPU sample weighs
    /// `minSampleWeight` = 0.1 whatever the request.
    pub cpu_weight_from_request: bool,
}

impl Default for HistoryConfig {
    fn default() -> Self {
        HistoryConfig {
            cpu_half_life: DEFAULT_HALF_LIFE,
            memory_half_life: DEFAULT_HALF_LIFE,
            cpu_weight_from_request: false,
        }
    }
}

/// The aggregated history of one key. `Default` is empty.
#[derive(Clone, Debug, PartialEq)]
pub struct AggregateContainerState {
    cpu: DecayingHistogram,
    memory: DecayingHistogram,
    // First/last CPU sample start, Go's zero time when unset.
    first_secs: i64,
    last_secs: i64,
    total_samples: u64,
    first_nanos: u32,
    last_nanos: u32,
}

impl Default for AggregateContainerState {
    fn default() -> Self {
        AggregateContainerState {
            cpu: DecayingHistogram::new(),
            memory: DecayingHistogram::new(),
            first_secs: gomath::GO_ZERO_UNIX_SECS,
            last_secs: gomath::GO_ZERO_UNIX_SECS,
            total_samples: 0,
            first_nanos: 0,
            last_nanos: 0,
        }
    }
}

/// The exact checkpoint of an [`AggregateContainerState`]:
/// `{"cpu":{..},"memory":{..},"first":"RFC 3339"|null,"last":..,"samples":N}`
/// with the histograms as [`HistogramCheckpoint`].
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct AggregateCheckpoint {
    /// The CPU usage histogram.
    pub cpu: HistogramCheckpoint,
    /// The memory peaks histogram.
    pub memory: HistogramCheckpoint,
    /// The first CPU sample start.
    #[serde(with = "rfc3339_option")]
    pub first: Option<Timestamp>,
    /// The last CPU sample start.
    #[serde(with = "rfc3339_option")]
    pub last: Option<Timestamp>,
    /// The number of CPU samples.
    pub samples: u64,
}

impl AggregateContainerState {
    /// Upstream `addCPUSample`: adds `usage_cores` (pass millicores / 1000.0,
    /// as upstream's `CoresFromCPUAmount`) with weight `minSampleWeight`
    /// (0.1), or `max(request_cores, 0.1)` with
    /// [`HistoryConfig::cpu_weight_from_request`]; then updates the first and
    /// last sample start and the count. A NaN or infinite usage (or weight) is
    /// ignored entirely (upstream panics).
    pub fn add_cpu_sample(
        &mut self,
        config: &HistoryConfig,
        usage_cores: f64,
        request_cores: f64,
        time: Timestamp,
    ) {
        let weight = if config.cpu_weight_from_request {
            gomath::max(request_cores, MIN_SAMPLE_WEIGHT)
        } else {
            MIN_SAMPLE_WEIGHT
        };
        if !usage_cores.is_finite() || !weight.is_finite() {
            return;
        }
        self.cpu.add_sample(
            BucketScheme::cpu(),
            config.cpu_half_life,
            usage_cores,
            weight,
            time,
        );
        // Compared as (seconds, nanoseconds): the same order as the i128
        // nanoseconds, without an i128 division per sample.
        let t = gomath::split_timestamp(time);
        if t > (self.last_secs, self.last_nanos) {
            (self.last_secs, self.last_nanos) = t;
        }
        let unset = (self.first_secs, self.first_nanos) == (gomath::GO_ZERO_UNIX_SECS, 0);
        if unset || t < (self.first_secs, self.first_nanos) {
            (self.first_secs, self.first_nanos) = t;
        }
        self.total_samples += 1;
    }

    /// Upstream `AddSample` for memory: one peak (pass whole bytes, as
    /// upstream's `BytesFromMemoryAmount`) with weight 1.0 at `time` (the
    /// end of the peak's aggregation window, chosen by the caller).
    pub fn add_memory_peak(&mut self, config: &HistoryConfig, peak_bytes: f64, time: Timestamp) {
        self.memory.add_sample(
            BucketScheme::memory(),
            config.memory_half_life,
            peak_bytes,
            1.0,
            time,
        );
    }

    /// Upstream `SubtractSample` (memory only, as upstream): removes a peak
    /// added before with the same value and time.
    pub fn subtract_memory_peak(
        &mut self,
        config: &HistoryConfig,
        peak_bytes: f64,
        time: Timestamp,
    ) {
        self.memory.subtract_sample(
            BucketScheme::memory(),
            config.memory_half_life,
            peak_bytes,
            1.0,
            time,
        );
    }

    /// Upstream `MergeContainerState`: merges both histograms (see
    /// [`DecayingHistogram::merge`]), keeps the earlier first and the later
    /// last sample start, and adds the counts.
    pub fn merge(&mut self, config: &HistoryConfig, other: &Self) {
        self.cpu
            .merge(BucketScheme::cpu(), config.cpu_half_life, &other.cpu);
        self.memory.merge(
            BucketScheme::memory(),
            config.memory_half_life,
            &other.memory,
        );
        let zero = gomath::GO_ZERO_NANOS;
        if self.first() == zero || (other.first() != zero && other.first() < self.first()) {
            (self.first_secs, self.first_nanos) = (other.first_secs, other.first_nanos);
        }
        if other.last() > self.last() {
            (self.last_secs, self.last_nanos) = (other.last_secs, other.last_nanos);
        }
        self.total_samples = self.total_samples.wrapping_add(other.total_samples);
    }

    /// Upstream `TotalSamplesCount`: CPU samples only.
    #[must_use]
    pub fn total_samples(&self) -> u64 {
        self.total_samples
    }

    /// Upstream `FirstSampleStart` (CPU samples only); `None` while unset.
    #[must_use]
    pub fn first_sample_start(&self) -> Option<Timestamp> {
        Self::set_time(self.first())
    }

    /// Upstream `LastSampleStart` (CPU samples only); `None` while unset.
    #[must_use]
    pub fn last_sample_start(&self) -> Option<Timestamp> {
        Self::set_time(self.last())
    }

    /// Upstream `isEmpty`: no CPU sample was added (memory peaks do not
    /// count, as upstream).
    #[must_use]
    pub fn is_empty(&self) -> bool {
        self.total_samples == 0
    }

    /// Upstream `AggregateCPUUsage`.
    #[must_use]
    pub fn cpu_usage(&self) -> &DecayingHistogram {
        &self.cpu
    }

    /// Upstream `AggregateMemoryPeaks`.
    #[must_use]
    pub fn memory_peaks(&self) -> &DecayingHistogram {
        &self.memory
    }

    pub(super) fn cpu_usage_mut(&mut self) -> &mut DecayingHistogram {
        &mut self.cpu
    }

    pub(super) fn memory_peaks_mut(&mut self) -> &mut DecayingHistogram {
        &mut self.memory
    }

    /// Heap bytes owned (both weight windows); add
    /// `size_of::<AggregateContainerState>()` (112) for the whole.
    #[must_use]
    pub fn heap_bytes(&self) -> usize {
        self.cpu.heap_bytes() + self.memory.heap_bytes()
    }

    /// The exact state, for [`Self::from_checkpoint`].
    #[must_use]
    pub fn to_checkpoint(&self) -> AggregateCheckpoint {
        AggregateCheckpoint {
            cpu: self.cpu.to_checkpoint(),
            memory: self.memory.to_checkpoint(),
            first: self.first_sample_start(),
            last: self.last_sample_start(),
            samples: self.total_samples,
        }
    }

    /// Restores [`Self::to_checkpoint`] exactly.
    ///
    /// # Errors
    /// An invalid histogram; the error names `cpu.<field>` or `memory.<field>`.
    pub fn from_checkpoint(
        _config: &HistoryConfig,
        c: &AggregateCheckpoint,
    ) -> Result<Self, HistogramError> {
        let within = |part: &str, e: HistogramError| match e {
            HistogramError::InvalidCheckpoint { field, reason } => {
                HistogramError::InvalidCheckpoint {
                    field: format!("{part}.{field}"),
                    reason,
                }
            }
            other => other,
        };
        let cpu = DecayingHistogram::from_checkpoint(BucketScheme::cpu(), &c.cpu)
            .map_err(|e| within("cpu", e))?;
        let memory = DecayingHistogram::from_checkpoint(BucketScheme::memory(), &c.memory)
            .map_err(|e| within("memory", e))?;
        let mut state = AggregateContainerState {
            cpu,
            memory,
            ..Self::default()
        };
        let nanos = |t: Option<Timestamp>| t.map_or(gomath::GO_ZERO_NANOS, gomath::timestamp_nanos);
        state.set_samples(c.samples, nanos(c.first), nanos(c.last));
        Ok(state)
    }

    pub(super) fn set_samples(&mut self, total: u64, first: i128, last: i128) {
        self.total_samples = total;
        (self.first_secs, self.first_nanos) = gomath::split_nanos(first);
        (self.last_secs, self.last_nanos) = gomath::split_nanos(last);
    }

    /// First sample start in nanoseconds since the Unix epoch.
    pub(super) fn first(&self) -> i128 {
        gomath::join_nanos(self.first_secs, self.first_nanos)
    }

    /// Last sample start in nanoseconds since the Unix epoch.
    pub(super) fn last(&self) -> i128 {
        gomath::join_nanos(self.last_secs, self.last_nanos)
    }

    fn set_time(t: i128) -> Option<Timestamp> {
        (t != gomath::GO_ZERO_NANOS).then(|| gomath::nanos_timestamp(t))
    }
}
