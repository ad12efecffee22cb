//! The admission request as the engine reads it: a thin, borrowed view over
//! the `request` of an `admission.k8s.io/v1` AdmissionReview, either a parsed
//! `serde_json::Value` or a [`LazyReview`] read straight from the body bytes.
//! The lazy parse is [`lazy`], the view the engine reads through is
//! [`view::Json`]; this file reads the request's fields. Must not evaluate.

use serde_json::Value;
use thiserror::Error;

mod lazy;
mod scan;
mod view;

pub use lazy::LazyReview;
pub(crate) use view::{Fields, Json, Shape};

/// Why a JSON value is not an AdmissionRequest the engine can evaluate.
#[derive(Debug, Error, PartialEq, Eq)]
pub enum RequestInputError {
    /// A required field is absent or not a string/object.
    #[error("admission request has no valid '{0}'")]
    MissingField(&'static str),
}

/// A borrowed view of an AdmissionRequest; nothing is copied.
///
/// Built once per request by the webhook (or the dry-run CLI) and shared by
/// every policy evaluation.
#[derive(Debug, Clone, Copy)]
pub struct AdmissionRequestInput<'a> {
    raw: Json<'a>,
    operation: &'a str,
    group: &'a str,
    version: &'a str,
    resource: &'a str,
    sub_resource: &'a str,
    namespace: &'a str,
    name: &'a str,
    object: Option<Json<'a>>,
    old_object: Option<Json<'a>>,
    /// The lazy review this input reads, for its `Value` caches.
    review: Option<&'a LazyReview<'a>>,
}

impl<'a> AdmissionRequestInput<'a> {
    /// Reads the `request` object of an AdmissionReview.
    ///
    /// # Errors
    /// When `operation` or `resource` is missing: without them no rule can
    /// be matched.
    pub fn from_request(raw: &'a Value) -> Result<Self, RequestInputError> {
        Self::from_json(Json::Value(raw), None)
    }

    /// Reads a whole AdmissionReview (`{"request": {...}}`).
    ///
    /// # Errors
    /// When there is no `request`, or it is invalid as for [`Self::from_request`].
    pub fn from_review(review: &'a Value) -> Result<Self, RequestInputError> {
        let request = review
            .get("request")
            .ok_or(RequestInputError::MissingField("request"))?;
        Self::from_request(request)
    }

    /// Reads the `request` of a lazily parsed AdmissionReview body: the
    /// fast path of the webhook, equivalent to `from_review` on the body
    /// parsed as a `serde_json::Value`.
    ///
    /// # Errors
    /// As [`Self::from_review`].
    pub fn from_body(review: &'a LazyReview<'a>) -> Result<Self, RequestInputError> {
        let request = Json::Lazy(&review.root, review.text)
            .get("request")
            .ok_or(RequestInputError::MissingField("request"))?;
        Self::from_json(request, Some(review))
    }

    fn from_json(
        raw: Json<'a>,
        review: Option<&'a LazyReview<'a>>,
    ) -> Result<Self, RequestInputError> {
        let operation = raw
            .get("operation")
            .and_then(Json::as_str)
            .ok_or(RequestInputError::MissingField("operation"))?;
        let resource_of = raw.get("resource");
        let resource = resource_of
            .and_then(|r| r.get("resource"))
            .and_then(Json::as_str)
            .ok_or(RequestInputError::MissingField("resource"))?;
        let str_of = |parent: Option<Json<'a>>, key: &str| {
            parent
                .and_then(|p| p.get(key))
                .and_then(Json::as_str)
                .unwrap_or("")
        };
        let present = |key: &str| raw.get(key).filter(|v| !v.is_null());
        Ok(AdmissionRequestInput {
            raw,
            operation,
            group: str_of(resource_of, "group"),
            version: str_of(resource_of, "version"),
            resource,
            sub_resource: str_of(Some(raw), "subResource"),
            namespace: str_of(Some(raw), "namespace"),
            name: str_of(Some(raw), "name"),
            object: present("object"),
            old_object: present("oldObject"),
            review,
        })
    }

    /// The AdmissionRequest JSON itself. For an input read with
    /// [`Self::from_body`] the `Value` is built on the first call.
    #[must_use]
    pub fn raw(&self) -> &'a Value {
        self.raw.value(self.review.map(|r| &r.values[0]))
    }

    /// `CREATE`, `UPDATE`, `DELETE` or `CONNECT`.
    #[must_use]
    pub fn operation(&self) -> &'a str {
        self.operation
    }

    /// The resource's API group (`""` for core).
    #[must_use]
    pub fn group(&self) -> &'a str {
        self.group
    }

    /// The resource's API version.
    #[must_use]
    pub fn version(&self) -> &'a str {
        self.version
    }

    /// The resource, e.g. `pods`.
    #[must_use]
    pub fn resource(&self) -> &'a str {
        self.resource
    }

    /// The subresource, `""` for the object itself.
    #[must_use]
    pub fn sub_resource(&self) -> &'a str {
        self.sub_resource
    }

    /// The namespace, `""` for cluster-scoped requests. For a Namespace
    /// object this is the namespace's own name, as in the apiserver.
    #[must_use]
    pub fn namespace(&self) -> &'a str {
        if self.namespace.is_empty() && self.is_namespace_resource() {
            self.name
        } else {
            self.namespace
        }
    }

    /// The object's name (may be empty on CREATE with generateName).
    #[must_use]
    pub fn name(&self) -> &'a str {
        self.name
    }

    /// The new object; `None` on DELETE and CONNECT. For an input read with
    /// [`Self::from_body`] the `Value` is built on the first call.
    #[must_use]
    pub fn object(&self) -> Option<&'a Value> {
        self.object
            .map(|o| o.value(self.review.map(|r| &r.values[1])))
    }

    /// The previous object; `None` on CREATE. As [`Self::object`].
    #[must_use]
    pub fn old_object(&self) -> Option<&'a Value> {
        self.old_object
            .map(|o| o.value(self.review.map(|r| &r.values[2])))
    }

    /// Whether the request is about a Namespace object itself.
    #[must_use]
    pub fn is_namespace_resource(&self) -> bool {
        self.group.is_empty() && self.resource == "namespaces"
    }

    /// The request JSON, as the engine reads it.
    pub(crate) fn request_json(&self) -> Json<'a> {
        self.raw
    }

    /// The new object, as the engine reads it.
    pub(crate) fn object_json(&self) -> Option<Json<'a>> {
        self.object
    }

    /// The previous object, as the engine reads it.
    pub(crate) fn old_object_json(&self) -> Option<Json<'a>> {
        self.old_object
    }
}

#[cfg(test)]
#[path = "request_tests.rs"]
mod tests;
