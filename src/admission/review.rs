//! The incoming half of the wire format: an `AdmissionReview` read from bytes
//! without copying the object, so each webhook parses only what it needs.

use crate::json::object::{self as json_object, FromObject};
use serde::Deserialize;
use serde_json::value::RawValue;
use std::borrow::Cow;

/// The `admission.k8s.io` versions a review may arrive in. v1beta1 is
/// answered in kind (its response shape is the same) so an old apiserver or a
/// misconfigured `admissionReviewVersions` still gets a decision, not an error.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ReviewVersion {
    V1,
    V1Beta1,
}

impl ReviewVersion {
    /// The `apiVersion` string the response must carry.
    #[must_use]
    pub fn api_version(self) -> &'static str {
        match self {
            Self::V1 => "admission.k8s.io/v1",
            Self::V1Beta1 => "admission.k8s.io/v1beta1",
        }
    }
}

/// Group/version/kind or group/version/resource as the apiserver writes it.
#[derive(Debug, Default, Deserialize, Clone)]
#[serde(remote = "Self")]
pub struct GroupVersionName<'a> {
    #[serde(default, borrow)]
    pub group: Cow<'a, str>,
    #[serde(default, borrow)]
    pub version: Cow<'a, str>,
    #[serde(default, borrow, alias = "resource")]
    pub kind: Cow<'a, str>,
}

#[derive(Deserialize)]
#[serde(remote = "Self", bound(deserialize = "O: Deserialize<'de>, 'de: 'a"))]
struct RawReview<'a, O> {
    #[serde(rename = "apiVersion", borrow)]
    api_version: Option<Cow<'a, str>>,
    #[serde(borrow)]
    kind: Option<Cow<'a, str>>,
    request: Option<RawRequest<'a, O>>,
}

#[derive(Deserialize)]
#[serde(
    remote = "Self",
    rename_all = "camelCase",
    bound(deserialize = "O: Deserialize<'de>, 'de: 'a")
)]
struct RawRequest<'a, O> {
    #[serde(borrow)]
    uid: Option<Cow<'a, str>>,
    #[serde(borrow, default)]
    kind: GroupVersionName<'a>,
    #[serde(borrow, default)]
    resource: GroupVersionName<'a>,
    #[serde(borrow)]
    sub_resource: Option<Cow<'a, str>>,
    #[serde(borrow)]
    name: Option<Cow<'a, str>>,
    #[serde(borrow)]
    namespace: Option<Cow<'a, str>>,
    #[serde(borrow)]
    operation: Option<Cow<'a, str>>,
    #[serde(default)]
    dry_run: Option<bool>,
    object: Option<O>,
    #[serde(borrow)]
    old_object: Option<&'a RawValue>,
}

// Objects only, so a wrong shape is worded as JSON (`request: invalid type:
// array, expected an object`), never after these Rust types.
crate::object_only!(GroupVersionName<'a>);

impl<'de: 'a, 'a, O: Deserialize<'de>> Deserialize<'de> for RawReview<'a, O> {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        json_object::object(d)
    }
}

impl<'de: 'a, 'a, O: Deserialize<'de>> FromObject<'de> for RawReview<'a, O> {
    fn from_fields<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        RawReview::deserialize(d)
    }
}

impl<'de: 'a, 'a, O: Deserialize<'de>> Deserialize<'de> for RawRequest<'a, O> {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        json_object::object(d)
    }
}

impl<'de: 'a, 'a, O: Deserialize<'de>> FromObject<'de> for RawRequest<'a, O> {
    fn from_fields<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        RawRequest::deserialize(d)
    }
}

/// A review whose envelope is well formed. `object` and `oldObject` stay as
/// raw JSON slices of the request body; `raw_request` is the whole `request`
/// for the policy engine, which binds it as CEL's `request`. `O` is how the
/// object is read: raw JSON by default, or a typed borrowed view (the
/// mutating webhook reads a pod view in the same pass as the envelope).
#[derive(Debug)]
pub struct Review<'a, O = &'a RawValue> {
    pub version: ReviewVersion,
    pub uid: Cow<'a, str>,
    pub kind: GroupVersionName<'a>,
    pub resource: GroupVersionName<'a>,
    pub sub_resource: Option<Cow<'a, str>>,
    pub name: Option<Cow<'a, str>>,
    pub namespace: Option<Cow<'a, str>>,
    pub operation: Cow<'a, str>,
    pub dry_run: bool,
    pub object: Option<O>,
    pub old_object: Option<&'a RawValue>,
}

impl<O> Review<'_, O> {
    /// `kind/namespace/name` for messages; DaemonSet pods at the mutating
    /// phase have no name yet, so that part may be `<generated>`.
    #[must_use]
    pub fn object_ref(&self) -> String {
        let name = self
            .name
            .as_deref()
            .filter(|n| !n.is_empty())
            .unwrap_or("<generated>");
        match self.namespace.as_deref().filter(|n| !n.is_empty()) {
            Some(ns) => format!("{}/{}/{}", self.kind.kind, ns, name),
            None => format!("{}/{}", self.kind.kind, name),
        }
    }

    /// The resource with its subresource, as rules name it (`pods/resize`).
    #[must_use]
    pub fn resource_path(&self) -> Cow<'_, str> {
        match self.sub_resource.as_deref() {
            Some(sub) if !sub.is_empty() => Cow::Owned(format!("{}/{}", self.resource.kind, sub)),
            _ => Cow::Borrowed(&self.resource.kind),
        }
    }
}

