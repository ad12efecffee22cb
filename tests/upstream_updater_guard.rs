//! `manifests/components/upstream-updater-guard`: the native policy that
//! keeps upstream VPA's updater off pods nodescope sized per node,
//! evaluated by nodescope's own policy engine (the apiserver's semantics
//! and messages). It is not in `policies/`, because everything there is
//! also enforced by the webhook, so the bundle's suites cannot hold it.
//!
//! The resize reviews are the real v1.36.2 capture
//! `pod-node-exporter-resize`, with the mark and the user edited in. The
//! eviction reviews are built in the shape kube-apiserver gives a CREATE of
//! `pods/eviction` (`pkg/registry/core/pod/storage/eviction.go` runs
//! admission on the Eviction alone): kind `policy/v1 Eviction`, resource
//! `v1 pods`, subResource `eviction`, `oldObject` null. The e2e step
//! `guard` sends the same requests to a real kube-apiserver and gets the
//! same answers.

use nodescope::policy::{
    validate, AdmissionRequestInput, LazyReview, PolicySet, ValidationOutcome,
};
use nodescope::store::Snapshot;
use serde_json::{json, Value};
use std::path::{Path, PathBuf};

const POLICY: &str = "nodescope-upstream-updater-guard";
const UPSTREAM: &str = "system:serviceaccount:kube-system:vpa-updater";
const MARK: &str = "nodescope.dev/original-resources";

fn component() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("manifests/components/upstream-updater-guard")
}

fn documents() -> Vec<Value> {
    let path = component().join("guard.yaml");
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    serde_saphyr::from_multiple::<Value>(&text)
        .unwrap_or_else(|e| panic!("{}: {e}", path.display()))
        .into_iter()
        .filter(|d| !d.is_null())
        .collect()
}

fn guard() -> PolicySet {
    PolicySet::load_files(&[component().join("guard.yaml")])
        .unwrap_or_else(|e| panic!("the guard loads: {e}"))
}

/// The ConfigMap as the component ships it.
fn shipped_params() -> Value {
    documents()
        .into_iter()
        .find(|d| d["kind"] == "ConfigMap")
        .unwrap_or_else(|| panic!("guard.yaml has its ConfigMap"))
}

fn params(usernames: &str, eviction_namespaces: &str) -> Value {
    json!({"apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": POLICY, "namespace": "nodescope-system"},
        "data": {"usernames": usernames, "evictionNamespaces": eviction_namespaces}})
}

