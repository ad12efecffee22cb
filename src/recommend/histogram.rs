//! Upstream's decaying histogram, stored compactly.
//!
//! Rules from `vertical-pod-autoscaler/pkg/recommender/util/histogram.go`
//! (bucket weights, total weight, min/max bucket, percentile, subtract,
//! merge, scale) and `util/decaying_histogram.go` (decay factor, reference
//! timestamp). Upstream keeps a dense `[]float64` of every bucket (176 for
//! CPU and memory) plus its options and half-life per histogram. Here a
//! histogram is 40 bytes plus one `f64` per bucket in the window
//! `[first, first + len)` that holds every non-zero bucket weight; buckets
//! outside the window weigh exactly 0. The weights are the same `f64`s upstream
//! holds, updated by the same operations in the same order, so every
//! percentile is bit-identical to upstream's. The bucket scheme and
//! half-life are passed to each call instead of being stored.
//!
//! Upstream's `minBucket`/`maxBucket` are not stored: upstream keeps them
//! equal to the first/last bucket whose weight is `>= epsilon` (or
//! `numBuckets - 1` / `0` when there is none) through every operation, so
//! they are recomputed from the window.

pub use super::checkpoint::HistogramCheckpoint;
use super::gomath;
pub use super::scheme::BucketScheme;
use super::HistogramError;
use k8s_openapi::jiff::Timestamp;
use std::time::Duration;

/// Upstream `maxDecayExponent`: when a sample is more than this many
/// half-lives after the reference timestamp, the reference moves forward.
pub const MAX_DECAY_EXPONENT: i64 = 100;

/// A histogram whose samples lose half their weight every half-life:
/// upstream `decayingHistogram`. See the module docs for the layout.
#[derive(Clone, Debug, PartialEq)]
pub struct DecayingHistogram {
    /// Weights of buckets `first..first + weights.len()`; no zero at
    /// either end.
    weights: Box<[f64]>,
    total_weight: f64,
    /// The reference timestamp (upstream starts at Go's zero time).
    reference_secs: i64,
    reference_nanos: u32,
    first: u16,
}

impl Default for DecayingHistogram {
    fn default() -> Self {
        Self::new()
    }
}

impl DecayingHistogram {
    /// An empty histogram; its reference timestamp is Go's zero time, as
    /// upstream's `NewDecayingHistogram`.
    #[must_use]
    pub fn new() -> Self {
        DecayingHistogram {
            weights: Box::default(),
            total_weight: 0.0,
            reference_secs: gomath::GO_ZERO_UNIX_SECS,
            reference_nanos: 0,
            first: 0,
        }
    }

    /// Upstream `AddSample`: adds `weight * 2^((time - reference) /
    /// half_life)` to the bucket of `value`, first moving the reference
    /// forward when `time` is more than [`MAX_DECAY_EXPONENT`] half-lives
    /// after it. A NaN or infinite `value`, or a negative, NaN or infinite
    /// `weight`, is ignored (upstream panics).
    pub fn add_sample(
        &mut self,
        scheme: &BucketScheme,
        half_life: Duration,
        value: f64,
        weight: f64,
        time: Timestamp,
    ) {
        let Some(weight) = self.decayed(scheme, half_life, value, weight, time) else {
            return;
        };
        self.add_to_bucket(scheme.find_bucket(value), weight);
        self.total_weight += weight;
    }

    /// Upstream `SubtractSample`: removes a decayed weight from the bucket of
    /// `value` and from the total; either becomes 0 when it would fall
    /// below epsilon. Invalid samples are ignored as in [`Self::add_sample`].
    pub fn subtract_sample(
        &mut self,
        scheme: &BucketScheme,
        half_life: Duration,
        value: f64,
        weight: f64,
        time: Timestamp,
    ) {
        let Some(weight) = self.decayed(scheme, half_life, value, weight, time) else {
            return;
        };
        let epsilon = scheme.epsilon();
        let bucket = scheme.find_bucket(value);
        self.total_weight = safe_subtract(self.total_weight, weight, epsilon);
        if let Some(w) = self.slot(bucket) {
            *w = safe_subtract(*w, weight, epsilon);
        }
        self.trim();
    }

