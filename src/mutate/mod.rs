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

mod capping;
pub mod pod;
pub mod recommendation;

use json_patch::jsonptr::PointerBuf;
use json_patch::{AddOperation, PatchOperation};
use serde_json::Value;

use crate::quantity::Quantity;

use self::capping::{Current, PodMember};
use self::pod::{ContainerView, PodView, ResourceTexts};
use self::recommendation::{
    effective_limit_range, ContainerMode, ControlledValues, LimitKind, LimitRangeItem,
    RecommendationRow, ResourceList, VpaPolicy,
};

/// Annotation listing the containers VPA saw (upstream `vpaObservedContainers`).
pub const OBSERVED_CONTAINERS_ANNOTATION: &str = "vpaObservedContainers";
/// Annotation describing what VPA changed (upstream `vpaUpdates`).
pub const UPDATES_ANNOTATION: &str = "vpaUpdates";

/// What to do when the VPA has no recommendation group for the pod's node
/// (e.g. a node that joined after the recommender last ran).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum MissingNodeRecommendation {
    /// Leave resources as the DaemonSet template has them.
    #[default]
    LeaveUnchanged,
    /// Use the VPA's DaemonSet-wide `status.recommendation`.
    Aggregate,
}

/// The webhook's answer for one pod.
#[derive(Debug, Default, Clone, PartialEq)]
pub struct Mutation {
    /// `add` operations to return as the admission patch (may be empty).
    pub patch: Vec<PatchOperation>,
    /// Conditions worth surfacing as admission warnings; never fatal.
    pub warnings: Vec<String>,
}

/// The resources nodescope sets on one container.
struct Plan {
    index: usize,
    requests: ResourceList,
    limits: ResourceList,
    notes: Vec<String>,
}

/// Computes the patch for `pod` scheduled to `node` under `vpa`.
///
/// Never fails: anything unexpected becomes a warning and that part of the
/// pod is left unchanged, so the webhook can always admit the pod.
pub fn mutate_pod(
    pod: &PodView<'_>,
    vpa: &VpaPolicy,
    node: &str,
    limit_ranges: &[LimitRangeItem],
    missing: MissingNodeRecommendation,
) -> Mutation {
    let mut warnings = Vec::new();
    let recs = select_recommendations(vpa, node, missing, &mut warnings);
    let plans = match recs {
        Some(recs) => plan_containers(pod, vpa, recs, limit_ranges, &mut warnings),
        None => Vec::new(),
    };
    let mut patch = Vec::new();
    for plan in &plans {
        if let Some(c) = pod.spec.containers.get(plan.index) {
            container_ops(c, plan, &mut patch);
        }
    }
    let resources_changed = !patch.is_empty();
    annotation_ops(pod, vpa, &plans, resources_changed, &mut patch);
    Mutation { patch, warnings }
}

fn select_recommendations<'v>(
    vpa: &'v VpaPolicy,
    node: &str,
    missing: MissingNodeRecommendation,
    warnings: &mut Vec<String>,
) -> Option<RecommendationRow<'v>> {
    if let Some(recs) = vpa.recommendations.node(node) {
        return Some(recs);
    }
    let prefix = format!(
        "no recommendation for node {node:?} in VerticalPodAutoscaler {}/{}",
        vpa.namespace, vpa.name
    );
    let aggregate = match missing {
        MissingNodeRecommendation::Aggregate => vpa.recommendations.aggregate(),
        MissingNodeRecommendation::LeaveUnchanged => None,
    };
    match aggregate {
        Some(recs) => {
            warnings.push(format!(
                "{prefix}; using the VerticalPodAutoscaler-wide recommendation"
            ));
            Some(recs)
        }
        None => {
            warnings.push(format!("{prefix}; resources left unchanged"));
            None
        }
    }
}

