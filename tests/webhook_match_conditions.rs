//! The shipped ValidatingWebhookConfiguration sends nodescope exactly the
//! VerticalPodAutoscaler writes the policies need: those with a non-empty
//! `spec.scope` ("node" or a node label key, AEP-10031), each to one webhook
//! only, and every one the feature gate could deny to the one that fails
//! closed; and of kube-system:node-resizer's writes, each one its policy
//! could deny, once.
//!
//! The webhooks' `matchConditions` are evaluated by nodescope's own policy
//! engine: each webhook becomes a ValidatingAdmissionPolicy with the same
//! rules and conditions and one validation that always fails, so "denied"
//! reads "the apiserver would call nodescope". A webhook's matchConditions
//! and a policy's share the CEL environment and variables, so the engine
//! evaluates them as the apiserver does.

mod policy_support;

use nodescope::policy::{validate, AdmissionRequestInput, Decision, PolicySet};
use policy_support::{feature, object, review, run, Cluster};
use serde_json::{json, Value};

const VALIDATING: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/manifests/base/webhooks/validating.yaml"
);
const FEATURE_GATES: &str = "feature-gates.nodescope.dev";
const VPA_SCOPE: &str = "vpa-scope.nodescope.dev";
const BALLOON_PODS: &str = "balloon-pods.nodescope.dev";
const NODE_RESIZER: &str = "node-resizer.nodescope.dev";
const RESIZER: &str = "system:serviceaccount:kube-system:node-resizer";

/// Each VPA webhook of the shipped configuration as a policy named after it.
fn routing() -> PolicySet {
    routing_of(&[FEATURE_GATES, VPA_SCOPE])
}

/// The named webhooks of the shipped configuration as policies named
/// after them.
fn routing_of(names: &[&str]) -> PolicySet {
    let text = std::fs::read_to_string(VALIDATING).unwrap_or_else(|e| panic!("{VALIDATING}: {e}"));
    let config: Value =
        serde_saphyr::from_str(&text).unwrap_or_else(|e| panic!("{VALIDATING}: {e}"));
    let mut documents = Vec::new();
    for &name in names {
        let hook = config["webhooks"]
            .as_array()
            .and_then(|hooks| hooks.iter().find(|h| h["name"] == name))
            .unwrap_or_else(|| panic!("{VALIDATING}: no webhook {name}"));
        let policy = json!({
            "apiVersion": "admissionregistration.k8s.io/v1",
            "kind": "ValidatingAdmissionPolicy",
            "metadata": {"name": name},
            "spec": {
                "failurePolicy": "Fail",
                "matchConstraints": {"resourceRules": hook["rules"]},
                "matchConditions": hook["matchConditions"],
                "validations": [{"expression": "false", "message": "called"}],
            },
        });
        let binding = json!({
            "apiVersion": "admissionregistration.k8s.io/v1",
            "kind": "ValidatingAdmissionPolicyBinding",
            "metadata": {"name": name},
            "spec": {"policyName": name, "validationActions": ["Deny"]},
        });
        for document in [policy, binding] {
            documents.push((name.to_owned(), document.to_string()));
        }
    }
    PolicySet::from_documents(documents).unwrap_or_else(|e| panic!("{e}"))
}

/// The webhooks of the shipped configuration that would call nodescope.
fn called(routing: &PolicySet, review: &Value) -> Vec<String> {
    let request = AdmissionRequestInput::from_review(review).expect("a valid AdmissionReview");
    let outcome = validate(routing, &request, &Cluster::default().snapshot());
    for result in &outcome.results {
        assert_ne!(
            result.decision,
            Decision::Error,
            "{}: {:?}",
            result.policy,
            result.message
        );
    }
    outcome
        .results
        .iter()
        .filter(|r| r.decision == Decision::Deny)
        .map(|r| r.policy.clone())
        .collect()
}

fn vpa_spec(scope: Option<&str>, kind: &str) -> Value {
    let mut spec = json!({"targetRef": {"apiVersion": "apps/v1", "kind": kind, "name": "x"}});
    if let Some(scope) = scope {
        spec["scope"] = json!(scope);
    }
    spec
}

/// A CREATE (`old` is `None`) or UPDATE of a VPA from `old` to `new` scope.
fn write(old: Option<Option<&str>>, new: Option<&str>, kind: &str) -> Value {
    let mut review = match old {
        None => review("vpa-node-exporter-daemonset-node-scope-create"),
        Some(old) => {
            let mut review = review("vpa-node-exporter-update");
            review["request"]["oldObject"]["spec"] = vpa_spec(old, kind);
            review
        }
    };
    object(&mut review)["spec"] = vpa_spec(new, kind);
    review
}

const SCOPES: [Option<&str>; 6] = [
    None,
    Some(""),
    Some("node"),
    Some("topology.kubernetes.io/zone"),
    Some("kubernetes.io/hostname"),
    Some("UPPER/x"),
];

/// Every CREATE and UPDATE between the scopes, for a DaemonSet and a
/// Deployment target.
fn writes() -> Vec<(String, Value, bool, bool)> {
    let mut writes = Vec::new();
    for kind in ["DaemonSet", "Deployment"] {
        for new in SCOPES {
            let uses = new.is_some_and(|s| !s.is_empty());
            let olds = std::iter::once(None).chain(SCOPES.iter().map(|old| Some(*old)));
            for old in olds {
                let used = old.flatten().is_some_and(|s| !s.is_empty());
                let label = format!("{kind}: {old:?} -> {new:?}");
                writes.push((label, write(old, new, kind), uses, used));
            }
        }
    }
    writes
}

