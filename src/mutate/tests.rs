//! Table tests: each case asserts the exact patch, then that a second pass
//! over the patched pod changes nothing.

use serde_json::{json, Value};

use super::*;
use crate::quantity::Quantity;
use crate::vpa::{
    ContainerPolicy, ContainerRecommendation, LimitKind, RecommendationTable, ResourceList,
};

const NODE: &str = "node-a-1";

fn list(pairs: &[(&str, &str)]) -> ResourceList {
    pairs
        .iter()
        .map(|(k, v)| {
            let q = Quantity::parse(v).unwrap_or_else(|e| panic!("{e}"));
            ((*k).to_owned(), q)
        })
        .collect()
}

fn rec(container: &str, target: &[(&str, &str)]) -> ContainerRecommendation {
    ContainerRecommendation {
        container_name: container.to_owned(),
        target: list(target),
    }
}

fn vpa(recs: Vec<ContainerRecommendation>, policies: Vec<ContainerPolicy>) -> VpaPolicy {
    VpaPolicy {
        namespace: "monitoring".to_owned(),
        name: "node-exporter".to_owned(),
        container_policies: policies,
        recommendations: RecommendationTable::new([(NODE, recs.as_slice())], None),
        ..Default::default()
    }
}

fn policy(name: &str, edit: impl FnOnce(&mut ContainerPolicy)) -> ContainerPolicy {
    let mut p = ContainerPolicy::new(name);
    edit(&mut p);
    p
}

fn lr(kind: LimitKind, edit: impl FnOnce(&mut LimitRangeItem)) -> LimitRangeItem {
    let mut l = LimitRangeItem::new(kind);
    edit(&mut l);
    l
}

/// A pod with an (empty) annotations map unless `annotations` is given.
fn pod(containers: Value) -> Value {
    json!({"metadata": {"namespace": "monitoring", "annotations": {}}, "spec": {"containers": containers}})
}

fn run(
    pod: &Value,
    vpa: &VpaPolicy,
    lrs: &[LimitRangeItem],
    missing: MissingNodeRecommendation,
) -> Mutation {
    let bytes = serde_json::to_vec(pod).unwrap_or_default();
    let view = PodView::from_json(&bytes).unwrap_or_else(|e| panic!("{e}"));
    mutate_pod(&view, vpa, Placement::on_node(NODE), lrs, missing)
}

fn patch_json(m: &Mutation) -> Value {
    serde_json::to_value(&m.patch).unwrap_or_default()
}

/// Applies the mutation and asserts a second pass yields an empty patch.
pub(super) fn assert_idempotent(pod: &Value, vpa: &VpaPolicy, lrs: &[LimitRangeItem]) -> Value {
    let first = run(pod, vpa, lrs, MissingNodeRecommendation::Aggregate);
    let mut patched = pod.clone();
    json_patch::patch(&mut patched, &first.patch.operations()).unwrap_or_else(|e| panic!("{e}"));
    let second = run(&patched, vpa, lrs, MissingNodeRecommendation::Aggregate);
    assert_eq!(patch_json(&second), json!([]), "second pass over {patched}");
    patched
}

fn updates(text: &str) -> Value {
    json!({"op": "add", "path": "/metadata/annotations/vpaUpdates", "value": format!("Pod resources updated by node-exporter: {text}")})
}

fn observed(names: &str) -> Value {
    json!({"op": "add", "path": "/metadata/annotations/vpaObservedContainers", "value": names})
}

fn add(path: &str, value: Value) -> Value {
    json!({"op": "add", "path": path, "value": value})
}

/// nodescope's mark (see `mark`): the original resources it recorded.
fn mark(originals: Value) -> Value {
    add(
        "/metadata/annotations/nodescope.dev~1original-resources",
        json!(originals.to_string()),
    )
}