    /// Upstream `decayingHistogram.Merge`: aligns the older reference
    /// timestamp with the younger one, then adds `other`'s buckets from its
    /// min to its max bucket and its total weight. Upstream rescales `other`
    /// in place when `other` is the older one; here `other` is left alone
    /// and a rescaled copy is merged, which gives `self` the same result.
    pub fn merge(&mut self, scheme: &BucketScheme, half_life: Duration, other: &DecayingHistogram) {
        let hl = gomath::duration_nanos(half_life);
        let (mine, theirs) = (self.reference(), other.reference());
        let shifted;
        let other = if mine < theirs {
            self.shift_reference(scheme, hl, theirs);
            other
        } else if theirs < mine {
            let mut copy = other.clone();
            copy.shift_reference(scheme, hl, mine);
            shifted = copy;
            &shifted
        } else {
            other
        };
        if let Some((lo, hi)) = other.nonzero_in_range(scheme) {
            self.ensure_window(lo, hi);
            for bucket in lo..=hi {
                let i = bucket - usize::from(self.first);
                self.weights[i] += other.weight(bucket);
            }
        }
        self.total_weight += other.total_weight;
    }

    /// Upstream `Percentile`: 0 for an empty histogram; otherwise walks from
    /// the min bucket, adding weights until the partial sum reaches
    /// `percentile * total_weight` (never past the max bucket), and returns
    /// the END of that bucket (the start of the next one), or the start of
    /// the last bucket when it is the last one.
    #[must_use]
    pub fn percentile(&self, scheme: &BucketScheme, percentile: f64) -> f64 {
        if self.is_empty(scheme) {
            return 0.0;
        }
        let (min, max) = self.min_max(scheme);
        let threshold = percentile * self.total_weight;
        let mut partial = 0.0;
        let mut bucket = min;
        while bucket < max {
            partial += self.weight(bucket);
            if partial >= threshold {
                break;
            }
            bucket += 1;
        }
        if bucket < scheme.num_buckets() - 1 {
            scheme.bucket_start(bucket + 1)
        } else {
            scheme.bucket_start(bucket)
        }
    }

    /// Upstream `IsEmpty`: no bucket weighs epsilon or more.
    #[must_use]
    pub fn is_empty(&self, scheme: &BucketScheme) -> bool {
        let (min, _) = self.min_max(scheme);
        self.weight(min) < scheme.epsilon()
    }

    /// Heap bytes owned (the weight window).
    #[must_use]
    pub fn heap_bytes(&self) -> usize {
        std::mem::size_of_val::<[f64]>(&self.weights)
    }

    /// The weight of one bucket (0 outside the window).
    #[must_use]
    pub fn bucket_weight(&self, bucket: usize) -> f64 {
        self.weight(bucket)
    }

    /// Upstream `totalWeight`: the sum of all decayed sample weights (kept
    /// apart from the buckets, as upstream does).
    #[must_use]
    pub fn total_weight(&self) -> f64 {
        self.total_weight
    }

    /// Upstream `referenceTimestamp`.
    #[must_use]
    pub fn reference_timestamp(&self) -> Timestamp {
        gomath::nanos_timestamp(self.reference())
    }

    /// The exact state, for [`Self::from_checkpoint`].
    #[must_use]
    pub fn to_checkpoint(&self) -> HistogramCheckpoint {
        HistogramCheckpoint {
            reference: self.reference_timestamp(),
            total_weight: self.total_weight,
            first_bucket: u32::from(self.first),
            weights: self.weights.to_vec(),
        }
    }

