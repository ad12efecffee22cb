//! Exit codes, and the exact message of every kind of input `dry-run`
//! cannot check: each names the file, the document and the field, and says
//! why, once.

use super::*;

/// Runs `dry-run` with `args` and `stdin`, expecting exit 2 and exactly
/// `message`.
fn bad_input(args: &[&str], stdin: &str, message: &str) {
    fails_with(&nodescope_with_stdin(args, stdin), message);
}

fn temp_file(name: &str, text: &str) -> (tempfile::TempDir, String) {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join(name);
    std::fs::write(&path, text).expect("written");
    let path = path.to_str().expect("utf-8").to_owned();
    (dir, path)
}

#[test]
fn exit_code_is_0_when_everything_is_admitted_and_1_when_anything_is_denied() {
    let ok = nodescope(&["dry-run", "-f", "examples/manifests/balloon.yaml"]);
    assert_exit(&ok, 0);
    let denied = nodescope(&["dry-run", "-f", "examples/manifests/mistakes.yaml"]);
    assert_exit(&denied, 1);
}

#[test]
fn a_missing_file_is_exit_2_and_named_with_its_cause_once() {
    bad_input(
        &["dry-run", "-f", "no/such/file.yaml"],
        "",
        "-f no/such/file.yaml: no such file or directory",
    );
    bad_input(
        &[
            "dry-run",
            "-f",
            "examples/manifests",
            "--params",
            "no/such/store",
        ],
        "",
        "--params no/such/store: no such file or directory",
    );
}

#[test]
fn a_missing_policies_path_is_named_once_with_its_cause() {
    bad_input(
        &[
            "dry-run",
            "-f",
            "examples/manifests",
            "--policies",
            "no/such/policies",
        ],
        "",
        "--policies no/such/policies: no such file or directory",
    );
}

#[test]
fn a_yaml_syntax_error_is_exit_2_with_its_document_and_line() {
    bad_input(
        &["dry-run", "-f", "-"],
        "apiVersion: v1\nkind: Pod\nmetadata: {name: [\n",
        "<stdin>: document 1: not valid YAML: unclosed bracket '[' at line 3, column 18",
    );
}

#[test]
fn a_syntax_error_in_a_later_document_names_that_document_as_well_as_the_line() {
    let (_dir, path) = temp_file(
        "three.yaml",
        "# a comment, no document\n---\napiVersion: v1\nkind: ConfigMap\nmetadata: {name: a}\n---\n---\napiVersion: v1\nkind: ConfigMap\nmetadata: {name: b}\n---\napiVersion: v1\nkind: Pod\nmetadata: {name: [\n",
    );
    bad_input(
        &["dry-run", "-f", &path],
        "",
        &format!("{path}: document 3: not valid YAML: unclosed bracket '[' at line 14, column 18"),
    );
}

#[test]
fn a_document_without_kind_is_exit_2_with_its_document_and_line() {
    bad_input(
        &["dry-run", "-f", "-"],
        "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: a}\n---\n# no kind below\napiVersion: v1\nmetadata: {name: b}\n",
        "<stdin>: document 2 (line 6): no `kind`",
    );
}

#[test]
fn a_misspelled_or_lower_case_kind_is_exit_2_naming_the_file_the_document_and_the_kind() {
    let (_dir, path) = temp_file(
        "pods.yaml",
        "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: a}\n---\napiVersion: v1\nkind: Pods\nmetadata: {name: web}\n",
    );
    bad_input(
        &["dry-run", "-f", &path],
        "",
        &format!(
            r#"{path}: document 2 (line 5): unknown kind "Pods" (apiVersion v1): did you mean "Pod"?"#
        ),
    );
    bad_input(
        &["dry-run", "-f", "-"],
        "apiVersion: v1\nkind: pod\nmetadata: {name: web}\n",
        r#"<stdin>: document 1 (line 1): unknown kind "pod" (apiVersion v1): did you mean "Pod"?"#,
    );
    bad_input(
        &["dry-run", "-f", "-"],
        "apiVersion: apps/v1beta2\nkind: DaemonSet\nmetadata: {name: agent}\n",
        r#"<stdin>: document 1 (line 1): unknown kind "DaemonSet" (apiVersion apps/v1beta2): DaemonSet is served as apps/v1"#,
    );
    // A misspelt param would silently turn a policy off.
    bad_input(
        &["dry-run", "-f", "examples/manifests/balloon.yaml", "--params", "-"],
        "apiVersion: featureflags.nodescope.dev/v1alpha1\nkind: Features\nmetadata: {name: balloon-pods, namespace: kube-system}\n",
        r#"<stdin>: document 1 (line 1): unknown kind "Features" (apiVersion featureflags.nodescope.dev/v1alpha1): did you mean "Feature"?"#,
    );
}

