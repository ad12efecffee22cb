//! `nodescope features` and `features uses`, offline: exact outputs and exit
//! codes on the fixtures of examples/features.

use super::{assert_exit, nodescope, stdout};

const FEATURES: &str = "examples/features/features.yaml";
const VPAS: &str = "examples/features/vpas.yaml";
const ACME_POLICY: &str = "examples/features/acme/policy.yaml";
const ACME_OBJECTS: &str = "examples/features/acme/objects.yaml";

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
        "apiVersion: v1\nitems:\n\
         - feature:\n    name: vpa-node-scope\n    namespace: kube-system\n  uses:\n  \
         - kind: VerticalPodAutoscaler\n    \
           message: \"feature \\\"vpa-node-scope\\\" is Off: no new uses allowed (a VerticalPodAutoscaler with spec.scope \\\"node\\\")\"\n    \
           name: node-exporter\n    namespace: monitoring\n    policy: nodescope-feature-vpa-node-scope\n\
         kind: List\n"
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
        "{\n  \"apiVersion\": \"v1\",\n  \"items\": [\n    {\n      \"feature\": {\n        \"name\": \"balloon-pods\",\n        \"namespace\": \"kube-system\"\n      },\n      \"uses\": []\n    }\n  ],\n  \"kind\": \"List\"\n}\n"
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
        report["items"][0]["uses"],
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
    assert_eq!(
        super::stderr(&output),
        "nodescope: cannot load the kubeconfig: /nonexistent/kubeconfig: no such file or \
         directory - give one with --kubeconfig or $KUBECONFIG \
         (kubeconfig: $KUBECONFIG=/nonexistent/kubeconfig) - or give the objects offline with \
         -f and --params\n"
    );
    assert_eq!(stdout(&output), "");
}

const CLEANUP_FEATURES: &str = "examples/features/cleanup/features.yaml";
const CLEANUP_VPAS: &str = "examples/features/cleanup/vpas.yaml";

#[test]
fn features_cleanup_dry_run_lists_the_exact_patches_groups_first_and_exits_1() {
    let output = nodescope(&[
        "features",
        "cleanup",
        "vpa-node-scope",
        "--dry-run",
        "--params",
        CLEANUP_FEATURES,
        "-f",
        CLEANUP_VPAS,
    ]);
    assert_exit(&output, 1);
    assert_eq!(
        stdout(&output),
        "OBJECT                                           SUBRESOURCE   PATCH\n\
         VerticalPodAutoscaler monitoring/node-exporter   status        [{\"op\":\"test\",\"path\":\"/metadata/resourceVersion\",\"value\":\"4711\"},{\"op\":\"remove\",\"path\":\"/status/recommendationGroups\"}]\n\
         VerticalPodAutoscaler monitoring/node-exporter   -             [{\"op\":\"test\",\"path\":\"/metadata/resourceVersion\",\"value\":\"4711\"},{\"op\":\"remove\",\"path\":\"/spec/scope\"}]\n\
         2 patch(es) clear what Feature kube-system/vpa-node-scope declares in spec.cleanup\n"
    );
}

#[test]
fn features_cleanup_of_a_feature_that_declares_none_changes_nothing_and_exits_0() {
    let output = nodescope(&[
        "features",
        "cleanup",
        "balloon-pods",
        "--dry-run",
        "--params",
        CLEANUP_FEATURES,
        "-f",
        CLEANUP_VPAS,
    ]);
    assert_exit(&output, 0);
    assert_eq!(
        stdout(&output),
        "Feature kube-system/balloon-pods declares no spec.cleanup: nothing is cleared, its uses must go by hand (nodescope features uses balloon-pods -n kube-system)\n"
    );
}

#[test]
fn features_cleanup_without_dry_run_is_a_usage_error() {
    let output = nodescope(&[
        "features",
        "cleanup",
        "vpa-node-scope",
        "--params",
        CLEANUP_FEATURES,
    ]);
    assert_exit(&output, 2);
    assert!(
        super::stderr(&output)
            .contains("the following required arguments were not provided:\n  --dry-run"),
        "{}",
        super::stderr(&output)
    );
}

#[test]
fn uses_and_cleanup_of_a_feature_no_one_defined_exit_2_naming_those_there_are() {
    for command in [
        vec!["features", "uses", "no-such"],
        vec!["features", "cleanup", "no-such", "--dry-run"],
    ] {
        let mut args = command.clone();
        args.extend(["--params", CLEANUP_FEATURES, "-f", CLEANUP_VPAS]);
        let output = nodescope(&args);
        assert_exit(&output, 2);
        assert_eq!(
            super::stderr(&output),
            "nodescope: no Feature kube-system/no-such: there are kube-system/balloon-pods, kube-system/vpa-node-scope\n",
            "{command:?}"
        );
        assert_eq!(stdout(&output), "", "{command:?}");
    }
}

