//! Upstream's checkpoint cases of `histogram_test.go` and
//! `decaying_histogram_test.go`, and `aggregate_container_state_test.go`
//! (the parts about these numbers), as data; plus the exact aggregate
//! checkpoint.

// Upstream's test data uses 3.14 (cores, bytes), not pi.
#![allow(clippy::approx_constant)]

use super::vpa::{VpaCheckpointStatus, VpaHistogramCheckpoint, MAX_CHECKPOINT_WEIGHT};
use super::*;
use k8s_openapi::jiff::Timestamp;
use std::collections::BTreeMap;
use std::time::Duration;

const HOUR: Duration = Duration::from_secs(3600);

fn go_zero() -> Timestamp {
    "0001-01-01T00:00:00Z".parse().unwrap()
}

fn ts(s: &str) -> Timestamp {
    s.parse().unwrap()
}

/// histogram_test.go `testHistogramOptions`.
fn test_options() -> BucketScheme {
    BucketScheme::linear(10.0, 1.0, 1e-15).unwrap()
}

fn plain(s: &BucketScheme, samples: &[(f64, f64)]) -> DecayingHistogram {
    let mut h = DecayingHistogram::new();
    for &(v, w) in samples {
        h.add_sample(s, HOUR, v, w, go_zero());
    }
    h
}

fn vpa_checkpoint(total: f64, weights: &[(i64, u32)]) -> VpaHistogramCheckpoint {
    VpaHistogramCheckpoint {
        reference_timestamp: go_zero(),
        bucket_weights: weights.iter().copied().collect(),
        total_weight: total,
    }
}

#[test]
fn test_histogram_save_to_checkpoint_empty() {
    let c = DecayingHistogram::new().to_vpa_checkpoint(&test_options());
    assert_eq!(c.total_weight, 0.0);
    assert!(c.bucket_weights.is_empty());
}

#[test]
fn test_histogram_save_to_checkpoint() {
    let s = test_options();
    let c = plain(&s, &[(1.0, 1.0)]).to_vpa_checkpoint(&s);
    assert_eq!(c.total_weight, 1.0);
    let bucket = s.find_bucket(1.0) as i64;
    assert_eq!(
        c.bucket_weights,
        BTreeMap::from([(bucket, MAX_CHECKPOINT_WEIGHT)])
    );
}

#[test]
fn test_histogram_save_to_checkpoint_drops_relatively_small_values() {
    let s = test_options();
    let c = plain(&s, &[(1.0, 1.0), (2.0, 100_000.0)]).to_vpa_checkpoint(&s);
    assert_eq!(c.total_weight, 100_001.0);
    assert_eq!(
        c.bucket_weights,
        BTreeMap::from([(2, MAX_CHECKPOINT_WEIGHT)])
    );
}

#[test]
fn test_histogram_save_to_checkpoint_for_multiple_values() {
    let s = test_options();
    let c = plain(&s, &[(1.0, 1.0), (2.0, 10_000.0), (3.0, 50.0)]).to_vpa_checkpoint(&s);
    assert_eq!(c.total_weight, 10_051.0);
    assert_eq!(
        c.bucket_weights,
        BTreeMap::from([(1, 1), (2, 10_000), (3, 50)])
    );
}

#[test]
fn test_histogram_load_from_checkpoint() {
    let s = test_options();
    let mut h = DecayingHistogram::new();
    h.load_vpa_checkpoint(&s, &vpa_checkpoint(6.0, &[(0, 1), (1, 2)]))
        .unwrap();
    assert_eq!(h.total_weight(), 6.0);
    assert_eq!(h.bucket_weight(0), 2.0);
    assert_eq!(h.bucket_weight(1), 4.0);
}

#[test]
fn test_histogram_load_from_checkpoint_errors() {
    let s = test_options();
    let cases = [
        (
            "ReturnsErrorOnNegativeBucket",
            vpa_checkpoint(1.0, &[(-1, 1)]),
            "bucketWeights[-1]",
        ),
        (
            "ReturnsErrorOnInvalidBucket",
            vpa_checkpoint(1.0, &[(99, 1)]),
            "bucketWeights[99]",
        ),
        (
            "ReturnsErrorNegativeTotaWeight",
            vpa_checkpoint(-1.0, &[]),
            "totalWeight",
        ),
    ];
    for (name, c, want) in cases {
        let mut h = DecayingHistogram::new();
        match h.load_vpa_checkpoint(&s, &c) {
            Err(HistogramError::InvalidCheckpoint { field, .. }) => {
                assert_eq!(field, want, "{name}")
            }
            other => panic!("{name}: {other:?}"),
        }
        assert_eq!(h, DecayingHistogram::new(), "{name}");
    }
}

