//! Bucket boundaries: upstream's `HistogramOptions`
//! (`vertical-pod-autoscaler/pkg/recommender/util/histogram_options.go`).

use super::gomath;
use super::HistogramError;
use std::sync::OnceLock;

/// Upstream `minSampleWeight` (`pkg/recommender/model/aggregations_config.go`).
pub const MIN_SAMPLE_WEIGHT: f64 = 0.1;
/// Upstream `epsilon = 0.001 * minSampleWeight`: the minimal weight of a
/// non-empty bucket (`pkg/recommender/model/aggregations_config.go`).
pub const EPSILON: f64 = 0.001 * MIN_SAMPLE_WEIGHT;
/// Upstream `DefaultHistogramBucketSizeGrowth`: each bucket 5% larger than
/// the previous one (not a flag upstream).
pub const BUCKET_SIZE_GROWTH: f64 = 0.05;

/// Most buckets a scheme may have: a bucket index is stored in a `u16`.
pub const MAX_BUCKETS: usize = 1 << 16;

#[derive(Debug, Clone, Copy, PartialEq)]
enum Kind {
    Linear { bucket_size: f64 },
    Exponential { first_bucket_size: f64, ratio: f64 },
}

/// How values map to buckets: upstream's `HistogramOptions`.
#[derive(Debug, Clone, PartialEq)]
pub struct BucketScheme {
    kind: Kind,
    num_buckets: usize,
    epsilon: f64,
}

impl BucketScheme {
    /// Upstream `NewExponentialHistogramOptions`: the first bucket covers
    /// `[0, first_bucket_size)`, bucket `n` is `first_bucket_size * ratio^n`
    /// wide, and the last bucket starts at or above `max_value`.
    ///
    /// # Errors
    /// Unless `max_value`, `first_bucket_size` and `epsilon` are finite and
    /// `> 0`, `ratio` finite and `> 1`, and there are at most [`MAX_BUCKETS`].
    pub fn exponential(
        max_value: f64,
        first_bucket_size: f64,
        ratio: f64,
        epsilon: f64,
    ) -> Result<Self, HistogramError> {
        let positive = |v: f64| v.is_finite() && v > 0.0;
        let valid = positive(max_value)
            && positive(first_bucket_size)
            && positive(epsilon)
            && ratio.is_finite()
            && ratio > 1.0;
        if !valid {
            return Err(HistogramError::InvalidScheme(
                "max_value, first_bucket_size and epsilon must be > 0.0, ratio must be > 1.0"
                    .into(),
            ));
        }
        let buckets = log_base(ratio, max_value * (ratio - 1.0) / first_bucket_size + 1.0).ceil();
        Self::checked(
            Kind::Exponential {
                first_bucket_size,
                ratio,
            },
            buckets,
            epsilon,
        )
    }

    /// Upstream `NewLinearHistogramOptions`: buckets of `bucket_size`
    /// starting at 0, the last one starting at or above `max_value`.
    ///
    /// # Errors
    /// Unless all three are finite and `> 0` and there are at most
    /// [`MAX_BUCKETS`].
    pub fn linear(max_value: f64, bucket_size: f64, epsilon: f64) -> Result<Self, HistogramError> {
        let positive = |v: f64| v.is_finite() && v > 0.0;
        if !(positive(max_value) && positive(bucket_size) && positive(epsilon)) {
            return Err(HistogramError::InvalidScheme(
                "max_value and bucket_size must both be positive".into(),
            ));
        }
        Self::checked(
            Kind::Linear { bucket_size },
            (max_value / bucket_size).ceil(),
            epsilon,
        )
    }

    fn checked(kind: Kind, buckets: f64, epsilon: f64) -> Result<Self, HistogramError> {
        // `int(math.Ceil(..)) + 1`.
        if !(buckets.is_finite() && buckets >= 0.0 && buckets < MAX_BUCKETS as f64) {
            return Err(HistogramError::InvalidScheme(format!(
                "the scheme needs {buckets} + 1 buckets, more than {MAX_BUCKETS}"
            )));
        }
        Ok(BucketScheme {
            kind,
            num_buckets: buckets as usize + 1,
            epsilon,
        })
    }

    /// Upstream CPU options (`aggregations_config.go` `cpuHistogramOptions`):
    /// max 1000 cores, first bucket 0.01 cores, ratio 1.05, epsilon 1e-4;
    /// 176 buckets.
    pub fn cpu() -> &'static BucketScheme {
        static CPU: OnceLock<BucketScheme> = OnceLock::new();
        CPU.get_or_init(|| {
            Self::exponential(1000.0, 0.01, 1.0 + BUCKET_SIZE_GROWTH, EPSILON)
                .unwrap_or_else(|_| unreachable!("constant CPU scheme is valid"))
        })
    }

    /// Upstream memory options (`memoryHistogramOptions`): max 1e12 bytes,
    /// first bucket 1e7 bytes, ratio 1.05, epsilon 1e-4; 176 buckets.
    pub fn memory() -> &'static BucketScheme {
        static MEMORY: OnceLock<BucketScheme> = OnceLock::new();
        MEMORY.get_or_init(|| {
            Self::exponential(1e12, 1e7, 1.0 + BUCKET_SIZE_GROWTH, EPSILON)
                .unwrap_or_else(|_| unreachable!("constant memory scheme is valid"))
        })
    }

    /// Upstream `NumBuckets`.
    #[must_use]
    pub fn num_buckets(&self) -> usize {
        self.num_buckets
    }

    /// Upstream `FindBucket`: the bucket of `value`, the first or last
    /// bucket for values outside the range. NaN maps to bucket 0, +inf to
    /// the last bucket (upstream panics on both).
    #[must_use]
    pub fn find_bucket(&self, value: f64) -> usize {
        let last = self.num_buckets - 1;
        let bucket = match self.kind {
            Kind::Linear { bucket_size } => (value / bucket_size) as i64,
            Kind::Exponential {
                first_bucket_size,
                ratio,
            } => {
                if value < first_bucket_size {
                    return 0;
                }
                log_base(ratio, value * (ratio - 1.0) / first_bucket_size + 1.0) as i64
            }
        };
        if bucket < 0 {
            0
        } else {
            (bucket as u64).min(last as u64) as usize
        }
    }

    /// Upstream `GetBucketStart`. Indexes past the last bucket give the
    /// last bucket's start (upstream panics).
    #[must_use]
    pub fn bucket_start(&self, bucket: usize) -> f64 {
        let bucket = bucket.min(self.num_buckets - 1);
        match self.kind {
            Kind::Linear { bucket_size } => bucket as f64 * bucket_size,
            Kind::Exponential {
                first_bucket_size,
                ratio,
            } => {
                if bucket == 0 {
                    return 0.0;
                }
                first_bucket_size * (gomath::pow(ratio, bucket as f64) - 1.0) / (ratio - 1.0)
            }
        }
    }

    /// Upstream `Epsilon`: a bucket with less weight counts as empty.
    #[must_use]
    pub fn epsilon(&self) -> f64 {
        self.epsilon
    }
}

/// `histogram_options.go` `log(base, x)`.
fn log_base(base: f64, x: f64) -> f64 {
    gomath::log(x) / gomath::log(base)
}