    /// Restores [`Self::to_checkpoint`] exactly (the same weights, so the
    /// same percentiles bit for bit).
    ///
    /// # Errors
    /// When the window leaves the scheme's buckets, or the total or a weight
    /// is negative, NaN or infinite; the error names the field.
    pub fn from_checkpoint(
        scheme: &BucketScheme,
        checkpoint: &HistogramCheckpoint,
    ) -> Result<Self, HistogramError> {
        let bad =
            |field: String, reason: String| HistogramError::InvalidCheckpoint { field, reason };
        if !valid_weight(checkpoint.total_weight) {
            return Err(bad(
                "total".into(),
                format!("weight {} is not finite and >= 0", checkpoint.total_weight),
            ));
        }
        for (i, w) in checkpoint.weights.iter().enumerate() {
            if !valid_weight(*w) {
                return Err(bad(
                    format!("w[{i}]"),
                    format!("weight {w} is not finite and >= 0"),
                ));
            }
        }
        let first = checkpoint.first_bucket as usize;
        let end = first.saturating_add(checkpoint.weights.len());
        if !checkpoint.weights.is_empty() && end > scheme.num_buckets() {
            return Err(bad(
                "lo".into(),
                format!(
                    "buckets {first}..{end} exceed the scheme's {} buckets",
                    scheme.num_buckets()
                ),
            ));
        }
        let (reference_secs, reference_nanos) =
            gomath::split_nanos(gomath::timestamp_nanos(checkpoint.reference));
        let mut h = DecayingHistogram {
            weights: checkpoint.weights.clone().into_boxed_slice(),
            total_weight: checkpoint.total_weight,
            reference_secs,
            reference_nanos,
            first: u16::try_from(first).unwrap_or(0),
        };
        h.trim();
        Ok(h)
    }

    pub(super) fn reference(&self) -> i128 {
        gomath::join_nanos(self.reference_secs, self.reference_nanos)
    }

    pub(super) fn set_reference(&mut self, reference: i128) {
        (self.reference_secs, self.reference_nanos) = gomath::split_nanos(reference);
    }

    /// Adds to one bucket's weight and to the total, as upstream's
    /// `LoadFromCheckpoint` does.
    pub(super) fn add_to_bucket(&mut self, bucket: usize, weight: f64) {
        if weight != 0.0 {
            self.ensure_window(bucket, bucket);
            let i = bucket - usize::from(self.first);
            self.weights[i] += weight;
        }
    }

    pub(super) fn add_to_total(&mut self, weight: f64) {
        self.total_weight += weight;
    }

    pub(super) fn weight(&self, bucket: usize) -> f64 {
        bucket
            .checked_sub(usize::from(self.first))
            .and_then(|i| self.weights.get(i))
            .copied()
            .unwrap_or(0.0)
    }

    fn slot(&mut self, bucket: usize) -> Option<&mut f64> {
        let i = bucket.checked_sub(usize::from(self.first))?;
        self.weights.get_mut(i)
    }

    /// Upstream `minBucket`/`maxBucket` (see the module docs).
    pub(super) fn min_max(&self, scheme: &BucketScheme) -> (usize, usize) {
        let epsilon = scheme.epsilon();
        let first = usize::from(self.first);
        let heavy = |w: &f64| *w >= epsilon;
        let min = self.weights.iter().position(heavy);
        let max = self.weights.iter().rposition(heavy);
        match (min, max) {
            (Some(min), Some(max)) => (first + min, first + max),
            _ => (scheme.num_buckets() - 1, 0),
        }
    }

    /// The first and last bucket in `[min, max]` with a non-zero weight.
    fn nonzero_in_range(&self, scheme: &BucketScheme) -> Option<(usize, usize)> {
        let (min, max) = self.min_max(scheme);
        let lo = (min..=max).find(|b| self.weight(*b) != 0.0)?;
        let hi = (lo..=max).rev().find(|b| self.weight(*b) != 0.0)?;
        Some((lo, hi))
    }

    #[cfg(test)]
    pub(super) fn shift_reference_for_test(&mut self, scheme: &BucketScheme, hl: i64, r: i128) {
        self.shift_reference(scheme, hl, r);
    }

