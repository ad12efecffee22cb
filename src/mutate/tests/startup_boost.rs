//! Upstream's `TestCalculatePatches_StartupBoost`
//! (vertical-pod-autoscaler/pkg/admission-controller/resource/pod/patch/
//! resource_updates_test.go, kubernetes/autoscaler 55c37cd5eb55, VPA 1.8.0)
//! ported as data, case for case, with the recommendation as the pod's
//! group target. Upstream fakes the recommendation provider; here the
//! target goes through nodescope's real arithmetic (no policy, no
//! LimitRange: the target itself, limits in proportion), which gives the
//! recommendations upstream's cases hand in. Each case states the pod's
//! stored CPU request, limit and boost annotation after the patch, which
//! is what upstream's expected patches amount to; an error case leaves the
//! pod unchanged with upstream's error in the warning. Then exact patches
//! for a scoped VPA: the group's value times the factor.

use serde_json::{json, Value};

use super::super::boost::{mutate_pod_with, BoostSettings};
use super::super::*;
use super::{list, rec, NODE};
use crate::quantity::Quantity;
use crate::vpa::{
    BoostKind, ContainerPolicy, CpuBoost, RecommendationTable, StartupBoost, UpdateMode,
};

/// `WithCPUStartupBoost(type, factor, quantity, duration)`.
fn boost(kind: &str, factor: Option<i32>, quantity: Option<&str>, duration: i32) -> StartupBoost {
    StartupBoost {
        cpu: Some(CpuBoost {
            kind: match kind {
                "Factor" => BoostKind::Factor,
                "Quantity" => BoostKind::Quantity,
                other => BoostKind::Other(other.to_owned()),
            },
            factor,
            quantity: quantity.map(|q| Quantity::parse(q).unwrap_or_else(|e| panic!("{e}"))),
            duration_seconds: Some(duration),
        }),
    }
}

/// The stored (request, limit, boost annotation).
type Stored = (
    Option<&'static str>,
    Option<&'static str>,
    Option<&'static str>,
);

struct Case {
    name: &'static str,
    /// The pod's cpu request and limit.
    pod: (Option<&'static str>, Option<&'static str>),
    vpa_boost: Option<StartupBoost>,
    container_boost: Option<StartupBoost>,
    mode_off: bool,
    requests_only: bool,
    /// The group's cpu target; `None`: no recommendation.
    target: Option<&'static str>,
    max: Option<&'static str>,
    gate: bool,
    /// Stored (request, limit, boost annotation), or upstream's error.
    want: Result<Stored, &'static str>,
}

const F: &str = "Factor";

