//! Upstream's `logic/estimator_test.go` and `logic/recommender_test.go` as
//! data, and whole-pod recommendations whose numbers were produced by
//! upstream's Go code (util histograms + the estimator chain).

// Upstream's test data uses 3.14 (cores, bytes), not pi.
#![allow(clippy::approx_constant)]

use super::estimate::*;
use super::*;
use k8s_openapi::jiff::Timestamp;
use std::collections::BTreeMap;
use std::time::Duration;

const DAY: Duration = Duration::from_secs(24 * 3600);

/// estimator_test.go `anyTime = time.Unix(0, 0)`.
fn any_time(minutes: i64) -> Timestamp {
    Timestamp::from_second(minutes * 60).unwrap()
}

fn in_epsilon(expected: f64, actual: f64, epsilon: f64) -> bool {
    ((expected - actual) / expected).abs() <= epsilon
}

/// The state of TestConfidenceMultiplier: nine 1-core samples 2 minutes apart.
fn nine_samples() -> AggregateContainerState {
    let mut s = AggregateContainerState::default();
    for i in 0..9 {
        s.add_cpu_sample(&HistoryConfig::default(), 1.0, 0.0, any_time(2 * i));
    }
    s
}

#[test]
fn test_percentile_estimator() {
    let config = HistoryConfig::default();
    let mut s = AggregateContainerState::default();
    for (cpu, memory) in [(1.0, 1e9), (2.0, 2e9), (3.0, 3e9)] {
        s.add_cpu_sample(&config, cpu, 0.0, any_time(0));
        s.add_memory_peak(&config, memory, any_time(0));
    }
    let cpu = cores_from_cpu_amount(cpu_percentile(&s, 0.2));
    let memory = bytes_from_memory_amount(memory_percentile(&s, 0.5));
    // Upstream: InEpsilon 5%; the exact values from upstream's Go code.
    assert!(in_epsilon(1.0, cpu, 0.05) && in_epsilon(2e9, memory, 0.05));
    assert_eq!(
        s.cpu_usage().percentile(BucketScheme::cpu(), 0.2),
        1.0162813885540904
    );
    assert_eq!(cpu, 1.016);
    assert_eq!(memory, 2_093_479_957.0);
}

#[test]
fn test_confidence_multiplier() {
    let base_cpu = cpu_amount_from_cores(3.14);
    let base_memory = memory_amount_from_bytes(3.14e9);
    let empty = AggregateContainerState::default();
    let c0 = confidence(&empty, DAY);
    assert_eq!(
        with_confidence_multiplier(base_cpu, 1.0, 1.0, c0),
        100_000_000_000_000
    );
    assert_eq!(with_confidence_multiplier(base_cpu, 1.0, -1.0, c0), 0);

    let s = nine_samples();
    let c = confidence(&s, DAY);
    assert_eq!(c, 0.00625);
    let cpu = with_confidence_multiplier(base_cpu, 0.1, 2.0, c);
    let memory = with_confidence_multiplier(base_memory, 0.1, 2.0, c);
    assert_eq!(cores_from_cpu_amount(cpu), 907.46);
    assert_eq!(bytes_from_memory_amount(memory), 9.0746e+11);
}

#[test]
fn test_confidence_multiplier_with_custom_interval() {
    let s = nine_samples();
    let interval = Duration::from_secs(18 * 60);
    let c = confidence(&s, interval);
    assert_eq!(c, 0.5);
    let cpu = with_confidence_multiplier(cpu_amount_from_cores(3.14), 0.1, 2.0, c);
    let memory = with_confidence_multiplier(memory_amount_from_bytes(3.14e9), 0.1, 2.0, c);
    assert_eq!(cores_from_cpu_amount(cpu), 4.521);
    assert_eq!(bytes_from_memory_amount(memory), 4.5216e+9);
}

#[test]
fn test_confidence_multiplier_no_history() {
    let c = confidence(&AggregateContainerState::default(), DAY);
    let cpu = with_confidence_multiplier(cpu_amount_from_cores(3.14), 0.1, 2.0, c);
    assert_eq!(cpu, MAX_RESOURCE_AMOUNT);
}

#[test]
fn test_margin_estimator() {
    let cpu = with_margin(cpu_amount_from_cores(3.14), 0.1);
    let memory = with_margin(memory_amount_from_bytes(3.14e9), 0.1);
    // Go folds the constant `3.14*1.1` exactly: 3.454 and 3.454e9.
    assert_eq!(cores_from_cpu_amount(cpu), 3.454);
    assert_eq!(bytes_from_memory_amount(memory), 3.454e9);
}

#[test]
fn test_min_resources_estimator() {
    let cpu = cpu_amount_from_cores(3.14).max(cpu_amount_from_cores(0.2));
    assert_eq!(cores_from_cpu_amount(cpu), 3.14);
    let memory = memory_amount_from_bytes(4e8).max(memory_amount_from_bytes(2e7));
    assert_eq!(bytes_from_memory_amount(memory), 4e8);
}

