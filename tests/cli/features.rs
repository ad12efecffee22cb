//! `nodescope features` and `features uses`, offline: exact outputs and exit
//! codes on the fixtures of tests/fixtures/features.

use super::{assert_exit, nodescope, stdout};

const FEATURES: &str = "tests/fixtures/features/features.yaml";
const VPAS: &str = "tests/fixtures/features/vpas.yaml";
const ACME_POLICY: &str = "tests/fixtures/features/acme/policy.yaml";
const ACME_OBJECTS: &str = "tests/fixtures/features/acme/objects.yaml";

#[test]
fn features_lists_each_feature_with_desired_state_and_uses_left() {
    let output = nodescope(&["features", "--params", FEATURES, "-f", VPAS]);
    assert_exit(&output, 0);
    assert_eq!(
        stdout(&output),
        "NAMESPACE     NAME             DESIRED    STATE        USES   LAST-TRANSITION\n\
         kube-system   balloon-pods     -          On           0      -\n\
         kube-system   vpa-node-scope   Disabled   TurningOff   1      -\n"
    );
}

#[test]
fn features_uses_names_the_scoped_vpa_and_the_policy_message_and_exits_1() {
    let output = nodescope(&[
        "features",
        "uses",
        "vpa-node-scope",
        "-n",
        "kube-system",
        "--params",
        FEATURES,
        "-f",
        VPAS,
    ]);
    assert_exit(&output, 1);
    assert_eq!(
        stdout(&output),
        "POLICY                             OBJECT                                           MESSAGE\n\
         nodescope-feature-vpa-node-scope   VerticalPodAutoscaler monitoring/node-exporter   feature \"vpa-node-scope\" is Off: no new uses allowed (a VerticalPodAutoscaler with spec.scope \"node\")\n\
         1 object(s) keep Feature kube-system/vpa-node-scope from turning off\n"
    );
}

#[test]
fn features_uses_as_yaml_carries_every_field_of_each_use() {
    let output = nodescope(&[
        "features",
        "uses",
        "vpa-node-scope",
        "--params",
        FEATURES,
        "-f",
        VPAS,
        "-o",
        "yaml",
    ]);
    assert_exit(&output, 1);
    assert_eq!(
        stdout(&output),
        "feature:\n  name: vpa-node-scope\n  namespace: kube-system\nuses:\n\
         - kind: VerticalPodAutoscaler\n  \
           message: \"feature \\\"vpa-node-scope\\\" is Off: no new uses allowed (a VerticalPodAutoscaler with spec.scope \\\"node\\\")\"\n  \
           name: node-exporter\n  namespace: monitoring\n  policy: nodescope-feature-vpa-node-scope\n"
    );
}

#[test]
fn features_uses_of_a_feature_nothing_uses_prints_an_empty_json_list_and_exits_0() {
    let output = nodescope(&[
        "features",
        "uses",
        "balloon-pods",
        "--params",
        FEATURES,
        "-f",
        VPAS,
        "-o",
        "json",
    ]);
    assert_exit(&output, 0);
    assert_eq!(
        stdout(&output),
        "{\n  \"feature\": {\n    \"name\": \"balloon-pods\",\n    \"namespace\": \"kube-system\"\n  },\n  \"uses\": []\n}\n"
    );
}

#[test]
fn a_third_party_feature_is_found_through_its_own_policy_and_crd() {
    let output = nodescope(&[
        "features",
        "uses",
        "gpu-sharing",
        "-n",
        "acme-system",
        "--policies",
        ACME_POLICY,
        "-f",
        ACME_OBJECTS,
        "-o",
        "json",
    ]);
    assert_exit(&output, 1);
    let report: serde_json::Value = serde_json::from_str(&stdout(&output)).expect("JSON report");
    assert_eq!(
        report["uses"],
        serde_json::json!([{"policy": "acme-gpu-sharing", "kind": "GpuShare", "namespace": "ml",
                            "name": "train", "message": "feature \"gpu-sharing\" is Off: no new shared GPUs"}])
    );
}

#[test]
fn features_without_manifests_reads_the_cluster_and_says_when_there_is_none() {
    let output = super::command(&["features"])
        .env("KUBECONFIG", "/nonexistent/kubeconfig")
        .env_remove("KUBERNETES_SERVICE_HOST")
        .output()
        .expect("the binary runs");
    assert_exit(&output, 2);
    let err = super::stderr(&output);
    assert!(err.starts_with("nodescope: no cluster to read: "), "{err}");
    assert!(err.contains("/nonexistent/kubeconfig"), "{err}");
    assert!(
        err.ends_with(" (or give the objects offline with -f and --params)\n"),
        "{err}"
    );
    assert_eq!(stdout(&output), "");
}
