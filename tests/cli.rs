//! The `dry-run` and `test` subcommands, through the real binary: golden
//! outputs on `examples/` and on the captured reviews, every exit code, and
//! the bad-input messages.
//!
//! Golden files live in `tests/golden/`; regenerate them with
//! `NODESCOPE_BLESS=1 cargo test --test cli` and review the diff.

use serde_json::{json, Value};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

const BIN: &str = env!("CARGO_BIN_EXE_nodescope");
const FIXTURES: &str = "tests/fixtures/admission-reviews";

fn root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

fn command(args: &[&str]) -> Command {
    let mut command = Command::new(BIN);
    command
        .args(args)
        .current_dir(root())
        .env_remove("NO_COLOR")
        .stdin(Stdio::null());
    command
}

fn nodescope(args: &[&str]) -> Output {
    command(args).output().expect("the binary runs")
}

fn nodescope_with_stdin(args: &[&str], stdin: &str) -> Output {
    let mut child = command(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("the binary runs");
    child
        .stdin
        .take()
        .expect("piped")
        .write_all(stdin.as_bytes())
        .expect("stdin written");
    child.wait_with_output().expect("the binary finishes")
}

fn stdout(output: &Output) -> String {
    String::from_utf8(output.stdout.clone()).expect("utf-8 stdout")
}

fn stderr(output: &Output) -> String {
    String::from_utf8(output.stderr.clone()).expect("utf-8 stderr")
}

fn assert_exit(output: &Output, code: i32) {
    assert_eq!(
        output.status.code(),
        Some(code),
        "stdout:\n{}\nstderr:\n{}",
        stdout(output),
        stderr(output)
    );
}

/// Compares `actual` with `tests/golden/<name>`, or rewrites it when
/// `NODESCOPE_BLESS` is set.
fn golden(name: &str, actual: &str) {
    let path: PathBuf = root().join("tests/golden").join(name);
    if std::env::var_os("NODESCOPE_BLESS").is_some() {
        std::fs::create_dir_all(path.parent().expect("has a parent")).expect("mkdir");
        std::fs::write(&path, actual).expect("golden written");
        return;
    }
    let expected = std::fs::read_to_string(&path).unwrap_or_else(|e| {
        panic!(
            "{}: {e}; run NODESCOPE_BLESS=1 cargo test --test cli",
            path.display()
        )
    });
    assert!(
        expected == actual,
        "{} differs (NODESCOPE_BLESS=1 regenerates it):\n--- expected\n{expected}\n--- actual\n{actual}",
        path.display()
    );
}

// ---- golden outputs ------------------------------------------------------

const EXAMPLES: &[&str] = &[
    "dry-run",
    "-f",
    "examples/manifests",
    "--params",
    "examples/store",
];

#[test]
fn the_examples_table_json_yaml_and_junit_match_their_golden_files() {
    for (format, file) in [
        ("table", "examples.table.txt"),
        ("json", "examples.json"),
        ("yaml", "examples.yaml"),
        ("junit", "examples.junit.xml"),
    ] {
        let output = nodescope(&[EXAMPLES, &["-o", format]].concat());
        assert_exit(&output, 1);
        golden(file, &stdout(&output));
    }
}

#[test]
fn daemonset_pods_expanded_per_node_show_the_patch_and_resources_in_golden_files() {
    let args = [
        "dry-run",
        "-f",
        "examples/manifests/node-exporter.yaml",
        "--recommendations",
        "examples/store",
        "--nodes",
        "node-a-1,node-b-1,node-c-1",
    ];
    for (format, file) in [
        ("table", "node-exporter-nodes.table.txt"),
        ("json", "node-exporter-nodes.json"),
    ] {
        let output = nodescope(&[&args[..], &["-o", format]].concat());
        assert_exit(&output, 0);
        golden(file, &stdout(&output));
    }
}

#[test]
fn the_captured_reviews_replay_into_golden_table_json_and_junit() {
    let args = [
        "dry-run",
        "-f",
        FIXTURES,
        "--params",
        "examples/store",
        "--recommendations",
        "examples/store",
    ];
    for (format, file) in [
        ("table", "captured-reviews.table.txt"),
        ("json", "captured-reviews.json"),
        ("junit", "captured-reviews.junit.xml"),
    ] {
        let output = nodescope(&[&args[..], &["-o", format]].concat());
        assert_exit(&output, 0);
        golden(file, &stdout(&output));
    }
}

// ---- behaviour -----------------------------------------------------------

fn json_report(output: &Output) -> Value {
    serde_json::from_slice(&output.stdout)
        .unwrap_or_else(|e| panic!("not JSON ({e}):\n{}\n{}", stdout(output), stderr(output)))
}

/// (policy, binding, result, message) of every row of the only object.
fn rows(report: &Value) -> Vec<Value> {
    report["objects"]
        .as_array()
        .expect("objects")
        .iter()
        .flat_map(|o| o["results"].as_array().cloned().unwrap_or_default())
        .collect()
}

#[test]
fn output_defaults_to_json_when_stdout_is_not_a_terminal_and_never_has_colour() {
    let output = nodescope(&["dry-run", "-f", "examples/manifests/mistakes.yaml"]);
    assert_exit(&output, 1);
    let report = json_report(&output);
    assert_eq!(report["kind"], "DryRunReport");
    assert_eq!(
        report["summary"],
        json!({"objects": 3, "allowed": 0, "denied": 3, "warnings": 0, "errors": 0})
    );
    let table = nodescope(&[
        "dry-run",
        "-f",
        "examples/manifests/mistakes.yaml",
        "-o",
        "table",
    ]);
    assert!(!stdout(&table).contains('\x1b'), "{}", stdout(&table));
}

#[test]
fn a_raw_manifest_gets_the_answer_of_the_object_the_apiserver_admitted() {
    let fixture = format!("{FIXTURES}/pod-node-balloon-create.validate.json");
    let replayed = nodescope(&["dry-run", "-f", &fixture, "-o", "json"]);
    assert_exit(&replayed, 0);
    // The manifest as written: no priority, no preemptionPolicy, requests
    // only as limits. The apiserver fills all three in before admission.
    let manifest = r#"
apiVersion: v1
kind: Pod
metadata:
  generateName: node-balloon-
  namespace: kube-system
  labels: {node.kubernetes.io/balloon: "true"}
  ownerReferences:
  - {apiVersion: apps/v1, kind: DaemonSet, name: node-balloon, uid: u, controller: true}
spec:
  priorityClassName: node-balloon
  containers:
  - name: pause
    image: registry.k8s.io/pause:3.10
    resources:
      limits: {cpu: "2", memory: 4Gi}
"#;
    let raw = nodescope_with_stdin(
        &[
            "dry-run",
            "-f",
            "-",
            "--params",
            "examples/manifests/balloon.yaml",
            "-o",
            "json",
        ],
        manifest,
    );
    assert_exit(&raw, 0);
    assert_eq!(rows(&json_report(&raw)), rows(&json_report(&replayed)));

    // And the priority class: the apiserver's default preemptionPolicy is
    // what the bundle forbids, with the same message either way.
    let defaulted = "apiVersion: scheduling.k8s.io/v1\nkind: PriorityClass\nmetadata: {name: node-balloon}\nvalue: 1000000000\npreemptionPolicy: PreemptLowerPriority\n";
    let omitted = "apiVersion: scheduling.k8s.io/v1\nkind: PriorityClass\nmetadata: {name: node-balloon}\nvalue: 1000000000\n";
    let a = nodescope_with_stdin(&["dry-run", "-f", "-", "-o", "json"], defaulted);
    let b = nodescope_with_stdin(&["dry-run", "-f", "-", "-o", "json"], omitted);
    assert_exit(&a, 1);
    assert_exit(&b, 1);
    assert_eq!(rows(&json_report(&a)), rows(&json_report(&b)));
}

#[test]
fn a_feature_turning_off_in_the_files_blocks_a_new_node_scoped_vpa() {
    let input = r#"
apiVersion: featureflags.nodescope.dev/v1alpha1
kind: Feature
metadata: {name: vpa-node-scope, namespace: kube-system}
status: {state: TurningOff}
---
apiVersion: autoscaling.k8s.io/v1
kind: VerticalPodAutoscaler
metadata: {name: agent, namespace: ops}
spec:
  scope: node
  targetRef: {apiVersion: apps/v1, kind: DaemonSet, name: agent}
"#;
    let output = nodescope_with_stdin(&["dry-run", "-f", "-", "-o", "json"], input);
    assert_exit(&output, 1);
    let report = json_report(&output);
    assert_eq!(
        report["objects"][1]["status"]["message"],
        "ValidatingAdmissionPolicy 'nodescope-feature-vpa-node-scope' with binding \
         'nodescope-feature-vpa-node-scope' denied request: feature \"vpa-node-scope\" is \
         TurningOff: no new uses allowed (a VerticalPodAutoscaler with spec.scope \"node\")"
    );
    // DELETE is never blocked.
    let delete = nodescope_with_stdin(
        &["dry-run", "-f", "-", "-o", "json", "--operation", "DELETE"],
        input,
    );
    assert_exit(&delete, 0);
}

#[test]
fn an_update_is_judged_against_its_old_object_and_the_identity_given() {
    let dir = tempfile::tempdir().expect("tempdir");
    let old = dir.path().join("old.yaml");
    std::fs::write(
        &old,
        "apiVersion: autoscaling.k8s.io/v1\nkind: VerticalPodAutoscaler\nmetadata: {name: agent, namespace: ops}\nspec:\n  scope: node\n  targetRef: {apiVersion: apps/v1, kind: DaemonSet, name: agent}\n",
    )
    .expect("written");
    let feature = dir.path().join("feature.yaml");
    std::fs::write(
        &feature,
        "apiVersion: featureflags.nodescope.dev/v1alpha1\nkind: Feature\nmetadata: {name: vpa-node-scope, namespace: kube-system}\nstatus: {state: \"Off\"}\n",
    )
    .expect("written");
    let new = "apiVersion: autoscaling.k8s.io/v1\nkind: VerticalPodAutoscaler\nmetadata: {name: agent, namespace: ops, labels: {a: b}}\nspec:\n  scope: node\n  targetRef: {apiVersion: apps/v1, kind: DaemonSet, name: agent}\n";
    let args = [
        "dry-run",
        "-f",
        "-",
        "--params",
        feature.to_str().expect("utf-8"),
        "--operation",
        "UPDATE",
        "--old",
        old.to_str().expect("utf-8"),
        "--as",
        "alice",
        "--as-group",
        "devs",
        "-o",
        "json",
    ];
    let output = nodescope_with_stdin(&args, new);
    assert_exit(&output, 0);
    assert_eq!(json_report(&output)["objects"][0]["operation"], "UPDATE");
}

// ---- exit codes and bad input --------------------------------------------

fn bad_input(args: &[&str], stdin: &str, expected: &str) {
    let output = nodescope_with_stdin(args, stdin);
    assert_exit(&output, 2);
    let err = stderr(&output);
    assert!(err.contains(expected), "{err}");
    assert!(
        !err.contains("panicked") && !err.contains("RUST_BACKTRACE"),
        "{err}"
    );
    assert_eq!(err.lines().count(), 1, "one line: {err}");
}

#[test]
fn exit_code_is_0_when_everything_is_admitted_and_1_when_anything_is_denied() {
    let ok = nodescope(&[
        "dry-run",
        "-f",
        "examples/manifests/balloon.yaml",
        "-o",
        "json",
    ]);
    assert_exit(&ok, 0);
    let denied = nodescope(&[
        "dry-run",
        "-f",
        "examples/manifests/mistakes.yaml",
        "-o",
        "json",
    ]);
    assert_exit(&denied, 1);
}

#[test]
fn a_missing_file_is_exit_2_and_named() {
    bad_input(
        &["dry-run", "-f", "no/such/file.yaml"],
        "",
        "nodescope: no/such/file.yaml: No such file or directory",
    );
}

#[test]
fn a_yaml_syntax_error_is_exit_2_with_its_line() {
    bad_input(
        &["dry-run", "-f", "-"],
        "apiVersion: v1\nkind: Pod\nmetadata: {name: [\n",
        "nodescope: <stdin>: not valid YAML: unclosed bracket '[' at line 3, column 18",
    );
}

#[test]
fn a_document_without_kind_is_exit_2_with_its_document_and_line() {
    bad_input(
        &["dry-run", "-f", "-"],
        "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: a}\n---\n# no kind below\napiVersion: v1\nmetadata: {name: b}\n",
        "nodescope: <stdin>: document 2 (line 6): no `kind`",
    );
}

fn policy_dir(policy: &str) -> tempfile::TempDir {
    let dir = tempfile::tempdir().expect("tempdir");
    std::fs::write(dir.path().join("policy.yaml"), policy).expect("written");
    dir
}

#[test]
fn an_unknown_policy_field_is_exit_2_and_named() {
    let dir = policy_dir(
        "apiVersion: admissionregistration.k8s.io/v1\nkind: ValidatingAdmissionPolicy\nmetadata: {name: p}\nspec:\n  validationz: []\n",
    );
    bad_input(
        &[
            "dry-run",
            "-f",
            "examples/manifests",
            "--policies",
            dir.path().to_str().expect("utf-8"),
        ],
        "",
        "policy.yaml: ValidatingAdmissionPolicy 'p': unknown field `validationz`",
    );
}

#[test]
fn a_policy_whose_cel_does_not_compile_is_exit_2_with_the_position() {
    let dir = policy_dir(
        "apiVersion: admissionregistration.k8s.io/v1\nkind: ValidatingAdmissionPolicy\nmetadata: {name: p}\nspec:\n  validations:\n  - expression: \"object.spec.containers.all(c, c.name ==)\"\n",
    );
    bad_input(
        &["dry-run", "-f", "examples/manifests", "--policies", dir.path().to_str().expect("utf-8")],
        "",
        "policy.yaml: ValidatingAdmissionPolicy 'p': spec.validations[0].expression at line 1, column 41",
    );
}

#[test]
fn other_bad_inputs_are_exit_2_never_a_panic() {
    bad_input(
        &["dry-run", "-f", "-"],
        "[1, 2]",
        "<stdin>: document 1, item 1 (line 1): not an object",
    );
    bad_input(
        &["dry-run", "-f", "-"],
        "apiVersion: v1\nkind: Pod\nmetadata: {namespace: x}\n",
        "neither `metadata.name` nor `metadata.generateName` is set",
    );
    bad_input(
        &["dry-run", "-f", "-"],
        r#"{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{"uid":"u"}}"#,
        "not an AdmissionReview nodescope can read",
    );
    bad_input(
        &["dry-run", "-f", "-", "--operation", "UPDATE"],
        "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: a}\n",
        "--operation UPDATE: no old version of ConfigMap/default/a in --old",
    );
    bad_input(&["dry-run", "-f", "-", "-f", "-"], "", "only once");
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
    assert!(stderr(&output).starts_with("nodescope: internal error: "));
}

// ---- nodescope test ------------------------------------------------------

#[test]
fn the_bundle_suites_and_the_example_resources_suite_pass() {
    let output = nodescope(&["test", "policies/tests", "examples/tests"]);
    assert_exit(&output, 0);
    let text = stdout(&output);
    assert!(text.trim_end().ends_with(" passed, 0 failed"), "{text}");
    assert!(
        text.contains("PASS  node-exporter-resources/node-b-1 is capped"),
        "{text}"
    );
}

#[test]
fn expected_resources_that_differ_fail_the_case() {
    let dir = suite(
        r#"
recommendations: [STORE]
cases:
- name: wrong resources
  object: DAEMONSET
  nodes: [node-a-1]
  expect:
    result: allow
    resources:
      node-exporter: {requests: {cpu: 1, memory: 256Mi}, limits: {cpu: 367m, memory: 256Mi}}
"#
        .replace(
            "STORE",
            &root().join("examples/store").display().to_string(),
        )
        .replace(
            "DAEMONSET",
            &root()
                .join("examples/manifests/node-exporter.yaml")
                .display()
                .to_string(),
        )
        .as_str(),
    );
    let output = nodescope(&["test", dir.path().to_str().expect("utf-8")]);
    assert_exit(&output, 1);
    assert!(
        stdout(&output).contains(r#"container "node-exporter" requests: expected {"cpu": "1", "memory": "256Mi"}, got {"cpu": "150m", "memory": "256Mi"}"#),
        "{}",
        stdout(&output)
    );
}

fn suite(text: &str) -> tempfile::TempDir {
    let dir = tempfile::tempdir().expect("tempdir");
    std::fs::write(dir.path().join("suite.yaml"), text).expect("written");
    dir
}

const TWO_CASES: &str = r#"
name: demo
cases:
- name: a bad scope is denied
  object:
    apiVersion: autoscaling.k8s.io/v1
    kind: VerticalPodAutoscaler
    metadata: {name: v, namespace: ns}
    spec: {scope: cluster}
  expect:
    result: deny
    message: 'spec\.scope must be absent, "" or "node", not "cluster"'
- name: this expectation is wrong
  object:
    apiVersion: autoscaling.k8s.io/v1
    kind: VerticalPodAutoscaler
    metadata: {name: v, namespace: ns}
    spec: {scope: cluster}
  expect: {result: allow}
"#;

#[test]
fn a_failing_case_is_reported_and_exits_1_and_run_selects_cases() {
    let dir = suite(TWO_CASES);
    let path = dir.path().to_str().expect("utf-8");
    let output = nodescope(&["test", path]);
    assert_exit(&output, 1);
    let text = stdout(&output);
    assert!(
        text.contains("PASS  demo/a bad scope is denied\n"),
        "{text}"
    );
    assert!(
        text.contains("FAIL  demo/this expectation is wrong: VerticalPodAutoscaler/ns/v: expected allow, got deny: "),
        "{text}"
    );
    assert!(text.ends_with("1 passed, 1 failed\n"), "{text}");

    let selected = nodescope(&["test", path, "--run", "bad scope"]);
    assert_exit(&selected, 0);
    assert!(stdout(&selected).ends_with("1 passed, 0 failed\n"));

    let junit = nodescope(&["test", path, "-o", "junit"]);
    assert_exit(&junit, 1);
    let xml = stdout(&junit);
    assert!(
        xml.contains(r#"<testsuite name="demo" tests="2" failures="1">"#),
        "{xml}"
    );
    assert!(xml.contains(r#"<testcase classname="demo" name="a bad scope is denied"/>"#));
}

#[test]
fn a_malformed_suite_is_exit_2() {
    let dir = suite("cases:\n- name: x\n  objekt: {}\n  expect: {result: allow}\n");
    let output = nodescope(&["test", dir.path().to_str().expect("utf-8")]);
    assert_exit(&output, 2);
    assert!(
        stderr(&output).contains("unknown field `objekt`"),
        "{}",
        stderr(&output)
    );
}
