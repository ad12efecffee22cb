//! How many of a DaemonSet's pods may be disrupted at once, and what to do
//! with a pod whose resize is pending: upstream's `restriction` package
//! (`pods_restriction_factory.go`, `pods_eviction_restriction.go`,
//! `pods_inplace_restriction.go`, kubernetes/autoscaler 55c37cd5, with
//! PR #10141's count of a DaemonSet's pods).

use crate::pods::ResizeStatus;

/// A deferred resize is given this long before the pod is evicted instead
/// (upstream's `DeferredResizeUpdateTimeout`).
pub const DEFERRED_RESIZE_TIMEOUT: i64 = 5 * 60;
/// A resize in progress is given this long (`InProgressResizeUpdateTimeout`).
pub const IN_PROGRESS_RESIZE_TIMEOUT: i64 = 3600;

/// Upstream's `singleGroupStats` for one DaemonSet.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct GroupStats {
    /// The pods the DaemonSet should have: `status.desiredNumberScheduled`
    /// (PR #10141: not `numberReady`, so pods that are not Ready count as
    /// disrupted), or the pods seen when the status has none.
    pub configured: usize,
    /// Live pods that are running and Ready.
    pub running: usize,
    /// `floor(configured * --eviction-tolerance)`.
    pub eviction_tolerance: usize,
    /// Evicted in this pass.
    pub evicted: usize,
    /// Resizes asked for in this pass.
    pub in_place_initiated: usize,
    /// Let through below `--min-replicas` (only with
    /// `--in-place-skip-disruption-budget`).
    pub below_min_replicas: bool,
}

impl GroupStats {
    /// Stats for a DaemonSet with `configured` desired pods, `live` live
    /// pods of which `running` are running and Ready; `None` when it has
    /// fewer live pods than `min_replicas` and may not be disrupted.
    #[must_use]
    pub fn new(
        configured: usize,
        live: usize,
        running: usize,
        min_replicas: usize,
        tolerance: f64,
        skip_budget_for_in_place: bool,
    ) -> Option<GroupStats> {
        let below = live < min_replicas;
        if below && !skip_budget_for_in_place {
            return None;
        }
        #[allow(
            clippy::cast_possible_truncation,
            clippy::cast_sign_loss,
            clippy::cast_precision_loss
        )]
        let eviction_tolerance = (configured as f64 * tolerance) as usize;
        Some(GroupStats {
            configured,
            running,
            eviction_tolerance,
            evicted: 0,
            in_place_initiated: 0,
            below_min_replicas: below,
        })
    }

    /// Upstream's `isPodDisruptable`: more pods alive than must be, or the
    /// one pod a group with no tolerance may lose while all run.
    #[must_use]
    pub fn is_pod_disruptable(&self) -> bool {
        let should_be_alive = self.configured.saturating_sub(self.eviction_tolerance);
        let actually_alive = self
            .running
            .saturating_sub(self.evicted + self.in_place_initiated);
        actually_alive > should_be_alive
            || (self.configured == self.running
                && self.eviction_tolerance == 0
                && self.evicted == 0
                && self.in_place_initiated == 0)
    }
}

/// Upstream's `InPlaceDecision`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum InPlaceDecision {
    /// Resize now.
    Approved,
    /// Not now; try again next pass.
    Deferred,
    /// The resize failed or stalled: evict instead (InPlaceOrRecreate).
    Evict,
    /// The node cannot fit it (InPlace): resize again only with a
    /// recommendation that asks for less.
    Infeasible,
}

/// Whether a pod whose resize is pending may be evicted instead
/// (`CanEvictInPlacingPod`); `since` is how long ago the updater first saw
/// it resizing, in seconds.
#[must_use]
pub fn can_evict_resizing(status: &ResizeStatus, stats: &GroupStats, since: i64) -> bool {
    if !status.is_updating() || !stats.is_pod_disruptable() {
        return false;
    }
    match status {
        ResizeStatus::Deferred(_) => since > DEFERRED_RESIZE_TIMEOUT,
        ResizeStatus::InProgress => since > IN_PROGRESS_RESIZE_TIMEOUT,
        ResizeStatus::Infeasible(_) | ResizeStatus::Error(_) | ResizeStatus::Unknown(_) => true,
        ResizeStatus::None => false,
    }
}

/// `CanInPlaceUpdate` for a running pod that passed the priority rules.
/// `in_place_only` is updateMode `InPlace` (never evict).
#[must_use]
pub fn in_place_decision(
    status: &ResizeStatus,
    stats: &GroupStats,
    in_place_only: bool,
    since_first_seen_resizing: i64,
    skip_budget: bool,
    non_disruptive: bool,
) -> InPlaceDecision {
    if status.is_updating() {
        if in_place_only {
            return match status {
                ResizeStatus::Infeasible(_) => InPlaceDecision::Infeasible,
                _ => InPlaceDecision::Deferred,
            };
        }
        return if can_evict_resizing(status, stats, since_first_seen_resizing) {
            InPlaceDecision::Evict
        } else {
            InPlaceDecision::Deferred
        };
    }
    if skip_budget && non_disruptive {
        return InPlaceDecision::Approved;
    }
    if stats.is_pod_disruptable() {
        InPlaceDecision::Approved
    } else {
        InPlaceDecision::Deferred
    }
}

/// `CanEvict` for a running pod in Recreate mode.
#[must_use]
pub fn can_evict(status: &ResizeStatus, stats: &GroupStats, since: i64) -> bool {
    if stats.below_min_replicas {
        return false;
    }
    if status.is_updating() {
        return can_evict_resizing(status, stats, since);
    }
    stats.is_pod_disruptable()
}

#[cfg(test)]
#[path = "restriction_tests.rs"]
mod tests;
