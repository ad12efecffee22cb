//! Which recommendation row a pod gets: its group, or the VPA-wide
//! fallback (a missing group, or the scope gated off by Feature
//! `vpa-node-scope`), with the warning that says why. Pure.

use super::MissingNodeRecommendation;
use crate::vpa::scope;
use crate::vpa::{Placement, RecommendationRow, ScopeKey, VpaPolicy};

/// The row for a pod at `placement`: its group; else, with a warning
/// naming the miss, the VPA-wide recommendation (or none, under
/// `LeaveUnchanged`); with the scope gated off, the VPA-wide one.
pub(super) fn select_recommendations<'v>(
    vpa: &'v VpaPolicy,
    placement: Placement<'_>,
    missing: MissingNodeRecommendation,
    warnings: &mut Vec<String>,
) -> Option<RecommendationRow<'v>> {
    if let Placement::Group { value, .. } = placement {
        if let Some(recs) = vpa.recommendations.group(value) {
            return Some(recs);
        }
    }
    // A miss from here on: the words are only built now, off the hot path.
    let vpa_ref = format!("VerticalPodAutoscaler {}/{}", vpa.namespace, vpa.name);
    let prefix = match (placement, &vpa.scope) {
        (Placement::Group { node, value }, key) => {
            match key {
                ScopeKey::NodeName => format!("no recommendation for node {value:?} in {vpa_ref}"),
                ScopeKey::Label(key) if value == scope::ABSENT => format!(
                    "no recommendation for {key} {value:?} (node {node:?} has no {key} label) in {vpa_ref}"
                ),
                ScopeKey::Label(key) => {
                    format!("no recommendation for {key} {value:?} (node {node:?}) in {vpa_ref}")
                }
            }
        }
        (Placement::UnknownNode { node }, ScopeKey::Label(key)) => format!(
            "node {node:?} is not in nodescope's Node store, so its {key} label is unknown ({vpa_ref})"
        ),
        (Placement::UnknownNode { node }, ScopeKey::NodeName) => {
            format!("no recommendation for node {node:?} in {vpa_ref}")
        }
        (Placement::ScopeOff { state }, _) => return scope_off(vpa, &vpa_ref, state, warnings),
        (Placement::NoNode, _) => format!(
            "the pod names no node (no spec.nodeName and no matchFields metadata.name node affinity), \
             so it has no recommendation group in {vpa_ref}"
        ),
    };
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

/// AEP-10031 with its gate off: the VPA-wide recommendation, as for an
/// unscoped VPA. Not a missing group, so `--missing-node-recommendation`
/// does not apply.
fn scope_off<'v>(
    vpa: &'v VpaPolicy,
    vpa_ref: &str,
    state: &str,
    warnings: &mut Vec<String>,
) -> Option<RecommendationRow<'v>> {
    let (namespace, name) = scope::SCOPE_FEATURE;
    let why = format!(
        "Feature {namespace}/{name} is {state}, so {vpa_ref} acts as an unscoped VPA (KEP-3920)"
    );
    match vpa.recommendations.aggregate() {
        Some(recs) => {
            warnings.push(format!(
                "{why}: using the VerticalPodAutoscaler-wide recommendation, not the pod's group"
            ));
            Some(recs)
        }
        None => {
            warnings.push(format!(
                "{why}, and it has no VerticalPodAutoscaler-wide recommendation: resources left unchanged"
            ));
            None
        }
    }
}
