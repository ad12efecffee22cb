//! Upstream's updater-side tables for the startup boost
//! (kubernetes/autoscaler 55c37cd5eb55, VPA 1.8.0), ported as data:
//! `TestGetExpiredStartupCPUBoostAnnotations` (pkg/utils/vpa/api_test.go)
//! and `TestCalculatePatches_MultiContainerResourceUpdates`
//! (pkg/updater/inplace/resource_updates_test.go), the second with the
//! recommendation as the pod's group target.

use serde_json::{json, Value};

use super::super::unboost::{boosted_containers, expired_boosts, unboost_sizing};
use super::super::*;
use super::{rec, NODE};
use crate::vpa::{ContainerPolicy, CpuBoost, RecommendationTable, StartupBoost, UpdateMode};

const NOW: i64 = 1_800_000_000;

fn duration(seconds: i32) -> Option<StartupBoost> {
    Some(StartupBoost {
        cpu: Some(CpuBoost {
            duration_seconds: Some(seconds),
            ..CpuBoost::default()
        }),
    })
}

/// (VPA-wide duration, per-container durations).
fn vpa_with(pod_level: Option<i32>, containers: &[(&str, i32)]) -> VpaPolicy {
    VpaPolicy {
        startup_boost: pod_level.and_then(duration),
        container_policies: containers
            .iter()
            .map(|(name, d)| ContainerPolicy {
                startup_boost: duration(*d),
                ..ContainerPolicy::new(*name)
            })
            .collect(),
        ..Default::default()
    }
}

/// (name, annotated containers, Ready, lastTransitionTime, VPA, expired).
type ExpiryCase = (
    &'static str,
    Vec<&'static str>,
    bool,
    Option<i64>,
    VpaPolicy,
    Vec<&'static str>,
);

#[test]
fn upstream_expired_startup_cpu_boost_annotations_table() {
    let past = Some(NOW - 120);
    let cases: Vec<ExpiryCase> = vec![
        (
            "No StartupBoost config",
            vec![],
            false,
            None,
            VpaPolicy::default(),
            vec![],
        ),
        (
            "No duration in StartupBoost, no annotation",
            vec![],
            false,
            None,
            vpa_with(Some(0), &[]),
            vec![],
        ),
        (
            "No duration in StartupBoost, with annotation and pod ready",
            vec!["c1"],
            true,
            None,
            vpa_with(Some(0), &[]),
            vec!["c1"],
        ),
        (
            "Pod not ready",
            vec!["c1"],
            false,
            None,
            vpa_with(Some(60), &[]),
            vec![],
        ),
        (
            "Duration passed",
            vec!["c1"],
            true,
            past,
            vpa_with(Some(60), &[]),
            vec!["c1"],
        ),
        (
            "Duration not passed",
            vec!["c1"],
            true,
            Some(NOW),
            vpa_with(Some(60), &[]),
            vec![],
        ),
        (
            "Container-level boost duration",
            vec!["c1", "c2"],
            true,
            past,
            vpa_with(None, &[("c1", 180), ("c2", 60)]),
            vec!["c2"],
        ),
        (
            "Container-level boost duration passed",
            vec!["c1", "c2"],
            true,
            Some(NOW - 240),
            vpa_with(None, &[("c1", 180), ("c2", 60)]),
            vec!["c1", "c2"],
        ),
        (
            "Pod-level boost duration is higher",
            vec!["c1"],
            true,
            Some(NOW - 240),
            vpa_with(Some(300), &[("c1", 180), ("c2", 60)]),
            vec!["c1"],
        ),
    ];
    for (name, annotated, ready, since, vpa, want) in cases {
        let keys: Vec<(String, String)> = annotated
            .iter()
            .map(|c| (format!("vpaCpuStartupBoost/{c}"), String::new()))
            .collect();
        let boosted = boosted_containers(keys.iter().map(|(k, v)| (k.as_str(), v.as_str())));
        let got = expired_boosts(boosted, &vpa, ready, since, NOW);
        assert_eq!(got, want, "{name}");
    }
}