/// TestMinResourcesApplied / TestMinResourcesSplitAcrossContainers: the
/// constant estimates (1 millicore, 1e6 bytes) are raised to the pod
/// minimum split over the containers.
#[test]
fn test_min_resources_applied_and_split_across_containers() {
    let config = RecommenderConfig::default();
    let (cpu_est, memory_est) = (cpu_amount_from_cores(0.001), memory_amount_from_bytes(1e6));
    for (containers, cpu, memory) in [
        (
            1,
            cpu_amount_from_cores(25.0 / 1000.0),
            memory_amount_from_bytes(250.0 * 1024.0 * 1024.0),
        ),
        (
            2,
            cpu_amount_from_cores(25.0 / 1000.0 / 2.0),
            memory_amount_from_bytes(250.0 * 1024.0 * 1024.0 / 2.0),
        ),
    ] {
        let (min_cpu, min_memory) = pod_minimums(&config, containers);
        assert_eq!(cpu_est.max(min_cpu), cpu, "{containers} containers");
        assert_eq!(
            memory_est.max(min_memory),
            memory,
            "{containers} containers"
        );
    }
    assert_eq!(pod_minimums(&config, 2), (12, 131_072_000));

    // The same through recommend_pod: empty states estimate below the minimum.
    let empty = AggregateContainerState::default();
    let pod = BTreeMap::from([
        ("container-1".to_string(), &empty),
        ("container-2".to_string(), &empty),
    ]);
    let rec = recommend_pod(&config, &pod);
    let min = Resources::from_amounts(12, 131_072_000);
    for r in rec.values() {
        assert_eq!(
            (r.target, r.lower_bound, r.upper_bound, r.uncapped_target),
            (min, min, min, min)
        );
    }
    assert!(recommend_pod(&config, &BTreeMap::new()).is_empty());
}

#[test]
fn recommender_config_defaults_are_upstreams() {
    let c = RecommenderConfig::default();
    assert_eq!(
        (
            c.target_cpu_percentile,
            c.lower_bound_cpu_percentile,
            c.upper_bound_cpu_percentile
        ),
        (0.9, 0.5, 0.95)
    );
    assert_eq!(
        (
            c.target_memory_percentile,
            c.lower_bound_memory_percentile,
            c.upper_bound_memory_percentile
        ),
        (0.9, 0.5, 0.95)
    );
    assert_eq!(
        (c.confidence_interval_cpu, c.confidence_interval_memory),
        (DAY, DAY)
    );
    assert_eq!(
        (
            c.margin_fraction,
            c.pod_min_cpu_millicores,
            c.pod_min_memory_mb
        ),
        (0.15, 25.0, 250.0)
    );
    let h = HistoryConfig::default();
    assert_eq!(
        (
            h.cpu_half_life,
            h.memory_half_life,
            h.cpu_weight_from_request
        ),
        (DAY, DAY, false)
    );
}

/// Three days of per-minute CPU samples (200m..312m) and three daily memory
/// peaks; the expected numbers were computed by upstream's Go code.
#[test]
fn whole_pod_recommendation_matches_upstream() {
    let config = HistoryConfig::default();
    let t0 = 1_700_000_000;
    let minutes = 3 * 24 * 60;
    let mut s = AggregateContainerState::default();
    for k in 0..minutes {
        let millicores = 200 + (k * 37) % 113;
        let t = Timestamp::from_second(t0 + k * 60).unwrap();
        s.add_cpu_sample(&config, millicores as f64 / 1000.0, 0.0, t);
    }
    for d in 1..=3 {
        let t = Timestamp::from_second(t0 + d * 86_400).unwrap();
        s.add_memory_peak(&config, (300_000_000 + d * 7_000_000) as f64, t);
    }
    let want = ContainerRecommendation {
        target: Resources::from_amounts(350, 380_258_472),
        lower_bound: Resources::from_amounts(295, 380_005_034),
        upper_bound: Resources::from_amounts(505, 507_040_643),
        uncapped_target: Resources::from_amounts(350, 380_258_472),
    };
    for containers in [1, 2] {
        let pod: BTreeMap<String, &AggregateContainerState> =
            (0..containers).map(|i| (format!("c{i}"), &s)).collect();
        let rec = recommend_pod(&RecommenderConfig::default(), &pod);
        assert_eq!(rec["c0"], want, "{containers} containers");
    }
    assert_eq!(want.target.cpu_millicores(), 350);
    assert_eq!(want.target.cpu_cores, 0.35);
    assert_eq!(want.upper_bound.memory_amount(), 507_040_643);

    // Short history: nine 1m samples over 16 minutes, no memory peak.
    let mut short = AggregateContainerState::default();
    for k in 0..9 {
        let t = Timestamp::from_second(t0 + k * 120).unwrap();
        short.add_cpu_sample(&config, 0.001, 0.0, t);
    }
    let rec = recommend_pod(
        &RecommenderConfig::default(),
        &BTreeMap::from([("c".to_string(), &short)]),
    );
    let min = Resources::from_amounts(25, 262_144_000);
    assert_eq!(rec["c"].target, min);
    assert_eq!(rec["c"].lower_bound, min);
    assert_eq!(
        rec["c"].upper_bound,
        Resources::from_amounts(1771, 262_144_000)
    );
}
