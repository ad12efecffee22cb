//! One running container's contribution to its aggregates: upstream's
//! `ContainerState` (vertical-pod-autoscaler/pkg/recommender/model/container.go,
//! kubernetes/autoscaler 55c37cd5). It owns what is per pod, not per
//! aggregation key: the last CPU sample (to drop duplicates), and the memory
//! peak of the current aggregation window, which is replaced in the
//! aggregate when a higher usage arrives within the same window.
//!
//! Times are whole milliseconds since the Unix epoch: the metrics API and
//! `metav1.Time` have second precision, and an `i64` keeps the state small
//! (there is one of these per pod container, up to a million).

use super::aggregate::{AggregateContainerState, HistoryConfig};
use k8s_openapi::jiff::Timestamp;
use serde::{Deserialize, Serialize};

/// What a container's samples go into: upstream's `ContainerStateAggregator`
/// (a trait so that upstream's mock-based container tests port as data).
pub trait Aggregator {
    fn add_cpu(&mut self, cores: f64, at: Timestamp);
    fn add_peak(&mut self, bytes: f64, at: Timestamp);
    fn subtract_peak(&mut self, bytes: f64, at: Timestamp);
}

/// The aggregate of the container's scope value.
pub struct Sink<'a> {
    pub config: &'a HistoryConfig,
    pub group: &'a mut AggregateContainerState,
}

impl Aggregator for Sink<'_> {
    fn add_cpu(&mut self, cores: f64, at: Timestamp) {
        // Upstream weighs every CPU sample alike since VPA 1.4 (its
        // `minSampleWeight`), whatever the request.
        self.group.add_cpu_sample(self.config, cores, 0.0, at);
    }

    fn add_peak(&mut self, bytes: f64, at: Timestamp) {
        self.group.add_memory_peak(self.config, bytes, at);
    }

    fn subtract_peak(&mut self, bytes: f64, at: Timestamp) {
        self.group.subtract_memory_peak(self.config, bytes, at);
    }
}

/// How memory peaks are taken and how an OOM kill bumps them (upstream's
/// `--memory-aggregation-interval`, `--oom-bump-up-ratio`,
/// `--oom-min-bump-up-bytes`).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct PeakConfig {
    /// Length of one memory aggregation window, in milliseconds.
    pub interval_ms: i64,
    pub oom_bump_up_ratio: f64,
    pub oom_min_bump_up_bytes: f64,
}

/// Upstream's per-container state, in the form it is checkpointed: a
/// restarted recommender that lost it would open a new window and count the
/// current day's peak twice.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ContainerState {
    /// `LastCPUSampleStart`; 0 before the first sample.
    #[serde(default)]
    pub last_cpu_ms: i64,
    /// `lastMemorySampleStart`; 0 before the first sample.
    #[serde(default)]
    pub last_memory_ms: i64,
    /// `WindowEnd`; 0 before the first memory sample.
    #[serde(default)]
    pub window_end_ms: i64,
    /// The usage peak of the current window, bytes.
    #[serde(default)]
    pub memory_peak: i64,
    /// The OOM-derived peak of the current window, bytes.
    #[serde(default)]
    pub oom_peak: i64,
    /// `finishedAt` of the last OOM kill recorded, so a pod seen again (every
    /// interval offline, every watch event online) is not counted twice.
    #[serde(default)]
    pub last_oom_ms: i64,
}

fn millis(at: Timestamp) -> i64 {
    at.as_millisecond()
}

fn timestamp(ms: i64) -> Option<Timestamp> {
    Timestamp::from_millisecond(ms).ok()
}

impl ContainerState {
    /// `addCPUSample`: drops a sample that is not newer than the last one.
    /// Returns whether it was taken.
    pub fn add_cpu_sample(
        &mut self,
        sinks: &mut impl Aggregator,
        millicores: i64,
        at: Timestamp,
    ) -> bool {
        let ms = millis(at);
        if millicores < 0 || ms <= self.last_cpu_ms {
            return false;
        }
        // CoresFromCPUAmount
        #[allow(clippy::cast_precision_loss)]
        sinks.add_cpu(millicores as f64 / 1000.0, at);
        self.last_cpu_ms = ms;
        true
    }