const WIDGET: &str = "apiVersion: example.com/v1\nkind: Widget\nmetadata: {name: w}\n";

const WIDGET_CRD: &str = r#"apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata: {name: widgets.example.com}
spec:
  group: example.com
  scope: Cluster
  names: {kind: Widget, plural: widgets}
  versions: [{name: v1, served: true, storage: true}]
"#;

#[test]
fn a_custom_kind_is_known_only_when_a_crd_among_the_inputs_defines_it() {
    bad_input(
        &["dry-run", "-f", "-"],
        WIDGET,
        r#"<stdin>: document 1 (line 1): unknown kind "Widget" (apiVersion example.com/v1): it is not built into Kubernetes and no CustomResourceDefinition among the inputs defines it"#,
    );
    let (_dir, crd) = temp_file("crd.yaml", WIDGET_CRD);
    for args in [
        ["dry-run", "-f", "-", "--params", crd.as_str(), "-o", "json"],
        ["dry-run", "-f", crd.as_str(), "-f", "-", "-o", "json"],
    ] {
        let output = nodescope_with_stdin(&args, WIDGET);
        assert_exit(&output, 0);
        let report = json_report(&output);
        let widget = report["objects"]
            .as_array()
            .and_then(|objects| objects.iter().find(|o| o["object"] == "Widget/w"))
            .cloned()
            .unwrap_or_default();
        // The CRD's plural, and its cluster scope: no namespace is
        // defaulted (found as `Widget/w`, not `Widget/default/w`).
        assert_eq!(widget["resource"], "widgets");
    }
}

#[test]
fn no_input_objects_at_all_is_exit_2_saying_so() {
    bad_input(
        &["dry-run", "-f", "-"],
        "",
        "-f -: standard input holds no objects",
    );
    bad_input(
        &["dry-run", "-f", "-"],
        "# only a comment\n---\n",
        "-f -: standard input holds no objects",
    );
    let empty = tempfile::tempdir().expect("tempdir");
    let path = empty.path().to_str().expect("utf-8");
    bad_input(
        &["dry-run", "-f", path],
        "",
        &format!("-f {path}: holds no .yaml, .yml or .json file and no kustomization"),
    );
    let (_dir, file) = temp_file("empty.yaml", "---\n# nothing\n");
    bad_input(
        &["dry-run", "-f", &file],
        "",
        &format!("-f {file}: holds no objects"),
    );
}

#[test]
fn a_policies_path_that_holds_no_policy_is_exit_2_saying_so() {
    let empty = tempfile::tempdir().expect("tempdir");
    let path = empty.path().to_str().expect("utf-8");
    bad_input(
        &["dry-run", "-f", "examples/manifests", "--policies", path],
        "",
        &format!(
            "--policies {path}: holds no ValidatingAdmissionPolicy, so there is nothing to check against"
        ),
    );
    bad_input(
        &["dry-run", "-f", "examples/manifests", "--policies", "examples/store"],
        "",
        "--policies examples/store: holds no ValidatingAdmissionPolicy, so there is nothing to check against",
    );
}

fn policy_dir(policy: &str) -> tempfile::TempDir {
    let dir = tempfile::tempdir().expect("tempdir");
    std::fs::write(dir.path().join("policy.yaml"), policy).expect("written");
    dir
}

fn bad_policy(policy: &str, message: &str) {
    let dir = policy_dir(policy);
    let path = dir.path().to_str().expect("utf-8");
    bad_input(
        &["dry-run", "-f", "examples/manifests", "--policies", path],
        "",
        &format!("{path}/policy.yaml: {message}"),
    );
}

const POLICY_HEAD: &str = "apiVersion: admissionregistration.k8s.io/v1\nkind: ValidatingAdmissionPolicy\nmetadata: {name: p}\nspec:\n";

#[test]
fn an_unknown_policy_field_is_exit_2_and_named_once() {
    bad_policy(
        &format!("{POLICY_HEAD}  validationz: []\n"),
        "ValidatingAdmissionPolicy 'p': spec: unknown field `validationz`, expected one of `paramKind`, `matchConstraints`, `validations`, `failurePolicy`, `auditAnnotations`, `matchConditions`, `variables`",
    );
}

#[test]
fn a_policy_field_of_the_wrong_shape_is_named_without_rust_type_names() {
    bad_policy(
        &format!("{POLICY_HEAD}  matchConstraints: []\n  validations: [{{expression: 'true'}}]\n"),
        "ValidatingAdmissionPolicy 'p': spec.matchConstraints: expected a mapping, not a list",
    );
    bad_policy(
        &format!("{POLICY_HEAD}  validations: {{expression: 'true'}}\n"),
        "ValidatingAdmissionPolicy 'p': spec.validations: invalid type: mapping, expected a list",
    );
    bad_policy(
        &format!("{POLICY_HEAD}  paramKind: 5\n  validations: [{{expression: 'true'}}]\n"),
        "ValidatingAdmissionPolicy 'p': spec.paramKind: invalid type: integer `5`, expected a mapping",
    );
}

