//! Test only: a straightforward dense port of upstream's `histogram.go` +
//! `decaying_histogram.go` (one `f64` per bucket, explicit min/max bucket,
//! the reference timestamp), to check the compact histogram against.

use super::gomath;
use super::scheme::BucketScheme;
use k8s_openapi::jiff::Timestamp;
use std::time::Duration;

#[derive(Clone, Debug)]
pub struct Dense {
    pub weights: Vec<f64>,
    pub total: f64,
    pub min: usize,
    pub max: usize,
    pub reference: i128,
}

impl Dense {
    pub fn new(s: &BucketScheme) -> Self {
        Dense {
            weights: vec![0.0; s.num_buckets()],
            total: 0.0,
            min: s.num_buckets() - 1,
            max: 0,
            reference: gomath::GO_ZERO_NANOS,
        }
    }

    fn plain_add(&mut self, s: &BucketScheme, value: f64, weight: f64) {
        let b = s.find_bucket(value);
        self.weights[b] += weight;
        self.total += weight;
        if b < self.min && self.weights[b] >= s.epsilon() {
            self.min = b;
        }
        if b > self.max && self.weights[b] >= s.epsilon() {
            self.max = b;
        }
    }

    fn update_min_max(&mut self, s: &BucketScheme) {
        let last = s.num_buckets() - 1;
        while self.weights[self.min] < s.epsilon() && self.min < last {
            self.min += 1;
        }
        while self.weights[self.max] < s.epsilon() && self.max > 0 {
            self.max -= 1;
        }
    }

    fn scale(&mut self, s: &BucketScheme, factor: f64) {
        let mut b = self.min;
        while b <= self.max {
            self.weights[b] *= factor;
            b += 1;
        }
        self.total *= factor;
        self.update_min_max(s);
    }

    pub fn shift(&mut self, s: &BucketScheme, hl: i64, new_ref: i128) {
        let new_ref = gomath::time_round(new_ref, hl);
        let exp =
            gomath::round_half_up(gomath::time_sub(self.reference, new_ref) as f64 / hl as f64);
        self.scale(s, gomath::ldexp(1.0, exp));
        self.reference = new_ref;
    }

    fn decay(&mut self, s: &BucketScheme, hl: i64, t: i128) -> f64 {
        let max_allowed = self.reference + i128::from(hl.wrapping_mul(100));
        if t > max_allowed {
            self.shift(s, hl, t);
        }
        gomath::exp2(gomath::time_sub(t, self.reference) as f64 / hl as f64)
    }

    pub fn add(&mut self, s: &BucketScheme, hl: Duration, v: f64, w: f64, t: Timestamp) {
        let f = self.decay(s, gomath::duration_nanos(hl), t.as_nanosecond());
        self.plain_add(s, v, w * f);
    }

    pub fn subtract(&mut self, s: &BucketScheme, hl: Duration, v: f64, w: f64, t: Timestamp) {
        let w = w * self.decay(s, gomath::duration_nanos(hl), t.as_nanosecond());
        let b = s.find_bucket(v);
        let eps = s.epsilon();
        let safe = |x: f64| if x - w < eps { 0.0 } else { x - w };
        self.total = safe(self.total);
        self.weights[b] = safe(self.weights[b]);
        self.update_min_max(s);
    }

    /// Upstream Merge, including its rescaling of `other` when older.
    pub fn merge(&mut self, s: &BucketScheme, hl: Duration, other: &mut Dense) {
        let hl = gomath::duration_nanos(hl);
        if self.reference < other.reference {
            self.shift(s, hl, other.reference);
        } else if other.reference < self.reference {
            other.shift(s, hl, self.reference);
        }
        let mut b = other.min;
        while b <= other.max {
            self.weights[b] += other.weights[b];
            b += 1;
        }
        self.total += other.total;
        self.min = self.min.min(other.min);
        self.max = self.max.max(other.max);
    }

    pub fn is_empty(&self, s: &BucketScheme) -> bool {
        self.weights[self.min] < s.epsilon()
    }

    pub fn percentile(&self, s: &BucketScheme, p: f64) -> f64 {
        if self.is_empty(s) {
            return 0.0;
        }
        let threshold = p * self.total;
        let mut partial = 0.0;
        let mut b = self.min;
        while b < self.max {
            partial += self.weights[b];
            if partial >= threshold {
                break;
            }
            b += 1;
        }
        if b < s.num_buckets() - 1 {
            s.bucket_start(b + 1)
        } else {
            s.bucket_start(b)
        }
    }
}
