//! Shared setup and oracles for the nodescope fuzz targets.
//!
//! The decider (the example store plus the shipped `policies/` bundle) is
//! built once per process: loading and compiling the bundle takes far longer
//! than one execution.

use nodescope::admission::{Answer, Decider};
use nodescope::policy::{validate, AdmissionRequestInput, EvaluationLimits, LazyReview, PolicySet};
use nodescope::store::Snapshot;
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::sync::{Arc, OnceLock};

/// The repository root (the fuzz crate lives in `fuzz/`).
pub fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

/// The example store and the whole policy bundle, as the server loads them.
pub fn decider() -> &'static Decider {
    static DECIDER: OnceLock<Decider> = OnceLock::new();
    DECIDER.get_or_init(|| {
        let store = nodescope::store::file::load(&repo().join("examples/store"))
            .expect("examples/store loads");
        let policies = PolicySet::load_dir(&repo().join("policies")).expect("policies/ loads");
        Decider::new(Arc::new(store), Arc::new(policies))
    })
}

/// The bundle plus `fuzz/policies/`: generic expressions that walk whatever
/// object they are given, so arbitrary JSON reaches the CEL conversion.
pub fn walking_policies() -> &'static (PolicySet, Snapshot) {
    static SET: OnceLock<(PolicySet, Snapshot)> = OnceLock::new();
    SET.get_or_init(|| {
        let mut files = Vec::new();
        for dir in [repo().join("policies"), repo().join("fuzz/policies")] {
            files.extend(
                nodescope::manifest::collect_files(&dir, &[])
                    .expect("policy dir")
                    .into_iter(),
            );
        }
        // No wall-clock deadline: under the sanitizer a slow execution must
        // not make the two paths of `check_lazy_matches_value` differ.
        let set = PolicySet::load_files(&files)
            .expect("policies load")
            .with_limits(EvaluationLimits {
                deadline: std::time::Duration::from_secs(3600),
                ..EvaluationLimits::default()
            });
        let store = nodescope::store::file::load(&repo().join("examples/store"))
            .expect("examples/store loads");
        (set, store)
    })
}

/// What every answer must satisfy, whatever the input bytes were.
///
/// - 200 carries an AdmissionReview whose response echoes the request uid;
///   400 carries a plain-text reason; nothing else is possible.
/// - A returned patch is a base64 JSON Patch that applies to the request's
///   object, and the quantities it writes parse.
pub fn check_answer(body: &[u8], answer: &Answer) {
    match answer.http_status {
        400 => {
            assert!(answer.content_type.starts_with("text/plain"));
            assert!(!answer.body.is_empty());
            return;
        }
        200 => {}
        other => panic!("unexpected HTTP status {other}"),
    }
    assert_eq!(answer.content_type, "application/json");
    let response: Value = serde_json::from_slice(&answer.body).expect("response is JSON");
    let uid = response["response"]["uid"]
        .as_str()
        .expect("response has a uid");
    let allowed = response["response"]["allowed"]
        .as_bool()
        .expect("response has allowed");
    if response["response"]["patch"].is_null() {
        return;
    }
    assert!(allowed, "a patched response must allow");
    assert_eq!(response["response"]["patchType"], "JSONPatch");
    if let Some((review, object)) = patched_object(body, answer) {
        assert_eq!(review["request"]["uid"].as_str(), Some(uid));
        check_resources(&review["request"]["object"], &object);
    }
}

/// The review as a `Value` and its object with the answer's patch applied,
/// or `None` when the answer has no patch. Panics when the patch does not
/// apply.
pub fn patched_object(body: &[u8], answer: &Answer) -> Option<(Value, Value)> {
    let response: Value = serde_json::from_slice(&answer.body).ok()?;
    let patch = response["response"]["patch"].as_str()?;
    use base64::Engine;
    let patch = base64::engine::general_purpose::STANDARD
        .decode(patch)
        .expect("patch is base64");
    let patch: json_patch::Patch = serde_json::from_slice(&patch).expect("patch is a JSON Patch");
    // The borrowed parse only validates what it decodes: a lone surrogate
    // escape or a number beyond f64 in a part nodescope skips is accepted,
    // while `Value` rejects the body. kube-apiserver (Go's encoder) never
    // writes either, so such bodies only have their answer's shape checked.
    let review: Value = serde_json::from_slice(body).ok()?;
    let mut object = review["request"]["object"].clone();
    json_patch::patch(&mut object, &patch)
        .unwrap_or_else(|e| panic!("patch {patch:?} does not apply: {e}"));
    Some((review, object))
}

/// Every request and limit the patch wrote is a string that parses as a
/// quantity, as the apiserver requires. Values the patch left as they were
/// are not checked: a container whose own quantities do not parse is left
/// unchanged by design (no apiserver sends one; see
/// `an_unparsable_quantity_in_one_container_leaves_only_that_container_unchanged`).
pub fn check_resources(before: &Value, after: &Value) {
    for list in ["containers", "initContainers"] {
        let Some(containers) = after["spec"][list].as_array() else {
            continue;
        };
        for (i, container) in containers.iter().enumerate() {
            for kind in ["requests", "limits"] {
                let Some(map) = container["resources"][kind].as_object() else {
                    continue;
                };
                let old = &before["spec"][list][i]["resources"][kind];
                for (name, value) in map {
                    if old.get(name) == Some(value) {
                        continue;
                    }
                    let text = value
                        .as_str()
                        .unwrap_or_else(|| panic!("{list} {kind}.{name} is not a string: {value}"));
                    nodescope::quantity::Quantity::parse(text)
                        .unwrap_or_else(|e| panic!("{list} {kind}.{name}: {e}"));
                }
            }
        }
    }
}

/// The lazy review and the fully parsed `Value` must decide alike: the lazy
/// path documents that it answers exactly as the `Value` would.
pub fn check_lazy_matches_value(body: &[u8], policies: &PolicySet, store: &Snapshot) {
    let Ok(value) = serde_json::from_slice::<Value>(body) else {
        return;
    };
    let review = LazyReview::parse(body).expect("a body serde_json accepts is a lazy review");
    let eager = AdmissionRequestInput::from_review(&value);
    let lazy = AdmissionRequestInput::from_body(&review);
    match (eager, lazy) {
        (Ok(eager), Ok(lazy)) => {
            let from_value = validate(policies, &eager, store);
            let from_lazy = validate(policies, &lazy, store);
            assert_eq!(from_value, from_lazy, "lazy and Value paths disagree");
        }
        (eager, lazy) => assert_eq!(eager.err(), lazy.err()),
    }
}
