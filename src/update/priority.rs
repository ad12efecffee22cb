//! When a pod is worth updating, and in which order: upstream's
//! `priority_processor.go` and `update_priority_calculator.go`
//! (kubernetes/autoscaler 55c37cd5), with the pod's group in place of the
//! DaemonSet-wide recommendation.

use crate::quantity::Quantity;
use crate::vpa::ResourceList;
use std::cmp::Ordering;
use std::collections::BTreeMap;

/// Upstream's `PodPriority`.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct PodPriority {
    /// Some request is below the lower or above the upper bound, or absent.
    pub outside_recommended_range: bool,
    /// Some container wants to grow.
    pub scale_up: bool,
    /// Sum over resources of |requested - recommended| / requested.
    pub resource_diff: f64,
}

impl PodPriority {
    /// Upstream's `Less`: a pod that scales up comes first, then the larger
    /// difference.
    #[must_use]
    pub fn less(&self, other: &PodPriority) -> bool {
        if self.scale_up != other.scale_up {
            return other.scale_up;
        }
        self.resource_diff < other.resource_diff
    }

    /// Highest priority first, as `GetSortedPods` orders them.
    #[must_use]
    pub fn descending(a: &PodPriority, b: &PodPriority) -> Ordering {
        if b.less(a) {
            Ordering::Less
        } else if a.less(b) {
            Ordering::Greater
        } else {
            Ordering::Equal
        }
    }
}

/// One container's recommendation as the priority reads it.
#[derive(Clone, Debug)]
pub struct Recommended<'a> {
    /// The container.
    pub name: &'a str,
    /// The capped target: what the container's requests would become.
    pub target: &'a ResourceList,
    /// `lowerBound`, where the recommendation has one (groups do not).
    pub lower: Option<&'a ResourceList>,
    /// `upperBound`, likewise.
    pub upper: Option<&'a ResourceList>,
}

/// Upstream's `GetUpdatePriority`. `requests` gives a container's current
/// requests (the actuated ones, as the kubelet reports them);
/// `observed` is the `vpaObservedContainers` list, when the pod has one.
#[must_use]
pub fn update_priority<'a>(
    containers: impl Iterator<Item = &'a str>,
    recommended: &[Recommended<'_>],
    requests: impl Fn(&str) -> ResourceList,
    observed: Option<&[&str]>,
) -> PodPriority {
    let mut outside = false;
    let mut scale_up = false;
    let mut total_request: BTreeMap<&str, i64> = BTreeMap::new();
    let mut total_recommended: BTreeMap<&str, i64> = BTreeMap::new();
    for name in containers {
        if observed.is_some_and(|o| !o.contains(&name)) {
            continue;
        }
        let Some(rec) = recommended.iter().find(|r| r.name == name) else {
            continue;
        };
        let current = requests(name);
        for (resource, target) in rec.target {
            *total_recommended.entry(resource).or_default() += target.milli_value();
            match current.get(resource) {
                Some(request) => {
                    *total_request.entry(resource).or_default() += request.milli_value();
                    if target.milli_value() > request.milli_value() {
                        scale_up = true;
                    }
                    let below = rec
                        .lower
                        .and_then(|l| l.get(resource))
                        .is_some_and(|l| request < l);
                    let above = rec
                        .upper
                        .and_then(|u| u.get(resource))
                        .is_some_and(|u| request > u);
                    if below || above {
                        outside = true;
                    }
                }
                None => {
                    // Upstream treats a missing request as zero.
                    scale_up = true;
                    outside = true;
                }
            }
        }
    }
    let mut resource_diff = 0.0;
    for (resource, recommended) in &total_recommended {
        #[allow(clippy::cast_precision_loss)]
        let request = (total_request.get(resource).copied().unwrap_or(0) as f64).max(1.0);
        #[allow(clippy::cast_precision_loss)]
        let diff = (request - *recommended as f64).abs() / request;
        resource_diff += diff;
    }
    PodPriority {
        outside_recommended_range: outside,
        scale_up,
        resource_diff,
    }
}

/// Upstream's `UpdateConfig`.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct PriorityConfig {
    /// `--pod-update-threshold`.
    pub min_change_priority: f64,
    /// `--in-recommendation-bounds-eviction-lifetime-threshold`, seconds.
    pub pod_lifetime_update_threshold: i64,
    /// `--evict-after-oom-threshold`, seconds.
    pub evict_after_oom_threshold: i64,
}

impl Default for PriorityConfig {
    fn default() -> Self {
        PriorityConfig {
            min_change_priority: 0.1,
            pod_lifetime_update_threshold: 12 * 3600,
            evict_after_oom_threshold: 600,
        }
    }
}

/// Why `AddPod` left a pod out.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum NotUpdated {
    /// Within range and no `status.startTime` yet.
    NoStartTime,
    /// Within range and younger than the lifetime threshold.
    ShortLived,
    /// Within range and the change is below `--pod-update-threshold`.
    DiffTooLow,
    /// A quick OOM, but nothing would change.
    NoChange,
}

impl NotUpdated {
    /// Words for the plan and the logs.
    #[must_use]
    pub fn reason(self) -> &'static str {
        match self {
            NotUpdated::NoStartTime => "within its recommendation and has no status.startTime yet",
            NotUpdated::ShortLived => {
                "within its recommendation and younger than --in-recommendation-bounds-eviction-lifetime-threshold"
            }
            NotUpdated::DiffTooLow => "the change is below --pod-update-threshold",
            NotUpdated::NoChange => "nothing would change",
        }
    }
}

/// Upstream's `AddPod` rules: update when outside the range or after a
/// quick OOM; else only a pod older than the lifetime threshold whose
/// change reaches the minimum.
///
/// # Errors
/// Why the pod is not updated.
pub fn admit(
    priority: &PodPriority,
    quick_oom: bool,
    start_time: Option<i64>,
    now: i64,
    config: &PriorityConfig,
) -> Result<(), NotUpdated> {
    if !priority.outside_recommended_range && !quick_oom {
        let Some(start) = start_time else {
            return Err(NotUpdated::NoStartTime);
        };
        if now < start + config.pod_lifetime_update_threshold {
            return Err(NotUpdated::ShortLived);
        }
        if priority.resource_diff < config.min_change_priority {
            return Err(NotUpdated::DiffTooLow);
        }
    }
    #[allow(clippy::float_cmp)]
    if quick_oom && priority.resource_diff == 0.0 {
        return Err(NotUpdated::NoChange);
    }
    Ok(())
}

/// Upstream's `hasLowerResourceRecommendation`: whether `new` asks less of
/// some resource than the `last` infeasible attempt did.
#[must_use]
pub fn has_lower_resource(last: &[(String, ResourceList)], new: &[(String, ResourceList)]) -> bool {
    new.iter().any(|(name, target)| {
        last.iter()
            .find(|(n, _)| n == name)
            .is_some_and(|(_, before)| {
                target
                    .iter()
                    .any(|(r, q)| before.get(r).is_some_and(|b| q < b))
            })
    })
}

/// Parses `(resource, quantity text)` pairs; a text that is not a quantity
/// is left out (the pod was admitted with it, so the apiserver accepted it).
pub fn parse_list<'t>(texts: impl Iterator<Item = (&'t str, &'t str)>) -> ResourceList {
    texts
        .filter_map(|(r, t)| Some((crate::vpa::resource_name(r), Quantity::parse(t).ok()?)))
        .collect()
}

#[cfg(test)]
#[path = "priority_tests.rs"]
mod tests;
