//! Upstream's `histogram_options_test.go`, `histogram_test.go` and
//! `decaying_histogram_test.go` (pkg/recommender/util, VPA 1.7.1) as data,
//! plus the exact checkpoint and the per-key memory.
//!
//! `histogram_test.go` tests the plain (non-decaying) histogram; here the
//! same cases run on the decaying one with every sample at Go's zero time,
//! the initial reference timestamp, where the decay factor is exactly 1.

use super::*;
use k8s_openapi::jiff::Timestamp;
use std::time::Duration;

const HOUR: Duration = Duration::from_secs(3600);
/// histogram_test.go `weightEpsilon` / `valueEpsilon`.
const WEIGHT_EPSILON: f64 = 1e-15;

fn go_zero() -> Timestamp {
    "0001-01-01T00:00:00Z".parse().unwrap()
}

/// decaying_histogram_test.go `startTime = time.Unix(1234567890, 0)`.
fn start() -> Timestamp {
    Timestamp::from_second(1_234_567_890).unwrap()
}

fn hours(t: Timestamp, h: i64) -> Timestamp {
    Timestamp::from_second(t.as_second() + h * 3600).unwrap()
}

/// histogram_test.go `testHistogramOptions`: linear, max 10, size 1.
fn test_options() -> BucketScheme {
    BucketScheme::linear(10.0, 1.0, WEIGHT_EPSILON).unwrap()
}

/// Upstream `Equals` (histogram.go / decaying_histogram.go): the same
/// reference timestamp and min/max bucket, bucket weights within 1e-15 (the
/// total weight is not compared).
fn upstream_equals(s: &BucketScheme, a: &DecayingHistogram, b: &DecayingHistogram) -> bool {
    let (min, max) = a.min_max(s);
    a.reference_timestamp() == b.reference_timestamp()
        && (min, max) == b.min_max(s)
        && (min..=max).all(|k| (a.bucket_weight(k) - b.bucket_weight(k)).abs() <= 1e-15)
}

/// A plain histogram: samples at Go's zero time, no decay.
fn plain(s: &BucketScheme, samples: &[(f64, f64)]) -> DecayingHistogram {
    let mut h = DecayingHistogram::new();
    for &(v, w) in samples {
        h.add_sample(s, HOUR, v, w, go_zero());
    }
    h
}

#[test]
fn test_linear_histogram_options() {
    let o = BucketScheme::linear(5.0, 0.3, 0.001).unwrap();
    assert_eq!(o.epsilon(), 0.001);
    assert_eq!(o.num_buckets(), 18);
    assert_eq!(o.bucket_start(0), 0.0);
    assert_eq!(o.bucket_start(17), 5.1);
    assert_eq!(o.find_bucket(-1.0), 0);
    assert_eq!(o.find_bucket(0.0), 0);
    assert_eq!(o.find_bucket(1.3), 4);
    assert_eq!(o.find_bucket(100.0), 17);
}

#[test]
fn test_exponential_histogram_options() {
    let o = BucketScheme::exponential(500.0, 40.0, 1.5, 0.001).unwrap();
    assert_eq!(o.epsilon(), 0.001);
    assert_eq!(o.num_buckets(), 6);
    let starts = [0.0, 40.0, 100.0, 190.0, 325.0, 527.5];
    for (bucket, start) in starts.iter().enumerate() {
        assert_eq!(o.bucket_start(bucket), *start, "bucket {bucket}");
    }
    for (value, bucket) in [(-1.0, 0), (39.99, 0), (40.0, 1), (100.0, 2), (900.0, 5)] {
        assert_eq!(o.find_bucket(value), bucket, "value {value}");
    }
}

#[test]
fn upstream_cpu_and_memory_schemes() {
    for s in [BucketScheme::cpu(), BucketScheme::memory()] {
        assert_eq!(s.num_buckets(), 176);
        assert_eq!(s.epsilon(), 1e-4);
    }
    assert_eq!(BucketScheme::cpu().bucket_start(1), 0.01);
    assert_eq!(BucketScheme::memory().bucket_start(1), 1e7);
    assert_eq!(BucketScheme::cpu().find_bucket(0.5), 25);
    assert!(BucketScheme::exponential(1.0, 1.0, 1.0, 1.0).is_err());
    assert!(BucketScheme::exponential(f64::NAN, 1.0, 2.0, 1.0).is_err());
    assert!(BucketScheme::linear(1e9, 1e-9, 1.0).is_err()); // too many buckets
}

