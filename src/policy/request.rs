//! The admission request as the engine reads it: a thin, borrowed view over
//! the `request` of an `admission.k8s.io/v1` AdmissionReview.

use serde_json::Value;
use thiserror::Error;

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
    raw: &'a Value,
    operation: &'a str,
    group: &'a str,
    version: &'a str,
    resource: &'a str,
    sub_resource: &'a str,
    namespace: &'a str,
    name: &'a str,
    object: Option<&'a Value>,
    old_object: Option<&'a Value>,
}

fn str_at<'a>(value: &'a Value, pointer: &str) -> &'a str {
    value.pointer(pointer).and_then(Value::as_str).unwrap_or("")
}

impl<'a> AdmissionRequestInput<'a> {
    /// Reads the `request` object of an AdmissionReview.
    ///
    /// # Errors
    /// When `operation` or `resource` is missing: without them no rule can
    /// be matched.
    pub fn from_request(raw: &'a Value) -> Result<Self, RequestInputError> {
        let operation = raw
            .get("operation")
            .and_then(Value::as_str)
            .ok_or(RequestInputError::MissingField("operation"))?;
        let resource = raw
            .pointer("/resource/resource")
            .and_then(Value::as_str)
            .ok_or(RequestInputError::MissingField("resource"))?;
        let present = |key: &str| raw.get(key).filter(|v| !v.is_null());
        Ok(AdmissionRequestInput {
            raw,
            operation,
            group: str_at(raw, "/resource/group"),
            version: str_at(raw, "/resource/version"),
            resource,
            sub_resource: str_at(raw, "/subResource"),
            namespace: str_at(raw, "/namespace"),
            name: str_at(raw, "/name"),
            object: present("object"),
            old_object: present("oldObject"),
        })
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

    /// The AdmissionRequest JSON itself.
    #[must_use]
    pub fn raw(&self) -> &'a Value {
        self.raw
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

    /// The new object; `None` on DELETE and CONNECT.
    #[must_use]
    pub fn object(&self) -> Option<&'a Value> {
        self.object
    }

    /// The previous object; `None` on CREATE.
    #[must_use]
    pub fn old_object(&self) -> Option<&'a Value> {
        self.old_object
    }

    /// Whether the request is about a Namespace object itself.
    #[must_use]
    pub fn is_namespace_resource(&self) -> bool {
        self.group.is_empty() && self.resource == "namespaces"
    }

    /// The `request` variable of CEL: the AdmissionRequest without the
    /// objects (they are `object`/`oldObject`), and without an empty
    /// `subResource`, which the apiserver leaves absent.
    pub(crate) fn cel_request(&self) -> Value {
        let mut request = serde_json::Map::new();
        if let Value::Object(fields) = self.raw {
            for (key, value) in fields {
                let skip = matches!(key.as_str(), "object" | "oldObject")
                    || (matches!(key.as_str(), "subResource" | "requestSubResource")
                        && value.as_str().is_some_and(str::is_empty));
                if !skip {
                    request.insert(key.clone(), value.clone());
                }
            }
        }
        Value::Object(request)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_request_without_operation_is_rejected() {
        let raw = json!({"resource": {"resource": "pods"}});
        assert_eq!(
            AdmissionRequestInput::from_request(&raw).map(|_| ()),
            Err(RequestInputError::MissingField("operation"))
        );
    }

    #[test]
    fn the_cel_request_drops_objects_and_an_empty_subresource() {
        let raw = json!({"operation": "CREATE", "resource": {"group": "", "version": "v1", "resource": "pods"},
            "subResource": "", "object": {"a": 1}, "oldObject": null, "name": "p"});
        let input = AdmissionRequestInput::from_request(&raw).expect("valid");
        assert_eq!(
            input.cel_request(),
            json!({"operation": "CREATE", "resource": {"group": "", "version": "v1", "resource": "pods"}, "name": "p"})
        );
        assert!(input.old_object().is_none());
    }

    #[test]
    fn a_namespace_objects_namespace_is_its_name() {
        let raw = json!({"operation": "CREATE", "resource": {"group": "", "version": "v1", "resource": "namespaces"}, "name": "team-a"});
        let input = AdmissionRequestInput::from_request(&raw).expect("valid");
        assert_eq!(input.namespace(), "team-a");
    }
}
