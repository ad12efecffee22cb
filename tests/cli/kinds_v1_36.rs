//! `dry-run` knows the API of a default Kubernetes v1.36 apiserver: kinds
//! it serves at GA that older tables lacked are checked, a version it does
//! not serve is exit 2 saying which it serves, and one only
//! `--runtime-config` turns on is refused as such. `--kubeconfig` reads a
//! cluster's kinds instead (tests/e2e `dry-run-kinds`); an unreachable one
//! is exit 2 in kubectl's words.

use super::*;

const GA: &str = "tests/fixtures/kubernetes-v1.36/ga-kinds.yaml";

#[test]
fn a_resource_v1_device_class_and_an_admissionregistration_v1_mutating_admission_policy_are_checked(
) {
    let output = nodescope(&["dry-run", "-f", GA]);
    assert_exit(&output, 0);
    assert_eq!(
        stdout(&output),
        "\
OBJECT                             SOURCE                                           POLICY  BINDING  RESULT  MESSAGE
DeviceClass/gpu.example.com        tests/fixtures/kubernetes-v1.36/ga-kinds.yaml#1  -       -        allow   no policy binding matches
MutatingAdmissionPolicy/add-label  tests/fixtures/kubernetes-v1.36/ga-kinds.yaml#2  -       -        allow   no policy binding matches
2 objects: 2 allowed, 0 denied, 0 warnings, 0 errors
"
    );
    assert_eq!(stderr(&output), "");
    let output = nodescope(&["dry-run", "-f", GA, "-o", "json"]);
    assert_exit(&output, 0);
    let report = json_report(&output);
    let resources: Vec<&Value> = report["objects"]
        .as_array()
        .expect("objects")
        .iter()
        .map(|o| &o["resource"])
        .collect();
    assert_eq!(resources, ["deviceclasses", "mutatingadmissionpolicies"]);
}

fn unserved(api_version: &str, kind: &str, why: &str) {
    let manifest = format!("apiVersion: {api_version}\nkind: {kind}\nmetadata:\n  name: x\n");
    fails_with(
        &nodescope_with_stdin(&["dry-run", "-f", "-"], &manifest),
        &format!(
            "<stdin>: document 1 (line 1): unknown kind {kind:?} (apiVersion {api_version}): {why}"
        ),
    );
}

#[test]
fn a_version_v1_36_does_not_serve_is_exit_2_naming_the_ones_it_does() {
    unserved(
        "resource.k8s.io/v1alpha3",
        "DeviceClass",
        "DeviceClass is served as resource.k8s.io/v1",
    );
    unserved(
        "extensions/v1beta1",
        "Ingress",
        "Ingress is served as networking.k8s.io/v1",
    );
}

#[test]
fn a_version_only_runtime_config_turns_on_is_refused_as_such() {
    unserved(
        "admissionregistration.k8s.io/v1alpha1",
        "MutatingAdmissionPolicy",
        "MutatingAdmissionPolicy is served as admissionregistration.k8s.io/v1; a default \
         Kubernetes v1.36.2 apiserver does not serve admissionregistration.k8s.io/v1alpha1 (off \
         unless its --runtime-config or --feature-gates turn it on; --kubeconfig checks against \
         a cluster's own kinds)",
    );
    unserved(
        "resource.k8s.io/v1beta2",
        "DeviceClass",
        "DeviceClass is served as resource.k8s.io/v1; a default Kubernetes v1.36.2 apiserver does \
         not serve resource.k8s.io/v1beta2 (off unless its --runtime-config or --feature-gates turn \
         it on; --kubeconfig checks against a cluster's own kinds)",
    );
    // A kind that no version a default apiserver serves has.
    unserved(
        "resource.k8s.io/v1beta2",
        "DeviceTaintRule",
        "a default Kubernetes v1.36.2 apiserver does not serve resource.k8s.io/v1beta2 (off unless \
         its --runtime-config or --feature-gates turn it on; --kubeconfig checks against a \
         cluster's own kinds)",
    );
}

#[test]
fn with_kubeconfig_a_cluster_that_does_not_answer_is_exit_2_in_kubectl_s_words() {
    fails_with(
        &nodescope(&[
            "dry-run",
            "-f",
            GA,
            "--kubeconfig",
            "examples/kubeconfig/unreachable.yaml",
        ]),
        "The connection to the server 127.0.0.1:1 was refused - did you specify the right host \
         or port? (kubeconfig: examples/kubeconfig/unreachable.yaml; context: nowhere)",
    );
    let mut other_context = command(&["dry-run", "-f", GA, "--context", "nope"]);
    other_context.env("KUBECONFIG", "examples/kubeconfig/unreachable.yaml");
    fails_with(
        &other_context.output().expect("runs"),
        "cannot load the kubeconfig: no context \"nope\" in it (kubeconfig: \
         $KUBECONFIG=examples/kubeconfig/unreachable.yaml; context: nope)",
    );
    // Without either flag, $KUBECONFIG is not read: offline.
    let mut offline = command(&["dry-run", "-f", GA]);
    offline.env("KUBECONFIG", "examples/kubeconfig/unreachable.yaml");
    assert_exit(&offline.output().expect("runs"), 0);
}
