//! Upstream's `AddPod` rules for one pod of a pass: its priority, or what
//! to do instead and why (held back for now, or nothing to do).

use super::{desired, Group, Memory};
use crate::mutate::pod::PodView;
use crate::mutate::{Sizing, OBSERVED_CONTAINERS_ANNOTATION};
use crate::pods::RunningPod;
use crate::update::priority::{
    self, admit, has_lower_resource, NotUpdated, PodPriority, Recommended,
};
use crate::update::{Action, PodPlan, Reason};
use crate::vpa::{ContainerMode, ResourceList, UpdateMode};
use std::borrow::Cow;

impl Group<'_> {
    /// The VPA's `evictAfterOOMSeconds`, when the gate lets it count.
    pub(super) fn oom_threshold_of_vpa(&self) -> Option<i64> {
        self.vpa
            .evict_after_oom_seconds
            .filter(|_| self.config.per_vpa_config)
    }

    /// Upstream's `AddPod` for one pod: its priority, or what to do instead
    /// and why (held back for now, or nothing to do).
    pub(super) fn prioritize(
        &self,
        pod: &RunningPod,
        view: &PodView<'_>,
        sizing: &Sizing,
        plan: &mut PodPlan,
        memory: &Memory,
    ) -> Result<(PodPriority, bool), (Action, Reason, Cow<'static, str>)> {
        let observed: Option<Vec<&str>> = view
            .annotation(OBSERVED_CONTAINERS_ANNOTATION)
            .map(|o| o.split(", ").filter(|s| !s.is_empty()).collect());
        let recommended: Vec<Recommended<'_>> = sizing
            .containers
            .iter()
            .filter_map(|s| {
                Some(Recommended {
                    name: &view.spec.containers.get(s.index)?.name,
                    target: &s.requests,
                    lower: None,
                    upper: None,
                })
            })
            .collect();
        let requests = |name: &str| {
            plan.containers
                .iter()
                .find(|c| &*c.name == name)
                .map(|c| priority::parse_list(c.current.requests.iter()))
                .unwrap_or_default()
        };
        let prio = priority::update_priority(
            view.spec.containers.iter().map(|c| &*c.name),
            &recommended,
            requests,
            observed.as_deref(),
        );
        // AEP-8026: the VPA's own threshold, when the gate is on. Upstream's
        // updater (55c37cd) accepts the field but does not read it yet; this
        // follows the AEP's text.
        let oom_threshold = self
            .oom_threshold_of_vpa()
            .unwrap_or(self.config.priority.evict_after_oom_threshold);
        let quick_oom = pod.containers.iter().any(|c| {
            observed.as_ref().is_none_or(|o| o.contains(&&*c.name))
                && self
                    .vpa
                    .container_policy(&c.name)
                    .is_none_or(|p| p.mode != ContainerMode::Off)
                && c.last_oom_after.is_some_and(|t| t < oom_threshold)
        });
        admit(
            &prio,
            quick_oom,
            pod.start_time,
            self.now,
            &self.config.priority,
        )
        .map_err(|n| match n {
            NotUpdated::DiffTooLow => (
                Action::None,
                Reason::ChangeTooSmall,
                format!(
                    "the summed relative difference of its requests from the recommendation \
                     (upstream's resource diff) is {:.2}, below --pod-update-threshold {:.2}",
                    prio.resource_diff, self.config.priority.min_change_priority
                )
                .into(),
            ),
            NotUpdated::NoChange => (Action::None, Reason::NoChange, n.reason().into()),
            NotUpdated::NoStartTime => (Action::Deferred, Reason::NoStartTime, n.reason().into()),
            NotUpdated::ShortLived => (Action::Deferred, Reason::TooYoung, n.reason().into()),
        })?;
        if self.vpa.update_mode == UpdateMode::InPlace {
            if let Some(last) = memory.infeasible.get(&*pod.uid) {
                desired::fill(plan, pod, sizing);
                if !has_lower_resource(last, &requested(plan)) {
                    return Err((
                        Action::Deferred,
                        Reason::InfeasibleBefore,
                        "its last resize was infeasible and the recommendation asks no less".into(),
                    ));
                }
            }
        }
        Ok((prio, quick_oom))
    }
}

/// The desired requests of each container, as the infeasible memory keeps
/// them.
#[must_use]
pub fn requested(plan: &PodPlan) -> Vec<(String, ResourceList)> {
    plan.containers
        .iter()
        .filter_map(|c| {
            let d = c.desired.as_ref()?;
            Some((c.name.to_string(), priority::parse_list(d.requests.iter())))
        })
        .collect()
}
