//! Step 1: `kubectl apply -k manifests/` on a fresh control plane: everything is
//! accepted, the CRDs become Established, and the webhook configurations
//! read back with the settings the manifests give them.

use crate::support::cluster::{self, dry_run_create};
use crate::support::ControlPlane;
use k8s_openapi::api::admissionregistration::v1::{
    MutatingWebhookConfiguration, ValidatingWebhookConfiguration,
};
use kube::api::{Api, DeleteParams};
use nodescope::policy::CrdRules;
use serde_json::Value;
use std::path::Path;

fn root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

fn manifest(path: &str) -> Value {
    let path = root().join(path);
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    serde_saphyr::from_str(&text).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

pub async fn run(plane: &ControlPlane) {
    let (code, out, err) = plane.kubectl(&["apply", "-k", "manifests/"], root());
    assert_eq!(code, 0, "kubectl apply -k manifests/:\n{out}\n{err}");
    println!(
        "  kubectl apply -k manifests/: {} objects",
        out.lines().count()
    );
    // The VPA CRD component (a kustomize Component cannot be applied alone).
    let (code, out, err) = plane.kubectl(
        &["apply", "-f", "manifests/components/vpa-crd/vpa-crd.yaml"],
        root(),
    );
    assert_eq!(code, 0, "kubectl apply the VPA CRD:\n{out}\n{err}");

    let client = plane.client().await;
    for name in [
        "features.featureflags.nodescope.dev",
        "verticalpodautoscalers.autoscaling.k8s.io",
    ] {
        cluster::established(&client, name).await;
    }
    println!("  CRDs Established: features, verticalpodautoscalers");

    // Read back, then delete at once: they point at a Service with no
    // endpoints here (no kubelet runs the Deployment), and with them in
    // place every later step would be refused. The later steps register
    // their own, by URL.
    let mutating: Api<MutatingWebhookConfiguration> = Api::all(client.clone());
    let validating: Api<ValidatingWebhookConfiguration> = Api::all(client.clone());
    let stored = mutating
        .get("nodescope")
        .await
        .unwrap_or_else(|e| panic!("MutatingWebhookConfiguration nodescope: {e}"));
    let stored_validating = validating
        .get("nodescope")
        .await
        .unwrap_or_else(|e| panic!("ValidatingWebhookConfiguration nodescope: {e}"));
    mutating
        .delete("nodescope", &DeleteParams::default())
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    validating
        .delete("nodescope", &DeleteParams::default())
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    let written = manifest("manifests/base/webhooks/mutating.yaml");
    let webhooks = stored.webhooks.unwrap_or_default();
    assert_eq!(webhooks.len(), 1);
    let hook = &webhooks[0];
    assert_eq!(hook.failure_policy.as_deref(), Some("Ignore"));
    assert_eq!(hook.side_effects, "None");
    assert_eq!(hook.timeout_seconds, Some(2));
    assert_eq!(hook.reinvocation_policy.as_deref(), Some("IfNeeded"));
    assert_eq!(
        condition_names(hook.match_conditions.as_deref()),
        written_condition_names(&written["webhooks"][0])
    );

    let written = manifest("manifests/base/webhooks/validating.yaml");
    let webhooks = stored_validating.webhooks.unwrap_or_default();
    let expected = written["webhooks"].as_array().cloned().unwrap_or_default();
    assert_eq!(webhooks.len(), expected.len());
    for (hook, written) in webhooks.iter().zip(&expected) {
        assert_eq!(Some(hook.name.as_str()), written["name"].as_str());
        assert_eq!(
            hook.failure_policy.as_deref(),
            written["failurePolicy"].as_str(),
            "{}",
            hook.name
        );
        assert_eq!(hook.side_effects, "None", "{}", hook.name);
        assert_eq!(
            hook.timeout_seconds.map(i64::from),
            written["timeoutSeconds"].as_i64(),
            "{}",
            hook.name
        );
        assert_eq!(
            condition_names(hook.match_conditions.as_deref()),
            written_condition_names(written),
            "{}",
            hook.name
        );
    }
    println!(
        "  webhook configurations read back: 1 mutating, {} validating webhooks as written",
        expected.len()
    );
    crd_rules_speak_as_nodescope_reads_them(plane).await;
    crd_admits_label_key_scopes(plane).await;
}

fn condition_names(
    conditions: Option<&[k8s_openapi::api::admissionregistration::v1::MatchCondition]>,
) -> Vec<String> {
    conditions
        .unwrap_or_default()
        .iter()
        .map(|c| c.name.clone())
        .collect()
}

fn written_condition_names(webhook: &Value) -> Vec<String> {
    webhook["matchConditions"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|c| c["name"].as_str().map(str::to_owned))
        .collect()
}

fn vpa(scope: &str, kind: &str) -> Value {
    serde_json::json!({
        "apiVersion": "autoscaling.k8s.io/v1", "kind": "VerticalPodAutoscaler",
        "metadata": {"name": "web", "namespace": "default"},
        "spec": {"scope": scope, "targetRef": {"apiVersion": "apps/v1", "kind": kind, "name": "web"}},
    })
}

/// The VPA CRD's own rules, on the real apiserver, say exactly what
/// nodescope's `CrdRules` says they say (and so, by
/// tests/crd_policy_parity.rs, what the policy says).
async fn crd_rules_speak_as_nodescope_reads_them(plane: &ControlPlane) {
    let client = plane.client().await;
    let rules = CrdRules::from_crd(&manifest("manifests/components/vpa-crd/vpa-crd.yaml"), "v1")
        .unwrap_or_else(|e| panic!("{e}"));
    for (scope, kind) in [
        ("node", "Deployment"),
        ("Cluster Wide", "DaemonSet"),
        ("node", "StatefulSet"),
        ("topology.kubernetes.io/zone", "Deployment"),
        ("UPPER/x", "DaemonSet"),
        ("/x", "Deployment"),
    ] {
        let vpa = vpa(scope, kind);
        let denied = dry_run_create(&client, &vpa)
            .await
            .err()
            .unwrap_or_else(|| panic!("the apiserver admitted {vpa}"));
        let errors = rules.evaluate(&vpa);
        assert_eq!(errors.len(), 1, "{errors:?}");
        assert_eq!(
            denied,
            format!(
                "422 VerticalPodAutoscaler.autoscaling.k8s.io \"web\" is invalid: {}",
                errors[0]
            )
        );
        println!("  the CRD says, as nodescope reads it: {denied}");
    }
}

/// The VPA CRD admits the label keys (AEP-10031) that `CrdRules` admits:
/// the apiserver's regex engine reads the rules' regexes as nodescope's
/// does. (The shipped webhook configurations are gone by now: a VPA the
/// CRD admits would go on to them.)
async fn crd_admits_label_key_scopes(plane: &ControlPlane) {
    let client = plane.client().await;
    let rules = CrdRules::from_crd(&manifest("manifests/components/vpa-crd/vpa-crd.yaml"), "v1")
        .unwrap_or_else(|e| panic!("{e}"));
    for scope in [
        "node",
        "kubernetes.io/hostname",
        "topology.kubernetes.io/zone",
        "nvidia.com/gpu.present",
    ] {
        let vpa = vpa(scope, "DaemonSet");
        assert_eq!(rules.evaluate(&vpa), []);
        dry_run_create(&client, &vpa)
            .await
            .unwrap_or_else(|e| panic!("the apiserver refused {vpa}: {e}"));
    }
    println!("  the CRD admits node, hostname, zone and custom-key scopes for a DaemonSet");
}