fn cases() -> Vec<Case> {
    let base = |name, pod, target, want| Case {
        name,
        pod,
        vpa_boost: Some(boost(F, Some(2), None, 10)),
        container_boost: None,
        mode_off: false,
        requests_only: false,
        target,
        max: None,
        gate: true,
        want,
    };
    let ann_1m = r#"{"requests":{"cpu":"1m"},"limits":{"cpu":"1m"}}"#;
    vec![
        base(
            "startup boost factor",
            (Some("1m"), Some("1m")),
            Some("100m"),
            Ok((Some("200m"), Some("200m"), Some(ann_1m))),
        ),
        Case {
            vpa_boost: Some(boost(F, Some(2), None, 0)),
            ..base(
                "startup boost factor with 0s duration",
                (Some("1m"), Some("1m")),
                Some("100m"),
                Ok((Some("200m"), Some("200m"), Some(ann_1m))),
            )
        },
        Case {
            vpa_boost: Some(boost("Quantity", None, Some("500m"), 10)),
            ..base(
                "startup boost quantity",
                (Some("1m"), Some("1m")),
                Some("100m"),
                Ok((Some("600m"), Some("600m"), Some(ann_1m))),
            )
        },
        Case {
            gate: false,
            ..base(
                "feature gate disabled",
                (Some("100m"), None),
                Some("100m"),
                Ok((Some("100m"), None, None)),
            )
        },
        Case {
            vpa_boost: Some(boost(F, Some(0), None, 10)),
            ..base(
                "invalid factor",
                (Some("1m"), None),
                Some("100m"),
                Err("boost factor must be >= 1"),
            )
        },
        Case {
            vpa_boost: Some(boost("Quantity", None, Some("200m"), 10)),
            ..base(
                "quantity less than request",
                (Some("400m"), Some("400m")),
                Some("500m"),
                Ok((
                    Some("700m"),
                    Some("700m"),
                    Some(r#"{"requests":{"cpu":"400m"},"limits":{"cpu":"400m"}}"#),
                )),
            )
        },
        Case {
            vpa_boost: Some(boost(F, Some(3), None, 1)),
            max: Some("40m"),
            ..base(
                "startup boost capped",
                (Some("1m"), Some("1m")),
                Some("20m"),
                Ok((Some("40m"), Some("40m"), Some(ann_1m))),
            )
        },
        Case {
            mode_off: true,
            ..base(
                "startup boost with scaling mode off",
                (Some("100m"), None),
                Some("1"),
                Ok((Some("100m"), None, None)),
            )
        },
        base(
            "startup boost no recommendation",
            (Some("100m"), Some("100m")),
            None,
            Ok((
                Some("200m"),
                Some("200m"),
                Some(r#"{"requests":{"cpu":"100m"},"limits":{"cpu":"100m"}}"#),
            )),
        ),
        Case {
            requests_only: true,
            ..base(
                "startup boost with ControlledValues=RequestsOnly",
                (Some("100m"), Some("300m")),
                Some("100m"),
                Ok((
                    Some("200m"),
                    Some("300m"),
                    Some(r#"{"requests":{"cpu":"100m"},"limits":{"cpu":"300m"}}"#),
                )),
            )
        },
        Case {
            requests_only: true,
            ..base(
                "startup boost with RequestsOnly - capped below limit to preserve pod Qos",
                (Some("100m"), Some("150m")),
                Some("100m"),
                Ok((
                    Some("149m"),
                    Some("150m"),
                    Some(r#"{"requests":{"cpu":"100m"},"limits":{"cpu":"150m"}}"#),
                )),
            )
        },
        base(
            "startup boost with ControlledValues=RequestsandLimits and limits set",
            (Some("100m"), Some("300m")),
            Some("150m"),
            Ok((
                Some("300m"),
                Some("900m"),
                Some(r#"{"requests":{"cpu":"100m"},"limits":{"cpu":"300m"}}"#),
            )),
        ),
        base(
            "startup boost with ControlledValues=RequestsandLimits and limits not set",
            (Some("100m"), None),
            Some("150m"),
            Ok((
                Some("300m"),
                None,
                Some(r#"{"requests":{"cpu":"100m"},"limits":{}}"#),
            )),
        ),
        Case {
            vpa_boost: Some(boost("Invalid", Some(2), None, 10)),
            ..base(
                "startup boost invalid type",
                (Some("1m"), None),
                Some("100m"),
                Err("unsupported startup boost type: Invalid"),
            )
        },
        Case {
            container_boost: Some(boost(F, Some(3), None, 10)),
            ..base(
                "startup boost container policy takes precedence",
                (Some("1m"), Some("1m")),
                Some("100m"),
                Ok((Some("300m"), Some("300m"), Some(ann_1m))),
            )
        },
    ]
}

fn vpa_of(case: &Case) -> VpaPolicy {
    let recs: Vec<_> = case
        .target
        .map(|t| rec("container1", &[("cpu", t)]))
        .into_iter()
        .collect();
    let mut policies = Vec::new();
    if case.mode_off || case.requests_only || case.container_boost.is_some() {
        let mut p = ContainerPolicy::new("container1");
        if case.mode_off {
            p.mode = ContainerMode::Off;
        }
        if case.requests_only {
            p.controlled_values = ControlledValues::RequestsOnly;
        }
        p.startup_boost = case.container_boost.clone();
        policies.push(p);
    }
    VpaPolicy {
        namespace: "default".to_owned(),
        name: "name".to_owned(),
        container_policies: policies,
        recommendations: RecommendationTable::new([(NODE, recs.as_slice())], None),
        startup_boost: case.vpa_boost.clone(),
        ..Default::default()
    }
}

fn run_with(pod: &Value, vpa: &VpaPolicy, settings: &BoostSettings) -> (Value, Mutation) {
    let bytes = serde_json::to_vec(pod).unwrap_or_default();
    let view = pod::PodView::from_json(&bytes).unwrap_or_else(|e| panic!("{e}"));
    let m = mutate_pod_with(
        &view,
        vpa,
        Placement::on_node(NODE),
        &[],
        MissingNodeRecommendation::Aggregate,
        settings,
    );
    let mut patched = pod.clone();
    json_patch::patch(&mut patched, &m.patch.operations()).unwrap_or_else(|e| panic!("{e}"));
    (patched, m)
}

#[test]
fn upstream_startup_boost_table() {
    for case in cases() {
        let mut resources = json!({});
        if let Some(r) = case.pod.0 {
            resources["requests"] = json!({"cpu": r});
        }
        if let Some(l) = case.pod.1 {
            resources["limits"] = json!({"cpu": l});
        }
        let pod = json!({"metadata": {"annotations": {}},
            "spec": {"containers": [{"name": "container1", "resources": resources}]}});
        let settings = BoostSettings {
            enabled: case.gate,
            max_allowed_cpu_boost: case
                .max
                .map(|m| Quantity::parse(m).unwrap_or_else(|e| panic!("{e}"))),
        };
        let vpa = vpa_of(&case);
        let (patched, m) = run_with(&pod, &vpa, &settings);
        let c = &patched["spec"]["containers"][0]["resources"];
        let got = (
            c["requests"]["cpu"].as_str(),
            c["limits"]["cpu"].as_str(),
            patched["metadata"]["annotations"]["vpaCpuStartupBoost/container1"].as_str(),
        );
        match case.want {
            Ok(want) => {
                assert_eq!(got, want, "{}: {:?}", case.name, m.warnings);
                // A reinvocation over the result changes nothing.
                let (_, again) = run_with(&patched, &vpa, &settings);
                assert!(
                    again.patch.is_empty(),
                    "{}: second pass {:?}",
                    case.name,
                    again.patch
                );
            }
            Err(error) => {
                assert!(m.patch.is_empty(), "{}: {:?}", case.name, m.patch);
                assert!(
                    m.warnings
                        .iter()
                        .any(|w| w.contains(error) && w.ends_with("pod left unchanged")),
                    "{}: {:?}",
                    case.name,
                    m.warnings
                );
            }
        }
    }
}

/// A scoped VPA: node-a-1's group (150m) times the factor, exactly; node
/// b's group (40m) likewise; the limit keeps the pod's ratio.
#[test]
fn a_scoped_vpa_boosts_the_group_value_with_exact_patches() {
    let a = [rec("agent", &[("cpu", "150m"), ("memory", "256Mi")])];
    let b = [rec("agent", &[("cpu", "40m"), ("memory", "64Mi")])];
    let vpa = VpaPolicy {
        namespace: "monitoring".to_owned(),
        name: "agent".to_owned(),
        recommendations: RecommendationTable::new([(NODE, &a[..]), ("node-b", &b[..])], None),
        startup_boost: Some(boost(F, Some(3), None, 30)),
        ..Default::default()
    };
    let pod = json!({"metadata": {"annotations": {}}, "spec": {"containers": [{"name": "agent",
        "resources": {"requests": {"cpu": "100m", "memory": "100Mi"}, "limits": {"cpu": "200m", "memory": "200Mi"}}}]}});
    let settings = BoostSettings {
        enabled: true,
        max_allowed_cpu_boost: None,
    };
    let patch = |node: &str| {
        let bytes = serde_json::to_vec(&pod).unwrap_or_default();
        let view = pod::PodView::from_json(&bytes).unwrap_or_else(|e| panic!("{e}"));
        let m = mutate_pod_with(
            &view,
            &vpa,
            Placement::on_node(node),
            &[],
            MissingNodeRecommendation::Aggregate,
            &settings,
        );
        serde_json::to_value(&m.patch).unwrap_or_default()
    };
    let ann =
        r#"{"requests":{"cpu":"100m","memory":"100Mi"},"limits":{"cpu":"200m","memory":"200Mi"}}"#;
    let mark = r#"{"agent":{"requests":{"cpu":"100m","memory":"100Mi"},"limits":{"cpu":"200m","memory":"200Mi"}}}"#;
    let expect = |cpu: &str, limit: &str, mem: &str, mem_limit: &str| {
        json!([
            {"op": "add", "path": "/spec/containers/0/resources/requests/cpu", "value": cpu},
            {"op": "add", "path": "/spec/containers/0/resources/requests/memory", "value": mem},
            {"op": "add", "path": "/spec/containers/0/resources/limits/cpu", "value": limit},
            {"op": "add", "path": "/spec/containers/0/resources/limits/memory", "value": mem_limit},
            {"op": "add", "path": "/metadata/annotations/vpaUpdates",
                "value": "Pod resources updated by agent: container 0: cpu request, memory request, cpu limit, memory limit"},
            {"op": "add", "path": "/metadata/annotations/vpaObservedContainers", "value": "agent"},
            {"op": "add", "path": "/metadata/annotations/vpaCpuStartupBoost~1agent", "value": ann},
            {"op": "add", "path": "/metadata/annotations/nodescope.dev~1original-resources", "value": mark},
        ])
    };
    // 150m x 3 = 450m; the limit keeps 200m/100m: 900m.
    assert_eq!(patch(NODE), expect("450m", "900m", "256Mi", "512Mi"));
    // 40m x 3 = 120m, limit 240m.
    assert_eq!(patch("node-b"), expect("120m", "240m", "64Mi", "128Mi"));
    // Without the gate: the group's value alone.
    let plain = {
        let bytes = serde_json::to_vec(&pod).unwrap_or_default();
        let view = pod::PodView::from_json(&bytes).unwrap_or_else(|e| panic!("{e}"));
        mutate_pod(
            &view,
            &vpa,
            Placement::on_node(NODE),
            &[],
            MissingNodeRecommendation::Aggregate,
        )
    };
    assert_eq!(
        plain
            .patch
            .iter()
            .find(|op| op.path.ends_with("requests/cpu"))
            .map(|op| op.value.clone()),
        Some(PatchValue::Text("150m".into()))
    );
    let _ = list(&[]);
}

/// updateMode Off applies no recommendation but still boosts, from the
/// pod's own request (upstream clears the recommendation first).
#[test]
fn update_mode_off_boosts_the_pods_own_request() {
    let a = [rec("agent", &[("cpu", "150m")])];
    let vpa = VpaPolicy {
        namespace: "monitoring".to_owned(),
        name: "agent".to_owned(),
        update_mode: UpdateMode::Off,
        recommendations: RecommendationTable::new([(NODE, &a[..])], None),
        startup_boost: Some(boost(F, Some(2), None, 30)),
        ..Default::default()
    };
    let pod = json!({"metadata": {"annotations": {}}, "spec": {"containers": [{"name": "agent",
        "resources": {"requests": {"cpu": "100m"}, "limits": {"cpu": "200m"}}}]}});
    let settings = BoostSettings {
        enabled: true,
        max_allowed_cpu_boost: None,
    };
    let (patched, m) = run_with(&pod, &vpa, &settings);
    let r = &patched["spec"]["containers"][0]["resources"];
    assert_eq!(
        (r["requests"]["cpu"].as_str(), r["limits"]["cpu"].as_str()),
        (Some("200m"), Some("400m")),
        "{:?}",
        m
    );
    assert_eq!(
        patched["metadata"]["annotations"]["vpaUpdates"],
        "Pod resources updated by agent: container 0: cpu request, cpu limit"
    );
}
