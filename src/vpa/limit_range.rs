//! LimitRange items of a namespace, and the bounds they add up to.

use super::resources::{resource_name, ResourceList};

/// `LimitRange.spec.limits[].type`; only these two affect pod resources.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LimitKind {
    /// Bounds each container.
    Container,
    /// Bounds the sum over the pod's containers.
    Pod,
}

/// One `LimitRange.spec.limits[]` entry of the pod's namespace.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LimitRangeItem {
    /// Which object the bounds apply to.
    pub kind: LimitKind,
    /// Requests and limits must be at least these.
    pub min: ResourceList,
    /// Limits must be at most these.
    pub max: ResourceList,
    /// The limit the LimitRanger admits for containers without one; VPA
    /// treats it as the original limit.
    pub default: ResourceList,
    /// Kept for completeness; upstream VPA ignores it.
    pub default_request: ResourceList,
    /// Kept for completeness; upstream VPA ignores it.
    pub max_limit_request_ratio: ResourceList,
}

impl LimitRangeItem {
    /// An item with no bounds, to be filled field by field.
    pub fn new(kind: LimitKind) -> Self {
        Self {
            kind,
            min: ResourceList::new(),
            max: ResourceList::new(),
            default: ResourceList::new(),
            default_request: ResourceList::new(),
            max_limit_request_ratio: ResourceList::new(),
        }
    }
}

/// Folds all items of one kind into the effective bounds, like upstream's
/// limit range calculator: the lowest max and the highest min win, and a later
/// default replaces an earlier one. `None` when nothing of that kind is set.
pub fn effective_limit_range(items: &[LimitRangeItem], kind: LimitKind) -> Option<LimitRangeItem> {
    let mut result = LimitRangeItem::new(kind);
    let mut seen = false;
    for item in items.iter().filter(|i| i.kind == kind) {
        if item.min.is_empty() && item.max.is_empty() && item.default.is_empty() {
            continue;
        }
        seen = true;
        if !item.default.is_empty() {
            result.default = item.default.clone();
        }
        for (name, max) in &item.max {
            match result.max.get_mut(name) {
                Some(slot) if max < slot => *slot = max.clone(),
                Some(_) => {}
                None => result.max.insert(resource_name(name), max.clone()),
            }
        }
        for (name, min) in &item.min {
            match result.min.get_mut(name) {
                Some(slot) if min > slot => *slot = min.clone(),
                Some(_) => {}
                None => result.min.insert(resource_name(name), min.clone()),
            }
        }
    }
    seen.then_some(result)
}
