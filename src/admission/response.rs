//! The outgoing half of the wire format: an `AdmissionReview` response with
//! the request's uid, a base64 JSON Patch, warnings and a status on denial.
//!
//! kube's `AdmissionResponse` serializes `patch` as an array of numbers rather
//! than the base64 string the API defines, so the response is written here.

use super::review::ReviewVersion;
use crate::mutate::patch::{write_json_object, write_json_str};
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

    /// 422 for an object the apiserver's own validation refuses.
    pub fn invalid(message: impl Into<String>) -> Self {
        Self {
            code: 422,
            message: message.into(),
            reason: Some("Invalid".into()),
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
    /// Containers left unchanged because their recommendation could not
    /// be applied ([`crate::mutate::Sizing::unusable`]); counted, not sent.
    pub unusable_recommendations: usize,
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

/// Serializes the response review for `uid`.
///
/// Written field by field rather than through serde: every pod creation in
/// the cluster passes here, and the patch is written straight as base64 with
/// no escaping pass over it. The field order and shape are those serde gave,
/// which a test keeps true.
#[must_use]
pub fn encode(version: ReviewVersion, uid: &str, verdict: &Verdict) -> Vec<u8> {
    let patch_len = verdict.patch.as_ref().map_or(0, |p| p.len() * 4 / 3 + 4);
    let mut out = Vec::with_capacity(160 + uid.len() + patch_len);
    out.extend_from_slice(br#"{"apiVersion":""#);
    out.extend_from_slice(version.api_version().as_bytes());
    out.extend_from_slice(br#"","kind":"AdmissionReview","response":{"uid":"#);
    write_json_str(&mut out, uid);
    out.extend_from_slice(br#","allowed":"#);
    out.extend_from_slice(if verdict.denial.is_none() {
        b"true"
    } else {
        b"false"
    });
    if let Some(d) = &verdict.denial {
        out.extend_from_slice(br#","status":{"status":"Failure","code":"#);
        out.extend_from_slice(itoa::Buffer::new().format(d.code).as_bytes());
        out.extend_from_slice(br#","message":"#);
        write_json_str(&mut out, &d.message);
        if let Some(reason) = &d.reason {
            out.extend_from_slice(br#","reason":"#);
            write_json_str(&mut out, reason);
        }
        out.push(b'}');
    }
    if let Some(patch) = &verdict.patch {
        out.extend_from_slice(br#","patchType":"JSONPatch","patch":""#);
        let start = out.len();
        out.resize(
            start + base64::encoded_len(patch.len(), true).unwrap_or(0),
            0,
        );
        match base64::engine::general_purpose::STANDARD.encode_slice(patch, &mut out[start..]) {
            Ok(written) => out.truncate(start + written),
            Err(_) => {
                // Cannot happen (the slice is sized for it); never send junk.
                out.truncate(start);
                out.extend_from_slice(
                    base64::engine::general_purpose::STANDARD
                        .encode(patch)
                        .as_bytes(),
                );
            }
        }
        out.push(b'"');
    }
    if !verdict.warnings.is_empty() {
        out.extend_from_slice(br#","warnings":["#);
        for (i, w) in verdict.warnings.iter().enumerate() {
            if i > 0 {
                out.push(b',');
            }
            write_json_str(&mut out, w);
        }
        out.push(b']');
    }
    if !verdict.audit_annotations.is_empty() {
        out.extend_from_slice(br#","auditAnnotations":"#);
        let entries = verdict.audit_annotations.iter();
        write_json_object(&mut out, entries.map(|(k, v)| (k.as_str(), v.as_str())));
    }
    out.extend_from_slice(b"}}");
    out
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

    /// The hand-written form is exactly what serde wrote for the same shape.
    #[test]
    fn every_field_is_written_as_serde_would() {
        let mut verdict = Verdict::deny(Denial::bad_request("bad \"pod\"\n"))
            .with_warning("w1")
            .with_warning("w\u{7}2");
        verdict.patch = Some(b"[]".to_vec());
        verdict
            .audit_annotations
            .insert("policy/key".into(), "v\\".into());
        let expected = serde_json::json!({
            "apiVersion": "admission.k8s.io/v1beta1", "kind": "AdmissionReview",
            "response": {"uid": "u\"1", "allowed": false,
                "status": {"status": "Failure", "code": 400, "message": "bad \"pod\"\n", "reason": "BadRequest"},
                "patchType": "JSONPatch", "patch": "W10=",
                "warnings": ["w1", "w\u{7}2"],
                "auditAnnotations": {"policy/key": "v\\"}}
        });
        let bytes = encode(ReviewVersion::V1Beta1, "u\"1", &verdict);
        let got: serde_json::Value = serde_json::from_slice(&bytes).unwrap_or_default();
        assert_eq!(got, expected);
        // The order the derive used to write, which the golden files pin too.
        let text = String::from_utf8_lossy(&bytes);
        let keys = [
            "\"uid\"",
            "\"allowed\"",
            "\"status\"",
            "\"patchType\"",
            "\"patch\"",
            "\"warnings\"",
            "\"auditAnnotations\"",
        ];
        let positions: Vec<usize> = keys.iter().filter_map(|k| text.find(k)).collect();
        assert!(positions.windows(2).all(|w| w[0] < w[1]), "{text}");
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