#[test]
fn test_percentiles_empty_histogram() {
    let h = DecayingHistogram::new();
    for p in [-0.5, 0.0, 0.5, 1.0, 1.5] {
        assert_eq!(h.percentile(&test_options(), p), 0.0);
    }
}

#[test]
fn test_percentiles() {
    let s = test_options();
    let h = plain(&s, &[(1.0, 1.0), (2.0, 2.0), (3.0, 3.0), (4.0, 4.0)]);
    let expected = [2.0, 2.0, 3.0, 3.0, 4.0, 4.0, 4.0, 5.0, 5.0, 5.0, 5.0];
    for (i, want) in expected.iter().enumerate() {
        assert_eq!(h.percentile(&s, i as f64 / 10.0), *want, "p{i}0");
    }
}

#[test]
fn test_percentile_out_of_bounds() {
    let s = BucketScheme::linear(1.0, 0.1, WEIGHT_EPSILON).unwrap();
    let mut h = plain(&s, &[(0.1, 0.1), (0.2, 0.2)]);
    assert_eq!(h.percentile(&s, -0.1), 0.2);
    assert_eq!(h.percentile(&s, 1.1), 0.30000000000000004); // InEpsilon 0.3
    h.add_sample(&s, HOUR, 0.0, 0.1, go_zero());
    h.add_sample(&s, HOUR, 1.0, 0.2, go_zero());
    assert_eq!(h.percentile(&s, -0.1), 0.1);
    assert_eq!(h.percentile(&s, 1.1), 1.0);
}

#[test]
fn test_empty_histogram() {
    let s = BucketScheme::linear(1.0, 0.1, WEIGHT_EPSILON).unwrap();
    let mut h = DecayingHistogram::new();
    assert!(h.is_empty(&s));
    h.add_sample(&s, HOUR, 0.1, WEIGHT_EPSILON * 2.5, go_zero());
    assert!(!h.is_empty(&s));
    h.subtract_sample(&s, HOUR, 0.1, WEIGHT_EPSILON, go_zero());
    assert!(!h.is_empty(&s));
    h.subtract_sample(&s, HOUR, 0.1, WEIGHT_EPSILON, go_zero());
    assert!(h.is_empty(&s));
}

#[test]
fn test_non_empty_on_epsilon_addition() {
    let s = BucketScheme::linear(1.0, 0.1, WEIGHT_EPSILON).unwrap();
    let mut h = DecayingHistogram::new();
    assert!(h.is_empty(&s));
    for (value, weight) in [(9.9, 3.0), (0.1, 0.3), (999.9, 0.3)] {
        h.add_sample(&s, HOUR, value, WEIGHT_EPSILON * weight, go_zero());
        assert!(!h.is_empty(&s), "after {value}");
    }
}

#[test]
fn test_histogram_merge() {
    let s = test_options();
    let mut h1 = plain(&s, &[(1.0, 1.0), (2.0, 1.0)]);
    let h2 = plain(&s, &[(2.0, 1.0), (3.0, 1.0)]);
    let expected = plain(&s, &[(1.0, 1.0), (2.0, 1.0), (2.0, 1.0), (3.0, 1.0)]);
    h1.merge(&s, HOUR, &h2);
    assert!(upstream_equals(&s, &h1, &expected));
    assert_eq!(h1, expected); // here even the totals are bit-identical
}

#[test]
fn test_percentiles_empty_decaying_histogram() {
    let h = DecayingHistogram::default();
    for p in [-0.5, 0.0, 0.5, 1.0, 1.5] {
        assert_eq!(h.percentile(&test_options(), p), 0.0);
    }
}

#[test]
fn test_simple_decay() {
    let s = test_options();
    let mut h = DecayingHistogram::new();
    h.add_sample(&s, HOUR, 2.0, 1000.0, start());
    h.add_sample(&s, HOUR, 1.0, 1.0, hours(start(), 20));
    assert_eq!(h.percentile(&s, 0.999), 2.0);
    assert_eq!(h.percentile(&s, 1.0), 3.0);
}

