//! Property: over random sample streams (values over several orders of
//! magnitude, random weights including sub-epsilon ones, timestamps over
//! about two weeks with out-of-order ones and reference shifts,
//! subtractions, merges), the compact histogram holds exactly the state of
//! a dense port of upstream's (`dense_reference.rs`): the same bucket
//! weights, total, reference and min/max bucket, hence bit-identical
//! percentiles (stronger than the "within one bucket" the issue asks), also
//! after an exact checkpoint round trip through JSON.

use super::dense_reference::Dense;
use super::*;
use k8s_openapi::jiff::Timestamp;
use proptest::prelude::*;
use std::time::Duration;

const PERCENTILES: [f64; 9] = [-0.1, 0.0, 0.1, 0.5, 0.9, 0.95, 0.99, 1.0, 1.1];

#[derive(Debug, Clone)]
enum Op {
    /// Histogram, log10 of the value's fraction of the range, weight,
    /// seconds forward, seconds back (out-of-order sample).
    Add(usize, f64, f64, u32, u32),
    /// Subtract the n-th added sample (mod count).
    Subtract(usize),
    /// Merge histogram j into i.
    Merge(usize, usize),
}

fn op() -> impl Strategy<Value = Op> {
    let weight = prop_oneof![
        Just(0.1),
        Just(1.0),
        0.0..5.0f64,
        0.0..2e-4f64, // around epsilon
        Just(0.0),
    ];
    let back = prop_oneof![4 => Just(0u32), 1 => 0..5 * 86_400u32];
    prop_oneof![
        16 => (0..3usize, -6.0..0.3f64, weight, 0..7200u32, back)
            .prop_map(|(h, v, w, dt, back)| Op::Add(h, v, w, dt, back)),
        3 => any::<usize>().prop_map(Op::Subtract),
        1 => (0..3usize, 0..3usize).prop_map(|(i, j)| Op::Merge(i, j)),
    ]
}

fn assert_same(
    s: &BucketScheme,
    compact: &DecayingHistogram,
    dense: &Dense,
) -> Result<(), TestCaseError> {
    prop_assert_eq!(compact.total_weight().to_bits(), dense.total.to_bits());
    prop_assert_eq!(
        compact.reference_timestamp().as_nanosecond(),
        dense.reference
    );
    prop_assert_eq!(compact.min_max(s), (dense.min, dense.max));
    for (bucket, w) in dense.weights.iter().enumerate() {
        prop_assert_eq!(
            compact.bucket_weight(bucket).to_bits(),
            w.to_bits(),
            "bucket {}",
            bucket
        );
    }
    prop_assert_eq!(compact.is_empty(s), dense.is_empty(s));
    for p in PERCENTILES {
        let (c, d) = (compact.percentile(s, p), dense.percentile(s, p));
        // Within one bucket is what the issue asks; it is exact.
        prop_assert!(s.find_bucket(c).abs_diff(s.find_bucket(d)) <= 1);
        prop_assert_eq!(c.to_bits(), d.to_bits(), "p {}", p);
    }
    Ok(())
}

fn run(s: &BucketScheme, half_life: Duration, ops: &[Op]) -> Result<(), TestCaseError> {
    let top = s.bucket_start(s.num_buckets() - 1);
    let mut compact = vec![DecayingHistogram::new(); 3];
    let mut dense = vec![Dense::new(s); 3];
    let mut added: Vec<(usize, f64, f64, Timestamp)> = Vec::new();
    let mut now: i64 = 1_700_000_000;
    for op in ops {
        match *op {
            Op::Add(h, exp10, w, dt, back) => {
                now += i64::from(dt);
                let t = Timestamp::from_second(now - i64::from(back)).unwrap();
                let v = top * 10f64.powf(exp10);
                compact[h].add_sample(s, half_life, v, w, t);
                dense[h].add(s, half_life, v, w, t);
                added.push((h, v, w, t));
            }
            Op::Subtract(n) if !added.is_empty() => {
                let (h, v, w, t) = added[n % added.len()];
                compact[h].subtract_sample(s, half_life, v, w, t);
                dense[h].subtract(s, half_life, v, w, t);
            }
            Op::Merge(i, j) if i != j => {
                let other = compact[j].clone();
                compact[i].merge(s, half_life, &other);
                let mut dense_other = dense[j].clone();
                dense[i].merge(s, half_life, &mut dense_other);
                // Upstream rescales an older `other` in place; follow it on
                // both sides so the streams stay comparable.
                if dense_other.reference != dense[j].reference {
                    let hl = i64::try_from(half_life.as_nanos()).unwrap();
                    compact[j].shift_reference_for_test(s, hl, dense_other.reference);
                    dense[j] = dense_other;
                }
            }
            _ => {}
        }
    }
    for (c, d) in compact.iter().zip(&dense) {
        assert_same(s, c, d)?;
        let json = serde_json::to_string(&c.to_checkpoint()).unwrap();
        let back: HistogramCheckpoint = serde_json::from_str(&json).unwrap();
        let restored = DecayingHistogram::from_checkpoint(s, &back).unwrap();
        prop_assert_eq!(&restored, c);
        for p in PERCENTILES {
            prop_assert_eq!(
                restored.percentile(s, p).to_bits(),
                c.percentile(s, p).to_bits()
            );
        }
    }
    Ok(())
}

fn half_life() -> impl Strategy<Value = Duration> {
    prop_oneof![
        Just(Duration::from_secs(3600)),
        Just(Duration::from_secs(5400)),
        Just(Duration::from_secs(7 * 3600 + 13)),
        Just(Duration::from_secs(24 * 3600)),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 96, ..ProptestConfig::default() })]

    #[test]
    fn compact_cpu_histogram_matches_dense_upstream(hl in half_life(), ops in prop::collection::vec(op(), 1..400)) {
        run(BucketScheme::cpu(), hl, &ops)?;
    }

    #[test]
    fn compact_memory_histogram_matches_dense_upstream(hl in half_life(), ops in prop::collection::vec(op(), 1..400)) {
        run(BucketScheme::memory(), hl, &ops)?;
    }
}
