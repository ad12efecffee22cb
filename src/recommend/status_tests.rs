use super::*;
use crate::recommend::aggregate::HistoryConfig;
use crate::recommend::replay::Replay;
use serde_json::json;

fn vpa(spec_extra: Value, status: Value) -> ScopedVpa {
    let mut spec = json!({"targetRef": {"apiVersion": "apps/v1", "kind": "DaemonSet", "name": "agent"}, "scope": "node"});
    if let (Some(spec), Some(extra)) = (spec.as_object_mut(), spec_extra.as_object()) {
        spec.extend(extra.clone());
    }
    ScopedVpa::from_value(&json!({
        "kind": "VerticalPodAutoscaler",
        "metadata": {"name": "agent", "namespace": "monitoring", "generation": 4},
        "spec": spec, "status": status,
    }))
    .ok()
    .flatten()
    .unwrap_or_else(|| panic!("the test VPA is scoped"))
}

/// The status as the API gets it.
fn status_of(
    config: &StatusConfig,
    history_config: &HistoryConfig,
    vpa: &ScopedVpa,
    history: Option<&BTreeMap<Arc<str>, ContainerHistory>>,
    pod_count: usize,
    now: Timestamp,
) -> Value {
    vpa_status(config, history_config, vpa, history, pod_count, now).to_value()
}

fn typed(v: &Value) -> VpaStatus {
    VpaStatus::deserialize(v).unwrap_or_default()
}

fn config() -> StatusConfig {
    Replay::defaults().status
}

fn at(minute: i64) -> Timestamp {
    Timestamp::from_second(1_795_000_000 + minute * 60).unwrap_or(Timestamp::UNIX_EPOCH)
}

/// One container `agent` with `minutes` samples of 100m / 300Mi in the
/// group of each of `values`.
fn history(values: &[(&str, i64)]) -> BTreeMap<Arc<str>, ContainerHistory> {
    let h = HistoryConfig::default();
    let mut c = ContainerHistory::default();
    for (value, minutes) in values {
        let mut a = AggregateContainerState::default();
        for m in 0..*minutes {
            a.add_cpu_sample(&h, 0.1, 0.1, at(m));
        }
        a.add_memory_peak(&h, 300.0 * 1024.0 * 1024.0, at(1440));
        c.groups.insert(Arc::from(*value), a);
    }
    BTreeMap::from([(Arc::from("agent"), c)])
}

#[test]
fn no_pods_and_no_history_say_so_in_both_conditions() {
    let status = status_of(
        &config(),
        &HistoryConfig::default(),
        &vpa(json!({}), json!({})),
        None,
        0,
        at(0),
    );
    let now = at(0).to_string();
    assert_eq!(
        status,
        json!({
            "conditions": [
                {"type": "NoPodsMatched", "status": "True", "lastTransitionTime": now,
                 "reason": "NoPodsMatched", "message": "No pods match this VPA object"},
                {"type": "RecommendationProvided", "status": "False", "lastTransitionTime": now,
                 "reason": "NoPodsMatched", "message": "No pods match this VPA object"},
            ],
            "recommendation": {},
            "observedGeneration": 4,
        })
    );
}

#[test]
fn a_condition_keeps_its_transition_time_while_its_status_holds() {
    let earlier = "2026-01-01T00:00:00Z";
    let old = json!({"conditions": [{"type": "RecommendationProvided", "status": "True", "lastTransitionTime": earlier}]});
    let status = status_of(
        &config(),
        &HistoryConfig::default(),
        &vpa(json!({}), old),
        Some(&history(&[("n1", 10)])),
        1,
        at(20),
    );
    assert_eq!(
        status["conditions"],
        json!([{"type": "RecommendationProvided", "status": "True", "lastTransitionTime": earlier}])
    );
}

#[test]
fn min_allowed_caps_target_and_bounds_but_not_the_uncapped_target_nor_other_resources() {
    let spec = json!({"resourcePolicy": {"containerPolicies": [{"containerName": "*", "minAllowed": {"cpu": "2"}}]}});
    let status = status_of(
        &config(),
        &HistoryConfig::default(),
        &vpa(spec, json!({})),
        Some(&history(&[("n1", 10)])),
        1,
        at(20),
    );
    let free = status_of(
        &config(),
        &HistoryConfig::default(),
        &vpa(json!({}), json!({})),
        Some(&history(&[("n1", 10)])),
        1,
        at(20),
    );
    let free = &free["recommendation"]["containerRecommendations"][0];
    let rec = &status["recommendation"]["containerRecommendations"][0];
    assert_eq!(rec["target"]["cpu"], "2");
    assert_eq!(rec["lowerBound"]["cpu"], "2");
    // Ten minutes of history make a wide upper bound, above the minimum.
    assert_eq!(rec["upperBound"]["cpu"], free["upperBound"]["cpu"]);
    assert_eq!(free["upperBound"]["cpu"], "20286m");
    assert_eq!(rec["uncappedTarget"]["cpu"], free["target"]["cpu"]);
    assert_eq!(rec["target"]["memory"], free["target"]["memory"]);
    assert_eq!(
        status["recommendationGroups"][0]["containerRecommendations"][0]["target"]["cpu"],
        "2"
    );
}

