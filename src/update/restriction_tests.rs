//! Upstream's restriction tests (`pods_eviction_restriction_test.go`,
//! `pods_inplace_restriction_test.go`, kubernetes/autoscaler 55c37cd5), as
//! data: a DaemonSet of `configured` pods, `running` of them up.

use super::*;

const MIN_REPLICAS: usize = 2;

fn stats(configured: usize, running: usize, tolerance: f64, skip: bool) -> Option<GroupStats> {
    GroupStats::new(configured, running, running, MIN_REPLICAS, tolerance, skip)
}

/// How many of `running` pods one pass may evict, one after another.
fn evictable(mut s: GroupStats, running: usize) -> usize {
    let mut n = 0;
    for _ in 0..running {
        if can_evict(&ResizeStatus::None, &s, 0) {
            s.evicted += 1;
            n += 1;
        }
    }
    n
}

#[test]
fn eviction_limits() {
    // TestEvictTooFewReplicas: 5 configured, minReplicas 10: nothing.
    assert_eq!(GroupStats::new(5, 5, 5, 10, 0.5, false), None);
    // TestEvictionTolerance: 5 pods, tolerance 0.8: four of them.
    let s = stats(5, 5, 0.8, false).expect("stats");
    assert_eq!(evictable(s, 5), 4);
    // TestEvictAtLeastOne: tolerance 0.1 rounds to 0, and still one goes.
    let s = stats(5, 5, 0.1, false).expect("stats");
    assert_eq!(evictable(s, 5), 1);
    // A pod that is not Ready counts as disrupted already (PR #10141):
    // 5 configured, 4 running, tolerance 0.5 (2): one more may go.
    let s = GroupStats::new(5, 5, 4, MIN_REPLICAS, 0.5, false).expect("stats");
    assert_eq!(evictable(s, 5), 1);
    // TestEvictTooFewReplicasWithInPlaceSkipDisruptionBudget: the flag lets
    // in-place through below minReplicas, never an eviction.
    let s = GroupStats::new(1, 1, 1, MIN_REPLICAS, 0.5, true).expect("stats");
    assert!(!can_evict(&ResizeStatus::None, &s, 0));
}

#[test]
fn can_in_place_update() {
    use InPlaceDecision::{Approved, Deferred, Evict, Infeasible};
    let deferred = ResizeStatus::Deferred(String::new());
    let infeasible = ResizeStatus::Infeasible(String::new());
    let none = ResizeStatus::None;
    let in_progress = ResizeStatus::InProgress;
    // (name, configured, running, tolerance, skip budget, InPlace only,
    //  status, seconds since first seen resizing, expected)
    #[allow(clippy::type_complexity)]
    let cases: &[(
        &str,
        usize,
        usize,
        f64,
        bool,
        bool,
        &ResizeStatus,
        i64,
        InPlaceDecision,
    )] = &[
        (
            "InPlaceApproved - (half of 3)",
            3,
            3,
            0.5,
            false,
            false,
            &none,
            0,
            Approved,
        ),
        (
            "InPlaceDeferred - no pods can be in-placed, one missing",
            3,
            2,
            0.5,
            false,
            false,
            &none,
            0,
            Deferred,
        ),
        (
            "InPlaceApproved - small tolerance, all running",
            3,
            3,
            0.1,
            false,
            false,
            &none,
            0,
            Approved,
        ),
        (
            "InPlaceDeferred - small tolerance, one missing",
            3,
            2,
            0.5,
            false,
            false,
            &none,
            0,
            Deferred,
        ),
        (
            "InPlaceDeferred - resize Deferred, conditions not met to fallback",
            3,
            3,
            0.5,
            false,
            false,
            &deferred,
            60,
            Deferred,
        ),
        (
            "InPlaceEvict - resize Deferred for too long",
            3,
            3,
            0.5,
            false,
            false,
            &deferred,
            301,
            Evict,
        ),
        (
            "InPlaceEvict - resize inProgress for more too long",
            3,
            3,
            0.5,
            false,
            false,
            &in_progress,
            3601,
            Evict,
        ),
        (
            "InPlaceDeferred - resize InProgress, conditions not met to fallback",
            3,
            3,
            0.5,
            false,
            false,
            &in_progress,
            60,
            Deferred,
        ),
        (
            "InPlaceEvict - infeasible",
            3,
            3,
            0.5,
            false,
            false,
            &infeasible,
            0,
            Evict,
        ),
        (
            "InPlace - InPlaceApproved - all pods running",
            3,
            3,
            0.5,
            false,
            true,
            &none,
            0,
            Approved,
        ),
        (
            "InPlace - InPlaceDeferred - resize InProgress, waits indefinitely",
            3,
            3,
            0.5,
            false,
            true,
            &in_progress,
            1_000_000,
            Deferred,
        ),
        (
            "InPlace mode - infeasible returns InPlaceInfeasible",
            3,
            3,
            0.5,
            false,
            true,
            &infeasible,
            0,
            Infeasible,
        ),
        (
            "InPlaceApproved(InPlaceOrRecreate) - with inPlaceSkipDisruptionBudget",
            1,
            1,
            0.5,
            true,
            false,
            &none,
            0,
            Approved,
        ),
        (
            "InPlaceApproved(InPlace) - with inPlaceSkipDisruptionBudget",
            1,
            1,
            0.5,
            true,
            true,
            &none,
            0,
            Approved,
        ),
    ];
    for (name, configured, running, tolerance, skip, in_place_only, status, since, want) in cases {
        let s = stats(*configured, *running, *tolerance, *skip).expect(name);
        let got = in_place_decision(status, &s, *in_place_only, *since, *skip, true);
        assert_eq!(got, *want, "{name}");
    }
    // Without the flag a DaemonSet below minReplicas has no stats at all,
    // which the caller reads as Deferred (upstream: not in the creator map).
    assert_eq!(stats(1, 1, 0.5, false), None);
    // With the flag but a RestartContainer resize policy, the budget holds:
    // 3 pods, one already resizing in this pass, tolerance 0.5.
    let mut s = stats(3, 3, 0.5, true).expect("stats");
    s.in_place_initiated = 1;
    assert_eq!(
        in_place_decision(&none, &s, false, 0, true, false),
        Deferred
    );
    assert_eq!(in_place_decision(&none, &s, false, 0, true, true), Approved);
}

#[test]
fn tolerance_counts_resizes_in_the_pass() {
    // TestEvictionToleranceForInPlace: 5 pods, tolerance 0.8: four resized.
    let mut s = stats(5, 5, 0.8, false).expect("stats");
    let mut approved = 0;
    for _ in 0..5 {
        if in_place_decision(&ResizeStatus::None, &s, false, 0, false, true)
            == InPlaceDecision::Approved
        {
            s.in_place_initiated += 1;
            approved += 1;
        }
    }
    assert_eq!(approved, 4);
}