#[test]
fn a_policy_file_with_a_syntax_error_in_a_later_document_names_it_on_one_line() {
    bad_policy(
        &format!("{POLICY_HEAD}  validations: [{{expression: 'true'}}]\n---\nkind: [\n"),
        "document 2: not valid YAML: unclosed bracket '[' at line 7, column 7",
    );
}

#[test]
fn a_policy_whose_cel_does_not_compile_is_exit_2_with_the_position() {
    bad_policy(
        &format!("{POLICY_HEAD}  validations:\n  - expression: \"object.spec.containers.all(c, c.name ==)\"\n"),
        "ValidatingAdmissionPolicy 'p': spec.validations[0].expression at line 1, column 41: Syntax error: mismatched input ')' expecting {'[', '{', '(', '.', '-', '!', 'true', 'false', 'null', NUM_FLOAT, NUM_INT, NUM_UINT, STRING, BYTES, IDENTIFIER} (expression: object.spec.containers.all(c, c.name ==))",
    );
}

#[test]
fn a_recommendation_the_webhook_cannot_use_is_exit_2_at_its_document_and_field() {
    let args = [
        "dry-run",
        "-f",
        "examples/manifests/node-exporter.yaml",
        "--recommendations",
        "-",
    ];
    bad_input(
        &args,
        "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: x}\n---\napiVersion: autoscaling.k8s.io/v1\nkind: VerticalPodAutoscaler\nmetadata: {name: v, namespace: m}\nspec: {targetRef: 5}\n",
        "<stdin>: document 2 (line 5): spec.targetRef: invalid type: integer `5`, expected a mapping",
    );
    bad_input(
        &args,
        "apiVersion: autoscaling.k8s.io/v1\nkind: VerticalPodAutoscaler\nmetadata: {name: v, namespace: m}\nspec: {scope: node, targetRef: {apiVersion: apps/v1, kind: DaemonSet, name: x}}\nstatus:\n  recommendationGroups:\n  - scopeValue: n1\n    containerRecommendations: [{containerName: a, target: {cpu: abc}}]\n",
        r#"<stdin>: document 1 (line 1): status.recommendationGroups[0].containerRecommendations[0].target.cpu: quantity "abc" is not a number followed by an optional suffix (e.g. "1.5", "250m", "12e6")"#,
    );
    bad_input(
        &args,
        "apiVersion: v1\nkind: LimitRange\nmetadata: {name: v, namespace: m}\nspec: {limits: 5}\n",
        "<stdin>: document 1 (line 1): spec.limits: invalid type: integer `5`, expected a list",
    );
}

#[test]
fn other_bad_inputs_are_exit_2_never_a_panic() {
    bad_input(
        &["dry-run", "-f", "-"],
        "[1, 2]",
        "<stdin>: document 1, item 1 (line 1): not an object (a mapping with apiVersion, kind and metadata)",
    );
    bad_input(
        &["dry-run", "-f", "-"],
        "apiVersion: v1\nkind: Pod\nmetadata: {namespace: x}\n",
        "<stdin>: document 1 (line 1): neither `metadata.name` nor `metadata.generateName` is set",
    );
    bad_input(
        &["dry-run", "-f", "-"],
        r#"{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{"uid":"u"}}"#,
        "<stdin>: document 1 (line 1): not an AdmissionReview nodescope can read: admission request has no valid 'operation'",
    );
    bad_input(
        &["dry-run", "-f", "-", "--operation", "UPDATE"],
        "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: a}\n",
        "<stdin>: document 1 (line 1): --operation UPDATE: no old version of ConfigMap/default/a in --old",
    );
    bad_input(
        &["dry-run", "-f", "-", "-f", "-"],
        "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: a}\n",
        "-f -: standard input can be read only once",
    );
    let usage = nodescope(&["dry-run", "--no-such-flag"]);
    assert_exit(&usage, 2);
}

#[test]
fn failing_to_write_the_report_is_an_internal_error_exit_3() {
    let Ok(full) = std::fs::OpenOptions::new().write(true).open("/dev/full") else {
        return; // not on Linux
    };
    let output = command(&["dry-run", "-f", "examples/manifests", "-o", "json"])
        .stdout(full)
        .stderr(Stdio::piped())
        .output()
        .expect("runs");
    assert_exit(&output, 3);
    assert_eq!(
        stderr(&output),
        "nodescope: internal error: cannot write the report: no space left on device\n"
    );
}