#[test]
fn test_longterm_decay() {
    let s = test_options();
    let mut h = DecayingHistogram::new();
    h.add_sample(&s, HOUR, 2.0, 1.0, start());
    h.add_sample(&s, HOUR, 1.0, 1.0, hours(start(), 101));
    assert_eq!(h.percentile(&s, 1.0), 2.0);
}

#[test]
fn test_decaying_histogram_percentiles() {
    let s = test_options();
    let mut h = DecayingHistogram::new();
    for i in 1..=4 {
        h.add_sample(
            &s,
            HOUR,
            f64::from(i),
            f64::from(i),
            hours(start(), i64::from(i) - 1),
        );
    }
    let cases = [
        (0.00, 2.0),
        (0.02, 2.0),
        (0.03, 3.0),
        (0.10, 3.0),
        (0.11, 4.0),
        (0.34, 4.0),
        (0.35, 5.0),
        (1.00, 5.0),
    ];
    for (p, want) in cases {
        assert_eq!(h.percentile(&s, p), want, "p {p}");
    }
}

#[test]
fn test_no_decay() {
    let s = test_options();
    let mut h = DecayingHistogram::new();
    for i in 1..=4 {
        h.add_sample(&s, HOUR, f64::from(i), f64::from(i), start());
    }
    let cases = [
        (0.0, 2.0),
        (0.2, 3.0),
        (0.1, 2.0),
        (0.3, 3.0),
        (0.4, 4.0),
        (0.5, 4.0),
        (0.6, 4.0),
        (0.7, 5.0),
        (0.8, 5.0),
        (0.9, 5.0),
        (1.0, 5.0),
    ];
    for (p, want) in cases {
        assert_eq!(h.percentile(&s, p), want, "p {p}");
    }
}

#[test]
fn test_decaying_histogram_merge() {
    let s = test_options();
    let add = |h: &mut DecayingHistogram, v: f64, hrs: i64| {
        h.add_sample(&s, HOUR, v, 1.0, hours(start(), hrs))
    };
    let mut h1 = DecayingHistogram::new();
    add(&mut h1, 1.0, 0);
    add(&mut h1, 2.0, 1);
    let mut h2 = DecayingHistogram::new();
    add(&mut h2, 2.0, 2);
    add(&mut h2, 3.0, 1);
    let mut expected = DecayingHistogram::new();
    add(&mut expected, 2.0, 2);
    add(&mut expected, 2.0, 1);
    add(&mut expected, 3.0, 1);
    add(&mut expected, 1.0, 0);
    h1.merge(&s, HOUR, &h2);
    assert!(upstream_equals(&s, &h1, &expected), "{h1:?} {expected:?}");
}

/// The reference timestamp: Go's zero time at first, then a multiple of the
/// half-life once a sample is 100 half-lives past it
/// (TestDecayingHistogramSaveToCheckpoint checks that it moved).
#[test]
fn reference_timestamp_moves_to_a_multiple_of_the_half_life() {
    let s = test_options();
    let mut h = DecayingHistogram::new();
    assert_eq!(h.reference_timestamp(), go_zero());
    h.add_sample(&s, HOUR, 2.0, 1.0, hours(start(), 100));
    // 1234567890 + 360000 s rounded to the hour (since year 1).
    assert_eq!(h.reference_timestamp().as_second(), 1_234_929_600);
    // The sample's weight: 2^((1234927890 - 1234929600) / 3600) = 2^-0.475.
    assert_eq!(h.total_weight(), super::gomath::exp2(-1710.0 / 3600.0));
    assert_eq!(h.total_weight(), 0.71946679000541);
}