fn parse_list(
    texts: Option<&ResourceTexts<'_>>,
    field: &str,
    container: &str,
    warnings: &mut Vec<String>,
) -> Option<Current> {
    let mut out = Current::new();
    for (name, text) in texts.into_iter().flatten() {
        match Quantity::parse(&text.0) {
            Ok(q) => {
                out.insert(name.to_string(), q);
            }
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
}

fn plan_containers(
    pod: &PodView<'_>,
    vpa: &VpaPolicy,
    recs: RecommendationRow<'_>,
    limit_ranges: &[LimitRangeItem],
    warnings: &mut Vec<String>,
) -> Vec<Plan> {
    let mut members = Vec::new();
    for (index, c) in pod.spec.containers.iter().enumerate() {
        let name = &*c.name;
        let policy = vpa.container_policy(name);
        if policy.is_some_and(|p| p.mode == ContainerMode::Off) {
            continue;
        }
        let default_controlled = recommendation::default_controlled_resources();
        let controlled = policy.map_or(&default_controlled, |p| &p.controlled_resources);
        let target: ResourceList = recs
            .target(name)
            .filter(|(r, _)| controlled.iter().any(|c| c == r))
            .map(|(r, q)| (r.to_owned(), q))
            .collect();
        if target.is_empty() {
            continue;
        }
        let Some(requests) = parse_list(c.requests(), "requests", name, warnings) else {
            continue;
        };
        let Some(limits) = parse_list(c.limits(), "limits", name, warnings) else {
            continue;
        };
        let requests_only =
            policy.is_some_and(|p| p.controlled_values == ControlledValues::RequestsOnly);
        members.push(Member {
            index,
            requests,
            limits,
            target,
            requests_only,
        });
    }

    // Upstream caps the pod as a whole first, then each container.
    if let Some(pod_lr) = effective_limit_range(limit_ranges, LimitKind::Pod) {
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
        .map(|mut m| {
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
            Plan {
                index: m.index,
                requests: m.target,
                limits,
                notes,
            }
        })
        .collect()
}

fn add(path: PointerBuf, value: Value) -> PatchOperation {
    PatchOperation::Add(AddOperation { path, value })
}

fn container_path(index: usize, rest: &[&str]) -> PointerBuf {
    let mut p = PointerBuf::from_tokens(["spec", "containers"]);
    p.push_back(index);
    for t in rest {
        p.push_back(*t);
    }
    p
}

/// Adds the values that differ from the pod, creating maps only when needed.
fn container_ops(c: &ContainerView<'_>, plan: &Plan, patch: &mut Vec<PatchOperation>) {
    let mut resources_created = c.resources.is_some();
    for (field, wanted, current) in [
        ("requests", &plan.requests, c.requests()),
        ("limits", &plan.limits, c.limits()),
    ] {
        let changes: Vec<(&String, &Quantity)> = wanted
            .iter()
            .filter(|(r, q)| {
                current.and_then(|m| m.get(r.as_str())).map(|t| &*t.0) != Some(&q.to_string())
            })
            .collect();
        if changes.is_empty() {
            continue;
        }
        if !resources_created {
            patch.push(add(
                container_path(plan.index, &["resources"]),
                Value::Object(Default::default()),
            ));
            resources_created = true;
        }
        if current.is_none() {
            patch.push(add(
                container_path(plan.index, &["resources", field]),
                Value::Object(Default::default()),
            ));
        }
        for (r, q) in changes {
            patch.push(add(
                container_path(plan.index, &["resources", field, r]),
                Value::String(q.to_string()),
            ));
        }
    }
}

/// The `vpaUpdates` text, worded like upstream `CalculatePatches`.
fn updates_annotation(vpa: &VpaPolicy, plans: &[Plan]) -> Option<String> {
    let entries: Vec<String> = plans
        .iter()
        .filter(|p| !p.requests.is_empty() || !p.limits.is_empty())
        .map(|p| {
            let mut parts = p.notes.clone();
            parts.extend(p.requests.keys().map(|r| format!("{r} request")));
            parts.extend(p.limits.keys().map(|r| format!("{r} limit")));
            format!("container {}: {}", p.index, parts.join(", "))
        })
        .collect();
    (!entries.is_empty()).then(|| {
        format!(
            "Pod resources updated by {}: {}",
            vpa.name,
            entries.join("; ")
        )
    })
}

fn annotation_ops(
    pod: &PodView<'_>,
    vpa: &VpaPolicy,
    plans: &[Plan],
    resources_changed: bool,
    patch: &mut Vec<PatchOperation>,
) {
    let observed: Vec<&str> = pod.spec.containers.iter().map(|c| &*c.name).collect();
    // Upstream order: the updates annotation, then the observed containers.
    let mut wanted: Vec<(&str, String)> = Vec::with_capacity(2);
    if let Some(text) = updates_annotation(vpa, plans) {
        // An unchanged pod keeps its record of the pass that changed it, so a
        // second pass (whose notes can differ, e.g. no overflow) is a no-op.
        if resources_changed || pod.annotation(UPDATES_ANNOTATION).is_none() {
            wanted.push((UPDATES_ANNOTATION, text));
        }
    }
    wanted.push((OBSERVED_CONTAINERS_ANNOTATION, observed.join(", ")));
    let root = PointerBuf::from_tokens(["metadata", "annotations"]);
    if pod.metadata.annotations.is_none() {
        let map = wanted
            .into_iter()
            .map(|(k, v)| (k.to_owned(), Value::String(v)));
        patch.push(add(root, Value::Object(map.collect())));
        return;
    }
    for (key, value) in wanted {
        if pod.annotation(key) != Some(value.as_str()) {
            let mut path = root.clone();
            path.push_back(key);
            patch.push(add(path, Value::String(value)));
        }
    }
}

#[cfg(test)]
mod tests;
