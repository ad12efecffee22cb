//! The table of upstream cases: each asserts upstream's exact patch plus
//! nodescope's mark, then that a second pass changes nothing.

use super::*;

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
            // Upstream's insertRequestsForMissingRecommendations: the sidecar
            // has no recommendation, so it counts at its 500m request; 572m
            // is within min, and app keeps its own 72m (counted alone, 72m
            // would be scaled to 206m, a 412m limit, and with the sidecar's
            // 500m the pod would break the max).
            name: "under a pod limit range a container without a recommendation counts at its requests",
            pod: pod(json!([
                {"name": "app", "resources": {"requests": {"cpu": "100m"}, "limits": {"cpu": "200m"}}},
                {"name": "sidecar", "resources": {"requests": {"cpu": "500m"}, "limits": {"cpu": "500m"}}},
            ])),
            vpa: vpa(vec![rec("app", &[("cpu", "72m")])], vec![]),
            lrs: vec![lr(LimitKind::Pod, |l| {
                l.min = list(&[("cpu", "206m")]);
                l.max = list(&[("cpu", "700m")]);
            })],
            want: json!([
                add("/spec/containers/0/resources/requests/cpu", json!("72m")),
                add("/spec/containers/0/resources/limits/cpu", json!("144m")),
                updates(&format!("container 0: {NO_MEM_LIMIT}, cpu request, cpu limit; container 1: {NO_MEM_LIMIT}, cpu request, cpu limit")),
                observed("app, sidecar"),
            ]),
        },
        Case {
            name: "under a pod limit range max a container without a recommendation is scaled with the others",
            pod: pod(json!([
                {"name": "app", "resources": {"requests": {"cpu": "100m"}, "limits": {"cpu": "200m"}}},
                {"name": "sidecar", "resources": {"requests": {"cpu": "500m"}, "limits": {"cpu": "500m"}}},
            ])),
            vpa: vpa(vec![rec("app", &[("cpu", "72m")])], vec![]),
            lrs: vec![lr(LimitKind::Pod, |l| l.max = list(&[("cpu", "600m")]))],
            // Limits 144m + 500m = 644m over 600m: each target times 600/644,
            // rounded down (72m -> 67m, 500m -> 465m).
            want: json!([
                add("/spec/containers/0/resources/requests/cpu", json!("67m")),
                add("/spec/containers/0/resources/limits/cpu", json!("134m")),
                add("/spec/containers/1/resources/requests/cpu", json!("465m")),
                add("/spec/containers/1/resources/limits/cpu", json!("465m")),
                updates(&format!("container 0: {NO_MEM_LIMIT}, cpu request, cpu limit; container 1: {NO_MEM_LIMIT}, cpu request, cpu limit")),
                observed("app, sidecar"),
            ]),
        },
        Case {
            // Upstream's recommender leaves a mode-Off container out, so its
            // admission inserts it at its requests and lists it.
            name: "under a pod limit range a mode off container is listed at its requests",
            pod: pod(c1(json!({"requests": {"cpu": "100m"}}))),
            vpa: vpa(
                vec![rec("ghost", &[("cpu", "1")])],
                vec![policy("c1", |p| p.mode = ContainerMode::Off)],
            ),
            lrs: vec![lr(LimitKind::Pod, |l| l.min = list(&[("cpu", "50m")]))],
            want: json!([updates("container 0: cpu request"), observed("c1")]),
        },
        Case {
            // roundUpToFullUnit: 70m x 205/100 = 143.5m and 30m x 205/100 =
            // 61.5m are raised to 144m and 62m, so the sum reaches the min.
            name: "scaling up to a pod limit range min rounds cpu up to the millicore",
            pod: pod(json!([
                {"name": "c1", "resources": {"requests": {"cpu": "100m"}, "limits": {"cpu": "200m"}}},
                {"name": "c2", "resources": {"requests": {"cpu": "100m"}, "limits": {"cpu": "200m"}}},
            ])),
            vpa: vpa(vec![rec("c1", &[("cpu", "70m")]), rec("c2", &[("cpu", "30m")])], vec![]),
            lrs: vec![lr(LimitKind::Pod, |l| l.min = list(&[("cpu", "205m")]))],
            want: json!([
                add("/spec/containers/0/resources/requests/cpu", json!("144m")),
                add("/spec/containers/0/resources/limits/cpu", json!("288m")),
                add("/spec/containers/1/resources/requests/cpu", json!("62m")),
                add("/spec/containers/1/resources/limits/cpu", json!("124m")),
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
