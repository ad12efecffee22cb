//! `nodescope test`: the bundle's suites pass, failures exit 1, and a run
//! that would test nothing, or a suite that cannot be read, exits 2 with
//! one exact sentence.

use super::*;

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
    spec: {scope: node pool}
  expect:
    result: deny
    message: 'spec\.scope must be absent, "", "node" or a node label key .*, not "node pool"$'
- name: this expectation is wrong
  object:
    apiVersion: autoscaling.k8s.io/v1
    kind: VerticalPodAutoscaler
    metadata: {name: v, namespace: ns}
    spec: {scope: node pool}
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
fn a_malformed_suite_is_exit_2_naming_the_field_and_the_line() {
    let dir = suite("cases:\n- name: x\n  objekt: {}\n  expect: {result: allow}\n");
    let path = dir.path().join("suite.yaml");
    let output = nodescope(&["test", path.to_str().expect("utf-8")]);
    fails_with(
        &output,
        &format!(
            "{}: cases[0]: unknown field `objekt`, expected one of name, operation, subResource, object, objects, oldObject, params, recommendations, user, nodes, expect at line 3, column 3",
            path.display()
        ),
    );
    let dir = suite("cases:\n- name:\n  object: {}\n  expect: {result: allow}\n");
    let path = dir.path().join("suite.yaml");
    let output = nodescope(&["test", path.to_str().expect("utf-8")]);
    fails_with(
        &output,
        &format!(
            "{}: cases[0].name: a value is required here at line 2, column 7",
            path.display()
        ),
    );
}

#[test]
fn no_suite_at_all_is_exit_2_not_zero_passed() {
    let empty = tempfile::tempdir().expect("tempdir");
    let path = empty.path().to_str().expect("utf-8");
    fails_with(
        &nodescope(&["test", path]),
        &format!("{path}: holds no .yaml, .yml or .json file, so there is no suite to run"),
    );
    let dir = suite("name: nothing\ncases: []\n");
    let path = dir.path().join("suite.yaml");
    fails_with(
        &nodescope(&["test", path.to_str().expect("utf-8")]),
        &format!(
            "{}: `cases` is empty, so the suite checks nothing",
            path.display()
        ),
    );
}

#[test]
fn a_run_filter_that_selects_no_case_is_exit_2_not_zero_passed() {
    let dir = suite(TWO_CASES);
    let output = nodescope(&[
        "test",
        dir.path().to_str().expect("utf-8"),
        "--run",
        "no such case",
    ]);
    fails_with(
        &output,
        r#"--run "no such case": matches none of the 2 cases, so nothing was tested"#,
    );
    let output = nodescope(&["test", dir.path().to_str().expect("utf-8"), "--run", "("]);
    fails_with(
        &output,
        r#"--run "(": not a valid regular expression: unclosed group"#,
    );
}

#[test]
fn a_suite_copied_elsewhere_fails_naming_the_policy_file_it_lacks() {
    let dir = tempfile::tempdir().expect("tempdir");
    let copy = dir.path().join("vpa-scope.yaml");
    std::fs::copy(root().join("policies/tests/vpa-scope.yaml"), &copy).expect("copied");
    // An unrelated YAML file beside it must not be read as policies.
    std::fs::write(dir.path().join("unrelated.yaml"), "not: [valid\n").expect("written");
    let output = nodescope(&["test", copy.to_str().expect("utf-8")]);
    fails_with(
        &output,
        &format!(
            "{}: policies: {}/../vpa-scope.yaml: no such file or directory",
            copy.display(),
            dir.path().display()
        ),
    );
}

#[test]
fn a_suites_paths_are_relative_to_the_suite_file_not_to_the_working_directory() {
    // Run from elsewhere: the bundle's suites still find their policies
    // and params beside them.
    let elsewhere = tempfile::tempdir().expect("tempdir");
    let output = command(&[
        "test",
        root().join("policies/tests").to_str().expect("utf-8"),
    ])
    .current_dir(elsewhere.path())
    .output()
    .expect("the binary runs");
    assert_exit(&output, 0);
    assert!(
        stdout(&output).ends_with("107 passed, 0 failed\n"),
        "{}",
        stdout(&output)
    );
    let dir = suite("cases:\n- name: a\n  object: ../missing.yaml\n  expect: {result: allow}\n");
    let path = dir.path().join("suite.yaml");
    fails_with(
        &nodescope(&["test", path.to_str().expect("utf-8")]),
        &format!(
            "{}: case \"a\": object: {}/../missing.yaml: no such file or directory",
            path.display(),
            dir.path().display()
        ),
    );
}

#[test]
fn a_case_object_of_an_unknown_kind_is_exit_2_naming_the_case_and_the_field() {
    let dir = suite(
        "cases:\n- name: a\n  objects:\n  - {apiVersion: v1, kind: Pod, metadata: {name: a}}\n  - {apiVersion: v1, kind: Pods, metadata: {name: b}}\n  expect: {result: allow}\n",
    );
    let path = dir.path().join("suite.yaml");
    fails_with(
        &nodescope(&["test", path.to_str().expect("utf-8")]),
        &format!(
            r#"{}: case "a": objects[1]: unknown kind "Pods" (apiVersion v1): did you mean "Pod"?"#,
            path.display()
        ),
    );
}
