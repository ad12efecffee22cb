//! What a pod should have: the webhook's own arithmetic on the pod as it
//! was created, and the plan's current and desired resources.

use super::{Group, PodPlan};
use crate::mutate::pod::{PodView, ResourcesView};
use crate::mutate::{size_pod_marked, Patch, Sizing};
use crate::pods::{view_texts, RunningPod};
use crate::update::{Action, ContainerChange, Reason, Resources};
use crate::vpa::Placement;
use std::borrow::Cow;
use std::sync::Arc;

impl Group<'_> {
    /// The pod's plan with its current resources (shared with the pod), and
    /// the sizing: what the webhook would give it now. The desired
    /// resources and the resize body are left to [`fill`] and
    /// [`resize_ops`], for the few plans that act on them.
    pub(super) fn sized(
        &self,
        pod: &RunningPod,
        actual: &PodView<'_>,
        placement: Placement<'_>,
    ) -> (PodPlan, Sizing) {
        let creation = self.creation_view(pod);
        let sizing = size_pod_marked(
            creation.as_ref().unwrap_or(actual),
            pod.originals(),
            self.vpa,
            placement,
            self.snapshot.limit_ranges(&pod.namespace),
            self.config.missing,
        );
        (self.plan_of(pod, placement, &sizing), sizing)
    }

    /// The pod's plan for `sizing`, with the current resources of the
    /// containers it sizes.
    pub(super) fn plan_of(
        &self,
        pod: &RunningPod,
        placement: Placement<'_>,
        sizing: &Sizing,
    ) -> PodPlan {
        let mut containers = Vec::with_capacity(sizing.containers.len());
        for sized in &sizing.containers {
            let Some(c) = pod.spec.get(sized.index) else {
                continue;
            };
            let state = pod.container_state(&c.name);
            // The actuated resources the kubelet reports, else the spec.
            let current = Resources {
                requests: state
                    .and_then(|s| s.requests.clone())
                    .or_else(|| c.requests.clone())
                    .unwrap_or_default(),
                limits: state
                    .and_then(|s| s.limits.clone())
                    .or_else(|| c.limits.clone())
                    .unwrap_or_default(),
            };
            containers.push(ContainerChange {
                name: c.name.clone(),
                current,
                desired: None,
            });
        }
        let scope_value = match placement {
            // A node-scoped group is named after the pod's node: share it.
            Placement::Group { value, .. } => Some(match &pod.node {
                Some(node) if **node == *value => node.clone(),
                _ => Arc::from(value),
            }),
            _ => None,
        };
        PodPlan {
            namespace: pod.namespace.clone(),
            pod: pod.name.clone(),
            vpa: self.vpa_name.clone(),
            node: pod.node.clone(),
            scope_value,
            action: Action::None,
            reason: Reason::default(),
            message: Cow::Borrowed(""),
            containers,
            ops: Patch::default(),
            resource_version: pod.resource_version.clone(),
            uid: pod.uid.clone(),
            unusable: sizing.unusable,
            unboost: Vec::new(),
        }
    }

    /// The pod as its DaemonSet created it, for a pod without nodescope's
    /// mark (created before nodescope, or while its webhook was down):
    /// the template's resources, so the limit ratios are the template's.
    fn creation_view<'p>(&'p self, pod: &'p RunningPod) -> Option<PodView<'p>> {
        if pod.has_mark() {
            return None;
        }
        let template = &self.daemonset?.template;
        // A copy to rewrite: only for pods without the mark.
        let mut view = pod.view();
        for c in &mut view.spec.containers {
            if let Some((_, (requests, limits))) = template.iter().find(|(n, _)| **n == *c.name) {
                c.resources = Some(ResourcesView {
                    requests: view_texts(requests.as_ref()),
                    limits: view_texts(limits.as_ref()),
                });
            }
        }
        Some(view)
    }
}

/// Whether every container already runs with what the sizing gives it,
/// text for text (the desired resources would equal the current ones).
pub(super) fn at_target(plan: &PodPlan, pod: &RunningPod, sizing: &Sizing) -> bool {
    let mut buffer = String::new();
    sizing.containers.iter().all(|sized| {
        let name = pod.spec.get(sized.index).map(|c| &*c.name);
        plan.containers
            .iter()
            .find(|c| Some(&*c.name) == name)
            .is_some_and(|c| {
                c.current.requests.holds(&sized.requests, &mut buffer)
                    && c.current.limits.holds(&sized.limits, &mut buffer)
            })
    })
}

/// Sets each container's desired resources: the current ones with the
/// sizing's applied.
pub(super) fn fill(plan: &mut PodPlan, pod: &RunningPod, sizing: &Sizing) {
    for sized in &sizing.containers {
        let Some(name) = pod.spec.get(sized.index).map(|c| &*c.name) else {
            continue;
        };
        let Some(c) = plan.containers.iter_mut().find(|c| *c.name == *name) else {
            continue;
        };
        c.desired = Some(Resources {
            requests: c.current.requests.with_quantities(&sized.requests),
            limits: c.current.limits.with_quantities(&sized.limits),
        });
    }
}
