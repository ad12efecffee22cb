//! Shared helpers of the bundle tests: fixtures, the policy set, a cluster.

#![allow(dead_code)]

use nodescope::policy::{
    validate, AdmissionRequestInput, LazyReview, PolicySet, ValidationOutcome,
};
use nodescope::store::Snapshot;
use serde_json::{json, Value};
use std::sync::OnceLock;

pub const FIXTURES: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/tests/fixtures/admission-reviews"
);
pub const POLICIES: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/policies");

pub fn policies() -> &'static PolicySet {
    static SET: OnceLock<PolicySet> = OnceLock::new();
    SET.get_or_init(|| match PolicySet::load_dir(POLICIES.as_ref()) {
        Ok(set) => set,
        Err(error) => panic!("the bundle loads: {error}"),
    })
}

pub fn review(name: &str) -> Value {
    let path = format!("{FIXTURES}/{name}.validate.json");
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path}: {e}"));
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("{path}: {e}"))
}

/// Namespaces and param objects, as the store snapshot would hold them.
#[derive(Default)]
pub struct Cluster {
    objects: Vec<Value>,
}

impl Cluster {
    /// The cluster as shipped: the resizers ConfigMap of the bundle.
    pub fn shipped() -> Self {
        Cluster {
            objects: vec![resizers("system:serviceaccount:kube-system:node-resizer\n")],
        }
    }

    pub fn with(mut self, object: Value) -> Self {
        self.objects.push(object);
        self
    }

    /// The store snapshot the webhook would build from these objects, so the
    /// bundle tests read params and namespaces exactly as the server does.
    pub fn snapshot(&self) -> Snapshot {
        Snapshot::build(self.objects.iter().cloned())
    }
}

pub fn resizers(identities: &str) -> Value {
    json!({"apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": "nodescope-balloon-resizers", "namespace": "kube-system"},
        "data": {"identities": identities}})
}

pub fn feature(name: &str, state: Option<&str>) -> Value {
    let mut feature = json!({"apiVersion": "featureflags.nodescope.dev/v1alpha1", "kind": "Feature",
        "metadata": {"name": name, "namespace": "kube-system"}, "spec": {"desired": "Disabled"}});
    if let Some(state) = state {
        feature["status"] = json!({ "state": state });
    }
    feature
}

/// Validates `review` through both inputs, the parsed `Value` and the lazy
/// body, which must agree exactly.
pub fn run(review: &Value, cluster: &Cluster) -> ValidationOutcome {
    let cluster = &cluster.snapshot();
    let request = AdmissionRequestInput::from_review(review).expect("a valid AdmissionReview");
    let outcome = validate(policies(), &request, cluster);
    let body = serde_json::to_vec(review).expect("serializable");
    let lazy = LazyReview::parse(&body).expect("valid JSON");
    let request = AdmissionRequestInput::from_body(&lazy).expect("a valid AdmissionReview");
    assert_eq!(
        validate(policies(), &request, cluster),
        outcome,
        "the lazy body decides as the parsed Value"
    );
    outcome
}

#[track_caller]
pub fn assert_allowed(review: &Value, cluster: &Cluster) {
    let outcome = run(review, cluster);
    assert!(
        outcome.allowed,
        "expected allowed, got {:?}",
        outcome.message
    );
    assert_eq!(outcome.status_code, 200);
}

#[track_caller]
pub fn assert_denied(review: &Value, cluster: &Cluster, code: u16, policy: &str, message: &str) {
    let outcome = run(review, cluster);
    assert!(!outcome.allowed, "expected a denial: {message}");
    assert_eq!(
        outcome.message.as_deref(),
        Some(format!("ValidatingAdmissionPolicy '{policy}' with binding '{policy}' denied request: {message}").as_str())
    );
    assert_eq!(outcome.status_code, code);
}

pub fn object(review: &mut Value) -> &mut Value {
    &mut review["request"]["object"]
}