/// TestHistogramIsNotEmptyAfterSavingAndLoadingCheckpointsWithBoundaryValues
/// (upstream issue 7726).
#[test]
fn test_histogram_is_not_empty_after_saving_and_loading_checkpoints_with_boundary_values() {
    let s = test_options();
    let eps = 1e-15;
    let h = plain(
        &s,
        &[
            (1.0, eps),
            (2.0, f64::from(MAX_CHECKPOINT_WEIGHT) * eps - eps),
        ],
    );
    assert!(!h.is_empty(&s));
    let c = h.to_vpa_checkpoint(&s);
    let mut loaded = DecayingHistogram::new();
    loaded.load_vpa_checkpoint(&s, &c).unwrap();
    assert!(!loaded.is_empty(&s));
}

#[test]
fn test_decaying_histogram_save_to_checkpoint() {
    let s = test_options();
    let mut h = DecayingHistogram::new();
    let t = Timestamp::from_second(1_234_567_890 + 100 * 3600).unwrap();
    h.add_sample(&s, HOUR, 2.0, 1.0, t);
    assert_ne!(h.reference_timestamp(), go_zero());
    let c = h.to_vpa_checkpoint(&s);
    assert_eq!(c.reference_timestamp, h.reference_timestamp());
    assert!(!c.bucket_weights.is_empty());
    assert_ne!(c.total_weight, 0.0);
}

#[test]
fn test_decaying_histogram_load_from_checkpoint() {
    let s = test_options();
    let t = ts("2018-01-02T03:04:05Z");
    let c = VpaHistogramCheckpoint {
        reference_timestamp: t,
        ..vpa_checkpoint(6.0, &[(0, 1)])
    };
    let mut h = DecayingHistogram::new();
    h.load_vpa_checkpoint(&s, &c).unwrap();
    assert!(!h.is_empty(&s));
    assert_eq!(h.reference_timestamp(), t);
}

/// TestAggregateStateByContainerName: two "app-A" containers merge into one
/// state whose histograms equal the merge of theirs; counts add up.
#[test]
fn test_aggregate_state_by_container_name() {
    let config = HistoryConfig::default();
    let t = ts("2017-04-18T17:35:05Z");
    let window_end = ts("2017-04-19T17:35:05Z");
    let container = |cpu: f64, memory: f64| {
        let mut s = AggregateContainerState::default();
        s.add_cpu_sample(&config, cpu, 3.14, t);
        s.add_memory_peak(&config, memory, window_end);
        s
    };
    let (a1, b, a2, c) = (
        container(1.0, 2e9),
        container(5.0, 10e9),
        container(3.0, 4e9),
        container(5.0, 10e9),
    );
    let mut app_a = AggregateContainerState::default();
    app_a.merge(&config, &a1);
    app_a.merge(&config, &a2);
    let mut app_b = AggregateContainerState::default();
    app_b.merge(&config, &b);
    let mut app_c = AggregateContainerState::default();
    app_c.merge(&config, &c);
    assert_eq!(
        (
            app_a.total_samples(),
            app_b.total_samples(),
            app_c.total_samples()
        ),
        (2, 1, 1)
    );

    let mut cpu = DecayingHistogram::new();
    cpu.merge(BucketScheme::cpu(), config.cpu_half_life, a1.cpu_usage());
    cpu.merge(BucketScheme::cpu(), config.cpu_half_life, a2.cpu_usage());
    assert_eq!(app_a.cpu_usage(), &cpu);
    let mut memory = DecayingHistogram::new();
    memory.add_sample(
        BucketScheme::memory(),
        config.memory_half_life,
        2e9,
        1.0,
        window_end,
    );
    memory.add_sample(
        BucketScheme::memory(),
        config.memory_half_life,
        4e9,
        1.0,
        window_end,
    );
    assert_eq!(app_a.memory_peaks(), &memory);
    assert_eq!(app_a.first_sample_start(), Some(t));
    assert_eq!(app_a.last_sample_start(), Some(t));
}

#[test]
fn test_aggregate_container_state_save_to_checkpoint() {
    let t1 = ts("2018-01-01T02:03:04Z");
    let t2 = ts("2018-02-01T02:03:04Z");
    let mut cs = AggregateContainerState::default();
    cs.set_samples(10, t1.as_nanosecond(), t2.as_nanosecond());
    cs.cpu_usage_mut()
        .add_sample(BucketScheme::cpu(), HOUR * 24, 1.0, 33.0, t2);
    cs.memory_peaks_mut()
        .add_sample(BucketScheme::memory(), HOUR * 24, 1.0, 55.0, t1);
    cs.memory_peaks_mut()
        .add_sample(BucketScheme::memory(), HOUR * 24, 10_000_000.0, 55.0, t1);
    let c = cs.to_vpa_checkpoint();
    assert_eq!(c.first_sample_start, t1);
    assert_eq!(c.last_sample_start, t2);
    assert_eq!(c.total_samples_count, 10);
    assert_eq!(c.version, "v3");
    assert_eq!(c.cpu_histogram.bucket_weights.len(), 1);
    assert_eq!(c.memory_histogram.bucket_weights.len(), 2);
}