/// The patch without nodescope's mark, and the mark's recorded originals.
fn split_mark(patch: &Value) -> (Value, Option<Value>) {
    const KEY: &str = "nodescope.dev/original-resources";
    let parse = |v: &Value| -> Value {
        serde_json::from_str(v.as_str().unwrap_or_default()).unwrap_or(Value::Null)
    };
    let mut found = None;
    let mut rest = Vec::new();
    for op in patch.as_array().into_iter().flatten() {
        if op["path"] == "/metadata/annotations/nodescope.dev~1original-resources" {
            found = Some(parse(&op["value"]));
            continue;
        }
        let mut op = op.clone();
        if op["path"] == "/metadata/annotations" {
            if let Some(map) = op["value"].as_object_mut() {
                found = map.remove(KEY).map(|v| parse(&v)).or(found);
            }
        }
        rest.push(op);
    }
    (Value::Array(rest), found)
}

struct Case {
    name: &'static str,
    pod: Value,
    vpa: VpaPolicy,
    lrs: Vec<LimitRangeItem>,
    want: Value,
}

const NO_CPU_LIMIT: &str = "cpu: limit NOT set since originalLimit is nil or 0";
const NO_MEM_LIMIT: &str = "memory: limit NOT set since originalLimit is nil or 0";

fn cases() -> Vec<Case> {
    let c1 = |resources: Value| json!([{"name": "c1", "resources": resources}]);
    vec![
        Case {
            name: "new cpu request creates resources and requests maps",
            pod: pod(json!([{"name": "c1"}])),
            vpa: vpa(vec![rec("c1", &[("cpu", "1")])], vec![]),
            lrs: vec![],
            want: json!([
                add("/spec/containers/0/resources", json!({})),
                add("/spec/containers/0/resources/requests", json!({})),
                add("/spec/containers/0/resources/requests/cpu", json!("1")),
                updates("container 0: cpu request"),
                observed("c1"),
            ]),
        },
        Case {
            name: "replacement cpu request",
            pod: pod(c1(json!({"requests": {"cpu": "0"}}))),
            vpa: vpa(vec![rec("c1", &[("cpu", "1")])], vec![]),
            lrs: vec![],
            want: json!([
                add("/spec/containers/0/resources/requests/cpu", json!("1")),
                updates("container 0: cpu request"),
                observed("c1"),
            ]),
        },
        Case {
            name: "two containers",
            pod: pod(json!([{"name": "c1", "resources": {"requests": {"cpu": "0"}}}, {"name": "c2"}])),
            vpa: vpa(vec![rec("c1", &[("cpu", "1")]), rec("c2", &[("cpu", "2")])], vec![]),
            lrs: vec![],
            want: json!([
                add("/spec/containers/0/resources/requests/cpu", json!("1")),
                add("/spec/containers/1/resources", json!({})),
                add("/spec/containers/1/resources/requests", json!({})),
                add("/spec/containers/1/resources/requests/cpu", json!("2")),
                updates("container 0: cpu request; container 1: cpu request"),
                observed("c1, c2"),
            ]),
        },
        Case {
            name: "requests only pod gets cpu and memory requests and no limits",
            pod: pod(c1(json!({"requests": {"cpu": "100m", "memory": "100Mi"}}))),
            vpa: vpa(vec![rec("c1", &[("cpu", "250m"), ("memory", "200Mi")])], vec![]),
            lrs: vec![],
            want: json!([
                add("/spec/containers/0/resources/requests/cpu", json!("250m")),
                add("/spec/containers/0/resources/requests/memory", json!("200Mi")),
                updates("container 0: cpu request, memory request"),
                observed("c1"),
            ]),
        },
        Case {
            name: "keeps cpu limit to request ratio when target doubles",
            pod: pod(c1(json!({"requests": {"cpu": "1"}, "limits": {"cpu": "2"}}))),
            vpa: vpa(vec![rec("c1", &[("cpu", "2")])], vec![]),
            lrs: vec![],
            want: json!([
                add("/spec/containers/0/resources/requests/cpu", json!("2")),
                add("/spec/containers/0/resources/limits/cpu", json!("4")),
                updates(&format!("container 0: {NO_MEM_LIMIT}, cpu request, cpu limit")),
                observed("c1"),
            ]),
        },
        Case {
            name: "keeps memory limit to request ratio when target doubles",
            pod: pod(c1(json!({"requests": {"memory": "100Mi"}, "limits": {"memory": "200Mi"}}))),
            vpa: vpa(vec![rec("c1", &[("memory", "200Mi")])], vec![]),
            lrs: vec![],
            want: json!([
                add("/spec/containers/0/resources/requests/memory", json!("200Mi")),
                add("/spec/containers/0/resources/limits/memory", json!("400Mi")),
                updates(&format!("container 0: {NO_CPU_LIMIT}, memory request, memory limit")),
                observed("c1"),
            ]),
        },
        Case {
            name: "limit equal to request stays equal",
            pod: pod(c1(json!({"requests": {"cpu": "500m"}, "limits": {"cpu": "500m"}}))),
            vpa: vpa(vec![rec("c1", &[("cpu", "700m")])], vec![]),
            lrs: vec![],
            want: json!([
                add("/spec/containers/0/resources/requests/cpu", json!("700m")),
                add("/spec/containers/0/resources/limits/cpu", json!("700m")),
                updates(&format!("container 0: {NO_MEM_LIMIT}, cpu request, cpu limit")),
                observed("c1"),
            ]),
        },
        Case {
            name: "limit without request makes the limit follow the new request",
            pod: pod(c1(json!({"limits": {"cpu": "300m"}}))),
            vpa: vpa(vec![rec("c1", &[("cpu", "200m")])], vec![]),
            lrs: vec![],
            want: json!([
                add("/spec/containers/0/resources/requests", json!({})),
                add("/spec/containers/0/resources/requests/cpu", json!("200m")),
                add("/spec/containers/0/resources/limits/cpu", json!("200m")),
                updates(&format!("container 0: {NO_MEM_LIMIT}, cpu request, cpu limit")),
                observed("c1"),
            ]),
        },
        Case {
            name: "requests only policy caps the request at the existing limit",
            pod: pod(c1(json!({"requests": {"cpu": "100m"}, "limits": {"cpu": "300m"}}))),
            vpa: vpa(
                vec![rec("c1", &[("cpu", "500m")])],
                vec![policy("c1", |p| p.controlled_values = ControlledValues::RequestsOnly)],
            ),
            lrs: vec![],
            want: json!([
                add("/spec/containers/0/resources/requests/cpu", json!("300m")),
                updates("container 0: cpu capped to container limit, cpu request"),
                observed("c1"),
            ]),
        },
        Case {
            name: "min and max allowed cap the target and are annotated",
            pod: pod(c1(json!({"requests": {"cpu": "50m", "memory": "500Mi"}}))),
            vpa: vpa(
                vec![rec("c1", &[("cpu", "100m"), ("memory", "2Gi")])],
                vec![policy("*", |p| {
                    p.min_allowed = list(&[("cpu", "200m")]);
                    p.max_allowed = list(&[("memory", "1Gi")]);
                })],
            ),
            lrs: vec![],
            want: json!([
                add("/spec/containers/0/resources/requests/cpu", json!("200m")),
                add("/spec/containers/0/resources/requests/memory", json!("1Gi")),
                updates("container 0: cpu capped to minAllowed, memory capped to maxAllowed, cpu request, memory request"),
                observed("c1"),
            ]),
        },
        Case {
            name: "exact container policy wins over the wildcard",
            pod: pod(c1(json!({"requests": {"cpu": "50m"}}))),
            vpa: vpa(
                vec![rec("c1", &[("cpu", "100m")])],
                vec![
                    policy("*", |p| p.mode = ContainerMode::Off),
                    policy("c1", |p| p.max_allowed = list(&[("cpu", "80m")])),
                ],
            ),
            lrs: vec![],
            want: json!([
                add("/spec/containers/0/resources/requests/cpu", json!("80m")),
                updates("container 0: cpu capped to maxAllowed, cpu request"),
                observed("c1"),
            ]),
        },
        Case {
            name: "container mode off and uncontrolled resources are left alone",
            pod: pod(json!([{"name": "c1", "resources": {}}, {"name": "c2", "resources": {"requests": {}}}])),
            vpa: vpa(
                vec![rec("c1", &[("cpu", "1")]), rec("c2", &[("cpu", "2"), ("memory", "1Gi")])],
                vec![
                    policy("c1", |p| p.mode = ContainerMode::Off),
                    policy("c2", |p| p.controlled_resources = vec!["memory".to_owned()]),
                ],
            ),
            lrs: vec![],
            want: json!([
                add("/spec/containers/1/resources/requests/memory", json!("1Gi")),
                updates("container 1: memory request"),
                observed("c1, c2"),
            ]),
        },
        Case {
            name: "container without recommendation only gets observed annotation",
            pod: pod(c1(json!({}))),
            vpa: vpa(vec![rec("other", &[("cpu", "1")])], vec![]),
            lrs: vec![],
            want: json!([observed("c1")]),
        },
        Case {
            name: "limit overflowing int64 is capped and annotated",
            pod: pod(c1(json!({"requests": {"cpu": "1m"}, "limits": {"cpu": "10M"}}))),
            vpa: vpa(vec![rec("c1", &[("cpu", "1G")])], vec![]),
            lrs: vec![],
            want: json!([
                add("/spec/containers/0/resources/requests/cpu", json!("1G")),
                add("/spec/containers/0/resources/limits/cpu", json!("9223372036854775807m")),
                updates(&format!("container 0: cpu: failed to keep limit to request ratio; capping limit to int64, {NO_MEM_LIMIT}, cpu request, cpu limit")),
                observed("c1"),
            ]),
        },
        Case {
            name: "container limit range max caps the request so the limit fits",
            pod: pod(c1(json!({"requests": {"cpu": "100m"}, "limits": {"cpu": "200m"}}))),
            vpa: vpa(vec![rec("c1", &[("cpu", "800m")])], vec![]),
            lrs: vec![lr(LimitKind::Container, |l| l.max = list(&[("cpu", "1")]))],
            want: json!([
                add("/spec/containers/0/resources/requests/cpu", json!("500m")),
                add("/spec/containers/0/resources/limits/cpu", json!("1")),
                updates(&format!("container 0: cpu capped to fit Max in container LimitRange, {NO_MEM_LIMIT}, cpu request, cpu limit")),
                observed("c1"),
            ]),
        },
        Case {
            name: "container limit range min raises the request",
            pod: pod(c1(json!({"requests": {"memory": "100Mi"}}))),
            vpa: vpa(vec![rec("c1", &[("memory", "128Mi")])], vec![]),
            lrs: vec![lr(LimitKind::Container, |l| l.min = list(&[("memory", "256Mi")]))],
            want: json!([
                add("/spec/containers/0/resources/requests/memory", json!("256Mi")),
                updates("container 0: memory capped to fit Min in container LimitRange, memory request"),
                observed("c1"),
            ]),
        },
        Case {
            name: "limit range default acts as the original limit",
            pod: pod(c1(json!({"requests": {"cpu": "250m"}}))),
            vpa: vpa(vec![rec("c1", &[("cpu", "500m")])], vec![]),
            lrs: vec![lr(LimitKind::Container, |l| l.default = list(&[("cpu", "1")]))],
            want: json!([
                add("/spec/containers/0/resources/requests/cpu", json!("500m")),
                add("/spec/containers/0/resources/limits", json!({})),
                add("/spec/containers/0/resources/limits/cpu", json!("2")),
                updates(&format!("container 0: {NO_MEM_LIMIT}, cpu request, cpu limit")),
                observed("c1"),
            ]),
        },
        Case {
            name: "pod limit range max scales all containers proportionally",
            pod: pod(json!([
                {"name": "c1", "resources": {"requests": {"cpu": "100m"}, "limits": {"cpu": "200m"}}},
                {"name": "c2", "resources": {"requests": {"cpu": "100m"}, "limits": {"cpu": "200m"}}},
            ])),
            vpa: vpa(vec![rec("c1", &[("cpu", "400m")]), rec("c2", &[("cpu", "600m")])], vec![]),
            lrs: vec![lr(LimitKind::Pod, |l| l.max = list(&[("cpu", "1")]))],
            want: json!([
                add("/spec/containers/0/resources/requests/cpu", json!("200m")),
                add("/spec/containers/0/resources/limits/cpu", json!("400m")),
                add("/spec/containers/1/resources/requests/cpu", json!("300m")),
                add("/spec/containers/1/resources/limits/cpu", json!("600m")),
                updates(&format!("container 0: {NO_MEM_LIMIT}, cpu request, cpu limit; container 1: {NO_MEM_LIMIT}, cpu request, cpu limit")),
                observed("c1, c2"),
            ]),
        },
        Case {
            name: "resource names are escaped as json pointer tokens",
            pod: pod(c1(json!({"requests": {"example.com/gpu": "1"}}))),
            vpa: vpa(
                vec![rec("c1", &[("example.com/gpu", "2"), ("a~b", "3")])],
                vec![policy("c1", |p| p.controlled_resources = vec!["example.com/gpu".to_owned(), "a~b".to_owned()])],
            ),
            lrs: vec![],
            want: json!([
                add("/spec/containers/0/resources/requests/a~0b", json!("3")),
                add("/spec/containers/0/resources/requests/example.com~1gpu", json!("2")),
                updates("container 0: a~b request, example.com/gpu request"),
                observed("c1"),
            ]),
        },
        Case {
            name: "missing annotations map is created whole",
            pod: json!({"metadata": {"labels": {"a": "b"}}, "spec": {"containers": [{"name": "c1", "resources": {"requests": {}}}]}}),
            vpa: vpa(vec![rec("c1", &[("cpu", "1")])], vec![]),
            lrs: vec![],
            want: json!([
                add("/spec/containers/0/resources/requests/cpu", json!("1")),
                add("/metadata/annotations", json!({
                    "vpaObservedContainers": "c1",
                    "vpaUpdates": "Pod resources updated by node-exporter: container 0: cpu request",
                })),
            ]),
        },
        Case {
            name: "present annotations are overwritten key by key",
            pod: json!({"metadata": {"annotations": {"x/y": "z", "vpaObservedContainers": "old"}},
                        "spec": {"containers": [{"name": "c1", "resources": {"requests": {"cpu": "1"}}}]}}),
            vpa: vpa(vec![rec("c1", &[("cpu", "1")])], vec![]),
            lrs: vec![],
            want: json!([updates("container 0: cpu request"), observed("c1")]),
        },
    ]
}

