//! Keeping a VPA's status within what etcd stores: at 5,000 nodes a
//! node-scoped VPA's `recommendationGroups` approach etcd's 1.5 MiB request
//! limit. Owns the size budget and the choice of what is written; it
//! computes no recommendation and writes nothing.
//!
//! The measure is the status as JSON (`recommendationGroups` is an atomic
//! list, so the apiserver's `managedFields` hold one entry for it, not one
//! per group). When the whole status fits in [`STATUS_LIMIT`] it is written
//! as it is. When it does not, the groups whose every target equals
//! `status.recommendation`'s are left out: the webhook's default fallback
//! (AEP-10031's) gives their pods exactly those values. When even that does
//! not fit, no group is written at all, never a part of them: a partial
//! list would give some nodes their own values and others the fallback with
//! nothing to say which.

use super::status::{ContainerStatus, GroupStatus, Targets, VpaStatus};

/// The most the status may take. etcd's default `--max-request-bytes` is
/// 1.5 MiB for the whole object; the other quarter MiB is left to
/// metadata, the spec, the managed fields and the status's conditions
/// (set after the fit, a few hundred bytes).
pub const STATUS_LIMIT: usize = 1280 * 1024;

/// The condition set when the groups did not fit whole.
pub const TOO_LARGE: &str = "RecommendationGroupsTooLarge";

/// What was done to make the status fit.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Fit {
    /// Every group is written.
    Whole,
    /// `omitted` of `groups` groups equal `status.recommendation` and were
    /// left out; the rest is written.
    Compacted {
        groups: usize,
        omitted: usize,
        bytes: usize,
    },
    /// Even without the groups equal to `status.recommendation` the status
    /// takes `bytes`, over the limit: no group is written.
    TooLarge { groups: usize, bytes: usize },
}

/// The bytes `status` takes in the object: its JSON.
#[must_use]
pub fn status_bytes(status: &VpaStatus) -> usize {
    serde_json::to_vec(status).map_or(0, |v| v.len())
}

/// The bytes of one group's JSON in the list (with its separating comma).
#[must_use]
pub fn group_bytes(group: &GroupStatus) -> usize {
    serde_json::to_vec(group).map_or(0, |v| v.len()) + 1
}

/// Whether admission gives a pod of `group` the same values with the group
/// as without it: every container of the group has the target the fallback
/// has for it, and the fallback recommends no container the group does not.
fn same_as_fallback(group: &GroupStatus, fallback: &[ContainerStatus]) -> bool {
    let find = |list: &'_ [ContainerStatus], name: &str| -> Option<Targets> {
        list.iter()
            .find(|c| c.container_name == name)
            .map(|c| c.target.clone())
    };
    group.container_recommendations.len() == fallback.len()
        && group
            .container_recommendations
            .iter()
            .all(|c| find(fallback, &c.container_name).as_ref() == Some(&c.target))
}

/// How many of `status`'s groups equal its `status.recommendation`.
#[must_use]
pub fn omittable(status: &VpaStatus) -> usize {
    let fallback = &status.recommendation.container_recommendations;
    if fallback.is_empty() {
        return 0;
    }
    status
        .recommendation_groups
        .iter()
        .filter(|g| same_as_fallback(g, fallback))
        .count()
}

/// Makes `status` fit in `limit` bytes (see the module docs) and says how.
pub fn fit(status: &mut VpaStatus, limit: usize) -> Fit {
    let bytes = status_bytes(status);
    if bytes <= limit {
        return Fit::Whole;
    }
    let groups = status.recommendation_groups.len();
    let fallback = std::mem::take(&mut status.recommendation.container_recommendations);
    if !fallback.is_empty() {
        status
            .recommendation_groups
            .retain(|g| !same_as_fallback(g, &fallback));
    }
    status.recommendation.container_recommendations = fallback;
    let omitted = groups - status.recommendation_groups.len();
    let compacted = status_bytes(status);
    if compacted <= limit {
        return Fit::Compacted {
            groups,
            omitted,
            bytes: compacted,
        };
    }
    status.recommendation_groups.clear();
    Fit::TooLarge {
        groups,
        bytes: compacted,
    }
}

impl VpaStatus {
    /// Whether the groups were left out for want of room.
    #[must_use]
    pub fn groups_too_large(&self) -> bool {
        self.conditions.iter().any(|c| {
            c.get("type").and_then(serde_json::Value::as_str) == Some(TOO_LARGE)
                && c.get("status").and_then(serde_json::Value::as_str) == Some("True")
        })
    }
}

#[cfg(test)]
#[path = "fit_tests.rs"]
mod tests;
