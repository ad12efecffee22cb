//! Upstream's tables for the per-VPA configuration, as data:
//! `TestUpdateFromPolicyMemoryAggregationInterval`,
//! `TestUpdateFromPolicyMemoryAggregationIntervalCount` and
//! `TestAggregateContainerStateIsExpiredWithCustomIntervalCount`
//! (vertical-pod-autoscaler/pkg/recommender/model/aggregate_container_state_test.go,
//! kubernetes/autoscaler 55c37cd5eb55), then nodescope's reading of the
//! fields and its bounds.

use super::*;
use crate::recommend::replay::Replay;
use serde_json::json;

const DAY_MS: i64 = 24 * 3_600_000;

fn config(gate: bool) -> ModelConfig {
    let mut c = Replay::defaults().model;
    c.per_vpa_config = gate;
    c
}

fn policy(value: Value) -> Option<PerVpaConfig> {
    Some(PerVpaConfig::from_policy(&value).unwrap_or_else(|e| panic!("{e:?}")))
}

#[test]
fn upstreams_update_from_policy_tables() {
    // (name, policy, gate, interval ms, count)
    let custom_seconds = json!({"memoryAggregationIntervalSeconds": 3600});
    let custom_count = json!({"memoryAggregationIntervalCount": 4});
    let cases: [(&str, Option<PerVpaConfig>, bool, i64, i64); 8] = [
        (
            "Custom interval with feature enabled",
            policy(custom_seconds.clone()),
            true,
            3_600_000,
            8,
        ),
        (
            "Custom interval with feature disabled - falls back to default",
            policy(custom_seconds),
            false,
            DAY_MS,
            8,
        ),
        (
            "Nil MemoryAggregationIntervalSeconds - uses default",
            policy(json!({})),
            true,
            DAY_MS,
            8,
        ),
        ("Nil policy - uses default", None, true, DAY_MS, 8),
        (
            "Custom count with feature enabled",
            policy(custom_count.clone()),
            true,
            DAY_MS,
            4,
        ),
        (
            "Custom count with feature disabled - falls back to default",
            policy(custom_count),
            false,
            DAY_MS,
            8,
        ),
        (
            "Nil MemoryAggregationIntervalCount - uses default",
            policy(json!({})),
            true,
            DAY_MS,
            8,
        ),
        ("Nil policy - uses default (count)", None, true, DAY_MS, 8),
    ];
    for (name, overrides, gate, interval_ms, count) in cases {
        let got = effective(&config(gate), overrides.as_ref());
        assert_eq!(
            (got.peaks.interval_ms, got.window_length_ms),
            (interval_ms, interval_ms * count),
            "{name}"
        );
    }
}

#[test]
fn upstreams_is_expired_with_custom_interval_count() {
    // With count 4 and the default 24h interval the window is 96h: an
    // aggregate whose last sample is an hour younger is kept, one exactly
    // that old is dropped (`now - last >= window`).
    let got = effective(
        &config(true),
        policy(json!({"memoryAggregationIntervalCount": 4})).as_ref(),
    );
    assert_eq!(got.window_length_ms, 4 * DAY_MS);
    let expired = |age_ms: i64| age_ms >= got.window_length_ms;
    assert!(!expired(4 * DAY_MS - 3_600_000));
    assert!(expired(4 * DAY_MS));
}

#[test]
fn the_oom_fields_are_read_as_upstream_converts_quantities() {
    let got = effective(
        &config(true),
        policy(json!({"oomBumpUpRatio": "1500m", "oomMinBumpUp": "200Mi"})).as_ref(),
    );
    assert_eq!(got.peaks.oom_bump_up_ratio, 1.5);
    assert_eq!(got.peaks.oom_min_bump_up_bytes, 209_715_200.0);
    // Untouched: the flags' interval and window.
    assert_eq!(
        (got.peaks.interval_ms, got.window_length_ms),
        (DAY_MS, 8 * DAY_MS)
    );
    let plain = effective(&config(true), policy(json!({"oomBumpUpRatio": 2})).as_ref());
    assert_eq!(plain.peaks.oom_bump_up_ratio, 2.0);
    assert_eq!(plain.peaks.oom_min_bump_up_bytes, 104_857_600.0);
}

#[test]
fn out_of_range_values_name_the_field_and_upstreams_bound() {
    let refused = |v: Value| PerVpaConfig::from_policy(&v).err();
    assert_eq!(
        refused(json!({"oomBumpUpRatio": "0.5"})),
        Some(("oomBumpUpRatio", "0.5 must be at least 1.0".into()))
    );
    assert_eq!(
        refused(json!({"oomMinBumpUp": "-1Mi"})),
        Some(("oomMinBumpUp", "-1Mi must be at least 0".into()))
    );
    assert_eq!(
        refused(json!({"memoryAggregationIntervalSeconds": 0})),
        Some((
            "memoryAggregationIntervalSeconds",
            "0 must be between 1 and 2147483647".into()
        ))
    );
    assert_eq!(
        refused(json!({"memoryAggregationIntervalCount": 0})),
        Some((
            "memoryAggregationIntervalCount",
            "0 must be at least 1".into()
        ))
    );
    assert_eq!(
        refused(json!({"memoryAggregationIntervalCount": "4"})),
        Some((
            "memoryAggregationIntervalCount",
            "\"4\" is not an integer".into()
        ))
    );
    assert_eq!(
        refused(json!({"oomBumpUpRatio": "lots"})).map(|(f, _)| f),
        Some("oomBumpUpRatio")
    );
    assert!(PerVpaConfig::from_policy(&json!({"mode": "Auto"})).is_ok_and(|c| c.is_empty()));
}
