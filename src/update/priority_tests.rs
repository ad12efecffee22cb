//! Upstream's `priority_processor_test.go` and
//! `update_priority_calculator_test.go` (kubernetes/autoscaler 55c37cd5),
//! as data. Each case keeps upstream's name.

use super::*;

fn list(cpu: &str, memory: &str) -> ResourceList {
    let mut l = ResourceList::new();
    for (r, t) in [("cpu", cpu), ("memory", memory)] {
        if !t.is_empty() {
            l.insert(
                crate::vpa::resource_name(r),
                Quantity::parse(t).unwrap_or_else(|e| panic!("{t}: {e}")),
            );
        }
    }
    l
}

/// (container, cpu request, memory request)
type PodSpec = &'static [(&'static str, &'static str, &'static str)];
/// (container, target, lower, upper), each (cpu, memory)
type Rec = (
    &'static str,
    (&'static str, &'static str),
    Option<(&'static str, &'static str)>,
    Option<(&'static str, &'static str)>,
);

fn priority(pod: PodSpec, recs: &[Rec]) -> PodPriority {
    let owned: Vec<(
        &str,
        ResourceList,
        Option<ResourceList>,
        Option<ResourceList>,
    )> = recs
        .iter()
        .map(|(n, t, l, u)| {
            (
                *n,
                list(t.0, t.1),
                l.map(|l| list(l.0, l.1)),
                u.map(|u| list(u.0, u.1)),
            )
        })
        .collect();
    let recommended: Vec<Recommended<'_>> = owned
        .iter()
        .map(|(name, target, lower, upper)| Recommended {
            name,
            target,
            lower: lower.as_ref(),
            upper: upper.as_ref(),
        })
        .collect();
    update_priority(
        pod.iter().map(|c| c.0),
        &recommended,
        |name| {
            pod.iter()
                .find(|c| c.0 == name)
                .map(|c| list(c.1, c.2))
                .unwrap_or_default()
        },
        None,
    )
}

const C: &str = "test-container";
const C2: &str = "test-container-2";

#[test]
fn get_update_priority() {
    #[allow(clippy::type_complexity)]
    let cases: &[(&str, PodSpec, &[Rec], (bool, f64, bool))] = &[
        (
            "simple scale up",
            &[(C, "2", "")],
            &[(C, ("10", ""), None, None)],
            (false, 4.0, true),
        ),
        (
            "simple scale down",
            &[(C, "4", "")],
            &[(C, ("2", ""), None, None)],
            (false, 0.5, false),
        ),
        (
            "no resource diff",
            &[(C, "2", "")],
            &[(C, ("2", ""), None, None)],
            (false, 0.0, false),
        ),
        (
            "scale up on milliquanitites",
            &[(C, "10m", "")],
            &[(C, ("900m", ""), None, None)],
            (false, 89.0, true),
        ),
        (
            "scale up outside recommended range",
            &[(C, "4", "")],
            &[(C, ("10", ""), Some(("6", "")), Some(("14", "")))],
            (true, 1.5, true),
        ),
        (
            "scale down outside recommended range",
            &[(C, "8", "")],
            &[(C, ("2", ""), Some(("1", "")), Some(("3", "")))],
            (true, 0.75, false),
        ),
        (
            "multiple resources, both scale up",
            &[(C, "3", "10M")],
            &[(C, ("6", "20M"), None, None)],
            (false, 2.0, true),
        ),
        (
            "multiple resources, only one scale up",
            &[(C, "4", "10M")],
            &[(C, ("2", "20M"), None, None)],
            (false, 1.5, true),
        ),
        (
            "multiple resources, both scale down",
            &[(C, "4", "20M")],
            &[(C, ("2", "10M"), None, None)],
            (false, 1.0, false),
        ),
        (
            "multiple resources, one outside recommended range",
            &[(C, "4", "20M")],
            &[(C, ("2", "10M"), Some(("1", "5M")), Some(("3", "30M")))],
            (true, 1.0, false),
        ),
        (
            "multiple containers, both scale up",
            &[(C, "1", ""), (C2, "2", "")],
            &[(C, ("4", ""), None, None), (C2, ("8", ""), None, None)],
            (false, 3.0, true),
        ),
        (
            "multiple containers, both scale down",
            &[(C, "3", ""), (C2, "7", "")],
            &[(C, ("1", ""), None, None), (C2, ("2", ""), None, None)],
            (false, 0.7, false),
        ),
        (
            "missing request counts as zero and out of range",
            &[(C, "", "")],
            &[(C, ("1", ""), None, None)],
            (true, 999.0, true),
        ),
    ];
    for (name, pod, recs, (outside, diff, up)) in cases {
        let p = priority(pod, recs);
        assert_eq!(p.outside_recommended_range, *outside, "{name}");
        assert_eq!(p.scale_up, *up, "{name}");
        assert!(
            (p.resource_diff - diff).abs() < 1e-9,
            "{name}: {}",
            p.resource_diff
        );
    }
}

#[test]
fn observed_containers_limit_what_counts() {
    let target = list("4", "");
    let recs = [Recommended {
        name: C2,
        target: &target,
        lower: None,
        upper: None,
    }];
    let p = update_priority([C, C2].into_iter(), &recs, |_| list("1", ""), Some(&[C]));
    assert_eq!(p, PodPriority::default());
}

fn p(scale_up: bool, diff: f64, outside: bool) -> PodPriority {
    PodPriority {
        outside_recommended_range: outside,
        scale_up,
        resource_diff: diff,
    }
}

