//! Reinvocation: a second pass over a patched pod changes nothing, and
//! nodescope's mark (or its absence, or an unreadable one) decides what the
//! pass recomputes from.

use super::*;

/// Found by the property tests: upstream's LimitRange max capping floors
/// twice (the boundary request, then the limit scaled from it; for a Pod
/// LimitRange, every container's share of the total), so recomputing from
/// the patched pod would move values by a rounding step. The second pass
/// sees this VPA's `vpaUpdates` and leaves the pod alone.
#[test]
fn a_second_pass_after_limit_range_max_capping_changes_nothing() {
    let p = pod(json!([
        {"name": "c1", "resources": {"requests": {"cpu": "4780m"}, "limits": {"cpu": "11687m"}}}
    ]));
    let v = vpa(vec![rec("c1", &[("cpu", "2556m")])], vec![]);
    let max = lr(LimitKind::Container, |l| l.max = list(&[("cpu", "6132m")]));
    assert_idempotent(&p, &v, &[max]);
}

/// The Pod LimitRange case: c1's 1m share of the pod total floors to "0".
#[test]
fn a_second_pass_after_pod_limit_range_max_capping_changes_nothing() {
    let p = pod(json!([
        {"name": "c1", "resources": {"requests": {"cpu": "1m"}}},
        {"name": "c2", "resources": {"requests": {"cpu": "881m"}, "limits": {"cpu": "10633m"}}}
    ]));
    let v = vpa(
        vec![rec("c1", &[("cpu", "1m")]), rec("c2", &[("cpu", "5012m")])],
        vec![],
    );
    let max = lr(LimitKind::Pod, |l| l.max = list(&[("cpu", "59815m")]));
    assert_idempotent(&p, &v, &[max]);
}

/// From fuzzing (`patch_builder`): a limit that overflowed to int64
/// milli-units ("capping limit to int64", as upstream) compares equal to a
/// request that also saturates as milli-units, so a second pass takes the
/// "request == limit" branch and rewrites the limit. Only reachable with
/// requests above 9.2e15 cores.
#[test]
fn a_second_pass_after_an_int64_capped_limit_changes_nothing() {
    let p = pod(json!([{"name": "c1", "resources": {
        "requests": {"cpu": "1m"}, "limits": {"cpu": "2"}}}]));
    let v = vpa(vec![rec("c1", &[("cpu", "8732346881675328309")])], vec![]);
    assert_idempotent(&p, &v, &[]);
}

/// Reinvocation over nodescope's own output: the mark holds the original
/// resources, so the pass recomputes the same values and changes nothing,
/// even though the pod now carries nodescope's values.
#[test]
fn a_pod_nodescope_already_resized_is_recomputed_from_its_mark_to_the_same_values() {
    let original = json!([{"name": "c1", "resources": {
        "requests": {"cpu": "100m"}, "limits": {"cpu": "300m"}}}]);
    let v = vpa(vec![rec("c1", &[("cpu", "250m")])], vec![]);
    let patched = assert_idempotent(&pod(original), &v, &[]);
    assert_eq!(
        patched["spec"]["containers"][0]["resources"],
        json!({"requests": {"cpu": "250m"}, "limits": {"cpu": "750m"}})
    );
    assert_eq!(
        patched["metadata"]["annotations"]["nodescope.dev/original-resources"],
        r#"{"c1":{"requests":{"cpu":"100m"},"limits":{"cpu":"300m"}}}"#
    );
}

/// Without nodescope's mark, a `vpaUpdates` naming this VPA was written by
/// someone else (upstream's admission controller, which words it the same
/// way): nodescope resizes the pod from the values it has now.
#[test]
fn a_vpa_updates_annotation_without_the_mark_does_not_stop_nodescope() {
    let p = json!({"metadata": {"annotations": {
        "vpaUpdates": "Pod resources updated by node-exporter: container 0: cpu request",
        "vpaObservedContainers": "c1"}},
     "spec": {"containers": [{"name": "c1", "resources": {"requests": {"cpu": "100m"}}}]}});
    let v = vpa(vec![rec("c1", &[("cpu", "250m")])], vec![]);
    let m = run(&p, &v, &[], MissingNodeRecommendation::LeaveUnchanged);
    assert_eq!(
        patch_json(&m),
        json!([
            add("/spec/containers/0/resources/requests/cpu", json!("250m")),
            mark(json!({"c1": {"requests": {"cpu": "100m"}}})),
        ])
    );
}

#[test]
fn an_unreadable_mark_is_reported_and_written_again() {
    let p = json!({"metadata": {"annotations": {"nodescope.dev/original-resources": "{oops"}},
     "spec": {"containers": [{"name": "c1", "resources": {"requests": {"cpu": "100m"}}}]}});
    let v = vpa(vec![rec("c1", &[("cpu", "250m")])], vec![]);
    let m = run(&p, &v, &[], MissingNodeRecommendation::LeaveUnchanged);
    assert_eq!(
        m.warnings,
        ["annotation nodescope.dev/original-resources: key must be a string at line 1 column 2; recomputing from the pod's current resources"]
    );
    assert_eq!(
        split_mark(&patch_json(&m)).1,
        Some(json!({"c1": {"requests": {"cpu": "100m"}}}))
    );
}