fn status(version: &str) -> VpaCheckpointStatus {
    VpaCheckpointStatus {
        version: version.into(),
        first_sample_start: ts("2018-01-01T02:03:04Z"),
        last_sample_start: ts("2018-02-01T02:03:04Z"),
        total_samples_count: 20,
        memory_histogram: vpa_checkpoint(33.0, &[(0, 10)]),
        cpu_histogram: vpa_checkpoint(44.0, &[(0, 10)]),
    }
}

#[test]
fn test_aggregate_container_state_load_from_checkpoint_fails_for_version_mismatch() {
    let mut cs = AggregateContainerState::default();
    let err = cs.load_vpa_checkpoint(&HistoryConfig::default(), &status("foo"));
    assert!(err.is_err());
    assert_eq!(cs, AggregateContainerState::default());
}

#[test]
fn test_aggregate_container_state_load_from_checkpoint() {
    let mut cs = AggregateContainerState::default();
    cs.load_vpa_checkpoint(&HistoryConfig::default(), &status("v3"))
        .unwrap();
    assert_eq!(cs.first_sample_start(), Some(ts("2018-01-01T02:03:04Z")));
    assert_eq!(cs.last_sample_start(), Some(ts("2018-02-01T02:03:04Z")));
    assert_eq!(cs.total_samples(), 20);
    assert!(!cs.cpu_usage().is_empty(BucketScheme::cpu()));
    assert!(!cs.memory_peaks().is_empty(BucketScheme::memory()));
}

/// addCPUSample: weight 0.1 whatever the request (VPA >= 1.4), or
/// max(request, 0.1) with the pre-1.4 option; first/last/count.
#[test]
fn cpu_samples_weigh_min_sample_weight_and_track_times() {
    let t = ts("2024-03-01T00:00:00Z");
    let later = ts("2024-03-01T00:01:00.5Z");
    let config = HistoryConfig::default();
    let mut cs = AggregateContainerState::default();
    assert!(cs.is_empty());
    assert_eq!(
        (cs.first_sample_start(), cs.last_sample_start()),
        (None, None)
    );
    cs.add_cpu_sample(&config, 0.5, 2.0, later);
    cs.add_cpu_sample(&config, 0.5, 2.0, t);
    cs.add_memory_peak(&config, 1e8, t);
    assert_eq!(cs.total_samples(), 2);
    assert_eq!(cs.first_sample_start(), Some(t));
    assert_eq!(cs.last_sample_start(), Some(later));
    // t is midnight, a multiple of 24h since year 1: the reference.
    assert_eq!(cs.cpu_usage().reference_timestamp(), t);
    let w_later = 0.1 * super::gomath::exp2(60.5 / 86_400.0);
    assert_eq!(cs.cpu_usage().total_weight(), w_later + 0.1);

    let legacy = HistoryConfig {
        cpu_weight_from_request: true,
        ..HistoryConfig::default()
    };
    let mut old = AggregateContainerState::default();
    old.add_cpu_sample(&legacy, 0.5, 2.0, t);
    old.add_cpu_sample(&legacy, 0.5, 0.01, t);
    assert_eq!(old.cpu_usage().total_weight(), 2.1);
    // Invalid usage is ignored entirely.
    old.add_cpu_sample(&legacy, f64::NAN, 2.0, t);
    assert_eq!(old.total_samples(), 2);
}

#[test]
fn exact_aggregate_checkpoint_round_trip() {
    let config = HistoryConfig::default();
    let mut cs = AggregateContainerState::default();
    for i in 0..3000 {
        let t = Timestamp::from_second(1_700_000_000 + i * 60).unwrap();
        cs.add_cpu_sample(&config, 0.1 + (i % 13) as f64 * 0.011, 0.0, t);
        if i % 1440 == 0 {
            cs.add_memory_peak(&config, 2e8 + i as f64, t);
        }
    }
    cs.subtract_memory_peak(&config, 2e8, Timestamp::from_second(1_700_000_000).unwrap());
    let json = serde_json::to_string(&cs.to_checkpoint()).unwrap();
    let back: AggregateCheckpoint = serde_json::from_str(&json).unwrap();
    let restored = AggregateContainerState::from_checkpoint(&config, &back).unwrap();
    assert_eq!(restored, cs);
    assert_eq!(
        recommend_pod(
            &RecommenderConfig::default(),
            &BTreeMap::from([("c".to_string(), &restored)])
        ),
        recommend_pod(
            &RecommenderConfig::default(),
            &BTreeMap::from([("c".to_string(), &cs)])
        ),
    );
    let empty = AggregateContainerState::default().to_checkpoint();
    let json = serde_json::to_string(&empty).unwrap();
    assert!(
        json.ends_with(r#""first":null,"last":null,"samples":0}"#),
        "{json}"
    );
    let mut bad = back.clone();
    bad.memory.weights = vec![-1.0];
    match AggregateContainerState::from_checkpoint(&config, &bad) {
        Err(HistogramError::InvalidCheckpoint { field, .. }) => assert_eq!(field, "memory.w[0]"),
        other => panic!("{other:?}"),
    }
}