    /// `GetMaxMemoryPeak`.
    #[must_use]
    pub fn max_memory_peak(&self) -> i64 {
        self.memory_peak.max(self.oom_peak)
    }

    /// `addMemorySample`: the window's peak, replacing the previous peak in
    /// the aggregates when this one is higher. Returns whether it was taken.
    pub fn add_memory_sample(
        &mut self,
        sinks: &mut impl Aggregator,
        peaks: &PeakConfig,
        bytes: i64,
        at: Timestamp,
        is_oom: bool,
    ) -> bool {
        let ms = millis(at);
        if bytes < 0 || (!is_oom && ms < self.last_memory_ms) {
            return false;
        }
        self.last_memory_ms = ms;
        if self.window_end_ms == 0 {
            self.window_end_ms = ms;
        }
        let mut add_new_peak = false;
        if ms < self.window_end_ms {
            let old_max = self.max_memory_peak();
            if old_max != 0 && bytes > old_max {
                if let Some(end) = timestamp(self.window_end_ms) {
                    #[allow(clippy::cast_precision_loss)]
                    sinks.subtract_peak(old_max as f64, end);
                }
                add_new_peak = true;
            }
        } else {
            let interval = peaks.interval_ms.max(1);
            // shift := ts.Sub(WindowEnd).Truncate(interval) + interval
            let shift = (ms - self.window_end_ms) / interval * interval + interval;
            self.window_end_ms += shift;
            self.memory_peak = 0;
            self.oom_peak = 0;
            add_new_peak = true;
        }
        if add_new_peak {
            if let Some(end) = timestamp(self.window_end_ms) {
                #[allow(clippy::cast_precision_loss)]
                sinks.add_peak(bytes as f64, end);
            }
            if is_oom {
                self.oom_peak = bytes;
            } else {
                self.memory_peak = bytes;
            }
        }
        true
    }

    /// [`Self::record_oom`] unless this kill (by its `finishedAt`) was
    /// recorded already: upstream sees each kill once, as a watch update
    /// from running to terminated; nodescope sees the pod's last state every
    /// time it reads the pod.
    pub fn record_oom_once(
        &mut self,
        sinks: &mut impl Aggregator,
        peaks: &PeakConfig,
        finished_at: Timestamp,
        requested_memory: i64,
    ) -> bool {
        let ms = millis(finished_at);
        if ms <= self.last_oom_ms {
            return false;
        }
        self.last_oom_ms = ms;
        self.record_oom(sinks, peaks, finished_at, requested_memory)
    }

    /// `RecordOOM`: an artificial memory sample of
    /// max(used + min bump, used × ratio), where used is the larger of the
    /// memory request and the window's usage peak. An OOM older than one
    /// interval before the last memory sample is dropped (upstream after
    /// kubernetes/autoscaler#8548).
    pub fn record_oom(
        &mut self,
        sinks: &mut impl Aggregator,
        peaks: &PeakConfig,
        finished_at: Timestamp,
        requested_memory: i64,
    ) -> bool {
        let ms = millis(finished_at);
        if self.last_memory_ms != 0 && ms < self.last_memory_ms - peaks.interval_ms {
            return false;
        }
        let used = requested_memory.max(self.memory_peak);
        #[allow(clippy::cast_precision_loss, clippy::cast_possible_truncation)]
        let needed = {
            let bumped = used.saturating_add(amount(peaks.oom_min_bump_up_bytes));
            bumped.max(amount(used as f64 * peaks.oom_bump_up_ratio))
        };
        self.add_memory_sample(sinks, peaks, needed, finished_at, true)
    }
}

/// upstream `resourceAmountFromFloat`: truncates toward zero, clamps at 0
/// and at `MaxResourceAmount` (1e14).
#[must_use]
#[allow(clippy::cast_possible_truncation)]
pub fn amount(value: f64) -> i64 {
    const MAX_RESOURCE_AMOUNT: f64 = 1e14;
    if value.is_nan() || value < 0.0 {
        0
    } else if value > MAX_RESOURCE_AMOUNT {
        MAX_RESOURCE_AMOUNT as i64
    } else {
        value as i64
    }
}

#[cfg(test)]
#[path = "container_tests.rs"]
mod tests;