#[test]
fn produces_the_exact_upstream_patch_for_every_table_case() {
    for case in cases() {
        let m = run(
            &case.pod,
            &case.vpa,
            &case.lrs,
            MissingNodeRecommendation::LeaveUnchanged,
        );
        // Upstream's patch exactly, plus nodescope's mark: the containers it
        // planned, each with the resources the pod had.
        let (upstream, marked) = split_mark(&patch_json(&m));
        assert_eq!(upstream, case.want, "{}", case.name);
        let containers = case.pod["spec"]["containers"]
            .as_array()
            .cloned()
            .unwrap_or_default();
        for (name, recorded) in marked.iter().flat_map(|m| m.as_object()).flatten() {
            let container = containers
                .iter()
                .find(|c| c["name"] == *name)
                .unwrap_or_else(|| panic!("{}: the mark names {name}", case.name));
            let resources = &container["resources"];
            for field in ["requests", "limits"] {
                assert_eq!(
                    recorded.get(field),
                    resources.get(field),
                    "{}: {name} {field}",
                    case.name
                );
            }
        }
        let resized = case.want.to_string().contains("vpaUpdates");
        assert_eq!(marked.is_some(), resized, "{}: {marked:?}", case.name);
        assert!(m.warnings.is_empty(), "{}: {:?}", case.name, m.warnings);
        assert_idempotent(&case.pod, &case.vpa, &case.lrs);
    }
}

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

mod fixture;
mod upstream;
