//! What the controller keeps of a Feature's uses while it reads the cluster
//! page by page: per gating policy, how many objects it finds and the first
//! [`TASK_OBJECTS`] of them (by kind, namespace and name), which is all
//! `status.transitionTasks` and the uses gauge say. The pages' objects and
//! the other uses are dropped with their page. Pure.

use super::lifecycle::TransitionTask;
use super::uses::{PolicyUses, Use, TASK_OBJECTS};
use std::collections::BTreeMap;

/// The uses of one Feature found so far.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct UseTally {
    /// By policy name, as [`super::find_uses`] orders them.
    policies: BTreeMap<String, PolicyTally>,
}

#[derive(Debug, Clone, Default, PartialEq, Eq)]
struct PolicyTally {
    count: usize,
    /// The least [`TASK_OBJECTS`] uses by kind, namespace and name.
    first: Vec<Use>,
}

impl PolicyTally {
    fn add(&mut self, count: usize, uses: Vec<Use>) {
        self.count += count;
        self.first.extend(uses);
        self.first.sort_by(|a, b| {
            (&a.kind, &a.namespace, &a.name).cmp(&(&b.kind, &b.namespace, &b.name))
        });
        self.first.truncate(TASK_OBJECTS);
    }
}

impl UseTally {
    /// Adds the uses [`super::find_uses`] found in one page.
    pub fn add(&mut self, found: Vec<PolicyUses>) {
        for policy in found {
            let count = policy.uses.len();
            self.policies
                .entry(policy.policy)
                .or_default()
                .add(count, policy.uses);
        }
    }

    /// Adds another tally's uses (another resource's pages).
    pub fn merge(&mut self, other: UseTally) {
        for (policy, tally) in other.policies {
            self.policies
                .entry(policy)
                .or_default()
                .add(tally.count, tally.first);
        }
    }

    /// Every use found, over all policies.
    #[must_use]
    pub fn total(&self) -> usize {
        self.policies.values().map(|p| p.count).sum()
    }

    /// What [`super::transition_tasks`] says of all the uses at once.
    #[must_use]
    pub fn tasks(&self) -> Vec<TransitionTask> {
        self.policies
            .iter()
            .map(|(policy, tally)| {
                let mut description = tally
                    .first
                    .iter()
                    .map(Use::label)
                    .collect::<Vec<_>>()
                    .join(", ");
                if tally.count > TASK_OBJECTS {
                    description.push_str(&format!(" and {} more", tally.count - TASK_OBJECTS));
                }
                TransitionTask {
                    name: policy.clone(),
                    count: tally.count,
                    description,
                }
            })
            .collect()
    }
}
