//! The VPA CRD's own CEL rules and `policies/vpa-scope.yaml` say the same
//! sentence about the same object.
//!
//! A real kube-apiserver runs a CRD's `x-kubernetes-validations` before any
//! admission policy, so a user with a bad VPA reads the CRD's message; with
//! the CRD installed by someone else (upstream VPA), they read the policy's.
//! Either way it must be one sentence, naming what they wrote: the scope
//! (absent, "", "node" or a node label key, AEP-10031), and for a valid
//! non-empty one the target's kind and apiVersion.

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

/// What both rule sets say a VPA may name as its scope: absent, "",
/// "node", or a node label key as apimachinery's IsQualifiedName has it.
const ALLOWED: &str = r#"spec.scope must be absent, "", "node" or a node label key such as "topology.kubernetes.io/zone" (an optional DNS subdomain prefix of at most 253 characters and "/", then a name of at most 63 characters: alphanumerics, "-", "_" or ".", starting and ending with an alphanumeric)"#;

/// Scopes a VPA may have, the non-empty ones only with an apps/v1 DaemonSet.
/// "cluster" and "Node" were unknown scopes under KEP-4943 alone; as label
/// keys (AEP-10031) they are valid.
fn valid_scopes() -> Vec<Option<String>> {
    let prefix_253 = [
        "p".repeat(63),
        "q".repeat(63),
        "r".repeat(63),
        "s".repeat(61),
    ]
    .join(".");
    [
        None,
        Some(String::new()),
        Some("node".to_owned()),
        Some("kubernetes.io/hostname".to_owned()),
        Some("topology.kubernetes.io/zone".to_owned()),
        Some("node.kubernetes.io/instance-type".to_owned()),
        Some("nvidia.com/gpu.present".to_owned()),
        Some("gpu".to_owned()),
        Some("cluster".to_owned()),
        Some("Node".to_owned()),
        Some("example.com/My_GPU.class-2".to_owned()),
        Some("n".repeat(63)),
        Some(format!("{prefix_253}/x")),
    ]
    .into()
}

/// Scopes no VPA may have, whatever its target.
fn invalid_scopes() -> Vec<String> {
    let prefix_253 = [
        "p".repeat(63),
        "q".repeat(63),
        "r".repeat(63),
        "s".repeat(61),
    ]
    .join(".");
    [
        "UPPER/x".to_owned(),
        "a b".to_owned(),
        "n".repeat(64),
        "/x".to_owned(),
        "a/b/c".to_owned(),
        "example.com/".to_owned(),
        format!("{prefix_253}t/x"),
        "gpu-".to_owned(),
        "a..b/x".to_owned(),
        "-a.b/x".to_owned(),
        "zone\u{e9}".to_owned(),
    ]
    .into()
}

fn targets() -> [Value; 6] {
    [
        json!({"apiVersion": "apps/v1", "kind": "DaemonSet", "name": "x"}),
        json!({"apiVersion": "apps/v1", "kind": "Deployment", "name": "x"}),
        json!({"apiVersion": "apps/v1", "kind": "StatefulSet", "name": "x"}),
        json!({"apiVersion": "extensions/v1beta1", "kind": "DaemonSet", "name": "x"}),
        json!({"apiVersion": "batch/v1", "kind": "CronJob", "name": "x"}),
        json!({"kind": "DaemonSet", "name": "x"}),
    ]
}

/// The CRD's one sentence about `vpa` (a VPA breaks at most one rule),
/// checked to be the policy's sentence too.
fn one_sentence(rules: &CrdRules, vpa: &Value) -> Option<String> {
    let errors = rules.evaluate(vpa);
    assert!(
        errors.len() <= 1,
        "{vpa}: more than one sentence: {errors:?}"
    );
    assert!(errors.iter().all(|e| e.path == "spec"), "{vpa}: {errors:?}");
    let from_crd = errors.first().map(|e| e.message.clone());
    assert_eq!(from_crd, policy_message(vpa), "{vpa}");
    from_crd
}

