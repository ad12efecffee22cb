//! The per-node VPA mutation of one DaemonSet pod (pure, no I/O).
//!
//! Given the pod as admitted, the VPA that selects it and the namespace's
//! LimitRanges, this computes the JSON Patch the webhook returns. Resource
//! values, capping and annotation wording follow the upstream VPA admission
//! controller; what differs is only *which* recommendation is used (the
//! pod's node group instead of the DaemonSet-wide one).
//!
//! The patch only contains operations that change the pod, so running the
//! mutation on its own output yields an empty patch: the apiserver may call
//! a webhook again (reinvocation) and a second pass must be a no-op.

mod annotations;
pub mod boost;
mod capping;
pub mod mark;
pub mod pod;
mod select;

pub mod patch;
pub mod unboost;

pub use self::patch::{Patch, PatchValue};
pub use crate::vpa::{NodeLabel, NodeLabels, Placement, ScopeKey};

use crate::quantity::Quantity;

pub use self::boost::{mutate_pod_with, BoostSettings};
use self::capping::{Current, PodMember};
pub use self::mark::Originals;
use self::pod::{ContainerView, JsonMap, PodView, ResourceTexts};
use self::select::select_recommendations;
use crate::vpa::{
    effective_limit_range, resource_name, ContainerMode, ControlledValues, LimitKind,
    LimitRangeItem, RecommendationRow, ResourceList, VpaPolicy,
};

/// Annotation listing the containers VPA saw (upstream `vpaObservedContainers`).
pub const OBSERVED_CONTAINERS_ANNOTATION: &str = "vpaObservedContainers";
/// Annotation describing what VPA changed (upstream `vpaUpdates`).
pub const UPDATES_ANNOTATION: &str = "vpaUpdates";

/// What to do when the VPA has no recommendation group for the pod's
/// placement: a value never seen (a node that joined after the recommender
/// last ran), a node the store does not know, or a pod without a node.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum MissingNodeRecommendation {
    /// Use the VPA's DaemonSet-wide `status.recommendation`, as AEP-10031's
    /// admission controller does; unchanged when that is absent too.
    #[default]
    Aggregate,
    /// Leave resources as the DaemonSet template has them (KEP-4943's
    /// stricter reading).
    LeaveUnchanged,
}

/// The webhook's answer for one pod.
#[derive(Debug, Default, Clone, PartialEq)]
pub struct Mutation {
    /// `add` operations to return as the admission patch (may be empty).
    pub patch: Patch,
    /// Conditions worth surfacing as admission warnings; never fatal.
    pub warnings: Vec<String>,
    /// As [`Sizing::unusable`].
    pub unusable: usize,
}

/// The resources nodescope sets on one container: the values of the
/// resources it controls, whether or not the pod has them already.
#[derive(Clone, Debug, PartialEq)]
pub struct ContainerSizing {
    /// The container's index in `spec.containers`.
    pub index: usize,
    /// Requests, capped (upstream's target after min/max and LimitRange).
    pub requests: ResourceList,
    /// Limits, kept in the original ratio to the requests; empty for
    /// `RequestsOnly`.
    pub limits: ResourceList,
    /// Capping notes for the `vpaUpdates` annotation.
    pub notes: Vec<String>,
}

/// What the webhook gives a pod, before it becomes a patch: the one
/// arithmetic that both the webhook (at creation) and the updater (on a
/// running pod) apply.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Sizing {
    /// The containers nodescope resizes, in pod order.
    pub containers: Vec<ContainerSizing>,
    /// As [`Mutation::warnings`].
    pub warnings: Vec<String>,
    /// Containers left unchanged because their recommendation cannot be
    /// applied (negative or unparsable): what the components count.
    pub unusable: usize,
    /// Whether the pod carries nodescope's mark (computed from it).
    marked: bool,
}

type Plan = ContainerSizing;

/// Computes the patch for `pod` at `placement` (see
/// [`Placement::resolve`]) under `vpa`.
///
/// Never fails: anything unexpected becomes a warning and that part of the
/// pod is left unchanged, so the webhook can always admit the pod.
pub fn mutate_pod(
    pod: &PodView<'_>,
    vpa: &VpaPolicy,
    placement: Placement<'_>,
    limit_ranges: &[LimitRangeItem],
    missing: MissingNodeRecommendation,
) -> Mutation {
    mutate_pod_with(
        pod,
        vpa,
        placement,
        limit_ranges,
        missing,
        &BoostSettings::default(),
    )
}

/// The resources the webhook gives `pod` at `placement` under `vpa`: what
/// [`mutate_pod`] patches, as values. The updater calls this on a running
/// pod, so that a pod brought up to date in place has exactly what a new
/// pod would get at creation.
pub fn size_pod(
    pod: &PodView<'_>,
    vpa: &VpaPolicy,
    placement: Placement<'_>,
    limit_ranges: &[LimitRangeItem],
    missing: MissingNodeRecommendation,
) -> Sizing {
    // A pod nodescope already resized carries the resources it had before
    // (see `mark`): recomputing from those gives exactly the first pass's
    // result, so a reinvocation over nodescope's own output is a no-op and
    // one after another webhook rewrote the resources restores them.
    size_pod_marked(
        pod,
        Originals::of(pod),
        vpa,
        placement,
        limit_ranges,
        missing,
    )
}

