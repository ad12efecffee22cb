//! Input the mutation cannot fully use: a node without a recommendation,
//! quantities that do not parse or are negative. Never a panic; what is
//! skipped is named in a warning.

use super::*;

#[test]
fn missing_node_leaves_resources_and_warns_with_the_node_name() {
    let mut v = vpa(vec![], vec![]);
    v.recommendations = RecommendationTable::new([], Some(&[rec("c1", &[("cpu", "1")])]));
    let p = pod(json!([{"name": "c1", "resources": {}}]));
    let m = run(&p, &v, &[], MissingNodeRecommendation::LeaveUnchanged);
    assert_eq!(patch_json(&m), json!([observed("c1")]));
    assert_eq!(
        m.warnings,
        [
            r#"no recommendation for node "node-a-1" in VerticalPodAutoscaler monitoring/node-exporter; resources left unchanged"#
        ]
    );
    let m = run(&p, &v, &[], MissingNodeRecommendation::Aggregate);
    assert_eq!(
        patch_json(&m),
        json!([
            add("/spec/containers/0/resources/requests", json!({})),
            add("/spec/containers/0/resources/requests/cpu", json!("1")),
            updates("container 0: cpu request"),
            observed("c1"),
            mark(json!({"c1": {}})),
        ])
    );
    assert_eq!(m.warnings.len(), 1);
    assert!(m.warnings[0].ends_with("using the VerticalPodAutoscaler-wide recommendation"));
}

#[test]
fn unparsable_pod_quantity_skips_the_container_with_a_warning() {
    let p = pod(json!([{"name": "c1", "resources": {"requests": {"cpu": "lots"}}}]));
    let m = run(
        &p,
        &vpa(vec![rec("c1", &[("cpu", "1")])], vec![]),
        &[],
        MissingNodeRecommendation::LeaveUnchanged,
    );
    assert_eq!(patch_json(&m), json!([observed("c1")]));
    assert_eq!(m.warnings.len(), 1);
    assert!(m.warnings[0].contains("\"lots\""), "{}", m.warnings[0]);
}

/// From fuzzing (`review_mutate`): a quantity no apiserver would send in one
/// container leaves that container as it is, with a warning naming it and
/// the field, while the others still get their recommendation.
#[test]
fn an_unparsable_quantity_in_one_container_leaves_only_that_container_unchanged() {
    let p = pod(json!([
        {"name": "c0", "resources": {"requests": {"cpu": "10m"}}},
        {"name": "c1", "resources": {"requests": {"cpu": "10mf:hostPID"}}}
    ]));
    let m = run(
        &p,
        &vpa(
            vec![rec("c0", &[("cpu", "1")]), rec("c1", &[("cpu", "1")])],
            vec![],
        ),
        &[],
        MissingNodeRecommendation::LeaveUnchanged,
    );
    assert_eq!(
        patch_json(&m),
        json!([
            add("/spec/containers/0/resources/requests/cpu", json!("1")),
            updates("container 0: cpu request"),
            observed("c0, c1"),
            mark(json!({"c0": {"requests": {"cpu": "10m"}}})),
        ])
    );
    assert_eq!(
        m.warnings,
        vec![
            "container \"c1\": resources.requests[\"cpu\"]: quantity \"10mf:hostPID\" is not a number followed by an optional suffix (e.g. \"1.5\", \"250m\", \"12e6\"); container left unchanged"
                .to_owned()
        ]
    );
}

/// From fuzzing (`patch_builder`): a negative request (the apiserver rejects
/// it in validation, after webhooks run) scales the limit below zero. No
/// negative quantity is ever patched: the container is left as it came,
/// with a warning, and counted.
#[test]
fn a_negative_request_leaves_the_container_unchanged_rather_than_patch_a_negative_limit() {
    let p = pod(json!([
        {"name": "c1", "resources": {"requests": {"cpu": "-54279m"}, "limits": {"cpu": "3915027716m"}}}
    ]));
    let v = vpa(vec![rec("c1", &[("cpu", "3915027716m")])], vec![]);
    let m = run(&p, &v, &[], MissingNodeRecommendation::LeaveUnchanged);
    assert_eq!(patch_json(&m), json!([observed("c1")]));
    assert_eq!(m.unusable, 1);
    assert_eq!(
        m.warnings,
        [
            "container \"c1\": its cpu limit would be \"-282382542365337m\", a negative quantity (from a negative request or maxAllowed); container left unchanged"
        ]
    );
}

/// Issue #30: the VPA CRD's pattern lets a target be negative. Such a
/// target is no recommendation for that container: unchanged, said and
/// counted; the other containers still get theirs.
#[test]
fn a_negative_target_is_no_recommendation_for_that_container() {
    let p = pod(json!([
        {"name": "app", "resources": {"requests": {"cpu": "100m"}, "limits": {"cpu": "200m"}}},
        {"name": "sidecar", "resources": {"requests": {"cpu": "10m"}}}
    ]));
    let v = vpa(
        vec![
            rec("app", &[("cpu", "-150m"), ("memory", "64Mi")]),
            rec("sidecar", &[("cpu", "20m")]),
        ],
        vec![],
    );
    let m = run(&p, &v, &[], MissingNodeRecommendation::LeaveUnchanged);
    assert_eq!(
        patch_json(&m),
        json!([
            add("/spec/containers/1/resources/requests/cpu", json!("20m")),
            updates("container 1: cpu request"),
            observed("app, sidecar"),
            mark(json!({"sidecar": {"requests": {"cpu": "10m"}}})),
        ])
    );
    assert_eq!(m.unusable, 1);
    assert_eq!(
        m.warnings,
        [
            "container \"app\": its cpu target \"-150m\" is negative in VerticalPodAutoscaler monitoring/node-exporter, so it has no applicable recommendation; container left unchanged"
        ]
    );
}

/// A VPA-wide fallback that is negative is treated the same as a group.
#[test]
fn a_negative_fallback_target_leaves_the_pod_unchanged() {
    let p = pod(json!([{"name": "app", "resources": {"requests": {"cpu": "100m"}}}]));
    let mut v = vpa(vec![], vec![]);
    v.recommendations = RecommendationTable::new([], Some(&[rec("app", &[("cpu", "-1")])]));
    let m = run(&p, &v, &[], MissingNodeRecommendation::Aggregate);
    assert_eq!(patch_json(&m), json!([observed("app")]));
    assert_eq!(m.unusable, 1);
    assert_eq!(m.warnings.len(), 2, "{:?}", m.warnings);
    assert!(
        m.warnings[1].starts_with("container \"app\": its cpu target \"-1\" is negative"),
        "{:?}",
        m.warnings
    );
}