/// Why a body is not a review we can answer with a decision. Every message is
/// one line that says what was expected and what arrived.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum ReviewError {
    #[error("request body is not valid JSON: {0}")]
    NotJson(String),
    #[error("request body is not an AdmissionReview: {0}")]
    NotAReview(String),
    #[error("unsupported apiVersion {0:?}: expected admission.k8s.io/v1 (or v1beta1)")]
    UnsupportedVersion(String),
    #[error("kind is {0:?}: expected AdmissionReview")]
    WrongKind(String),
    #[error("AdmissionReview has no request")]
    MissingRequest,
    #[error("AdmissionReview request has no uid")]
    MissingUid,
    #[error("AdmissionReview request has no operation")]
    MissingOperation,
}

/// Parses the envelope of a review, borrowing from `body`.
pub fn parse(body: &[u8]) -> Result<Review<'_>, ReviewError> {
    parse_as(body)
}

/// Parses the envelope and reads the object as `O`, in one pass over `body`.
///
/// The body is checked as UTF-8 once (JSON must be UTF-8, and the apiserver
/// always sends it), then parsed as text: serde_json then need not validate
/// every string it reads, which is a tenth of a DaemonSet pod's parse.
pub fn parse_as<'a, O: Deserialize<'a>>(body: &'a [u8]) -> Result<Review<'a, O>, ReviewError> {
    let text = std::str::from_utf8(body)
        .map_err(|e| ReviewError::NotJson(format!("request body is not UTF-8: {e}")))?;
    let raw: RawReview<'a, O> = serde_json::from_str(text).map_err(|e| {
        if e.is_syntax() || e.is_eof() {
            ReviewError::NotJson(e.to_string())
        } else {
            ReviewError::NotAReview(json_object::with_path::<RawReview<'a, O>>(text, &e))
        }
    })?;
    let version = match raw.api_version.as_deref() {
        Some("admission.k8s.io/v1") => ReviewVersion::V1,
        Some("admission.k8s.io/v1beta1") => ReviewVersion::V1Beta1,
        Some(other) => return Err(ReviewError::UnsupportedVersion(other.to_owned())),
        None => return Err(ReviewError::UnsupportedVersion(String::new())),
    };
    match raw.kind.as_deref() {
        Some("AdmissionReview") => {}
        other => return Err(ReviewError::WrongKind(other.unwrap_or_default().to_owned())),
    }
    let request = raw.request.ok_or(ReviewError::MissingRequest)?;
    let uid = request
        .uid
        .filter(|u| !u.is_empty())
        .ok_or(ReviewError::MissingUid)?;
    let operation = request
        .operation
        .filter(|o| !o.is_empty())
        .ok_or(ReviewError::MissingOperation)?;
    Ok(Review {
        version,
        uid,
        kind: request.kind,
        resource: request.resource,
        sub_resource: request.sub_resource,
        name: request.name,
        namespace: request.namespace,
        operation,
        dry_run: request.dry_run.unwrap_or(false),
        object: request.object,
        old_object: request.old_object,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_envelope_of_a_v1_pod_create() {
        let body = br#"{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{"uid":"u1","kind":{"group":"","version":"v1","kind":"Pod"},"resource":{"group":"","version":"v1","resource":"pods"},"namespace":"ns","operation":"CREATE","object":{"a":1},"oldObject":null,"dryRun":true}}"#;
        let review = parse(body).unwrap();
        assert_eq!(review.uid, "u1");
        assert_eq!(review.kind.kind, "Pod");
        assert_eq!(review.resource.kind, "pods");
        assert_eq!(review.object.map(RawValue::get), Some(r#"{"a":1}"#));
        assert!(review.old_object.is_none());
        assert!(review.dry_run);
        assert_eq!(review.object_ref(), "Pod/ns/<generated>");
    }

    #[test]
    fn a_body_that_is_not_utf8_is_rejected_wherever_the_bad_byte_is() {
        let mut body = br#"{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{"uid":"u","operation":"CREATE","object":{"skipped":""#.to_vec();
        body.extend_from_slice(b"\xff\"}}}");
        assert_eq!(
            parse(&body).unwrap_err().to_string(),
            "request body is not valid JSON: request body is not UTF-8: invalid utf-8 sequence of 1 bytes from index 124"
        );
    }

    #[test]
    fn rejects_a_review_without_uid() {
        let body = br#"{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{"operation":"CREATE"}}"#;
        assert_eq!(parse(body).unwrap_err(), ReviewError::MissingUid);
    }

    #[test]
    fn deeply_nested_json_is_an_error_not_a_stack_overflow() {
        let mut body = String::from(
            r#"{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{"uid":"u","operation":"CREATE","object":"#,
        );
        body.push_str(&"[".repeat(100_000));
        let err = parse(body.as_bytes()).unwrap_err();
        assert!(
            matches!(err, ReviewError::NotJson(_) | ReviewError::NotAReview(_)),
            "{err}"
        );
    }
}