#[test]
fn a_vpa_write_calls_nodescope_once_exactly_when_it_has_a_non_empty_scope() {
    let routing = routing();
    for (label, review, uses, used) in writes() {
        let expected: Vec<&str> = match (uses, used) {
            (false, _) => vec![],
            (true, false) => vec![FEATURE_GATES],
            (true, true) => vec![VPA_SCOPE],
        };
        assert_eq!(called(&routing, &review), expected, "{label}");
    }
}

#[test]
fn a_vpa_write_that_calls_no_webhook_is_one_the_bundle_allows_in_every_feature_state() {
    let routing = routing();
    let states = [None, Some("On"), Some("TurningOff"), Some("Off")];
    let mut skipped = 0;
    for (label, review, _, _) in writes() {
        if !called(&routing, &review).is_empty() {
            continue;
        }
        skipped += 1;
        for state in states {
            let cluster = Cluster::shipped().with(feature("vpa-node-scope", state));
            let outcome = run(&review, &cluster);
            assert!(outcome.allowed, "{label}, {state:?}: {:?}", outcome.message);
        }
    }
    // 2 targets x (absent, "") x 7 old objects (CREATE and six scopes).
    assert_eq!(skipped, 2 * 2 * 7);
}

#[test]
fn every_write_the_feature_gate_denies_goes_to_the_webhook_that_fails_closed() {
    let routing = routing();
    let off = Cluster::shipped().with(feature("vpa-node-scope", Some("Off")));
    let mut denied = 0;
    for (label, review, _, _) in writes() {
        let gate = run(&review, &off)
            .results
            .into_iter()
            .find(|r| r.policy == "nodescope-feature-vpa-node-scope")
            .map(|r| r.decision);
        let called = called(&routing, &review);
        if gate == Some(Decision::Deny) {
            denied += 1;
            assert_eq!(called, [FEATURE_GATES], "{label}");
        } else {
            // What rides on the Ignore webhook never depends on the gate.
            assert_ne!(called, [FEATURE_GATES], "{label}");
        }
    }
    // 2 targets x 4 non-empty scopes x 3 old objects without a use
    // (CREATE, absent, "").
    assert_eq!(denied, 2 * 4 * 3);
}

/// A `pods/resize` of the fixture pod by `user`, labelled as a balloon or
/// not.
fn resize(user: &str, balloon: bool) -> Value {
    let mut review = review("pod-node-exporter-resize");
    review["request"]["userInfo"] = json!({"username": user});
    if balloon {
        for side in ["object", "oldObject"] {
            review["request"][side]["metadata"]["labels"]["node.kubernetes.io/balloon"] =
                json!("true");
        }
    }
    review
}

/// An UPDATE of a Node by `user` that sets the annotation or label `key`.
fn node_write(user: &str, field: &str, key: &str) -> Value {
    let old = json!({"apiVersion": "v1", "kind": "Node",
        "metadata": {"name": "node-a", "labels": {"kubernetes.io/hostname": "node-a"}}, "spec": {}});
    let mut new = old.clone();
    new["metadata"][field] = json!({key: "x"});
    json!({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": {
        "uid": "u1", "kind": {"group": "", "version": "v1", "kind": "Node"},
        "resource": {"group": "", "version": "v1", "resource": "nodes"},
        "requestKind": {"group": "", "version": "v1", "kind": "Node"},
        "requestResource": {"group": "", "version": "v1", "resource": "nodes"},
        "name": "node-a", "operation": "UPDATE", "userInfo": {"username": user},
        "object": new, "oldObject": old, "dryRun": false}})
}

#[test]
fn the_node_resizers_writes_its_policy_can_deny_call_nodescope_once_and_nobody_elses_do() {
    let routing = routing_of(&[BALLOON_PODS, NODE_RESIZER]);
    let cluster = Cluster::shipped();
    for (label, review, calls, allowed) in [
        (
            "a balloon resize",
            resize(RESIZER, true),
            vec![BALLOON_PODS],
            true,
        ),
        (
            "another pod's resize",
            resize(RESIZER, false),
            vec![NODE_RESIZER],
            false,
        ),
        (
            "someone else's resize",
            resize("alice", false),
            vec![],
            true,
        ),
        (
            "a nodescope.dev annotation",
            node_write(RESIZER, "annotations", "nodescope.dev/balloon-state"),
            vec![NODE_RESIZER],
            true,
        ),
        (
            "another annotation",
            node_write(RESIZER, "annotations", "example.com/owner"),
            vec![NODE_RESIZER],
            false,
        ),
        (
            "a label",
            node_write(RESIZER, "labels", "example.com/pool"),
            vec![NODE_RESIZER],
            false,
        ),
        (
            "someone else's label",
            node_write("alice", "labels", "example.com/pool"),
            vec![],
            true,
        ),
    ] {
        assert_eq!(called(&routing, &review), calls, "{label}");
        let outcome = run(&review, &cluster);
        assert_eq!(outcome.allowed, allowed, "{label}: {:?}", outcome.message);
    }
}
