//! Upstream's `TestApplyCapsToLimitRange` and
//! `TestCapPodMemoryWithUnderByteSplit` (kubernetes/autoscaler 55c37cd5eb55,
//! vertical-pod-autoscaler/pkg/utils/vpa/capping_test.go), run through
//! nodescope's `size_pod` with the pod's group in place of
//! `status.recommendation`: the requests it gives are upstream's capped
//! targets, and its notes upstream's capping annotations.

use super::*;

fn sized(pod: &Value, vpa: &VpaPolicy, lrs: &[LimitRangeItem]) -> Sizing {
    let bytes = serde_json::to_vec(pod).unwrap_or_default();
    let view = PodView::from_json(&bytes).unwrap_or_else(|e| panic!("{e}"));
    size_pod(
        &view,
        vpa,
        Placement::on_node(NODE),
        lrs,
        MissingNodeRecommendation::LeaveUnchanged,
    )
}

/// (container index, resource) -> the value, in units (millis for cpu).
fn value(s: &Sizing, index: usize, resource: &str) -> Option<i64> {
    let c = s.containers.iter().find(|c| c.index == index)?;
    let q = c.requests.get(resource)?;
    Some(if resource == "cpu" {
        q.milli_value()
    } else {
        q.value()
    })
}

#[test]
fn upstreams_apply_caps_to_limit_range() {
    let lrs = [lr(LimitKind::Container, |l| {
        l.max = list(&[("cpu", "1")]);
        l.min = list(&[("memory", "500M")]);
    })];
    let v = vpa(
        vec![rec("container", &[("cpu", "2"), ("memory", "200M")])],
        vec![],
    );
    let p = pod(json!([{"name": "container", "resources": {
        "requests": {"cpu": "1", "memory": "1G"}, "limits": {"cpu": "1", "memory": "1G"}}}]));
    let s = sized(&p, &v, &lrs);
    assert_eq!(value(&s, 0, "cpu"), Some(1000));
    assert_eq!(value(&s, 0, "memory"), Some(500_000_000));
    let mut notes = s.containers[0].notes.clone();
    notes.sort();
    assert_eq!(
        notes,
        [
            "cpu capped to fit Max in container LimitRange",
            "memory capped to fit Min in container LimitRange"
        ]
    );
}

#[test]
fn upstreams_cap_pod_memory_with_under_byte_split() {
    let v = vpa(
        vec![
            rec("container-1", &[("memory", "1Gi")]),
            rec("container-2", &[("memory", "2Gi")]),
        ],
        vec![],
    );
    let both = json!({"requests": {"memory": "50M"}, "limits": {"memory": "50M"}});
    let p = pod(json!([
        {"name": "container-1", "resources": both},
        {"name": "container-2", "resources": both},
    ]));
    // (name, the Pod LimitRange, container-1's and container-2's bytes)
    let cases = [
        (
            "cap to max",
            lr(LimitKind::Pod, |l| l.max = list(&[("memory", "1Gi")])),
            357_913_941,
            715_827_882,
        ),
        (
            "cap to min",
            lr(LimitKind::Pod, |l| l.min = list(&[("memory", "4Gi")])),
            1_431_655_765,
            2_863_311_530,
        ),
    ];
    for (name, limit_range, first, second) in cases {
        let s = sized(&p, &v, &[limit_range]);
        assert_eq!(
            (value(&s, 0, "memory"), value(&s, 1, "memory")),
            (Some(first), Some(second)),
            "{name}"
        );
    }
}

/// Upstream's `TestApplyLimitRangeMinToRequest`, as data
/// (`upstream_limit_range_min_to_request.json`, extracted from the same
/// file). Its case "Should use container status limits when lower than both
/// recommendation and pod limit range" is not ported: it builds the pod
/// with upstream's test builders and reads the container statuses'
/// resources, which a pod at admission does not have.
#[test]
fn upstreams_apply_limit_range_min_to_request_table() {
    let table: Value =
        serde_json::from_str(include_str!("upstream_limit_range_min_to_request.json"))
            .unwrap_or_else(|e| panic!("{e}"));
    let cases = table["cases"].as_array().cloned().unwrap_or_default();
    assert_eq!(cases.len(), 5);
    let pairs = |v: &Value| -> Vec<(String, String)> {
        v.as_object()
            .into_iter()
            .flatten()
            .map(|(k, q)| (k.clone(), q.as_str().unwrap_or_default().to_owned()))
            .collect()
    };
    let as_list = |v: &Value| {
        let p = pairs(v);
        let refs: Vec<(&str, &str)> = p.iter().map(|(a, b)| (a.as_str(), b.as_str())).collect();
        list(&refs)
    };
    for case in &cases {
        let name = case["name"].as_str().unwrap_or_default();
        let recs = case["recommendations"]
            .as_array()
            .into_iter()
            .flatten()
            .map(|r| {
                let p = pairs(&r["target"]);
                let refs: Vec<(&str, &str)> =
                    p.iter().map(|(a, b)| (a.as_str(), b.as_str())).collect();
                rec(r["container"].as_str().unwrap_or_default(), &refs)
            })
            .collect();
        let policies = match case["controlledValues"].as_str() {
            Some("RequestsOnly") => vec![policy("*", |p| {
                p.controlled_values = ControlledValues::RequestsOnly;
            })],
            Some(_) => vec![policy("*", |_| {})],
            None => vec![],
        };
        let v = vpa(recs, policies);
        let containers: Vec<Value> = case["containers"]
            .as_array()
            .into_iter()
            .flatten()
            .map(|c| json!({"name": c["name"], "resources": {"requests": c["requests"], "limits": c["limits"]}}))
            .collect();
        let p = pod(Value::Array(containers.clone()));
        let mut lrs = Vec::new();
        for (key, kind) in [
            ("containerLimitRange", LimitKind::Container),
            ("podLimitRange", LimitKind::Pod),
        ] {
            if case[key].is_object() {
                lrs.push(lr(kind, |l| {
                    l.min = as_list(&case[key]["min"]);
                    l.max = as_list(&case[key]["max"]);
                    l.default = as_list(&case[key]["default"]);
                }));
            }
        }
        let s = sized(&p, &v, &lrs);
        for expected in case["expect"].as_array().into_iter().flatten() {
            let container = expected["container"].as_str().unwrap_or_default();
            let index = containers
                .iter()
                .position(|c| c["name"] == container)
                .unwrap_or_else(|| panic!("{name}: {container}"));
            for (resource, text) in pairs(&expected["target"]) {
                let want =
                    crate::quantity::Quantity::parse(&text).unwrap_or_else(|e| panic!("{e}"));
                let want = if resource == "cpu" {
                    want.milli_value()
                } else {
                    want.value()
                };
                assert_eq!(
                    value(&s, index, &resource),
                    Some(want),
                    "{name}: {container} {resource}"
                );
            }
            let mut capping: Vec<String> = s
                .containers
                .iter()
                .find(|c| c.index == index)
                .map(|c| {
                    c.notes
                        .iter()
                        .filter(|n| n.contains("capped"))
                        .cloned()
                        .collect()
                })
                .unwrap_or_default();
            capping.sort();
            let mut want: Vec<String> = case["expectAnnotations"][container]
                .as_array()
                .into_iter()
                .flatten()
                .filter_map(|n| n.as_str().map(str::to_owned))
                .collect();
            want.sort();
            assert_eq!(capping, want, "{name}: {container} annotations");
        }
    }
}