/// Upstream's `AddPod` + `GetSortedPods` on (priority, quick OOM) per pod,
/// `hours` after the pods started; the names of the pods updated, in order.
fn sorted(
    pods: &[(&'static str, PodPriority, bool)],
    hours: i64,
    config: PriorityConfig,
) -> Vec<&'static str> {
    let mut accepted: Vec<(&str, PodPriority)> = pods
        .iter()
        .filter(|(_, prio, oom)| admit(prio, *oom, Some(0), hours * 3600, &config).is_ok())
        .map(|(n, prio, _)| (*n, *prio))
        .collect();
    accepted.sort_by(|a, b| PodPriority::descending(&a.1, &b.1));
    accepted.into_iter().map(|(n, _)| n).collect()
}

const UPDATECONFIG: PriorityConfig = PriorityConfig {
    min_change_priority: 0.1,
    pod_lifetime_update_threshold: 12 * 3600,
    evict_after_oom_threshold: 600,
};
const HALF: PriorityConfig = PriorityConfig {
    min_change_priority: 0.5,
    ..UPDATECONFIG
};

#[test]
fn calculator_cases() {
    // TestSortPriority
    let pods = [
        ("POD1", p(false, 4.0, false), false),
        ("POD2", p(false, 1.5, false), false),
        ("POD3", p(false, 9.0, false), false),
        ("POD4", p(false, 2.33, false), false),
    ];
    assert_eq!(
        sorted(&pods, 24, UPDATECONFIG),
        ["POD3", "POD1", "POD4", "POD2"]
    );
    // TestSortPriorityResourcesDecrease
    let pods = [
        ("POD1", p(true, 0.25, false), false),
        ("POD2", p(false, 0.25, false), false),
        ("POD3", p(false, 0.5, false), false),
    ];
    assert_eq!(sorted(&pods, 24, UPDATECONFIG), ["POD1", "POD3", "POD2"]);
    // TestUpdateNotRequired
    assert!(sorted(&[("POD1", p(false, 0.0, false), false)], 24, UPDATECONFIG).is_empty());
    // TestUpdateLonglivedPods
    let pods = [
        ("POD1", p(true, 0.25, false), false),
        ("POD2", p(true, 4.0, false), false),
        ("POD3", p(false, 0.25, true), false),
    ];
    assert_eq!(sorted(&pods, 13, HALF), ["POD2", "POD3"]);
    // TestUpdateShortlivedPods
    let pods = [
        ("POD1", p(true, 0.25, false), false),
        ("POD2", p(true, 0.0, false), false),
        ("POD3", p(false, 0.9, true), false),
    ];
    assert_eq!(sorted(&pods, 11, HALF), ["POD3"]);
    // TestUpdatePodWithQuickOOM
    assert_eq!(
        sorted(&[("POD1", p(true, 0.25, false), true)], 11, HALF),
        ["POD1"]
    );
    // TestDontUpdatePodWithQuickOOMNoResourceChange
    assert!(sorted(&[("POD1", p(true, 0.0, false), true)], 11, UPDATECONFIG).is_empty());
    // TestDontUpdatePodWithOOMAfterLongRun: the OOM was not quick.
    assert!(sorted(&[("POD1", p(true, 0.0, false), false)], 11, HALF).is_empty());
}

#[test]
fn admit_says_why() {
    let prio = p(false, 0.05, false);
    assert_eq!(
        admit(&prio, false, None, 0, &UPDATECONFIG),
        Err(NotUpdated::NoStartTime)
    );
    assert_eq!(
        admit(&prio, false, Some(0), 3600, &UPDATECONFIG),
        Err(NotUpdated::ShortLived)
    );
    assert_eq!(
        admit(&prio, false, Some(0), 13 * 3600, &UPDATECONFIG),
        Err(NotUpdated::DiffTooLow)
    );
    assert_eq!(
        admit(&p(false, 0.0, false), true, Some(0), 0, &UPDATECONFIG),
        Err(NotUpdated::NoChange)
    );
}

#[test]
fn less_pod_priority() {
    // TestLessPodPriority
    let cases = [
        (
            "scale down more than empty",
            p(false, 0.0, false),
            p(false, 0.1, false),
            true,
        ),
        (
            "scale up more than empty",
            p(false, 0.0, false),
            p(true, 0.1, false),
            true,
        ),
        (
            "two scale ups",
            p(true, 0.1, false),
            p(true, 0.2, false),
            true,
        ),
        (
            "two scale downs",
            p(false, 0.1, false),
            p(false, 0.2, false),
            true,
        ),
        (
            "scale up and scale down",
            p(true, 0.3, false),
            p(false, 0.2, false),
            false,
        ),
    ];
    for (name, a, b, less) in cases {
        assert_eq!(a.less(&b), less, "{name}");
    }
}

#[test]
fn has_lower_resource_recommendation() {
    let r = |cpu: &str, mem: &str| vec![("c".to_owned(), list(cpu, mem))];
    let cases = [
        (
            "new CPU is lower",
            r("100m", "200Mi"),
            r("50m", "200Mi"),
            true,
        ),
        (
            "new memory is lower",
            r("100m", "200Mi"),
            r("100m", "100Mi"),
            true,
        ),
        (
            "new resources are higher",
            r("100m", "200Mi"),
            r("200m", "300Mi"),
            false,
        ),
        (
            "equal resources",
            r("100m", "200Mi"),
            r("100m", "200Mi"),
            false,
        ),
        (
            "container not in lastAttempt",
            vec![("other".to_owned(), list("1", ""))],
            r("50m", ""),
            false,
        ),
        (
            "one resource lower one higher",
            r("100m", "200Mi"),
            r("50m", "300Mi"),
            true,
        ),
        (
            "cpu higher memory lower",
            r("100m", "200Mi"),
            r("200m", "100Mi"),
            true,
        ),
    ];
    for (name, last, new, want) in cases {
        assert_eq!(has_lower_resource(&last, &new), want, "{name}");
    }
}
