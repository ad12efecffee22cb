//! Whether an apiserver answer says that a write was computed from an
//! object that has changed (or gone) since it was read. nodescope's
//! read-modify-writes are JSON patches that first `test` the object's
//! `resourceVersion` (a pod's resize, the cleaner's patches), or carry it
//! as a precondition (an eviction, an update).
//!
//! A failed `test` is not a 409: the apiserver answers 422 `Invalid` with
//! only the generic message below and no details (checked against
//! kube-apiserver v1.36.2: `{"status":"Failure","message":"the server
//! rejected our request due to an error in our request","reason":
//! "Invalid","details":{},"code":422}`). A patch nodescope builds fails to
//! apply for no other reason than a changed object (its paths are the
//! object's own), while a real validation error names the field, so that
//! exact answer is read as stale.

use kube::core::Status;

/// The apiserver's message for a JSON patch that did not apply.
pub const PATCH_NOT_APPLIED: &str =
    "the server rejected our request due to an error in our request";

/// 409 (a precondition or an update's resourceVersion), 404 (gone), or a
/// JSON patch that did not apply to the object as it is now.
#[must_use]
pub fn is_stale(status: &Status) -> bool {
    status.code == 409 || status.code == 404 || patch_not_applied(status)
}

/// 422 with the generic message and no cause: the patch's `test` failed.
#[must_use]
pub fn patch_not_applied(status: &Status) -> bool {
    status.code == 422
        && status.message == PATCH_NOT_APPLIED
        && status.details.as_ref().is_none_or(|d| d.causes.is_empty())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn answer(json: &str) -> Status {
        serde_json::from_str(json).unwrap_or_else(|e| panic!("{e}: {json}"))
    }

    #[test]
    fn a_failed_test_a_conflict_and_a_gone_object_are_stale_and_a_validation_error_is_not() {
        // kube-apiserver v1.36.2's answer to a JSON patch whose test fails.
        let test_failed = answer(
            r#"{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure","message":"the server rejected our request due to an error in our request","reason":"Invalid","details":{},"code":422}"#,
        );
        assert!(is_stale(&test_failed));
        assert!(patch_not_applied(&test_failed));
        let conflict = answer(
            r#"{"status":"Failure","message":"Operation cannot be fulfilled on pods \"p\": the object has been modified; please apply your changes to the latest version and try again","reason":"Conflict","code":409}"#,
        );
        assert!(is_stale(&conflict));
        assert!(!patch_not_applied(&conflict));
        assert!(is_stale(&answer(
            r#"{"status":"Failure","message":"pods \"p\" not found","reason":"NotFound","code":404}"#
        )));
        // A validation error names its field: not stale.
        let invalid = answer(
            r#"{"status":"Failure","message":"Pod \"p\" is invalid: spec.containers[0].resources.requests: Invalid value: \"2\": must be less than or equal to cpu limit","reason":"Invalid","details":{"name":"p","kind":"Pod","causes":[{"reason":"FieldValueInvalid","message":"Invalid value: \"2\": must be less than or equal to cpu limit","field":"spec.containers[0].resources.requests"}]},"code":422}"#,
        );
        assert!(!is_stale(&invalid));
        assert!(!is_stale(&answer(
            r#"{"status":"Failure","message":"forbidden","reason":"Forbidden","code":403}"#
        )));
    }
}