#[test]
fn features_as_json_carries_the_tasks_and_the_reports_and_warns_of_fields_a_crd_swap_would_prune() {
    let output = nodescope(&[
        "features",
        "-o",
        "json",
        "--params",
        CLEANUP_FEATURES,
        "-f",
        CLEANUP_VPAS,
    ]);
    assert_exit(&output, 0);
    let list: serde_json::Value = serde_json::from_str(&stdout(&output)).expect("JSON list");
    assert_eq!(
        (&list["apiVersion"], &list["kind"]),
        (&"v1".into(), &"List".into())
    );
    assert_eq!(
        list["items"][1],
        serde_json::json!({
            "namespace": "kube-system", "name": "vpa-node-scope", "desired": "Disabled",
            "state": "TurningOff", "uses": 1, "lastTransitionTime": null,
            "transitionTasks": [{"name": "nodescope-feature-vpa-node-scope", "count": 1,
                                 "description": "VerticalPodAutoscaler monitoring/node-exporter"}],
            "reports": [
                {"component": "webhook", "instance": "nodescope-5d9f-abcde", "observedState": "TurningOff",
                 "observedGeneration": 2, "lastReportTime": "2020-01-01T00:00:00Z", "expirySeconds": 180,
                 "enabled": false, "expired": true},
                {"component": "kube-controller-manager", "instance": "", "observedGeneration": 0,
                 "enabled": true, "expired": true}
            ]
        })
    );
    assert_eq!(list["items"][0]["name"], "balloon-pods");
    assert_eq!(
        super::stderr(&output),
        "nodescope: warning: 1 object(s) of verticalpodautoscalers.autoscaling.k8s.io hold /spec/scope, which Feature kube-system/vpa-node-scope declares in spec.cleanup: replacing the verticalpodautoscalers.autoscaling.k8s.io CRD by one that does not define the field (upstream's) prunes it from them; turn the Feature off first (its cleanup removes the field from every object that uses it)\n\
         nodescope: warning: 2 object(s) of verticalpodautoscalers.autoscaling.k8s.io hold /status/recommendationGroups, which Feature kube-system/vpa-node-scope declares in spec.cleanup: replacing the verticalpodautoscalers.autoscaling.k8s.io CRD by one that does not define the field (upstream's) prunes it from them; turn the Feature off first (its cleanup removes the field from every object that uses it)\n"
    );
    // The same list as YAML, and no warning where no Feature declares cleanup.
    let yaml = nodescope(&["features", "-o", "yaml", "--params", FEATURES, "-f", VPAS]);
    assert_exit(&yaml, 0);
    assert_eq!(super::stderr(&yaml), "");
    assert!(
        stdout(&yaml).starts_with(
            "apiVersion: v1\nitems:\n- desired: null\n  lastTransitionTime: null\n  name: balloon-pods\n"
        ),
        "{}",
        stdout(&yaml)
    );
}

#[test]
fn features_of_manifests_with_no_feature_says_no_resources_found() {
    let output = nodescope(&["features", "-f", VPAS]);
    assert_exit(&output, 0);
    assert_eq!(stdout(&output), "", "no header alone");
    assert_eq!(super::stderr(&output), "No resources found\n");
    // A List stays a List, empty.
    let output = nodescope(&["features", "-f", VPAS, "-o", "json"]);
    assert_exit(&output, 0);
    assert_eq!(
        stdout(&output),
        "{\n  \"apiVersion\": \"v1\",\n  \"items\": [],\n  \"kind\": \"List\"\n}\n"
    );
    assert_eq!(super::stderr(&output), "");
}

#[test]
fn f_is_read_in_two_passes_so_a_crd_after_its_objects_and_standard_input_both_work() {
    // The CRD last: its objects come before it, as they may in a dump; the
    // first pass learns it, the second looks through them. From standard
    // input, which the second pass reads again.
    let text = std::fs::read_to_string(super::root().join(ACME_OBJECTS)).expect("read");
    let mut documents: Vec<&str> = text.split("\n---\n").collect();
    documents.reverse();
    assert!(documents[documents.len() - 1].contains("kind: CustomResourceDefinition"));
    let reversed = documents.join("\n---\n");
    let output = super::nodescope_with_stdin(
        &[
            "features",
            "uses",
            "gpu-sharing",
            "-n",
            "acme-system",
            "--policies",
            ACME_POLICY,
            "-f",
            "-",
        ],
        &reversed,
    );
    assert_exit(&output, 1);
    assert_eq!(super::stderr(&output), "");
    assert_eq!(
        stdout(&output),
        "POLICY             OBJECT              MESSAGE\n\
         acme-gpu-sharing   GpuShare ml/train   feature \"gpu-sharing\" is Off: no new shared GPUs\n\
         1 object(s) keep Feature acme-system/gpu-sharing from turning off\n"
    );
}