/// [`size_pod`] with the pod's mark already read (what
/// [`Originals::of`] gives for `pod`), for a controller that keeps its pods
/// read between passes instead of parsing the annotation each time.
pub fn size_pod_marked(
    pod: &PodView<'_>,
    mark: Result<Option<Originals<'_>>, String>,
    vpa: &VpaPolicy,
    placement: Placement<'_>,
    limit_ranges: &[LimitRangeItem],
    missing: MissingNodeRecommendation,
) -> Sizing {
    let mut warnings = Vec::new();
    let originals = match mark {
        Ok(originals) => originals,
        Err(reason) => {
            warnings.push(format!(
                "{reason}; recomputing from the pod's current resources"
            ));
            None
        }
    };
    let recs = select_recommendations(vpa, placement, missing, &mut warnings);
    let mut unusable = 0;
    let containers = match recs {
        Some(recs) => plan_containers(
            pod,
            vpa,
            recs,
            limit_ranges,
            originals.as_ref(),
            &mut warnings,
            &mut unusable,
        ),
        None => Vec::new(),
    };
    Sizing {
        containers,
        warnings,
        unusable,
        marked: originals.is_some(),
    }
}

/// The `add` operations that give `pod`'s containers the values of
/// `sizing`, creating maps only where needed; no annotations. This is the
/// body of an in-place resize.
pub fn resize_ops(pod: &PodView<'_>, sizing: &Sizing) -> Patch {
    let mut patch = Patch::default();
    for plan in &sizing.containers {
        if let Some(c) = pod.spec.containers.get(plan.index) {
            container_ops(c, plan, &mut patch);
        }
    }
    patch
}

fn parse_list(
    texts: Option<&ResourceTexts<'_>>,
    field: &str,
    container: &str,
    warnings: &mut Vec<String>,
) -> Option<Current> {
    let mut out = Current::new();
    for (name, text) in texts.into_iter().flat_map(JsonMap::iter) {
        match Quantity::parse(&text.0) {
            Ok(q) => out.insert(resource_name(name), q),
            Err(e) => {
                warnings.push(format!(
                    "container {container:?}: resources.{field}[{:?}]: {e}; container left unchanged",
                    &**name
                ));
                return None;
            }
        }
    }
    Some(out)
}

/// A container that VPA will resize, with its current values parsed.
struct Member {
    index: usize,
    requests: Current,
    limits: Current,
    target: ResourceList,
    requests_only: bool,
    /// Whether `requests` and `limits` are the pod's originals (its mark).
    marked: bool,
}

