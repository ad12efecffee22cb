//! What a pod should have: the webhook's own arithmetic on the pod as it
//! was created, and the plan's current and desired resources.

use super::{Group, PodPlan};
use crate::json::borrowed::{JsonMap, QuantityText, Str};
use crate::mutate::mark::ORIGINAL_RESOURCES_ANNOTATION;
use crate::mutate::pod::{PodView, ResourcesView};
use crate::mutate::{resize_ops, size_pod, Sizing};
use crate::pods::RunningPod;
use crate::update::{Action, ContainerChange, Quantities, Resources};
use crate::vpa::Placement;
use std::borrow::Cow;

impl Group<'_> {
    /// The pod's plan with current and desired resources, and the sizing.
    pub(super) fn sized(&self, pod: &RunningPod, actual: &PodView<'_>) -> (PodPlan, Sizing) {
        let creation = self.creation_view(pod, actual);
        let placement = Placement::resolve(&self.vpa.scope, pod.node.as_deref(), self.snapshot);
        let sizing = size_pod(
            creation.as_ref().unwrap_or(actual),
            self.vpa,
            placement,
            self.snapshot.limit_ranges(&pod.namespace),
            self.config.missing,
        );
        let ops = resize_ops(actual, &sizing);
        let mut containers = Vec::new();
        for sized in &sizing.containers {
            let Some(c) = actual.spec.containers.get(sized.index) else {
                continue;
            };
            let state = pod.container_state(&c.name);
            let spec = |m: Option<&JsonMap<Str<'_>, QuantityText<'_>>>| -> Quantities {
                m.into_iter()
                    .flat_map(JsonMap::iter)
                    .map(|(k, v)| (&**k, &*v.0))
                    .collect()
            };
            let status = |m: &Option<crate::pods::Texts>| {
                m.as_ref()
                    .map(|l| l.iter().map(|(k, v)| (&**k, &**v)).collect::<Quantities>())
            };
            let current = Resources {
                requests: state
                    .and_then(|s| status(&s.requests))
                    .unwrap_or_else(|| spec(c.requests())),
                limits: state
                    .and_then(|s| status(&s.limits))
                    .unwrap_or_else(|| spec(c.limits())),
            };
            let mut desired = current.clone();
            for (r, q) in &sized.requests {
                desired.requests.insert(r, q.to_string());
            }
            for (r, q) in &sized.limits {
                desired.limits.insert(r, q.to_string());
            }
            containers.push(ContainerChange {
                name: c.name.to_string(),
                current,
                desired: Some(desired),
            });
        }
        let plan = PodPlan {
            namespace: pod.namespace.to_string(),
            pod: pod.name.to_string(),
            vpa: self.vpa.name.clone(),
            node: pod.node.as_deref().map(str::to_owned),
            scope_value: match placement {
                Placement::Group { value, .. } => Some(value.to_owned()),
                _ => None,
            },
            action: Action::None,
            reason: String::new(),
            containers,
            ops,
            resource_version: pod.resource_version.to_string(),
            uid: pod.uid.to_string(),
        };
        (plan, sizing)
    }

    /// The pod as its DaemonSet created it, for a pod without nodescope's
    /// mark (created before nodescope, or while its webhook was down):
    /// the template's resources, so the limit ratios are the template's.
    fn creation_view<'p>(
        &'p self,
        pod: &'p RunningPod,
        actual: &PodView<'_>,
    ) -> Option<PodView<'p>> {
        if actual.annotation(ORIGINAL_RESOURCES_ANNOTATION).is_some() {
            return None;
        }
        let template = &self.daemonset?.template;
        // A copy to rewrite: only for pods without the mark.
        let mut view = pod.view();
        let texts = |list: &'p Option<crate::pods::Texts>| {
            list.as_ref().map(|l| {
                JsonMap(
                    l.iter()
                        .map(|(k, v)| {
                            (
                                Str(Cow::Borrowed(&**k)),
                                QuantityText(Str(Cow::Borrowed(&**v))),
                            )
                        })
                        .collect(),
                )
            })
        };
        for c in &mut view.spec.containers {
            if let Some((_, (requests, limits))) = template.iter().find(|(n, _)| **n == *c.name) {
                c.resources = Some(ResourcesView {
                    requests: texts(requests),
                    limits: texts(limits),
                });
            }
        }
        Some(view)
    }
}