#[test]
fn only_controlled_resources_are_recommended() {
    let spec = json!({"resourcePolicy": {"containerPolicies": [{"containerName": "agent", "controlledResources": ["cpu"]}]}});
    let status = status_of(
        &config(),
        &HistoryConfig::default(),
        &vpa(spec, json!({})),
        Some(&history(&[("n1", 10)])),
        1,
        at(20),
    );
    let rec = &status["recommendation"]["containerRecommendations"][0];
    for field in ["target", "lowerBound", "upperBound", "uncappedTarget"] {
        let keys: Vec<_> = rec[field]
            .as_object()
            .map(|m| m.keys().cloned().collect())
            .unwrap_or_default();
        assert_eq!(keys, vec!["cpu".to_owned()], "{field}");
    }
}

#[test]
fn a_container_with_mode_off_gets_no_recommendation() {
    let spec = json!({"resourcePolicy": {"containerPolicies": [{"containerName": "agent", "mode": "Off"}]}});
    let status = status_of(
        &config(),
        &HistoryConfig::default(),
        &vpa(spec, json!({})),
        Some(&history(&[("n1", 10)])),
        1,
        at(20),
    );
    assert_eq!(status["recommendation"], json!({}));
    assert_eq!(status.get("recommendationGroups"), None);
}

#[test]
fn a_value_gets_a_group_once_it_has_the_minimum_samples() {
    let mut config = config();
    config.group_min_samples = 5;
    let status = status_of(
        &config,
        &HistoryConfig::default(),
        &vpa(json!({}), json!({})),
        Some(&history(&[("n1", 5), ("n2", 4)])),
        2,
        at(20),
    );
    let values: Vec<_> = status["recommendationGroups"]
        .as_array()
        .map(|g| g.iter().map(|g| g["scopeValue"].clone()).collect())
        .unwrap_or_default();
    assert_eq!(values, vec![json!("n1")]);
}

#[test]
fn groups_carry_targets_only_and_are_sorted_by_scope_value() {
    let status = status_of(
        &config(),
        &HistoryConfig::default(),
        &vpa(json!({}), json!({})),
        Some(&history(&[("zz", 3), ("aa", 3)])),
        2,
        at(20),
    );
    let groups = status["recommendationGroups"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    assert_eq!(groups.len(), 2);
    assert_eq!(groups[0]["scopeValue"], "aa");
    assert_eq!(groups[1]["scopeValue"], "zz");
    let keys: Vec<_> = groups[0]["containerRecommendations"][0]
        .as_object()
        .map(|m| m.keys().cloned().collect())
        .unwrap_or_default();
    assert_eq!(keys, vec!["containerName".to_owned(), "target".to_owned()]);
}

#[test]
fn bounds_alone_moving_is_not_a_reason_to_write() {
    let old = json!({"recommendation": {"containerRecommendations": [{"containerName": "a", "target": {"cpu": "100m"}, "lowerBound": {"cpu": "50m"}}]}});
    let bounds = json!({"recommendation": {"containerRecommendations": [{"containerName": "a", "target": {"cpu": "100m"}, "lowerBound": {"cpu": "60m"}}]}});
    let target = json!({"recommendation": {"containerRecommendations": [{"containerName": "a", "target": {"cpu": "110m"}, "lowerBound": {"cpu": "50m"}}]}});
    assert!(!needs_write(Some(&typed(&old)), &typed(&bounds)));
    assert!(needs_write(Some(&typed(&old)), &typed(&target)));
    assert!(needs_write(Some(&typed(&json!({}))), &typed(&old)));
    // No status, or one that does not read as a status, is written.
    assert!(needs_write(None, &typed(&old)));
    assert_eq!(vpa(json!({}), json!({"conditions": 7})).status, None);
    assert_eq!(vpa(json!({}), old.clone()).status, Some(typed(&old)));
    // A resource someone else put in a group's target is a difference.
    let ours = json!({"recommendationGroups": [{"scopeValue": "a", "containerRecommendations": [{"containerName": "c", "target": {"cpu": "1"}}]}]});
    let theirs = json!({"recommendationGroups": [{"scopeValue": "a", "containerRecommendations": [{"containerName": "c", "target": {"cpu": "1", "nvidia.com/gpu": "1"}}]}]});
    assert!(needs_write(Some(&typed(&theirs)), &typed(&ours)));
    assert!(!needs_write(Some(&typed(&ours)), &typed(&ours)));
}

#[test]
fn rounding_goes_up_to_the_next_multiple() {
    assert_eq!(round_up(101, 50), 150);
    assert_eq!(round_up(100, 50), 100);
    assert_eq!(round_up(0, 50), 0);
    assert_eq!(round_up(7, 1), 7);
}

#[test]
fn while_the_scope_feature_gates_scopes_off_the_groups_held_stay_as_they_are() {
    let held = json!([{"scopeValue": "old", "containerRecommendations": [
        {"containerName": "agent", "target": {"cpu": "50m", "memory": "64Mi"}}]}]);
    let old = json!({"recommendationGroups": held});
    let mut status = vpa_status(
        &config(),
        &HistoryConfig::default(),
        &vpa(json!({}), old.clone()),
        Some(&history(&[("n1", 30), ("n2", 30)])),
        2,
        at(40),
    );
    keep_groups(Some(&typed(&old)), &mut status);
    let written = status.to_value();
    assert_eq!(written["recommendationGroups"], held);
    // The VPA-wide recommendation is still computed and written.
    assert_eq!(
        written["recommendation"]["containerRecommendations"][0]["containerName"],
        "agent"
    );
    // A VPA that held none keeps none: nothing new is written.
    let mut fresh = vpa_status(
        &config(),
        &HistoryConfig::default(),
        &vpa(json!({}), json!({})),
        Some(&history(&[("n1", 30)])),
        1,
        at(40),
    );
    keep_groups(None, &mut fresh);
    assert_eq!(fresh.to_value().get("recommendationGroups"), None);
}
