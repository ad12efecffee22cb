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
/// it in validation, after webhooks run) is scaled like any other value: no
/// panic, a patch that applies, the request set to the target. The limit
/// scaled from it comes out negative, so the pod stays as invalid as it was.
#[test]
fn a_negative_request_is_scaled_without_panicking() {
    let p = pod(json!([
        {"name": "c1", "resources": {"requests": {"cpu": "-54279m"}, "limits": {"cpu": "3915027716m"}}}
    ]));
    let v = vpa(vec![rec("c1", &[("cpu", "3915027716m")])], vec![]);
    let m = run(&p, &v, &[], MissingNodeRecommendation::LeaveUnchanged);
    let mut patched = p.clone();
    json_patch::patch(&mut patched, &m.patch.operations()).unwrap_or_else(|e| panic!("{e}"));
    let res = &patched["spec"]["containers"][0]["resources"];
    assert_eq!(res["requests"]["cpu"], "3915027716m");
    let limit = Quantity::parse(res["limits"]["cpu"].as_str().unwrap_or_default());
    assert!(limit.is_ok_and(|l| l.sign() < 0), "{res}");
}
