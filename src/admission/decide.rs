//! The two decisions: which patch a DaemonSet pod gets, and whether the
//! policy bundle admits an object. Both read only the [`Decider`].

use super::{Decider, Denial, Review, Verdict};
use crate::mutate::mutate_pod;
use crate::mutate::pod::PodView;
use crate::policy::{validate, AdmissionRequestInput, LazyReview};

/// The mutating webhook's decision; the bool marks an internal error that
/// was turned into an unchanged, allowed pod. It never denies: a pod must
/// never be blocked by nodescope.
pub(super) fn decide_mutation(
    review: &Review<'_, PodView<'_>>,
    decider: &Decider,
) -> (Verdict, bool) {
    let is_pod = review.resource.group.is_empty() && review.resource.kind == "pods";
    if review.operation != "CREATE" || !is_pod || review.sub_resource.is_some() {
        return (Verdict::allow(), false);
    }
    let Some(pod) = &review.object else {
        return (
            Verdict::allow().with_warning(format!(
                "nodescope: {} has no object; left unchanged",
                review.object_ref()
            )),
            true,
        );
    };
    if pod.is_balloon() {
        return (Verdict::allow(), false);
    }
    let Some(daemonset) = pod.daemonset_controller() else {
        return (Verdict::allow(), false);
    };
    let namespace = review.namespace.as_deref().unwrap_or_default();
    let Some(vpa) = decider.store.vpa_for(namespace, daemonset) else {
        return (Verdict::allow(), false);
    };
    if !vpa.applies_at_admission() {
        return (Verdict::allow(), false);
    }
    let Some(node) = pod.target_node() else {
        return (
            Verdict::allow().with_warning(format!(
                "nodescope: cannot tell which node {} of DaemonSet {namespace}/{daemonset} will run on \
                 (no spec.nodeName and no single matchFields metadata.name node affinity); resources left unchanged",
                review.object_ref()
            )),
            true,
        );
    };
    let mutation = mutate_pod(
        pod,
        vpa,
        node,
        decider.store.limit_ranges(namespace),
        decider.missing_node,
    );
    let mut verdict = Verdict {
        warnings: mutation.warnings,
        ..Verdict::default()
    };
    if !mutation.patch.is_empty() {
        match serde_json::to_vec(&mutation.patch) {
            Ok(bytes) => verdict.patch = Some(bytes),
            Err(error) => {
                verdict.warnings.push(format!(
                    "nodescope: cannot encode patch: {error}; left unchanged"
                ));
                return (verdict, true);
            }
        }
    }
    (verdict, false)
}

/// The mutating webhook's answer when the envelope is fine but the object
/// is not a readable pod: allowed unchanged, with the reason, unless the
/// request was never one the mutation acts on.
pub(super) fn unreadable_object(review: &Review<'_>) -> (Verdict, bool) {
    let is_pod = review.resource.group.is_empty() && review.resource.kind == "pods";
    if review.operation != "CREATE" || !is_pod || review.sub_resource.is_some() {
        return (Verdict::allow(), false);
    }
    let reason = match review.object {
        Some(object) => match PodView::from_json(object.get().as_bytes()) {
            Err(error) => error.to_string(),
            Ok(_) => "unexpected shape".to_owned(),
        },
        None => "no object".to_owned(),
    };
    (
        Verdict::allow().with_warning(format!(
            "nodescope: cannot read {}: {reason}; left unchanged",
            review.object_ref()
        )),
        true,
    )
}

/// The validating webhook's decision from the policy bundle; the bool marks
/// a request the engine could not read or an evaluation error.
pub(super) fn decide_validation(
    body: &[u8],
    review: &Review<'_>,
    decider: &Decider,
) -> (Verdict, bool) {
    // Only the parts of the object that policies read are ever materialized.
    let lazy = match LazyReview::parse(body) {
        Ok(lazy) => lazy,
        Err(error) => {
            return (
                Verdict::deny(Denial::bad_request(format!(
                    "nodescope cannot read {}: {error}",
                    review.object_ref()
                ))),
                true,
            )
        }
    };
    let input = match AdmissionRequestInput::from_body(&lazy) {
        Ok(input) => input,
        Err(error) => {
            return (
                Verdict::deny(Denial::bad_request(format!(
                    "nodescope cannot read the request for {}: {error}",
                    review.object_ref()
                ))),
                true,
            )
        }
    };
    let outcome = validate(&decider.policies, &input, decider.store.as_ref());
    let errored = outcome
        .results
        .iter()
        .any(|r| r.decision == crate::policy::Decision::Error);
    let denial = (!outcome.allowed).then(|| Denial {
        code: outcome.status_code,
        message: outcome.message.unwrap_or_default(),
        reason: outcome.reason,
    });
    (
        Verdict {
            denial,
            patch: None,
            warnings: outcome.warnings,
            audit_annotations: outcome.audit_annotations,
        },
        errored,
    )
}
