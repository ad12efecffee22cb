//! The VPA CRD's own CEL rules and `policies/vpa-scope.yaml` say the same
//! sentence about the same object.
//!
//! A real kube-apiserver runs a CRD's `x-kubernetes-validations` before any
//! admission policy, so a user with a bad VPA reads the CRD's message; with
//! the CRD installed by someone else (upstream VPA), they read the policy's.
//! Either way it must be one sentence, naming what they wrote.

mod policy_support;

use nodescope::policy::{CrdRules, Decision};
use policy_support::{feature, object, review, run, Cluster};
use serde_json::{json, Value};

const CRD: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/manifests/components/vpa-crd/vpa-crd.yaml"
);

fn crd_rules() -> CrdRules {
    let text = std::fs::read_to_string(CRD).unwrap_or_else(|e| panic!("{CRD}: {e}"));
    let crd: Value = serde_saphyr::from_str(&text).unwrap_or_else(|e| panic!("{CRD}: {e}"));
    CrdRules::from_crd(&crd, "v1").unwrap_or_else(|e| panic!("{e}"))
}

/// What the policy layer says: the message of the first failing validation
/// of `nodescope-vpa-scope`, or `None` when it allows.
fn policy_message(vpa: &Value) -> Option<String> {
    let mut review = review("vpa-node-exporter-daemonset-node-scope-create");
    *object(&mut review) = vpa.clone();
    let cluster = Cluster::shipped().with(feature("vpa-node-scope", Some("On")));
    let outcome = run(&review, &cluster);
    let result = outcome
        .results
        .iter()
        .find(|r| r.policy == "nodescope-vpa-scope")
        .unwrap_or_else(|| panic!("nodescope-vpa-scope did not run on {vpa}"));
    match result.decision {
        Decision::Allow => None,
        Decision::Deny => result.message.clone(),
        other => panic!(
            "nodescope-vpa-scope: {other:?} on {vpa}: {:?}",
            result.message
        ),
    }
}

fn vpa(scope: Option<&str>, target: Value) -> Value {
    let mut vpa = json!({
        "apiVersion": "autoscaling.k8s.io/v1",
        "kind": "VerticalPodAutoscaler",
        "metadata": {"name": "node-exporter", "namespace": "monitoring"},
        "spec": {"targetRef": target},
    });
    if let Some(scope) = scope {
        vpa["spec"]["scope"] = json!(scope);
    }
    vpa
}

#[test]
fn the_crd_and_the_policy_deny_the_same_vpas_with_the_same_sentence() {
    let rules = crd_rules();
    let scopes = [None, Some(""), Some("node"), Some("cluster"), Some("Node")];
    let targets = [
        json!({"apiVersion": "apps/v1", "kind": "DaemonSet", "name": "x"}),
        json!({"apiVersion": "apps/v1", "kind": "Deployment", "name": "x"}),
        json!({"apiVersion": "apps/v1", "kind": "StatefulSet", "name": "x"}),
        json!({"apiVersion": "extensions/v1beta1", "kind": "DaemonSet", "name": "x"}),
        json!({"apiVersion": "batch/v1", "kind": "CronJob", "name": "x"}),
        json!({"kind": "DaemonSet", "name": "x"}),
    ];
    let mut denied = 0;
    for scope in scopes {
        for target in &targets {
            let vpa = vpa(scope, target.clone());
            let errors = rules.evaluate(&vpa);
            let from_crd = errors.first().map(|e| e.message.clone());
            assert!(errors.iter().all(|e| e.path == "spec"), "{vpa}: {errors:?}");
            assert_eq!(
                from_crd,
                policy_message(&vpa),
                "scope {scope:?}, target {target}"
            );
            denied += usize::from(from_crd.is_some());
        }
    }
    // 2 wrong scopes x 6 targets, plus "node" with the 5 wrong targets.
    assert_eq!(denied, 17);
}

#[test]
fn the_crd_names_the_kind_the_user_wrote() {
    let errors = crd_rules().evaluate(&vpa(
        Some("node"),
        json!({"apiVersion": "apps/v1", "kind": "Deployment", "name": "web"}),
    ));
    assert_eq!(
        errors.iter().map(ToString::to_string).collect::<Vec<_>>(),
        [
            r#"spec: Invalid value: spec.scope "node" requires spec.targetRef to be an apps/v1 DaemonSet, not kind "Deployment" (apiVersion "apps/v1")"#
        ]
    );
}

#[test]
fn the_crd_quotes_a_bad_scope() {
    let errors = crd_rules().evaluate(&vpa(
        Some("cluster"),
        json!({"apiVersion": "apps/v1", "kind": "DaemonSet", "name": "x"}),
    ));
    assert_eq!(
        errors.iter().map(ToString::to_string).collect::<Vec<_>>(),
        [r#"spec: Invalid value: spec.scope must be absent, "" or "node", not "cluster""#]
    );
}