fn fixture(name: &str) -> Value {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/admission-reviews")
        .join(format!("{name}.validate.json"));
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// A resize of the captured node-exporter pod in `monitoring`, by `user`,
/// with nodescope's mark when `marked`.
fn resize(user: &str, marked: bool) -> Value {
    let mut review = fixture("pod-node-exporter-resize");
    review["request"]["userInfo"] =
        json!({"username": user, "groups": ["system:serviceaccounts", "system:authenticated"]});
    if marked {
        let mark = json!(r#"{"node-exporter":{"requests":{"cpu":"100m","memory":"128Mi"}}}"#);
        for side in ["object", "oldObject"] {
            review["request"][side]["metadata"]["annotations"][MARK] = mark.clone();
        }
    }
    review
}

/// An eviction of pod `monitoring/node-exporter-8qrss` by `user`.
fn eviction(user: &str, namespace: &str) -> Value {
    json!({
        "kind": "AdmissionReview",
        "apiVersion": "admission.k8s.io/v1",
        "request": {
            "uid": "0b6f43d3-2a55-4c36-9a3c-5d5f3c1d2e01",
            "kind": {"group": "policy", "version": "v1", "kind": "Eviction"},
            "resource": {"group": "", "version": "v1", "resource": "pods"},
            "subResource": "eviction",
            "requestKind": {"group": "policy", "version": "v1", "kind": "Eviction"},
            "requestResource": {"group": "", "version": "v1", "resource": "pods"},
            "requestSubResource": "eviction",
            "name": "node-exporter-8qrss",
            "namespace": namespace,
            "operation": "CREATE",
            "userInfo": {"username": user, "groups": ["system:serviceaccounts", "system:authenticated"]},
            "object": {
                "kind": "Eviction",
                "apiVersion": "policy/v1",
                "metadata": {"name": "node-exporter-8qrss", "namespace": namespace, "creationTimestamp": null}
            },
            "oldObject": null,
            "dryRun": false,
            "options": {"kind": "CreateOptions", "apiVersion": "meta.k8s.io/v1"}
        }
    })
}

/// Validates `review` through both inputs of the engine, the parsed value
/// and the lazy body, which must agree.
fn run(review: &Value, cluster: &[Value]) -> ValidationOutcome {
    let policies = guard();
    let snapshot = Snapshot::build(cluster.iter().cloned());
    let request = AdmissionRequestInput::from_review(review)
        .unwrap_or_else(|e| panic!("a valid AdmissionReview: {e}"));
    let outcome = validate(&policies, &request, &snapshot);
    let body = serde_json::to_vec(review).unwrap_or_default();
    let lazy = LazyReview::parse(&body).unwrap_or_else(|e| panic!("valid JSON: {e}"));
    let request = AdmissionRequestInput::from_body(&lazy)
        .unwrap_or_else(|e| panic!("a valid AdmissionReview: {e}"));
    assert_eq!(
        validate(&policies, &request, &snapshot),
        outcome,
        "the lazy body decides as the parsed value"
    );
    outcome
}

#[track_caller]
fn assert_allowed(review: &Value, cluster: &[Value]) {
    let outcome = run(review, cluster);
    assert!(outcome.allowed, "expected allowed: {:?}", outcome.message);
    assert_eq!(outcome.status_code, 200);
    assert!(outcome.warnings.is_empty(), "{:?}", outcome.warnings);
}

#[track_caller]
fn assert_denied(review: &Value, cluster: &[Value], message: &str) {
    let outcome = run(review, cluster);
    assert!(!outcome.allowed, "expected a denial: {message}");
    assert_eq!(
        outcome.message.as_deref(),
        Some(format!("ValidatingAdmissionPolicy '{POLICY}' with binding '{POLICY}' denied request: {message}").as_str())
    );
    assert_eq!(outcome.status_code, 403);
    assert_eq!(outcome.reason.as_deref(), Some("Forbidden"));
}

fn resize_message(user: &str) -> String {
    format!(
        "nodescope sizes this pod per node (annotation nodescope.dev/original-resources); \
         upstream VPA's updater ({user}) would overwrite it with the DaemonSet-wide recommendation. \
         Run upstream's updater with --ignored-vpa-object-namespaces=monitoring; \
         see docs/operations.md#running-beside-upstream-vpa"
    )
}

#[test]
fn a_resize_by_upstreams_updater_of_a_marked_pod_is_denied_with_why_and_what_to_do() {
    assert_denied(
        &resize(UPSTREAM, true),
        &[shipped_params()],
        &resize_message(UPSTREAM),
    );
}

#[test]
fn a_resize_by_upstreams_updater_of_an_unmarked_pod_is_allowed() {
    assert_allowed(&resize(UPSTREAM, false), &[shipped_params()]);
}

#[test]
fn a_resize_of_a_marked_pod_by_anyone_else_is_allowed() {
    for user in [
        "system:serviceaccount:nodescope-system:nodescope-updater",
        "e2e-admin",
        "system:serviceaccount:kube-system:vpa-updater-canary",
    ] {
        assert_allowed(&resize(user, true), &[shipped_params()]);
    }
}

#[test]
fn the_identities_are_the_configmaps_so_an_upstream_installed_elsewhere_is_named_there() {
    let helm = "system:serviceaccount:vpa:vpa-updater";
    let cluster = [params(&format!("  {helm}\n\n"), "")];
    assert_denied(&resize(helm, true), &cluster, &resize_message(helm));
    // The default is no longer listed, so it is not refused.
    assert_allowed(&resize(UPSTREAM, true), &cluster);
}

#[test]
fn without_its_configmap_the_guard_refuses_nothing_rather_than_every_resize_and_drain() {
    assert_allowed(&resize(UPSTREAM, true), &[]);
    assert_allowed(&eviction(UPSTREAM, "monitoring"), &[]);
    let outcome = run(&resize(UPSTREAM, true), &[]);
    assert!(
        outcome.results.iter().any(|r| r
            .message
            .as_deref()
            .is_some_and(|m| m.contains("parameterNotFoundAction is Allow"))),
        "{:?}",
        outcome.results
    );
}

#[test]
fn an_eviction_by_upstreams_updater_is_denied_only_in_a_listed_namespace() {
    let cluster = [params(&format!("{UPSTREAM}\n"), "monitoring\nlogging\n")];
    assert_denied(
        &eviction(UPSTREAM, "monitoring"),
        &cluster,
        &format!(
            "nodescope sizes the DaemonSet pods of namespace monitoring per node, and an eviction \
             does not show which pod carries its mark, so evictions by upstream VPA's updater ({UPSTREAM}) \
             are refused here (ConfigMap nodescope-system/nodescope-upstream-updater-guard, key evictionNamespaces): \
             the pod would come back and be evicted again, towards the DaemonSet-wide recommendation. \
             Run upstream's updater with --ignored-vpa-object-namespaces=monitoring; \
             see docs/operations.md#running-beside-upstream-vpa"
        ),
    );
    assert_allowed(&eviction(UPSTREAM, "default"), &cluster);
    // Node drains and nodescope's own updater evict as before.
    assert_allowed(
        &eviction(
            "system:serviceaccount:kube-system:node-controller",
            "monitoring",
        ),
        &cluster,
    );
    assert_allowed(
        &eviction(
            "system:serviceaccount:nodescope-system:nodescope-updater",
            "monitoring",
        ),
        &cluster,
    );
}

#[test]
fn as_shipped_no_namespace_is_listed_so_no_eviction_is_refused() {
    assert_allowed(&eviction(UPSTREAM, "monitoring"), &[shipped_params()]);
    assert_eq!(shipped_params()["data"]["evictionNamespaces"], "");
    assert_eq!(
        shipped_params()["data"]["usernames"],
        format!("{UPSTREAM}\n")
    );
}

#[test]
fn a_resize_is_never_judged_by_namespace_nor_an_eviction_by_the_mark() {
    // A listed namespace does not make an unmarked pod's resize a denial...
    let cluster = [params(UPSTREAM, "monitoring")];
    assert_allowed(&resize(UPSTREAM, false), &cluster);
    // ...and an Eviction carrying the annotation itself (nothing sends
    // one; the apiserver never copies the pod's) is not a marked pod.
    let mut marked = eviction(UPSTREAM, "default");
    marked["request"]["object"]["metadata"]["annotations"] = json!({ MARK: "{}" });
    assert_allowed(&marked, &cluster);
}

#[test]
fn the_guard_fails_open_and_is_neither_in_the_bundle_nor_in_the_base() {
    let docs = documents();
    let policy = docs
        .iter()
        .find(|d| d["kind"] == "ValidatingAdmissionPolicy")
        .unwrap_or_else(|| panic!("a policy"));
    assert_eq!(policy["spec"]["failurePolicy"], "Ignore");
    let binding = docs
        .iter()
        .find(|d| d["kind"] == "ValidatingAdmissionPolicyBinding")
        .unwrap_or_else(|| panic!("a binding"));
    assert_eq!(
        binding["spec"]["paramRef"],
        json!({"name": POLICY, "namespace": "nodescope-system", "parameterNotFoundAction": "Allow"})
    );
    assert_eq!(binding["spec"]["validationActions"], json!(["Deny"]));
    let kinds: Vec<&str> = docs.iter().filter_map(|d| d["kind"].as_str()).collect();
    assert_eq!(
        kinds,
        [
            "ConfigMap",
            "ValidatingAdmissionPolicy",
            "ValidatingAdmissionPolicyBinding"
        ]
    );
    // The webhook enforces everything in policies/; this must stay native.
    let bundle = PolicySet::load_dir(&Path::new(env!("CARGO_MANIFEST_DIR")).join("policies"))
        .unwrap_or_else(|e| panic!("the bundle loads: {e}"));
    assert!(!bundle.policy_names().contains(&POLICY));
    let base = std::fs::read_to_string(
        Path::new(env!("CARGO_MANIFEST_DIR")).join("manifests/base/kustomization.yaml"),
    )
    .unwrap_or_default();
    assert!(!base.contains("upstream-updater-guard"));
}
