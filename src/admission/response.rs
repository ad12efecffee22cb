//! The outgoing half of the wire format: an `AdmissionReview` response with
//! the request's uid, a base64 JSON Patch, warnings and a status on denial.
//!
//! kube's `AdmissionResponse` serializes `patch` as an array of numbers rather
//! than the base64 string the API defines, so the response is written here.

use super::review::ReviewVersion;
use base64::Engine;
use serde::Serialize;
use std::collections::BTreeMap;

/// A denial's `status`: the HTTP code the apiserver relays and the message
/// the user reads.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Denial {
    pub code: u16,
    pub message: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
}

impl Denial {
    /// 403 for a policy's verdict.
    pub fn forbidden(message: impl Into<String>) -> Self {
        Self {
            code: 403,
            message: message.into(),
            reason: Some("Forbidden".into()),
        }
    }

    /// 400 for an object nodescope cannot read.
    pub fn bad_request(message: impl Into<String>) -> Self {
        Self {
            code: 400,
            message: message.into(),
            reason: Some("BadRequest".into()),
        }
    }
}

/// What the webhook decided, before it is put on the wire.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Verdict {
    pub denial: Option<Denial>,
    /// JSON Patch operations, already serialized as a JSON array.
    pub patch: Option<Vec<u8>>,
    pub warnings: Vec<String>,
    pub audit_annotations: BTreeMap<String, String>,
}

impl Verdict {
    /// Allowed, unchanged, nothing to say.
    #[must_use]
    pub fn allow() -> Self {
        Self::default()
    }

    /// Denied with `denial`.
    #[must_use]
    pub fn deny(denial: Denial) -> Self {
        Self {
            denial: Some(denial),
            ..Self::default()
        }
    }

    /// Adds a warning for the API client.
    #[must_use]
    pub fn with_warning(mut self, warning: impl Into<String>) -> Self {
        self.warnings.push(warning.into());
        self
    }
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct WireResponse<'a> {
    uid: &'a str,
    allowed: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    status: Option<WireStatus<'a>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    patch_type: Option<&'static str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    patch: Option<String>,
    #[serde(skip_serializing_if = "<[String]>::is_empty")]
    warnings: &'a [String],
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    audit_annotations: &'a BTreeMap<String, String>,
}

#[derive(Serialize)]
struct WireStatus<'a> {
    status: &'static str,
    code: u16,
    message: &'a str,
    #[serde(skip_serializing_if = "Option::is_none")]
    reason: Option<&'a str>,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct WireReview<'a> {
    api_version: &'static str,
    kind: &'static str,
    response: WireResponse<'a>,
}

/// Serializes the response review for `uid`.
#[must_use]
pub fn encode(version: ReviewVersion, uid: &str, verdict: &Verdict) -> Vec<u8> {
    let review = WireReview {
        api_version: version.api_version(),
        kind: "AdmissionReview",
        response: WireResponse {
            uid,
            allowed: verdict.denial.is_none(),
            status: verdict.denial.as_ref().map(|d| WireStatus {
                status: "Failure",
                code: d.code,
                message: &d.message,
                reason: d.reason.as_deref(),
            }),
            patch_type: verdict.patch.as_ref().map(|_| "JSONPatch"),
            patch: verdict
                .patch
                .as_ref()
                .map(|p| base64::engine::general_purpose::STANDARD.encode(p)),
            warnings: &verdict.warnings,
            audit_annotations: &verdict.audit_annotations,
        },
    };
    // Serializing plain strings, numbers and maps of strings cannot fail;
    // the fallback still answers with the uid so the apiserver can match it.
    serde_json::to_vec(&review).unwrap_or_else(|_| {
        format!(
            r#"{{"apiVersion":"{}","kind":"AdmissionReview","response":{{"uid":{},"allowed":true}}}}"#,
            version.api_version(),
            serde_json::Value::String(uid.to_owned())
        )
        .into_bytes()
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn allowed_response_echoes_uid_and_version() {
        let bytes = encode(ReviewVersion::V1, "abc", &Verdict::allow());
        assert_eq!(
            std::str::from_utf8(&bytes).unwrap(),
            r#"{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","response":{"uid":"abc","allowed":true}}"#
        );
    }

    #[test]
    fn patch_is_base64_with_patch_type() {
        let verdict = Verdict {
            patch: Some(br#"[{"op":"add","path":"/a","value":1}]"#.to_vec()),
            ..Verdict::default()
        };
        let v: serde_json::Value =
            serde_json::from_slice(&encode(ReviewVersion::V1, "u", &verdict)).unwrap();
        assert_eq!(v["response"]["patchType"], "JSONPatch");
        assert_eq!(
            v["response"]["patch"],
            "W3sib3AiOiJhZGQiLCJwYXRoIjoiL2EiLCJ2YWx1ZSI6MX1d"
        );
    }

    #[test]
    fn denial_carries_code_message_and_warnings() {
        let verdict = Verdict::deny(Denial::forbidden("no")).with_warning("careful");
        let v: serde_json::Value =
            serde_json::from_slice(&encode(ReviewVersion::V1, "u", &verdict)).unwrap();
        assert_eq!(
            v["response"],
            serde_json::json!({"uid":"u","allowed":false,"status":{"status":"Failure","code":403,"message":"no","reason":"Forbidden"},"warnings":["careful"]})
        );
    }
}
