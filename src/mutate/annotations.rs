//! The annotations a sized pod gets: upstream's `vpaUpdates` and
//! `vpaObservedContainers`, and nodescope's mark.

use super::pod::PodView;
use super::{
    mark, patch, Patch, PatchValue, Plan, OBSERVED_CONTAINERS_ANNOTATION, UPDATES_ANNOTATION,
};
use crate::vpa::VpaPolicy;

/// The `vpaUpdates` text, worded like upstream `CalculatePatches`.
fn updates_annotation(vpa: &VpaPolicy, plans: &[Plan]) -> Option<String> {
    let mut text = String::new();
    for (n, p) in plans
        .iter()
        .filter(|p| !p.requests.is_empty() || !p.limits.is_empty())
        .enumerate()
    {
        if n == 0 {
            text.push_str("Pod resources updated by ");
            text.push_str(&vpa.name);
            text.push_str(": ");
        } else {
            text.push_str("; ");
        }
        text.push_str("container ");
        text.push_str(itoa::Buffer::new().format(p.index));
        text.push_str(": ");
        let parts = p.notes.iter().map(String::as_str).map(|n| (n, ""));
        let requests = p.requests.keys().map(|r| (r, " request"));
        let limits = p.limits.keys().map(|r| (r, " limit"));
        for (i, (part, tail)) in parts.chain(requests).chain(limits).enumerate() {
            if i > 0 {
                text.push_str(", ");
            }
            text.push_str(part);
            text.push_str(tail);
        }
    }
    (!text.is_empty()).then_some(text)
}

pub(super) fn annotation_ops(
    pod: &PodView<'_>,
    vpa: &VpaPolicy,
    plans: &[Plan],
    resources_changed: bool,
    new_mark: Option<String>,
    boosts: Vec<(String, String)>,
    patch: &mut Patch,
) {
    let mut observed = String::new();
    for (i, c) in pod.spec.containers.iter().enumerate() {
        if i > 0 {
            observed.push_str(", ");
        }
        observed.push_str(&c.name);
    }
    // Upstream order: the updates annotation, then the observed containers.
    let mut wanted: Vec<(&str, String)> = Vec::with_capacity(2);
    if let Some(text) = updates_annotation(vpa, plans) {
        // An unchanged pod keeps its record of the pass that changed it, so a
        // second pass (whose notes can differ, e.g. no overflow) is a no-op.
        if resources_changed || pod.annotation(UPDATES_ANNOTATION).is_none() {
            wanted.push((UPDATES_ANNOTATION, text));
        }
    }
    wanted.push((OBSERVED_CONTAINERS_ANNOTATION, observed));
    // Upstream's startup-boost annotations, one per boosted container.
    for (key, value) in &boosts {
        wanted.push((key.as_str(), value.clone()));
    }
    if let Some(mark) = new_mark {
        wanted.push((mark::ORIGINAL_RESOURCES_ANNOTATION, mark));
    }
    if pod.metadata.annotations.is_none() {
        let map = wanted.into_iter().map(|(k, v)| (k.to_owned(), v)).collect();
        patch.add("/metadata/annotations".to_owned(), PatchValue::Map(map));
        return;
    }
    for (key, value) in wanted {
        if pod.annotation(key) != Some(value.as_str()) {
            let mut path = String::from("/metadata/annotations");
            patch::push_token(&mut path, key);
            patch.add(path, PatchValue::Text(value));
        }
    }
}
