//! Arbitrary JSON as the object (and old object) of a review, evaluated by
//! the shipped bundle plus `fuzz/policies/` (expressions that walk any
//! object), so every shape of JSON goes through the engine's JSON-to-CEL
//! conversion. The object's bytes are spliced in verbatim, so the lazy parser
//! sees the fuzzer's own spelling (escapes, number forms, duplicate keys).
//!
//! Checks: nothing panics, and whenever the review parses as a `Value`, the
//! lazy review decides exactly as the `Value` does.
#![no_main]

use libfuzzer_sys::fuzz_target;
use nodescope::admission::answer;
use nodescope::metrics::Webhook;
use nodescope_fuzz::{check_answer, check_lazy_matches_value, decider, walking_policies};

/// (group, version, resource, kind) the bundle has policies for, and one it
/// has none for (only the walking policy matches).
const RESOURCES: [(&str, &str, &str, &str); 5] = [
    ("", "v1", "pods", "Pod"),
    ("apps", "v1", "daemonsets", "DaemonSet"),
    (
        "autoscaling.k8s.io",
        "v1",
        "verticalpodautoscalers",
        "VerticalPodAutoscaler",
    ),
    (
        "scheduling.k8s.io",
        "v1",
        "priorityclasses",
        "PriorityClass",
    ),
    ("fuzz.example.com", "v1", "things", "Thing"),
];

fuzz_target!(|data: &[u8]| {
    let Some((&selector, object)) = data.split_first() else {
        return;
    };
    let Ok(object) = std::str::from_utf8(object) else {
        return;
    };
    // Only splice in something that is one JSON value, so the review around
    // it stays a review.
    if serde_json::from_str::<serde::de::IgnoredAny>(object).is_err() {
        return;
    }
    let (group, version, resource, kind) = RESOURCES[usize::from(selector) % RESOURCES.len()];
    let update = selector & 0x80 != 0;
    let (operation, old) = if update {
        ("UPDATE", object)
    } else {
        ("CREATE", "null")
    };
    let body = format!(
        r#"{{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{{"uid":"0c6d5e5a-1b1f-4d7e-9f5e-2f4b1c9d8e7a","kind":{{"group":"{group}","version":"{version}","kind":"{kind}"}},"resource":{{"group":"{group}","version":"{version}","resource":"{resource}"}},"name":"fuzzed","namespace":"monitoring","operation":"{operation}","userInfo":{{"username":"fuzzer"}},"object":{object},"oldObject":{old},"dryRun":false}}}}"#
    );
    let (policies, store) = walking_policies();
    check_lazy_matches_value(body.as_bytes(), policies, store);
    let result = answer(Webhook::Validate, body.as_bytes(), decider());
    check_answer(body.as_bytes(), &result);
});