fn plan_containers(
    pod: &PodView<'_>,
    vpa: &VpaPolicy,
    recs: RecommendationRow<'_>,
    limit_ranges: &[LimitRangeItem],
    originals: Option<&Originals<'_>>,
    warnings: &mut Vec<String>,
    unusable: &mut usize,
) -> Vec<Plan> {
    let mut members = Vec::new();
    let pod_lr = effective_limit_range(limit_ranges, LimitKind::Pod);
    for (index, c) in pod.spec.containers.iter().enumerate() {
        let name = &*c.name;
        let policy = vpa.container_policy(name);
        let recorded = originals.and_then(|o| o.get(name));
        let marked = recorded.is_some();
        let (request_texts, limit_texts) = recorded.unwrap_or((c.requests(), c.limits()));
        let requests_only =
            policy.is_some_and(|p| p.controlled_values == ControlledValues::RequestsOnly);
        // Under a Pod LimitRange upstream gives a container without a
        // recommendation one equal to its requests
        // (`insertRequestsForMissingRecommendations`), so it counts in the
        // pod's sums, is scaled with the others and is patched. A container
        // of mode Off has none upstream (its recommender leaves it out).
        let insert = |warnings: &mut Vec<String>| {
            pod_lr.as_ref()?;
            let requests = parse_list(request_texts, "requests", name, warnings)?;
            let limits = parse_list(limit_texts, "limits", name, warnings)?;
            (!requests.is_empty()).then(|| Member {
                index,
                target: requests.clone(),
                requests,
                limits,
                requests_only,
                marked,
            })
        };
        if policy.is_some_and(|p| p.mode == ContainerMode::Off) {
            members.extend(insert(warnings));
            continue;
        }
        let default_controlled = crate::vpa::default_controlled_resources();
        let controlled = policy.map_or(&default_controlled, |p| &p.controlled_resources);
        if let Some(why) = recs.unusable(name) {
            warnings.push(format!(
                "container {name:?}: {why} in VerticalPodAutoscaler {}/{}, so it has no \
                 applicable recommendation; container left unchanged",
                vpa.namespace, vpa.name
            ));
            *unusable += 1;
            continue;
        }
        let target: ResourceList = recs
            .target(name)
            .filter(|(r, _)| controlled.iter().any(|c| c == r))
            .map(|(r, q)| (resource_name(r), q))
            .collect();
        if target.is_empty() {
            if recs.target(name).next().is_none() {
                members.extend(insert(warnings));
            }
            continue;
        }
        let Some(requests) = parse_list(request_texts, "requests", name, warnings) else {
            continue;
        };
        let Some(limits) = parse_list(limit_texts, "limits", name, warnings) else {
            continue;
        };
        members.push(Member {
            index,
            requests,
            limits,
            target,
            requests_only,
            marked,
        });
    }

    // Upstream caps the pod as a whole first, then each container.
    if let Some(pod_lr) = pod_lr {
        let mut view: Vec<PodMember<'_>> = members
            .iter_mut()
            .map(|m| PodMember {
                requests: &m.requests,
                limits: &m.limits,
                target: &mut m.target,
            })
            .collect();
        capping::cap_pod(&mut view, &pod_lr);
    }
    let container_lr = effective_limit_range(limit_ranges, LimitKind::Container);
    let no_default = ResourceList::new();
    let default_limit = container_lr.as_ref().map_or(&no_default, |lr| &lr.default);

    members
        .into_iter()
        .filter_map(|mut m| {
            let name = pod.spec.containers.get(m.index).map_or("", |c| &*c.name);
            let policy = vpa.container_policy(name);
            let mut notes = capping::cap_container(
                &mut m.target,
                &m.requests,
                &m.limits,
                policy,
                container_lr.as_ref(),
            );
            let mut limits = ResourceList::new();
            if !m.requests_only {
                let (l, limit_notes) =
                    capping::proportional_limits(&m.requests, &m.limits, &m.target, default_limit);
                limits = l;
                notes.extend(limit_notes);
            }
            if m.marked {
                if let Some(c) = pod.spec.containers.get(m.index) {
                    restore_originals(&mut m.target, &m.requests, c.requests());
                    restore_originals(&mut limits, &m.limits, c.limits());
                }
            }
            // A negative maxAllowed, or a negative request scaling a limit,
            // can still make a value below zero: none is ever given to a pod.
            let negative = [("request", &m.target), ("limit", &limits)]
                .into_iter()
                .find_map(|(field, list)| {
                    list.iter()
                        .find(|(_, q)| q.sign() < 0)
                        .map(|(r, q)| (field, r, q))
                });
            if let Some((field, resource, q)) = negative {
                let mut text = String::new();
                q.write_canonical(&mut text);
                warnings.push(format!(
                    "container {name:?}: its {resource} {field} would be {text:?}, a negative \
                     quantity (from a negative request or maxAllowed); container left unchanged"
                ));
                *unusable += 1;
                return None;
            }
            Some(Plan {
                index: m.index,
                requests: m.target,
                limits,
                notes,
            })
        })
        .collect()
}

/// A pod nodescope resized earlier gets back the original value of each
/// resource this sizing leaves alone (a target without it now, or a limit
/// upstream's arithmetic does not set): what a new pod, created with the
/// originals, would keep. Unchanged values are not added, so a pod at its
/// originals gets no operation and no note.
fn restore_originals(
    sized: &mut ResourceList,
    originals: &Current,
    current: Option<&ResourceTexts<'_>>,
) {
    for (resource, q) in originals {
        if sized.get(resource).is_some() {
            continue;
        }
        // By value: the pod may spell the same quantity otherwise
        // (`8656801000` is `8656801k` canonically), and a text compare
        // would patch it to itself on every pass.
        let now = current
            .and_then(|m| m.get(resource))
            .and_then(|t| crate::quantity::Quantity::parse(&t.0).ok());
        if now.as_ref() != Some(q) {
            sized.insert(resource_name(resource), q.clone());
        }
    }
}

/// `/spec/containers/<index>` and the given tokens, escaped per RFC 6901.
fn container_path(index: usize, rest: &[&str]) -> String {
    let mut path = String::with_capacity(48);
    path.push_str("/spec/containers/");
    path.push_str(itoa::Buffer::new().format(index));
    for token in rest {
        patch::push_token(&mut path, token);
    }
    path
}

/// Adds the values that differ from the pod, creating maps only when needed.
fn container_ops(c: &ContainerView<'_>, plan: &Plan, patch: &mut Patch) {
    let mut resources_created = c.resources.is_some();
    for (field, wanted, current) in [
        ("requests", &plan.requests, c.requests()),
        ("limits", &plan.limits, c.limits()),
    ] {
        let mut map_created = current.is_some();
        for (r, q) in wanted {
            let mut text = String::new();
            q.write_canonical(&mut text);
            if current.and_then(|m| m.get(r)).map(|t| &*t.0) == Some(text.as_str()) {
                continue;
            }
            if !resources_created {
                patch.add(
                    container_path(plan.index, &["resources"]),
                    PatchValue::Map(Vec::new()),
                );
                resources_created = true;
            }
            if !map_created {
                patch.add(
                    container_path(plan.index, &["resources", field]),
                    PatchValue::Map(Vec::new()),
                );
                map_created = true;
            }
            patch.add(
                container_path(plan.index, &["resources", field, r]),
                PatchValue::Text(text),
            );
        }
    }
}

#[cfg(test)]
mod tests;