fn pod(annotated: bool) -> Value {
    let annotations = if annotated {
        json!({"vpaCpuStartupBoost/c1": r#"{"requests":{"cpu":"100m"}}"#,
               "vpaCpuStartupBoost/c2": r#"{"requests":{"cpu":"100m"}}"#})
    } else {
        json!({})
    };
    json!({"metadata": {"annotations": annotations}, "spec": {"containers": [
        {"name": "c1", "resources": {"requests": {"cpu": "1m"}}},
        {"name": "c2", "resources": {"requests": {"cpu": "1m"}}}]}})
}

/// The in-place unboost's patch for `pod` under `vpa` at `NOW`, the pod
/// Ready for 5 minutes, as the operations upstream expects.
fn unboost_ops(pod: &Value, vpa: &VpaPolicy) -> Value {
    let bytes = serde_json::to_vec(pod).unwrap_or_default();
    let view = pod::PodView::from_json(&bytes).unwrap_or_else(|e| panic!("{e}"));
    let sizing = size_pod(
        &view,
        vpa,
        Placement::on_node(NODE),
        &[],
        MissingNodeRecommendation::Aggregate,
    );
    let names: Vec<&str> = boosted_containers(
        view.metadata
            .annotations
            .iter()
            .flat_map(|a| a.0.iter())
            .map(|(k, v)| (&**k, &**v)),
    )
    .collect();
    let expired = expired_boosts(names, vpa, true, Some(NOW - 300), NOW);
    let target = unboost_sizing(&view, vpa, &sizing, &expired).unwrap_or_else(|e| panic!("{e}"));
    serde_json::to_value(resize_ops(&view, &target)).unwrap_or_default()
}

fn vpa_mode(mode: UpdateMode, durations: &[(&str, i32)], target: Option<&str>) -> VpaPolicy {
    let recs: Vec<_> = target
        .map(|t| vec![rec("c1", &[("cpu", t)]), rec("c2", &[("cpu", t)])])
        .unwrap_or_default();
    VpaPolicy {
        update_mode: mode,
        recommendations: RecommendationTable::new([(NODE, recs.as_slice())], None),
        ..vpa_with(None, durations)
    }
}

#[test]
fn upstream_inplace_multi_container_resource_updates_table() {
    let cpu = |i: usize, v: &str| json!({"op": "add", "path": format!("/spec/containers/{i}/resources/requests/cpu"), "value": v});
    let cases: Vec<(&str, Value, VpaPolicy, Value)> = vec![
        ("UpdateMode Off - Only unboost expired container", pod(true),
            vpa_mode(UpdateMode::Off, &[("c1", 10), ("c2", 1000)], None), json!([cpu(0, "100m")])),
        ("UpdateMode Auto - ignores boosted unexpired containers naturally", pod(true),
            vpa_mode(UpdateMode::InPlaceOrRecreate, &[("c1", 10), ("c2", 1000)], Some("200m")), json!([cpu(0, "200m")])),
        ("No Unboost - both containers unexpired so they stay boosted safely", pod(true),
            vpa_mode(UpdateMode::InPlaceOrRecreate, &[("c1", 1000), ("c2", 1000)], Some("200m")), json!([])),
        ("Regular Recommendation - no startup boost annotations or config", pod(false),
            vpa_mode(UpdateMode::InPlaceOrRecreate, &[], Some("300m")), json!([cpu(0, "300m"), cpu(1, "300m")])),
        ("Regular Recommendation - UpdateMode Off - no startup boost annotations yields no patches", pod(false),
            vpa_mode(UpdateMode::Off, &[], Some("300m")), json!([])),
    ];
    for (name, pod, vpa, want) in cases {
        assert_eq!(unboost_ops(&pod, &vpa), want, "{name}");
    }
}