#[test]
fn exact_checkpoint_round_trip() {
    let s = BucketScheme::cpu();
    let mut h = DecayingHistogram::new();
    for i in 0..500 {
        let t = Timestamp::from_second(1_700_000_000 + i * 61).unwrap();
        h.add_sample(s, HOUR, 0.2 + (i % 7) as f64 * 0.013, 0.1, t);
    }
    let json = serde_json::to_string(&h.to_checkpoint()).unwrap();
    let back: HistogramCheckpoint = serde_json::from_str(&json).unwrap();
    let restored = DecayingHistogram::from_checkpoint(s, &back).unwrap();
    assert_eq!(restored, h);
    for p in [0.0, 0.5, 0.9, 0.95, 1.0] {
        assert_eq!(
            restored.percentile(s, p).to_bits(),
            h.percentile(s, p).to_bits()
        );
    }
    assert!(
        json.starts_with(r#"{"ref":"2023-11-14T22:00:00Z","total":"#),
        "{json}"
    );
    assert!(json.contains(r#""lo":14,"w":""#), "{json}");

    let empty = DecayingHistogram::new().to_checkpoint();
    let json = serde_json::to_string(&empty).unwrap();
    assert_eq!(
        json,
        r#"{"ref":"0001-01-01T00:00:00Z","total":"AAAAAAAAAAA=","lo":0,"w":""}"#
    );
}

#[test]
fn checkpoint_validation_names_the_field() {
    let s = BucketScheme::cpu();
    let base = HistogramCheckpoint {
        reference: start(),
        total_weight: 1.0,
        first_bucket: 170,
        weights: vec![0.5, 0.5],
    };
    assert!(DecayingHistogram::from_checkpoint(s, &base).is_ok());
    let field = |c: &HistogramCheckpoint| match DecayingHistogram::from_checkpoint(s, c) {
        Err(HistogramError::InvalidCheckpoint { field, .. }) => field,
        other => panic!("{other:?}"),
    };
    let out_of_range = HistogramCheckpoint {
        first_bucket: 175,
        ..base.clone()
    };
    assert_eq!(field(&out_of_range), "lo");
    let negative = HistogramCheckpoint {
        weights: vec![0.5, -1.0],
        ..base.clone()
    };
    assert_eq!(field(&negative), "w[1]");
    let nan_total = HistogramCheckpoint {
        total_weight: f64::NAN,
        ..base.clone()
    };
    assert_eq!(field(&nan_total), "total");
    let inf = HistogramCheckpoint {
        weights: vec![f64::INFINITY],
        ..base
    };
    assert_eq!(field(&inf), "w[0]");
    let bad_json = r#"{"ref":"2020-01-01T00:00:00Z","total":"AAAA","lo":0,"w":""}"#;
    assert!(serde_json::from_str::<HistogramCheckpoint>(bad_json).is_err());
}

/// Acceptance: a week of per-minute CPU samples (±20% noise around 250m)
/// and seven daily memory peaks (±5% around 300 MB) fit in 200 bytes.
#[test]
fn per_key_memory_for_a_week_of_samples() {
    let config = HistoryConfig::default();
    let mut state = AggregateContainerState::default();
    let mut seed: u64 = 0x2545_F491_4F6C_DD1D;
    let mut noise = || {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        (seed >> 11) as f64 / (1u64 << 53) as f64 * 2.0 - 1.0
    };
    let t0 = 1_700_000_000;
    for minute in 0..7 * 24 * 60 {
        let usage = 0.25 * (1.0 + 0.2 * noise());
        let millicores = (usage * 1000.0).round();
        let t = Timestamp::from_second(t0 + minute * 60).unwrap();
        state.add_cpu_sample(&config, millicores / 1000.0, 0.5, t);
    }
    for day in 1..=7 {
        let peak = (300e6 * (1.0 + 0.05 * noise())).round();
        let t = Timestamp::from_second(t0 + day * 86_400).unwrap();
        state.add_memory_peak(&config, peak, t);
    }
    let inline = std::mem::size_of::<AggregateContainerState>();
    let total = inline + state.heap_bytes();
    assert_eq!(inline, 112);
    assert_eq!(std::mem::size_of::<DecayingHistogram>(), 40);
    assert_eq!(state.total_samples(), 10_080);
    assert!(
        total <= 200,
        "{total} bytes ({inline} inline + {} heap)",
        state.heap_bytes()
    );
    // Measured: 5 CPU buckets and 2 memory buckets, 168 bytes.
    assert_eq!(state.heap_bytes(), (5 + 2) * 8);
}
