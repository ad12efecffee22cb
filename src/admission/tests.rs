//! Property tests of the pure core: whatever bytes arrive, `answer` returns
//! a 200 review or a 400 reason, never a panic and never an empty body.

use super::*;
use crate::policy::PolicySet;
use proptest::prelude::*;
use std::path::Path;
use std::sync::OnceLock;

fn decider() -> &'static Decider {
    static DECIDER: OnceLock<Decider> = OnceLock::new();
    DECIDER.get_or_init(|| {
        let root = Path::new(env!("CARGO_MANIFEST_DIR"));
        let store = crate::store::file::load(&root.join("examples/store"))
            .unwrap_or_else(|e| panic!("{e}"));
        let policies =
            PolicySet::load_dir(&root.join("policies")).unwrap_or_else(|e| panic!("{e}"));
        Decider::new(Arc::new(store), Arc::new(policies))
    })
}

fn captured() -> &'static [Vec<u8>] {
    static BODIES: OnceLock<Vec<Vec<u8>>> = OnceLock::new();
    BODIES.get_or_init(|| {
        let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/admission-reviews");
        let mut paths: Vec<_> = std::fs::read_dir(&dir)
            .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
            .filter_map(|e| e.ok().map(|e| e.path()))
            .filter(|p| p.extension().is_some_and(|x| x == "json"))
            .collect();
        paths.sort();
        paths
            .iter()
            .map(|p| std::fs::read(p).unwrap_or_else(|e| panic!("{}: {e}", p.display())))
            .collect()
    })
}

/// A captured review damaged the way a fuzzer would: bytes overwritten,
/// a slice cut out, then truncated.
fn damaged_review() -> impl Strategy<Value = Vec<u8>> {
    (
        any::<prop::sample::Index>(),
        prop::collection::vec((any::<prop::sample::Index>(), any::<u8>()), 0..8),
        any::<prop::sample::Index>(),
        0usize..64,
        any::<prop::sample::Index>(),
    )
        .prop_map(|(which, writes, cut_at, cut_len, keep)| {
            let bodies = captured();
            let mut body = bodies[which.index(bodies.len())].clone();
            for (at, byte) in writes {
                let i = at.index(body.len());
                body[i] = byte;
            }
            let start = cut_at.index(body.len());
            let end = (start + cut_len).min(body.len());
            body.drain(start..end);
            let len = body.len();
            body.truncate(len - keep.index(len / 4 + 1));
            body
        })
}

fn assert_well_formed(answer: &Answer) -> Result<(), TestCaseError> {
    prop_assert!(!answer.body.is_empty());
    match answer.http_status {
        200 => {
            prop_assert_eq!(answer.content_type, "application/json");
            let v: serde_json::Value = serde_json::from_slice(&answer.body)
                .map_err(|e| TestCaseError::fail(format!("200 body is not JSON: {e}")))?;
            prop_assert!(v["response"]["uid"].is_string(), "{}", v);
            prop_assert!(v["response"]["allowed"].is_boolean(), "{}", v);
        }
        400 => prop_assert!(answer.content_type.starts_with("text/plain")),
        other => prop_assert!(false, "status {}", other),
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

    #[test]
    fn any_bytes_get_a_review_or_a_400_from_both_webhooks(body in prop::collection::vec(any::<u8>(), 0..512)) {
        for webhook in [Webhook::Mutate, Webhook::Validate] {
            assert_well_formed(&answer(webhook, &body, decider()))?;
        }
    }

    #[test]
    fn damaged_captured_reviews_get_a_review_or_a_400_from_both_webhooks(body in damaged_review()) {
        for webhook in [Webhook::Mutate, Webhook::Validate] {
            assert_well_formed(&answer(webhook, &body, decider()))?;
        }
    }
}

/// From fuzzing (`review_mutate`): a lone surrogate escape in a part of the
/// body nodescope never decodes (here a `managedFields` key) is accepted and
/// the pod still gets its patch, although `serde_json::Value` would reject
/// the body. kube-apiserver never sends one; the point is that the webhook
/// answers normally instead of failing the review.
#[test]
fn a_lone_surrogate_in_a_skipped_field_still_gets_the_patch() {
    let clean = captured_named("pod-node-exporter-node-a-1-create.mutate.json");
    let text = String::from_utf8(clean).unwrap_or_default();
    let body = text.replacen(
        "\"f:terminationGracePeriodSeconds\"",
        "\"f:terminationGracePerio\\udc00ds\"",
        1,
    );
    assert_ne!(body, text);
    assert!(serde_json::from_str::<serde_json::Value>(&body).is_err());
    let answer = answer(Webhook::Mutate, body.as_bytes(), decider());
    assert_eq!(answer.http_status, 200);
    let v: serde_json::Value = serde_json::from_slice(&answer.body).unwrap_or_default();
    assert_eq!(v["response"]["allowed"], true);
    assert!(v["response"]["patch"].is_string(), "{v}");
}

fn captured_named(name: &str) -> Vec<u8> {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/admission-reviews")
        .join(name);
    std::fs::read(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// KEP-5620: the node-exporter pod that gets a patch gets none once it is
/// labelled a balloon: balloons are sized by the balloon controller alone.
#[test]
fn a_pod_labelled_a_balloon_is_never_mutated() {
    let clean = captured_named("pod-node-exporter-node-a-1-create.mutate.json");
    let sized = answer(Webhook::Mutate, &clean, decider());
    let sized: serde_json::Value = serde_json::from_slice(&sized.body).unwrap_or_default();
    assert!(sized["response"]["patch"].is_string(), "{sized}");
    let mut review: serde_json::Value = serde_json::from_slice(&clean).unwrap_or_default();
    review["request"]["object"]["metadata"]["labels"]["node.kubernetes.io/balloon"] =
        serde_json::json!("true");
    let body = serde_json::to_vec(&review).unwrap_or_default();
    let answer = answer(Webhook::Mutate, &body, decider());
    assert_eq!(answer.http_status, 200);
    let v: serde_json::Value = serde_json::from_slice(&answer.body).unwrap_or_default();
    assert_eq!(v["response"]["allowed"], true);
    assert!(v["response"].get("patch").is_none(), "{v}");
}
