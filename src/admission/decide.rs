//! The two decisions: which patch a DaemonSet pod gets, and whether the
//! policy bundle admits an object. Both read only the [`Decider`].

use super::review::{self, GroupVersionName, ReviewError, ReviewVersion};
use super::{finish, Answer, Decider, Denial, Review, Verdict};
use crate::apiserver::validation;
use crate::mutate::pod::PodView;
use crate::mutate::{mutate_pod_with, Placement};
use crate::policy::{validate, AdmissionRequestInput, Json, LazyReview, Shape};
use std::borrow::Cow;

/// The mutating webhook's decision; the bool marks an internal error that
/// was turned into an unchanged, allowed pod. It denies only a pod the
/// apiserver would refuse anyway (no containers, a negative request), with
/// the apiserver's message, rather than size it: any other pod must never
/// be blocked by nodescope.
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
    if let Some(message) = validation::invalid_pod_view(pod) {
        return (Verdict::deny(Denial::invalid(message)), false);
    }
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
    // updateMode Off applies nothing, but a startup boost still (upstream).
    let boosts = decider.boost.enabled && vpa.has_startup_boost();
    if !vpa.applies_at_admission() && !boosts {
        return (Verdict::allow(), false);
    }
    let placement = Placement::resolve(&vpa.scope, pod.target_node(), &*decider.store);
    let mutation = mutate_pod_with(
        pod,
        vpa,
        placement,
        decider.store.limit_ranges(namespace),
        decider.missing_node,
        &decider.boost,
    );
    let mut verdict = Verdict {
        warnings: mutation.warnings,
        unusable_recommendations: mutation.unusable,
        ..Verdict::default()
    };
    if !mutation.patch.is_empty() {
        verdict.patch = Some(mutation.patch.to_json());
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

/// The validating webhook's answer.
///
/// The policies read the body through a [`LazyReview`], which checks the
/// whole body anyway, so a well-formed review is read once: its envelope
/// comes from the same parse. Anything the typed envelope parse could
/// answer differently (a missing or mistyped field, a repeated key) takes
/// the original two-pass route, so every error is worded as before.
pub(super) fn answer_validation(body: &[u8], decider: &Decider) -> Result<Answer, ReviewError> {
    if let Ok(lazy) = LazyReview::parse(body) {
        if let Some(review) = envelope(&lazy) {
            return Ok(finish(&review, decide_lazy(&lazy, &review, decider)));
        }
    }
    review::parse(body).map(|review| finish(&review, decide_validation(body, &review, decider)))
}

/// The envelope as `review::parse` reads it, when that parse would succeed
/// with exactly these values; `None` when it might fail or differ. The
/// objects are left out: answering needs only the envelope.
fn envelope<'a>(lazy: &'a LazyReview<'_>) -> Option<Review<'a, ()>> {
    if lazy.has_duplicate_keys() {
        return None;
    }
    let Shape::Object(root) = lazy.root().shape() else {
        return None;
    };
    let version = match root.get("apiVersion")?.as_str()? {
        "admission.k8s.io/v1" => ReviewVersion::V1,
        "admission.k8s.io/v1beta1" => ReviewVersion::V1Beta1,
        _ => return None,
    };
    if root.get("kind")?.as_str()? != "AdmissionReview" {
        return None;
    }
    let Shape::Object(request) = root.get("request")?.shape() else {
        return None;
    };
    // An optional string: absent or null is `None`; another type fails the
    // typed parse.
    let optional = |key: &str| match request.get(key) {
        None => Some(None),
        Some(value) if value.is_null() => Some(None),
        Some(value) => value.as_str().map(|s| Some(Cow::Borrowed(s))),
    };
    let dry_run = match request.get("dryRun").map(Json::shape) {
        None | Some(Shape::Null) => false,
        Some(Shape::Bool(dry_run)) => dry_run,
        Some(_) => return None,
    };
    Some(Review {
        version,
        uid: optional("uid")?.filter(|uid| !uid.is_empty())?,
        kind: group_version_name(request.get("kind"))?,
        resource: group_version_name(request.get("resource"))?,
        sub_resource: optional("subResource")?,
        name: optional("name")?,
        namespace: optional("namespace")?,
        operation: optional("operation")?.filter(|op| !op.is_empty())?,
        dry_run,
        object: None,
        old_object: None,
    })
}

/// A `GroupVersionName` as its derived `Deserialize` reads it (`resource`
/// is an alias of `kind`, so both at once is a duplicate field).
fn group_version_name(value: Option<Json<'_>>) -> Option<GroupVersionName<'_>> {
    let Some(value) = value else {
        return Some(GroupVersionName::default());
    };
    let Shape::Object(fields) = value.shape() else {
        return None;
    };
    let text = |key: &str| match fields.get(key) {
        None => Some(Cow::Borrowed("")),
        Some(value) => value.as_str().map(Cow::Borrowed),
    };
    let kind = match (fields.get("kind"), fields.get("resource")) {
        (Some(_), Some(_)) => return None,
        (Some(kind), None) | (None, Some(kind)) => Cow::Borrowed(kind.as_str()?),
        (None, None) => Cow::Borrowed(""),
    };
    Some(GroupVersionName {
        group: text("group")?,
        version: text("version")?,
        kind,
    })
}

/// The validating webhook's decision from the policy bundle; the bool marks
/// a request the engine could not read or an evaluation error.
fn decide_validation(body: &[u8], review: &Review<'_>, decider: &Decider) -> (Verdict, bool) {
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
    decide_lazy(&lazy, review, decider)
}

fn decide_lazy<O>(
    lazy: &LazyReview<'_>,
    review: &Review<'_, O>,
    decider: &Decider,
) -> (Verdict, bool) {
    let input = match AdmissionRequestInput::from_body(lazy) {
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
    // The apiserver validates a pod before the validating webhooks; what
    // it would refuse is refused here in its words, never judged allowed.
    if let Some(message) = validation::invalid_pod_request(&input) {
        return (Verdict::deny(Denial::invalid(message)), false);
    }
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
            unusable_recommendations: 0,
        },
        errored,
    )
}