    /// `weight` decayed to `time` (upstream's `AddSample`/`SubtractSample`
    /// prelude), or `None` for a sample upstream would panic on, or a
    /// weight made non-finite by an absurd half-life (0 × inf).
    fn decayed(
        &mut self,
        scheme: &BucketScheme,
        half_life: Duration,
        value: f64,
        weight: f64,
        time: Timestamp,
    ) -> Option<f64> {
        if !valid_sample(value, weight) {
            return None;
        }
        let weight = weight * self.decay_factor(scheme, half_life, time);
        valid_weight(weight).then_some(weight)
    }

    /// Upstream `decayFactor`.
    fn decay_factor(&mut self, scheme: &BucketScheme, half_life: Duration, time: Timestamp) -> f64 {
        let hl = gomath::duration_nanos(half_life);
        let time = gomath::timestamp_nanos(time);
        // `time.Duration(int64(halfLife) * int64(maxDecayExponent))` wraps.
        let max_allowed = self.reference() + i128::from(hl.wrapping_mul(MAX_DECAY_EXPONENT));
        if time > max_allowed {
            self.shift_reference(scheme, hl, time);
        }
        gomath::exp2(gomath::time_sub(time, self.reference()) as f64 / hl as f64)
    }

    /// Upstream `shiftReferenceTimestamp`: the new reference is rounded to a
    /// multiple of the half-life (since Go's zero time) and every weight is
    /// scaled by `2^round((old - new) / half_life)`.
    fn shift_reference(&mut self, scheme: &BucketScheme, hl: i64, new_reference: i128) {
        let new_reference = gomath::time_round(new_reference, hl);
        let exponent = gomath::round_half_up(
            gomath::time_sub(self.reference(), new_reference) as f64 / hl as f64,
        );
        self.scale(scheme, gomath::ldexp(1.0, exponent));
        self.set_reference(new_reference);
    }

    /// Upstream `histogram.scale`: multiplies the buckets from min to max
    /// bucket (not the sub-epsilon ones outside) and the total.
    fn scale(&mut self, scheme: &BucketScheme, factor: f64) {
        let (min, max) = self.min_max(scheme);
        for bucket in min..=max {
            if let Some(w) = self.slot(bucket) {
                *w *= factor;
            }
        }
        self.total_weight *= factor;
        self.trim();
    }

    /// Grows the window to cover `lo..=hi`.
    fn ensure_window(&mut self, lo: usize, hi: usize) {
        let first = usize::from(self.first);
        let (new_lo, new_hi) = if self.weights.is_empty() {
            (lo, hi)
        } else {
            (lo.min(first), hi.max(first + self.weights.len() - 1))
        };
        if new_lo == first && new_hi + 1 == first + self.weights.len() {
            return;
        }
        let mut grown = vec![0.0; new_hi - new_lo + 1];
        if !self.weights.is_empty() {
            let at = first - new_lo;
            grown[at..at + self.weights.len()].copy_from_slice(&self.weights);
        }
        self.weights = grown.into_boxed_slice();
        // Bucket indexes are below `MAX_BUCKETS` (= 2^16).
        self.first = u16::try_from(new_lo).unwrap_or(u16::MAX);
    }

    /// Drops zero weights at both ends of the window.
    fn trim(&mut self) {
        let Some(lo) = self.weights.iter().position(|w| *w != 0.0) else {
            self.weights = Box::default();
            self.first = 0;
            return;
        };
        let hi = self.weights.iter().rposition(|w| *w != 0.0).unwrap_or(lo);
        if lo == 0 && hi + 1 == self.weights.len() {
            return;
        }
        self.weights = self.weights[lo..=hi].into();
        self.first += u16::try_from(lo).unwrap_or(0);
    }
}

/// `histogram.go` `safeSubtract`.
fn safe_subtract(value: f64, sub: f64, epsilon: f64) -> f64 {
    let value = value - sub;
    if value < epsilon {
        0.0
    } else {
        value
    }
}

fn valid_weight(w: f64) -> bool {
    w.is_finite() && w >= 0.0
}

fn valid_sample(value: f64, weight: f64) -> bool {
    value.is_finite() && valid_weight(weight)
}