#[test]
fn the_crd_and_the_policy_deny_the_same_vpas_with_the_same_sentence() {
    let rules = crd_rules();
    let mut denied = 0;
    for scope in valid_scopes() {
        for target in targets() {
            let message = one_sentence(&rules, &vpa(scope.as_deref(), target.clone()));
            let daemonset = target["apiVersion"] == "apps/v1" && target["kind"] == "DaemonSet";
            let empty = scope.as_deref().unwrap_or_default().is_empty();
            assert_eq!(
                message.is_some(),
                !empty && !daemonset,
                "{scope:?} {target}"
            );
            denied += usize::from(message.is_some());
        }
    }
    for scope in invalid_scopes() {
        for target in targets() {
            let message = one_sentence(&rules, &vpa(Some(&scope), target));
            assert_eq!(message, Some(format!(r#"{ALLOWED}, not "{scope}""#)));
            denied += 1;
        }
    }
    // 11 valid non-empty scopes x 5 wrong targets, 11 invalid ones x 6.
    assert_eq!(denied, 11 * 5 + 11 * 6);
}

#[test]
fn the_crd_names_the_scope_and_the_kind_the_user_wrote() {
    for (scope, kind) in [
        ("node", "Deployment"),
        ("topology.kubernetes.io/zone", "Deployment"),
        ("kubernetes.io/hostname", "StatefulSet"),
    ] {
        let errors = crd_rules().evaluate(&vpa(
            Some(scope),
            json!({"apiVersion": "apps/v1", "kind": kind, "name": "web"}),
        ));
        assert_eq!(
            errors.iter().map(ToString::to_string).collect::<Vec<_>>(),
            [format!(
                r#"spec: Invalid value: spec.scope "{scope}" requires spec.targetRef to be an apps/v1 DaemonSet, not kind "{kind}" (apiVersion "apps/v1")"#
            )]
        );
    }
}

#[test]
fn the_crd_quotes_a_bad_key_and_says_what_a_key_is() {
    let errors = crd_rules().evaluate(&vpa(
        Some("UPPER/x"),
        json!({"apiVersion": "apps/v1", "kind": "Deployment", "name": "x"}),
    ));
    assert_eq!(
        errors.iter().map(ToString::to_string).collect::<Vec<_>>(),
        [
            r#"spec: Invalid value: spec.scope must be absent, "", "node" or a node label key such as "topology.kubernetes.io/zone" (an optional DNS subdomain prefix of at most 253 characters and "/", then a name of at most 63 characters: alphanumerics, "-", "_" or ".", starting and ending with an alphanumeric), not "UPPER/x""#
        ]
    );
}

#[test]
fn the_crd_bounds_scope_at_the_longest_label_key() {
    let crd: Value = serde_saphyr::from_str(&std::fs::read_to_string(CRD).unwrap_or_default())
        .unwrap_or_else(|e| panic!("{CRD}: {e}"));
    let scope = crd
        .pointer("/spec/versions/0/schema/openAPIV3Schema/properties/spec/properties/scope")
        .cloned()
        .unwrap_or_default();
    assert_eq!(scope["maxLength"], 253 + 1 + 63);
    let longest = format!(
        "{}/{}",
        [
            "a".repeat(63),
            "b".repeat(63),
            "c".repeat(63),
            "d".repeat(61)
        ]
        .join("."),
        "e".repeat(63)
    );
    assert_eq!(longest.len(), 317);
    assert_eq!(
        one_sentence(&crd_rules(), &vpa(Some(&longest), targets()[0].clone())),
        None
    );
}

/// The fallback a real apiserver uses when a messageExpression fails: the
/// static `message`, also one sentence for both.
#[test]
fn the_crd_and_the_policy_fall_back_to_the_same_static_sentences() {
    let crd: Value = serde_saphyr::from_str(&std::fs::read_to_string(CRD).unwrap_or_default())
        .unwrap_or_else(|e| panic!("{CRD}: {e}"));
    let policy_path = concat!(env!("CARGO_MANIFEST_DIR"), "/policies/vpa-scope.yaml");
    let text = std::fs::read_to_string(policy_path).unwrap_or_default();
    let policy: Value = serde_saphyr::from_str(text.split("\n---\n").next().unwrap_or_default())
        .unwrap_or_else(|e| panic!("{policy_path}: {e}"));
    let messages = |rules: Option<&Value>| -> Vec<String> {
        rules
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .filter_map(|r| r["message"].as_str().map(str::to_owned))
            .collect()
    };
    let from_crd = messages(crd.pointer(
        "/spec/versions/0/schema/openAPIV3Schema/properties/spec/x-kubernetes-validations",
    ));
    assert_eq!(
        from_crd,
        [
            ALLOWED,
            "a non-empty spec.scope requires spec.targetRef to be an apps/v1 DaemonSet"
        ]
    );
    assert_eq!(messages(policy.pointer("/spec/validations")), from_crd);
}
